//! `argocd-ecr-updater-cli redrive`: what waits in a dead-letter queue, handled after its
//! cause was fixed, one of three ways:
//!
//! - by default, each parked event is handed to the deployed function, asynchronously, as
//!   EventBridge hands it: the function's own role, configuration, selector and dead-letter
//!   path decide, so an event that fails again is parked again by Lambda;
//! - `--local` runs the events on the laptop through the pipeline, as the function's role
//!   (or the operator's own credentials, `--operator-credentials`; see [`crate::run_as`]) and
//!   with the environment's configuration, for when the function cannot run them; the queue
//!   itself is read and emptied with the operator's credentials;
//! - `--discard` deletes them (a superseded push; a sweep shard, whose work the next sweep
//!   does again).
//!
//! Always a dry run unless `--apply`. A message is deleted only once its event was accepted
//! (invoke), succeeded (local) or when discarding, so nothing is lost when a step fails.
//! Both shapes a parked event has are read: the original event (a rule's dead-letter queue)
//! and a Lambda on-failure destination record around it.

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use crate::common::config_from_env;
use crate::common::{sdk_config, usage_error};
use crate::run_as::{RunAs, pipeline_sdk};
use argocd_ecr_updater::aws::aws_error::{Described, describe};
use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::pipeline::handler::Handler;
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater::telemetry::{LogFormat, init_tracing};

/// What `redrive` was asked.
pub struct RedriveRequest {
    pub queue_url: String,
    pub how: How,
    /// Act (invoke, write, delete). Without it nothing changes.
    pub apply: bool,
    /// Stop after this many messages.
    pub max: usize,
    /// How long each receive waits for a message (SQS long polling).
    pub wait_seconds: i32,
    pub log_format: LogFormat,
}

/// How the parked events are handled.
pub enum How {
    /// Invoke the deployed function (its name or ARN) with each event.
    Invoke { function: String },
    /// Run each event here, as `run_as`; `cluster` narrows to one cluster.
    Local {
        cluster: Option<String>,
        run_as: RunAs,
    },
    /// Delete each message.
    Discard,
}

/// Messages are received with this visibility: long enough to decide and write one event.
const VISIBILITY_SECONDS: i32 = 300;

/// Empty receives in a row while the queue's counts still show visible messages, before the
/// run stops and says so (the counts are approximate and lag).
const EMPTY_RECEIVES_BEFORE_GIVING_UP: usize = 3;

pub async fn run(request: RedriveRequest) -> ExitCode {
    let sdk = sdk_config(None).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let handler;
    let mode = match &request.how {
        How::Invoke { function } => {
            init_tracing("info", request.log_format);
            Mode::Invoke {
                lambda: &lambda,
                function,
            }
        }
        How::Local { cluster, run_as } => {
            let config = match config_from_env(cluster.as_deref(), Some(!request.apply)) {
                Ok(c) => c,
                Err(e) => return usage_error(e.to_string()),
            };
            init_tracing(&config.log_level, request.log_format);
            let pipeline = match pipeline_sdk(&sdk, run_as).await {
                Ok(pipeline) => pipeline,
                Err(e) => return usage_error(e.to_string()),
            };
            handler = match Handler::from_sdk(config, &pipeline, Arc::new(SystemClock)) {
                Ok(h) => h,
                Err(e) => return usage_error(e.to_string()),
            };
            Mode::Local { handler: &handler }
        }
        How::Discard => {
            init_tracing("info", request.log_format);
            Mode::Discard
        }
    };
    let redrive = Redrive {
        sqs: &sqs,
        queue_url: &request.queue_url,
        mode,
        apply: request.apply,
        wait_seconds: request.wait_seconds,
    };
    let (mut seen, mut failed) = (0, 0);
    // Messages kept (dry run, or failed again) are hidden while this run reads on, then
    // released at the end, so the next run sees them at once.
    let mut kept: Vec<String> = Vec::new();
    let mut empty_receives = 0;
    while seen < request.max {
        let batch = (request.max - seen).min(10) as i32;
        let messages = match redrive.receive(batch).await {
            Ok(messages) => messages,
            Err(described) => {
                eprintln!(
                    "argocd-ecr-updater: cannot read {}: {described}",
                    request.queue_url
                );
                return ExitCode::FAILURE;
            }
        };
        // An empty answer is not an empty queue: the queue's own counts decide.
        if messages.is_empty() {
            match redrive.visible().await {
                Ok(0) => break,
                Ok(visible) if empty_receives + 1 >= EMPTY_RECEIVES_BEFORE_GIVING_UP => {
                    println!(
                        "the queue still counts {visible} visible message(s) but {EMPTY_RECEIVES_BEFORE_GIVING_UP} receives in a row were empty; run redrive again in a minute"
                    );
                    break;
                }
                Ok(_) => {
                    empty_receives += 1;
                    continue;
                }
                Err(described) => {
                    eprintln!(
                        "argocd-ecr-updater: cannot read the counts of {}: {described}",
                        request.queue_url
                    );
                    return ExitCode::FAILURE;
                }
            }
        }
        empty_receives = 0;
        for message in messages {
            seen += 1;
            let id = message.message_id.clone().unwrap_or_default();
            let Outcome { line, keep, ok } = redrive.one(message).await;
            failed += usize::from(!ok);
            kept.extend(keep);
            println!("message {id}: {line}");
        }
    }
    redrive.release(kept).await;
    let verb = match redrive.mode {
        Mode::Invoke { .. } | Mode::Local { .. } => "redriven",
        Mode::Discard => "discarded",
    };
    println!("{seen} message(s) {verb}, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The handling chosen, with what it needs.
enum Mode<'a> {
    Invoke {
        lambda: &'a aws_sdk_lambda::Client,
        function: &'a str,
    },
    Local {
        handler: &'a Handler,
    },
    Discard,
}

/// One redrive run's queue and handling.
struct Redrive<'a> {
    sqs: &'a aws_sdk_sqs::Client,
    queue_url: &'a str,
    mode: Mode<'a>,
    apply: bool,
    wait_seconds: i32,
}

