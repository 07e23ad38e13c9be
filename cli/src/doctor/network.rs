//! A VPC function's way out, read from EC2: its security groups let HTTPS out; each of its
//! subnets routes to the internet through a NAT gateway (a Lambda network interface has no
//! public address, so an internet gateway is no way out), or the VPC has an interface
//! endpoint for every AWS API the function calls; and a private cluster endpoint's security
//! group admits the function on 443.

use std::collections::{BTreeMap, BTreeSet};

use argocd_ecr_updater::aws::aws_error::Described;
use argocd_ecr_updater::config::Config;

use super::ec2::{self, Ec2};
use super::{Checklist, Failure, Function, failed_call};

const AREA: &str = "network";

/// A security group rule, in or out.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Rule {
    pub protocol: String,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub cidrs: Vec<String>,
    pub groups: Vec<String>,
    pub prefix_lists: Vec<String>,
}

impl Rule {
    fn lets_https(&self) -> bool {
        match self.protocol.as_str() {
            "-1" | "all" => true,
            "tcp" | "6" => {
                self.from.is_none_or(|from| from <= 443) && self.to.is_none_or(|to| to >= 443)
            }
            _ => false,
        }
    }
}

/// What a subnet's route table does with traffic for the internet (`0.0.0.0/0`).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum WayOut {
    /// A NAT gateway: AWS APIs and public endpoints are reachable.
    Nat(String),
    /// A transit gateway, an instance, a network interface or a peering: a way out doctor
    /// does not follow further.
    Elsewhere(String),
    /// An internet gateway, which a function's interfaces (without public addresses) cannot use.
    InternetGateway(String),
    None,
}

/// The AWS APIs the function calls, by the service names of their VPC endpoints.
pub(super) fn services_called(config: &Config) -> Vec<&'static str> {
    let mut services = vec!["ecr.api", "ecr.dkr"];
    if config.clusters.iter().any(|c| c.access.is_none()) {
        services.push("eks");
    }
    if config.clusters.iter().any(|c| c.role_arn.is_some()) {
        services.push("sts");
    }
    if config.sweep.queue_url.is_some() {
        services.push("sqs");
    }
    if !config.git.credential_secret_arns.is_empty() {
        services.push("secretsmanager");
    }
    if config.notification_topic_arn.is_some() {
        services.push("sns");
    }
    services
}

/// The verdict for one subnet: its way out, or the interface endpoints that stand in for
/// one. (A public cluster endpoint, which no VPC endpoint reaches, is the cluster's own
/// `network path` line.)
pub(super) fn subnet_verdict(
    subnet: &str,
    way_out: &WayOut,
    endpoints: &BTreeSet<String>,
    needed: &[&str],
    region: &str,
) -> Result<String, Failure> {
    let nat = "a NAT gateway in a public subnet, and a 0.0.0.0/0 route to it in this subnet's route table (aws ec2 create-route --route-table-id <its table> --destination-cidr-block 0.0.0.0/0 --nat-gateway-id <nat>)";
    match way_out {
        WayOut::Nat(nat) => Ok(format!("out through {nat}")),
        WayOut::Elsewhere(target) => Ok(format!(
            "out through {target} (followed no further: that it reaches the internet or the endpoints is for you to know)"
        )),
        WayOut::InternetGateway(igw) => Err((
            format!(
                "routes 0.0.0.0/0 to the internet gateway {igw}, which a Lambda function cannot use (its network interfaces have no public address): every AWS call and a public endpoint time out"
            ),
            format!("use {nat}; or run the function in private subnets that have one"),
        )),
        WayOut::None => {
            let missing: Vec<&str> = needed
                .iter()
                .copied()
                .filter(|s| !endpoints.contains(&format!("com.amazonaws.{region}.{s}")))
                .collect();
            if missing.is_empty() {
                Ok(format!(
                    "no route to the internet; an interface endpoint for each AWS API the function calls ({})",
                    needed.join(", ")
                ))
            } else {
                Err((
                    format!(
                        "no route to the internet and no interface endpoint for {}: those calls time out",
                        missing.join(", ")
                    ),
                    format!(
                        "add {nat}; or for each, aws ec2 create-vpc-endpoint --vpc-endpoint-type Interface --private-dns-enabled --vpc-id <vpc> --subnet-ids {subnet} --security-group-ids <a group admitting the function on 443> --service-name com.amazonaws.{region}.<service>"
                    ),
                ))
            }
        }
    }
}

