//! One resource's objects on the Kubernetes stand-in, kept as the API server's watch cache
//! keeps them (each with its two serializations made once, at the write), and the reads
//! every resource answers alike: a list with `limit`/`continue`, a label selector and
//! metadata-only items, a get, and the 404 in the API server's words. Applications and
//! ImageUpdater objects are both stored here; what differs between them (their schema,
//! which patches they take, the status subresource) stays with each.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::kube::{ListQuery, encode_continue, list_metadata};

/// What names a resource in URLs, lists and messages.
pub struct Kind {
    /// `argoproj.io`.
    pub group: &'static str,
    /// `argoproj.io/v1alpha1`.
    pub api_version: &'static str,
    /// `applications`.
    pub plural: &'static str,
    /// `ApplicationList`.
    pub list_kind: &'static str,
}

/// An object as last written, kept as its serializations: a GET is then a copy of bytes and
/// a page a concatenation, not hundreds of conversions under the store's lock. The object
/// itself is parsed again when asked for (a write, a test): held as a `Value` beside its
/// bytes, 50,000 Applications of 55 KB would take some 20 GB.
pub struct Stored {
    pub json: Bytes,
    /// As a `PartialObjectMetadata`, for metadata-only lists.
    pub metadata: Bytes,
    /// `metadata.labels`, for label selectors.
    labels: Value,
}

impl Stored {
    /// The object as stored.
    pub fn object(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// One resource's objects by `(namespace, name)`.
pub struct Resources {
    pub kind: Kind,
    objects: BTreeMap<(String, String), Stored>,
}

impl Resources {
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            objects: BTreeMap::new(),
        }
    }

    pub fn put(&mut self, key: (String, String), object: Value) -> &Stored {
        let partial = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]});
        let stored = Stored {
            json: serde_json::to_vec(&object).unwrap_or_default().into(),
            metadata: serde_json::to_vec(&partial).unwrap_or_default().into(),
            labels: object["metadata"]["labels"].clone(),
        };
        match self.objects.entry(key) {
            std::collections::btree_map::Entry::Occupied(mut entry) => {
                entry.insert(stored);
                entry.into_mut()
            }
            std::collections::btree_map::Entry::Vacant(entry) => entry.insert(stored),
        }
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<&Stored> {
        self.objects.get(&(namespace.to_string(), name.to_string()))
    }

    pub fn remove(&mut self, namespace: &str, name: &str) {
        self.objects
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Whether any object lives in `namespace`.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.objects.keys().any(|(ns, _)| ns == namespace)
    }

    /// Every object's `(namespace, name)`, in order.
    pub fn keys(&self) -> Vec<(String, String)> {
        self.objects.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// A GET's answer: the object, or the API server's 404.
    pub fn get_response(&self, namespace: &str, name: &str) -> Response {
        self.get_response_as(namespace, name, false)
    }

    /// A GET's answer, as a `PartialObjectMetadata` when `metadata_only`.
    pub fn get_response_as(&self, namespace: &str, name: &str, metadata_only: bool) -> Response {
        match self.get(namespace, name) {
            Some(stored) if metadata_only => json_response(&stored.metadata),
            Some(stored) => json_response(&stored.json),
            None => self.not_found(name),
        }
    }

    /// `<plural>.<group> "<name>" not found`, as kube-apiserver says it, with its details.
    pub fn not_found(&self, name: &str) -> Response {
        let Kind { plural, group, .. } = self.kind;
        crate::access::failure(
            404,
            "NotFound",
            &format!("{plural}.{group} \"{name}\" not found"),
            crate::access::details(Some(name), group, plural),
        )
    }

    /// One page of a list of `namespace` (every namespace for `None`), whole objects or
    /// metadata only, at `resource_version`.
    pub fn list_response(
        &self,
        query: &ListQuery,
        namespace: Option<&str>,
        metadata_only: bool,
        resource_version: u64,
    ) -> Response {
        let mut items: Vec<(&(String, String), &[u8])> = Vec::new();
        let mut next = None;
        let candidates = self
            .objects
            .range((query.after.clone(), std::ops::Bound::Unbounded))
            .filter(|(key, stored)| query.admits(namespace, key, &stored.labels));
        let mut remaining = 0;
        for (key, stored) in candidates {
            if query.limit.is_some_and(|l| items.len() == l) {
                // Kubernetes hands out `continue` only when more items remain.
                if next.is_none() {
                    next = items.last().map(|(k, _)| encode_continue(k));
                }
                if query.selects() {
                    break;
                }
                remaining += 1;
                continue;
            }
            let item = if metadata_only {
                &stored.metadata
            } else {
                &stored.json
            };
            items.push((key, item));
        }
        let mut list_meta = list_metadata(resource_version, next);
        // How many items the next pages hold, which the API server counts only when no
        // selector narrows the list; a list of whole custom resources says `continue: ""`
        // on its last page, a metadata-only list leaves it out.
        if remaining > 0 && !query.selects() {
            list_meta["remainingItemCount"] = json!(remaining);
        }
        if !metadata_only && list_meta.get("continue").is_none() {
            list_meta["continue"] = json!("");
        }
        let (kind, api_version) = if metadata_only {
            ("PartialObjectMetadataList", "meta.k8s.io/v1")
        } else {
            (self.kind.list_kind, self.kind.api_version)
        };
        let mut body = format!(
            r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{list_meta},"items":["#
        )
        .into_bytes();
        for (i, (_, item)) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// Whether a GET asks for the object as a `PartialObjectMetadata`: the first media type of
/// `Accept` the server can serve decides, as in a list's negotiation (a Table is not served
/// here, so a client asking for one first gets its next choice).
pub fn wants_metadata_object(headers: &axum::http::HeaderMap) -> bool {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        if !matches!(
            parts.next(),
            Some("application/json" | "application/*" | "*/*")
        ) {
            continue;
        }
        let params: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
        match params.get("as") {
            None => return false,
            Some(&"PartialObjectMetadata") if params.get("g") == Some(&"meta.k8s.io") => {
                return true;
            }
            Some(_) => continue,
        }
    }
    false
}

/// A stored object's bytes as the answer to a read or a write.
pub fn json_response(json: &Bytes) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        json.clone(),
    )
        .into_response()
}