/// What became of one message.
struct Outcome {
    /// What is printed for it.
    line: String,
    /// Its receipt, when the message stays in the queue.
    keep: Option<String>,
    /// False when its event failed again, could not be handed on, or could not be deleted.
    ok: bool,
}

/// What a parked message holds.
#[derive(Debug, PartialEq)]
enum Parked {
    /// An event: as the rule parked it, or unwrapped from Lambda's on-failure record (with
    /// the error the function answered).
    Event {
        event: Value,
        error: Option<String>,
    },
    /// A sweep shard, which the function takes from its sweep queue only.
    Shard(Value),
    /// A rollout check (`confirm-rollout`), parked in the sweep dead-letter queue.
    Check(Value),
    NotJson(String),
}

impl Parked {
    fn read(body: &str) -> Self {
        let value: Value = match serde_json::from_str(body) {
            Ok(value) => value,
            Err(e) => return Self::NotJson(e.to_string()),
        };
        if value["action"] == "reconcile-shard" {
            return Self::Shard(value);
        }
        if value["action"] == argocd_ecr_updater::event::CONFIRM_ACTION {
            return Self::Check(value);
        }
        if value.get("requestContext").is_some() && value.get("requestPayload").is_some() {
            let response = &value["responsePayload"];
            let error = response["errorType"].as_str().map(|kind| {
                format!(
                    "{kind}: {}",
                    response["errorMessage"].as_str().unwrap_or_default()
                )
            });
            return Self::Event {
                event: value["requestPayload"].clone(),
                error,
            };
        }
        Self::Event {
            event: value,
            error: None,
        }
    }
}

/// Hands `payload` to the function asynchronously, as EventBridge does; `Err`: why it was
/// not accepted.
async fn invoke(
    lambda: &aws_sdk_lambda::Client,
    function: &str,
    payload: &Value,
) -> Result<(), String> {
    let invoked = lambda
        .invoke()
        .function_name(function)
        .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
        .payload(aws_sdk_lambda::primitives::Blob::new(payload.to_string()))
        .send()
        .await;
    match invoked {
        Ok(out) if out.status_code() == 202 => Ok(()),
        Ok(out) => Err(format!(
            "{function} answered {} instead of accepting it",
            out.status_code()
        )),
        Err(e) => Err(format!("invoking {function} failed: {}", describe(&e))),
    }
}

/// What discarding a rollout check gives up.
const CHECK_DISCARD_LOSES: &str = "whose outcome is then never reported (no RolloutConfirmed/Failed/TimedOut Event, no rollout metric, a pending commit status left pending, no failure for hold-on-failure); the next write of the Application is followed anew";

/// `rollout check 3 of argocd/web (barun-dev), write 2026-12-03T10:00:00Z`.
fn check_summary(check: &Value) -> String {
    format!(
        "rollout check {} of {}/{} ({}), write {}",
        check["check"].as_u64().unwrap_or(0),
        check["namespace"].as_str().unwrap_or("?"),
        check["name"].as_str().unwrap_or("?"),
        check["cluster"].as_str().unwrap_or("?"),
        check["write"].as_str().unwrap_or("?")
    )
}

