//! The handler: one invocation, from event to report, as orchestration only.
//!
//! Parse the event, list Applications metadata-only per namespace, and for each that the
//! event concerns: read it, fetch the registry facts its strategies ask for, let
//! [`crate::decide`] decide, hand the write plan to the write-back, report. Every target is
//! finished before the invocation fails for the ones a retry can fix.

use std::sync::Arc;
use std::time::Instant;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use futures_util::StreamExt;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::OnceCell;

use crate::annotations;
use crate::annotations::WriteBack as Method;
use crate::announce;
use crate::codecommit::CodeCommit;
use crate::config::Config;
use crate::decide::{self, AppDecision, Described, ImageCase, ImageOutcome, Mode};
use crate::ecr::Ecr;
use crate::eks_auth::{Clock, ClusterError, IamTokenSource, describe_cluster};
use crate::event::{self, EventError, Invocation};
use crate::facts::{FetchFailure, RegistryFacts};
use crate::gitcreds::GitCredentials;
use crate::githost::GitHost;
use crate::github::{Credentials, GitHub, GitHubRepository};
use crate::gitlab::GitLab;
use crate::gitwrite;
use crate::imageupdater::{self, ImageUpdaterObject, Source};
use crate::kube::{AppMeta, KubeClient, KubeError};
use crate::listing::{self, Listed};
use crate::objects::ObjectCache;
use crate::patch;
use crate::report::{Action, ClusterFailure, Report};
use crate::retry::{backoff, retry_transient};
use crate::writeback::{
    ApplicationPatch, GitCommit, GitOutcome, GitSnapshot, WriteBack, WriteError,
};

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
    config: Config,
    region: String,
    ecr: Ecr,
    /// Every cluster an event is decided against (one unless `CLUSTERS` is set), each with
    /// its own client, token, CA and object cache.
    clusters: Vec<Cluster>,
    credentials: SharedCredentialsProvider,
    clock: Arc<dyn Clock>,
    sns: aws_sdk_sns::Client,
    github: GitHub,
    gitlab: GitLab,
    signatures: crate::signatures::Signatures,
    codecommit: CodeCommit,
    git_credentials: GitCredentials,
    /// One lock per repository: Applications of one invocation that commit to the same
    /// repository take turns, instead of racing each other's `expectedHeadOid`.
    repository_locks:
        std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// One cluster and what the warm container keeps for it.
struct Cluster {
    /// The handler's configuration as it applies to this cluster.
    config: Config,
    /// In the cluster's region, with the function's own credentials.
    eks: aws_sdk_eks::Client,
    /// The SDK configuration in the cluster's region: what a role for the cluster is
    /// assumed with.
    sdk: aws_config::SdkConfig,
    region: String,
    kube: OnceCell<KubeClient>,
    objects: ObjectCache,
}

/// Matched Applications are read, decided and written this many at a time.
const CONCURRENCY: usize = 8;

/// One invocation's mode, deadline and what it learnt from ECR so far (shared by every
/// cluster: one registry read serves them all), and the cluster being written.
struct Work<'a> {
    mode: Mode<'a>,
    facts: &'a RegistryFacts<'a>,
    deadline: Option<Instant>,
    kube: &'a KubeClient,
}

impl Work<'_> {
    fn event_id(&self) -> &str {
        match self.mode {
            Mode::Push(push) => &push.id,
            Mode::Reconcile => "",
        }
    }
}

