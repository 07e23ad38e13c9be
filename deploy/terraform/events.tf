# The rules that invoke the function: template.yaml's push, scan, replication, Inspector and
# reconcile rules, each retried and then parked in the one dead-letter queue.

locals {
  # The push rule's repository filter: the names, or every name with the prefix. The two
  # sides are of different types (objects, strings), so each is a JSON text of the same type.
  repository_filter = jsondecode(local.use_prefix ? jsonencode([{ prefix = var.ecr_repository_prefix }]) : jsonencode(var.ecr_repository_names))
  # Inspector names a repository by ARN: this account's and the registry accounts'.
  inspector_repositories = local.use_prefix ? [
    { wildcard = "arn:${local.partition}:ecr:${local.region}:*:repository/${var.ecr_repository_prefix}*" }
  ] : [for name in var.ecr_repository_names : { wildcard = "arn:*:ecr:*:*:repository/${name}" }]

  push_pattern = {
    source        = ["aws.ecr"]
    "detail-type" = ["ECR Image Action"]
    detail = {
      "action-type" = ["PUSH"]
      result        = ["SUCCESS"]
      # Untagged pushes (platform manifests of a multi-arch push) carry "image-tag": "".
      "image-tag"       = [{ "anything-but" = "" }]
      "repository-name" = local.repository_filter
    }
  }
  scan_pattern = {
    source        = ["aws.ecr"]
    "detail-type" = ["ECR Image Scan"]
    detail = {
      "scan-status"     = ["COMPLETE"]
      "repository-name" = local.repository_filter
    }
  }
  replication_pattern = {
    source        = ["aws.ecr"]
    "detail-type" = ["ECR Replication Action"]
    detail = {
      result            = ["SUCCESS"]
      "repository-name" = local.repository_filter
    }
  }
  inspector_pattern = {
    source        = ["aws.inspector2"]
    "detail-type" = ["Inspector2 Scan"]
    account       = concat([local.account], var.registry_accounts)
    region        = [local.region]
    detail = {
      "scan-status"     = ["INITIAL_SCAN_COMPLETE"]
      "repository-name" = local.inspector_repositories
    }
  }

  # Each rule: its pattern or schedule, whether it is on, and its retry policy.
  rule_settings = {
    ecr-push        = { pattern = local.push_pattern, schedule = null, enabled = true, retries = 8, max_age = 3600 }
    ecr-scan        = { pattern = local.scan_pattern, schedule = null, enabled = var.scan_events, retries = 8, max_age = 3600 }
    ecr-replication = { pattern = local.replication_pattern, schedule = null, enabled = var.replication_events, retries = 8, max_age = 3600 }
    inspector-scan  = { pattern = local.inspector_pattern, schedule = null, enabled = var.scan_events, retries = 8, max_age = 3600 }
    # A reconcile is only worth running in its own period: the next one starts anew.
    reconcile = { pattern = null, schedule = var.reconcile_schedule, enabled = var.reconcile_enabled, retries = 2, max_age = 60 }
  }
  rules = keys(local.rule_settings)
}

resource "aws_cloudwatch_event_rule" "rule" {
  for_each            = local.rule_settings
  name                = "${var.name}-${each.key}"
  event_pattern       = each.value.pattern == null ? null : jsonencode(each.value.pattern)
  schedule_expression = each.value.schedule
  state               = each.value.enabled ? "ENABLED" : "DISABLED"
}

resource "aws_cloudwatch_event_target" "function" {
  for_each = local.rule_settings
  rule     = aws_cloudwatch_event_rule.rule[each.key].name
  arn      = aws_lambda_function.function.arn
  retry_policy {
    maximum_retry_attempts       = each.value.retries
    maximum_event_age_in_seconds = each.value.max_age
  }
  dead_letter_config {
    arn = aws_sqs_queue.dead_letters.arn
  }
}

resource "aws_lambda_permission" "rule" {
  for_each      = local.rule_settings
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.function.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.rule[each.key].arn
}

# Registry accounts may put events on this account's default bus: one statement each, added
# beside whatever the bus policy holds already (a bus policy resource would replace it all).
# The provider's permission resource cannot carry the template's conditions on the event's
# source and detail type; those only narrow what an allowed account may put, and the rules
# above match the ECR and Inspector events alone (an account cannot put an `aws.*` source
# itself: EventBridge keeps those for AWS's own events, which it forwards).
resource "aws_cloudwatch_event_permission" "registry_accounts" {
  for_each       = toset(var.registry_accounts)
  principal      = each.value
  statement_id   = "${var.name}-registry-${each.value}"
  event_bus_name = "default"
  action         = "events:PutEvents"
}
