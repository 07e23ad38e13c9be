//! `argocd-ecr-updater-cli redrive`: runs the events parked in the dead-letter queue through
//! the pipeline again, after the cause was fixed. A dry run unless `--apply`; a message is
//! deleted only after its event succeeded, so nothing is lost when a redrive fails again.
//! Both shapes a parked event has are understood: the original event (the rule's
//! dead-letter queue) and a Lambda on-failure destination record.

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use crate::common::config_from_env;
use crate::common::{sdk_config, usage_error};
use argocd_ecr_updater::eks_auth::SystemClock;
use argocd_ecr_updater::handler::Handler;
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater::telemetry::{LogFormat, init_tracing};

/// What `redrive` was asked.
pub struct RedriveRequest {
    pub queue_url: String,
    /// Write, and delete the messages whose events succeeded. Without it nothing changes.
    pub apply: bool,
    /// Stop after this many messages.
    pub max: usize,
    /// One cluster only (`CLUSTER_NAME`, or one of `CLUSTERS`).
    pub cluster: Option<String>,
    /// How long each receive waits for a message (SQS long polling).
    pub wait_seconds: i32,
    pub log_format: LogFormat,
}

/// Messages are received with this visibility: long enough to decide and write one event.
const VISIBILITY_SECONDS: i32 = 300;

/// Empty receives in a row while the queue's counts still show visible messages, before the
/// run stops and says so (the counts are approximate and lag).
const EMPTY_RECEIVES_BEFORE_GIVING_UP: usize = 3;

pub async fn run(request: RedriveRequest) -> ExitCode {
    let config = config_from_env(request.cluster.as_deref(), Some(!request.apply));
    let config = match config {
        Ok(c) => c,
        Err(e) => return usage_error(e.to_string()),
    };
    init_tracing(&config.log_level, request.log_format);
    let sdk = sdk_config(None).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let handler = match Handler::from_sdk(config, &sdk, Arc::new(SystemClock)) {
        Ok(h) => h,
        Err(e) => return usage_error(e.to_string()),
    };
    let redrive = Redrive {
        sqs: &sqs,
        queue_url: &request.queue_url,
        handler: &handler,
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
    println!("{seen} message(s) redriven, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// One redrive run's queue and pipeline.
struct Redrive<'a> {
    sqs: &'a aws_sdk_sqs::Client,
    queue_url: &'a str,
    handler: &'a Handler,
    apply: bool,
    wait_seconds: i32,
}

/// What became of one message.
struct Outcome {
    /// What is printed for it.
    line: String,
    /// Its receipt, when the message stays in the queue.
    keep: Option<String>,
    /// False when its event failed again, or it could not be deleted.
    ok: bool,
}

impl Redrive<'_> {
    /// Up to `batch` messages, hidden from other readers while they are run.
    async fn receive(
        &self,
        batch: i32,
    ) -> Result<Vec<aws_sdk_sqs::types::Message>, argocd_ecr_updater::aws_error::Described> {
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
            .map_err(|e| argocd_ecr_updater::aws_error::describe(&e))
    }

    /// The queue's count of messages visible now (received ones, kept by this run, are not).
    async fn visible(&self) -> Result<u64, argocd_ecr_updater::aws_error::Described> {
        use aws_sdk_sqs::types::QueueAttributeName;
        let output = self
            .sqs
            .get_queue_attributes()
            .queue_url(self.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .map_err(|e| argocd_ecr_updater::aws_error::describe(&e))?;
        Ok(output
            .attributes
            .and_then(|a| {
                a.get(&QueueAttributeName::ApproximateNumberOfMessages)
                    .cloned()
            })
            .and_then(|count| count.parse().ok())
            .unwrap_or(0))
    }

    /// Runs one message's event; deletes the message only once the event succeeded.
    async fn one(&self, message: aws_sdk_sqs::types::Message) -> Outcome {
        let receipt = message.receipt_handle.unwrap_or_default();
        let outcome = match serde_json::from_str::<Value>(message.body.as_deref().unwrap_or("")) {
            Ok(event) => self
                .handler
                .handle(&event, None)
                .await
                .map_err(|e| format!("failed ({}): {e}", e.error_type())),
            Err(e) => Err(format!("failed: the message body is not JSON ({e})")),
        };
        let report = match outcome {
            Ok(report) => report,
            Err(reason) => {
                return Outcome {
                    line: format!("{reason} -> kept"),
                    keep: Some(receipt),
                    ok: false,
                };
            }
        };
        if !self.apply {
            return Outcome {
                line: format!(
                    "{} -> dry run, kept (add --apply to write and delete)",
                    summary(&report)
                ),
                keep: Some(receipt),
                ok: true,
            };
        }
        let deleted = self
            .sqs
            .delete_message()
            .queue_url(self.queue_url)
            .receipt_handle(&receipt)
            .send()
            .await;
        match deleted {
            Ok(_) => Outcome {
                line: format!("{} -> deleted", summary(&report)),
                keep: None,
                ok: true,
            },
            Err(e) => {
                let described = argocd_ecr_updater::aws_error::describe(&e);
                Outcome {
                    line: format!("{} -> not deleted: {described}", summary(&report)),
                    keep: Some(receipt),
                    ok: false,
                }
            }
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
                let described = argocd_ecr_updater::aws_error::describe(&e);
                tracing::warn!(error = %described, "cannot release a kept message");
            }
        }
    }
}

/// `push 6f0c…: 1 updated, 0 unchanged, 0 skipped`.
fn summary(report: &Report) -> String {
    let count = |action: Action| report.entries.iter().filter(|e| e.action == action).count();
    format!(
        "{} {}: {} updated, {} unchanged, {} skipped",
        report.mode,
        report.event_id,
        count(Action::Updated),
        count(Action::Unchanged),
        count(Action::Skipped)
    )
}
