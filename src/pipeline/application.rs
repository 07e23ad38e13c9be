//! One Application's images as a [`Change`], from its read to its entries in the report: its
//! configuration resolved once ([`super::resolved`]), decided ([`super::decided`]), and
//! written back by its method (the Application patch here, or a commit to its Git
//! repository, [`super::git_attempt`]); read and decided again after a race
//! ([`super::change`]).

use serde_json::Value;

use super::change::{Attempt, Change, read_and_write};
use super::context::{Context, Work};
use super::decided::{decide_to_write, prefetch_tag_lists};
use super::git_attempt::attempt_git;
use super::listing::Concerned;
use super::resolved::Resolved;
use crate::appconfig::imageupdater::ImageUpdaterObject;
use crate::application::app::Application;
use crate::apply::writeback::{ApplicationPatch, WriteError, Writer};
use crate::decision::decide::{AppDecision, Mode};
use crate::report::entries;
use crate::report::{Action, Entry, Report};

/// An Application's images, one [`Change`]: its configuration resolved (as the listing saw
/// it, then from each read), and the content a guard refused on the attempt before.
struct Images<'o> {
    objects: &'o [ImageUpdaterObject],
    resolved: Option<Resolved<'o>>,
    last_refused: Option<Value>,
}

impl Change for Images<'_> {
    const REPORTS_UNSELECTED: bool = true;

    /// A reconcile's tag lists depend on the configuration the listing already showed, not
    /// on the read: asked for while the Application is read, they have arrived when it is
    /// decided, one round trip sooner. The cache keeps them (and any error) for the
    /// decision, which asks again.
    async fn before_first_read(&self, ctx: &Context, work: &Work<'_>) {
        if matches!(work.mode, Mode::Reconcile)
            && let Some(listed) = &self.resolved
        {
            prefetch_tag_lists(ctx, listed, work).await;
        }
    }

    async fn attempt(
        &mut self,
        ctx: &Context,
        app: &Application<'_>,
        work: &Work<'_>,
        report: &mut Report,
    ) -> Attempt {
        let current = match self.resolved.take() {
            Some(listed) => listed.for_read(app, self.objects),
            None => Resolved::of_read(app, self.objects),
        };
        let resolved: &Resolved<'_> = self.resolved.insert(current);
        // The git method reads the file first and decides on the Application as Argo CD
        // renders it with that file; it re-reads Git, not the Application, after a race.
        match resolved.git() {
            Some(git) => attempt_git(ctx, app, resolved, &git, work, report).await,
            None => {
                let refused = &mut self.last_refused;
                attempt_patch(ctx, app, resolved, work, refused, report).await
            }
        }
    }
}

/// One Application's images: read, decide, write; re-read and re-decide after a race.
/// Returns the Application as last read, when it was read and selected (its charts are
/// decided on it).
pub(super) async fn process(
    ctx: &Context,
    concerned: &Concerned,
    objects: &[ImageUpdaterObject],
    work: &Work<'_>,
    report: &mut Report,
) -> Option<Value> {
    let resolved = match concerned {
        Concerned::Listed {
            meta, resolution, ..
        } => Some(Resolved::of_listed(meta, resolution.as_ref(), objects)),
        Concerned::Named { .. } => None,
    };
    let mut images = Images {
        objects,
        resolved,
        last_refused: None,
    };
    read_and_write(ctx, concerned.names(), None, &mut images, work, report).await
}

/// One attempt with Image Updater's `argocd` method: decide on the Application as read,
/// then one guarded JSON patch. `last_refused` is the content a guard refused on the
/// previous attempt: refused again on a fresh read, the server refuses the content.
async fn attempt_patch(
    ctx: &Context,
    app: &Application<'_>,
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
            .extend(entries.map(|e| entries::dry_run(e, &plan.patch)));
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
