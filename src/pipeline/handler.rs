//! The handler: one invocation, from event to report.
//!
//! Parse the event and dispatch by its kind; for each cluster (a [`Connection`]), list
//! Applications metadata-only per namespace, and for each that the event concerns: read it,
//! fetch the registry facts its strategies ask for, let [`crate::decision::decide`] decide,
//! hand the write plan to the write-back (the patch, or [`crate::git::hosts::GitHosts`] and
//! its commit), report. Every target is finished before the invocation fails for the ones a
//! retry can fix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cluster::connect::{ConnectError, Connection, StartError, region_of};
use crate::cluster::eks_auth::{Clock, ClusterError};
use crate::cluster::kube::{KubeClient, KubeError};
use crate::cluster::objects::Objects;
use crate::config::Config;
use crate::decision::decide::{self, Mode};
use crate::event::{self, EventError, Invocation};
use crate::git::hosts::GitHosts;
use crate::pipeline::announce;
use crate::pipeline::facts::RegistryFacts;
use crate::pipeline::listing::{self, Concerned, Listed};
use crate::registry::ecr::Ecr;
use crate::report::entries;
use crate::report::{ClusterFailure, InvocationKind, Report};

#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Event(#[from] EventError),
    #[error("cannot reach the cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("cannot list Applications: {0}")]
    List(KubeError),
    #[error("{summary}")]
    Targets {
        summary: String,
        report: Box<Report>,
    },
}

impl From<ConnectError> for HandlerError {
    fn from(error: ConnectError) -> Self {
        match error {
            ConnectError::Cluster(e) => Self::Cluster(e),
            ConnectError::Client(e) => Self::List(e),
        }
    }
}

impl HandlerError {
    /// Lambda's `errorType`: says at a glance in the dead-letter queue whether a retry helps.
    pub fn error_type(&self) -> &'static str {
        match self {
            Self::Event(_) => "Permanent.MalformedEvent",
            Self::Cluster(e) if !e.is_retryable() => "Permanent.ClusterConfiguration",
            Self::Cluster(_) => "Retryable.Cluster",
            Self::List(e) if !e.is_retryable() => "Permanent.ListApplications",
            Self::List(_) => "Retryable.ListApplications",
            Self::Targets { .. } => "Retryable.TargetsFailed",
        }
    }
}

/// Everything an invocation needs, built once per warm container.
pub struct Handler {
    pub(super) config: Config,
    pub(super) region: String,
    pub(super) ecr: Ecr,
    /// Every cluster an event is decided against (one unless `CLUSTERS` is set), each with
    /// its own client, token, CA and object cache.
    pub(super) clusters: Vec<Connection>,
    /// Where a sweep of a large fleet sends its shards (`SWEEP_QUEUE_URL`).
    pub(super) sweep_queue: Option<crate::sweep::queue::ShardQueue>,
    pub(super) clock: Arc<dyn Clock>,
    sns: aws_sdk_sns::Client,
    pub(super) signatures: crate::registry::signatures::Signatures,
    /// The Git hosts and their credentials, for Applications written back by commit.
    pub(super) git: GitHosts,
    /// Downloads image configs (their source labels) and signature envelopes from the URLs
    /// ECR hands out.
    pub(super) blobs: crate::http::LazyClient,
    /// The roots a managed signature's Notation chain must lead to (`NOTATION_TRUST_ROOTS`).
    pub(super) notation_trust: Option<crate::registry::notation::TrustStore>,
}

/// Matched Applications are read, decided and written this many at a time.
pub(super) const CONCURRENCY: usize = 8;

/// A sweep starts no Application this close to Lambda's deadline: it ends, reported, before
/// Lambda would stop it (a timeout is an invocation error, which Lambda retries into the
/// dead-letter queue meant for lost pushes). One Application takes well under this.
const SWEEP_MARGIN: Duration = Duration::from_secs(10);

/// One invocation's mode, deadline and what it learnt from ECR so far (shared by every
/// cluster: one registry read serves them all), and the cluster being written.
pub(super) struct Work<'a> {
    pub(super) mode: Mode<'a>,
    pub(super) facts: &'a RegistryFacts<'a>,
    pub(super) deadline: Option<Instant>,
    pub(super) kube: &'a KubeClient,
    /// The cluster's name, which a follow-up shard names.
    pub(super) cluster: &'a str,
    /// The soak hop this invocation runs, when it is one (a follow-up shard's mark).
    pub(super) soak_hop: Option<&'a crate::sweep::shard::SoakHop>,
}

