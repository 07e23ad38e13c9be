//! The handler: one invocation, from event to report.
//!
//! Push: list Applications metadata-only, keep those whose `image-list` names the pushed
//! repository, GET only those, decide each image with the policy, and patch. Reconcile: the
//! same over every annotated Application, with `select` on ECR's full tag list. Every target
//! is finished before the invocation fails for the ones a retry can fix.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_credential_types::provider::SharedCredentialsProvider;
use futures_util::StreamExt;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::{Mutex as AsyncMutex, OnceCell};

use crate::annotations::{self, AppConfig, ImageConfig};
use crate::config::Config;
use crate::ecr::{Ecr, EcrError, Platforms, offers_all};
use crate::eks_auth::{Clock, ClusterError, IamTokenSource, describe_cluster};
use crate::event::{self, EventError, Invocation, PushEvent, registry_host};
use crate::kube::{AppMeta, KubeClient, KubeError, Patch};
use crate::patch::{self, ImageUpdate};
use crate::policy::{Decision, Strategy, TagInfo};
use crate::report::{Action, Entry, Report};

/// Transient Kubernetes errors (429, 5xx, timeouts, dropped connections) are retried this
/// many times in the invocation before the target is reported as failed.
const TRANSIENT_ATTEMPTS: u32 = 4;
const MAX_BACKOFF: Duration = Duration::from_secs(5);

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

/// A repository's tag list as reconcile fetched it, or why it could not (and whether a
/// retry may help).
type TagList = Result<Arc<Vec<TagInfo>>, (String, bool)>;

/// What a decision compares against, per invocation mode, with what this invocation has
/// already learnt from ECR (Applications tracking one repository usually share a tag). The
/// caches are behind async locks held across the lookup, so concurrent Applications wait
/// for the one request instead of repeating it.
enum Work<'a> {
    Push(&'a PushEvent, AsyncMutex<HashMap<String, Option<TagInfo>>>),
    Reconcile(AsyncMutex<HashMap<String, TagList>>),
}

/// Matched Applications are read, decided and written this many at a time.
const CONCURRENCY: usize = 8;

/// The outcome of deciding one image of one Application.
struct Decided {
    entry: Entry,
    /// `(from, to)` when the image moves.
    update: Option<(Option<String>, String)>,
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
        let (matched, stats) = retry_transient(deadline, || {
            kube.list_application_metadata(
                &self.config.namespaces,
                self.config.label_selector.as_deref(),
                self.config.page_size,
                &keep,
            )
        })
        .await
        .map_err(HandlerError::List)?;
        report.stats.list_pages += stats.pages;
        report.stats.applications_listed += stats.seen;
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

    /// One Application: read, decide, write; re-read and re-decide after a conflict.
    async fn process(
        &self,
        kube: &KubeClient,
        meta: &AppMeta,
        work: &Work<'_>,
        deadline: Option<Instant>,
        report: &mut Report,
    ) {
        let (ns, name) = (meta.namespace.as_str(), meta.name.as_str());
        let mut last_refused: Option<Value> = None;
        for attempt in 0..=self.config.conflict_retries {
            report.stats.gets += 1;
            let app = match retry_transient(deadline, || kube.get_application(ns, name)).await {
                Ok(app) => app,
                Err(KubeError::NotFound { .. }) => {
                    report.entries.push(
                        Entry::new(ns, name, None, "")
                            .with(Action::Skipped, "the Application was deleted meanwhile"),
                    );
                    return;
                }
                Err(e) => {
                    report.entries.push(failed(
                        Entry::new(ns, name, None, ""),
                        &e.to_string(),
                        e.is_retryable(),
                    ));
                    return;
                }
            };
            let Some(decided) = self.decide_app(&app, work).await else {
                report.entries.push(
                    Entry::new(ns, name, None, "")
                        .with(Action::Skipped, "no longer annotated for Image Updater"),
                );
                return;
            };
            let (entries, plan) = decided;
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
            let json_patch = Patch::Json(plan.patch.clone());
            let refused =
                match retry_transient(deadline, || kube.patch_application(ns, name, &json_patch))
                    .await
                {
                    Ok(_) => {
                        report.entries.extend(entries);
                        return;
                    }
                    // A failed `test` (422) or a 409 means someone wrote first: read again.
                    Err(e @ (KubeError::Invalid { .. } | KubeError::Conflict { .. })) => e,
                    Err(e) => {
                        let retryable = e.is_retryable();
                        report.entries.extend(
                            entries
                                .into_iter()
                                .map(|en| write_failed(en, &e.to_string(), retryable)),
                        );
                        return;
                    }
                };
            // The same patch refused twice on the same state is not a race: the API server
            // rejects the content itself (for example a schema rule), and retrying is futile.
            if last_refused.as_ref() == Some(&plan.patch) {
                report.entries.extend(
                    entries
                        .into_iter()
                        .map(|en| write_failed(en, &refused.to_string(), false)),
                );
                return;
            }
            last_refused = Some(plan.patch);
            report.stats.conflicts += 1;
            if attempt == self.config.conflict_retries {
                let reason = format!(
                    "the Application kept changing under us: {} conflicts in a row (last: {refused})",
                    attempt + 1
                );
                report.entries.extend(
                    entries
                        .into_iter()
                        .map(|en| write_failed(en, &reason, true)),
                );
                return;
            }
            tokio::time::sleep(backoff(attempt, None)).await;
        }
    }

