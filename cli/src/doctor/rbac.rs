//! RBAC as the function sees it: the function's role assumed (when its trust policy lets the
//! operator), then a `SelfSubjectAccessReview` for every verb and resource the function
//! uses, in each namespace it writes to.

use std::sync::Arc;

use argocd_ecr_updater::config::{ClusterAccess, ClusterSpec, Config, NamespaceScope};
use argocd_ecr_updater::eks_auth::{IamTokenSource, SystemClock};
use argocd_ecr_updater::kube::{KubeClient, required_access};

use super::{Checklist, Clients, Function};

/// The function's role, assumed to check RBAC and secrets as the function sees them.
pub(super) async fn assume_function_role(
    clients: &Clients,
    function: &Function,
    list: &mut Checklist,
) -> Option<aws_credential_types::Credentials> {
    let assumed = clients
        .sts
        .assume_role()
        .role_arn(&function.role)
        .role_session_name("argocd-ecr-updater-doctor")
        .send()
        .await;
    match assumed.ok().and_then(|out| out.credentials().cloned()) {
        Some(c) => {
            list.add(
                "rbac",
                "function's role",
                Ok(format!("assumed {}", function.role)),
            );
            Some(aws_credential_types::Credentials::new(
                c.access_key_id(),
                c.secret_access_key(),
                Some(c.session_token().to_string()),
                None,
                "doctor",
            ))
        }
        None => {
            list.skip("rbac", "function's role", format!("cannot assume {} (its trust policy allows Lambda only, which is the default): RBAC and secrets are not checked as the function", function.role),
                "kubectl auth can-i patch applications.argoproj.io -n argocd --as doctor --as-group <KubernetesGroup>".into());
            None
        }
    }
}

/// `SelfSubjectAccessReview` for every verb and resource the function uses, as its role.
pub(super) async fn rbac(
    config: &Config,
    spec: &ClusterSpec,
    access: &ClusterAccess,
    role: &aws_credential_types::Credentials,
    region: &str,
    list: &mut Checklist,
) {
    let provider = aws_credential_types::provider::SharedCredentialsProvider::new(role.clone());
    let region = spec.region.clone().unwrap_or_else(|| region.to_string());
    let tokens = Arc::new(IamTokenSource::new(
        spec.name.clone(),
        region,
        provider,
        Arc::new(SystemClock),
    ));
    let kube = match KubeClient::new(access, tokens, config.timeouts) {
        Ok(kube) => kube,
        Err(e) => {
            list.add(
                "rbac",
                &spec.name,
                Err((
                    format!("cannot build a client: {e}"),
                    "check the cluster's CA".into(),
                )),
            );
            return;
        }
    };
    let namespaces: Vec<Option<String>> = match &spec.namespaces {
        NamespaceScope::All => vec![None],
        NamespaceScope::Only(names) => names.iter().cloned().map(Some).collect(),
    };
    let rbac_file = if namespaces == [None] {
        "deploy/rbac-all-namespaces.yaml"
    } else {
        "deploy/rbac.yaml"
    };
    for namespace in &namespaces {
        let mut missing = Vec::new();
        for need in required_access(config.read_image_updaters, config.git.repocreds) {
            match kube.review_access(namespace.as_deref(), &need).await {
                Ok(true) => {}
                Ok(false) => missing.push(need.to_string()),
                Err(e) => {
                    list.add(
                        "rbac",
                        &spec.name,
                        Err((
                            format!("the access review failed: {e}"),
                            "check the access entry above".into(),
                        )),
                    );
                    return;
                }
            }
        }
        let scope = namespace
            .as_deref()
            .map_or("every namespace".to_string(), |n| format!("namespace {n}"));
        let result = if missing.is_empty() {
            Ok("every verb the function uses is allowed".into())
        } else {
            Err((
                format!("not allowed: {}", missing.join(", ")),
                format!(
                    "kubectl apply -f {rbac_file} (in {scope}{})",
                    if config.git.repocreds {
                        ", and deploy/rbac-repocreds.yaml"
                    } else {
                        ""
                    }
                ),
            ))
        };
        list.add("rbac", format!("{} {scope}", spec.name), result);
    }
}
