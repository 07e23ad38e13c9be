region               = "ap-northeast-2"
hub_cluster_name     = "barun-hub"
argocd_namespace     = "argocd"
ecr_repository_names = ["barun-dev-ecr"]
# From Amazon Q Developer in chat applications' console once the workspace is authorised, and
# the channel's details in Slack; leave them out for no chat channel.
slack_workspace_id = "T07EA123LEP"
slack_channel_id   = "C07EZ1ABC23"
