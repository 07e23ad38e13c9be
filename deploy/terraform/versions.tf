terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Checked against the argument names of this provider's schema (provider-schema.json).
      version = ">= 6.0, < 7.0"
    }
  }
}
