# The module planned with a mocked AWS provider (no account, no network): what a Terraform user
# gets for the cases that matter, asserted on planned values. `terraform test` (Terraform 1.7+)
# in deploy/terraform, after `terraform init -backend=false`; ./scripts/test runs it.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "768157413559" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { id = "ap-northeast-2" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::768157413559:role/argocd-ecr-updater-role" }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:ap-northeast-2:768157413559:log-group:/aws/lambda/argocd-ecr-updater" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:ap-northeast-2:768157413559:rule/argocd-ecr-updater-rule" }
  }
  mock_resource "aws_lambda_function" {
    defaults = { arn = "arn:aws:lambda:ap-northeast-2:768157413559:function:argocd-ecr-updater" }
  }
}

override_resource {
  target = aws_sqs_queue.dead_letters
  values = {
    arn = "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-dead-letters"
    url = "https://sqs.ap-northeast-2.amazonaws.com/768157413559/argocd-ecr-updater-dead-letters"
  }
}

override_resource {
  target = aws_sqs_queue.sweep_dead_letters
  values = {
    arn = "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep-dead-letters"
    url = "https://sqs.ap-northeast-2.amazonaws.com/768157413559/argocd-ecr-updater-sweep-dead-letters"
  }
}

override_resource {
  target = aws_sqs_queue.sweep
  values = {
    arn = "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep"
    url = "https://sqs.ap-northeast-2.amazonaws.com/768157413559/argocd-ecr-updater-sweep"
  }
}

variables {
  package_file         = "tests/fixtures/bootstrap.zip"
  cluster_name         = "barun-dev"
  ecr_repository_names = ["barun-dev-ecr"]
}

