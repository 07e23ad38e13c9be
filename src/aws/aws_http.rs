//! The HTTP client the function's AWS SDK clients send through: `reqwest`, the client the
//! function already uses for the Kubernetes API and the Git hosts.
//!
//! The SDK's own default client is a second HTTP stack (hyper-util's pooled client,
//! hyper-rustls and an HTTP/2 implementation none of our AWS calls use), which is a tenth of
//! the function binary. Every call the function makes (ECR, EKS, STS, SNS, Secrets Manager,
//! CodeCommit) sends and receives a body that is already in memory, so a thin adapter does:
//! the SDK signs, retries and times out as before, and only the bytes travel differently.
//! A request with a streaming body is refused with an error that says so. The laptop
//! commands keep the SDK's default client.

use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;

/// The SDK's default connect timeout, used when the SDK configuration names none.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// One connection pool per connect timeout the SDK asks for (in practice one: the SDK
/// configuration sets a single timeout for every client).
#[derive(Debug, Default)]
pub struct AwsHttpClient {
    pools: std::sync::Mutex<Vec<(Option<Duration>, SharedHttpConnector)>>,
}

impl AwsHttpClient {
    pub fn new() -> Self {
        Self::default()
    }
}

impl HttpClient for AwsHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let connect = settings.connect_timeout();
        let mut pools = match self.pools.lock() {
            Ok(pools) => pools,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((_, connector)) = pools.iter().find(|(timeout, _)| *timeout == connect) {
            return connector.clone();
        }
        let connector = SharedHttpConnector::new(ReqwestConnector::new(
            connect.unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            settings.read_timeout(),
        ));
        pools.push((connect, connector.clone()));
        connector
    }
}

#[derive(Debug, Clone)]
struct ReqwestConnector {
    /// `None` when the client could not be built; every call then says why.
    http: Result<reqwest::Client, String>,
    read_timeout: Option<Duration>,
}

impl ReqwestConnector {
    fn new(connect_timeout: Duration, read_timeout: Option<Duration>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            // Signed requests carry `x-amz-security-token`; AWS APIs answer, never redirect.
            .redirect(reqwest::redirect::Policy::none())
            // AWS closes idle connections after about a minute; not reusing one it may have
            // dropped saves a failed first attempt.
            .pool_idle_timeout(Duration::from_secs(50))
            // The SDK reads and checks bodies as AWS sent them; it asks for no encoding.
            .no_gzip()
            .build()
            .map_err(|e| format!("the HTTP client for AWS cannot be built: {e}"));
        Self { http, read_timeout }
    }
}

impl HttpConnector for ReqwestConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let this = self.clone();
        HttpConnectorFuture::new(async move { this.send(request).await })
    }
}

impl ReqwestConnector {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, ConnectorError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| ConnectorError::other(e.clone().into(), None))?;
        let request = request
            .try_into_http1x()
            .map_err(|e| ConnectorError::user(e.into()))?;
        let (parts, body) = request.into_parts();
        let body = body.bytes().map(<[u8]>::to_vec).ok_or_else(|| {
            ConnectorError::user(
                "this AWS call streams its request body, which the function's HTTP client does not send"
                    .into(),
            )
        })?;
        let mut outgoing = http
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body);
        // The SDK's read timeout bounds the wait for the first byte; reqwest's per-request
        // timeout bounds the whole exchange, which for in-memory bodies is the same wait.
        if let Some(read) = self.read_timeout {
            outgoing = outgoing.timeout(read);
        }
        let response = outgoing.send().await.map_err(classify)?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(classify)?;
        let mut answer = http::Response::new(SdkBody::from(bytes));
        *answer.status_mut() = status;
        *answer.headers_mut() = headers;
        HttpResponse::try_from(answer).map_err(|e| ConnectorError::other(e.into(), None))
    }
}

