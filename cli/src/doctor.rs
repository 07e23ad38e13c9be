//! `argocd-ecr-updater-cli doctor`: checks a real deployment from a laptop, with the
//! operator's credentials, in one run: the function and its configuration, the binary's
//! architecture, the rules that feed it, each cluster's authentication mode, network and
//! access entry, RBAC as the function's role, the tracked repositories, the dead-letter
//! queue, and the Git credentials secrets. Each check says what is wrong and the command or
//! setting that fixes it; secrets are never printed.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

use crate::common::{print_json, sdk_config};
use argocd_ecr_updater::aws_error::describe;
use argocd_ecr_updater::config::{ClusterAccess, Config, NamespaceScope};
use argocd_ecr_updater::eks_auth::{IamTokenSource, SystemClock};
use argocd_ecr_updater::kube::{KubeClient, required_access};

pub struct DoctorRequest {
    pub target: Target,
    /// Registry accounts holding tracked repositories (a central registry).
    pub registry_accounts: Vec<String>,
    pub region: Option<String>,
    /// The group the access entry must map the role to (the stack's `KubernetesGroup`).
    pub kubernetes_group: String,
    pub json: bool,
}

/// Which function to check.
pub enum Target {
    /// Its name or ARN (the stack's `FunctionName` output).
    Function(String),
    /// The stack that made it: found by the tags CloudFormation puts on it.
    Stack(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Fail,
    /// Could not be checked from here; `detail` says why and how to check it by hand.
    Skipped,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub area: &'static str,
    pub name: String,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The checks of one run, in order.
#[derive(Default)]
struct Checklist(Vec<Check>);

impl Checklist {
    fn add(
        &mut self,
        area: &'static str,
        name: impl Into<String>,
        result: Result<String, (String, String)>,
    ) {
        let (status, detail, fix) = match result {
            Ok(detail) => (Status::Ok, detail, None),
            Err((detail, fix)) => (Status::Fail, detail, Some(fix)),
        };
        self.0.push(Check {
            area,
            name: name.into(),
            status,
            detail,
            fix,
        });
    }

    fn skip(&mut self, area: &'static str, name: impl Into<String>, why: String, by_hand: String) {
        self.0.push(Check {
            area,
            name: name.into(),
            status: Status::Skipped,
            detail: why,
            fix: Some(by_hand),
        });
    }
}

/// The AWS clients of one run.
struct Clients {
    lambda: aws_sdk_lambda::Client,
    events: aws_sdk_eventbridge::Client,
    ecr: aws_sdk_ecr::Client,
    sqs: aws_sdk_sqs::Client,
    secrets: aws_sdk_secretsmanager::Client,
    sts: aws_sdk_sts::Client,
    tagging: aws_sdk_resourcegroupstagging::Client,
    sdk: aws_config::SdkConfig,
}

pub async fn run(request: DoctorRequest) -> ExitCode {
    let sdk = sdk_config(request.region.clone()).await;
    let clients = Clients {
        lambda: aws_sdk_lambda::Client::new(&sdk),
        events: aws_sdk_eventbridge::Client::new(&sdk),
        ecr: aws_sdk_ecr::Client::new(&sdk),
        sqs: aws_sdk_sqs::Client::new(&sdk),
        secrets: aws_sdk_secretsmanager::Client::new(&sdk),
        sts: aws_sdk_sts::Client::new(&sdk),
        tagging: aws_sdk_resourcegroupstagging::Client::new(&sdk),
        sdk,
    };
    let checks = diagnose(&clients, &request).await;
    if request.json {
        if let Err(code) = print_json(&checks, true) {
            return code;
        }
    } else {
        for check in &checks {
            let mark = match check.status {
                Status::Ok => "✓",
                Status::Fail => "✗",
                Status::Skipped => "–",
            };
            println!("{mark} {}: {} — {}", check.area, check.name, check.detail);
            if let Some(fix) = &check.fix {
                let label = if check.status == Status::Fail {
                    "fix"
                } else {
                    "check by hand"
                };
                println!("    {label}: {fix}");
            }
        }
        let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
        println!("{} check(s), {failed} failed", checks.len());
    }
    if checks.iter().any(|c| c.status == Status::Fail) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Every check, in the order a deployment is built: function, rules, queue, clusters, RBAC,
/// secrets. A check whose input is missing (no function found) ends the run there.
async fn diagnose(clients: &Clients, request: &DoctorRequest) -> Vec<Check> {
    let mut list = Checklist::default();
    let name = match &request.target {
        Target::Function(name) => name.clone(),
        Target::Stack(stack) => match stack_function(clients, stack, &mut list).await {
            Some(arn) => arn,
            None => return list.0,
        },
    };
    let Some(function) = function(clients, &name, &mut list).await else {
        return list.0;
    };
    rules(clients, &function, &request.registry_accounts, &mut list).await;
    dead_letters(clients, &function, &mut list).await;
    let Some(config) = &function.config else {
        return list.0;
    };
    let role = assume_function_role(clients, &function, &mut list).await;
    for spec in &config.clusters {
        let access = cluster(
            clients,
            &function,
            spec,
            &request.kubernetes_group,
            &mut list,
        )
        .await;
        if let (Some(access), Some(role)) = (access, &role) {
            rbac(config, spec, &access, role, &function.region, &mut list).await;
        }
    }
    git_secrets(clients, config, role.as_ref(), &mut list).await;
    list.0
}

/// What `GetFunctionConfiguration` says of the function.
struct Function {
    arn: String,
    region: String,
    account: String,
    role: String,
    vpc: Option<String>,
    config: Option<Config>,
}

fn arn_part(arn: &str, index: usize) -> String {
    arn.split(':').nth(index).unwrap_or_default().to_string()
}

/// The function CloudFormation made for `stack`: the one tagged with the stack's name and the
/// template's logical ID.
async fn stack_function(clients: &Clients, stack: &str, list: &mut Checklist) -> Option<String> {
    use aws_sdk_resourcegroupstagging::types::TagFilter;
    let found = clients
        .tagging
        .get_resources()
        .tag_filters(
            TagFilter::builder()
                .key("aws:cloudformation:stack-name")
                .values(stack)
                .build(),
        )
        .tag_filters(
            TagFilter::builder()
                .key("aws:cloudformation:logical-id")
                .values("Function")
                .build(),
        )
        .resource_type_filters("lambda:function")
        .send()
        .await;
    let arns: Vec<String> = match found {
        Ok(out) => out
            .resource_tag_mapping_list()
            .iter()
            .filter_map(|m| m.resource_arn())
            .map(str::to_string)
            .collect(),
        Err(e) => {
            list.add("function", format!("stack {stack}"), Err((format!("cannot look it up: {}", describe(&e)),
                "you need tag:GetResources, or pass --function with the stack's FunctionName output".into())));
            return None;
        }
    };
    match arns.as_slice() {
        [arn] => Some(arn.clone()),
        [] => {
            list.add("function", format!("stack {stack}"), Err(("no function of this stack in this region".into(),
                "check the stack name and --region, or pass --function with the stack's FunctionName output".into())));
            None
        }
        _ => {
            list.add(
                "function",
                format!("stack {stack}"),
                Err((
                    format!("{} functions match", arns.len()),
                    "pass --function with the stack's FunctionName output".into(),
                )),
            );
            None
        }
    }
}

async fn function(clients: &Clients, name: &str, list: &mut Checklist) -> Option<Function> {
    let found = clients
        .lambda
        .get_function_configuration()
        .function_name(name)
        .send()
        .await;
    let configuration = match found {
        Ok(c) => c,
        Err(e) => {
            list.add("function", name, Err((
                format!("cannot read it: {}", describe(&e)),
                "pass the stack's FunctionName output as --function, in the stack's region (--region); you need lambda:GetFunctionConfiguration".into(),
            )));
            return None;
        }
    };
    let arn = configuration.function_arn().unwrap_or_default().to_string();
    let found = if arn == name {
        "found".to_string()
    } else {
        format!("found {arn}")
    };
    list.add("function", name, Ok(found));
    let variables: BTreeMap<String, String> = configuration
        .environment()
        .and_then(|e| e.variables())
        .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let region = arn_part(&arn, 3);
    let parsed = Config::from_lookup(|name| match name {
        "AWS_REGION" => Some(region.clone()),
        other => variables.get(other).cloned(),
    });
    let config = match parsed {
        Ok(config) => {
            list.add(
                "function",
                "environment",
                Ok(format!(
                    "the function's configuration reader accepts it ({} cluster(s))",
                    config.clusters.len()
                )),
            );
            Some(config)
        }
        Err(e) => {
            list.add(
                "function",
                "environment",
                Err((
                    format!("the function would stop at its cold start: {e}"),
                    "fix the named variable in the stack's parameters and redeploy".into(),
                )),
            );
            None
        }
    };
    let architecture = configuration
        .architectures()
        .first()
        .map_or("x86_64", |a| a.as_str())
        .to_string();
    binary(clients, name, &architecture, list).await;
    Some(Function {
        account: arn_part(&arn, 4),
        role: configuration.role().unwrap_or_default().to_string(),
        vpc: configuration
            .vpc_config()
            .and_then(|v| v.vpc_id())
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        arn,
        region,
        config,
    })
}

/// Most a deployment package may be; Lambda's own limit for an unzipped function is 250 MB.
const PACKAGE_LIMIT: u64 = 256 * 1024 * 1024;

/// The ELF machine of `bootstrap` in the package against the architecture Lambda runs it on.
async fn binary(clients: &Clients, function: &str, architecture: &str, list: &mut Checklist) {
    let name = format!("binary for {architecture}");
    let location = match clients
        .lambda
        .get_function()
        .function_name(function)
        .send()
        .await
    {
        Ok(f) => f.code().and_then(|c| c.location()).map(str::to_string),
        Err(e) => {
            list.skip("function", name, format!("cannot read the package location: {}", describe(&e)),
                "aws lambda get-function --function-name <name> --query Code.Location, then `file bootstrap` in the zip".into());
            return;
        }
    };
    let Some(location) = location else {
        list.skip(
            "function",
            name,
            "the function is not a zip package".into(),
            "check the image's platform".into(),
        );
        return;
    };
    match bootstrap_architecture(&location).await {
        Ok(built) => {
            let result = if built == architecture {
                Ok(format!("bootstrap is built for {built}"))
            } else {
                Err((
                    format!("bootstrap is built for {built} but Lambda runs it on {architecture}: every invocation fails with Runtime.InvalidEntrypoint"),
                    format!("build for {architecture} (template.yaml's Architectures, then sam build && sam deploy; or cargo lambda build --release --{}) ", if architecture == "arm64" { "arm64" } else { "x86-64" }),
                ))
            };
            list.add("function", name, result);
        }
        // The presigned URL carries credentials in its query: it is never printed.
        Err(why) => list.skip("function", name, format!("cannot read the package: {why}"),
            "aws lambda get-function --function-name <name> --query Code.Location, then `file bootstrap` in the zip".into()),
    }
}

async fn bootstrap_architecture(location: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| e.to_string())?;
    let response = client
        .get(location)
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    if !response.status().is_success() {
        return Err(format!("the download answered {}", response.status()));
    }
    if response.content_length().is_some_and(|n| n > PACKAGE_LIMIT) {
        return Err("the package is larger than any Lambda package".into());
    }
    let bytes = response
        .bytes()
        .await
        .map_err(|e| e.without_url().to_string())?;
    if bytes.len() as u64 > PACKAGE_LIMIT {
        return Err("the package is larger than any Lambda package".into());
    }
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("not a zip: {e}"))?;
    let entry = archive
        .by_name("bootstrap")
        .map_err(|_| "the zip holds no bootstrap".to_string())?;
    let mut header = [0u8; 20];
    entry
        .take(20)
        .read_exact(&mut header)
        .map_err(|_| "bootstrap is shorter than an ELF header".to_string())?;
    elf_architecture(&header).map(str::to_string)
}

/// The Lambda architecture an ELF header's `e_machine` is built for.
fn elf_architecture(header: &[u8; 20]) -> Result<&'static str, String> {
    if &header[..4] != b"\x7fELF" {
        return Err("bootstrap is not an ELF executable".into());
    }
    // e_machine, little-endian as both Lambda architectures are.
    match u16::from_le_bytes([header[18], header[19]]) {
        183 => Ok("arm64"),
        62 => Ok("x86_64"),
        other => Ok(if other == 0 {
            "no machine"
        } else {
            "an unknown machine"
        }),
    }
}

