# The module next to an existing cluster and registry, with nothing in it to change for your
# account but example.tfvars:
#
#   cargo lambda build --release --arm64 --output-format zip --bin argocd-ecr-updater
#   terraform init && terraform apply -var-file=example.tfvars
#   kubectl apply -f ../../../rbac.yaml      # the `rbac` output says it again
#
# The function's role gets an EKS access entry in the cluster, mapped to the Kubernetes group
# `argocd-ecr-updater`; deploy/rbac.yaml grants that group what the function does (read and
# patch Applications, create Events) in Argo CD's namespace. Without it the first push is
# refused with 403, which `argocd-ecr-updater-cli doctor` reports with the same command.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.33, < 7.0"
    }
  }
}

variable "region" {
  description = "The region of the cluster and the registry."
  type        = string
}

variable "cluster_name" {
  description = "The EKS cluster that runs Argo CD."
  type        = string
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

variable "package_file" {
  description = "The function's zip, as cargo lambda builds it."
  type        = string
  default     = "../../../../target/lambda/argocd-ecr-updater/bootstrap.zip"
}

provider "aws" {
  region = var.region
}

module "argocd_ecr_updater" {
  source = "../.."

  package_file                = var.package_file
  cluster_name                = var.cluster_name
  ecr_repository_names        = var.ecr_repository_names
  git_credentials_secret_arns = var.git_credentials_secret_arns
  alarm_topic_arn             = var.alarm_topic_arn
}

output "function_name" {
  description = "What argocd-ecr-updater-cli doctor --function checks."
  value       = module.argocd_ecr_updater.function_name
}

output "rbac" {
  description = "The step Terraform does not take: the function's Kubernetes permissions."
  value       = "kubectl apply -f deploy/rbac.yaml   # binds group argocd-ecr-updater, which the access entry maps ${module.argocd_ecr_updater.role_arn} to"
}

output "alarm_notifications" {
  value = module.argocd_ecr_updater.alarm_notifications
}
