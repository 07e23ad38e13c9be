//! Local stand-ins for ECR, EKS, the EKS Kubernetes API server and the Lambda Runtime API.
//!
//! Test-only: the Lambda binary never links this crate. Everything listens on loopback, so
//! the function's real production path runs unchanged: DescribeCluster hands out the
//! stand-in API server's `https://127.0.0.1:PORT` and a CA made for this run, the token is
//! checked as EKS checks it, and writes are validated against the Argo CD CRD.

pub mod access;
pub mod argocd;
pub mod aws;
pub mod capabilities;
pub mod chatbot;
pub mod clock;
pub mod cloudformation;
pub mod cloudwatch;
pub mod codecommit;
pub mod cosign;
pub mod defaults;
pub mod deployment;
pub mod events;
pub mod faults;
pub mod fixtures;
pub mod github;
pub mod gitlab;
pub mod imageupdaters;
pub mod kube;
pub mod managed_fields;
pub mod mapping;
pub mod notary;
mod resources;
pub mod runtime;
pub mod schema_rules;
pub mod seed;
pub mod sigv4;
pub mod tls;
pub mod token;
pub mod writes;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::serve::ListenerExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use aws::{AwsState, Image, QueueMessage, Received};
pub use faults::{FaultAction, LoggedRequest, Route, Service, Shared, busy_time};
pub use kube::KubeState;
pub use runtime::{Outcome, RuntimeApi};
pub use token::image_updater_grants;
pub use token::{Grant, Identity};

/// The identity the function runs as in tests: what its Lambda role would sign with.
pub const FUNCTION_ACCESS_KEY: &str = "ASIASTANDINFUNCTION1";
pub const FUNCTION_SECRET_KEY: &str = "standin/secret+key/for/the/function/role==";
pub const FUNCTION_SESSION_TOKEN: &str = "IQoJb3JpZ2luX2Vj//standin/session+token==";
pub const FUNCTION_ROLE_ARN: &str =
    "arn:aws:sts::768157413559:assumed-role/argocd-ecr-updater-role/argocd-ecr-updater";
/// The IAM role behind it: what the function's configuration, access entries and trust
/// policies name.
pub const FUNCTION_IAM_ROLE_ARN: &str = "arn:aws:iam::768157413559:role/argocd-ecr-updater-role";

/// How to set the stand-ins up.
#[derive(Debug, Clone)]
pub struct Options {
    pub account: String,
    pub region: String,
    pub cluster_name: String,
    pub identities: Vec<Identity>,
}

impl Default for Options {
    /// The seed's account and region; the function may get, list and patch in `argocd`.
    fn default() -> Self {
        Self {
            account: "768157413559".into(),
            region: "ap-northeast-2".into(),
            cluster_name: "barun-dev".into(),
            identities: vec![function_identity(shipped_grants("argocd"))],
        }
    }
}

/// The RBAC manifest the project ships, applied in `namespace`: what the function is
/// granted in the stand-in unless a test grants less or more. A test compares the manifest
/// with what the code asks of the API server (`kube::required_access`).
const SHIPPED_RBAC: &str = include_str!("../../../deploy/rbac.yaml");

