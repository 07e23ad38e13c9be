//! Secrets Manager secrets as text, read once and kept for five minutes per warm container:
//! the Git credentials and the cosign keys are read through one reader, so a secret named by
//! both is fetched once, and every caller gets the same bound on how stale it may be.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use crate::aws::aws_error::{self, Described};

/// How long a secret's text is kept: a rotated secret is seen within this.
pub const KEEP_FOR: Duration = Duration::from_secs(300);

/// Why a secret's text could not be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    /// Secrets Manager did not give it: denied, missing, or not reachable.
    #[error("{0}")]
    Unreadable(Described),
    /// The secret holds binary data, not text.
    #[error("it has no SecretString")]
    NotText,
}

impl SecretError {
    /// Access refused: the function's role lacks `secretsmanager:GetSecretValue` on it.
    pub fn is_denied(&self) -> bool {
        matches!(self, Self::Unreadable(d) if d.cause == aws_error::Cause::AccessDenied)
    }

    /// No such secret: a configuration error, not something a retry fixes.
    pub fn is_missing(&self) -> bool {
        matches!(self, Self::Unreadable(d) if d.code.as_deref() == Some("ResourceNotFoundException"))
    }

    /// Whether the same read may succeed later (throttled, a network fault, an outage).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unreadable(d) if d.cause.is_retryable())
    }
}

/// Secrets Manager, with each secret's text kept for [`KEEP_FOR`].
pub struct SecretReader {
    client: aws_sdk_secretsmanager::Client,
    kept: Mutex<HashMap<String, (Instant, String)>>,
}

impl SecretReader {
    pub fn new(client: aws_sdk_secretsmanager::Client) -> Self {
        Self {
            client,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The secret's `SecretString`.
    pub async fn text(&self, arn: &str) -> Result<String, SecretError> {
        if let Some((at, text)) = self.kept.lock().await.get(arn)
            && at.elapsed() < KEEP_FOR
        {
            return Ok(text.clone());
        }
        let answer = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| SecretError::Unreadable(aws_error::describe(&e)))?;
        let text = answer
            .secret_string()
            .ok_or(SecretError::NotText)?
            .to_string();
        self.kept
            .lock()
            .await
            .insert(arn.to_string(), (Instant::now(), text.clone()));
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_secretsmanager::operation::get_secret_value::{
        GetSecretValueError, GetSecretValueOutput,
    };
    use aws_sdk_secretsmanager::types::error::ResourceNotFoundException;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    const ARN: &str = "arn:aws:secretsmanager:ap-northeast-2:111122223333:secret:git-AbCdEf";

    #[tokio::test]
    async fn a_secret_asked_for_twice_is_read_once() {
        let answer = mock!(aws_sdk_secretsmanager::Client::get_secret_value)
            .then_output(|| GetSecretValueOutput::builder().secret_string("{}").build());
        let client = mock_client!(aws_sdk_secretsmanager, RuleMode::MatchAny, [&answer]);
        let reader = SecretReader::new(client);
        assert_eq!(reader.text(ARN).await.unwrap(), "{}");
        assert_eq!(reader.text(ARN).await.unwrap(), "{}");
        assert_eq!(answer.num_calls(), 1);
    }

    #[tokio::test]
    async fn a_missing_secret_is_permanent_and_binary_data_is_not_text() {
        let missing = mock!(aws_sdk_secretsmanager::Client::get_secret_value).then_error(|| {
            GetSecretValueError::ResourceNotFoundException(
                ResourceNotFoundException::builder()
                    .message("Secrets Manager can't find the specified secret.")
                    .meta(
                        aws_smithy_types::error::ErrorMetadata::builder()
                            .code("ResourceNotFoundException")
                            .build(),
                    )
                    .build(),
            )
        });
        let binary = mock!(aws_sdk_secretsmanager::Client::get_secret_value)
            .then_output(|| GetSecretValueOutput::builder().build());
        let client = mock_client!(
            aws_sdk_secretsmanager,
            RuleMode::Sequential,
            [&missing, &binary]
        );
        let reader = SecretReader::new(client);
        let error = reader.text(ARN).await.unwrap_err();
        assert!(
            error.is_missing() && !error.is_transient() && !error.is_denied(),
            "{error:?}"
        );
        assert!(matches!(reader.text(ARN).await, Err(SecretError::NotText)));
    }
}
