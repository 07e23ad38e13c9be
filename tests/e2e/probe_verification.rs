//! Verification by CloudWatch alarms off the happy path: composite alarms, histories that
//! lag or run long, CloudWatch failing, the Application leaving Healthy mid-window, deliveries
//! twice at once, a failed send, another image's write, settings changed or refused. Each
//! case asserts what docs/rollouts.md promises.

use std::time::Duration;

use crate::common::Scenario;
use crate::moving::{
    WORKER, annotate, checks, deliver, events, failed_rollouts, follow_every_chain, pass, push_now,
    pushed_and_deployed, seeded, with_worker,
};
use argocd_ecr_updater::report::Report;
use argocd_ecr_updater::rollout::alarms::{
    self, Observed, Seen, State, Transition, Verification, Watch,
};
use argocd_ecr_updater::rollout::watched::Alarms;
use argocd_ecr_updater_standins::argocd::Script;
use argocd_ecr_updater_standins::fixtures::{SEED_APP, SEED_IMAGE, image};
use argocd_ecr_updater_standins::{FaultAction, Options, Route, Service};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::datetime;

const ALARMS: &str = "argocd-ecr-updater.io/verify-alarms";
const WINDOW: &str = "argocd-ecr-updater.io/verify-for";
const AUDIT: &str = "argocd-ecr-updater.io/last-update";
const LIVE: OffsetDateTime = datetime!(2026-12-06 10:00 UTC);

fn minutes(m: i64) -> time::Duration {
    time::Duration::minutes(m)
}

fn secs(s: i64) -> time::Duration {
    time::Duration::seconds(s)
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

fn watch15(list: &[&str]) -> Watch {
    Watch {
        alarms: names(list),
        window: Duration::from_secs(900),
    }
}

fn verified_by(alarms: &str) -> impl FnOnce(&mut Value) {
    let alarms = alarms.to_string();
    move |app: &mut Value| {
        annotate(app, ALARMS, &alarms);
        annotate(app, WINDOW, "15m");
        annotate(app, "argocd-ecr-updater.io/app.hold-on-failure", "true");
    }
}

fn now(standins: &Scenario) -> OffsetDateTime {
    standins.test_clock().now()
}

fn audit(standins: &Scenario) -> Value {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    serde_json::from_str(app["metadata"]["annotations"][AUDIT].as_str().unwrap()).unwrap()
}

/// Delivers the newest check after its delay: its first rollout's state and reason, and the
/// report.
async fn next_check(standins: &Scenario, queue: &str) -> (String, String, Report) {
    let next = checks(standins, queue).pop().expect("a check on the queue");
    pass(standins, next.delay_seconds.into());
    let report = deliver(standins, &next).await;
    let (state, reason) = report
        .rollouts
        .first()
        .map(|r| (r.state.clone(), r.reason.clone()))
        .unwrap_or_else(|| ("<none>".into(), format!("{:?}", report.failed_messages)));
    (state, reason, report)
}

async fn until_verifying(standins: &Scenario, queue: &str) {
    let mut state = String::new();
    for _ in 0..10 {
        (state, _, _) = next_check(standins, queue).await;
        if state == "verifying" {
            return;
        }
    }
    panic!("never verifying: last {state}");
}

async fn to_the_end(standins: &Scenario, queue: &str) -> (Vec<String>, String) {
    let mut states = Vec::new();
    for _ in 0..40 {
        let (state, reason, _) = next_check(standins, queue).await;
        states.push(state.clone());
        if state != "pending" && state != "verifying" {
            return (states, reason);
        }
    }
    panic!("never ended: {states:?}");
}

// ---------------------------------------------------------------- composite alarms

/// FINDING: `DescribeAlarmHistory` is called without `AlarmTypes`, so CloudWatch returns no
/// history for a composite alarm. A composite alarm that flaps to ALARM and back between two
/// checks is therefore never seen, though the docs promise composite alarms and "a flap
/// between two checks is in the history".
#[tokio::test]
async fn a_composite_alarm_that_flapped_between_checks_fails_the_window() {
    let standins = Scenario::start(Options::default()).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_composite_alarm("web-health", LIVE - minutes(60));
    cloudwatch.set_state(
        "web-health",
        "ALARM",
        "child web-5xx ALARM",
        LIVE + minutes(4),
    );
    cloudwatch.set_state("web-health", "OK", "children OK", LIVE + minutes(6));
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&standins.sdk_config()));
    let observed = reader
        .observe(
            &names(&["web-health"]),
            LIVE - minutes(1),
            LIVE + minutes(10),
        )
        .await
        .unwrap();
    let verdict = alarms::judge(
        &watch15(&["web-health"]),
        LIVE,
        LIVE + minutes(10),
        &observed,
    );
    assert!(
        matches!(&verdict, Verification::Failed(why) if why.contains("web-health")),
        "the composite alarm was in ALARM from +4m to +6m of the window, yet: {verdict:?}; transitions read: {:?}",
        observed.transitions
    );
}

