//! Reading the watched CloudWatch alarms through the real AWS SDK (Smithy RPC v2 CBOR) against
//! the CloudWatch stand-in, signed like every AWS call, and judging a rollout's window on what
//! was read.

use std::time::Duration;

use crate::common::Scenario;
use argocd_ecr_updater::rollout::alarms::{self, State, Verification, Watch};
use argocd_ecr_updater::rollout::watched::Alarms;
use argocd_ecr_updater_standins::Options;
use time::OffsetDateTime;
use time::macros::datetime;

const LIVE: OffsetDateTime = datetime!(2026-12-06 10:00 UTC);

fn minutes(m: i64) -> time::Duration {
    time::Duration::minutes(m)
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

#[tokio::test]
async fn states_of_metric_and_composite_alarms_and_only_their_state_changes_are_read() {
    let standins = Scenario::start(Options::default()).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", LIVE - minutes(60));
    cloudwatch.create_composite_alarm("web-health", LIVE - minutes(60));
    cloudwatch.create_alarm("other", LIVE - minutes(60));
    cloudwatch.set_state(
        "web-5xx",
        "ALARM",
        "Threshold Crossed: 7 > 5",
        LIVE + minutes(4),
    );
    cloudwatch.set_state(
        "web-5xx",
        "OK",
        "Threshold Crossed: 1 < 5",
        LIVE + minutes(6),
    );
    cloudwatch.set_state("other", "ALARM", "not ours", LIVE + minutes(5));
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&standins.sdk_config()));
    let observed = reader
        .observe(
            &names(&["web-5xx", "web-health", "missing"]),
            LIVE - minutes(1),
            LIVE + minutes(10),
        )
        .await
        .unwrap();
    let mut seen: Vec<(&str, State)> = observed
        .alarms
        .iter()
        .map(|a| (a.name.as_str(), a.state))
        .collect();
    seen.sort_by_key(|(name, _)| *name);
    assert_eq!(seen, [("web-5xx", State::Ok), ("web-health", State::Ok)]);
    let changes: Vec<(String, State, OffsetDateTime)> = observed
        .transitions
        .iter()
        .map(|t| (t.alarm.clone(), t.to, t.at))
        .collect();
    assert_eq!(
        changes,
        [
            ("web-5xx".into(), State::Alarm, LIVE + minutes(4)),
            ("web-5xx".into(), State::Ok, LIVE + minutes(6)),
        ],
        "creation (a configuration update) and other alarms are not read"
    );
    assert_eq!(
        observed.transitions[0].reason, "Threshold Crossed: 7 > 5",
        "the new state's reason from the history data"
    );
    // The flap between two checks fails the window, naming the alarm and its reason.
    let watch = Watch {
        alarms: names(&["web-5xx", "web-health"]),
        window: Duration::from_secs(900),
    };
    let Verification::Failed(why) = alarms::judge(&watch, LIVE, LIVE + minutes(10), &observed)
    else {
        panic!("expected a failure")
    };
    assert!(
        why.contains("web-5xx went to ALARM at 2026-12-06T10:04:00Z: Threshold Crossed: 7 > 5"),
        "{why}"
    );
    // A name that does not exist fails the window rather than passing it unverified.
    let watch = Watch {
        alarms: names(&["web-health", "missing"]),
        window: Duration::from_secs(900),
    };
    let Verification::Failed(why) = alarms::judge(&watch, LIVE, LIVE + minutes(20), &observed)
    else {
        panic!("expected a failure")
    };
    assert!(why.contains("missing does not exist"), "{why}");
    let calls = cloudwatch.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|(op, _)| op == "DescribeAlarms")
            .count(),
        1,
        "one DescribeAlarms for every alarm: {calls:?}"
    );
}

