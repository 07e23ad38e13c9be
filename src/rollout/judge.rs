//! Whether a write of ours is live, from the Application alone (pure). The write followed is
//! the one our audit record names; Argo CD's status says the rest: the sync operation and
//! the revision it synced, `status.summary.images` (what the rendered manifests run), and the
//! Application's health (Argo CD 3.x keeps health per Application, not per resource).
//!
//! Live: our images are in `summary.images`, the Application is `Synced` by an operation
//! that finished after our write (for a commit: at our revision, or later with our images
//! running), and it is `Healthy`. Failed: that operation ended `Failed`/`Error`, or the
//! Application is `Degraded`/`Missing` after it. A newer write of ours supersedes the one
//! followed; past the deadline, the check says which condition was missing.

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::application::audit::{AuditRecord, AuditedImage, rfc3339_at};

/// How long a write is followed unless the Application says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The Application's own deadline for its rollouts (`30m`, `2h`; at most 7 days).
pub const TIMEOUT_ANNOTATION: &str = "argocd-ecr-updater.io/confirm-timeout";

/// `"true"`: start a sync after a write, as `argocd app sync` does, for an Application
/// without automated sync.
pub const SYNC_ANNOTATION: &str = "argocd-ecr-updater.io/sync";

/// Who a sync we start names as its initiator.
pub const INITIATOR: &str = "argocd-ecr-updater";

/// How a followed write ended, or that it has not yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Running and healthy at `observed` (the check that saw it).
    Live {
        observed: OffsetDateTime,
    },
    Failed(String),
    /// The deadline passed; says which condition was still missing.
    TimedOut(String),
    /// Not yet: says what is awaited, to check again later.
    Pending(String),
    /// A newer write of ours replaced the one followed (at that time): it is followed instead.
    Superseded(OffsetDateTime),
    /// An earlier check recorded the outcome: nothing to report twice.
    Reported(String),
    /// Nothing to follow: the record is gone, or the write went to a pull request.
    Unfollowed(String),
}

/// The outcomes a rollout is reported with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Confirmed,
    Failed,
    TimedOut,
}

impl Outcome {
    /// As recorded and as the `Outcome` metric dimension says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Failed => "failed",
            Self::TimedOut => "timed-out",
        }
    }

    /// The Kubernetes Event's reason.
    pub fn event_reason(self) -> &'static str {
        match self {
            Self::Confirmed => "RolloutConfirmed",
            Self::Failed => "RolloutFailed",
            Self::TimedOut => "RolloutTimedOut",
        }
    }
}

impl Verdict {
    /// The outcome to report, for a verdict that ends the rollout and is not yet reported.
    pub fn outcome(&self) -> Option<(Outcome, String)> {
        match self {
            Self::Live { .. } => Some((Outcome::Confirmed, "running and Healthy".into())),
            Self::Failed(reason) => Some((Outcome::Failed, reason.clone())),
            Self::TimedOut(reason) => Some((Outcome::TimedOut, reason.clone())),
            _ => None,
        }
    }
}

/// Why a check message cannot be taken as one of our writes: the Application's record does
/// not show it. Permanent: the same message reads the same on every delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Permanent.NotOurWrite: {0}; a rollout check follows only a write the Application's argocd-ecr-updater.io/last-update record shows"
)]
pub struct NotOurWrite(pub String);

/// How long the Application's rollouts are followed: its annotation, else the default.
pub fn timeout(app: &Value) -> Result<Duration, String> {
    match app["metadata"]["annotations"][TIMEOUT_ANNOTATION].as_str() {
        None => Ok(DEFAULT_TIMEOUT),
        Some(value) => crate::appconfig::annotations::parse_duration(value)
            .map_err(|problem| format!("`{TIMEOUT_ANNOTATION}`: {problem}")),
    }
}

/// Judges the write made at `write` (as the check message names it) on `app` as read at
/// `now`, with `deadline` the write's time plus its timeout.
pub fn judge(
    app: &Value,
    write: OffsetDateTime,
    now: OffsetDateTime,
    deadline: OffsetDateTime,
) -> Result<Verdict, NotOurWrite> {
    let Some(record) = AuditRecord::of(app) else {
        return Ok(Verdict::Unfollowed(
            "the Application no longer carries our audit record".into(),
        ));
    };
    if record.time > write {
        return Ok(Verdict::Superseded(record.time));
    }
    if record.time < write {
        return Err(NotOurWrite(format!(
            "the message names a write at {}, the Application's last write by this function was at {}",
            stamp(write),
            stamp(record.time)
        )));
    }
    if let Some(done) = &record.rollout {
        return Ok(Verdict::Reported(done.outcome.clone()));
    }
    if record.pull_request {
        return Ok(Verdict::Unfollowed(
            "the write went to a pull request: it is live only once merged, under another revision"
                .into(),
        ));
    }
    Ok(status_verdict(app, &record, now, deadline))
}

