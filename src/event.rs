//! Event intake: what an invocation asks for, and from whom it may come.
//!
//! EventBridge delivers ECR `Image Action` events; the scheduler delivers `Scheduled Event`s
//! for reconcile mode; a person can send `{"action": "reconcile"}`. Events that are not work
//! (deletes, failures, untagged platform manifests, scans, other sources) are skipped with a
//! reason. Events that cannot be real (missing fields, wrong types, impossible names) are
//! errors, so the invocation fails and the event ends in the dead-letter queue for a look.
//!
//! An event is a claim, not a fact: anyone allowed to invoke the function, or to send to a
//! queue it reads, can write one. So an event only says *what to look at*; what is written is
//! decided from what ECR and the API server say now (the tag and its digest, the scan's
//! findings, the Application). SQS records are taken only from the sweep queue the function
//! was configured with, and only as sweep shards ([`Intake`]).
//!
//! The envelopes are read here rather than through `aws_lambda_events`: its `SqsEvent` and
//! `EventBridgeEvent` (1.2, features `sqs` and `eventbridge` only) bring about 25 crates
//! (chrono, serde_with, schemars, jiff) into a binary that is over its size target, and they
//! deserialise a record whole, where the intake must bound what it reads and name the field
//! that is wrong; the batch response is two keys ([`crate::report::Report::batch_response`]).

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An ECR push of a tag: the only event that leads to a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushEvent {
    pub id: String,
    pub account: String,
    pub region: String,
    pub time: OffsetDateTime,
    pub repository: String,
    pub tag: String,
    pub digest: Option<String>,
    /// Set when the event said the image's scan completed (an `ECR Image Scan` or Inspector
    /// event). A scan event is decided as a push of each of its tags, for the images a scan
    /// gate holds back; the findings are read from ECR, never taken from the event.
    pub scan_completed: bool,
}

impl PushEvent {
    /// `<account>.dkr.ecr.<region>.amazonaws.com`, as image references name ECR.
    pub fn registry(&self) -> String {
        registry_host(&self.account, &self.region)
    }

    pub fn image(&self) -> String {
        format!("{}/{}", self.registry(), self.repository)
    }
}

use crate::partition::registry_host;

/// What an invocation is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    Push(PushEvent),
    /// A completed scan: one push-shaped decision per tag of the scanned image.
    Scan(Vec<PushEvent>),
    /// Re-evaluate every annotated Application against ECR's full tag lists.
    Reconcile {
        id: String,
    },
    /// Shards of a fanned-out sweep, from the sweep queue (or one redriven from the
    /// dead-letter queue): each is run on its own and reported done or failed on its own.
    Shards(Vec<ShardRecord>),
    /// Not work for us; the reason goes to the log and the report.
    Skip {
        id: String,
        reason: String,
    },
}

/// The `action` of a sweep shard's message body.
pub const SHARD_ACTION: &str = "reconcile-shard";

/// The `action` of a rollout check on the sweep queue (`rollout::message`).
pub const CONFIRM_ACTION: &str = "confirm-rollout";

/// One shard as it arrived: read by the sweep, which bounds it before it parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRecord {
    /// The SQS message id, which a partial batch response names; `None` for a shard sent
    /// directly (a redrive), whose failure fails the invocation instead.
    pub message_id: Option<String>,
    /// The message body, unread, or why the record is not taken as a shard (another
    /// queue's message): such a record fails alone, with that permanent reason, and the
    /// queue's redrive policy parks it. A body that is not a shard fails the same way when
    /// the sweep reads it.
    pub body: Result<String, String>,
}

/// What the function may take from SQS: records of its own sweep queue (`SWEEP_QUEUE_ARN`),
/// and from it only shards. Anyone with `sqs:SendMessage` on some queue mapped to the
/// function could otherwise have a forged ECR event decided.
#[derive(Debug, Clone, Copy, Default)]
pub struct Intake<'a> {
    pub sweep_queue_arn: Option<&'a str>,
}

