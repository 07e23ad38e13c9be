//! Auto-rollback (`<alias>.auto-rollback`) on the Argo CD controller stand-in moving through
//! time and the CloudWatch stand-in: an alarm in the verification window fails the rollout,
//! the check wakes the Application at once, the real handler writes back what the failed
//! write replaced and remembers the image taken back, and from then on neither a sweep nor a
//! push of the same image under a new tag deploys it again, until a person releases it.

use crate::common::Scenario;
use crate::moving::{
    annotate, deliver, deliver_body, events, follow_to_the_end, pass, push_now,
    pushed_and_deployed, seeded, sweep,
};
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::argocd::Script;
use argocd_ecr_updater_standins::fixtures::{
    PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_REPOSITORY, SEED_TAG,
};
use serde_json::Value;

const ROLLED_BACK: &str = "argocd-ecr-updater.io/rolled-back";
/// The seed's pushed image's digest (tests/standins/seed/images.json).
const PUSHED_DIGEST: char = '3';

pub(crate) fn rolled_back_on_alarm(app: &mut Value) {
    annotate(app, "argocd-ecr-updater.io/verify-alarms", "web-5xx");
    annotate(app, "argocd-ecr-updater.io/verify-for", "15m");
    annotate(app, "argocd-ecr-updater.io/app.auto-rollback", "true");
}

fn now(standins: &Scenario) -> time::OffsetDateTime {
    standins.test_clock().now()
}

/// The seed's image tag as its spec asks for it.
pub(crate) fn spec_tag(standins: &Scenario) -> String {
    standins
        .kube
        .helm_parameter("argocd", SEED_APP, "image.tag")
        .unwrap()
}

/// The seed's images taken back, as the annotation holds them (`null`: none).
pub(crate) fn remembered(standins: &Scenario) -> Value {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"][ROLLED_BACK]
        .as_str()
        .map(|t| serde_json::from_str(t).unwrap())
        .unwrap_or(Value::Null)
}

/// The wake-ups a failure sent on the queue.
pub(crate) fn wakes(
    standins: &Scenario,
    queue: &str,
) -> Vec<argocd_ecr_updater_standins::aws::QueueMessage> {
    standins
        .aws
        .queue(queue)
        .into_iter()
        .filter(|m| m.body.contains("\"rollback-"))
        .collect()
}

/// The report's entry of the seed's image (alias `app`).
pub(crate) fn app_entry(report: &Report) -> &argocd_ecr_updater::report::Entry {
    report
        .entries
        .iter()
        .find(|e| e.alias.as_deref() == Some("app"))
        .unwrap_or_else(|| panic!("no entry for app: {:#?}", report.entries))
}

/// The seed's push written and live; `web-5xx` in ALARM 5 s later, and back to OK 30 s after
/// that unless `stays`; the rollout followed until it fails.
pub(crate) async fn failed_by_an_alarm(stays: bool) -> (Scenario, String) {
    let (standins, queue) = seeded(rolled_back_on_alarm, &[Script::Healthy]).await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", now(&standins) - time::Duration::minutes(60));
    pushed_and_deployed(&standins).await;
    let fired = now(&standins) + time::Duration::seconds(5);
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", fired);
    if !stays {
        cloudwatch.set_state(
            "web-5xx",
            "OK",
            "Threshold Crossed: 0 < 5",
            fired + time::Duration::seconds(30),
        );
    }
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
    assert!(reason.contains("web-5xx"), "{reason}");
    (standins, queue)
}

/// Follows the newest write's checks until its rollout ends (not `pending` nor `verifying`).
pub(crate) async fn followed_to_an_end(standins: &Scenario, queue: &str) -> Vec<String> {
    let mut states = Vec::new();
    while states
        .last()
        .is_none_or(|s: &String| s == "pending" || s == "verifying")
    {
        assert!(states.len() < 40, "never ended: {states:?}");
        let (seen, _) = follow_to_the_end(standins, queue).await;
        states.extend(seen);
    }
    states
}

