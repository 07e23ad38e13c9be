//! End to end: each write followed until it is live. The real handler writes, sends its
//! rollout check to the SQS stand-in with a delay, and judges the Application that the Argo CD
//! controller stand-in moves after the write, step by step on the test's clock (the function's
//! clock too): compared, synced, stale until compared again, rolling, then Healthy, Degraded,
//! stuck Progressing, Suspended, failed to sync, or never synced. Each outcome is recorded once
//! on the Application, as an Event, in the report (log, SNS) and as a metric line.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Scenario, event, expect_decision, only, seed_tag};
use argocd_ecr_updater::appconfig::annotations::AUDIT_ANNOTATION;
use argocd_ecr_updater::report::{Action, Report, RolloutReport};
use argocd_ecr_updater_standins::argocd::{Controller, Rendered, Script, Timeline};
use argocd_ecr_updater_standins::aws::QueueMessage;
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::fixtures::{
    PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_TAG, image, push_event,
};
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";

/// Long enough for [`Timeline::typical`] to end: compared, synced and rolled out in 28 s.
const ROLLED_OUT: u64 = 40;

/// The seed with a sweep queue, on a test clock, and the controller stand-in running
/// `script` on `timeline`; the queue's URL.
async fn following_on(script: Script, timeline: Timeline) -> (Scenario, String) {
    let clock = Arc::new(SimClock::scripted());
    let standins = Scenario::seeded().await.on_clock(clock.clone());
    let queue = standins.aws.create_queue("sweep");
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", SWEEP_ARN);
    standins
        .kube
        .run_controller(Controller::timed(script, timeline, clock));
    (standins, queue)
}

/// [`following_on`] a typical controller.
async fn following(script: Script) -> (Scenario, String) {
    following_on(script, Timeline::typical()).await
}

/// The controller stand-in on the scenario's clock, a typical one.
fn controller(standins: &Scenario, script: Script) -> Controller {
    Controller::timed(script, Timeline::typical(), standins.test_clock())
}

/// A Healthy controller that renders the Application from the Git write-back's file at the
/// branch's head, as Argo CD's repo server does.
fn rendering_git(standins: &Scenario) -> Controller {
    let github = standins.github.clone();
    let render = move |_: &Value| {
        let (repo, file) = (crate::git::REPO, crate::git::OVERRIDE);
        let revision = github.head(repo, "main")?;
        let text = github.file(repo, "main", file)?;
        let source: Value = serde_yaml_ng::from_str(&text).ok()?;
        let images =
            argocd_ecr_updater_standins::argocd::images_of_spec(&json!({"source": source}));
        Some(Rendered { revision, images })
    };
    controller(standins, Script::Healthy).rendering(Arc::new(render))
}

/// Lets `seconds` pass on the test's clock: the controller takes every step due in them.
fn pass(standins: &Scenario, seconds: u64) {
    let until = standins.test_clock().now() + Duration::from_secs(seconds);
    standins.kube.step_to(until);
}

/// The Application already Degraded on the image it runs, as Argo CD last compared it.
fn degraded_before(standins: &Scenario) {
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["health"] = json!({"status": "Degraded",
                "message": "Deployment \"web\" exceeded its progress deadline"});
        })
        .unwrap();
}

/// The seed's Application without automated sync: Argo CD waits for someone to sync it.
fn manual_sync(standins: &Scenario) {
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["spec"]["syncPolicy"]
                .as_object_mut()
                .unwrap()
                .remove("automated");
        })
        .unwrap();
}

/// The rollout checks on the queue, oldest first.
fn checks(standins: &Scenario, queue: &str) -> Vec<QueueMessage> {
    standins
        .aws
        .queue(queue)
        .into_iter()
        .filter(|m| m.body.contains("confirm-rollout"))
        .collect()
}

