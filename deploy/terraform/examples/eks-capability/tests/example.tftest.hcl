# The example planned with a mocked AWS provider: the chat channel subscribed to the topic the
# function sends its chat notifications to, or nothing of it without a Slack channel, and the
# Role and RoleBinding in the capability's namespace. ./scripts/test runs it.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "768157413559" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { id = "ap-northeast-2" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::768157413559:role/argocd-ecr-updater-role" }
  }
  mock_resource "aws_sns_topic" {
    defaults = { arn = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-chat" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:ap-northeast-2:768157413559:q", url = "https://sqs.ap-northeast-2.amazonaws.com/768157413559/q" }
  }
  mock_resource "aws_cloudwatch_log_group" {
    defaults = { arn = "arn:aws:logs:ap-northeast-2:768157413559:log-group:/aws/lambda/argocd-ecr-updater" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:ap-northeast-2:768157413559:rule/argocd-ecr-updater-rule" }
  }
  mock_resource "aws_lambda_function" {
    defaults = { arn = "arn:aws:lambda:ap-northeast-2:768157413559:function:argocd-ecr-updater" }
  }
}
variables {
  region               = "ap-northeast-2"
  hub_cluster_name     = "barun-hub"
  ecr_repository_names = ["barun-dev-ecr"]
  package_file         = "../../tests/fixtures/bootstrap.zip"
}
run "with_a_slack_channel" {
  command = apply
  variables {
    slack_workspace_id = "T07EA123LEP"
    slack_channel_id   = "C07EZ1ABC23"
  }
  assert {
    condition     = output.chat_topic_arn == "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-chat"
    error_message = "the function publishes to the chat topic"
  }
  assert {
    condition     = aws_chatbot_slack_channel_configuration.chat[0].sns_topic_arns == toset([output.chat_topic_arn])
    error_message = "the Slack channel is subscribed to that topic"
  }
  assert {
    condition     = length(regexall("namespace: argocd\n", output.rbac_manifest)) == 2
    error_message = "the Role and RoleBinding in the capability's namespace"
  }
}
run "without_a_slack_channel" {
  command = plan
  assert {
    condition     = length(aws_chatbot_slack_channel_configuration.chat) == 0 && output.chat_topic_arn == ""
    error_message = "no chat channel unless asked for"
  }
}
