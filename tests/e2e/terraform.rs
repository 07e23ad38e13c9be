//! The Terraform module (`deploy/terraform/`) held to `template.yaml`, beside what
//! `./scripts/test` runs with terraform itself (`fmt -check`, `validate`, and
//! `deploy/terraform/tests/`'s plans with a mocked provider): every argument and nested block it
//! writes exists in the AWS provider's 6.x schema (the vendored extract,
//! `deploy/terraform/provider-schema.json`; the terraform checks run 5.x), and it deploys what
//! the template deploys: the role's statements one by one (through the expected files the
//! terraform tests hold the module's plan to), event patterns, retry settings, the sweep queue
//! and alarm metrics, so the two deploy paths cannot drift. `./scripts/test` also runs checkov.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::template::{of_type, python_json, transformed};
use crate::template_operations::{alarmed_metrics, evaluator_for};

/// The `.tf` files of `folder` as python-hcl2 parses them, with the tools `./scripts/test`
/// installs into `.venv-terraform`.
fn parsed(folder: &str) -> Option<BTreeMap<String, Value>> {
    let files = python_json(
        ".venv-terraform",
        "python-hcl2",
        &["scripts/terraform_json.py", folder],
    )?;
    Some(serde_json::from_value(files).unwrap())
}

fn schema() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/terraform/provider-schema.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Terraform's own meta-arguments and python-hcl2's line markers.
const META: &[&str] = &[
    "count",
    "for_each",
    "depends_on",
    "lifecycle",
    "provider",
    "__start_line__",
    "__end_line__",
];

/// Every argument and block of `body` against `schema` (`arguments`, `blocks`); `dynamic`
/// blocks are checked as the block they generate. Returns what the schema does not know.
fn unknown(path: &str, body: &Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(map) = body.as_object() else {
        return out;
    };
    let arguments: BTreeSet<&str> = schema["arguments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (key, value) in map {
        if META.contains(&key.as_str()) {
            continue;
        }
        if key == "dynamic" {
            for generated in value.as_array().into_iter().flatten() {
                for (block, spec) in generated.as_object().into_iter().flatten() {
                    let Some(block_schema) = schema["blocks"].get(block) else {
                        out.push(format!("{path}: dynamic {block} is not a block"));
                        continue;
                    };
                    for content in spec["content"].as_array().into_iter().flatten() {
                        out.extend(unknown(&format!("{path}.{block}"), content, block_schema));
                    }
                }
            }
        } else if let Some(block_schema) = schema["blocks"].get(key) {
            for inner in value.as_array().into_iter().flatten() {
                out.extend(unknown(&format!("{path}.{key}"), inner, block_schema));
            }
        } else if !arguments.contains(key.as_str()) {
            out.push(format!("{path}: {key}"));
        }
    }
    out
}

/// The body of the module's `kind` block labelled `label`.
fn block(files: &BTreeMap<String, Value>, kind: &str, label: &str) -> Value {
    blocks(files)
        .into_iter()
        .find(|(k, l, _)| k == kind && l == label)
        .map(|(_, _, body)| body)
        .unwrap_or_else(|| panic!("no {kind}.{label} in the module"))
}

