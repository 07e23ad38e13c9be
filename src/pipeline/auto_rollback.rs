//! Auto-rollback of one image (`<alias>.auto-rollback`): once the image's last rollout
//! failed, the image is remembered as taken back on the Application (with ECR's digest for
//! it, so a push of the same image under another tag is known too; once, marked on the
//! failure, so a person who deletes the entry has released it), and while the Application
//! still asks for what that write wrote, what the write replaced is decided as the update,
//! which the Application's own write-back method carries out like any other: a guarded
//! patch or a commit. Remembered first: a rollback written but not remembered would let the
//! next push of the same image deploy it again.

use super::context::{Context, Work};
use crate::application::app::Application;
use crate::application::rolled_back::{self, RolledBack};
use crate::cluster::kube::{KubeError, Patch};
use crate::cluster::retry::retry_transient;
use crate::decision::decide::{self, ImageCase, ImageOutcome, Mode};
use crate::policy::TagRef;
use crate::report::Action;

/// The rollback of `case`'s image when one is due, else `None` (decided as usual).
pub(super) async fn decide_rollback(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
) -> Option<ImageOutcome> {
    let app = Application::of(case.object());
    let failures = app.failed_rollouts();
    let failed = decide::rollback_due(case.config, &failures)?;
    // A rollback whose own rollout failed never goes "back" to the image it took back.
    let image = case.config.image.to_string();
    let from = failed.from.as_deref().unwrap_or_default();
    if rolled_back::find(&app.rolled_back(), &image, from, None).is_some() {
        return None;
    }
    // Only while our last write of the image is the failed one: once the rollback (or any
    // later write) is written, what the spec asks for is someone else's choice.
    let ours = app
        .audit
        .as_ref()
        .and_then(|record| record.last_write_of(&image))
        .is_some_and(|write| write.image.to == failed.to);
    // A push after the failure is a fix on its way: decided as a push (a newer image moves
    // forward); if it is not written, the wake-up or the next sweep rolls back.
    let fix_pushed = match (work.mode, failed.time()) {
        // EventBridge stamps whole seconds: a push in the failure's second counts as after.
        (Mode::Push(push), Some(failed_at)) => push.time + time::Duration::seconds(1) > failed_at,
        _ => false,
    };
    let ours = ours && !fix_pushed;
    let outcome = match (ours, case.decide_rollback(failed)) {
        (true, Some(outcome)) => Some(still_in_ecr(case, work, from, outcome).await),
        _ => None,
    };
    if ctx.config.dry_run || failed.taken_back {
        return outcome;
    }
    // Remembered once the failure is known, whether or not the spec still asks for it (a
    // person may have moved it already): no automatic path may write it again.
    let entry = RolledBack {
        to: failed.to.clone(),
        digest: digest_of(&app, case, work, &failed.to).await,
        from: failed.from.clone().unwrap_or_default(),
        at: failed.at.clone(),
        reason: failed.reason.clone(),
    };
    match (remember(ctx, case, work, entry).await, outcome) {
        (Ok(()), outcome) => outcome,
        (Err(why), Some(outcome)) => Some(outcome.refuse(
            Action::Failed,
            &format!(
                "{}: not written, since the image taken back could not be remembered ({why}); decided again on the next delivery or sweep",
                crate::report::events::AUTO_ROLLBACK
            ),
            true,
        )),
        (Err(why), None) => {
            tracing::warn!(image = %case.config.image, why, "auto-rollback: the image taken back could not be remembered; the next decision tries again");
            None
        }
    }
}

