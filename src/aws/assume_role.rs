//! Credentials for a cluster in another account: STS `AssumeRole` with the function's own
//! credentials, in the cluster's region.
//!
//! `aws_config::sts::AssumeRoleProvider` does the same, but its builder falls back to
//! `aws_config`'s whole loader (profiles, SSO, instance metadata) when it is not handed a
//! configuration, and that fallback alone kept half a megabyte in the function binary, which
//! never uses it (`sdk_env`). This is the one call the function needs, made with the STS
//! client of the same SDK.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_credential_types::provider::{self, ProvideCredentials, error::CredentialsError, future};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;

use crate::aws::aws_error::{Described, describe};

/// The role session every assumed role gets, so CloudTrail says who acted.
pub const SESSION_NAME: &str = "argocd-ecr-updater";

/// Asks STS each time it is asked: the clients it is given to (the EKS client's identity
/// cache, the token source's 10-minute tokens) cache by the credentials' expiry.
#[derive(Debug, Clone)]
pub struct AssumedRole {
    sts: aws_sdk_sts::Client,
    role_arn: String,
}

impl AssumedRole {
    /// `sdk` carries the function's own credentials and the cluster's region.
    pub fn new(sdk: &aws_config::SdkConfig, role_arn: impl Into<String>) -> Self {
        Self {
            sts: aws_sdk_sts::Client::new(sdk),
            role_arn: role_arn.into(),
        }
    }

    /// Asks STS once and says why it refused, by the error STS sent: a caller that must
    /// tell "the trust policy refuses us" (an operator's to fix) from "STS did not answer"
    /// asks this before handing the provider on.
    pub async fn check(&self) -> Result<(), Described> {
        self.request().await.map(|_| ()).map_err(|e| describe(&e))
    }

    async fn request(
        &self,
    ) -> Result<
        aws_sdk_sts::operation::assume_role::AssumeRoleOutput,
        SdkError<aws_sdk_sts::operation::assume_role::AssumeRoleError, HttpResponse>,
    > {
        self.sts
            .assume_role()
            .role_arn(&self.role_arn)
            .role_session_name(SESSION_NAME)
            .send()
            .await
    }

    async fn assume(&self) -> provider::Result {
        let answer = match self.request().await {
            Ok(answer) => answer,
            // A disabled region or a malformed policy is the operator's to fix; everything
            // else (refusals included) reads as the provider failing, with STS's message.
            Err(SdkError::ServiceError(context))
                if context.err().is_region_disabled_exception()
                    || context.err().is_malformed_policy_document_exception() =>
            {
                return Err(CredentialsError::invalid_configuration(
                    SdkError::ServiceError(context),
                ));
            }
            Err(e) => return Err(CredentialsError::provider_error(e)),
        };
        let issued = answer.credentials.ok_or_else(|| {
            CredentialsError::unhandled("STS answered AssumeRole without credentials")
        })?;
        let expiry = SystemTime::try_from(issued.expiration).map_err(|_| {
            CredentialsError::unhandled("STS gave an expiry that this system cannot represent")
        })?;
        Ok(Credentials::new(
            issued.access_key_id,
            issued.secret_access_key,
            Some(issued.session_token),
            Some(expiry),
            "AssumeRole",
        ))
    }
}

impl ProvideCredentials for AssumedRole {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.assume())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sts::operation::assume_role::{AssumeRoleError, AssumeRoleOutput};
    use aws_sdk_sts::types::error::RegionDisabledException;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};
    use aws_smithy_types::DateTime;
    use aws_smithy_types::error::ErrorMetadata;

    /// An STS error answer with its code and message.
    fn refusal(code: &str, message: &str) -> AssumeRoleError {
        AssumeRoleError::generic(ErrorMetadata::builder().code(code).message(message).build())
    }

    fn provider(sts: aws_sdk_sts::Client) -> AssumedRole {
        AssumedRole {
            sts,
            role_arn: "arn:aws:iam::222222222222:role/deployer".into(),
        }
    }

    #[tokio::test]
    async fn the_role_s_temporary_credentials_carry_their_expiry() {
        let issued = mock!(aws_sdk_sts::Client::assume_role)
            .match_requests(|r| {
                r.role_arn() == Some("arn:aws:iam::222222222222:role/deployer")
                    && r.role_session_name() == Some(SESSION_NAME)
            })
            .then_output(|| {
                AssumeRoleOutput::builder()
                    .credentials(
                        aws_sdk_sts::types::Credentials::builder()
                            .access_key_id("ASIAASSUMED")
                            .secret_access_key("secret")
                            .session_token("token")
                            .expiration(DateTime::from_secs(2_000_000_000))
                            .build()
                            .expect("credentials"),
                    )
                    .build()
            });
        let sts = mock_client!(aws_sdk_sts, RuleMode::Sequential, [&issued]);
        let credentials = provider(sts).provide_credentials().await.expect("assumed");
        assert_eq!(credentials.access_key_id(), "ASIAASSUMED");
        assert_eq!(credentials.session_token(), Some("token"));
        assert_eq!(
            credentials.expiry(),
            Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(2_000_000_000))
        );
    }

    #[tokio::test]
    async fn a_refusal_keeps_sts_s_code_and_message_for_the_report() {
        let refused = mock!(aws_sdk_sts::Client::assume_role).then_error(|| {
            refusal(
                "AccessDenied",
                "User is not authorized to perform: sts:AssumeRole",
            )
        });
        let sts = mock_client!(aws_sdk_sts, RuleMode::Sequential, [&refused]);
        let error = provider(sts)
            .provide_credentials()
            .await
            .expect_err("refused");
        assert!(matches!(error, CredentialsError::ProviderError(_)));
        let told = aws_smithy_types::error::display::DisplayErrorContext(&error).to_string();
        assert!(
            told.contains("AccessDenied") && told.contains("not authorized"),
            "{told}"
        );
    }

    #[tokio::test]
    async fn a_disabled_region_is_a_configuration_error() {
        let disabled = mock!(aws_sdk_sts::Client::assume_role).then_error(|| {
            AssumeRoleError::RegionDisabledException(
                RegionDisabledException::builder()
                    .message("STS is not activated in this region")
                    .build(),
            )
        });
        let sts = mock_client!(aws_sdk_sts, RuleMode::Sequential, [&disabled]);
        let error = provider(sts)
            .provide_credentials()
            .await
            .expect_err("disabled");
        assert!(
            matches!(error, CredentialsError::InvalidConfiguration(_)),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn the_check_tells_a_refusal_from_sts_not_answering_by_the_error_sts_sent() {
        let refused = mock!(aws_sdk_sts::Client::assume_role).then_error(|| {
            refusal(
                "AccessDenied",
                "User is not authorized to perform: sts:AssumeRole",
            )
        });
        let throttled = mock!(aws_sdk_sts::Client::assume_role)
            .then_error(|| refusal("Throttling", "Rate exceeded"));
        let sts = mock_client!(aws_sdk_sts, RuleMode::Sequential, [&refused, &throttled]);
        let role = provider(sts);
        let first = role.check().await.expect_err("refused");
        assert_eq!(first.cause, crate::aws::aws_error::Cause::AccessDenied);
        assert_eq!(first.code.as_deref(), Some("AccessDenied"));
        let second = role.check().await.expect_err("throttled");
        assert_eq!(second.cause, crate::aws::aws_error::Cause::Throttling);
    }
}