impl Handler {
    /// Builds the handler from the SDK configuration `main` loads once per container.
    pub fn from_sdk(
        config: Config,
        // Also the base of each cluster's EKS client, in that cluster's region.
        eks_sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let region = eks_sdk
            .region()
            .map(|r| r.to_string())
            .ok_or("no AWS region: set AWS_REGION (Lambda sets it)")?;
        let credentials = eks_sdk
            .credentials_provider()
            .ok_or(crate::aws_error::NO_CREDENTIALS)?;
        let codecommit = CodeCommit::new(eks_sdk.clone(), region.clone());
        let ecr = aws_sdk_ecr::Client::new(eks_sdk);
        let sns = aws_sdk_sns::Client::new(eks_sdk);
        let secrets = aws_sdk_secretsmanager::Client::new(eks_sdk);
        let github = GitHub::new(
            config.git.ca_bundle.as_deref(),
            config.git.github_api_url.clone(),
            config.timeouts.request,
        )?;
        let gitlab = GitLab::new(
            config.git.ca_bundle.as_deref(),
            config.git.gitlab_api_url.clone(),
            config.timeouts.request,
        )?;
        let signatures =
            crate::signatures::Signatures::new(secrets.clone(), config.timeouts.request)?;
        let git_credentials = GitCredentials::new(config.git.clone(), secrets);
        let own_account = config.own_account.clone();
        // Assuming a role needs a clock; `aws_config::load` gives one, a hand-built
        // configuration may not.
        let eks_sdk = match eks_sdk.time_source() {
            Some(_) => eks_sdk.clone(),
            None => eks_sdk
                .to_builder()
                .time_source(aws_smithy_async::time::SharedTimeSource::new(
                    aws_smithy_async::time::SystemTimeSource::new(),
                ))
                .build(),
        };
        let clusters = config
            .clusters
            .iter()
            .map(|spec| {
                let region = spec.region.clone().unwrap_or_else(|| region.clone());
                let sdk = eks_sdk
                    .to_builder()
                    .region(aws_config::Region::new(region.clone()))
                    .build();
                Cluster {
                    config: config.for_cluster(spec),
                    eks: aws_sdk_eks::Client::new(&sdk),
                    sdk,
                    region,
                    kube: OnceCell::new(),
                    objects: ObjectCache::default(),
                }
            })
            .collect();
        Ok(Self {
            github,
            gitlab,
            signatures,
            codecommit,
            git_credentials,
            repository_locks: std::sync::Mutex::new(std::collections::HashMap::new()),
            config,
            region,
            ecr: Ecr::new(ecr).with_own_account(own_account),
            clusters,
            credentials,
            clock,
            sns,
        })
    }

    /// The first cluster's Kubernetes client (the only one unless `CLUSTERS` is set).
    pub async fn kube(&self) -> Result<&KubeClient, HandlerError> {
        match self.clusters.first() {
            Some(cluster) => self.kube_of(cluster).await,
            None => Err(HandlerError::Cluster(ClusterError::NotFound {
                cluster: String::new(),
            })),
        }
    }