/// Whether the function's security groups let HTTPS out, and to where.
pub(super) fn egress_verdict(rules: &[Rule]) -> Result<String, Failure> {
    let https: Vec<&Rule> = rules.iter().filter(|r| r.lets_https()).collect();
    if https
        .iter()
        .any(|r| r.cidrs.iter().any(|c| c == "0.0.0.0/0"))
    {
        return Ok("HTTPS out to anywhere".into());
    }
    let mut to: Vec<String> = https
        .iter()
        .flat_map(|r| {
            r.cidrs
                .iter()
                .chain(&r.groups)
                .chain(&r.prefix_lists)
                .cloned()
        })
        .collect();
    to.sort();
    to.dedup();
    if to.is_empty() {
        return Err((
            "the function's security groups let no HTTPS out: it reaches neither the cluster nor any AWS API".into(),
            "aws ec2 authorize-security-group-egress --group-id <one of the function's groups> --ip-permissions IpProtocol=tcp,FromPort=443,ToPort=443,IpRanges=[{CidrIp=0.0.0.0/0}]".into(),
        ));
    }
    Ok(format!(
        "HTTPS out only to {}: the cluster's endpoint and each AWS API's (or their VPC endpoints) must be among them",
        to.join(", ")
    ))
}

/// Whether `rules` (a group's ingress) admit HTTPS from one of `groups`, or from a range
/// that holds all of `cidrs` (the function's subnets).
pub(super) fn admits(rules: &[Rule], groups: &[String], cidrs: &[String]) -> bool {
    rules.iter().filter(|r| r.lets_https()).any(|r| {
        r.groups.iter().any(|g| groups.contains(g))
            || r.cidrs.iter().any(|range| {
                range == "0.0.0.0/0"
                    || (!cidrs.is_empty() && cidrs.iter().all(|c| contains(range, c)))
            })
    })
}

/// Whether the IPv4 range `outer` holds `inner`.
fn contains(outer: &str, inner: &str) -> bool {
    match (
        outer.parse::<ipnet::Ipv4Net>(),
        inner.parse::<ipnet::Ipv4Net>(),
    ) {
        (Ok(outer), Ok(inner)) => outer.contains(&inner),
        _ => false,
    }
}

/// The rules of a `DescribeSecurityGroups` answer, by group: (ingress, egress).
type GroupRules = BTreeMap<String, (Vec<Rule>, Vec<Rule>)>;

fn parse_groups(xml: &str) -> Result<GroupRules, String> {
    let document = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let mut groups = BTreeMap::new();
    let Some(set) = ec2::all(document.root(), "securityGroupInfo").next() else {
        return Ok(groups);
    };
    for group in set.children().filter(|n| n.has_tag_name("item")) {
        let Some(id) = ec2::text(group, "groupId") else {
            continue;
        };
        let rules = |name: &str| -> Vec<Rule> {
            ec2::child(group, name)
                .map(|list| {
                    list.children()
                        .filter(|n| n.has_tag_name("item"))
                        .map(parse_rule)
                        .collect()
                })
                .unwrap_or_default()
        };
        groups.insert(
            id.to_string(),
            (rules("ipPermissions"), rules("ipPermissionsEgress")),
        );
    }
    Ok(groups)
}

