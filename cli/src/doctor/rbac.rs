//! RBAC as the function gets it. By default asked as the operator: a `SubjectAccessReview`
//! for the user and groups the function's role maps to (what `kubectl auth can-i --as
//! --as-group` asks), for every verb and resource the function uses in each namespace it
//! writes to, and for what it must not have (Secrets in every namespace, wildcards, deleting
//! Applications). With `--assume-role`, the role itself is assumed (when its trust policy
//! lets the operator) and asks `SelfSubjectAccessReview`s.

use std::sync::Arc;

use argocd_ecr_updater::cluster::connect;
use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::cluster::kube::{
    AccessNeed, KubeClient, KubeError, ReviewSubject, required_access,
};
use argocd_ecr_updater::config::{ClusterAccess, ClusterSpec, Config, NamespaceScope};

use super::{Checklist, Clients, Function};

const AREA: &str = "rbac";

/// What the function must not be allowed, whatever it is configured for: read Secrets in
/// every namespace, anything by wildcard, or delete Applications.
const EXCESS: [(AccessNeed, bool); 4] = [
    (
        AccessNeed {
            group: "",
            resource: "secrets",
            subresource: None,
            verb: "get",
        },
        true,
    ),
    (
        AccessNeed {
            group: "",
            resource: "secrets",
            subresource: None,
            verb: "list",
        },
        true,
    ),
    (
        AccessNeed {
            group: "*",
            resource: "*",
            subresource: None,
            verb: "*",
        },
        true,
    ),
    (
        AccessNeed {
            group: "argoproj.io",
            resource: "applications",
            subresource: None,
            verb: "delete",
        },
        false,
    ),
];

/// A Kubernetes client for `access`, authenticated with `credentials` (an EKS token signed
/// with them).
pub(super) fn client(
    config: &Config,
    spec: &ClusterSpec,
    access: &ClusterAccess,
    credentials: aws_credential_types::provider::SharedCredentialsProvider,
    region: &str,
) -> Result<KubeClient, String> {
    let region = spec.region.clone().unwrap_or_else(|| region.to_string());
    connect::client_for(
        access,
        &spec.name,
        &region,
        credentials,
        Arc::new(SystemClock),
        config.timeouts,
    )
    .map_err(|e| e.to_string())
}

/// The function's role, assumed (`--assume-role`) to check RBAC and secrets as the function.
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
    match assumed {
        Ok(out) => {
            let c = out.credentials()?;
            list.add(
                AREA,
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
        Err(e) => {
            list.skip(AREA, "function's role", format!("--assume-role: cannot assume {}: {} (the role trusts Lambda alone unless your role is listed in the template parameter OperatorRoleArns, Terraform's operator_role_arns)", function.role, argocd_ecr_updater::aws::aws_error::describe(&e)),
                "run doctor without --assume-role: it asks the API server about the role's user and groups instead".into());
            None
        }
    }
}

/// Who checks: the operator about the role's mapped subject, or the assumed role itself.
pub(super) enum Reviewer<'a> {
    Operator {
        kube: &'a KubeClient,
        subject: &'a ReviewSubject,
    },
    Role {
        kube: &'a KubeClient,
    },
}

/// Every verb and resource the function uses, in every namespace it reads, then what it must
/// not have.
pub(super) async fn rbac(
    config: &Config,
    spec: &ClusterSpec,
    reviewer: Reviewer<'_>,
    list: &mut Checklist,
) {
    let (kube, subject, who) = match &reviewer {
        Reviewer::Operator { kube, subject } => (
            *kube,
            Some(*subject),
            format!("groups {}", subject.groups.join(", ")),
        ),
        Reviewer::Role { kube } => (*kube, None, "the assumed role".to_string()),
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
    let by_hand = |namespace: &str| match subject {
        Some(subject) => format!(
            "kubectl auth can-i --list -n {namespace} --as {} {}",
            subject.user,
            subject
                .groups
                .iter()
                .map(|g| format!("--as-group {g}"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        None => "kubectl auth can-i --list (as the function's role)".into(),
    };
    for namespace in &namespaces {
        let scope = namespace
            .as_deref()
            .map_or("every namespace".to_string(), |n| format!("namespace {n}"));
        let mut missing = Vec::new();
        for need in required_access(config.read_image_updaters, config.git.repocreds) {
            match kube
                .review_access(subject, namespace.as_deref(), &need)
                .await
            {
                Ok(true) => {}
                Ok(false) => missing.push(need.to_string()),
                Err(e) => {
                    let refused = matches!(
                        e,
                        KubeError::Forbidden { .. } | KubeError::ForbiddenOther { .. }
                    );
                    let why = if refused && subject.is_some() {
                        "you may not ask the API server about other subjects: creating a SubjectAccessReview needs a cluster admin's access (create on subjectaccessreviews.authorization.k8s.io)".to_string()
                    } else {
                        format!("the access review failed: {e}")
                    };
                    list.skip(
                        AREA,
                        format!("{} {scope}", spec.name),
                        why,
                        by_hand(namespace.as_deref().unwrap_or("argocd")),
                    );
                    return;
                }
            }
        }
        let result = if missing.is_empty() {
            Ok(format!("every verb the function uses is allowed to {who}"))
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
        list.add(AREA, format!("{} {scope}", spec.name), result);
    }
    let managed = config.eks_capability.is_some();
    excess(kube, subject, spec, &namespaces, &who, managed, list).await;
}

/// What the function is allowed beyond what it uses: each is a way in for whoever controls
/// the function's role.
async fn excess(
    kube: &KubeClient,
    subject: Option<&ReviewSubject>,
    spec: &ClusterSpec,
    namespaces: &[Option<String>],
    who: &str,
    managed: bool,
    list: &mut Checklist,
) {
    let mut allowed = Vec::new();
    // The managed layout grants nothing cluster-wide: patching Applications in every
    // namespace is a binding beyond its namespaced Role.
    let beyond_the_namespace = managed.then_some((
        AccessNeed {
            group: "argoproj.io",
            resource: "applications",
            subresource: None,
            verb: "patch",
        },
        true,
    ));
    for (need, cluster_wide) in EXCESS.into_iter().chain(beyond_the_namespace) {
        let scopes: Vec<Option<&str>> = if cluster_wide {
            vec![None]
        } else {
            namespaces.iter().map(Option::as_deref).collect()
        };
        for namespace in scopes {
            match kube.review_access(subject, namespace, &need).await {
                Ok(true) => allowed.push(match namespace {
                    Some(n) => format!("{need} in {n}"),
                    None => format!("{need} in every namespace"),
                }),
                Ok(false) => {}
                // The checks above said why reviews cannot be asked.
                Err(_) => return,
            }
        }
    }
    let result = if allowed.is_empty() {
        Ok("nothing beyond what it uses is allowed (Secrets in every namespace, wildcards, deleting Applications)".into())
    } else {
        Err((
            format!("{who} may also: {}", allowed.join("; ")),
            "find the binding that grants it (kubectl get clusterrolebindings,rolebindings -A -o wide | grep <group>) and narrow it to deploy/rbac.yaml's rules".into(),
        ))
    };
    list.add(AREA, format!("{} excess", spec.name), result);
}
