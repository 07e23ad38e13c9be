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

/// Every statement of the role's inline policies, with whether it sits behind `!If`.
fn role_statements(t: &Value) -> Vec<(bool, Value)> {
    let mut out = Vec::new();
    for policy in t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_sequence()
        .unwrap()
    {
        let (conditional, document) = match policy {
            Value::Tagged(tagged) if tagged.tag == "!If" => {
                let branches = tagged.value.as_sequence().unwrap();
                (true, branches[1]["PolicyDocument"].clone())
            }
            plain => (false, plain["PolicyDocument"].clone()),
        };
        for statement in document["Statement"].as_sequence().unwrap() {
            out.push((conditional, statement.clone()));
        }
    }
    out
}

#[test]
fn the_role_grants_exactly_the_actions_the_function_uses() {
    let t = template();
    let actions: BTreeSet<String> = role_statements(&t)
        .iter()
        .flat_map(|(_, s)| strings(&s["Action"]))
        .collect();
    let expected: BTreeSet<String> = [
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "ecr:DescribeImages",
        "ecr:BatchGetImage",
        "eks:DescribeCluster",
        "sqs:SendMessage",
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ]
    .map(String::from)
    .into();
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

#[test]
fn every_resource_is_scoped_and_only_vpc_networking_uses_a_wildcard_behind_its_condition() {
    let t = template();
    for (conditional, statement) in role_statements(&t) {
        let actions = strings(&statement["Action"]);
        let resources = strings(&statement["Resource"]);
        let sid = statement["Sid"].as_str().unwrap().to_string();
        if resources.iter().any(|r| r == "*") {
            assert!(
                conditional && actions.iter().all(|a| a.starts_with("ec2:")),
                "{sid} uses * resources"
            );
            continue;
        }
        let expected_fragment = match actions[0].split(':').next().unwrap() {
            "ecr" => ":repository/",
            "eks" => ":cluster/${ClusterName}",
            "logs" => "FunctionLogGroup.Arn",
            "sqs" => "DeadLetterQueue.Arn",
            other => panic!("unexpected service {other}"),
        };
        assert!(
            resources.iter().any(|r| r.contains(expected_fragment)),
            "{sid}: {resources:?}"
        );
        if expected_fragment == ":repository/" {
            // Name-list ARNs leave account and region open; the condition must pin both.
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
    assert_eq!(
        pattern["detail"]["image-tag"][0]["exists"],
        Value::Bool(true)
    );
    // Delivery failures (rule DLQ) and function failures (on-failure destination) both park
    // the event in the one queue, which has an alarm.
    assert!(
        strings(&push["DeadLetterConfig"]["Destination"])
            .iter()
            .any(|d| d.contains("DeadLetterQueue"))
    );
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
    assert_eq!(strings(&function["Architectures"]), ["Architecture"]);
    assert_eq!(
        t["Parameters"]["Architecture"]["Default"].as_str(),
        Some("arm64")
    );
    assert_eq!(function["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(
        t["Resources"]["Function"]["Metadata"]["BuildMethod"].as_str(),
        Some("rust-cargolambda")
    );
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
            .map(|(k, v)| {
                let parameter = strings(v).remove(0);
                let default = match parameters[parameter.as_str()].get("Default") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
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
        let rules = role["rules"].as_sequence().unwrap();
        let granted: Vec<[Vec<String>; 3]> = rules
            .iter()
            .map(|r| {
                [
                    strings(&r["apiGroups"]),
                    strings(&r["resources"]),
                    strings(&r["verbs"]),
                ]
            })
            .collect();
        let rule = |group: &str, resource: &str, verbs: &[&str]| {
            [
                vec![group.to_string()],
                vec![resource.to_string()],
                verbs.iter().map(|v| v.to_string()).collect(),
            ]
        };
        assert_eq!(
            granted,
            vec![
                rule("argoproj.io", "applications", &["get", "list", "patch"]),
                rule("argoproj.io", "applicationsets", &["get"]),
                rule(
                    "argocd-image-updater.argoproj.io",
                    "imageupdaters",
                    &["get", "list"]
                ),
                rule(
                    "argocd-image-updater.argoproj.io",
                    "imageupdaters/status",
                    &["patch"]
                ),
            ],
            "{file}"
        );
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
