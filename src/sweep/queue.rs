//! The sweep queue: shards sent as one message each, a few at a time. SQS keeps each until a
//! shard invocation reports it done; one it reports failed is delivered again and, after the
//! queue's receive limit, moved to the dead-letter queue like any other event.

use futures_util::StreamExt;

use super::shard::Shard;

/// Messages in flight at once while a sweep is sent out.
const SENDING: usize = 10;

/// The longest `DelaySeconds` SQS takes.
pub const MAX_DELAY_SECONDS: u32 = 900;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error(
        "cannot send shards to the sweep queue: {message}. Check that the role may sqs:SendMessage on SWEEP_QUEUE_URL and that the queue exists; the next sweep sends them again"
    )]
    Refused { message: String },
    #[error(
        "sending shards to the sweep queue failed for now: {message}; the next sweep sends them again"
    )]
    Transient { message: String },
}

/// The queue a coordinator sends shards to.
pub struct ShardQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl ShardQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: String) -> Self {
        Self { client, url }
    }

    /// Sends every shard; on the first that fails, the ones still in flight finish and the
    /// error says how many were sent. A shard sent twice (a retried request) is harmless:
    /// shards are idempotent.
    pub async fn send(&self, shards: &[Shard]) -> (usize, Result<(), QueueError>) {
        let mut sent = 0;
        let mut first_error = None;
        let mut sends = futures_util::stream::iter(shards)
            .map(|shard| self.send_one(shard))
            .buffer_unordered(SENDING);
        while let Some(result) = sends.next().await {
            match result {
                Ok(()) => sent += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        (sent, first_error.map_or(Ok(()), Err))
    }

    async fn send_one(&self, shard: &Shard) -> Result<(), QueueError> {
        self.send_after(shard, 0).await
    }

    /// Sends one shard that SQS hands out only after `delay_seconds` (at most SQS's 900): a
    /// follow-up that re-decides its Applications when a soak ends.
    pub async fn send_after(&self, shard: &Shard, delay_seconds: u32) -> Result<(), QueueError> {
        self.send_message(shard, delay_seconds).await
    }

    /// Sends a rollout check, handed out after `delay_seconds`.
    pub async fn send_check(
        &self,
        check: &crate::rollout::message::Confirmation,
        delay_seconds: u32,
    ) -> Result<(), QueueError> {
        self.send_message(check, delay_seconds).await
    }

    async fn send_message(
        &self,
        message: &impl serde::Serialize,
        delay_seconds: u32,
    ) -> Result<(), QueueError> {
        let body = serde_json::to_string(message).map_err(|e| QueueError::Refused {
            message: e.to_string(),
        })?;
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .delay_seconds(delay_seconds.min(MAX_DELAY_SECONDS) as i32)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| {
                let described = crate::aws::aws_error::describe(&e);
                let message = described.to_string();
                let refused = matches!(described.cause, crate::aws::aws_error::Cause::AccessDenied)
                    || matches!(
                        described.code.as_deref(),
                        Some(
                            "AWS.SimpleQueueService.NonExistentQueue"
                                | "QueueDoesNotExist"
                                | "KmsAccessDenied"
                                | "KmsDisabled"
                        )
                    );
                if refused {
                    QueueError::Refused { message }
                } else {
                    QueueError::Transient { message }
                }
            })
    }
}

/// The rollout checks go out on the sweep queue, which brings them back as shards come.
#[async_trait::async_trait]
impl crate::rollout::follow::Checks for ShardQueue {
    async fn send_check(
        &self,
        check: &crate::rollout::message::Confirmation,
        delay_seconds: u32,
    ) -> Result<(), String> {
        ShardQueue::send_check(self, check, delay_seconds)
            .await
            .map_err(|e| e.to_string())
    }

    async fn send_wake(
        &self,
        wake: &crate::rollout::downstreams::Wake,
        delay_seconds: u32,
    ) -> Result<(), String> {
        let hop = wake
            .promoting
            .as_ref()
            .map(|promoting| crate::sweep::shard::SoakHop {
                image: promoting.image.clone(),
                candidate: promoting.candidate.clone(),
                hop: 0,
            });
        let shard = crate::sweep::shard::follow_up(
            &wake.id,
            &wake.cluster,
            &wake.namespace,
            &wake.name,
            hop,
        );
        self.send_after(&shard, delay_seconds)
            .await
            .map_err(|e| e.to_string())
    }
}
