//! The Kubernetes stand-in held to a real kube-apiserver's answers: every request recorded
//! in `tests/fixtures/kube-apiserver/` (what the function, the CLI and the tests send, and
//! the error cases they meet) is replayed against the stand-in, set up with the same
//! objects, and its answer compared with the real one: the status code, the whole body
//! after volatile values (uids, resourceVersions, timestamps, continue tokens) are
//! normalised, and the headers clients read (`Content-Type`, `Warning`). What the stand-in
//! still answers differently, and why that does not matter and to whom, is [`KNOWN`].
//!
//! The recordings come from `scripts/record-kube-apiserver.py` (docs/development.md says how
//! to make them again); CI only replays them.

use std::sync::Arc;

use argocd_ecr_updater::cluster::eks_auth::{IamTokenSource, SystemClock, TokenSource};
use argocd_ecr_updater_standins::{
    OPERATOR_ACCESS_KEY, OPERATOR_SECRET_KEY, Options, StandIns, fixtures,
};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use serde_json::{Value, json};

use crate::common::function_credentials;

/// A difference the stand-in keeps, in the cases it shows in: the case (`*` for any), where
/// it starts (a body path, `status`, a header; empty for the whole answer), and why it does
/// not matter and to whom.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "get-application-table",
        "body",
        "the stand-in serves no Table, so kubectl (the only client that asks, with JSON as its \
         next choice) gets the object and prints its own columns: people reading `kubectl get` \
         output in the kubectl tests see other columns; neither the function nor the CLI asks",
    ),
    (
        "create-events-k8s-io",
        "",
        "`events.k8s.io/v1` is not served: the function and the CLI write and read core `v1` \
         Events only, and kubectl's `get events` and `describe` read core Events too",
    ),
    (
        "*",
        "body.status.reason",
        "an access review's `reason` names the RoleBinding that allowed it, which the stand-in's \
         grants do not model; `doctor` and the function read only `status.allowed`",
    ),
];

fn fixture(name: &str) -> Value {
    let path = fixtures::repository_root()
        .join("tests/fixtures/kube-apiserver")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The setup's objects, put into the stand-in as `kubectl apply` would create them.
fn set_up(standins: &StandIns, objects: &[Value]) {
    for object in objects {
        let meta = &object["metadata"];
        let (namespace, name) = (
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default(),
        );
        let done = match object["kind"].as_str().unwrap_or_default() {
            "Application" => standins.kube.insert(object.clone()),
            "ApplicationSet" => standins.kube.insert_application_set(object.clone()),
            "ImageUpdater" => standins.kube.insert_image_updater(object.clone()),
            "Secret" => {
                let data: Vec<(&str, &str)> = object["stringData"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
                    .collect();
                standins
                    .kube
                    .insert_secret(namespace, name, meta["labels"].clone(), &data);
                Ok(())
            }
            "ConfigMap" => {
                let data: Vec<(&str, &str)> = object["data"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
                    .collect();
                standins.kube.insert_config_map(namespace, name, &data);
                Ok(())
            }
            other => Err(format!("no setup for kind {other}")),
        };
        done.unwrap_or_else(|e| panic!("setting up {namespace}/{name}: {e}"));
    }
}

/// The bearer tokens of the recordings' identities, for the stand-in.
async fn tokens(standins: &StandIns) -> [(String, String); 2] {
    let source = |credentials: Credentials| {
        IamTokenSource::new(
            standins.options.cluster_name.clone(),
            standins.options.region.clone(),
            SharedCredentialsProvider::new(credentials),
            Arc::new(SystemClock),
        )
    };
    let operator = Credentials::new(
        OPERATOR_ACCESS_KEY,
        OPERATOR_SECRET_KEY,
        None,
        None,
        "tests",
    );
    [
        (
            "function".to_string(),
            source(function_credentials()).token().await.unwrap(),
        ),
        ("admin".to_string(), source(operator).token().await.unwrap()),
    ]
}

/// An answer as compared: status, the headers clients read, the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    warnings: Vec<String>,
    body: Value,
}

impl Answer {
    fn recorded(response: &Value) -> Self {
        let headers = &response["headers"];
        let first = |name: &str| headers[name][0].as_str().unwrap_or_default().to_string();
        Self {
            status: response["status"].as_u64().unwrap_or_default() as u16,
            content_type: first("content-type"),
            warnings: headers["warning"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            body: response["body"].clone(),
        }
    }
}

async fn send(
    client: &reqwest::Client,
    endpoint: &str,
    request: &Value,
    tokens: &[(String, String)],
    query: &[(String, String)],
) -> Answer {
    let method =
        reqwest::Method::from_bytes(request["method"].as_str().unwrap().as_bytes()).unwrap();
    let identity = request["identity"].as_str().unwrap();
    let token = &tokens.iter().find(|(who, _)| who == identity).unwrap().1;
    let mut url =
        url::Url::parse(&format!("{endpoint}{}", request["path"].as_str().unwrap())).unwrap();
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    let mut builder = client.request(method, url).bearer_auth(token);
    for (name, value) in request["headers"].as_object().into_iter().flatten() {
        builder = builder.header(name.as_str(), value.as_str().unwrap_or_default());
    }
    if !request["body"].is_null() {
        builder = builder.body(serde_json::to_vec(&request["body"]).unwrap());
    }
    let response = builder.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap();
    Answer {
        status,
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        warnings: headers
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect(),
        body: serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes))),
    }
}

