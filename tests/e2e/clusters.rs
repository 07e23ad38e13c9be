//! End to end: one function for several clusters (`CLUSTERS`). Each cluster is its own API
//! server stand-in, with its own CA, token audience and RBAC. A push is decided against
//! every cluster concurrently; a cluster that is down or refuses the function is reported by
//! name and fails the invocation retryably while the others are written; a retry is
//! idempotent per cluster; endpoints, CAs and tokens are cached per cluster.

use std::collections::BTreeSet;

use crate::common::{Scenario, event, expect_decision};
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_TAG};
use argocd_ecr_updater_standins::{ExtraCluster, Options, Service, kube::KubeState};

const SEED_APP: &str = "aws-pipeline-test";

/// The seed cluster (`barun-dev`), plus `staging` in the same region and `prod-eu` in
/// eu-west-1, each holding a copy of the seed Application and granting the function what
/// the seed cluster grants it.
async fn three_clusters() -> (Scenario, ExtraCluster, ExtraCluster) {
    let standins = Scenario::seeded().await;
    let staging = extra(&standins, "staging", "ap-northeast-2", Access::Granted).await;
    let prod = extra(&standins, "prod-eu", "eu-west-1", Access::Granted).await;
    (standins, staging, prod)
}

/// What the function's role is in a cluster.
#[derive(Clone, Copy)]
enum Access {
    /// Mapped by an access entry, and bound by `deploy/rbac.yaml`.
    Granted,
    /// No access entry: the cluster knows no such identity and answers 401.
    NoAccessEntry,
    /// Mapped, but no RBAC binding: 403 on every list.
    NoRbac,
}

async fn extra(standins: &Scenario, name: &str, region: &str, access: Access) -> ExtraCluster {
    let identities = match access {
        Access::Granted => Options::default().identities,
        Access::NoAccessEntry => Vec::new(),
        Access::NoRbac => vec![argocd_ecr_updater_standins::function_identity(Vec::new())],
    };
    let cluster = standins
        .add_cluster(name, region, identities)
        .await
        .unwrap();
    cluster.copy_application(&standins.kube, "argocd", SEED_APP);
    cluster
}

const CLUSTERS: &str =
    r#"[{"name":"barun-dev"},{"name":"staging"},{"name":"prod-eu","region":"eu-west-1"}]"#;

fn tag_in(kube: &KubeState) -> Option<String> {
    kube.helm_parameter("argocd", SEED_APP, "image.tag")
}

/// The report, whether the invocation succeeded or failed for some targets, with the
/// error type Lambda would record for the failure.
fn report_and_error_type(result: Result<Report, HandlerError>) -> (Report, Option<&'static str>) {
    match result {
        Ok(report) => (report, None),
        Err(e @ HandlerError::Targets { .. }) => {
            let error_type = e.error_type();
            let HandlerError::Targets { report, .. } = e else {
                unreachable!()
            };
            (*report, Some(error_type))
        }
        Err(e) => panic!("the invocation failed as a whole: {e}"),
    }
}

fn describe_cluster_calls(standins: &Scenario) -> usize {
    standins
        .shared
        .requests()
        .iter()
        .filter(|r| r.service == Service::Eks || r.path.starts_with("/clusters/"))
        .count()
}

#[tokio::test]
async fn a_push_updates_the_application_in_every_cluster_and_groups_the_report_by_cluster() {
    let (standins, staging, prod) = three_clusters().await;
    let handler = standins.handler(&[("CLUSTERS", CLUSTERS)]);
    let (report, failed) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert_eq!(failed, None, "{report:#?}");

    let clusters: Vec<Option<&str>> = report
        .entries
        .iter()
        .map(|e| e.cluster.as_deref())
        .collect();
    assert_eq!(
        clusters,
        [Some("barun-dev"), Some("staging"), Some("prod-eu")],
        "one entry per cluster, in configuration order"
    );
    for entry in &report.entries {
        expect_decision(entry, Action::Updated, "");
    }
    let summary: Vec<(&str, usize, bool)> = report
        .clusters
        .iter()
        .map(|c| (c.cluster.as_str(), c.updated, c.failure.is_none()))
        .collect();
    assert_eq!(
        summary,
        [
            ("barun-dev", 1, true),
            ("staging", 1, true),
            ("prod-eu", 1, true)
        ]
    );
    for kube in [&standins.kube, &staging.kube, &prod.kube] {
        assert_eq!(tag_in(kube).as_deref(), Some(PUSHED_TAG));
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["entries"][1]["cluster"], "staging");
    assert_eq!(json["clusters"][2]["cluster"], "prod-eu");
}

