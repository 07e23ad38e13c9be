//! The deployment template grants nothing beyond what the function uses, wires every
//! failure path to the dead-letter queue, and configures the function with values it accepts.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;

fn template() -> Value {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml")).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// Strips CloudFormation's short-form tags (`!Sub`, `!If`…) to their values.
fn untag(value: &Value) -> &Value {
    match value {
        Value::Tagged(tagged) => untag(&tagged.value),
        other => other,
    }
}

fn strings(value: &Value) -> Vec<String> {
    match untag(value) {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => items.iter().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// Every statement of the role's inline policies, with the condition it sits behind (`None`:
/// always granted).
fn role_statements_behind(t: &Value) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    for policy in t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_sequence()
        .unwrap()
    {
        let (condition, document) = match policy {
            Value::Tagged(tagged) if tagged.tag == "!If" => {
                let branches = tagged.value.as_sequence().unwrap();
                (
                    branches[0].as_str().map(str::to_string),
                    branches[1]["PolicyDocument"].clone(),
                )
            }
            plain => (None, plain["PolicyDocument"].clone()),
        };
        for statement in document["Statement"].as_sequence().unwrap() {
            out.push((condition.clone(), statement.clone()));
        }
    }
    out
}

/// Every statement of the role's inline policies, with whether it sits behind `!If`.
fn role_statements(t: &Value) -> Vec<(bool, Value)> {
    role_statements_behind(t)
        .into_iter()
        .map(|(condition, statement)| (condition.is_some(), statement))
        .collect()
}

#[test]
fn the_role_grants_exactly_the_actions_the_function_uses() {
    let t = template();
    let actions: BTreeSet<String> = role_statements(&t)
        .iter()
        .flat_map(|(_, s)| strings(&s["Action"]))
        .collect();
    // What the code needs, from the table the SDK-call scan below holds to the source.
    let expected: BTreeSet<String> = argocd_ecr_updater::aws::iam::required_actions()
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(actions, expected);
    assert!(actions.iter().all(|a| !a.contains('*')));
    let role = &t["Resources"]["FunctionRole"]["Properties"];
    assert!(
        role.get("ManagedPolicyArns").is_none(),
        "no managed policies: they grant more"
    );
    assert!(
        t["Resources"]["Function"]["Properties"]
            .get("Policies")
            .is_none(),
        "SAM policy templates would add grants"
    );
    assert_eq!(
        strings(&role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"]),
        ["lambda.amazonaws.com"]
    );
}

/// The operations of each `aws-sdk-*` crate the function depends on, read from the crates'
/// sources (one `src/operation/<name>/` folder per operation) as Cargo resolved them.
fn sdk_operations() -> BTreeMap<String, BTreeSet<String>> {
    let host = match (std::env::consts::ARCH, std::env::consts::OS) {
        (arch, "macos") => format!("{arch}-apple-darwin"),
        (arch, _) => format!("{arch}-unknown-linux-gnu"),
    };
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let ours = packages
        .iter()
        .find(|p| p["name"] == env!("CARGO_PKG_NAME"))
        .unwrap();
    let mut operations = BTreeMap::new();
    for dependency in ours["dependencies"].as_array().unwrap() {
        let name = dependency["name"].as_str().unwrap();
        let Some(service) = name.strip_prefix("aws-sdk-") else {
            continue;
        };
        if dependency["kind"].is_string() {
            continue; // a dev- or build-dependency
        }
        let package = packages.iter().find(|p| p["name"] == name).unwrap();
        let folder = std::path::Path::new(package["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .join("src/operation");
        let names = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.ends_with(".rs"))
            .collect();
        operations.insert(service.to_owned(), names);
    }
    operations
}

/// The function's sources, each without its unit tests (which call SDK mocks, not AWS).
/// The laptop commands (`cli/`) are not in it: they run with the user's credentials.
fn function_sources() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap().to_owned();
                out.push((path.display().to_string(), code));
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut out,
    );
    out
}

#[test]
fn every_sdk_call_in_the_source_has_its_grant_and_every_grant_its_call() {
    use argocd_ecr_updater::aws::iam::SDK_CALLS;
    let operations = sdk_operations();
    assert!(operations.contains_key("ecr") && operations["ecr"].contains("describe_images"));
    let call = regex::Regex::new(r"\.\s*([a-z][a-z0-9_]*)\(\)").unwrap();
    let mut found = BTreeSet::new();
    for (path, code) in function_sources() {
        for name in call.captures_iter(&code).map(|c| c[1].to_owned()) {
            let services: Vec<&String> = operations
                .iter()
                .filter(|(_, ops)| ops.contains(&name))
                .map(|(service, _)| service)
                .collect();
            if services.is_empty() {
                continue;
            }
            assert!(
                SDK_CALLS
                    .iter()
                    .any(|c| c.operation == name && services.iter().any(|s| *s == c.service)),
                "{path} calls `{name}` ({services:?}) with no row in src/aws/iam.rs: add its IAM action \
                 there and grant it in template.yaml"
            );
            found.insert(name);
        }
    }
    for row in SDK_CALLS {
        assert!(
            found.contains(row.operation),
            "src/aws/iam.rs grants {} for `{}`, which no code calls any more",
            row.action,
            row.operation
        );
    }
}

#[test]
fn every_resource_is_scoped_and_only_vpc_networking_and_the_registry_token_use_a_wildcard() {
    let t = template();
    for (conditional, statement) in role_statements(&t) {
        let actions = strings(&statement["Action"]);
        let resources = strings(&statement["Resource"]);
        let sid = statement["Sid"].as_str().unwrap().to_string();
        if resources.iter().any(|r| r == "*") {
            // VPC networking, and the registry API token, which AWS grants only on "*".
            assert!(
                conditional
                    && actions
                        .iter()
                        .all(|a| a.starts_with("ec2:") || a == "ecr:GetAuthorizationToken"),
                "{sid} uses * resources"
            );
            continue;
        }
        let expected_fragment = match actions[0].split(':').next().unwrap() {
            "ecr" => ":repository/",
            // Exactly the clusters named (ClusterName, AdditionalClusterNames); the name-list
            // ARNs leave account and region to the condition, which must pin both.
            // Clusters of this account in other regions: whole ARNs, which name the region.
            "eks" if sid == "FindClustersInOtherRegions" => {
                assert!(conditional, "{sid} must sit behind HasClusterArns");
                let condition = &statement["Condition"]["StringEquals"];
                assert_eq!(
                    strings(&condition["aws:ResourceAccount"]),
                    ["AWS::AccountId"],
                    "{sid}"
                );
                assert!(condition.get("aws:RequestedRegion").is_none(), "{sid}");
                "ClusterArns"
            }
            "eks" => {
                let condition = &statement["Condition"]["StringEquals"];
                assert_eq!(
                    strings(&condition["aws:ResourceAccount"]),
                    ["AWS::AccountId"],
                    "{sid}"
                );
                assert_eq!(
                    strings(&condition["aws:RequestedRegion"]),
                    ["AWS::Region"],
                    "{sid}"
                );
                ":cluster/${Names}"
            }
            "logs" => "FunctionLogGroup.Arn",
            // The dead-letter queue, or the sweep queue (its shards sent, and read by Lambda).
            "sqs" if sid.contains("Sweep") => "SweepQueue.Arn",
            "sqs" => "DeadLetterQueue.Arn",
            "sns" => "NotificationTopicArn",
            // Exactly the roles listed for other accounts' clusters, behind their condition.
            "sts" => {
                assert!(conditional, "{sid} must sit behind HasClusterRoles");
                "ClusterRoleArns"
            }
            // Exactly the secrets listed, and only behind the condition that some are.
            "secretsmanager" => {
                assert!(conditional, "{sid} must sit behind its condition");
                match sid.as_str() {
                    "ReadCosignKeys" => "CosignKeySecretArns",
                    "ReadNotationTrustRoots" => "NotationTrustRootsSecretArn",
                    _ => "GitCredentialsSecretArns",
                }
            }
            // Exactly the alarms named, in this account and region, behind their condition.
            "cloudwatch" => {
                assert!(conditional, "{sid} must sit behind HasVerifyAlarms");
                let condition = &statement["Condition"]["StringEquals"];
                assert_eq!(
                    strings(&condition["aws:ResourceAccount"]),
                    ["AWS::AccountId"],
                    "{sid}"
                );
                assert_eq!(
                    strings(&condition["aws:RequestedRegion"]),
                    ["AWS::Region"],
                    "{sid}"
                );
                ":alarm:${Names}"
            }
            // Exactly the repositories named, in this account.
            "codecommit" => {
                assert!(conditional, "{sid} must sit behind HasCodeCommit");
                let condition = &statement["Condition"]["StringEquals"];
                assert_eq!(
                    strings(&condition["aws:ResourceAccount"]),
                    ["AWS::AccountId"],
                    "{sid}"
                );
                assert_eq!(
                    strings(&condition["aws:RequestedRegion"]),
                    ["AWS::Region"],
                    "{sid}"
                );
                ":codecommit:"
            }
            other => panic!("unexpected service {other}"),
        };
        assert!(
            resources.iter().any(|r| r.contains(expected_fragment)),
            "{sid}: {resources:?}"
        );
        if expected_fragment == ":repository/" {
            // Name-list ARNs leave account and region open; the condition must pin both:
            // this account and exactly the registry accounts listed.
            let condition = &statement["Condition"]["StringEquals"];
            // (This account alone without registry accounts, else both: `!If`.)
            let accounts: BTreeSet<String> = strings(&condition["aws:ResourceAccount"])
                .into_iter()
                .filter(|s| s != "," && s != "HasRegistryAccounts")
                .collect();
            assert_eq!(
                accounts,
                BTreeSet::from(["AWS::AccountId".to_string(), "RegistryAccounts".to_string()]),
                "{sid}"
            );
            assert_eq!(
                strings(&condition["aws:RequestedRegion"]),
                ["AWS::Region"],
                "{sid}"
            );
        }
    }
}

#[test]
fn the_rule_matches_tagged_successful_pushes_and_no_event_is_lost() {
    let t = template();
    let function = &t["Resources"]["Function"]["Properties"];
    let push = &function["Events"]["EcrPush"]["Properties"];
    let pattern = &push["Pattern"];
    assert_eq!(strings(&pattern["source"]), ["aws.ecr"]);
    assert_eq!(strings(&pattern["detail-type"]), ["ECR Image Action"]);
    assert_eq!(strings(&pattern["detail"]["action-type"]), ["PUSH"]);
    assert_eq!(strings(&pattern["detail"]["result"]), ["SUCCESS"]);
    // Untagged pushes arrive with "image-tag": "" (the sample event is that shape).
    assert_eq!(
        pattern["detail"]["image-tag"][0]["anything-but"].as_str(),
        Some("")
    );
    let untagged: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/events/push-untagged-platform-manifest.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(untagged["detail"]["image-tag"], "");
    assert!(
        push["RetryPolicy"]["MaximumRetryAttempts"]
            .as_u64()
            .unwrap()
            > 0
    );
    let on_failure = &function["EventInvokeConfig"]["DestinationConfig"]["OnFailure"];
    assert!(
        strings(&on_failure["Destination"])
            .iter()
            .any(|d| d.contains("DeadLetterQueue"))
    );
    let alarm = &t["Resources"]["DeadLetterAlarm"]["Properties"];
    assert_eq!(
        alarm["MetricName"].as_str(),
        Some("ApproximateNumberOfMessagesVisible")
    );
    assert_eq!(strings(&function["Architectures"]), ["arm64"]);
    assert_eq!(function["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(
        t["Resources"]["Function"]["Metadata"]["BuildMethod"].as_str(),
        Some("rust-cargolambda")
    );
}

/// The template as CloudFormation runs it, after the SAM transform, from
/// `scripts/transform_template.py` and the SAM translator that `./scripts/test` installs
/// into `.venv`. Without it the test says so and passes, unless the test script asked for it.
pub(crate) fn transformed() -> Option<serde_json::Value> {
    python_json(
        ".venv",
        "the SAM translator",
        &["scripts/transform_template.py"],
    )
}

/// The JSON a project script prints, run with the Python of `venv`, which `./scripts/test`
/// fills with `tool`. Without it the test fails under `CI=true` or when the test script asked
/// for the tools (`REQUIRE_TEMPLATE_TRANSFORM`); elsewhere it says loudly that it checked
/// nothing, and returns.
pub(crate) fn python_json(venv: &str, tool: &str, args: &[&str]) -> Option<serde_json::Value> {
    // The files it reads do not change while the tests run: each script runs once per test
    // process (the SAM translator alone took a CPU-second and a half per call, 30 calls).
    static RUN: std::sync::Mutex<
        std::collections::BTreeMap<Vec<String>, Option<serde_json::Value>>,
    > = std::sync::Mutex::new(std::collections::BTreeMap::new());
    let key: Vec<String> = std::iter::once(venv)
        .chain(args.iter().copied())
        .map(str::to_string)
        .collect();
    let mut runs = RUN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = runs.get(&key) {
        return known.clone();
    }
    let parsed = python_json_once(venv, tool, args);
    runs.insert(key, parsed.clone());
    parsed
}

fn python_json_once(venv: &str, tool: &str, args: &[&str]) -> Option<serde_json::Value> {
    let root = env!("CARGO_MANIFEST_DIR");
    let python = std::path::Path::new(root).join(venv).join("bin/python");
    if !python.exists() {
        let required = std::env::var_os("REQUIRE_TEMPLATE_TRANSFORM").is_some()
            || std::env::var("CI").is_ok_and(|ci| ci == "true");
        assert!(
            !required,
            "{} is missing: ./scripts/test installs {tool} there",
            python.display()
        );
        eprintln!(
            "SKIPPED, NOTHING CHECKED: no {venv} with {tool}; run ./scripts/test once to install it (CI=true makes this a failure)"
        );
        return None;
    }
    let output = std::process::Command::new(python)
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

pub(crate) use argocd_ecr_updater_standins::cloudformation::of_type;

#[test]
fn the_transformed_template_the_deployment_stand_ins_are_built_from_is_current() {
    let Some(t) = transformed() else { return };
    let kept: serde_json::Value =
        serde_json::from_str(argocd_ecr_updater_standins::cloudformation::TRANSFORMED_TEMPLATE)
            .unwrap();
    assert!(
        kept == t,
        "tests/fixtures/template.transformed.json is not what template.yaml transforms to; \
         regenerate it: .venv/bin/python scripts/transform_template.py > tests/fixtures/template.transformed.json"
    );
}

#[test]
fn after_the_sam_transform_every_failure_path_ends_in_an_alarmed_queue() {
    let Some(t) = transformed() else { return };
    let queues = of_type(&t, "AWS::SQS::Queue");
    assert_eq!(
        queues
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["DeadLetterQueue", "SweepDeadLetterQueue", "SweepQueue"],
        "SAM made queues of its own"
    );
    let dlq = serde_json::json!({"Fn::GetAtt": ["DeadLetterQueue", "Arn"]});
    // A shard that keeps failing moves to the shards' own queue, after at least the five
    // receives AWS advises for a Lambda consumer.
    let sweep = &t["Resources"]["SweepQueue"]["Properties"]["RedrivePolicy"];
    assert_eq!(
        sweep["deadLetterTargetArn"],
        serde_json::json!({"Fn::GetAtt": ["SweepDeadLetterQueue", "Arn"]})
    );
    assert!(sweep["maxReceiveCount"].as_u64().unwrap() >= 5);
    // Each dead-letter queue has an alarm of its own.
    let alarmed: Vec<String> = of_type(&t, "AWS::CloudWatch::Alarm")
        .iter()
        .filter(|(_, a)| a["Properties"]["MetricName"] == "ApproximateNumberOfMessagesVisible")
        .map(|(_, a)| {
            a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(alarmed, ["DeadLetterQueue", "SweepDeadLetterQueue"]);
    let rules = of_type(&t, "AWS::Events::Rule");
    assert_eq!(
        rules.len(),
        5,
        "push, ECR scan, Inspector scan, replication, reconcile"
    );
    for (name, rule) in rules {
        let target = &rule["Properties"]["Targets"][0];
        assert_eq!(target["DeadLetterConfig"]["Arn"], dlq, "{name}");
        assert!(
            target["RetryPolicy"]["MaximumRetryAttempts"]
                .as_u64()
                .unwrap()
                > 0,
            "{name}"
        );
    }
    // Git credentials: read exactly the listed secrets, only when some are listed.
    let policies = t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap();
    let git = policies
        .iter()
        .find(|p| p["Fn::If"][0] == "HasGitSecrets")
        .expect("the git-credentials policy is conditional on HasGitSecrets");
    let statement = &git["Fn::If"][1]["PolicyDocument"]["Statement"][0];
    assert_eq!(statement["Action"], "secretsmanager:GetSecretValue");
    assert_eq!(
        statement["Resource"],
        serde_json::json!({"Ref": "GitCredentialsSecretArns"})
    );
    assert_eq!(
        t["Conditions"]["HasGitSecrets"],
        serde_json::json!({"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": "GitCredentialsSecretArns"}]}, ""]}]})
    );
    let codecommit = policies
        .iter()
        .find(|p| p["Fn::If"][0] == "HasCodeCommit")
        .expect("the CodeCommit policy is conditional on HasCodeCommit");
    let statement = &codecommit["Fn::If"][1]["PolicyDocument"]["Statement"][0];
    assert_eq!(
        statement["Resource"]["Fn::Split"][1]["Fn::Sub"][1]["Names"],
        serde_json::json!({"Fn::Join": [",arn:*:codecommit:*:*:", {"Ref": "CodeCommitRepositories"}]})
    );
    let invoke = &of_type(&t, "AWS::Lambda::EventInvokeConfig")[0].1["Properties"];
    assert_eq!(invoke["DestinationConfig"]["OnFailure"]["Destination"], dlq);
    let alarm = &t["Resources"]["DeadLetterAlarm"]["Properties"];
    assert_eq!(
        alarm["Dimensions"][0]["Value"],
        serde_json::json!({"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]})
    );
    // Parked events survive a stack delete or replacement.
    assert_eq!(
        t["Resources"]["DeadLetterQueue"]["DeletionPolicy"],
        "Retain"
    );
    assert_eq!(
        t["Resources"]["DeadLetterQueue"]["UpdateReplacePolicy"],
        "Retain"
    );
    // A reconcile is retried within its period only.
    let reconcile = &t["Resources"]["FunctionReconcile"]["Properties"]["Targets"][0];
    assert_eq!(reconcile["RetryPolicy"]["MaximumEventAgeInSeconds"], 60);
}

/// A parameter's value as CloudFormation's rules see it: a string, or a list for
/// `CommaDelimitedList` and `List<…>` parameters.
#[derive(Debug, Clone, PartialEq)]
enum ParameterValue {
    One(String),
    Many(Vec<String>),
}

/// What CloudFormation answers a stack with these parameter values (the rest at their
/// defaults): `None` when it accepts them, else the description of the first refusal. It
/// checks what CloudFormation checks before any resource: allowed values and patterns,
/// number bounds, then the template's `Rules`.
fn refusal(t: &Value, given: &[(&str, &str)]) -> Option<String> {
    let given: BTreeMap<&str, &str> = given.iter().copied().collect();
    let mut values = BTreeMap::new();
    for (name, spec) in t["Parameters"].as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        let text = match (given.get(name), &spec["Default"]) {
            (Some(v), _) => v.to_string(),
            (None, Value::String(s)) => s.clone(),
            (None, Value::Number(n)) => n.to_string(),
            (None, _) => return Some(format!("{name}: a value is required")),
        };
        let kind = spec["Type"].as_str().unwrap();
        let value = if kind == "CommaDelimitedList" || kind.starts_with("List<") {
            ParameterValue::Many(text.split(',').map(str::to_owned).collect())
        } else {
            ParameterValue::One(text)
        };
        let entries = match &value {
            ParameterValue::One(v) => vec![v.clone()],
            ParameterValue::Many(vs) => vs.clone(),
        };
        let refused = || {
            Some(format!(
                "{name}: {}",
                spec["ConstraintDescription"]
                    .as_str()
                    .unwrap_or("not allowed")
            ))
        };
        if let Some(allowed) = spec["AllowedValues"].as_sequence() {
            let allowed = allowed
                .iter()
                .map(|v| match v {
                    Value::Number(n) => n.to_string(),
                    other => strings(other).concat(),
                })
                .collect::<Vec<_>>();
            if entries.iter().any(|e| !allowed.contains(e)) {
                return refused();
            }
        }
        if let Some(pattern) = spec["AllowedPattern"].as_str()
            && entries.iter().any(|e| !java_pattern_matches(pattern, e))
        {
            return refused();
        }
        if kind == "Number" {
            let number: f64 = entries[0].parse().ok()?;
            let below = spec["MinValue"].as_f64().is_some_and(|min| number < min);
            let above = spec["MaxValue"].as_f64().is_some_and(|max| number > max);
            if below || above {
                return refused();
            }
        }
        values.insert(name.to_owned(), value);
    }
    for (_, rule) in t["Rules"].as_mapping().unwrap() {
        if let Some(condition) = rule.get("RuleCondition")
            && !rule_holds(condition, &values)
        {
            continue;
        }
        for assertion in rule["Assertions"].as_sequence().unwrap() {
            if !rule_holds(&assertion["Assert"], &values) {
                return Some(assertion["AssertDescription"].as_str().unwrap().to_owned());
            }
        }
    }
    None
}

/// The Inspector rule's pattern (a JSON string, see the template) with its substitutions
/// stubbed: its shape, not the values a stack computes (`evaluator_for` gives those).
fn inspector_pattern_shape(t: &Value) -> serde_json::Value {
    let sub = untag(&t["Resources"]["InspectorScanRule"]["Properties"]["EventPattern"]);
    let text = sub[0]
        .as_str()
        .unwrap()
        .replace("${Accounts}", "1")
        .replace("${AWS::Region}", "r")
        .replace("${Repositories}", "[]");
    serde_json::from_str(&text).unwrap()
}

/// The rule functions the template uses: `Not`, `And`, `Or`, `Equals`, `EachMemberEquals`.
fn rule_holds(expression: &Value, values: &BTreeMap<String, ParameterValue>) -> bool {
    let Value::Tagged(tagged) = expression else {
        panic!("a rule function, not {expression:?}")
    };
    let arguments = tagged.value.as_sequence().unwrap();
    let operand = |value: &Value| -> ParameterValue {
        match value {
            Value::Tagged(reference) if reference.tag == "Ref" => {
                values[reference.value.as_str().unwrap()].clone()
            }
            other => ParameterValue::One(strings(other).concat()),
        }
    };
    match tagged.tag.to_string().trim_start_matches('!') {
        "Not" => !rule_holds(&arguments[0], values),
        "And" => arguments.iter().all(|a| rule_holds(a, values)),
        "Or" => arguments.iter().any(|a| rule_holds(a, values)),
        "Equals" => operand(&arguments[0]) == operand(&arguments[1]),
        "EachMemberEquals" => {
            let ParameterValue::Many(members) = operand(&arguments[0]) else {
                panic!("EachMemberEquals takes a list")
            };
            let ParameterValue::One(wanted) = operand(&arguments[1]) else {
                panic!("EachMemberEquals compares with a string")
            };
            members.iter().all(|m| *m == wanted)
        }
        other => panic!("rule function {other} is not modelled here"),
    }
}

/// CloudFormation's patterns are Java's: the one construct Rust's `regex` lacks that the
/// template uses is a leading negative lookahead, `^(?!prefix)`.
fn java_pattern_matches(pattern: &str, text: &str) -> bool {
    if let Some(rest) = pattern.strip_prefix("^(?!")
        && let Some((forbidden, rest)) = rest.split_once(')')
    {
        return !text.starts_with(forbidden) && java_pattern_matches(&format!("^{rest}"), text);
    }
    regex::Regex::new(pattern).unwrap().is_match(text)
}

#[test]
fn the_parameters_refuse_nonsense() {
    let t = template();
    let names = ("EcrRepositoryNames", "barun-dev-ecr");
    let cases: &[(&[(&str, &str)], Option<&str>)] = &[
        (&[names], None),
        (&[("EcrRepositoryPrefix", "team-a/")], None),
        (&[], Some("Set EcrRepositoryNames or EcrRepositoryPrefix.")),
        (
            &[names, ("EcrRepositoryPrefix", "team-a/")],
            Some("Set EcrRepositoryNames or EcrRepositoryPrefix, not both."),
        ),
        (
            &[names, ("SubnetIds", "subnet-0123")],
            Some("SecurityGroupIds is required when SubnetIds is set."),
        ),
        (
            &[
                names,
                ("SubnetIds", "subnet-0123"),
                ("SecurityGroupIds", "sg-0123"),
            ],
            None,
        ),
        (
            &[("EcrRepositoryNames", "team/*")],
            Some("EcrRepositoryNames: "),
        ),
        (
            &[("EcrRepositoryPrefix", "*")],
            Some("EcrRepositoryPrefix: "),
        ),
        (
            &[names, ("RegistryAccounts", "*")],
            Some("RegistryAccounts: "),
        ),
        (&[names, ("RegistryAccounts", "111122223333")], None),
        (
            &[names, ("KubernetesGroup", "system:masters")],
            Some("KubernetesGroup: "),
        ),
        (
            &[names, ("KubeConnectTimeoutMs", "0")],
            Some("KubeConnectTimeoutMs: "),
        ),
        (
            &[names, ("KubeRequestTimeoutMs", "99")],
            Some("KubeRequestTimeoutMs: "),
        ),
        (&[names, ("DryRun", "maybe")], Some("DryRun: ")),
    ];
    for (given, expected) in cases {
        let mut with_required: Vec<(&str, &str)> = vec![("ClusterName", "barun-dev")];
        with_required.extend_from_slice(given);
        let answer = refusal(&t, &with_required);
        match (expected, &answer) {
            (None, None) => {}
            (Some(wanted), Some(got)) if got.starts_with(wanted) => {}
            _ => panic!("{given:?}: expected refusal {expected:?}, got {answer:?}"),
        }
    }
}

#[test]
fn the_templates_defaults_are_a_configuration_the_function_accepts() {
    let t = template();
    let parameters = &t["Parameters"];
    let variables: BTreeMap<String, String> =
        t["Resources"]["Function"]["Properties"]["Environment"]["Variables"]
            .as_mapping()
            .unwrap()
            .iter()
            // `!If [C, value, !Ref AWS::NoValue]`: left out, as its condition is off by default.
            .filter(|(_, v)| strings(v).pop().as_deref() != Some("AWS::NoValue"))
            .map(|(k, v)| {
                // `!Ref P`, or `!Join [",", !Ref P]`: the parameter is the last string.
                let parameter = strings(v).pop().unwrap();
                let default = match parameters[parameter.as_str()].get("Default") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    // A pseudo parameter CloudFormation fills in.
                    _ if parameter == "AWS::AccountId" => "768157413559".to_string(),
                    // A queue's `Ref` is its URL, its `Arn` attribute its ARN.
                    _ if parameter == "SweepQueue" => {
                        "https://sqs.ap-northeast-2.amazonaws.com/768157413559/argocd-ecr-updater-sweep-1"
                            .to_string()
                    }
                    _ if parameter == "SweepQueue.Arn" => {
                        "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep-1"
                            .to_string()
                    }
                    _ => "barun-dev".to_string(),
                };
                (k.as_str().unwrap().to_string(), default)
            })
            .collect();
    assert!(variables.contains_key("CLUSTER_NAME"));
    argocd_ecr_updater::config::Config::from_lookup(|k| variables.get(k).cloned()).unwrap();
}

