//! Retries inside one invocation: jittered exponential backoff for transient errors,
//! bounded by the Lambda deadline. Which errors are transient is the error's own rule
//! ([`Transient`], which the Kubernetes client's errors implement); this module only decides
//! when to try again.

use std::time::{Duration, Instant};

/// An error that may pass when the same request is sent again, and when to send it.
pub trait Transient: std::fmt::Display {
    fn is_transient(&self) -> bool;
    /// What the server asked for (`Retry-After`), if anything.
    fn retry_after(&self) -> Option<Duration>;
}

/// Transient Kubernetes errors (429, 5xx, timeouts, dropped connections) are retried this
/// many times in the invocation before the target is reported as failed.
const TRANSIENT_ATTEMPTS: u32 = 4;
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Exponential backoff with jitter, honouring the server's Retry-After.
pub fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let exponential = Duration::from_millis(50u64.saturating_mul(1 << attempt.min(10)));
    let jitter = Duration::from_millis(rand::random_range(0..50));
    retry_after.unwrap_or(exponential).min(MAX_BACKOFF) + jitter
}

/// Runs `op` again after transient failures, while the deadline leaves room.
pub async fn retry_transient<T, E, F, Fut>(deadline: Option<Instant>, mut op: F) -> Result<T, E>
where
    E: Transient,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(e) if e.is_transient() && attempt + 1 < TRANSIENT_ATTEMPTS => {
                let wait = backoff(attempt, e.retry_after());
                let room =
                    deadline.is_none_or(|d| Instant::now() + wait + Duration::from_secs(1) < d);
                if !room {
                    return Err(e);
                }
                tracing::warn!(error = %e, wait_ms = wait.as_millis() as u64, "transient error, retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that is busy (transient) or refuses (not).
    #[derive(Debug)]
    enum Answer {
        Busy,
        Refused,
    }

    impl std::fmt::Display for Answer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self:?}")
        }
    }

    impl Transient for Answer {
        fn is_transient(&self) -> bool {
            matches!(self, Self::Busy)
        }

        fn retry_after(&self) -> Option<Duration> {
            Some(Duration::ZERO)
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        assert!(backoff(0, None) < Duration::from_millis(100));
        assert!(backoff(3, None) >= Duration::from_millis(400));
        assert!(backoff(20, None) <= MAX_BACKOFF + Duration::from_millis(50));
        assert!(backoff(0, Some(Duration::from_secs(2))) >= Duration::from_secs(2));
        assert!(
            backoff(0, Some(Duration::from_secs(600))) <= MAX_BACKOFF + Duration::from_millis(50)
        );
    }

    #[tokio::test]
    async fn transient_errors_are_retried_and_others_are_not() {
        let mut calls = 0;
        let result: Result<u32, Answer> = retry_transient(None, || {
            calls += 1;
            let n = calls;
            async move { if n < 3 { Err(Answer::Busy) } else { Ok(n) } }
        })
        .await;
        assert_eq!(result.unwrap(), 3);
        let mut calls = 0;
        let result: Result<u32, Answer> = retry_transient(None, || {
            calls += 1;
            async { Err(Answer::Refused) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 1);
    }
}
