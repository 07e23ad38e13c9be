//! The function's AWS SDK configuration, built from the variables Lambda puts in every
//! function's environment rather than by `aws_config`'s loader.
//!
//! The loader looks in a dozen places a Lambda never has (profile files, SSO caches, web
//! identity token files, the EC2 instance metadata service), and linking all of them cost the
//! function binary about half a megabyte. Lambda gives the execution role as
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`, and the region as
//! `AWS_REGION`; a container that hands out credentials over HTTP (ECS, EKS Pod Identity,
//! Lambda Managed Instances' agents) sets `AWS_CONTAINER_CREDENTIALS_FULL_URI` or
//! `..._RELATIVE_URI`, which `aws_config`'s own ECS provider reads. The laptop commands
//! (`argocd-ecr-updater-cli`) keep the full loader.

use std::time::Duration;

use aws_config::identity::IdentityCache;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};

/// The SDK's own default connect timeout, which the loader would have set.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// Why the function cannot build its AWS configuration; each says which variable to set.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SdkEnvError {
    #[error(
        "no AWS region: set AWS_REGION (Lambda sets it; on a laptop, export it or use argocd-ecr-updater-cli, which reads your profile)"
    )]
    NoRegion,
    #[error(
        "no AWS credentials in the environment: Lambda sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN for the execution role, and a credentials agent sets AWS_CONTAINER_CREDENTIALS_FULL_URI or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI. On a laptop, export a profile's keys with `eval \"$(aws configure export-credentials --format env)\"`, or run argocd-ecr-updater-cli, which reads profiles and SSO"
    )]
    NoCredentials,
    #[error("{name} is set but {missing} is not: set both, as Lambda does")]
    HalfCredentials {
        name: &'static str,
        missing: &'static str,
    },
    #[error("{name}={value:?} is not a boolean: write true or false")]
    NotABoolean { name: &'static str, value: String },
}

/// The function's SDK configuration, read from `var` (the process environment in `main`).
/// Retries are the standard mode with short backoffs: a Lambda has seconds, not minutes, and
/// AWS retries the whole event.
pub fn sdk_config_from_env(
    var: impl Fn(&str) -> Option<String> + Send + Sync + Clone + 'static,
) -> Result<SdkConfig, SdkEnvError> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    // Decided once, strictly: the global endpoint and every service's obey the same answer.
    let ignore_configured = flag(&set, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")?.unwrap_or(false);
    let region = set("AWS_REGION")
        .or_else(|| set("AWS_DEFAULT_REGION"))
        .ok_or(SdkEnvError::NoRegion)?;
    let http = SharedHttpClient::new(crate::aws::aws_http::AwsHttpClient::new());
    let credentials = credentials(&set, &http)?;
    let mut builder = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(credentials)
        .http_client(http)
        .identity_cache(IdentityCache::lazy().build())
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(100)),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        )
        .time_source(aws_smithy_async::time::SystemTimeSource::new())
        .service_config(EnvironmentEndpoints {
            var: var.clone(),
            ignore_configured,
        });
    if let Some(sleep) = aws_smithy_async::rt::sleep::default_async_sleep() {
        builder = builder.sleep_impl(sleep);
    }
    if !ignore_configured {
        builder.set_endpoint_url(set("AWS_ENDPOINT_URL"));
    }
    builder.set_use_fips(flag(&set, "AWS_USE_FIPS_ENDPOINT")?);
    builder.set_use_dual_stack(flag(&set, "AWS_USE_DUALSTACK_ENDPOINT")?);
    Ok(builder.build())
}

