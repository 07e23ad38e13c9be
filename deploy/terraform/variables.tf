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
  validation {
    condition     = can(regex("^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", var.cluster_name))
    error_message = "cluster_name: an EKS cluster name."
  }
}

variable "additional_cluster_names" {
  description = "Further EKS clusters in this account and region whose Argo CD the function also updates; each gets an access entry."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for v in var.additional_cluster_names : can(regex("^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", v))])
    error_message = "additional_cluster_names: EKS cluster names (whole names, no wildcards)."
  }
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
  validation {
    condition     = alltrue([for v in var.cluster_arns : can(regex("^arn:aws[a-z-]*:eks:[a-z0-9-]+:[0-9]{12}:cluster/[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", v))])
    error_message = "cluster_arns: whole EKS cluster ARNs (arn:aws:eks:<region>:<account>:cluster/<name>), no wildcards."
  }
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

variable "operator_role_arns" {
  description = "Roles of the operators who run the CLI's plan and redrive --local (and doctor --assume-role): the function's role trusts them, so a local run acts as the function. Whoever may use them may act as the function (whole ARNs)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for arn in var.operator_role_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", arn))])
    error_message = "operator_role_arns: whole IAM role ARNs, no wildcards."
  }
}

variable "argocd_namespaces" {
  description = "Comma-separated namespaces holding Applications, or * for all."
  type        = string
  default     = "argocd"
}

variable "argocd_eks_capability" {
  description = "Argo CD is AWS's managed one (the EKS capability for Argo CD) and cluster_name is its hub: Applications outside the capability's namespace (argocd_namespaces, one entry) are skipped with the reason, and a cluster-wide listing is refused."
  type        = bool
  default     = false
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

variable "reconcile_missing_after_seconds" {
  description = "Alarm when no reconcile sweep has run for this long: twice reconcile_schedule's interval (1800 for the default rate(15 minutes)), in whole minutes."
  type        = number
  default     = 1800
  validation {
    condition     = var.reconcile_missing_after_seconds >= 120 && var.reconcile_missing_after_seconds <= 86400 && var.reconcile_missing_after_seconds % 60 == 0
    error_message = "reconcile_missing_after_seconds is whole minutes from 120 to 86400 (a CloudWatch period)."
  }
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

variable "image_labels" {
  description = "Let the function read image configs (ecr:GetDownloadUrlForLayer) for their OCI labels, which the built-from gate (argocd-ecr-updater.io/<alias>.built-from) checks."
  type        = bool
  default     = false
}

variable "commit_statuses" {
  description = "Let the function read image configs (ecr:GetDownloadUrlForLayer) for their source labels, to set commit statuses for Applications annotated argocd-ecr-updater.io/commit-status; the credential is a git_credentials_secret_arns secret scoped to the repository by url."
  type        = bool
  default     = false
}

variable "notation_trust_roots" {
  description = "Base64 of the PEM root certificates (the AWS Signer root) that the Notation signature of an image under a signing-profile gate must chain to: set, the gate verifies the signature itself, and the function may download the envelopes (ecr:GetDownloadUrlForLayer)."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^[A-Za-z0-9+/=]*$", var.notation_trust_roots))
    error_message = "notation_trust_roots: base64 of PEM certificates (base64 -w0 root.pem)."
  }
}

variable "signature_referrers" {
  type    = bool
  default = false
}

variable "notation_trust_roots_secret_arn" {
  description = "Instead of notation_trust_roots: a Secrets Manager secret whose text is the PEM root certificates (aws secretsmanager create-secret --secret-string file://root.pem), read once at cold start; the role may read exactly this secret. Lambda holds all environment variables to 4 KB together, which roots beside the rest of the configuration may not fit."
  type        = string
  default     = ""
  validation {
    condition     = var.notation_trust_roots_secret_arn == "" || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$", var.notation_trust_roots_secret_arn))
    error_message = "notation_trust_roots_secret_arn: a whole Secrets Manager secret ARN, no wildcards."
  }
  validation {
    condition     = var.notation_trust_roots_secret_arn == "" || var.notation_trust_roots == ""
    error_message = "Set notation_trust_roots or notation_trust_roots_secret_arn, not both."
  }
}

variable "cosign_key_secret_arns" {
  type    = list(string)
  default = []
  validation {
    condition     = alltrue([for v in var.cosign_key_secret_arns : can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$", v))])
    error_message = "cosign_key_secret_arns: whole Secrets Manager secret ARNs, no wildcards."
  }
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
  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days: one of the periods CloudWatch Logs offers (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, …, 3653)."
  }
}

variable "alarm_topic_arn" {
  description = "SNS topic every alarm notifies; empty, they notify nobody (the alarm_notifications output says so)."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$", var.alarm_topic_arn))
    error_message = "alarm_topic_arn: an SNS topic ARN, or empty."
  }
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
  validation {
    condition     = var.sweep_concurrency >= 2 && var.sweep_concurrency <= 1000
    error_message = "sweep_concurrency: 2 to 1000 (the event source mapping's maximum concurrency)."
  }
}

variable "sweep_cluster_requests" {
  description = "The most Kubernetes API requests a fanned-out sweep keeps in flight against one cluster, all shards together."
  type        = number
  default     = 40
}

variable "confirm_rollouts" {
  description = "Follow each write until it is live (synced, running, Healthy), failed or out of time; checks ride the sweep queue with a delay, and each outcome is an Event, a log line, metrics and the SNS report."
  type        = bool
  default     = true
}

variable "rollout_metric_applications" {
  description = "namespace/name of Applications (at most 50) whose rollout lead times also get a metric dimension of their own (each is a custom metric)."
  type        = list(string)
  default     = []
  validation {
    condition     = length(var.rollout_metric_applications) <= 50 && alltrue([for a in var.rollout_metric_applications : can(regex("^[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9.-]{0,252}$", a))])
    error_message = "rollout_metric_applications: at most 50 entries, each namespace/name."
  }
}

variable "notification_topic_arn" {
  type    = string
  default = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$", var.notification_topic_arn))
    error_message = "notification_topic_arn: an SNS topic ARN, or empty."
  }
}