async fn rules(
    clients: &Clients,
    function: &Function,
    registry_accounts: &[String],
    list: &mut Checklist,
) {
    let names = match clients
        .events
        .list_rule_names_by_target()
        .target_arn(&function.arn)
        .send()
        .await
    {
        Ok(out) => out.rule_names().to_vec(),
        Err(e) => {
            list.add(
                "rules",
                "rules that invoke the function",
                Err((
                    format!("cannot list them: {}", describe(&e)),
                    "you need events:ListRuleNamesByTarget".into(),
                )),
            );
            return;
        }
    };
    let mut push_rule = false;
    for name in &names {
        let rule = match clients.events.describe_rule().name(name).send().await {
            Ok(rule) => rule,
            Err(e) => {
                list.add(
                    "rules",
                    name,
                    Err((
                        format!("cannot describe it: {}", describe(&e)),
                        "you need events:DescribeRule".into(),
                    )),
                );
                continue;
            }
        };
        let pattern: Value =
            serde_json::from_str(rule.event_pattern().unwrap_or("{}")).unwrap_or_default();
        let is_push = pattern["detail-type"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "ECR Image Action"));
        let enabled = rule.state().is_some_and(|s| s.as_str() == "ENABLED");
        let targets = clients
            .events
            .list_targets_by_rule()
            .rule(name)
            .send()
            .await;
        let parked = targets.as_ref().ok().is_some_and(|t| {
            t.targets()
                .iter()
                .filter(|t| t.arn() == function.arn)
                .all(|t| t.dead_letter_config().and_then(|d| d.arn()).is_some())
        });
        let result = match (enabled || !is_push, parked) {
            (false, _) => Err((
                "disabled: pushes do not reach the function".to_string(),
                format!("aws events enable-rule --name {name}"),
            )),
            (true, false) => Err((
                "its target has no dead-letter queue: events EventBridge cannot deliver are lost"
                    .to_string(),
                "redeploy the template (every rule's target parks failures in the stack's queue)"
                    .into(),
            )),
            (true, true) => Ok(format!(
                "{} and targets the function, with a dead-letter queue",
                if enabled {
                    "enabled"
                } else {
                    "disabled (as configured)"
                }
            )),
        };
        list.add("rules", name, result);
        if is_push {
            push_rule = true;
            repositories(
                clients,
                function,
                registry_accounts,
                &pattern["detail"]["repository-name"],
                list,
            )
            .await;
        }
    }
    if !push_rule {
        list.add("rules", "ECR push rule", Err(("no rule sends ECR pushes to the function".into(),
            "deploy with the template (sam deploy), or add a rule for source aws.ecr, detail-type ECR Image Action, targeting the function".into())));
    }
}

