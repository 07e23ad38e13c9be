//! One Application, from its read to its entries in the report: its configuration resolved
//! once, decided, and written back by its method (the Application patch, or a commit to its
//! Git repository); read and decided again after a race.

use std::collections::BTreeMap;

use serde_json::Value;

use super::handler::{Handler, Work};
use super::listing::Concerned;
use crate::appconfig::annotations::{self, AppConfig, ImageEntry, WriteBack as Method};
use crate::appconfig::imageupdater::{self, ConfigSource, ImageUpdaterObject, Resolution};
use crate::application::app::{Application, Metadata};
use crate::application::identity::Identity;
use crate::apply::writeback::{ApplicationPatch, WriteError, Writer};
use crate::cluster::kube::{AppMeta, KubeError};
use crate::cluster::retry::{backoff, retry_transient};
use crate::decision::controls::{self, Hold};
use crate::decision::decide::{self, AppDecision, Mode};
use crate::decision::rollback;
use crate::report::entries;
use crate::report::{Action, Entry, Report};

/// An Application's configuration, resolved once from the labels and annotations it was
/// seen with: which ImageUpdater object (or its own annotations) configures it, what that
/// configuration says, and so how it is written back. The decision and both write-back
/// paths take this value; a re-read that shows the same labels and annotations keeps it.
pub(super) struct Resolved<'o> {
    labels: BTreeMap<String, String>,
    /// Only those configuration is read from ([`annotations::is_configuring`]).
    annotations: BTreeMap<String, String>,
    pub source: ConfigSource<'o>,
    /// `None` when nothing configures it: no `image-list` and no ImageUpdater object, or
    /// more than one object.
    pub config: Option<AppConfig>,
}

/// The `git` write-back's settings of a resolved Application.
pub(super) struct GitSettings<'r> {
    pub method: &'r Method,
    /// `git`, `git:repocreds` or `git:secret:<namespace>/<name>`.
    pub credentials: &'r str,
    pub branch: Option<&'r str>,
    pub pull_request: Option<&'r Vec<String>>,
}

impl<'o> Resolved<'o> {
    pub fn resolve(
        objects: &'o [ImageUpdaterObject],
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> Self {
        let source = imageupdater::resolve(objects, namespace, name, &labels, &annotations);
        Self::of_source(source, labels, annotations)
    }

    fn of_source(
        source: ConfigSource<'o>,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> Self {
        let config = source.config(&annotations);
        Self {
            labels,
            annotations,
            source,
            config,
        }
    }

    /// As the listing saw the Application, with the listing's resolution when it has one.
    pub fn of_listed(
        meta: &AppMeta,
        resolution: Option<&Resolution>,
        objects: &'o [ImageUpdaterObject],
    ) -> Self {
        let (labels, annotations) = (meta.labels.clone(), meta.annotations.clone());
        match resolution.and_then(|r| r.source(objects)) {
            Some(source) => Self::of_source(source, labels, annotations),
            None => Self::resolve(objects, &meta.namespace, &meta.name, labels, annotations),
        }
    }

    /// As the Application was read.
    pub fn of_read(app: &Value, objects: &'o [ImageUpdaterObject]) -> Self {
        let Identity { namespace, name } = Identity::of(app);
        let Metadata {
            labels,
            annotations: all,
            ..
        } = Metadata::of(app);
        let configuring = annotations::configuring(&all);
        Self::resolve(objects, namespace, name, labels, configuring)
    }

    /// The resolution for `app` as read: this one if the labels and annotations it was
    /// resolved from are unchanged, a new one otherwise.
    pub fn for_read(self, app: &Value, objects: &'o [ImageUpdaterObject]) -> Self {
        let Metadata {
            labels,
            annotations: all,
            ..
        } = Metadata::of(app);
        let configuring = annotations::configuring(&all);
        if labels == self.labels && configuring == self.annotations {
            return self;
        }
        let Identity { namespace, name } = Identity::of(app);
        Self::resolve(objects, namespace, name, labels, configuring)
    }

    /// Where a freeze may be set for this Application, with its value: its own annotation,
    /// and the annotation of the ImageUpdater object that configures it.
    pub fn freeze_settings(&self) -> Vec<(String, &str)> {
        let mut settings = Vec::new();
        if let Some(value) = self.annotations.get(controls::FREEZE) {
            settings.push(("the Application".to_string(), value.as_str()));
        }
        if let ConfigSource::Object { object, .. } = &self.source
            && let Some(value) = object.metadata.annotations.get(controls::FREEZE)
        {
            let meta = &object.metadata;
            let origin = format!("ImageUpdater {}/{}", meta.namespace, meta.name);
            settings.push((origin, value.as_str()));
        }
        settings
    }

    /// The `git` write-back's settings, when the Application is written back by a commit.
    pub fn git(&self) -> Option<GitSettings<'_>> {
        let config = self.config.as_ref()?;
        match &config.write_back {
            Ok(
                method @ Method::Git {
                    credentials,
                    branch,
                    pull_request,
                    ..
                },
            ) => Some(GitSettings {
                method,
                credentials,
                branch: branch.as_deref(),
                pull_request: pull_request.as_ref(),
            }),
            _ => None,
        }
    }
}

