//! `argocd-ecr-updater-cli doctor`: checks a real deployment from a laptop, with the
//! operator's credentials, in one run: the function and its configuration, the binary's
//! architecture, the rules that feed it and whether EventBridge may invoke it, each
//! cluster's authentication mode, network and access entry, RBAC as the function's role, the
//! tracked repositories, the dead-letter queues and on-failure destination, and the Git
//! credentials secrets. Each check says what is wrong and the command or setting that fixes
//! it; a call that fails is reported as that call failing (which call, why), never as the
//! thing it reads being absent; secrets are never printed.

mod alarms;
mod capability;
mod cluster;
mod ec2;
mod function;
mod images;
mod network;
mod policy;
mod queues;
mod rbac;
mod rules;
mod secrets;
mod sweep;

use std::process::ExitCode;

use serde::Serialize;

use crate::common::{print_json, sdk_config};
use argocd_ecr_updater::aws::aws_error::{Cause, Described};

pub struct DoctorRequest {
    pub target: Target,
    /// Registry accounts holding tracked repositories (a central registry).
    pub registry_accounts: Vec<String>,
    pub region: Option<String>,
    /// The group the access entry must map the role to (the stack's `KubernetesGroup`).
    pub kubernetes_group: String,
    /// Check RBAC and secrets as the function's role, assumed (its trust policy must let the
    /// operator), instead of asking the API server about the role's subject as the operator.
    pub assume_role: bool,
    /// The topic the alarms notify (the stack's `AlarmTopicArn`).
    pub alarm_topic: Option<String>,
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
    /// Works, with a risk worth knowing; `fix` says how to remove it. Does not fail the run.
    Warn,
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

/// A failed check: what is wrong, and what fixes it.
type Failure = (String, String);

/// The checks of one run, in order.
#[derive(Default)]
struct Checklist(Vec<Check>);

impl Checklist {
    fn add(
        &mut self,
        area: &'static str,
        name: impl Into<String>,
        result: Result<String, Failure>,
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

    fn warn(&mut self, area: &'static str, name: impl Into<String>, risk: String, advice: String) {
        self.0.push(Check {
            area,
            name: name.into(),
            status: Status::Warn,
            detail: risk,
            fix: Some(advice),
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

/// A call doctor makes that failed: named, with its cause, and the fix the cause calls for.
/// The operator's own `AccessDenied` is the operator's permission, not a fault of the stack.
fn failed_call(call: &str, action: &str, described: &Described) -> Failure {
    let detail = format!("{call} failed: {described}");
    let fix = match described.cause {
        Cause::AccessDenied => format!(
            "your credentials may not call {action}: allow it for the identity you run doctor as (this is your permission, not the deployment's), or ask someone who may"
        ),
        Cause::Throttling => "AWS throttled the call: run doctor again in a minute".into(),
        Cause::ExpiredCredentials | Cause::NoCredentials => {
            "refresh your AWS credentials and run doctor again".into()
        }
        Cause::Dns | Cause::Connect | Cause::Timeout => {
            "check --region and your network (a proxy, a VPN), then run doctor again".into()
        }
        Cause::Service | Cause::Other => format!(
            "run doctor again; if it fails the same way, make the call by hand (aws CLI: {action}) to see AWS's whole answer"
        ),
    };
    (detail, fix)
}

/// The AWS clients of one run.
struct Clients {
    lambda: aws_sdk_lambda::Client,
    events: aws_sdk_eventbridge::Client,
    ecr: aws_sdk_ecr::Client,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    secrets: aws_sdk_secretsmanager::Client,
    sts: aws_sdk_sts::Client,
    tagging: aws_sdk_resourcegroupstagging::Client,
    ec2: ec2::Ec2,
    sdk: aws_config::SdkConfig,
}

pub async fn run(request: DoctorRequest) -> ExitCode {
    let sdk = sdk_config(request.region.clone()).await;
    let clients = Clients {
        lambda: aws_sdk_lambda::Client::new(&sdk),
        events: aws_sdk_eventbridge::Client::new(&sdk),
        ecr: aws_sdk_ecr::Client::new(&sdk),
        sqs: aws_sdk_sqs::Client::new(&sdk),
        sns: aws_sdk_sns::Client::new(&sdk),
        secrets: aws_sdk_secretsmanager::Client::new(&sdk),
        sts: aws_sdk_sts::Client::new(&sdk),
        tagging: aws_sdk_resourcegroupstagging::Client::new(&sdk),
        ec2: ec2::Ec2::new(&sdk),
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
                Status::Warn => "!",
            };
            println!("{mark} {}: {} — {}", check.area, check.name, check.detail);
            if let Some(fix) = &check.fix {
                let label = match check.status {
                    Status::Fail => "fix",
                    Status::Warn => "to remove the risk",
                    Status::Ok | Status::Skipped => "check by hand",
                };
                println!("    {label}: {fix}");
            }
        }
        let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
        let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
        println!(
            "{} check(s), {failed} failed, {warned} warning(s)",
            checks.len()
        );
    }
    if checks.iter().any(|c| c.status == Status::Fail) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Every check, in the order a deployment is built: function, rules, queues, clusters, RBAC,
/// secrets. A check whose input is missing (no function found) ends the run there.
async fn diagnose(clients: &Clients, request: &DoctorRequest) -> Vec<Check> {
    let mut list = Checklist::default();
    let name = match &request.target {
        Target::Function(name) => name.clone(),
        Target::Stack(stack) => match function::stack_function(clients, stack, &mut list).await {
            Some(arn) => arn,
            None => return list.0,
        },
    };
    let Some(function) = function::function(clients, &name, &mut list).await else {
        return list.0;
    };
    let mut queues = queues::QueueLookup::default();
    rules::rules(
        clients,
        &function,
        &request.registry_accounts,
        &mut queues,
        &mut list,
    )
    .await;
    queues::dead_letters(clients, &function, &mut queues, &mut list).await;
    alarms::alarm_topic(clients, request.alarm_topic.as_deref(), &mut list).await;
    let Some(config) = &function.config else {
        return list.0;
    };
    sweep::sweep(clients, &function, config, &mut list).await;
    let network = network::vpc(&clients.ec2, &function, config, &mut list).await;
    let role = if request.assume_role {
        rbac::assume_function_role(clients, &function, &mut list).await
    } else {
        None
    };
    for spec in &config.clusters {
        capability::capability(clients, config, spec, &function.region, &mut list).await;
        let view = cluster::cluster(
            clients,
            config,
            &function,
            spec,
            &request.kubernetes_group,
            network.as_ref(),
            &mut list,
        )
        .await;
        let Some(view) = view else { continue };
        if let Some(kube) = &view.operator {
            images::archived(clients, config, spec, &function.region, kube, &mut list).await;
        }
        if let Some(role) = &role {
            let provider =
                aws_credential_types::provider::SharedCredentialsProvider::new(role.clone());
            match rbac::client(config, spec, &view.access, provider, &function.region) {
                Ok(kube) => {
                    rbac::rbac(
                        config,
                        spec,
                        rbac::Reviewer::Role { kube: &kube },
                        &mut list,
                    )
                    .await;
                }
                Err(e) => list.add(
                    "rbac",
                    &spec.name,
                    Err((
                        format!("cannot build a client: {e}"),
                        "check the cluster's CA".into(),
                    )),
                ),
            }
        } else if request.assume_role {
            // The role could not be assumed; its line says so.
        } else {
            match (&view.operator, &view.subject) {
                (Some(kube), Some(subject)) => {
                    rbac::rbac(
                        config,
                        spec,
                        rbac::Reviewer::Operator { kube, subject },
                        &mut list,
                    )
                    .await;
                }
                (None, _) => list.skip(
                    "rbac",
                    &spec.name,
                    "no Kubernetes client could be made with your credentials".into(),
                    "kubectl auth can-i --list --as-group <KubernetesGroup>".into(),
                ),
                (_, None) => list.skip(
                    "rbac",
                    &spec.name,
                    "the role maps to no user the cluster knows (see the access entry or aws-auth above), so there is nothing to ask about".into(),
                    "map the role first, then run doctor again".into(),
                ),
            }
        }
    }
    secrets::git_secrets(clients, config, &function, role.as_ref(), &mut list).await;
    list.0
}

/// What `GetFunctionConfiguration` says of the function.
struct Function {
    arn: String,
    name: String,
    region: String,
    account: String,
    role: String,
    vpc: Option<String>,
    /// A VPC function's subnets and security groups.
    subnets: Vec<String>,
    security_groups: Vec<String>,
    config: Option<argocd_ecr_updater::config::Config>,
}

fn arn_part(arn: &str, index: usize) -> String {
    arn.split(':').nth(index).unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(cause: Cause) -> Described {
        Described {
            cause,
            code: Some("SomeCode".into()),
            text: "the service's words".into(),
        }
    }

    #[test]
    fn a_failed_call_names_the_call_and_a_fix_for_its_cause() {
        let cases = [
            (
                Cause::AccessDenied,
                "your credentials may not call events:ListTargetsByRule",
            ),
            (Cause::Throttling, "run doctor again in a minute"),
            (Cause::ExpiredCredentials, "refresh your AWS credentials"),
            (Cause::Dns, "check --region and your network"),
            (Cause::Service, "make the call by hand"),
        ];
        for (cause, fix) in cases {
            let (detail, got) = failed_call(
                "ListTargetsByRule",
                "events:ListTargetsByRule",
                &described(cause),
            );
            assert!(
                detail.starts_with("ListTargetsByRule failed: SomeCode"),
                "{detail}"
            );
            assert!(got.contains(fix), "{cause:?}: {got}");
        }
    }
}
