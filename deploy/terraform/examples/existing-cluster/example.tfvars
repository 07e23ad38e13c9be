# The seed's values (README: the seed's cluster, registry and Application). Replace them with
# yours.
region               = "ap-northeast-2"
cluster_name         = "barun-dev"
ecr_repository_names = ["barun-dev-ecr"]