#[tokio::test]
async fn several_clusters_cost_one_clusters_registry_reads() {
    let single = Scenario::seeded().await;
    let (alone, _) = report_and_error_type(
        single
            .handler(&[])
            .handle(&event("push-date-tag.json"), None)
            .await,
    );
    let (standins, _staging, _prod) = three_clusters().await;
    let (together, _) = report_and_error_type(
        standins
            .handler(&[("CLUSTERS", CLUSTERS)])
            .handle(&event("push-date-tag.json"), None)
            .await,
    );
    assert!(alone.stats.ecr_calls > 0);
    assert_eq!(together.stats.ecr_calls, alone.stats.ecr_calls);
    assert_eq!(together.stats.patches, 3 * alone.stats.patches);
    assert_eq!(together.stats.gets, 3 * alone.stats.gets);
}

#[tokio::test]
async fn a_cluster_that_is_down_fails_the_invocation_retryably_after_the_others_are_written() {
    let (standins, staging, prod) = three_clusters().await;
    drop(staging);
    let handler = standins.handler(&[("CLUSTERS", CLUSTERS)]);
    let (report, failed) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert_eq!(failed, Some("Retryable.TargetsFailed"));
    let down = report
        .clusters
        .iter()
        .find(|c| c.cluster == "staging")
        .unwrap();
    let failure = down
        .failure
        .as_ref()
        .expect("staging is reported as failed");
    assert!(
        failure.message.starts_with("cluster `staging`: "),
        "{}",
        failure.message
    );
    assert!(
        !failure.needs_operator,
        "a connection refused may pass: {failure:?}"
    );
    assert_eq!(tag_in(&standins.kube).as_deref(), Some(PUSHED_TAG));
    assert_eq!(tag_in(&prod.kube).as_deref(), Some(PUSHED_TAG));
    let summary = report.failure_summary().unwrap();
    assert!(summary.contains("cluster `staging`"), "{summary}");

    // The retry AWS makes finds the written clusters unchanged and writes nothing twice.
    let patches = || {
        let log = prod.shared.requests();
        log.iter().filter(|r| r.method == "PATCH").count()
    };
    let patches_before = patches();
    let (again, failed) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert_eq!(failed, Some("Retryable.TargetsFailed"));
    for entry in &again.entries {
        expect_decision(entry, Action::Unchanged, "");
    }
    assert_eq!(patches(), patches_before);
}

#[tokio::test]
async fn a_cluster_refusing_the_function_is_reported_with_its_fix_while_the_others_are_written() {
    // Either way an operator must act (an access entry, an RBAC binding); the event is
    // retried and parked in the DLQ for a redrive once they have.
    for (access, status, fix, needs_operator) in [
        (Access::NoAccessEntry, "401", "EKS access entry", true),
        (Access::NoRbac, "may not list", "deploy/rbac.yaml", true),
    ] {
        let standins = Scenario::seeded().await;
        let refusing = extra(&standins, "staging", "ap-northeast-2", access).await;
        let handler = standins.handler(&[("CLUSTERS", "barun-dev,staging")]);
        let (report, failed) =
            report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
        assert_eq!(
            failed,
            Some("Retryable.TargetsFailed"),
            "retried, then parked in the DLQ"
        );
        let failure = report.clusters[1].failure.as_ref().unwrap();
        assert!(
            failure.message.starts_with("cluster `staging`: "),
            "{}",
            failure.message
        );
        assert!(failure.message.contains(status), "{}", failure.message);
        assert!(failure.message.contains(fix), "{}", failure.message);
        assert_eq!(failure.needs_operator, needs_operator, "{failure:?}");
        assert_eq!(tag_in(&standins.kube).as_deref(), Some(PUSHED_TAG));
        assert_eq!(tag_in(&refusing.kube).as_deref(), Some(SEED_TAG));
    }
}

