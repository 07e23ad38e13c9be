//! Each cluster the function writes to: it exists, hands out an endpoint and a CA the
//! function can use, maps the function's role (by an access entry, or aws-auth's `mapRoles`
//! read as the operator) to the group `deploy/rbac.yaml` binds, and can be reached from
//! where the function runs.

use argocd_ecr_updater::aws::aws_error::{Cause, describe};
use argocd_ecr_updater::cluster::kube::{KubeClient, KubeError, ReviewSubject};
use argocd_ecr_updater::config::{ClusterAccess, ClusterSpec, Config};

use super::{Checklist, Clients, Failure, Function, failed_call};

const AREA: &str = "cluster";

/// What the RBAC checks need of a cluster: a client as the operator, and the user and
/// groups the function's role maps to there (when the mapping could be read).
pub(super) struct ClusterView {
    pub access: ClusterAccess,
    pub operator: Option<KubeClient>,
    pub subject: Option<ReviewSubject>,
}

/// The cluster's checks, and what the RBAC check connects with (nothing when the endpoint
/// or the CA is unusable, which is then a failed check of its own).
pub(super) async fn cluster(
    clients: &Clients,
    config: &Config,
    function: &Function,
    spec: &ClusterSpec,
    group: &str,
    vpc_network: Option<&super::network::Network>,
    list: &mut Checklist,
) -> Option<ClusterView> {
    let region = spec
        .region
        .clone()
        .unwrap_or_else(|| function.region.clone());
    let operator_client = |access: &ClusterAccess| {
        let credentials = clients.sdk.credentials_provider()?;
        super::rbac::client(config, spec, access, credentials, &region).ok()
    };
    if let Some(access) = &spec.access {
        list.skip(
            AREA,
            &spec.name,
            "its endpoint and CA are configured; DescribeCluster and access entries are not read"
                .into(),
            format!(
                "aws eks list-access-entries --cluster-name {} (in the cluster's account)",
                spec.name
            ),
        );
        // The mapping is not read: RBAC is asked about the group the role should map to.
        let subject = ReviewSubject {
            user: session_user(&function.role, &function.name),
            groups: vec![group.to_string(), "system:authenticated".into()],
        };
        return Some(ClusterView {
            access: access.clone(),
            operator: operator_client(access),
            subject: Some(subject),
        });
    }
    if spec.role_arn.is_some() {
        list.skip(
            AREA,
            &spec.name,
            "described with a role of another account; checked there, not here".into(),
            format!(
                "aws eks describe-cluster --name {} --query cluster.accessConfig (as that account)",
                spec.name
            ),
        );
        return None;
    }
    let eks = aws_sdk_eks::Client::from_conf(
        aws_sdk_eks::config::Builder::from(&clients.sdk)
            .region(aws_config::Region::new(region.clone()))
            .build(),
    );
    let cluster = described(&eks, &spec.name, &region, list).await?;
    list.add(AREA, &spec.name, Ok(format!("found in {region}")));
    let access = connection(
        cluster.endpoint(),
        cluster.certificate_authority().and_then(|c| c.data()),
        cluster.status().map(|s| s.as_str()),
    )
    .map_err(|(detail, fix)| {
        (
            detail,
            fix.replace("{name}", &spec.name)
                .replace("{region}", &region),
        )
    });
    let operator = access.as_ref().ok().and_then(operator_client);
    let mode = cluster
        .access_config()
        .and_then(|a| a.authentication_mode())
        .map(|m| m.as_str().to_string());
    let mapping = Mapping {
        cluster: &spec.name,
        region: &region,
        role: &function.role,
        session: &function.name,
        group,
    };
    let entries_allowed = list_mode(&spec.name, &region, mode.as_deref(), list);
    let subject = if entries_allowed {
        let config_map_too = mode.as_deref() == Some("API_AND_CONFIG_MAP");
        access_entry(&eks, &mapping, config_map_too, operator.as_ref(), list).await
    } else {
        aws_auth(&mapping, operator.as_ref(), list).await
    };
    network(
        &cluster,
        function,
        &spec.name,
        &clients.ec2,
        vpc_network,
        list,
    )
    .await;
    let name = format!("{} endpoint and CA", spec.name);
    match access {
        Ok(access) => {
            list.add(
                AREA,
                name,
                Ok(format!("{} with a CA that decodes", access.endpoint)),
            );
            Some(ClusterView {
                access,
                operator,
                subject,
            })
        }
        Err(failure) => {
            list.add(AREA, name, Err(failure));
            None
        }
    }
}