/// How one attempt at an Application ended.
pub(super) enum Attempt {
    /// Decided, and written or not: its entries are in the report.
    Done,
    /// What the decision read changed before the write landed: read, decide and write again.
    Raced {
        race: String,
        decided: Box<AppDecision>,
    },
}

impl Handler {
    /// One Application: read, decide, write; re-read and re-decide after a race. Returns
    /// the Application as last read, when it was read and selected (its charts are decided
    /// on it).
    pub(super) async fn process(
        &self,
        concerned: &Concerned,
        objects: &[ImageUpdaterObject],
        work: &Work<'_>,
        report: &mut Report,
    ) -> Option<Value> {
        let (ns, name) = concerned.names();
        let kube = work.kube;
        let mut resolved = match concerned {
            Concerned::Listed {
                meta, resolution, ..
            } => Some(Resolved::of_listed(meta, resolution.as_ref(), objects)),
            Concerned::Named { .. } => None,
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
                if attempt == 0
                    && matches!(work.mode, Mode::Reconcile)
                    && let Some(listed) = &resolved
                {
                    self.prefetch_tag_lists(listed, work).await;
                }
            })
            .await;
            let app = match read {
                Ok(app) => app,
                Err(KubeError::NotFound { .. }) => {
                    report.entries.push(entries::deleted(ns, name));
                    return None;
                }
                Err(e) => {
                    let entry = entries::unreadable(ns, name, &e.to_string(), e.is_retryable());
                    report.entries.push(entry);
                    return None;
                }
            };
            // The listing sent the selector, but a shard names Applications it did not list
            // now, and labels change between a list and a read: the object read decides.
            if !self.config.selects.matches(&Metadata::of(&app).labels) {
                let selector = self.config.label_selector.as_deref().unwrap_or_default();
                report.entries.push(entries::unselected(ns, name, selector));
                return None;
            }
            let current = match resolved.take() {
                Some(listed) => listed.for_read(&app, objects),
                None => Resolved::of_read(&app, objects),
            };
            let resolved: &Resolved<'_> = resolved.insert(current);
            // The git method reads the file first and decides on the Application as Argo CD
            // renders it with that file; it re-reads Git, not the Application, after a race.
            let ended = match resolved.git() {
                Some(git) => self.attempt_git(&app, resolved, &git, work, report).await,
                None => {
                    let refused = &mut last_refused;
                    self.attempt_patch(&app, resolved, work, refused, report)
                        .await
                }
            };
            let Attempt::Raced { race, decided } = ended else {
                return Some(app);
            };
            report.stats.conflicts += 1;
            if attempt == self.config.conflict_retries {
                let reason = entries::kept_changing(attempt + 1, &race);
                report
                    .entries
                    .extend(decided.refused(Action::Failed, &reason, true));
                return Some(app);
            }
            tokio::time::sleep(backoff(attempt, None)).await;
        }
        None
    }

    /// One attempt with Image Updater's `argocd` method: decide on the Application as read,
    /// then one guarded JSON patch. `last_refused` is the content a guard refused on the
    /// previous attempt: refused again on a fresh read, the server refuses the content.
    async fn attempt_patch(
        &self,
        app: &Value,
        resolved: &Resolved<'_>,
        work: &Work<'_>,
        last_refused: &mut Option<Value>,
        report: &mut Report,
    ) -> Attempt {
        let Some((decided, plan)) = self.decide_to_write(app, resolved, work, report).await else {
            return Attempt::Done;
        };
        let writer = ApplicationPatch {
            kube: work.kube,
            deadline: work.deadline,
        };
        // The write-back's own conditions (an ApplicationSet that would revert a patch),
        // checked in a dry run too, so `plan` says what a real run would do.
        let read = Application::of(app);
        if let Err(refusal) = writer.check(&read, &plan).await {
            report.entries.extend(refused_by(decided, &refusal));
            return Attempt::Done;
        }
        if self.config.dry_run {
            let entries = decided.entries.into_iter();
            report
                .entries
                .extend(entries.map(|e| decide::app::dry_run(e, &plan)));
            return Attempt::Done;
        }
        report.stats.patches += 1;
        let (race, guard_failed) = match writer.write(&read, &plan).await {
            Ok(()) => {
                let now = time::OffsetDateTime::from(self.clock.now());
                crate::pipeline::announce::record_event(work.kube, app, &decided.entries, now)
                    .await;
                report.stats.events += 1;
                let notes = self.follow_write(work, app, &plan.audit, None).await;
                let mut entries = decided.entries;
                add_notes(&mut entries, &notes);
                report.entries.extend(entries);
                return Attempt::Done;
            }
            Err(WriteError::Race(message)) => (message, true),
            Err(WriteError::Conflict(message)) => (message, false),
            Err(refusal) => {
                report.entries.extend(refused_by(decided, &refusal));
                return Attempt::Done;
            }
        };
        // The same content refused twice on a fresh read is not a race: the server
        // rejects the content itself. The audit timestamp is left out of the comparison.
        let content = Value::Array(plan.content().into_iter().cloned().collect());
        if guard_failed && last_refused.as_ref() == Some(&content) {
            let reason = entries::refused_twice(&race);
            report
                .entries
                .extend(decided.refused(Action::Failed, &reason, false));
            return Attempt::Done;
        }
        *last_refused = guard_failed.then_some(content);
        Attempt::Raced {
            race,
            decided: Box::new(decided),
        }
    }

    /// The decision on `app` and its write plan; `None` when there is nothing to write (not
    /// configured, or every image kept), with the entries that say why already reported.
    pub(super) async fn decide_to_write(
        &self,
        app: &Value,
        resolved: &Resolved<'_>,
        work: &Work<'_>,
        report: &mut Report,
    ) -> Option<(AppDecision, crate::decision::patch::WritePlan)> {
        let Some(decided) = self.decide_app(app, resolved, work).await else {
            // An Application that names charts only is decided by its charts' path.
            if !Metadata::of(app)
                .annotations
                .contains_key(crate::appconfig::charts::CHART_LIST)
            {
                let Identity {
                    namespace: ns,
                    name,
                } = Identity::of(app);
                report.entries.push(entries::not_annotated(ns, name));
            }
            return None;
        };
        let now = time::OffsetDateTime::from(self.clock.now());
        if !self.config.dry_run
            && crate::pipeline::announce::record_rollback(work.kube, app, &decided.entries, now)
                .await
        {
            report.stats.events += 1;
        }
        if !self.config.dry_run
            && let Some(config) = &resolved.config
            && let Some(next) =
                rollback::to_remember(&Application::of(app), config, &decided.entries)
        {
            remember_rollbacks(app, &next, work).await;
        }
        let hold = controls::hold(&resolved.freeze_settings(), now);
        if decided.plan.is_some() && hold != Hold::Open {
            report
                .entries
                .extend(controls::held(decided.entries, &hold));
            return None;
        }
        match decided.plan.clone() {
            Some(plan) => Some((decided, plan)),
            None => {
                report.entries.extend(decided.entries);
                None
            }
        }
    }

    /// Reconcile: the tag lists the Application's configuration will ask for.
    async fn prefetch_tag_lists(&self, resolved: &Resolved<'_>, work: &Work<'_>) {
        let Some(config) = &resolved.config else {
            return;
        };
        let repositories = decide::reconcile_repositories(config, &self.region);
        futures_util::future::join_all(
            repositories
                .iter()
                .map(|(registry, repository)| work.facts.tag_list(registry, repository)),
        )
        .await;
    }

    /// Decides every image of `app` that this invocation concerns, with the configuration
    /// `resolved` gives it; `None` if nothing configures it.
    pub(super) async fn decide_app(
        &self,
        app: &Value,
        resolved: &Resolved<'_>,
        work: &Work<'_>,
    ) -> Option<AppDecision> {
        let decided = match (&resolved.source, &resolved.config) {
            (ConfigSource::Conflict(names), _) => {
                AppDecision::skipped(vec![decide::app::contested(Identity::of(app), names)])
            }
            (_, None) => return None,
            (_, Some(config)) => self.decide_configured(app, config, work).await,
        };
        Some(decide::app::configured_by(decided, &resolved.source))
    }

    async fn decide_configured(
        &self,
        app: &Value,
        config: &AppConfig,
        work: &Work<'_>,
    ) -> AppDecision {
        let concerned = concerned_images(config, work.mode);
        let view = Application::of(app);
        if let Some(reason) = crate::decision::patch::app_skip_reason(&view.view, config) {
            let entries = every_image(app, &concerned, Action::Skipped, &reason, false);
            return AppDecision::skipped(entries);
        }
        let mut gated = Vec::new();
        let mut outcomes = Vec::new();
        for image_entry in concerned {
            match decide::prepare(&view, image_entry, &self.region) {
                Ok(case) => {
                    for note in &case.config.notes {
                        tracing::info!(image = %case.config.image, note = %note, "annotation note");
                    }
                    let outcome = self.decide_image(&case, work).await;
                    let outcome = controls::hold_after_failure(outcome, case.config, &view);
                    outcomes.push((case.config, outcome));
                }
                Err(entry) => gated.push(*entry),
            }
        }
        let now = time::OffsetDateTime::from(self.clock.now());
        decide::assemble(&view, gated, outcomes, now, work.event_id())
    }
}

