//! One Application decided, up to its write plan: every image the invocation concerns
//! decided with the registry facts it needs, then the controls that stand between a decision
//! and its write (a freeze, the manual rollbacks remembered). Both write-back methods (the
//! patch in [`super::application`], the commit in [`super::git_attempt`]) start here.

use std::collections::BTreeMap;

use serde_json::Value;

use super::context::{Context, Work};
use super::image::decide_image;
use super::resolved::Resolved;
use crate::appconfig::annotations::{AppConfig, ImageEntry};
use crate::appconfig::imageupdater::ConfigSource;
use crate::application::app::Application;
use crate::cluster::retry::retry_transient;
use crate::decision::controls::{self, Hold};
use crate::decision::decide::{self, AppDecision, Mode};
use crate::decision::rollback;
use crate::report::entries;
use crate::report::{Action, Entry, Report};

/// The decision on `app` and its write plan; `None` when there is nothing to write (not
/// configured, or every image kept), with the entries that say why already reported.
pub(super) async fn decide_to_write(
    ctx: &Context,
    app: &Application<'_>,
    resolved: &Resolved<'_>,
    work: &Work<'_>,
    report: &mut Report,
) -> Option<(AppDecision, crate::decision::patch::WritePlan)> {
    let Some(decided) = decide_app(ctx, app, resolved, work).await else {
        // An Application that names charts only is decided by its charts' path.
        if !app
            .metadata
            .annotations
            .contains_key(crate::appconfig::charts::CHART_LIST)
        {
            let (ns, name) = app.names();
            report.entries.push(entries::not_annotated(ns, name));
        }
        return None;
    };
    let now = time::OffsetDateTime::from(ctx.clock.now());
    if !ctx.config.dry_run
        && crate::pipeline::announce::record_rollback(work.kube, app, &decided.entries, now).await
    {
        report.stats.events += 1;
    }
    if !ctx.config.dry_run
        && let Some(config) = &resolved.config
        && let Some(next) = rollback::to_remember(app, config, &decided.entries)
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
pub(super) async fn prefetch_tag_lists(ctx: &Context, resolved: &Resolved<'_>, work: &Work<'_>) {
    let Some(config) = &resolved.config else {
        return;
    };
    let repositories = decide::reconcile_repositories(config, &ctx.region);
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
    ctx: &Context,
    app: &Application<'_>,
    resolved: &Resolved<'_>,
    work: &Work<'_>,
) -> Option<AppDecision> {
    let decided = match (&resolved.source, &resolved.config) {
        (ConfigSource::Conflict(names), _) => AppDecision::skipped(vec![entries::contested(
            app.identity().namespace,
            app.identity().name,
            names,
        )]),
        (_, None) => return None,
        (_, Some(config)) => decide_configured(ctx, app, config, work).await,
    };
    let mut decided = decided;
    let source = &resolved.source;
    entries::configured_by(
        &mut decided.entries,
        &source.to_string(),
        source.configuring_object(),
    );
    Some(decided)
}

async fn decide_configured(
    ctx: &Context,
    app: &Application<'_>,
    config: &AppConfig,
    work: &Work<'_>,
) -> AppDecision {
    let concerned = concerned_images(config, work.mode);
    let outside = ctx
        .config
        .eks_capability
        .as_ref()
        .and_then(|capability| capability.skip_reason(app.identity().namespace));
    if let Some(reason) =
        outside.or_else(|| crate::decision::patch::app_skip_reason(&app.view, config))
    {
        let entries = every_image(app, &concerned, Action::Skipped, &reason, false);
        return AppDecision::skipped(entries);
    }
    let mut gated = Vec::new();
    let mut outcomes = Vec::new();
    for image_entry in concerned {
        match decide::prepare(app, image_entry, &ctx.region) {
            Ok(case) => {
                for note in &case.config.notes {
                    tracing::info!(image = %case.config.image, note = %note, "annotation note");
                }
                let outcome = decide_image(ctx, &case, work).await;
                let outcome = controls::hold_after_failure(outcome, case.config, app);
                outcomes.push((case.config, outcome));
            }
            Err(entry) => gated.push(*entry),
        }
    }
    let now = time::OffsetDateTime::from(ctx.clock.now());
    decide::assemble(app, gated, outcomes, now, work.event_id())
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
    app: &Application<'_>,
    concerned: &[&ImageEntry],
    action: Action,
    reason: &str,
    retryable: bool,
) -> Vec<Entry> {
    concerned
        .iter()
        .map(|e| {
            let mut entry =
                decide::base_entry(app.identity(), e.alias.as_deref(), &e.image.to_string())
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
    app: &Application<'_>,
    next: &BTreeMap<String, crate::application::rollbacks::RememberedRollback>,
    work: &Work<'_>,
) {
    let (namespace, name) = app.names();
    let ops = app.remembered_rollbacks_ops(next);
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