run "names_only" {
  command = apply

  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.rule["ecr-push"].event_pattern).detail["repository-name"] == ["barun-dev-ecr"]
    error_message = "the push rule matches the named repositories"
  }
  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.rule["ecr-push"].event_pattern).detail["image-tag"] == [{ "anything-but" = "" }]
    error_message = "untagged platform manifests are not pushes"
  }
  assert {
    condition = toset([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s.Sid]) == toset([
      "WriteOwnLogs", "ReadTrackedRepositories", "FindTheCluster", "ParkFailedEvents", "SendSweepShards", "ReceiveSweepShards",
    ])
    error_message = "only the base statements without options"
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "ReadTrackedRepositories"]).Resource == ["arn:*:ecr:*:*:repository/barun-dev-ecr"]
    error_message = "the tracked repositories by name"
  }
  assert {
    condition = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "ReadTrackedRepositories"]).Condition == {
      StringEquals = { "aws:ResourceAccount" = ["768157413559"], "aws:RequestedRegion" = "ap-northeast-2" }
    }
    error_message = "repositories pinned to this account and region"
  }
  assert {
    condition = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "FindTheCluster"]) == {
      Sid       = "FindTheCluster", Effect = "Allow", Action = "eks:DescribeCluster"
      Resource  = ["arn:*:eks:*:*:cluster/barun-dev"]
      Condition = { StringEquals = { "aws:ResourceAccount" = "768157413559", "aws:RequestedRegion" = "ap-northeast-2" } }
    }
    error_message = "exactly the named cluster"
  }
  assert {
    condition = alltrue([
      for s in jsondecode(aws_iam_role_policy.function.policy).Statement :
      !contains(flatten([s.Resource]), "*") || contains(["RegistryApiToken", "LambdaVpcNetworking"], s.Sid)
    ])
    error_message = "no statement grants on * but the two AWS cannot scope"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["SWEEP_QUEUE_ARN"] == "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep"
    error_message = "the function knows its sweep queue by ARN"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["SWEEP_QUEUE_URL"] == "https://sqs.ap-northeast-2.amazonaws.com/768157413559/argocd-ecr-updater-sweep"
    error_message = "and by URL"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["CLUSTER_NAME"] == "barun-dev" && aws_lambda_function.function.environment[0].variables["CLUSTERS"] == ""
    error_message = "one cluster"
  }
  assert {
    condition     = aws_lambda_event_source_mapping.sweep.batch_size == 1 && aws_lambda_event_source_mapping.sweep.function_response_types == toset(["ReportBatchItemFailures"]) && aws_lambda_event_source_mapping.sweep.scaling_config[0].maximum_concurrency == 10
    error_message = "one shard an invocation, partial batch responses, the concurrency cap"
  }
  assert {
    condition     = jsondecode(aws_sqs_queue.sweep.redrive_policy).maxReceiveCount == 5 && jsondecode(aws_sqs_queue.sweep.redrive_policy).deadLetterTargetArn == aws_sqs_queue.sweep_dead_letters.arn
    error_message = "shards are parked after three receives"
  }
  assert {
    condition = one(jsondecode(aws_sqs_queue_policy.sweep.policy).Statement) == {
      Sid       = "OnlyTheFunctionSends", Effect = "Deny", Principal = "*", Action = "sqs:SendMessage"
      Resource  = "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep"
      Condition = { ArnNotEquals = { "aws:PrincipalArn" = "arn:aws:iam::768157413559:role/argocd-ecr-updater-role" } }
    }
    error_message = "only the function's role sends shards"
  }
  assert {
    condition = one([for s in jsondecode(aws_sqs_queue_policy.dead_letters.policy).Statement : s if s.Effect == "Deny"]).Condition == {
      ArnNotEquals    = { "aws:PrincipalArn" = "arn:aws:iam::768157413559:role/argocd-ecr-updater-role" }
      StringNotEquals = { "aws:PrincipalServiceName" = "events.amazonaws.com" }
    }
    error_message = "only the function's role and EventBridge send to the dead-letter queue"
  }
  assert {
    condition     = jsondecode(aws_sqs_queue_redrive_allow_policy.dead_letters.redrive_allow_policy) == { redrivePermission = "denyAll" }
    error_message = "no queue redrives into the dead-letter queue"
  }
  assert {
    condition     = jsondecode(aws_sqs_queue_redrive_allow_policy.sweep_dead_letters.redrive_allow_policy) == { redrivePermission = "byQueue", sourceQueueArns = ["arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep"] }
    error_message = "only the sweep queue redrives into the shards' dead-letter queue"
  }
  assert {
    condition     = jsondecode(aws_sqs_queue_redrive_allow_policy.sweep.redrive_allow_policy) == { redrivePermission = "denyAll" }
    error_message = "no queue redrives into the sweep queue: its messages would be trusted as shards and checks"
  }
  assert {
    # Each queue of the module (tests/e2e/terraform.rs finds every aws_sqs_queue block, so a
    # new queue cannot be left out) has its own redrive allow policy: SQS's default allows
    # every queue of the account and region to redrive into it.
    condition = {
      for name, queue in { dead_letters = aws_sqs_queue.dead_letters, sweep = aws_sqs_queue.sweep, sweep_dead_letters = aws_sqs_queue.sweep_dead_letters } :
      name => [for p in [aws_sqs_queue_redrive_allow_policy.dead_letters, aws_sqs_queue_redrive_allow_policy.sweep, aws_sqs_queue_redrive_allow_policy.sweep_dead_letters] : jsondecode(p.redrive_allow_policy).redrivePermission if p.queue_url == queue.id]
      } == {
      dead_letters = ["denyAll"], sweep = ["denyAll"], sweep_dead_letters = ["byQueue"]
    }
    error_message = "every queue says which queues may redrive into it"
  }
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.alarm) == 9 && length(aws_cloudwatch_metric_alarm.rules) == 2 && length(aws_cloudwatch_metric_alarm.sweeps_stopped) == 1 && alltrue([for a in concat(values(aws_cloudwatch_metric_alarm.alarm), values(aws_cloudwatch_metric_alarm.rules), aws_cloudwatch_metric_alarm.sweeps_stopped) : length(coalesce(a.alarm_actions, [])) == 0 && length(coalesce(a.ok_actions, [])) == 0])
    error_message = "the template's twelve alarms, paging nobody without alarm_topic_arn"
  }
  assert {
    condition     = aws_cloudwatch_metric_alarm.sweeps_stopped[0].treat_missing_data == "breaching" && [for q in aws_cloudwatch_metric_alarm.sweeps_stopped[0].metric_query : q.metric[0].period if length(q.metric) > 0] == [1800, 1800]
    error_message = "no sweep for twice the default schedule pages, and no data at all is that case"
  }
  assert {
    condition     = length(aws_cloudwatch_event_permission.registry_accounts) == 0 && keys(aws_eks_access_entry.function) == ["barun-dev"]
    error_message = "no bus permission without registry accounts; one access entry"
  }
  assert {
    condition     = aws_sqs_queue.dead_letters.sqs_managed_sse_enabled == true && aws_sqs_queue.dead_letters.kms_master_key_id == null
    error_message = "SQS-managed encryption by default"
  }
}