/// The repositories the push rule names exist (or, for a prefix, at least one matches).
/// The repositories the push rule names exist, in this account or a registry account (or,
/// for a prefix, at least one matches).
async fn repositories(
    clients: &Clients,
    function: &Function,
    registry_accounts: &[String],
    filter: &Value,
    list: &mut Checklist,
) {
    let names: Vec<String> = filter
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let accounts: Vec<&str> = std::iter::once(function.account.as_str())
        .chain(registry_accounts.iter().map(String::as_str))
        .collect();
    for name in &names {
        let mut found_in = None;
        let mut unreadable = Vec::new();
        for account in &accounts {
            let found = clients
                .ecr
                .describe_repositories()
                .registry_id(*account)
                .repository_names(name)
                .send()
                .await;
            match found {
                Ok(_) => {
                    found_in = Some(*account);
                    break;
                }
                Err(e) => {
                    let described = describe(&e);
                    if described.cause == argocd_ecr_updater::aws_error::Cause::AccessDenied {
                        unreadable.push(format!("{account}: {described}"));
                    }
                }
            }
        }
        match (found_in, unreadable.is_empty()) {
            (Some(account), _) => list.add("repositories", name, Ok(format!("exists in {account}"))),
            (None, false) => list.skip("repositories", name, format!("not in the accounts you may read; unreadable: {}", unreadable.join("; ")),
                format!("aws ecr describe-repositories --registry-id <account> --repository-names {name} (as that account)")),
            (None, true) => list.add("repositories", name, Err((format!("the push rule tracks it, but no account of {accounts:?} has it"),
                format!("create it (aws ecr create-repository --repository-name {name}), fix EcrRepositoryNames, or name its registry with --registry-account")))),
        }
    }
    if let Some(prefix) = filter[0]["prefix"].as_str() {
        let found = clients.ecr.describe_repositories().send().await;
        let matching = found.map(|out| {
            out.repositories()
                .iter()
                .filter(|r| r.repository_name().is_some_and(|n| n.starts_with(prefix)))
                .count()
        });
        let result = match matching {
            Ok(0) => Err((
                format!("no repository starts with `{prefix}`"),
                "fix EcrRepositoryPrefix".to_string(),
            )),
            Ok(n) => Ok(format!("{n} repository(ies) start with `{prefix}`")),
            Err(e) => Err((
                format!("cannot list repositories: {}", describe(&e)),
                "you need ecr:DescribeRepositories".into(),
            )),
        };
        list.add("repositories", format!("prefix {prefix}"), result);
    }
}