    /// A cluster's Kubernetes client, made on first use and kept for the warm container's
    /// life: its endpoint, CA and token source are the cluster's own.
    async fn kube_of<'c>(&self, cluster: &'c Cluster) -> Result<&'c KubeClient, HandlerError> {
        cluster
            .kube
            .get_or_try_init(|| async {
                let config = &cluster.config;
                let role = config.clusters.first().and_then(|c| c.role_arn.as_deref());
                let (eks, credentials) = match role {
                    None => (cluster.eks.clone(), self.credentials.clone()),
                    // STS is asked when DescribeCluster or a token needs credentials: the
                    // EKS client caches them, a token lives 10 minutes.
                    Some(role) => {
                        let credentials = SharedCredentialsProvider::new(
                            crate::assume_role::AssumedRole::new(&cluster.sdk, role),
                        );
                        // Asked once here so that a refusal reads as one, not as a
                        // DescribeCluster that could not load credentials.
                        if let Err(e) = credentials.provide_credentials().await {
                            let message = aws_smithy_types::error::display::DisplayErrorContext(&e)
                                .to_string();
                            let refused = message.contains("AccessDenied")
                                || message.contains("not authorized");
                            let (cluster, role) = (config.cluster_name.clone(), role.to_string());
                            return Err(HandlerError::Cluster(if refused {
                                ClusterError::RoleRefused {
                                    cluster,
                                    role,
                                    message,
                                }
                            } else {
                                ClusterError::Transient { cluster, message }
                            }));
                        }
                        let eks_config = aws_sdk_eks::config::Builder::from(&cluster.sdk)
                            .credentials_provider(credentials.clone())
                            .build();
                        (aws_sdk_eks::Client::from_conf(eks_config), credentials)
                    }
                };
                let access = match &config.cluster_override {
                    Some(access) => access.clone(),
                    None => describe_cluster(&eks, &config.cluster_name).await?,
                };
                let tokens = Arc::new(IamTokenSource::new(
                    config.cluster_name.clone(),
                    cluster.region.clone(),
                    credentials,
                    self.clock.clone(),
                ));
                KubeClient::new(&access, tokens, config.timeouts).map_err(HandlerError::List)
            })
            .await
    }

    /// Handles one invocation. `deadline` is when Lambda will stop us.
    pub async fn handle(
        &self,
        event: &Value,
        deadline: Option<Instant>,
    ) -> Result<Report, HandlerError> {
        let ecr_calls_before = self.ecr.calls();
        let mut report = match event::parse(event)? {
            Invocation::Skip { id, reason } => {
                let mut report = Report::new("skip", &id, self.config.dry_run);
                report.skipped = Some(reason);
                report.redact();
                report.log();
                return Ok(report);
            }
            Invocation::Push(push) => {
                let mut report = Report::new("push", &push.id, self.config.dry_run);
                report.image = Some(push.image());
                report.tag = Some(push.tag.clone());
                if let Some(reason) = decide::app::elsewhere(&push, &self.region) {
                    report.skipped = Some(reason);
                    report.redact();
                    report.log();
                    return Ok(report);
                }
                self.run_clusters(&mut report, Mode::Push(&push), deadline)
                    .await?;
                report
            }
            Invocation::Scan(pushes) => {
                let Some(first) = pushes.first() else {
                    return Ok(Report::new("scan", "", self.config.dry_run));
                };
                let mut report = Report::new("scan", &first.id, self.config.dry_run);
                report.image = Some(first.image());
                let tags: Vec<&str> = pushes.iter().map(|p| p.tag.as_str()).collect();
                report.tag = Some(tags.join(","));
                if let Some(reason) = decide::app::elsewhere(first, &self.region) {
                    report.skipped = Some(reason);
                    report.redact();
                    report.log();
                    return Ok(report);
                }
                // One decision per tag of the scanned image, as if each were pushed now.
                for push in &pushes {
                    self.run_clusters(&mut report, Mode::Push(push), deadline)
                        .await?;
                }
                report
            }
            Invocation::Reconcile { id } => {
                let mut report = Report::new("reconcile", &id, self.config.dry_run);
                self.run_clusters(&mut report, Mode::Reconcile, deadline)
                    .await?;
                report
            }
        };
        report.stats.ecr_calls = self.ecr.calls() - ecr_calls_before;
        report.redact();
        report.log();
        if let Some(topic) = &self.config.notification_topic_arn {
            announce::publish_report(&self.sns, topic, &report).await;
        }
        match report.failure_summary() {
            Some(summary) => Err(HandlerError::Targets {
                summary,
                report: Box::new(report),
            }),
            None => Ok(report),
        }
    }

    /// Decides the event against every cluster. One cluster runs as it always has: a
    /// cluster-wide failure is the invocation's error. Several run concurrently, so the
    /// latency is the slowest one's; a cluster that fails is reported by name and fails the
    /// invocation retryably once the others are written (a retry finds them unchanged).
    async fn run_clusters(
        &self,
        report: &mut Report,
        mode: Mode<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let facts = RegistryFacts::new(&self.ecr);
        if let [cluster] = self.clusters.as_slice() {
            return self.run(report, cluster, mode, &facts, deadline).await;
        }
        let (kind, event_id, dry_run) = (report.mode, report.event_id.clone(), report.dry_run);
        let runs = self.clusters.iter().map(|cluster| {
            let (facts, event_id) = (&facts, event_id.as_str());
            async move {
                let mut part = Report::new(kind, event_id, dry_run);
                let result = self.run(&mut part, cluster, mode, facts, deadline).await;
                (cluster.config.cluster_name.as_str(), part, result)
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
        cluster: &Cluster,
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
        };
        // The listing sends each Application that concerns the invocation as soon as its
        // page is parsed; they are read, decided and written while later pages are listed.
        // Each is independent; `buffered` keeps the report in listing order.
        let (found, arrivals) = tokio::sync::mpsc::unbounded_channel::<listing::Found>();
        let (mode, event_id, dry_run) = (report.mode, report.event_id.as_str(), report.dry_run);
        let listed = listing::concerned(
            kube,
            &cluster.config,
            &cluster.objects,
            work.mode,
            work.deadline,
            &mut report.stats,
            found,
        );
        let processed = futures_util::stream::unfold(arrivals, |mut arrivals| async move {
            arrivals.recv().await.map(|found| (found, arrivals))
        })
        .map(|(meta, objects)| async move {
            let mut outcome = Report::new(mode, event_id, dry_run);
            self.process(kube, &meta, &objects, work, &mut outcome)
                .await;
            outcome
        })
        .buffered(CONCURRENCY)
        .collect::<Vec<Report>>();
        let (
            Listed {
                matched,
                mut unlisted,
                tally,
                scopes,
            },
            outcomes,
        ) = futures_util::future::join(listed, processed).await;
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
            let entry =
                decide::app::unlisted(&namespace, listing, &e.to_string(), e.is_retryable());
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
                .write_statuses(kube, &cluster.objects, &report.entries, &now, requests)
                .await;
        }
        Ok(())
    }

    /// One Application: read, decide, write; re-read and re-decide after a race.
    async fn process(
        &self,
        kube: &KubeClient,
        meta: &AppMeta,
        objects: &[ImageUpdaterObject],
        work: &Work<'_>,
        report: &mut Report,
    ) {
        let (ns, name) = (meta.namespace.as_str(), meta.name.as_str());
        let writer = ApplicationPatch {
            kube,
            deadline: work.deadline,
        };
        let mut last_refused: Option<Value> = None;
        for attempt in 0..=self.config.conflict_retries {
            report.stats.gets += 1;
            let read = retry_transient(work.deadline, || kube.get_application(ns, name));
            // A reconcile's tag lists depend on the configuration the listing already showed,
            // not on the read: asked for while the Application is read, they have arrived
            // when it is decided, one round trip sooner. The cache keeps them (and any error)
            // for the decision, which asks again.
            let (read, ()) = futures_util::future::join(read, async {
                if attempt == 0 && matches!(work.mode, Mode::Reconcile) {
                    self.prefetch_tag_lists(meta, objects, work).await;
                }
            })
            .await;
            let app = match read {
                Ok(app) => app,
                Err(KubeError::NotFound { .. }) => {
                    report.entries.push(decide::app::deleted(ns, name));
                    return;
                }
                Err(e) => {
                    let entry = decide::app::unreadable(ns, name, &e.to_string(), e.is_retryable());
                    report.entries.push(entry);
                    return;
                }
            };
            // The git method reads the file first and decides on the Application as Argo CD
            // renders it with that file; it re-reads Git, not the Application, after a race.
            if let Some(method) = git_method(&app, objects) {
                let Some((race, decided)) = self
                    .attempt_git(kube, &app, &method, objects, work, report)
                    .await
                else {
                    return;
                };
                report.stats.conflicts += 1;
                if attempt == self.config.conflict_retries {
                    let reason = decide::app::kept_changing(attempt + 1, &race);
                    report
                        .entries
                        .extend(decided.refused(Action::Failed, &reason, true));
                    return;
                }
                tokio::time::sleep(backoff(attempt, None)).await;
                continue;
            }
            let Some(decided) = self.decide_app(&app, objects, work).await else {
                report.entries.push(decide::app::not_annotated(ns, name));
                return;
            };
            let Some(plan) = decided.plan.clone() else {
                report.entries.extend(decided.entries);
                return;
            };
            // The write-back's own conditions (an ApplicationSet that would revert a patch),
            // checked in a dry run too, so `plan` says what a real run would do.
            if let Err(refusal) = writer.check(&app, &plan).await {
                let (action, reason, retryable) = refusal.as_entry();
                report
                    .entries
                    .extend(decided.refused(action, &reason, retryable));
                return;
            }
            if self.config.dry_run {
                let entries = decided.entries.into_iter();
                report
                    .entries
                    .extend(entries.map(|e| decide::app::dry_run(e, &plan)));
                return;
            }
            report.stats.patches += 1;
            let (race, guard_failed) = match writer.write(&app, &plan).await {
                Ok(()) => {
                    let now = OffsetDateTime::from(self.clock.now());
                    announce::record_event(kube, &app, &decided.entries, now).await;
                    report.stats.events += 1;
                    report.entries.extend(decided.entries);
                    return;
                }
                Err(WriteError::Race(message)) => (message, true),
                Err(WriteError::Conflict(message)) => (message, false),
                Err(refusal @ WriteError::Declined { .. }) => {
                    let (action, reason, retryable) = refusal.as_entry();
                    report
                        .entries
                        .extend(decided.refused(action, &reason, retryable));
                    return;
                }
                Err(WriteError::Refused(message)) => {
                    report
                        .entries
                        .extend(decided.refused(Action::Failed, &message, false));
                    return;
                }
                Err(WriteError::Failed { message, retryable }) => {
                    report
                        .entries
                        .extend(decided.refused(Action::Failed, &message, retryable));
                    return;
                }
            };
            // The same content refused twice on a fresh read is not a race: the server
            // rejects the content itself. The audit timestamp is left out of the comparison.
            let content = Value::Array(plan.content().into_iter().cloned().collect());
            if guard_failed && last_refused.as_ref() == Some(&content) {
                let reason = decide::app::refused_twice(&race);
                report
                    .entries
                    .extend(decided.refused(Action::Failed, &reason, false));
                return;
            }
            last_refused = guard_failed.then_some(content);
            report.stats.conflicts += 1;
            if attempt == self.config.conflict_retries {
                let reason = decide::app::kept_changing(attempt + 1, &race);
                report
                    .entries
                    .extend(decided.refused(Action::Failed, &reason, true));
                return;
            }
            tokio::time::sleep(backoff(attempt, None)).await;
        }
    }

    /// One git write-back attempt: credentials, read, decide on the Application as Git
    /// renders it, commit, refresh. `Some` when the branch moved under the commit (re-read
    /// and decide again); every other outcome is in the report.
    async fn attempt_git(
        &self,
        kube: &KubeClient,
        app: &Value,
        method: &Method,
        objects: &[ImageUpdaterObject],
        work: &Work<'_>,
        report: &mut Report,
    ) -> Option<(String, AppDecision)> {
        let Method::Git {
            credentials,
            pull_request,
            branch: branch_setting,
            ..
        } = method
        else {
            return None;
        };
        let (ns, name) = decide::app::names(app);
        let labels = annotations::labels_of(app);
        let own = annotations::of(app);
        let source = imageupdater::resolve(objects, ns, name, &labels, &own);
        let config = source.config(&own)?;
        let concerned = concerned_images(&config, work.mode);
        if concerned.is_empty() {
            report.entries.push(decide::app::not_annotated(ns, name));
            return None;
        }
        let images: Vec<&annotations::ImageConfig> = config
            .images
            .iter()
            .filter_map(|i| i.config.as_ref().ok())
            .collect();
        let mut fail = |reason: String, retryable: bool| {
            let entries = every_image(app, &concerned, Action::Failed, &reason, retryable);
            let decided = decide::app::configured_by(AppDecision::skipped(entries), &source);
            report.entries.extend(decided.entries);
        };
        let git = &self.config.git;
        let location =
            match gitwrite::locate(app, method, &git.argocd_namespace, &git.enterprise_hosts) {
                Ok(location) => location,
                Err(reason) => {
                    fail(format!("git write-back: {reason}"), false);
                    return None;
                }
            };
        let host = match self.git_host(&location, credentials, ns, kube).await {
            Ok(host) => host,
            Err(e) => {
                fail(e.message, e.retryable);
                return None;
            }
        };
        let lock = self.repository_lock(&host.name());
        let _turn = lock.lock().await;
        let requests_before = host.requests();
        let target_key = format!(
            "{}|{}|{}",
            location.url,
            branch_setting
                .as_deref()
                .unwrap_or_default()
                .split(':')
                .next()
                .unwrap_or_default(),
            location.key_path
        );
        let snapshot =
            match GitSnapshot::read(host.as_ref(), location, pull_request.is_some()).await {
                Ok(snapshot) => snapshot,
                Err(e) => {
                    report.stats.git_requests += (host.requests() - requests_before) as u32;
                    let (_, reason, retryable) = e.as_entry();
                    fail(reason, retryable);
                    return None;
                }
            };
        let effective = match gitwrite::effective_app(
            app,
            &snapshot.location,
            snapshot.text.as_deref(),
            &images,
        ) {
            Ok(effective) => effective,
            Err(reason) => {
                fail(
                    format!("{reason}: fix the file on branch `{}`", snapshot.branch),
                    false,
                );
                return None;
            }
        };
        let target = snapshot.location.describe(&snapshot.branch, &snapshot.file);
        let Some(decided) = self.decide_app(&effective, objects, work).await else {
            report.entries.push(decide::app::not_annotated(ns, name));
            return None;
        };
        let Some(plan) = decided.plan.clone() else {
            report.entries.extend(decided.entries);
            return None;
        };
        if self.config.dry_run {
            let entries = decided.entries.into_iter().map(|mut e| {
                if e.action == Action::Updated {
                    e.reason = format!("dry run: {} (would commit to {target})", e.reason);
                    e.sources = vec![target.clone()];
                }
                e
            });
            report.entries.extend(entries);
            return None;
        }
        let writer = GitCommit {
            host: host.as_ref(),
            snapshot: &snapshot,
            images,
            pull_request: pull_request.clone(),
            target_key,
            outcome: std::sync::Mutex::new(None),
        };
        let written = writer.write(&effective, &plan).await;
        report.stats.git_requests += (host.requests() - requests_before) as u32;
        match (written, writer.outcome()) {
            (
                Ok(()),
                Some(GitOutcome::Committed {
                    commit,
                    branch,
                    file,
                    pull_request,
                    notes,
                }),
            ) => {
                report.stats.git_commits += 1;
                let record = json!({
                    "repository": snapshot.location.repo.full_name(),
                    "branch": branch,
                    "file": file,
                    "commit": commit.oid,
                    "pullRequest": pull_request,
                });
                let mut notes = notes;
                if let Err(e) = self.request_refresh(kube, app, &plan, &record, work).await {
                    notes.push(format!(
                        "refresh not requested ({e}): Argo CD picks the commit up at its next Git poll"
                    ));
                }
                report.stats.patches += 1;
                let now = OffsetDateTime::from(self.clock.now());
                let done = match &pull_request {
                    Some(url) => format!(
                        "pull request {url} (commit {})",
                        crate::writeback::short(&commit.oid)
                    ),
                    None => format!(
                        "committed {} to {}",
                        crate::writeback::short(&commit.oid),
                        snapshot.location.describe(&branch, &file)
                    ),
                };
                let mut entries = decided.entries;
                for entry in entries.iter_mut().filter(|e| e.action == Action::Updated) {
                    entry.reason = format!("{}; {done}", entry.reason);
                    for note in &notes {
                        entry.reason.push_str(&format!("; {note}"));
                    }
                    entry.sources = vec![snapshot.location.describe(&branch, &file)];
                    entry.git = Some(record.clone());
                }
                announce::record_event(kube, app, &entries, now).await;
                report.stats.events += 1;
                report.entries.extend(entries);
                None
            }
            (Ok(()), Some(GitOutcome::Unchanged { branch, file })) => {
                let reason = format!(
                    "already in Git: {} holds this tag (a duplicate or late event); nothing committed",
                    snapshot.location.describe(&branch, &file)
                );
                report
                    .entries
                    .extend(decided.refused(Action::Skipped, &reason, false));
                None
            }
            (Err(WriteError::Race(message)), _) => Some((message, decided)),
            (Err(refusal), _) => {
                let (action, reason, retryable) = refusal.as_entry();
                report
                    .entries
                    .extend(decided.refused(action, &reason, retryable));
                None
            }
            (Ok(()), None) => {
                let reason = "the git write-back reported no outcome";
                report
                    .entries
                    .extend(decided.refused(Action::Failed, reason, true));
                None
            }
        }
    }

    /// The repository's host, with its credentials: GitHub's from the configured secrets,
    /// CodeCommit's the function's own IAM role.
    async fn git_host(
        &self,
        location: &gitwrite::Location,
        credentials: &str,
        app_namespace: &str,
        kube: &KubeClient,
    ) -> Result<Box<dyn GitHost + '_>, crate::gitcreds::CredentialsError> {
        if let gitwrite::HostKind::CodeCommit { region } = &location.repo.kind {
            return Ok(Box::new(
                self.codecommit.repository(region, &location.repo.name),
            ));
        }
        let credentials = self
            .git_credentials
            .for_repository(credentials, &location.url, app_namespace, kube)
            .await?;
        match (&location.repo.kind, credentials) {
            (gitwrite::HostKind::GitLab, Credentials::Token(token)) => {
                Ok(Box::new(self.gitlab.project(location.repo.clone(), token)))
            }
            (gitwrite::HostKind::GitLab, Credentials::App { .. }) => {
                Err(crate::gitcreds::CredentialsError {
                    message: format!(
                        "{} is on GitLab, which takes a project or group access token, not GitHub App credentials",
                        location.repo.full_name()
                    ),
                    retryable: false,
                })
            }
            (_, credentials) => Ok(Box::new(GitHubRepository {
                client: &self.github,
                repo: location.repo.clone(),
                credentials,
            })),
        }
    }

    fn repository_lock(&self, repository: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .repository_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        locks.entry(repository.to_string()).or_default().clone()
    }

    /// Asks Argo CD to refresh now (`argocd.argoproj.io/refresh: normal`) and records the
    /// commit in our audit annotation: a merge patch of those two keys, which cannot touch
    /// anything else of the Application.
    async fn request_refresh(
        &self,
        kube: &KubeClient,
        app: &Value,
        plan: &patch::WritePlan,
        record: &Value,
        work: &Work<'_>,
    ) -> Result<(), KubeError> {
        let (ns, name) = decide::app::names(app);
        let mut audit = plan.audit.clone();
        audit["git"] = record.clone();
        let body = json!({"metadata": {"annotations": {
            REFRESH_ANNOTATION: "normal",
            patch::AUDIT_ANNOTATION: audit.to_string(),
        }}});
        let merge = crate::kube::Patch::Merge(body);
        retry_transient(work.deadline, || kube.patch_application(ns, name, &merge)).await
    }

    /// Reconcile: the tag lists the Application's configuration, as listed, will ask for.
    async fn prefetch_tag_lists(
        &self,
        meta: &AppMeta,
        objects: &[ImageUpdaterObject],
        work: &Work<'_>,
    ) {
        let source = imageupdater::resolve(
            objects,
            &meta.namespace,
            &meta.name,
            &meta.labels,
            &meta.annotations,
        );
        let Some(config) = source.config(&meta.annotations) else {
            return;
        };
        let repositories = decide::reconcile_repositories(&config, &self.region);
        futures_util::future::join_all(
            repositories
                .iter()
                .map(|(registry, repository)| work.facts.tag_list(registry, repository)),
        )
        .await;
    }

    /// Decides every image of one Application that this invocation concerns; `None` if it
    /// has no configuration (no image-list, no ImageUpdater object).
    async fn decide_app(
        &self,
        app: &Value,
        objects: &[ImageUpdaterObject],
        work: &Work<'_>,
    ) -> Option<AppDecision> {
        let (ns, name) = decide::app::names(app);
        let labels = annotations::labels_of(app);
        let source = imageupdater::resolve(objects, ns, name, &labels, &annotations::of(app));
        let decided = self.decide_configured(app, &source, work).await?;
        Some(decide::app::configured_by(decided, &source))
    }

    /// Decides with the configuration `source` gives the Application.
    async fn decide_configured(
        &self,
        app: &Value,
        source: &Source<'_>,
        work: &Work<'_>,
    ) -> Option<AppDecision> {
        if let Source::Conflict(names) = source {
            return Some(AppDecision::skipped(vec![decide::app::contested(
                app, names,
            )]));
        }
        let config = source.config(&annotations::of(app))?;
        let concerned = concerned_images(&config, work.mode);
        if let Some(reason) = patch::app_skip_reason(app, &config) {
            let entries = every_image(app, &concerned, Action::Skipped, &reason, false);
            return Some(AppDecision::skipped(entries));
        }
        let mut gated = Vec::new();
        let mut outcomes = Vec::new();
        for image_entry in concerned {
            match decide::prepare(app, image_entry, &self.region) {
                Ok(case) => {
                    for note in &case.config.notes {
                        tracing::info!(image = %case.config.image, note = %note, "annotation note");
                    }
                    outcomes.push((case.config, self.decide_image(&case, work).await));
                }
                Err(entry) => gated.push(*entry),
            }
        }
        let now = OffsetDateTime::from(self.clock.now());
        Some(decide::assemble(app, gated, outcomes, now, work.event_id()))
    }

    /// Fetches what the image's strategy needs from ECR, lets `decide` answer, then holds an
    /// update back unless the image is signed with its cosign key (when it has one).
    async fn decide_image(&self, case: &ImageCase<'_>, work: &Work<'_>) -> ImageOutcome {
        let (outcome, digest) = self.decide_image_facts(case, work).await;
        let Some(key) = &case.config.cosign_key else {
            return outcome;
        };
        if outcome.update.is_none() {
            return outcome;
        }
        let Some(digest) = digest else {
            return outcome.refuse(
                Action::Skipped,
                "signature check: ECR named no digest for the image to roll out",
                false,
            );
        };
        let checked = self
            .signatures
            .check(
                &self.ecr,
                work.kube,
                &case.registry,
                &case.repository,
                &digest,
                key,
            )
            .await;
        match checked {
            Ok(Ok(())) => outcome.noted(&format!("{digest} is signed with the cosign key ({key})")),
            Ok(Err(reason)) => outcome.refuse(
                Action::Skipped,
                &format!("signature check failed: {reason}"),
                false,
            ),
            Err(e) => outcome.refuse(Action::Failed, &e.message, e.retryable),
        }
    }

    /// [`Self::decide_image`] before the signature check, with the digest it would move to.
    async fn decide_image_facts(
        &self,
        case: &ImageCase<'_>,
        work: &Work<'_>,
    ) -> (ImageOutcome, Option<String>) {
        let failed = |e: FetchFailure| {
            (
                ImageOutcome {
                    entries: vec![decide::failed_entry(case.entry(), &e.message, e.retryable)],
                    update: None,
                },
                None,
            )
        };
        let (registry, repository) = (case.registry.as_str(), case.repository.as_str());
        match work.mode {
            Mode::Push(push) => {
                let needs = case.needs(work.mode);
                let described = if needs.describe.is_empty() {
                    Described::new()
                } else {
                    match work
                        .facts
                        .describe(registry, repository, &needs.describe)
                        .await
                    {
                        Ok(described) => described,
                        Err(e) => return failed(e),
                    }
                };
                let tag_digest = described
                    .get(&push.tag)
                    .and_then(|d| d.as_ref())
                    .and_then(|d| d.digest.clone());
                let outcome = decide::gate_push(
                    case.decide_push(push, &described),
                    case.config,
                    push,
                    tag_digest.as_deref(),
                );
                let digest = outcome
                    .update
                    .as_ref()
                    .and_then(|u| u.to.digest.clone())
                    .or_else(|| {
                        described
                            .get(&push.tag)
                            .and_then(|d| d.as_ref())
                            .and_then(|d| d.digest.clone())
                    })
                    .or_else(|| push.digest.clone());
                let Some(tag) = outcome
                    .update
                    .as_ref()
                    .and_then(|u| u.check_platforms.clone())
                else {
                    return (outcome, digest);
                };
                match work.facts.check_platforms(case, &tag).await {
                    Ok(Ok(())) => (outcome, digest),
                    Ok(Err(reason)) => (outcome.refuse(Action::Skipped, &reason, false), digest),
                    Err(e) => failed(e),
                }
            }
            Mode::Reconcile => {
                let tags = match work.facts.tag_list(registry, repository).await {
                    Ok(tags) => tags,
                    Err(e) => return failed(e),
                };
                let candidates = case.candidates(&tags);
                let (outcome, chosen_digest) = match work.facts.choose(case, &candidates).await {
                    Ok(choice) => (
                        case.decide_reconcile(&tags, choice.chosen, choice.platform_refusals),
                        choice.chosen.and_then(|t| t.digest.clone()),
                    ),
                    Err(e) => return failed(e),
                };
                // A gated image moves only to a candidate whose scan passes.
                let digest = outcome
                    .update
                    .as_ref()
                    .and_then(|u| u.to.digest.clone())
                    .or(chosen_digest);
                let gated = match (&case.config.scan_gate, &digest) {
                    (Some(_), Some(digest)) => {
                        match self.ecr.scan_findings(registry, repository, digest).await {
                            Ok(scan) => decide::gate_reconcile(outcome, case.config, &scan),
                            Err(e) => return failed(e.into()),
                        }
                    }
                    (Some(gate), None) if outcome.update.is_some() => outcome.refuse(
                        Action::Skipped,
                        &format!("scan-gate `{gate}`: ECR named no digest for the candidate"),
                        false,
                    ),
                    _ => outcome,
                };
                (gated, digest)
            }
        }
    }
}