/// The cluster as DescribeCluster answers it, or `None` with the failed check added.
async fn described(
    eks: &aws_sdk_eks::Client,
    name: &str,
    region: &str,
    list: &mut Checklist,
) -> Option<aws_sdk_eks::types::Cluster> {
    let described = match eks.describe_cluster().name(name).send().await {
        Ok(out) => out.cluster,
        Err(e) => {
            let described = describe(&e);
            let result = if described.code.as_deref() == Some("ResourceNotFoundException") {
                Err((
                    format!("no such cluster in {region}: {described}"),
                    format!(
                        "check the name and region (Clusters' \"region\"); aws eks list-clusters --region {region}"
                    ),
                ))
            } else {
                Err(failed_call(
                    "DescribeCluster",
                    "eks:DescribeCluster",
                    &described,
                ))
            };
            list.add(AREA, name, result);
            return None;
        }
    };
    let Some(cluster) = described else {
        list.add(
            AREA,
            name,
            Err((
                "DescribeCluster answered without a cluster".into(),
                format!("aws eks describe-cluster --name {} --region {region}", name),
            )),
        );
        return None;
    };
    Some(cluster)
}

/// The user name an assumed role's session gets: `arn:aws:sts::<account>:assumed-role/<role>/
/// <session>` (Lambda names the session after the function).
fn session_user(role: &str, session: &str) -> String {
    let account = role.split(':').nth(4).unwrap_or_default();
    let name = role.rsplit('/').next().unwrap_or_default();
    format!("arn:aws:sts::{account}:assumed-role/{name}/{session}")
}

/// The function's role and the group it must map to, in one cluster.
struct Mapping<'a> {
    cluster: &'a str,
    region: &'a str,
    role: &'a str,
    /// The session name Lambda gives the role: the function's name.
    session: &'a str,
    group: &'a str,
}

impl Mapping<'_> {
    /// The subject a mapping of `username` (a template, `{{SessionName}}`…) and `groups` makes.
    fn subject(&self, username: Option<&str>, groups: &[String]) -> ReviewSubject {
        let account = self.role.split(':').nth(4).unwrap_or_default();
        let user = match username.filter(|u| !u.is_empty()) {
            Some(template) => template
                .replace("{{SessionName}}", self.session)
                .replace("{{AccountID}}", account),
            None => session_user(self.role, self.session),
        };
        let mut groups = groups.to_vec();
        groups.push("system:authenticated".into());
        ReviewSubject { user, groups }
    }

    fn groups_result(&self, how: &str, groups: &[String]) -> Result<String, Failure> {
        if groups.iter().any(|g| g == self.group) {
            Ok(format!("{how} maps the role to group {}", self.group))
        } else {
            Err((
                format!(
                    "{how} maps the role to {groups:?}, not {}: deploy/rbac.yaml binds {}",
                    self.group, self.group
                ),
                if how == "aws-auth" {
                    format!(
                        "add {} to the role's groups in aws-auth (kubectl -n kube-system edit configmap aws-auth)",
                        self.group
                    )
                } else {
                    format!(
                        "aws eks update-access-entry --cluster-name {} --region {} --principal-arn {} --kubernetes-groups {}",
                        self.cluster, self.region, self.role, self.group
                    )
                },
            ))
        }
    }
}