#[tokio::test]
async fn an_alarm_in_the_window_rolls_back_and_neither_a_sweep_nor_a_repush_deploys_the_image_again()
 {
    let (standins, queue) = failed_by_an_alarm(false).await;
    assert_eq!(
        spec_tag(&standins),
        PUSHED_TAG,
        "nothing written before the wake-up"
    );
    let woken = wakes(&standins, &queue);
    assert_eq!(woken.len(), 1, "the failure wakes the Application once");
    assert_eq!(woken[0].delay_seconds, 0);

    let before = standins.shared.requests().len();
    let report = deliver(&standins, &woken[0]).await;
    // What the rollback costs: the wake-up's one invocation, and in it these calls.
    let calls: Vec<String> = standins.shared.requests()[before..]
        .iter()
        .map(|r| match r.operation.as_str() {
            "" => format!("{:?} {}", r.service, r.method),
            operation => format!("{:?} {operation}", r.service),
        })
        .collect();
    println!("auto-rollback, the woken invocation: {calls:?}");
    let count = |call: &str| calls.iter().filter(|c| *c == call).count();
    assert_eq!(
        count("Kube PATCH"),
        2,
        "one patch remembers the image, one writes it back: {calls:?}"
    );
    assert!(count("Ecr DescribeImages") <= 1, "{calls:?}");
    let entry = app_entry(&report);
    assert_eq!(entry.action, Action::Updated, "{entry:#?}");
    assert!(
        entry.reason.starts_with("auto-rollback: the rollout of"),
        "{}",
        entry.reason
    );
    assert!(entry.reason.contains("web-5xx"), "{}", entry.reason);
    assert_eq!(entry.to.as_deref(), Some(SEED_TAG));
    assert_eq!(
        spec_tag(&standins),
        SEED_TAG,
        "what the failed write replaced is back"
    );
    let rolled_back = events(&standins, "RolledBack");
    assert_eq!(rolled_back.len(), 1);
    assert_eq!(rolled_back[0]["type"], "Warning");
    let message = rolled_back[0]["message"].as_str().unwrap();
    assert!(
        message.contains(PUSHED_TAG) && message.contains(SEED_TAG),
        "{message}"
    );
    let taken = remembered(&standins);
    let taken = &taken[SEED_IMAGE][0];
    assert_eq!(taken["to"], PUSHED_TAG);
    assert_eq!(taken["from"], SEED_TAG);
    assert_eq!(
        taken["digest"],
        argocd_ecr_updater_standins::fixtures::digest(PUSHED_DIGEST),
        "ECR's digest is remembered, so another tag of the same image is known"
    );

    // The same wake-up delivered again writes nothing more.
    let again = deliver(&standins, &woken[0]).await;
    assert_ne!(
        app_entry(&again).action,
        Action::Updated,
        "{:#?}",
        again.entries
    );
    assert_eq!(events(&standins, "RolledBack").len(), 1);

    // The rollback is followed like any write, and confirmed once its window is quiet.
    pass(&standins, 40);
    let states = followed_to_an_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("confirmed"),
        "{states:?}"
    );
    assert!(
        crate::moving::failed_rollouts(&standins).is_null(),
        "the confirmed rollback clears the failure; what it took back stays remembered"
    );
    assert!(!remembered(&standins).is_null());

    // A sweep: the best tag is the one taken back, refused with the reason.
    let swept = sweep(&standins).await;
    let entry = app_entry(&swept);
    assert_eq!(entry.action, Action::Skipped, "{entry:#?}");
    assert!(
        entry.reason.contains("was rolled back at"),
        "{}",
        entry.reason
    );
    assert_eq!(spec_tag(&standins), SEED_TAG);

    // The same image pushed again under a newer tag: refused by its digest.
    let repushed = push_now(&standins, SEED_REPOSITORY, "20251206-120000", PUSHED_DIGEST).await;
    let entry = app_entry(&repushed);
    assert_eq!(entry.action, Action::Skipped, "{entry:#?}");
    assert!(
        entry
            .reason
            .contains(&format!("`{PUSHED_TAG}` was rolled back")),
        "{}",
        entry.reason
    );
    let swept = sweep(&standins).await;
    assert_ne!(app_entry(&swept).action, Action::Updated);
    assert_eq!(spec_tag(&standins), SEED_TAG);

    // A new image goes out as usual.
    let fixed = push_now(&standins, SEED_REPOSITORY, "20251206-130000", '9').await;
    assert_eq!(
        app_entry(&fixed).action,
        Action::Updated,
        "{:#?}",
        fixed.entries
    );
    assert_eq!(spec_tag(&standins), "20251206-130000");
}

#[tokio::test]
async fn a_person_deleting_the_entry_releases_the_image_taken_back() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    let woken = wakes(&standins, &queue);
    deliver(&standins, &woken[0]).await;
    assert_eq!(spec_tag(&standins), SEED_TAG);
    pass(&standins, 40);
    follow_to_the_end(&standins, &queue).await;
    standins
        .kube
        .edit_as("kubectl-annotate", "argocd", SEED_APP, |app| {
            app["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove(ROLLED_BACK);
        })
        .unwrap();
    let swept = sweep(&standins).await;
    assert_eq!(
        app_entry(&swept).action,
        Action::Updated,
        "{:#?}",
        swept.entries
    );
    assert_eq!(spec_tag(&standins), PUSHED_TAG);
}