/// An SQS batch (any record from `aws:sqs`): each record taken as a shard only if it came
/// from the sweep queue; the others are kept, refused, to fail alone. The body is not read
/// here: the sweep reads it once, bounded, and refuses what is not a shard
/// (`sweep::shard::parse`).
fn sqs_batch(event: &Value, intake: &Intake<'_>) -> Option<Result<Vec<ShardRecord>, EventError>> {
    let records = event.get("Records")?.as_array()?;
    if !records
        .iter()
        .any(|r| r.get("eventSource").and_then(Value::as_str) == Some("aws:sqs"))
    {
        return None;
    }
    let mut batch = Vec::with_capacity(records.len());
    for record in records {
        // Without its message id a record cannot be failed alone: the whole batch fails and
        // comes back, which loses nothing.
        let Some(message_id) = record.get("messageId").and_then(Value::as_str) else {
            return Some(Err(EventError::Malformed(
                "an SQS record without `messageId`: not what Lambda's event source mapping delivers".into(),
            )));
        };
        let body = record
            .get("body")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let source = record
            .get("eventSourceARN")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let taken = match intake.sweep_queue_arn {
            None => Err(format!(
                "Permanent.ForeignMessage: an SQS message from `{}`, but this function has no sweep queue (SWEEP_QUEUE_ARN is unset): it takes ECR events from EventBridge only, and parked events are redriven with `argocd-ecr-updater-cli redrive`",
                source.escape_debug()
            )),
            Some(own) if source != own => Err(format!(
                "Permanent.ForeignMessage: an SQS message from `{}`, not from the sweep queue `{own}`: the function takes only its own sweep shards from SQS (ECR events come from EventBridge, parked events are redriven with `argocd-ecr-updater-cli redrive`)",
                source.escape_debug()
            )),
            Some(_) => Ok(body.to_string()),
        };
        batch.push(ShardRecord {
            message_id: Some(message_id.to_string()),
            body: taken,
        });
    }
    Some(Ok(batch))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error(
        "malformed event: {0}. This is not an event EventBridge sends for ECR; it is kept in the dead-letter queue for inspection"
    )]
    Malformed(String),
}

/// What `event` asks for. SQS records are taken only as `intake` allows.
pub fn parse(event: &Value, intake: &Intake<'_>) -> Result<Invocation, EventError> {
    if let Some(batch) = sqs_batch(event, intake) {
        let records = batch?;
        if records.is_empty() {
            return Err(EventError::Malformed("an SQS batch with no record".into()));
        }
        return Ok(Invocation::Shards(records));
    }
    parse_event(unwrap_failed(event))
}

/// A failed event comes back in the shape it was parked in: a Lambda on-failure destination
/// record carries the original event as `requestPayload`, which is what is decided. (An SQS
/// message is never unwrapped here: SQS records are shards or nothing, see [`Intake`].)
fn unwrap_failed(event: &Value) -> &Value {
    match event.get("requestPayload") {
        Some(payload) if event.get("requestContext").is_some() => payload,
        _ => event,
    }
}

fn parse_event(event: &Value) -> Result<Invocation, EventError> {
    let malformed = |m: String| EventError::Malformed(m);
    let object = event
        .as_object()
        .ok_or_else(|| malformed(format!("expected a JSON object, got {}", kind(event))))?;
    let id = optional_str(object.get("id"), "id")?
        .unwrap_or_default()
        .to_string();

    match object.get("action").and_then(Value::as_str) {
        Some("reconcile") => return Ok(Invocation::Reconcile { id }),
        // A shard or a rollout check sent directly (`redrive` of one parked in the sweep
        // dead-letter queue): read as the sweep queue's records are, and as bounded.
        Some(SHARD_ACTION | CONFIRM_ACTION) => {
            return Ok(Invocation::Shards(vec![ShardRecord {
                message_id: None,
                body: Ok(event.to_string()),
            }]));
        }
        _ => {}
    }
    let source = optional_str(object.get("source"), "source")?.unwrap_or_default();
    let detail_type = optional_str(object.get("detail-type"), "detail-type")?.unwrap_or_default();
    if source == "aws.events" && detail_type == "Scheduled Event" {
        return Ok(Invocation::Reconcile { id });
    }
    let skip = |reason: String| {
        Ok(Invocation::Skip {
            id: id.clone(),
            reason,
        })
    };
    if (source == "aws.ecr" && detail_type == "ECR Image Scan")
        || (source == "aws.inspector2" && detail_type == "Inspector2 Scan")
    {
        return scan(object, id);
    }
    if source != "aws.ecr" {
        if source.is_empty() && object.get("detail").is_none() {
            return Err(malformed(
                "no `source`: expected an EventBridge event, or {\"action\": \"reconcile\"}".into(),
            ));
        }
        return skip(format!("source `{source}` is not aws.ecr"));
    }
    // A replicated image arrives in the destination region as `ECR Replication Action`
    // (with `source-account`/`source-region`); its tag is then pullable here, as a push.
    let replication = detail_type == "ECR Replication Action";
    if matches!(detail_type, "ECR Referrer Action" | "ECR Artifact Action") {
        return skip(format!(
            "`{detail_type}` (an artifact attached to a digest, or its storage class changed) rolls nothing out: a signing-profile gate asks ECR for the signing status instead"
        ));
    }
    if detail_type != "ECR Image Action" && !replication {
        return skip(format!(
            "detail-type `{detail_type}` is not `ECR Image Action` or `ECR Replication Action`"
        ));
    }
    image_action(object, id, replication)
}

