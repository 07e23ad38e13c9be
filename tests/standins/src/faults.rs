//! Scriptable faults and the request log, shared by every stand-in.
//!
//! A test says "the next N requests to this route answer 503" (or are delayed, or lose their
//! connection), then asserts on the log: which calls the function made, in what order, with
//! what bodies. That is how a test proves what a decision cost.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Which stand-in a request went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    Kube,
    Ecr,
    Eks,
    Sns,
    Sqs,
    SecretsManager,
    CodeCommit,
    GitHub,
    GitLab,
    Runtime,
}

/// One request, as the stand-in saw it.
#[derive(Debug, Clone, Serialize)]
pub struct LoggedRequest {
    pub service: Service,
    pub method: String,
    pub path: String,
    pub query: String,
    /// For ECR, the operation from `X-Amz-Target` (`DescribeImages`).
    pub operation: String,
    pub content_type: String,
    pub accept: String,
    /// The `Authorization` header as sent, so tests can tell which credential a request
    /// carried (a token reused, or minted anew). Never serialized into benchmark output.
    #[serde(skip)]
    pub authorization: String,
    /// For an AWS API call, the ARN of the identity whose signature the stand-in verified
    /// (which role made the call); empty for others.
    pub caller: String,
    pub body: String,
    /// The status sent; 0 when a fault dropped the connection.
    pub status: u16,
    /// Time the stand-in spent producing the answer, injected delays excluded, so that
    /// benchmarks can tell the function's time from the stand-in's.
    pub handling_us: u64,
    /// Bytes of the response body sent (what a client had to read and parse).
    pub response_bytes: usize,
    /// When the request arrived, for timelines (a cold start's, say).
    #[serde(skip)]
    pub arrived: Option<std::time::Instant>,
    /// When the stand-in began producing the answer (after any injected delay): with
    /// `handling_us`, the interval it was busy, so that a benchmark can count time in which
    /// several requests were handled at once only once.
    #[serde(skip)]
    pub handling_started: Option<std::time::Instant>,
    /// When the last byte of a stalled body (`FaultAction::StallAfter`) was handed to the
    /// connection: tests order other requests against it instead of timing them.
    #[serde(skip)]
    pub stall_ended: Arc<OnceLock<std::time::Instant>>,
}

/// The time in which at least one of these requests was being handled: the length of the
/// union of their handling intervals. Summing `handling_us` would count twice what two
/// stand-ins (or a GET waiting on a PATCH's lock) did at once. Requests never handled (a
/// fault answered them) count nothing.
pub fn busy_time(log: &[LoggedRequest]) -> std::time::Duration {
    use std::time::{Duration, Instant};
    let mut intervals: Vec<(Instant, Instant)> = log
        .iter()
        .filter_map(|r| {
            let from = r.handling_started?;
            Some((from, from + Duration::from_micros(r.handling_us)))
        })
        .collect();
    intervals.sort();
    let mut total = Duration::ZERO;
    let mut open: Option<(Instant, Instant)> = None;
    for (from, to) in intervals {
        open = match open {
            Some((start, end)) if from <= end => Some((start, end.max(to))),
            Some((start, end)) => {
                total += end - start;
                Some((from, to))
            }
            None => Some((from, to)),
        };
    }
    total + open.map_or(Duration::ZERO, |(start, end)| end - start)
}

/// What a matching request gets instead of (or before) its normal answer.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer this status at once, with a Kubernetes `Status` or AWS error body.
    Status { code: u16, retry_after: Option<u64> },
    /// Answer this AWS error (`AccessDeniedException`, `ExpiredTokenException`, …) with
    /// this status, as the AWS JSON protocol shapes it.
    AwsError { code: u16, kind: &'static str },
    /// Wait, then answer normally.
    Delay(Duration),
    /// Send headers, then break the connection mid-body.
    Drop,
    /// Answer normally, but send the body only up to the end of the first `marker` in it
    /// (all of it, if absent), then pause before the rest: a page whose head has arrived
    /// and whose items are still on the way, as a large list on a slow link.
    StallAfter {
        marker: &'static str,
        pause: Duration,
    },
    /// Answer `307 Temporary Redirect` to `location` (a 307 keeps the method and body, so a
    /// client that follows it resends the request, credentials and all).
    Redirect { location: String },
    /// Hold the request at the gate until enough are held there, then answer normally: the
    /// gate counts how many a client keeps in flight at once ([`Gate::most`]).
    Gate(Arc<Gate>),
}

