//! Resource policies read as IAM reads them, for the one question doctor asks of them: may
//! a service (EventBridge) perform an action on a resource for events from a source ARN?
//! An explicit `Deny` that matches wins over any `Allow`; without a matching `Allow` the
//! answer is no. Conditions are judged on the request's keys (`aws:SourceArn`,
//! `aws:PrincipalServiceName`, …); a key the request lacks fails a positive operator and
//! satisfies a `Not` one, as IAM has it. An operator doctor does not know is reported, not
//! guessed.

use serde_json::Value;

/// The request a policy is asked about.
pub(super) struct Request<'r> {
    /// The service principal, e.g. `events.amazonaws.com`.
    pub service: &'r str,
    pub action: &'r str,
    pub resource: &'r str,
    pub source_arn: &'r str,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Allowed by the statement with this Sid (or `#` and its index).
    Allowed(String),
    /// No statement allows it.
    NotAllowed,
    /// Denied explicitly by the statement with this Sid.
    Denied(String),
    /// A statement that may decide it has a condition operator doctor does not judge.
    Undecided(String),
}

/// The statements of a policy document (one statement or a list).
pub(super) fn statements(policy: &Value) -> Vec<&Value> {
    match &policy["Statement"] {
        Value::Array(items) => items.iter().collect(),
        statement @ Value::Object(_) => vec![statement],
        _ => Vec::new(),
    }
}

pub(super) fn evaluate(policy: &Value, request: &Request) -> Verdict {
    let mut allowed = None;
    let mut undecided = None;
    for (index, statement) in statements(policy).into_iter().enumerate() {
        let sid = statement["Sid"]
            .as_str()
            .map_or_else(|| format!("#{index}"), str::to_string);
        if !principal_matches(&statement["Principal"], request.service)
            || !listed(&statement["Action"], request.action, true)
            || !(statement["Resource"].is_null()
                || listed(&statement["Resource"], request.resource, false))
        {
            continue;
        }
        match conditions_hold(&statement["Condition"], request) {
            Some(false) => continue,
            None => {
                undecided.get_or_insert(sid);
                continue;
            }
            Some(true) => {}
        }
        match statement["Effect"].as_str() {
            Some("Deny") => return Verdict::Denied(sid),
            Some("Allow") => {
                allowed.get_or_insert(sid);
            }
            _ => {}
        }
    }
    match (undecided, allowed) {
        (Some(sid), _) => Verdict::Undecided(sid),
        (None, Some(sid)) => Verdict::Allowed(sid),
        (None, None) => Verdict::NotAllowed,
    }
}

