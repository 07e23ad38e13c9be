//! Signature Version 4 as AWS checks it on every API request: the access key must be one the
//! stand-in knows, the session token must be that key's, the request must be signed within
//! five minutes, and the signature must be what signing the same request again with the key's
//! secret gives (the same method, path, query, signed headers and body, the same region and
//! service in the credential scope). Refusals come back in AWS's own error shapes, so the
//! code under test meets what it would meet in AWS: wrong credential wiring (the wrong role
//! signing a call, an assumed role's token missing from a cross-account call) fails here as
//! it would there.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use axum::http::{HeaderMap, Method, StatusCode, Uri};

use crate::token::Identity;

/// How far a request's signing time may be from now, either way.
const SKEW: Duration = Duration::from_secs(5 * 60);

/// Why a request is refused: the HTTP status, AWS's error code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// The protocol family of a request, which decides how AWS names a refusal: the JSON
/// protocols (ECR, SQS, Secrets Manager, CodeCommit, EventBridge, Lambda, EKS) say
/// `UnrecognizedClientException`, the query protocols (STS, SNS) `InvalidClientTokenId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Json,
    Query,
}

impl Protocol {
    fn unknown_key(self) -> &'static str {
        match self {
            Self::Json => "UnrecognizedClientException",
            Self::Query => "InvalidClientTokenId",
        }
    }

    fn bad_signature(self) -> &'static str {
        match self {
            Self::Json => "InvalidSignatureException",
            Self::Query => "SignatureDoesNotMatch",
        }
    }

    fn expired(self) -> &'static str {
        match self {
            Self::Json => "ExpiredTokenException",
            Self::Query => "ExpiredToken",
        }
    }

    fn missing(self) -> &'static str {
        match self {
            Self::Json => "MissingAuthenticationTokenException",
            Self::Query => "MissingAuthenticationToken",
        }
    }
}

fn refuse(status: StatusCode, code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        code,
        message: message.into(),
    }
}

/// The parts of `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`.
struct Authorization<'a> {
    access_key: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn parse_authorization(text: &str) -> Option<Authorization<'_>> {
    let rest = text.strip_prefix("AWS4-HMAC-SHA256 ")?;
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',').map(str::trim) {
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let scope: Vec<&str> = credential?.split('/').collect();
    let [access_key, date, region, service, "aws4_request"] = scope.as_slice() else {
        return None;
    };
    Some(Authorization {
        access_key,
        date,
        region,
        service,
        signed_headers: signed?.split(';').collect(),
        signature: signature?,
    })
}

fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    time::PrimitiveDateTime::parse(text, format)
        .ok()
        .map(|t| t.assume_utc().into())
}

/// A request as it arrived.
pub struct Request<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// The keys AWS knows: their identities, and those whose session it would call expired.
pub struct Keys<'a> {
    pub identities: &'a [Identity],
    pub expired: &'a [String],
}

