# template.yaml's alarms, all notifying alarm_topic_arn.

locals {
  alarm_actions = var.alarm_topic_arn != "" ? [var.alarm_topic_arn] : []
  # Each alarm is the template's of the same runbook (docs/troubleshooting.md, "Alarms"): its
  # metric, statistic, period, evaluation periods, datapoints and threshold.
  single_metric_alarms = {
    dead-letters = {
      runbook     = "DeadLetterAlarm"
      namespace   = "AWS/SQS", metric = "ApproximateNumberOfMessagesVisible", statistic = "Maximum", period = 60, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { QueueName = aws_sqs_queue.dead_letters.name }
      description = "An ECR event could not be applied; it waits in the dead-letter queue. Inspect it with argocd-ecr-updater-cli redrive --queue <dead_letter_queue_url> --function <function_name>"
    }
    dead-letter-age = {
      runbook     = "DeadLetterAgeAlarm"
      namespace   = "AWS/SQS", metric = "ApproximateAgeOfOldestMessage", statistic = "Maximum", period = 3600, periods = 1, datapoints = 1, threshold = 604800
      dimensions  = { QueueName = aws_sqs_queue.dead_letters.name }
      description = "An event has waited in the dead-letter queue for 7 days; SQS deletes it silently at 14. Redrive it (argocd-ecr-updater-cli redrive --queue <dead_letter_queue_url> --function <function_name> --apply) or discard it (redrive --queue <dead_letter_queue_url> --discard --apply)"
    }
    shard-dead-letters = {
      runbook     = "ShardDeadLetterAlarm"
      namespace   = "AWS/SQS", metric = "ApproximateNumberOfMessagesVisible", statistic = "Maximum", period = 300, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { QueueName = aws_sqs_queue.sweep_dead_letters.name }
      description = "A sweep shard failed five times and waits in the shards' dead-letter queue. The next sweep does its work again; find the cause in the shard's log (ShardsFailed), then discard it: argocd-ecr-updater-cli redrive --queue <sweep_dead_letter_queue_url> --discard"
    }
    errors = {
      runbook     = "FunctionErrorsAlarm"
      namespace   = "AWS/Lambda", metric = "Errors", statistic = "Sum", period = 300, periods = 3, datapoints = 2, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Invocations keep failing (cluster unreachable, access denied, bad configuration). The function's log says why; argocd-ecr-updater-cli doctor checks the access it needs"
    }
    # Lambda retries a throttled asynchronous event for hours, so a throttle now and then loses
    # nothing; ten in each of two five-minute periods is a ceiling being hit.
    throttles = {
      runbook     = "FunctionThrottlesAlarm"
      namespace   = "AWS/Lambda", metric = "Throttles", statistic = "Sum", period = 300, periods = 2, datapoints = 2, threshold = 10
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Invocations keep being throttled (reserved_concurrency or the account's concurrency); pushes wait in Lambda's queue and may reach the dead-letter queue"
    }
    async-events-dropped = {
      runbook     = "AsyncEventsDroppedAlarm"
      namespace   = "AWS/Lambda", metric = "AsyncEventsDropped", statistic = "Sum", period = 300, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Lambda dropped events it could not process or park (too old, or the dead-letter queue refused them): these pushes are lost; reconcile mode catches them up at its next sweep"
    }
    destination-delivery = {
      runbook     = "DestinationDeliveryAlarm"
      namespace   = "AWS/Lambda", metric = "DestinationDeliveryFailures", statistic = "Sum", period = 300, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Lambda could not put a failed event into the dead-letter queue (its policy or encryption key refuses the function's role)"
    }
    sweep-queue-age = {
      runbook     = "SweepQueueAgeAlarm"
      namespace   = "AWS/SQS", metric = "ApproximateAgeOfOldestMessage", statistic = "Maximum", period = 300, periods = 1, datapoints = 1, threshold = 1800
      dimensions  = { QueueName = aws_sqs_queue.sweep.name }
      description = "Sweep shards have waited over 30 minutes: the event source mapping is disabled or throttled (reserved_concurrency below sweep_concurrency), or shards keep failing"
    }
    reconcile-failing = {
      runbook     = "ReconcileFailingAlarm"
      namespace   = "ArgocdEcrUpdater", metric = "InvocationsFailed", statistic = "Sum", period = 3600, periods = 1, datapoints = 1, threshold = 2
      dimensions  = { FunctionName = aws_lambda_function.function.function_name, Mode = "reconcile", Outcome = "failed" }
      description = "Reconcile sweeps failed twice within an hour (cluster unreachable, access denied, an Application that could not be written). The report in the log names each failure"
    }
  }
  # The rules' EventBridge metrics, one query per rule, summed.
  rule_metric_alarms = {
    event-delivery = {
      runbook     = "EventDeliveryAlarm"
      metric      = "FailedInvocations"
      description = "EventBridge could not invoke the function for an event after its retries (each such event is in the dead-letter queue)"
    }
    events-lost = {
      runbook     = "EventsLostAlarm"
      metric      = "InvocationsFailedToBeSentToDlq"
      description = "EventBridge could neither invoke the function nor put the event in the dead-letter queue: these events are lost (the queue's policy or key refuses EventBridge, or the queue is gone); reconcile catches them up at its next sweep"
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "alarm" {
  for_each            = local.single_metric_alarms
  alarm_name          = "${var.name}-${each.key}"
  alarm_description   = "${each.value.description} (runbook: ${each.value.runbook})."
  namespace           = each.value.namespace
  metric_name         = each.value.metric
  dimensions          = each.value.dimensions
  statistic           = each.value.statistic
  period              = each.value.period
  evaluation_periods  = each.value.periods
  datapoints_to_alarm = each.value.datapoints
  threshold           = each.value.threshold
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
}

resource "aws_cloudwatch_metric_alarm" "rules" {
  for_each            = local.rule_metric_alarms
  alarm_name          = "${var.name}-${each.key}"
  alarm_description   = "${each.value.description} (runbook: ${each.value.runbook})."
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions

  metric_query {
    id          = "total"
    label       = "${each.value.metric} of the module's rules"
    expression  = join(" + ", [for rule in local.rules : "FILL(${replace(rule, "-", "_")}, 0)"])
    return_data = true
  }

  dynamic "metric_query" {
    for_each = local.rules
    content {
      id          = replace(metric_query.value, "-", "_")
      return_data = false
      metric {
        namespace   = "AWS/Events"
        metric_name = each.value.metric
        dimensions  = { RuleName = aws_cloudwatch_event_rule.rule[metric_query.value].name }
        period      = 300
        stat        = "Sum"
      }
    }
  }
}

# Every invocation reports InvocationsFailed (0 or 1), so its sample count is how many sweeps
# ran; none for twice the schedule's interval means the schedule stopped. No data at all is
# the case this alarm is for, so missing data breaches.
resource "aws_cloudwatch_metric_alarm" "sweeps_stopped" {
  count               = var.reconcile_enabled ? 1 : 0
  alarm_name          = "${var.name}-sweeps-stopped"
  alarm_description   = "No reconcile sweep has run for reconcile_missing_after_seconds: the schedule rule is disabled or deleted, or EventBridge may not invoke the function; pushes missed in the meantime are not caught up (runbook: SweepsStoppedAlarm)."
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions

  metric_query {
    id          = "sweeps"
    label       = "reconcile sweeps run"
    expression  = "FILL(ok, 0) + FILL(failed, 0)"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = ["ok", "failed"]
    content {
      id          = metric_query.value
      return_data = false
      metric {
        namespace   = "ArgocdEcrUpdater"
        metric_name = "InvocationsFailed"
        dimensions  = { FunctionName = aws_lambda_function.function.function_name, Mode = "reconcile", Outcome = metric_query.value }
        period      = var.reconcile_missing_after_seconds
        stat        = "SampleCount"
      }
    }
  }
}

resource "aws_cloudwatch_dashboard" "function" {
  count          = var.dashboard ? 1 : 0
  dashboard_name = "${var.name}-updater"
  dashboard_body = jsonencode({
    widgets = [
      {
        type = "metric", width = 12, height = 6
        properties = {
          title = "Images per invocation", region = local.region, stat = "Sum", period = 300
          metrics = [
            for line in [["ImagesUpdated", "push", "ok"], ["ImagesFailed", "push", "failed"], ["ImagesUpdated", "scan", "ok"], ["ImagesSkipped", "scan", "ok"], ["ImagesFailed", "scan", "failed"], ["ImagesUpdated", "reconcile", "ok"], ["InvocationsFailed", "reconcile", "failed"], ["SweepShards", "reconcile", "ok"], ["ImagesUpdated", "shard", "ok"], ["ShardsFailed", "shard", "failed"]] :
            ["ArgocdEcrUpdater", line[0], "FunctionName", aws_lambda_function.function.function_name, "Mode", line[1], "Outcome", line[2]]
          ]
        }
      },
      {
        type = "metric", width = 12, height = 6
        properties = {
          title = "Duration and dead letters", region = local.region, period = 300
          metrics = [
            ["ArgocdEcrUpdater", "DurationMs", "FunctionName", aws_lambda_function.function.function_name, "Mode", "push", "Outcome", "ok", { stat = "p99" }],
            ["ArgocdEcrUpdater", "DurationMs", "FunctionName", aws_lambda_function.function.function_name, "Mode", "scan", "Outcome", "ok", { stat = "p99" }],
            ["ArgocdEcrUpdater", "DurationMs", "FunctionName", aws_lambda_function.function.function_name, "Mode", "shard", "Outcome", "ok", { stat = "Maximum" }],
            ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.dead_letters.name, { stat = "Maximum" }],
            ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.sweep.name, { stat = "Maximum" }],
            ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.sweep_dead_letters.name, { stat = "Maximum" }],
          ]
        }
      },
      {
        type = "metric", width = 12, height = 6
        properties = {
          title = "Rollout lead time: ECR push to live (s)", region = local.region, period = 3600
          metrics = [
            ["ArgocdEcrUpdater", "LeadTimeSeconds", "FunctionName", aws_lambda_function.function.function_name, "Outcome", "confirmed", { stat = "p50", label = "lead time p50" }],
            ["ArgocdEcrUpdater", "LeadTimeSeconds", "FunctionName", aws_lambda_function.function.function_name, "Outcome", "confirmed", { stat = "p90", label = "lead time p90" }],
            ["ArgocdEcrUpdater", "WriteToLiveSeconds", "FunctionName", aws_lambda_function.function.function_name, "Outcome", "confirmed", { stat = "p50", label = "write to live p50" }],
          ]
        }
      },
      {
        type = "metric", width = 12, height = 6
        properties = {
          title = "Rollouts by outcome", region = local.region, stat = "Sum", period = 3600
          metrics = [
            for outcome in ["confirmed", "failed", "timed-out"] :
            ["ArgocdEcrUpdater", "Rollouts", "FunctionName", aws_lambda_function.function.function_name, "Outcome", outcome]
          ]
        }
      },
    ]
  })
}

# The delivery alarm was a resource of its own before the events-lost alarm joined it.
moved {
  from = aws_cloudwatch_metric_alarm.event_delivery
  to   = aws_cloudwatch_metric_alarm.rules["event-delivery"]
}