#[tokio::test]
async fn without_auto_rollback_a_failure_wakes_nothing_and_writes_nothing_back() {
    let (standins, queue) = seeded(
        |app| {
            annotate(app, "argocd-ecr-updater.io/verify-alarms", "web-5xx");
            annotate(app, "argocd-ecr-updater.io/verify-for", "15m");
        },
        &[Script::Healthy],
    )
    .await;
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.create_alarm("web-5xx", now(&standins) - time::Duration::minutes(60));
    pushed_and_deployed(&standins).await;
    cloudwatch.set_state(
        "web-5xx",
        "ALARM",
        "Threshold Crossed: 9 > 5",
        now(&standins),
    );
    let (states, _) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().map(String::as_str), Some("failed"));
    assert!(wakes(&standins, &queue).is_empty());
    sweep(&standins).await;
    assert_eq!(spec_tag(&standins), PUSHED_TAG);
    assert!(remembered(&standins).is_null());
    assert!(events(&standins, "RolledBack").is_empty());
}

#[tokio::test]
async fn a_forged_wake_up_before_any_failure_rolls_nothing_back() {
    let (standins, queue) = seeded(rolled_back_on_alarm, &[Script::Healthy]).await;
    standins
        .aws
        .cloudwatch
        .create_alarm("web-5xx", now(&standins) - time::Duration::minutes(60));
    pushed_and_deployed(&standins).await;
    let forged = argocd_ecr_updater::sweep::shard::follow_up(
        "rollback-forged",
        "barun-dev",
        "argocd",
        SEED_APP,
        None,
    );
    let body = serde_json::to_string(&forged).unwrap();
    let report = deliver_body(&standins, "forged", &body).await;
    assert_ne!(
        app_entry(&report).action,
        Action::Updated,
        "{:#?}",
        report.entries
    );
    assert_eq!(spec_tag(&standins), PUSHED_TAG);
    assert!(events(&standins, "RolledBack").is_empty());
    assert!(remembered(&standins).is_null());
    assert!(wakes(&standins, &queue).is_empty());
}

#[tokio::test]
async fn an_image_someone_moved_off_before_the_wake_up_is_still_remembered_and_a_release_sticks() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    // A person moves the Application to another image before the wake-up is delivered.
    crate::moving::set_tag(&standins, "kubectl-edit", "20250825-120000");
    let woken = wakes(&standins, &queue);
    let report = deliver(&standins, &woken[0]).await;
    assert_ne!(
        app_entry(&report).action,
        Action::Updated,
        "{:#?}",
        report.entries
    );
    assert!(
        events(&standins, "RolledBack").is_empty(),
        "nothing written back"
    );
    assert_eq!(
        remembered(&standins)[SEED_IMAGE][0]["to"],
        PUSHED_TAG,
        "the failed image is remembered all the same"
    );
    // The person's edit is a manual rollback, respected; the image is not written either way.
    pass(&standins, 60);
    let swept = sweep(&standins).await;
    assert_ne!(
        app_entry(&swept).action,
        Action::Updated,
        "{:#?}",
        swept.entries
    );
    assert_eq!(spec_tag(&standins), "20250825-120000");
    // A person releases it: no later decision remembers it again.
    standins
        .kube
        .edit_as("kubectl-annotate", "argocd", SEED_APP, |app| {
            app["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove(ROLLED_BACK);
        })
        .unwrap();
    sweep(&standins).await;
    let woken_again = deliver(&standins, &woken[0]).await;
    assert_ne!(app_entry(&woken_again).action, Action::Updated);
    assert!(remembered(&standins).is_null(), "the release sticks");
}

#[tokio::test]
async fn a_memory_broken_by_hand_holds_every_write_of_the_image_instead_of_releasing_it() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    let woken = wakes(&standins, &queue);
    deliver(&standins, &woken[0]).await;
    assert_eq!(spec_tag(&standins), SEED_TAG);
    // A slip in `kubectl edit`: the JSON no longer reads.
    standins
        .kube
        .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
            let text = app["metadata"]["annotations"][ROLLED_BACK]
                .as_str()
                .unwrap()
                .to_string();
            app["metadata"]["annotations"][ROLLED_BACK] =
                serde_json::json!(&text[..text.len() - 2]);
        })
        .unwrap();
    let swept = sweep(&standins).await;
    let entry = app_entry(&swept);
    assert_eq!(entry.action, Action::Skipped, "{entry:#?}");
    assert!(entry.reason.contains("does not read"), "{}", entry.reason);
    assert_eq!(
        spec_tag(&standins),
        SEED_TAG,
        "the image taken back stays out"
    );
}