/// An `ECR Image Action` (or a replication, which is one in the destination region): a
/// successful push of a tag is a [`PushEvent`]; anything else is skipped with its reason.
fn image_action(
    object: &serde_json::Map<String, Value>,
    id: String,
    replication: bool,
) -> Result<Invocation, EventError> {
    let malformed = |m: String| EventError::Malformed(m);
    let skip = |reason: String| {
        Ok(Invocation::Skip {
            id: id.clone(),
            reason,
        })
    };
    let detail = object
        .get("detail")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("`detail` is missing or not an object".into()))?;
    let field = |name: &str| optional_str(detail.get(name), &format!("detail.{name}"));

    let action = field("action-type")?.unwrap_or_default();
    let result = field("result")?.unwrap_or_default();
    let repository = field("repository-name")?
        .ok_or_else(|| malformed("`detail.repository-name` is missing".into()))?;
    if !is_repository_name(repository) {
        return Err(malformed(format!(
            "`detail.repository-name` `{}` is not an ECR repository name",
            repository.escape_debug()
        )));
    }
    let tag = field("image-tag")?.filter(|t| !t.is_empty());
    let digest = field("image-digest")?.map(str::to_string);

    if action == "UPDATE_STORAGE_CLASS" {
        let class = field("target-storage-class")?.unwrap_or_default();
        return skip(format!(
            "an image of `{repository}` moved to the {class} storage class: nothing to roll out (an archived image is never a candidate; a restored one is again, at the next push or sweep)"
        ));
    }
    if action != "PUSH" && !replication {
        return skip(format!("action-type `{action}` is not PUSH"));
    }
    if result != "SUCCESS" {
        return skip(format!(
            "push of `{repository}` did not succeed (result `{result}`)"
        ));
    }
    let Some(tag) = tag else {
        return skip(format!(
            "push to `{repository}` carries no image-tag (an untagged platform manifest of a multi-arch push); the tagged index has its own event"
        ));
    };
    if !is_tag(tag) {
        return Err(malformed(format!(
            "`detail.image-tag` `{}` is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})",
            tag.escape_debug()
        )));
    }
    // The event's digest is informational (the digest strategy asks ECR), so any
    // `sha256:<hex>` passes; AWS's own sample event carries a shortened one.
    if let Some(d) = &digest
        && !d.strip_prefix("sha256:").is_some_and(|hex| {
            !hex.is_empty() && hex.len() <= 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
        })
    {
        return Err(malformed(format!(
            "`detail.image-digest` `{}` is not a sha256 digest",
            d.escape_debug()
        )));
    }
    let (account, region, time) = envelope(object)?;
    Ok(Invocation::Push(PushEvent {
        id,
        account,
        region,
        time,
        repository: repository.to_string(),
        tag: tag.to_string(),
        digest,
        scan_completed: false,
    }))
}

/// The account, region and time every event carries.
fn envelope(
    object: &serde_json::Map<String, Value>,
) -> Result<(String, String, OffsetDateTime), EventError> {
    let malformed = |m: String| EventError::Malformed(m);
    let account = optional_str(object.get("account"), "account")?
        .filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| malformed("`account` is missing or not 12 digits".into()))?;
    let region = optional_str(object.get("region"), "region")?
        .filter(|r| is_region(r))
        .ok_or_else(|| malformed("`region` is missing or not an AWS region".into()))?;
    let time = optional_str(object.get("time"), "time")?
        .ok_or_else(|| malformed("`time` is missing".into()))
        .and_then(|t| {
            OffsetDateTime::parse(t, &Rfc3339)
                .map_err(|e| malformed(format!("`time` `{t}` is not RFC 3339: {e}")))
        })?;
    Ok((account.to_string(), region.to_string(), time))
}