/// The rollback, if ECR still has what it writes back (a lifecycle policy may have expired
/// it, and an image no node can pull restores nothing); else refused with the reason.
async fn still_in_ecr(
    case: &ImageCase<'_>,
    work: &Work<'_>,
    from: &str,
    outcome: ImageOutcome,
) -> ImageOutcome {
    let value = TagRef::from(from);
    if value.tag.starts_with("sha256:") {
        return outcome;
    }
    let described = work
        .facts
        .describe_one(&case.registry, &case.repository, &value.tag)
        .await;
    let why = match described {
        Ok(Some(info)) if !info.archived => return outcome,
        Ok(Some(_)) => format!("`{from}` is archived in ECR"),
        Ok(None) => format!("`{from}` is no longer in ECR"),
        Err(e) => {
            return outcome.refuse(
                Action::Failed,
                &format!(
                    "{}: whether ECR still has `{from}` is unknown ({}); decided again on the next delivery or sweep",
                    crate::report::events::AUTO_ROLLBACK,
                    e.message
                ),
                e.retryable,
            );
        }
    };
    outcome.refuse(
        Action::Failed,
        &format!(
            "{}: {why}, so nothing is written back (an image no node can pull restores nothing); roll back by hand to an image ECR has",
            crate::report::events::AUTO_ROLLBACK
        ),
        false,
    )
}

/// The digest of the failed write's image: the one its audit record kept, its own when the
/// value names one, else ECR's for the tag now, only while ECR's push time for it is the one
/// the record kept (a tag moved since names another image); none when nothing says, and the
/// tag alone is remembered then.
async fn digest_of(
    app: &Application<'_>,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    value: &str,
) -> Option<String> {
    let image = case.config.image.to_string();
    let written = app
        .audit
        .as_ref()
        .and_then(|record| record.last_write_of(&image))
        .filter(|write| write.image.to == value);
    if let Some(digest) = written.as_ref().and_then(|w| w.image.digest.clone()) {
        return Some(digest);
    }
    let value = TagRef::from(value);
    if let Some(digest) = value.digest {
        return Some(digest);
    }
    if value.tag.starts_with("sha256:") {
        return Some(value.tag);
    }
    let pushed = written.and_then(|w| w.image.pushed)?;
    let described = work
        .facts
        .describe_one(&case.registry, &case.repository, &value.tag)
        .await;
    match described {
        Ok(described) => described
            .filter(|info| info.pushed_at == Some(pushed))
            .and_then(|info| info.digest),
        Err(e) => {
            tracing::warn!(image = %case.config.image, error = %e.message, "ECR did not name the digest of the image taken back; its tag alone is remembered");
            None
        }
    }
}

/// Adds `entry` to the Application's images taken back and marks its failure as taken back,
/// in one patch guarded by what was read, read again on a conflict; `Err`: why it is not
/// recorded.
async fn remember(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    entry: RolledBack,
) -> Result<(), String> {
    let identity = case.identity();
    let (namespace, name) = (identity.namespace, identity.name);
    let image = case.config.image.to_string();
    let mut read = case.object().clone();
    for _ in 0..=ctx.config.conflict_retries {
        let app = Application::of(&read);
        // A broken memory is a person's to fix: writing over it would release what it held.
        if let Some(problem) = app.rolled_back_unreadable() {
            return Err(problem);
        }
        let mut ops = match rolled_back::with(&app.rolled_back(), &image, entry.clone()) {
            Some(next) => app.rolled_back_ops(&next),
            None => Vec::new(),
        };
        let mut failures = app.failed_rollouts();
        match failures.get_mut(&image) {
            Some(failed) if failed.to == entry.to && !failed.taken_back => {
                failed.taken_back = true;
                ops.extend(app.failed_rollouts_ops(&failures));
            }
            _ => {}
        }
        if ops.is_empty() {
            return Ok(());
        }
        let patch = Patch::Json(serde_json::Value::Array(ops));
        let kube = work.kube;
        match retry_transient(work.deadline, || {
            kube.patch_application(namespace, name, &patch)
        })
        .await
        {
            Ok(_) => return Ok(()),
            Err(
                KubeError::Invalid {
                    validation: false, ..
                }
                | KubeError::Conflict { .. },
            ) => {
                read = kube
                    .get_application(namespace, name)
                    .await
                    .map_err(|e| format!("the Application could not be read again: {e}"))?;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("the Application kept changing".into())
}