/// A gate that holds requests until `release_at` of them wait at once (then, after a short
/// `grace` in which a client that sends more than it should is caught sending them, lets them
/// all go), or until `patience` runs out. What a test reads is the count, never a duration:
/// a slow machine makes a run slower, not its outcome different.
#[derive(Debug)]
pub struct Gate {
    release_at: usize,
    grace: Duration,
    patience: Duration,
    held: Mutex<usize>,
    most: std::sync::atomic::AtomicUsize,
    open: tokio::sync::Notify,
}

impl Gate {
    pub fn new(release_at: usize) -> Arc<Self> {
        Arc::new(Self {
            release_at: release_at.max(1),
            grace: Duration::from_millis(50),
            // Under the clients' own request timeouts (3 s in the tests), so a request the
            // gate holds too long is not retried into a second one.
            patience: Duration::from_secs(2),
            held: Mutex::new(0),
            most: std::sync::atomic::AtomicUsize::new(0),
            open: tokio::sync::Notify::new(),
        })
    }

    /// The most requests ever held at once.
    pub fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    async fn pass(&self) {
        let opened = self.open.notified();
        tokio::pin!(opened);
        opened.as_mut().enable();
        let held = {
            let mut held = lock(&self.held);
            *held += 1;
            self.most.fetch_max(*held, Ordering::SeqCst);
            *held
        };
        if held >= self.release_at {
            tokio::time::sleep(self.grace).await;
            self.open.notify_waiters();
        } else {
            let _ = tokio::time::timeout(self.patience, opened).await;
        }
        *lock(&self.held) -= 1;
    }
}

/// Which requests a fault applies to. Empty fields match anything.
#[derive(Debug, Clone, Default)]
pub struct Route {
    pub service: Option<Service>,
    pub method: Option<String>,
    pub path_contains: Option<String>,
    /// A part of the query string, to pick one page of a list (`continue=`).
    pub query_contains: Option<String>,
    pub operation: Option<String>,
}

impl Route {
    pub fn kube(method: &str, path_contains: &str) -> Self {
        Self {
            service: Some(Service::Kube),
            method: Some(method.to_string()),
            path_contains: Some(path_contains.to_string()),
            ..Self::default()
        }
    }

    pub fn ecr(operation: &str) -> Self {
        Self {
            service: Some(Service::Ecr),
            operation: Some(operation.to_string()),
            ..Self::default()
        }
    }

    pub fn github(method: &str, path_contains: &str) -> Self {
        Self {
            service: Some(Service::GitHub),
            method: Some(method.to_string()),
            path_contains: Some(path_contains.to_string()),
            ..Self::default()
        }
    }

    pub fn codecommit(operation: &str) -> Self {
        Self {
            service: Some(Service::CodeCommit),
            operation: Some(operation.to_string()),
            ..Self::default()
        }
    }

    pub fn gitlab(method: &str, path_contains: &str) -> Self {
        Self {
            service: Some(Service::GitLab),
            method: Some(method.to_string()),
            path_contains: Some(path_contains.to_string()),
            ..Self::default()
        }
    }

    pub fn eks() -> Self {
        Self {
            service: Some(Service::Eks),
            ..Self::default()
        }
    }

    /// This route, only for requests whose query string contains `part`.
    pub fn with_query(mut self, part: &str) -> Self {
        self.query_contains = Some(part.to_string());
        self
    }

    fn matches(
        &self,
        service: Service,
        method: &str,
        (path, query): (&str, &str),
        operation: &str,
    ) -> bool {
        self.service.is_none_or(|s| s == service)
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| path.contains(p))
            && self
                .query_contains
                .as_deref()
                .is_none_or(|q| query.contains(q))
            && self.operation.as_deref().is_none_or(|o| o == operation)
    }
}

#[derive(Debug)]
struct FaultRule {
    route: Route,
    remaining: u32,
    action: FaultAction,
}

