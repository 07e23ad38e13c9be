//! The handler: one invocation, from event to report, as orchestration only.
//!
//! Parse the event, list Applications metadata-only per namespace, and for each that the
//! event concerns: read it, fetch the registry facts its strategies ask for, let
//! [`crate::decide`] decide, hand the write plan to the write-back, report. Every target is
//! finished before the invocation fails for the ones a retry can fix.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use aws_credential_types::provider::SharedCredentialsProvider;
use futures_util::StreamExt;
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{Mutex as AsyncMutex, OnceCell};

use crate::annotations::{self, AppConfig};
use crate::appset;
use crate::config::Config;
use crate::decide::{self, Described, ImageCase, ImageOutcome, Mode};
use crate::ecr::{Ecr, EcrError};
use crate::eks_auth::{Clock, ClusterError, IamTokenSource, describe_cluster};
use crate::event::{self, EventError, Invocation, PushEvent};
use crate::kube::{AppMeta, KubeClient, KubeError};
use crate::patch::{self, ImageUpdate, WritePlan};
use crate::policy::TagInfo;
use crate::report::{Action, Entry, Report};
use crate::retry::{backoff, retry_transient};
use crate::writeback::{ApplicationPatch, WriteBack, WriteError};

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
    eks: aws_sdk_eks::Client,
    credentials: SharedCredentialsProvider,
    clock: Arc<dyn Clock>,
    kube: OnceCell<KubeClient>,
}

/// A repository's tag list as reconcile fetched it, or why it could not.
type TagList = Result<Arc<Vec<TagInfo>>, FetchFailure>;

/// A registry read that failed, with whether a retry may help.
#[derive(Debug, Clone)]
struct FetchFailure {
    message: String,
    retryable: bool,
}

impl From<EcrError> for FetchFailure {
    fn from(error: EcrError) -> Self {
        Self {
            retryable: error.is_retryable(),
            message: error.to_string(),
        }
    }
}

/// What a decision compares against, per invocation mode, with what this invocation has
/// already learnt from ECR (Applications tracking one repository usually share a tag). The
/// caches are behind async locks held across the lookup, so concurrent Applications wait
/// for the one request instead of repeating it.
enum Work<'a> {
    Push(&'a PushEvent, AsyncMutex<HashMap<String, Option<TagInfo>>>),
    Reconcile(AsyncMutex<HashMap<String, TagList>>),
}

impl Work<'_> {
    fn mode(&self) -> Mode<'_> {
        match self {
            Self::Push(push, _) => Mode::Push(push),
            Self::Reconcile(_) => Mode::Reconcile,
        }
    }

    fn event_id(&self) -> &str {
        match self {
            Self::Push(push, _) => &push.id,
            Self::Reconcile(_) => "",
        }
    }
}

/// Matched Applications are read, decided and written this many at a time.
const CONCURRENCY: usize = 8;
/// Reconcile with a platforms annotation reads candidates' manifests this many at a time,
/// best first, and stops at the first batch holding one that passes.
const MANIFEST_BATCH: usize = 10;

/// What deciding one Application produced: its report entries and, if anything moves, the
/// write that moves it.
struct AppDecision {
    entries: Vec<Entry>,
    plan: Option<WritePlan>,
}

