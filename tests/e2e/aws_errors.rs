//! AWS SDK errors reach the user with their cause: one test per class, through the real SDK
//! clients (a closed port, a name that does not resolve, the stand-in answering the service's
//! own error shapes).

use crate::common::Scenario;
use argocd_ecr_updater::cluster::eks_auth::{ClusterError, describe_cluster};
use argocd_ecr_updater::registry::ecr::{Ecr, EcrError};
use argocd_ecr_updater_standins::{FaultAction, Route};

const ACCOUNT: &str = "768157413559";

fn ecr_at(standins: &Scenario, endpoint: Option<&str>) -> Ecr {
    let mut config = aws_sdk_ecr::config::Builder::from(&standins.sdk_config());
    if let Some(endpoint) = endpoint {
        config = config.endpoint_url(endpoint);
    }
    Ecr::new(aws_sdk_ecr::Client::from_conf(config.build()))
}

async fn ecr_error(ecr: &Ecr) -> EcrError {
    ecr.describe_tags(ACCOUNT, "barun-dev-ecr", &["latest".to_string()])
        .await
        .unwrap_err()
}

async fn with_fault(kind: &'static str, code: u16) -> EcrError {
    let standins = Scenario::seeded().await;
    standins.shared.inject(
        Route::ecr("DescribeImages"),
        100,
        FaultAction::AwsError { code, kind },
    );
    ecr_error(&ecr_at(&standins, None)).await
}

#[tokio::test]
async fn a_closed_port_says_nothing_answers_at_the_endpoint() {
    let standins = Scenario::seeded().await;
    let message = ecr_error(&ecr_at(&standins, Some("http://127.0.0.1:1")))
        .await
        .to_string();
    assert!(
        message.contains("nothing answers at the endpoint"),
        "{message}"
    );
    assert!(!message.contains("unhandled"), "{message}");
}

#[tokio::test]
async fn a_name_that_does_not_resolve_says_so() {
    let standins = Scenario::seeded().await;
    let message = ecr_error(&ecr_at(&standins, Some("http://ecr.no-such-host.invalid")))
        .await
        .to_string();
    assert!(message.contains("does not resolve"), "{message}");
    assert!(message.to_ascii_lowercase().contains("dns"), "{message}");
}

#[tokio::test]
async fn access_denied_keeps_the_services_message_and_names_the_fix() {
    let error = with_fault("AccessDeniedException", 403).await;
    let message = error.to_string();
    assert!(matches!(error, EcrError::AccessDenied { .. }), "{message}");
    assert!(
        message.contains("injected AccessDeniedException"),
        "{message}"
    );
    assert!(message.contains("ecr:DescribeImages"), "{message}");
}

#[tokio::test]
async fn expired_credentials_say_how_to_refresh_them() {
    let message = with_fault("ExpiredTokenException", 400).await.to_string();
    assert!(message.contains("ExpiredTokenException"), "{message}");
    assert!(message.contains("aws sso login"), "{message}");
}

#[tokio::test]
async fn throttling_is_named_and_retryable() {
    let error = with_fault("ThrottlingException", 400).await;
    assert!(error.is_retryable());
    let message = error.to_string();
    assert!(message.contains("ThrottlingException"), "{message}");
    assert!(message.contains("throttling"), "{message}");
}

#[tokio::test]
async fn describe_cluster_against_an_unreachable_endpoint_names_the_cause() {
    let standins = Scenario::seeded().await;
    let config = aws_sdk_eks::config::Builder::from(&standins.sdk_config())
        .endpoint_url("http://127.0.0.1:1")
        .build();
    let error = describe_cluster(&aws_sdk_eks::Client::from_conf(config), "barun-dev")
        .await
        .unwrap_err();
    assert!(matches!(error, ClusterError::Transient { .. }));
    let message = error.to_string();
    assert!(
        message.contains("nothing answers at the endpoint"),
        "{message}"
    );
    assert!(!message.contains("no message"), "{message}");
}
