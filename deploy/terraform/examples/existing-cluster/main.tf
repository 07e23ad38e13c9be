# The module next to an existing cluster, registry and Argo CD, and the seed's Application
# written by Terraform with write-back-method git: the function commits the new tag to the
# Application's Git repository (.argocd-source-<app>.yaml), never to the Application object, so
# `terraform plan` sees no drift on the image tag and Terraform never reverts a rollout.
#
#   cargo lambda build --release --arm64 --output-format zip --bin argocd-ecr-updater
#   terraform init && terraform apply

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0, < 7.0"
    }
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.30"
    }
  }
}

variable "cluster_name" {
  type    = string
  default = "barun-dev"
}

variable "git_credentials_secret_arn" {
  description = "Secrets Manager secret holding {\"token\": \"...\"} for the deploy repository."
  type        = string
}

data "aws_eks_cluster" "this" {
  name = var.cluster_name
}

data "aws_eks_cluster_auth" "this" {
  name = var.cluster_name
}

provider "kubernetes" {
  host                   = data.aws_eks_cluster.this.endpoint
  cluster_ca_certificate = base64decode(data.aws_eks_cluster.this.certificate_authority[0].data)
  token                  = data.aws_eks_cluster_auth.this.token
}

module "argocd_ecr_updater" {
  source = "../.."

  package_file                = "${path.root}/../../../../target/lambda/argocd-ecr-updater/bootstrap.zip"
  cluster_name                = var.cluster_name
  ecr_repository_names        = ["barun-dev-ecr"]
  git_credentials_secret_arns = [var.git_credentials_secret_arn]
}

resource "kubernetes_manifest" "application" {
  manifest = {
    apiVersion = "argoproj.io/v1alpha1"
    kind       = "Application"
    metadata = {
      name      = "aws-pipeline-test"
      namespace = "argocd"
      annotations = {
        "argocd-image-updater.argoproj.io/image-list"         = "app=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr"
        "argocd-image-updater.argoproj.io/app.update-strategy" = "latest"
        "argocd-image-updater.argoproj.io/app.allow-tags"      = "regexp:^[0-9]{8}-[0-9]{6}$"
        "argocd-image-updater.argoproj.io/app.helm.image-name" = "image.repository"
        "argocd-image-updater.argoproj.io/app.helm.image-tag"  = "image.tag"
        # Credentials: the secret in git_credentials_secret_arns, chosen by the repository URL.
        "argocd-image-updater.argoproj.io/write-back-method" = "git"
      }
    }
    spec = {
      project = "default"
      source = {
        repoURL        = "https://github.com/barun/invitation.git"
        targetRevision = "main"
        path           = "charts/invitation"
        # No image.tag parameter here: the tag lives in the repository, where the function
        # commits it, so this object has nothing for Terraform and the function to fight over.
        helm = {
          parameters = [{ name = "image.repository", value = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr" }]
        }
      }
      destination = {
        server    = "https://kubernetes.default.svc"
        namespace = "invitation"
      }
      syncPolicy = { automated = { prune = true, selfHeal = true } }
    }
  }
}

output "function_name" {
  value = module.argocd_ecr_updater.function_name
}

output "alarm_notifications" {
  value = module.argocd_ecr_updater.alarm_notifications
}