/// A completed scan, from ECR basic scanning (`ECR Image Scan`, `scan-status: COMPLETE`) or
/// Amazon Inspector enhanced scanning (`Inspector2 Scan`, `INITIAL_SCAN_COMPLETE`, whose
/// `repository-name` is the repository's ARN).
fn scan(object: &serde_json::Map<String, Value>, id: String) -> Result<Invocation, EventError> {
    let malformed = |m: String| EventError::Malformed(m);
    let detail = object
        .get("detail")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("`detail` is missing or not an object".into()))?;
    let field = |name: &str| optional_str(detail.get(name), &format!("detail.{name}"));
    let status = field("scan-status")?.unwrap_or_default();
    if !matches!(status, "COMPLETE" | "INITIAL_SCAN_COMPLETE") {
        return Ok(Invocation::Skip {
            id,
            reason: format!(
                "scan-status `{status}`: only a completed scan opens a scan gate (reconcile re-checks the findings of what it would roll out)"
            ),
        });
    }
    let named = field("repository-name")?
        .ok_or_else(|| malformed("`detail.repository-name` is missing".into()))?;
    let repository = named.rsplit_once(":repository/").map_or(named, |(_, r)| r);
    if !is_repository_name(repository) {
        return Err(malformed(format!(
            "`detail.repository-name` `{}` is not an ECR repository name",
            repository.escape_debug()
        )));
    }
    let digest = field("image-digest")?
        .filter(|d| d.starts_with("sha256:"))
        .ok_or_else(|| malformed("`detail.image-digest` is missing or not sha256:<hex>".into()))?;
    let tags: Vec<&str> = match detail.get("image-tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tags)) => tags.iter().filter_map(Value::as_str).collect(),
        Some(other) => {
            return Err(malformed(format!(
                "`detail.image-tags` must be an array, got {}",
                kind(other)
            )));
        }
    };
    if let Some(bad) = tags.iter().find(|t| !is_tag(t)) {
        return Err(malformed(format!(
            "`detail.image-tags` item `{}` is not a valid image tag",
            bad.escape_debug()
        )));
    }
    if tags.is_empty() {
        return Ok(Invocation::Skip {
            id,
            reason: format!("the scanned image {digest} of `{repository}` has no tag to roll out"),
        });
    }
    let (account, region, time) = envelope(object)?;
    Ok(Invocation::Scan(
        tags.into_iter()
            .map(|tag| PushEvent {
                id: id.clone(),
                account: account.clone(),
                region: region.clone(),
                time,
                repository: repository.to_string(),
                tag: tag.to_string(),
                digest: Some(digest.to_string()),
                scan_completed: true,
            })
            .collect(),
    ))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn optional_str<'a>(value: Option<&'a Value>, name: &str) -> Result<Option<&'a str>, EventError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(EventError::Malformed(format!(
            "`{name}` must be a string, got {}",
            kind(other)
        ))),
    }
}

/// Docker's tag grammar, which ECR enforces.
pub fn is_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// ECR's repository name grammar: lowercase path components separated by `/`.
fn is_repository_name(name: &str) -> bool {
    name.len() <= 256
        && !name.is_empty()
        && name.split('/').all(|component| {
            !component.is_empty()
                && component.split(['.', '_', '-']).all(|part| {
                    !part.is_empty()
                        && part
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                })
        })
}

