# The function's role: the statements of template.yaml's FunctionRole, Sid for Sid, with the
# same resources and conditions. The policy is JSON Terraform builds itself (no provider data
# source), so `terraform plan` knows it and deploy/terraform/tests/ assert on it.

locals {
  # The tracked repositories: by name (account and region pinned by the condition, as in the
  # template), or every repository with the prefix in this region.
  repository_resources = local.use_prefix ? [
    "arn:${local.partition}:ecr:${local.region}:*:repository/${var.ecr_repository_prefix}*"
  ] : [for name in var.ecr_repository_names : "arn:*:ecr:*:*:repository/${name}"]
  # This account and the registry accounts, in this region.
  registry_condition = {
    StringEquals = {
      "aws:ResourceAccount" = concat([local.account], var.registry_accounts)
      "aws:RequestedRegion" = local.region
    }
  }
  own_condition = {
    StringEquals = {
      "aws:ResourceAccount" = local.account
      "aws:RequestedRegion" = local.region
    }
  }

  function_statements = concat(
    [
      {
        Sid      = "WriteOwnLogs"
        Effect   = "Allow"
        Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
        Resource = "${aws_cloudwatch_log_group.function.arn}:*"
      },
      {
        Sid       = "ReadTrackedRepositories"
        Effect    = "Allow"
        Action    = ["ecr:DescribeImages", "ecr:BatchGetImage", "ecr:DescribeImageSigningStatus"]
        Resource  = local.repository_resources
        Condition = local.registry_condition
      },
      {
        Sid       = "FindTheCluster"
        Effect    = "Allow"
        Action    = "eks:DescribeCluster"
        Resource  = [for name in local.same_region : "arn:*:eks:*:*:cluster/${name}"]
        Condition = local.own_condition
      },
      {
        Sid      = "ParkFailedEvents"
        Effect   = "Allow"
        Action   = "sqs:SendMessage"
        Resource = aws_sqs_queue.dead_letters.arn
      },
      {
        Sid      = "SendSweepShards"
        Effect   = "Allow"
        Action   = "sqs:SendMessage"
        Resource = aws_sqs_queue.sweep.arn
      },
      {
        Sid      = "ReceiveSweepShards"
        Effect   = "Allow"
        Action   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
        Resource = aws_sqs_queue.sweep.arn
      },
    ],
    length(var.cluster_arns) > 0 ? [{
      Sid      = "FindClustersInOtherRegions"
      Effect   = "Allow"
      Action   = "eks:DescribeCluster"
      Resource = var.cluster_arns
      # Whole ARNs name their region; this account only (other accounts' clusters are
      # described with the role assumed there).
      Condition = { StringEquals = { "aws:ResourceAccount" = local.account } }
    }] : [],
    var.scan_events ? [{
      Sid       = "ReadScanFindings"
      Effect    = "Allow"
      Action    = "ecr:DescribeImageScanFindings"
      Resource  = local.repository_resources
      Condition = local.registry_condition
    }] : [],
    local.verify_signatures ? [{
      Sid       = "DownloadSignaturePayloads"
      Effect    = "Allow"
      Action    = "ecr:GetDownloadUrlForLayer"
      Resource  = local.repository_resources
      Condition = local.registry_condition
    }] : [],
    var.notification_topic_arn != "" ? [{
      Sid      = "PublishDecisionReports"
      Effect   = "Allow"
      Action   = "sns:Publish"
      Resource = var.notification_topic_arn
    }] : [],
    # Named alarms only; account and region pinned by the condition, as in the template.
    length(var.verify_alarm_names) > 0 ? [{
      Sid       = "ReadWatchedAlarms"
      Effect    = "Allow"
      Action    = ["cloudwatch:DescribeAlarms", "cloudwatch:DescribeAlarmHistory"]
      Resource  = [for name in var.verify_alarm_names : "arn:*:cloudwatch:*:*:alarm:${name}"]
      Condition = local.own_condition
    }] : [],
    length(var.git_credentials_secret_arns) > 0 ? [{
      Sid      = "ReadGitCredentials"
      Effect   = "Allow"
      Action   = "secretsmanager:GetSecretValue"
      Resource = var.git_credentials_secret_arns
    }] : [],
    var.notation_trust_roots_secret_arn != "" ? [{
      Sid      = "ReadNotationTrustRoots"
      Effect   = "Allow"
      Action   = "secretsmanager:GetSecretValue"
      Resource = var.notation_trust_roots_secret_arn
    }] : [],
    length(var.cosign_key_secret_arns) > 0 ? [{
      Sid      = "ReadCosignKeys"
      Effect   = "Allow"
      Action   = "secretsmanager:GetSecretValue"
      Resource = var.cosign_key_secret_arns
    }] : [],
    # AWS does not scope this action to repositories; what the token may read is still
    # ReadTrackedRepositories.
    var.signature_referrers ? [{
      Sid      = "RegistryApiToken"
      Effect   = "Allow"
      Action   = "ecr:GetAuthorizationToken"
      Resource = "*"
    }] : [],
    length(var.cluster_role_arns) > 0 ? [{
      Sid      = "AssumeClusterRoles"
      Effect   = "Allow"
      Action   = "sts:AssumeRole"
      Resource = var.cluster_role_arns
    }] : [],
    length(var.code_commit_repositories) > 0 ? [{
      Sid    = "CommitToListedRepositories"
      Effect = "Allow"
      Action = [
        "codecommit:GetRepository",
        "codecommit:GetBranch",
        "codecommit:GetFile",
        "codecommit:CreateBranch",
        "codecommit:CreateCommit",
        "codecommit:CreatePullRequest",
        "codecommit:ListPullRequests",
        "codecommit:GetPullRequest",
      ]
      Resource  = [for r in var.code_commit_repositories : "arn:*:codecommit:*:*:${r}"]
      Condition = local.own_condition
    }] : [],
    # ENI actions cannot be scoped to resources; Lambda documents "*".
    local.in_vpc ? [{
      Sid    = "LambdaVpcNetworking"
      Effect = "Allow"
      Action = [
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
      ]
      Resource = "*"
    }] : [],
    # With a KMS key of your own on the queues and the log group, the role encrypts what it
    # sends to them (SQS asks for a data key and decrypts it).
    var.kms_key_arn != "" ? [{
      Sid      = "UseTheQueuesKey"
      Effect   = "Allow"
      Action   = ["kms:GenerateDataKey", "kms:Decrypt"]
      Resource = var.kms_key_arn
    }] : [],
  )
}

resource "aws_iam_role" "function" {
  name_prefix          = "${var.name}-"
  permissions_boundary = var.permissions_boundary != "" ? var.permissions_boundary : null
  tags                 = var.tags
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = concat(
      [{
        Effect    = "Allow"
        Principal = { Service = "lambda.amazonaws.com" }
        Action    = "sts:AssumeRole"
      }],
      # The operators' local runs (plan, redrive --local) act as the function, so an
      # Application's references reach no more than the function's grants.
      length(var.operator_role_arns) > 0 ? [{
        Sid       = "OperatorsRunLocally"
        Effect    = "Allow"
        Principal = { AWS = var.operator_role_arns }
        Action    = "sts:AssumeRole"
      }] : [],
    )
  })
}

resource "aws_iam_role_policy" "function" {
  name = "argocd-ecr-updater"
  role = aws_iam_role.function.id
  policy = jsonencode({
    Version   = "2012-10-17"
    Statement = local.function_statements
  })
}