/// Argo CD refreshes an Application carrying this annotation, then removes it.
pub const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";

/// The Application's write-back, when it is `git`.
/// A cluster that could not be listed at all, for the report of a multi-cluster event. The
/// invocation fails retryably either way (the other clusters are written, and a retry finds
/// them unchanged); the class says whether waiting can fix it or an operator must.
fn cluster_failure(cluster: &str, error: &HandlerError) -> ClusterFailure {
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

fn git_method(app: &Value, objects: &[ImageUpdaterObject]) -> Option<Method> {
    let (ns, name) = decide::app::names(app);
    let labels = annotations::labels_of(app);
    let own = annotations::of(app);
    let source = imageupdater::resolve(objects, ns, name, &labels, &own);
    let config = source.config(&own)?;
    match config.write_back {
        Ok(method @ Method::Git { .. }) => Some(method),
        _ => None,
    }
}

/// The image-list entries this invocation concerns.
fn concerned_images<'c>(
    config: &'c annotations::AppConfig,
    mode: Mode<'_>,
) -> Vec<&'c annotations::ImageEntry> {
    config
        .images
        .iter()
        .filter(|entry| match mode {
            Mode::Push(push) => entry.image.is(&push.registry(), &push.repository),
            Mode::Reconcile => true,
        })
        .collect()
}

/// One entry per concerned image, all with the same outcome.
fn every_image(
    app: &Value,
    concerned: &[&annotations::ImageEntry],
    action: Action,
    reason: &str,
    retryable: bool,
) -> Vec<crate::report::Entry> {
    concerned
        .iter()
        .map(|e| {
            let mut entry = decide::base_entry(app, e.alias.as_deref(), &e.image.to_string())
                .with(action, reason);
            entry.retryable = retryable;
            entry
        })
        .collect()
}
