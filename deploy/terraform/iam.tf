# The function's role: the statements of template.yaml's FunctionRole, Sid for Sid.

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "function" {
  name_prefix        = "${var.name}-"
  assume_role_policy = data.aws_iam_policy_document.assume.json
}

data "aws_iam_policy_document" "function" {
  statement {
    sid       = "WriteOwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.function.arn}:*"]
  }

  statement {
    sid       = "ReadTrackedRepositories"
    actions   = ["ecr:DescribeImages", "ecr:BatchGetImage"]
    resources = local.repository_arns
  }

  statement {
    sid       = "FindTheCluster"
    actions   = ["eks:DescribeCluster"]
    resources = [for name in local.same_region : "arn:${local.partition}:eks:${local.region}:${local.account}:cluster/${name}"]
  }

  statement {
    sid       = "ParkFailedEvents"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.dead_letters.arn]
  }

  statement {
    sid       = "SendSweepShards"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.sweep.arn]
  }

  statement {
    sid       = "ReceiveSweepShards"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
    resources = [aws_sqs_queue.sweep.arn]
  }

  dynamic "statement" {
    for_each = length(var.cluster_arns) > 0 ? [1] : []
    content {
      sid       = "FindClustersInOtherRegions"
      actions   = ["eks:DescribeCluster"]
      resources = var.cluster_arns
      condition {
        test     = "StringEquals"
        variable = "aws:ResourceAccount"
        values   = [local.account]
      }
    }
  }

  dynamic "statement" {
    for_each = var.scan_events ? [1] : []
    content {
      sid       = "ReadScanFindings"
      actions   = ["ecr:DescribeImageScanFindings"]
      resources = local.repository_arns
    }
  }

  dynamic "statement" {
    for_each = local.verify_signatures ? [1] : []
    content {
      sid       = "DownloadSignaturePayloads"
      actions   = ["ecr:GetDownloadUrlForLayer"]
      resources = local.repository_arns
    }
  }

  dynamic "statement" {
    for_each = var.notification_topic_arn != "" ? [1] : []
    content {
      sid       = "PublishDecisionReports"
      actions   = ["sns:Publish"]
      resources = [var.notification_topic_arn]
    }
  }

  dynamic "statement" {
    for_each = length(var.git_credentials_secret_arns) > 0 ? [1] : []
    content {
      sid       = "ReadGitCredentials"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = var.git_credentials_secret_arns
    }
  }

  dynamic "statement" {
    for_each = length(var.cosign_key_secret_arns) > 0 ? [1] : []
    content {
      sid       = "ReadCosignKeys"
      actions   = ["secretsmanager:GetSecretValue"]
      resources = var.cosign_key_secret_arns
    }
  }

  dynamic "statement" {
    for_each = var.signature_referrers ? [1] : []
    content {
      sid     = "RegistryApiToken"
      actions = ["ecr:GetAuthorizationToken"]
      # AWS does not scope this action to repositories; what the token may read is still
      # ReadTrackedRepositories.
      resources = ["*"]
    }
  }

  dynamic "statement" {
    for_each = length(var.cluster_role_arns) > 0 ? [1] : []
    content {
      sid       = "AssumeClusterRoles"
      actions   = ["sts:AssumeRole"]
      resources = var.cluster_role_arns
    }
  }

  dynamic "statement" {
    for_each = length(var.code_commit_repositories) > 0 ? [1] : []
    content {
      sid = "CommitToListedRepositories"
      actions = [
        "codecommit:GetRepository",
        "codecommit:GetBranch",
        "codecommit:GetFile",
        "codecommit:CreateBranch",
        "codecommit:CreateCommit",
        "codecommit:CreatePullRequest",
        "codecommit:ListPullRequests",
        "codecommit:GetPullRequest",
      ]
      resources = [for r in var.code_commit_repositories : "arn:${local.partition}:codecommit:${local.region}:${local.account}:${r}"]
    }
  }

  dynamic "statement" {
    for_each = local.in_vpc ? [1] : []
    content {
      sid = "LambdaVpcNetworking"
      actions = [
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
      ]
      # ENI actions cannot be scoped to resources; Lambda documents "*".
      resources = ["*"]
    }
  }
}

resource "aws_iam_role_policy" "function" {
  name   = "argocd-ecr-updater"
  role   = aws_iam_role.function.id
  policy = data.aws_iam_policy_document.function.json
}