/// State every stand-in shares: faults, the log, and the knobs on authentication.
#[derive(Debug, Default)]
pub struct Shared {
    log: Mutex<Vec<LoggedRequest>>,
    faults: Mutex<Vec<FaultRule>>,
    clock_skew_secs: AtomicI64,
    /// The test's clock, when the scenario runs on one: tokens are judged on the time the
    /// function signs them with, as the real API server and the function share real time.
    test_clock: Mutex<Option<std::sync::Arc<crate::clock::SimClock>>>,
    reject_tokens: AtomicU32,
    tls_handshakes: AtomicU64,
}

impl Shared {
    /// The next `count` requests matching `route` get `action`.
    pub fn inject(&self, route: Route, count: u32, action: FaultAction) {
        lock(&self.faults).push(FaultRule {
            route,
            remaining: count,
            action,
        });
    }

    pub fn clear_faults(&self) {
        lock(&self.faults).clear();
    }

    /// The next `count` bearer tokens are refused with 401, however valid.
    pub fn reject_next_tokens(&self, count: u32) {
        self.reject_tokens.store(count, Ordering::SeqCst);
    }

    pub(crate) fn take_token_rejection(&self) -> bool {
        self.reject_tokens
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Moves the stand-in's clock: token expiry is judged against `now + skew`.
    pub fn skew_clock(&self, seconds: i64) {
        self.clock_skew_secs.store(seconds, Ordering::SeqCst);
    }

    /// Judges tokens on `clock` instead of the wall clock.
    pub fn follow_clock(&self, clock: std::sync::Arc<crate::clock::SimClock>) {
        *lock(&self.test_clock) = Some(clock);
    }

    pub fn now(&self) -> std::time::SystemTime {
        let skew = self.clock_skew_secs.load(Ordering::SeqCst);
        let now = match lock(&self.test_clock).as_ref() {
            Some(clock) => clock.now().into(),
            None => std::time::SystemTime::now(),
        };
        if skew >= 0 {
            now + Duration::from_secs(skew.unsigned_abs())
        } else {
            now - Duration::from_secs(skew.unsigned_abs())
        }
    }

    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.log).clone()
    }

    /// TLS handshakes completed by the stand-ins that share this, since they started: a
    /// warm client that reuses its connections adds none, so a benchmark can tell an event
    /// that paid for a new connection from one that did not.
    pub fn tls_handshakes(&self) -> u64 {
        self.tls_handshakes.load(Ordering::SeqCst)
    }

    pub(crate) fn count_tls_handshake(&self) {
        self.tls_handshakes.fetch_add(1, Ordering::SeqCst);
    }

    pub fn clear_log(&self) {
        lock(&self.log).clear();
    }

    /// How many logged requests satisfy `predicate`.
    pub fn count(&self, predicate: impl Fn(&LoggedRequest) -> bool) -> usize {
        lock(&self.log).iter().filter(|r| predicate(r)).count()
    }

    fn take_fault(
        &self,
        service: Service,
        method: &str,
        target: (&str, &str),
        operation: &str,
    ) -> Option<FaultAction> {
        let mut faults = lock(&self.faults);
        let rule = faults
            .iter_mut()
            .find(|f| f.remaining > 0 && f.route.matches(service, method, target, operation))?;
        rule.remaining -= 1;
        Some(rule.action.clone())
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide the next test's failure.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bodies above this are refused: the stand-in must not be the thing that runs out of memory.
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// Middleware: log the request, then apply a matching fault or pass it on.
pub async fn intercept(
    State((shared, service)): State<(std::sync::Arc<Shared>, Service)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    // ECR and EKS share one listener, as they would share the SDK's endpoint override.
    // ECR, EKS, SNS and SQS share one listener, as they would share an endpoint override.
    let target = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let form = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    let service = match service {
        Service::Ecr if parts.uri.path().starts_with("/clusters/") => Service::Eks,
        Service::Ecr if target.starts_with("AmazonSQS") => Service::Sqs,
        Service::Ecr if target.starts_with("secretsmanager") => Service::SecretsManager,
        Service::Ecr if target.starts_with("CodeCommit_") => Service::CodeCommit,
        Service::Ecr if form => Service::Sns,
        other => other,
    };
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let operation = header("x-amz-target")
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_string();
    let method = parts.method.to_string();
    let path = parts.uri.path().to_string();
    let mut entry = LoggedRequest {
        service,
        method: method.clone(),
        path: path.clone(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        operation: operation.clone(),
        content_type: header("content-type"),
        accept: header("accept"),
        authorization: header("authorization"),
        caller: String::new(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
        status: 0,
        handling_us: 0,
        response_bytes: 0,
        arrived: Some(std::time::Instant::now()),
        handling_started: None,
        stall_ended: Arc::default(),
    };
    let query = parts.uri.query().unwrap_or_default();
    let fault = shared.take_fault(service, &method, (&path, query), &operation);
    let dropped = matches!(fault, Some(FaultAction::Drop));
    let response = match &fault {
        Some(FaultAction::Status { code, retry_after }) => {
            fault_response(service, *code, *retry_after)
        }
        Some(FaultAction::AwsError { code, kind }) => aws_error_response(*code, kind),
        Some(FaultAction::Redirect { location }) => Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header("location", location.as_str())
            .body(Body::empty())
            .unwrap_or_default(),
        Some(FaultAction::Drop) => {
            let broken = futures_error_body();
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .body(broken)
                .unwrap_or_default()
        }
        Some(FaultAction::Delay(_) | FaultAction::StallAfter { .. } | FaultAction::Gate(_))
        | None => {
            if let Some(FaultAction::Delay(duration)) = fault {
                tokio::time::sleep(duration).await;
            }
            if let Some(FaultAction::Gate(gate)) = &fault {
                gate.pass().await;
            }
            let started = std::time::Instant::now();
            entry.handling_started = Some(started);
            let response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            entry.handling_us = started.elapsed().as_micros() as u64;
            if let Some(crate::aws::Caller(caller)) = response.extensions().get() {
                entry.caller.clone_from(caller);
            }
            // Bodies are built in memory here anyway; reading one back costs a copy at most.
            let (head, body) = response.into_parts();
            match axum::body::to_bytes(body, usize::MAX).await {
                Ok(bytes) => {
                    entry.response_bytes = bytes.len();
                    let body = match fault {
                        Some(FaultAction::StallAfter { marker, pause }) => {
                            stalled_body(bytes, marker, pause, entry.stall_ended.clone())
                        }
                        _ => Body::from(bytes),
                    };
                    Response::from_parts(head, body)
                }
                Err(_) => Response::from_parts(head, Body::empty()),
            }
        }
    };
    entry.status = if dropped {
        0
    } else {
        response.status().as_u16()
    };
    lock(&shared.log).push(entry);
    response
}

fn stalled_body(
    bytes: Bytes,
    marker: &str,
    pause: Duration,
    ended: Arc<OnceLock<std::time::Instant>>,
) -> Body {
    let split = bytes
        .windows(marker.len())
        .position(|window| window == marker.as_bytes())
        .map_or(bytes.len(), |at| at + marker.len());
    body_in_parts_then(
        vec![
            (Duration::ZERO, Ok(bytes.slice(..split))),
            (pause, Ok(bytes.slice(split..))),
        ],
        ended,
    )
}

fn futures_error_body() -> Body {
    body_in_parts(vec![
        (Duration::ZERO, Ok(Bytes::from_static(b"{\"kind\":"))),
        (
            Duration::ZERO,
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "fault: connection dropped",
            )),
        ),
    ])
}

/// A body sent part by part, each after its pause: what a slow or a broken connection
/// delivers. An error part ends the body as a reset connection would.
fn body_in_parts(parts: Vec<(Duration, Result<Bytes, std::io::Error>)>) -> Body {
    body_in_parts_then(parts, Arc::default())
}

/// `body_in_parts`, noting in `ended` when the last part was released (its pause over, not
/// yet sent): a request that arrived before then was made without that part.
fn body_in_parts_then(
    parts: Vec<(Duration, Result<Bytes, std::io::Error>)>,
    ended: Arc<OnceLock<std::time::Instant>>,
) -> Body {
    let (sender, received) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let last = parts.len().saturating_sub(1);
        for (index, (pause, part)) in parts.into_iter().enumerate() {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            if index == last {
                let _ = ended.set(std::time::Instant::now());
            }
            if sender.send(part).await.is_err() {
                return;
            }
        }
    });
    struct Parts(tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>);
    impl futures_core::Stream for Parts {
        type Item = Result<Bytes, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            self.0.poll_recv(cx)
        }
    }
    Body::from_stream(Parts(received))
}

