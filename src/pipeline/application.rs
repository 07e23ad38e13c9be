//! One Application, from its read to its entries in the report: its configuration resolved
//! once ([`super::resolved`]), decided ([`super::decided`]), and written back by its method
//! (the Application patch here, or a commit to its Git repository, [`super::git_attempt`]);
//! read and decided again after a race.

use serde_json::Value;

use super::context::{Context, Work};
use super::decided::{Attempt, decide_to_write, prefetch_tag_lists};
use super::git_attempt::attempt_git;
use super::listing::Concerned;
use super::resolved::Resolved;
use crate::appconfig::annotations;
use crate::appconfig::imageupdater::ImageUpdaterObject;
use crate::apply::writeback::{ApplicationPatch, WriteError, Writer};
use crate::cluster::kube::KubeError;
use crate::cluster::retry::{backoff, retry_transient};
use crate::decision::decide::{self, AppDecision, Mode};
use crate::report::entries;
use crate::report::{Action, Entry, Report};

/// One Application: read, decide, write; re-read and re-decide after a race. Returns
/// the Application as last read, when it was read and selected (its charts are decided
/// on it).
pub(super) async fn process(
    ctx: &Context,
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
    for attempt in 0..=ctx.config.conflict_retries {
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
                prefetch_tag_lists(ctx, listed, work).await;
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
        if !ctx.config.selects.matches(&annotations::labels_of(&app)) {
            let selector = ctx.config.label_selector.as_deref().unwrap_or_default();
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
            Some(git) => attempt_git(ctx, &app, resolved, &git, work, report).await,
            None => {
                let refused = &mut last_refused;
                attempt_patch(ctx, &app, resolved, work, refused, report).await
            }
        };
        let Attempt::Raced { race, decided } = ended else {
            return Some(app);
        };
        report.stats.conflicts += 1;
        if attempt == ctx.config.conflict_retries {
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
    ctx: &Context,
    app: &Value,
    resolved: &Resolved<'_>,
    work: &Work<'_>,
    last_refused: &mut Option<Value>,
    report: &mut Report,
) -> Attempt {
    let Some((decided, plan)) = decide_to_write(ctx, app, resolved, work, report).await else {
        return Attempt::Done;
    };
    let writer = ApplicationPatch {
        kube: work.kube,
        deadline: work.deadline,
    };
    // The write-back's own conditions (an ApplicationSet that would revert a patch),
    // checked in a dry run too, so `plan` says what a real run would do.
    if let Err(refusal) = writer.check(app, &plan).await {
        report.entries.extend(refused_by(decided, &refusal));
        return Attempt::Done;
    }
    if ctx.config.dry_run {
        let entries = decided.entries.into_iter();
        report
            .entries
            .extend(entries.map(|e| decide::app::dry_run(e, &plan)));
        return Attempt::Done;
    }
    report.stats.patches += 1;
    let (race, guard_failed) = match writer.write(app, &plan).await {
        Ok(()) => {
            let now = time::OffsetDateTime::from(ctx.clock.now());
            crate::pipeline::announce::record_event(work.kube, app, &decided.entries, now).await;
            report.stats.events += 1;
            let notes = ctx
                .follow()
                .follow_write(&work.on_cluster(), app, &plan.audit, None)
                .await;
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