variable "notification_format" {
  description = "What notification_topic_arn receives: report (the report as JSON) or chat (a custom notification Amazon Q Developer in chat applications renders in Slack or Teams)."
  type        = string
  default     = "report"
  validation {
    condition     = contains(["report", "chat"], var.notification_format)
    error_message = "notification_format: report or chat."
  }
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
  validation {
    condition     = alltrue([for v in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", v))])
    error_message = "subnet_ids: subnet IDs (subnet-…)."
  }
}

variable "security_group_ids" {
  type    = list(string)
  default = []
  validation {
    condition     = alltrue([for v in var.security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", v))])
    error_message = "security_group_ids: security group IDs (sg-…)."
  }
}

variable "git_credentials_secret_arns" {
  type    = list(string)
  default = []
  validation {
    condition     = alltrue([for v in var.git_credentials_secret_arns : can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$", v))])
    error_message = "git_credentials_secret_arns: whole Secrets Manager secret ARNs, no wildcards."
  }
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
  validation {
    condition     = can(regex("^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(,[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", var.git_secret_namespaces))
    error_message = "git_secret_namespaces: comma-separated namespace names."
  }
}

variable "code_commit_repositories" {
  type    = list(string)
  default = []
  validation {
    condition     = alltrue([for v in var.code_commit_repositories : can(regex("^[A-Za-z0-9._-]{1,100}$", v))])
    error_message = "code_commit_repositories: CodeCommit repository names, no wildcards."
  }
}

variable "verify_alarm_names" {
  type    = list(string)
  default = []
  validation {
    condition     = alltrue([for v in var.verify_alarm_names : can(regex("^[A-Za-z0-9 ._/#:()+=@-]{1,255}$", v))])
    error_message = "verify_alarm_names: CloudWatch alarm names of this account and region, no wildcards."
  }
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

variable "tags" {
  description = "Tags for every resource the module makes that takes them."
  type        = map(string)
  default     = {}
}

variable "permissions_boundary" {
  description = "A permissions boundary policy ARN for the function's role, where your account requires one."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/[A-Za-z0-9+=,.@_/-]+$", var.permissions_boundary))
    error_message = "permissions_boundary: an IAM policy ARN, or empty."
  }
}

variable "kms_key_arn" {
  description = "A KMS key of your own for both queues and the log group (default: SQS- and CloudWatch-managed encryption). Its key policy must let the function's role, EventBridge (events.amazonaws.com) and CloudWatch Logs use it."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "kms_key_arn: a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), or empty; no alias, no wildcard."
  }
}
