//! Core `Event`s created on the Kubernetes stand-in as kube-apiserver creates them: the
//! legacy validation of `v1` Events (an `involvedObject` in another namespace is a 422 with
//! its cause), `generateName`, a taken name answered `AlreadyExists`, the fields the server
//! fills (`eventTime: null`, `reportingInstance: ""`) and the writer's managed fields. Also
//! the server's own fields and managed fields of the core objects the stand-in serves
//! (Secrets, ConfigMaps, access reviews).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::access::{details, failure};
use crate::faults::lock;
use crate::kube::{KubeState, creation_timestamp, status};
use crate::managed_fields::{self, FieldSchema, Writer};

/// The characters kube-apiserver draws a `generateName` suffix from.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five characters of [`NAME_ALPHABET`], different on each call (a counter mixed with the
/// clock: names only need to differ, not to be unpredictable).
fn name_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    (0..5)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            NAME_ALPHABET[(x % NAME_ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

/// What a new core Event holds before its writer sets anything: Go's zero Event as the API
/// server serializes it, which managed fields are counted from (`source` is there already,
/// so only its fields are the writer's; `involvedObject` is one atomic field).
fn zero_event() -> Value {
    json!({"involvedObject": {}, "source": {}, "firstTimestamp": null, "lastTimestamp": null,
           "eventTime": null, "reportingComponent": "", "reportingInstance": ""})
}

fn event_fields() -> FieldSchema {
    FieldSchema::of_crd(&json!({"type": "object", "properties": {
        "involvedObject": {"type": "object", "x-kubernetes-map-type": "atomic"},
        "related": {"type": "object", "x-kubernetes-map-type": "atomic"}}}))
}

/// The writer of a request: its User-Agent up to the first `/`.
fn writer_of(headers: &HeaderMap) -> String {
    let agent = headers.get("user-agent").and_then(|v| v.to_str().ok());
    managed_fields::manager_of("", agent)
}

/// Managed fields of a created core object, counted from `zero` (its Go zero value).
pub fn created(object: &mut Value, zero: &Value, manager: &str) {
    let mut old = zero.clone();
    old["metadata"] = json!({});
    old["apiVersion"] = object["apiVersion"].clone();
    old["kind"] = object["kind"].clone();
    let writer = Writer {
        manager,
        operation: "Update",
        part: None,
    };
    let fields = if object["kind"] == "Event" {
        event_fields()
    } else {
        FieldSchema::of_crd(&json!({}))
    };
    managed_fields::record(&fields, Some(&old), object, &writer);
}

/// `POST` of a core Event.
pub async fn create(
    State(state): State<Arc<KubeState>>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(mut event) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "the body of the request was in an unknown format");
    };
    let body_namespace = event["metadata"]["namespace"]
        .as_str()
        .unwrap_or(&namespace);
    if body_namespace != namespace {
        return status(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        );
    }
    event["metadata"]["namespace"] = json!(namespace);
    let mut name = event["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if name.is_empty()
        && let Some(prefix) = event["metadata"]["generateName"].as_str()
    {
        name = format!("{prefix}{}", name_suffix());
        event["metadata"]["name"] = json!(name);
    }
    if let Err(refused) = validate(&event, &name, &namespace) {
        return refused;
    }
    let mut events = lock(state.events_store());
    let taken = events.iter().any(|e| {
        e["metadata"]["namespace"] == namespace.as_str() && e["metadata"]["name"] == name.as_str()
    });
    if taken {
        return failure(
            409,
            "AlreadyExists",
            &format!("events \"{name}\" already exists"),
            details(Some(&name), "", "events"),
        );
    }
    let version = state.next_resource_version();
    let meta = &mut event["metadata"];
    meta["uid"] = json!(format!("00000000-0000-4000-8000-{version:012}"));
    meta["resourceVersion"] = json!(version.to_string());
    meta["creationTimestamp"] = json!(creation_timestamp());
    let manager = writer_of(&headers);
    created(&mut event, &zero_event(), &manager);
    for (field, zero) in [("eventTime", Value::Null), ("reportingInstance", json!(""))] {
        if event.get(field).is_none() {
            event[field] = zero;
        }
    }
    events.push(event.clone());
    (StatusCode::CREATED, axum::Json(event)).into_response()
}

/// What kube-apiserver checks of a `v1` Event without `eventTime`: a name, and an
/// `involvedObject` in the Event's own namespace.
fn validate(event: &Value, name: &str, namespace: &str) -> Result<(), Response> {
    if name.is_empty() {
        return Err(status(
            422,
            "Event \"\" is invalid: metadata.name: Required value: name or generateName is required",
        ));
    }
    let involved = event["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let mismatch = if involved.is_empty() {
        !namespace.is_empty() && namespace != "default"
    } else {
        involved != namespace
    };
    if event["eventTime"].is_null() && mismatch {
        let message = format!("Invalid value: \"{involved}\": does not match event.namespace");
        return Err(failure(
            422,
            "Invalid",
            &format!("Event \"{name}\" is invalid: involvedObject.namespace: {message}"),
            json!({"name": name, "kind": "Event", "causes": [
                {"reason": "FieldValueInvalid", "message": message, "field": "involvedObject.namespace"}]}),
        ));
    }
    Ok(())
}

/// An object of a list of core objects: the API server leaves out each item's `kind` and
/// `apiVersion`, which the list's own say.
pub fn as_list_item(object: &Value) -> Value {
    let mut item = object.clone();
    if let Some(map) = item.as_object_mut() {
        map.remove("kind");
        map.remove("apiVersion");
    }
    item
}

/// An access review's `metadata` as the API server answers it: never stored, so no name or
/// timestamp, but the fields of its spec managed by the caller.
pub fn review_metadata(review: &Value, headers: &HeaderMap) -> Value {
    let mut object = json!({"apiVersion": review["apiVersion"], "kind": review["kind"],
        "metadata": {}, "spec": review["spec"]});
    let zero = json!({"spec": {}});
    created(&mut object, &zero, &writer_of(headers));
    object["metadata"].clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(namespace: &str, involved: &str) -> Value {
        json!({"metadata": {"name": "a.1", "namespace": namespace},
               "involvedObject": {"kind": "Application", "name": "a", "namespace": involved}})
    }

    #[test]
    fn an_event_about_an_object_in_another_namespace_is_refused() {
        let cases = [
            ("the same namespace", "argocd", "argocd", true),
            ("another namespace", "argocd", "web", false),
            ("no namespace, in default", "default", "", true),
            ("no namespace, elsewhere", "argocd", "", false),
        ];
        for (case, namespace, involved, accepted) in cases {
            let result = validate(&event(namespace, involved), "a.1", namespace);
            assert_eq!(result.is_ok(), accepted, "{case}");
        }
    }

    #[test]
    fn a_created_event_is_managed_by_its_writer_field_by_field_with_its_involved_object_whole() {
        let mut created_event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "a.1", "namespace": "argocd"},
            "involvedObject": {"kind": "Application", "name": "a"}, "reason": "R", "message": "m",
            "type": "Normal", "source": {"component": "c"}, "reportingComponent": "c", "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"});
        created(&mut created_event, &zero_event(), "argocd-ecr-updater");
        let entry = &created_event["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "argocd-ecr-updater");
        assert_eq!(
            entry["fieldsV1"],
            json!({"f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {}, "f:lastTimestamp": {},
                   "f:message": {}, "f:reason": {}, "f:reportingComponent": {},
                   "f:source": {"f:component": {}}, "f:type": {}})
        );
    }
}