/// The SDK retries timeouts and I/O errors as transient; a request it could not build is
/// the caller's mistake and is not retried.
fn classify(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        ConnectorError::timeout(error.into())
    } else if error.is_builder() {
        ConnectorError::user(error.into())
    } else if error.is_connect() || error.is_request() || error.is_body() {
        ConnectorError::io(error.into())
    } else {
        ConnectorError::other(error.into(), Some(ErrorKind::TransientError))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A one-shot HTTP/1.1 server on loopback: answers `response` to the first request and
    /// hands back what it received.
    fn serve_once(response: &'static [u8]) -> (String, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        let handle = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("accept");
            let mut received = Vec::new();
            let mut chunk = [0u8; 4096];
            // Headers, then the body its Content-Length announces.
            loop {
                let n = socket.read(&mut chunk).expect("read");
                received.extend_from_slice(&chunk[..n]);
                if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&received[..end]).to_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if received.len() >= end + 4 + length || n == 0 {
                        break;
                    }
                }
            }
            socket.write_all(response).expect("write");
            received
        });
        (address, handle)
    }

    fn connector(read_timeout: Option<Duration>) -> SharedHttpConnector {
        let components = RuntimeComponentsBuilder::for_tests()
            .build()
            .expect("components");
        let mut settings = HttpConnectorSettings::builder();
        if let Some(read) = read_timeout {
            settings = settings.read_timeout(read);
        }
        AwsHttpClient::new().http_connector(&settings.build(), &components)
    }

    fn request(uri: &str, body: SdkBody) -> HttpRequest {
        let request = http::Request::builder()
            .method("POST")
            .uri(uri)
            .header(
                "x-amz-target",
                "AmazonEC2ContainerRegistry_V20150921.DescribeImages",
            )
            .header("content-type", "application/x-amz-json-1.1")
            .body(body)
            .expect("request");
        HttpRequest::try_from(request).expect("smithy request")
    }

    #[tokio::test]
    async fn the_request_s_method_headers_and_body_reach_the_server_and_the_answer_comes_back() {
        let (address, server) = serve_once(
            b"HTTP/1.1 400 Bad Request\r\nx-amzn-requestid: r-1\r\ncontent-length: 27\r\n\r\n{\"__type\":\"ThrottlingFoo\"}\n",
        );
        let response = connector(None)
            .call(request(&format!("{address}/"), SdkBody::from("{\"x\":1}")))
            .await
            .expect("an answer");
        assert_eq!(response.status().as_u16(), 400);
        assert_eq!(response.headers().get("x-amzn-requestid"), Some("r-1"));
        assert_eq!(
            response.body().bytes(),
            Some(&b"{\"__type\":\"ThrottlingFoo\"}\n"[..])
        );
        let received = String::from_utf8(server.join().expect("server")).expect("utf-8");
        assert!(received.starts_with("POST / HTTP/1.1\r\n"), "{received}");
        let lower = received.to_lowercase();
        assert!(
            lower.contains("x-amz-target: amazonec2containerregistry_v20150921.describeimages")
        );
        assert!(lower.contains("content-length: 7"), "{received}");
        assert!(received.ends_with("{\"x\":1}"), "{received}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_io_error_the_sdk_retries() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        drop(listener);
        let error = connector(None)
            .call(request(&address, SdkBody::empty()))
            .await
            .expect_err("refused");
        assert!(error.is_io(), "{error:?}");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_a_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("address"));
        let error = connector(Some(Duration::from_millis(200)))
            .call(request(&address, SdkBody::empty()))
            .await
            .expect_err("no answer");
        assert!(error.is_timeout(), "{error:?}");
        drop(listener);
    }

    #[tokio::test]
    async fn a_body_not_in_memory_is_refused_with_a_reason() {
        let error = connector(None)
            .call(request("http://127.0.0.1:1", SdkBody::taken()))
            .await
            .expect_err("refused");
        assert!(error.is_user(), "{error:?}");
        assert!(
            format!("{error:?}").contains("streams its request body"),
            "{error:?}"
        );
    }

    #[test]
    fn one_pool_serves_every_client_with_the_same_connect_timeout() {
        let components = RuntimeComponentsBuilder::for_tests()
            .build()
            .expect("components");
        let client = AwsHttpClient::new();
        let settings = HttpConnectorSettings::builder()
            .connect_timeout(Duration::from_secs(2))
            .build();
        let _ = client.http_connector(&settings, &components);
        let _ = client.http_connector(&settings, &components);
        let other = HttpConnectorSettings::builder()
            .connect_timeout(Duration::from_secs(5))
            .build();
        let _ = client.http_connector(&other, &components);
        assert_eq!(client.pools.lock().expect("lock").len(), 2);
    }
}
