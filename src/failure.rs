//! A failure as the report carries it: what went wrong, said so that someone can act on it,
//! and whether a retry of the event can fix it. Module edges keep their own error enums; this
//! is the common shape they are reported in.

/// What went wrong, and whether a retry (rather than an operator) can fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub message: String,
    pub retryable: bool,
}

impl Failure {
    pub fn new(message: impl Into<String>, retryable: bool) -> Self {
        Self {
            message: message.into(),
            retryable,
        }
    }

    /// Only a change of configuration or content fixes it.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(message, false)
    }

    /// The same failure, its message led by `context`.
    pub fn context(self, context: &str) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
            ..self
        }
    }
}

/// Why a value read from outside (an annotation, a URL, a file from Git, a manifest, a
/// signature) is refused, said so its author can fix it. Always permanent: the same input is
/// refused again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The reason, to read or quote.
impl std::ops::Deref for Refused {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for Refused {
    fn from(reason: String) -> Self {
        Self(reason)
    }
}

impl From<&str> for Refused {
    fn from(reason: &str) -> Self {
        Self(reason.to_string())
    }
}

impl From<Refused> for Failure {
    fn from(refused: Refused) -> Self {
        Failure::permanent(refused.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_in_context_keeps_its_retry_class() {
        let failure = Failure::new("the API server timed out", true).context("cluster `prod`");
        assert_eq!(
            failure.to_string(),
            "cluster `prod`: the API server timed out"
        );
        assert!(failure.retryable);
        assert!(!Failure::permanent("no such key").retryable);
    }
}