/// The grants of `deploy/rbac.yaml`'s Role, in `namespace`.
pub fn shipped_grants(namespace: &str) -> Vec<Grant> {
    use serde::Deserialize;
    let mut grants = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(SHIPPED_RBAC) {
        let Ok(document) = serde_json::Value::deserialize(document) else {
            continue;
        };
        if document["kind"] != "Role" {
            continue;
        }
        for rule in document["rules"].as_array().into_iter().flatten() {
            let verbs: Vec<&str> = rule["verbs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .collect();
            for resource in rule["resources"].as_array().into_iter().flatten() {
                if let Some(resource) = resource.as_str() {
                    grants.push(Grant::on(resource, &verbs, namespace));
                }
            }
        }
    }
    grants
}

/// The function's identity with the given RBAC grants.
pub fn function_identity(grants: Vec<Grant>) -> Identity {
    Identity {
        access_key_id: FUNCTION_ACCESS_KEY.into(),
        secret_access_key: FUNCTION_SECRET_KEY.into(),
        session_token: Some(FUNCTION_SESSION_TOKEN.into()),
        arn: FUNCTION_ROLE_ARN.into(),
        groups: vec!["argocd-ecr-updater".into()],
        grants,
    }
}

/// A person at a laptop with a cluster admin's access (`system:masters`) and an AWS role that
/// may read the deployment: what `doctor`, `kubectl get events` and `kubectl describe app`
/// run as against the stand-ins. Every stand-in cluster knows it.
pub const OPERATOR_ACCESS_KEY: &str = "AKIASTANDINOPERATOR1";
pub const OPERATOR_SECRET_KEY: &str = "standin/secret+key/for/the/operator==";
pub const OPERATOR_ARN: &str = "arn:aws:sts::768157413559:assumed-role/platform-admin/operator";

pub fn operator_identity() -> Identity {
    Identity {
        access_key_id: OPERATOR_ACCESS_KEY.into(),
        secret_access_key: OPERATOR_SECRET_KEY.into(),
        session_token: None,
        arn: OPERATOR_ARN.into(),
        groups: vec!["system:masters".into()],
        grants: vec![Grant::on("*", &["*"], "*")],
    }
}

/// `identities` and the operator, as a cluster knows them.
fn with_operator(mut identities: Vec<Identity>) -> Vec<Identity> {
    if !identities
        .iter()
        .any(|i| i.access_key_id == OPERATOR_ACCESS_KEY)
    {
        identities.push(operator_identity());
    }
    identities
}

/// Serves `app` over TLS on every connection `listener` accepts.
async fn serve_tls(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    app: axum::Router,
    shared: Arc<Shared>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        // As kube-apiserver (Go) does on every connection: without it, Nagle and delayed
        // ACKs add tens of milliseconds to some requests and distort figures.
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            // A client that refuses our certificate ends here, as with a real server.
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            shared.count_tls_handshake();
            let service = TowerToHyperService::new(app);
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Serves a Kubernetes API server stand-in over TLS on an ephemeral loopback port, its
/// requests logged to (and faults taken from) `shared`.
async fn serve_kube(
    state: Arc<KubeState>,
    shared: Arc<Shared>,
    acceptor: tokio_rustls::TlsAcceptor,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = kube::router(state).layer(axum::middleware::from_fn_with_state(
        (shared.clone(), Service::Kube),
        faults::intercept,
    ));
    Ok((
        addr,
        tokio::spawn(serve_tls(listener, acceptor, app, shared)),
    ))
}

/// Another cluster's API server: its own CA, token audience (cluster name) and RBAC, and
/// its own request log and faults. Dropping it takes the server down.
pub struct ExtraCluster {
    pub name: String,
    pub kube: Arc<KubeState>,
    pub shared: Arc<Shared>,
    pub addr: SocketAddr,
    pub ca_pem: String,
    task: JoinHandle<()>,
}

impl ExtraCluster {
    pub fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    /// Stores a copy of `namespace/name` from another cluster (the same Application deployed
    /// to both).
    pub fn copy_application(&self, from: &KubeState, namespace: &str, name: &str) {
        let mut app = from
            .get(namespace, name)
            .unwrap_or_else(|| panic!("{namespace}/{name} is not in the source cluster"));
        fixtures::strip_server_fields(&mut app);
        if let Err(e) = self.kube.insert(app) {
            panic!("{namespace}/{name} could not be copied: {e}");
        }
    }
}

impl Drop for ExtraCluster {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The running stand-ins. Dropping this stops them.
pub struct StandIns {
    pub options: Options,
    pub shared: Arc<Shared>,
    pub kube: Arc<KubeState>,
    pub aws: Arc<AwsState>,
    pub runtime: Arc<RuntimeApi>,
    pub github: Arc<github::GitHubState>,
    pub github_addr: SocketAddr,
    /// GitLab projects, keyed by their full path.
    pub gitlab: Arc<github::GitHubState>,
    pub gitlab_addr: SocketAddr,
    pub kube_addr: SocketAddr,
    pub aws_addr: SocketAddr,
    pub runtime_addr: SocketAddr,
    pub ca_pem: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for StandIns {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not listen on loopback: {0}")]
    Listen(#[from] std::io::Error),
    #[error("could not make the cluster CA: {0}")]
    Tls(#[from] rcgen::Error),
    #[error("{0}")]
    Setup(String),
}

impl StandIns {
    /// Starts every stand-in on an ephemeral loopback port.
    pub async fn start(options: Options) -> Result<Self, StartError> {
        let shared = Arc::new(Shared::default());
        let tls = tls::cluster_tls(&["127.0.0.1", "localhost"])?;
        let kube = Arc::new(
            KubeState::new(
                &options.cluster_name,
                with_operator(options.identities.clone()),
                shared.clone(),
            )
            .map_err(StartError::Setup)?,
        );
        let aws = Arc::new(AwsState::new(
            &options.account,
            &options.region,
            &options.cluster_name,
            tls.ca_pem.clone(),
            with_operator(options.identities.clone()),
        ));
        let runtime = Arc::new(RuntimeApi::default());

        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls.server_config));
        let (kube_addr, kube_task) =
            serve_kube(kube.clone(), shared.clone(), acceptor.clone()).await?;
        *faults::lock(&aws.kube_endpoint) = format!("https://127.0.0.1:{}", kube_addr.port());

        let github = Arc::new(github::GitHubState::default());
        let github_listener = TcpListener::bind("127.0.0.1:0").await?;
        let github_addr = github_listener.local_addr()?;
        let github_app =
            github::router(github.clone()).layer(axum::middleware::from_fn_with_state(
                (shared.clone(), Service::GitHub),
                faults::intercept,
            ));
        let github_task = tokio::spawn(serve_tls(
            github_listener,
            acceptor.clone(),
            github_app,
            shared.clone(),
        ));

        let gitlab = Arc::new(github::GitHubState::default());
        let gitlab_listener = TcpListener::bind("127.0.0.1:0").await?;
        let gitlab_addr = gitlab_listener.local_addr()?;
        let gitlab_app =
            gitlab::router(gitlab.clone()).layer(axum::middleware::from_fn_with_state(
                (shared.clone(), Service::GitLab),
                faults::intercept,
            ));
        let gitlab_task = tokio::spawn(serve_tls(
            gitlab_listener,
            acceptor,
            gitlab_app,
            shared.clone(),
        ));

        let aws_listener = TcpListener::bind("127.0.0.1:0").await?;
        let aws_addr = aws_listener.local_addr()?;
        *faults::lock(&aws.endpoint) = format!("http://127.0.0.1:{}", aws_addr.port());
        let aws_app = aws::router(aws.clone()).layer(axum::middleware::from_fn_with_state(
            (shared.clone(), Service::Ecr),
            faults::intercept,
        ));
        let aws_task = tokio::spawn(async move {
            let listener = aws_listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, aws_app).await;
        });

        let runtime_listener = TcpListener::bind("127.0.0.1:0").await?;
        let runtime_addr = runtime_listener.local_addr()?;
        let runtime_app = runtime::router(runtime.clone());
        let runtime_task = tokio::spawn(async move {
            let listener = runtime_listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, runtime_app).await;
        });

        Ok(Self {
            options,
            shared,
            kube,
            aws,
            runtime,
            github,
            github_addr,
            gitlab,
            gitlab_addr,
            kube_addr,
            aws_addr,
            runtime_addr,
            ca_pem: tls.ca_pem,
            tasks: vec![kube_task, aws_task, runtime_task, github_task, gitlab_task],
        })
    }

    /// Starts with the shipped seed: the `invitation` Application and its date-tagged images.
    pub async fn start_seeded() -> Result<Self, StartError> {
        let standins = Self::start(Options::default()).await?;
        seed::load_builtin(&standins).map_err(StartError::Setup)?;
        Ok(standins)
    }

    /// The shipped seed, with the function's RBAC replaced by `grants`: for tests of what it
    /// may and may not do.
    pub async fn start_seeded_with_grants(grants: Vec<Grant>) -> Result<Self, StartError> {
        let options = Options {
            identities: vec![function_identity(grants)],
            ..Options::default()
        };
        let standins = Self::start(options).await?;
        seed::load_builtin(&standins).map_err(StartError::Setup)?;
        Ok(standins)
    }

    /// Starts another cluster's API server, which DescribeCluster then finds in `region`.
    pub async fn add_cluster(
        &self,
        name: &str,
        region: &str,
        identities: Vec<Identity>,
    ) -> Result<ExtraCluster, StartError> {
        let shared = Arc::new(Shared::default());
        let tls = tls::cluster_tls(&["127.0.0.1", "localhost"])?;
        let kube = Arc::new(
            KubeState::new(name, with_operator(identities), shared.clone())
                .map_err(StartError::Setup)?,
        );
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls.server_config));
        let (addr, task) = serve_kube(kube.clone(), shared.clone(), acceptor).await?;
        let cluster = ExtraCluster {
            name: name.to_string(),
            kube,
            shared,
            addr,
            ca_pem: tls.ca_pem,
            task,
        };
        self.aws
            .add_cluster(name, region, &cluster.endpoint(), &cluster.ca_pem);
        Ok(cluster)
    }

    /// Another cluster in the same region, granting the function what the seed cluster does,
    /// holding a copy of the seed Application as it is now.
    pub async fn add_seeded_cluster(&self, name: &str) -> Result<ExtraCluster, StartError> {
        let cluster = self
            .add_cluster(name, &self.options.region, Options::default().identities)
            .await?;
        cluster.copy_application(&self.kube, "argocd", fixtures::SEED_APP);
        Ok(cluster)
    }

    pub fn kube_endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.kube_addr.port())
    }

    /// The GitHub stand-in's API base, for `GITHUB_API_URL` (its CA is `ca_pem`).
    pub fn github_api(&self) -> String {
        format!("https://127.0.0.1:{}", self.github_addr.port())
    }

    /// The GitLab stand-in's API base, for `GITLAB_API_URL`.
    pub fn gitlab_api(&self) -> String {
        format!("https://127.0.0.1:{}/api/v4", self.gitlab_addr.port())
    }

    pub fn aws_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.aws_addr.port())
    }

    /// The environment that points the function (or `cargo lambda watch`) at the stand-ins:
    /// the SDK's service-specific endpoint variables and the function identity's keys.
    pub fn function_env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL_ECR", self.aws_endpoint()),
            ("AWS_ENDPOINT_URL_EKS", self.aws_endpoint()),
            ("AWS_ENDPOINT_URL_SNS", self.aws_endpoint()),
            ("AWS_ENDPOINT_URL_SQS", self.aws_endpoint()),
            ("AWS_ENDPOINT_URL_SECRETS_MANAGER", self.aws_endpoint()),
            ("AWS_ENDPOINT_URL_CODECOMMIT", self.aws_endpoint()),
            ("AWS_REGION", self.options.region.clone()),
            ("AWS_ACCESS_KEY_ID", FUNCTION_ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", FUNCTION_SECRET_KEY.into()),
            ("AWS_SESSION_TOKEN", FUNCTION_SESSION_TOKEN.into()),
            ("CLUSTER_NAME", self.options.cluster_name.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The environment of the operator's laptop: every AWS service at these stand-ins, and
    /// the operator's keys (`OPERATOR_ACCESS_KEY`).
    pub fn operator_env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .function_env()
            .into_iter()
            .filter(|(k, _)| {
                !k.starts_with("AWS_ACCESS_KEY_ID")
                    && k != "AWS_SECRET_ACCESS_KEY"
                    && k != "AWS_SESSION_TOKEN"
            })
            .collect();
        env.extend([
            ("AWS_ENDPOINT_URL".to_string(), self.aws_endpoint()),
            (
                "AWS_ACCESS_KEY_ID".to_string(),
                OPERATOR_ACCESS_KEY.to_string(),
            ),
            (
                "AWS_SECRET_ACCESS_KEY".to_string(),
                OPERATOR_SECRET_KEY.to_string(),
            ),
        ]);
        env
    }

    /// An AWS SDK configuration for the function's identity, pointed at these stand-ins,
    /// with short retry backoffs so fault tests stay quick.
    pub fn sdk_config(&self) -> aws_config::SdkConfig {
        let credentials = aws_credential_types::Credentials::new(
            FUNCTION_ACCESS_KEY,
            FUNCTION_SECRET_KEY,
            Some(FUNCTION_SESSION_TOKEN.to_string()),
            None,
            "standins",
        );
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(self.options.region.clone()))
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
            )
            .endpoint_url(self.aws_endpoint())
            .retry_config(
                aws_config::retry::RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(std::time::Duration::from_millis(10)),
            )
            .build()
    }

    /// Everything the compiled function needs to run as Lambda runs it against these
    /// stand-ins: `function_env` plus the Runtime API and Lambda's own variables, and
    /// nothing from the machine (no profile, no instance metadata).
    pub fn lambda_env(&self) -> Vec<(String, String)> {
        let mut env = self.function_env();
        env.extend(
            [
                ("AWS_LAMBDA_RUNTIME_API", self.runtime_api()),
                ("AWS_LAMBDA_FUNCTION_NAME", "argocd-ecr-updater".into()),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".into()),
                ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
                ("AWS_CONFIG_FILE", "/nonexistent/config".into()),
                (
                    "AWS_SHARED_CREDENTIALS_FILE",
                    "/nonexistent/credentials".into(),
                ),
                ("AWS_EC2_METADATA_DISABLED", "true".into()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        env
    }

    /// The Runtime API address, as `AWS_LAMBDA_RUNTIME_API` wants it.
    pub fn runtime_api(&self) -> String {
        format!("127.0.0.1:{}", self.runtime_addr.port())
    }
}
