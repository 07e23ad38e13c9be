//! One change of an Application, its images or its charts, from the read to the guarded
//! write: one loop ([`read_and_write`]) reads the Application, checks it is still selected,
//! lets the [`Change`] decide and write, and after a race (the Application or the branch
//! moved under the write) reads and decides again, until the retries run out.

use serde_json::Value;

use super::context::{Context, Work};
use crate::application::app::Application;
use crate::cluster::kube::KubeError;
use crate::cluster::retry::{backoff, retry_transient};
use crate::decision::decide::AppDecision;
use crate::report::entries;
use crate::report::{Action, Report};

/// How one attempt at a change ended.
pub(super) enum Attempt {
    /// Decided, and written or not: its entries are in the report.
    Done,
    /// What the decision read changed before the write landed: read, decide and write again.
    Raced {
        race: String,
        decided: Box<AppDecision>,
    },
}

/// What changes of an Application: decided on it as read and written under a guard.
pub(super) trait Change {
    /// Whether an Application the selector no longer selects is reported by this change; the
    /// images' path reports it, the charts' leaves it to the images'.
    const REPORTS_UNSELECTED: bool;

    /// Asked for while the first read is under way (what the decision will need).
    async fn before_first_read(&self, _ctx: &Context, _work: &Work<'_>) {}

    /// One attempt on `app` as read: decided, and written or not.
    async fn attempt(
        &mut self,
        ctx: &Context,
        app: &Application<'_>,
        work: &Work<'_>,
        report: &mut Report,
    ) -> Attempt;
}

/// The Application `namespace/name` read (unless `first` is its read already), `change`
/// decided and written on it; read and decided again after a race. Returns the Application
/// as last read, when it was read and selected.
pub(super) async fn read_and_write<C: Change>(
    ctx: &Context,
    (namespace, name): (&str, &str),
    mut first: Option<Value>,
    change: &mut C,
    work: &Work<'_>,
    report: &mut Report,
) -> Option<Value> {
    let kube = work.kube;
    for attempt in 0..=ctx.config.conflict_retries {
        let read = async {
            match first.take() {
                Some(app) => Ok(app),
                None => {
                    report.stats.gets += 1;
                    retry_transient(work.deadline, || kube.get_application(namespace, name)).await
                }
            }
        };
        let prepared = async {
            if attempt == 0 {
                change.before_first_read(ctx, work).await;
            }
        };
        let (read, ()) = futures_util::future::join(read, prepared).await;
        let read = match read {
            Ok(read) => read,
            Err(KubeError::NotFound { .. }) => {
                report.entries.push(entries::deleted(namespace, name));
                return None;
            }
            Err(e) => {
                let entry = entries::unreadable(namespace, name, &e.to_string(), e.is_retryable());
                report.entries.push(entry);
                return None;
            }
        };
        // The listing sent the selector, but a shard names Applications it did not list
        // now, and labels change between a list and a read: the object read decides.
        let app = Application::of(&read);
        if !ctx.config.selects.matches(&app.metadata.labels) {
            if C::REPORTS_UNSELECTED {
                let selector = ctx.config.label_selector.as_deref().unwrap_or_default();
                report
                    .entries
                    .push(entries::unselected(namespace, name, selector));
            }
            return None;
        }
        let Attempt::Raced { race, decided } = change.attempt(ctx, &app, work, report).await else {
            return Some(read);
        };
        report.stats.conflicts += 1;
        if attempt == ctx.config.conflict_retries {
            let reason = entries::kept_changing(attempt + 1, &race);
            report
                .entries
                .extend(decided.refused(Action::Failed, &reason, true));
            return Some(read);
        }
        tokio::time::sleep(backoff(attempt, None)).await;
    }
    None
}