/// Every `resource` and `data` block of the parsed files: (schema key, label, body).
fn blocks(files: &BTreeMap<String, Value>) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for file in files.values() {
        for (section, prefix) in [("resource", ""), ("data", "data.")] {
            for item in file[section].as_array().into_iter().flatten() {
                for (kind, named) in item.as_object().into_iter().flatten() {
                    for (label, body) in named.as_object().into_iter().flatten() {
                        out.push((format!("{prefix}{kind}"), label.clone(), body.clone()));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_argument_and_block_of_the_module_and_its_example_is_in_the_providers_schema() {
    let schema = schema();
    for folder in [
        "deploy/terraform",
        "deploy/terraform/examples/existing-cluster",
        "deploy/terraform/examples/eks-capability",
    ] {
        let Some(files) = parsed(folder) else { return };
        let mut checked = 0;
        // The module's inputs: what a `module` block of this folder may set.
        let inputs: BTreeSet<String> = parsed("deploy/terraform")
            .map(|module| {
                module["variables.tf"]["variable"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|v| v.as_object().unwrap().keys().cloned())
                    .collect()
            })
            .unwrap_or_default();
        for file in files.values() {
            for call in file["module"].as_array().into_iter().flatten() {
                for (name, body) in call.as_object().unwrap() {
                    for argument in body.as_object().unwrap().keys() {
                        let meta = argument == "source" || argument.starts_with("__");
                        assert!(
                            meta || inputs.contains(argument),
                            "module {name} sets {argument}, which the module does not take"
                        );
                    }
                    checked += 1;
                }
            }
        }
        for (kind, label, body) in blocks(&files) {
            if !kind.starts_with("aws_") && !kind.starts_with("data.aws_") {
                continue;
            }
            let resource = schema["resources"]
                .get(&kind)
                .unwrap_or_else(|| panic!("{kind} is not in provider-schema.json: add it to scripts/extract_provider_schema.py's USED and regenerate"));
            let wrong = unknown(&format!("{kind}.{label}"), &body, resource);
            assert!(wrong.is_empty(), "not in the provider's schema: {wrong:#?}");
            checked += 1;
        }
        assert!(checked > 0, "{folder}");
    }
}

#[test]
fn an_argument_the_provider_does_not_have_is_caught() {
    let schema = schema();
    let rule = &schema["resources"]["aws_cloudwatch_event_target"];
    let body = serde_json::json!({"rule": ["r"], "arn": ["a"], "retry_policy": [{"maximum_retry_attempts": [8], "max_age": [60]}],
        "dynamic": [{"dead_letter_queue": {"content": [{"arn": ["q"]}]}}]});
    let mut wrong = unknown("target", &body, rule);
    wrong.sort();
    assert_eq!(
        wrong,
        [
            "target.retry_policy: max_age",
            "target: dynamic dead_letter_queue is not a block",
        ]
    );
}

/// The mocked ARNs `deploy/terraform/tests/plan.tftest.hcl` gives the module's resources, as
/// the template's `Fn::GetAtt` of the same resources.
const MOCKED: &[(&str, &str)] = &[
    (
        "GetAtt:FunctionLogGroup",
        "arn:aws:logs:ap-northeast-2:768157413559:log-group:/aws/lambda/argocd-ecr-updater:*",
    ),
    (
        "GetAtt:DeadLetterQueue",
        "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-dead-letters",
    ),
    (
        "GetAtt:SweepQueue",
        "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep",
    ),
];

/// A statement as IAM reads it: one value and a list of one are the same, order in a list does
/// not matter, and an empty string in a condition matches nothing.
fn canonical(statement: &Value) -> Value {
    let set = |value: &Value| -> Value {
        let mut items: Vec<String> = match value {
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().unwrap().to_string())
                .collect(),
            Value::String(one) => vec![one.clone()],
            other => panic!("not a string or a list of them: {other}"),
        };
        items.retain(|i| !i.is_empty());
        items.sort();
        items.dedup();
        json!(items)
    };
    let mut condition = serde_json::Map::new();
    for (operator, keys) in statement["Condition"].as_object().into_iter().flatten() {
        let keys: serde_json::Map<String, Value> = keys
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), set(v)))
            .collect();
        condition.insert(operator.clone(), Value::Object(keys));
    }
    json!({"Effect": statement["Effect"], "Action": set(&statement["Action"]),
           "Resource": set(&statement["Resource"]), "Condition": condition})
}

/// The template's role statements for `parameters`, by Sid, `Fn::GetAtt` resolved to the
/// module tests' mocked ARNs.
fn template_role(t: &Value, parameters: &[(&str, Value)]) -> BTreeMap<String, Value> {
    let mut given = vec![("AWS::AccountId", json!("768157413559"))];
    given.extend(parameters.iter().cloned());
    let evaluator = evaluator_for(t, &given);
    let mut out = BTreeMap::new();
    for policy in t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
    {
        let policy = evaluator.eval(policy);
        let Some(statements) = policy["PolicyDocument"]["Statement"].as_array() else {
            continue; // AWS::NoValue: a policy the parameters leave out
        };
        for statement in statements {
            let mut text = statement.to_string();
            for (attribute, arn) in MOCKED {
                text = text.replace(attribute, arn);
            }
            let statement: Value = serde_json::from_str(&text).unwrap();
            assert!(!text.contains("GetAtt:"), "unresolved: {text}");
            out.insert(statement["Sid"].as_str().unwrap().to_string(), statement);
        }
    }
    out
}

/// One of `deploy/terraform/tests/expected/`: the module's role, as the terraform tests hold
/// its plan to it.
fn expected_role(file: &str) -> BTreeMap<String, Value> {
    let path = format!(
        "{}/deploy/terraform/tests/expected/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let document: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    document["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["Sid"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

/// The module's role (what its plan must be, `plan.tftest.hcl`) and the template's role for the
/// same inputs grant the same: Sid for Sid, the same effect, actions, resources and
/// conditions.
fn same_grants(module: &BTreeMap<String, Value>, template: &BTreeMap<String, Value>) {
    let sids = |m: &BTreeMap<String, Value>| m.keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(sids(module), sids(template), "the same statements");
    for (sid, statement) in module {
        assert_eq!(
            canonical(statement),
            canonical(&template[sid]),
            "{sid}: the module's (left) and the template's (right)"
        );
    }
}

#[test]
fn the_module_grants_the_templates_statements_sid_for_sid() {
    let Some(t) = transformed() else { return };
    // With only what must be set.
    let names = template_role(&t, &[("EcrRepositoryNames", json!(["barun-dev-ecr"]))]);
    same_grants(&expected_role("role-names.json"), &names);
    // With every option that adds or changes a statement (plan.tftest.hcl's inputs).
    let every = template_role(
        &t,
        &[
            ("EcrRepositoryNames", json!([""])),
            ("EcrRepositoryPrefix", json!("team/")),
            ("RegistryAccounts", json!(["210987654321"])),
            ("AdditionalClusterNames", json!(["staging"])),
            (
                "ClusterArns",
                json!(["arn:aws:eks:eu-west-1:768157413559:cluster/prod-eu"]),
            ),
            (
                "ClusterRoleArns",
                json!(["arn:aws:iam::123456789012:role/argocd-ecr-updater-access"]),
            ),
            ("ScanEvents", json!("true")),
            ("SignatureReferrers", json!("true")),
            (
                "NotificationTopicArn",
                json!("arn:aws:sns:ap-northeast-2:768157413559:argocd-reports"),
            ),
            (
                "GitCredentialsSecretArns",
                json!([
                    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-AbCdEf"
                ]),
            ),
            (
                "CosignKeySecretArns",
                json!([
                    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:cosign-pub-AbCdEf"
                ]),
            ),
            (
                "NotationTrustRootsSecretArn",
                json!(
                    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:notation-roots-AbCdEf"
                ),
            ),
            ("CodeCommitRepositories", json!(["invitation"])),
            ("VerifyAlarmNames", json!(["web-5xx", "web p99 latency"])),
            ("SubnetIds", json!(["subnet-0123456789abcdef0"])),
            ("SecurityGroupIds", json!(["sg-0123456789abcdef0"])),
        ],
    );
    same_grants(&expected_role("role-every-option.json"), &every);
}

#[test]
fn a_swapped_resource_or_a_wildcard_in_the_module_is_told_from_the_template() {
    let Some(t) = transformed() else { return };
    let template = template_role(&t, &[("EcrRepositoryNames", json!(["barun-dev-ecr"]))]);
    let mut swapped = expected_role("role-names.json");
    let dead_letters = swapped["ParkFailedEvents"]["Resource"].clone();
    swapped.get_mut("ParkFailedEvents").unwrap()["Resource"] =
        swapped["SendSweepShards"]["Resource"].clone();
    swapped.get_mut("SendSweepShards").unwrap()["Resource"] = dead_letters;
    let caught = std::panic::catch_unwind(|| same_grants(&swapped, &template));
    assert!(caught.is_err(), "two statements' resources swapped");
    let mut wildcard = expected_role("role-names.json");
    wildcard.get_mut("ReadTrackedRepositories").unwrap()["Resource"] = json!("*");
    let caught = std::panic::catch_unwind(|| same_grants(&wildcard, &template));
    assert!(caught.is_err(), "a wildcard resource");
}

/// `module`'s literal leaves equal the template's; an expression (`${…}`) stands for a value
/// the template computes too, so only its key must exist there.
fn same_literals(path: &str, module: &Value, template: &Value) {
    match (module, template) {
        (Value::String(expression), _) if expression.starts_with("${") => {}
        (Value::Object(m), Value::Object(t)) => {
            let keys = |o: &serde_json::Map<String, Value>| -> BTreeSet<String> {
                o.keys().cloned().collect()
            };
            assert_eq!(keys(m), keys(t), "{path}");
            for (key, value) in m {
                same_literals(&format!("{path}.{key}"), value, &t[key]);
            }
        }
        (Value::Array(m), Value::Array(t)) => {
            assert_eq!(m.len(), t.len(), "{path}");
            for (i, (m, t)) in m.iter().zip(t).enumerate() {
                same_literals(&format!("{path}[{i}]"), m, t);
            }
        }
        (m, t) => assert_eq!(m, t, "{path}"),
    }
}

#[test]
fn the_modules_rules_match_the_templates_patterns_retries_and_queue() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let locals = &files["events.tf"]["locals"][0];
    let evaluator = evaluator_for(&t, &[]);
    let pattern_of = |rule: &str| -> Value {
        let pattern = evaluator.eval(&t["Resources"][rule]["Properties"]["EventPattern"]);
        match pattern {
            Value::String(text) => serde_json::from_str(&text).unwrap(),
            object => object,
        }
    };
    let settings = &locals["rule_settings"][0];
    for (local, setting, rule) in [
        ("push_pattern", "ecr-push", "FunctionEcrPush"),
        ("scan_pattern", "ecr-scan", "FunctionEcrScan"),
        (
            "replication_pattern",
            "ecr-replication",
            "FunctionEcrReplication",
        ),
        ("inspector_pattern", "inspector-scan", "InspectorScanRule"),
        ("", "reconcile", "FunctionReconcile"),
    ] {
        if !local.is_empty() {
            same_literals(local, &locals[local][0], &pattern_of(rule));
        }
        let retry = &t["Resources"][rule]["Properties"]["Targets"][0]["RetryPolicy"];
        assert_eq!(
            settings[setting]["retries"], retry["MaximumRetryAttempts"],
            "{rule}"
        );
        assert_eq!(
            settings[setting]["max_age"], retry["MaximumEventAgeInSeconds"],
            "{rule}"
        );
    }
    let template_rules = of_type(&t, "AWS::Events::Rule").len();
    assert_eq!(settings.as_object().unwrap().len(), template_rules);
    // Lambda's own retries and the on-failure destination.
    let invoke = &of_type(&t, "AWS::Lambda::EventInvokeConfig")[0].1["Properties"];
    let module_invoke = block(
        &files,
        "aws_lambda_function_event_invoke_config",
        "function",
    );
    assert_eq!(
        module_invoke["maximum_retry_attempts"][0],
        invoke["MaximumRetryAttempts"]
    );
    assert_eq!(
        module_invoke["maximum_event_age_in_seconds"][0],
        invoke["MaximumEventAgeInSeconds"]
    );
    assert!(
        module_invoke["destination_config"][0]["on_failure"][0]["destination"][0]
            .as_str()
            .unwrap()
            .contains("aws_sqs_queue.dead_letters.arn")
    );
}

#[test]
fn the_modules_sweep_queue_and_its_mapping_match_the_templates() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let queue = &t["Resources"]["SweepQueue"]["Properties"];
    let module_queue = block(&files, "aws_sqs_queue", "sweep");
    assert_eq!(
        module_queue["visibility_timeout_seconds"][0],
        queue["VisibilityTimeout"]
    );
    assert_eq!(
        module_queue["message_retention_seconds"][0],
        queue["MessageRetentionPeriod"]
    );
    assert_eq!(queue["SqsManagedSseEnabled"], json!(true));
    let encryption = module_queue["sqs_managed_sse_enabled"][0].as_str().unwrap();
    assert!(
        encryption.contains("var.kms_key_arn == \"\""),
        "SQS-managed encryption unless a key of your own is given: {encryption}"
    );
    let redrive = module_queue["redrive_policy"][0].as_str().unwrap();
    let receives = queue["RedrivePolicy"]["maxReceiveCount"].as_u64().unwrap();
    assert!(
        redrive.contains("aws_sqs_queue.sweep_dead_letters.arn")
            && redrive.contains(&format!("'maxReceiveCount': {receives}")),
        "{redrive}"
    );
    assert_eq!(
        queue["RedrivePolicy"]["deadLetterTargetArn"],
        json!({"Fn::GetAtt": ["SweepDeadLetterQueue", "Arn"]})
    );
    // The shards' dead-letter queue keeps what it holds as long as the push one does.
    let shards = &t["Resources"]["SweepDeadLetterQueue"]["Properties"];
    let module_shards = block(&files, "aws_sqs_queue", "sweep_dead_letters");
    assert_eq!(
        module_shards["message_retention_seconds"][0],
        shards["MessageRetentionPeriod"]
    );
    let mappings = of_type(&t, "AWS::Lambda::EventSourceMapping");
    assert_eq!(mappings.len(), 1, "the sweep queue's, and no other");
    let mapping = &mappings[0].1["Properties"];
    let module_mapping = block(&files, "aws_lambda_event_source_mapping", "sweep");
    assert_eq!(module_mapping["batch_size"][0], mapping["BatchSize"]);
    assert_eq!(
        module_mapping["function_response_types"][0],
        mapping["FunctionResponseTypes"]
    );
    assert_eq!(
        mapping["FunctionResponseTypes"],
        json!(["ReportBatchItemFailures"])
    );
    assert_eq!(
        mapping["ScalingConfig"]["MaximumConcurrency"],
        json!({"Ref": "SweepConcurrency"})
    );
    assert_eq!(
        module_mapping["scaling_config"][0]["maximum_concurrency"][0],
        "${var.sweep_concurrency}"
    );
    assert_eq!(
        module_mapping["event_source_arn"][0],
        "${aws_sqs_queue.sweep.arn}"
    );
    // The function is told the same queue and settings by both.
    let template_env = &t["Resources"]["Function"]["Properties"]["Environment"]["Variables"];
    let module_env =
        &block(&files, "aws_lambda_function", "function")["environment"][0]["variables"][0];
    for (variable, parameter) in [
        ("SWEEP_FAN_OUT_AT", "sweep_fan_out_at"),
        ("SWEEP_SHARD_SIZE", "sweep_shard_size"),
        ("SWEEP_CONCURRENCY", "sweep_concurrency"),
        ("SWEEP_CLUSTER_REQUESTS", "sweep_cluster_requests"),
    ] {
        assert!(template_env.get(variable).is_some(), "{variable}");
        assert_eq!(
            module_env[variable],
            format!("${{tostring(var.{parameter})}}"),
            "{variable}"
        );
    }
    assert_eq!(
        template_env["SWEEP_QUEUE_URL"],
        json!({"Ref": "SweepQueue"})
    );
    assert_eq!(module_env["SWEEP_QUEUE_URL"], "${aws_sqs_queue.sweep.url}");
    assert_eq!(
        template_env["SWEEP_QUEUE_ARN"],
        json!({"Fn::GetAtt": ["SweepQueue", "Arn"]})
    );
    assert_eq!(module_env["SWEEP_QUEUE_ARN"], "${aws_sqs_queue.sweep.arn}");
}

/// SQS lets any queue of the account and region name a queue as its dead-letter queue unless
/// the queue's redrive allow policy says otherwise, and a redriven message passes the queue
/// policies' denies on `SendMessage`. Every `aws_sqs_queue` of the module, a future one too,
/// has one (inline or its own `aws_sqs_queue_redrive_allow_policy`): `byQueue` naming exactly
/// the module's queues whose `redrive_policy` names it, else `denyAll`; and the module's queues
/// are the template's, permission for permission.
#[test]
fn every_module_queue_admits_redrives_from_exactly_the_modules_queues_that_name_it() {
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let all = blocks(&files);
    let queues: Vec<&(String, String, Value)> = all
        .iter()
        .filter(|(kind, _, _)| kind == "aws_sqs_queue")
        .collect();
    assert!(queues.len() >= 3, "{queues:?}");
    let text = |v: &Value| v[0].as_str().map(str::to_string);
    // The queues an expression names by ARN: `${aws_sqs_queue.<label>.arn}`.
    let named_arns = |expression: &str| -> BTreeSet<String> {
        expression
            .split("aws_sqs_queue.")
            .skip(1)
            .filter_map(|rest| rest.split_once(".arn").map(|(label, _)| label.to_string()))
            .collect()
    };
    let mut permissions = Vec::new();
    for (_, label, body) in &queues {
        let mut policies: Vec<String> = all
            .iter()
            .filter(|(kind, _, b)| {
                kind == "aws_sqs_queue_redrive_allow_policy"
                    && [".id}", ".url}"].iter().any(|end| {
                        text(&b["queue_url"]) == Some(format!("${{aws_sqs_queue.{label}{end}"))
                    })
            })
            .filter_map(|(_, _, b)| text(&b["redrive_allow_policy"]))
            .collect();
        policies.extend(text(&body["redrive_allow_policy"]));
        assert_eq!(
            policies.len(),
            1,
            "aws_sqs_queue.{label} needs exactly one redrive allow policy: SQS's default, allowAll, lets any queue of the account redrive into it ({policies:?})"
        );
        let policy = &policies[0];
        let sources: BTreeSet<String> = queues
            .iter()
            .filter(|(_, _, q)| {
                text(&q["redrive_policy"]).is_some_and(|r| named_arns(&r).contains(label))
            })
            .map(|(_, source, _)| source.clone())
            .collect();
        if sources.is_empty() {
            assert_eq!(
                policy, "${jsonencode({'redrivePermission': 'denyAll'})}",
                "aws_sqs_queue.{label}"
            );
            permissions.push("denyAll");
        } else {
            assert!(
                policy.contains("'redrivePermission': 'byQueue'"),
                "aws_sqs_queue.{label}: {policy}"
            );
            assert_eq!(named_arns(policy), sources, "aws_sqs_queue.{label}");
            permissions.push("byQueue");
        }
    }
    let Some(t) = transformed() else { return };
    let mut template_permissions: Vec<&str> = of_type(&t, "AWS::SQS::Queue")
        .iter()
        .map(|(_, q)| {
            q["Properties"]["RedriveAllowPolicy"]["redrivePermission"]
                .as_str()
                .unwrap_or("allowAll")
        })
        .collect();
    template_permissions.sort_unstable();
    permissions.sort_unstable();
    assert_eq!(permissions, template_permissions, "the template's queues");
}

/// Lambda checks at creation that the role may do what the function, its event source
/// mapping and its on-failure destination need: each waits for the role's policy, or the first
/// `terraform apply` fails.
#[test]
fn what_lambda_checks_at_creation_waits_for_the_roles_policy() {
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    for (kind, label) in [
        ("aws_lambda_function", "function"),
        ("aws_lambda_event_source_mapping", "sweep"),
        ("aws_lambda_function_event_invoke_config", "function"),
    ] {
        let depends = block(&files, kind, label)["depends_on"].to_string();
        assert!(
            depends.contains("aws_iam_role_policy.function"),
            "{kind}.{label} depends on {depends}"
        );
    }
    // Nothing stops `terraform destroy`.
    let text: String = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/terraform"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "tf").then(|| std::fs::read_to_string(path).unwrap())
        })
        .collect();
    assert!(!text.contains("prevent_destroy"));
}

