//! The Lambda Runtime API, so tests can run the compiled function binary as Lambda does:
//! the binary polls `invocation/next`, then posts a response or an error.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};

use crate::faults::lock;

/// What the function answered for one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Response(Value),
    Error(Value),
}

#[derive(Default)]
pub struct RuntimeApi {
    queue: Mutex<VecDeque<(String, Value, Duration)>>,
    arrived: Notify,
    waiting: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    init_error: Mutex<Option<Value>>,
    first_poll: Mutex<Option<Instant>>,
    next_id: Mutex<u64>,
    /// Bumped by [`RuntimeApi::retire_pollers`]: a poll from before is answered with no event.
    generation: Mutex<u64>,
    /// How many polls are waiting for an event now.
    polls_waiting: tokio::sync::watch::Sender<usize>,
}

pub const FUNCTION_ARN: &str =
    "arn:aws:lambda:ap-northeast-2:768157413559:function:argocd-ecr-updater";

impl RuntimeApi {
    /// Queues an event and waits for the function's answer, at most `deadline` (which is
    /// also what the function is told its remaining time is).
    pub async fn invoke(&self, event: Value, deadline: Duration) -> Result<Outcome, String> {
        let id = {
            let mut n = lock(&self.next_id);
            *n += 1;
            format!("00000000-0000-4000-8000-{:012}", *n)
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id.clone(), tx);
        lock(&self.queue).push_back((id.clone(), event, deadline));
        // Every poll looks: one from a retired process must not swallow the only wake-up.
        self.arrived.notify_waiters();
        match tokio::time::timeout(deadline + Duration::from_secs(5), rx).await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(_)) => Err(format!("invocation {id} was dropped")),
            Err(_) => Err(format!("invocation {id} got no answer within {deadline:?}")),
        }
    }

    /// When the function first asked for work: the end of its cold start.
    pub fn first_poll(&self) -> Option<Instant> {
        *lock(&self.first_poll)
    }

    /// Forgets the first poll, so the next process's cold start can be timed.
    pub fn reset_first_poll(&self) {
        *lock(&self.first_poll) = None;
    }

    /// The process that has been polling is gone (killed by the harness): its poll, if the
    /// stand-in has not noticed the closed connection yet, must not take the next event, which
    /// would then go to no one. Lambda runs one process per sandbox; a harness that runs several
    /// in turn against one stand-in calls this between them.
    pub fn retire_pollers(&self) {
        *lock(&self.generation) += 1;
        self.arrived.notify_waiters();
    }

    /// Returns once `count` polls are waiting in the stand-in: a harness orders its steps on
    /// that instead of sleeping and hoping the poll got there.
    pub async fn until_polls_waiting(&self, count: usize) {
        let mut waiting = self.polls_waiting.subscribe();
        let _ = waiting.wait_for(|now| *now >= count).await;
    }

    pub fn init_error(&self) -> Option<Value> {
        lock(&self.init_error).clone()
    }
}

pub fn router(api: Arc<RuntimeApi>) -> Router {
    Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(init_error))
        .with_state(api)
}

async fn next(State(api): State<Arc<RuntimeApi>>) -> Response {
    lock(&api.first_poll).get_or_insert_with(Instant::now);
    let generation = *lock(&api.generation);
    /// Counts the poll as waiting until it is answered or its connection closes.
    struct Waiting<'a>(&'a tokio::sync::watch::Sender<usize>);
    impl Drop for Waiting<'_> {
        fn drop(&mut self) {
            self.0.send_modify(|n| *n -= 1);
        }
    }
    api.polls_waiting.send_modify(|n| *n += 1);
    let _waiting = Waiting(&api.polls_waiting);
    loop {
        let notified = api.arrived.notified();
        if *lock(&api.generation) != generation {
            return (StatusCode::GONE, "this poll's process was retired").into_response();
        }
        if let Some((id, event, deadline)) = lock(&api.queue).pop_front() {
            let deadline_ms = SystemTime::now()
                .checked_add(deadline)
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis())
                .unwrap_or_default();
            return Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/json")
                .header("lambda-runtime-aws-request-id", id)
                .header("lambda-runtime-deadline-ms", deadline_ms.to_string())
                .header("lambda-runtime-invoked-function-arn", FUNCTION_ARN)
                .header(
                    "lambda-runtime-trace-id",
                    "Root=1-00000000-000000000000000000000000;Sampled=0",
                )
                .body(axum::body::Body::from(event.to_string()))
                .unwrap_or_default();
        }
        notified.await;
    }
}

fn settle(api: &RuntimeApi, id: &str, outcome: Outcome) -> Response {
    match lock(&api.waiting).remove(id) {
        Some(tx) => {
            let _ = tx.send(outcome);
            (
                StatusCode::ACCEPTED,
                axum::Json(serde_json::json!({"status": "OK"})),
            )
                .into_response()
        }
        None => (StatusCode::BAD_REQUEST, "unknown request id").into_response(),
    }
}

fn json_or_text(body: &Bytes) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

async fn response(
    State(api): State<Arc<RuntimeApi>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    settle(&api, &id, Outcome::Response(json_or_text(&body)))
}

async fn error(
    State(api): State<Arc<RuntimeApi>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    settle(&api, &id, Outcome::Error(json_or_text(&body)))
}

async fn init_error(State(api): State<Arc<RuntimeApi>>, body: Bytes) -> Response {
    *lock(&api.init_error) = Some(json_or_text(&body));
    (StatusCode::ACCEPTED, "").into_response()
}