#[tokio::test]
async fn a_cluster_in_another_region_is_looked_up_in_its_region_only() {
    let standins = Scenario::seeded().await;
    let prod = extra(&standins, "prod-eu", "eu-west-1", Access::Granted).await;
    // Listed without its region: EKS in the function's region has no such cluster.
    let handler = standins.handler(&[("CLUSTERS", "barun-dev,prod-eu")]);
    let (report, _) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    let failure = report.clusters[1].failure.as_ref().unwrap();
    assert!(
        failure.message.contains("`prod-eu` was not found"),
        "{}",
        failure.message
    );
    assert!(failure.message.contains("CLUSTERS"), "{}", failure.message);
    assert!(failure.needs_operator);
    assert_eq!(tag_in(&prod.kube).as_deref(), Some(SEED_TAG));
}

/// Returns once the wall clock's second has changed.
async fn next_second() {
    let second = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let start = second();
    while second() == start {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn endpoints_cas_and_tokens_are_cached_per_cluster_across_invocations() {
    let (standins, staging, prod) = three_clusters().await;
    let handler = standins.handler(&[("CLUSTERS", CLUSTERS)]);
    for _ in 0..3 {
        let (_, failed) =
            report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
        assert_eq!(failed, None);
        // A token signed in another second differs (X-Amz-Date): one minted anew would show.
        next_second().await;
    }
    assert_eq!(
        describe_cluster_calls(&standins),
        3,
        "one DescribeCluster per cluster"
    );
    // Each API server saw the same token on every request: minted once per cluster, and
    // only ever its own (a token for another cluster is refused there).
    let mut tokens = BTreeSet::new();
    for shared in [&standins.shared, &staging.shared, &prod.shared] {
        let seen: BTreeSet<String> = shared
            .requests()
            .into_iter()
            .filter(|r| r.service == Service::Kube)
            .map(|r| r.authorization)
            .collect();
        let [token] = Vec::from_iter(seen)
            .try_into()
            .unwrap_or_else(|seen: Vec<String>| {
                panic!(
                    "one token per cluster over three invocations, saw {}",
                    seen.len()
                )
            });
        assert!(token.starts_with("Bearer k8s-aws-v1."), "{token}");
        tokens.insert(token);
    }
    assert_eq!(tokens.len(), 3, "each cluster has its own token");
}

#[tokio::test]
async fn an_endpoint_given_in_clusters_is_used_without_describe_cluster() {
    use base64::Engine;
    let standins = Scenario::seeded().await;
    let partner = extra(&standins, "partner", "ap-northeast-2", Access::Granted).await;
    let ca = base64::engine::general_purpose::STANDARD.encode(&partner.ca_pem);
    let clusters = format!(
        r#"[{{"name":"partner","endpoint":"{}","caData":"{ca}"}}]"#,
        partner.endpoint()
    );
    let handler = standins.handler(&[("CLUSTER_NAME", "partner"), ("CLUSTERS", &clusters)]);
    let (report, failed) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert_eq!(failed, None, "{report:#?}");
    assert_eq!(tag_in(&partner.kube).as_deref(), Some(PUSHED_TAG));
    assert_eq!(tag_in(&standins.kube).as_deref(), Some(SEED_TAG));
    assert_eq!(describe_cluster_calls(&standins), 0);
}

#[tokio::test]
async fn a_push_in_a_central_registry_account_updates_applications_in_two_clusters() {
    use argocd_ecr_updater_standins::fixtures::{Application, push_event};
    const REGISTRY_ACCOUNT: &str = "111122223333";
    let standins = Scenario::seeded().await;
    standins.aws.add_registry(REGISTRY_ACCOUNT, true);
    let staging = extra(&standins, "staging", "ap-northeast-2", Access::Granted).await;
    let image = format!("{REGISTRY_ACCOUNT}.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr");
    for kube in [&standins.kube, &staging.kube] {
        let app = Application::tracking("central-app", &image, SEED_TAG)
            .annotate("app.update-strategy", "latest")
            .annotate("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$")
            .build();
        kube.insert(app).unwrap();
    }
    let mut pushed = push_event("barun-dev-ecr", PUSHED_TAG, "2025-08-25T06:30:14Z");
    pushed["account"] = serde_json::json!(REGISTRY_ACCOUNT);
    let handler = standins.handler(&[
        ("CLUSTERS", "barun-dev,staging"),
        ("FUNCTION_ACCOUNT_ID", "768157413559"),
    ]);
    let (report, failed) = report_and_error_type(handler.handle(&pushed, None).await);
    assert_eq!(failed, None, "{report:#?}");
    let updated: Vec<(Option<&str>, &str)> = report
        .entries
        .iter()
        .filter(|e| e.action == Action::Updated)
        .map(|e| (e.cluster.as_deref(), e.name.as_str()))
        .collect();
    assert_eq!(
        updated,
        [
            (Some("barun-dev"), "central-app"),
            (Some("staging"), "central-app")
        ]
    );
    // The seed Applications name this account's registry: not concerned in either cluster.
    assert!(report.entries.iter().all(|e| e.name != SEED_APP));
    for kube in [&standins.kube, &staging.kube] {
        let app = kube.get("argocd", "central-app").unwrap();
        let parameters = app["spec"]["source"]["helm"]["parameters"].to_string();
        assert!(parameters.contains(PUSHED_TAG), "{parameters}");
    }
}

const PARTNER_ROLE: &str = "arn:aws:iam::111122223333:role/argocd-ecr-updater-partner";

/// A cluster of another account that knows only `PARTNER_ROLE` (its access entry), and
/// that only that role may describe.
async fn partner_cluster(standins: &Scenario, trusted: bool) -> ExtraCluster {
    let assumed = argocd_ecr_updater_standins::Identity {
        access_key_id: "ASIAPARTNERASSUMED01".into(),
        secret_access_key: "partner/assumed+secret".into(),
        session_token: Some("partner-session-token".into()),
        arn: "arn:aws:sts::111122223333:assumed-role/argocd-ecr-updater-partner/argocd-ecr-updater"
            .into(),
        groups: vec!["argocd-ecr-updater".into()],
        grants: Options::default().identities[0].grants.clone(),
    };
    let cluster = standins
        .add_cluster("partner", "ap-northeast-2", vec![assumed.clone()])
        .await
        .unwrap();
    cluster.copy_application(&standins.kube, "argocd", SEED_APP);
    standins
        .aws
        .restrict_cluster("partner", &assumed.access_key_id);
    standins
        .aws
        .add_role(PARTNER_ROLE, trusted.then_some(assumed));
    cluster
}

fn with_partner_role() -> String {
    format!(r#"[{{"name":"barun-dev"}},{{"name":"partner","roleArn":"{PARTNER_ROLE}"}}]"#)
}

#[tokio::test]
async fn a_cluster_in_another_account_is_reached_with_the_role_assumed_for_it() {
    let standins = Scenario::seeded().await;
    let partner = partner_cluster(&standins, true).await;
    let clusters = with_partner_role();
    let handler = standins.handler(&[("CLUSTERS", &clusters)]);
    let (report, failed) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert_eq!(failed, None, "{report:#?}");
    assert_eq!(tag_in(&partner.kube).as_deref(), Some(PUSHED_TAG));
    assert_eq!(tag_in(&standins.kube).as_deref(), Some(PUSHED_TAG));
    // DescribeCluster and the token used the role's credentials; the function's own role
    // is unknown to that cluster and may not describe it.
    let (report, _) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert!(report.clusters.iter().all(|c| c.failure.is_none()));
    // Which identity signed each AWS call, as the stand-in verified the signatures: the role
    // assumed for the partner's cluster described it, the function's own role did the rest.
    let callers: Vec<(String, String, String)> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| !r.caller.is_empty())
        .map(|r| (r.caller, r.path, r.operation))
        .collect();
    let partner_arn =
        "arn:aws:sts::111122223333:assumed-role/argocd-ecr-updater-partner/argocd-ecr-updater";
    assert!(
        callers
            .iter()
            .any(|(caller, path, _)| caller == partner_arn && path == "/clusters/partner"),
        "{callers:#?}"
    );
    assert!(
        callers
            .iter()
            .all(|(caller, path, _)| path != "/clusters/partner" || caller == partner_arn),
        "only the partner's role describes its cluster: {callers:#?}"
    );
    assert!(
        callers.iter().any(|(caller, _, operation)| caller
            == argocd_ecr_updater_standins::FUNCTION_ROLE_ARN
            && operation == "DescribeImages"),
        "{callers:#?}"
    );
}

/// The AWS stand-ins verify SigV4 as AWS does: a wrong secret, a session token that is not
/// the key's, an expired session each fail the call with AWS's own error, and the function
/// reports it as that.
#[tokio::test]
async fn calls_signed_with_the_wrong_credentials_are_refused_with_awss_errors() {
    use argocd_ecr_updater_standins::{
        FUNCTION_ACCESS_KEY, FUNCTION_SECRET_KEY, FUNCTION_SESSION_TOKEN,
    };
    for (secret, token, expire, words) in [
        (
            "not/the/secret",
            Some(FUNCTION_SESSION_TOKEN),
            false,
            "InvalidSignatureException",
        ),
        (
            FUNCTION_SECRET_KEY,
            Some("another-session"),
            false,
            "UnrecognizedClientException",
        ),
        (
            FUNCTION_SECRET_KEY,
            None,
            false,
            "UnrecognizedClientException",
        ),
        (
            FUNCTION_SECRET_KEY,
            Some(FUNCTION_SESSION_TOKEN),
            true,
            "ExpiredTokenException",
        ),
    ] {
        let standins = Scenario::seeded().await;
        if expire {
            standins.aws.expire(FUNCTION_ACCESS_KEY);
        }
        let credentials = aws_credential_types::Credentials::new(
            FUNCTION_ACCESS_KEY,
            secret,
            token.map(str::to_string),
            None,
            "test",
        );
        let sdk = standins
            .sdk_config()
            .to_builder()
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
            )
            .build();
        let config = argocd_ecr_updater::config::Config::from_lookup(|k| {
            (k == "CLUSTER_NAME").then(|| "barun-dev".to_string())
        })
        .unwrap();
        let handler = argocd_ecr_updater::pipeline::handler::Handler::from_sdk(
            config,
            &sdk,
            std::sync::Arc::new(argocd_ecr_updater::cluster::eks_auth::SystemClock),
        )
        .unwrap();
        let outcome = handler.handle(&event("push-date-tag.json"), None).await;
        let said = match outcome {
            Ok(report) => format!("{report:?}"),
            Err(error) => error.to_string(),
        };
        assert!(said.contains(words), "{words}: {said}");
        assert_eq!(tag_in(&standins.kube).as_deref(), Some(SEED_TAG), "{words}");
    }
}

#[tokio::test]
async fn a_role_that_refuses_the_function_is_reported_as_needing_an_operator() {
    let standins = Scenario::seeded().await;
    let partner = partner_cluster(&standins, false).await;
    let clusters = with_partner_role();
    let handler = standins.handler(&[("CLUSTERS", &clusters)]);
    let (report, failed) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    assert_eq!(failed, Some("Retryable.TargetsFailed"));
    let failure = report.clusters[1].failure.as_ref().unwrap();
    assert!(
        failure.message.contains(PARTNER_ROLE),
        "{}",
        failure.message
    );
    assert!(failure.needs_operator, "{failure:?}");
    assert_eq!(tag_in(&partner.kube).as_deref(), Some(SEED_TAG));
    assert_eq!(tag_in(&standins.kube).as_deref(), Some(PUSHED_TAG));
}

#[tokio::test]
async fn another_accounts_cluster_without_its_role_is_refused_describe_cluster() {
    let standins = Scenario::seeded().await;
    let _partner = partner_cluster(&standins, true).await;
    let handler = standins.handler(&[("CLUSTERS", "barun-dev,partner")]);
    let (report, _) =
        report_and_error_type(handler.handle(&event("push-date-tag.json"), None).await);
    let failure = report.clusters[1].failure.as_ref().unwrap();
    assert!(
        failure.message.contains("eks:DescribeCluster"),
        "{}",
        failure.message
    );
    assert!(failure.needs_operator);
}