/// SQS deletes a message after 14 days; the template alarms at 7.
const OLDEST_ALLOWED: Duration = Duration::from_secs(7 * 24 * 3600);

async fn dead_letters(clients: &Clients, function: &Function, list: &mut Checklist) {
    let config = clients
        .lambda
        .get_function_event_invoke_config()
        .function_name(&function.arn)
        .send()
        .await;
    let destination = config.ok().and_then(|c| {
        c.destination_config()
            .and_then(|d| d.on_failure())
            .and_then(|f| f.destination())
            .map(str::to_string)
    });
    let Some(queue_arn) = destination else {
        list.add("dead-letter queue", "on-failure destination", Err((
            "the function has no on-failure destination: an event that fails three times is dropped".into(),
            "redeploy the template (EventInvokeConfig parks failures in the stack's queue)".into())));
        return;
    };
    let (owner, name) = (arn_part(&queue_arn, 4), arn_part(&queue_arn, 5));
    let url = match clients
        .sqs
        .get_queue_url()
        .queue_name(&name)
        .queue_owner_aws_account_id(&owner)
        .send()
        .await
    {
        Ok(out) => out.queue_url().unwrap_or_default().to_string(),
        Err(e) => {
            let described = describe(&e);
            let missing = described
                .code
                .as_deref()
                .is_some_and(|c| c.contains("NonExistentQueue") || c.contains("QueueDoesNotExist"));
            let fix = if missing {
                "the on-failure destination names a queue that is gone: redeploy the stack, which makes it anew"
            } else {
                "you need sqs:GetQueueUrl on the stack's queue"
            };
            list.add(
                "dead-letter queue",
                &name,
                Err((format!("cannot find it: {described}"), fix.into())),
            );
            return;
        }
    };
    use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
    let depth = clients
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .ok()
        .and_then(|out| {
            out.attributes()
                .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
                .and_then(|n| n.parse::<u64>().ok())
        });
    let redrive = format!(
        "argocd-ecr-updater-cli redrive --queue {url} (dry run; add --apply once the cause is fixed)"
    );
    match depth {
        None => list.add(
            "dead-letter queue",
            &name,
            Err((
                "cannot read its depth".into(),
                "you need sqs:GetQueueAttributes".into(),
            )),
        ),
        Some(0) => list.add("dead-letter queue", &name, Ok("empty".into())),
        Some(n) => {
            // A look at up to ten messages (visibility 0: they stay where they are) for the
            // oldest one's age; SQS has no attribute for it.
            let sampled = clients
                .sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .visibility_timeout(0)
                .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
                .send()
                .await;
            let now_ms = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let oldest = sampled
                .ok()
                .and_then(|out| {
                    out.messages()
                        .iter()
                        .filter_map(|m| {
                            m.attributes()
                                .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                                .and_then(|t| t.parse::<u64>().ok())
                        })
                        .min()
                })
                .map(|sent| Duration::from_millis(now_ms.saturating_sub(sent)));
            let age = oldest.map_or(String::new(), |age| {
                format!(", the oldest seen {} day(s) old", age.as_secs() / 86_400)
            });
            let expiring = oldest.is_some_and(|age| age >= OLDEST_ALLOWED);
            let detail = format!(
                "{n} event(s) parked{age}{}",
                if expiring {
                    "; SQS deletes them at 14 days"
                } else {
                    ""
                }
            );
            list.add("dead-letter queue", &name, Err((detail, redrive)));
        }
    }
}