#[test]
fn every_module_alarm_is_the_templates_alarm_of_the_same_runbook() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let template: BTreeMap<&str, &Value> = of_type(&t, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(id, alarm)| (id.as_str(), &alarm["Properties"]))
        .collect();
    let number = |v: &Value| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    let locals = &files["alarms.tf"]["locals"][0];
    let mut runbooks = BTreeSet::new();
    for (key, alarm) in locals["single_metric_alarms"][0].as_object().unwrap() {
        let runbook = alarm["runbook"].as_str().unwrap();
        runbooks.insert(runbook.to_string());
        let p = template
            .get(runbook)
            .unwrap_or_else(|| panic!("{key}: the template has no alarm {runbook}"));
        for (module, cfn) in [
            ("namespace", "Namespace"),
            ("metric", "MetricName"),
            ("statistic", "Statistic"),
        ] {
            assert_eq!(alarm[module], p[cfn], "{key} ({runbook}): {module}");
        }
        let datapoints = p
            .get("DatapointsToAlarm")
            .unwrap_or(&p["EvaluationPeriods"]);
        for (module, cfn) in [
            ("period", &p["Period"]),
            ("periods", &p["EvaluationPeriods"]),
            ("datapoints", datapoints),
            ("threshold", &p["Threshold"]),
        ] {
            assert_eq!(
                number(&alarm[module]),
                number(cfn),
                "{key} ({runbook}): {module}"
            );
        }
        assert_eq!(
            p["ComparisonOperator"], "GreaterThanOrEqualToThreshold",
            "{runbook}"
        );
    }
    for (key, alarm) in locals["rule_metric_alarms"][0].as_object().unwrap() {
        let runbook = alarm["runbook"].as_str().unwrap();
        runbooks.insert(runbook.to_string());
        let p = template[runbook];
        let metrics: BTreeSet<&str> = p["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|q| q["MetricStat"]["Metric"]["MetricName"].as_str())
            .collect();
        assert_eq!(
            metrics,
            BTreeSet::from([alarm["metric"].as_str().unwrap()]),
            "{key}"
        );
    }
    // The sweeps-stopped alarm: its own resource, on the template's metric and comparison.
    let stopped = block(&files, "aws_cloudwatch_metric_alarm", "sweeps_stopped");
    let description = stopped["alarm_description"][0].as_str().unwrap();
    assert!(
        description.contains("(runbook: SweepsStoppedAlarm)"),
        "{description}"
    );
    runbooks.insert("SweepsStoppedAlarm".into());
    let p = template["SweepsStoppedAlarm"];
    assert_eq!(stopped["comparison_operator"][0], p["ComparisonOperator"]);
    assert_eq!(stopped["treat_missing_data"][0], p["TreatMissingData"]);
    let expected: BTreeSet<String> = template.keys().map(|k| k.to_string()).collect();
    assert_eq!(
        runbooks, expected,
        "one module alarm for each of the template's"
    );
    // And the metrics both watch are the same.
    let mut metrics = BTreeSet::new();
    for alarm in locals["single_metric_alarms"][0]
        .as_object()
        .unwrap()
        .values()
    {
        metrics.insert(format!(
            "{}/{}",
            alarm["namespace"].as_str().unwrap(),
            alarm["metric"].as_str().unwrap()
        ));
    }
    for alarm in locals["rule_metric_alarms"][0]
        .as_object()
        .unwrap()
        .values()
    {
        metrics.insert(format!("AWS/Events/{}", alarm["metric"].as_str().unwrap()));
    }
    assert_eq!(metrics, alarmed_metrics(&t));
}

