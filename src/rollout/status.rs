//! The commit status a rollout sets on the commit its image was built from (opt-in,
//! `argocd-ecr-updater.io/commit-status: "true"`): `pending` at the write, `success` or
//! `failure` at the outcome (or, for a write that will not be followed or was superseded
//! first, GitHub's `error` / GitLab's `canceled` saying why: no status stays `pending` for
//! ever), one context per Application so that each cluster and
//! Application a commit reaches shows on its own line (pure).

use crate::application::app::Application;
use crate::git::githost::{CommitStatus, StatusState};
use crate::rollout::judge::Outcome;

pub const ANNOTATION: &str = "argocd-ecr-updater.io/commit-status";

/// GitHub refuses a longer description; GitLab takes it.
const MAX_DESCRIPTION: usize = 140;
/// GitHub's and GitLab's limit on a context's (a name's) length.
const MAX_CONTEXT: usize = 255;

/// Whether the Application asks for commit statuses, or why its annotation does not read.
pub fn wanted(app: &Application<'_>) -> Result<bool, String> {
    match app.annotation(ANNOTATION) {
        None => Ok(false),
        Some(value) => crate::appconfig::annotations::go_parse_bool(value).ok_or_else(|| {
            format!(
                "`{ANNOTATION}: {}` is not true or false",
                crate::redact::scrub(value)
            )
        }),
    }
}

/// `argocd-ecr-updater/<cluster>/<namespace>/<app>`.
pub fn context(cluster: &str, namespace: &str, name: &str) -> String {
    cap(
        &format!("argocd-ecr-updater/{cluster}/{namespace}/{name}"),
        MAX_CONTEXT,
    )
}

/// The status at the write: `image:tag` is rolling out.
pub fn pending(context: String, image: &str) -> CommitStatus {
    let short = image.rsplit('/').next().unwrap_or(image);
    CommitStatus {
        state: StatusState::Pending,
        context,
        description: cap(&format!("rolling out {short}"), MAX_DESCRIPTION),
    }
}

/// The status of a write whose rollout is not followed (`why`): its outcome will not be
/// reported, so the status says so instead of staying `pending`.
pub fn unfollowed(context: String, image: &str, why: &str) -> CommitStatus {
    let short = image.rsplit('/').next().unwrap_or(image);
    CommitStatus {
        state: StatusState::Unknown,
        context,
        description: cap(
            &format!("{short} written, not followed: {why}"),
            MAX_DESCRIPTION,
        ),
    }
}

/// The status of a write replaced by a newer one (written at `at`) before its rollout was
/// judged: the newer write is followed instead.
pub fn superseded(context: String, image: &str, at: &str) -> CommitStatus {
    let short = image.rsplit('/').next().unwrap_or(image);
    CommitStatus {
        state: StatusState::Unknown,
        context,
        description: cap(
            &format!("{short} superseded by a newer write at {at} before it was live"),
            MAX_DESCRIPTION,
        ),
    }
}

/// The status at the outcome, with the lead time from the push when it is known.
pub fn outcome(
    context: String,
    outcome: Outcome,
    reason: &str,
    lead_seconds: Option<f64>,
) -> CommitStatus {
    let (state, description) = match outcome {
        Outcome::Confirmed => (
            StatusState::Success,
            match lead_seconds {
                Some(lead) => format!("live and Healthy {lead:.0} s after the ECR push"),
                None => "live and Healthy".to_string(),
            },
        ),
        Outcome::Failed => (StatusState::Failure, format!("rollout failed: {reason}")),
        Outcome::TimedOut => (StatusState::Failure, format!("rollout timed out: {reason}")),
        // Someone else decided: not a failure of the image, and no longer followed.
        Outcome::TakenBack => (
            StatusState::Unknown,
            format!("not followed: taken back: {reason}"),
        ),
    };
    CommitStatus {
        state,
        context,
        description: cap(&description, MAX_DESCRIPTION),
    }
}

/// `text` cut to `limit` characters, marked with `…` when cut.
fn cap(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(limit - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// [`super::wanted`] of the Application the JSON fixture is, as read.
    fn wanted(app: &Value) -> Result<bool, String> {
        super::wanted(&Application::of(app))
    }

    #[test]
    fn each_outcome_sets_the_state_the_hosts_know_with_a_description_they_accept() {
        let context = || context("prod", "argocd", "web");
        assert_eq!(context(), "argocd-ecr-updater/prod/argocd/web");
        let cases = [
            (
                outcome(
                    context(),
                    Outcome::Confirmed,
                    "running and Healthy",
                    Some(94.6),
                ),
                StatusState::Success,
                "live and Healthy 95 s after the ECR push",
            ),
            (
                outcome(context(), Outcome::Confirmed, "running and Healthy", None),
                StatusState::Success,
                "live and Healthy",
            ),
            (
                outcome(context(), Outcome::Failed, "health is Degraded", Some(3.0)),
                StatusState::Failure,
                "rollout failed: health is Degraded",
            ),
            (
                outcome(context(), Outcome::TimedOut, "never synced", None),
                StatusState::Failure,
                "rollout timed out: never synced",
            ),
            (
                pending(context(), "1.dkr.ecr.r.amazonaws.com/team/web:1.2"),
                StatusState::Pending,
                "rolling out web:1.2",
            ),
            (
                unfollowed(
                    context(),
                    "1.dkr.ecr.r.amazonaws.com/team/web:1.2",
                    "no sweep queue (SWEEP_QUEUE_URL)",
                ),
                StatusState::Unknown,
                "web:1.2 written, not followed: no sweep queue (SWEEP_QUEUE_URL)",
            ),
            (
                superseded(
                    context(),
                    "1.dkr.ecr.r.amazonaws.com/team/web:1.2",
                    "2026-12-03T10:00:00Z",
                ),
                StatusState::Unknown,
                "web:1.2 superseded by a newer write at 2026-12-03T10:00:00Z before it was live",
            ),
        ];
        for (status, state, description) in cases {
            assert_eq!(
                (status.state, status.description.as_str()),
                (state, description)
            );
        }
        let long = outcome(context(), Outcome::Failed, &"x".repeat(500), None);
        assert_eq!(long.description.chars().count(), MAX_DESCRIPTION);
        assert!(long.description.ends_with('…'));
    }

    #[test]
    fn only_an_application_that_asks_gets_statuses() {
        let with = |v: &str| json!({"metadata": {"annotations": {ANNOTATION: v}}});
        assert_eq!(wanted(&json!({})), Ok(false));
        assert_eq!(wanted(&with("true")), Ok(true));
        assert_eq!(wanted(&with("false")), Ok(false));
        assert!(
            wanted(&with("please"))
                .unwrap_err()
                .contains("not true or false")
        );
    }
}
