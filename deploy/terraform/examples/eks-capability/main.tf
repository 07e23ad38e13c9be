# The module on the hub cluster of AWS's managed Argo CD (the EKS capability for Argo CD),
# with the opt-in chat channel the capability lacks, with nothing in it to change for your
# account but example.tfvars:
#
#   cargo lambda build --release --arm64 --output-format zip --bin argocd-ecr-updater
#   terraform init && terraform apply -var-file=example.tfvars
#   terraform output -raw rbac_manifest | kubectl apply -f -     # against the hub
#
# The capability's controllers run on AWS's side and reconcile the Applications of one
# namespace of the hub (argocd unless the capability was created with another); the spoke
# clusters they deploy to are destinations named by ARN and need nothing from this function.
# AWS's access policies for the capability give no one else access to argoproj.io objects, so
# the function's role gets a STANDARD access entry on the hub mapped to a Kubernetes group,
# and rbac_manifest binds that group to a Role in the capability's namespace: nothing
# cluster-wide. Set slack_workspace_id and slack_channel_id to have every update and rollout
# outcome posted in Slack through Amazon Q Developer in chat applications (authorise the
# workspace once in its console first; docs/deploy.md says how).

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.74 brought aws_chatbot_slack_channel_configuration. Validated with 5.100.
      version = ">= 5.74, < 7.0"
    }
  }
}

variable "region" {
  description = "The region of the hub cluster and the registry."
  type        = string
}

variable "hub_cluster_name" {
  description = "The EKS cluster the capability for Argo CD was created on (the hub)."
  type        = string
}

variable "argocd_namespace" {
  description = "The capability's namespace, where its Applications live (argocd unless the capability was created with another)."
  type        = string
  default     = "argocd"
}

variable "ecr_repository_names" {
  description = "The ECR repositories whose pushes roll out."
  type        = list(string)
}

variable "git_credentials_secret_arns" {
  description = "Secrets Manager secrets holding {\"token\": \"...\"} for Git write-back, if any Application uses it."
  type        = list(string)
  default     = []
}

variable "alarm_topic_arn" {
  description = "The SNS topic the alarms page; empty pages nobody."
  type        = string
  default     = ""
}

variable "slack_workspace_id" {
  description = "The Slack workspace (team) ID, as Amazon Q Developer in chat applications shows it once the workspace is authorised; empty: no chat channel."
  type        = string
  default     = ""
}

variable "slack_channel_id" {
  description = "The Slack channel receiving the notifications (its ID, in the channel's details); empty: no chat channel."
  type        = string
  default     = ""
}

variable "package_file" {
  description = "The function's zip, as cargo lambda builds it."
  type        = string
  default     = "../../../../target/lambda/argocd-ecr-updater/bootstrap.zip"
}

provider "aws" {
  region = var.region
}

locals {
  chat = var.slack_workspace_id != "" && var.slack_channel_id != ""
}

# The topic the function publishes its chat notifications to, and the channel subscribed to it.
resource "aws_sns_topic" "chat" {
  count = local.chat ? 1 : 0
  name  = "argocd-ecr-updater-chat"
  # The function publishes with its role's sns:Publish on this topic; SNS's own key needs no
  # grant for a publisher of the same account.
  kms_master_key_id = "alias/aws/sns"
}

# The channel's role: custom notifications need no permission, so it has none, and the
# channel's guardrail denies everything a channel member could otherwise run through it.
resource "aws_iam_role" "chat" {
  count = local.chat ? 1 : 0
  name  = "argocd-ecr-updater-chat"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "chatbot.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_chatbot_slack_channel_configuration" "chat" {
  count                       = local.chat ? 1 : 0
  configuration_name          = "argocd-ecr-updater"
  iam_role_arn                = aws_iam_role.chat[0].arn
  slack_team_id               = var.slack_workspace_id
  slack_channel_id            = var.slack_channel_id
  sns_topic_arns              = [aws_sns_topic.chat[0].arn]
  guardrail_policy_arns       = ["arn:aws:iam::aws:policy/AWSDenyAll"]
  user_authorization_required = false
  logging_level               = "ERROR"
}

module "argocd_ecr_updater" {
  source = "../.."

  package_file                = var.package_file
  cluster_name                = var.hub_cluster_name
  argocd_eks_capability       = true
  argocd_namespaces           = var.argocd_namespace
  ecr_repository_names        = var.ecr_repository_names
  git_credentials_secret_arns = var.git_credentials_secret_arns
  alarm_topic_arn             = var.alarm_topic_arn
  notification_topic_arn      = local.chat ? aws_sns_topic.chat[0].arn : ""
  notification_format         = local.chat ? "chat" : "report"
}

output "function_name" {
  description = "What argocd-ecr-updater-cli doctor --function checks."
  value       = module.argocd_ecr_updater.function_name
}

output "rbac_manifest" {
  description = "The step Terraform does not take: the Role and RoleBinding in the capability's namespace for the group the access entry maps the function's role to. Apply it to the hub."
  value       = module.argocd_ecr_updater.rbac_manifest
}

output "chat_topic_arn" {
  description = "The topic the function sends its chat notifications to (empty without a Slack channel)."
  value       = local.chat ? aws_sns_topic.chat[0].arn : ""
}

output "alarm_notifications" {
  value = module.argocd_ecr_updater.alarm_notifications
}