/// The authentication mode's check; whether access entries apply. `CONFIG_MAP` is not a
/// failure by itself: the role may be mapped in aws-auth, which the next check reads.
fn list_mode(cluster: &str, region: &str, mode: Option<&str>, list: &mut Checklist) -> bool {
    // EKS answers without `accessConfig` only for clusters made before access entries
    // existed, which authenticate through aws-auth alone: CONFIG_MAP.
    let (mode, read_as) = match mode {
        Some(mode) => (mode, String::new()),
        None => (
            "CONFIG_MAP",
            " (DescribeCluster's answer has no accessConfig, which EKS means as CONFIG_MAP)".into(),
        ),
    };
    let entries_allowed = mode == "API" || mode == "API_AND_CONFIG_MAP";
    let detail = if entries_allowed {
        format!("{mode}: access entries apply")
    } else {
        format!(
            "{mode}{read_as}: access entries are refused (CreateAccessEntry=true fails), so the role must be mapped in aws-auth; to use access entries: aws eks update-cluster-config --name {cluster} --region {region} --access-config authenticationMode=API_AND_CONFIG_MAP"
        )
    };
    list.add(AREA, format!("{cluster} authentication mode"), Ok(detail));
    entries_allowed
}

/// The endpoint and CA the function connects with, or why it cannot (`{name}` and `{region}`
/// in the fix are the cluster's).
fn connection(
    endpoint: Option<&str>,
    ca: Option<&str>,
    status: Option<&str>,
) -> Result<ClusterAccess, Failure> {
    let status = status.unwrap_or("unknown");
    let by_hand = "aws eks describe-cluster --name {name} --region {region} --query 'cluster.[status,endpoint,certificateAuthority]'";
    let (Some(endpoint), Some(ca)) = (
        endpoint.filter(|e| !e.is_empty()),
        ca.filter(|c| !c.is_empty()),
    ) else {
        let missing = match (
            endpoint.is_some_and(|e| !e.is_empty()),
            ca.is_some_and(|c| !c.is_empty()),
        ) {
            (false, false) => "no endpoint and no CA",
            (false, true) => "no endpoint",
            _ => "no CA",
        };
        return Err((
            format!(
                "DescribeCluster hands out {missing} (status {status}): the function cannot connect, and RBAC is not checked"
            ),
            format!(
                "a cluster that is still CREATING has none yet: wait for ACTIVE and run doctor again; else {by_hand}"
            ),
        ));
    };
    match argocd_ecr_updater::config::decode_ca(ca) {
        Ok(ca_pem) => Ok(ClusterAccess {
            endpoint: endpoint.to_string(),
            ca_pem,
        }),
        Err(why) => Err((
            format!(
                "certificateAuthority.data does not decode as a PEM certificate ({why}): the function cannot verify the API server, and RBAC is not checked"
            ),
            format!(
                "compare it with {by_hand}; if the cluster's own answer is broken, set the cluster's caData in Clusters"
            ),
        )),
    }
}

/// The role's access entry, and the subject it maps the role to. With `config_map_too`
/// (`API_AND_CONFIG_MAP`), a role without an entry may still be mapped by aws-auth.
async fn access_entry(
    eks: &aws_sdk_eks::Client,
    mapping: &Mapping<'_>,
    config_map_too: bool,
    operator: Option<&KubeClient>,
    list: &mut Checklist,
) -> Option<ReviewSubject> {
    let (cluster, region, role, group) =
        (mapping.cluster, mapping.region, mapping.role, mapping.group);
    let name = format!("{cluster} access entry");
    let entry = eks
        .describe_access_entry()
        .cluster_name(cluster)
        .principal_arn(role)
        .send()
        .await;
    match entry {
        Ok(out) => {
            let entry = out.access_entry();
            let groups: Vec<String> = entry
                .map(|e| e.kubernetes_groups().to_vec())
                .unwrap_or_default();
            list.add(
                AREA,
                name,
                mapping.groups_result("the access entry", &groups),
            );
            Some(mapping.subject(entry.and_then(|e| e.username()), &groups))
        }
        Err(e) => {
            let described = describe(&e);
            if described.code.as_deref() != Some("ResourceNotFoundException")
                || described.cause == Cause::AccessDenied
            {
                list.add(
                    AREA,
                    name,
                    Err(failed_call(
                        "DescribeAccessEntry",
                        "eks:DescribeAccessEntry",
                        &described,
                    )),
                );
                return None;
            }
            let create = format!(
                "aws eks create-access-entry --cluster-name {cluster} --region {region} --principal-arn {role} --type STANDARD --kubernetes-groups {group}"
            );
            if config_map_too && let Some(kube) = operator {
                // API_AND_CONFIG_MAP: aws-auth still maps roles.
                if let Ok(Some((username, groups))) = read_aws_auth(kube, role).await {
                    list.add(
                        AREA,
                        name,
                        mapping
                            .groups_result("aws-auth", &groups)
                            .map(|ok| format!("none, but {ok}")),
                    );
                    return Some(mapping.subject(username.as_deref(), &groups));
                }
            }
            list.add(
                AREA,
                name,
                Err((format!("none for the function's role: {described}"), create)),
            );
            None
        }
    }
}

