//! AWS SDK errors, told by their whole cause chain: a user sees `dns error: failed to
//! lookup address` or `ExpiredTokenException`, never `unhandled error`, and the retry class
//! follows the cause, not the absence of a message.

use std::error::Error;
use std::fmt;

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// What went wrong, as far as a user can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The endpoint's host name does not resolve.
    Dns,
    /// Nothing answers at the endpoint (refused, unreachable).
    Connect,
    Timeout,
    /// No credentials anywhere in the standard chain.
    NoCredentials,
    ExpiredCredentials,
    AccessDenied,
    Throttling,
    /// The service answered with another error code.
    Service,
    Other,
}

impl Cause {
    /// Whether the same call may succeed later (or after an operator fixes access).
    pub fn is_retryable(self) -> bool {
        !matches!(self, Self::Service | Self::Other)
    }

    fn hint(self) -> &'static str {
        match self {
            Self::Dns => {
                "the endpoint's host name does not resolve: check AWS_REGION, any AWS_ENDPOINT_URL_* variable, and DNS (in a VPC, the interface endpoints)"
            }
            Self::Connect => {
                "nothing answers at the endpoint: check network access (in a VPC: NAT or interface endpoints; behind a proxy: HTTPS_PROXY)"
            }
            Self::Timeout => "the endpoint did not answer in time",
            Self::NoCredentials => NO_CREDENTIALS,
            Self::ExpiredCredentials => {
                "the AWS credentials have expired: refresh them (`aws sso login`, a new session, or new keys)"
            }
            Self::AccessDenied => "the identity lacks the permission named",
            Self::Throttling => "AWS is throttling the calls; a retry will pass",
            Self::Service | Self::Other => "",
        }
    }
}

/// What `aws` itself says when it finds no credentials, with where we looked.
pub const NO_CREDENTIALS: &str = "no AWS credentials found: looked in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the profile in AWS_PROFILE (~/.aws/config and ~/.aws/credentials; for SSO profiles run `aws sso login --profile NAME`), web identity (AWS_WEB_IDENTITY_TOKEN_FILE), and the ECS and EC2 instance metadata. Set AWS_PROFILE or the variables, or run `aws configure`";

/// An SDK error, rendered with its cause chain and classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub cause: Cause,
    /// The service's error code, if it sent one.
    pub code: Option<String>,
    /// The service's message, else the whole chain.
    pub text: String,
}

impl fmt::Display for Described {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.cause.hint(), &self.code) {
            ("", Some(code)) => write!(f, "{code}: {}", self.text),
            ("", None) => f.write_str(&self.text),
            (hint, Some(code)) => write!(f, "{code}: {} ({hint})", self.text),
            (hint, None) => write!(f, "{} ({hint})", self.text),
        }
    }
}

/// Renders and classifies an SDK error.
pub fn describe<E, R>(error: &SdkError<E, R>) -> Described
where
    E: ProvideErrorMetadata + Error + Send + Sync + 'static,
    R: fmt::Debug + 'static,
{
    let code = error.code().map(str::to_string);
    let chain = chain(error);
    let cause = classify(code.as_deref(), &chain);
    let text = match error.message() {
        Some(message) if code.is_some() => message.to_string(),
        _ => chain,
    };
    Described { cause, code, text }
}

/// The cause of a failed AWS call, from the error code the service sent (if any) and the
/// rendered error chain: for callers that speak an AWS protocol without the SDK.
pub fn classify(code: Option<&str>, chain: &str) -> Cause {
    let lowered = chain.to_ascii_lowercase();
    match code {
        Some("AccessDeniedException" | "AccessDenied" | "UnauthorizedOperation") => {
            Cause::AccessDenied
        }
        Some(
            "ExpiredTokenException" | "ExpiredToken" | "RequestExpired" | "TokenRefreshRequired",
        ) => Cause::ExpiredCredentials,
        Some(
            "ThrottlingException"
            | "Throttling"
            | "TooManyRequestsException"
            | "RequestLimitExceeded",
        ) => Cause::Throttling,
        Some(_) => Cause::Service,
        None if lowered.contains("credential") && lowered.contains("not enabled")
            || lowered.contains("no credentials") =>
        {
            Cause::NoCredentials
        }
        None if lowered.contains("expired") => Cause::ExpiredCredentials,
        None if lowered.contains("dns error") || lowered.contains("failed to lookup address") => {
            Cause::Dns
        }
        None if lowered.contains("timeout") || lowered.contains("timed out") => Cause::Timeout,
        None if lowered.contains("connection refused")
            || lowered.contains("tcp connect error")
            || lowered.contains("network is unreachable")
            || lowered.contains("dispatch failure") =>
        {
            Cause::Connect
        }
        None => Cause::Other,
    }
}

/// The error and every source below it, as `aws_smithy_types::error::display::
/// DisplayErrorContext` renders them, without repeating what a source already says.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecr::operation::describe_images::DescribeImagesError;
    use aws_smithy_types::error::ErrorMetadata;

    fn service_error(code: &str, message: &str) -> SdkError<DescribeImagesError, ()> {
        SdkError::service_error(
            DescribeImagesError::generic(
                ErrorMetadata::builder().code(code).message(message).build(),
            ),
            (),
        )
    }

    #[test]
    fn service_errors_are_classified_by_their_code_and_keep_the_message() {
        let table = [
            ("AccessDeniedException", Cause::AccessDenied),
            ("ExpiredTokenException", Cause::ExpiredCredentials),
            ("ThrottlingException", Cause::Throttling),
            ("InvalidParameterException", Cause::Service),
        ];
        for (code, cause) in table {
            let described = describe(&service_error(code, "the message"));
            assert_eq!(described.cause, cause, "{code}");
            let shown = described.to_string();
            assert!(
                shown.starts_with(&format!("{code}: the message")),
                "{shown}"
            );
        }
        assert!(!Cause::Service.is_retryable());
        assert!(Cause::Throttling.is_retryable());
    }
}
