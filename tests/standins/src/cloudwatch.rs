//! CloudWatch alarms as the AWS SDK for Rust reaches them: Smithy RPC v2 CBOR
//! (`POST /service/GraniteServiceVersion20100801/operation/<Operation>`, `smithy-protocol:
//! rpc-v2-cbor`, CBOR bodies, timestamps as tag 1 epoch seconds), behind the same SigV4 check
//! as every AWS call of the stand-in. `DescribeAlarms` and `DescribeAlarmHistory` are served
//! from alarms whose state changes a test scripts at given times; each change is recorded in
//! the history as CloudWatch records it (`StateUpdate`, `HistoryData` with the old and new
//! state, the summary `Alarm updated from OK to ALARM`), and a configuration change is
//! recorded too, so a reader that does not ask for state updates only gets them mixed.
//!
//! IAM as the role would have it: with [`CloudWatch::readable_only`], an alarm outside the
//! list is refused `AccessDenied` (the action is authorized per alarm ARN), in the envelope
//! a query-compatible service sends (`__type` and `x-amzn-query-error`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ciborium::Value as Cbor;
use serde_json::json;
use time::OffsetDateTime;

use crate::faults::lock;

const SERVICE: &str = "GraniteServiceVersion20100801";

#[derive(Debug, Clone)]
struct Alarm {
    state: String,
    reason: String,
    updated: OffsetDateTime,
    composite: bool,
}

#[derive(Debug, Clone)]
struct HistoryItem {
    alarm: String,
    /// Of a composite alarm: `DescribeAlarmHistory` returns it only when `AlarmTypes` names
    /// `CompositeAlarm` (omitted, only metric alarms' history is returned).
    composite: bool,
    at: OffsetDateTime,
    kind: &'static str,
    summary: String,
    data: String,
}

/// The alarms of the stand-in's account and region.
#[derive(Debug, Default)]
pub struct CloudWatch {
    alarms: Mutex<BTreeMap<String, Alarm>>,
    history: Mutex<Vec<HistoryItem>>,
    readable: Mutex<Option<Vec<String>>>,
    /// Operations answered, in order, with the alarm(s) asked about.
    calls: Mutex<Vec<(String, String)>>,
    /// The next calls answered with this error: (remaining, status, code).
    failing: Mutex<Option<(u32, u16, String)>>,
}

impl CloudWatch {
    /// Creates a metric alarm in `OK` at `at` (a configuration update in its history).
    pub fn create_alarm(&self, name: &str, at: OffsetDateTime) {
        self.create(name, at, false);
    }

    /// Creates a composite alarm in `OK` at `at`.
    pub fn create_composite_alarm(&self, name: &str, at: OffsetDateTime) {
        self.create(name, at, true);
    }

    fn create(&self, name: &str, at: OffsetDateTime, composite: bool) {
        lock(&self.alarms).insert(
            name.into(),
            Alarm {
                state: "OK".into(),
                reason: "Unchecked: Initial alarm creation".into(),
                updated: at,
                composite,
            },
        );
        lock(&self.history).push(HistoryItem {
            alarm: name.into(),
            composite,
            at,
            kind: "ConfigurationUpdate",
            summary: format!("Alarm \"{name}\" created"),
            data: json!({"version": "1.0", "type": "Create"}).to_string(),
        });
    }

    /// The alarm goes to `state` (`OK`, `ALARM`, `INSUFFICIENT_DATA`) at `at` for `reason`,
    /// recorded in its history; the same state again changes nothing, as in CloudWatch.
    pub fn set_state(&self, name: &str, state: &str, reason: &str, at: OffsetDateTime) {
        let mut alarms = lock(&self.alarms);
        let Some(alarm) = alarms.get_mut(name) else {
            panic!("no alarm {name}: create it first");
        };
        if alarm.state == state {
            return;
        }
        let data = json!({
            "version": "1.0",
            "oldState": {"stateValue": alarm.state, "stateReason": alarm.reason},
            "newState": {"stateValue": state, "stateReason": reason},
        });
        lock(&self.history).push(HistoryItem {
            alarm: name.into(),
            composite: alarm.composite,
            at,
            kind: "StateUpdate",
            summary: format!("Alarm updated from {} to {state}", alarm.state),
            data: data.to_string(),
        });
        alarm.state = state.into();
        alarm.reason = reason.into();
        alarm.updated = at;
    }