/// A `CONFIG_MAP` cluster: the role must be in aws-auth's `mapRoles`, read as the operator.
async fn aws_auth(
    mapping: &Mapping<'_>,
    operator: Option<&KubeClient>,
    list: &mut Checklist,
) -> Option<ReviewSubject> {
    let name = format!("{} aws-auth", mapping.cluster);
    let by_hand = "kubectl -n kube-system get configmap aws-auth -o yaml".to_string();
    let Some(kube) = operator else {
        list.skip(
            AREA,
            name,
            "the cluster cannot be reached from here (see its endpoint and CA)".into(),
            by_hand,
        );
        return None;
    };
    match read_aws_auth(kube, mapping.role).await {
        Ok(Some((username, groups))) => {
            list.add(AREA, name, mapping.groups_result("aws-auth", &groups));
            Some(mapping.subject(username.as_deref(), &groups))
        }
        Ok(None) => {
            list.add(AREA, name, Err((
                format!("aws-auth's mapRoles does not map {}: the role is unknown to the cluster", mapping.role),
                format!(
                    "eksctl create iamidentitymapping --cluster {} --region {} --arn {} --group {} --username argocd-ecr-updater; or let access entries in (aws eks update-cluster-config --name {} --access-config authenticationMode=API_AND_CONFIG_MAP) and deploy with CreateAccessEntry=true",
                    mapping.cluster, mapping.region, mapping.role, mapping.group, mapping.cluster
                ),
            )));
            None
        }
        Err(why) => {
            list.skip(
                AREA,
                name,
                format!("aws-auth cannot be read: {why}"),
                by_hand,
            );
            None
        }
    }
}

