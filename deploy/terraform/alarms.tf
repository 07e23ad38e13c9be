# template.yaml's alarms, all notifying alarm_topic_arn.

locals {
  alarm_actions = var.alarm_topic_arn != "" ? [var.alarm_topic_arn] : []
  # (metric, namespace, dimensions, statistic, period, evaluation periods, datapoints, threshold, description)
  single_metric_alarms = {
    dead-letters = {
      namespace   = "AWS/SQS", metric = "ApproximateNumberOfMessagesVisible", statistic = "Maximum", period = 60, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { QueueName = aws_sqs_queue.dead_letters.name }
      description = "An ECR event could not be applied; it waits in the dead-letter queue. Inspect it with argocd-ecr-updater-cli redrive."
    }
    dead-letter-age = {
      namespace   = "AWS/SQS", metric = "ApproximateAgeOfOldestMessage", statistic = "Maximum", period = 3600, periods = 1, datapoints = 1, threshold = 604800
      dimensions  = { QueueName = aws_sqs_queue.dead_letters.name }
      description = "An event has waited in the dead-letter queue for 7 days; SQS deletes it silently at 14."
    }
    errors = {
      namespace   = "AWS/Lambda", metric = "Errors", statistic = "Sum", period = 300, periods = 3, datapoints = 2, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Invocations keep failing; argocd-ecr-updater-cli doctor checks the access the function needs."
    }
    throttles = {
      namespace   = "AWS/Lambda", metric = "Throttles", statistic = "Sum", period = 300, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Invocations are throttled; pushes wait and may reach the dead-letter queue."
    }
    async-events-dropped = {
      namespace   = "AWS/Lambda", metric = "AsyncEventsDropped", statistic = "Sum", period = 300, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Lambda dropped events it could not process or park; reconcile catches them up at its next sweep."
    }
    destination-delivery = {
      namespace   = "AWS/Lambda", metric = "DestinationDeliveryFailures", statistic = "Sum", period = 300, periods = 1, datapoints = 1, threshold = 1
      dimensions  = { FunctionName = aws_lambda_function.function.function_name }
      description = "Lambda could not put a failed event into the dead-letter queue."
    }
    sweep-queue-age = {
      namespace   = "AWS/SQS", metric = "ApproximateAgeOfOldestMessage", statistic = "Maximum", period = 300, periods = 1, datapoints = 1, threshold = 1800
      dimensions  = { QueueName = aws_sqs_queue.sweep.name }
      description = "Sweep shards have waited over 30 minutes: the event source mapping is disabled or throttled (reserved_concurrency below sweep_concurrency), or shards keep failing."
    }
    reconcile-failing = {
      namespace   = "ArgocdEcrUpdater", metric = "InvocationsFailed", statistic = "Sum", period = 3600, periods = 1, datapoints = 1, threshold = 2
      dimensions  = { FunctionName = aws_lambda_function.function.function_name, Mode = "reconcile", Outcome = "failed" }
      description = "Reconcile sweeps failed twice within an hour; the report in the log names each failure."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "alarm" {
  for_each            = local.single_metric_alarms
  alarm_name          = "${var.name}-${each.key}"
  alarm_description   = each.value.description
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
}

# EventBridge could not invoke the function for an event after its retries: one query per
# rule, summed.
resource "aws_cloudwatch_metric_alarm" "event_delivery" {
  alarm_name          = "${var.name}-event-delivery"
  alarm_description   = "EventBridge could not invoke the function for an event after its retries (each such event is in the dead-letter queue)."
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions

  metric_query {
    id          = "failed"
    label       = "FailedInvocations of the module's rules"
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
        metric_name = "FailedInvocations"
        dimensions  = { RuleName = aws_cloudwatch_event_rule.rule[metric_query.value].name }
        period      = 300
        stat        = "Sum"
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
          ]
        }
      },
    ]
  })
}
