//! Lambda's SQS event source mapping: polls a queue of the AWS stand-in, hands batches to
//! the function through the Runtime API stand-in (several at once, up to the mapping's
//! maximum concurrency, as Lambda scales its pollers), reads the partial batch response, and
//! deletes what succeeded. What failed, or a batch whose invocation errored, becomes visible
//! again after the visibility timeout, and the queue's redrive policy parks it after its
//! receive limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::aws::{AwsState, Received};
use crate::runtime::{Outcome, RuntimeApi};

/// The mapping's settings, as `AWS::Lambda::EventSourceMapping` has them.
#[derive(Debug, Clone)]
pub struct Mapping {
    pub queue_url: String,
    pub batch_size: usize,
    /// `ScalingConfig.MaximumConcurrency`: invocations in flight at once.
    pub maximum_concurrency: usize,
    /// The queue's visibility timeout: when a failed message is delivered again.
    pub visibility: Duration,
    /// What the function is told its remaining time is.
    pub function_timeout: Duration,
}

/// One invocation the mapping made.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub message_ids: Vec<String>,
    /// How often each message had been received, this time included.
    pub receive_counts: Vec<u32>,
    pub outcome: Result<Outcome, String>,
    pub started: Instant,
    pub took: Duration,
}

impl Delivery {
    /// The message ids the function reported failed (all of them when it errored).
    pub fn failed(&self) -> Vec<String> {
        match &self.outcome {
            Ok(Outcome::Response(response)) => response["batchItemFailures"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| i["itemIdentifier"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            _ => self.message_ids.clone(),
        }
    }
}

/// The SQS event Lambda hands the function for a batch.
pub fn sqs_event(queue_arn: &str, region: &str, batch: &[Received]) -> Value {
    let records: Vec<Value> = batch
        .iter()
        .map(|m| {
            json!({
                "messageId": m.id,
                "receiptHandle": m.receipt,
                "body": m.body,
                "attributes": {
                    "ApproximateReceiveCount": m.receives.to_string(),
                    "SentTimestamp": m.sent_ms.to_string(),
                    "SenderId": "AROAEXAMPLE",
                    "ApproximateFirstReceiveTimestamp": "0"
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region
            })
        })
        .collect();
    json!({ "Records": records })
}

/// Runs the mapping until the queue holds nothing visible or in flight and no invocation is
/// running, or until `give_up` passes. Returns every invocation it made, in start order.
pub async fn drain(
    aws: &Arc<AwsState>,
    runtime: &Arc<RuntimeApi>,
    mapping: &Mapping,
    give_up: Duration,
) -> Vec<Delivery> {
    let name = mapping.queue_url.rsplit('/').next().unwrap_or_default();
    let queue_arn = format!("arn:aws:sqs:{}:{}:{name}", aws.region, aws.account);
    let until = Instant::now() + give_up;
    let mut running = tokio::task::JoinSet::new();
    let mut deliveries = Vec::new();
    loop {
        while running.len() < mapping.maximum_concurrency {
            let batch = aws.receive(&mapping.queue_url, mapping.batch_size, mapping.visibility);
            if batch.is_empty() {
                break;
            }
            let event = sqs_event(&queue_arn, &aws.region, &batch);
            let (aws, runtime, mapping) = (aws.clone(), runtime.clone(), mapping.clone());
            running.spawn(async move {
                let started = Instant::now();
                let outcome = runtime.invoke(event, mapping.function_timeout).await;
                let delivery = Delivery {
                    message_ids: batch.iter().map(|m| m.id.clone()).collect(),
                    receive_counts: batch.iter().map(|m| m.receives).collect(),
                    outcome,
                    started,
                    took: started.elapsed(),
                };
                let failed = delivery.failed();
                for message in &batch {
                    if !failed.contains(&message.id) {
                        aws.delete(&mapping.queue_url, &message.receipt);
                    }
                }
                delivery
            });
        }
        let left = aws.queue(&mapping.queue_url).len();
        if running.is_empty() && left == 0 || Instant::now() >= until {
            break;
        }
        if running.is_empty() {
            // Nothing runs and what is left is invisible: its visibility timeout is what
            // stands between it and its next delivery. Time passes on the queues' clock, not
            // on the machine's, so a slow invocation never sees its message delivered twice.
            aws.advance_queue_clock(mapping.visibility);
            continue;
        }
        tokio::select! {
            Some(done) = running.join_next() => {
                if let Ok(delivery) = done {
                    deliveries.push(delivery);
                }
            }
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    while let Some(done) = running.join_next().await {
        if let Ok(delivery) = done {
            deliveries.push(delivery);
        }
    }
    deliveries.sort_by_key(|d| d.started);
    deliveries
}
