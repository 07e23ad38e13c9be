//! What every invocation works with, built once per warm container: the [`Context`] of
//! clients and settings, passed by reference to the functions of the pipeline (as
//! kube-rs's controllers pass theirs); and [`Work`], what one invocation adds for the
//! cluster it is writing.

use std::sync::Arc;
use std::time::Instant;

use crate::cluster::connect::{Connection, StartError, region_of};
use crate::cluster::eks_auth::Clock;
use crate::cluster::kube::KubeClient;
use crate::config::Config;
use crate::decision::decide::Mode;
use crate::git::hosts::GitHosts;
use crate::pipeline::error::HandlerError;
use crate::pipeline::facts::RegistryFacts;
use crate::registry::ecr::Ecr;
use crate::registry::notation::TrustStore;
use crate::registry::signatures::Signatures;
use crate::rollout::follow::Follow;
use crate::sweep::queue::ShardQueue;

/// The warm container's clients and settings. Nothing in it changes between invocations
/// but the caches its clients keep.
pub struct Context {
    /// The environment, read once (with the trust roots a secret holds, read at start).
    pub config: Config,
    /// The function's own region: the ECR registries it decides for are in it.
    pub region: String,
    /// ECR, with the function's account (a registry of another account is named as such).
    pub ecr: Ecr,
    /// Every cluster an event is decided against (one unless `CLUSTERS` is set), each with
    /// its own client, token, CA and object cache.
    pub clusters: Vec<Connection>,
    /// Where a sweep of a large fleet sends its shards, and follow-ups and rollout checks
    /// are sent (`SWEEP_QUEUE_URL`).
    pub sweep_queue: Option<ShardQueue>,
    /// Now, for decisions and records; a test's clock stands still.
    pub clock: Arc<dyn Clock>,
    /// Publishes a decided invocation's report (`NOTIFICATION_TOPIC_ARN`).
    pub sns: aws_sdk_sns::Client,
    /// Cosign signatures found in ECR and checked, with their keys read once.
    pub signatures: Signatures,
    /// The Git hosts and their credentials, for Applications written back by commit.
    pub git: GitHosts,
    /// Downloads image configs (their source labels) and signature envelopes from the URLs
    /// ECR hands out.
    pub blobs: crate::http::LazyClient,
    /// The roots a managed signature's Notation chain must lead to (`NOTATION_TRUST_ROOTS`).
    pub notation_trust: Option<TrustStore>,
    /// CloudWatch: the alarms a rollout is verified by.
    pub alarms: crate::rollout::watched::Alarms,
}

/// Matched Applications are read, decided and written this many at a time.
pub(super) const CONCURRENCY: usize = 8;

impl Context {
    /// The context as a cold start makes it: the trust roots a
    /// `NOTATION_TRUST_ROOTS_SECRET_ARN` secret holds read once (they stay for the
    /// container's life, as the variable's would), then [`Context::from_sdk`]. A secret that
    /// cannot be read stops the cold start: a signing-profile gate must not quietly fall back
    /// to ECR's status alone.
    pub async fn start(
        mut config: Config,
        eks_sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        if let Some(arn) = config.notation_trust_roots_secret_arn.clone() {
            let reader = crate::aws::secrets::SecretReader::new(
                aws_sdk_secretsmanager::Client::new(eks_sdk),
            );
            let problem = |problem: String| StartError::TrustRootsSecret {
                arn: arn.clone(),
                problem,
            };
            let text = reader.text(&arn).await.map_err(|e| {
                problem(if e.is_denied() {
                    format!("{e}: the function's role needs secretsmanager:GetSecretValue on it (NotationTrustRootsSecretArn in the template, notation_trust_roots_secret_arn in the Terraform module, grant it)")
                } else if e.is_missing() {
                    format!("{e}: no such secret; create it with the PEM roots (aws secretsmanager create-secret --secret-string file://root.pem) or fix the ARN")
                } else if e.is_transient() {
                    format!("{e}: Lambda starts the function again on the next event")
                } else {
                    format!("{e}: store the PEM root certificates as the secret's text")
                })
            })?;
            let pem = crate::config::trust_roots_from_secret_text(&text)
                .map_err(|crate::failure::Refused(p)| problem(p))?;
            config.notation_trust_roots = Some(pem);
        }
        Self::from_sdk(config, eks_sdk, clock)
    }