impl Work<'_> {
    pub(super) fn event_id(&self) -> &str {
        match self.mode {
            Mode::Push(push) => &push.id,
            Mode::Reconcile => "",
        }
    }
}

impl Handler {
    /// The handler as a cold start makes it: the trust roots a `NOTATION_TRUST_ROOTS_SECRET_ARN`
    /// secret holds read once (they stay for the container's life, as the variable's would),
    /// then [`Handler::from_sdk`]. A secret that cannot be read stops the cold start: a
    /// signing-profile gate must not quietly fall back to ECR's status alone.
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

    /// Builds the handler from the SDK configuration `main` loads once per container.
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
        let sweep_queue = config.sweep.queue_url.clone().map(|url| {
            crate::sweep::queue::ShardQueue::new(aws_sdk_sqs::Client::new(eks_sdk), url)
        });
        let secrets = Arc::new(crate::aws::secrets::SecretReader::new(
            aws_sdk_secretsmanager::Client::new(eks_sdk),
        ));
        let signatures =
            crate::registry::signatures::Signatures::new(secrets.clone(), config.timeouts.request);
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
                let store = crate::registry::notation::TrustStore::from_pem(&text)
                    .map_err(|e| StartError::TrustRoots(e.to_string()))?;
                Some(store)
            }
        };
        Ok(Self {
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

    /// A cluster's Kubernetes client, made on first use and kept for the warm container's
    /// life.
    pub(super) async fn kube_of<'c>(
        &self,
        cluster: &'c Connection,
    ) -> Result<&'c KubeClient, HandlerError> {
        Ok(cluster.client().await?)
    }

    /// Handles one invocation. `deadline` is when Lambda will stop us.
    pub async fn handle(
        &self,
        event: &Value,
        deadline: Option<Instant>,
    ) -> Result<Report, HandlerError> {
        let ecr_calls_before = self.ecr.calls();
        let intake = event::Intake {
            sweep_queue_arn: self.config.sweep.queue_arn.as_deref(),
        };
        let mut report = match event::parse(event, &intake)? {
            Invocation::Skip { id, reason } => {
                let mut report = Report::new(InvocationKind::Skip, &id, self.config.dry_run);
                report.skipped = Some(reason);
                return Ok(logged(report));
            }
            Invocation::Push(push) => {
                let mut report = Report::new(InvocationKind::Push, &push.id, self.config.dry_run);
                report.image = Some(push.image());
                report.tag = Some(push.tag.clone());
                if let Some(reason) = decide::app::elsewhere(&push, &self.region) {
                    report.skipped = Some(reason);
                    return Ok(logged(report));
                }
                self.run_clusters(&mut report, Mode::Push(&push), deadline)
                    .await?;
                report
            }
            Invocation::Scan(pushes) => {
                let Some(first) = pushes.first() else {
                    return Ok(Report::new(InvocationKind::Scan, "", self.config.dry_run));
                };
                let mut report = Report::new(InvocationKind::Scan, &first.id, self.config.dry_run);
                report.image = Some(first.image());
                let tags: Vec<&str> = pushes.iter().map(|p| p.tag.as_str()).collect();
                report.tag = Some(tags.join(","));
                if let Some(reason) = decide::app::elsewhere(first, &self.region) {
                    report.skipped = Some(reason);
                    return Ok(logged(report));
                }
                // One decision per tag of the scanned image, as if each were pushed now.
                for push in &pushes {
                    self.run_clusters(&mut report, Mode::Push(push), deadline)
                        .await?;
                }
                report
            }
            Invocation::Reconcile { id } => {
                let mut report = Report::new(InvocationKind::Reconcile, &id, self.config.dry_run);
                let swept = match &self.sweep_queue {
                    Some(queue) => self.sweep(&mut report, queue, deadline).await,
                    None => {
                        self.run_clusters(&mut report, Mode::Reconcile, deadline)
                            .await
                    }
                };
                if let Err(error) = swept {
                    report.failure = Some(format!("{}: {error}", error.error_type()));
                }
                report
            }
            Invocation::Shards(records) => {
                let mut report = Report::new(InvocationKind::Shard, "", self.config.dry_run);
                let direct = records.iter().any(|r| r.message_id.is_none());
                self.run_shards(&mut report, &records, deadline).await;
                report.stats.ecr_calls = self.ecr.calls() - ecr_calls_before;
                self.send_out(&mut report).await;
                // A shard from the queue is reported failed by message id and delivered
                // again; one sent directly (a redrive) fails the invocation instead.
                return match report.failure.clone() {
                    Some(summary) if direct => Err(HandlerError::Targets {
                        summary,
                        report: Box::new(report),
                    }),
                    Some(failure) => {
                        tracing::error!(
                            failure,
                            failed_messages = report.failed_messages.len(),
                            "shards failed; SQS delivers them again, and after the queue's receive limit parks them in the dead-letter queue"
                        );
                        Ok(report)
                    }
                    None => Ok(report),
                };
            }
        };
        report.stats.ecr_calls = self.ecr.calls() - ecr_calls_before;
        if report.mode == InvocationKind::Reconcile && report.failure.is_none() {
            report.failure = report.failure_summary();
        }
        self.send_out(&mut report).await;
        if let Some(failure) = report.failure.as_deref() {
            tracing::error!(
                failure,
                "the reconcile sweep failed; the next scheduled sweep retries it (not Lambda, so the dead-letter queue holds only events that would be lost)"
            );
            return Ok(report);
        }
        match report.failure_summary() {
            Some(summary) => Err(HandlerError::Targets {
                summary,
                report: Box::new(report),
            }),
            None => Ok(report),
        }
    }

    /// How a decided invocation's report leaves: redacted, logged, and published to SNS
    /// where a topic is set (the report itself says whether it is worth a message).
    async fn send_out(&self, report: &mut Report) {
        let report = logged_in_place(report);
        if let Some(topic) = &self.config.notification_topic_arn {
            announce::publish_report(&self.sns, topic, report).await;
        }
    }

    /// Decides the event against every cluster. With one cluster, a cluster-wide failure is
    /// the invocation's error. Several run concurrently, so the
    /// latency is the slowest one's; a cluster that fails is reported by name and fails the
    /// invocation retryably once the others are written (a retry finds them unchanged).
    async fn run_clusters(
        &self,
        report: &mut Report,
        mode: Mode<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let facts = RegistryFacts::new(&self.ecr, &self.blobs);
        if let [cluster] = self.clusters.as_slice() {
            return self.run(report, cluster, mode, &facts, deadline).await;
        }
        let (kind, event_id, dry_run) = (report.mode, report.event_id.clone(), report.dry_run);
        let runs = self.clusters.iter().map(|cluster| {
            let (facts, event_id) = (&facts, event_id.as_str());
            async move {
                let mut part = Report::new(kind, event_id, dry_run);
                let result = self.run(&mut part, cluster, mode, facts, deadline).await;
                (cluster.name(), part, result)
            }
        });
        for (name, part, result) in futures_util::future::join_all(runs).await {
            let failure = result.err().map(|e| cluster_failure(name, &e));
            report.add_cluster(name, part, failure);
        }
        Ok(())
    }

    /// Lists every namespace (its ImageUpdater objects, then its Applications metadata-only),
    /// reads, decides and writes the Applications the invocation concerns, then writes the
    /// status of the objects that configured them.
    async fn run(
        &self,
        report: &mut Report,
        cluster: &Connection,
        mode: Mode<'_>,
        facts: &RegistryFacts<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let kube = self.kube_of(cluster).await?;
        let work = &Work {
            mode,
            facts,
            deadline,
            kube,
            cluster: cluster.name(),
            soak_hop: None,
        };
        // The listing sends each Application that concerns the invocation as soon as its
        // page is parsed; they are read, decided and written while later pages are listed.
        let (found, arrivals) = tokio::sync::mpsc::unbounded_channel::<listing::Found>();
        let listed = listing::concerned(
            kube,
            cluster.config(),
            cluster.objects(),
            work.mode,
            work.deadline,
            &mut report.stats,
            found,
        );
        let arrivals = futures_util::stream::unfold(arrivals, |mut arrivals| async move {
            let found = arrivals.recv().await?;
            Some((found.concerned(), arrivals))
        });
        let kind = (report.mode, report.event_id.clone(), report.dry_run);
        let processed = self.process_all(&kind, arrivals, work, CONCURRENCY);
        let (listed, outcomes) = futures_util::future::join(listed, processed).await;
        self.finish(report, cluster, kube, listed, outcomes).await
    }

    /// Reads, decides and writes each Application `concurrency` at a time, in the order
    /// given; in a sweep, none is started in the last [`SWEEP_MARGIN`] before the deadline.
    pub(super) async fn process_all(
        &self,
        (mode, event_id, dry_run): &(InvocationKind, String, bool),
        found: impl futures_util::Stream<Item = (Concerned, Objects)>,
        work: &Work<'_>,
        concurrency: usize,
    ) -> Vec<Report> {
        let (mode, event_id, dry_run) = (*mode, event_id.as_str(), *dry_run);
        found
            .map(|(concerned, objects)| async move {
                let mut outcome = Report::new(mode, event_id, dry_run);
                let out_of_time = matches!(work.mode, Mode::Reconcile)
                    && work.deadline.is_some_and(|d| {
                        d.saturating_duration_since(Instant::now()) < SWEEP_MARGIN
                    });
                if out_of_time {
                    let (namespace, name) = concerned.names();
                    outcome.entries.push(entries::not_reached(namespace, name));
                } else {
                    let concerns = concerned.concerns();
                    let read = match concerns.images {
                        true => self.process(&concerned, &objects, work, &mut outcome).await,
                        false => None,
                    };
                    // By name, the image path's read tells whether it has charts at all.
                    let unread = !concerns.images;
                    if concerns.charts && (read.is_some() || unread) {
                        let (namespace, name) = concerned.names();
                        self.process_charts(namespace, name, read, &objects, work, &mut outcome)
                            .await;
                    }
                }
                outcome
            })
            .buffered(concurrency.max(1))
            .collect::<Vec<Report>>()
            .await
    }

    /// What the listing could not list, and what was done, into the report; then the
    /// status of the ImageUpdater objects that configured the Applications.
    pub(super) async fn finish(
        &self,
        report: &mut Report,
        cluster: &Connection,
        kube: &KubeClient,
        listed: Listed,
        outcomes: Vec<Report>,
    ) -> Result<(), HandlerError> {
        let Listed {
            matched,
            mut unlisted,
            tally,
            scopes,
        } = listed;
        // Nothing listed anywhere and nothing written: the invocation's own failure. Once
        // something was written, the failure is an entry beside what was, and still fails
        // the invocation retryably (a retry finds the written Applications unchanged).
        if unlisted.len() == scopes
            && matched == 0
            && let Some((_, _, error)) = unlisted.pop()
        {
            return Err(HandlerError::List(error));
        }
        for (namespace, listing, e) in unlisted {
            let entry = entries::unlisted(&namespace, listing, &e.to_string(), e.is_retryable());
            report.entries.push(entry);
        }
        report.stats.applications_matched += matched;
        for outcome in outcomes {
            report.entries.extend(outcome.entries);
            report.stats.add(&outcome.stats);
        }
        if !self.config.dry_run {
            let now = OffsetDateTime::from(self.clock.now())
                .format(&Rfc3339)
                .unwrap_or_default();
            let requests = &mut report.stats.image_updater_requests;
            tally
                .write_statuses(kube, cluster.objects(), &report.entries, &now, requests)
                .await;
        }
        Ok(())
    }
}

