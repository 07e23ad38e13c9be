output "function_arn" {
  value = aws_lambda_function.function.arn
}

output "function_name" {
  description = "What argocd-ecr-updater-cli doctor --function checks."
  value       = aws_lambda_function.function.function_name
}

output "role_arn" {
  description = "Map this role in the cluster (access entry or aws-auth) and bind its group with deploy/rbac.yaml."
  value       = aws_iam_role.function.arn
}

output "dead_letter_queue_url" {
  value = aws_sqs_queue.dead_letters.url
}

output "sweep_dead_letter_queue_url" {
  description = "Where sweep shards that failed five times wait (redrive --discard empties it)."
  value       = aws_sqs_queue.sweep_dead_letters.url
}

output "sweep_queue_url" {
  description = "Where a large fleet's sweep sends its shards."
  value       = aws_sqs_queue.sweep.url
}

output "alarm_notifications" {
  description = "Who the alarms page."
  value       = var.alarm_topic_arn != "" ? var.alarm_topic_arn : "nobody: no alarm_topic_arn is set, so the alarms only show in the CloudWatch console"
}

output "rbac_manifest" {
  description = "deploy/rbac.yaml's Role and RoleBinding (all namespaced) for each namespace of argocd_namespaces, bound to kubernetes_group: `terraform output -raw rbac_manifest | kubectl apply -f -`. Empty with argocd_namespaces = \"*\", which needs deploy/rbac-all-namespaces.yaml's ClusterRole instead."
  value = var.argocd_namespaces == "*" ? "" : join("\n", [
    for namespace in compact([for n in split(",", var.argocd_namespaces) : trimspace(n)]) :
    replace(
      replace(file("${path.module}/../rbac.yaml"), "namespace: argocd\n", "namespace: ${namespace}\n"),
      "kind: Group\n    name: argocd-ecr-updater\n",
      "kind: Group\n    name: ${var.kubernetes_group}\n"
    )
  ])
}
