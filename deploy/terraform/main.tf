# argocd-ecr-updater as a Terraform module: what template.yaml deploys, with the same
# defaults and the same least privilege. tests/e2e/terraform.rs holds the two to each other.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition
  # `id` is the region's name in the provider's 5.x and 6.x alike (`name` is deprecated in
  # 6.x, `region` absent from 5.x).
  region = data.aws_region.current.id

  use_prefix        = var.ecr_repository_prefix != ""
  in_vpc            = length(var.subnet_ids) > 0
  same_region       = concat([var.cluster_name], var.additional_cluster_names)
  verify_signatures = var.signature_verification || length(var.cosign_key_secret_arns) > 0 || var.signature_referrers || var.commit_statuses || var.image_labels || var.notation_trust_roots != "" || var.notation_trust_roots_secret_arn != ""
}

resource "aws_cloudwatch_log_group" "function" {
  #checkov:skip=CKV_AWS_158:The log holds no secret (URLs are written without query or userinfo, credentials never); CloudWatch encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_338:Retention is log_retention_days, 30 by default as in template.yaml; set 365 where a policy asks for a year.
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn != "" ? var.kms_key_arn : null
  tags              = var.tags
}

resource "aws_lambda_function" "function" {
  #checkov:skip=CKV_AWS_116:Failed asynchronous invocations go to the dead-letter queue through the on-failure destination (aws_lambda_function_event_invoke_config below), which also records the error; a dead_letter_config would be a second path to the same queue.
  #checkov:skip=CKV_AWS_272:The package is built from source by the operator (cargo lambda build) and pinned by source_code_hash; there is no signing profile to validate against.
  #checkov:skip=CKV_AWS_173:The environment holds settings, no secret (KUBE_CA_DATA is a CA certificate, public by nature); Lambda encrypts it at rest with its own key.
  #checkov:skip=CKV_AWS_50:The function reports through its log and EMF metrics; X-Ray would need xray:PutTraceSegments, outside the least-privilege role the template and the module share.
  function_name                  = var.name
  filename                       = var.package_file
  source_code_hash               = filebase64sha256(var.package_file)
  handler                        = "bootstrap"
  runtime                        = "provided.al2023"
  architectures                  = [var.architecture]
  memory_size                    = var.memory_size
  timeout                        = var.timeout
  reserved_concurrent_executions = var.reserved_concurrency
  role                           = aws_iam_role.function.arn
  tags                           = var.tags
  # A VPC function's network interfaces are made at creation, with the role's ec2 grants:
  # the policy must be in place first, or the first apply fails.
  depends_on = [aws_iam_role_policy.function]

  # What the template's conditions and rules refuse, across inputs.
  lifecycle {
    precondition {
      condition     = (length(var.ecr_repository_names) > 0) != (var.ecr_repository_prefix != "")
      error_message = "Set exactly one of ecr_repository_names and ecr_repository_prefix: the repositories the function may read and whose pushes it takes."
    }
    precondition {
      condition     = (length(var.subnet_ids) > 0) == (length(var.security_group_ids) > 0)
      error_message = "subnet_ids and security_group_ids go together: a function in a VPC needs both."
    }
    precondition {
      condition     = var.reserved_concurrency < 0 || var.reserved_concurrency > var.sweep_concurrency
      error_message = "reserved_concurrency must exceed sweep_concurrency (or be -1): shards would otherwise take every slot and pushes would wait behind them."
    }
    precondition {
      condition     = !var.argocd_eks_capability || var.argocd_namespaces != "*"
      error_message = "With argocd_eks_capability, argocd_namespaces is the capability's namespace (argocd unless the capability was created with another), not *: the capability reconciles no other, and the managed layout grants nothing cluster-wide."
    }
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.function.name
  }

  environment {
    variables = {
      CLUSTER_NAME                    = var.cluster_name
      CLUSTERS                        = var.clusters != "" ? var.clusters : (length(var.additional_cluster_names) > 0 ? join(",", local.same_region) : "")
      FUNCTION_ACCOUNT_ID             = local.account
      ARGOCD_NAMESPACES               = var.argocd_namespaces
      ARGOCD_EKS_CAPABILITY           = tostring(var.argocd_eks_capability)
      APPLICATION_LABEL_SELECTOR      = var.application_label_selector
      DRY_RUN                         = tostring(var.dry_run)
      READ_IMAGEUPDATERS              = tostring(var.read_image_updaters)
      LOG_LEVEL                       = var.log_level
      KUBE_API_ENDPOINT               = var.kube_api_endpoint
      KUBE_CA_DATA                    = var.kube_ca_data
      KUBE_CONNECT_TIMEOUT_MS         = tostring(var.kube_connect_timeout_ms)
      KUBE_REQUEST_TIMEOUT_MS         = tostring(var.kube_request_timeout_ms)
      LIST_PAGE_SIZE                  = tostring(var.list_page_size)
      CONFLICT_RETRIES                = tostring(var.conflict_retries)
      NOTIFICATION_TOPIC_ARN          = var.notification_topic_arn
      NOTIFICATION_FORMAT             = var.notification_format
      GIT_CREDENTIALS_SECRET_ARNS     = join(",", var.git_credentials_secret_arns)
      GITHUB_ENTERPRISE_HOSTS         = var.github_enterprise_hosts
      GITLAB_HOSTS                    = var.gitlab_hosts
      GIT_REPOCREDS                   = tostring(var.git_repo_creds)
      GIT_SECRET_NAMESPACES           = var.git_secret_namespaces
      SWEEP_QUEUE_URL                 = aws_sqs_queue.sweep.url
      SWEEP_QUEUE_ARN                 = aws_sqs_queue.sweep.arn
      SWEEP_FAN_OUT_AT                = tostring(var.sweep_fan_out_at)
      SWEEP_SHARD_SIZE                = tostring(var.sweep_shard_size)
      SWEEP_CONCURRENCY               = tostring(var.sweep_concurrency)
      SWEEP_CLUSTER_REQUESTS          = tostring(var.sweep_cluster_requests)
      CONFIRM_ROLLOUTS                = tostring(var.confirm_rollouts)
      ROLLOUT_METRIC_APPLICATIONS     = join(",", var.rollout_metric_applications)
      NOTATION_TRUST_ROOTS            = var.notation_trust_roots
      NOTATION_TRUST_ROOTS_SECRET_ARN = var.notation_trust_roots_secret_arn
    }
  }

  dynamic "vpc_config" {
    for_each = local.in_vpc ? [1] : []
    content {
      subnet_ids         = var.subnet_ids
      security_group_ids = var.security_group_ids
    }
  }
}

