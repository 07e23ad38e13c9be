//! AWS's managed Argo CD, the EKS capability for Argo CD, on each cluster: found through the
//! EKS API (`ListCapabilities`, then `DescribeCapability` for its namespace) and held against
//! where the function looks for Applications (`ARGOCD_NAMESPACES`, `ARGOCD_NAMESPACE`) and
//! whether it knows (`ARGOCD_EKS_CAPABILITY`). The capability's controllers reconcile one
//! namespace and give the function no access of their own: the access entry, its Kubernetes
//! groups and the Role (with `patch`) are the cluster and RBAC checks', asked in the
//! namespace the function uses, which this check makes sure is the capability's.

use argocd_ecr_updater::aws::aws_error::{Cause, describe};
use argocd_ecr_updater::config::{ClusterSpec, Config, NamespaceScope};

use super::{Checklist, Clients, Failure, failed_call};

const AREA: &str = "capability";

/// What EKS says of the cluster's Argo CD capability.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    name: String,
    status: String,
    namespace: String,
}

/// One line of the checklist.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Pass(String),
    Fail(Failure),
    Warn(String, String),
}

/// The capability's checks on one cluster; nothing for a self-managed Argo CD the function
/// was not told is managed.
pub(super) async fn capability(
    clients: &Clients,
    config: &Config,
    spec: &ClusterSpec,
    region: &str,
    list: &mut Checklist,
) {
    // A cluster of another account is described there (the cluster check says so).
    if spec.role_arn.is_some() {
        return;
    }
    let region = spec.region.clone().unwrap_or_else(|| region.to_string());
    let eks = aws_sdk_eks::Client::from_conf(
        aws_sdk_eks::config::Builder::from(&clients.sdk)
            .region(aws_config::Region::new(region.clone()))
            .build(),
    );
    let name = format!("{} Argo CD capability", spec.name);
    let found = match find(&eks, &spec.name).await {
        Ok(found) => found,
        Err(described) if described.cause == Cause::AccessDenied => {
            list.skip(
                AREA,
                name,
                format!("cannot read the cluster's capabilities: {described}"),
                format!(
                    "aws eks list-capabilities --cluster-name {} --region {region}",
                    spec.name
                ),
            );
            return;
        }
        // No such cluster: the cluster check says so.
        Err(described) if described.code.as_deref() == Some("ResourceNotFoundException") => {
            return;
        }
        // An answer that is not the API's (a region or endpoint without capabilities, an
        // emulator) matters only when the function is told the cluster has one.
        Err(described) if config.eks_capability.is_none() => {
            list.skip(
                AREA,
                name,
                format!(
                    "cannot read the cluster's capabilities ({described}); the function is not told of one (ARGOCD_EKS_CAPABILITY), so nothing depends on it"
                ),
                format!(
                    "aws eks list-capabilities --cluster-name {} --region {region}",
                    spec.name
                ),
            );
            return;
        }
        Err(described) => {
            let failure = failed_call("ListCapabilities", "eks:ListCapabilities", &described);
            list.add(AREA, name, Err(failure));
            return;
        }
    };
    for (check, verdict) in verdicts(&spec.name, &region, found.as_ref(), config) {
        match verdict {
            Verdict::Pass(detail) => list.add(AREA, check, Ok(detail)),
            Verdict::Fail(failure) => list.add(AREA, check, Err(failure)),
            Verdict::Warn(risk, advice) => list.warn(AREA, check, risk, advice),
        }
    }
}

