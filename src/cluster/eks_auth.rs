//! EKS authentication: an IAM-signed bearer token, and the cluster's endpoint and CA.
//!
//! The token is what `aws eks get-token` prints: `k8s-aws-v1.` and the base64url of an STS
//! `GetCallerIdentity` URL presigned with SigV4, with the cluster name in a signed header.
//! Signing is local, so the function needs no STS call, no kubeconfig and no secret. The
//! API server's authenticator replays the URL against STS, which checks the signature.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::config::{ClusterAccess, decode_ca};
use crate::failure::Refused;
use serde::Serialize;
use tokio::sync::Mutex;

pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// What every client sends; STS ignores it and the authenticator allows 15 minutes.
const PRESIGN_EXPIRES: Duration = Duration::from_secs(60);
/// The authenticator accepts a token for 15 minutes from its signing time. We use one for
/// at most 10, so a request that starts just before renewal still lands well inside.
pub const TOKEN_REUSE: Duration = Duration::from_secs(10 * 60);
/// `aws eks get-token` reports 14 minutes: a minute of margin on the server's 15.
const EXEC_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(14 * 60);

/// Where the current time comes from: injectable so tokens are reproducible in tests.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> SystemTime;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "no AWS credentials for signing the EKS token: {0}. In Lambda they come from the function's role; locally, configure the standard AWS credential chain (AWS_PROFILE, environment variables or SSO)"
    )]
    Credentials(String),
    #[error("could not sign the EKS token: {0}")]
    Signing(String),
}

use crate::partition::sts_host;

/// Builds a bearer token for `cluster` from `credentials`, signed at `now`. Pure: the same
/// inputs give the same token.
pub fn presign_token(
    cluster: &str,
    region: &str,
    credentials: &Credentials,
    now: SystemTime,
) -> Result<String, TokenError> {
    let url = format!(
        "https://{}/?Action=GetCallerIdentity&Version=2011-06-15",
        sts_host(region)
    );
    let identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(PRESIGN_EXPIRES);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| TokenError::Signing(e.to_string()))?
        .into();
    let request = SignableRequest::new(
        "GET",
        url.as_str(),
        [(CLUSTER_ID_HEADER, cluster)].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| TokenError::Signing(e.to_string()))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| TokenError::Signing(e.to_string()))?
        .into_parts();
    let mut presigned = url::Url::parse(&url).map_err(|e| TokenError::Signing(e.to_string()))?;
    {
        let mut query = presigned.query_pairs_mut();
        for (name, value) in instructions.params() {
            query.append_pair(name, value);
        }
    }
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(presigned.as_str())
    ))
}

/// Supplies bearer tokens to the Kubernetes client.
#[async_trait::async_trait]
pub trait TokenSource: Send + Sync + std::fmt::Debug {
    async fn token(&self) -> Result<String, TokenError>;
    /// The API server said 401: the next `token` call must not return the cached one.
    async fn invalidate(&self);
}

/// IAM-signed tokens, cached for [`TOKEN_REUSE`].
pub struct IamTokenSource {
    cluster: String,
    region: String,
    credentials: SharedCredentialsProvider,
    clock: Arc<dyn Clock>,
    cached: Mutex<Option<(String, SystemTime)>>,
}

impl std::fmt::Debug for IamTokenSource {
    /// Never prints the cached token: a bearer token is the cluster's credential for its
    /// 15 minutes, and a `{:?}` can end up in a log line or an error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = match self.cached.try_lock() {
            Ok(cached) => match cached.as_ref() {
                Some(_) => "a token (redacted)",
                None => "none",
            },
            Err(_) => "(in use)",
        };
        f.debug_struct("IamTokenSource")
            .field("cluster", &self.cluster)
            .field("region", &self.region)
            .field("cached", &cached)
            .finish_non_exhaustive()
    }
}