    /// Deletes the alarm (its history stays, as in CloudWatch).
    pub fn delete_alarm(&self, name: &str) {
        lock(&self.alarms).remove(name);
    }

    /// The next `count` calls are answered `status` with error `code` (in this protocol's
    /// envelope): `ServiceUnavailable` 503, `InternalServiceError` 500, `Throttling` 400.
    pub fn fail_next(&self, count: u32, status: u16, code: &str) {
        *lock(&self.failing) = Some((count, status, code.to_string()));
    }

    fn failure(&self) -> Option<(u16, String)> {
        let mut failing = lock(&self.failing);
        let (remaining, status, code) = failing.as_mut()?;
        if *remaining == 0 {
            return None;
        }
        *remaining -= 1;
        Some((*status, code.clone()))
    }

    /// Only these alarms may be read by the function's role (its policy's alarm ARNs).
    pub fn readable_only(&self, names: &[&str]) {
        *lock(&self.readable) = Some(names.iter().map(|n| n.to_string()).collect());
    }

    /// `(operation, alarms asked)` for every call answered or refused.
    pub fn calls(&self) -> Vec<(String, String)> {
        lock(&self.calls).clone()
    }

    fn denied(&self, name: &str) -> bool {
        lock(&self.readable)
            .as_ref()
            .is_some_and(|names| !names.iter().any(|n| n == name))
    }
}

