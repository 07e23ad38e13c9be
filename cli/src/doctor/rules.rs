//! The EventBridge rules that invoke the function: each enabled as the stack means it, each
//! target parking what it cannot deliver in a queue that exists, each allowed to invoke the
//! function by its resource policy; and the repositories the push rule tracks.

use serde_json::Value;

use argocd_ecr_updater::aws::aws_error::{Cause, describe};

use super::policy;
use super::queues::{QueueLookup, QueuePolicy, QueueState};
use super::{Checklist, Clients, Function, arn_part, failed_call};

pub(super) async fn rules(
    clients: &Clients,
    function: &Function,
    registry_accounts: &[String],
    queues: &mut QueueLookup,
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
                Err(failed_call(
                    "ListRuleNamesByTarget",
                    "events:ListRuleNamesByTarget",
                    &describe(&e),
                )),
            );
            return;
        }
    };
    let policy = InvokePolicy::read(clients, function).await;
    let mut push_rule = false;
    for name in &names {
        let rule = match clients.events.describe_rule().name(name).send().await {
            Ok(rule) => rule,
            Err(e) => {
                list.add(
                    "rules",
                    name,
                    Err(failed_call(
                        "DescribeRule",
                        "events:DescribeRule",
                        &describe(&e),
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
        let state = if enabled {
            Ok("enabled".to_string())
        } else if is_push {
            Err((
                "disabled: pushes do not reach the function".to_string(),
                format!("aws events enable-rule --name {name}"),
            ))
        } else {
            Ok("disabled (as the stack's parameters set it)".to_string())
        };
        list.add("rules", name, state);
        let rule_arn = rule.arn().unwrap_or_default().to_string();
        dead_letter(clients, function, name, &rule_arn, queues, list).await;
        list.add(
            "rules",
            format!("{name} invoke permission"),
            policy.allows(function, name, &rule_arn),
        );
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

/// The rule's target for the function parks what EventBridge cannot deliver in a queue that
/// exists.
async fn dead_letter(
    clients: &Clients,
    function: &Function,
    rule: &str,
    rule_arn: &str,
    queues: &mut QueueLookup,
    list: &mut Checklist,
) {
    let name = format!("{rule} dead-letter queue");
    let targets = match clients
        .events
        .list_targets_by_rule()
        .rule(rule)
        .send()
        .await
    {
        Ok(out) => out.targets().to_vec(),
        Err(e) => {
            list.add(
                "rules",
                name,
                Err(failed_call(
                    "ListTargetsByRule",
                    "events:ListTargetsByRule",
                    &describe(&e),
                )),
            );
            return;
        }
    };
    let parked: Vec<Option<String>> = targets
        .iter()
        .filter(|t| t.arn() == function.arn)
        .map(|t| {
            t.dead_letter_config()
                .and_then(|d| d.arn())
                .map(str::to_string)
        })
        .collect();
    let result = match parked.as_slice() {
        [] => Err((
            "the rule lists the function, but ListTargetsByRule shows no target for it".into(),
            "run doctor again; the target may have been removed a moment ago".into(),
        )),
        [Some(queue), ..] => {
            let queue_name = arn_part(queue, 5);
            match queues.state(clients, queue, &format!("rule {rule}")).await {
                QueueState::Exists(_) => {
                    parks(queues.policy(clients, queue).await, queue, rule_arn)
                }
                QueueState::Gone => Err((
                    format!(
                        "parks undeliverable events in {queue_name}, which is gone: they are lost"
                    ),
                    format!("recreate the queue (see the dead-letter queue {queue_name} check)"),
                )),
                QueueState::Unreadable(described) => {
                    Err(failed_call("GetQueueUrl", "sqs:GetQueueUrl", &described))
                }
            }
        }
        [None, ..] => Err((
            "its target has no dead-letter queue: events EventBridge cannot deliver are lost"
                .into(),
            "redeploy the template (every rule's target parks failures in the stack's queue)"
                .into(),
        )),
    };
    list.add("rules", name, result);
}

/// Tags that can move are a risk worth a warning: an Application that tracks by tag keeps the
/// tag it runs when the tag is pushed again to another image, so no push event names a new
/// tag to decide on, and what runs depends on when each node last pulled.
fn tag_mutability(name: &str, repository: &aws_sdk_ecr::types::Repository, list: &mut Checklist) {
    use aws_sdk_ecr::types::ImageTagMutability;
    let line = format!("{name} tag mutability");
    let advice = format!(
        "aws ecr put-image-tag-mutability --repository-name {name} --image-tag-mutability IMMUTABLE; or track it with update-strategy digest, which follows a moving tag"
    );
    match repository.image_tag_mutability() {
        Some(ImageTagMutability::Immutable) | None => {
            list.add("repositories", line, Ok("IMMUTABLE: a tag names one image for good".into()));
        }
        Some(ImageTagMutability::ImmutableWithExclusion) => {
            let moving: Vec<&str> = repository
                .image_tag_mutability_exclusion_filters()
                .iter()
                .map(|f| f.filter())
                .collect();
            list.warn("repositories", line, format!("IMMUTABLE_WITH_EXCLUSION: tags matching {moving:?} can be pushed again to another image; an Application tracking such a tag by name is not moved by the push"), advice);
        }
        Some(other) => list.warn("repositories", line, format!("{}: a tag can be pushed again to another image; an Application tracking a tag by name is not moved by the push, and nodes run whichever image they pulled last", other.as_str()), advice),
    }
}

/// Whether the queue's policy lets EventBridge send what `rule_arn` cannot deliver: without
/// it, EventBridge's `SendMessage` is refused and the event is lost after all.
fn parks(policy: QueuePolicy, queue: &str, rule_arn: &str) -> Result<String, super::Failure> {
    let queue_name = arn_part(queue, 5);
    let fix = format!(
        "put back the stack's queue policy on {queue_name} (the DeadLetterQueuePolicy document in `aws cloudformation get-template`; an Allow for events.amazonaws.com to sqs:SendMessage with aws:SourceArn {rule_arn}) with aws sqs set-queue-attributes"
    );
    let document = match policy {
        QueuePolicy::Document(document) => document,
        QueuePolicy::None => {
            return Err((
                format!(
                    "parks undeliverable events in {queue_name}, which has no queue policy: EventBridge may not send to it, so they are lost"
                ),
                fix,
            ));
        }
        QueuePolicy::Unreadable(described) => {
            return Err(failed_call(
                "GetQueueAttributes",
                "sqs:GetQueueAttributes",
                &described,
            ));
        }
    };
    let request = policy::Request {
        service: "events.amazonaws.com",
        action: "sqs:SendMessage",
        resource: queue,
        source_arn: rule_arn,
    };
    match policy::evaluate(&document, &request) {
        policy::Verdict::Allowed(_) => Ok(format!("parks undeliverable events in {queue_name}")),
        policy::Verdict::NotAllowed => Err((
            format!(
                "parks undeliverable events in {queue_name}, whose policy does not let EventBridge send for this rule: they are lost"
            ),
            fix,
        )),
        policy::Verdict::Denied(sid) => Err((
            format!(
                "parks undeliverable events in {queue_name}, whose policy denies EventBridge (statement {sid}): they are lost"
            ),
            fix,
        )),
        policy::Verdict::Undecided(sid) => Err((
            format!(
                "statement {sid} of {queue_name}'s policy has a condition doctor does not judge, so whether EventBridge may park there is not known"
            ),
            format!(
                "read it: aws sqs get-queue-attributes --attribute-names Policy --queue-url <{queue_name}'s URL>"
            ),
        )),
    }
}

/// The function's resource policy, read once: which rules EventBridge may invoke it for.
enum InvokePolicy {
    Document(Value),
    /// `GetPolicy` answered that the function has no resource policy at all.
    None,
    Unreadable(argocd_ecr_updater::aws::aws_error::Described),
}

impl InvokePolicy {
    async fn read(clients: &Clients, function: &Function) -> Self {
        match clients
            .lambda
            .get_policy()
            .function_name(&function.arn)
            .send()
            .await
        {
            Ok(out) => Self::Document(
                serde_json::from_str(out.policy().unwrap_or("{}")).unwrap_or_default(),
            ),
            Err(e) => {
                let described = describe(&e);
                if described.code.as_deref() == Some("ResourceNotFoundException")
                    && described.cause != Cause::AccessDenied
                {
                    Self::None
                } else {
                    Self::Unreadable(described)
                }
            }
        }
    }

    /// Whether the policy lets `events.amazonaws.com` invoke the function for events from
    /// `rule_arn`, as IAM decides it (an explicit deny wins).
    fn allows(
        &self,
        function: &Function,
        rule: &str,
        rule_arn: &str,
    ) -> Result<String, super::Failure> {
        let add = format!(
            "aws lambda add-permission --function-name {} --statement-id {rule} --action lambda:InvokeFunction --principal events.amazonaws.com --source-arn {rule_arn} (an unchanged sam deploy does not restore a permission removed outside CloudFormation; terraform apply does)",
            function.name
        );
        let document = match self {
            Self::Document(document) => document,
            Self::None => {
                return Err((
                    "the function has no resource policy: EventBridge may not invoke it, so every event this rule matches fails to deliver".into(),
                    add,
                ));
            }
            Self::Unreadable(described) => {
                return Err(failed_call("GetPolicy", "lambda:GetPolicy", described));
            }
        };
        let request = policy::Request {
            service: "events.amazonaws.com",
            action: "lambda:InvokeFunction",
            resource: &function.arn,
            source_arn: rule_arn,
        };
        match policy::evaluate(document, &request) {
            policy::Verdict::Allowed(_) => {
                Ok("EventBridge may invoke the function for this rule".into())
            }
            policy::Verdict::NotAllowed => Err((
                format!(
                    "the function's resource policy does not let EventBridge invoke it for {rule_arn}: every event this rule matches fails to deliver (and is parked, or lost)"
                ),
                add,
            )),
            policy::Verdict::Denied(sid) => Err((
                format!(
                    "the function's resource policy denies EventBridge invoking it for {rule_arn} (statement {sid}): every event this rule matches fails to deliver"
                ),
                format!(
                    "remove or narrow statement {sid} (aws lambda remove-permission --function-name {} --statement-id {sid})",
                    function.name
                ),
            )),
            policy::Verdict::Undecided(sid) => Err((
                format!(
                    "statement {sid} of the function's resource policy has a condition doctor does not judge, so whether EventBridge may invoke it for {rule_arn} is not known"
                ),
                format!(
                    "read it: aws lambda get-policy --function-name {}",
                    function.name
                ),
            )),
        }
    }
}

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
                Ok(out) => {
                    found_in = Some(*account);
                    if let Some(repository) = out.repositories().first() {
                        tag_mutability(name, repository, list);
                    }
                    break;
                }
                Err(e) => {
                    let described = describe(&e);
                    if described.code.as_deref() != Some("RepositoryNotFoundException") {
                        unreadable.push(format!("{account}: {described}"));
                    }
                }
            }
        }
        match (found_in, unreadable.is_empty()) {
            (Some(account), _) => list.add("repositories", name, Ok(format!("exists in {account}"))),
            (None, false) => list.skip("repositories", name, format!("not in the accounts you may read; DescribeRepositories failed in {}", unreadable.join("; ")),
                format!("aws ecr describe-repositories --registry-id <account> --repository-names {name} (as that account)")),
            (None, true) => list.add("repositories", name, Err((format!("the push rule tracks it, but no account of {accounts:?} has it"),
                format!("create it (aws ecr create-repository --repository-name {name}), fix EcrRepositoryNames, or name its registry with --registry-account")))),
        }
    }
    if let Some(prefix) = filter[0]["prefix"].as_str() {
        // Every page: an account with more repositories than one page holds is common.
        let mut pages = clients
            .ecr
            .describe_repositories()
            .into_paginator()
            .items()
            .send();
        let mut matching = 0usize;
        let mut failed = None;
        while let Some(item) = pages.next().await {
            match item {
                Ok(repository) => {
                    if repository
                        .repository_name()
                        .is_some_and(|n| n.starts_with(prefix))
                    {
                        matching += 1;
                    }
                }
                Err(e) => {
                    failed = Some(describe(&e));
                    break;
                }
            }
        }
        let result = match (failed, matching) {
            (Some(described), _) => Err(failed_call(
                "DescribeRepositories",
                "ecr:DescribeRepositories",
                &described,
            )),
            (None, 0) => Err((
                format!("no repository starts with `{prefix}`"),
                "fix EcrRepositoryPrefix".to_string(),
            )),
            (None, n) => Ok(format!("{n} repository(ies) start with `{prefix}`")),
        };
        list.add("repositories", format!("prefix {prefix}"), result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn function() -> Function {
        Function {
            arn: "arn:aws:lambda:ap-northeast-2:123456789012:function:fn".into(),
            name: "fn".into(),
            region: "ap-northeast-2".into(),
            account: "123456789012".into(),
            role: "arn:aws:iam::123456789012:role/r".into(),
            vpc: None,
            subnets: Vec::new(),
            security_groups: Vec::new(),
            config: None,
        }
    }

    const RULE: &str = "arn:aws:events:ap-northeast-2:123456789012:rule/stack-FunctionEcrPush-1";

    #[test]
    fn eventbridge_may_invoke_the_function_only_by_a_statement_that_covers_the_rule() {
        let allow = |extra: serde_json::Value| {
            let mut s = json!({"Effect": "Allow", "Action": "lambda:InvokeFunction",
                "Principal": {"Service": "events.amazonaws.com"}});
            for (k, v) in extra.as_object().unwrap() {
                s[k] = v.clone();
            }
            s
        };
        let for_rule = |arn: &str| json!({"Condition": {"ArnLike": {"AWS:SourceArn": arn}}});
        // (statement, allows the rule)
        let cases = [
            (allow(for_rule(RULE)), true),
            (allow(json!({})), true),
            (
                allow(for_rule(
                    "arn:aws:events:ap-northeast-2:123456789012:rule/stack-*",
                )),
                true,
            ),
            (
                allow(for_rule(
                    "arn:aws:events:ap-northeast-2:123456789012:rule/other",
                )),
                false,
            ),
            (
                allow(json!({"Principal": {"Service": "s3.amazonaws.com"}})),
                false,
            ),
            (allow(json!({"Action": "lambda:GetFunction"})), false),
            (allow(json!({"Effect": "Deny"})), false),
            (
                allow(json!({"Condition": {"ArnEquals": {"aws:sourcearn": RULE}}})),
                true,
            ),
        ];
        for (statement, allows) in cases {
            let policy = InvokePolicy::Document(json!({"Statement": [statement.clone()]}));
            let result = policy.allows(&function(), "stack-FunctionEcrPush-1", RULE);
            assert_eq!(result.is_ok(), allows, "{statement}: {result:?}");
            if statement["Effect"] == "Deny" {
                let (detail, fix) = result.unwrap_err();
                assert!(detail.contains("denies EventBridge"), "{detail}");
                assert!(fix.contains("aws lambda remove-permission"), "{fix}");
            } else if let Err((_, fix)) = result {
                assert!(
                    fix.starts_with("aws lambda add-permission --function-name fn"),
                    "{fix}"
                );
                assert!(fix.contains(&format!("--source-arn {RULE}")), "{fix}");
            }
        }
    }

    #[test]
    fn a_function_without_any_resource_policy_fails_every_rule() {
        let result = InvokePolicy::None.allows(&function(), "r", RULE);
        let (detail, fix) = result.unwrap_err();
        assert!(detail.contains("no resource policy"), "{detail}");
        assert!(fix.contains("add-permission"), "{fix}");
    }
}
