//! The Terraform module (`deploy/terraform/`) checked without a terraform binary: parsed by
//! python-hcl2, every argument and nested block it writes exists in the AWS provider's schema
//! (the vendored extract, `deploy/terraform/provider-schema.json`), and it deploys what
//! `template.yaml` deploys: the same IAM statements, event patterns, retry settings and alarm
//! metrics, so the two deploy paths cannot drift. `./scripts/test` also runs checkov on it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::template::{of_type, python_json, transformed};
use crate::template_operations::{alarmed_metrics, evaluator_for, template_role_actions};

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
    ] {
        let Some(files) = parsed(folder) else { return };
        let mut checked = 0;
        for (kind, label, body) in blocks(&files) {
            if !kind.starts_with("aws_") && !kind.starts_with("data.aws_") {
                continue; // the example's Kubernetes resources
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

/// Every `actions` list of the module's role policy, static and dynamic, and their Sids.
fn module_role(files: &BTreeMap<String, Value>) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut actions, mut sids) = (BTreeSet::new(), BTreeSet::new());
    let (_, _, policy) = blocks(files)
        .into_iter()
        .find(|(kind, label, _)| kind == "data.aws_iam_policy_document" && label == "function")
        .unwrap();
    let dynamic = policy["dynamic"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["statement"]["content"].as_array().unwrap().clone());
    for statement in policy["statement"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .chain(dynamic)
    {
        sids.insert(statement["sid"][0].as_str().unwrap().to_string());
        for action in statement["actions"][0].as_array().unwrap() {
            actions.insert(action.as_str().unwrap().to_string());
        }
    }
    (actions, sids)
}

#[test]
fn the_module_grants_the_templates_statements_sid_for_sid() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let (actions, sids) = module_role(&files);
    assert_eq!(actions, template_role_actions(&t));
    let mut template_sids = BTreeSet::new();
    for policy in t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
    {
        let document = policy.get("Fn::If").map_or(policy, |branches| &branches[1]);
        for statement in document["PolicyDocument"]["Statement"].as_array().unwrap() {
            template_sids.insert(statement["Sid"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(sids, template_sids);
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
    assert_eq!(
        module_queue["sqs_managed_sse_enabled"][0],
        queue["SqsManagedSseEnabled"]
    );
    let redrive = module_queue["redrive_policy"][0].as_str().unwrap();
    let receives = queue["RedrivePolicy"]["maxReceiveCount"].as_u64().unwrap();
    assert!(
        redrive.contains("aws_sqs_queue.dead_letters.arn")
            && redrive.contains(&format!("'maxReceiveCount': {receives}")),
        "{redrive}"
    );
    assert_eq!(
        queue["RedrivePolicy"]["deadLetterTargetArn"],
        json!({"Fn::GetAtt": ["DeadLetterQueue", "Arn"]})
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
}

#[test]
fn the_module_alarms_on_the_templates_metrics() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let mut metrics = BTreeSet::new();
    for alarm in files["alarms.tf"]["locals"][0]["single_metric_alarms"][0]
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
    let delivery = block(&files, "aws_cloudwatch_metric_alarm", "event_delivery");
    for query in delivery["dynamic"].as_array().unwrap() {
        for content in query["metric_query"]["content"].as_array().unwrap() {
            let metric = &content["metric"][0];
            metrics.insert(format!(
                "{}/{}",
                metric["namespace"][0].as_str().unwrap(),
                metric["metric_name"][0].as_str().unwrap()
            ));
        }
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

/// The parameters a template value refers to (`Ref` to a parameter, anywhere inside it), and
/// whether it is the literal `*`.
fn template_sources(value: &Value, parameters: &Value, out: &mut BTreeSet<String>) -> bool {
    match value {
        Value::String(s) if s == "*" => true,
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "Ref"
                    && let Some(name) = inner.as_str()
                    && parameters.get(name).is_some()
                {
                    out.insert(name.to_string());
                }
                template_sources(inner, parameters, out);
            }
            false
        }
        Value::Array(items) => {
            let mut star = false;
            for item in items {
                star |= template_sources(item, parameters, out);
            }
            star
        }
        _ => false,
    }
}

/// A module expression with every `local.x` it names replaced by that local's own text, so
/// what it is built from shows.
fn expanded(text: &str, locals: &serde_json::Map<String, Value>, depth: usize) -> String {
    let mut out = text.to_string();
    if depth == 0 {
        return out;
    }
    for (name, value) in locals {
        let reference = format!("local.{name}");
        if out.contains(&reference) {
            let inner = expanded(&value.to_string(), locals, depth - 1);
            out = out.replace(&reference, &inner);
        }
    }
    out
}

#[test]
fn each_statement_of_the_module_is_scoped_by_what_the_templates_is_scoped_by() {
    let Some(t) = transformed() else { return };
    let Some(files) = parsed("deploy/terraform") else {
        return;
    };
    let mut locals = serde_json::Map::new();
    for file in files.values() {
        for block in file["locals"].as_array().into_iter().flatten() {
            for (name, value) in block.as_object().unwrap() {
                locals.insert(name.clone(), value.clone());
            }
        }
    }
    let policy = block(&files, "data.aws_iam_policy_document", "function");
    let mut module: BTreeMap<String, Value> = BTreeMap::new();
    for statement in policy["statement"].as_array().unwrap() {
        module.insert(
            statement["sid"][0].as_str().unwrap().into(),
            statement["resources"].clone(),
        );
    }
    for dynamic in policy["dynamic"].as_array().unwrap() {
        let statement = &dynamic["statement"]["content"][0];
        module.insert(
            statement["sid"][0].as_str().unwrap().into(),
            statement["resources"].clone(),
        );
    }
    let mut compared = 0;
    for policy in t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
    {
        let document = policy.get("Fn::If").map_or(policy, |branches| &branches[1]);
        for statement in document["PolicyDocument"]["Statement"].as_array().unwrap() {
            let sid = statement["Sid"].as_str().unwrap();
            let mut parameters = BTreeSet::new();
            let star = template_sources(&statement["Resource"], &t["Parameters"], &mut parameters);
            let resources = &module[sid];
            let text = expanded(&resources.to_string(), &locals, 3);
            assert_eq!(text.contains("\"*\""), star, "{sid}: {text}");
            for parameter in parameters {
                let variable = format!("var.{}", snake(&parameter));
                assert!(
                    text.contains(&variable),
                    "{sid}: {parameter} is not {variable} in {text}"
                );
            }
            compared += 1;
        }
    }
    assert_eq!(compared, module.len());
}

/// Product names the module keeps whole where the SAM parameter splits them.
const RENAMED: &[(&str, &str)] = &[
    ("ArgoCdNamespaces", "argocd_namespaces"),
    ("GitHubEnterpriseHosts", "github_enterprise_hosts"),
    ("GitLabHosts", "gitlab_hosts"),
];

/// The module's own inputs, which a stack gets from `sam build` and its own name.
const MODULE_ONLY: &[&str] = &["name", "package_file", "architecture"];

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