/// The values that differ from run to run, and between servers, for no reason a client
/// sees: replaced by what kind of value they are, in fields and inside messages (a strict
/// decoding error quotes the whole object). Managed fields are put in the order of their
/// operation and manager: the API server orders writers within a second by name, and the
/// replay runs within fewer seconds than the recording did.
fn normalise(value: &mut Value, key: &str, generated: &[String]) {
    const VOLATILE: &[&str] = &[
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "time",
        "continue",
        "selfLink",
    ];
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                normalise(v, k, generated);
            }
        }
        Value::Array(items) => {
            items.iter_mut().for_each(|v| normalise(v, key, generated));
            if key == "managedFields" {
                items.sort_by_key(|e| (e["operation"].to_string(), e["manager"].to_string()));
            }
        }
        Value::String(s) if VOLATILE.contains(&key) && !s.is_empty() => *s = format!("<{key}>"),
        Value::String(s) => {
            for prefix in generated {
                if s.len() == prefix.len() + 5 && s.starts_with(prefix.as_str()) {
                    *s = format!("{prefix}<generated>");
                }
            }
            for field in VOLATILE {
                *s = quoted_values_replaced(s, field);
            }
        }
        _ => {}
    }
}

/// `s` with the value of every `"field":"..."` in it (JSON quoted inside a message) replaced.
fn quoted_values_replaced(s: &str, field: &str) -> String {
    let marker = format!("\\\"{field}\\\":\\\"");
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(&marker) {
        let start = at + marker.len();
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail.find('\\').unwrap_or(tail.len());
        out.push_str(&format!("<{field}>"));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Every place the stand-in's body differs from the recorded one, by path.
fn differences(recorded: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (recorded, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => differences(v, w, &p, out),
                    None => out.push(format!("{p}: missing (recorded {})", short(v))),
                }
            }
            for (k, w) in b {
                if !a.contains_key(k) {
                    out.push(format!("{path}.{k}: not recorded (stand-in {})", short(w)));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                differences(v, w, &format!("{path}[{i}]"), out);
            }
        }
        _ if recorded == got => {}
        _ => out.push(format!(
            "{path}: recorded {}, stand-in {}",
            short(recorded),
            short(got)
        )),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 160 {
        format!("{}…", &text[..text.floor_char_boundary(160)])
    } else {
        text
    }
}

fn known(case: &str, difference: &str) -> bool {
    KNOWN
        .iter()
        .any(|(c, path, _)| (*c == "*" || *c == case) && difference.starts_with(path))
}

/// The differences of one case that [`KNOWN`] does not explain.
fn judge(case: &str, recorded: &Answer, got: &Answer, generated: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if recorded.status != got.status {
        out.push(format!(
            "status: recorded {}, stand-in {}",
            recorded.status, got.status
        ));
    }
    let essence = |t: &str| t.split(';').next().unwrap_or_default().trim().to_string();
    if essence(&recorded.content_type) != essence(&got.content_type) {
        out.push(format!(
            "content-type: recorded {}, stand-in {}",
            recorded.content_type, got.content_type
        ));
    }
    if recorded.warnings != got.warnings {
        out.push(format!(
            "warning: recorded {:?}, stand-in {:?}",
            recorded.warnings, got.warnings
        ));
    }
    let (mut a, mut b) = (recorded.body.clone(), got.body.clone());
    normalise(&mut a, "", generated);
    normalise(&mut b, "", generated);
    differences(&a, &b, "body", &mut out);
    out.retain(|d| !known(case, d));
    out
}

/// Replays `recordings` in order against `standins`; the failing cases with their
/// differences.
async fn replay(standins: &StandIns, recordings: &[Value]) -> Vec<(String, Vec<String>)> {
    let tokens = tokens(standins).await;
    let client = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(standins.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let generated: Vec<String> = recordings
        .iter()
        .filter_map(|r| r["request"]["body"]["metadata"]["generateName"].as_str())
        .map(str::to_string)
        .collect();
    let mut answers: Vec<(String, Answer)> = Vec::new();
    let mut failed = Vec::new();
    for recording in recordings {
        let name = recording["name"].as_str().unwrap().to_string();
        let request = &recording["request"];
        let continue_from = request["continue_from"].as_str();
        let query: Vec<(String, String)> = request["query"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|pair| {
                let key = pair[0].as_str().unwrap().to_string();
                let value = match continue_from {
                    Some(from) if key == "continue" => answers
                        .iter()
                        .find(|(n, _)| n == from)
                        .and_then(|(_, a)| a.body["metadata"]["continue"].as_str())
                        .unwrap_or_default()
                        .to_string(),
                    _ => pair[1].as_str().unwrap().to_string(),
                };
                (key, value)
            })
            .collect();
        let got = send(&client, &standins.kube_endpoint(), request, &tokens, &query).await;
        let recorded = Answer::recorded(&recording["response"]);
        let found = judge(&name, &recorded, &got, &generated);
        if !found.is_empty() {
            failed.push((name.clone(), found));
        }
        answers.push((name, got));
    }
    failed
}

fn report(failed: &[(String, Vec<String>)]) -> String {
    failed
        .iter()
        .map(|(name, found)| format!("{name}:\n    {}", found.join("\n    ")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_stand_in_answers_every_recorded_request_as_the_real_api_server_did() {
    let standins = StandIns::start(Options::default()).await.unwrap();
    let setup = fixture("setup.json");
    set_up(&standins, setup.as_array().unwrap());
    let recordings = fixture("recordings.json");
    let mut failed = replay(&standins, recordings.as_array().unwrap()).await;
    // As recorded: the same cluster, its ImageUpdater CRD then replaced by v1.3.0's.
    standins
        .kube
        .image_updaters
        .use_crd(argocd_ecr_updater_standins::imageupdaters::V1_3_0_CRD)
        .unwrap();
    let under_v130 = fixture("recordings-imageupdater-v1.3.0.json");
    failed.extend(replay(&standins, under_v130.as_array().unwrap()).await);
    assert!(
        failed.is_empty(),
        "{} cases differ:\n{}",
        failed.len(),
        report(&failed)
    );
}

#[test]
fn every_known_difference_names_why_it_does_not_matter() {
    for (case, path, why) in KNOWN {
        // An empty path is the whole answer.
        let places = ["body", "status", "warning", "content-type"];
        assert!(
            !case.is_empty() && (path.is_empty() || places.iter().any(|p| path.starts_with(p))),
            "{case}: {path}"
        );
        assert!(
            why.len() > 40,
            "{case} {path}: say why it does not matter, and to whom"
        );
    }
}

#[test]
fn quoted_volatile_values_inside_a_message_are_replaced() {
    let message = r#"Invalid value: "{\"uid\":\"abc-1\",\"name\":\"a\",\"time\":\"2026\"}": x"#;
    assert_eq!(
        quoted_values_replaced(&quoted_values_replaced(message, "uid"), "time"),
        r#"Invalid value: "{\"uid\":\"<uid>\",\"name\":\"a\",\"time\":\"<time>\"}": x"#
    );
}