fn as_list(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// `*` any run of characters, `?` one; actions compare without case, as IAM does.
fn wildcard(pattern: &str, value: &str, ignore_case: bool) -> bool {
    if ignore_case {
        wildmatch::WildMatch::new(&pattern.to_ascii_lowercase())
            .matches(&value.to_ascii_lowercase())
    } else {
        wildmatch::WildMatch::new(pattern).matches(value)
    }
}

fn listed(patterns: &Value, value: &str, ignore_case: bool) -> bool {
    as_list(patterns)
        .iter()
        .any(|p| wildcard(p, value, ignore_case))
}

fn principal_matches(principal: &Value, service: &str) -> bool {
    match principal {
        Value::String(s) => s == "*",
        Value::Object(_) => {
            as_list(&principal["Service"]).contains(&service)
                || as_list(&principal["AWS"]).contains(&"*")
        }
        _ => false,
    }
}

/// Whether every condition holds for the request; `None` when an operator is not one doctor
/// judges.
fn conditions_hold(condition: &Value, request: &Request) -> Option<bool> {
    let Some(operators) = condition.as_object() else {
        return Some(true);
    };
    for (operator, keys) in operators {
        let keys = keys.as_object()?;
        for (key, wanted) in keys {
            let actual = match key.to_ascii_lowercase().as_str() {
                "aws:sourcearn" => Some(request.source_arn),
                "aws:principalservicename" => Some(request.service),
                // A service principal has no principal ARN or account.
                "aws:principalarn" | "aws:principalaccount" => None,
                "aws:sourceaccount" => request.source_arn.split(':').nth(4),
                _ => return None,
            };
            let holds = judge(operator, as_list(wanted), actual)?;
            if !holds {
                return Some(false);
            }
        }
    }
    Some(true)
}

fn judge(operator: &str, wanted: Vec<&str>, actual: Option<&str>) -> Option<bool> {
    let (base, if_exists) = match operator.strip_suffix("IfExists") {
        Some(base) => (base, true),
        None => (operator, false),
    };
    let Some(actual) = actual else {
        // IAM: a missing key fails a positive operator and satisfies a negated one.
        return Some(if_exists || base.contains("Not"));
    };
    let matches = |like: bool, ignore_case: bool| {
        wanted.iter().any(|w| {
            if like {
                wildcard(w, actual, ignore_case)
            } else if ignore_case {
                w.eq_ignore_ascii_case(actual)
            } else {
                *w == actual
            }
        })
    };
    Some(match base {
        "ArnEquals" | "ArnLike" | "StringLike" => matches(true, false),
        "StringEquals" => matches(false, false),
        "StringEqualsIgnoreCase" => matches(false, true),
        "ArnNotEquals" | "ArnNotLike" | "StringNotLike" => !matches(true, false),
        "StringNotEquals" => !matches(false, false),
        "StringNotEqualsIgnoreCase" => !matches(false, true),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RULE: &str = "arn:aws:events:ap-northeast-2:111122223333:rule/stack-FunctionEcrPush-AB";
    const QUEUE: &str = "arn:aws:sqs:ap-northeast-2:111122223333:stack-DeadLetterQueue-CD";

    fn request() -> Request<'static> {
        Request {
            service: "events.amazonaws.com",
            action: "sqs:SendMessage",
            resource: QUEUE,
            source_arn: RULE,
        }
    }

    /// The template's dead-letter queue policy, for `rules`.
    fn template_policy(rules: &[&str]) -> Value {
        json!({"Version": "2012-10-17", "Statement": [
            {"Sid": "EventBridgeDeliveryFailures", "Effect": "Allow",
             "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
             "Resource": QUEUE, "Condition": {"ArnEquals": {"aws:SourceArn": rules}}},
            {"Sid": "OnlyTheStackSends", "Effect": "Deny", "Principal": "*",
             "Action": "sqs:SendMessage", "Resource": QUEUE,
             "Condition": {"ArnNotEquals": {"aws:PrincipalArn": "arn:aws:iam::111122223333:role/fn"},
                           "StringNotEquals": {"aws:PrincipalServiceName": "events.amazonaws.com"}}}
        ]})
    }

    #[test]
    fn the_templates_queue_policy_lets_eventbridge_park_for_its_rules_only() {
        let cases = [
            (
                template_policy(&[RULE]),
                Verdict::Allowed("EventBridgeDeliveryFailures".into()),
            ),
            (
                template_policy(&["arn:aws:events:ap-northeast-2:111122223333:rule/other"]),
                Verdict::NotAllowed,
            ),
            (
                template_policy(&["arn:aws:events:ap-northeast-2:111122223333:rule/stack-*"]),
                Verdict::Allowed("EventBridgeDeliveryFailures".into()),
            ),
            (json!({"Statement": []}), Verdict::NotAllowed),
            (json!({}), Verdict::NotAllowed),
        ];
        for (policy, verdict) in cases {
            assert_eq!(evaluate(&policy, &request()), verdict, "{policy}");
        }
    }

    #[test]
    fn a_deny_that_matches_wins_over_the_allow() {
        let mut policy = template_policy(&[RULE]);
        // The deny's exception for EventBridge removed: it now denies EventBridge too.
        policy["Statement"][1]["Condition"]
            .as_object_mut()
            .unwrap()
            .remove("StringNotEquals");
        assert_eq!(
            evaluate(&policy, &request()),
            Verdict::Denied("OnlyTheStackSends".into())
        );
    }

    #[test]
    fn statements_for_other_principals_actions_or_resources_do_not_allow() {
        let allow = |principal: Value, action: &str, resource: &str| json!({"Statement": {"Effect": "Allow", "Principal": principal, "Action": action, "Resource": resource}});
        let events = json!({"Service": "events.amazonaws.com"});
        let cases = [
            (allow(events.clone(), "sqs:SendMessage", QUEUE), true),
            (allow(events.clone(), "SQS:sendmessage", QUEUE), true),
            (allow(events.clone(), "sqs:*", "*"), true),
            (allow(json!("*"), "sqs:SendMessage", QUEUE), true),
            (
                allow(
                    json!({"Service": "sns.amazonaws.com"}),
                    "sqs:SendMessage",
                    QUEUE,
                ),
                false,
            ),
            (allow(events.clone(), "sqs:ReceiveMessage", QUEUE), false),
            (
                allow(
                    events,
                    "sqs:SendMessage",
                    "arn:aws:sqs:ap-northeast-2:111122223333:other",
                ),
                false,
            ),
        ];
        for (policy, allowed) in cases {
            let verdict = evaluate(&policy, &request());
            assert_eq!(
                matches!(verdict, Verdict::Allowed(_)),
                allowed,
                "{policy}: {verdict:?}"
            );
        }
    }

    #[test]
    fn a_condition_operator_doctor_does_not_judge_is_reported_not_guessed() {
        let policy = json!({"Statement": {"Sid": "Dated", "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
            "Condition": {"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}}});
        assert_eq!(
            evaluate(&policy, &request()),
            Verdict::Undecided("Dated".into())
        );
    }

    #[test]
    fn a_missing_key_fails_a_positive_operator_and_satisfies_a_negated_one() {
        assert_eq!(judge("ArnEquals", vec!["x"], None), Some(false));
        assert_eq!(judge("ArnNotEquals", vec!["x"], None), Some(true));
        assert_eq!(judge("ArnEqualsIfExists", vec!["x"], None), Some(true));
        assert_eq!(judge("StringEquals", vec!["a"], Some("a")), Some(true));
        assert_eq!(judge("StringNotLike", vec!["a*"], Some("abc")), Some(false));
    }
}