fn aws_error_response(code: u16, kind: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::json!({"__type": kind, "message": format!("injected {kind}")});
    let mut response = (status, axum::Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(kind) {
        response.headers_mut().insert("x-amzn-errortype", v);
    }
    response
}

fn fault_response(service: Service, code: u16, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match service {
        Service::Kube => {
            crate::kube::status_body(code, reason_for(code), &format!("injected fault {code}"))
        }
        Service::GitLab => serde_json::json!({"message": format!("injected fault {code}")}),
        Service::GitHub => {
            let message = match code {
                403 | 429 => "API rate limit exceeded for installation ID 1.".to_string(),
                _ => format!("injected fault {code}"),
            };
            serde_json::json!({"message": message, "documentation_url": "https://docs.github.com/rest"})
        }
        Service::Ecr
        | Service::Eks
        | Service::Sns
        | Service::Sqs
        | Service::SecretsManager
        | Service::CodeCommit => {
            let kind = match code {
                429 | 400 => "ThrottlingException",
                _ => "ServerException",
            };
            serde_json::json!({"__type": kind, "message": format!("injected fault {code}")})
        }
        Service::Runtime => serde_json::json!({"errorMessage": "injected fault"}),
    };
    let mut response = (status, axum::Json(body)).into_response();
    if matches!(service, Service::Ecr | Service::Eks | Service::CodeCommit) {
        let kind = if code == 429 || code == 400 {
            "ThrottlingException"
        } else {
            "ServerException"
        };
        if let Ok(v) = HeaderValue::from_str(kind) {
            response.headers_mut().insert("x-amzn-errortype", v);
        }
    }
    if service == Service::GitHub && (code == 403 || code == 429) {
        // GitHub's primary rate limit: no quota left until the reset time (epoch seconds).
        let reset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() + 60)
            .unwrap_or_default();
        for (name, value) in [
            ("x-ratelimit-remaining", "0".to_string()),
            ("x-ratelimit-limit", "5000".to_string()),
            ("x-ratelimit-reset", reset.to_string()),
        ] {
            if let Ok(v) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, v);
            }
        }
    }
    if let Some(seconds) = retry_after
        && let Ok(v) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert("retry-after", v);
    }
    response
}