#[test]
fn the_rbac_manifests_grant_exactly_what_the_function_uses() {
    for (file, kind) in [
        ("rbac.yaml", "Role"),
        ("rbac-all-namespaces.yaml", "ClusterRole"),
    ] {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("deploy")
                .join(file),
        )
        .unwrap();
        let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        let role = documents
            .iter()
            .find(|d| d["kind"].as_str() == Some(kind))
            .unwrap();
        // (group, resource[/subresource], verb), as the manifest grants and as the code asks.
        let granted: BTreeSet<(String, String, String)> = role["rules"]
            .as_sequence()
            .unwrap()
            .iter()
            .flat_map(|r| {
                let groups = strings(&r["apiGroups"]);
                let resources = strings(&r["resources"]);
                let verbs = strings(&r["verbs"]);
                groups
                    .iter()
                    .flat_map(|g| {
                        resources.iter().flat_map(|res| {
                            verbs
                                .iter()
                                .map(|v| (g.clone(), res.clone(), v.clone()))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let asked: BTreeSet<(String, String, String)> =
            argocd_ecr_updater::cluster::kube::required_access(true, false)
                .into_iter()
                .map(|need| {
                    let resource = match need.subresource {
                        Some(sub) => format!("{}/{sub}", need.resource),
                        None => need.resource.to_string(),
                    };
                    (need.group.to_string(), resource, need.verb.to_string())
                })
                .collect();
        assert_eq!(granted, asked, "{file}: exactly what the code asks for");
    }
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml")).unwrap();
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let binding = documents
        .iter()
        .find(|d| d["kind"].as_str() == Some("RoleBinding"))
        .unwrap();
    assert_eq!(
        binding["subjects"][0]["name"].as_str(),
        Some("argocd-ecr-updater")
    );
    let t = template();
    assert_eq!(
        t["Parameters"]["KubernetesGroup"]["Default"].as_str(),
        Some("argocd-ecr-updater")
    );
}

#[test]
fn scan_events_reach_the_function_only_when_asked_and_for_the_tracked_repositories() {
    let t = template();
    let events = &t["Resources"]["Function"]["Properties"]["Events"];
    let ecr = &events["EcrScan"]["Properties"];
    assert_eq!(strings(&ecr["Pattern"]["detail-type"]), ["ECR Image Scan"]);
    assert_eq!(
        strings(&ecr["Pattern"]["detail"]["scan-status"]),
        ["COMPLETE"]
    );
    // The same repository filter as the push rule.
    assert_eq!(
        ecr["Pattern"]["detail"]["repository-name"],
        events["EcrPush"]["Properties"]["Pattern"]["detail"]["repository-name"]
    );
    let inspector = &t["Resources"]["InspectorScanRule"]["Properties"];
    let pattern = inspector_pattern_shape(&t);
    assert_eq!(pattern["source"], serde_json::json!(["aws.inspector2"]));
    assert_eq!(
        pattern["detail"]["scan-status"],
        serde_json::json!(["INITIAL_SCAN_COMPLETE"])
    );
    for (rule, dead_letters) in [
        (ecr, &ecr["DeadLetterConfig"]),
        (inspector, &inspector["Targets"][0]["DeadLetterConfig"]),
    ] {
        assert_eq!(
            strings(&rule["State"]),
            ["ScanEventsOn", "ENABLED", "DISABLED"]
        );
        assert!(dead_letters["Arn"] != Value::Null);
    }
    assert_eq!(
        t["Parameters"]["ScanEvents"]["Default"].as_str(),
        Some("false")
    );
}

#[test]
fn replication_events_reach_the_function_only_when_asked_and_for_the_tracked_repositories() {
    let t = template();
    let events = &t["Resources"]["Function"]["Properties"]["Events"];
    let rule = &events["EcrReplication"]["Properties"];
    assert_eq!(
        strings(&rule["Pattern"]["detail-type"]),
        ["ECR Replication Action"]
    );
    assert_eq!(strings(&rule["Pattern"]["detail"]["result"]), ["SUCCESS"]);
    assert_eq!(
        rule["Pattern"]["detail"]["repository-name"],
        events["EcrPush"]["Properties"]["Pattern"]["detail"]["repository-name"]
    );
    assert_eq!(
        strings(&rule["State"]),
        ["ReplicationEventsOn", "ENABLED", "DISABLED"]
    );
    assert!(rule["DeadLetterConfig"]["Arn"] != Value::Null);
    assert_eq!(
        t["Parameters"]["ReplicationEvents"]["Default"].as_str(),
        Some("false")
    );
}

#[test]
fn registry_accounts_may_forward_their_events_and_only_when_listed() {
    let t = template();
    let policy = &t["Resources"]["RegistryAccountsEvents"];
    assert_eq!(policy["Condition"].as_str(), Some("HasRegistryAccounts"));
    let statement = &policy["Properties"]["Statement"];
    assert_eq!(
        strings(&statement["Principal"]["AWS"]),
        ["RegistryAccounts"]
    );
    assert_eq!(strings(&statement["Action"]), ["events:PutEvents"]);
    assert!(strings(&statement["Resource"])[0].ends_with(":event-bus/default"));
    // The function knows its own account, to tell a foreign registry's refusal apart.
    let variables = &t["Resources"]["Function"]["Properties"]["Environment"]["Variables"];
    assert_eq!(
        strings(&variables["FUNCTION_ACCOUNT_ID"]),
        ["AWS::AccountId"]
    );
}

#[test]
fn the_git_credential_rbac_reads_only_secrets_and_names_the_one_it_may_get() {
    let rules_of = |file: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("deploy")
                .join(file),
        )
        .unwrap();
        serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
            .filter(|d| d["kind"].as_str() == Some("Role"))
            .flat_map(|d| d["rules"].as_sequence().unwrap().clone())
            .collect()
    };
    let secret = rules_of("rbac-git-secret.yaml");
    assert_eq!(secret.len(), 1);
    assert_eq!(strings(&secret[0]["resources"]), ["secrets"]);
    assert_eq!(strings(&secret[0]["verbs"]), ["get"]);
    assert!(
        !strings(&secret[0]["resourceNames"]).is_empty(),
        "get is limited to named Secrets"
    );
    let repocreds = rules_of("rbac-repocreds.yaml");
    assert_eq!(repocreds.len(), 1);
    assert_eq!(strings(&repocreds[0]["resources"]), ["secrets"]);
    assert_eq!(strings(&repocreds[0]["verbs"]), ["list"]);
}

pub(crate) use argocd_ecr_updater_standins::cloudformation::Evaluator;

/// The clusters the deployed function is told about, may describe, and is given an access
/// entry in, for the parameter values given.
fn cluster_wiring(
    t: &serde_json::Value,
    additional: &[&str],
    create_access_entry: &str,
) -> (String, Vec<String>, Vec<String>) {
    let parameters = BTreeMap::from([
        ("ClusterName", serde_json::json!("barun-dev")),
        (
            "AdditionalClusterNames",
            serde_json::json!(if additional.is_empty() {
                vec![""]
            } else {
                additional.to_vec()
            }),
        ),
        ("CreateAccessEntry", serde_json::json!(create_access_entry)),
        ("Clusters", serde_json::json!("")),
        ("KubernetesGroup", serde_json::json!("argocd-ecr-updater")),
        ("AWS::AccountId", serde_json::json!("123456789012")),
        ("AWS::Region", serde_json::json!("ap-northeast-2")),
        ("AWS::Partition", serde_json::json!("aws")),
    ]);
    let evaluator = Evaluator::new(parameters, &t["Conditions"]);
    let variables = &t["Resources"]["Function"]["Properties"]["Environment"]["Variables"];
    let clusters = evaluator.text(&variables["CLUSTERS"]);
    let statement = t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["PolicyDocument"]["Statement"].as_array())
        .flatten()
        .find(|s| s["Sid"] == "FindTheCluster")
        .unwrap();
    assert_eq!(
        statement["Condition"]["StringEquals"]["aws:ResourceAccount"],
        serde_json::json!({"Ref": "AWS::AccountId"})
    );
    let describable = evaluator.list(&statement["Resource"]);
    let entries = of_type(t, "AWS::EKS::AccessEntry")
        .into_iter()
        .filter(|(_, r)| {
            r.get("Condition")
                .is_none_or(|c| evaluator.condition(c.as_str().unwrap()))
        })
        .map(|(_, r)| evaluator.text(&r["Properties"]["ClusterName"]))
        .collect();
    (clusters, describable, entries)
}

#[test]
fn additional_clusters_are_configured_described_and_mapped_each_by_name() {
    let Some(t) = transformed() else { return };
    let arn = |name: &str| format!("arn:*:eks:*:*:cluster/{name}");

    let (clusters, describable, entries) = cluster_wiring(&t, &[], "true");
    assert_eq!(clusters, "", "one cluster: CLUSTER_NAME alone");
    assert_eq!(describable, [arn("barun-dev")]);
    assert_eq!(entries, ["barun-dev"]);

    let (clusters, describable, entries) = cluster_wiring(&t, &["staging", "prod"], "true");
    assert_eq!(clusters, "barun-dev,staging,prod");
    assert_eq!(describable, [arn("barun-dev"), arn("staging"), arn("prod")]);
    assert_eq!(entries, ["barun-dev", "staging", "prod"]);
    // What the function reads from that CLUSTERS is what it was told.
    let config = argocd_ecr_updater::config::Config::from_lookup(|k| match k {
        "CLUSTER_NAME" => Some("barun-dev".into()),
        "CLUSTERS" => Some(clusters.clone()),
        _ => None,
    })
    .unwrap();
    let names: Vec<&str> = config.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["barun-dev", "staging", "prod"]);

    let five = ["a", "b", "c", "d", "e"];
    let (_, describable, entries) = cluster_wiring(&t, &five, "true");
    assert_eq!(describable.len(), 6, "every cluster may be described");
    assert_eq!(
        entries,
        ["barun-dev", "a", "b", "c", "d"],
        "four slots, documented"
    );

    let (_, _, entries) = cluster_wiring(&t, &["staging"], "false");
    assert!(entries.is_empty(), "CreateAccessEntry=false makes none");

    // `Clusters` (JSON, for other accounts and regions) is passed as it is, and the function
    // accepts what the parameter's description shows.
    let json = r#"[{"name":"barun-dev"},{"name":"partner","roleArn":"arn:aws:iam::111122223333:role/argocd-ecr-updater-partner"}]"#;
    let evaluator = Evaluator::new(
        BTreeMap::from([
            ("Clusters", serde_json::json!(json)),
            ("ClusterName", serde_json::json!("barun-dev")),
            ("AdditionalClusterNames", serde_json::json!(["staging"])),
        ]),
        &t["Conditions"],
    );
    let variables = &t["Resources"]["Function"]["Properties"]["Environment"]["Variables"];
    assert_eq!(evaluator.text(&variables["CLUSTERS"]), json);
    let config = argocd_ecr_updater::config::Config::from_lookup(|k| match k {
        "CLUSTER_NAME" => Some("barun-dev".into()),
        "CLUSTERS" => Some(json.into()),
        _ => None,
    })
    .unwrap();
    assert!(config.clusters[1].role_arn.is_some());
}

/// The condition a role statement sits behind, and the statement, by its Sid.
fn statement_condition(t: &Value, sid: &str) -> Option<(Option<String>, Value)> {
    role_statements_behind(t)
        .into_iter()
        .find(|(_, statement)| statement["Sid"].as_str() == Some(sid))
}

#[test]
fn layer_downloads_and_scan_findings_are_granted_only_with_the_gate_that_needs_them() {
    let t = template();
    let (always, base) = statement_condition(&t, "ReadTrackedRepositories").unwrap();
    assert_eq!(always, None);
    assert_eq!(
        strings(&base["Action"]),
        [
            "ecr:DescribeImages",
            "ecr:BatchGetImage",
            "ecr:DescribeImageSigningStatus"
        ]
    );
    for (sid, condition, action) in [
        (
            "ReadScanFindings",
            "ScanEventsOn",
            "ecr:DescribeImageScanFindings",
        ),
        (
            "DownloadSignaturePayloads",
            "VerifySignatures",
            "ecr:GetDownloadUrlForLayer",
        ),
    ] {
        let (behind, statement) = statement_condition(&t, sid).expect(sid);
        assert_eq!(behind.as_deref(), Some(condition), "{sid}");
        assert_eq!(strings(&statement["Action"]), [action], "{sid}");
        // The same repositories and the same account and region pinning as the base.
        assert_eq!(statement["Resource"], base["Resource"], "{sid}");
        assert_eq!(statement["Condition"], base["Condition"], "{sid}");
    }
    let verify = serde_yaml_ng::to_string(&t["Conditions"]["VerifySignatures"]).unwrap();
    for part in [
        "SignatureVerification",
        "HasCosignKeys",
        "ReferrersOn",
        "CommitStatuses",
        "ImageLabels",
        "NotationTrustRoots",
    ] {
        assert!(verify.contains(part), "{verify}");
    }
}

#[test]
fn list_parameters_refuse_wildcards_so_no_grant_or_bus_policy_opens_up() {
    let t = template();
    for (parameter, valid) in [
        (
            "GitCredentialsSecretArns",
            "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-Ab12Cd",
        ),
        (
            "CosignKeySecretArns",
            "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:cosign-Ab12",
        ),
        ("CodeCommitRepositories", "invitation-deploy"),
        ("EcrRepositoryNames", "team/barun-dev-ecr"),
        (
            "ClusterRoleArns",
            "arn:aws:iam::222222222222:role/argocd-ecr-updater",
        ),
        ("RegistryAccounts", "111111111111"),
        ("VerifyAlarmNames", "web p99 latency (prod)"),
    ] {
        let pattern = t["Parameters"][parameter]["AllowedPattern"]
            .as_str()
            .unwrap_or_else(|| panic!("{parameter} has no AllowedPattern"));
        // CloudFormation matches the whole value, as Java's `matches` does.
        let whole = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
        assert!(whole.is_match(""), "{parameter}: the empty default");
        assert!(whole.is_match(valid), "{parameter}: {valid}");
        for hostile in [
            "*".to_string(),
            format!("{valid}*"),
            valid.replace(|c: char| c.is_ascii_digit(), "*"),
        ]
        .into_iter()
        .filter(|h| h != valid)
        {
            assert!(!whole.is_match(&hostile), "{parameter} accepts `{hostile}`");
        }
    }
}

#[test]
fn registry_accounts_may_put_only_ecr_and_inspector_events_on_the_bus() {
    let t = template();
    let statement = &t["Resources"]["RegistryAccountsEvents"]["Properties"]["Statement"];
    let condition = &statement["Condition"]["StringEquals"];
    assert_eq!(
        strings(&condition["events:source"]),
        ["aws.ecr", "aws.inspector2"]
    );
    // Exactly the detail types the function's rules match.
    let mut rule_types: BTreeSet<String> = BTreeSet::new();
    for event in untag(&t["Resources"]["Function"]["Properties"]["Events"])
        .as_mapping()
        .unwrap()
        .values()
    {
        rule_types.extend(strings(&event["Properties"]["Pattern"]["detail-type"]));
    }
    for kind in inspector_pattern_shape(&t)["detail-type"]
        .as_array()
        .unwrap()
    {
        rule_types.insert(kind.as_str().unwrap().to_string());
    }
    let allowed: BTreeSet<String> = strings(&condition["events:detail-type"])
        .into_iter()
        .collect();
    assert_eq!(allowed, rule_types);
}