/// A write's new `resourceVersion`, and `generation` moved when `spec` changed from
/// `spec_before`: what kube-apiserver does for every custom resource.
pub fn written(object: &mut Value, spec_before: &Value, resource_version: u64) {
    if object["spec"] != *spec_before {
        let generation = object["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        object["metadata"]["generation"] = json!(generation);
    }
    object["metadata"]["resourceVersion"] = json!(resource_version.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Resources {
        let mut store = Resources::new(Kind {
            group: "argoproj.io",
            api_version: "argoproj.io/v1alpha1",
            plural: "applications",
            list_kind: "ApplicationList",
        });
        for (namespace, name, team) in [("a", "one", "x"), ("a", "two", "y"), ("b", "three", "x")] {
            let object = json!({"metadata": {"namespace": namespace, "name": name, "labels": {"team": team}}});
            store.put((namespace.into(), name.into()), object);
        }
        store
    }

    fn query(text: &str) -> ListQuery {
        match ListQuery::parse(text) {
            Ok(query) => query,
            Err(_) => panic!("`{text}` is not a valid list query"),
        }
    }

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn a_page_ends_with_a_continue_only_when_more_items_remain() {
        let store = store();
        let first = query("limit=2");
        let page = body(store.list_response(&first, None, true, 7)).await;
        assert_eq!(page["kind"], "PartialObjectMetadataList");
        assert_eq!(page["items"].as_array().unwrap().len(), 2);
        let token = page["metadata"]["continue"].as_str().unwrap().to_string();
        let rest = query(&format!("limit=2&continue={token}"));
        let last = body(store.list_response(&rest, None, false, 7)).await;
        assert_eq!(last["kind"], "ApplicationList");
        assert_eq!(last["items"][0]["metadata"]["name"], "three");
        assert_eq!(page["metadata"]["remainingItemCount"], 1);
        // A last page of whole custom resources says so with an empty `continue`.
        assert_eq!(last["metadata"]["continue"], "");
        assert!(last["metadata"].get("remainingItemCount").is_none());
    }

    #[tokio::test]
    async fn a_namespace_and_a_selector_narrow_the_list() {
        let store = store();
        let selected = query("labelSelector=team%3Dx");
        let page = body(store.list_response(&selected, Some("a"), false, 7)).await;
        let names: Vec<&str> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["one"]);
    }

    #[tokio::test]
    async fn a_missing_object_is_named_by_resource_and_group() {
        let page = body(store().get_response("a", "nope")).await;
        assert_eq!(page["code"], 404);
        assert_eq!(
            page["message"],
            "applications.argoproj.io \"nope\" not found"
        );
    }

    #[test]
    fn a_write_moves_generation_only_when_the_spec_changed() {
        let mut object = json!({"metadata": {"generation": 3}, "spec": {"a": 1}});
        written(&mut object, &json!({"a": 1}), 10);
        assert_eq!(object["metadata"]["generation"], 3);
        assert_eq!(object["metadata"]["resourceVersion"], "10");
        written(&mut object, &json!({"a": 2}), 11);
        assert_eq!(object["metadata"]["generation"], 4);
    }
}