/// The function's role, assumed to check RBAC and secrets as the function sees them.
async fn assume_function_role(
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

/// One cluster: it exists, lets access entries in, maps the role, and can be reached.
async fn cluster(
    clients: &Clients,
    function: &Function,
    spec: &argocd_ecr_updater::config::ClusterSpec,
    group: &str,
    list: &mut Checklist,
) -> Option<ClusterAccess> {
    let area = "cluster";
    if let Some(access) = &spec.access {
        list.skip(
            area,
            &spec.name,
            "its endpoint and CA are configured; DescribeCluster and access entries are not read"
                .into(),
            format!(
                "aws eks list-access-entries --cluster-name {} (in the cluster's account)",
                spec.name
            ),
        );
        return Some(access.clone());
    }
    if spec.role_arn.is_some() {
        list.skip(
            area,
            &spec.name,
            "described with a role of another account; checked there, not here".into(),
            format!(
                "aws eks describe-cluster --name {} --query cluster.accessConfig (as that account)",
                spec.name
            ),
        );
        return None;
    }
    let region = spec
        .region
        .clone()
        .unwrap_or_else(|| function.region.clone());
    let eks = aws_sdk_eks::Client::from_conf(
        aws_sdk_eks::config::Builder::from(&clients.sdk)
            .region(aws_config::Region::new(region.clone()))
            .build(),
    );
    let described = match eks.describe_cluster().name(&spec.name).send().await {
        Ok(out) => out.cluster,
        Err(e) => {
            list.add(area, &spec.name, Err((format!("cannot describe it in {region}: {}", describe(&e)),
                format!("check the name and region (Clusters' \"region\"); aws eks list-clusters --region {region}"))));
            return None;
        }
    };
    let cluster = described?;
    list.add(area, &spec.name, Ok(format!("found in {region}")));
    let mode = cluster
        .access_config()
        .and_then(|a| a.authentication_mode())
        .map_or("CONFIG_MAP", |m| m.as_str())
        .to_string();
    let entries_allowed = mode == "API" || mode == "API_AND_CONFIG_MAP";
    list.add(area, format!("{} authentication mode", spec.name), if entries_allowed {
        Ok(format!("{mode}: access entries apply"))
    } else {
        Err((format!("{mode}: access entries are refused, so CreateAccessEntry fails and the role is unknown to the cluster"),
            format!("aws eks update-cluster-config --name {} --region {region} --access-config authenticationMode=API_AND_CONFIG_MAP (or map the role in aws-auth and deploy with CreateAccessEntry=false)", spec.name)))
    });
    if entries_allowed {
        access_entry(&eks, &spec.name, &region, &function.role, group, list).await;
    }
    network(&cluster, function, &spec.name, list);
    let endpoint = cluster.endpoint()?.to_string();
    let ca = cluster.certificate_authority().and_then(|c| c.data())?;
    argocd_ecr_updater::config::decode_ca(ca)
        .ok()
        .map(|ca_pem| ClusterAccess { endpoint, ca_pem })
}

async fn access_entry(
    eks: &aws_sdk_eks::Client,
    cluster: &str,
    region: &str,
    role: &str,
    group: &str,
    list: &mut Checklist,
) {
    let name = format!("{cluster} access entry");
    let create = format!(
        "aws eks create-access-entry --cluster-name {cluster} --region {region} --principal-arn {role} --type STANDARD --kubernetes-groups {group}"
    );
    let entry = eks
        .describe_access_entry()
        .cluster_name(cluster)
        .principal_arn(role)
        .send()
        .await;
    let result = match entry {
        Ok(out) => {
            let groups: Vec<String> = out
                .access_entry()
                .map(|e| e.kubernetes_groups().to_vec())
                .unwrap_or_default();
            if groups.iter().any(|g| g == group) {
                Ok(format!("maps the role to group {group}"))
            } else {
                Err((
                    format!(
                        "maps the role to {groups:?}, not {group}: deploy/rbac.yaml binds {group}"
                    ),
                    format!(
                        "aws eks update-access-entry --cluster-name {cluster} --region {region} --principal-arn {role} --kubernetes-groups {group}"
                    ),
                ))
            }
        }
        Err(e) => Err((
            format!("none for the function's role: {}", describe(&e)),
            create,
        )),
    };
    list.add("cluster", name, result);
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
) -> (Result<String, (String, String)>, Option<(String, String)>) {
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
fn network(
    cluster: &aws_sdk_eks::types::Cluster,
    function: &Function,
    name: &str,
    list: &mut Checklist,
) {
    let Some(vpc) = cluster.resources_vpc_config() else {
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
    list.add("cluster", format!("{name} endpoint"), result);
    if let Some((detail, by_hand)) = unread {
        list.skip("cluster", format!("{name} network path"), detail, by_hand);
    }
}

/// `SelfSubjectAccessReview` for every verb and resource the function uses, as its role.
async fn rbac(
    config: &Config,
    spec: &argocd_ecr_updater::config::ClusterSpec,
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

async fn git_secrets(
    clients: &Clients,
    config: &Config,
    role: Option<&aws_credential_types::Credentials>,
    list: &mut Checklist,
) {
    let secrets = match role {
        Some(role) => aws_sdk_secretsmanager::Client::from_conf(
            aws_sdk_secretsmanager::config::Builder::from(&clients.sdk)
                .credentials_provider(role.clone())
                .build(),
        ),
        None => clients.secrets.clone(),
    };
    let reader = if role.is_some() {
        "the function's role"
    } else {
        "you (not the function's role)"
    };
    for arn in &config.git.credential_secret_arns {
        let read = secrets.get_secret_value().secret_id(arn).send().await;
        let result = match read {
            Ok(out) => match out.secret_string() {
                Some(text) => argocd_ecr_updater::credentials_secret_kind(arn, text)
                    .map(|kind| format!("readable by {reader}; holds {kind}"))
                    .map_err(|why| (why, "store {\"token\": \"...\"} or githubAppID, githubAppInstallationID and githubAppPrivateKey, optionally with \"url\" (docs/git-write-back.md)".to_string())),
                None => Err(("it has no SecretString".into(), "store the credentials as JSON text".into())),
            },
            Err(e) => Err((format!("{reader} cannot read it: {}", describe(&e)), "list it in GitCredentialsSecretArns (the template grants exactly those), and allow the role in its key policy if it uses a customer managed key".into())),
        };
        list.add("git credentials", arn, result);
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
    fn an_elf_header_names_the_architecture_it_was_built_for() {
        let header = |machine: u16| {
            let mut h = [0u8; 20];
            h[..4].copy_from_slice(b"\x7fELF");
            h[18..20].copy_from_slice(&machine.to_le_bytes());
            h
        };
        assert_eq!(elf_architecture(&header(183)), Ok("arm64"));
        assert_eq!(elf_architecture(&header(62)), Ok("x86_64"));
        assert_eq!(elf_architecture(&header(40)), Ok("an unknown machine"));
        let mut script = header(62);
        script[..4].copy_from_slice(b"#!/b");
        assert!(elf_architecture(&script).is_err());
    }

    #[test]
    fn a_private_endpoint_seen_from_the_clusters_vpc_leaves_its_security_group_to_check() {
        let (result, left) = reachability(&endpoint(false, true, &[]), Some("vpc-cluster"));
        assert!(result.is_ok());
        let (detail, by_hand) = left.unwrap();
        assert!(detail.contains("sg-cluster"), "{detail}");
        assert!(by_hand.contains("describe-security-groups --group-ids sg-cluster"));
    }
}
