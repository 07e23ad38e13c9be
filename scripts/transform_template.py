"""Prints template.yaml as CloudFormation will run it: after the AWS::Serverless transform.

Uses the SAM translator that `aws-sam-cli` installs (the same code the CloudFormation
transform runs), offline: no AWS account, no managed policies looked up. The template tests
read its output, so a SAM key that is silently ignored or rewritten (a dead-letter queue that
is not the stack's queue) fails a test.

    .venv/bin/python scripts/transform_template.py [template.yaml] > transformed.json
"""

import json
import os
import sys

# The translator asks boto3 for the region of its pseudo parameters; no call leaves the machine.
os.environ.setdefault("AWS_DEFAULT_REGION", "ap-northeast-2")

from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The template names no managed policy by name, so nothing needs resolving."""

    def load(self):
        return {}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    with open(path, encoding="utf-8") as f:
        template = yaml_parse(f.read())
    # `sam deploy` uploads the built code and puts its S3 location here before the transform.
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") == "AWS::Serverless::Function":
            code = resource.get("Properties", {}).get("CodeUri")
            if isinstance(code, str) and not code.startswith("s3://"):
                resource["Properties"]["CodeUri"] = "s3://packaged/argocd-ecr-updater.zip"
    parameters = {
        "AWS::Region": "ap-northeast-2",
        "AWS::AccountId": "123456789012",
        "AWS::Partition": "aws",
        "AWS::StackName": "argocd-ecr-updater",
        "ClusterName": "barun-dev",
        "EcrRepositoryNames": ["barun-dev-ecr"],
    }
    try:
        transformed = transform(template, parameters, NoManagedPolicies())
    except InvalidDocumentException as error:
        for cause in error.causes:
            print(f"template.yaml: {cause.message}", file=sys.stderr)
        sys.exit(2)
    json.dump(transformed, sys.stdout, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