// ---------------------------------------------------------------- history lag

/// FINDING: the alarm was in ALARM when the write went live (since before the write) and
/// went OK a minute before the window's end; the history has not caught up with the state yet
/// (CloudWatch's history lags the state). At the last check the judge cannot know the state at
/// the opening (`updated` is inside the window, no transition read) and says Verified.
#[test]
fn history_lagging_the_state_at_the_last_check_does_not_verify() {
    let observed = Observed {
        alarms: vec![Seen {
            name: "errors".into(),
            state: State::Ok,
            reason: "recovered".into(),
            updated: Some(LIVE + minutes(14)),
        }],
        transitions: vec![],
    };
    let verdict = alarms::judge(&watch15(&["errors"]), LIVE, LIVE + minutes(15), &observed);
    assert!(
        !matches!(verdict, Verification::Verified(_)),
        "the state changed inside the window but its history was not read: the window is not known to be quiet, yet: {verdict:?}"
    );
}

/// FINDING (same root): a flap OK -> ALARM -> OK inside the last interval whose history lags:
/// the state now (OK, changed inside the window) is the only trace, and it verifies.
#[test]
fn a_flap_whose_history_lags_at_the_last_check_does_not_verify() {
    let observed = Observed {
        alarms: vec![Seen {
            name: "errors".into(),
            state: State::Ok,
            reason: "Threshold Crossed: 0 < 5".into(),
            updated: Some(LIVE + minutes(13)),
        }],
        transitions: vec![Transition {
            alarm: "errors".into(),
            at: LIVE - minutes(30),
            from: Some(State::Alarm),
            to: State::Ok,
            reason: "old".into(),
        }],
    };
    let verdict = alarms::judge(&watch15(&["errors"]), LIVE, LIVE + minutes(15), &observed);
    assert!(
        !matches!(verdict, Verification::Verified(_)),
        "the alarm's state changed at +13m and no change after +0 was read: {verdict:?}"
    );
}

// ---------------------------------------------------------------- huge history

/// At most 5 pages (500 items) of one alarm's history are read, oldest first, since the
/// write: an alarm that changed state more often is refused as too restless to verify by
/// (the rollout fails saying so), never judged on part of its history.
#[tokio::test]
async fn a_history_past_five_pages_is_refused_not_cut() {
    let standins = Scenario::start(Options::default()).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("sparse", LIVE - minutes(60));
    for n in 0..520 {
        let state = if n % 2 == 0 {
            "INSUFFICIENT_DATA"
        } else {
            "OK"
        };
        cloudwatch.set_state("sparse", state, "no data", LIVE + secs(n + 1));
    }
    cloudwatch.set_state(
        "sparse",
        "ALARM",
        "Threshold Crossed: 9 > 5",
        LIVE + minutes(11),
    );
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&standins.sdk_config()));
    let refused = reader
        .observe(&names(&["sparse"]), LIVE - minutes(1), LIVE + minutes(15))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("sparse") && refused.contains("too restless"),
        "{refused}"
    );
}

// ---------------------------------------------------------------- clock edges (controls)