/// The user name and groups aws-auth's `mapRoles` gives `role`: `None` when it does not map
/// it (or there is no aws-auth at all).
async fn read_aws_auth(
    kube: &KubeClient,
    role: &str,
) -> Result<Option<(Option<String>, Vec<String>)>, String> {
    let config_map = match kube.get_config_map("kube-system", "aws-auth").await {
        Ok(config_map) => config_map,
        Err(KubeError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let text = config_map["data"]["mapRoles"].as_str().unwrap_or("");
    Ok(mapped_role(text, role))
}

/// An IAM role as aws-auth names it: account and role name (aws-auth's ARNs carry no path,
/// and the authenticator drops the path of the role it compares).
fn role_key(arn: &str) -> Option<(String, String)> {
    let account = arn.split(':').nth(4)?.to_string();
    let resource = arn.split(':').nth(5)?;
    let name = resource
        .strip_prefix("role/")?
        .rsplit('/')
        .next()?
        .to_string();
    Some((account, name))
}

/// `role`'s entry in a `mapRoles` document (YAML, as aws-iam-authenticator reads it).
fn mapped_role(map_roles: &str, role: &str) -> Option<(Option<String>, Vec<String>)> {
    #[derive(serde::Deserialize)]
    struct Entry {
        rolearn: String,
        #[serde(default)]
        username: Option<String>,
        #[serde(default)]
        groups: Vec<String>,
    }
    let wanted = role_key(role)?;
    // The ConfigMap is the cluster's: read only when its aliases expand to a bounded size.
    let entries: Vec<Entry> = argocd_ecr_updater::yaml::from_str(map_roles).ok()?;
    entries
        .into_iter()
        .find(|e| role_key(&e.rolearn).as_ref() == Some(&wanted))
        .map(|e| (e.username, e.groups))
}

/// What EKS says of how its API endpoint may be reached.
#[derive(Debug, Clone, Default)]
struct Endpoint {
    public: bool,
    private: bool,
    public_cidrs: Vec<String>,
    vpc: Option<String>,
    security_group: Option<String>,
}

/// Whether a function running in `function_vpc` (or outside any) reaches `endpoint`: the
/// check's result, and what could not be read from here (the detail and the command to read
/// it by hand).
fn reachability(
    endpoint: &Endpoint,
    function_vpc: Option<&str>,
) -> (Result<String, Failure>, Option<(String, String)>) {
    let open = endpoint.public_cidrs.iter().any(|c| c == "0.0.0.0/0");
    let in_cluster_vpc = function_vpc.is_some() && function_vpc == endpoint.vpc.as_deref();
    if endpoint.private && in_cluster_vpc {
        let group = endpoint
            .security_group
            .as_deref()
            .unwrap_or("the cluster security group");
        let vpc = function_vpc.unwrap_or_default();
        return (
            Ok(format!(
                "private, and the function runs in the cluster's VPC {vpc}"
            )),
            Some((
                format!(
                    "whether {group} admits the function's security groups on 443 is not read from here"
                ),
                format!(
                    "aws ec2 describe-security-groups --group-ids {group} --query 'SecurityGroups[0].IpPermissions'"
                ),
            )),
        );
    }
    match (endpoint.public, function_vpc) {
        (true, None) if open => (Ok("public, open to the internet: the function reaches it".into()), None),
        (true, None) => (
            Err((
                format!("public access is limited to {:?}, and a function outside a VPC has no fixed address", endpoint.public_cidrs),
                "run the function in a VPC (SubnetIds) whose NAT gateway's address is in publicAccessCidrs, or enable private access and run it in the cluster's VPC".into(),
            )),
            None,
        ),
        (true, Some(vpc)) => (
            Ok(format!("public, through {vpc}'s route to the internet")),
            Some((
                format!("that {vpc} has a NAT gateway{} is not read from here", if open { "" } else { " whose address is in publicAccessCidrs" }),
                format!("aws ec2 describe-nat-gateways --filter Name=vpc-id,Values={vpc}"),
            )),
        ),
        (false, None) => (
            Err((
                "private only, and the function runs outside any VPC: it cannot connect".into(),
                "deploy with SubnetIds and SecurityGroupIds in the cluster's VPC (docs/deploy.md, \"In a VPC\")".into(),
            )),
            None,
        ),
        (false, Some(vpc)) => (
            Err((
                format!("private only, and the function runs in {vpc}, the cluster in {}", endpoint.vpc.as_deref().unwrap_or("another VPC")),
                "run the function in the cluster's VPC (SubnetIds), or peer the VPCs and admit the function on 443".into(),
            )),
            None,
        ),
    }
}

/// Whether the function can reach the endpoint from where it runs.
async fn network(
    cluster: &aws_sdk_eks::types::Cluster,
    function: &Function,
    name: &str,
    ec2: &super::ec2::Ec2,
    vpc_network: Option<&super::network::Network>,
    list: &mut Checklist,
) {
    let Some(vpc) = cluster.resources_vpc_config() else {
        list.skip(
            AREA,
            format!("{name} endpoint"),
            "DescribeCluster's answer has no resourcesVpcConfig: how the endpoint may be reached is not known".into(),
            format!("aws eks describe-cluster --name {name} --query cluster.resourcesVpcConfig"),
        );
        return;
    };
    let endpoint = Endpoint {
        public: vpc.endpoint_public_access(),
        private: vpc.endpoint_private_access(),
        public_cidrs: vpc.public_access_cidrs().to_vec(),
        vpc: vpc.vpc_id().map(str::to_string),
        security_group: vpc.cluster_security_group_id().map(str::to_string),
    };
    let (result, unread) = reachability(&endpoint, function.vpc.as_deref());
    list.add(AREA, format!("{name} endpoint"), result);
    let Some((detail, by_hand)) = unread else {
        return;
    };
    let line = format!("{name} network path");
    let in_cluster_vpc = function.vpc.is_some() && function.vpc == endpoint.vpc;
    // What EC2 says, where it could be read; else what to read by hand.
    match (vpc_network, endpoint.security_group.as_deref()) {
        (Some(read), Some(group)) if endpoint.private && in_cluster_vpc => {
            let admitted = super::network::cluster_admits(ec2, group, function, read).await;
            list.add(AREA, line, admitted);
        }
        (Some(read), _) if endpoint.public => {
            list.add(
                AREA,
                line,
                super::network::public_path(read, &endpoint.public_cidrs),
            );
        }
        _ => list.skip(AREA, line, detail, by_hand),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(public: bool, private: bool, cidrs: &[&str]) -> Endpoint {
        Endpoint {
            public,
            private,
            public_cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
            vpc: Some("vpc-cluster".into()),
            security_group: Some("sg-cluster".into()),
        }
    }

    #[test]
    fn whether_the_function_reaches_the_endpoint_depends_on_both_sides() {
        let open = ["0.0.0.0/0"];
        let office = ["203.0.113.0/24"];
        // (endpoint, the function's VPC, reaches, something left to check by hand)
        let cases: &[(Endpoint, Option<&str>, bool, bool)] = &[
            (endpoint(true, false, &open), None, true, false),
            (endpoint(true, false, &office), None, false, false),
            (endpoint(false, true, &[]), None, false, false),
            (endpoint(false, true, &[]), Some("vpc-cluster"), true, true),
            (
                endpoint(true, true, &office),
                Some("vpc-cluster"),
                true,
                true,
            ),
            (endpoint(false, true, &[]), Some("vpc-other"), false, false),
            (endpoint(true, false, &open), Some("vpc-other"), true, true),
            (
                endpoint(true, false, &office),
                Some("vpc-cluster"),
                true,
                true,
            ),
        ];
        for (endpoint, vpc, reaches, unread) in cases {
            let (result, left) = reachability(endpoint, *vpc);
            assert_eq!(
                result.is_ok(),
                *reaches,
                "{endpoint:?} from {vpc:?}: {result:?}"
            );
            assert_eq!(
                left.is_some(),
                *unread,
                "{endpoint:?} from {vpc:?}: {left:?}"
            );
            if let Err((_, fix)) = result {
                assert!(!fix.is_empty());
            }
        }
    }

    #[test]
    fn a_private_endpoint_seen_from_the_clusters_vpc_leaves_its_security_group_to_check() {
        let (result, left) = reachability(&endpoint(false, true, &[]), Some("vpc-cluster"));
        assert!(result.is_ok());
        let (detail, by_hand) = left.unwrap();
        assert!(detail.contains("sg-cluster"), "{detail}");
        assert!(by_hand.contains("describe-security-groups --group-ids sg-cluster"));
    }

    #[test]
    fn the_function_connects_only_with_an_endpoint_and_a_ca_that_decodes() {
        use base64::Engine;
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let good = base64::engine::general_purpose::STANDARD.encode(pem);
        let address = "https://ABC.gr7.ap-northeast-2.eks.amazonaws.com";
        let url = Some(address);
        // (endpoint, CA data, status, connects, the detail says)
        let cases = [
            (url, Some(good.as_str()), Some("ACTIVE"), true, ""),
            (
                None,
                Some(good.as_str()),
                Some("CREATING"),
                false,
                "no endpoint (status CREATING)",
            ),
            (url, None, Some("ACTIVE"), false, "no CA"),
            (Some(""), Some(""), None, false, "no endpoint and no CA"),
            (
                url,
                Some("nZQUOo6nPKCm91ZiWD0V"),
                Some("ACTIVE"),
                false,
                "does not decode",
            ),
            (
                url,
                Some("bm90IGEgY2VydGlmaWNhdGU="),
                Some("ACTIVE"),
                false,
                "BEGIN CERTIFICATE",
            ),
        ];
        for (endpoint, ca, status, connects, says) in cases {
            let result = connection(endpoint, ca, status);
            assert_eq!(result.is_ok(), connects, "{endpoint:?} {ca:?}: {result:?}");
            match result {
                Ok(access) => assert_eq!(access.endpoint, address),
                Err((detail, fix)) => {
                    assert!(detail.contains(says), "{detail}");
                    assert!(detail.contains("RBAC is not checked"), "{detail}");
                    assert!(fix.contains("describe-cluster --name {name}"), "{fix}");
                }
            }
        }
    }

    #[test]
    fn a_cluster_without_access_config_is_read_as_config_map_and_says_so() {
        let mut list = Checklist::default();
        assert!(!list_mode("c", "r", None, &mut list));
        assert!(list_mode("c", "r", Some("API"), &mut list));
        assert!(list_mode("c", "r", Some("API_AND_CONFIG_MAP"), &mut list));
        assert!(!list_mode("c", "r", Some("CONFIG_MAP"), &mut list));
        let missing = &list.0[0];
        assert!(
            missing
                .detail
                .starts_with("CONFIG_MAP (DescribeCluster's answer has no accessConfig"),
            "{}",
            missing.detail
        );
        assert_eq!(list.0[1].detail, "API: access entries apply");
    }

    #[test]
    fn aws_auth_maps_a_role_by_account_and_name_whatever_its_path() {
        let map_roles = "- rolearn: arn:aws:iam::111122223333:role/nodes\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:bootstrappers, system:nodes]\n- rolearn: arn:aws:iam::111122223333:role/argocd-ecr-updater-role\n  username: updater:{{SessionName}}\n  groups:\n    - argocd-ecr-updater\n";
        // (the function's role, what aws-auth maps it to)
        let cases = [
            (
                "arn:aws:iam::111122223333:role/argocd-ecr-updater-role",
                Some("updater:{{SessionName}}"),
            ),
            (
                "arn:aws:iam::111122223333:role/service-role/argocd-ecr-updater-role",
                Some("updater:{{SessionName}}"),
            ),
            (
                "arn:aws:iam::999999999999:role/argocd-ecr-updater-role",
                None,
            ),
            ("arn:aws:iam::111122223333:role/argocd-ecr-updater", None),
            ("not an arn", None),
        ];
        for (role, username) in cases {
            let found = mapped_role(map_roles, role);
            assert_eq!(
                found
                    .as_ref()
                    .map(|(u, _)| u.as_deref().unwrap_or_default()),
                username,
                "{role}"
            );
            if let Some((_, groups)) = found {
                assert_eq!(groups, ["argocd-ecr-updater"]);
            }
        }
        assert_eq!(mapped_role("not: [yaml", "arn:aws:iam::1:role/r"), None);
    }

    #[test]
    fn the_subject_asked_about_is_the_mapped_user_with_its_session_and_every_group() {
        let mapping = Mapping {
            cluster: "c",
            region: "r",
            role: "arn:aws:iam::111122223333:role/path/argocd-ecr-updater-role",
            session: "fn",
            group: "argocd-ecr-updater",
        };
        let groups = vec!["argocd-ecr-updater".to_string()];
        let templated = mapping.subject(Some("u:{{SessionName}}:{{AccountID}}"), &groups);
        assert_eq!(templated.user, "u:fn:111122223333");
        assert_eq!(
            templated.groups,
            ["argocd-ecr-updater", "system:authenticated"]
        );
        let default = mapping.subject(None, &groups);
        assert_eq!(
            default.user,
            "arn:aws:sts::111122223333:assumed-role/argocd-ecr-updater-role/fn"
        );
        assert!(mapping.groups_result("aws-auth", &groups).is_ok());
        let (_, fix) = mapping
            .groups_result("aws-auth", &["viewers".into()])
            .unwrap_err();
        assert!(fix.contains("edit configmap aws-auth"), "{fix}");
    }
}
