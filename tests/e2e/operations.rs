//! End to end: what an operator sees: the Kubernetes Event of an update and the SNS report.
//! Redriving the dead-letter queue is the CLI's (`cli/tests/redrive.rs`).

use crate::common::{Scenario, event, expect_decision};
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::Service;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG};

const TOPIC: &str = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-reports";

#[tokio::test]
async fn an_update_is_recorded_as_an_images_updated_event_on_the_application() {
    let standins = Scenario::seeded().await;
    let report = standins
        .handler(&[])
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
    standins
        .handler(&[])
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
    let standins = Scenario::seeded_with_grants(grants).await;
    let report = standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(&report.entries[0], Action::Updated, "ranks above");
    assert!(standins.kube.events().is_empty());
}

#[tokio::test]
async fn the_report_of_an_invocation_that_moved_something_is_published_to_sns() {
    let standins = Scenario::seeded().await;
    let h = standins.handler(&[("NOTIFICATION_TOPIC_ARN", TOPIC)]);
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

#[tokio::test]
async fn a_sweep_near_its_deadline_stops_reported_instead_of_being_timed_out() {
    let standins = Scenario::seeded().await;
    // Five seconds left: less than the margin a sweep keeps before Lambda's timeout.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let report = standins
        .handler(&[])
        .handle(&event("scheduled-reconcile.json"), Some(deadline))
        .await
        .expect("a sweep reports its failure instead of failing the invocation");
    let entry = &report.entries[0];
    assert_eq!(entry.action, Action::Failed);
    assert!(entry.retryable);
    assert!(entry.reason.contains("next sweep"), "{}", entry.reason);
    let failure = report.failure.as_deref().unwrap();
    assert!(failure.contains(SEED_APP), "{failure}");
    assert_eq!(
        crate::common::seed_tag(&standins).as_deref(),
        Some(SEED_TAG),
        "nothing was written"
    );
    // With time to spare the same sweep updates the Application.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let report = standins
        .handler(&[])
        .handle(&event("scheduled-reconcile.json"), Some(deadline))
        .await
        .unwrap();
    assert_eq!(report.failure, None);
    assert_eq!(report.entries[0].action, Action::Updated);
}