impl Handler {
    pub fn new(
        config: Config,
        region: String,
        ecr: aws_sdk_ecr::Client,
        eks: aws_sdk_eks::Client,
        credentials: SharedCredentialsProvider,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            config,
            region,
            ecr: Ecr::new(ecr),
            eks,
            credentials,
            clock,
            kube: OnceCell::new(),
        }
    }

    /// Builds the handler from the SDK configuration `main` loads once per container.
    pub fn from_sdk(
        config: Config,
        sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, String> {
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .ok_or("no AWS region: set AWS_REGION (Lambda sets it)")?;
        let credentials = sdk
            .credentials_provider()
            .ok_or("no AWS credentials provider: configure the standard AWS credential chain")?;
        Ok(Self::new(
            config,
            region,
            aws_sdk_ecr::Client::new(sdk),
            aws_sdk_eks::Client::new(sdk),
            credentials,
            clock,
        ))
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The Kubernetes client, made on first use and kept for the warm container's life.
    async fn kube(&self) -> Result<&KubeClient, HandlerError> {
        self.kube
            .get_or_try_init(|| async {
                let access = match &self.config.cluster_override {
                    Some(access) => access.clone(),
                    None => describe_cluster(&self.eks, &self.config.cluster_name).await?,
                };
                let tokens = Arc::new(IamTokenSource::new(
                    self.config.cluster_name.clone(),
                    self.region.clone(),
                    self.credentials.clone(),
                    self.clock.clone(),
                ));
                KubeClient::new(&access, tokens, self.config.timeouts).map_err(HandlerError::List)
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
                report.log();
                return Ok(report);
            }
            Invocation::Push(push) => {
                let mut report = Report::new("push", &push.id, self.config.dry_run);
                report.image = Some(push.image());
                report.tag = Some(push.tag.clone());
                if push.region != self.region {
                    report.skipped = Some(format!(
                        "the push is in region {}, this function serves {}: deploy one function per region",
                        push.region, self.region
                    ));
                    report.log();
                    return Ok(report);
                }
                let registry = push.registry();
                self.run(
                    &mut report,
                    &Work::Push(&push, AsyncMutex::new(HashMap::new())),
                    deadline,
                    |m| annotations::image_list_names(&m.annotations, &registry, &push.repository),
                )
                .await?;
                report
            }
            Invocation::Reconcile { id } => {
                let mut report = Report::new("reconcile", &id, self.config.dry_run);
                let key = format!("{}image-list", annotations::PREFIX);
                self.run(
                    &mut report,
                    &Work::Reconcile(AsyncMutex::new(HashMap::new())),
                    deadline,
                    |m| m.annotations.contains_key(&key),
                )
                .await?;
                report
            }
        };
        report.stats.ecr_calls = self.ecr.calls() - ecr_calls_before;
        report.log();
        match report.failure_summary() {
            Some(summary) => Err(HandlerError::Targets {
                summary,
                report: Box::new(report),
            }),
            None => Ok(report),
        }
    }

    async fn run(
        &self,
        report: &mut Report,
        work: &Work<'_>,
        deadline: Option<Instant>,
        keep: impl Fn(&AppMeta) -> bool,
    ) -> Result<(), HandlerError> {
        let kube = self.kube().await?;
        // One namespace that cannot be listed must not stop the others.
        let scopes = KubeClient::list_scopes(&self.config.namespaces);
        let mut matched = Vec::new();
        let mut unlisted = Vec::new();
        for namespace in &scopes {
            let listed = retry_transient(deadline, || {
                kube.list_application_metadata(
                    namespace,
                    self.config.label_selector.as_deref(),
                    self.config.page_size,
                    &keep,
                )
            })
            .await;
            match listed {
                Ok((kept, stats)) => {
                    report.stats.list_pages += stats.pages;
                    report.stats.applications_listed += stats.seen;
                    matched.extend(kept);
                }
                Err(e) => unlisted.push((namespace.clone(), e)),
            }
        }
        if unlisted.len() == scopes.len()
            && let Some((_, error)) = unlisted.pop()
        {
            return Err(HandlerError::List(error));
        }
        for (namespace, error) in unlisted {
            let scope = if namespace.is_empty() {
                "*"
            } else {
                &namespace
            };
            let mut entry = Entry::new(scope, "(all Applications)", None, "").with(
                Action::Failed,
                format!("cannot list Applications in namespace `{scope}`: {error}"),
            );
            entry.retryable = error.is_retryable();
            report.entries.push(entry);
        }
        report.stats.applications_matched += matched.len();
        // Each Application is independent; `buffered` keeps the report in listing order.
        let (mode, event_id, dry_run) = (report.mode, report.event_id.as_str(), report.dry_run);
        let outcomes: Vec<Report> =
            futures_util::stream::iter(matched.iter().map(|meta| async move {
                let mut outcome = Report::new(mode, event_id, dry_run);
                self.process(kube, meta, work, deadline, &mut outcome).await;
                outcome
            }))
            .buffered(CONCURRENCY)
            .collect()
            .await;
        for outcome in outcomes {
            report.entries.extend(outcome.entries);
            report.stats.gets += outcome.stats.gets;
            report.stats.patches += outcome.stats.patches;
            report.stats.conflicts += outcome.stats.conflicts;
        }
        Ok(())
    }

    /// One Application: read, decide, write; re-read and re-decide after a race.
    async fn process(
        &self,
        kube: &KubeClient,
        meta: &AppMeta,
        work: &Work<'_>,
        deadline: Option<Instant>,
        report: &mut Report,
    ) {
        let (ns, name) = (meta.namespace.as_str(), meta.name.as_str());
        let whole_app = || Entry::new(ns, name, None, "");
        let writer = ApplicationPatch { kube, deadline };
        let mut last_refused: Option<Value> = None;
        for attempt in 0..=self.config.conflict_retries {
            report.stats.gets += 1;
            let app = match retry_transient(deadline, || kube.get_application(ns, name)).await {
                Ok(app) => app,
                Err(KubeError::NotFound { .. }) => {
                    report.entries.push(
                        whole_app().with(Action::Skipped, "the Application was deleted meanwhile"),
                    );
                    return;
                }
                Err(e) => {
                    report.entries.push(decide::failed_entry(
                        whole_app(),
                        &e.to_string(),
                        e.is_retryable(),
                    ));
                    return;
                }
            };
            let Some(decided) = self.decide_app(kube, &app, work, deadline).await else {
                report.entries.push(
                    whole_app().with(Action::Skipped, "no longer annotated for Image Updater"),
                );
                return;
            };
            let AppDecision { entries, plan } = decided;
            let Some(plan) = plan else {
                report.entries.extend(entries);
                return;
            };
            if self.config.dry_run {
                report.entries.extend(entries.into_iter().map(|mut e| {
                    if e.action == Action::Updated {
                        e.reason = format!("dry run: {} (patch computed, not sent)", e.reason);
                        e.patch = Some(plan.patch.clone());
                    }
                    e
                }));
                return;
            }
            report.stats.patches += 1;
            let (race, guard_failed) = match writer.write(&app, &plan).await {
                Ok(()) => {
                    report.entries.extend(entries);
                    return;
                }
                Err(WriteError::Race(message)) => (message, true),
                Err(WriteError::Conflict(message)) => (message, false),
                Err(WriteError::Refused(message)) => {
                    report
                        .entries
                        .extend(write_failed(entries, &message, false));
                    return;
                }
                Err(WriteError::Failed { message, retryable }) => {
                    report
                        .entries
                        .extend(write_failed(entries, &message, retryable));
                    return;
                }
            };
            // The same content refused twice on a fresh read is not a race: the server
            // rejects the content itself. The audit timestamp is left out of the comparison.
            let content = Value::Array(plan.content().into_iter().cloned().collect());
            if guard_failed && last_refused.as_ref() == Some(&content) {
                let reason = format!("the API server refused the same patch twice: {race}");
                report.entries.extend(write_failed(entries, &reason, false));
                return;
            }
            last_refused = guard_failed.then_some(content);
            report.stats.conflicts += 1;
            if attempt == self.config.conflict_retries {
                let reason = format!(
                    "the Application kept changing under us: {} conflicts in a row (last: {race})",
                    attempt + 1
                );
                report.entries.extend(write_failed(entries, &reason, true));
                return;
            }
            tokio::time::sleep(backoff(attempt, None)).await;
        }
    }

    /// Decides every image of one Application that this invocation concerns; `None` if it
    /// has no image-list.
    async fn decide_app(
        &self,
        kube: &KubeClient,
        app: &Value,
        work: &Work<'_>,
        deadline: Option<Instant>,
    ) -> Option<AppDecision> {
        let annotations: BTreeMap<String, String> = app["metadata"]["annotations"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let config = AppConfig::parse(&annotations)?;
        let concerned: Vec<_> = config
            .images
            .iter()
            .filter(|entry| match work {
                Work::Push(push, _) => entry.image.is(&push.registry(), &push.repository),
                Work::Reconcile(_) => true,
            })
            .collect();
        if let Some(reason) = patch::app_skip_reason(app, &config) {
            let entries = concerned
                .iter()
                .map(|e| {
                    decide::base_entry(app, e.alias.as_deref(), &e.image.to_string())
                        .with(Action::Skipped, reason.clone())
                })
                .collect();
            return Some(AppDecision {
                entries,
                plan: None,
            });
        }
        let mut entries = Vec::new();
        let mut moves = Vec::new();
        for image_entry in concerned {
            let case = match decide::prepare(app, image_entry, &self.region) {
                Ok(case) => case,
                Err(entry) => {
                    entries.push(*entry);
                    continue;
                }
            };
            for note in &case.config.notes {
                tracing::info!(image = %case.config.image, note = %note, "annotation note");
            }
            let outcome = self.decide_image(&case, work).await;
            let first = entries.len();
            entries.extend(outcome.entries);
            if let Some(update) = outcome.update {
                moves.push((case.config, update, first..entries.len()));
            }
        }
        if moves.is_empty() {
            return Some(AppDecision {
                entries,
                plan: None,
            });
        }
        let now = OffsetDateTime::from(self.clock.now());
        let audited: Vec<_> = moves
            .iter()
            .flat_map(|(config, _, range)| {
                entries[range.clone()]
                    .iter()
                    .filter(|e| e.action == Action::Updated)
                    .map(move |e| (*config, e))
            })
            .collect();
        let audit = decide::audit_record(now, work.event_id(), &audited);
        let updates: Vec<ImageUpdate<'_>> = moves
            .iter()
            .map(|(config, update, _)| ImageUpdate {
                config,
                to: update.to.clone(),
                sources: update.sources.clone(),
            })
            .collect();
        let plan = patch::plan(app, &updates, audit);
        if let Some(owner) = appset::owner(app) {
            let namespace = app["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = app["metadata"]["name"].as_str().unwrap_or_default();
            let verdict = match retry_transient(deadline, || {
                kube.get_application_set(namespace, owner)
            })
            .await
            {
                Ok(set) => appset::covers(&set, name, &plan.written_paths())
                    .map_err(|reason| (Action::Skipped, reason, false)),
                Err(KubeError::NotFound { .. }) => Err((
                    Action::Skipped,
                    format!(
                        "owned by ApplicationSet `{owner}`, which cannot be found to check its ignoreApplicationDifferences"
                    ),
                    false,
                )),
                Err(e) => Err((
                    Action::Failed,
                    format!(
                        "owned by ApplicationSet `{owner}`, whose ignoreApplicationDifferences cannot be read: {e}"
                    ),
                    e.is_retryable(),
                )),
            };
            if let Err((action, reason, retryable)) = verdict {
                let outcome = ImageOutcome {
                    entries,
                    update: None,
                };
                return Some(AppDecision {
                    entries: outcome.refuse(action, &reason, retryable).entries,
                    plan: None,
                });
            }
        }
        Some(AppDecision {
            entries,
            plan: Some(plan),
        })
    }

    /// Fetches what the image's strategy needs from ECR, then lets `decide` answer.
    async fn decide_image(&self, case: &ImageCase<'_>, work: &Work<'_>) -> ImageOutcome {
        let (registry, repository) = (case.registry.as_str(), case.repository.as_str());
        let failed = |error: FetchFailure| ImageOutcome {
            entries: vec![decide::failed_entry(
                case.entry(),
                &error.message,
                error.retryable,
            )],
            update: None,
        };
        match work {
            Work::Push(push, cache) => {
                let needs = case.needs(work.mode());
                let described = if needs.describe.is_empty() {
                    Described::new()
                } else {
                    match self
                        .describe_once(registry, repository, &needs.describe, cache)
                        .await
                    {
                        Ok(described) => described,
                        Err(e) => return failed(e.into()),
                    }
                };
                let outcome = case.decide_push(push, &described);
                let Some(tag) = outcome
                    .update
                    .as_ref()
                    .and_then(|u| u.check_platforms.clone())
                else {
                    return outcome;
                };
                match self.ecr.platforms(registry, repository, &tag).await {
                    Err(e) => failed(e.into()),
                    Ok(manifest) => {
                        match decide::platform_verdict(
                            &tag,
                            manifest.as_ref(),
                            &case.config.platforms,
                        ) {
                            Ok(()) => outcome,
                            Err(reason) => outcome.refuse(Action::Skipped, &reason, false),
                        }
                    }
                }
            }
            Work::Reconcile(cache) => {
                let tags = match self.tag_list(registry, repository, cache).await {
                    Ok(tags) => tags,
                    Err(e) => return failed(e),
                };
                let candidates = case.candidates(&tags);
                if case.config.platforms.is_empty() {
                    return case.decide_reconcile(&tags, candidates.first().copied(), 0);
                }
                let mut refusals = 0;
                for batch in candidates.chunks(MANIFEST_BATCH) {
                    let names: Vec<String> = batch.iter().map(|t| t.name.clone()).collect();
                    let manifests = match self.ecr.platforms_of(registry, repository, &names).await
                    {
                        Ok(manifests) => manifests,
                        Err(e) => return failed(e.into()),
                    };
                    for (candidate, manifest) in batch.iter().zip(&manifests) {
                        match decide::platform_verdict(
                            &candidate.name,
                            manifest.as_ref(),
                            &case.config.platforms,
                        ) {
                            Ok(()) => {
                                return case.decide_reconcile(&tags, Some(candidate), refusals);
                            }
                            Err(_) => refusals += 1,
                        }
                    }
                }
                case.decide_reconcile(&tags, None, refusals)
            }
        }
    }

    /// What ECR knows of `tags` (`None` where it has no such tag), each asked at most once
    /// per invocation and the unknown ones in a single request.
    async fn describe_once(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
        described: &AsyncMutex<HashMap<String, Option<TagInfo>>>,
    ) -> Result<Described, EcrError> {
        let key = |tag: &str| format!("{registry}/{repository}:{tag}");
        let mut described = described.lock().await;
        let unknown: Vec<String> = tags
            .iter()
            .filter(|t| !described.contains_key(&key(t)))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            let found = self
                .ecr
                .describe_tags(registry, repository, &unknown)
                .await?;
            for tag in &unknown {
                described.insert(key(tag), found.iter().find(|f| &f.name == tag).cloned());
            }
        }
        Ok(tags
            .iter()
            .map(|t| (t.clone(), described.get(&key(t)).cloned().flatten()))
            .collect())
    }

    /// A repository's full tag list, fetched at most once per reconcile.
    async fn tag_list(
        &self,
        registry: &str,
        repository: &str,
        cache: &AsyncMutex<HashMap<String, TagList>>,
    ) -> TagList {
        let mut cache = cache.lock().await;
        let key = format!("{registry}/{repository}");
        if let Some(known) = cache.get(&key) {
            return known.clone();
        }
        let listed = self
            .ecr
            .list_tags(registry, repository)
            .await
            .map(Arc::new)
            .map_err(FetchFailure::from);
        cache.insert(key, listed.clone());
        listed
    }
}

/// The entries of a write that did not happen: the updates become failures.
fn write_failed(entries: Vec<Entry>, reason: &str, retryable: bool) -> Vec<Entry> {
    ImageOutcome {
        entries,
        update: None,
    }
    .refuse(Action::Failed, reason, retryable)
    .entries
}