run "an_alarm_topic" {
  command = plan
  variables {
    alarm_topic_arn   = "arn:aws:sns:ap-northeast-2:768157413559:oncall"
    reconcile_enabled = false
  }
  assert {
    condition     = alltrue([for a in concat(values(aws_cloudwatch_metric_alarm.alarm), values(aws_cloudwatch_metric_alarm.rules)) : a.alarm_actions == toset(["arn:aws:sns:ap-northeast-2:768157413559:oncall"]) && a.ok_actions == toset(["arn:aws:sns:ap-northeast-2:768157413559:oncall"])])
    error_message = "every alarm pages the topic when it fires and when it clears"
  }
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.sweeps_stopped) == 0
    error_message = "no sweeps-stopped alarm when sweeps are off"
  }
}

run "a_missing_sweep_interval_that_is_not_whole_minutes_is_refused" {
  command = plan
  variables {
    reconcile_missing_after_seconds = 1830
  }
  expect_failures = [var.reconcile_missing_after_seconds]
}

run "a_prefix" {
  command = plan
  variables {
    ecr_repository_names  = []
    ecr_repository_prefix = "team/"
  }
  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.rule["ecr-push"].event_pattern).detail["repository-name"] == [{ prefix = "team/" }]
    error_message = "the push rule matches the prefix"
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "ReadTrackedRepositories"]).Resource == ["arn:aws:ecr:ap-northeast-2:*:repository/team/*"]
    error_message = "every repository with the prefix in this region"
  }
  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.rule["inspector-scan"].event_pattern).detail["repository-name"] == [{ wildcard = "arn:aws:ecr:ap-northeast-2:*:repository/team/*" }]
    error_message = "Inspector names repositories by ARN"
  }
}

run "names_and_a_prefix_are_refused" {
  command = plan
  variables {
    ecr_repository_prefix = "team/"
  }
  expect_failures = [aws_lambda_function.function]
}

run "neither_names_nor_a_prefix_is_refused" {
  command = plan
  variables {
    ecr_repository_names = []
  }
  expect_failures = [aws_lambda_function.function]
}

run "registry_accounts" {
  command = plan
  variables {
    registry_accounts = ["210987654321", "123456789012"]
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "ReadTrackedRepositories"]).Condition.StringEquals["aws:ResourceAccount"] == ["768157413559", "210987654321", "123456789012"]
    error_message = "this account and the registry accounts"
  }
  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.rule["inspector-scan"].event_pattern).account == ["768157413559", "210987654321", "123456789012"]
    error_message = "Inspector events of the registry accounts"
  }
  assert {
    condition     = toset(keys(aws_cloudwatch_event_permission.registry_accounts)) == toset(["210987654321", "123456789012"]) && alltrue([for p in aws_cloudwatch_event_permission.registry_accounts : p.action == "events:PutEvents" && p.event_bus_name == "default"])
    error_message = "a statement added to the default bus per registry account, none replaced"
  }
}

run "a_registry_account_that_is_not_an_account_is_refused" {
  command = plan
  variables {
    registry_accounts = ["*"]
  }
  expect_failures = [var.registry_accounts]
}