impl IamTokenSource {
    pub fn new(
        cluster: impl Into<String>,
        region: impl Into<String>,
        credentials: SharedCredentialsProvider,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            cluster: cluster.into(),
            region: region.into(),
            credentials,
            clock,
            cached: Mutex::new(None),
        }
    }

    /// A fresh token and the time it was signed, bypassing the cache.
    pub async fn fresh(&self) -> Result<(String, SystemTime), TokenError> {
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| TokenError::Credentials(e.to_string()))?;
        let now = self.clock.now();
        Ok((
            presign_token(&self.cluster, &self.region, &credentials, now)?,
            now,
        ))
    }
}

#[async_trait::async_trait]
impl TokenSource for IamTokenSource {
    async fn token(&self) -> Result<String, TokenError> {
        let mut cached = self.cached.lock().await;
        let now = self.clock.now();
        if let Some((token, signed_at)) = cached.as_ref() {
            // A clock that went backwards also forces a new token.
            let young = now
                .duration_since(*signed_at)
                .is_ok_and(|age| age < TOKEN_REUSE);
            if young {
                return Ok(token.clone());
            }
        }
        let (token, signed_at) = self.fresh().await?;
        *cached = Some((token.clone(), signed_at));
        Ok(token)
    }

    async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }
}

/// `client.authentication.k8s.io/v1beta1` ExecCredential, as `aws eks get-token` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredential {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub spec: serde_json::Value,
    pub status: ExecCredentialStatus,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredentialStatus {
    pub expiration_timestamp: String,
    pub token: String,
}

impl std::fmt::Debug for ExecCredentialStatus {
    /// Never prints the token (it is the cluster's credential); `Serialize` alone writes it,
    /// for `kubectl`'s exec plugin protocol.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCredentialStatus")
            .field("expiration_timestamp", &self.expiration_timestamp)
            .field("token", &"(redacted)")
            .finish()
    }
}

pub fn exec_credential(token: String, signed_at: SystemTime) -> ExecCredential {
    let expires = time::OffsetDateTime::from(signed_at + EXEC_CREDENTIAL_LIFETIME);
    let expiration_timestamp = expires
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    ExecCredential {
        kind: "ExecCredential",
        api_version: "client.authentication.k8s.io/v1beta1",
        spec: serde_json::json!({}),
        status: ExecCredentialStatus {
            expiration_timestamp,
            token,
        },
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "EKS cluster `{cluster}` was not found in this account and region: check CLUSTER_NAME (or CLUSTERS) and the cluster's region"
    )]
    NotFound { cluster: String },
    #[error(
        "the function's role may not call eks:DescribeCluster on `{cluster}`: grant it (template.yaml does), or set KUBE_API_ENDPOINT and KUBE_CA_DATA instead; a cluster of another account needs a `roleArn`, or `endpoint` and `caData`, in CLUSTERS ({message})"
    )]
    AccessDenied { cluster: String, message: String },
    #[error("eks:DescribeCluster on `{cluster}` failed, and may succeed on retry: {message}")]
    Transient { cluster: String, message: String },
    #[error("EKS cluster `{cluster}` has {problem}")]
    Incomplete { cluster: String, problem: String },
    #[error("the cluster CA is not base64 of a PEM bundle: {0}")]
    BadCa(String),
    #[error(
        "cannot assume `{role}` for cluster `{cluster}`: that role's trust policy must allow the function's role, and the function's role needs sts:AssumeRole on it ({message})"
    )]
    RoleRefused {
        cluster: String,
        role: String,
        message: String,
    },
}

impl ClusterError {
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Transient { .. } | Self::AccessDenied { .. } | Self::RoleRefused { .. }
        )
    }
}