#[test]
fn window_end_exactly_at_a_check_verifies_and_a_change_at_the_end_counts() {
    let quiet = Observed {
        alarms: vec![Seen {
            name: "e".into(),
            state: State::Ok,
            reason: String::new(),
            updated: Some(LIVE - minutes(60)),
        }],
        transitions: vec![],
    };
    assert!(matches!(
        alarms::judge(&watch15(&["e"]), LIVE, LIVE + minutes(15), &quiet),
        Verification::Verified(_)
    ));
    let at_end = Observed {
        alarms: vec![Seen {
            name: "e".into(),
            state: State::Alarm,
            reason: "r".into(),
            updated: Some(LIVE + minutes(15)),
        }],
        transitions: vec![Transition {
            alarm: "e".into(),
            at: LIVE + minutes(15),
            from: Some(State::Ok),
            to: State::Alarm,
            reason: "r".into(),
        }],
    };
    assert!(matches!(
        alarms::judge(&watch15(&["e"]), LIVE, LIVE + minutes(15), &at_end),
        Verification::Failed(_)
    ));
    // A late check (after the end) ignores a change after the end.
    assert!(matches!(
        alarms::judge(
            &watch15(&["e"]),
            LIVE - secs(1),
            LIVE + minutes(16),
            &at_end
        ),
        Verification::Verified(_)
    ));
}

// ---------------------------------------------------------------- settings

const EU: alarms::Home<'static> = alarms::Home {
    region: "eu-west-1",
    account: None,
};

/// FINDING (low): a name or ARN is split at commas, so an ARN whose alarm name holds a comma
/// (CloudWatch allows any printable character) silently becomes two other alarm names.
/// Decided: a comma always separates two alarms (documented); a name holding one cannot be
/// watched, and is read as the two names around it.
#[test]
fn a_comma_always_separates_two_alarms() {
    let got = alarms::settings(
        Some("arn:aws:cloudwatch:eu-west-1:123456789012:alarm:web 5xx, eu"),
        None,
        EU,
    );
    assert!(
        matches!(&got, Ok(Some(w)) if w.alarms == ["web 5xx", "eu"]),
        "{got:?}"
    );
}

/// FINDING (low): the account in an ARN is not compared with the function's: an alarm ARN
/// of another account is silently read as the same-named alarm of this account.
#[test]
fn an_alarm_arn_of_another_account_is_refused() {
    let got = alarms::settings(
        Some("arn:aws:cloudwatch:eu-west-1:999999999999:alarm:web-5xx"),
        None,
        alarms::Home {
            region: "eu-west-1",
            account: Some("123456789012"),
        },
    );
    assert!(
        got.is_err(),
        "another account's alarm is watched as this account's web-5xx: {got:?}"
    );
}

#[test]
fn names_with_spaces_and_colons_are_kept() {
    let got = alarms::settings(
        Some(" web p99 latency , arn:aws:cloudwatch:eu-west-1:1:alarm:a:b c"),
        Some("1s"),
        EU,
    )
    .unwrap()
    .unwrap();
    assert_eq!(got.alarms, ["web p99 latency", "a:b c"]);
}

// ---------------------------------------------------------------- CloudWatch failures

/// FINDING: CloudWatch answering 503 `ServiceUnavailable` (or 500 `InternalServiceError`)
/// through the SDK's three attempts is classified `Cause::Service` (not retryable), and the
/// verification turns it into a recorded RolloutFailed ("cannot be verified"), remembered for
/// hold-on-failure: AWS misbehaving decides the rollout instead of the check being retried.
#[tokio::test]
async fn cloudwatch_unavailable_mid_window_retries_the_check() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    standins
        .aws
        .cloudwatch
        .fail_next(3, 503, "ServiceUnavailable");
    let (state, reason, report) = next_check(&standins, &queue).await;
    assert!(
        events(&standins, "RolloutFailed").is_empty() && failed_rollouts(&standins) == Value::Null,
        "a CloudWatch outage failed the rollout: state {state}: {reason}; failed messages {:?}",
        report.failed_messages
    );
    assert!(
        !report.failed_messages.is_empty(),
        "the check should come back: {state}: {reason}"
    );
}