run "git_credentials_and_codecommit" {
  command = plan
  variables {
    git_credentials_secret_arns = ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-AbCdEf"]
    code_commit_repositories    = ["invitation"]
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "ReadGitCredentials"]).Resource == ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-AbCdEf"]
    error_message = "exactly the listed secrets"
  }
  assert {
    condition = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "CommitToListedRepositories"]).Resource == ["arn:*:codecommit:*:*:invitation"] && one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "CommitToListedRepositories"]).Condition == {
      StringEquals = { "aws:ResourceAccount" = "768157413559", "aws:RequestedRegion" = "ap-northeast-2" }
    }
    error_message = "the listed CodeCommit repositories of this account and region"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["GIT_CREDENTIALS_SECRET_ARNS"] == "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-AbCdEf"
    error_message = "the function reads the listed secrets"
  }
}

run "a_wildcard_secret_is_refused" {
  command = plan
  variables {
    git_credentials_secret_arns = ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:*"]
  }
  expect_failures = [var.git_credentials_secret_arns]
}

run "a_partial_cluster_arn_is_refused" {
  command = plan
  variables {
    cluster_arns = ["arn:aws:eks:eu-west-1:768157413559:cluster/*"]
  }
  expect_failures = [var.cluster_arns]
}

run "in_a_vpc" {
  command = plan
  variables {
    subnet_ids         = ["subnet-0123456789abcdef0"]
    security_group_ids = ["sg-0123456789abcdef0"]
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "LambdaVpcNetworking"]).Resource == "*"
    error_message = "network interfaces, which AWS cannot scope"
  }
  assert {
    condition     = aws_lambda_function.function.vpc_config[0].subnet_ids == toset(["subnet-0123456789abcdef0"])
    error_message = "the function in the subnets"
  }
}

run "subnets_without_security_groups_are_refused" {
  command = plan
  variables {
    subnet_ids = ["subnet-0123456789abcdef0"]
  }
  expect_failures = [aws_lambda_function.function]
}

run "the_eks_capability_for_argo_cd_on_its_hub" {
  command = plan
  variables {
    argocd_eks_capability  = true
    argocd_namespaces      = "gitops"
    kubernetes_group       = "image-updates"
    notification_format    = "chat"
    notification_topic_arn = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-chat"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["ARGOCD_EKS_CAPABILITY"] == "true" && aws_lambda_function.function.environment[0].variables["ARGOCD_NAMESPACES"] == "gitops"
    error_message = "the function keeps to the capability's namespace"
  }
  assert {
    condition     = length(regexall("namespace: gitops\n", output.rbac_manifest)) == 2 && length(regexall("namespace: argocd", output.rbac_manifest)) == 0 && length(regexall("kind: Group\n    name: image-updates\n", output.rbac_manifest)) == 1
    error_message = "the Role and RoleBinding in the capability's namespace, bound to the access entry's group"
  }
  assert {
    condition     = length(regexall("(?m)^kind: Cluster", output.rbac_manifest)) == 0 && length(regexall("(?m)^kind: (Role|RoleBinding)$", output.rbac_manifest)) == 2
    error_message = "nothing cluster-wide"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["NOTIFICATION_FORMAT"] == "chat"
    error_message = "the report goes out as a chat notification"
  }
  assert {
    condition     = aws_eks_access_entry.function["barun-dev"].type == "STANDARD" && aws_eks_access_entry.function["barun-dev"].kubernetes_groups == toset(["image-updates"])
    error_message = "a STANDARD access entry on the hub, mapped to the group deploy/rbac.yaml binds in the namespace"
  }
}

run "the_eks_capability_with_every_namespace_is_refused" {
  command = plan
  variables {
    argocd_eks_capability = true
    argocd_namespaces     = "*"
  }
  expect_failures = [aws_lambda_function.function]
}

run "a_notification_format_of_neither_kind_is_refused" {
  command = plan
  variables {
    notification_format = "slack"
  }
  expect_failures = [var.notification_format]
}

run "several_clusters" {
  command = plan
  variables {
    additional_cluster_names = ["staging", "prod"]
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "FindTheCluster"]).Resource == ["arn:*:eks:*:*:cluster/barun-dev", "arn:*:eks:*:*:cluster/staging", "arn:*:eks:*:*:cluster/prod"]
    error_message = "each cluster by name"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["CLUSTERS"] == "barun-dev,staging,prod"
    error_message = "the function decides against each"
  }
  assert {
    condition     = toset(keys(aws_eks_access_entry.function)) == toset(["barun-dev", "staging", "prod"])
    error_message = "an access entry in each"
  }
}