# Parked events are what an operator redrives. `terraform destroy` deletes the queue with the
# rest: to keep what it holds, `terraform state rm module.<name>.aws_sqs_queue.dead_letters`
# first (docs/deploy.md, "With Terraform").
resource "aws_sqs_queue" "dead_letters" {
  name                      = "${var.name}-dead-letters"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = var.kms_key_arn == "" ? true : null
  kms_master_key_id         = var.kms_key_arn != "" ? var.kms_key_arn : null
  tags                      = var.tags
}

# A fanned-out sweep's shards, which the function itself consumes. A shard that fails five
# receives (AWS's advice for a Lambda consumer) moves to the shards' own dead-letter queue.
resource "aws_sqs_queue" "sweep" {
  name = "${var.name}-sweep"
  # Lambda requires at least the function's timeout; 900 s is the most a timeout can be.
  visibility_timeout_seconds = 900
  message_retention_seconds  = 86400
  sqs_managed_sse_enabled    = var.kms_key_arn == "" ? true : null
  kms_master_key_id          = var.kms_key_arn != "" ? var.kms_key_arn : null
  tags                       = var.tags
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.sweep_dead_letters.arn
    maxReceiveCount     = 5
  })
}

# Shards that failed five receives. Their work is a sweep's, which the next sweep does again:
# kept apart from the dead-letter queue, so a shard that keeps failing neither holds the push
# alarm in ALARM nor hides a lost push behind it.
resource "aws_sqs_queue" "sweep_dead_letters" {
  name                      = "${var.name}-sweep-dead-letters"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = var.kms_key_arn == "" ? true : null
  kms_master_key_id         = var.kms_key_arn != "" ? var.kms_key_arn : null
  tags                      = var.tags
}

