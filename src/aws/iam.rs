//! The IAM actions the function's role must allow: one row per AWS SDK operation the function
//! calls, and the few Lambda itself performs with the role. The template's role grants exactly
//! these; a test finds every SDK call in the source and fails when one has no row here, so a
//! new call cannot ship without its grant (or a grant outlive its call).

/// An AWS SDK operation the function calls, and the IAM action that allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SdkCall {
    /// The SDK crate's service, as in `aws-sdk-<service>`.
    pub service: &'static str,
    /// The fluent builder's method name (`describe_images`).
    pub operation: &'static str,
    pub action: &'static str,
    /// When the call is made, which is when the template grants it.
    pub when: &'static str,
}

const fn call(
    service: &'static str,
    operation: &'static str,
    action: &'static str,
    when: &'static str,
) -> SdkCall {
    SdkCall {
        service,
        operation,
        action,
        when,
    }
}

/// Every SDK operation the function (not the laptop CLI, which runs with its user's
/// credentials) calls.
pub const SDK_CALLS: &[SdkCall] = &[
    call(
        "ecr",
        "describe_images",
        "ecr:DescribeImages",
        "always: tags and push times",
    ),
    call(
        "ecr",
        "batch_get_image",
        "ecr:BatchGetImage",
        "platforms, signatures and commit statuses: manifests",
    ),
    call(
        "ecr",
        "describe_image_scan_findings",
        "ecr:DescribeImageScanFindings",
        "a scan gate",
    ),
    call(
        "ecr",
        "describe_image_signing_status",
        "ecr:DescribeImageSigningStatus",
        "a managed-signing gate",
    ),
    call(
        "ecr",
        "get_download_url_for_layer",
        "ecr:GetDownloadUrlForLayer",
        "signature payloads and Notation envelopes; image configs for commit statuses",
    ),
    call(
        "ecr",
        "list_image_referrers",
        "ecr:BatchGetImage",
        "a signing-profile gate with NOTATION_TRUST_ROOTS: the digest's Notation signatures",
    ),
    call(
        "ecr",
        "get_authorization_token",
        "ecr:GetAuthorizationToken",
        "registry API reads",
    ),
    call(
        "eks",
        "describe_cluster",
        "eks:DescribeCluster",
        "a cluster's endpoint and CA",
    ),
    call(
        "sns",
        "publish",
        "sns:Publish",
        "decision reports to a topic",
    ),
    call(
        "secretsmanager",
        "get_secret_value",
        "secretsmanager:GetSecretValue",
        "git tokens, cosign keys, NOTATION_TRUST_ROOTS_SECRET_ARN at cold start",
    ),
    call(
        "sts",
        "assume_role",
        "sts:AssumeRole",
        "clusters or registries behind another role",
    ),
    call(
        "codecommit",
        "get_repository",
        "codecommit:GetRepository",
        "CodeCommit write-back",
    ),
    call(
        "codecommit",
        "get_branch",
        "codecommit:GetBranch",
        "CodeCommit write-back",
    ),
    call(
        "codecommit",
        "get_file",
        "codecommit:GetFile",
        "CodeCommit write-back",
    ),
    call(
        "codecommit",
        "create_branch",
        "codecommit:CreateBranch",
        "CodeCommit write-back",
    ),
    call(
        "codecommit",
        "create_commit",
        "codecommit:CreateCommit",
        "CodeCommit write-back",
    ),
    call(
        "codecommit",
        "create_pull_request",
        "codecommit:CreatePullRequest",
        "CodeCommit pull requests",
    ),
    call(
        "codecommit",
        "list_pull_requests",
        "codecommit:ListPullRequests",
        "CodeCommit pull requests",
    ),
    call(
        "codecommit",
        "get_pull_request",
        "codecommit:GetPullRequest",
        "CodeCommit pull requests",
    ),
    call(
        "cloudwatch",
        "describe_alarms",
        "cloudwatch:DescribeAlarms",
        "rollout verification by the alarms an Application names",
    ),
    call(
        "cloudwatch",
        "describe_alarm_history",
        "cloudwatch:DescribeAlarmHistory",
        "rollout verification: alarm state changes between checks",
    ),
    call(
        "sqs",
        "send_message",
        "sqs:SendMessage",
        "a sweep of a large fleet: its shards to the sweep queue",
    ),
];

/// What Lambda does with the function's role on its behalf, with no call in our code.
pub const PLATFORM_ACTIONS: &[(&str, &str)] = &[
    ("logs:CreateLogStream", "Lambda writes the function's log"),
    ("logs:PutLogEvents", "Lambda writes the function's log"),
    (
        "sqs:SendMessage",
        "Lambda parks a failed invocation in the dead-letter queue",
    ),
    (
        "sqs:ReceiveMessage",
        "Lambda's event source mapping reads the sweep queue",
    ),
    (
        "sqs:DeleteMessage",
        "Lambda's event source mapping removes a shard that ran",
    ),
    (
        "sqs:GetQueueAttributes",
        "Lambda's event source mapping reads the sweep queue",
    ),
    (
        "ec2:CreateNetworkInterface",
        "Lambda attaches the function to a VPC",
    ),
    (
        "ec2:DescribeNetworkInterfaces",
        "Lambda attaches the function to a VPC",
    ),
    (
        "ec2:DeleteNetworkInterface",
        "Lambda attaches the function to a VPC",
    ),
    (
        "ec2:AssignPrivateIpAddresses",
        "Lambda attaches the function to a VPC",
    ),
    (
        "ec2:UnassignPrivateIpAddresses",
        "Lambda attaches the function to a VPC",
    ),
];

/// Every action the role needs: the SDK calls' and the platform's, each once.
pub fn required_actions() -> std::collections::BTreeSet<&'static str> {
    SDK_CALLS
        .iter()
        .map(|c| c.action)
        .chain(PLATFORM_ACTIONS.iter().map(|(action, _)| *action))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operations IAM authorizes with another operation's action, as the API reference says:
    /// "The IAM principal invoking this operation must have the ecr:BatchGetImage permission"
    /// (ECR `ListImageReferrers`).
    const AUTHORIZED_AS: [(&str, &str); 1] = [("list_image_referrers", "ecr:BatchGetImage")];

    #[test]
    fn each_action_is_the_operation_named_as_iam_names_it() {
        for call in SDK_CALLS {
            if let Some((_, action)) = AUTHORIZED_AS.iter().find(|(op, _)| *op == call.operation) {
                assert_eq!(call.action, *action, "{call:?}");
                continue;
            }
            let camel: String = call
                .operation
                .split('_')
                .map(|word| {
                    let mut chars = word.chars();
                    chars.next().map_or_else(String::new, |first| {
                        first.to_ascii_uppercase().to_string() + chars.as_str()
                    })
                })
                .collect();
            assert_eq!(call.action, format!("{}:{camel}", call.service), "{call:?}");
        }
    }
}
