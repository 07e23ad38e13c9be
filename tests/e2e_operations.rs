//! End to end: what an operator sees and uses: the Kubernetes Event of an update, the SNS
//! report, and redriving the dead-letter queue.

mod common;

use std::process::Command;

use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG, push_event};
use argocd_ecr_updater_standins::{Service, StandIns};
use common::{event, expect_decision, handler, seed_tag};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater");
const TOPIC: &str = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-reports";

#[tokio::test]
async fn an_update_is_recorded_as_an_images_updated_event_on_the_application() {
    let standins = StandIns::start_seeded().await.unwrap();
    let report = handler(&standins, &[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    assert_eq!(report.stats.events, 1);
    let events = standins.kube.events();
    assert_eq!(events.len(), 1);
    let recorded = &events[0];
    assert_eq!(recorded["reason"], "ImagesUpdated");
    assert_eq!(recorded["type"], "Normal");
    assert_eq!(recorded["involvedObject"]["kind"], "Application");
    assert_eq!(recorded["involvedObject"]["name"], SEED_APP);
    let message = recorded["message"].as_str().unwrap();
    assert!(message.contains("app "), "{message}");
    assert!(
        message.contains(&format!("{SEED_TAG} -> {PUSHED_TAG}")),
        "{message}"
    );
    assert_eq!(
        recorded["metadata"]["annotations"]["argocd-image-updater.image-0/old-tag"],
        SEED_TAG
    );
    assert_eq!(
        recorded["metadata"]["annotations"]["argocd-image-updater.image-0/new-tag"],
        PUSHED_TAG
    );
    // Nothing moved, nothing recorded.
    handler(&standins, &[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    assert_eq!(standins.kube.events().len(), 1);
}

#[tokio::test]
async fn an_event_that_cannot_be_recorded_does_not_fail_the_update() {
    let grants = [
        vec![argocd_ecr_updater_standins::Grant::new(
            &["get", "list", "patch"],
            "argocd",
        )],
        argocd_ecr_updater_standins::image_updater_grants("argocd"),
    ]
    .concat();
    let standins = StandIns::start_seeded_with_grants(grants).await.unwrap();
    let report = handler(&standins, &[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(&report.entries[0], Action::Updated, "ranks above");
    assert!(standins.kube.events().is_empty());
}

#[tokio::test]
async fn the_report_of_an_invocation_that_moved_something_is_published_to_sns() {
    let standins = StandIns::start_seeded().await.unwrap();
    let h = handler(&standins, &[("NOTIFICATION_TOPIC_ARN", TOPIC)]);
    h.handle(&event("push-date-tag.json"), None).await.unwrap();
    let published = standins.aws.published();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0]["TopicArn"], TOPIC);
    assert!(
        published[0]["Subject"]
            .as_str()
            .unwrap()
            .starts_with("argocd-ecr-updater: 1 updated, 0 failed")
    );
    let report: serde_json::Value =
        serde_json::from_str(published[0]["Message"].as_str().unwrap()).unwrap();
    assert_eq!(report["entries"][0]["to"], PUSHED_TAG);
    // Nothing moved, nothing failed: no message.
    h.handle(&event("push-date-tag.json"), None).await.unwrap();
    assert_eq!(standins.aws.published().len(), 1);
    assert_eq!(standins.shared.count(|r| r.service == Service::Sns), 1);
}

fn redrive(standins: &StandIns, args: &[&str]) -> (bool, String) {
    let output = Command::new(BINARY)
        .env_clear()
        .envs(standins.function_env())
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .arg("redrive")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_replays_both_shapes_of_a_parked_event_and_deletes_only_what_succeeded() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    let original = event("push-date-tag.json");
    // The rule's dead-letter queue keeps the event itself ...
    standins.aws.send_message(&queue, &original.to_string());
    // ... the function's on-failure destination a record around it.
    let late = push_event("barun-dev-ecr", "20250824-093000", "2025-08-24T00:30:05Z");
    let record = json!({"version": "1.0", "timestamp": "2025-08-25T06:31:00.000Z",
        "requestContext": {"requestId": "r", "condition": "RetriesExhausted", "approximateInvokeCount": 3,
                           "functionArn": "arn:aws:lambda:ap-northeast-2:768157413559:function:argocd-ecr-updater"},
        "requestPayload": late, "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "responsePayload": {"errorType": "Retryable.TargetsFailed", "errorMessage": "403"}});
    standins.aws.send_message(&queue, &record.to_string());
    standins.aws.send_message(&queue, "not an event");

    // A dry run decides and keeps everything.
    let (ok, out) = redrive(&standins, &["--queue", &queue]);
    assert!(!ok, "{out}");
    assert!(out.contains("dry run, kept"), "{out}");
    assert_eq!(standins.aws.queue(&queue).len(), 3);
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));

    // With --apply (the dry run released what it read) the two events run and go; the
    // broken message stays for a person.
    let (ok, out) = redrive(&standins, &["--queue", &queue, "--apply"]);
    assert!(!ok, "one message failed: {out}");
    assert!(out.contains("1 updated"), "{out}");
    assert!(out.contains("-> deleted"), "{out}");
    assert!(out.contains("not JSON") && out.contains("-> kept"), "{out}");
    assert!(out.contains("3 message(s) redriven, 1 failed"), "{out}");
    let left = standins.aws.queue(&queue);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].body, "not an event");
    assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));
}