fn parse_rule(item: roxmltree::Node) -> Rule {
    let listed = |list: &str, field: &str| -> Vec<String> {
        ec2::child(item, list)
            .map(|l| {
                l.children()
                    .filter(|n| n.has_tag_name("item"))
                    .filter_map(|n| ec2::text(n, field).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Rule {
        protocol: ec2::text(item, "ipProtocol").unwrap_or("-1").to_string(),
        from: ec2::text(item, "fromPort").and_then(|p| p.parse().ok()),
        to: ec2::text(item, "toPort").and_then(|p| p.parse().ok()),
        cidrs: listed("ipRanges", "cidrIp"),
        groups: listed("groups", "groupId"),
        prefix_lists: listed("prefixListIds", "prefixListId"),
    }
}

/// Route tables of a `DescribeRouteTables` answer: (subnets associated, main table, routes
/// to the internet's target).
fn parse_route_tables(xml: &str) -> Result<Vec<(Vec<String>, bool, WayOut)>, String> {
    let document = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let Some(set) = ec2::all(document.root(), "routeTableSet").next() else {
        return Ok(Vec::new());
    };
    let mut tables = Vec::new();
    for table in set.children().filter(|n| n.has_tag_name("item")) {
        let associations: Vec<roxmltree::Node> = ec2::child(table, "associationSet")
            .map(|a| a.children().filter(|n| n.has_tag_name("item")).collect())
            .unwrap_or_default();
        let subnets = associations
            .iter()
            .filter_map(|a| ec2::text(*a, "subnetId").map(str::to_string))
            .collect();
        let main = associations
            .iter()
            .any(|a| ec2::text(*a, "main") == Some("true"));
        let mut way_out = WayOut::None;
        for route in ec2::child(table, "routeSet")
            .into_iter()
            .flat_map(|r| r.children().filter(|n| n.has_tag_name("item")))
        {
            if ec2::text(route, "destinationCidrBlock") != Some("0.0.0.0/0")
                || ec2::text(route, "state") == Some("blackhole")
            {
                continue;
            }
            let target = |name: &str| ec2::text(route, name).map(str::to_string);
            way_out = if let Some(nat) = target("natGatewayId") {
                WayOut::Nat(nat)
            } else if let Some(gateway) = target("gatewayId") {
                if gateway.starts_with("igw-") {
                    WayOut::InternetGateway(gateway)
                } else {
                    WayOut::Elsewhere(gateway)
                }
            } else if let Some(other) = [
                "transitGatewayId",
                "networkInterfaceId",
                "instanceId",
                "vpcPeeringConnectionId",
            ]
            .iter()
            .find_map(|name| target(name))
            {
                WayOut::Elsewhere(other)
            } else {
                WayOut::None
            };
        }
        tables.push((subnets, main, way_out));
    }
    Ok(tables)
}

/// Available VPC endpoints' service names (interface endpoints only with private DNS, which
/// the SDK's default host names need; gateway endpoints as they are).
fn parse_endpoints(xml: &str) -> Result<BTreeSet<String>, String> {
    let document = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let Some(set) = ec2::all(document.root(), "vpcEndpointSet").next() else {
        return Ok(BTreeSet::new());
    };
    Ok(set
        .children()
        .filter(|n| n.has_tag_name("item"))
        .filter(|e| ec2::text(*e, "state").is_none_or(|s| s.eq_ignore_ascii_case("available")))
        .filter(|e| {
            ec2::text(*e, "vpcEndpointType") != Some("Interface")
                || ec2::text(*e, "privateDnsEnabled") == Some("true")
        })
        .filter_map(|e| ec2::text(e, "serviceName").map(str::to_string))
        .collect())
}

/// The VPC of a `DescribeSubnets` answer's subnets, and their IPv4 ranges.
fn parse_subnets(xml: &str) -> Result<(Option<String>, Vec<String>), String> {
    let document = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let Some(set) = ec2::all(document.root(), "subnetSet").next() else {
        return Ok((None, Vec::new()));
    };
    let subnets: Vec<roxmltree::Node> = set.children().filter(|n| n.has_tag_name("item")).collect();
    let vpc = subnets
        .iter()
        .find_map(|s| ec2::text(*s, "vpcId"))
        .map(str::to_string);
    let cidrs = subnets
        .iter()
        .filter_map(|s| ec2::text(*s, "cidrBlock").map(str::to_string))
        .collect();
    Ok((vpc, cidrs))
}

fn unparsable(call: &str, why: String) -> Described {
    Described {
        cause: argocd_ecr_updater::aws::aws_error::Cause::Other,
        code: None,
        text: format!("{call}'s answer is not EC2's XML: {why}"),
    }
}

/// What doctor read of the function's network, once per run.
pub(super) struct Network {
    pub groups: GroupRules,
    /// The ranges of the function's subnets.
    pub subnet_cidrs: Vec<String>,
    /// Each subnet's way out, when the route tables could be read.
    pub way_outs: Vec<(String, WayOut)>,
}

/// The function's security groups' egress and each subnet's way out. Returns what the
/// cluster checks need (the groups' rules, the VPC's ranges), or `None` when they could not
/// be read.
pub(super) async fn vpc(
    ec2: &Ec2,
    function: &Function,
    config: &Config,
    list: &mut Checklist,
) -> Option<Network> {
    let fallback_vpc = function.vpc.as_deref()?;
    let call = |action: &'static str, params: Vec<(String, String)>| async move {
        let xml = ec2.call(action, &params).await?;
        Ok::<_, Described>(xml)
    };
    let groups = match call(
        "DescribeSecurityGroups",
        ec2::numbered("GroupId", &function.security_groups),
    )
    .await
    .and_then(|xml| parse_groups(&xml).map_err(|e| unparsable("DescribeSecurityGroups", e)))
    {
        Ok(groups) => groups,
        Err(described) => {
            list.add(
                AREA,
                "security groups",
                Err(failed_call(
                    "DescribeSecurityGroups",
                    "ec2:DescribeSecurityGroups",
                    &described,
                )),
            );
            return None;
        }
    };
    let egress: Vec<Rule> = groups.values().flat_map(|(_, out)| out.clone()).collect();
    list.add(AREA, "security groups", egress_verdict(&egress));

    // The subnets say which VPC the function's interfaces are in, and their ranges: what a
    // security group must admit.
    let (vpc, subnet_cidrs) = match call(
        "DescribeSubnets",
        ec2::numbered("SubnetId", &function.subnets),
    )
    .await
    .and_then(|xml| parse_subnets(&xml).map_err(|e| unparsable("DescribeSubnets", e)))
    {
        Ok((Some(vpc), cidrs)) => (vpc, cidrs),
        Ok((None, _)) => (fallback_vpc.to_string(), Vec::new()),
        Err(described) => {
            list.add(
                AREA,
                "subnets",
                Err(failed_call(
                    "DescribeSubnets",
                    "ec2:DescribeSubnets",
                    &described,
                )),
            );
            return None;
        }
    };
    let vpc = vpc.as_str();
    let tables = call(
        "DescribeRouteTables",
        ec2::filter(1, "vpc-id", &[vpc.to_string()]),
    )
    .await
    .and_then(|xml| parse_route_tables(&xml).map_err(|e| unparsable("DescribeRouteTables", e)));
    let endpoints = call(
        "DescribeVpcEndpoints",
        ec2::filter(1, "vpc-id", &[vpc.to_string()]),
    )
    .await
    .and_then(|xml| parse_endpoints(&xml).map_err(|e| unparsable("DescribeVpcEndpoints", e)));
    let mut way_outs = Vec::new();
    match (tables, endpoints) {
        (Ok(tables), Ok(endpoints)) => {
            let needed = services_called(config);
            for subnet in &function.subnets {
                // A subnet without a table of its own uses the VPC's main table.
                let way_out = tables
                    .iter()
                    .find(|(subnets, _, _)| subnets.contains(subnet))
                    .or_else(|| tables.iter().find(|(_, main, _)| *main))
                    .map_or(WayOut::None, |(_, _, way_out)| way_out.clone());
                way_outs.push((subnet.clone(), way_out.clone()));
                list.add(
                    AREA,
                    format!("{subnet} way out"),
                    subnet_verdict(subnet, &way_out, &endpoints, &needed, &function.region),
                );
            }
        }
        (Err(described), _) => list.add(
            AREA,
            "route tables",
            Err(failed_call(
                "DescribeRouteTables",
                "ec2:DescribeRouteTables",
                &described,
            )),
        ),
        (_, Err(described)) => list.add(
            AREA,
            "VPC endpoints",
            Err(failed_call(
                "DescribeVpcEndpoints",
                "ec2:DescribeVpcEndpoints",
                &described,
            )),
        ),
    }
    Some(Network {
        groups,
        subnet_cidrs,
        way_outs,
    })
}

/// Whether a VPC function reaches a public endpoint: every subnet it may run in has a way
/// out (Lambda picks the subnet).
pub(super) fn public_path(network: &Network, public_cidrs: &[String]) -> Result<String, Failure> {
    let stuck: Vec<&str> = network
        .way_outs
        .iter()
        .filter(|(_, w)| !matches!(w, WayOut::Nat(_) | WayOut::Elsewhere(_)))
        .map(|(subnet, _)| subnet.as_str())
        .collect();
    if !stuck.is_empty() {
        return Err((
            format!(
                "the endpoint is public and {} of the function's subnets ({}) have no NAT gateway: an invocation there cannot connect",
                stuck.len(),
                stuck.join(", ")
            ),
            "route 0.0.0.0/0 of those subnets to a NAT gateway (their own lines say how), or enable the cluster's private endpoint".into(),
        ));
    }
    if public_cidrs.iter().any(|c| c == "0.0.0.0/0") || public_cidrs.is_empty() {
        Ok("public, through each subnet's way out".into())
    } else {
        Ok(format!(
            "public, through each subnet's way out; the NAT gateways' addresses must be in publicAccessCidrs {public_cidrs:?} (aws ec2 describe-nat-gateways --query 'NatGateways[].NatGatewayAddresses[].PublicIp')"
        ))
    }
}

/// Whether the cluster's security group admits the function on 443 (a private endpoint's
/// interfaces carry it).
pub(super) async fn cluster_admits(
    ec2: &Ec2,
    cluster_group: &str,
    function: &Function,
    network: &Network,
) -> Result<String, Failure> {
    let rules = match network.groups.get(cluster_group) {
        Some((ingress, _)) => ingress.clone(),
        None => {
            let xml = ec2
                .call(
                    "DescribeSecurityGroups",
                    &ec2::numbered("GroupId", &[cluster_group.to_string()]),
                )
                .await
                .map_err(|d| {
                    failed_call("DescribeSecurityGroups", "ec2:DescribeSecurityGroups", &d)
                })?;
            let groups = parse_groups(&xml).map_err(|e| {
                failed_call(
                    "DescribeSecurityGroups",
                    "ec2:DescribeSecurityGroups",
                    &unparsable("DescribeSecurityGroups", e),
                )
            })?;
            groups
                .get(cluster_group)
                .map(|(ingress, _)| ingress.clone())
                .unwrap_or_default()
        }
    };
    if admits(&rules, &function.security_groups, &network.subnet_cidrs) {
        Ok(format!("{cluster_group} admits the function on 443"))
    } else {
        Err((
            format!(
                "{cluster_group}, the cluster's security group, admits none of the function's groups ({}) nor its subnets' ranges on 443: connections to the private endpoint time out",
                function.security_groups.join(", ")
            ),
            format!(
                "aws ec2 authorize-security-group-ingress --group-id {cluster_group} --protocol tcp --port 443 --source-group {}",
                function
                    .security_groups
                    .first()
                    .map_or("<the function's group>", String::as_str)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn https_to(cidr: &str) -> Rule {
        Rule {
            protocol: "tcp".into(),
            from: Some(443),
            to: Some(443),
            cidrs: vec![cidr.into()],
            ..Rule::default()
        }
    }

    #[test]
    fn egress_must_let_https_out() {
        let all = Rule {
            protocol: "-1".into(),
            cidrs: vec!["0.0.0.0/0".into()],
            ..Rule::default()
        };
        let ssh = Rule {
            protocol: "tcp".into(),
            from: Some(22),
            to: Some(22),
            cidrs: vec!["0.0.0.0/0".into()],
            ..Rule::default()
        };
        // (rules, passes, says)
        let cases = [
            (vec![all], true, "anywhere"),
            (vec![https_to("0.0.0.0/0")], true, "anywhere"),
            (vec![https_to("10.0.0.0/16")], true, "only to 10.0.0.0/16"),
            (vec![ssh], false, "no HTTPS out"),
            (vec![], false, "no HTTPS out"),
        ];
        for (rules, passes, says) in cases {
            let verdict = egress_verdict(&rules);
            assert_eq!(verdict.is_ok(), passes, "{rules:?}");
            let text = match verdict {
                Ok(text) | Err((text, _)) => text,
            };
            assert!(text.contains(says), "{text}");
        }
    }

    #[test]
    fn a_subnet_needs_a_nat_or_an_endpoint_for_every_api_it_calls() {
        let needed = ["ecr.api", "ecr.dkr", "eks"];
        let all: BTreeSet<String> = needed
            .iter()
            .map(|s| format!("com.amazonaws.ap-northeast-2.{s}"))
            .collect();
        let some: BTreeSet<String> = ["com.amazonaws.ap-northeast-2.ecr.api".to_string()].into();
        // (way out, endpoints, passes)
        let cases = [
            (WayOut::Nat("nat-1".into()), BTreeSet::new(), true),
            (WayOut::Elsewhere("tgw-1".into()), BTreeSet::new(), true),
            (WayOut::InternetGateway("igw-1".into()), all.clone(), false),
            (WayOut::None, all, true),
            (WayOut::None, some, false),
        ];
        for (way_out, endpoints, passes) in cases {
            let verdict =
                subnet_verdict("subnet-1", &way_out, &endpoints, &needed, "ap-northeast-2");
            assert_eq!(
                verdict.is_ok(),
                passes,
                "{way_out:?} {endpoints:?}: {verdict:?}"
            );
        }
    }

    #[test]
    fn the_cluster_group_admits_by_group_or_by_a_range_holding_the_functions_subnets() {
        let from_group = Rule {
            protocol: "tcp".into(),
            from: Some(443),
            to: Some(443),
            groups: vec!["sg-fn".into()],
            ..Rule::default()
        };
        let vpc = vec!["10.0.1.0/24".to_string(), "10.0.2.0/24".to_string()];
        let groups = vec!["sg-fn".to_string()];
        assert!(admits(std::slice::from_ref(&from_group), &groups, &vpc));
        assert!(!admits(&[from_group], &["sg-other".into()], &vpc));
        assert!(admits(&[https_to("10.0.0.0/8")], &groups, &vpc));
        assert!(!admits(&[https_to("10.0.1.0/24")], &groups, &vpc));
        assert!(admits(&[https_to("10.0.0.0/22")], &groups, &vpc));
        assert!(admits(&[https_to("0.0.0.0/0")], &groups, &[]));
    }

    #[test]
    fn ec2_answers_are_read_as_ec2_writes_them() {
        let groups = r#"<DescribeSecurityGroupsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><securityGroupInfo><item><groupId>sg-fn</groupId><ipPermissions/><ipPermissionsEgress><item><ipProtocol>tcp</ipProtocol><fromPort>443</fromPort><toPort>443</toPort><groups/><ipRanges><item><cidrIp>0.0.0.0/0</cidrIp></item></ipRanges><prefixListIds/></item></ipPermissionsEgress></item></securityGroupInfo></DescribeSecurityGroupsResponse>"#;
        let parsed = parse_groups(groups).unwrap();
        assert_eq!(parsed["sg-fn"].1, vec![https_to("0.0.0.0/0")]);
        let tables = r#"<DescribeRouteTablesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><routeTableSet><item><routeTableId>rtb-1</routeTableId><routeSet><item><destinationCidrBlock>10.0.0.0/16</destinationCidrBlock><gatewayId>local</gatewayId><state>active</state></item><item><destinationCidrBlock>0.0.0.0/0</destinationCidrBlock><natGatewayId>nat-1</natGatewayId><state>active</state></item></routeSet><associationSet><item><subnetId>subnet-1</subnetId><main>false</main></item></associationSet></item><item><routeTableId>rtb-main</routeTableId><routeSet><item><destinationCidrBlock>0.0.0.0/0</destinationCidrBlock><natGatewayId>nat-gone</natGatewayId><state>blackhole</state></item></routeSet><associationSet><item><main>true</main></item></associationSet></item></routeTableSet></DescribeRouteTablesResponse>"#;
        let parsed = parse_route_tables(tables).unwrap();
        assert_eq!(
            parsed[0],
            (
                vec!["subnet-1".to_string()],
                false,
                WayOut::Nat("nat-1".into())
            )
        );
        assert_eq!(parsed[1], (vec![], true, WayOut::None));
        let endpoints = r#"<DescribeVpcEndpointsResponse><vpcEndpointSet><item><serviceName>com.amazonaws.r.ecr.api</serviceName><vpcEndpointType>Interface</vpcEndpointType><state>available</state><privateDnsEnabled>true</privateDnsEnabled></item><item><serviceName>com.amazonaws.r.eks</serviceName><vpcEndpointType>Interface</vpcEndpointType><state>available</state><privateDnsEnabled>false</privateDnsEnabled></item><item><serviceName>com.amazonaws.r.s3</serviceName><vpcEndpointType>Gateway</vpcEndpointType><state>available</state></item></vpcEndpointSet></DescribeVpcEndpointsResponse>"#;
        let parsed = parse_endpoints(endpoints).unwrap();
        assert_eq!(
            parsed,
            BTreeSet::from([
                "com.amazonaws.r.ecr.api".to_string(),
                "com.amazonaws.r.s3".to_string()
            ])
        );
    }
}