pub(crate) fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

#[cfg(test)]
mod busy_time_tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn handled(at: Instant, from_us: u64, for_us: u64) -> LoggedRequest {
        LoggedRequest {
            service: Service::Kube,
            method: "GET".into(),
            path: "/".into(),
            query: String::new(),
            operation: String::new(),
            content_type: String::new(),
            accept: String::new(),
            authorization: String::new(),
            caller: String::new(),
            body: String::new(),
            status: 200,
            handling_us: for_us,
            response_bytes: 0,
            arrived: Some(at),
            handling_started: Some(at + Duration::from_micros(from_us)),
            stall_ended: Default::default(),
        }
    }

    #[test]
    fn overlapping_handling_is_counted_once_and_gaps_not_at_all() {
        let t = Instant::now();
        let log = [
            handled(t, 0, 100),
            handled(t, 50, 100),
            handled(t, 60, 20),
            handled(t, 400, 30),
        ];
        assert_eq!(busy_time(&log), Duration::from_micros(150 + 30));
    }

    #[test]
    fn a_request_a_fault_answered_adds_nothing() {
        let t = Instant::now();
        let mut faulted = handled(t, 0, 0);
        faulted.handling_started = None;
        assert_eq!(
            busy_time(&[faulted, handled(t, 10, 40)]),
            Duration::from_micros(40)
        );
        assert_eq!(busy_time(&[]), Duration::ZERO);
    }
}