    /// Decides every image of one Application that this invocation concerns. Returns the
    /// entries and, if anything moves, the write plan; `None` if it has no image-list.
    async fn decide_app(
        &self,
        app: &Value,
        work: &Work<'_>,
    ) -> Option<(Vec<Entry>, Option<patch::WritePlan>)> {
        let annotations: std::collections::BTreeMap<String, String> =
            app["metadata"]["annotations"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                        .collect()
                })
                .unwrap_or_default();
        let config = AppConfig::parse(&annotations)?;
        let ns = app["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = app["metadata"]["name"].as_str().unwrap_or_default();
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
                    Entry::new(ns, name, e.alias.as_deref(), &e.image.to_string())
                        .with(Action::Skipped, reason.clone())
                })
                .collect();
            return Some((entries, None));
        }
        let mut entries = Vec::new();
        let mut moves: Vec<(usize, &ImageConfig, Option<String>, String)> = Vec::new();
        for image_entry in concerned {
            let base = Entry::new(
                ns,
                name,
                image_entry.alias.as_deref(),
                &image_entry.image.to_string(),
            );
            let image = match &image_entry.config {
                Ok(image) => image,
                Err(e) => {
                    // The user's to fix; retrying the event would not help.
                    entries.push(failed(base, &format!("configuration error: {e}"), false));
                    continue;
                }
            };
            let decided = self.decide_image(app, image, base, work).await;
            if let Some((from, to)) = decided.update {
                moves.push((entries.len(), image, from, to));
            }
            entries.push(decided.entry);
        }
        if moves.is_empty() {
            return Some((entries, None));
        }
        let now = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default();
        let event_id = match work {
            Work::Push(push, _) => push.id.clone(),
            Work::Reconcile(_) => String::new(),
        };
        let audit = json!({
            "time": now,
            "eventId": event_id,
            "images": moves.iter().map(|(_, image, from, to)| json!({
                "alias": image.alias, "image": image.image.to_string(), "from": from, "to": to,
            })).collect::<Vec<_>>(),
        });
        let updates: Vec<ImageUpdate<'_>> = moves
            .iter()
            .map(|(_, image, from, to)| ImageUpdate {
                config: image,
                from: from.clone(),
                to: to.clone(),
            })
            .collect();
        let plan = patch::plan(app, &updates, audit);
        for ((index, ..), sources) in moves.iter().zip(&plan.targets) {
            entries[*index].sources = sources.clone();
        }
        Some((entries, Some(plan)))
    }

    async fn decide_image(
        &self,
        app: &Value,
        image: &ImageConfig,
        mut entry: Entry,
        work: &Work<'_>,
    ) -> Decided {
        let keep = |entry: Entry, action: Action, reason: String| Decided {
            entry: entry.with(action, reason),
            update: None,
        };
        for note in &image.notes {
            tracing::info!(image = %image.image, note = %note, "annotation note");
        }
        let reference = image.image.to_string();
        if !image.force_update && !patch::runs_image(app, &reference) {
            return keep(
                entry,
                Action::Skipped,
                format!(
                    "`{reference}` is not among the images the Application runs (status.summary.images); set force-update to write it anyway"
                ),
            );
        }
        let current = patch::current(app, image);
        entry.from = current.as_ref().map(|c| match &c.digest {
            Some(d) => format!("{}@{d}", c.tag),
            None => c.tag.clone(),
        });
        let current_info = current.as_ref().map(|c| TagInfo {
            name: c.tag.clone(),
            pushed_at: None,
            digest: c.digest.clone(),
        });
        let Some((registry, repository)) = self.ecr_location(image) else {
            return keep(
                entry,
                Action::Skipped,
                format!(
                    "`{reference}` is not an ECR repository of this account's registry in {}",
                    self.region
                ),
            );
        };

        let decision = match work {
            Work::Push(push, described) => {
                let candidate = TagInfo {
                    name: push.tag.clone(),
                    pushed_at: Some(push.time),
                    digest: None,
                };
                // Filters first: a tag the policy refuses costs no ECR call.
                let precheck = image.policy.decide(None, &candidate);
                let refused = match &precheck {
                    Decision::Keep(reason) => {
                        !matches!(reason, crate::policy::KeepReason::NoDigest(_))
                    }
                    Decision::Update { .. } => false,
                };
                if refused {
                    precheck
                } else {
                    match self
                        .enrich(
                            image,
                            &registry,
                            &repository,
                            current_info,
                            candidate,
                            described,
                        )
                        .await
                    {
                        Ok((current, candidate)) => {
                            image.policy.decide(current.as_ref(), &candidate)
                        }
                        Err(e) => return ecr_failed(entry, e),
                    }
                }
            }
            Work::Reconcile(cache) => {
                let tags = match self.tag_list(&registry, &repository, cache).await {
                    Ok(tags) => tags,
                    Err((message, retryable)) => {
                        return Decided {
                            entry: failed(entry, &message, retryable),
                            update: None,
                        };
                    }
                };
                match image.policy.select(&tags) {
                    None => Decision::Keep(crate::policy::KeepReason::NoEligibleTag(tags.len())),
                    Some(selected) if Some(&selected) == entry.from.as_ref() => {
                        Decision::Keep(crate::policy::KeepReason::SameAsCurrent(selected))
                    }
                    Some(selected) => Decision::Update { to: selected },
                }
            }
        };
        let to = match decision {
            Decision::Keep(reason) => {
                let action = match reason {
                    crate::policy::KeepReason::SameAsCurrent(_)
                    | crate::policy::KeepReason::SameDigest(_) => Action::Unchanged,
                    _ => Action::Skipped,
                };
                return keep(entry, action, reason.to_string());
            }
            Decision::Update { to } => to,
        };
        if !image.platforms.is_empty() {
            let tag = to.split('@').next().unwrap_or(&to);
            match self.ecr.platforms(&registry, &repository, tag).await {
                Err(e) => return ecr_failed(entry, e),
                Ok(None) => {
                    return keep(
                        entry,
                        Action::Skipped,
                        format!("ECR has no manifest for `{tag}` any more"),
                    );
                }
                Ok(Some(Platforms::Index(offered))) => {
                    if let Err(missing) = offers_all(&offered, &image.platforms) {
                        return keep(
                            entry,
                            Action::Skipped,
                            format!(
                                "`{tag}` lacks platform(s) {} asked by the platforms annotation",
                                missing.join(", ")
                            ),
                        );
                    }
                }
                Ok(Some(Platforms::Single)) => {
                    tracing::warn!(image = %reference, tag, "single-platform manifest: its platform cannot be read through the ECR API, so the platforms annotation is not checked");
                }
            }
        }
        entry.to = Some(to.clone());
        let reason = match (work, image.policy.strategy) {
            (Work::Reconcile(_), _) => format!(
                "reconcile: `{to}` is the best allowed tag under {}",
                image.policy.strategy
            ),
            (Work::Push(..), Strategy::Digest) => format!(
                "tracked tag now points to {}",
                to.split('@').nth(1).unwrap_or_default()
            ),
            (Work::Push(..), strategy) => {
                format!("`{to}` ranks above the current tag under {strategy}")
            }
        };
        let from = entry.from.clone();
        Decided {
            entry: entry.with(Action::Updated, reason),
            update: Some((from, to)),
        }
    }

    /// Adds what ECR knows and the event does not, only where the strategy needs it.
    async fn enrich(
        &self,
        image: &ImageConfig,
        registry: &str,
        repository: &str,
        current: Option<TagInfo>,
        mut candidate: TagInfo,
        described: &AsyncMutex<HashMap<String, Option<TagInfo>>>,
    ) -> Result<(Option<TagInfo>, TagInfo), EcrError> {
        match image.policy.strategy {
            Strategy::NewestBuild => {
                // Both ranked by ECR's imagePushedAt, as `select` ranks them in reconcile:
                // that is the digest's first push, so a new tag on an old image does not
                // count as new. One request for both; the event time only if ECR has no
                // record of the pushed tag yet.
                let mut names = vec![candidate.name.clone()];
                if let Some(c) = current.as_ref().filter(|c| c.name != candidate.name) {
                    names.push(c.name.clone());
                }
                let known = self
                    .describe_once(registry, repository, &names, described)
                    .await?;
                if let Some(Some(info)) = known.first() {
                    candidate.pushed_at = info.pushed_at.or(candidate.pushed_at);
                }
                let current = match (current, known.get(1)) {
                    (Some(_), Some(Some(info))) => Some(info.clone()),
                    (current, _) => current,
                };
                Ok((current, candidate))
            }
            Strategy::Digest => {
                // The truth is what the tag points to now, never the (maybe stale) event.
                candidate.digest = self
                    .describe_once(
                        registry,
                        repository,
                        std::slice::from_ref(&candidate.name),
                        described,
                    )
                    .await?
                    .pop()
                    .flatten()
                    .and_then(|t| t.digest);
                Ok((current, candidate))
            }
            Strategy::Semver | Strategy::Alphabetical => Ok((current, candidate)),
        }
    }

    /// What ECR knows of `tags` (in their order; `None` where it has no such tag), each
    /// asked at most once per invocation and the unknown ones in a single request.
    async fn describe_once(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
        described: &AsyncMutex<HashMap<String, Option<TagInfo>>>,
    ) -> Result<Vec<Option<TagInfo>>, EcrError> {
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
            .map(|t| described.get(&key(t)).cloned().flatten())
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
            .map_err(|e| (e.to_string(), e.is_retryable()));
        cache.insert(key, listed.clone());
        listed
    }

    /// The registry id and repository of an ECR image in this function's region.
    fn ecr_location(&self, image: &ImageConfig) -> Option<(String, String)> {
        let registry = image.image.registry.as_deref()?;
        let account = registry.split('.').next()?;
        (registry == registry_host(account, &self.region))
            .then(|| (account.to_string(), image.image.repository.clone()))
    }
}