/// The identity that signed the request, or why AWS would refuse it.
pub fn verify<'i>(
    request: &Request<'_>,
    keys: &Keys<'i>,
    protocol: Protocol,
    now: SystemTime,
) -> Result<&'i Identity, Refusal> {
    let headers = request.headers;
    let (identities, expired) = (keys.identities, keys.expired);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(authorization) = header("authorization") else {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            protocol.missing(),
            "Missing Authentication Token",
        ));
    };
    let Some(auth) = parse_authorization(authorization) else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters",
        ));
    };
    let invalid_token = || {
        refuse(
            StatusCode::FORBIDDEN,
            protocol.unknown_key(),
            "The security token included in the request is invalid.",
        )
    };
    let identity = identities
        .iter()
        .find(|i| i.access_key_id == auth.access_key)
        .ok_or_else(invalid_token)?;
    let session = header("x-amz-security-token").map(str::to_string);
    if identity.session_token != session {
        return Err(invalid_token());
    }
    if expired.iter().any(|k| k == auth.access_key) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            protocol.expired(),
            "The security token included in the request is expired",
        ));
    }
    let amz_date = header("x-amz-date").unwrap_or_default();
    let signed_at = parse_amz_date(amz_date).ok_or_else(|| {
        refuse(
            StatusCode::BAD_REQUEST,
            "IncompleteSignatureException",
            format!("X-Amz-Date `{amz_date}` is not YYYYMMDDTHHMMSSZ"),
        )
    })?;
    if !amz_date.starts_with(auth.date) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            protocol.bad_signature(),
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP",
        ));
    }
    let skew = now
        .duration_since(signed_at)
        .or_else(|_| signed_at.duration_since(now))
        .unwrap_or_default();
    if skew > SKEW {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            protocol.bad_signature(),
            format!(
                "Signature expired: {amz_date} is not within five minutes of the stand-in's time"
            ),
        ));
    }
    let mismatch = |why: &str| {
        refuse(
            StatusCode::FORBIDDEN,
            protocol.bad_signature(),
            format!(
                "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. ({why})"
            ),
        )
    };
    let expected =
        resign(request, &auth, identity, session, signed_at).map_err(|e| mismatch(&e))?;
    if expected != auth.signature {
        return Err(mismatch("the signature differs"));
    }
    Ok(identity)
}

