//! Helpers shared by the end-to-end tests: clients of the real code, pointed at stand-ins.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use argocd_ecr_updater::eks_auth::{ClusterAccess, IamTokenSource, SystemClock};
use argocd_ecr_updater::kube::{KubeClient, KubeTimeouts};
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

/// The SDK configuration a function would have, pointed at the stand-ins.
pub fn sdk_config(standins: &StandIns) -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(standins.options.region.clone()))
        .credentials_provider(SharedCredentialsProvider::new(function_credentials()))
        .endpoint_url(standins.aws_endpoint())
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(3).with_initial_backoff(Duration::from_millis(10)))
        .build()
}

/// The real handler, configured as the function would be with `vars` set, against stand-ins.
pub fn handler(standins: &StandIns, vars: &[(&str, &str)]) -> argocd_ecr_updater::handler::Handler {
    let mut map: std::collections::HashMap<String, String> =
        vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    map.entry("CLUSTER_NAME".into()).or_insert_with(|| standins.options.cluster_name.clone());
    let config = argocd_ecr_updater::config::Config::from_lookup(|k| map.get(k).cloned()).unwrap();
    let sdk = sdk_config(standins);
    argocd_ecr_updater::handler::Handler::new(
        config,
        standins.options.region.clone(),
        aws_sdk_ecr::Client::new(&sdk),
        aws_sdk_eks::Client::new(&sdk),
        SharedCredentialsProvider::new(function_credentials()),
        Arc::new(SystemClock),
    )
}

/// A sample event from `events/`.
pub fn event(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub const SEED_IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";

/// The Helm parameter `name` of `namespace/app` as the stand-in stores it now.
pub fn helm_parameter(standins: &StandIns, namespace: &str, app: &str, name: &str) -> Option<String> {
    standins.kube.get(namespace, app)?["spec"]["source"]["helm"]["parameters"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["value"]
        .as_str()
        .map(str::to_string)
}
