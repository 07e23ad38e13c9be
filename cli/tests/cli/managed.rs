//! `doctor` on the layout of AWS's managed Argo CD: the stand-ins' cluster is the hub of an
//! EKS capability for Argo CD (found through `ListCapabilities` and `DescribeCapability`),
//! the function deployed with `ARGOCD_EKS_CAPABILITY=true` and only `deploy/rbac.yaml`'s
//! namespaced Role. Healthy, every check passes; each gap the capability's layout is prone to
//! (no access entry, the wrong group, a Role without `patch`, the wrong namespace) fails the
//! check that names it, with its fix. moto models no EKS capabilities, so these run against
//! the stand-ins.

use argocd_ecr_updater_standins::capabilities::Capability;
use argocd_ecr_updater_standins::deployment::Deployment;
use argocd_ecr_updater_standins::{
    FUNCTION_IAM_ROLE_ARN, StandIns, function_identity, shipped_grants,
};
use serde_json::Value;

use crate::doctor::{check, deployed, detail, doctor, failed, fix, named};

/// The hub, its capability reconciling `namespace`, and the function told so.
fn on_the_hub(standins: &StandIns, namespace: &str) {
    let namespace = namespace.to_string();
    standins.aws.deployment(|d: &mut Deployment| {
        d.capabilities = vec![Capability::argocd(&namespace)];
        d.environment
            .insert("ARGOCD_EKS_CAPABILITY".into(), "true".into());
    });
}

/// The one failed check, which must be `name`.
fn the_failure<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    let failures = failed(checks);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let found = check(checks, name);
    assert_eq!(found["status"], "fail", "{found:#}");
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_with_the_capability_passes_and_names_the_namespace_it_reconciles() {
    let standins = deployed().await;
    on_the_hub(&standins, "argocd");
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let capability = named(&checks, "barun-dev Argo CD capability");
    assert_eq!(capability["status"], "ok");
    assert!(
        detail(capability).contains("ACTIVE, reconciling the Applications of namespace argocd")
    );
    assert_eq!(
        named(&checks, "barun-dev capability namespace")["status"],
        "ok"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_without_the_functions_access_entry_fails_with_the_command_that_creates_it() {
    let standins = deployed().await;
    on_the_hub(&standins, "argocd");
    standins.aws.deployment(|d| d.access_entries.clear());
    let (_, checks) = doctor(&standins);
    let failure = the_failure(&checks, "access entry");
    assert!(
        fix(failure).contains(&format!("create-access-entry --cluster-name barun-dev --region ap-northeast-2 --principal-arn {FUNCTION_IAM_ROLE_ARN}")),
        "{failure:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_access_entry_to_the_wrong_group_fails_naming_the_group_and_the_update() {
    let standins = deployed().await;
    on_the_hub(&standins, "argocd");
    standins.aws.deployment(|d| {
        for groups in d.access_entries.values_mut() {
            *groups = vec!["argocd-viewers".into()];
        }
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let entry = check(&checks, "access entry");
    assert_eq!(entry["status"], "fail");
    assert!(detail(entry).contains("argocd-viewers"), "{entry:#}");
    assert!(fix(entry).contains("update-access-entry"), "{entry:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_role_without_patch_fails_naming_the_verb_and_the_manifest() {
    let mut grants = shipped_grants("argocd");
    for grant in grants.iter_mut().filter(|g| g.resource == "applications") {
        grant.verbs.retain(|v| v != "patch");
    }
    let standins = StandIns::start_seeded_with_grants(grants.clone())
        .await
        .unwrap();
    standins
        .aws
        .add_role(FUNCTION_IAM_ROLE_ARN, Some(function_identity(grants)));
    on_the_hub(&standins, "argocd");
    let (_, checks) = doctor(&standins);
    let failure = the_failure(&checks, "namespace argocd");
    assert_eq!(
        failure["detail"], "not allowed: patch applications.argoproj.io",
        "{failure:#}"
    );
    assert!(
        fix(failure).contains("kubectl apply -f deploy/rbac.yaml"),
        "{failure:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_in_another_namespace_than_the_functions_fails_with_both_fixes() {
    let standins = deployed().await;
    on_the_hub(&standins, "gitops");
    let (_, checks) = doctor(&standins);
    let failure = the_failure(&checks, "capability namespace");
    assert!(
        detail(failure).contains("live in gitops; the function lists argocd"),
        "{failure:#}"
    );
    assert!(
        fix(failure).contains("ArgoCdNamespaces=gitops"),
        "{failure:#}"
    );
    assert!(
        fix(failure).contains("deploy/rbac.yaml | kubectl apply -f -"),
        "{failure:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_the_function_is_not_told_of_warns_without_failing() {
    let standins = deployed().await;
    on_the_hub(&standins, "argocd");
    standins.aws.deployment(|d| {
        d.environment.remove("ARGOCD_EKS_CAPABILITY");
    });
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let capability = named(&checks, "barun-dev Argo CD capability");
    assert_eq!(capability["status"], "warn", "{capability:#}");
    assert!(fix(capability).contains("ArgoCdEksCapability=true"));
}