/// Delivers one message as Lambda's SQS event source mapping would, once SQS hands it out.
async fn deliver(standins: &Scenario, message: &QueueMessage) -> Report {
    let batch = json!({"Records": [{"messageId": message.id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": message.body}]});
    standins.report(&[], &batch).await
}

fn the_rollout(report: &Report) -> &RolloutReport {
    assert_eq!(report.rollouts.len(), 1, "{:#?}", report.rollouts);
    &report.rollouts[0]
}

/// The Events of one reason.
fn events(standins: &Scenario, reason: &str) -> Vec<Value> {
    standins
        .kube
        .events()
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

fn audit(standins: &Scenario) -> Value {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    serde_json::from_str(
        app["metadata"]["annotations"][AUDIT_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

/// A push that updates the seed, its one check on the queue (sent 15 s out), and the
/// controller's time to roll the write out.
async fn push_and_wait(standins: &Scenario, queue: &str) -> QueueMessage {
    let check = push(standins, queue).await;
    pass(standins, ROLLED_OUT);
    check
}

/// A push that updates the seed, and its one check on the queue (sent 15 s out).
async fn push(standins: &Scenario, queue: &str) -> QueueMessage {
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    let sent = checks(standins, queue);
    assert_eq!(sent.len(), 1, "one check per write");
    assert_eq!(sent[0].delay_seconds, 15, "the first check waits 15 s");
    sent.into_iter().next().unwrap()
}

#[tokio::test]
async fn a_healthy_rollout_is_confirmed_once_with_its_lead_times() {
    let (standins, queue) = following(Script::Healthy).await;
    let check = push_and_wait(&standins, &queue).await;
    let report = deliver(&standins, &check).await;
    let rollout = the_rollout(&report);
    assert_eq!(rollout.state, "confirmed", "{rollout:#?}");
    assert_eq!(rollout.images, [format!("{SEED_IMAGE}:{PUSHED_TAG}")]);
    let write_to_live = rollout.write_to_live_seconds.unwrap();
    assert_eq!(
        write_to_live, ROLLED_OUT as f64,
        "observed when the check ran"
    );
    assert_eq!(
        rollout.lead_seconds.len(),
        1,
        "the push time is in the record"
    );
    assert!(
        rollout.lead_seconds[0] > write_to_live,
        "the push came before the write"
    );
    assert_eq!(events(&standins, "RolloutConfirmed").len(), 1);
    assert_eq!(audit(&standins)["rollout"]["outcome"], "confirmed");
    let subject = report.notification_subject().unwrap();
    assert!(
        subject.contains("rollout confirmed argocd/aws-pipeline-test"),
        "{subject}"
    );
    assert!(
        checks(&standins, &queue).len() == 1,
        "no further check once live"
    );

    // The same check delivered again: nothing reported twice.
    let again = deliver(&standins, &check).await;
    assert_eq!(the_rollout(&again).state, "already-reported");
    assert_eq!(events(&standins, "RolloutConfirmed").len(), 1, "one Event");
    assert!(!the_rollout(&again).is_outcome(), "one metric line");
}

#[tokio::test]
async fn two_deliveries_of_one_check_at_once_report_one_outcome() {
    let (standins, queue) = following(Script::Healthy).await;
    let check = push_and_wait(&standins, &queue).await;
    let (a, b) =
        futures_util::future::join(deliver(&standins, &check), deliver(&standins, &check)).await;
    let mut states = vec![the_rollout(&a).state.clone(), the_rollout(&b).state.clone()];
    states.sort();
    assert_eq!(states, ["already-reported", "confirmed"]);
    assert_eq!(events(&standins, "RolloutConfirmed").len(), 1);
}

#[tokio::test]
async fn a_check_before_the_sync_waits_and_sends_the_next_one_later() {
    let (standins, queue) = following(Script::Healthy).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "rollout followed");
    let first = checks(&standins, &queue).remove(0);
    let pending = deliver(&standins, &first).await;
    let rollout = the_rollout(&pending);
    assert_eq!(rollout.state, "pending");
    assert!(
        rollout.reason.contains("never synced after the write"),
        "{}",
        rollout.reason
    );
    let sent = checks(&standins, &queue);
    assert_eq!(sent.len(), 2);
    assert!(sent[1].body.contains(r#""check":2"#), "{}", sent[1].body);
    assert_eq!(sent[1].delay_seconds, 15);
}

#[tokio::test]
async fn degraded_after_the_sync_is_a_failed_rollout_and_hold_on_failure_holds_the_next_push() {
    let (standins, queue) = following(Script::DegradedAfterSync).await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/app.hold-on-failure", "true")],
    );
    let check = push_and_wait(&standins, &queue).await;
    let report = deliver(&standins, &check).await;
    let rollout = the_rollout(&report);
    assert_eq!(rollout.state, "failed");
    assert!(
        rollout.reason.contains("health is Degraded after the sync of the write: Deployment \"web\" exceeded its progress deadline"),
        "{}",
        rollout.reason
    );
    let failed = events(&standins, "RolloutFailed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["type"], "Warning");

    // The failure is remembered per image, beside our audit record.
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let remembered: Value = serde_json::from_str(
        app["metadata"]["annotations"]["argocd-ecr-updater.io/failed-rollouts"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let reference = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";
    assert_eq!(remembered[reference]["to"], PUSHED_TAG);
    assert_eq!(remembered[reference]["outcome"], "failed");

    // A newer tag, pushed (by ECR's clock) before the failure: decided, reported, not written.
    let newer = "20250826-000000";
    let at = "2025-08-26T00:00:01Z";
    standins.aws.push(image("barun-dev-ecr", newer, '7', at));
    let held = standins
        .report(&[], &push_event("barun-dev-ecr", newer, at))
        .await;
    expect_decision(
        only(&held),
        Action::Skipped,
        "held after the failed rollout of `20250825-153012` at ",
    );
    expect_decision(
        only(&held),
        Action::Skipped,
        "would update `20250825-153012` to `20250826-000000`",
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));

    // Healthy again is no release (a failed sync leaves the old image Healthy)...
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["health"] = json!({"status": "Healthy"})
        })
        .unwrap();
    let still = standins
        .report(&[], &push_event("barun-dev-ecr", newer, at))
        .await;
    expect_decision(only(&still), Action::Skipped, "(hold-on-failure)");
    // ...a push after the failure is: the fix.
    let fix = "20991231-000000";
    let fixed_at = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    standins
        .aws
        .push(image("barun-dev-ecr", fix, '8', &fixed_at));
    let written = standins
        .report(&[], &push_event("barun-dev-ecr", fix, &fixed_at))
        .await;
    expect_decision(only(&written), Action::Updated, "ranks above");
}

#[tokio::test]
async fn a_failed_sync_operation_is_a_failed_rollout() {
    let (standins, queue) = following(Script::SyncFailed).await;
    let check = push_and_wait(&standins, &queue).await;
    let rollout = deliver(&standins, &check).await.rollouts.remove(0);
    assert_eq!(rollout.state, "failed");
    assert!(
        rollout.reason.contains(
            "the sync operation after the write ended Failed: one or more objects failed to apply"
        ),
        "{}",
        rollout.reason
    );
    assert_eq!(events(&standins, "RolloutFailed").len(), 1);
}

/// A failed attempt Argo CD retries stays `Running` with `finishedAt` set: the check waits,
/// and the rollout fails only once the retries are spent (`Failed`).
#[tokio::test]
async fn a_sync_being_retried_is_not_yet_failed() {
    let timeline = Timeline {
        retries: 1,
        ..Timeline::typical()
    };
    let (standins, queue) = following_on(Script::SyncFailed, timeline).await;
    let check = push(&standins, &queue).await;
    pass(&standins, 8);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let state = &app["status"]["operationState"];
    assert_eq!(
        (state["phase"].as_str(), state["retryCount"].as_i64()),
        (Some("Running"), Some(1))
    );
    let retrying = deliver(&standins, &check).await;
    let rollout = the_rollout(&retrying);
    assert_eq!(rollout.state, "pending", "{rollout:#?}");
    assert!(
        rollout
            .reason
            .contains("is retrying after a failed attempt: Retrying attempt #1"),
        "{}",
        rollout.reason
    );
    let failed = next_check_after(&standins, &queue, ROLLED_OUT).await;
    let rollout = the_rollout(&failed);
    assert_eq!(rollout.state, "failed", "{rollout:#?}");
    assert!(
        rollout.reason.contains("(retried 1 times)"),
        "{}",
        rollout.reason
    );
}

/// Past the Application's deadline (`confirm-timeout`), the check says which condition was
/// missing: a rollout stuck Progressing, one paused (Suspended), and one never synced.
#[tokio::test]
async fn a_rollout_past_its_deadline_times_out_naming_what_was_missing() {
    for (script, missing) in [
        (Script::StuckProgressing, "synced, health is Progressing"),
        (
            Script::Suspended,
            "synced, the rollout is paused (health Suspended)",
        ),
        (
            Script::NeverSynced,
            "never synced after the write (sync status Synced)",
        ),
    ] {
        let (standins, queue) = following(script).await;
        standins.annotate(
            "argocd",
            SEED_APP,
            &[("argocd-ecr-updater.io/confirm-timeout", "1m")],
        );
        let check = push_and_wait(&standins, &queue).await;
        let first = deliver(&standins, &check).await;
        assert_eq!(the_rollout(&first).state, "pending", "{script:?}");
        assert!(
            the_rollout(&first).reason.starts_with(missing),
            "{script:?}: {}",
            the_rollout(&first).reason
        );
        // Each check waits at most until the deadline; the one that lands on it times out.
        let mut late = first;
        let mut sent = checks(&standins, &queue).len();
        while the_rollout(&late).state == "pending" {
            sent = checks(&standins, &queue).len();
            let next = checks(&standins, &queue).pop().unwrap();
            let left = 60 - (standins.test_clock().now() - written_at(&next)).whole_seconds();
            assert!(
                i64::from(next.delay_seconds) <= left + 1,
                "a check lands on the deadline at the latest: {} s of {left} s",
                next.delay_seconds
            );
            pass(&standins, next.delay_seconds.into());
            late = deliver(&standins, &next).await;
        }
        let rollout = the_rollout(&late);
        assert_eq!(rollout.state, "timed-out", "{script:?}: {rollout:#?}");
        assert!(
            rollout.reason.starts_with(missing),
            "{script:?}: {}",
            rollout.reason
        );
        assert!(
            rollout.reason.contains("at the deadline"),
            "{}",
            rollout.reason
        );
        assert_eq!(events(&standins, "RolloutTimedOut").len(), 1, "{script:?}");
        assert_eq!(
            checks(&standins, &queue).len(),
            sent,
            "{script:?}: no check after the outcome"
        );
    }
}

#[tokio::test]
async fn a_newer_write_supersedes_the_one_followed() {
    let (standins, queue) = following(Script::Healthy).await;
    let first = push_and_wait(&standins, &queue).await;
    let newer = "20250826-000000";
    let at = "2025-08-26T00:00:01Z";
    standins.aws.push(image("barun-dev-ecr", newer, '7', at));
    let report = standins
        .report(&[], &push_event("barun-dev-ecr", newer, at))
        .await;
    expect_decision(only(&report), Action::Updated, "rollout followed");
    pass(&standins, ROLLED_OUT);
    let superseded = deliver(&standins, &first).await;
    assert_eq!(the_rollout(&superseded).state, "superseded");
    let second = checks(&standins, &queue).remove(1);
    let confirmed = deliver(&standins, &second).await;
    let rollout = the_rollout(&confirmed);
    assert_eq!(rollout.state, "confirmed");
    assert_eq!(rollout.images, [format!("{SEED_IMAGE}:{newer}")]);
    assert_eq!(events(&standins, "RolloutConfirmed").len(), 1);
}

/// `argocd-ecr-updater.io/sync`: an Application without automated sync gets a sync started
/// after the write, as `argocd app sync` starts one; the controller runs it and clears it.
#[tokio::test]
async fn an_application_asking_for_a_sync_gets_one_after_the_write_and_is_followed() {
    let (standins, queue) = following(Script::Healthy).await;
    manual_sync(&standins);
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/sync", "true")],
    );
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "sync started (argocd-ecr-updater.io/sync)",
    );
    pass(&standins, ROLLED_OUT);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert!(
        app["operation"].is_null(),
        "the controller ran the operation and cleared it"
    );
    assert_eq!(
        app["status"]["operationState"]["operation"]["initiatedBy"]["username"],
        "argocd-ecr-updater"
    );
    assert_eq!(
        standins.kube.syncs("argocd", SEED_APP),
        1,
        "one sync, started once"
    );
    let check = checks(&standins, &queue).remove(0);
    assert_eq!(
        the_rollout(&deliver(&standins, &check).await).state,
        "confirmed"
    );
}

#[tokio::test]
async fn without_a_sync_asked_for_a_manual_application_is_never_synced_by_us() {
    let (standins, queue) = following(Script::Healthy).await;
    manual_sync(&standins);
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    assert!(!only(&report).reason.contains("sync started"));
    pass(&standins, ROLLED_OUT);
    assert_eq!(standins.kube.syncs("argocd", SEED_APP), 0);
    let check = checks(&standins, &queue).remove(0);
    let rollout = deliver(&standins, &check).await.rollouts.remove(0);
    assert_eq!(rollout.state, "pending");
    assert!(
        rollout
            .reason
            .contains("OutOfSync); the Application has no automated sync"),
        "Argo CD compared the write: {}",
        rollout.reason
    );
}

/// Anyone who may send to the queue can send a check; one naming a write the Application's
/// record does not show fails alone (and is parked by the queue's redrive policy), and none
/// reports anything the Application does not say.
#[tokio::test]
async fn a_forged_check_reports_nothing_and_fails_to_the_dead_letter_queue() {
    let (standins, queue) = following(Script::Healthy).await;
    let check = push_and_wait(&standins, &queue).await;
    // A real Application and a well-formed check, naming a write a second after ours.
    let mut body: Value = serde_json::from_str(&check.body).unwrap();
    let written = time::OffsetDateTime::parse(body["write"].as_str().unwrap(), &Rfc3339).unwrap();
    body["write"] = json!(
        (written + time::Duration::seconds(1))
            .format(&Rfc3339)
            .unwrap()
    );
    let mut forged = check.clone();
    forged.body = body.to_string();
    assert_ne!(forged.body, check.body);
    let report = deliver(&standins, &forged).await;
    assert!(report.rollouts.is_empty());
    assert_eq!(report.failed_messages, [forged.id.clone()]);
    assert!(
        report
            .failure
            .as_deref()
            .unwrap()
            .contains("Permanent.NotOurWrite"),
        "{:?}",
        report.failure
    );
    assert!(events(&standins, "RolloutConfirmed").is_empty());
}

/// A check passes the scope checks a shard passes: for an Application outside
/// `ARGOCD_NAMESPACES` or `APPLICATION_LABEL_SELECTOR` (as configured when it is delivered),
/// nothing is patched, no Event created, no status set, whoever sent it.
#[tokio::test]
async fn a_check_for_an_application_outside_the_functions_scope_touches_nothing() {
    let (standins, queue) = following(Script::Healthy).await;
    let check = push_and_wait(&standins, &queue).await;
    let batch = json!({"Records": [{"messageId": check.id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": check.body}]});
    let record_before = audit(&standins);
    let patches_before = standins.kube_requests("PATCH");
    let outside_namespaces = standins
        .report(&[("ARGOCD_NAMESPACES", "team-a,team-b")], &batch)
        .await;
    assert!(
        outside_namespaces.rollouts.is_empty(),
        "{:#?}",
        outside_namespaces.rollouts
    );
    assert!(
        outside_namespaces
            .skipped
            .as_deref()
            .is_some_and(|s| s.contains("outside ARGOCD_NAMESPACES")),
        "{:?}",
        outside_namespaces.skipped
    );
    let unselected = standins
        .report(&[("APPLICATION_LABEL_SELECTOR", "team=payments")], &batch)
        .await;
    let rollout = the_rollout(&unselected);
    assert_eq!(rollout.state, "unfollowed", "{rollout:#?}");
    assert!(
        rollout
            .reason
            .contains("APPLICATION_LABEL_SELECTOR `team=payments`"),
        "{}",
        rollout.reason
    );
    assert!(unselected.failed_messages.is_empty());
    assert_eq!(
        standins.kube_requests("PATCH"),
        patches_before,
        "nothing patched"
    );
    assert_eq!(audit(&standins), record_before, "the record as it was");
    assert!(events(&standins, "RolloutConfirmed").is_empty());
    // In scope again, the same check reports the rollout.
    assert_eq!(
        the_rollout(&deliver(&standins, &check).await).state,
        "confirmed"
    );
}

#[tokio::test]
async fn with_confirmation_off_or_no_queue_a_write_is_not_followed() {
    let (standins, queue) = following(Script::Healthy).await;
    let report = standins
        .report(
            &[("CONFIRM_ROLLOUTS", "false")],
            &event("push-date-tag.json"),
        )
        .await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    assert!(
        !only(&report).reason.contains("rollout"),
        "{}",
        only(&report).reason
    );
    assert!(checks(&standins, &queue).is_empty());
}

/// A commit: followed to the revision Argo CD syncs, rendered from the file in Git.
#[tokio::test]
async fn a_commit_is_confirmed_once_argo_cd_synced_its_revision() {
    let (standins, queue) = crate::git::git_following().await;
    let standins = standins.on_clock(Arc::new(SimClock::scripted()));
    standins.kube.run_controller(rendering_git(&standins));
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    pass(&standins, ROLLED_OUT);
    let check = checks(&standins, &queue).remove(0);
    let rollout = deliver(&standins, &check).await.rollouts.remove(0);
    assert_eq!(rollout.state, "confirmed", "{rollout:#?}");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(
        app["status"]["sync"]["revision"].as_str(),
        standins.github.head(crate::git::REPO, "main").as_deref()
    );
}

/// A commit of ours reverted in Git while its rollout is followed: Argo CD syncs the revert,
/// Healthy on the old image, so the check ends as taken back (not timed out, no failure to
/// hold on), naming the revision that took it back.
#[tokio::test]
async fn a_commit_reverted_in_git_while_followed_ends_as_taken_back() {
    let (standins, queue) = crate::git::git_following().await;
    let standins = standins.on_clock(Arc::new(SimClock::scripted()));
    standins.kube.run_controller(rendering_git(&standins));
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let reverted = format!(
        "helm:\n  parameters:\n  - name: image.repository\n    value: {SEED_IMAGE}\n    forcestring: true\n  - name: image.tag\n    value: {SEED_TAG}\n    forcestring: true\n"
    );
    let revert = standins
        .github
        .push(
            crate::git::REPO,
            "main",
            crate::git::OVERRIDE,
            &reverted,
            "Revert the image update",
        )
        .unwrap();
    pass(&standins, ROLLED_OUT);
    let check = checks(&standins, &queue).remove(0);
    let rollout = deliver(&standins, &check).await.rollouts.remove(0);
    assert_eq!(rollout.state, "taken-back", "{rollout:#?}");
    assert!(
        rollout.reason.contains(&format!(
            "Git no longer asks for it: revision {}",
            &revert[..12]
        )),
        "{}",
        rollout.reason
    );
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert!(
        app["metadata"]["annotations"]["argocd-ecr-updater.io/failed-rollouts"].is_null(),
        "a revert is no failure"
    );
}

const SOURCE_TOKEN: &str = "ghp_source0status0token";
const SOURCE_SECRET: &str =
    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/source-Zz99";
const BUILT_TAG: &str = "20250901-000000";

#[derive(Clone, Copy, Debug)]
enum SourceHost {
    GitHub,
    GitLab,
}

/// The seed followed, asking for commit statuses, and a pushed image whose labels name the
/// commit it was built from in `acme/web` on `host`, where a token scoped to that repository
/// (by the secret's `url`) may write; the queue and the commit.
async fn built_from_source(host: SourceHost, scoped: bool) -> (Scenario, String, String) {
    let (standins, queue) = following(Script::Healthy).await;
    let (url, api) = match host {
        SourceHost::GitHub => (
            "https://github.com/acme/web",
            ("GITHUB_API_URL", standins.github_api()),
        ),
        SourceHost::GitLab => (
            "https://gitlab.com/acme/web",
            ("GITLAB_API_URL", standins.gitlab_api()),
        ),
    };
    let store = source_store(&standins, host);
    store.create_repository("acme/web", "main", &[("main.go", "package main\n")]);
    let sha = store.head("acme/web", "main").unwrap();
    store.grant_token(SOURCE_TOKEN, &["acme/web"], true);
    let secret = if scoped {
        json!({"token": SOURCE_TOKEN, "url": url})
    } else {
        json!({"token": SOURCE_TOKEN})
    };
    standins
        .aws
        .put_secret(SOURCE_SECRET, &secret.to_string(), true);
    let at = "2025-09-01T00:00:01Z";
    standins.aws.push_labelled(
        image("barun-dev-ecr", BUILT_TAG, '8', at),
        &json!({"org.opencontainers.image.source": url, "org.opencontainers.image.revision": sha}),
    );
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/commit-status", "true")],
    );
    let ca = standins.ca_pem.clone();
    let standins = standins
        .var("GIT_CREDENTIALS_SECRET_ARNS", SOURCE_SECRET)
        .var(api.0, &api.1)
        .var("GIT_CA_BUNDLE", &ca);
    (standins, queue, sha)
}

fn source_store(
    standins: &Scenario,
    host: SourceHost,
) -> &argocd_ecr_updater_standins::github::GitHubState {
    match host {
        SourceHost::GitHub => &standins.github,
        SourceHost::GitLab => &standins.gitlab,
    }
}

/// A status on the application's own commit: `pending` at the write, `success` with the lead
/// time once live, on the commit the image's labels name, under one context per Application.
#[tokio::test]
async fn the_images_own_commit_gets_a_pending_then_a_success_status_on_github_and_gitlab() {
    for host in [SourceHost::GitHub, SourceHost::GitLab] {
        let (standins, queue, sha) = built_from_source(host, true).await;
        let push = push_event("barun-dev-ecr", BUILT_TAG, "2025-09-01T00:00:01Z");
        let report = standins.report(&[], &push).await;
        let pending = format!("commit status pending on acme/web@{}", &sha[..12]);
        expect_decision(only(&report), Action::Updated, &pending);
        pass(&standins, ROLLED_OUT);
        let check = checks(&standins, &queue).remove(0);
        assert_eq!(
            the_rollout(&deliver(&standins, &check).await).state,
            "confirmed",
            "{host:?}"
        );
        let statuses = source_store(&standins, host).statuses("acme/web");
        let states: Vec<&str> = statuses
            .iter()
            .map(|s| s["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["pending", "success"], "{host:?}");
        for status in &statuses {
            assert_eq!(status["sha"], sha.as_str());
            assert_eq!(
                status["context"],
                "argocd-ecr-updater/barun-dev/argocd/aws-pipeline-test"
            );
        }
        let done = statuses[1]["description"].as_str().unwrap();
        assert!(
            done.starts_with("live and Healthy") && done.ends_with("s after the ECR push"),
            "{host:?}: {done}"
        );
    }
}

/// No status is left `pending` for ever: a write whose rollout will not be followed says so
/// at once (GitHub's `error`, GitLab's `canceled`), and a followed write replaced before it
/// was judged is settled by the write that replaced it.
#[tokio::test]
async fn a_status_is_never_left_pending_when_the_rollout_is_not_followed_or_superseded() {
    for (host, state) in [
        (SourceHost::GitHub, "error"),
        (SourceHost::GitLab, "canceled"),
    ] {
        let (standins, _queue, sha) = built_from_source(host, true).await;
        let push = push_event("barun-dev-ecr", BUILT_TAG, "2025-09-01T00:00:01Z");
        let report = standins
            .report(&[("CONFIRM_ROLLOUTS", "false")], &push)
            .await;
        expect_decision(only(&report), Action::Updated, "ranks above");
        let statuses = source_store(&standins, host).statuses("acme/web");
        assert_eq!(statuses.len(), 1, "{host:?}");
        assert_eq!(statuses[0]["state"], state, "{host:?}");
        assert_eq!(statuses[0]["sha"], sha.as_str());
        assert_eq!(
            statuses[0]["description"],
            "barun-dev-ecr:20250901-000000 written, not followed: rollout confirmation is off (CONFIRM_ROLLOUTS)"
        );
    }
    let (standins, queue, sha) = built_from_source(SourceHost::GitHub, true).await;
    let push = push_event("barun-dev-ecr", BUILT_TAG, "2025-09-01T00:00:01Z");
    standins.report(&[], &push).await;
    // The newer write comes a few seconds later, before the first was judged.
    pass(&standins, 5);
    let newer = "20250902-000000";
    standins.aws.push_labelled(
        image("barun-dev-ecr", newer, '9', "2025-09-02T00:00:01Z"),
        &json!({"org.opencontainers.image.source": "https://github.com/acme/web",
            "org.opencontainers.image.revision": sha}),
    );
    let report = standins
        .report(
            &[],
            &push_event("barun-dev-ecr", newer, "2025-09-02T00:00:01Z"),
        )
        .await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    let statuses = standins.github.statuses("acme/web");
    let states: Vec<&str> = statuses
        .iter()
        .map(|s| s["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["pending", "error", "pending"]);
    let settled = statuses[1]["description"].as_str().unwrap();
    assert!(
        settled.starts_with("barun-dev-ecr:20250901-000000 superseded by a newer write at "),
        "{settled}"
    );
    // The first write's check, when it comes, finds it superseded and reports nothing more.
    let first = checks(&standins, &queue).remove(0);
    assert_eq!(
        the_rollout(&deliver(&standins, &first).await).state,
        "superseded"
    );
    assert_eq!(standins.github.statuses("acme/web").len(), 3);
}

/// A rollout that fails marks the commit `failure` with the reason, on the same context.
#[tokio::test]
async fn a_failed_rollout_marks_the_images_commit_failed_with_the_reason() {
    let (standins, queue, sha) = built_from_source(SourceHost::GitHub, true).await;
    standins
        .kube
        .run_controller(controller(&standins, Script::DegradedAfterSync));
    let push = push_event("barun-dev-ecr", BUILT_TAG, "2025-09-01T00:00:01Z");
    standins.report(&[], &push).await;
    pass(&standins, ROLLED_OUT);
    let check = checks(&standins, &queue).remove(0);
    assert_eq!(
        the_rollout(&deliver(&standins, &check).await).state,
        "failed"
    );
    let statuses = standins.github.statuses("acme/web");
    let last = statuses.last().unwrap();
    assert_eq!(
        (last["sha"].as_str(), last["state"].as_str()),
        (Some(sha.as_str()), Some("failure"))
    );
    let description = last["description"].as_str().unwrap();
    assert!(
        description.starts_with("rollout failed: health is Degraded"),
        "{description}"
    );
    assert!(description.chars().count() <= 140, "{description}");
}

/// The repository is the image builder's to name: without a secret scoped to it by `url`, no
/// status is written, and the rollout is followed all the same.
#[tokio::test]
async fn no_status_is_written_without_a_credential_scoped_to_the_source_repository() {
    let (standins, queue, _) = built_from_source(SourceHost::GitHub, false).await;
    let push = push_event("barun-dev-ecr", BUILT_TAG, "2025-09-01T00:00:01Z");
    let report = standins.report(&[], &push).await;
    expect_decision(only(&report), Action::Updated, "no commit status for");
    expect_decision(
        only(&report),
        Action::Updated,
        "has a `url` scope covering `https://github.com/acme/web`",
    );
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    assert!(standins.github.statuses("acme/web").is_empty());
    assert_eq!(checks(&standins, &queue).len(), 1);
}

/// The write a check follows.
fn written_at(check: &QueueMessage) -> time::OffsetDateTime {
    let body: Value = serde_json::from_str(&check.body).unwrap();
    time::OffsetDateTime::parse(body["write"].as_str().unwrap(), &Rfc3339).unwrap()
}

/// The check delivered after `seconds` more of the controller's time: the next one sent.
async fn next_check_after(standins: &Scenario, queue: &str, seconds: u64) -> Report {
    pass(standins, seconds);
    let next = checks(standins, queue).pop().unwrap();
    deliver(standins, &next).await
}

/// Someone else's spec change, synced by an operation that starts before our write and ends
/// after it, on an Application already Degraded on its image: that operation synced the spec
/// before our write, so its success and the Degraded health say nothing of our write. Argo CD
/// then syncs our write, which rolls out Healthy.
#[tokio::test]
async fn an_operation_started_before_the_write_and_ended_after_it_is_not_its_sync() {
    let timeline = Timeline {
        sync: Duration::from_secs(20),
        post_sync_refresh: Duration::from_secs(3),
        ..Timeline::typical()
    };
    let (standins, queue) = following_on(Script::Healthy, timeline).await;
    degraded_before(&standins);
    standins
        .kube
        .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
            let parameters = app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap();
            parameters.push(json!({"name": "replicaCount", "value": "3"}));
        })
        .unwrap();
    pass(&standins, 5);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(app["status"]["operationState"]["phase"], "Running");
    let check = push(&standins, &queue).await;
    // The other operation has ended (Succeeded) and Argo CD has not compared since.
    pass(&standins, 18);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(app["status"]["operationState"]["phase"], "Succeeded");
    assert_eq!(app["status"]["health"]["status"], "Degraded");
    let straddled = deliver(&standins, &check).await;
    let rollout = the_rollout(&straddled);
    assert_eq!(rollout.state, "pending", "{rollout:#?}");
    assert!(
        rollout
            .reason
            .contains("before the write, and synced what was there before it"),
        "{}",
        rollout.reason
    );
    assert!(events(&standins, "RolloutFailed").is_empty());
    let later = next_check_after(&standins, &queue, 60).await;
    assert_eq!(
        the_rollout(&later).state,
        "confirmed",
        "{:#?}",
        later.rollouts
    );
    assert_eq!(standins.kube.syncs("argocd", SEED_APP), 2);
}

/// Our sync succeeds on an Application Degraded before it; until Argo CD compares it again
/// (`reconciledAt` after `finishedAt`), that Degraded is from before the sync.
#[tokio::test]
async fn a_degraded_health_not_compared_since_the_sync_is_not_a_failed_rollout() {
    let timeline = Timeline {
        post_sync_refresh: Duration::from_secs(3),
        ..Timeline::typical()
    };
    let (standins, queue) = following_on(Script::Healthy, timeline).await;
    degraded_before(&standins);
    let check = push(&standins, &queue).await;
    pass(&standins, 7);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(app["status"]["operationState"]["phase"], "Succeeded");
    assert_eq!(app["status"]["health"]["status"], "Degraded");
    let stale = deliver(&standins, &check).await;
    let rollout = the_rollout(&stale);
    assert_eq!(rollout.state, "pending", "{rollout:#?}");
    assert!(
        rollout.reason.contains("not yet compared again by Argo CD"),
        "{}",
        rollout.reason
    );
    assert!(events(&standins, "RolloutFailed").is_empty());
    let later = next_check_after(&standins, &queue, ROLLED_OUT).await;
    assert_eq!(
        the_rollout(&later).state,
        "confirmed",
        "{:#?}",
        later.rollouts
    );
}

/// `syncPolicy.automated.enabled: false` (Argo CD 3.1+) turns automated sync off: Argo CD
/// does not sync the write, so an Application asking for a sync gets one from us.
#[tokio::test]
async fn automated_sync_turned_off_is_synced_by_us_where_asked() {
    let (standins, queue) = following(Script::Healthy).await;
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["spec"]["syncPolicy"]["automated"]["enabled"] = json!(false);
        })
        .unwrap();
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/sync", "true")],
    );
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "sync started (argocd-ecr-updater.io/sync)",
    );
    pass(&standins, ROLLED_OUT);
    assert_eq!(standins.kube.syncs("argocd", SEED_APP), 1);
    let check = checks(&standins, &queue).remove(0);
    assert_eq!(
        the_rollout(&deliver(&standins, &check).await).state,
        "confirmed"
    );
}

/// A commit to a multi-source Application: Argo CD reports `revisions` per source
/// (`syncResult.revision` empty). The new Pods are refused (a quota), so only the old image
/// runs and the Deployment goes Degraded: a failed rollout of the commit, not "never synced".
#[tokio::test]
async fn a_multi_source_commit_is_judged_by_its_revisions() {
    let (standins, queue) = crate::git::git_following().await;
    let standins = standins.on_clock(Arc::new(SimClock::scripted()));
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            let source = app["spec"]["source"].take();
            app["spec"].as_object_mut().unwrap().remove("source");
            app["spec"]["sources"] = json!([source, {"repoURL": "https://charts.example.com",
                "chart": "redis", "targetRevision": "19.0.1"}]);
            app["status"]["sourceTypes"] = json!(["Helm", "Helm"]);
        })
        .unwrap();
    let github = standins.github.clone();
    let render = move |_: &Value| {
        let (repo, file) = (crate::git::REPO, crate::git::OVERRIDE);
        let revision = github.head(repo, "main")?;
        let source: Value = serde_yaml_ng::from_str(&github.file(repo, "main", file)?).ok()?;
        let images =
            argocd_ecr_updater_standins::argocd::images_of_spec(&json!({"source": source}));
        Some(Rendered { revision, images })
    };
    standins
        .kube
        .run_controller(controller(&standins, Script::PodsRefused).rendering(Arc::new(render)));
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    pass(&standins, ROLLED_OUT);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let head = standins.github.head(crate::git::REPO, "main").unwrap();
    assert_eq!(
        app["status"]["operationState"]["syncResult"]["revisions"],
        json!([head, "19.0.1"])
    );
    let check = checks(&standins, &queue).remove(0);
    let rollout = deliver(&standins, &check).await.rollouts.remove(0);
    assert_eq!(rollout.state, "failed", "{rollout:#?}");
    assert!(
        rollout
            .reason
            .contains("health is Degraded after the sync of the write"),
        "{}",
        rollout.reason
    );
}

/// A paused rollout (Suspended) is reported as one while it waits.
#[tokio::test]
async fn a_paused_rollout_is_reported_as_suspended() {
    let (standins, queue) = following(Script::Suspended).await;
    let check = push_and_wait(&standins, &queue).await;
    let rollout = deliver(&standins, &check).await.rollouts.remove(0);
    assert_eq!(rollout.state, "pending");
    assert!(
        rollout
            .reason
            .starts_with("synced, the rollout is paused (health Suspended)"),
        "{}",
        rollout.reason
    );
}

/// `summary.images` lists the images of the Pods Argo CD sees: after the Deployment is
/// Healthy, old Pods shutting down still run the old image. Live once they are gone.
#[tokio::test]
async fn a_rollout_is_live_only_once_the_old_pods_are_gone() {
    let timeline = Timeline {
        termination: Duration::from_secs(10),
        ..Timeline::typical()
    };
    let (standins, queue) = following_on(Script::Healthy, timeline).await;
    let check = push(&standins, &queue).await;
    pass(&standins, 30);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(app["status"]["health"]["status"], "Healthy");
    assert_eq!(
        app["status"]["summary"]["images"].as_array().unwrap().len(),
        2
    );
    let both = deliver(&standins, &check).await;
    let rollout = the_rollout(&both);
    assert_eq!(rollout.state, "pending", "{rollout:#?}");
    assert!(
        rollout.reason.starts_with(&format!(
            "Healthy, but Pods of the replaced {SEED_IMAGE}:{SEED_TAG} still run"
        )),
        "{}",
        rollout.reason
    );
    let later = next_check_after(&standins, &queue, 15).await;
    assert_eq!(
        the_rollout(&later).state,
        "confirmed",
        "{:#?}",
        later.rollouts
    );
}