/// The verdict from Argo CD's status on a write the record names.
fn status_verdict(
    app: &Value,
    record: &AuditRecord,
    now: OffsetDateTime,
    deadline: OffsetDateTime,
) -> Verdict {
    let status = &app["status"];
    // Argo CD's times are whole seconds: a sync a fraction after our write carries the
    // write's own second.
    let since = whole_second(record.time);
    let operation = &status["operationState"];
    let phase = operation["phase"].as_str().unwrap_or("");
    let started = rfc3339_at(&operation["startedAt"]).filter(|t| *t >= since);
    let finished = rfc3339_at(&operation["finishedAt"]).filter(|t| *t >= since);
    if started.is_some() && matches!(phase, "Failed" | "Error") {
        let message = operation["message"].as_str().unwrap_or("no message");
        return Verdict::Failed(format!(
            "the sync operation after the write ended {phase}: {}",
            crate::redact::scrub(message)
        ));
    }
    let running = running_images(status);
    let missing: Vec<String> = record
        .images
        .iter()
        .filter(|image| !runs(&running, image))
        .map(|image| format!("{}:{}", image.image, image.to))
        .collect();
    let synced_by_operation = phase == "Succeeded" && finished.is_some();
    let ours_synced = match record.commit.as_deref() {
        Some(commit) => {
            synced_at_revision(status, commit, since) || (synced_by_operation && missing.is_empty())
        }
        None => synced_by_operation,
    };
    let sync_status = status["sync"]["status"].as_str().unwrap_or("Unknown");
    let health = status["health"]["status"].as_str().unwrap_or("Unknown");
    if ours_synced && matches!(health, "Degraded" | "Missing") {
        let message = status["health"]["message"]
            .as_str()
            .map(|m| format!(": {}", crate::redact::scrub(m)))
            .unwrap_or_default();
        return Verdict::Failed(format!(
            "health is {health} after the sync of the write{message}"
        ));
    }
    if ours_synced && missing.is_empty() && sync_status == "Synced" && health == "Healthy" {
        return Verdict::Live { observed: now };
    }
    let awaited = if !ours_synced {
        match (phase, started) {
            ("Running", Some(at)) => format!("the sync started at {} is still running", stamp(at)),
            _ => format!("never synced after the write (sync status {sync_status})"),
        }
    } else if !missing.is_empty() {
        format!(
            "synced, but status.summary.images does not show {}",
            missing.join(", ")
        )
    } else if sync_status != "Synced" {
        format!("synced after the write, now {sync_status}")
    } else {
        format!("synced, health is {health}")
    };
    if now >= deadline {
        Verdict::TimedOut(format!("{awaited} at the deadline {}", stamp(deadline)))
    } else {
        Verdict::Pending(awaited)
    }
}

/// A commit is synced when Argo CD synced exactly that revision at or after the write.
fn synced_at_revision(status: &Value, commit: &str, since: OffsetDateTime) -> bool {
    let synced_now = status["sync"]["revision"].as_str() == Some(commit)
        && status["sync"]["status"] == "Synced"
        && status["operationState"]["syncResult"]["revision"].as_str() == Some(commit)
        && status["operationState"]["phase"] == "Succeeded";
    let in_history = status["history"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|entry| {
            entry["revision"].as_str() == Some(commit)
                && rfc3339_at(&entry["deployedAt"]).is_some_and(|at| at >= since)
        });
    synced_now || in_history
}