/// Control: throttling is retried: the message comes back, nothing recorded, and delivered
/// again once CloudWatch answers it goes on verifying.
#[tokio::test]
async fn cloudwatch_throttling_mid_window_comes_back_and_goes_on() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    standins.aws.cloudwatch.fail_next(3, 400, "Throttling");
    let next = checks(&standins, &queue).pop().unwrap();
    let before = checks(&standins, &queue).len();
    pass(&standins, next.delay_seconds.into());
    let report = deliver(&standins, &next).await;
    assert!(
        !report.failed_messages.is_empty(),
        "not retried: {:#?}",
        report.rollouts
    );
    assert!(events(&standins, "RolloutFailed").is_empty());
    assert!(audit(&standins).get("rollout").is_none());
    let again = deliver(&standins, &next).await;
    assert_eq!(
        again.rollouts[0].state, "verifying",
        "{:#?}",
        again.rollouts
    );
    assert_eq!(checks(&standins, &queue).len(), before + 1);
}

/// Control: an alarm deleted mid-window fails the rollout, naming it.
#[tokio::test]
async fn an_alarm_deleted_mid_window_fails_naming_it() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    standins.aws.cloudwatch.delete_alarm("web-5xx");
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(states, ["failed"], "{reason}");
    assert!(reason.contains("web-5xx does not exist"), "{reason}");
}

// ---------------------------------------------------------------- the check chain

/// Control: the next verifying check's SQS send fails: the claim is given back, the same
/// message delivered again sends it (`verifying`, not `duplicate`), and the recorded window
/// start stays.
#[tokio::test]
async fn a_verifying_check_whose_send_failed_sends_it_when_delivered_again() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    let live = audit(&standins)["verification"]["live"].clone();
    let next = checks(&standins, &queue).pop().unwrap();
    let before = checks(&standins, &queue).len();
    pass(&standins, next.delay_seconds.into());
    standins.shared.inject(
        Route {
            service: Some(Service::Sqs),
            operation: Some("SendMessage".into()),
            ..Route::default()
        },
        20,
        FaultAction::AwsError {
            code: 400,
            kind: "InvalidParameterValue",
        },
    );
    let failed = deliver(&standins, &next).await;
    standins.shared.clear_faults();
    assert!(!failed.failed_messages.is_empty(), "{:#?}", failed.rollouts);
    assert_eq!(checks(&standins, &queue).len(), before);
    let again = deliver(&standins, &next).await;
    assert_eq!(
        again.rollouts[0].state, "verifying",
        "{:#?}",
        again.rollouts
    );
    assert_eq!(checks(&standins, &queue).len(), before + 1);
    assert_eq!(audit(&standins)["verification"]["live"], live);
}

/// Control: a confirm-timeout far shorter than the window: the checks go on to the window's
/// end and verify; no RolloutTimedOut.
#[tokio::test]
async fn a_deadline_passing_mid_window_does_not_time_the_rollout_out() {
    let (standins, queue) = seeded(
        |app: &mut Value| {
            verified_by("web-5xx")(app);
            annotate(app, "argocd-ecr-updater.io/confirm-timeout", "2m");
        },
        &[Script::Healthy],
    )
    .await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "confirmed", "{states:?}: {reason}");
    assert!(reason.contains("verified"), "{reason}");
    assert!(events(&standins, "RolloutTimedOut").is_empty());
}

/// Control: Argo CD reports the Application Degraded mid-window: RolloutFailed naming it.
#[tokio::test]
async fn degraded_mid_window_fails_the_rollout() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    let at = now(&standins) + secs(10);
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["health"] = json!({"status": "Degraded", "message": "CrashLoopBackOff"});
            app["status"]["reconciledAt"] = json!(argocd_ecr_updater_standins::argocd::stamp(at));
        })
        .unwrap();
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(states, ["failed"], "{reason}");
    assert!(reason.contains("Degraded"), "{reason}");
}

/// FINDING: the Application is Progressing mid-window (a Pod restarts, an HPA scales) while an
/// alarm goes to ALARM. Every check then says `pending` without looking at the alarms, and
/// at the window's end the rollout is reported `timed-out` (RolloutTimedOut), not
/// `RolloutFailed` naming the alarm: the alarm in the window is lost from the verdict.
#[tokio::test]
async fn an_alarm_while_progressing_mid_window_fails_the_rollout() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    let at = now(&standins) + secs(10);
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["health"] = json!({"status": "Progressing"});
            app["status"]["reconciledAt"] = json!(argocd_ecr_updater_standins::argocd::stamp(at));
        })
        .unwrap();
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", at + secs(5));
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}: {reason}"
    );
    assert!(reason.contains("web-5xx"), "{states:?}: {reason}");
}