/// The cluster's Argo CD capability, if it has one.
async fn find(
    eks: &aws_sdk_eks::Client,
    cluster: &str,
) -> Result<Option<Found>, argocd_ecr_updater::aws::aws_error::Described> {
    let listed = eks
        .list_capabilities()
        .cluster_name(cluster)
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let argocd = listed
        .capabilities()
        .iter()
        .find(|c| c.r#type() == Some(&aws_sdk_eks::types::CapabilityType::Argocd));
    let Some(name) = argocd.and_then(|c| c.capability_name()) else {
        return Ok(None);
    };
    let described = eks
        .describe_capability()
        .cluster_name(cluster)
        .capability_name(name)
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let capability = described.capability();
    Ok(Some(Found {
        name: name.to_string(),
        status: capability
            .and_then(|c| c.status())
            .map_or("UNKNOWN", |s| s.as_str())
            .to_string(),
        // The EKS API's default when the capability was created without one.
        namespace: capability
            .and_then(|c| c.configuration())
            .and_then(|c| c.argo_cd())
            .and_then(|a| a.namespace())
            .unwrap_or("argocd")
            .to_string(),
    }))
}

/// The checks `found` calls for, each with its fix.
fn verdicts(
    cluster: &str,
    region: &str,
    found: Option<&Found>,
    config: &Config,
) -> Vec<(String, Verdict)> {
    let check = format!("{cluster} Argo CD capability");
    let Some(found) = found else {
        if config.eks_capability.is_none() {
            return Vec::new();
        }
        return vec![(
            check,
            Verdict::Fail((
                format!("ARGOCD_EKS_CAPABILITY is true, but {cluster} has no Argo CD capability"),
                format!(
                    "aws eks list-capabilities --cluster-name {cluster} --region {region} (the hub is the cluster the capability was created on: set ClusterName to it); for a self-managed Argo CD deploy with ArgoCdEksCapability=false (Terraform: argocd_eks_capability = false)"
                ),
            )),
        )];
    };
    let ns = &found.namespace;
    let first = if found.status != "ACTIVE" {
        Verdict::Fail((
            format!(
                "capability `{}` is {}: its controllers reconcile nothing until it is ACTIVE",
                found.name, found.status
            ),
            format!(
                "aws eks describe-capability --cluster-name {cluster} --capability-name {} --region {region} --query capability.health",
                found.name
            ),
        ))
    } else if config.eks_capability.is_some() {
        Verdict::Pass(format!(
            "capability `{}` ACTIVE, reconciling the Applications of namespace {ns}",
            found.name
        ))
    } else {
        Verdict::Warn(
            format!(
                "Argo CD here is the EKS capability `{}`, which reconciles only namespace {ns}, and the function is not told (ARGOCD_EKS_CAPABILITY unset): a write to an Application elsewhere would never roll out",
                found.name
            ),
            "deploy with ArgoCdEksCapability=true (Terraform: argocd_eks_capability = true): Applications outside the namespace are then skipped with the reason".into(),
        )
    };
    let scope = match &config.namespaces {
        NamespaceScope::All => "every namespace".to_string(),
        NamespaceScope::Only(list) => list.join(","),
    };
    let watched = config.namespaces == NamespaceScope::Only(vec![ns.clone()])
        || (config.namespaces != NamespaceScope::All && config.namespaces.contains(ns));
    let namespace = if watched && config.git.argocd_namespace == *ns {
        Verdict::Pass(format!(
            "the function lists {scope}, and the capability's Applications live in {ns}"
        ))
    } else {
        Verdict::Fail((
            format!(
                "the capability's Applications live in {ns}; the function lists {scope} (ARGOCD_NAMESPACES) with Argo CD's namespace {} (ARGOCD_NAMESPACE)",
                config.git.argocd_namespace
            ),
            format!(
                "deploy with ArgoCdNamespaces={ns} (Terraform: argocd_namespaces = \"{ns}\"), and bind the Role there: sed 's/namespace: argocd/namespace: {ns}/' deploy/rbac.yaml | kubectl apply -f -"
            ),
        ))
    };
    vec![
        (check, first),
        (format!("{cluster} capability namespace"), namespace),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Config {
        let mut all = vec![("CLUSTER_NAME", "hub")];
        all.extend_from_slice(vars);
        Config::from_lookup(|k| {
            all.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
        .unwrap()
    }

    fn found(status: &str, namespace: &str) -> Found {
        Found {
            name: "argocd".into(),
            status: status.into(),
            namespace: namespace.into(),
        }
    }

    fn shape(verdicts: &[(String, Verdict)]) -> Vec<&'static str> {
        verdicts
            .iter()
            .map(|(_, v)| match v {
                Verdict::Pass(_) => "pass",
                Verdict::Fail(_) => "fail",
                Verdict::Warn(..) => "warn",
            })
            .collect()
    }

    #[test]
    fn the_capability_is_held_against_the_functions_namespace_and_setting() {
        let on = [("ARGOCD_EKS_CAPABILITY", "true")];
        let cases: Vec<(Option<Found>, Config, Vec<&str>)> = vec![
            (None, config(&[]), vec![]),
            (None, config(&on), vec!["fail"]),
            (
                Some(found("ACTIVE", "argocd")),
                config(&on),
                vec!["pass", "pass"],
            ),
            (
                Some(found("ACTIVE", "argocd")),
                config(&[]),
                vec!["warn", "pass"],
            ),
            (
                Some(found("CREATING", "argocd")),
                config(&on),
                vec!["fail", "pass"],
            ),
            (
                Some(found("ACTIVE", "gitops")),
                config(&on),
                vec!["pass", "fail"],
            ),
            (
                Some(found("ACTIVE", "gitops")),
                config(&[
                    ("ARGOCD_NAMESPACES", "gitops"),
                    ("ARGOCD_EKS_CAPABILITY", "true"),
                ]),
                vec!["pass", "pass"],
            ),
            (
                Some(found("ACTIVE", "argocd")),
                config(&[("ARGOCD_NAMESPACES", "*")]),
                vec!["warn", "fail"],
            ),
        ];
        for (found, config, expected) in cases {
            let got = verdicts("hub", "ap-northeast-2", found.as_ref(), &config);
            assert_eq!(shape(&got), expected, "{found:?}: {got:#?}");
        }
    }

    #[test]
    fn a_wrong_namespace_fails_with_the_parameter_and_the_role_to_apply_there() {
        let config = config(&[("ARGOCD_EKS_CAPABILITY", "true")]);
        let got = verdicts(
            "hub",
            "ap-northeast-2",
            Some(&found("ACTIVE", "gitops")),
            &config,
        );
        let Verdict::Fail((detail, fix)) = &got[1].1 else {
            panic!("{got:#?}");
        };
        assert!(
            detail.contains("live in gitops; the function lists argocd"),
            "{detail}"
        );
        assert!(fix.contains("ArgoCdNamespaces=gitops"), "{fix}");
        assert!(
            fix.contains("namespace: gitops/' deploy/rbac.yaml | kubectl apply"),
            "{fix}"
        );
    }
}