/// `CamelCase` parameter name to the module's `snake_case` variable name.
fn snake(parameter: &str) -> String {
    let mut out = String::new();
    for (i, c) in parameter.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Product names the module keeps whole where the SAM parameter splits them.
const RENAMED: &[(&str, &str)] = &[
    ("ArgoCdNamespaces", "argocd_namespaces"),
    ("ArgoCdEksCapability", "argocd_eks_capability"),
    ("GitHubEnterpriseHosts", "github_enterprise_hosts"),
    ("GitLabHosts", "gitlab_hosts"),
];

/// The module's own inputs, which a stack gets from `sam build` and its own name, or which
/// only the Terraform path offers (tags, a permissions boundary, a KMS key of your own).
const MODULE_ONLY: &[&str] = &[
    "name",
    "package_file",
    "architecture",
    "tags",
    "permissions_boundary",
    "kms_key_arn",
];

#[test]
fn every_template_parameter_is_a_module_input_with_the_same_default() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let mut variables: BTreeMap<String, Value> = BTreeMap::new();
    for block in files["variables.tf"]["variable"].as_array().unwrap() {
        for (name, body) in block.as_object().unwrap() {
            variables.insert(name.clone(), body.clone());
        }
    }
    let mut matched = BTreeSet::new();
    for (parameter, spec) in t["Parameters"].as_object().unwrap() {
        let name = RENAMED
            .iter()
            .find(|(p, _)| p == parameter)
            .map_or_else(|| snake(parameter), |(_, v)| v.to_string());
        let variable = variables
            .get(&name)
            .unwrap_or_else(|| panic!("{parameter}: no variable {name}"));
        matched.insert(name.clone());
        let Some(default) = spec.get("Default") else {
            assert!(
                variable.get("default").is_none(),
                "{name} must be required, as {parameter} is"
            );
            continue;
        };
        let kind = variable["type"][0].as_str().unwrap();
        // python-hcl2 leaves a negative number as the expression `${-1}`.
        let module_default = match variable["default"][0].as_str() {
            Some(text) if text.starts_with("${") => text[2..text.len() - 1]
                .parse::<i64>()
                .map_or_else(|_| variable["default"][0].clone(), |n| serde_json::json!(n)),
            _ => variable["default"][0].clone(),
        };
        let module_default = &module_default;
        let expected = match (kind, default) {
            ("${bool}", Value::String(text)) => serde_json::json!(text == "true"),
            ("${number}", Value::String(text)) => serde_json::json!(text.parse::<i64>().unwrap()),
            ("${number}", number) => number.clone(),
            ("${list(string)}", Value::String(text)) if text.is_empty() => serde_json::json!([]),
            ("${list(string)}", Value::String(text)) => {
                serde_json::json!(text.split(',').collect::<Vec<_>>())
            }
            ("${string}", text) => text.clone(),
            other => panic!("{parameter}: {other:?}"),
        };
        assert_eq!(module_default, &expected, "{parameter} / {name}");
    }
    let extra: Vec<&String> = variables
        .keys()
        .filter(|v| !matched.contains(*v) && !MODULE_ONLY.contains(&v.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "inputs with no template parameter: {extra:?}"
    );
}