fn is_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && parts
            .last()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A function without a sweep queue: EventBridge events and direct invocations only.
    const NO_QUEUE: Intake<'static> = Intake {
        sweep_queue_arn: None,
    };
    const SWEEP_QUEUE: &str = "arn:aws:sqs:ap-northeast-2:768157413559:stack-SweepQueue-1";
    const WITH_QUEUE: Intake<'static> = Intake {
        sweep_queue_arn: Some(SWEEP_QUEUE),
    };

    fn push(detail: Value) -> Value {
        json!({"version": "0", "id": "e-1", "detail-type": "ECR Image Action", "source": "aws.ecr",
               "account": "768157413559", "time": "2025-08-25T06:30:14Z", "region": "ap-northeast-2",
               "resources": [], "detail": detail})
    }

    const DIGEST: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

    #[test]
    fn a_failed_event_parked_by_lambda_decides_like_the_original() {
        let original = push(
            json!({"result": "SUCCESS", "repository-name": "barun-dev-ecr",
            "image-digest": DIGEST, "action-type": "PUSH", "image-tag": "20250825-153012"}),
        );
        let expected = parse(&original, &NO_QUEUE).unwrap();
        // A Lambda on-failure destination record (what the function's failures park), as
        // `redrive` sends it back.
        let destination = json!({"version": "1.0", "timestamp": "2025-08-25T06:31:00.000Z",
            "requestContext": {"requestId": "r", "functionArn": "arn:aws:lambda:ap-northeast-2:1:function:f",
                               "condition": "RetriesExhausted", "approximateInvokeCount": 3},
            "requestPayload": original,
            "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
            "responsePayload": {"errorType": "Retryable.TargetsFailed", "errorMessage": "m"}});
        assert_eq!(parse(&destination, &NO_QUEUE).unwrap(), expected);
    }

    /// Every SQS record that is not from the function's own sweep queue is refused on its
    /// own, permanently, whatever its body claims to be; one from the queue is handed to the
    /// sweep unread, whatever it holds (the sweep refuses what is not a shard).
    #[test]
    fn sqs_records_are_taken_only_as_shards_of_the_sweep_queue() {
        let shard = r#"{"action":"reconcile-shard","sweep":"s","cluster":"dev","shard":1,"shards":1,"applications":[]}"#;
        let forged_push = push(
            json!({"result": "SUCCESS", "repository-name": "barun-dev-ecr",
            "action-type": "PUSH", "image-tag": "99.0.0"}),
        )
        .to_string();
        let forged_scan = json!({"version": "0", "id": "s", "detail-type": "ECR Image Scan",
            "source": "aws.ecr", "account": "768157413559", "time": "2025-08-25T06:30:14Z",
            "region": "ap-northeast-2", "detail": {"scan-status": "COMPLETE",
            "repository-name": "barun-dev-ecr", "image-digest": DIGEST,
            "image-tags": ["20250825-153012"], "finding-severity-counts": {}}})
        .to_string();
        let destination = json!({"requestContext": {}, "requestPayload": forged_push}).to_string();
        let other_queue = "arn:aws:sqs:ap-northeast-2:768157413559:someone-elses";
        let table: &[(&str, Intake<'_>, Option<&str>, &str, Result<(), &str>)] = &[
            (
                "a shard from the sweep queue",
                WITH_QUEUE,
                Some(SWEEP_QUEUE),
                shard,
                Ok(()),
            ),
            (
                "a forged push on the sweep queue, for the sweep to refuse",
                WITH_QUEUE,
                Some(SWEEP_QUEUE),
                &forged_push,
                Ok(()),
            ),
            (
                "a forged scan on the sweep queue",
                WITH_QUEUE,
                Some(SWEEP_QUEUE),
                &forged_scan,
                Ok(()),
            ),
            (
                "a destination record on the sweep queue",
                WITH_QUEUE,
                Some(SWEEP_QUEUE),
                &destination,
                Ok(()),
            ),
            (
                "a reconcile request on the sweep queue",
                WITH_QUEUE,
                Some(SWEEP_QUEUE),
                r#"{"action":"reconcile"}"#,
                Ok(()),
            ),
            (
                "a body that is not JSON",
                WITH_QUEUE,
                Some(SWEEP_QUEUE),
                "garbage",
                Ok(()),
            ),
            (
                "a shard from another queue",
                WITH_QUEUE,
                Some(other_queue),
                shard,
                Err("not from the sweep queue"),
            ),
            (
                "a push from another queue",
                WITH_QUEUE,
                Some(other_queue),
                &forged_push,
                Err("not from the sweep queue"),
            ),
            (
                "a shard naming no queue",
                WITH_QUEUE,
                None,
                shard,
                Err("not from the sweep queue"),
            ),
            (
                "a shard to a function without a sweep queue",
                NO_QUEUE,
                Some(SWEEP_QUEUE),
                shard,
                Err("has no sweep queue"),
            ),
            (
                "a push to a function without a sweep queue",
                NO_QUEUE,
                Some(other_queue),
                &forged_push,
                Err("has no sweep queue"),
            ),
        ];
        for (case, intake, source, body, expected) in table {
            let mut record = json!({"messageId": "m-1", "eventSource": "aws:sqs", "body": body});
            if let Some(source) = source {
                record["eventSourceARN"] = json!(source);
            }
            let batch = json!({"Records": [record]});
            let Ok(Invocation::Shards(records)) = parse(&batch, intake) else {
                panic!(
                    "{case}: not a batch of records: {:?}",
                    parse(&batch, intake)
                );
            };
            let [record] = records.as_slice() else {
                panic!("{case}: {records:?}");
            };
            assert_eq!(record.message_id.as_deref(), Some("m-1"), "{case}");
            match (expected, &record.body) {
                (Ok(()), Ok(taken)) => assert_eq!(taken, body, "{case}"),
                (Err(words), Err(reason)) => assert!(reason.contains(words), "{case}: {reason}"),
                (expected, got) => panic!("{case}: expected {expected:?}, got {got:?}"),
            }
        }
        // A record without its message id cannot fail alone: the batch fails whole.
        let anonymous = json!({"Records": [{"eventSource": "aws:sqs", "eventSourceARN": SWEEP_QUEUE, "body": shard}]});
        assert!(parse(&anonymous, &WITH_QUEUE).is_err());
        assert!(parse(&json!({"Records": []}), &WITH_QUEUE).is_err());
    }

    #[test]
    fn a_successful_tagged_push_is_work_with_the_image_built_from_the_event() {
        let event = push(
            json!({"result": "SUCCESS", "repository-name": "barun-dev-ecr",
            "image-digest": DIGEST, "action-type": "PUSH", "image-tag": "20250825-153012"}),
        );
        let Invocation::Push(p) = parse(&event, &NO_QUEUE).unwrap() else {
            panic!("not a push")
        };
        assert_eq!(
            p.image(),
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr"
        );
        assert_eq!(p.tag, "20250825-153012");
        assert_eq!(p.digest.as_deref(), Some(DIGEST));
        assert_eq!(p.time, time::macros::datetime!(2025-08-25 06:30:14 UTC));
    }

    #[test]
    fn the_aws_documented_events_are_classified() {
        let push_doc: Value = serde_json::from_str(include_str!(
            "../tests/fixtures/aws-doc-image-action-push.json"
        ))
        .unwrap();
        let Invocation::Push(p) = parse(&push_doc, &NO_QUEUE).unwrap() else {
            panic!("push sample is work")
        };
        assert_eq!(
            (p.repository.as_str(), p.tag.as_str()),
            ("my-repository-name", "latest")
        );
        let delete: Value = serde_json::from_str(include_str!(
            "../tests/fixtures/aws-doc-image-action-delete.json"
        ))
        .unwrap();
        assert!(
            matches!(parse(&delete, &NO_QUEUE), Ok(Invocation::Skip { reason, .. }) if reason.contains("DELETE"))
        );
        let scan: Value =
            serde_json::from_str(include_str!("../tests/fixtures/aws-doc-image-scan.json"))
                .unwrap();
        // AWS's own sample scan has no tag: nothing to roll out.
        assert!(
            matches!(parse(&scan, &NO_QUEUE), Ok(Invocation::Skip { reason, .. }) if reason.contains("no tag to roll out"))
        );
    }

    #[test]
    fn a_completed_scan_is_a_decision_per_tag_whose_counts_are_not_read() {
        let mut scan: Value = serde_json::from_str(include_str!("../events/scan.json")).unwrap();
        let Ok(Invocation::Scan(pushes)) = parse(&scan, &NO_QUEUE) else {
            panic!("a completed scan is work")
        };
        assert_eq!(pushes.len(), 1);
        assert_eq!(pushes[0].tag, "20250825-153012");
        assert!(pushes[0].scan_completed);
        scan["detail"]["scan-status"] = json!("FAILED");
        assert!(
            matches!(parse(&scan, &NO_QUEUE), Ok(Invocation::Skip { reason, .. }) if reason.contains("FAILED"))
        );
        // The findings are ECR's to say: whatever the event counts is not even read.
        scan["detail"]["scan-status"] = json!("COMPLETE");
        scan["detail"]["finding-severity-counts"]["HIGH"] = json!("many");
        assert!(matches!(parse(&scan, &NO_QUEUE), Ok(Invocation::Scan(_))));
    }

    #[test]
    fn a_completed_replication_is_a_push_in_the_destination_region() {
        let replicated = json!({"version": "0", "id": "r-1", "detail-type": "ECR Replication Action",
            "source": "aws.ecr", "account": "768157413559", "time": "2025-08-25T06:31:00Z",
            "region": "ap-northeast-2",
            "detail": {"result": "SUCCESS", "repository-name": "barun-dev-ecr",
                "image-digest": "sha256:3333333333333333333333333333333333333333333333333333333333333333",
                "action-type": "REPLICATE", "image-tag": "20250825-153012",
                "source-account": "111122223333", "source-region": "us-east-1"}});
        let Ok(Invocation::Push(push)) = parse(&replicated, &NO_QUEUE) else {
            panic!("a completed replication is work")
        };
        assert_eq!(
            (push.region.as_str(), push.account.as_str()),
            ("ap-northeast-2", "768157413559")
        );
        let mut failed = replicated.clone();
        failed["detail"]["result"] = json!("FAILURE");
        assert!(matches!(
            parse(&failed, &NO_QUEUE),
            Ok(Invocation::Skip { .. })
        ));
    }

    #[test]
    fn an_inspector_scan_names_the_repository_by_arn() {
        let inspector = json!({"version": "0", "id": "i-1", "detail-type": "Inspector2 Scan",
            "source": "aws.inspector2", "account": "768157413559", "time": "2025-08-25T06:35:00Z",
            "region": "ap-northeast-2",
            "detail": {"scan-status": "INITIAL_SCAN_COMPLETE",
                "repository-name": "arn:aws:ecr:ap-northeast-2:768157413559:repository/barun-dev-ecr",
                "image-digest": "sha256:3333333333333333333333333333333333333333333333333333333333333333",
                "image-tags": ["20250825-153012", "latest"],
                "finding-severity-counts": {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 0, "TOTAL": 1}}});
        let Ok(Invocation::Scan(pushes)) = parse(&inspector, &NO_QUEUE) else {
            panic!("an Inspector scan is work")
        };
        assert_eq!(pushes.len(), 2);
        assert_eq!(pushes[0].repository, "barun-dev-ecr");
        assert!(pushes[0].scan_completed);
    }

    #[test]
    fn aws_samples_of_storage_class_changes_and_referrers_are_skipped_saying_why() {
        let samples = [
            (
                include_str!("../events/aws-sample-image-archive.json"),
                "moved to the ARCHIVE storage class",
            ),
            (
                include_str!("../events/aws-sample-image-restore.json"),
                "moved to the STANDARD storage class",
            ),
            (
                include_str!("../events/aws-sample-referrer-restore.json"),
                "`ECR Referrer Action` (an artifact attached to a digest",
            ),
        ];
        for (text, says) in samples {
            let event: Value = serde_json::from_str(text).unwrap();
            match parse(&event, &NO_QUEUE) {
                Ok(Invocation::Skip { reason, .. }) => assert!(reason.contains(says), "{reason}"),
                other => panic!("{says}: {other:?}"),
            }
        }
        let artifact = json!({"version": "0", "id": "a", "detail-type": "ECR Artifact Action", "source": "aws.ecr",
            "detail": {"repository-name": "r", "action-type": "PUSH", "result": "SUCCESS"}});
        assert!(
            matches!(parse(&artifact, &NO_QUEUE), Ok(Invocation::Skip { reason, .. }) if reason.contains("rolls nothing out"))
        );
    }

    #[test]
    fn events_that_are_not_work_are_skipped_with_a_reason() {
        let table: &[(Value, &str)] = &[
            (
                push(
                    json!({"result": "SUCCESS", "repository-name": "r", "action-type": "DELETE", "image-tag": "1"}),
                ),
                "DELETE",
            ),
            (
                push(
                    json!({"result": "FAILURE", "repository-name": "r", "action-type": "PUSH", "image-tag": "1"}),
                ),
                "FAILURE",
            ),
            (
                push(
                    json!({"result": "SUCCESS", "repository-name": "r", "action-type": "PUSH", "image-digest": DIGEST}),
                ),
                "untagged platform manifest",
            ),
            (
                push(
                    json!({"result": "SUCCESS", "repository-name": "r", "action-type": "PUSH", "image-tag": ""}),
                ),
                "no image-tag",
            ),
            (
                json!({"source": "aws.s3", "detail-type": "Object Created", "detail": {}}),
                "not aws.ecr",
            ),
        ];
        for (event, reason) in table {
            match parse(event, &NO_QUEUE) {
                Ok(Invocation::Skip { reason: r, .. }) => assert!(r.contains(reason), "{r}"),
                other => panic!("{event}: {other:?}"),
            }
        }
    }

    #[test]
    fn scheduled_and_manual_reconcile_requests_are_recognised() {
        let scheduled = json!({"id": "s-1", "source": "aws.events", "detail-type": "Scheduled Event", "detail": {}});
        assert_eq!(
            parse(&scheduled, &NO_QUEUE),
            Ok(Invocation::Reconcile { id: "s-1".into() })
        );
        assert_eq!(
            parse(&json!({"action": "reconcile"}), &NO_QUEUE),
            Ok(Invocation::Reconcile { id: String::new() })
        );
    }

    #[test]
    fn a_sweep_queue_batch_is_shards_each_with_its_message_id() {
        let shard = r#"{"action":"reconcile-shard","sweep":"s","cluster":"dev","shard":1,"shards":1,"applications":[]}"#;
        let batch = json!({"Records": [
            {"messageId": "m-1", "eventSource": "aws:sqs", "eventSourceARN": SWEEP_QUEUE, "body": shard},
            {"messageId": "m-2", "eventSource": "aws:sqs", "eventSourceARN": SWEEP_QUEUE, "body": "garbage"},
        ]});
        let Ok(Invocation::Shards(records)) = parse(&batch, &WITH_QUEUE) else {
            panic!("not shards: {:?}", parse(&batch, &WITH_QUEUE));
        };
        let ids: Vec<_> = records.iter().map(|r| r.message_id.as_deref()).collect();
        assert_eq!(ids, [Some("m-1"), Some("m-2")]);
        assert_eq!(
            records[1].body.as_deref(),
            Ok("garbage"),
            "handed on unread: the sweep refuses it on its own"
        );
        // Redriven from the dead-letter queue, a shard comes as the payload itself.
        let direct: Value = serde_json::from_str(shard).unwrap();
        let Ok(Invocation::Shards(records)) = parse(&direct, &NO_QUEUE) else {
            panic!("not a shard");
        };
        assert_eq!(records[0].message_id, None);
    }

    #[test]
    fn malformed_events_are_errors_that_say_what_is_wrong() {
        let ok = || json!({"result": "SUCCESS", "repository-name": "r", "action-type": "PUSH", "image-tag": "1"});
        let mut no_repo = push(ok());
        no_repo["detail"]
            .as_object_mut()
            .unwrap()
            .remove("repository-name");
        let mut wrong_type = push(ok());
        wrong_type["detail"]["image-tag"] = json!(42);
        let mut hostile_tag = push(ok());
        hostile_tag["detail"]["image-tag"] = json!("1.0;rm -rf /\u{1b}[2J");
        let mut long_tag = push(ok());
        long_tag["detail"]["image-tag"] = json!("a".repeat(129));
        let mut bad_repo = push(ok());
        bad_repo["detail"]["repository-name"] = json!("../Etc/passwd");
        let mut bad_account = push(ok());
        bad_account["account"] = json!("12345");
        let mut bad_digest = push(ok());
        bad_digest["detail"]["image-digest"] = json!("md5:abc");
        let mut bad_time = push(ok());
        bad_time["time"] = json!("yesterday");
        let mut detail_string = push(ok());
        detail_string["detail"] = json!("PUSH");
        let table: Vec<(Value, &str)> = vec![
            (json!([1, 2]), "expected a JSON object, got an array"),
            (json!("push"), "got a string"),
            (json!({}), "no `source`"),
            (no_repo, "repository-name` is missing"),
            (
                wrong_type,
                "`detail.image-tag` must be a string, got a number",
            ),
            (hostile_tag, "not a valid image tag"),
            (long_tag, "not a valid image tag"),
            (bad_repo, "not an ECR repository name"),
            (bad_account, "12 digits"),
            (bad_time, "RFC 3339"),
            (bad_digest, "not a sha256 digest"),
            (detail_string, "`detail` is missing or not an object"),
        ];
        for (event, expected) in table {
            let EventError::Malformed(message) = parse(&event, &NO_QUEUE).unwrap_err();
            assert!(message.contains(expected), "{event}: {message}");
        }
    }

    #[test]
    fn tags_follow_the_docker_grammar() {
        for good in [
            "1.0",
            "v1.2.3-rc.1",
            "20250825-153012",
            "_x",
            &"a".repeat(128),
        ] {
            assert!(is_tag(good), "{good}");
        }
        for bad in ["", "-x", ".x", "a b", "a/b", "é", "a:b", &"a".repeat(129)] {
            assert!(!is_tag(bad), "{bad}");
        }
    }
}