    /// Builds the context from the SDK configuration `main` loads once per container.
    pub fn from_sdk(
        config: Config,
        // Also the base of each cluster's EKS client, in that cluster's region.
        eks_sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        let region = region_of(eks_sdk)?;
        let clusters = Connection::each(&config, eks_sdk, clock.clone())?;
        let ecr = aws_sdk_ecr::Client::new(eks_sdk);
        let sns = aws_sdk_sns::Client::new(eks_sdk);
        let sweep_queue = config
            .sweep
            .queue_url
            .clone()
            .map(|url| ShardQueue::new(aws_sdk_sqs::Client::new(eks_sdk), url));
        let secrets = Arc::new(crate::aws::secrets::SecretReader::new(
            aws_sdk_secretsmanager::Client::new(eks_sdk),
        ));
        let signatures = Signatures::new(secrets.clone(), config.timeouts.request);
        let git = GitHosts::new(&config, eks_sdk, &region, secrets);
        let own_account = config.own_account.clone();
        let notation_trust = match &config.notation_trust_roots {
            // The secret's roots are read by `start`; without them the gate would check ECR's
            // status only, while the configuration asks for the signature verified.
            None if config.notation_trust_roots_secret_arn.is_some() => {
                return Err(StartError::TrustRoots(
                    "NOTATION_TRUST_ROOTS_SECRET_ARN is set but its roots were not read: build the handler with Handler::start".into(),
                ));
            }
            None => None,
            Some(pem) => {
                let text = String::from_utf8_lossy(pem);
                let store = TrustStore::from_pem(&text)
                    .map_err(|e| StartError::TrustRoots(e.to_string()))?;
                Some(store)
            }
        };
        Ok(Self {
            alarms: crate::rollout::watched::Alarms::new(aws_sdk_cloudwatch::Client::new(eks_sdk)),
            notation_trust,
            blobs: crate::http::LazyClient::new(None, config.timeouts.request, false),
            signatures,
            git,
            config,
            region,
            ecr: Ecr::new(ecr).with_own_account(own_account),
            clusters,
            sweep_queue,
            clock,
            sns,
        })
    }

    /// What following a write until it is live borrows of the context.
    pub(super) fn follow(&self) -> Follow<'_> {
        Follow {
            config: &self.config,
            clusters: &self.clusters,
            clock: self.clock.as_ref(),
            checks: self
                .sweep_queue
                .as_ref()
                .map(|q| q as &dyn crate::rollout::follow::Checks),
            git: &self.git,
            ecr: &self.ecr,
            blobs: &self.blobs,
            region: &self.region,
            alarms: &self.alarms,
        }
    }

    /// The registry facts of one invocation, each asked once.
    pub(super) fn facts(&self) -> RegistryFacts<'_> {
        RegistryFacts::new(&self.ecr, &self.blobs)
    }
}

/// A cluster's Kubernetes client, made on first use and kept for the warm container's life.
pub(super) async fn kube_of(cluster: &Connection) -> Result<&KubeClient, HandlerError> {
    Ok(cluster.client().await?)
}

/// One invocation's mode, deadline and what it learnt from ECR so far (shared by every
/// cluster: one registry read serves them all), and the cluster being written.
pub(super) struct Work<'a> {
    /// A push (what was pushed) or a reconcile (every candidate).
    pub mode: Mode<'a>,
    /// What this invocation asked ECR so far, each fact once.
    pub facts: &'a RegistryFacts<'a>,
    /// When Lambda will stop the invocation; retries end before it.
    pub deadline: Option<Instant>,
    /// The cluster's Kubernetes client.
    pub kube: &'a KubeClient,
    /// The cluster's name, which a follow-up shard names.
    pub cluster: &'a str,
    /// The soak hop this invocation runs, when it is one (a follow-up shard's mark).
    pub soak_hop: Option<&'a crate::sweep::shard::SoakHop>,
}

impl Work<'_> {
    pub(super) fn event_id(&self) -> &str {
        match self.mode {
            Mode::Push(push) => &push.id,
            Mode::Reconcile => "",
        }
    }

    /// Where a write landed, for following it.
    pub(super) fn on_cluster(&self) -> crate::rollout::follow::OnCluster<'_> {
        crate::rollout::follow::OnCluster {
            kube: self.kube,
            cluster: self.cluster,
            deadline: self.deadline,
        }
    }
}