/// Notes on what followed a write, on the entries of the images it updated.
pub(super) fn add_notes(entries: &mut [Entry], notes: &[String]) {
    for entry in entries.iter_mut().filter(|e| e.action == Action::Updated) {
        for note in notes {
            entry.reason.push_str(&format!("; {note}"));
        }
    }
}

/// The entries of a decision whose write did not happen.
fn refused_by(decided: AppDecision, error: &WriteError) -> Vec<Entry> {
    let (action, reason, retryable) = error.as_entry();
    decided.refused(action, &reason, retryable)
}

/// The image-list entries this invocation concerns.
pub(super) fn concerned_images<'c>(config: &'c AppConfig, mode: Mode<'_>) -> Vec<&'c ImageEntry> {
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
pub(super) fn every_image(
    app: &Value,
    concerned: &[&ImageEntry],
    action: Action,
    reason: &str,
    retryable: bool,
) -> Vec<Entry> {
    concerned
        .iter()
        .map(|e| {
            let mut entry =
                decide::base_entry(Identity::of(app), e.alias.as_deref(), &e.image.to_string())
                    .with(action, reason);
            entry.retryable = retryable;
            entry
        })
        .collect()
}

/// Writes the manual rollbacks respected into the Application's memory of them
/// (`argocd-ecr-updater.io/rollbacks`), guarded by that annotation and our audit record as
/// read (what the memory is derived from). A refusal or a failure only delays it: the
/// decision stands, and the next one sees the same rollback and writes it again.
async fn remember_rollbacks(
    app: &Value,
    next: &BTreeMap<String, crate::application::rollbacks::RememberedRollback>,
    work: &Work<'_>,
) {
    let Identity { namespace, name } = Identity::of(app);
    let audit = format!(
        "/metadata/annotations/{}",
        crate::decision::patch::escape_pointer(annotations::AUDIT_ANNOTATION)
    );
    let mut ops = vec![serde_json::json!({"op": "test", "path": audit,
        "value": app["metadata"]["annotations"][annotations::AUDIT_ANNOTATION]})];
    ops.extend(crate::application::rollbacks::patch_ops(app, next));
    let patch = crate::cluster::kube::Patch::Json(Value::Array(ops));
    let kube = work.kube;
    let written = retry_transient(work.deadline, || {
        kube.patch_application(namespace, name, &patch)
    })
    .await;
    if let Err(e) = written {
        tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "cannot remember the manual rollback respected; the next decision tries again");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMAGE_LIST: &str = "argocd-image-updater.argoproj.io/image-list";
    const WRITE_BACK: &str = "argocd-image-updater.argoproj.io/write-back-method";

    fn app(annotations: Value, labels: Value) -> Value {
        json!({"metadata": {"namespace": "argocd", "name": "web",
            "annotations": annotations, "labels": labels}})
    }

    fn resolved_from(app: &Value) -> Resolved<'static> {
        let Identity { namespace, name } = Identity::of(app);
        Resolved::resolve(
            &[],
            namespace,
            name,
            Metadata::of(app).labels,
            annotations::configuring(&Metadata::of(app).annotations),
        )
    }

    #[test]
    fn a_read_with_the_same_configuration_keeps_the_resolution() {
        let listed = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web"}),
            json!({}),
        );
        // Another annotation and our audit record changed: neither is configuration.
        let read = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web", "note": "x",
                annotations::AUDIT_ANNOTATION: "{}"}),
            json!({}),
        );
        let resolved = resolved_from(&listed);
        let before = resolved.config.as_ref().map(|c| c.images.len());
        let again = resolved.for_read(&read, &[]);
        assert_eq!(again.config.as_ref().map(|c| c.images.len()), before);
        assert_eq!(
            again.annotations,
            annotations::configuring(&Metadata::of(&listed).annotations)
        );
    }

    #[test]
    fn a_read_whose_image_list_changed_is_resolved_again() {
        let listed = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web"}),
            json!({}),
        );
        let read = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web,api=1.dkr.ecr.r.amazonaws.com/api"}),
            json!({}),
        );
        let again = resolved_from(&listed).for_read(&read, &[]);
        assert_eq!(again.config.map(|c| c.images.len()), Some(2));
    }

    #[test]
    fn a_read_that_lost_its_image_list_is_no_longer_configured() {
        let listed = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web"}),
            json!({}),
        );
        let read = app(json!({}), json!({"team": "a"}));
        assert!(resolved_from(&listed).for_read(&read, &[]).config.is_none());
    }

    #[test]
    fn git_settings_come_from_the_write_back_method_and_argocd_has_none() {
        let git = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web",
                WRITE_BACK: "git:secret:argocd/creds",
                "argocd-image-updater.argoproj.io/git-branch": "main:image-updates"}),
            json!({}),
        );
        let resolved = resolved_from(&git);
        let settings = resolved.git().map(|g| (g.credentials, g.branch));
        assert_eq!(
            settings,
            Some(("git:secret:argocd/creds", Some("main:image-updates")))
        );
        let patched = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web", WRITE_BACK: "argocd"}),
            json!({}),
        );
        assert!(resolved_from(&patched).git().is_none());
    }
}