/// `POST /service/{service}/operation/{operation}`.
pub async fn handle(
    State(state): State<std::sync::Arc<crate::aws::AwsState>>,
    Path((service, operation)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if service != SERVICE {
        return error(
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            &format!("no service {service}"),
        );
    }
    if header("smithy-protocol") != Some("rpc-v2-cbor")
        || header("content-type") != Some("application/cbor")
    {
        return error(
            StatusCode::BAD_REQUEST,
            "SerializationException",
            "expected smithy-protocol: rpc-v2-cbor and content-type: application/cbor",
        );
    }
    let Ok(Cbor::Map(request)) = ciborium::from_reader::<Cbor, _>(&body[..]) else {
        return error(
            StatusCode::BAD_REQUEST,
            "SerializationException",
            "the body is not a CBOR map",
        );
    };
    let request: BTreeMap<String, Cbor> = request
        .into_iter()
        .filter_map(|(k, v)| k.into_text().ok().map(|k| (k, v)))
        .collect();
    let region = state.region.clone();
    let account = state.account.clone();
    let cloudwatch = &state.cloudwatch;
    if let Some((status, code)) = cloudwatch.failure() {
        lock(&cloudwatch.calls).push((operation.clone(), format!("failed {code}")));
        return error(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            &code,
            "injected by the test",
        );
    }
    match operation.as_str() {
        "DescribeAlarms" => describe_alarms(cloudwatch, &request, &region, &account),
        "DescribeAlarmHistory" => describe_alarm_history(cloudwatch, &request, &region, &account),
        other => error(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            &format!("operation {other} is not served by the stand-in"),
        ),
    }
}

fn describe_alarms(
    cloudwatch: &CloudWatch,
    request: &BTreeMap<String, Cbor>,
    region: &str,
    account: &str,
) -> Response {
    let names: Vec<String> = match request.get("AlarmNames") {
        Some(Cbor::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_text().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    if names.len() > 100 {
        return error(
            StatusCode::BAD_REQUEST,
            "ValidationError",
            "AlarmNames: at most 100",
        );
    }
    if let Some(problem) = bad_max_records(request) {
        return problem;
    }
    let types: Vec<String> = match request.get("AlarmTypes") {
        Some(Cbor::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_text().map(str::to_string))
            .collect(),
        _ => vec!["MetricAlarm".into()],
    };
    lock(&cloudwatch.calls).push(("DescribeAlarms".into(), names.join(",")));
    // IAM authorizes DescribeAlarms on each alarm ARN named; an unnamed listing is a
    // listing of every alarm.
    let asked: Vec<&String> = if names.is_empty() {
        Vec::new()
    } else {
        names.iter().collect()
    };
    if let Some(name) = asked.iter().find(|n| cloudwatch.denied(n)) {
        return denied("cloudwatch:DescribeAlarms", region, account, name);
    }
    if names.is_empty() && lock(&cloudwatch.readable).is_some() {
        return denied("cloudwatch:DescribeAlarms", region, account, "*");
    }
    let alarms = lock(&cloudwatch.alarms);
    let selected = alarms
        .iter()
        .filter(|(name, _)| names.is_empty() || names.contains(name));
    let (mut metric, mut composite) = (Vec::new(), Vec::new());
    for (name, alarm) in selected {
        let entry = Cbor::Map(vec![
            text_pair("AlarmName", name),
            text_pair("AlarmArn", &arn(region, account, name)),
            text_pair("StateValue", &alarm.state),
            text_pair("StateReason", &alarm.reason),
            (
                Cbor::Text("StateUpdatedTimestamp".into()),
                timestamp(alarm.updated),
            ),
        ]);
        match alarm.composite {
            true if types.iter().any(|t| t == "CompositeAlarm") => composite.push(entry),
            false if types.iter().any(|t| t == "MetricAlarm") => metric.push(entry),
            _ => {}
        }
    }
    ok(Cbor::Map(vec![
        (Cbor::Text("MetricAlarms".into()), Cbor::Array(metric)),
        (Cbor::Text("CompositeAlarms".into()), Cbor::Array(composite)),
    ]))
}

fn describe_alarm_history(
    cloudwatch: &CloudWatch,
    request: &BTreeMap<String, Cbor>,
    region: &str,
    account: &str,
) -> Response {
    let name = request.get("AlarmName").and_then(Cbor::as_text);
    lock(&cloudwatch.calls).push((
        "DescribeAlarmHistory".into(),
        name.unwrap_or_default().into(),
    ));
    if let Some(problem) = bad_max_records(request) {
        return problem;
    }
    // A composite alarm's history needs the action on `*` (CloudWatch's API reference).
    let composite = name.is_some_and(|n| {
        lock(&cloudwatch.alarms)
            .get(n)
            .is_some_and(|alarm| alarm.composite)
    });
    if cloudwatch.denied(name.unwrap_or("*")) || (composite && cloudwatch.denied("*")) {
        return denied(
            "cloudwatch:DescribeAlarmHistory",
            region,
            account,
            name.unwrap_or("*"),
        );
    }
    let kind = request.get("HistoryItemType").and_then(Cbor::as_text);
    let start = request.get("StartDate").and_then(time_of);
    let end = request.get("EndDate").and_then(time_of);
    let ascending = request.get("ScanBy").and_then(Cbor::as_text) == Some("TimestampAscending");
    let max = request
        .get("MaxRecords")
        .and_then(|v| v.as_integer())
        .and_then(|i| usize::try_from(i).ok())
        .unwrap_or(100);
    let from: usize = request
        .get("NextToken")
        .and_then(Cbor::as_text)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let types: Vec<String> = match request.get("AlarmTypes") {
        Some(Cbor::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_text().map(str::to_string))
            .collect(),
        _ => vec!["MetricAlarm".into()],
    };
    let wanted = |composite: bool| {
        let kind = if composite {
            "CompositeAlarm"
        } else {
            "MetricAlarm"
        };
        types.iter().any(|t| t == kind)
    };
    let mut items: Vec<HistoryItem> = lock(&cloudwatch.history)
        .iter()
        .filter(|i| wanted(i.composite))
        .filter(|i| name.is_none_or(|n| i.alarm == n))
        .filter(|i| kind.is_none_or(|k| i.kind == k))
        .filter(|i| start.is_none_or(|s| i.at >= s) && end.is_none_or(|e| i.at <= e))
        .cloned()
        .collect();
    items.sort_by_key(|i| i.at);
    if !ascending {
        items.reverse();
    }
    let page: Vec<Cbor> = items
        .iter()
        .skip(from)
        .take(max)
        .map(|item| {
            Cbor::Map(vec![
                text_pair("AlarmName", &item.alarm),
                text_pair(
                    "AlarmType",
                    if item.composite {
                        "CompositeAlarm"
                    } else {
                        "MetricAlarm"
                    },
                ),
                (Cbor::Text("Timestamp".into()), timestamp(item.at)),
                text_pair("HistoryItemType", item.kind),
                text_pair("HistorySummary", &item.summary),
                text_pair("HistoryData", &item.data),
            ])
        })
        .collect();
    let mut answer = vec![(Cbor::Text("AlarmHistoryItems".into()), Cbor::Array(page))];
    if from + max < items.len() {
        answer.push(text_pair("NextToken", &(from + max).to_string()));
    }
    ok(Cbor::Map(answer))
}

fn bad_max_records(request: &BTreeMap<String, Cbor>) -> Option<Response> {
    let max = request.get("MaxRecords")?.as_integer()?;
    let max = i128::from(max);
    (!(1..=100).contains(&max)).then(|| {
        error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValue",
            "MaxRecords must be between 1 and 100",
        )
    })
}

fn arn(region: &str, account: &str, name: &str) -> String {
    format!("arn:aws:cloudwatch:{region}:{account}:alarm:{name}")
}

fn text_pair(key: &str, value: &str) -> (Cbor, Cbor) {
    (Cbor::Text(key.into()), Cbor::Text(value.into()))
}

/// A timestamp as RPC v2 CBOR writes it: tag 1, epoch seconds (fractional as a float).
fn timestamp(at: OffsetDateTime) -> Cbor {
    let millis = at.unix_timestamp_nanos() / 1_000_000;
    let seconds = if millis % 1000 == 0 {
        Cbor::Integer((millis / 1000).try_into().unwrap_or(0i64.into()))
    } else {
        Cbor::Float(millis as f64 / 1000.0)
    };
    Cbor::Tag(1, Box::new(seconds))
}

fn time_of(value: &Cbor) -> Option<OffsetDateTime> {
    let Cbor::Tag(1, inner) = value else {
        return None;
    };
    let seconds = match inner.as_ref() {
        Cbor::Integer(i) => i128::from(*i) as f64,
        Cbor::Float(f) => *f,
        _ => return None,
    };
    OffsetDateTime::from_unix_timestamp_nanos((seconds * 1e9) as i128).ok()
}

fn ok(body: Cbor) -> Response {
    cbor(StatusCode::OK, body, None)
}

fn cbor(status: StatusCode, body: Cbor, query_error: Option<String>) -> Response {
    let mut bytes = Vec::new();
    if ciborium::into_writer(&body, &mut bytes).is_err() {
        return (StatusCode::INTERNAL_SERVER_ERROR, "cbor").into_response();
    }
    let mut response = (
        status,
        [
            ("content-type", "application/cbor"),
            ("smithy-protocol", "rpc-v2-cbor"),
        ],
        bytes,
    )
        .into_response();
    if let Some(value) = query_error.and_then(|v| v.parse().ok()) {
        response.headers_mut().insert("x-amzn-query-error", value);
    }
    response
}

/// A refusal before the operation (SigV4), in this protocol's envelope.
pub fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    error(status, code, message)
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    cbor(
        status,
        Cbor::Map(vec![
            text_pair("__type", &format!("com.amazonaws.cloudwatch#{code}")),
            text_pair("message", message),
        ]),
        Some(format!("{code};Sender")),
    )
}

fn denied(action: &str, region: &str, account: &str, name: &str) -> Response {
    cbor(
        StatusCode::FORBIDDEN,
        Cbor::Map(vec![
            text_pair("__type", "com.amazon.coral.service#AccessDeniedException"),
            text_pair(
                "message",
                &format!(
                    "User: {} is not authorized to perform: {action} on resource: {} because no identity-based policy allows the {action} action",
                    crate::FUNCTION_ROLE_ARN,
                    arn(region, account, name)
                ),
            ),
        ]),
        Some("AccessDenied;Sender".into()),
    )
}
