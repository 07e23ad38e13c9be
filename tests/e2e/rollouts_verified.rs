//! Rollouts verified by CloudWatch alarms, on the Argo CD controller stand-in moving through
//! time and the CloudWatch stand-in: the real handler follows a write until it is live, then
//! watches the Application's alarms for its window, check by check, and fails the rollout on
//! an alarm in that window, also one that flapped between two checks.

use crate::moving::{
    annotate, checks, deliver, events, failed_rollouts, pass, pushed_and_deployed, seeded,
};
use argocd_ecr_updater::report::Report;
use argocd_ecr_updater_standins::argocd::Script;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP};
use serde_json::Value;

const ALARMS: &str = "argocd-ecr-updater.io/verify-alarms";
const WINDOW: &str = "argocd-ecr-updater.io/verify-for";

fn verified_by(alarms: &str) -> impl FnOnce(&mut Value) {
    let alarms = alarms.to_string();
    move |app: &mut Value| {
        annotate(app, ALARMS, &alarms);
        annotate(app, WINDOW, "15m");
        annotate(app, "argocd-ecr-updater.io/app.hold-on-failure", "true");
    }
}

fn now(standins: &crate::common::Scenario) -> time::OffsetDateTime {
    standins.test_clock().now()
}

fn minutes(m: i64) -> time::Duration {
    time::Duration::minutes(m)
}

/// Delivers the newest check after its delay; its rollout report's state and reason.
async fn next_check(
    standins: &crate::common::Scenario,
    queue: &str,
) -> (String, String, Report, u32) {
    let next = checks(standins, queue).pop().expect("a check on the queue");
    pass(standins, next.delay_seconds.into());
    let report = deliver(standins, &next).await;
    let Some(rollout) = report.rollouts.first() else {
        panic!("no rollout in the report of {}: {:#?}", next.body, report);
    };
    (
        rollout.state.clone(),
        rollout.reason.clone(),
        report.clone(),
        next.delay_seconds,
    )
}

/// Follows checks until the rollout ends; the states seen and the last reason.
async fn to_the_end(standins: &crate::common::Scenario, queue: &str) -> (Vec<String>, String) {
    let mut states = Vec::new();
    for _ in 0..40 {
        let (state, reason, _, _) = next_check(standins, queue).await;
        states.push(state.clone());
        if state != "pending" && state != "verifying" {
            return (states, reason);
        }
    }
    panic!("never ended: {states:?}");
}

#[tokio::test]
async fn a_quiet_window_confirms_the_rollout_only_when_it_ends() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    let written = now(&standins);
    pushed_and_deployed(&standins).await;
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("confirmed"),
        "{states:?}"
    );
    assert!(
        states.iter().filter(|s| *s == "verifying").count() >= 2,
        "{states:?}"
    );
    assert!(
        reason.contains("verified: web-5xx not in ALARM for 15m"),
        "{reason}"
    );
    assert!(
        now(&standins) - written >= minutes(15),
        "confirmed before the window ended"
    );
    assert_eq!(events(&standins, "RolloutConfirmed").len(), 1);
    assert!(events(&standins, "RolloutFailed").is_empty());
    // What one window costs: one DescribeAlarms and one DescribeAlarmHistory per alarm at
    // each check from the first that saw it live to the one that confirms.
    let calls = standins.aws.cloudwatch.calls();
    let looks = states.iter().filter(|s| *s != "pending").count();
    let count = |op: &str| calls.iter().filter(|(o, _)| o == op).count();
    assert_eq!(count("DescribeAlarms"), looks, "{states:?} {calls:?}");
    assert_eq!(count("DescribeAlarmHistory"), looks, "{states:?} {calls:?}");
    assert_eq!(
        looks, 4,
        "three checks in a 15-minute window, and the one that saw it live: {states:?}"
    );
}

