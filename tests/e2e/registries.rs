//! End to end: images kept in a central registry account. A push in the registry account
//! (forwarded to the cluster account's bus) updates the Applications that name that
//! registry; ECR is asked with that account as `registryId`; a registry whose repository
//! policy refuses the function is a permanent, clearly worded configuration error, not a
//! retry storm; a replicated image is decided as a push in the destination region.

use crate::common::{Scenario, expect_decision, helm_parameter};
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::fixtures::{Application, PUSHED_TAG, SEED_TAG, push_event};
use serde_json::json;

const REGISTRY_ACCOUNT: &str = "111122223333";
const OWN_ACCOUNT: &str = "768157413559";

fn central_image() -> String {
    format!("{REGISTRY_ACCOUNT}.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr")
}

/// The seed's images served by the registry account too, and an Application tracking the
/// image there.
async fn central(readable: bool) -> Scenario {
    let standins = Scenario::seeded().await;
    standins.aws.add_registry(REGISTRY_ACCOUNT, readable);
    let image = central_image();
    let app = Application::tracking("central-app", &image, SEED_TAG)
        .annotate("app.update-strategy", "latest")
        .annotate("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$")
        .build();
    standins.kube.insert(app).unwrap();
    standins
}

fn pushed_in(account: &str) -> serde_json::Value {
    let mut event = push_event("barun-dev-ecr", PUSHED_TAG, "2025-08-25T06:30:14Z");
    event["account"] = json!(account);
    event
}

async fn run(standins: &Scenario, event: &serde_json::Value) -> Result<Report, HandlerError> {
    standins
        .handler(&[("FUNCTION_ACCOUNT_ID", OWN_ACCOUNT)])
        .handle(event, None)
        .await
}

#[tokio::test]
async fn a_push_in_the_registry_account_updates_the_applications_naming_that_registry() {
    let standins = central(true).await;
    let report = run(&standins, &pushed_in(REGISTRY_ACCOUNT)).await.unwrap();
    let entries: Vec<_> = report
        .entries
        .iter()
        .filter(|e| e.name == "central-app")
        .collect();
    assert_eq!(entries.len(), 1, "{:#?}", report.entries);
    expect_decision(entries[0], Action::Updated, "");
    assert_eq!(
        helm_parameter(&standins, "argocd", "central-app", "image.tag").as_deref(),
        Some(PUSHED_TAG)
    );
    // The seed Application names this account's registry: not concerned.
    assert!(report.entries.iter().all(|e| e.name != "aws-pipeline-test"));
    // ECR was asked for the registry account's repository.
    let asked = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.operation == "DescribeImages")
        .collect::<Vec<_>>();
    assert!(
        asked.iter().all(|r| r
            .body
            .contains(&format!("\"registryId\":\"{REGISTRY_ACCOUNT}\""))),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_registry_that_refuses_the_function_is_a_permanent_error_naming_the_fix() {
    let standins = central(false).await;
    let report = match run(&standins, &pushed_in(REGISTRY_ACCOUNT)).await {
        Ok(report) => report,
        Err(HandlerError::Targets { report, .. }) => *report,
        Err(e) => panic!("{e}"),
    };
    let entry = report
        .entries
        .iter()
        .find(|e| e.name == "central-app")
        .unwrap();
    expect_decision(
        entry,
        Action::Failed,
        &format!("registry {REGISTRY_ACCOUNT} refuses the function's role"),
    );
    assert!(
        entry.reason.contains("repository policy") && entry.reason.contains("RegistryAccounts"),
        "{}",
        entry.reason
    );
    assert!(!entry.retryable, "no retry storm");
    assert_eq!(
        helm_parameter(&standins, "argocd", "central-app", "image.tag").as_deref(),
        Some(SEED_TAG)
    );
}

#[tokio::test]
async fn a_replicated_image_is_decided_as_a_push_in_the_destination_region() {
    let standins = Scenario::seeded().await;
    let replicated = json!({"version": "0", "id": "r-1", "detail-type": "ECR Replication Action",
        "source": "aws.ecr", "account": OWN_ACCOUNT, "time": "2025-08-25T06:31:00Z",
        "region": "ap-northeast-2",
        "detail": {"result": "SUCCESS", "repository-name": "barun-dev-ecr",
            "image-digest": "sha256:3333333333333333333333333333333333333333333333333333333333333333",
            "action-type": "REPLICATE", "image-tag": PUSHED_TAG,
            "source-account": REGISTRY_ACCOUNT, "source-region": "us-east-1"}});
    let report = run(&standins, &replicated).await.unwrap();
    expect_decision(&report.entries[0], Action::Updated, "");
    assert_eq!(
        helm_parameter(&standins, "argocd", "aws-pipeline-test", "image.tag").as_deref(),
        Some(PUSHED_TAG)
    );
}
