//! Adversarial probes of `doctor` on the hub of AWS's managed Argo CD (issue 65): the managed
//! layout grants nothing cluster-wide, so a function role that can reach Applications in
//! every namespace (a ClusterRole bound by a ClusterRoleBinding, e.g.
//! deploy/rbac-all-namespaces.yaml left over from a self-managed install) is a gap doctor
//! should name with its fix.

use argocd_ecr_updater_standins::capabilities::Capability;
use argocd_ecr_updater_standins::deployment::Deployment;
use argocd_ecr_updater_standins::{
    FUNCTION_IAM_ROLE_ARN, StandIns, function_identity, shipped_grants,
};

use crate::doctor::doctor;

/// The function's Role as a ClusterRole bound cluster-wide (the stand-in's `*` namespace),
/// on the hub with the capability: every namespaced check passes, and nothing says the
/// grant reaches beyond the capability's namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_wide_grant_on_the_hub_is_named_by_doctor() {
    let grants = shipped_grants("*");
    let standins = StandIns::start_seeded_with_grants(grants.clone())
        .await
        .unwrap();
    standins
        .aws
        .add_role(FUNCTION_IAM_ROLE_ARN, Some(function_identity(grants)));
    standins.aws.deployment(|d: &mut Deployment| {
        d.capabilities = vec![Capability::argocd("argocd")];
        d.environment
            .insert("ARGOCD_EKS_CAPABILITY".into(), "true".into());
    });
    let (_, checks) = doctor(&standins);
    let flagged: Vec<_> = checks
        .iter()
        .filter(|c| c["status"] != "ok" && c["status"] != "skipped")
        .filter(|c| {
            let text = c["detail"].to_string();
            text.contains("every namespace") || text.contains("cluster-wide")
        })
        .collect();
    assert!(
        !flagged.is_empty(),
        "a cluster-wide grant on the managed layout passes unremarked: {checks:#?}"
    );
}
