//! Bearer-token checks as aws-iam-authenticator makes them, then the signature check that
//! STS would make, done locally by signing the same request again with the known secret.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// An IAM identity the stand-in knows, and what RBAC lets it do.
#[derive(Debug, Clone)]
pub struct Identity {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// When set, the presigned URL must carry exactly this STS security token
    /// (`X-Amz-Security-Token`), as temporary credentials do.
    pub session_token: Option<String>,
    /// What GetCallerIdentity would return; the API server's user name.
    pub arn: String,
    /// The Kubernetes groups its access entry maps it to, which a `SubjectAccessReview`
    /// names.
    pub groups: Vec<String>,
    pub grants: Vec<Grant>,
}

/// RBAC: these verbs on one resource of `argoproj.io` in this namespace (`*` for every
/// namespace and the cluster scope).
#[derive(Debug, Clone)]
pub struct Grant {
    pub resource: String,
    pub verbs: Vec<String>,
    pub namespace: String,
    /// RBAC `resourceNames`: empty for every object; else only these (and never a list).
    pub names: Vec<String>,
}

/// What the function needs on `imageupdaters` in a namespace, as `deploy/rbac.yaml` grants.
pub fn image_updater_grants(namespace: &str) -> Vec<Grant> {
    vec![
        Grant::on("imageupdaters", &["list"], namespace),
        Grant::on("imageupdaters/status", &["patch"], namespace),
    ]
}

impl Grant {
    /// Verbs on named objects only (`resourceNames`).
    pub fn named(resource: &str, verbs: &[&str], namespace: &str, names: &[&str]) -> Self {
        Self {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..Self::on(resource, verbs, namespace)
        }
    }

    /// Verbs on `applications`.
    pub fn new(verbs: &[&str], namespace: &str) -> Self {
        Self::on("applications", verbs, namespace)
    }

    /// Verbs on another resource (`applicationsets`).
    pub fn on(resource: &str, verbs: &[&str], namespace: &str) -> Self {
        Self {
            resource: resource.to_string(),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            namespace: namespace.to_string(),
            names: Vec::new(),
        }
    }
}

impl Identity {
    /// May this identity `verb` the `resource` in `namespace` (`None`: cluster scope)?
    pub fn may(&self, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
        self.may_on(verb, resource, namespace, None)
    }

    /// As RBAC decides: a grant with `resourceNames` covers only requests for those names.
    pub fn may_on(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> bool {
        self.grants.iter().any(|g| {
            (g.resource == resource || g.resource == "*")
                && g.verbs.iter().any(|v| v == verb || v == "*")
                && (g.namespace == "*" || Some(g.namespace.as_str()) == namespace)
                && (g.names.is_empty() || name.is_some_and(|n| g.names.iter().any(|g| g == n)))
        })
    }
}

const ALLOWED_PARAMETERS: [&str; 9] = [
    "action",
    "version",
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-signedheaders",
];
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Checks a bearer token for `cluster` at `now`. The error says which rule failed.
pub fn verify<'a>(
    token: &str,
    cluster: &str,
    identities: &'a [Identity],
    now: SystemTime,
) -> Result<&'a Identity, String> {
    if token.len() > 4096 {
        return Err("token is longer than 4096 bytes".into());
    }
    let encoded = token
        .strip_prefix("k8s-aws-v1.")
        .ok_or("token lacks the k8s-aws-v1. prefix")?;
    let decoded = URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|e| format!("token is not base64url: {e}"))?;
    let text = String::from_utf8(decoded).map_err(|_| "token URL is not UTF-8")?;
    let url = url::Url::parse(&text).map_err(|e| format!("token is not a URL: {e}"))?;
    if url.scheme() != "https" {
        return Err(format!("unexpected scheme {}", url.scheme()));
    }
    if url.path() != "/" {
        return Err(format!("unexpected path {}", url.path()));
    }
    let host = url.host_str().unwrap_or_default().to_string();

    let mut params = BTreeMap::new();
    for (name, value) in url.query_pairs() {
        let lower = name.to_ascii_lowercase();
        if !ALLOWED_PARAMETERS.contains(&lower.as_str()) {
            return Err(format!("non-allowlisted query parameter {name}"));
        }
        if params.insert(lower, value.into_owned()).is_some() {
            return Err(format!("duplicate query parameter {name}"));
        }
    }
    let param = |name: &str| params.get(name).map(String::as_str).unwrap_or_default();
    if param("action") != "GetCallerIdentity" {
        return Err("unexpected action parameter".into());
    }
    if !param("x-amz-signedheaders")
        .split(';')
        .any(|h| h == "x-k8s-aws-id")
    {
        return Err("client did not sign the x-k8s-aws-id header".into());
    }
    let expires: u64 = param("x-amz-expires")
        .parse()
        .map_err(|_| "X-Amz-Expires is not an integer")?;
    if expires > 900 {
        return Err("X-Amz-Expires is above 900".into());
    }
    let signed_at = parse_amz_date(param("x-amz-date"))?;
    if now > signed_at + TOKEN_LIFETIME {
        return Err("token has expired".into());
    }
    if signed_at > now + Duration::from_secs(5 * 60) {
        // STS refuses signatures from too far in the future.
        return Err("token is signed in the future".into());
    }

    // What STS does with the URL: find the key, check the scope, sign again, compare.
    let credential = param("x-amz-credential");
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key, _date, region, service, terminator] = scope.as_slice() else {
        return Err("malformed X-Amz-Credential".into());
    };
    if *service != "sts" || *terminator != "aws4_request" {
        return Err("credential scope is not sts".into());
    }
    if host != format!("sts.{region}.amazonaws.com")
        && !(host == "sts.amazonaws.com" && *region == "us-east-1")
    {
        return Err(format!(
            "host {host} does not match signing region {region}"
        ));
    }
    let identity = identities
        .iter()
        .find(|i| i.access_key_id == *access_key)
        .ok_or_else(|| format!("unknown access key {access_key}"))?;
    let session = params.get("x-amz-security-token").cloned();
    if identity.session_token.is_some() && identity.session_token != session {
        return Err("session token does not match".into());
    }
    let expected = resign(
        identity, session, region, &host, cluster, signed_at, expires,
    )?;
    if expected != param("x-amz-signature") {
        return Err("signature does not match (wrong secret or cluster name)".into());
    }
    Ok(identity)
}

fn resign(
    identity: &Identity,
    session: Option<String>,
    region: &str,
    host: &str,
    cluster: &str,
    at: SystemTime,
    expires: u64,
) -> Result<String, String> {
    let credentials = Credentials::new(
        identity.access_key_id.clone(),
        identity.secret_access_key.clone(),
        session,
        None,
        "standin",
    );
    let identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(expires));
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(at)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let url = format!("https://{host}/?Action=GetCallerIdentity&Version=2011-06-15");
    let request = SignableRequest::new(
        "GET",
        url.as_str(),
        [("x-k8s-aws-id", cluster)].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| e.to_string())?;
    let (_, signature) = sign(request, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(signature)
}

fn parse_amz_date(text: &str) -> Result<SystemTime, String> {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    time::PrimitiveDateTime::parse(text, format)
        .map(|t| t.assume_utc().into())
        .map_err(|_| format!("X-Amz-Date `{text}` is not YYYYMMDDTHHMMSSZ"))
}
