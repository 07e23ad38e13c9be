//! Helpers shared by the end-to-end tests: clients of the real code, pointed at stand-ins.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use argocd_ecr_updater::cluster::eks_auth::{Clock, IamTokenSource, SystemClock};
use argocd_ecr_updater::cluster::kube::KubeClient;
use argocd_ecr_updater::config::{ClusterAccess, KubeTimeouts};
use argocd_ecr_updater_standins::clock::SimClock;
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
/// The real handler, configured with `vars` and pointed at the stand-ins.
fn handler_for(
    standins: &StandIns,
    vars: &[(&str, &str)],
    clock: Arc<dyn Clock>,
) -> argocd_ecr_updater::pipeline::handler::Handler {
    let mut map: std::collections::HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.entry("CLUSTER_NAME".into())
        .or_insert_with(|| standins.options.cluster_name.clone());
    let config = argocd_ecr_updater::config::Config::from_lookup(|k| map.get(k).cloned()).unwrap();
    argocd_ecr_updater::pipeline::handler::Handler::from_sdk(config, &standins.sdk_config(), clock)
        .unwrap()
}

/// The repository's root.
pub fn repository_root() -> std::path::PathBuf {
    argocd_ecr_updater_standins::fixtures::repository_root()
}

/// A sample event from `events/`.
pub fn event(name: &str) -> serde_json::Value {
    argocd_ecr_updater_standins::fixtures::sample_event(name)
}

/// events/scan.json for `tag` at `digest`, claiming `counts` (which the function never reads).
pub fn scan_event(tag: &str, digest: &str, counts: serde_json::Value) -> serde_json::Value {
    let mut scan = event("scan.json");
    scan["detail"]["image-tags"] = serde_json::json!([tag]);
    scan["detail"]["image-digest"] = serde_json::json!(digest);
    scan["detail"]["finding-severity-counts"] = counts;
    scan
}

