//! What a team meets beyond the default deploy, checked on the template as CloudFormation
//! runs it (after the SAM transform) and evaluated with the parameters a stack would get:
//! alarms that page, scan rules scoped like the push rule, clusters in other regions, long
//! stack names, one architecture, and a dashboard that shows every mode the function reports.

use argocd_ecr_updater::report::InvocationKind;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{Value, json};

use argocd_ecr_updater_standins::cloudformation::{Site, stack_parameters};

use crate::template::{Evaluator, of_type, transformed};

/// The evaluator a stack with these parameter values (the rest at their defaults) would be.
pub(crate) fn evaluator_for<'a>(t: &'a Value, given: &[(&'a str, Value)]) -> Evaluator<'a> {
    let site = Site {
        account: "123456789012".into(),
        region: "ap-northeast-2".into(),
        stack_name: "argocd-ecr-updater".into(),
    };
    Evaluator::new(stack_parameters(t, &site, given), &t["Conditions"])
}

/// EventBridge's matching for the operators the template uses: exact strings, `prefix`,
/// `anything-but` a string, and `wildcard` (`*` for any run of characters). A field matches
/// when any of its values matches any of the pattern's; a missing field matches nothing.
fn event_matches(pattern: &Value, event: &Value) -> bool {
    pattern.as_object().unwrap().iter().all(|(key, wanted)| {
        let Some(value) = event.get(key) else {
            return false;
        };
        if wanted.is_object() {
            return event_matches(wanted, value);
        }
        let values: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        wanted.as_array().unwrap().iter().any(|operand| {
            values.iter().any(|v| {
                let Some(text) = v.as_str() else { return false };
                match operand {
                    Value::String(exact) => exact == text,
                    Value::Object(op) => match op.iter().next().unwrap() {
                        (name, Value::String(arg)) if name == "prefix" => text.starts_with(arg),
                        (name, Value::String(arg)) if name == "anything-but" => text != arg,
                        (name, Value::String(arg)) if name == "wildcard" => wildcard(arg, text),
                        other => panic!("operator {other:?} is not modelled here"),
                    },
                    other => panic!("pattern value {other}"),
                }
            })
        })
    })
}

fn wildcard(pattern: &str, text: &str) -> bool {
    let quoted: Vec<String> = pattern.split('*').map(regex::escape).collect();
    regex::Regex::new(&format!("^{}$", quoted.join(".*")))
        .unwrap()
        .is_match(text)
}

fn inspector_event(account: &str, region: &str, repository: &str) -> Value {
    json!({
        "version": "0", "id": "e", "detail-type": "Inspector2 Scan", "source": "aws.inspector2",
        "account": account, "region": region, "time": "2025-08-25T06:35:00Z",
        "resources": [format!("arn:aws:ecr:{region}:{account}:repository/{repository}/sha256:ab")],
        "detail": {
            "scan-status": "INITIAL_SCAN_COMPLETE",
            "repository-name": format!("arn:aws:ecr:{region}:{account}:repository/{repository}"),
            "image-digest": "sha256:ab", "image-tags": ["20250825-153012"],
            "finding-severity-counts": {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 0, "TOTAL": 1}
        }
    })
}

fn inspector_pattern(t: &Value, given: &[(&str, Value)]) -> Value {
    let evaluator = evaluator_for(t, given);
    let text = evaluator.text(&t["Resources"]["InspectorScanRule"]["Properties"]["EventPattern"]);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn inspector_scans_reach_the_function_for_the_tracked_repositories_of_every_registry_account() {
    let Some(t) = transformed() else { return };
    const HOME: &str = "123456789012";
    const CENTRAL: &str = "210987654321";
    let names = inspector_pattern(
        &t,
        &[
            ("EcrRepositoryNames", json!(["web", "team/api"])),
            ("RegistryAccounts", json!([CENTRAL])),
        ],
    );
    let region = "ap-northeast-2";
    for (account, repository, reaches) in [
        (HOME, "web", true),
        (HOME, "team/api", true),
        // A central registry account's events, forwarded to this bus.
        (CENTRAL, "web", true),
        (CENTRAL, "team/api", true),
        // Repositories no Application tracks, and accounts not listed.
        (HOME, "other", false),
        (HOME, "team/api-v2", false),
        (HOME, "x/web", false),
        ("999999999999", "web", false),
    ] {
        assert_eq!(
            event_matches(&names, &inspector_event(account, region, repository)),
            reaches,
            "{account} {repository}"
        );
    }
    assert!(!event_matches(
        &names,
        &inspector_event(HOME, "eu-west-1", "web")
    ));

    let prefix = inspector_pattern(
        &t,
        &[
            ("EcrRepositoryNames", json!([""])),
            ("EcrRepositoryPrefix", json!("team/")),
        ],
    );
    for (account, repository, reaches) in [
        (HOME, "team/api", true),
        (HOME, "team/web/v2", true),
        (HOME, "web", false),
        (CENTRAL, "team/api", false),
    ] {
        assert_eq!(
            event_matches(&prefix, &inspector_event(account, region, repository)),
            reaches,
            "{account} {repository}"
        );
    }
}

#[test]
fn the_ecr_rules_match_the_documented_events_of_tracked_repositories_only() {
    let Some(t) = transformed() else { return };
    let evaluator = evaluator_for(&t, &[]);
    let fixture = |name: &str| -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let pattern = |rule: &str| evaluator.eval(&t["Resources"][rule]["Properties"]["EventPattern"]);
    let mut push = fixture("aws-doc-image-action-push.json");
    push["detail"]["repository-name"] = json!("barun-dev-ecr");
    assert!(event_matches(&pattern("FunctionEcrPush"), &push));
    let mut untracked = push.clone();
    untracked["detail"]["repository-name"] = json!("someone-elses");
    assert!(!event_matches(&pattern("FunctionEcrPush"), &untracked));
    let mut delete = fixture("aws-doc-image-action-delete.json");
    delete["detail"]["repository-name"] = json!("barun-dev-ecr");
    assert!(!event_matches(&pattern("FunctionEcrPush"), &delete));
    let mut scan = fixture("aws-doc-image-scan.json");
    scan["detail"]["repository-name"] = json!("barun-dev-ecr");
    assert!(event_matches(&pattern("FunctionEcrScan"), &scan));
}

/// AWS's published samples of the events the function does not act on (a storage-class
/// change of an image or a referrer): no rule of the stack invokes it for them, even for a
/// tracked repository, and the function skips each with a reason if one is sent anyway.
#[test]
fn no_rule_invokes_the_function_for_a_storage_class_change_or_a_referrer() {
    let Some(t) = transformed() else { return };
    let evaluator = evaluator_for(
        &t,
        &[
            ("ScanEvents", json!("true")),
            ("ReplicationEvents", json!("true")),
        ],
    );
    let rules: Vec<(String, Value)> = t["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Events::Rule")
        .filter_map(|(name, r)| {
            let pattern = &r["Properties"]["EventPattern"];
            // A pattern built with Fn::Sub is JSON text.
            let evaluated = match evaluator.eval(pattern) {
                Value::String(_) => serde_json::from_str(&evaluator.text(pattern)).unwrap(),
                object => object,
            };
            (!pattern.is_null()).then(|| (name.clone(), evaluated))
        })
        .collect();
    assert!(rules.len() >= 2, "{rules:?}");
    for sample in [
        "aws-sample-image-archive.json",
        "aws-sample-image-restore.json",
        "aws-sample-referrer-restore.json",
    ] {
        let path = format!("{}/events/{sample}", env!("CARGO_MANIFEST_DIR"));
        let mut event: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        event["detail"]["repository-name"] = json!("barun-dev-ecr");
        for (name, pattern) in &rules {
            assert!(!event_matches(pattern, &event), "{name} matches {sample}");
        }
        let intake = argocd_ecr_updater::event::Intake {
            sweep_queue_arn: None,
        };
        match argocd_ecr_updater::event::parse(&event, &intake) {
            Ok(argocd_ecr_updater::event::Invocation::Skip { reason, .. }) => {
                assert!(
                    reason.contains("storage class") || reason.contains("rolls nothing out"),
                    "{sample}: {reason}"
                )
            }
            other => panic!("{sample}: {other:?}"),
        }
    }
}

#[test]
fn the_architecture_is_chosen_in_one_place_that_sam_build_and_sam_deploy_both_read() {
    let Some(t) = transformed() else { return };
    assert!(
        t["Parameters"].get("Architecture").is_none(),
        "a parameter is read by sam deploy but not by sam build"
    );
    let functions = of_type(&t, "AWS::Lambda::Function");
    assert_eq!(functions.len(), 1);
    assert_eq!(
        functions[0].1["Properties"]["Architectures"],
        json!(["arm64"])
    );
    let samconfig =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/samconfig.toml")).unwrap();
    assert!(!samconfig.contains("Architecture"), "{samconfig}");
}

/// The limits of the names a stack could set from its own name, by property.
const NAME_LIMITS: &[(&str, usize)] = &[("LogGroupName", 512), ("DashboardName", 255)];

fn stack_named_values<'a>(path: &str, value: &'a Value, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            if let Some(sub) = map.get("Fn::Sub") {
                let text = sub.as_str().or_else(|| sub[0].as_str()).unwrap_or("");
                if text.contains("${AWS::StackName}") {
                    out.push((path.to_string(), value));
                }
            }
            for (key, inner) in map {
                stack_named_values(key, inner, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                stack_named_values(path, item, out);
            }
        }
        _ => {}
    }
}

#[test]
fn a_stack_name_of_the_longest_length_names_nothing_past_its_limit() {
    let Some(t) = transformed() else { return };
    // CloudFormation's own limit for a stack name.
    let name = "ab".repeat(64);
    assert_eq!(name.len(), 128);
    let evaluator = evaluator_for(
        &t,
        &[
            ("AWS::StackName", json!(name)),
            ("RegistryAccounts", json!(["210987654321"])),
        ],
    );
    let mut named = Vec::new();
    stack_named_values("", &t["Resources"], &mut named);
    assert!(!named.is_empty());
    for (property, value) in named {
        let limit = NAME_LIMITS
            .iter()
            .find(|(p, _)| *p == property)
            .unwrap_or_else(|| panic!("{property} is named from the stack name: {value}"))
            .1;
        let text = evaluator.text(value);
        assert!(text.len() <= limit, "{property}: {} > {limit}", text.len());
    }
    // Names CloudFormation generates (and shortens) instead of ours; the sweep queue is named
    // from the stack's id (the shards' dead-letter queue's redrive allow policy names it),
    // whose length does not depend on the stack's name.
    for (kind, property) in [
        ("AWS::Lambda::Function", "FunctionName"),
        ("AWS::Events::Rule", "Name"),
        ("AWS::IAM::Role", "RoleName"),
        ("AWS::SQS::Queue", "QueueName"),
        ("AWS::CloudWatch::Alarm", "AlarmName"),
    ] {
        for (id, resource) in of_type(&t, kind) {
            if id == "SweepQueue" {
                continue;
            }
            assert!(resource["Properties"].get(property).is_none(), "{id}");
        }
    }
    let sweep_queue = evaluator.text(&t["Resources"]["SweepQueue"]["Properties"]["QueueName"]);
    assert_eq!(sweep_queue.len(), 61, "{sweep_queue}");
    assert!(sweep_queue.len() <= 80, "SQS's limit: {sweep_queue}");
    let allowed = evaluator.text(
        &t["Resources"]["SweepDeadLetterQueue"]["Properties"]["RedriveAllowPolicy"]
            ["sourceQueueArns"][0],
    );
    assert_eq!(
        allowed,
        format!("arn:aws:sqs:ap-northeast-2:123456789012:{sweep_queue}"),
        "the shards' dead-letter queue admits exactly the sweep queue's redrives"
    );
    assert_eq!(
        t["Resources"]["DeadLetterQueue"]["Properties"]["RedriveAllowPolicy"],
        json!({"redrivePermission": "denyAll"}),
        "no queue redrives into the push dead-letter queue"
    );
    let statement =
        evaluator.text(&t["Resources"]["RegistryAccountsEvents"]["Properties"]["StatementId"]);
    assert!(statement.len() <= 64, "{statement}");
    assert!(
        statement
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
}

#[test]
fn the_dead_letter_queue_admits_exactly_the_stacks_rules() {
    let Some(t) = transformed() else { return };
    let rules: BTreeSet<String> = of_type(&t, "AWS::Events::Rule")
        .into_iter()
        .map(|(id, _)| json!({"Fn::GetAtt": [id, "Arn"]}).to_string())
        .collect();
    let statement =
        &t["Resources"]["DeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0];
    let admitted: BTreeSet<String> = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(admitted, rules);
    // Every rule's target: retried, then parked in that queue.
    for (id, rule) in of_type(&t, "AWS::Events::Rule") {
        let target = &rule["Properties"]["Targets"][0];
        assert_eq!(
            target["DeadLetterConfig"]["Arn"],
            json!({"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}),
            "{id}"
        );
    }
}

/// Who may send to the stack's queues, decided as IAM decides a same-account request: an
/// explicit Deny in the queue policy wins; otherwise an IAM principal's own policy suffices
/// (anyone with `sqs:*` or PowerUser), while a service needs an Allow in the queue policy. A
/// condition key the request lacks makes an `…NotEquals` condition true and an `…Equals` one
/// false.
#[test]
fn only_the_function_and_the_stacks_rules_may_send_to_its_queues() {
    let Some(t) = transformed() else { return };
    let role = json!({"Fn::GetAtt": ["FunctionRole", "Arn"]});
    let rule = json!({"Fn::GetAtt": [of_type(&t, "AWS::Events::Rule")[0].0, "Arn"]});
    // (who, aws:PrincipalArn, aws:PrincipalServiceName, aws:SourceArn)
    let callers: [(&str, Option<Value>, Option<&str>, Option<Value>); 5] = [
        ("the function's role", Some(role.clone()), None, None),
        (
            "a PowerUser in the account",
            Some(json!("arn:aws:iam::123456789012:role/PowerUser")),
            None,
            None,
        ),
        (
            "a CI role with sqs:*",
            Some(json!("arn:aws:iam::123456789012:role/ci")),
            None,
            None,
        ),
        (
            "EventBridge for the stack's rule",
            None,
            Some("events.amazonaws.com"),
            Some(rule.clone()),
        ),
        (
            "EventBridge for someone else's rule",
            None,
            Some("events.amazonaws.com"),
            Some(json!(
                "arn:aws:events:ap-northeast-2:123456789012:rule/other"
            )),
        ),
    ];
    let holds = |condition: &Value,
                 principal: &Option<Value>,
                 service: Option<&str>,
                 source: &Option<Value>|
     -> bool {
        let Some(condition) = condition.as_object() else {
            return true;
        };
        condition.iter().all(|(operator, keys)| {
            keys.as_object().unwrap().iter().all(|(key, wanted)| {
                let present: Option<Value> = match key.as_str() {
                    "aws:PrincipalArn" => principal.clone(),
                    "aws:PrincipalServiceName" => service.map(|s| json!(s)),
                    "aws:SourceArn" => source.clone(),
                    other => panic!("a condition key this test does not know: {other}"),
                };
                let wanted: Vec<Value> = match wanted {
                    Value::Array(values) => values.clone(),
                    one => vec![one.clone()],
                };
                let matched = present.as_ref().is_some_and(|p| wanted.contains(p));
                match operator.as_str() {
                    "ArnEquals" | "StringEquals" => matched,
                    "ArnNotEquals" | "StringNotEquals" => !matched,
                    other => panic!("an operator this test does not know: {other}"),
                }
            })
        })
    };
    for (policy, queue, may_send) in [
        (
            "DeadLetterQueuePolicy",
            "DeadLetterQueue",
            [true, false, false, true, false],
        ),
        (
            "SweepQueuePolicy",
            "SweepQueue",
            [true, false, false, false, false],
        ),
        (
            "SweepDeadLetterQueuePolicy",
            "SweepDeadLetterQueue",
            [true, false, false, false, false],
        ),
    ] {
        let statements = t["Resources"][policy]["Properties"]["PolicyDocument"]["Statement"]
            .as_array()
            .unwrap();
        for ((who, principal, service, source), expected) in callers.iter().zip(may_send) {
            let applies = |s: &&Value| {
                s["Action"] == "sqs:SendMessage"
                    && s["Resource"] == json!({"Fn::GetAtt": [queue, "Arn"]})
                    && holds(&s["Condition"], principal, *service, source)
                    && match &s["Principal"] {
                        Value::String(any) => any == "*",
                        p => p["Service"].as_str() == *service && service.is_some(),
                    }
            };
            let denied = statements
                .iter()
                .filter(applies)
                .any(|s| s["Effect"] == "Deny");
            let allowed_by_queue = statements
                .iter()
                .filter(applies)
                .any(|s| s["Effect"] == "Allow");
            // An IAM principal's own policy allows it; a service needs the queue's Allow.
            let allowed = !denied && (principal.is_some() || allowed_by_queue);
            assert_eq!(allowed, expected, "{queue}: {who}");
        }
    }
    // No queue may park messages in the push dead-letter queue by a redrive policy of its
    // own, and only the sweep queue in the shards'.
    let allow = &t["Resources"]["DeadLetterQueue"]["Properties"]["RedriveAllowPolicy"];
    assert_eq!(allow["redrivePermission"], "denyAll");
    let shards = &t["Resources"]["SweepDeadLetterQueue"]["Properties"]["RedriveAllowPolicy"];
    assert_eq!(shards["redrivePermission"], "byQueue");
    assert_eq!(shards["sourceQueueArns"].as_array().unwrap().len(), 1);
    assert_eq!(
        t["Resources"]["SweepQueue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"],
        json!({"Fn::GetAtt": ["SweepDeadLetterQueue", "Arn"]})
    );
}

/// SQS lets any queue of the account and region name a queue as its dead-letter queue unless
/// the queue's `RedriveAllowPolicy` says otherwise, and a redriven message is no `SendMessage`
/// call: the queue policies' denies do not stop it, and it arrives with the queue's own ARN as
/// its source. So every queue of the stack, a future one too, says which queues may redrive into
/// it: exactly the stack's queues whose `RedrivePolicy` names it, or none (`denyAll`).
#[test]
fn every_queue_admits_redrives_from_exactly_the_stacks_queues_that_name_it() {
    use argocd_ecr_updater_standins::cloudformation::physical_resources;
    let Some(t) = transformed() else { return };
    let mut evaluator = evaluator_for(&t, &[]);
    let site = Site {
        account: "123456789012".into(),
        region: "ap-northeast-2".into(),
        stack_name: "argocd-ecr-updater".into(),
    };
    evaluator.resources = physical_resources(
        &t,
        &evaluator,
        &site,
        "argocd-ecr-updater-Function-Q3N7X2",
        "arn:aws:iam::123456789012:role/argocd-ecr-updater-role",
    );
    let queues = of_type(&t, "AWS::SQS::Queue");
    assert!(queues.len() >= 3, "{queues:?}");
    let arn = |logical: &str| evaluator.text(&json!({"Fn::GetAtt": [logical, "Arn"]}));
    for (id, queue) in &queues {
        let sources: BTreeSet<String> = queues
            .iter()
            .filter(|(_, q)| {
                let target = &q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"];
                !target.is_null() && evaluator.text(target) == arn(id)
            })
            .map(|(source, _)| arn(source))
            .collect();
        let allow = evaluator.eval(&queue["Properties"]["RedriveAllowPolicy"]);
        assert!(
            allow.is_object(),
            "{id} has no RedriveAllowPolicy: SQS's default, allowAll, lets any queue of the account redrive into it"
        );
        if sources.is_empty() {
            assert_eq!(allow, json!({"redrivePermission": "denyAll"}), "{id}");
        } else {
            assert_eq!(allow["redrivePermission"], "byQueue", "{id}");
            let allowed: BTreeSet<String> = allow["sourceQueueArns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            assert_eq!(allowed, sources, "{id}");
        }
    }
}

#[test]
fn clusters_in_other_regions_are_described_by_arn_in_this_account_only() {
    let Some(t) = transformed() else { return };
    let arn = "arn:aws:eks:eu-west-1:123456789012:cluster/prod-eu";
    let statement_in = |given: &[(&str, Value)]| -> Option<Value> {
        let evaluator = evaluator_for(&t, given);
        t["Resources"]["FunctionRole"]["Properties"]["Policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| evaluator.eval(p))
            .filter(|p| !p.is_null() && p.get("Ref").is_none())
            .flat_map(|p| p["PolicyDocument"]["Statement"].as_array().unwrap().clone())
            .find(|s| s["Sid"] == "FindClustersInOtherRegions")
    };
    assert_eq!(statement_in(&[]), None);
    let statement = statement_in(&[("ClusterArns", json!([arn]))]).unwrap();
    assert_eq!(statement["Action"], "eks:DescribeCluster");
    assert_eq!(statement["Resource"], json!([arn]));
    assert_eq!(
        statement["Condition"],
        json!({"StringEquals": {"aws:ResourceAccount": "123456789012"}})
    );
    // The stack's own region stays pinned for the clusters it names.
    let evaluator = evaluator_for(&t, &[]);
    let own =
        t["Resources"]["FunctionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["Sid"] == "FindTheCluster")
            .unwrap();
    assert_eq!(
        evaluator.eval(&own["Condition"]["StringEquals"]["aws:RequestedRegion"]),
        json!("ap-northeast-2")
    );
}

/// Every alarm's metric, as `namespace/metric`.
pub(crate) fn alarmed_metrics(t: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, alarm) in of_type(t, "AWS::CloudWatch::Alarm") {
        let p = &alarm["Properties"];
        if let Some(metric) = p["MetricName"].as_str() {
            out.insert(format!("{}/{metric}", p["Namespace"].as_str().unwrap()));
        }
        for query in p["Metrics"].as_array().into_iter().flatten() {
            let m = &query["MetricStat"]["Metric"];
            if let Some(metric) = m["MetricName"].as_str() {
                out.insert(format!("{}/{metric}", m["Namespace"].as_str().unwrap()));
            }
        }
    }
    out
}

#[test]
fn every_alarm_pages_the_alarm_topic_and_the_outputs_say_when_nobody_is_paged() {
    let Some(t) = transformed() else { return };
    let expected: BTreeSet<String> = [
        "AWS/Lambda/Errors",
        "AWS/Lambda/Throttles",
        "AWS/Lambda/AsyncEventsDropped",
        "AWS/Lambda/DestinationDeliveryFailures",
        "AWS/Events/FailedInvocations",
        "AWS/Events/InvocationsFailedToBeSentToDlq",
        "AWS/SQS/ApproximateNumberOfMessagesVisible",
        "AWS/SQS/ApproximateAgeOfOldestMessage",
        "ArgocdEcrUpdater/InvocationsFailed",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(alarmed_metrics(&t), expected);
    let topic = "arn:aws:sns:ap-northeast-2:123456789012:oncall";
    let with_topic = evaluator_for(&t, &[("AlarmTopicArn", json!(topic))]);
    let without = evaluator_for(&t, &[]);
    for (id, alarm) in of_type(&t, "AWS::CloudWatch::Alarm") {
        // Paged when it fires and when it clears.
        for key in ["AlarmActions", "OKActions"] {
            let actions = &alarm["Properties"][key];
            assert_eq!(with_topic.eval(actions), json!([topic]), "{id} {key}");
            assert_eq!(
                without.eval(actions),
                Value::Null, // AWS::NoValue: left out
                "{id} {key}"
            );
        }
    }
    let output = &t["Outputs"]["AlarmNotifications"]["Value"];
    assert_eq!(with_topic.text(output), topic);
    assert!(without.text(output).starts_with("nobody"));
    // Delivery failures, and events lost past the dead-letter queue: one query per rule of
    // the stack, all summed.
    let rules: BTreeSet<String> = of_type(&t, "AWS::Events::Rule")
        .into_iter()
        .map(|(id, _)| json!({"Ref": id}).to_string())
        .collect();
    for alarm in ["EventDeliveryAlarm", "EventsLostAlarm"] {
        let queries = &t["Resources"][alarm]["Properties"]["Metrics"];
        let watched: BTreeSet<String> = queries
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|q| q["MetricStat"]["Metric"]["Dimensions"][0].get("Value"))
            .map(Value::to_string)
            .collect();
        assert_eq!(watched, rules, "{alarm}");
        let sum = queries[0]["Expression"].as_str().unwrap();
        for query in queries.as_array().unwrap().iter().skip(1) {
            assert!(
                sum.contains(query["Id"].as_str().unwrap()),
                "{alarm}: {sum}"
            );
        }
    }
}

/// Every alarm's description names its runbook, and `docs/troubleshooting.md` has it: a
/// heading per alarm under "Alarms", so the page the alarm sends someone to exists.
#[test]
fn every_alarm_names_its_runbook_and_the_runbook_exists() {
    let Some(t) = transformed() else { return };
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/troubleshooting.md"),
    )
    .unwrap();
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    assert!(alarms.len() >= 12, "{}", alarms.len());
    for (id, alarm) in alarms {
        let description = alarm["Properties"]["AlarmDescription"].as_str().unwrap();
        assert!(
            description.contains(&format!("(runbook: {id})")),
            "{id}: {description}"
        );
        assert!(
            docs.contains(&format!("\n### {id}\n")),
            "docs/troubleshooting.md has no runbook heading `### {id}`"
        );
    }
}

/// A sweep that stops running pages: no sample of the metric every sweep reports, for the
/// interval the stack sets, is the alarm's state; missing data breaches.
#[test]
fn sweeps_that_stop_running_page_after_the_interval_the_stack_sets() {
    let Some(t) = transformed() else { return };
    let alarm = &t["Resources"]["SweepsStoppedAlarm"];
    assert_eq!(alarm["Condition"], "ReconcileOn");
    let p = &alarm["Properties"];
    assert_eq!(p["TreatMissingData"], "breaching");
    assert_eq!(p["ComparisonOperator"], "LessThanThreshold");
    assert_eq!(p["Threshold"], 1);
    let evaluator = evaluator_for(&t, &[("ReconcileMissingAfterSeconds", json!("3600"))]);
    let line = failed_sweep_line();
    for query in p["Metrics"].as_array().unwrap().iter().skip(1) {
        let stat = &query["MetricStat"];
        assert_eq!(stat["Stat"], "SampleCount");
        assert_eq!(evaluator.eval(&stat["Period"]), json!("3600"));
        let metric = &stat["Metric"];
        assert_eq!(
            metric["Namespace"],
            argocd_ecr_updater::report::metrics::NAMESPACE
        );
        // The function reports it on every invocation, so a sweep always leaves a sample.
        assert!(line.get(metric["MetricName"].as_str().unwrap()).is_some());
        let dimensions: BTreeSet<String> = metric["Dimensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["Name"].as_str().unwrap().to_string())
            .collect();
        let declared: BTreeSet<String> = line["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_string())
            .collect();
        assert_eq!(dimensions, declared);
    }
    // A single throttle does not page; a ceiling being hit does.
    let throttles = &t["Resources"]["FunctionThrottlesAlarm"]["Properties"];
    assert!(throttles["Threshold"].as_u64().unwrap() > 1);
}

/// The metric line of a sweep that failed before it decided anything.
fn failed_sweep_line() -> Value {
    argocd_ecr_updater::report::metrics::emf(
        "fn",
        Some(InvocationKind::Reconcile),
        true,
        None,
        Duration::ZERO,
        0,
    )
}

#[test]
fn the_failing_sweep_alarm_watches_the_dimensions_the_function_reports() {
    let Some(t) = transformed() else { return };
    let line = failed_sweep_line();
    let alarm = &t["Resources"]["ReconcileFailingAlarm"]["Properties"];
    assert_eq!(
        alarm["Namespace"],
        argocd_ecr_updater::report::metrics::NAMESPACE
    );
    let metric = alarm["MetricName"].as_str().unwrap();
    assert_eq!(line[metric], 1);
    let declared = &line["_aws"]["CloudWatchMetrics"][0];
    assert!(
        declared["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["Name"] == metric)
    );
    let dimensions: Vec<&str> = alarm["Dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["Name"].as_str().unwrap())
        .collect();
    assert_eq!(json!(dimensions), declared["Dimensions"][0]);
    for d in alarm["Dimensions"].as_array().unwrap().iter().skip(1) {
        assert_eq!(line[d["Name"].as_str().unwrap()], d["Value"]);
    }
}

#[test]
fn the_dashboard_shows_every_mode_with_metrics_the_function_reports() {
    let Some(t) = transformed() else { return };
    let evaluator = evaluator_for(&t, &[("Dashboard", json!("true"))]);
    let body = evaluator.text(&t["Resources"]["MetricsDashboard"]["Properties"]["DashboardBody"]);
    let body: Value = serde_json::from_str(&body).unwrap();
    let mut modes = BTreeSet::new();
    let mut rollouts = BTreeSet::new();
    for widget in body["widgets"].as_array().unwrap() {
        for metric in widget["properties"]["metrics"].as_array().unwrap() {
            let fields: Vec<&str> = metric
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if fields[0] != argocd_ecr_updater::report::metrics::NAMESPACE {
                continue;
            }
            // A rollout's metrics: by outcome, on the line each outcome reports.
            let Some(mode_at) = fields.iter().position(|f| *f == "Mode") else {
                let outcome = fields[fields.iter().position(|f| *f == "Outcome").unwrap() + 1];
                let rollout = argocd_ecr_updater::report::RolloutReport {
                    cluster: None,
                    namespace: "argocd".into(),
                    name: "web".into(),
                    images: vec![],
                    written_at: String::new(),
                    check: 1,
                    state: outcome.into(),
                    reason: String::new(),
                    lead_seconds: vec![1.0],
                    write_to_live_seconds: Some(1.0),
                    own_metric: false,
                };
                let line = argocd_ecr_updater::report::metrics::rollout_emf("fn", &rollout, 0)
                    .unwrap_or_else(|| {
                        panic!("the dashboard shows Outcome `{outcome}`, which no rollout reports")
                    });
                let declared = line["_aws"]["CloudWatchMetrics"][0]["Metrics"].to_string();
                assert!(
                    declared.contains(&format!("\"{}\"", fields[1])),
                    "{} is not reported for {outcome}",
                    fields[1]
                );
                rollouts.insert(outcome.to_string());
                continue;
            };
            let mode = fields[mode_at + 1];
            let kind = InvocationKind::ALL.into_iter().find(|k| k.as_str() == mode);
            assert!(
                kind.is_some(),
                "the dashboard shows Mode `{mode}`, which no invocation reports"
            );
            let line =
                argocd_ecr_updater::report::metrics::emf("fn", kind, true, None, Duration::ZERO, 0);
            assert!(
                line.get(fields[1]).is_some(),
                "{} is not reported",
                fields[1]
            );
            modes.insert(mode.to_string());
        }
    }
    assert_eq!(
        modes,
        BTreeSet::from([
            "push".into(),
            "scan".into(),
            "reconcile".into(),
            "shard".into()
        ])
    );
    assert_eq!(
        rollouts,
        BTreeSet::from(["confirmed".into(), "failed".into(), "timed-out".into()])
    );
}

fn deploy_doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/deploy.md")).unwrap()
}

/// The text of `docs/deploy.md` from `heading` to the next heading of any level.
fn doc_section(doc: &str, heading: &str) -> String {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/deploy.md has no {heading:?}"));
    let body = &doc[start + heading.len()..];
    let end = body.find("\n#").unwrap_or(body.len());
    body[..end].to_string()
}

/// Every statement of the role, whatever its condition, as (actions, sid).
pub(crate) fn template_role_actions(t: &Value) -> BTreeSet<String> {
    let evaluator = evaluator_for(t, &[]);
    let mut actions = BTreeSet::new();
    for policy in t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
    {
        // Both branches of a conditional policy: the table lists what any stack may hold.
        let documents = match policy.get("Fn::If") {
            Some(branches) => vec![branches[1].clone()],
            None => vec![policy.clone()],
        };
        for document in documents {
            for statement in document["PolicyDocument"]["Statement"].as_array().unwrap() {
                match evaluator.eval(&statement["Action"]) {
                    Value::String(one) => {
                        actions.insert(one);
                    }
                    Value::Array(many) => {
                        actions.extend(many.iter().map(|a| a.as_str().unwrap().to_string()));
                    }
                    other => panic!("{other}"),
                }
            }
        }
    }
    actions
}

#[test]
fn the_documented_role_lists_exactly_what_the_template_grants() {
    let Some(t) = transformed() else { return };
    let section = doc_section(&deploy_doc(), "### What the role may do");
    let documented: BTreeSet<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|row| {
            let first = row.split('|').nth(1).unwrap();
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(documented, template_role_actions(&t));
}

#[test]
fn the_vpc_table_names_an_endpoint_for_every_service_the_function_calls() {
    let Some(t) = transformed() else { return };
    let section = doc_section(&deploy_doc(), "**In a VPC**");
    // The endpoint each service's API is reached through. `sqs` is both the on-failure
    // destination and the sweep queue's mapping, which Lambda serves outside the function's
    // network, and the shards the function sends itself, which need the endpoint;
    // `ec2` is Lambda's own networking.
    fn endpoint(service: &str) -> Option<&str> {
        match service {
            "ecr" => Some("ecr.api"),
            "cloudwatch" => Some("monitoring"),
            "ec2" => None,
            other => Some(other),
        }
    }
    for action in template_role_actions(&t) {
        let service = action.split(':').next().unwrap();
        if let Some(name) = endpoint(service) {
            assert!(
                section.contains(&format!("`{name}`")),
                "{action}: no `{name}` endpoint in the VPC table"
            );
        }
    }
    for needed in ["`ecr.dkr`", "S3 gateway", "cluster security group"] {
        assert!(section.contains(needed), "{needed}");
    }
}

#[test]
fn the_cargo_lambda_deploy_gives_an_environment_the_function_accepts() {
    let section = doc_section(&deploy_doc(), "### With cargo-lambda");
    let block = section.split("```").nth(1).unwrap();
    let variables: BTreeMap<String, String> = block
        .split("--env-var ")
        .skip(1)
        .map(|rest| {
            let pair = rest.split_whitespace().next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            (name.to_string(), value.to_string())
        })
        .collect();
    assert!(variables.contains_key("CLUSTER_NAME"), "{block}");
    // What Lambda adds itself, and nothing else.
    let config = argocd_ecr_updater::config::Config::from_lookup(|name| match name {
        "AWS_REGION" => Some("ap-northeast-2".to_string()),
        other => variables.get(other).cloned(),
    });
    assert!(config.is_ok(), "{config:?}");
    // The role may not create its log group: the documented path makes it first.
    let create = block
        .find("create-log-group")
        .expect("the log group is created");
    assert!(create < block.find("cargo lambda deploy").unwrap());
}

#[test]
fn a_private_cluster_deploy_puts_the_function_in_the_subnets_with_lambdas_networking_grant() {
    let Some(t) = transformed() else { return };
    let (function_id, function) = of_type(&t, "AWS::Lambda::Function")[0];
    let vpc = &function["Properties"]["VpcConfig"];
    let outside = evaluator_for(&t, &[]);
    assert_eq!(
        outside.eval(vpc),
        Value::Null, // AWS::NoValue: left out
        "{function_id}"
    );
    let inside = evaluator_for(
        &t,
        &[
            ("SubnetIds", json!(["subnet-a", "subnet-b"])),
            ("SecurityGroupIds", json!(["sg-function"])),
        ],
    );
    assert_eq!(
        inside.eval(vpc),
        json!({"SubnetIds": ["subnet-a", "subnet-b"], "SecurityGroupIds": ["sg-function"]})
    );
    // Lambda's network interfaces: granted exactly when the function is in a VPC.
    let networking = t["Resources"]["FunctionRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["Fn::If"][0] == "InVpc")
        .expect("the VPC networking policy sits behind InVpc");
    assert!(inside.condition("InVpc") && !outside.condition("InVpc"));
    let statement = &networking["Fn::If"][1]["PolicyDocument"]["Statement"][0];
    assert!(
        statement["Action"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a.as_str().unwrap().starts_with("ec2:"))
    );
}

/// Lambda holds all of a function's environment variables to 4 KB together (their JSON, keys
/// and values). A full configuration of the stack, measured as CloudFormation would set it,
/// with AWS Signer's real Notation root (`tests/fixtures/aws-signer-notation-root.pem`, DER
/// SHA-256 90a87d05…473f, ECDSA P-384) and a private endpoint's CA shaped as EKS makes them
/// (RSA-2048): inline, the roots take the function over the limit; in
/// `NotationTrustRootsSecretArn`, a kilobyte stays free. `plan.tftest.hcl` measures the
/// Terraform module's the same way.
#[test]
fn a_full_configuration_fits_lambdas_environment_only_with_the_roots_in_a_secret() {
    use argocd_ecr_updater_standins::cloudformation::physical_resources;
    use base64::Engine;
    let Some(t) = transformed() else { return };
    let fixture = |name: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
        )
        .unwrap()
    };
    let base64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let root = base64(&fixture("aws-signer-notation-root.pem"));
    let ca = base64(&fixture("eks-cluster-ca.pem"));
    assert_eq!((root.len(), ca.len()), (1168, 1500));
    let size = |roots: (&str, Value)| -> usize {
        let given = [
            ("ClusterName", json!("platform-prod-apne2")),
            ("EcrRepositoryNames", json!(["payments-api", "search-api"])),
            (
                "ArgoCdNamespaces",
                json!("argocd,team-payments,team-search"),
            ),
            (
                "ApplicationLabelSelector",
                json!("argocd-ecr-updater.io/enabled=true,env in (prod,staging)"),
            ),
            (
                "KubeApiEndpoint",
                json!(
                    "https://0F4A2C9E7B1D3F5A8C6E0B2D4F6A8C0E.gr7.ap-northeast-2.eks.amazonaws.com"
                ),
            ),
            ("KubeCaData", json!(ca)),
            (
                "NotificationTopicArn",
                json!("arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-reports"),
            ),
            (
                "GitCredentialsSecretArns",
                json!([
                    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-app-AbCdEf",
                    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/gitlab-token-GhIjKl"
                ]),
            ),
            ("GitLabHosts", json!("gitlab.example.com")),
            (
                "RolloutMetricApplications",
                json!("argocd/payments-api,argocd/search-api"),
            ),
            roots,
        ];
        let mut evaluator = evaluator_for(&t, &given);
        let site = Site {
            account: "768157413559".into(),
            region: "ap-northeast-2".into(),
            stack_name: "argocd-ecr-updater".into(),
        };
        evaluator.resources = physical_resources(
            &t,
            &evaluator,
            &site,
            "argocd-ecr-updater-Function-Q3N7X2",
            "arn:aws:iam::768157413559:role/argocd-ecr-updater-role",
        );
        let variables =
            evaluator.eval(&t["Resources"]["Function"]["Properties"]["Environment"]["Variables"]);
        let variables = variables.as_object().unwrap();
        // Every value a string, as Lambda takes them (a parameter's number is a string too).
        assert!(variables.values().all(Value::is_string), "{variables:?}");
        assert!(
            variables["SWEEP_QUEUE_URL"]
                .as_str()
                .unwrap()
                .ends_with(&evaluator.text(&json!({"Fn::GetAtt": ["SweepQueue", "QueueName"]}))),
        );
        serde_json::to_string(variables).unwrap().len()
    };
    const LIMIT: usize = 4096;
    let inline = size(("NotationTrustRoots", json!(root)));
    assert!(
        inline > LIMIT,
        "the roots inline fit after all: {inline} bytes"
    );
    let secret = size((
        "NotationTrustRootsSecretArn",
        json!(
            "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/notation-roots-MnOpQr"
        ),
    ));
    assert!(
        secret <= LIMIT - 1000,
        "{secret} bytes: no kilobyte left of {LIMIT}"
    );
}

/// On the managed layout the function is told the capability is on and to send chat
/// notifications; with the defaults neither variable is set (unset is the default), and the
/// function accepts both environments.
#[test]
fn the_eks_capability_and_chat_notifications_reach_the_functions_environment_only_when_asked() {
    let Some(t) = transformed() else { return };
    let variables = &t["Resources"]["Function"]["Properties"]["Environment"]["Variables"];
    let managed = [
        ("ArgoCdEksCapability", json!("true")),
        ("NotificationFormat", json!("chat")),
        (
            "NotificationTopicArn",
            json!("arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-chat"),
        ),
    ];
    for (given, expected) in [
        (&managed[..], (Some("true"), Some("chat"))),
        (&[][..], (None, None)),
    ] {
        let environment = evaluator_for(&t, given).eval(variables);
        let get = |k: &str| environment.get(k).and_then(Value::as_str).map(String::from);
        assert_eq!(
            (
                get("ARGOCD_EKS_CAPABILITY").as_deref(),
                get("NOTIFICATION_FORMAT").as_deref()
            ),
            expected,
            "{given:?}"
        );
        // What these two settings are read against: the cluster and its namespaces.
        let read = [
            "ARGOCD_EKS_CAPABILITY",
            "NOTIFICATION_FORMAT",
            "NOTIFICATION_TOPIC_ARN",
        ];
        let read = read
            .into_iter()
            .chain(["CLUSTER_NAME", "ARGOCD_NAMESPACES"]);
        let told: BTreeMap<&str, String> = read.filter_map(|k| get(k).map(|v| (k, v))).collect();
        let config = argocd_ecr_updater::config::Config::from_lookup(|k| told.get(k).cloned());
        assert!(config.is_ok(), "{given:?}: {:?}", config.err());
    }
}
