//! Adversarial tests (t61): the pure judge and `start_sync` on Application states that Argo CD
//! and our own pipeline can produce around `argocd app rollback`.

use argocd_ecr_updater::appconfig::annotations::AUDIT_ANNOTATION;
use argocd_ecr_updater::rollout::judge::{INITIATOR, Verdict, judge, start_sync};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::datetime;

const WEB: &str = "1.dkr.ecr.r.amazonaws.com/web";
const WORKER: &str = "1.dkr.ecr.r.amazonaws.com/worker";

fn spec(web: &str, worker: &str) -> Value {
    json!({"repoURL": "https://git.example/web", "targetRevision": "main",
        "helm": {"parameters": [{"name": "image.tag", "value": web},
            {"name": "worker.tag", "value": worker}]}})
}

fn place(name: &str, value: &str) -> Value {
    json!([{"list": "/spec/source/helm/parameters", "name": name, "value": value}])
}

/// A record: our last write moved worker to `worker` at 10:05; web's write (to `web`, at
/// `web_at`) is carried under `earlier`.
fn record(web: &str, web_at: &str, worker: &str) -> String {
    json!({"time": "2026-12-03T10:05:00Z", "eventId": "e2",
        "images": [{"alias": "worker", "image": WORKER, "from": "v1", "to": worker,
            "at": place("worker.tag", worker)}],
        "earlier": [{"alias": "web", "image": WEB, "from": "1.0", "to": web,
            "at": place("image.tag", web), "time": web_at}]})
    .to_string()
}

fn app(record: &str, spec_source: Value, status: Value) -> Value {
    json!({"metadata": {"namespace": "argocd", "name": "web", "uid": "u", "resourceVersion": "9",
            "annotations": {AUDIT_ANNOTATION: record}},
        "spec": {"source": spec_source}, "status": status})
}

/// After `argocd app rollback` of web (admin), a sync of ours for a worker write kept the
/// rollback (explicit source with web at 1.0) but that sync FAILED (e.g. the new worker image
/// is broken). The rollback still stands (Argo CD's history has no entry for a failed sync;
/// the Pods run web 1.0), so the next sync we start for the next worker write must keep it
/// too: it must not sync the spec, which still asks for web 1.1 — that would redeploy the
/// very image a person rolled back.
#[test]
fn adv61_a_failed_sync_of_ours_that_kept_a_rollback_still_keeps_it_next_time() {
    let rec = record("1.1", "2026-12-03T10:00:00Z", "v3");
    let status = json!({
        "operationState": {"phase": "Failed", "startedAt": "2026-12-03T10:05:01Z",
            "finishedAt": "2026-12-03T10:05:30Z", "message": "one or more objects failed to apply",
            "operation": {"initiatedBy": {"username": INITIATOR},
                "sync": {"source": spec("1.0", "v2")}}},
        "history": [
            {"id": 1, "revision": "c0", "source": spec("1.1", "v1"),
             "deployStartedAt": "2026-12-03T10:00:01Z", "deployedAt": "2026-12-03T10:00:20Z",
             "initiatedBy": {"username": INITIATOR}},
            {"id": 2, "revision": "c0", "source": spec("1.0", "v1"),
             "deployStartedAt": "2026-12-03T10:02:00Z", "deployedAt": "2026-12-03T10:02:20Z",
             "initiatedBy": {"username": "admin"}}],
        "summary": {"images": [format!("{WEB}:1.0"), format!("{WORKER}:v1")]}});
    let app = app(&rec, spec("1.1", "v3"), status);
    let (patch, kept) = start_sync(&app, None);
    assert_eq!(
        kept,
        [WEB],
        "the rollback of web still stands after our failed sync that kept it; patch {patch}"
    );
    assert_eq!(patch[1]["value"]["sync"]["source"], spec("1.0", "v3"));
}

/// Control: the same, with our keeping sync Succeeded (the case the code handles).
#[test]
fn adv61_control_a_succeeded_sync_of_ours_that_kept_a_rollback_keeps_it() {
    let rec = record("1.1", "2026-12-03T10:00:00Z", "v3");
    let status = json!({
        "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:05:01Z",
            "finishedAt": "2026-12-03T10:05:30Z",
            "operation": {"initiatedBy": {"username": INITIATOR},
                "sync": {"source": spec("1.0", "v2")}}}});
    let app = app(&rec, spec("1.1", "v3"), status);
    let (_patch, kept) = start_sync(&app, None);
    assert_eq!(kept, [WEB]);
}