/// The Helm parameter `name` of `namespace/app` as the stand-in stores it now.
pub fn helm_parameter(
    standins: &StandIns,
    namespace: &str,
    app: &str,
    name: &str,
) -> Option<String> {
    standins.kube.helm_parameter(namespace, app, name)
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

/// The function binary the Lambda tests run: the one built as it ships
/// (`SHIPPED_FUNCTION_BINARY`, which `./scripts/test` builds with `cargo build -p
/// argocd-ecr-updater` alone, so no dev-dependency's feature is on in it), else the test
/// build's own, which may carry features the shipped one lacks (said on stderr; a failure
/// under `CI=true`).
pub fn function_binary() -> String {
    if let Some(path) = std::env::var_os("SHIPPED_FUNCTION_BINARY") {
        let path = std::path::PathBuf::from(path);
        assert!(
            path.is_file(),
            "SHIPPED_FUNCTION_BINARY {} is not a file",
            path.display()
        );
        return path.display().to_string();
    }
    assert!(
        std::env::var("CI").map_or(true, |ci| ci != "true"),
        "SHIPPED_FUNCTION_BINARY is unset: ./scripts/test builds the function as it ships and runs the Lambda tests against it"
    );
    eprintln!(
        "the Lambda tests run the test build of the function (features of dev-dependencies on); ./scripts/test runs them against the function built as it ships"
    );
    // (The CLI's tests share this file; they run no function binary.)
    match option_env!("CARGO_BIN_EXE_argocd-ecr-updater") {
        Some(binary) => binary.to_string(),
        None => panic!("only the function package's tests run its binary"),
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
    standins.kube.seed_tag()
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

/// One end-to-end scenario: the stand-ins, the function's environment, and the real handler
/// run against them. It derefs to the stand-ins, so a test reads and changes them directly.
pub struct Scenario {
    pub standins: StandIns,
    /// Environment variables every run gets (a run's own come after, and win).
    vars: Vec<(String, String)>,
    /// The function's clock: the wall clock, or the test's ([`Scenario::on_clock`]).
    clock: Arc<dyn Clock>,
    /// That clock, when it is the test's.
    test_clock: Option<Arc<SimClock>>,
}

/// The stand-ins' test clock as the function's injected `Clock`: the function and the Argo CD
/// controller stand-in read one time, which only the test moves.
#[derive(Debug)]
pub struct Scripted(pub Arc<SimClock>);

impl Clock for Scripted {
    fn now(&self) -> std::time::SystemTime {
        self.0.now().into()
    }
}

impl std::ops::Deref for Scenario {
    type Target = StandIns;

    fn deref(&self) -> &StandIns {
        &self.standins
    }
}

impl From<StandIns> for Scenario {
    fn from(standins: StandIns) -> Self {
        Self {
            standins,
            vars: Vec::new(),
            clock: Arc::new(SystemClock),
            test_clock: None,
        }
    }
}

impl Scenario {
    /// The README's setup: its Application, repository and images.
    pub async fn seeded() -> Self {
        StandIns::start_seeded().await.unwrap().into()
    }

    /// The README's setup, with the function's role granted only `grants`.
    pub async fn seeded_with_grants(grants: Vec<argocd_ecr_updater_standins::Grant>) -> Self {
        StandIns::start_seeded_with_grants(grants)
            .await
            .unwrap()
            .into()
    }

    /// Empty stand-ins started with `options`.
    pub async fn start(options: argocd_ecr_updater_standins::Options) -> Self {
        StandIns::start(options).await.unwrap().into()
    }

    /// The real handler with the scenario's variables and `vars` (which win).
    pub fn handler(&self, vars: &[(&str, &str)]) -> argocd_ecr_updater::pipeline::handler::Handler {
        let mut all: Vec<(&str, &str)> = self
            .vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        all.extend_from_slice(vars);
        handler_for(&self.standins, &all, self.clock.clone())
    }

    /// The handler as the function's cold start makes it (`Handler::start`, which reads what
    /// the configuration keeps in Secrets Manager), with the scenario's variables and `vars`.
    pub async fn started(
        &self,
        vars: &[(&str, &str)],
    ) -> Result<
        argocd_ecr_updater::pipeline::handler::Handler,
        argocd_ecr_updater::cluster::connect::StartError,
    > {
        let mut map: std::collections::HashMap<String, String> =
            self.vars.iter().cloned().collect();
        map.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        map.entry("CLUSTER_NAME".into())
            .or_insert_with(|| self.standins.options.cluster_name.clone());
        let config =
            argocd_ecr_updater::config::Config::from_lookup(|k| map.get(k).cloned()).unwrap();
        argocd_ecr_updater::pipeline::handler::Handler::start(
            config,
            &self.standins.sdk_config(),
            self.clock.clone(),
        )
        .await
    }

    /// The function runs on `clock` (the test's): its writes, checks and deadlines are
    /// stamped with the time the test sets.
    pub fn on_clock(mut self, clock: Arc<SimClock>) -> Self {
        self.standins.shared.follow_clock(clock.clone());
        self.clock = Arc::new(Scripted(clock.clone()));
        self.test_clock = Some(clock);
        self
    }

    /// The test's clock ([`Scenario::on_clock`]).
    pub fn test_clock(&self) -> Arc<SimClock> {
        self.test_clock
            .clone()
            .expect("the scenario runs on the wall clock")
    }

    /// An environment variable for every run.
    pub fn var(mut self, name: &str, value: &str) -> Self {
        self.vars.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets annotations on an Application as `kubectl annotate` would: Image Updater's by
    /// their short name (`write-back-method`), any other with its prefix.
    pub fn annotate(&self, namespace: &str, name: &str, pairs: &[(&str, &str)]) {
        let mut app = self.kube.get(namespace, name).unwrap();
        for (key, value) in pairs {
            let key = if key.contains('/') {
                key.to_string()
            } else {
                format!(
                    "{}{key}",
                    argocd_ecr_updater::appconfig::annotations::PREFIX
                )
            };
            app["metadata"]["annotations"][key] = serde_json::json!(value);
        }
        argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
        self.kube.insert(app).unwrap();
    }

    /// Removes Image Updater's annotations from an Application, leaving it to be configured
    /// by an ImageUpdater object.
    pub fn strip_image_updater_annotations(&self, namespace: &str, name: &str) {
        self.kube
            .edit(namespace, name, |app| {
                if let Some(map) = app["metadata"]["annotations"].as_object_mut() {
                    map.retain(|k, _| {
                        !k.starts_with(argocd_ecr_updater_standins::fixtures::IMAGE_UPDATER)
                    });
                }
            })
            .unwrap();
    }

    /// The real handler's outcome for `event`, with the scenario's variables and `vars`.
    pub async fn outcome(
        &self,
        vars: &[(&str, &str)],
        event: &serde_json::Value,
    ) -> Result<argocd_ecr_updater::report::Report, argocd_ecr_updater::pipeline::error::HandlerError>
    {
        self.handler(vars).handle(event, None).await
    }

    /// The report of an invocation that must succeed.
    pub async fn report(
        &self,
        vars: &[(&str, &str)],
        event: &serde_json::Value,
    ) -> argocd_ecr_updater::report::Report {
        self.outcome(vars, event).await.unwrap()
    }

    /// The report whether or not some targets failed (the invocation's error carries it).
    pub async fn settled(
        &self,
        vars: &[(&str, &str)],
        event: &serde_json::Value,
    ) -> argocd_ecr_updater::report::Report {
        report_of(self.outcome(vars, event).await)
    }

    /// How many requests of `method` the Kubernetes stand-in answered.
    /// The PATCHes that wrote an Application's spec (an image or chart written), not only
    /// annotations of ours (a soak chain's hop, a rollout check's count).
    pub fn spec_writes(&self) -> usize {
        self.shared.count(|r| {
            r.service == argocd_ecr_updater_standins::Service::Kube
                && r.method == "PATCH"
                && r.body.contains("\"/spec/")
        })
    }

    pub fn kube_requests(&self, method: &str) -> usize {
        self.shared.count(|r| {
            r.service == argocd_ecr_updater_standins::Service::Kube && r.method == method
        })
    }
}

/// The report an invocation produced, also when it failed for some targets.
pub fn report_of(
    outcome: Result<
        argocd_ecr_updater::report::Report,
        argocd_ecr_updater::pipeline::error::HandlerError,
    >,
) -> argocd_ecr_updater::report::Report {
    match outcome {
        Ok(report) => report,
        Err(argocd_ecr_updater::pipeline::error::HandlerError::Targets { report, .. }) => *report,
        Err(e) => panic!("{e}"),
    }
}

/// The report's one entry.
pub fn only(report: &argocd_ecr_updater::report::Report) -> &argocd_ecr_updater::report::Entry {
    assert_eq!(report.entries.len(), 1, "{:#?}", report.entries);
    &report.entries[0]
}

/// The entries of one Application.
pub fn for_app<'r>(
    report: &'r argocd_ecr_updater::report::Report,
    name: &str,
) -> Vec<&'r argocd_ecr_updater::report::Entry> {
    report.entries.iter().filter(|e| e.name == name).collect()
}

/// The one entry of one Application.
pub fn one<'r>(
    report: &'r argocd_ecr_updater::report::Report,
    name: &str,
) -> &'r argocd_ecr_updater::report::Entry {
    let entries = for_app(report, name);
    assert_eq!(entries.len(), 1, "{entries:#?}");
    entries[0]
}