/// The signature of the request as the identity's secret signs it, over exactly the headers
/// the request says it signed.
fn resign(
    request: &Request<'_>,
    auth: &Authorization<'_>,
    identity: &Identity,
    session: Option<String>,
    at: SystemTime,
) -> Result<String, String> {
    let (method, uri, headers, body) = (request.method, request.uri, request.headers, request.body);
    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .ok_or("no Host header")?;
    // The headers signing adds itself are left out of what is handed in; every other signed
    // header must be present, once.
    let mut signed: Vec<(&str, &str)> = Vec::new();
    for name in &auth.signed_headers {
        if matches!(
            *name,
            "x-amz-date" | "x-amz-security-token" | "authorization"
        ) {
            continue;
        }
        let value = headers
            .get(*name)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("signed header {name} is missing"))?;
        signed.push((name, value));
    }
    let credentials = Credentials::new(
        identity.access_key_id.clone(),
        identity.secret_access_key.clone(),
        session,
        None,
        "standin",
    )
    .into();
    let mut settings = SigningSettings::default();
    // Sign exactly the headers the client listed: none is left out because aws-sigv4 would
    // skip it by default (user-agent), none added.
    settings.excluded_headers = None;
    let params = v4::SigningParams::builder()
        .identity(&credentials)
        .region(auth.region)
        .name(auth.service)
        .time(at)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let path_and_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let url = format!("https://{host}{path_and_query}");
    let request = SignableRequest::new(
        method.as_str(),
        url.as_str(),
        signed.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, signature) = sign(request, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    // The same headers signed, or the signature means something else.
    let listed = instructions
        .headers()
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.to_string())
        .unwrap_or_default();
    let ours = listed
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or_default()
        .to_string();
    if ours != auth.signed_headers.join(";") {
        return Err(format!(
            "signed headers {} where the stand-in signs {ours}",
            auth.signed_headers.join(";")
        ));
    }
    Ok(signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            access_key_id: "ASIATESTKEY".into(),
            secret_access_key: "secret".into(),
            session_token: Some("session".into()),
            arn: "arn:aws:sts::768157413559:assumed-role/role/fn".into(),
            groups: Vec::new(),
            grants: Vec::new(),
        }
    }

    /// A request signed by aws-sigv4 as the SDK signs one.
    fn signed(
        secret: &str,
        token: Option<&str>,
        at: SystemTime,
        region: &str,
    ) -> (Method, Uri, HeaderMap, Vec<u8>) {
        let body = br#"{"repositoryName":"r"}"#.to_vec();
        let credentials =
            Credentials::new("ASIATESTKEY", secret, token.map(str::to_string), None, "t").into();
        let params = v4::SigningParams::builder()
            .identity(&credentials)
            .region(region)
            .name("ecr")
            .time(at)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let url = "https://127.0.0.1:4443/";
        let base = [
            ("host", "127.0.0.1:4443"),
            ("content-type", "application/x-amz-json-1.1"),
            (
                "x-amz-target",
                "AmazonEC2ContainerRegistry_V20150921.DescribeImages",
            ),
        ];
        let request =
            SignableRequest::new("POST", url, base.into_iter(), SignableBody::Bytes(&body))
                .unwrap();
        let (instructions, _) = sign(request, &params).unwrap().into_parts();
        let mut headers = HeaderMap::new();
        for (name, value) in base {
            headers.insert(name, value.parse().unwrap());
        }
        for (name, value) in instructions.headers() {
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
            headers.insert(name, value.parse().unwrap());
        }
        (Method::POST, Uri::from_static("/"), headers, body)
    }

    #[test]
    fn a_request_signed_with_the_right_key_is_taken_and_every_wrong_one_refused_as_aws_does() {
        let now = SystemTime::now();
        let known = [identity()];
        let keys = Keys {
            identities: &known,
            expired: &[],
        };
        let check = |(method, uri, headers, body): (Method, Uri, HeaderMap, Vec<u8>)| {
            let request = Request {
                method: &method,
                uri: &uri,
                headers: &headers,
                body: &body,
            };
            verify(&request, &keys, Protocol::Json, now)
                .map(|i| i.arn.clone())
                .map_err(|r| r.code)
        };
        assert_eq!(
            check(signed("secret", Some("session"), now, "ap-northeast-2")),
            Ok("arn:aws:sts::768157413559:assumed-role/role/fn".to_string())
        );
        assert_eq!(
            check(signed("wrong", Some("session"), now, "ap-northeast-2")),
            Err("InvalidSignatureException")
        );
        assert_eq!(
            check(signed("secret", None, now, "ap-northeast-2")),
            Err("UnrecognizedClientException"),
            "a session key without its token"
        );
        assert_eq!(
            check(signed("secret", Some("another"), now, "ap-northeast-2")),
            Err("UnrecognizedClientException")
        );
        assert_eq!(
            check(signed(
                "secret",
                Some("session"),
                now - Duration::from_secs(600),
                "ap-northeast-2"
            )),
            Err("InvalidSignatureException"),
            "signed ten minutes ago"
        );
        // A body changed after signing, and a header added to the signed list.
        let (method, uri, headers, mut body) =
            signed("secret", Some("session"), now, "ap-northeast-2");
        body.push(b' ');
        assert_eq!(
            check((method, uri, headers, body)),
            Err("InvalidSignatureException")
        );
        let (method, uri, mut headers, body) =
            signed("secret", Some("session"), now, "ap-northeast-2");
        headers.insert(
            "x-amz-target",
            "AmazonEC2ContainerRegistry_V20150921.BatchDeleteImage"
                .parse()
                .unwrap(),
        );
        assert_eq!(
            check((method, uri, headers, body)),
            Err("InvalidSignatureException")
        );
        // An expired session, and no signature at all.
        let (method, uri, headers, body) = signed("secret", Some("session"), now, "ap-northeast-2");
        let request = Request {
            method: &method,
            uri: &uri,
            headers: &headers,
            body: &body,
        };
        let expired_keys = ["ASIATESTKEY".to_string()];
        let expired = Keys {
            identities: &known,
            expired: &expired_keys,
        };
        let refused = verify(&request, &expired, Protocol::Json, now);
        assert_eq!(
            refused.map_err(|r| r.code).err(),
            Some("ExpiredTokenException")
        );
        let empty = HeaderMap::new();
        let unsigned = Request {
            method: &Method::POST,
            uri: &uri,
            headers: &empty,
            body: &[],
        };
        let refused = verify(&unsigned, &keys, Protocol::Query, now);
        assert_eq!(
            refused.map_err(|r| r.code).err(),
            Some("MissingAuthenticationToken")
        );
    }
}