/// The execution role's keys when Lambda set them, else a credentials agent's endpoint.
fn credentials(
    set: &impl Fn(&str) -> Option<String>,
    http: &SharedHttpClient,
) -> Result<SharedCredentialsProvider, SdkEnvError> {
    match (set("AWS_ACCESS_KEY_ID"), set("AWS_SECRET_ACCESS_KEY")) {
        // Lambda's keys last as long as the execution environment: read once, like the
        // loader's environment provider, whose values the identity cache never expires.
        (Some(key), Some(secret)) => Ok(SharedCredentialsProvider::new(Credentials::new(
            key,
            secret,
            set("AWS_SESSION_TOKEN"),
            None,
            "Environment",
        ))),
        (Some(_), None) => Err(SdkEnvError::HalfCredentials {
            name: "AWS_ACCESS_KEY_ID",
            missing: "AWS_SECRET_ACCESS_KEY",
        }),
        (None, Some(_)) => Err(SdkEnvError::HalfCredentials {
            name: "AWS_SECRET_ACCESS_KEY",
            missing: "AWS_ACCESS_KEY_ID",
        }),
        (None, None)
            if set("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some()
                || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some() =>
        {
            Ok(SharedCredentialsProvider::new(
                aws_config::ecs::EcsCredentialsProvider::builder()
                    .configure(
                        &aws_config::provider_config::ProviderConfig::without_region()
                            .with_http_client(http.clone()),
                    )
                    .build(),
            ))
        }
        (None, None) => Err(SdkEnvError::NoCredentials),
    }
}

/// `true`/`false` in any case, as the SDKs read these switches.
fn flag(
    set: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Option<bool>, SdkEnvError> {
    match set(name) {
        None => Ok(None),
        Some(value) if value.trim().eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(value) if value.trim().eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(value) => Err(SdkEnvError::NotABoolean { name, value }),
    }
}

/// Per-service settings from the environment, as the SDKs define them: `AWS_ENDPOINT_URL_ECR`
/// (the key's variable, then the service id upper-cased with spaces as underscores) before the
/// key's variable itself (`AWS_ENDPOINT_URL`).
#[derive(Clone)]
struct EnvironmentEndpoints<F> {
    var: F,
    /// `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`, as `sdk_config_from_env` read it.
    ignore_configured: bool,
}

impl<F> std::fmt::Debug for EnvironmentEndpoints<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvironmentEndpoints")
    }
}

