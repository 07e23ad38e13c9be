terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.33 brought aws_eks_access_entry, the newest resource the module uses. Validated and
      # tested with terraform against 5.x (deploy/terraform/tests/), and checked against the
      # argument names of 6.x's schema (provider-schema.json).
      version = ">= 5.33, < 7.0"
    }
  }
}