/// Asks EKS for the cluster's endpoint and CA.
pub async fn describe_cluster(
    client: &aws_sdk_eks::Client,
    cluster: &str,
) -> Result<ClusterAccess, ClusterError> {
    use aws_sdk_eks::operation::describe_cluster::DescribeClusterError;

    let output = client
        .describe_cluster()
        .name(cluster)
        .send()
        .await
        .map_err(|e| {
            let described = crate::aws::aws_error::describe(&e);
            match e.into_service_error() {
                DescribeClusterError::ResourceNotFoundException(_) => ClusterError::NotFound {
                    cluster: cluster.to_string(),
                },
                _ if described.cause == crate::aws::aws_error::Cause::AccessDenied => {
                    ClusterError::AccessDenied {
                        cluster: cluster.to_string(),
                        message: described.text,
                    }
                }
                _ => ClusterError::Transient {
                    cluster: cluster.to_string(),
                    message: described.to_string(),
                },
            }
        })?;
    let incomplete = |problem: &str| ClusterError::Incomplete {
        cluster: cluster.to_string(),
        problem: problem.to_string(),
    };
    let info = output.cluster.ok_or_else(|| incomplete("no description"))?;
    let endpoint = info
        .endpoint
        .filter(|e| !e.is_empty())
        .ok_or_else(|| incomplete("no API endpoint yet (is it still CREATING?)"))?;
    let ca = info
        .certificate_authority
        .and_then(|c| c.data)
        .ok_or_else(|| incomplete("no certificate authority data"))?;
    Ok(ClusterAccess {
        endpoint,
        ca_pem: decode_ca(&ca).map_err(|Refused(reason)| ClusterError::BadCa(reason))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const SESSION: &str = "IQoJb3JpZ2luX2VjEPr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+abc/def+ghi==";

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// 2025-08-25T15:30:12Z
    const SIGNED_AT: u64 = 1_756_135_812;

    fn decode(token: &str) -> url::Url {
        let b64 = token.strip_prefix(TOKEN_PREFIX).unwrap();
        let bytes = URL_SAFE_NO_PAD.decode(b64).unwrap();
        url::Url::parse(std::str::from_utf8(&bytes).unwrap()).unwrap()
    }

    fn params(url: &url::Url) -> BTreeMap<String, String> {
        url.query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    #[test]
    fn the_signature_matches_botocores_independent_sigv4_for_the_same_inputs() {
        // Expected values computed once with botocore 1.43.11's SigV4QueryAuth (expires=60,
        // header x-k8s-aws-id: barun-dev, time frozen at 2025-08-25T15:30:12Z).
        let table = [
            (
                None,
                "7e5f6db20561848f61e6264175573b795dc6adebc689b137163e10f2d118a217",
            ),
            (
                Some(SESSION),
                "1bf1b2ae835222ca00275434853cb266a345b59a75d181ee8eb33d030668cbec",
            ),
        ];
        for (session, signature) in table {
            let creds = Credentials::new(
                "AKIDEXAMPLE",
                SECRET,
                session.map(str::to_string),
                None,
                "test",
            );
            let token =
                presign_token("barun-dev", "ap-northeast-2", &creds, at(SIGNED_AT)).unwrap();
            let p = params(&decode(&token));
            assert_eq!(p["X-Amz-Signature"], signature, "session token {session:?}");
            assert_eq!(p.get("X-Amz-Security-Token").map(String::as_str), session);
        }
    }

    #[test]
    fn the_token_follows_every_rule_the_authenticator_checks() {
        let creds = Credentials::new("AKIDEXAMPLE", SECRET, Some(SESSION.into()), None, "t");
        let token = presign_token("my-cluster", "us-west-1", &creds, at(SIGNED_AT)).unwrap();
        assert!(token.starts_with(TOKEN_PREFIX));
        assert!(token.len() <= 4096);
        let encoded = token.strip_prefix(TOKEN_PREFIX).unwrap();
        assert!(!encoded.contains('=') && !encoded.contains('+') && !encoded.contains('/'));
        let url = decode(&token);
        assert_eq!(url.scheme(), "https");
        assert_eq!(url.host_str(), Some("sts.us-west-1.amazonaws.com"));
        assert_eq!(url.path(), "/");
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let mut names: Vec<String> = pairs.iter().map(|(k, _)| k.to_ascii_lowercase()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), pairs.len(), "no duplicate parameters");
        let allowed = [
            "Action",
            "Version",
            "X-Amz-Algorithm",
            "X-Amz-Credential",
            "X-Amz-Date",
            "X-Amz-Expires",
            "X-Amz-Security-Token",
            "X-Amz-Signature",
            "X-Amz-SignedHeaders",
        ];
        for (name, _) in &pairs {
            assert!(
                allowed.contains(&name.as_str()),
                "unexpected parameter {name}"
            );
        }
        let p = params(&url);
        assert_eq!(p["Action"], "GetCallerIdentity");
        assert_eq!(p["Version"], "2011-06-15");
        assert_eq!(p["X-Amz-Expires"], "60");
        assert_eq!(p["X-Amz-Date"], "20250825T153012Z");
        assert_eq!(p["X-Amz-SignedHeaders"], "host;x-k8s-aws-id");
        assert_eq!(
            p["X-Amz-Credential"],
            "AKIDEXAMPLE/20250825/us-west-1/sts/aws4_request"
        );
        assert_eq!(p["X-Amz-Security-Token"], SESSION);
        // The raw URL keeps `/`, `+` and `=` of the session token percent-encoded.
        assert!(
            url.as_str().contains("%2F%2F")
                && url.as_str().contains("%2B")
                && url.as_str().contains("%3D%3D")
        );
    }

    #[test]
    fn the_sts_host_is_regional_and_follows_the_partition() {
        assert_eq!(sts_host("eu-central-1"), "sts.eu-central-1.amazonaws.com");
        assert_eq!(sts_host("cn-north-1"), "sts.cn-north-1.amazonaws.com.cn");
        assert_eq!(sts_host("us-gov-west-1"), "sts.us-gov-west-1.amazonaws.com");
    }

    #[test]
    fn tokens_for_another_cluster_or_time_differ() {
        let creds = Credentials::new("AKIDEXAMPLE", SECRET, None, None, "t");
        let a = presign_token("a", "us-east-1", &creds, at(SIGNED_AT)).unwrap();
        assert_eq!(
            a,
            presign_token("a", "us-east-1", &creds, at(SIGNED_AT)).unwrap()
        );
        assert_ne!(
            a,
            presign_token("b", "us-east-1", &creds, at(SIGNED_AT)).unwrap()
        );
        assert_ne!(
            a,
            presign_token("a", "us-east-1", &creds, at(SIGNED_AT + 1)).unwrap()
        );
    }

    #[derive(Debug)]
    struct ManualClock(std::sync::Mutex<SystemTime>);

    impl Clock for ManualClock {
        fn now(&self) -> SystemTime {
            *self.0.lock().unwrap()
        }
    }

    fn source() -> (IamTokenSource, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock(std::sync::Mutex::new(at(SIGNED_AT))));
        let creds = Credentials::new("AKIDEXAMPLE", SECRET, None, None, "t");
        let source = IamTokenSource::new(
            "c",
            "us-east-1",
            SharedCredentialsProvider::new(creds),
            clock.clone(),
        );
        (source, clock)
    }

    #[tokio::test]
    async fn a_token_is_reused_for_ten_minutes_then_renewed() {
        let (source, clock) = source();
        let first = source.token().await.unwrap();
        *clock.0.lock().unwrap() = at(SIGNED_AT + 599);
        assert_eq!(source.token().await.unwrap(), first);
        *clock.0.lock().unwrap() = at(SIGNED_AT + 600);
        let renewed = source.token().await.unwrap();
        assert_ne!(renewed, first);
        assert_eq!(params(&decode(&renewed))["X-Amz-Date"], "20250825T154012Z");
    }

    #[tokio::test]
    async fn invalidating_after_a_401_forces_a_new_token_at_once() {
        let (source, clock) = source();
        let first = source.token().await.unwrap();
        *clock.0.lock().unwrap() = at(SIGNED_AT + 5);
        source.invalidate().await;
        assert_ne!(source.token().await.unwrap(), first);
    }

    #[tokio::test]
    async fn a_clock_that_went_backwards_forces_a_new_token() {
        let (source, clock) = source();
        let first = source.token().await.unwrap();
        *clock.0.lock().unwrap() = at(SIGNED_AT - 30);
        assert_ne!(source.token().await.unwrap(), first);
    }

    #[tokio::test]
    async fn debug_output_never_shows_a_token_or_the_keys_it_was_signed_with() {
        let (source, _clock) = source();
        let token = source.token().await.unwrap();
        let credential = exec_credential(token.clone(), at(SIGNED_AT));
        let printed = [
            format!("{source:?}"),
            format!("{credential:?}"),
            format!("{:?}", credential.status),
        ];
        for text in &printed {
            assert!(!text.contains(&token), "{text}");
            assert!(!text.contains("k8s-aws-v1."), "{text}");
            assert!(!text.contains(SECRET), "{text}");
        }
        assert!(printed[0].contains("a token (redacted)"), "{}", printed[0]);
        assert!(
            printed[1].contains("2025-08-25T15:44:12Z"),
            "{}",
            printed[1]
        );
    }

    #[test]
    fn the_exec_credential_has_the_shape_kubectl_expects() {
        let value =
            serde_json::to_value(exec_credential("k8s-aws-v1.x".into(), at(SIGNED_AT))).unwrap();
        assert_eq!(value["apiVersion"], "client.authentication.k8s.io/v1beta1");
        assert_eq!(value["kind"], "ExecCredential");
        assert_eq!(value["status"]["token"], "k8s-aws-v1.x");
        assert_eq!(
            value["status"]["expirationTimestamp"],
            "2025-08-25T15:44:12Z"
        );
    }

    mod describe {
        use super::*;
        use aws_sdk_eks::operation::describe_cluster::{
            DescribeClusterError, DescribeClusterOutput,
        };
        use aws_sdk_eks::types::{Certificate, Cluster, error::ResourceNotFoundException};
        use aws_smithy_mocks::{RuleMode, mock, mock_client};

        #[tokio::test]
        async fn describe_cluster_returns_the_endpoint_and_decoded_ca() {
            let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
            let rule = mock!(aws_sdk_eks::Client::describe_cluster)
                .match_requests(|r| r.name() == Some("barun-dev"))
                .then_output(move || {
                    DescribeClusterOutput::builder()
                        .cluster(
                            Cluster::builder()
                                .endpoint("https://ABC.gr7.ap-northeast-2.eks.amazonaws.com")
                                .certificate_authority(
                                    Certificate::builder()
                                        .data(base64::engine::general_purpose::STANDARD.encode(pem))
                                        .build(),
                                )
                                .build(),
                        )
                        .build()
                });
            let client = mock_client!(aws_sdk_eks, RuleMode::Sequential, [&rule]);
            let access = describe_cluster(&client, "barun-dev").await.unwrap();
            assert_eq!(
                access.endpoint,
                "https://ABC.gr7.ap-northeast-2.eks.amazonaws.com"
            );
            assert_eq!(access.ca_pem, pem.as_bytes());
            assert_eq!(rule.num_calls(), 1);
        }

        #[tokio::test]
        async fn a_missing_cluster_is_a_permanent_error_naming_the_setting() {
            let rule = mock!(aws_sdk_eks::Client::describe_cluster).then_error(|| {
                DescribeClusterError::ResourceNotFoundException(
                    ResourceNotFoundException::builder()
                        .message("No cluster found")
                        .build(),
                )
            });
            let client = mock_client!(aws_sdk_eks, [&rule]);
            let error = describe_cluster(&client, "nope").await.unwrap_err();
            assert!(!error.is_retryable());
            assert!(error.to_string().contains("CLUSTER_NAME"), "{error}");
        }

        #[tokio::test]
        async fn a_cluster_without_endpoint_is_reported_as_incomplete() {
            let rule = mock!(aws_sdk_eks::Client::describe_cluster).then_output(|| {
                DescribeClusterOutput::builder()
                    .cluster(Cluster::builder().build())
                    .build()
            });
            let client = mock_client!(aws_sdk_eks, [&rule]);
            let error = describe_cluster(&client, "new").await.unwrap_err();
            assert!(error.to_string().contains("CREATING"), "{error}");
        }
    }
}
