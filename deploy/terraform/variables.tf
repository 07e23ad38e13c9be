# The same settings as template.yaml's parameters, in snake_case, with the same defaults.

variable "name" {
  description = "Prefix of every resource's name (the SAM stack's name plays this part)."
  type        = string
  default     = "argocd-ecr-updater"
  validation {
    condition     = can(regex("^[A-Za-z0-9-]{1,32}$", var.name))
    error_message = "name: letters, digits and dashes, at most 32 (the longest name built from it must stay within 64)."
  }
}

variable "package_file" {
  description = "The function's zip: cargo lambda build --release --arm64 --output-format zip --bin argocd-ecr-updater (target/lambda/argocd-ecr-updater/bootstrap.zip)."
  type        = string
}

variable "architecture" {
  description = "What the package was built for: arm64 (cargo lambda build --arm64) or x86_64."
  type        = string
  default     = "arm64"
  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture: arm64 or x86_64, the one the package was built for."
  }
}

variable "cluster_name" {
  description = "Name of the EKS cluster that runs Argo CD."
  type        = string
}

variable "additional_cluster_names" {
  description = "Further EKS clusters in this account and region whose Argo CD the function also updates; each gets an access entry."
  type        = list(string)
  default     = []
}

variable "clusters" {
  description = "Optional CLUSTERS as JSON, for clusters in other regions or accounts (see docs/clusters-and-registries.md)."
  type        = string
  default     = ""
}

variable "cluster_arns" {
  description = "Clusters of this account in other regions, by ARN: the role may describe exactly these."
  type        = list(string)
  default     = []
}

variable "cluster_role_arns" {
  description = "Roles the function may assume for clusters of other accounts (whole ARNs)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for arn in var.cluster_role_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", arn))])
    error_message = "cluster_role_arns: whole IAM role ARNs, no wildcards."
  }
}

variable "argocd_namespaces" {
  description = "Comma-separated namespaces holding Applications, or * for all."
  type        = string
  default     = "argocd"
}

variable "application_label_selector" {
  type    = string
  default = ""
}

variable "ecr_repository_names" {
  description = "ECR repositories whose pushes trigger the function and that it may read. Set this or ecr_repository_prefix."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for n in var.ecr_repository_names : can(regex("^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$", n))])
    error_message = "ecr_repository_names: ECR repository names (lowercase, no wildcards)."
  }
}

variable "ecr_repository_prefix" {
  type    = string
  default = ""
  validation {
    condition     = can(regex("^[a-z0-9._/-]*$", var.ecr_repository_prefix))
    error_message = "ecr_repository_prefix: a prefix of ECR repository names (lowercase, no wildcards)."
  }
}

variable "registry_accounts" {
  description = "Other accounts whose ECR registries hold tracked images (a central registry account)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for a in var.registry_accounts : can(regex("^[0-9]{12}$", a))])
    error_message = "registry_accounts: 12-digit AWS account IDs."
  }
}

variable "dry_run" {
  type    = bool
  default = false
}

variable "read_image_updaters" {
  type    = bool
  default = true
}

variable "log_level" {
  type    = string
  default = "info"
}

variable "reconcile_schedule" {
  type    = string
  default = "rate(15 minutes)"
}

variable "reconcile_enabled" {
  type    = bool
  default = true
}

variable "scan_events" {
  type    = bool
  default = false
}

variable "replication_events" {
  type    = bool
  default = false
}

variable "signature_verification" {
  type    = bool
  default = false
}

variable "signature_referrers" {
  type    = bool
  default = false
}

variable "cosign_key_secret_arns" {
  type    = list(string)
  default = []
}

variable "memory_size" {
  type    = number
  default = 128
}

variable "timeout" {
  type    = number
  default = 120
}

variable "reserved_concurrency" {
  description = "Reserved concurrent executions; -1 for none."
  type        = number
  default     = -1
}

variable "kube_connect_timeout_ms" {
  type    = number
  default = 3000
}

variable "kube_request_timeout_ms" {
  type    = number
  default = 10000
}

variable "list_page_size" {
  type    = number
  default = 500
}

variable "conflict_retries" {
  type    = number
  default = 5
}

variable "log_retention_days" {
  type    = number
  default = 30
}

variable "alarm_topic_arn" {
  description = "SNS topic every alarm notifies; empty, they notify nobody (the alarm_notifications output says so)."
  type        = string
  default     = ""
}

variable "sweep_fan_out_at" {
  description = "A scheduled sweep of at least this many Applications (all clusters together) is sent out in shards over the sweep queue; a smaller one runs in one invocation."
  type        = number
  default     = 1000
}

variable "sweep_shard_size" {
  description = "Applications per shard."
  type        = number
  default     = 500
}

variable "sweep_concurrency" {
  description = "Shards that run at once (the event source mapping's maximum concurrency, 2 to 1000)."
  type        = number
  default     = 10
}

variable "sweep_cluster_requests" {
  description = "The most Kubernetes API requests a fanned-out sweep keeps in flight against one cluster, all shards together."
  type        = number
  default     = 40
}

variable "notification_topic_arn" {
  type    = string
  default = ""
}

variable "dashboard" {
  type    = bool
  default = false
}

variable "create_access_entry" {
  description = "Create EKS access entries mapping the role to kubernetes_group (authentication mode API or API_AND_CONFIG_MAP)."
  type        = bool
  default     = true
}

variable "kubernetes_group" {
  type    = string
  default = "argocd-ecr-updater"
  validation {
    condition     = !startswith(var.kubernetes_group, "system:")
    error_message = "kubernetes_group: a group of your own; system: groups are Kubernetes' own."
  }
}

variable "subnet_ids" {
  type    = list(string)
  default = []
}

variable "security_group_ids" {
  type    = list(string)
  default = []
}

variable "git_credentials_secret_arns" {
  type    = list(string)
  default = []
}

variable "github_enterprise_hosts" {
  type    = string
  default = ""
}

variable "gitlab_hosts" {
  type    = string
  default = ""
}

variable "git_repo_creds" {
  type    = bool
  default = false
}

variable "git_secret_namespaces" {
  type    = string
  default = ""
}

variable "code_commit_repositories" {
  type    = list(string)
  default = []
}

variable "kube_api_endpoint" {
  type    = string
  default = ""
}

variable "kube_ca_data" {
  type      = string
  default   = ""
  sensitive = true
}
