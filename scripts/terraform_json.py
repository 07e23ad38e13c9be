"""Prints the Terraform files of a folder as JSON, parsed by python-hcl2, for the tests.

    .venv-terraform/bin/python scripts/terraform_json.py deploy/terraform > module.json

Output: {"<file name>": <python-hcl2's dict of the file>}. Expressions python-hcl2 cannot
reduce to a value (references, function calls) come out as "${...}" strings.
"""

import json
import os
import sys

import hcl2


def main():
    folder = sys.argv[1]
    parsed = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".tf"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                parsed[name] = hcl2.load(f)
    json.dump(parsed, sys.stdout, indent=1, sort_keys=True, default=str)
    print()


if __name__ == "__main__":
    main()