/// A cluster that could not be listed at all, for the report of a multi-cluster event. The
/// invocation fails retryably either way (the other clusters are written, and a retry finds
/// them unchanged); the class says whether waiting can fix it or an operator must.
pub(super) fn cluster_failure(cluster: &str, error: &HandlerError) -> ClusterFailure {
    // Access (an entry, RBAC, a name, a CA) is an operator's to fix; the rest may pass.
    let needs_operator = match error {
        HandlerError::Cluster(e) => !matches!(e, ClusterError::Transient { .. }),
        HandlerError::List(e) => matches!(
            e,
            KubeError::Unauthorized { .. }
                | KubeError::Forbidden { .. }
                | KubeError::ForbiddenOther { .. }
                | KubeError::NotFound { .. }
                | KubeError::Tls(_)
                | KubeError::BadRequest { .. }
        ),
        HandlerError::Event(_) | HandlerError::Targets { .. } => false,
    };
    ClusterFailure {
        message: format!("cluster `{cluster}`: {error}"),
        error_type: error.error_type(),
        needs_operator,
    }
}

/// A report that leaves by the log only (nothing was decided, so nothing is published):
/// redacted, then logged.
fn logged(mut report: Report) -> Report {
    logged_in_place(&mut report);
    report
}

fn logged_in_place(report: &mut Report) -> &mut Report {
    report.redact();
    report.log();
    report
}