/// `push barun-dev-ecr:20250825-153012`, or what else the event is.
fn describe_event(event: &Value) -> String {
    let detail = &event["detail"];
    let repository = detail["repository-name"].as_str().unwrap_or("?");
    let kind = match event["detail-type"].as_str() {
        Some("ECR Image Action") => "push",
        Some("ECR Image Scan") => "scan",
        Some("ECR Replication Action") => "replication",
        Some("Inspector2 Scan") => "inspector scan",
        Some("Scheduled Event") => return "a scheduled sweep".into(),
        Some(other) => return format!("an event of type `{other}`"),
        None => return "an event without a detail-type".into(),
    };
    let tag = detail["image-tag"]
        .as_str()
        .or(detail["image-tags"][0].as_str())
        .unwrap_or("");
    if tag.is_empty() {
        format!("{kind} {repository}")
    } else {
        format!("{kind} {repository}:{tag}")
    }
}

impl Redrive<'_> {
    /// Up to `batch` messages, hidden from other readers while they are handled.
    async fn receive(&self, batch: i32) -> Result<Vec<aws_sdk_sqs::types::Message>, Described> {
        self.sqs
            .receive_message()
            .queue_url(self.queue_url)
            .max_number_of_messages(batch)
            .visibility_timeout(VISIBILITY_SECONDS)
            // A long poll asks every SQS server; a short one samples some and may answer
            // empty while messages wait.
            .wait_time_seconds(self.wait_seconds)
            .send()
            .await
            .map(|output| output.messages.unwrap_or_default())
            .map_err(|e| describe(&e))
    }

    /// The queue's count of messages visible now (received ones, kept by this run, are not).
    async fn visible(&self) -> Result<u64, Described> {
        use aws_sdk_sqs::types::QueueAttributeName;
        let output = self
            .sqs
            .get_queue_attributes()
            .queue_url(self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        Ok(output
            .attributes
            .and_then(|a| {
                a.get(&QueueAttributeName::ApproximateNumberOfMessages)
                    .cloned()
            })
            .and_then(|count| count.parse().ok())
            .unwrap_or(0))
    }

    /// Handles one message; deletes it only once its event was handed on, succeeded, or is
    /// being discarded.
    async fn one(&self, message: aws_sdk_sqs::types::Message) -> Outcome {
        let receipt = message.receipt_handle.unwrap_or_default();
        let parked = Parked::read(message.body.as_deref().unwrap_or(""));
        let kept = |line: String, ok: bool| Outcome {
            line,
            keep: Some(receipt.clone()),
            ok,
        };
        let done = match (&self.mode, parked) {
            (Mode::Discard, parked) => {
                let what = match &parked {
                    Parked::Event { event, .. } => describe_event(event),
                    Parked::Shard(shard) => shard_summary(shard),
                    Parked::Check(check) => {
                        format!("{}, {CHECK_DISCARD_LOSES}", check_summary(check))
                    }
                    Parked::NotJson(_) => "a message that is not JSON".into(),
                };
                if !self.apply {
                    return kept(
                        format!("{what} -> would be deleted (add --apply to delete)"),
                        true,
                    );
                }
                what
            }
            (_, Parked::NotJson(why)) => {
                return kept(
                    format!("failed: the message body is not JSON ({why}) -> kept"),
                    false,
                );
            }
            (Mode::Invoke { .. }, Parked::Shard(shard)) => {
                return kept(
                    format!(
                        "{}: the function takes shards from its sweep queue only; the next sweep does this work again (discard it with --discard, or run it here with --local) -> kept",
                        shard_summary(&shard)
                    ),
                    false,
                );
            }
            (Mode::Invoke { lambda, function }, Parked::Event { event, error }) => {
                let what = describe_event(&event);
                let failed_with = error.map_or(String::new(), |e| format!(" (it failed with {e})"));
                if !self.apply {
                    return kept(
                        format!(
                            "{what}{failed_with} -> would invoke {function} (add --apply to invoke and delete)"
                        ),
                        true,
                    );
                }
                match invoke(lambda, function, &event).await {
                    Ok(()) => format!("{what}{failed_with} -> invoked {function} (accepted)"),
                    Err(why) => return kept(format!("{what} -> {why} -> kept"), false),
                }
            }
            (Mode::Invoke { lambda, function }, Parked::Check(check)) => {
                let what = check_summary(&check);
                if !self.apply {
                    return kept(
                        format!(
                            "{what} -> would invoke {function}, which judges it and sends the next check itself (add --apply to invoke and delete)"
                        ),
                        true,
                    );
                }
                match invoke(lambda, function, &check).await {
                    Ok(()) => format!("{what} -> invoked {function} (accepted)"),
                    Err(why) => return kept(format!("{what} -> {why} -> kept"), false),
                }
            }
            (Mode::Local { handler }, Parked::Event { event, .. })
            | (Mode::Local { handler }, Parked::Shard(event))
            | (Mode::Local { handler }, Parked::Check(event)) => {
                let report = match handler.handle(&event, None).await {
                    Ok(report) => report,
                    Err(e) => {
                        return kept(format!("failed ({}): {e} -> kept", e.error_type()), false);
                    }
                };
                if !self.apply {
                    return kept(
                        format!(
                            "{} -> dry run, kept (add --apply to write and delete)",
                            summary(&report)
                        ),
                        true,
                    );
                }
                summary(&report)
            }
        };
        let deleted = self
            .sqs
            .delete_message()
            .queue_url(self.queue_url)
            .receipt_handle(&receipt)
            .send()
            .await;
        match deleted {
            Ok(_) => Outcome {
                line: format!("{done} -> deleted"),
                keep: None,
                ok: true,
            },
            Err(e) => kept(format!("{done} -> not deleted: {}", describe(&e)), false),
        }
    }

    /// Makes the kept messages visible again at once.
    async fn release(&self, kept: Vec<String>) {
        for receipt in kept {
            let released = self
                .sqs
                .change_message_visibility()
                .queue_url(self.queue_url)
                .receipt_handle(receipt)
                .visibility_timeout(0)
                .send()
                .await;
            if let Err(e) = released {
                // It reappears after the visibility timeout anyway.
                tracing::warn!(error = %describe(&e), "cannot release a kept message");
            }
        }
    }
}