# Only the sweep queue parks its messages in the shards' dead-letter queue.
resource "aws_sqs_queue_redrive_allow_policy" "sweep_dead_letters" {
  queue_url = aws_sqs_queue.sweep_dead_letters.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.sweep.arn]
  })
}

resource "aws_sqs_queue_policy" "sweep_dead_letters" {
  queue_url = aws_sqs_queue.sweep_dead_letters.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "OnlyTheFunctionSends"
      Effect    = "Deny"
      Principal = "*"
      Action    = "sqs:SendMessage"
      Resource  = aws_sqs_queue.sweep_dead_letters.arn
      Condition = { ArnNotEquals = { "aws:PrincipalArn" = aws_iam_role.function.arn } }
    }]
  })
}

resource "aws_lambda_event_source_mapping" "sweep" {
  event_source_arn        = aws_sqs_queue.sweep.arn
  function_name           = aws_lambda_function.function.arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]
  scaling_config {
    maximum_concurrency = var.sweep_concurrency
  }
  # Lambda checks at creation that the role may receive from the queue.
  depends_on = [aws_iam_role_policy.function]
}

# What lands in the dead-letter queue is redriven into the function, so only the module's own
# writers may send: the function's role (its on-failure destination) and EventBridge for the
# module's rules. Both conditions must hold to deny; a key a request lacks (a service has no
# aws:PrincipalArn) makes a Not… condition true.
resource "aws_sqs_queue_policy" "dead_letters" {
  queue_url = aws_sqs_queue.dead_letters.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "EventBridgeDeliveryFailures"
        Effect    = "Allow"
        Principal = { Service = "events.amazonaws.com" }
        Action    = "sqs:SendMessage"
        Resource  = aws_sqs_queue.dead_letters.arn
        Condition = {
          ArnEquals = { "aws:SourceArn" = [for rule in local.rules : aws_cloudwatch_event_rule.rule[rule].arn] }
        }
      },
      {
        Sid       = "OnlyTheStackSends"
        Effect    = "Deny"
        Principal = "*"
        Action    = "sqs:SendMessage"
        Resource  = aws_sqs_queue.dead_letters.arn
        Condition = {
          ArnNotEquals    = { "aws:PrincipalArn" = aws_iam_role.function.arn }
          StringNotEquals = { "aws:PrincipalServiceName" = "events.amazonaws.com" }
        }
      },
    ]
  })
}

# No queue may park its messages in the dead-letter queue through a redrive policy of its own
# (which would pass the deny on SendMessage): shards park in their own queue.
resource "aws_sqs_queue_redrive_allow_policy" "dead_letters" {
  queue_url = aws_sqs_queue.dead_letters.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "denyAll"
  })
}

# No queue may park its messages in the sweep queue through a redrive policy of its own: a
# redriven message is no SendMessage call, so the queue policy's deny does not stop it, and it
# would arrive with the sweep queue's ARN as its source, trusted as a shard or a check.
resource "aws_sqs_queue_redrive_allow_policy" "sweep" {
  queue_url = aws_sqs_queue.sweep.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "denyAll"
  })
}

# Shards are run by the function as they come: only the function's own role may send them.
resource "aws_sqs_queue_policy" "sweep" {
  queue_url = aws_sqs_queue.sweep.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "OnlyTheFunctionSends"
      Effect    = "Deny"
      Principal = "*"
      Action    = "sqs:SendMessage"
      Resource  = aws_sqs_queue.sweep.arn
      Condition = { ArnNotEquals = { "aws:PrincipalArn" = aws_iam_role.function.arn } }
    }]
  })
}

resource "aws_lambda_function_event_invoke_config" "function" {
  function_name                = aws_lambda_function.function.function_name
  maximum_retry_attempts       = 2
  maximum_event_age_in_seconds = 3600
  destination_config {
    on_failure {
      destination = aws_sqs_queue.dead_letters.arn
    }
  }
  # Lambda checks at creation that the role may send to the destination.
  depends_on = [aws_iam_role_policy.function]
}

# Terraform loops where CloudFormation could not: every same-region cluster gets its entry.
resource "aws_eks_access_entry" "function" {
  for_each          = var.create_access_entry ? toset(local.same_region) : toset([])
  cluster_name      = each.value
  principal_arn     = aws_iam_role.function.arn
  type              = "STANDARD"
  kubernetes_groups = [var.kubernetes_group]
}
