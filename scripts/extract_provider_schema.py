"""Extracts the argument names of the AWS provider resources the Terraform module uses.

The `@cdktf/provider-aws` npm package is generated from the provider's schema: each resource's
`synthesizeAttributes()` lists its arguments and nested blocks in Terraform's own snake_case,
and each nested block has a `…ToTerraform(struct)` function listing its own. This reads those
and writes the small extract the tests check the module against
(`deploy/terraform/provider-schema.json`), so no terraform binary and no network is needed at
test time. Regenerate after a provider upgrade:

    npm pack @cdktf/provider-aws@<version> && tar xzf cdktf-provider-aws-<version>.tgz
    python3 scripts/extract_provider_schema.py package > deploy/terraform/provider-schema.json
"""

import json
import os
import re
import sys

# The resources and data sources the module uses: add one here when the module does.
USED = [
    "aws_chatbot_slack_channel_configuration",
    "aws_cloudwatch_dashboard",
    "aws_cloudwatch_event_permission",
    "aws_cloudwatch_event_rule",
    "aws_cloudwatch_event_target",
    "aws_cloudwatch_log_group",
    "aws_cloudwatch_metric_alarm",
    "aws_eks_access_entry",
    "aws_iam_role",
    "aws_iam_role_policy",
    "aws_lambda_function",
    "aws_lambda_event_source_mapping",
    "aws_lambda_function_event_invoke_config",
    "aws_lambda_permission",
    "aws_sns_topic",
    "aws_sqs_queue",
    "aws_sqs_queue_policy",
    "aws_sqs_queue_redrive_allow_policy",
    "data.aws_caller_identity",
    "data.aws_partition",
    "data.aws_region",
]

KEY = re.compile(r"^\s+([a-z0-9_]+): (.*?),?$")
# A nested block's converter, called directly or through `cdktf.listMapper(…)`; the `cdktf.`
# converters (`stringToTerraform`…) are values, not blocks.
BLOCK = re.compile(r"(?<!cdktf\.)\b([a-z][A-Za-z0-9]*ToTerraform)\b")


def object_keys(source, start):
    """The `key: expression` lines of the object literal returned after `start`."""
    body = source[source.index("return {", start) + len("return {"):]
    depth, out, line = 1, [], ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                break
        if ch == "\n":
            if depth == 1:
                out.append(line)
            line = ""
        else:
            line += ch
    if line and depth <= 1:
        out.append(line)
    pairs = []
    for text in out:
        match = KEY.match(text)
        if match:
            pairs.append((match.group(1), match.group(2)))
    return pairs


def describe(source, start):
    """Arguments and nested blocks of the object built after `start`."""
    arguments, blocks = [], {}
    for key, expression in object_keys(source, start):
        nested = BLOCK.search(expression)
        if nested:
            where = source.find(f"function {nested.group(1)}(struct)")
            if where >= 0:
                blocks[key] = describe(source, where)
                continue
        arguments.append(key)
    return {"arguments": sorted(arguments), "blocks": blocks}


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "package.json"), encoding="utf-8") as f:
        package = json.load(f)
    resources = {}
    for name in USED:
        folder = name.replace("data.aws_", "data-aws-").replace("aws_", "", 1).replace("_", "-")
        if name.startswith("data."):
            folder = "data-aws-" + name[len("data.aws_"):].replace("_", "-")
        path = os.path.join(root, "lib", folder, "index.js")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        expected = name[len("data."):] if name.startswith("data.") else name
        if f'tfResourceType = "{expected}"' not in source:
            sys.exit(f"{path} is not {name}")
        resources[name] = describe(source, source.index("synthesizeAttributes() {"))
    json.dump(
        {
            "source": f"{package['name']} {package['version']} (generated from the hashicorp/aws provider schema), by scripts/extract_provider_schema.py",
            "resources": resources,
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    print()


if __name__ == "__main__":
    main()