/// `sweep shard 2/5 of barun-dev (500 Applications)`.
fn shard_summary(shard: &Value) -> String {
    format!(
        "sweep shard {}/{} of {} ({} Applications)",
        shard["shard"],
        shard["shards"],
        shard["cluster"].as_str().unwrap_or("?"),
        shard["applications"].as_array().map_or(0, Vec::len)
    )
}

/// `push 6f0c…: 1 updated, 0 unchanged, 0 skipped`.
fn summary(report: &Report) -> String {
    let count = |action: Action| report.entries.iter().filter(|e| e.action == action).count();
    // A rollout check reports its rollout, not entries.
    if let Some(rollout) = report.rollouts.first() {
        return format!(
            "rollout of {}/{}: {} ({})",
            rollout.namespace, rollout.name, rollout.state, rollout.reason
        );
    }
    if let Some(skipped) = &report.skipped {
        return format!("{} {}: skipped: {skipped}", report.mode, report.event_id);
    }
    format!(
        "{} {}: {} updated, {} unchanged, {} skipped",
        report.mode,
        report.event_id,
        count(Action::Updated),
        count(Action::Unchanged),
        count(Action::Skipped)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_parked_message_is_read_as_the_event_the_shard_or_neither() {
        let push = json!({"detail-type": "ECR Image Action",
            "detail": {"repository-name": "r", "image-tag": "t"}});
        let record = json!({"version": "1.0", "requestContext": {"condition": "RetriesExhausted"},
            "requestPayload": push,
            "responsePayload": {"errorType": "Retryable.TargetsFailed", "errorMessage": "403"}});
        let shard = json!({"action": "reconcile-shard", "cluster": "c", "shard": 1, "shards": 2,
            "applications": [{"namespace": "argocd", "name": "a"}]});
        assert_eq!(
            Parked::read(&push.to_string()),
            Parked::Event {
                event: push.clone(),
                error: None
            }
        );
        assert_eq!(
            Parked::read(&record.to_string()),
            Parked::Event {
                event: push.clone(),
                error: Some("Retryable.TargetsFailed: 403".into())
            }
        );
        assert_eq!(
            Parked::read(&shard.to_string()),
            Parked::Shard(shard.clone())
        );
        assert!(matches!(Parked::read("not an event"), Parked::NotJson(_)));
        assert_eq!(describe_event(&push), "push r:t");
        assert_eq!(
            shard_summary(&shard),
            "sweep shard 1/2 of c (1 Applications)"
        );
    }

    #[test]
    fn an_event_is_described_by_its_kind_repository_and_tag() {
        let cases = [
            (
                json!({"detail-type": "ECR Image Scan", "detail": {"repository-name": "r", "image-tags": ["t"]}}),
                "scan r:t",
            ),
            (
                json!({"detail-type": "ECR Replication Action", "detail": {"repository-name": "r"}}),
                "replication r",
            ),
            (
                json!({"detail-type": "Scheduled Event"}),
                "a scheduled sweep",
            ),
            (
                json!({"detail-type": "Something"}),
                "an event of type `Something`",
            ),
            (json!({}), "an event without a detail-type"),
        ];
        for (event, described) in cases {
            assert_eq!(describe_event(&event), described, "{event}");
        }
    }
}