/// Observation (low): the annotation removed mid-window: the next check confirms with the
/// plain "running and Healthy", not saying the verification was abandoned part-way.
#[tokio::test]
async fn verification_dropped_mid_window_says_so() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            let annotations = app["metadata"]["annotations"].as_object_mut().unwrap();
            annotations.remove(ALARMS);
            annotations.remove(WINDOW);
        })
        .unwrap();
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(states, ["confirmed"], "{reason}");
    assert!(
        reason.contains("verif") || reason.contains("alarm"),
        "confirmed mid-window without saying the window was not watched to its end: {reason}"
    );
}

/// Another image's write during the window: the earlier write's verification is carried under
/// `earlier` with its window start, its chain goes on, and an alarm after the later write
/// fails it naming the alarm.
#[tokio::test]
async fn another_images_write_mid_window_keeps_the_earlier_window_and_its_check() {
    let (standins, queue) = seeded(
        |app: &mut Value| {
            with_worker(app);
            verified_by("web-5xx")(app);
        },
        &[Script::Healthy],
    )
    .await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", now(&standins) - minutes(60));
    standins
        .aws
        .push(image("worker", "v1", 'a', "2025-08-20T00:00:00Z"));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    let live = audit(&standins)["verification"]["live"].clone();
    assert!(live.is_string(), "{}", audit(&standins));
    pass(&standins, 30);
    push_now(&standins, "worker", "v2", 'c').await;
    let record = audit(&standins);
    let carried = record["earlier"]
        .as_array()
        .and_then(|e| e.iter().find(|w| w["image"] == SEED_IMAGE))
        .cloned()
        .unwrap_or_else(|| panic!("app's write not carried: {record}"));
    assert_eq!(carried["verification"]["live"], live, "{record}");
    assert!(carried["checks"].as_u64().unwrap_or(1) > 1, "{record}");
    let at = now(&standins) + secs(60);
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", at);
    cloudwatch.set_state("web-5xx", "OK", "Threshold Crossed: 0 < 5", at + secs(20));
    let ended = follow_every_chain(&standins, &queue).await;
    // The harness delivers again the checks `until_verifying` already delivered (their
    // `duplicate` reports are ignored): the decisive end of each image's write.
    let decisive = [
        "failed",
        "confirmed",
        "timed-out",
        "taken-back",
        "superseded",
    ];
    let of = |img: &str| {
        ended
            .iter()
            .filter(|r| decisive.contains(&r.state.as_str()))
            .find(|r| r.images.iter().any(|i| i.starts_with(&format!("{img}:"))))
            .unwrap_or_else(|| panic!("no end for {img}: {ended:#?}"))
    };
    assert_eq!(of(SEED_IMAGE).state, "failed", "{:#?}", of(SEED_IMAGE));
    assert!(
        of(SEED_IMAGE).reason.contains("web-5xx"),
        "{:#?}",
        of(SEED_IMAGE)
    );
    // The worker's own window opened after the flap (the harness passes each old check's
    // delay): it ends on its own, decided.
    assert!(
        ["failed", "confirmed"].contains(&of(WORKER).state.as_str()),
        "{:#?}",
        of(WORKER)
    );
}

/// Control: two deliveries of one verifying check at the same time: one sends the next
/// check, the other reports `duplicate`; one message more on the queue.
#[tokio::test]
async fn a_verifying_check_delivered_twice_at_once_sends_one_next_check() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    until_verifying(&standins, &queue).await;
    let next = checks(&standins, &queue).pop().unwrap();
    let before = checks(&standins, &queue).len();
    pass(&standins, next.delay_seconds.into());
    let (first, second) = tokio::join!(deliver(&standins, &next), deliver(&standins, &next));
    let mut states = [
        first.rollouts[0].state.clone(),
        second.rollouts[0].state.clone(),
    ];
    states.sort();
    assert_eq!(states, ["duplicate", "verifying"], "{first:#?} {second:#?}");
    assert_eq!(checks(&standins, &queue).len(), before + 1);
}
