//! Helpers shared by the end-to-end tests: clients of the real code, pointed at stand-ins.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use argocd_ecr_updater::config::{ClusterAccess, KubeTimeouts};
use argocd_ecr_updater::eks_auth::{IamTokenSource, SystemClock};
use argocd_ecr_updater::kube::KubeClient;
use argocd_ecr_updater_standins::{
    FUNCTION_ACCESS_KEY, FUNCTION_SECRET_KEY, FUNCTION_SESSION_TOKEN, StandIns,
};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;

pub fn function_credentials() -> Credentials {
    Credentials::new(
        FUNCTION_ACCESS_KEY,
        FUNCTION_SECRET_KEY,
        Some(FUNCTION_SESSION_TOKEN.to_string()),
        None,
        "tests",
    )
}

pub fn token_source(standins: &StandIns) -> Arc<IamTokenSource> {
    Arc::new(IamTokenSource::new(
        standins.options.cluster_name.clone(),
        standins.options.region.clone(),
        SharedCredentialsProvider::new(function_credentials()),
        Arc::new(SystemClock),
    ))
}

pub const TIMEOUTS: KubeTimeouts = KubeTimeouts {
    connect: Duration::from_secs(2),
    request: Duration::from_secs(3),
};

pub fn kube_client(standins: &StandIns) -> KubeClient {
    let access = ClusterAccess {
        endpoint: standins.kube_endpoint(),
        ca_pem: standins.ca_pem.clone().into_bytes(),
    };
    KubeClient::new(&access, token_source(standins), TIMEOUTS).unwrap()
}

/// The real handler, configured as the function would be with `vars` set, against stand-ins.
pub fn handler(standins: &StandIns, vars: &[(&str, &str)]) -> argocd_ecr_updater::handler::Handler {
    let mut map: std::collections::HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.entry("CLUSTER_NAME".into())
        .or_insert_with(|| standins.options.cluster_name.clone());
    let config = argocd_ecr_updater::config::Config::from_lookup(|k| map.get(k).cloned()).unwrap();
    argocd_ecr_updater::handler::Handler::from_sdk(
        config,
        &standins.sdk_config(),
        Arc::new(SystemClock),
    )
    .unwrap()
}

/// The repository's root: these helpers serve the root package's tests and the CLI's
/// (`cli/tests`), whose manifest directory is one below it.
pub fn repository_root() -> std::path::PathBuf {
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("events").is_dir())
        .unwrap_or(package)
        .to_path_buf()
}

/// A sample event from `events/`.
pub fn event(name: &str) -> serde_json::Value {
    let path = repository_root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The Helm parameter `name` of `namespace/app` as the stand-in stores it now.
pub fn helm_parameter(
    standins: &StandIns,
    namespace: &str,
    app: &str,
    name: &str,
) -> Option<String> {
    standins.kube.get(namespace, app)?["spec"]["source"]["helm"]["parameters"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["value"]
        .as_str()
        .map(str::to_string)
}

/// The compiled function binary, running the way Lambda runs it: polling the Runtime API
/// stand-in, configured only through environment variables. Killed on drop.
pub struct LambdaProcess {
    pub child: std::process::Child,
}

impl Drop for LambdaProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn spawn_lambda(binary: &str, env: &[(String, String)]) -> LambdaProcess {
    let child = std::process::Command::new(binary)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the function binary starts");
    LambdaProcess { child }
}

/// The seed Application's `image.tag` as the stand-in stores it now.
pub fn seed_tag(standins: &StandIns) -> Option<String> {
    helm_parameter(standins, "argocd", "aws-pipeline-test", "image.tag")
}

/// Asserts a decision's action and a part of its reason, showing the reason on failure.
pub fn expect_decision(
    entry: &argocd_ecr_updater::report::Entry,
    action: argocd_ecr_updater::report::Action,
    reason_part: &str,
) {
    assert_eq!(entry.action, action, "{}: {}", entry.name, entry.reason);
    assert!(
        entry.reason.contains(reason_part),
        "{}: `{}` lacks `{reason_part}`",
        entry.name,
        entry.reason
    );
}
