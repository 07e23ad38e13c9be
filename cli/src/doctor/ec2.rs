//! The few EC2 reads doctor makes for a VPC function (security groups, route tables, VPC
//! endpoints, the VPC), in EC2's Query protocol, signed with SigV4 over the operator's
//! credentials. The EC2 SDK crate is among the largest there are; five `Describe` calls
//! need only a signed form and an XML reader.

use std::time::{Duration, SystemTime};

use argocd_ecr_updater::aws::aws_error::{self, Cause, Described, classify};
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

const VERSION: &str = "2016-11-15";
/// An answer larger than this is not one doctor asked for.
const MAX_ANSWER_BYTES: usize = 8 << 20;

pub(super) struct Ec2 {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: Option<aws_credential_types::provider::SharedCredentialsProvider>,
}

impl Ec2 {
    pub(super) fn new(sdk: &aws_config::SdkConfig) -> Self {
        let region = sdk
            .region()
            .map_or_else(|| "us-east-1".to_string(), ToString::to_string);
        // As the SDK would: the service's own endpoint variable, then the global one.
        let endpoint = std::env::var("AWS_ENDPOINT_URL_EC2")
            .ok()
            .or_else(|| sdk.endpoint_url().map(str::to_string))
            .unwrap_or_else(|| {
                format!(
                    "https://ec2.{region}.{}",
                    argocd_ecr_updater::partition::dns_suffix(&region)
                )
            });
        let http = reqwest::Client::builder()
            // The request is signed for this host; an answer that redirects is not EC2's.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Self {
            http,
            endpoint,
            region,
            credentials: sdk.credentials_provider(),
        }
    }

    /// Calls `action` with `params` and returns EC2's XML answer.
    pub(super) async fn call(
        &self,
        action: &str,
        params: &[(String, String)],
    ) -> Result<String, Described> {
        let failed =
            |cause: Cause, code: Option<String>, text: String| Described { cause, code, text };
        let Some(provider) = &self.credentials else {
            return Err(failed(
                Cause::NoCredentials,
                None,
                aws_error::NO_CREDENTIALS.into(),
            ));
        };
        let credentials = provider.provide_credentials().await.map_err(|e| {
            let text = e.to_string();
            failed(
                classify(None, &format!("no credentials: {text}")),
                None,
                text,
            )
        })?;
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", action);
        form.append_pair("Version", VERSION);
        for (name, value) in params {
            form.append_pair(name, value);
        }
        let body = form.finish();
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let identity = credentials.into();
        let signing = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("ec2")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| failed(Cause::Other, None, e.to_string()))?
            .into();
        let request = SignableRequest::new(
            "POST",
            &self.endpoint,
            [("content-type", content_type)].into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|e| failed(Cause::Other, None, e.to_string()))?;
        let (instructions, _) = sign(request, &signing)
            .map_err(|e| failed(Cause::Other, None, e.to_string()))?
            .into_parts();
        let mut send = self
            .http
            .post(&self.endpoint)
            .header("content-type", content_type)
            .body(body);
        for (name, value) in instructions.headers() {
            send = send.header(name, value);
        }
        let mut response = send.send().await.map_err(|e| {
            let chain = aws_error::chain(&e);
            failed(classify(None, &chain), None, chain)
        })?;
        let status = response.status();
        let mut text = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            let chain = aws_error::chain(&e);
            failed(classify(None, &chain), None, chain)
        })? {
            if text.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(failed(
                    Cause::Other,
                    None,
                    format!("{action}: an answer over {MAX_ANSWER_BYTES} bytes"),
                ));
            }
            text.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        if status.is_success() {
            return Ok(text);
        }
        let (code, message) =
            error_of(&text).unwrap_or_else(|| (format!("HTTP {}", status.as_u16()), text.clone()));
        Err(failed(classify(Some(&code), &message), Some(code), message))
    }
}

/// EC2's error answer: `<Response><Errors><Error><Code>…</Code><Message>…`.
fn error_of(text: &str) -> Option<(String, String)> {
    let document = roxmltree::Document::parse(text).ok()?;
    let error = document.descendants().find(|n| n.has_tag_name("Error"))?;
    let field = |name: &str| {
        error
            .children()
            .find(|n| n.tag_name().name() == name)
            .and_then(|n| n.text())
            .map(str::to_string)
    };
    Some((field("Code")?, field("Message").unwrap_or_default()))
}

/// The elements named `name` anywhere under `node` (EC2 answers are namespaced; names are
/// matched without it).
pub(super) fn all<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'input>> {
    node.descendants()
        .filter(move |n| n.tag_name().name() == name)
}

/// The text of `node`'s child element `name`.
pub(super) fn text<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.children()
        .find(|n| n.tag_name().name() == name)
        .and_then(|n| n.text())
}

/// `node`'s child element `name`, if any.
pub(super) fn child<'a, 'input>(
    node: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|n| n.tag_name().name() == name)
}

/// `Name.1`, `Name.2`… for a list parameter.
pub(super) fn numbered(name: &str, values: &[String]) -> Vec<(String, String)> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("{name}.{}", i + 1), v.clone()))
        .collect()
}

/// One filter, `Filter.<n>.Name` with its values.
pub(super) fn filter(n: usize, name: &str, values: &[String]) -> Vec<(String, String)> {
    let mut params = vec![(format!("Filter.{n}.Name"), name.to_string())];
    params.extend(numbered(&format!("Filter.{n}.Value"), values));
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ec2_error_answer_gives_its_code_and_message() {
        let answer = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>r</RequestID></Response>"#;
        assert_eq!(
            error_of(answer),
            Some((
                "UnauthorizedOperation".into(),
                "You are not authorized to perform this operation.".into()
            ))
        );
        assert_eq!(error_of("not xml"), None);
    }

    #[test]
    fn list_parameters_are_numbered_from_one() {
        assert_eq!(
            filter(1, "vpc-id", &["vpc-1".into()]),
            vec![
                ("Filter.1.Name".to_string(), "vpc-id".to_string()),
                ("Filter.1.Value.1".to_string(), "vpc-1".to_string())
            ]
        );
    }
}