fn failed(entry: Entry, reason: &str, retryable: bool) -> Entry {
    let mut entry = entry.with(Action::Failed, reason);
    entry.retryable = retryable;
    entry
}

fn write_failed(entry: Entry, reason: &str, retryable: bool) -> Entry {
    if entry.action == Action::Updated {
        let mut failed = failed(entry, reason, retryable);
        failed.to = None;
        failed
    } else {
        entry
    }
}

fn ecr_failed(entry: Entry, error: EcrError) -> Decided {
    let retryable = error.is_retryable();
    Decided {
        entry: failed(entry, &error.to_string(), retryable),
        update: None,
    }
}

fn transient(error: &KubeError) -> bool {
    matches!(
        error,
        KubeError::TooManyRequests { .. }
            | KubeError::Server { .. }
            | KubeError::Timeout(_)
            | KubeError::Connect(_)
            | KubeError::Expired { .. }
    )
}

/// Exponential backoff with jitter, honouring the server's Retry-After.
fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let exponential = Duration::from_millis(50u64.saturating_mul(1 << attempt.min(10)));
    let jitter = Duration::from_millis(rand::random_range(0..50));
    retry_after.unwrap_or(exponential).min(MAX_BACKOFF) + jitter
}

/// Runs `op` again after transient failures, while the deadline leaves room.
async fn retry_transient<T, F, Fut>(deadline: Option<Instant>, mut op: F) -> Result<T, KubeError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, KubeError>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(e) if transient(&e) && attempt + 1 < TRANSIENT_ATTEMPTS => {
                let wait = backoff(attempt, e.retry_after());
                let room =
                    deadline.is_none_or(|d| Instant::now() + wait + Duration::from_secs(1) < d);
                if !room {
                    return Err(e);
                }
                tracing::warn!(error = %e, wait_ms = wait.as_millis() as u64, "transient Kubernetes error, retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        assert!(backoff(0, None) < Duration::from_millis(100));
        assert!(backoff(3, None) >= Duration::from_millis(400));
        assert!(backoff(20, None) <= MAX_BACKOFF + Duration::from_millis(50));
        assert!(backoff(0, Some(Duration::from_secs(2))) >= Duration::from_secs(2));
        assert!(
            backoff(0, Some(Duration::from_secs(600))) <= MAX_BACKOFF + Duration::from_millis(50)
        );
    }

    #[tokio::test]
    async fn transient_errors_are_retried_and_others_are_not() {
        let mut calls = 0;
        let result: Result<u32, KubeError> = retry_transient(None, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(KubeError::Server {
                        code: 503,
                        retry_after: Some(Duration::ZERO),
                        message: "busy".into(),
                    })
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 3);
        let mut calls = 0;
        let result: Result<u32, KubeError> = retry_transient(None, || {
            calls += 1;
            async {
                Err(KubeError::Conflict {
                    message: "c".into(),
                })
            }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 1);
    }
}