/// `argocd app rollback` of web (admin, 10:02) was the last operation, then web's FIX was
/// written by us at 10:04 (pushed after the rollback, so it rolls out by design), but its sync
/// could not start (the rollback's operation was still running, or the patch raced). A worker
/// write at 10:05 then starts a sync. The rollback predates web's last write: it decided
/// against 1.1, not against the fix 1.2. Our sync must deploy web's fix (the spec), not keep
/// web at the rolled-back 1.0 — otherwise the fix is silently never deployed.
#[test]
fn adv61_a_rollback_older_than_the_images_last_write_is_not_kept() {
    let rec = record("1.2", "2026-12-03T10:04:00Z", "v2");
    let status = json!({
        "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:02:00Z",
            "finishedAt": "2026-12-03T10:02:20Z",
            "operation": {"initiatedBy": {"username": "admin"},
                "sync": {"source": spec("1.0", "v1")}}}});
    let app = app(&rec, spec("1.2", "v2"), status);
    let (patch, kept) = start_sync(&app, None);
    assert!(
        kept.is_empty(),
        "a rollback from before web's last write (the fix) must not be kept: kept {kept:?}, patch {patch}"
    );
}

/// Web written 1.1 at 10:00 (carried now), its check still pending (Pods still Progressing);
/// admin ran `argocd app rollback` of web at 10:02 (history entry by admin, web 1.0); then a
/// worker write at 10:05 started our sync that KEPT web's rollback. The next check of web's
/// write reads the state after our sync: the write was taken back by a person's rollback, so
/// the verdict must be TakenBack — not Pending until a RolloutTimedOut (Warning, `failure`
/// commit status, hold-on-failure for a write a person deliberately took back).
#[test]
fn adv61_a_carried_writes_argocd_app_rollback_is_taken_back_after_our_keeping_sync() {
    let rec = record("1.1", "2026-12-03T10:00:00Z", "v2");
    let status = json!({
        "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:05:01Z",
            "finishedAt": "2026-12-03T10:05:20Z",
            "operation": {"initiatedBy": {"username": INITIATOR},
                "sync": {"source": spec("1.0", "v2")}},
            "syncResult": {"revision": "c0", "source": spec("1.0", "v2")}},
        "history": [
            {"id": 1, "revision": "c0", "source": spec("1.1", "v1"),
             "deployStartedAt": "2026-12-03T10:00:01Z", "deployedAt": "2026-12-03T10:00:20Z",
             "initiatedBy": {"username": INITIATOR}},
            {"id": 2, "revision": "c0", "source": spec("1.0", "v1"),
             "deployStartedAt": "2026-12-03T10:02:00Z", "deployedAt": "2026-12-03T10:02:20Z",
             "initiatedBy": {"username": "admin"}},
            {"id": 3, "revision": "c0", "source": spec("1.0", "v2"),
             "deployStartedAt": "2026-12-03T10:05:01Z", "deployedAt": "2026-12-03T10:05:20Z",
             "initiatedBy": {"username": INITIATOR}}],
        "reconciledAt": "2026-12-03T10:05:25Z", "sync": {"status": "OutOfSync"},
        "health": {"status": "Healthy"},
        "summary": {"images": [format!("{WEB}:1.0"), format!("{WORKER}:v2")]}});
    let app = app(&rec, spec("1.1", "v2"), status);
    let write: OffsetDateTime = datetime!(2026-12-03 10:00:00 UTC);
    let verdict = judge(
        &app,
        write,
        datetime!(2026-12-03 10:05:30 UTC),
        datetime!(2026-12-03 10:15:00 UTC),
    )
    .unwrap();
    assert!(
        matches!(verdict, Verdict::TakenBack(_)),
        "web's write was taken back by argocd app rollback (admin); got {verdict:?}"
    );
    // At the deadline it must not become a timeout (a failure) either.
    let late = judge(
        &app,
        write,
        datetime!(2026-12-03 10:16:00 UTC),
        datetime!(2026-12-03 10:15:00 UTC),
    )
    .unwrap();
    assert!(
        !matches!(late, Verdict::TimedOut(_)),
        "a write a person rolled back must not time out as a failure; got {late:?}"
    );
}

/// Control: web's check delivered right after the admin rollback (the rollback is the current
/// operation): TakenBack.
#[test]
fn adv61_control_argocd_app_rollback_as_current_operation_is_taken_back() {
    let rec = json!({"time": "2026-12-03T10:00:00Z", "eventId": "e1",
        "images": [{"alias": "web", "image": WEB, "from": "1.0", "to": "1.1",
            "at": place("image.tag", "1.1")}]})
    .to_string();
    let status = json!({
        "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:02:00Z",
            "finishedAt": "2026-12-03T10:02:20Z",
            "operation": {"initiatedBy": {"username": "admin"},
                "sync": {"source": spec("1.0", "v1")}},
            "syncResult": {"revision": "c0", "source": spec("1.0", "v1")}},
        "reconciledAt": "2026-12-03T10:02:25Z", "sync": {"status": "OutOfSync"},
        "health": {"status": "Healthy"},
        "summary": {"images": [format!("{WEB}:1.0")]}});
    let app = app(&rec, spec("1.1", "v1"), status);
    let verdict = judge(
        &app,
        datetime!(2026-12-03 10:00:00 UTC),
        datetime!(2026-12-03 10:02:30 UTC),
        datetime!(2026-12-03 10:15:00 UTC),
    )
    .unwrap();
    assert!(matches!(verdict, Verdict::TakenBack(_)), "{verdict:?}");
}