fn running_images(status: &Value) -> Vec<&str> {
    status["summary"]["images"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Whether the rendered manifests run `image` at what was written: `name:tag`,
/// `name:tag@sha256:…`, or `name@sha256:…` for a written digest.
fn runs(running: &[&str], image: &AuditedImage) -> bool {
    let name = image.image.as_str();
    let written = image.to.as_str();
    let digest = written
        .split_once('@')
        .map(|(_, d)| d)
        .or_else(|| written.starts_with("sha256:").then_some(written));
    let by_tag = format!("{name}:{written}");
    running.iter().any(|r| {
        *r == by_tag
            || digest.is_some_and(|d| {
                // `name@digest`, or `name:<any tag>@digest`: the digest decides what runs.
                let tagged = r.strip_prefix(name).and_then(|rest| rest.strip_prefix(':'));
                *r == format!("{name}@{d}")
                    || tagged.is_some_and(|rest| rest.ends_with(&format!("@{d}")))
            })
    })
}

fn whole_second(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(0).unwrap_or(t)
}

fn stamp(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// The audit record with the outcome added: written back guarded by the record read, so
/// that of two checks delivered at once, one reports.
pub fn recorded(record: &AuditRecord, outcome: Outcome, reason: &str, at: OffsetDateTime) -> Value {
    let mut json = record.json.clone();
    json["rollout"] = json!({"outcome": outcome.as_str(), "at": stamp(at), "reason": reason});
    json
}

/// The lead times of a live write: from each image's push (when known) and from the write.
#[derive(Debug, Clone, PartialEq)]
pub struct Timings {
    /// ECR push to live observed, per image whose push time is known.
    pub lead_seconds: Vec<f64>,
    /// Our write to live observed.
    pub write_to_live_seconds: f64,
}

pub fn timings(record: &AuditRecord, observed: OffsetDateTime) -> Timings {
    let seconds = |from: OffsetDateTime| ((observed - from).as_seconds_f64()).max(0.0);
    Timings {
        lead_seconds: record
            .images
            .iter()
            .filter_map(|i| i.pushed)
            .map(seconds)
            .collect(),
        write_to_live_seconds: seconds(record.time),
    }
}

/// The Kubernetes Event of an outcome, named by the write so that one write has one
/// Event per outcome (the API server refuses the same name twice).
pub fn event(
    app: &Value,
    record: &AuditRecord,
    outcome: Outcome,
    reason: &str,
    now: OffsetDateTime,
) -> Value {
    let images: Vec<String> = record
        .images
        .iter()
        .map(|i| format!("{}:{}", i.image, i.to))
        .collect();
    let text = crate::application::event::EventText {
        suffix: format!(
            "rollout-{}",
            crate::application::event::short_key(&record.text)
        ),
        reason: outcome.event_reason(),
        message: format!(
            "{} written at {}: {reason}",
            images.join(", "),
            stamp(record.time)
        ),
        kind: if outcome == Outcome::Confirmed {
            "Normal"
        } else {
            "Warning"
        },
        annotations: Default::default(),
    };
    crate::application::event::about(app, text, &stamp(now))
}

/// Whether to start a sync of `app` after our write, and why not when not: only when the
/// Application asks for it, has no automated sync (Argo CD syncs those itself), and no
/// operation is set or running.
pub fn sync_wanted(app: &Value) -> Result<bool, String> {
    let asked = match app["metadata"]["annotations"][SYNC_ANNOTATION].as_str() {
        None => return Ok(false),
        Some(value) => crate::appconfig::annotations::go_parse_bool(value).ok_or_else(|| {
            format!(
                "`{SYNC_ANNOTATION}: {}` is not true or false",
                crate::redact::scrub(value)
            )
        })?,
    };
    if !asked || !app["spec"]["syncPolicy"]["automated"].is_null() {
        return Ok(false);
    }
    if !app["operation"].is_null() || app["status"]["operationState"]["phase"] == "Running" {
        return Err("an operation is running: Argo CD syncs the write after it".into());
    }
    Ok(true)
}

/// The JSON patch that starts a sync as `argocd app sync` does: the `operation` field, set
/// only on the Application as read (its resourceVersion tested), so never over a running one.
pub fn start_sync(app: &Value, revision: Option<&str>) -> Value {
    let mut sync = json!({"syncStrategy": {"hook": {}}});
    if let Some(revision) = revision {
        sync["revision"] = json!(revision);
    }
    json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": app["metadata"]["resourceVersion"]},
        {"op": "add", "path": "/operation", "value": {
            "initiatedBy": {"username": INITIATOR},
            "info": [{"name": "Reason", "value": "image written by argocd-ecr-updater"}],
            "sync": sync}}
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AUDIT_ANNOTATION;
    use time::macros::datetime;

    const IMAGE: &str = "1.dkr.ecr.r.amazonaws.com/web";
    const WRITE: OffsetDateTime = datetime!(2026-12-03 10:00:00.600 UTC);
    const DEADLINE: OffsetDateTime = datetime!(2026-12-03 10:15:00.600 UTC);
    const NOW: OffsetDateTime = datetime!(2026-12-03 10:01:00 UTC);

    fn record(extra: Value) -> String {
        let mut record = json!({"time": "2026-12-03T10:00:00.6Z", "eventId": "e",
            "images": [{"alias": "app", "image": IMAGE, "from": "1.0", "to": "1.1",
                "pushed": "2026-12-03T09:59:50Z"}]});
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                record[k] = v;
            }
        }
        record.to_string()
    }

    fn app(record: &str, status: Value) -> Value {
        json!({"metadata": {"namespace": "argocd", "name": "web", "uid": "u", "resourceVersion": "7",
            "annotations": {AUDIT_ANNOTATION: record}}, "spec": {}, "status": status})
    }

    fn synced(phase: &str, finished: &str, images: &[&str], health: &str) -> Value {
        json!({"operationState": {"phase": phase, "startedAt": "2026-12-03T10:00:00Z",
                "finishedAt": finished, "message": "one or more objects failed to apply"},
            "sync": {"status": "Synced"}, "summary": {"images": images}, "health": {"status": health}})
    }

    fn verdict(app: &Value, now: OffsetDateTime) -> String {
        match judge(app, WRITE, now, DEADLINE) {
            Ok(Verdict::Live { .. }) => "live".into(),
            Ok(Verdict::Failed(r)) => format!("failed: {r}"),
            Ok(Verdict::TimedOut(r)) => format!("timed out: {r}"),
            Ok(Verdict::Pending(r)) => format!("pending: {r}"),
            Ok(Verdict::Superseded(at)) => format!("superseded at {}", stamp(at)),
            Ok(Verdict::Reported(o)) => format!("reported {o}"),
            Ok(Verdict::Unfollowed(r)) => format!("unfollowed: {r}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_write_is_judged_by_argo_cds_status() {
        let ours = record(json!({}));
        let running = ["1.dkr.ecr.r.amazonaws.com/web:1.1"];
        let cases: Vec<(&str, Value, OffsetDateTime, &str)> = vec![
            (
                "synced in the write's own second, running, healthy: live",
                synced("Succeeded", "2026-12-03T10:00:00Z", &running, "Healthy"),
                NOW,
                "live",
            ),
            (
                "the last sync finished before the write: not yet",
                synced("Succeeded", "2026-12-03T09:59:59Z", &running, "Healthy"),
                NOW,
                "pending: never synced after the write (sync status Synced)",
            ),
            (
                "synced but still progressing",
                synced("Succeeded", "2026-12-03T10:00:20Z", &running, "Progressing"),
                NOW,
                "pending: synced, health is Progressing",
            ),
            (
                "synced but the old image still renders",
                synced(
                    "Succeeded",
                    "2026-12-03T10:00:20Z",
                    &["1.dkr.ecr.r.amazonaws.com/web:1.0"],
                    "Healthy",
                ),
                NOW,
                "pending: synced, but status.summary.images does not show 1.dkr.ecr.r.amazonaws.com/web:1.1",
            ),
            (
                "degraded after the sync: failed with Argo CD's message",
                {
                    let mut s = synced("Succeeded", "2026-12-03T10:00:20Z", &running, "Degraded");
                    s["health"]["message"] =
                        json!("Deployment \"web\" exceeded its progress deadline");
                    s
                },
                NOW,
                "failed: health is Degraded after the sync of the write: Deployment \"web\" exceeded its progress deadline",
            ),
            (
                "missing after the sync: failed",
                synced("Succeeded", "2026-12-03T10:00:20Z", &running, "Missing"),
                NOW,
                "failed: health is Missing",
            ),
            (
                "the sync operation after the write failed",
                synced("Failed", "2026-12-03T10:00:20Z", &[], "Healthy"),
                NOW,
                "failed: the sync operation after the write ended Failed: one or more objects failed to apply",
            ),
            (
                "a sync still running",
                json!({"operationState": {"phase": "Running", "startedAt": "2026-12-03T10:00:05Z"},
                    "sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}),
                NOW,
                "pending: the sync started at 2026-12-03T10:00:05Z is still running",
            ),
            (
                "never synced, before the deadline",
                json!({"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}),
                NOW,
                "pending: never synced after the write (sync status OutOfSync)",
            ),
            (
                "never synced, at the deadline: timed out naming what was missing",
                json!({"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}),
                DEADLINE,
                "timed out: never synced after the write (sync status OutOfSync) at the deadline 2026-12-03T10:15:00.6Z",
            ),
            (
                "stuck progressing at the deadline",
                synced("Succeeded", "2026-12-03T10:00:20Z", &running, "Progressing"),
                DEADLINE,
                "timed out: synced, health is Progressing at the deadline",
            ),
        ];
        for (case, status, now, expected) in cases {
            let got = verdict(&app(&ours, status), now);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }

    #[test]
    fn the_record_decides_which_write_a_check_follows() {
        let live = synced(
            "Succeeded",
            "2026-12-03T10:00:20Z",
            &["1.dkr.ecr.r.amazonaws.com/web:1.1"],
            "Healthy",
        );
        let later = record(json!({"time": "2026-12-03T10:05:00Z"}));
        let earlier = record(json!({"time": "2026-12-03T09:00:00Z"}));
        let reported =
            record(json!({"rollout": {"outcome": "confirmed", "at": "2026-12-03T10:00:30Z"}}));
        let pull = record(json!({"git": {"commit": "c1", "pullRequest": "https://example/pr/1"}}));
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "a newer write of ours supersedes",
                app(&later, live.clone()),
                "superseded at 2026-12-03T10:05:00Z",
            ),
            (
                "a message naming a write newer than the record is not ours",
                app(&earlier, live.clone()),
                "Permanent.NotOurWrite: the message names a write at 2026-12-03T10:00:00.6Z",
            ),
            (
                "an outcome recorded by an earlier delivery is not reported again",
                app(&reported, live.clone()),
                "reported confirmed",
            ),
            (
                "a pull request's commit is not followed",
                app(&pull, live.clone()),
                "unfollowed: the write went to a pull request",
            ),
            (
                "no record at all",
                json!({"metadata": {}, "status": live}),
                "unfollowed: the Application no longer carries our audit record",
            ),
        ];
        for (case, app, expected) in cases {
            let got = verdict(&app, NOW);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }

    #[test]
    fn a_commit_is_live_once_its_revision_or_a_later_one_with_our_images_synced() {
        let ours = record(json!({"git": {"commit": "c1", "pullRequest": null}}));
        let running = json!(["1.dkr.ecr.r.amazonaws.com/web:1.1"]);
        let at_revision = json!({"operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:00:30Z",
                "finishedAt": "2026-12-03T10:00:31Z", "syncResult": {"revision": "c1"}},
            "sync": {"status": "Synced", "revision": "c1"}, "summary": {"images": running}, "health": {"status": "Healthy"}});
        assert_eq!(verdict(&app(&ours, at_revision.clone()), NOW), "live");
        let mut later_revision = at_revision.clone();
        later_revision["sync"]["revision"] = json!("c2");
        later_revision["operationState"]["syncResult"]["revision"] = json!("c2");
        assert_eq!(verdict(&app(&ours, later_revision.clone()), NOW), "live");
        let mut other_image = later_revision;
        other_image["summary"]["images"] = json!(["1.dkr.ecr.r.amazonaws.com/web:1.0"]);
        assert!(verdict(&app(&ours, other_image), NOW).starts_with("pending: never synced"));
        // Synced at the old revision, before the commit: not ours.
        let mut old = at_revision;
        old["sync"]["revision"] = json!("c0");
        old["operationState"]["syncResult"]["revision"] = json!("c0");
        old["operationState"]["finishedAt"] = json!("2026-12-03T09:59:00Z");
        assert!(verdict(&app(&ours, old), NOW).starts_with("pending: never synced"));
    }

    #[test]
    fn a_digest_written_is_recognised_however_the_manifests_name_it() {
        let image = |to: &str| AuditedImage {
            alias: None,
            image: IMAGE.into(),
            from: None,
            to: to.into(),
            pushed: None,
        };
        let digest = "sha256:0123";
        let cases: &[(&str, &[&str], bool)] = &[
            ("1.1", &["1.dkr.ecr.r.amazonaws.com/web:1.1"], true),
            ("1.1", &["1.dkr.ecr.r.amazonaws.com/web:1.10"], false),
            ("1.1", &["1.dkr.ecr.r.amazonaws.com/other:1.1"], false),
            (
                "1.1@sha256:0123",
                &["1.dkr.ecr.r.amazonaws.com/web:1.1@sha256:0123"],
                true,
            ),
            (
                "1.1@sha256:0123",
                &["1.dkr.ecr.r.amazonaws.com/web@sha256:0123"],
                true,
            ),
            (digest, &["1.dkr.ecr.r.amazonaws.com/web@sha256:0123"], true),
            (
                digest,
                &["1.dkr.ecr.r.amazonaws.com/web@sha256:9999"],
                false,
            ),
        ];
        for (to, running, expected) in cases {
            assert_eq!(runs(running, &image(to)), *expected, "{to} in {running:?}");
        }
    }

    #[test]
    fn lead_times_run_from_the_push_and_from_the_write() {
        let read = AuditRecord::of(&app(&record(json!({})), json!({}))).unwrap();
        let t = timings(&read, datetime!(2026-12-03 10:01:00.600 UTC));
        assert_eq!(t.write_to_live_seconds, 60.0);
        assert_eq!(t.lead_seconds, vec![70.6]);
    }

    #[test]
    fn one_write_has_one_event_name_per_application() {
        let read = AuditRecord::of(&app(&record(json!({})), json!({}))).unwrap();
        let a = event(
            &app(&read.text, json!({})),
            &read,
            Outcome::Confirmed,
            "ok",
            NOW,
        );
        let b = event(
            &app(&read.text, json!({})),
            &read,
            Outcome::Confirmed,
            "ok",
            DEADLINE,
        );
        assert_eq!(a["metadata"]["name"], b["metadata"]["name"]);
        assert!(
            a["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("web.rollout-")
        );
        assert_eq!(
            (a["reason"].as_str(), a["type"].as_str()),
            (Some("RolloutConfirmed"), Some("Normal"))
        );
        let failed = event(
            &app(&read.text, json!({})),
            &read,
            Outcome::Failed,
            "Degraded",
            NOW,
        );
        assert_eq!(
            (failed["reason"].as_str(), failed["type"].as_str()),
            (Some("RolloutFailed"), Some("Warning"))
        );
        let recorded = recorded(&read, Outcome::Failed, "Degraded", NOW);
        assert_eq!(recorded["rollout"]["outcome"], "failed");
        assert_eq!(recorded["images"], read.json["images"]);
    }

    #[test]
    fn a_sync_is_started_only_where_asked_and_nothing_runs() {
        let base = |annotation: Option<&str>, automated: bool, phase: &str| {
            let mut app = json!({"metadata": {"resourceVersion": "9", "annotations": {}},
                "spec": {"syncPolicy": {}}, "status": {"operationState": {"phase": phase}}});
            if let Some(value) = annotation {
                app["metadata"]["annotations"][SYNC_ANNOTATION] = json!(value);
            }
            if automated {
                app["spec"]["syncPolicy"]["automated"] = json!({});
            }
            app
        };
        let cases: Vec<(&str, Value, Result<bool, &str>)> = vec![
            ("not asked", base(None, false, "Succeeded"), Ok(false)),
            ("asked", base(Some("true"), false, "Succeeded"), Ok(true)),
            (
                "asked with false",
                base(Some("false"), false, "Succeeded"),
                Ok(false),
            ),
            (
                "automated sync does it itself",
                base(Some("true"), true, "Succeeded"),
                Ok(false),
            ),
            (
                "an operation is running",
                base(Some("true"), false, "Running"),
                Err("an operation is running"),
            ),
            (
                "unreadable",
                base(Some("yes please"), false, "Succeeded"),
                Err("is not true or false"),
            ),
        ];
        for (case, app, expected) in cases {
            match (sync_wanted(&app), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{case}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{case}: {got}"),
                (got, want) => panic!("{case}: {got:?}, expected {want:?}"),
            }
        }
        let patch = start_sync(&base(Some("true"), false, "Succeeded"), Some("c1"));
        assert_eq!(
            patch[0]["value"], "9",
            "guarded by the resourceVersion read"
        );
        assert_eq!(patch[1]["value"]["initiatedBy"]["username"], INITIATOR);
        assert_eq!(patch[1]["value"]["sync"]["revision"], "c1");
    }

    #[test]
    fn the_timeout_is_the_applications_or_fifteen_minutes() {
        let with = |value: &str| json!({"metadata": {"annotations": {TIMEOUT_ANNOTATION: value}}});
        assert_eq!(timeout(&json!({})), Ok(DEFAULT_TIMEOUT));
        assert_eq!(timeout(&with("1h")), Ok(Duration::from_secs(3600)));
        assert!(
            timeout(&with("soon"))
                .unwrap_err()
                .contains(TIMEOUT_ANNOTATION)
        );
    }
}