run "reserved_concurrency_below_the_sweeps_is_refused" {
  command = plan
  variables {
    reserved_concurrency = 5
  }
  expect_failures = [aws_lambda_function.function]
}

run "a_key_of_your_own" {
  command = plan
  variables {
    kms_key_arn          = "arn:aws:kms:ap-northeast-2:768157413559:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    permissions_boundary = "arn:aws:iam::768157413559:policy/boundary"
    tags                 = { team = "platform" }
  }
  assert {
    condition     = aws_sqs_queue.dead_letters.kms_master_key_id == "arn:aws:kms:ap-northeast-2:768157413559:key/1234abcd-12ab-34cd-56ef-1234567890ab" && aws_sqs_queue.sweep.kms_master_key_id == aws_sqs_queue.dead_letters.kms_master_key_id
    error_message = "both queues with the key"
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "UseTheQueuesKey"]).Resource == "arn:aws:kms:ap-northeast-2:768157413559:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    error_message = "the role may use the key, that key only"
  }
  assert {
    condition     = aws_iam_role.function.permissions_boundary == "arn:aws:iam::768157413559:policy/boundary" && aws_lambda_function.function.tags["team"] == "platform"
    error_message = "the boundary and the tags"
  }
}

run "notation_trust_roots_let_the_function_download_signature_envelopes" {
  command = plan
  variables {
    notation_trust_roots = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "DownloadSignaturePayloads"]).Action == "ecr:GetDownloadUrlForLayer"
    error_message = "the envelopes are downloaded with ecr:GetDownloadUrlForLayer"
  }
  assert {
    condition     = aws_lambda_function.function.environment[0].variables["NOTATION_TRUST_ROOTS"] == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    error_message = "the roots reach the function"
  }
}

run "notation_trust_roots_that_are_not_base64_are_refused" {
  command = plan
  variables {
    notation_trust_roots = "-----BEGIN CERTIFICATE-----"
  }
  expect_failures = [var.notation_trust_roots]
}

run "without_trust_roots_nothing_is_downloaded" {
  command = plan
  assert {
    condition     = length([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "DownloadSignaturePayloads"]) == 0
    error_message = "no download grant without a feature that needs it"
  }
}

# The role's statements, exactly, for two sets of inputs. The same files are what the SAM
# template's statements evaluate to for the same parameters (tests/e2e/terraform.rs), so the
# two deploy paths grant the same, statement by statement, checked in one place.
run "the_role_is_the_templates_with_names" {
  command = plan
  assert {
    condition     = jsondecode(aws_iam_role_policy.function.policy).Statement == jsondecode(file("tests/expected/role-names.json")).Statement
    error_message = "the role differs from tests/expected/role-names.json"
  }
}

run "the_role_is_the_templates_with_every_option" {
  command = plan
  variables {
    ecr_repository_names            = []
    ecr_repository_prefix           = "team/"
    registry_accounts               = ["210987654321"]
    additional_cluster_names        = ["staging"]
    cluster_arns                    = ["arn:aws:eks:eu-west-1:768157413559:cluster/prod-eu"]
    cluster_role_arns               = ["arn:aws:iam::123456789012:role/argocd-ecr-updater-access"]
    scan_events                     = true
    signature_referrers             = true
    notification_topic_arn          = "arn:aws:sns:ap-northeast-2:768157413559:argocd-reports"
    git_credentials_secret_arns     = ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-AbCdEf"]
    cosign_key_secret_arns          = ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:cosign-pub-AbCdEf"]
    notation_trust_roots_secret_arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:notation-roots-AbCdEf"
    code_commit_repositories        = ["invitation"]
    verify_alarm_names              = ["web-5xx", "web p99 latency"]
    subnet_ids                      = ["subnet-0123456789abcdef0"]
    security_group_ids              = ["sg-0123456789abcdef0"]
  }
  assert {
    condition     = jsondecode(aws_iam_role_policy.function.policy).Statement == jsondecode(file("tests/expected/role-every-option.json")).Statement
    error_message = "the role differs from tests/expected/role-every-option.json"
  }
}

