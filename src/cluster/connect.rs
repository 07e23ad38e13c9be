//! Connecting to an EKS cluster, one way for the function, `migrate` and `doctor`: the
//! credentials (the function's own, or a role assumed for the cluster), the endpoint and CA
//! (DescribeCluster, or given), and a Kubernetes client whose bearer token is signed with
//! those credentials. Errors come typed: a role STS refuses, a cluster EKS does not know, a
//! CA that is not one.

use std::sync::Arc;

use aws_credential_types::provider::SharedCredentialsProvider;
use tokio::sync::OnceCell;

use crate::aws::assume_role::AssumedRole;
use crate::aws::aws_error::Cause;
use crate::cluster::eks_auth::{Clock, ClusterError, IamTokenSource, describe_cluster};
use crate::cluster::kube::{KubeClient, KubeError};
use crate::cluster::objects::ObjectCache;
use crate::config::{ClusterAccess, Config, KubeTimeouts};

/// Why no connection can be set up at all: the cold start stops with this.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no AWS region: set AWS_REGION (Lambda sets it)")]
    NoRegion,
    #[error("{}", crate::aws::aws_error::NO_CREDENTIALS)]
    NoCredentials,
    /// `NOTATION_TRUST_ROOTS` decodes, but its certificates are not a trust store.
    #[error("NOTATION_TRUST_ROOTS: {0}")]
    TrustRoots(String),
    /// `NOTATION_TRUST_ROOTS_SECRET_ARN` could not be read at cold start, or holds no roots.
    #[error("NOTATION_TRUST_ROOTS_SECRET_ARN `{arn}`: {problem}")]
    TrustRootsSecret { arn: String, problem: String },
}

/// Why one cluster cannot be reached now.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The endpoint and CA were found but make no client (a CA that parses as no
    /// certificate).
    #[error("{0}")]
    Client(KubeError),
}

/// One cluster and what a warm container keeps for it: its configuration, its EKS client in
/// its region, and, made on first use, its Kubernetes client and its ImageUpdater objects.
pub struct Connection {
    /// The configuration as it applies to this cluster ([`Config::for_cluster`]).
    config: Config,
    /// In the cluster's region, with the function's own credentials.
    eks: aws_sdk_eks::Client,
    /// The SDK configuration in the cluster's region: what a role for the cluster is
    /// assumed with.
    sdk: aws_config::SdkConfig,
    region: String,
    credentials: SharedCredentialsProvider,
    clock: Arc<dyn Clock>,
    kube: OnceCell<KubeClient>,
    objects: ObjectCache,
}

/// The region the SDK configuration names: the function's own.
pub fn region_of(sdk: &aws_config::SdkConfig) -> Result<String, StartError> {
    sdk.region()
        .map(|r| r.to_string())
        .ok_or(StartError::NoRegion)
}

impl Connection {
    /// One connection per cluster of `config` (one unless `CLUSTERS` is set), none made yet.
    pub fn each(
        config: &Config,
        sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Vec<Self>, StartError> {
        let region = region_of(sdk)?;
        let credentials = sdk
            .credentials_provider()
            .ok_or(StartError::NoCredentials)?;
        // Assuming a role needs a clock; `aws_config::load` gives one, a hand-built
        // configuration may not.
        let sdk = match sdk.time_source() {
            Some(_) => sdk.clone(),
            None => sdk
                .to_builder()
                .time_source(aws_smithy_async::time::SharedTimeSource::new(
                    aws_smithy_async::time::SystemTimeSource::new(),
                ))
                .build(),
        };
        Ok(config
            .clusters
            .iter()
            .map(|spec| {
                let region = spec.region.clone().unwrap_or_else(|| region.clone());
                let sdk = sdk
                    .to_builder()
                    .region(aws_config::Region::new(region.clone()))
                    .build();
                Self {
                    config: config.for_cluster(spec),
                    eks: aws_sdk_eks::Client::new(&sdk),
                    sdk,
                    region,
                    credentials: credentials.clone(),
                    clock: clock.clone(),
                    kube: OnceCell::new(),
                    objects: ObjectCache::default(),
                }
            })
            .collect())
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn name(&self) -> &str {
        &self.config.cluster_name
    }

    /// The cluster's ImageUpdater objects as this warm container last read them.
    pub(crate) fn objects(&self) -> &ObjectCache {
        &self.objects
    }

    /// The cluster's Kubernetes client, made on first use and kept for the warm container's
    /// life: its endpoint, CA and token source are the cluster's own.
    pub async fn client(&self) -> Result<&KubeClient, ConnectError> {
        self.kube.get_or_try_init(|| self.connect()).await
    }

    async fn connect(&self) -> Result<KubeClient, ConnectError> {
        let config = &self.config;
        let role = config.clusters.first().and_then(|c| c.role_arn.as_deref());
        let (eks, credentials) = match role {
            None => (self.eks.clone(), self.credentials.clone()),
            // STS is asked when DescribeCluster or a token needs credentials: the EKS client
            // caches them, a token lives 10 minutes.
            Some(role) => {
                let assumed = AssumedRole::new(&self.sdk, role);
                // Asked once here so that a refusal reads as one, not as a DescribeCluster
                // that could not load credentials.
                if let Err(described) = assumed.check().await {
                    let (cluster, role) = (config.cluster_name.clone(), role.to_string());
                    let message = described.to_string();
                    return Err(ConnectError::Cluster(match described.cause {
                        Cause::AccessDenied => ClusterError::RoleRefused {
                            cluster,
                            role,
                            message,
                        },
                        _ => ClusterError::Transient { cluster, message },
                    }));
                }
                let credentials = SharedCredentialsProvider::new(assumed);
                let eks_config = aws_sdk_eks::config::Builder::from(&self.sdk)
                    .credentials_provider(credentials.clone())
                    .build();
                (aws_sdk_eks::Client::from_conf(eks_config), credentials)
            }
        };
        let access = match &config.cluster_override {
            Some(access) => access.clone(),
            None => describe_cluster(&eks, &config.cluster_name).await?,
        };
        client_for(
            &access,
            &config.cluster_name,
            &self.region,
            credentials,
            self.clock.clone(),
            config.timeouts,
        )
        .map_err(ConnectError::Client)
    }
}

/// A Kubernetes client for a cluster whose endpoint and CA are known, authenticated with an
/// EKS token signed with `credentials` in the cluster's region.
pub fn client_for(
    access: &ClusterAccess,
    cluster: &str,
    region: &str,
    credentials: SharedCredentialsProvider,
    clock: Arc<dyn Clock>,
    timeouts: KubeTimeouts,
) -> Result<KubeClient, KubeError> {
    let tokens = Arc::new(IamTokenSource::new(
        cluster.to_string(),
        region.to_string(),
        credentials,
        clock,
    ));
    KubeClient::new(access, tokens, timeouts)
}