#[tokio::test]
async fn an_alarm_that_flapped_between_two_checks_fails_the_rollout_and_holds_the_image() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    // Until the first check that sees it live and starts the window.
    let mut state = String::new();
    for _ in 0..10 {
        (state, _, _, _) = next_check(&standins, &queue).await;
        if state == "verifying" {
            break;
        }
    }
    assert_eq!(state, "verifying");
    let next = checks(&standins, &queue).pop().unwrap();
    assert!(next.delay_seconds >= 60, "{}", next.delay_seconds);
    // Up and down again well before the next check comes.
    let flap = now(&standins) + time::Duration::seconds(20);
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", flap);
    cloudwatch.set_state(
        "web-5xx",
        "OK",
        "Threshold Crossed: 0 < 5",
        flap + time::Duration::seconds(30),
    );
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(states, ["failed"]);
    assert!(
        reason.contains("alarm web-5xx went to ALARM at") && reason.contains("9 > 5"),
        "{reason}"
    );
    let failed = events(&standins, "RolloutFailed");
    assert_eq!(failed.len(), 1);
    assert!(failed[0]["message"].as_str().unwrap().contains("web-5xx"));
    let remembered = failed_rollouts(&standins);
    assert_eq!(
        remembered.as_object().map(|m| m.len()),
        Some(1),
        "{remembered}"
    );
    assert!(
        remembered.to_string().contains(PUSHED_TAG),
        "the failed write is remembered for hold-on-failure: {remembered}"
    );
}

#[tokio::test]
async fn an_alarm_already_firing_when_the_write_went_live_fails_the_first_verifying_check() {
    let (standins, queue) = seeded(verified_by("web-5xx, web-latency"), &[Script::Healthy]).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", now(&standins) - minutes(60));
    cloudwatch.create_composite_alarm("web-latency", now(&standins) - minutes(60));
    cloudwatch.set_state(
        "web-latency",
        "ALARM",
        "p99 above 800 ms",
        now(&standins) - minutes(5),
    );
    pushed_and_deployed(&standins).await;
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
    assert!(
        !states.contains(&"verifying".to_string()),
        "failed at the first look: {states:?}"
    );
    assert!(
        reason.contains("web-latency was in ALARM when the rollout went live: p99 above 800 ms"),
        "{reason}"
    );
}

#[tokio::test]
async fn alarms_the_role_may_not_read_fail_the_rollout_naming_the_permission() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    standins.aws.cloudwatch.readable_only(&[]);
    pushed_and_deployed(&standins).await;
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
    assert!(
        reason.contains("cloudwatch:DescribeAlarms") && reason.contains("VerifyAlarmNames"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_verifying_check_delivered_twice_sends_one_next_check() {
    let (standins, queue) = seeded(verified_by("web-5xx"), &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - minutes(60));
    pushed_and_deployed(&standins).await;
    let mut state = String::new();
    for _ in 0..10 {
        (state, _, _, _) = next_check(&standins, &queue).await;
        if state == "verifying" {
            break;
        }
    }
    assert_eq!(state, "verifying");
    let next = checks(&standins, &queue).pop().unwrap();
    let before = checks(&standins, &queue).len();
    pass(&standins, next.delay_seconds.into());
    let first = deliver(&standins, &next).await;
    let second = deliver(&standins, &next).await;
    assert_eq!(first.rollouts[0].state, "verifying");
    assert_eq!(second.rollouts[0].state, "duplicate");
    assert_eq!(checks(&standins, &queue).len(), before + 1);
}

#[tokio::test]
async fn a_misread_annotation_fails_the_rollout_check_with_the_annotation_named() {
    let (standins, queue) = seeded(
        |app: &mut Value| {
            annotate(app, ALARMS, "web-5xx");
            annotate(app, WINDOW, "forever");
        },
        &[Script::Healthy],
    )
    .await;
    pushed_and_deployed(&standins).await;
    let (states, reason) = to_the_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
    assert!(reason.contains(WINDOW), "{reason}");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert!(
        app["metadata"]["annotations"]["argocd-ecr-updater.io/last-update"]
            .as_str()
            .unwrap()
            .contains("\"outcome\":\"failed\"")
    );
}
