"""The baseline: what a team writes without this project.

A small function with boto3 and the Kubernetes Python client: on an ECR push event, list
every Application, keep those whose Image Updater annotation names the pushed repository,
ask ECR whether the pushed tag is newer than the running one, and patch the Helm parameter.
Honest and simple, and so it skips what argocd-ecr-updater does beyond it: no metadata-only
listing (every Application's status is downloaded), no pagination, no guard against a
concurrent edit (a merge patch replaces the parameter list), no liveness rule, no
multi-source or Kustomize handling, no allow-tags or strategies other than "newest push",
no retries or failure classes.

    python baseline.py EVENT_FILE
Configuration from the environment: KUBE_API_ENDPOINT, KUBE_CA_FILE, KUBE_TOKEN,
AWS_ENDPOINT_URL_ECR (boto3 reads it), AWS_REGION and the credentials.
Prints one JSON line: what it updated, and its own peak RSS.
"""

import json
import os
import resource
import sys

import boto3
import kubernetes

PREFIX = "argocd-image-updater.argoproj.io/"


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        event = json.load(f)
    detail = event["detail"]
    registry = f"{event['account']}.dkr.ecr.{event['region']}.amazonaws.com"
    image = f"{registry}/{detail['repository-name']}"
    tag = detail["image-tag"]

    configuration = kubernetes.client.Configuration()
    configuration.host = os.environ["KUBE_API_ENDPOINT"]
    configuration.ssl_ca_cert = os.environ["KUBE_CA_FILE"]
    configuration.api_key = {"authorization": "Bearer " + os.environ["KUBE_TOKEN"]}
    api = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(configuration))
    ecr = boto3.client("ecr")

    apps = api.list_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd", "applications")
    updated = []
    for app in apps["items"]:
        annotations = app["metadata"].get("annotations") or {}
        if image not in annotations.get(PREFIX + "image-list", ""):
            continue
        alias = annotations[PREFIX + "image-list"].split("=")[0]
        tag_parameter = annotations.get(f"{PREFIX}{alias}.helm.image-tag", "image.tag")
        parameters = app["spec"]["source"]["helm"]["parameters"]
        current = next((p["value"] for p in parameters if p["name"] == tag_parameter), None)
        described = ecr.describe_images(
            registryId=event["account"],
            repositoryName=detail["repository-name"],
            imageIds=[{"imageTag": t} for t in {tag, current} if t],
        )["imageDetails"]
        pushed = {t: d["imagePushedAt"] for d in described for t in d.get("imageTags", [])}
        if current in pushed and pushed[tag] <= pushed[current]:
            continue
        for p in parameters:
            if p["name"] == tag_parameter:
                p["value"] = tag
        api.patch_namespaced_custom_object(
            "argoproj.io", "v1alpha1", "argocd", "applications", app["metadata"]["name"],
            {"spec": {"source": {"helm": {"parameters": parameters}}}},
        )
        updated.append(app["metadata"]["name"])
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"updated": updated, "peak_rss_kb": peak_kb}))


if __name__ == "__main__":
    main()