#[tokio::test]
async fn a_long_history_is_read_page_by_page_oldest_first() {
    let standins = Scenario::start(Options::default()).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("flappy", LIVE - minutes(600));
    for n in 0..250 {
        let state = if n % 2 == 0 { "ALARM" } else { "OK" };
        cloudwatch.set_state("flappy", state, &format!("flap {n}"), LIVE + minutes(n));
    }
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&standins.sdk_config()));
    let observed = reader
        .observe(&names(&["flappy"]), LIVE, LIVE + minutes(300))
        .await
        .unwrap();
    assert_eq!(observed.transitions.len(), 250);
    assert!(
        observed.transitions.windows(2).all(|w| w[0].at <= w[1].at),
        "oldest first"
    );
    let history_calls = cloudwatch
        .calls()
        .iter()
        .filter(|(op, _)| op == "DescribeAlarmHistory")
        .count();
    assert_eq!(history_calls, 3, "100 per page");
}

#[tokio::test]
async fn an_alarm_the_role_may_not_read_is_a_failure_naming_the_permission() {
    let standins = Scenario::start(Options::default()).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", LIVE);
    cloudwatch.create_alarm("payments-5xx", LIVE);
    cloudwatch.readable_only(&["web-5xx"]);
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&standins.sdk_config()));
    assert!(
        reader
            .observe(&names(&["web-5xx"]), LIVE, LIVE + minutes(1))
            .await
            .is_ok()
    );
    let failure = reader
        .observe(
            &names(&["web-5xx", "payments-5xx"]),
            LIVE,
            LIVE + minutes(1),
        )
        .await
        .unwrap_err();
    let text = failure.to_string();
    assert!(
        matches!(
            failure,
            argocd_ecr_updater::rollout::watched::Unreadable::Denied(_)
        ),
        "{text}"
    );
    assert!(
        text.contains("cloudwatch:DescribeAlarms")
            && text.contains("AccessDenied")
            && text.contains("alarm:payments-5xx")
            && text.contains("VerifyAlarmNames"),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_signed_with_the_wrong_key_is_refused_before_any_alarm_is_read() {
    let standins = Scenario::start(Options::default()).await;
    standins.aws.cloudwatch.create_alarm("web-5xx", LIVE);
    let forged = standins
        .sdk_config()
        .into_builder()
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new(
                    argocd_ecr_updater_standins::FUNCTION_ACCESS_KEY,
                    "not-the-secret",
                    Some(argocd_ecr_updater_standins::FUNCTION_SESSION_TOKEN.to_string()),
                    None,
                    "forged",
                ),
            ),
        )
        .build();
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&forged));
    let failure = reader
        .observe(&names(&["web-5xx"]), LIVE, LIVE + minutes(1))
        .await
        .unwrap_err();
    assert!(
        matches!(&failure, argocd_ecr_updater::rollout::watched::Unreadable::Failed(f) if !f.retryable),
        "{failure}"
    );
    assert!(
        failure.to_string().contains("SignatureDoesNotMatch")
            || failure.to_string().contains("InvalidSignature"),
        "{failure}"
    );
    assert!(standins.aws.cloudwatch.calls().is_empty());
}

#[tokio::test]
async fn a_composite_alarms_history_needs_the_action_on_every_alarm() {
    let standins = Scenario::start(Options::default()).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_composite_alarm("web-health", LIVE);
    cloudwatch.readable_only(&["web-health"]);
    let reader = Alarms::new(aws_sdk_cloudwatch::Client::new(&standins.sdk_config()));
    let failure = reader
        .observe(&names(&["web-health"]), LIVE, LIVE + minutes(1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            failure,
            argocd_ecr_updater::rollout::watched::Unreadable::Denied(_)
        ),
        "{failure}"
    );
    assert!(
        failure.to_string().contains("DescribeAlarmHistory"),
        "{failure}"
    );
    cloudwatch.readable_only(&["web-health", "*"]);
    assert!(
        reader
            .observe(&names(&["web-health"]), LIVE, LIVE + minutes(1))
            .await
            .is_ok()
    );
}
