//! Authorization before anything else, as kube-apiserver orders its filters: the request is
//! read into a verb, resource, subresource, namespace and name from its method and path
//! alone, and a caller RBAC does not allow that verb gets a 403 whether or not the object,
//! the subresource or even a route for the method exists. `watch=true` on a collection is
//! the `watch` verb, not a `list`.
//!
//! The handlers keep their own checks; this layer only makes a denial come first.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::kube::{KubeState, PROXY_PREFIX, authorize_on, status_body};

/// What a request asks, as the API server's request-info resolver reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestInfo {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// The resources whose RBAC the stand-in judges; any other path (discovery, access reviews,
/// namespaces) is left to its handler.
const JUDGED: &[(&str, &str)] = &[
    ("argoproj.io", "applications"),
    ("argoproj.io", "applicationsets"),
    ("argocd-image-updater.argoproj.io", "imageupdaters"),
    ("", "events"),
    ("", "secrets"),
    ("", "configmaps"),
];

impl RequestInfo {
    /// Reads a resource request; `None` for any other path.
    pub fn of(method: &Method, path: &str, query: &str) -> Option<Self> {
        let path = path.strip_prefix(PROXY_PREFIX).unwrap_or(path);
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", "v1", rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (Some(*namespace), rest),
            rest => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(*name), None),
            [resource, name, subresource] => (*resource, Some(*name), Some(*subresource)),
            _ => return None,
        };
        if !JUDGED.contains(&(group, resource)) {
            return None;
        }
        let watch = url::form_urlencoded::parse(query.as_bytes())
            .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
        let verb = match (method.as_str(), name.is_some()) {
            ("GET", _) if watch => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => return None,
        };
        Some(Self {
            verb: verb.to_string(),
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.map(str::to_string),
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
        })
    }

    /// `resource/subresource`, as RBAC rules name it.
    fn rbac_resource(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }
}

/// The layer: a denied request ends here with the API server's 403.
pub async fn authorize_first(
    State(state): State<Arc<KubeState>>,
    request: Request,
    next: Next,
) -> Response {
    let query = request.uri().query().unwrap_or_default();
    let Some(info) = RequestInfo::of(request.method(), request.uri().path(), query) else {
        return next.run(request).await;
    };
    let denied = authorize_on(
        &state,
        request.headers(),
        &info.verb,
        &info.rbac_resource(),
        info.namespace.as_deref(),
        info.name.as_deref(),
    );
    match denied {
        Ok(_) => next.run(request).await,
        Err(refusal) => with_details(refusal, &info).await,
    }
}

/// The 403 with the `details` kube-apiserver adds: the name, the group and the resource.
async fn with_details(refusal: Response, info: &RequestInfo) -> Response {
    let (head, body) = refusal.into_parts();
    if head.status != axum::http::StatusCode::FORBIDDEN {
        return Response::from_parts(head, body);
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(head, axum::body::Body::empty());
    };
    let Ok(mut status) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(head, axum::body::Body::from(bytes));
    };
    status["details"] = details(info.name.as_deref(), &info.group, &info.resource);
    (head.status, axum::Json(status)).into_response()
}

/// A Status's `details` as the API server fills them for an object: `name` when there is
/// one, `group` when not the core group, and the resource's plural as `kind`.
pub fn details(name: Option<&str>, group: &str, kind: &str) -> Value {
    let mut details = json!({});
    if let Some(name) = name {
        details["name"] = json!(name);
    }
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    details["kind"] = json!(kind);
    details
}

/// A failure `Status` response with `details`.
pub fn failure(code: u16, reason: &str, message: &str, details: Value) -> Response {
    let mut body = status_body(code, reason, message);
    body["details"] = details;
    let http = axum::http::StatusCode::from_u16(code)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (http, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, path: &str, query: &str) -> Option<(String, String, Option<String>)> {
        RequestInfo::of(&method, path, query).map(|i| (i.verb.clone(), i.rbac_resource(), i.name))
    }

    #[test]
    fn a_request_is_read_into_verb_resource_and_name_from_its_method_and_path() {
        let apps = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications";
        let cases = [
            (
                "a list",
                Method::GET,
                apps.to_string(),
                "",
                Some(("list", "applications", None)),
            ),
            (
                "a watch",
                Method::GET,
                apps.to_string(),
                "watch=true",
                Some(("watch", "applications", None)),
            ),
            (
                "a get",
                Method::GET,
                format!("{apps}/a"),
                "",
                Some(("get", "applications", Some("a"))),
            ),
            (
                "a delete",
                Method::DELETE,
                format!("{apps}/a"),
                "",
                Some(("delete", "applications", Some("a"))),
            ),
            (
                "a status patch",
                Method::PATCH,
                format!("{apps}/a/status"),
                "",
                Some(("patch", "applications/status", Some("a"))),
            ),
            (
                "an Event create",
                Method::POST,
                "/api/v1/namespaces/argocd/events".to_string(),
                "",
                Some(("create", "events", None)),
            ),
            (
                "behind the proxy prefix",
                Method::GET,
                format!("{PROXY_PREFIX}{apps}"),
                "",
                Some(("list", "applications", None)),
            ),
            (
                "discovery",
                Method::GET,
                "/apis/argoproj.io/v1alpha1".to_string(),
                "",
                None,
            ),
            (
                "a namespace",
                Method::GET,
                "/api/v1/namespaces/argocd".to_string(),
                "",
                None,
            ),
            (
                "an access review",
                Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews".to_string(),
                "",
                None,
            ),
        ];
        for (case, method, path, query, expected) in cases {
            let expected = expected.map(|(v, r, n): (&str, &str, Option<&str>)| {
                (v.to_string(), r.to_string(), n.map(str::to_string))
            });
            assert_eq!(info(method, &path, query), expected, "{case}");
        }
    }

    #[test]
    fn details_name_the_object_its_group_and_its_resource() {
        assert_eq!(
            details(Some("a"), "argoproj.io", "applications"),
            json!({"name": "a", "group": "argoproj.io", "kind": "applications"})
        );
        assert_eq!(details(None, "", "events"), json!({"kind": "events"}));
    }
}
