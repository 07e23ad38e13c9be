//! What a deployed stack looks like from the AWS APIs `doctor` reads: the Lambda function
//! (its configuration, deployment package and on-failure destination), the EventBridge rules
//! that target it, the cluster's authentication mode, network and access entries, and the
//! ECR repositories that exist. The default is the template's default stack for the seed,
//! healthy; a test breaks one thing and expects the check that names it to fail.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use crate::aws::{AwsState, aws_error};

/// The deployed function and its surroundings.
#[derive(Debug, Clone, Serialize)]
pub struct Deployment {
    /// The stack that made it: CloudFormation tags the function with its name.
    pub stack_name: String,
    pub function_name: String,
    /// The function's execution role.
    pub role_arn: String,
    /// `arm64` or `x86_64`, as Lambda runs it.
    pub architecture: String,
    /// The ELF machine of the `bootstrap` in the deployment package (183 aarch64, 62 x86-64).
    pub binary_machine: u16,
    /// Where `GetFunction` says the package is, when not at this stand-in.
    #[serde(skip)]
    pub package_location: Option<String>,
    pub environment: BTreeMap<String, String>,
    /// The function's VPC, when it runs in one.
    pub vpc_id: Option<String>,
    /// Lambda's `State` of it (`Active`, `Pending`, `Inactive`, `Failed`) and why.
    pub state: String,
    pub state_reason: Option<String>,
    /// The stack's dead-letter queue (its ARN), which the rules and the on-failure
    /// destination name.
    pub dead_letter_queue: String,
    /// Every queue the stack made (ARNs); each exists unless a test deletes it.
    pub queues: Vec<String>,
    /// The stack's queue policies, by queue ARN (`GetQueueAttributes`' `Policy`).
    pub queue_policies: BTreeMap<String, Value>,
    /// The queues' redrive allow policies, by queue ARN (`RedriveAllowPolicy`); a queue
    /// without one has SQS's default, `allowAll`.
    pub redrive_allow_policies: BTreeMap<String, Value>,
    /// Where Lambda sends an event that failed its retries: a queue, topic, function or
    /// event bus ARN.
    pub on_failure: Option<String>,
    /// EventBridge rules by name.
    pub rules: BTreeMap<String, Rule>,
    /// The function's resource policy: who may invoke it.
    pub permissions: Vec<Permission>,
    /// Event source mappings into the function (the sweep queue's).
    pub event_source_mappings: Vec<EventSourceMapping>,
    /// The function's reserved concurrency, when it has one.
    pub reserved_concurrency: Option<i32>,
    /// The account's unreserved concurrency (`GetAccountSettings`).
    pub unreserved_concurrency: i32,
    /// `API`, `API_AND_CONFIG_MAP` or `CONFIG_MAP`; `None`: DescribeCluster's answer has no
    /// `accessConfig`.
    pub authentication_mode: Option<String>,
    pub endpoint_public: bool,
    pub endpoint_private: bool,
    pub cluster_vpc_id: String,
    /// Whether DescribeCluster hands out the endpoint (a cluster still being created has
    /// none yet).
    pub cluster_endpoint_listed: bool,
    /// `certificateAuthority.data` when it is not the stand-in's own CA.
    pub cluster_ca_data: Option<String>,
    /// Access entries by principal ARN: their Kubernetes groups.
    pub access_entries: BTreeMap<String, Vec<String>>,
    /// EKS capabilities created on the cluster (none: a self-managed Argo CD).
    pub capabilities: Vec<crate::capabilities::Capability>,
    /// Repositories that exist, by registry account.
    pub repositories: BTreeMap<String, Vec<String>>,
    /// Repositories whose tags are `MUTABLE` (the rest are `IMMUTABLE`, as the seed's are).
    pub mutable_repositories: Vec<String>,
    /// SNS topics by ARN, each with its subscriptions: the alarm topic, with one confirmed
    /// email subscription.
    pub topics: BTreeMap<String, Vec<Subscription>>,
    /// Secrets encrypted with a customer managed key: the key's ARN, by secret ARN.
    pub secret_kms_keys: BTreeMap<String, String>,
    /// The VPC a VPC function runs in (`vpc_id`), as EC2 describes it.
    pub network: VpcNetwork,
    /// Calls the operator is refused, by operation (`ListTargetsByRule`…): the error code
    /// AWS answers with (`AccessDeniedException`, `ThrottlingException`).
    #[serde(skip)]
    pub refused: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Rule {
    /// The event pattern, or `None` for a scheduled rule.
    pub pattern: Option<Value>,
    pub schedule: Option<String>,
    pub enabled: bool,
    pub targets: Vec<Target>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub id: String,
    pub arn: String,
    pub dead_letter_queue: Option<String>,
}

/// An event source mapping: the queue it reads, its state, and how many at once.
#[derive(Debug, Clone, Serialize)]
pub struct EventSourceMapping {
    pub uuid: String,
    pub queue_arn: String,
    pub state: String,
    pub batch_size: i64,
    pub maximum_concurrency: Option<i64>,
    pub last_processing_result: String,
}

/// A VPC as EC2's `Describe` calls answer for it: the function's subnet `subnet-1` and group
/// `sg-function`, the cluster's group `sg-cluster`.
#[derive(Debug, Clone, Serialize)]
pub struct VpcNetwork {
    pub cidr: String,
    /// The function's subnet's range.
    pub subnet_cidr: String,
    pub security_groups: BTreeMap<String, SecurityGroup>,
    pub route_tables: Vec<RouteTable>,
    pub endpoints: Vec<VpcEndpoint>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SecurityGroup {
    pub ingress: Vec<SgRule>,
    pub egress: Vec<SgRule>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SgRule {
    pub protocol: String,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub cidrs: Vec<String>,
    pub groups: Vec<String>,
}

impl SgRule {
    pub fn https_from_group(group: &str) -> Self {
        Self {
            protocol: "tcp".into(),
            from: Some(443),
            to: Some(443),
            cidrs: Vec::new(),
            groups: vec![group.into()],
        }
    }

    pub fn all_to_anywhere() -> Self {
        Self {
            protocol: "-1".into(),
            from: None,
            to: None,
            cidrs: vec!["0.0.0.0/0".into()],
            groups: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RouteTable {
    pub subnets: Vec<String>,
    pub main: bool,
    /// Where `0.0.0.0/0` goes (`nat-…`, `igw-…`, `tgw-…`), if anywhere.
    pub default_target: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VpcEndpoint {
    pub service: String,
    pub interface: bool,
    pub private_dns: bool,
}

impl Default for VpcNetwork {
    /// The usual private subnet: out through a NAT gateway; the cluster's group admits the
    /// function's on 443; the function's lets everything out.
    fn default() -> Self {
        Self {
            cidr: "10.0.0.0/16".into(),
            subnet_cidr: "10.0.1.0/24".into(),
            security_groups: BTreeMap::from([
                (
                    "sg-function".to_string(),
                    SecurityGroup {
                        ingress: Vec::new(),
                        egress: vec![SgRule::all_to_anywhere()],
                    },
                ),
                (
                    "sg-cluster".to_string(),
                    SecurityGroup {
                        ingress: vec![SgRule::https_from_group("sg-function")],
                        egress: vec![SgRule::all_to_anywhere()],
                    },
                ),
            ]),
            route_tables: vec![
                RouteTable {
                    subnets: vec!["subnet-1".into()],
                    main: false,
                    default_target: Some("nat-0standin".into()),
                },
                RouteTable {
                    subnets: Vec::new(),
                    main: true,
                    default_target: None,
                },
            ],
            endpoints: Vec::new(),
        }
    }
}

/// EC2's Query API, the `Describe` calls doctor makes, in EC2's XML.
pub fn ec2(state: &AwsState, form: &BTreeMap<String, String>) -> Response {
    let xml = |status: StatusCode, text: String| {
        (status, [("content-type", "text/xml;charset=UTF-8")], text).into_response()
    };
    let error = |code: &str, message: &str| {
        xml(
            StatusCode::BAD_REQUEST,
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>r-ec2</RequestID></Response>"
            ),
        )
    };
    let action = form.get("Action").map(String::as_str).unwrap_or_default();
    let d = crate::faults::lock(&state.deployment).clone();
    // EC2 says UnauthorizedOperation where other services say AccessDenied.
    if let Some(code) = d.refused.get(action) {
        let code = if code.starts_with("AccessDenied") {
            "UnauthorizedOperation"
        } else {
            code.as_str()
        };
        return error(code, "You are not authorized to perform this operation.");
    }
    let net = &d.network;
    let numbered = |prefix: &str| -> Vec<String> {
        form.iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let ns = "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"";
    let rules = |rules: &[SgRule]| -> String {
        rules
            .iter()
            .map(|r| {
                let ports = match (r.from, r.to) {
                    (Some(from), Some(to)) => format!("<fromPort>{from}</fromPort><toPort>{to}</toPort>"),
                    _ => String::new(),
                };
                let cidrs: String = r.cidrs.iter().map(|c| format!("<item><cidrIp>{c}</cidrIp></item>")).collect();
                let groups: String = r.groups.iter().map(|g| format!("<item><userId>{}</userId><groupId>{g}</groupId></item>", state.account)).collect();
                format!("<item><ipProtocol>{}</ipProtocol>{ports}<groups>{groups}</groups><ipRanges>{cidrs}</ipRanges><ipv6Ranges/><prefixListIds/></item>", r.protocol)
            })
            .collect()
    };
    let vpc = d.vpc_id.clone().unwrap_or_else(|| "vpc-0function".into());
    match action {
        "DescribeSecurityGroups" => {
            let wanted = numbered("GroupId.");
            let mut items = String::new();
            for id in &wanted {
                let Some(group) = net.security_groups.get(id) else {
                    return error(
                        "InvalidGroup.NotFound",
                        &format!("The security group '{id}' does not exist"),
                    );
                };
                items.push_str(&format!(
                    "<item><ownerId>{}</ownerId><groupId>{id}</groupId><groupName>{id}</groupName><vpcId>{vpc}</vpcId><ipPermissions>{}</ipPermissions><ipPermissionsEgress>{}</ipPermissionsEgress></item>",
                    state.account,
                    rules(&group.ingress),
                    rules(&group.egress)
                ));
            }
            xml(
                StatusCode::OK,
                format!(
                    "<DescribeSecurityGroupsResponse {ns}><requestId>r</requestId><securityGroupInfo>{items}</securityGroupInfo></DescribeSecurityGroupsResponse>"
                ),
            )
        }
        "DescribeSubnets" => {
            let items: String = numbered("SubnetId.")
                .iter()
                .map(|id| format!("<item><subnetId>{id}</subnetId><state>available</state><vpcId>{vpc}</vpcId><cidrBlock>{}</cidrBlock></item>", net.subnet_cidr))
                .collect();
            xml(
                StatusCode::OK,
                format!(
                    "<DescribeSubnetsResponse {ns}><requestId>r</requestId><subnetSet>{items}</subnetSet></DescribeSubnetsResponse>"
                ),
            )
        }
        "DescribeVpcs" => xml(
            StatusCode::OK,
            format!(
                "<DescribeVpcsResponse {ns}><requestId>r</requestId><vpcSet><item><vpcId>{vpc}</vpcId><state>available</state><cidrBlock>{}</cidrBlock><cidrBlockAssociationSet><item><cidrBlock>{}</cidrBlock></item></cidrBlockAssociationSet></item></vpcSet></DescribeVpcsResponse>",
                net.cidr, net.cidr
            ),
        ),
        "DescribeRouteTables" => {
            let items: String = net
                .route_tables
                .iter()
                .enumerate()
                .map(|(n, t)| {
                    let mut routes = format!("<item><destinationCidrBlock>{}</destinationCidrBlock><gatewayId>local</gatewayId><state>active</state></item>", net.cidr);
                    if let Some(target) = &t.default_target {
                        let field = match target.split('-').next() {
                            Some("nat") => "natGatewayId",
                            Some("tgw") => "transitGatewayId",
                            _ => "gatewayId",
                        };
                        routes.push_str(&format!("<item><destinationCidrBlock>0.0.0.0/0</destinationCidrBlock><{field}>{target}</{field}><state>active</state></item>"));
                    }
                    let mut associations: String = t.subnets.iter().map(|s| format!("<item><subnetId>{s}</subnetId><main>false</main></item>")).collect();
                    if t.main {
                        associations.push_str("<item><main>true</main></item>");
                    }
                    format!("<item><routeTableId>rtb-{n}</routeTableId><vpcId>{vpc}</vpcId><routeSet>{routes}</routeSet><associationSet>{associations}</associationSet></item>")
                })
                .collect();
            xml(
                StatusCode::OK,
                format!(
                    "<DescribeRouteTablesResponse {ns}><requestId>r</requestId><routeTableSet>{items}</routeTableSet></DescribeRouteTablesResponse>"
                ),
            )
        }
        "DescribeVpcEndpoints" => {
            let items: String = net
                .endpoints
                .iter()
                .map(|e| {
                    format!(
                        "<item><vpcEndpointId>vpce-{}</vpcEndpointId><vpcEndpointType>{}</vpcEndpointType><vpcId>{vpc}</vpcId><serviceName>{}</serviceName><state>available</state><privateDnsEnabled>{}</privateDnsEnabled></item>",
                        e.service.len(),
                        if e.interface { "Interface" } else { "Gateway" },
                        e.service,
                        e.private_dns
                    )
                })
                .collect();
            xml(
                StatusCode::OK,
                format!(
                    "<DescribeVpcEndpointsResponse {ns}><requestId>r</requestId><vpcEndpointSet>{items}</vpcEndpointSet></DescribeVpcEndpointsResponse>"
                ),
            )
        }
        other => error(
            "InvalidAction",
            &format!("The action {other} is not valid for this web service."),
        ),
    }
}

/// A subscription to an SNS topic; its endpoint is never needed.
#[derive(Debug, Clone, Serialize)]
pub struct Subscription {
    pub protocol: String,
    /// `false` while it awaits confirmation (`SubscriptionArn` `PendingConfirmation`).
    pub confirmed: bool,
}

/// The topic the stand-ins' stack pages (its `AlarmTopicArn`).
pub fn alarm_topic_arn(account: &str, region: &str) -> String {
    format!("arn:aws:sns:{region}:{account}:argocd-ecr-updater-alarms")
}

/// SNS's `ListSubscriptionsByTopic`, in SNS's XML.
pub fn list_subscriptions_by_topic(state: &AwsState, topic: &str) -> Response {
    let xml = |status: StatusCode, text: String| {
        (status, [("content-type", "text/xml")], text).into_response()
    };
    let deployment = crate::faults::lock(&state.deployment).clone();
    let Some(subscriptions) = deployment.topics.get(topic) else {
        return xml(
            StatusCode::NOT_FOUND,
            "<ErrorResponse><Error><Type>Sender</Type><Code>NotFound</Code><Message>Topic does not exist</Message></Error><RequestId>r</RequestId></ErrorResponse>".into(),
        );
    };
    let members: String = subscriptions
        .iter()
        .enumerate()
        .map(|(n, s)| {
            let arn = if s.confirmed {
                format!("{topic}:0000000{n}-standin")
            } else {
                "PendingConfirmation".into()
            };
            format!(
                "<member><TopicArn>{topic}</TopicArn><Protocol>{}</Protocol><SubscriptionArn>{arn}</SubscriptionArn><Owner>{}</Owner><Endpoint>endpoint-{n}</Endpoint></member>",
                s.protocol, state.account
            )
        })
        .collect();
    xml(
        StatusCode::OK,
        format!(
            "<ListSubscriptionsByTopicResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><ListSubscriptionsByTopicResult><Subscriptions>{members}</Subscriptions></ListSubscriptionsByTopicResult><ResponseMetadata><RequestId>r-subs</RequestId></ResponseMetadata></ListSubscriptionsByTopicResponse>"
        ),
    )
}

/// A statement of the function's resource policy (`AddPermission`).
#[derive(Debug, Clone, Serialize)]
pub struct Permission {
    pub statement_id: String,
    pub action: String,
    pub principal: String,
    pub source_arn: Option<String>,
}

impl Deployment {
    /// The seed's stack: `argocd-ecr-updater` as the template makes it with its defaults (the
    /// transformed template, evaluated), healthy.
    pub fn seed(account: &str, region: &str, role_arn: &str) -> Self {
        let template: Value = serde_json::from_str(crate::cloudformation::TRANSFORMED_TEMPLATE)
            .expect("tests/fixtures/template.transformed.json is JSON");
        Self::from_template(&template, account, region, role_arn, &[])
    }

    /// What a stack of `template` with `given` parameter values makes in `account` and
    /// `region`, with `role_arn` as the function's role; the cluster side (its mode, network
    /// and the role's access entry) as a healthy cluster would have it.
    pub fn from_template(
        template: &Value,
        account: &str,
        region: &str,
        role_arn: &str,
        given: &[(&str, Value)],
    ) -> Self {
        use crate::cloudformation::{
            Evaluator, Site, of_type, physical_resources, stack_parameters,
        };
        let site = Site {
            account: account.into(),
            region: region.into(),
            stack_name: "argocd-ecr-updater".into(),
        };
        let function_name = format!("{}-Function-Q3N7X2", site.stack_name);
        let mut evaluator = Evaluator::new(
            stack_parameters(template, &site, given),
            &template["Conditions"],
        );
        evaluator.resources =
            physical_resources(template, &evaluator, &site, &function_name, role_arn);
        let made = |logical: &str| evaluator.resources.contains_key(logical);
        let (_, function) = of_type(template, "AWS::Lambda::Function")[0];
        let properties = evaluator.eval(&function["Properties"]);
        let environment = properties["Environment"]["Variables"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect();
        let arn_of = |logical: &str| {
            evaluator.resources[logical].attributes["Arn"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let mut rules = BTreeMap::new();
        for (logical, rule) in of_type(template, "AWS::Events::Rule") {
            if !made(logical) {
                continue;
            }
            let properties = evaluator.eval(&rule["Properties"]);
            let pattern = match &properties["EventPattern"] {
                Value::String(text) => Some(serde_json::from_str(text).expect("a JSON pattern")),
                Value::Null => None,
                object => Some(object.clone()),
            };
            let targets = properties["Targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| Target {
                    id: t["Id"].as_str().unwrap_or_default().to_string(),
                    arn: t["Arn"].as_str().unwrap_or_default().to_string(),
                    dead_letter_queue: t["DeadLetterConfig"]["Arn"].as_str().map(str::to_string),
                })
                .collect();
            let name = evaluator.resources[logical.as_str()]
                .reference
                .as_str()
                .unwrap_or_default();
            rules.insert(
                name.to_string(),
                Rule {
                    pattern,
                    schedule: properties["ScheduleExpression"]
                        .as_str()
                        .map(str::to_string),
                    enabled: properties["State"].as_str().unwrap_or("ENABLED") == "ENABLED",
                    targets,
                },
            );
        }
        let permissions = of_type(template, "AWS::Lambda::Permission")
            .into_iter()
            .filter(|(logical, _)| made(logical))
            .map(|(logical, permission)| {
                let p = evaluator.eval(&permission["Properties"]);
                Permission {
                    statement_id: crate::cloudformation::generated_name(&site.stack_name, logical),
                    action: p["Action"].as_str().unwrap_or_default().to_string(),
                    principal: p["Principal"].as_str().unwrap_or_default().to_string(),
                    source_arn: p["SourceArn"].as_str().map(str::to_string),
                }
            })
            .collect();
        let on_failure = of_type(template, "AWS::Lambda::EventInvokeConfig")
            .first()
            .and_then(|(_, config)| {
                evaluator
                    .eval(&config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"])
                    .as_str()
                    .map(str::to_string)
            });
        let event_source_mappings = of_type(template, "AWS::Lambda::EventSourceMapping")
            .into_iter()
            .filter(|(logical, _)| made(logical))
            .map(|(logical, mapping)| {
                let p = evaluator.eval(&mapping["Properties"]);
                let number = |v: &Value| v.as_i64().or_else(|| v.as_str()?.parse().ok());
                EventSourceMapping {
                    uuid: format!("{:08x}-standin", logical.len()),
                    queue_arn: p["EventSourceArn"].as_str().unwrap_or_default().to_string(),
                    state: "Enabled".into(),
                    batch_size: number(&p["BatchSize"]).unwrap_or(10),
                    maximum_concurrency: number(&p["ScalingConfig"]["MaximumConcurrency"]),
                    last_processing_result: "No records processed".into(),
                }
            })
            .collect();
        let reserved_concurrency = match &properties["ReservedConcurrentExecutions"] {
            Value::Number(n) => n.as_i64().map(|n| n as i32),
            Value::String(s) => s.parse().ok(),
            _ => None,
        };
        let queues: Vec<String> = of_type(template, "AWS::SQS::Queue")
            .into_iter()
            .filter(|(logical, _)| made(logical))
            .map(|(logical, _)| arn_of(logical))
            .collect();
        let redrive_allow_policies: BTreeMap<String, Value> = of_type(template, "AWS::SQS::Queue")
            .into_iter()
            .filter(|(logical, _)| made(logical))
            .filter_map(|(logical, queue)| {
                let policy = evaluator.eval(&queue["Properties"]["RedriveAllowPolicy"]);
                policy.is_object().then(|| (arn_of(logical), policy))
            })
            .collect();
        let mut queue_policies = BTreeMap::new();
        for (logical, policy) in of_type(template, "AWS::SQS::QueuePolicy") {
            if !made(logical) {
                continue;
            }
            let properties = evaluator.eval(&policy["Properties"]);
            // `Queues` holds URLs; a URL ends in the queue's name, as an ARN does.
            for url in properties["Queues"].as_array().into_iter().flatten() {
                let name = url
                    .as_str()
                    .unwrap_or_default()
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                if let Some(arn) = queues.iter().find(|arn| arn.ends_with(&format!(":{name}"))) {
                    queue_policies.insert(arn.clone(), properties["PolicyDocument"].clone());
                }
            }
        }
        let repositories = evaluator.list(&json!({"Ref": "EcrRepositoryNames"}));
        Self {
            stack_name: site.stack_name.clone(),
            function_name,
            role_arn: role_arn.to_string(),
            architecture: properties["Architectures"][0]
                .as_str()
                .unwrap_or("x86_64")
                .to_string(),
            binary_machine: 183,
            package_location: None,
            environment,
            vpc_id: None,
            state: "Active".into(),
            state_reason: None,
            dead_letter_queue: arn_of("DeadLetterQueue"),
            queues,
            queue_policies,
            redrive_allow_policies,
            on_failure,
            rules,
            permissions,
            event_source_mappings,
            reserved_concurrency,
            unreserved_concurrency: 1000,
            authentication_mode: Some("API_AND_CONFIG_MAP".into()),
            endpoint_public: true,
            endpoint_private: false,
            cluster_vpc_id: "vpc-0cluster".into(),
            cluster_endpoint_listed: true,
            cluster_ca_data: None,
            access_entries: BTreeMap::from([(
                role_arn.to_string(),
                vec!["argocd-ecr-updater".to_string()],
            )]),
            capabilities: Vec::new(),
            repositories: BTreeMap::from([(account.to_string(), repositories)]),
            mutable_repositories: Vec::new(),
            secret_kms_keys: BTreeMap::new(),
            network: VpcNetwork::default(),
            topics: BTreeMap::from([(
                alarm_topic_arn(account, &site.region),
                vec![Subscription {
                    protocol: "email".into(),
                    confirmed: true,
                }],
            )]),
            refused: BTreeMap::new(),
        }
    }

    /// The rule whose name holds `logical_id` (the template's logical ID of it).
    pub fn rule_mut(&mut self, logical_id: &str) -> &mut Rule {
        let marker = format!("-{logical_id}-");
        self.rules
            .iter_mut()
            .find(|(name, _)| name.contains(&marker))
            .map(|(_, rule)| rule)
            .unwrap_or_else(|| panic!("no rule {logical_id}"))
    }

    pub fn function_arn(&self, account: &str, region: &str) -> String {
        format!(
            "arn:aws:lambda:{region}:{account}:function:{}",
            self.function_name
        )
    }

    /// A deployment package: a zip holding `bootstrap`, an ELF file for `binary_machine`.
    pub fn package(&self) -> Vec<u8> {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2; // 64-bit
        elf[5] = 1; // little-endian
        elf[18..20].copy_from_slice(&self.binary_machine.to_le_bytes());
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let written = zip
            .start_file("bootstrap", options)
            .and_then(|()| zip.write_all(&elf).map_err(zip::result::ZipError::from))
            .and_then(|()| zip.finish());
        written.map(std::io::Cursor::into_inner).unwrap_or_default()
    }
}

/// The deployment, when `name` (a name or an ARN) is its function; else Lambda's 404.
fn deployed(state: &AwsState, name: &str) -> Result<Deployment, Response> {
    let deployment = crate::faults::lock(&state.deployment).clone();
    match lookup(&deployment, name) {
        Some(_) => Ok(deployment),
        None => Err(no_function(name)),
    }
}

fn lookup<'a>(deployment: &'a Deployment, name: &str) -> Option<&'a Deployment> {
    (name == deployment.function_name
        || name.ends_with(&format!(":function:{}", deployment.function_name)))
    .then_some(deployment)
}

fn no_function(name: &str) -> Response {
    aws_error(
        StatusCode::NOT_FOUND,
        "ResourceNotFoundException",
        &format!("Function not found: {name}"),
    )
}

fn configuration(state: &AwsState, d: &Deployment) -> Value {
    let mut configuration = json!({
        "FunctionName": d.function_name,
        "FunctionArn": d.function_arn(&state.account, &state.region),
        "Runtime": "provided.al2023",
        "Handler": "bootstrap",
        "Role": d.role_arn,
        "Architectures": [d.architecture],
        "PackageType": "Zip",
        "State": d.state,
        "LastUpdateStatus": "Successful",
        "Environment": {"Variables": d.environment},
    });
    if let Some(reason) = &d.state_reason {
        configuration["StateReason"] = json!(reason);
    }
    if let Some(vpc) = &d.vpc_id {
        configuration["VpcConfig"] =
            json!({"VpcId": vpc, "SubnetIds": ["subnet-1"], "SecurityGroupIds": ["sg-function"]});
    }
    configuration
}

/// Lambda's `GetFunctionConfiguration`.
pub async fn get_function_configuration(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
) -> Response {
    match deployed(&state, &name) {
        Ok(d) => axum::Json(configuration(&state, &d)).into_response(),
        Err(missing) => missing,
    }
}

/// Lambda's `GetFunction`: the configuration and a presigned URL of the package.
pub async fn get_function(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
) -> Response {
    let d = match deployed(&state, &name) {
        Ok(d) => d,
        Err(missing) => return missing,
    };
    let endpoint = crate::faults::lock(&state.endpoint).clone();
    let location = d
        .package_location
        .clone()
        .unwrap_or_else(|| format!("{endpoint}/packages/{}.zip", d.function_name));
    axum::Json(json!({
        "Configuration": configuration(&state, &d),
        "Code": {"RepositoryType": "S3",
                 "Location": format!("{location}?X-Amz-Security-Token={}", crate::aws::PRESIGNED_SECRET)},
    }))
    .into_response()
}

/// The presigned package download.
pub async fn package(State(state): State<Arc<AwsState>>, Path(file): Path<String>) -> Response {
    let deployment = crate::faults::lock(&state.deployment).clone();
    if file != format!("{}.zip", deployment.function_name) {
        return StatusCode::NOT_FOUND.into_response();
    }
    deployment.package().into_response()
}

/// The error AWS answers a call the operator is refused with, when a test refuses
/// `operation` (`action` is its IAM action). `rest`: a REST service (Lambda, EKS), which
/// answers 403 and 429 where the JSON services answer 400.
pub(crate) fn refusal(
    state: &AwsState,
    operation: &str,
    action: &str,
    rest: bool,
) -> Option<Response> {
    let code = crate::faults::lock(&state.deployment)
        .refused
        .get(operation)
        .cloned()?;
    let (status, message) = match code.as_str() {
        "ThrottlingException" | "TooManyRequestsException" => (
            if rest {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::BAD_REQUEST
            },
            "Rate exceeded".to_string(),
        ),
        _ => (
            if rest {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::BAD_REQUEST
            },
            format!(
                "User: arn:aws:sts::{}:assumed-role/operator/laptop is not authorized to perform: {action} because no identity-based policy allows the {action} action",
                state.account
            ),
        ),
    };
    Some(aws_error(status, &code, &message))
}

/// Lambda's `GetFunctionEventInvokeConfig`: 404 when the function has none.
pub async fn get_event_invoke_config(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
) -> Response {
    if let Some(refused) = refusal(
        &state,
        "GetFunctionEventInvokeConfig",
        "lambda:GetFunctionEventInvokeConfig",
        true,
    ) {
        return refused;
    }
    let d = match deployed(&state, &name) {
        Ok(d) => d,
        Err(missing) => return missing,
    };
    let arn = d.function_arn(&state.account, &state.region);
    let Some(destination) = &d.on_failure else {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("The function {arn} doesn't have an EventInvokeConfig"),
        );
    };
    axum::Json(json!({
        "FunctionArn": format!("{arn}:$LATEST"),
        "MaximumRetryAttempts": 2,
        "MaximumEventAgeInSeconds": 3600,
        "DestinationConfig": {"OnFailure": {"Destination": destination}, "OnSuccess": {}},
    }))
    .into_response()
}

/// Lambda's `Invoke`, asynchronous (`X-Amz-Invocation-Type: Event`) as `redrive` and
/// EventBridge use it: the payload is recorded and accepted (202); the function is not run
/// here (the Runtime API stand-in runs it where a test needs it).
pub async fn invoke(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = refusal(&state, "Invoke", "lambda:InvokeFunction", true) {
        return refused;
    }
    let d = match deployed(&state, &name) {
        Ok(d) => d,
        Err(missing) => return missing,
    };
    let kind = headers
        .get("x-amz-invocation-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("RequestResponse")
        .to_string();
    if kind != "Event" {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValueException",
            "the stand-in serves asynchronous invocations (Event) only",
        );
    }
    // Lambda's own limit for an asynchronous payload.
    if body.len() > 1024 * 1024 {
        return aws_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestTooLargeException",
            "Request must be smaller than 1048576 bytes for the InvokeFunction operation",
        );
    }
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidRequestContentException",
            "Could not parse request body into json",
        );
    };
    crate::faults::lock(&state.invocations).push((d.function_name.clone(), kind, payload));
    StatusCode::ACCEPTED.into_response()
}

/// Lambda's `ListEventSourceMappings` for a function (by name or ARN).
pub async fn list_event_source_mappings(
    State(state): State<Arc<AwsState>>,
    axum::extract::Query(query): axum::extract::Query<BTreeMap<String, String>>,
) -> Response {
    let name = query.get("FunctionName").cloned().unwrap_or_default();
    let d = match deployed(&state, &name) {
        Ok(d) => d,
        Err(_) => return axum::Json(json!({"EventSourceMappings": []})).into_response(),
    };
    let arn = d.function_arn(&state.account, &state.region);
    let mappings: Vec<Value> = d
        .event_source_mappings
        .iter()
        .map(|m| {
            let mut mapping = json!({"UUID": m.uuid, "EventSourceArn": m.queue_arn, "FunctionArn": arn,
                "State": m.state, "StateTransitionReason": "USER_INITIATED", "BatchSize": m.batch_size,
                "LastProcessingResult": m.last_processing_result,
                "FunctionResponseTypes": ["ReportBatchItemFailures"]});
            if let Some(maximum) = m.maximum_concurrency {
                mapping["ScalingConfig"] = json!({"MaximumConcurrency": maximum});
            }
            mapping
        })
        .collect();
    axum::Json(json!({"EventSourceMappings": mappings})).into_response()
}

/// Lambda's `GetFunctionConcurrency`: empty when the function has no reserved concurrency.
pub async fn get_function_concurrency(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
) -> Response {
    match deployed(&state, &name) {
        Ok(d) => match d.reserved_concurrency {
            Some(n) => axum::Json(json!({"ReservedConcurrentExecutions": n})).into_response(),
            None => axum::Json(json!({})).into_response(),
        },
        Err(missing) => missing,
    }
}

/// Lambda's `GetAccountSettings`.
pub async fn get_account_settings(State(state): State<Arc<AwsState>>) -> Response {
    let d = crate::faults::lock(&state.deployment).clone();
    axum::Json(json!({"AccountLimit": {"ConcurrentExecutions": 1000,
        "UnreservedConcurrentExecutions": d.unreserved_concurrency,
        "TotalCodeSize": 80_530_636_800_i64, "CodeSizeUnzipped": 262_144_000, "CodeSizeZipped": 52_428_800},
        "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 1}}))
    .into_response()
}

/// Lambda's `GetPolicy`: the function's resource policy, as a JSON string; 404 when no
/// statement is left.
pub async fn get_policy(State(state): State<Arc<AwsState>>, Path(name): Path<String>) -> Response {
    if let Some(refused) = refusal(&state, "GetPolicy", "lambda:GetPolicy", true) {
        return refused;
    }
    let d = match deployed(&state, &name) {
        Ok(d) => d,
        Err(missing) => return missing,
    };
    if d.permissions.is_empty() {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "The resource you requested does not exist.",
        );
    }
    let arn = d.function_arn(&state.account, &state.region);
    let statements: Vec<Value> = d
        .permissions
        .iter()
        .map(|p| {
            let mut statement = json!({"Sid": p.statement_id, "Effect": "Allow",
                "Principal": {"Service": p.principal}, "Action": p.action, "Resource": arn});
            if let Some(source) = &p.source_arn {
                statement["Condition"] = json!({"ArnLike": {"AWS:SourceArn": source}});
            }
            statement
        })
        .collect();
    let policy = json!({"Version": "2012-10-17", "Id": "default", "Statement": statements});
    axum::Json(json!({"Policy": policy.to_string(), "RevisionId": "standin-1"})).into_response()
}

/// EventBridge's `ListRuleNamesByTarget`, `DescribeRule` and `ListTargetsByRule`.
pub fn events(state: &AwsState, operation: &str, request: &Value) -> Response {
    if let Some(refused) = refusal(state, operation, &format!("events:{operation}"), false) {
        return refused;
    }
    let deployment = crate::faults::lock(&state.deployment).clone();
    let rule_arn = |name: &str| {
        format!(
            "arn:aws:events:{}:{}:rule/{name}",
            state.region, state.account
        )
    };
    match operation {
        "ListRuleNamesByTarget" => {
            let target = request["TargetArn"].as_str().unwrap_or_default();
            let names: Vec<&String> = deployment
                .rules
                .iter()
                .filter(|(_, r)| r.targets.iter().any(|t| t.arn == target))
                .map(|(name, _)| name)
                .collect();
            axum::Json(json!({"RuleNames": names})).into_response()
        }
        "DescribeRule" | "ListTargetsByRule" => {
            let name = request["Name"]
                .as_str()
                .or(request["Rule"].as_str())
                .unwrap_or_default();
            let Some(rule) = deployment.rules.get(name) else {
                return aws_error(
                    StatusCode::BAD_REQUEST,
                    "ResourceNotFoundException",
                    &format!("Rule {name} does not exist on EventBus default."),
                );
            };
            if operation == "DescribeRule" {
                let mut described = json!({"Name": name, "Arn": rule_arn(name),
                    "State": if rule.enabled { "ENABLED" } else { "DISABLED" },
                    "EventBusName": "default"});
                if let Some(pattern) = &rule.pattern {
                    described["EventPattern"] = json!(pattern.to_string());
                }
                if let Some(schedule) = &rule.schedule {
                    described["ScheduleExpression"] = json!(schedule);
                }
                return axum::Json(described).into_response();
            }
            let targets: Vec<Value> = rule
                .targets
                .iter()
                .map(|t| {
                    let mut target = json!({"Id": t.id, "Arn": t.arn,
                        "RetryPolicy": {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 3600}});
                    if let Some(dlq) = &t.dead_letter_queue {
                        target["DeadLetterConfig"] = json!({"Arn": dlq});
                    }
                    target
                })
                .collect();
            axum::Json(json!({"Targets": targets})).into_response()
        }
        other => aws_error(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            &format!("operation {other} is not supported by the stand-in"),
        ),
    }
}

/// ECR's `DescribeRepositories` for named repositories, or every one, in this account's
/// registry or another's (`registryId`), which refuses unless its policy admits the caller.
pub fn describe_repositories(state: &AwsState, request: &Value) -> Response {
    let deployment = crate::faults::lock(&state.deployment).clone();
    let registry = request["registryId"].as_str().unwrap_or(&state.account);
    if registry != state.account && !state.registry_readable(registry) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "AccessDeniedException",
            &format!(
                "User: {} is not authorized to perform: ecr:DescribeRepositories on resource: arn:aws:ecr:{}:{registry}:repository/* because no resource-based policy allows the ecr:DescribeRepositories action",
                crate::FUNCTION_ROLE_ARN,
                state.region
            ),
        );
    }
    let existing = deployment
        .repositories
        .get(registry)
        .cloned()
        .unwrap_or_default();
    let asked: Vec<&str> = request["repositoryNames"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(missing) = asked.iter().find(|n| !existing.iter().any(|r| r == *n)) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "RepositoryNotFoundException",
            &format!(
                "The repository with name '{missing}' does not exist in the registry with id '{registry}'"
            ),
        );
    }
    let listed: Vec<Value> = existing
        .iter()
        .filter(|r| asked.is_empty() || asked.contains(&r.as_str()))
        .map(|r| {
            let mutability = if deployment.mutable_repositories.contains(r) {
                "MUTABLE"
            } else {
                "IMMUTABLE"
            };
            json!({"repositoryName": r, "registryId": registry, "imageTagMutability": mutability,
            "repositoryArn": format!("arn:aws:ecr:{}:{registry}:repository/{r}", state.region)})
        })
        .collect();
    axum::Json(json!({"repositories": listed})).into_response()
}

/// The Resource Groups Tagging API's `GetResources`, for the tags CloudFormation puts on the
/// function (`aws:cloudformation:stack-name`, `aws:cloudformation:logical-id`).
pub fn tagged_resources(state: &AwsState, request: &Value) -> Response {
    let d = crate::faults::lock(&state.deployment).clone();
    let tags = BTreeMap::from([
        ("aws:cloudformation:stack-name", d.stack_name.clone()),
        ("aws:cloudformation:logical-id", "Function".to_string()),
    ]);
    let matches = request["TagFilters"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|filter| {
            let key = filter["Key"].as_str().unwrap_or_default();
            let values: Vec<&str> = filter["Values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            tags.get(key)
                .is_some_and(|v| values.is_empty() || values.contains(&v.as_str()))
        });
    let wants_functions = request["ResourceTypeFilters"]
        .as_array()
        .is_none_or(|types| {
            types
                .iter()
                .any(|t| t == "lambda:function" || t == "lambda")
        });
    let mappings = if matches && wants_functions {
        let tag_list: Vec<Value> = tags
            .iter()
            .map(|(k, v)| json!({"Key": k, "Value": v}))
            .collect();
        vec![
            json!({"ResourceARN": d.function_arn(&state.account, &state.region), "Tags": tag_list}),
        ]
    } else {
        Vec::new()
    };
    axum::Json(json!({"PaginationToken": "", "ResourceTagMappingList": mappings})).into_response()
}

/// EKS's `ListAccessEntries`.
pub async fn list_access_entries(
    State(state): State<Arc<AwsState>>,
    Path(cluster): Path<String>,
) -> Response {
    let deployment = crate::faults::lock(&state.deployment).clone();
    if cluster != state.cluster_name {
        return no_cluster(&cluster);
    }
    if deployment.authentication_mode.as_deref() == Some("CONFIG_MAP") {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidRequestException",
            "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.",
        );
    }
    let entries: Vec<&String> = deployment.access_entries.keys().collect();
    axum::Json(json!({"accessEntries": entries})).into_response()
}

/// EKS's `DescribeAccessEntry`.
pub async fn describe_access_entry(
    State(state): State<Arc<AwsState>>,
    Path((cluster, principal)): Path<(String, String)>,
) -> Response {
    if let Some(refused) = refusal(
        &state,
        "DescribeAccessEntry",
        "eks:DescribeAccessEntry",
        true,
    ) {
        return refused;
    }
    let deployment = crate::faults::lock(&state.deployment).clone();
    if cluster != state.cluster_name {
        return no_cluster(&cluster);
    }
    match deployment.access_entries.get(&principal) {
        Some(groups) => {
            // EKS's default user name for a role: its session, named as the role is assumed.
            let role = principal.rsplit('/').next().unwrap_or_default();
            let username = format!(
                "arn:aws:sts::{}:assumed-role/{role}/{{{{SessionName}}}}",
                state.account
            );
            axum::Json(
                json!({"accessEntry": {"clusterName": cluster, "principalArn": principal,
                "kubernetesGroups": groups, "username": username, "type": "STANDARD"}}),
            )
            .into_response()
        }
        None => aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("The specified principalArn could not be found: {principal}"),
        ),
    }
}

fn no_cluster(name: &str) -> Response {
    aws_error(
        StatusCode::NOT_FOUND,
        "ResourceNotFoundException",
        &format!("No cluster found for name: {name}."),
    )
}

/// The parts of `DescribeCluster` that say how the cluster may be reached and authenticated.
pub fn cluster_fields(state: &AwsState) -> Value {
    let d = crate::faults::lock(&state.deployment).clone();
    let mut fields = json!({
        "resourcesVpcConfig": {"vpcId": d.cluster_vpc_id, "clusterSecurityGroupId": "sg-cluster",
            "endpointPublicAccess": d.endpoint_public, "endpointPrivateAccess": d.endpoint_private,
            "publicAccessCidrs": if d.endpoint_public { json!(["0.0.0.0/0"]) } else { json!([]) }},
    });
    if let Some(mode) = &d.authentication_mode {
        fields["accessConfig"] = json!({"authenticationMode": mode});
    }
    fields
}