# Lambda holds all of a function's environment variables to 4 KB together (their JSON, keys
# and values). A full configuration measured with real values: AWS Signer's Notation root
# (tests/fixtures/aws-signer-notation-root.pem, DER SHA-256 90a87d05…473f, an ECDSA P-384
# certificate: 1,168 characters of base64) and a private endpoint's CA shaped as EKS makes
# them (RSA-2048: 1,500 characters). Inline, the roots leave too little room for anything
# more (a second root, a longer selector); in a secret, a kilobyte stays free.
run "a_full_configuration_with_the_roots_inline_is_at_lambdas_environment_limit" {
  command = plan
  variables {
    cluster_name                = "platform-prod-apne2"
    argocd_namespaces           = "argocd,team-payments,team-search"
    application_label_selector  = "argocd-ecr-updater.io/enabled=true,env in (prod,staging)"
    kube_api_endpoint           = "https://0F4A2C9E7B1D3F5A8C6E0B2D4F6A8C0E.gr7.ap-northeast-2.eks.amazonaws.com"
    kube_ca_data                = filebase64("../../tests/fixtures/eks-cluster-ca.pem")
    notification_topic_arn      = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-reports"
    git_credentials_secret_arns = ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-app-AbCdEf", "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/gitlab-token-GhIjKl"]
    gitlab_hosts                = "gitlab.example.com"
    rollout_metric_applications = ["argocd/payments-api", "argocd/search-api"]
    notation_trust_roots        = filebase64("../../tests/fixtures/aws-signer-notation-root.pem")
  }
  assert {
    condition     = length(aws_lambda_function.function.environment[0].variables["NOTATION_TRUST_ROOTS"]) == 1168 && length(aws_lambda_function.function.environment[0].variables["KUBE_CA_DATA"]) == 1500
    error_message = "the real AWS Signer root and an EKS-shaped CA"
  }
  assert {
    condition     = length(jsonencode(aws_lambda_function.function.environment[0].variables)) > 4096 - 100
    error_message = "the roots inline leave room after all: ${nonsensitive(length(jsonencode(aws_lambda_function.function.environment[0].variables)))} bytes of 4096"
  }
}

run "a_full_configuration_with_the_roots_in_a_secret_leaves_a_kilobyte" {
  command = plan
  variables {
    cluster_name                    = "platform-prod-apne2"
    argocd_namespaces               = "argocd,team-payments,team-search"
    application_label_selector      = "argocd-ecr-updater.io/enabled=true,env in (prod,staging)"
    kube_api_endpoint               = "https://0F4A2C9E7B1D3F5A8C6E0B2D4F6A8C0E.gr7.ap-northeast-2.eks.amazonaws.com"
    kube_ca_data                    = filebase64("../../tests/fixtures/eks-cluster-ca.pem")
    notification_topic_arn          = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-reports"
    git_credentials_secret_arns     = ["arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-app-AbCdEf", "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/gitlab-token-GhIjKl"]
    gitlab_hosts                    = "gitlab.example.com"
    rollout_metric_applications     = ["argocd/payments-api", "argocd/search-api"]
    notation_trust_roots_secret_arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/notation-roots-MnOpQr"
  }
  assert {
    condition     = length(jsonencode(aws_lambda_function.function.environment[0].variables)) <= 4096 - 1000
    error_message = "over Lambda's 4 KB less a kilobyte: ${nonsensitive(length(jsonencode(aws_lambda_function.function.environment[0].variables)))} bytes"
  }
  assert {
    condition     = one([for s in jsondecode(aws_iam_role_policy.function.policy).Statement : s if s.Sid == "ReadNotationTrustRoots"]).Resource == "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/notation-roots-MnOpQr"
    error_message = "the role reads exactly the roots' secret"
  }
}

run "the_roots_inline_and_in_a_secret_are_refused" {
  command = plan
  variables {
    notation_trust_roots            = filebase64("../../tests/fixtures/aws-signer-notation-root.pem")
    notation_trust_roots_secret_arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:notation-roots-AbCdEf"
  }
  expect_failures = [var.notation_trust_roots_secret_arn]
}