impl<F: Fn(&str) -> Option<String> + Send + Sync> LoadServiceConfig for EnvironmentEndpoints<F> {
    fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
        if self.ignore_configured && key.env() == "AWS_ENDPOINT_URL" {
            return None;
        }
        let set = |name: &str| (self.var)(name).filter(|v| !v.trim().is_empty());
        let service = key.service_id().to_uppercase().replace(' ', "_");
        set(&format!("{}_{service}", key.env())).or_else(|| set(key.env()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::ProvideCredentials;
    use std::collections::HashMap;

    fn environment(
        pairs: &[(&str, &str)],
    ) -> impl Fn(&str) -> Option<String> + Send + Sync + Clone + 'static {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name: &str| map.get(name).cloned()
    }

    const LAMBDA: &[(&str, &str)] = &[
        ("AWS_REGION", "ap-northeast-2"),
        ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_SESSION_TOKEN", "token"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut pairs = LAMBDA.to_vec();
        pairs.extend_from_slice(extra);
        pairs
    }

    #[tokio::test]
    async fn lambda_s_variables_give_the_region_and_the_execution_role() {
        let sdk = sdk_config_from_env(environment(LAMBDA)).expect("config");
        assert_eq!(sdk.region().map(|r| r.as_ref()), Some("ap-northeast-2"));
        let credentials = sdk
            .credentials_provider()
            .expect("a provider")
            .provide_credentials()
            .await
            .expect("credentials");
        assert_eq!(credentials.access_key_id(), "ASIAEXAMPLE");
        assert_eq!(credentials.secret_access_key(), "secret");
        assert_eq!(credentials.session_token(), Some("token"));
        assert_eq!(sdk.endpoint_url(), None);
        assert_eq!(sdk.use_fips(), None);
        assert!(sdk.sleep_impl().is_some(), "retries need a sleep");
        assert!(sdk.time_source().is_some(), "signing needs a clock");
        assert!(
            sdk.http_client().is_some(),
            "the SDK has no HTTP client of its own here"
        );
        let retry = sdk.retry_config().expect("retry config");
        assert_eq!(retry.max_attempts(), 3);
        assert_eq!(
            sdk.timeout_config().and_then(|t| t.connect_timeout()),
            Some(CONNECT_TIMEOUT)
        );
    }

    #[test]
    fn aws_default_region_serves_when_aws_region_is_absent() {
        let pairs = [
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b"),
        ];
        let sdk = sdk_config_from_env(environment(&pairs)).expect("config");
        assert_eq!(sdk.region().map(|r| r.as_ref()), Some("eu-west-1"));
    }

    #[test]
    fn a_missing_region_or_missing_credentials_say_what_to_set() {
        let no_region = [("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")];
        assert_eq!(
            sdk_config_from_env(environment(&no_region)).err(),
            Some(SdkEnvError::NoRegion)
        );
        let no_keys = [("AWS_REGION", "us-east-1")];
        let error = sdk_config_from_env(environment(&no_keys)).err();
        assert_eq!(error, Some(SdkEnvError::NoCredentials));
        assert!(
            error
                .map(|e| e.to_string())
                .is_some_and(|m| m.contains("aws configure export-credentials"))
        );
        let half = [("AWS_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "a")];
        assert_eq!(
            sdk_config_from_env(environment(&half)).err(),
            Some(SdkEnvError::HalfCredentials {
                name: "AWS_ACCESS_KEY_ID",
                missing: "AWS_SECRET_ACCESS_KEY"
            })
        );
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        let pairs = [
            ("AWS_REGION", ""),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b"),
            ("AWS_SESSION_TOKEN", " "),
        ];
        let sdk = sdk_config_from_env(environment(&pairs)).expect("config");
        assert_eq!(sdk.region().map(|r| r.as_ref()), Some("eu-west-1"));
    }

    #[test]
    fn a_credentials_agent_is_used_when_no_keys_are_set() {
        let pairs = [
            ("AWS_REGION", "us-east-1"),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://169.254.170.23/v1/credentials",
            ),
        ];
        let sdk = sdk_config_from_env(environment(&pairs)).expect("config");
        assert!(sdk.credentials_provider().is_some());
    }

    #[test]
    fn a_service_s_endpoint_variable_wins_over_the_global_one() {
        let pairs = with(&[
            ("AWS_ENDPOINT_URL", "http://global:1"),
            ("AWS_ENDPOINT_URL_ECR", "http://ecr:2"),
            ("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://secrets:3"),
        ]);
        let sdk = sdk_config_from_env(environment(&pairs)).expect("config");
        assert_eq!(sdk.endpoint_url(), Some("http://global:1"));
        assert_eq!(endpoint_of(&sdk, "ECR").as_deref(), Some("http://ecr:2"));
        assert_eq!(
            endpoint_of(&sdk, "Secrets Manager").as_deref(),
            Some("http://secrets:3")
        );
        assert_eq!(endpoint_of(&sdk, "EKS").as_deref(), Some("http://global:1"));
    }

    #[test]
    fn ignoring_configured_endpoints_drops_both_kinds() {
        let pairs = with(&[
            ("AWS_ENDPOINT_URL", "http://global:1"),
            ("AWS_ENDPOINT_URL_ECR", "http://ecr:2"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "TRUE"),
        ]);
        let sdk = sdk_config_from_env(environment(&pairs)).expect("config");
        assert_eq!(sdk.endpoint_url(), None);
        assert_eq!(endpoint_of(&sdk, "ECR"), None);
    }

    #[test]
    fn fips_and_dual_stack_switches_are_read_and_a_bad_one_is_refused() {
        let pairs = with(&[
            ("AWS_USE_FIPS_ENDPOINT", "true"),
            ("AWS_USE_DUALSTACK_ENDPOINT", "False"),
        ]);
        let sdk = sdk_config_from_env(environment(&pairs)).expect("config");
        assert_eq!(sdk.use_fips(), Some(true));
        assert_eq!(sdk.use_dual_stack(), Some(false));
        let bad = with(&[("AWS_USE_FIPS_ENDPOINT", "yes")]);
        assert_eq!(
            sdk_config_from_env(environment(&bad)).err(),
            Some(SdkEnvError::NotABoolean {
                name: "AWS_USE_FIPS_ENDPOINT",
                value: "yes".into()
            })
        );
    }

    /// What a generated client (`aws_sdk_ecr::config::Builder::from(&SdkConfig)`) resolves:
    /// the service configuration under the key it asks for, else the global endpoint. The end
    /// to end tests run the function binary with `AWS_ENDPOINT_URL_ECR` and its kin.
    fn endpoint_of(sdk: &SdkConfig, service_id: &str) -> Option<String> {
        let key = ServiceConfigKey::builder()
            .service_id(service_id)
            .env("AWS_ENDPOINT_URL")
            .profile("endpoint_url")
            .build()
            .expect("key");
        sdk.service_config()
            .and_then(|c| c.load_config(key))
            .or_else(|| sdk.endpoint_url().map(str::to_string))
    }
}
