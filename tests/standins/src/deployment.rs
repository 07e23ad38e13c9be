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
use serde_json::{Value, json};

use crate::aws::{AwsState, aws_error};

/// The deployed function and its surroundings.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The stack that made it: CloudFormation tags the function with its name.
    pub stack_name: String,
    pub function_name: String,
    /// `arm64` or `x86_64`, as Lambda runs it.
    pub architecture: String,
    /// The ELF machine of the `bootstrap` in the deployment package (183 aarch64, 62 x86-64).
    pub binary_machine: u16,
    pub environment: BTreeMap<String, String>,
    /// The function's VPC, when it runs in one.
    pub vpc_id: Option<String>,
    pub dead_letter_queue: String,
    /// EventBridge rules by name: their pattern, state, and targets (ARN, with a
    /// dead-letter queue ARN or not).
    pub rules: BTreeMap<String, Rule>,
    /// `API`, `API_AND_CONFIG_MAP` or `CONFIG_MAP`.
    pub authentication_mode: String,
    pub endpoint_public: bool,
    pub endpoint_private: bool,
    pub cluster_vpc_id: String,
    /// Access entries by principal ARN: their Kubernetes groups.
    pub access_entries: BTreeMap<String, Vec<String>>,
    /// Repositories that exist, by registry account.
    pub repositories: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub pattern: Value,
    pub enabled: bool,
    /// (target ARN, its dead-letter queue ARN)
    pub targets: Vec<(String, Option<String>)>,
}

impl Deployment {
    /// The seed's stack: `argocd-ecr-updater` with the template's defaults, healthy.
    pub fn seed(account: &str, region: &str, role_arn: &str) -> Self {
        let function_name = "argocd-ecr-updater-Function-Q3N7X2".to_string();
        let function_arn = format!("arn:aws:lambda:{region}:{account}:function:{function_name}");
        let queue =
            format!("arn:aws:sqs:{region}:{account}:argocd-ecr-updater-DeadLetterQueue-7TQ2");
        let rule = |pattern: Value| Rule {
            pattern,
            enabled: true,
            targets: vec![(function_arn.clone(), Some(queue.clone()))],
        };
        let rules = BTreeMap::from([
            (
                "argocd-ecr-updater-FunctionEcrPush-1A2B3C".to_string(),
                rule(
                    json!({"source": ["aws.ecr"], "detail-type": ["ECR Image Action"],
                    "detail": {"action-type": ["PUSH"], "result": ["SUCCESS"],
                               "image-tag": [{"anything-but": ""}], "repository-name": ["barun-dev-ecr"]}}),
                ),
            ),
            (
                "argocd-ecr-updater-FunctionReconcile-4D5E6F".to_string(),
                rule(json!({"source": ["aws.events"], "detail-type": ["Scheduled Event"]})),
            ),
        ]);
        let environment = BTreeMap::from([
            ("CLUSTER_NAME".to_string(), "barun-dev".to_string()),
            ("ARGOCD_NAMESPACES".to_string(), "argocd".to_string()),
            ("FUNCTION_ACCOUNT_ID".to_string(), account.to_string()),
            ("READ_IMAGEUPDATERS".to_string(), "true".to_string()),
        ]);
        Self {
            stack_name: "argocd-ecr-updater".into(),
            function_name,
            architecture: "arm64".into(),
            binary_machine: 183,
            environment,
            vpc_id: None,
            dead_letter_queue: queue,
            rules,
            authentication_mode: "API_AND_CONFIG_MAP".into(),
            endpoint_public: true,
            endpoint_private: false,
            cluster_vpc_id: "vpc-0cluster".into(),
            access_entries: BTreeMap::from([(
                role_arn.to_string(),
                vec!["argocd-ecr-updater".to_string()],
            )]),
            repositories: BTreeMap::from([(account.to_string(), vec!["barun-dev-ecr".into()])]),
        }
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
        "Role": crate::FUNCTION_IAM_ROLE_ARN,
        "Architectures": [d.architecture],
        "PackageType": "Zip",
        "Environment": {"Variables": d.environment},
    });
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
    axum::Json(json!({
        "Configuration": configuration(&state, &d),
        "Code": {"RepositoryType": "S3",
                 "Location": format!("{endpoint}/packages/{}.zip?X-Amz-Security-Token={}", d.function_name, crate::aws::PRESIGNED_SECRET)},
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

/// Lambda's `GetFunctionEventInvokeConfig`.
pub async fn get_event_invoke_config(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
) -> Response {
    let d = match deployed(&state, &name) {
        Ok(d) => d,
        Err(missing) => return missing,
    };
    axum::Json(json!({
        "FunctionArn": d.function_arn(&state.account, &state.region),
        "MaximumRetryAttempts": 2,
        "MaximumEventAgeInSeconds": 3600,
        "DestinationConfig": {"OnFailure": {"Destination": d.dead_letter_queue}, "OnSuccess": {}},
    }))
    .into_response()
}

/// EventBridge's `ListRuleNamesByTarget`, `DescribeRule` and `ListTargetsByRule`.
pub fn events(state: &AwsState, operation: &str, request: &Value) -> Response {
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
                .filter(|(_, r)| r.targets.iter().any(|(arn, _)| arn == target))
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
                return axum::Json(json!({"Name": name, "Arn": rule_arn(name),
                    "EventPattern": rule.pattern.to_string(),
                    "State": if rule.enabled { "ENABLED" } else { "DISABLED" },
                    "EventBusName": "default"}))
                .into_response();
            }
            let targets: Vec<Value> = rule
                .targets
                .iter()
                .enumerate()
                .map(|(i, (arn, dlq))| {
                    let mut target = json!({"Id": format!("t{i}"), "Arn": arn,
                        "RetryPolicy": {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 3600}});
                    if let Some(dlq) = dlq {
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
            json!({"repositoryName": r, "registryId": registry,
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
    if deployment.authentication_mode == "CONFIG_MAP" {
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
    let deployment = crate::faults::lock(&state.deployment).clone();
    if cluster != state.cluster_name {
        return no_cluster(&cluster);
    }
    match deployment.access_entries.get(&principal) {
        Some(groups) => axum::Json(json!({"accessEntry": {"clusterName": cluster,
            "principalArn": principal, "kubernetesGroups": groups, "type": "STANDARD"}}))
        .into_response(),
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
    json!({
        "accessConfig": {"authenticationMode": d.authentication_mode},
        "resourcesVpcConfig": {"vpcId": d.cluster_vpc_id, "clusterSecurityGroupId": "sg-cluster",
            "endpointPublicAccess": d.endpoint_public, "endpointPrivateAccess": d.endpoint_private,
            "publicAccessCidrs": if d.endpoint_public { json!(["0.0.0.0/0"]) } else { json!([]) }},
    })
}
