//! `imageupdaters.argocd-image-updater.argoproj.io/v1alpha1` on the Kubernetes stand-in: the
//! vendored Image Updater CRD validates every write, and the `status` subresource behaves as
//! kube-apiserver's does (a write to `/status` changes only status and not `generation`; a
//! write to the object leaves status alone).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::defaults::Defaults;
use crate::faults::lock;
use crate::kube::{
    FieldPath, KubeState, ListQuery, StructuralSchema, authorize_on, negotiate, status,
};
use crate::managed_fields::{self, FieldSchema, Part, Writer};
use crate::resources::{Kind, Resources, json_response, written};

const CRD_YAML: &str = include_str!("../crd/imageupdater-crd.yaml");
pub const API_VERSION: &str = "argocd-image-updater.argoproj.io/v1alpha1";
const RESOURCE: &str = "imageupdaters";

/// Image Updater v1.3.0's CRD, whose schema defaults `updateStrategy` to `semver` and
/// `forceUpdate` to false wherever `commonUpdateSettings` is written (the vendored, newer CRD
/// has no such defaults): for tests of what those defaults decide.
pub const V1_3_0_CRD: &str = include_str!("../crd/imageupdater-crd-v1.3.0.yaml");

/// What the API server reads of the CRD: its schema, for validation, pruning, defaulting and
/// managed fields.
struct Crd {
    schema: jsonschema::Validator,
    /// The schema itself, for the CEL rules and list-map keys the validator does not check.
    schema_value: Value,
    structure: StructuralSchema,
    defaults: Defaults,
    fields: FieldSchema,
}

impl Crd {
    fn of(yaml: &str) -> Result<Self, String> {
        let crd: Value =
            serde_yaml_ng::from_str(yaml).map_err(|e| format!("ImageUpdater CRD: {e}"))?;
        let schema_value = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
        let schema = jsonschema::validator_for(&schema_value).map_err(|e| e.to_string())?;
        Ok(Self {
            schema,
            structure: StructuralSchema::of(&schema_value),
            defaults: Defaults::of(&schema_value),
            fields: FieldSchema::of_crd(&schema_value),
            schema_value,
        })
    }
}

/// The stored objects and their CRD.
pub struct ImageUpdaterStore {
    objects: Mutex<Resources>,
    crd: Mutex<Arc<Crd>>,
}

impl ImageUpdaterStore {
    pub fn new() -> Result<Self, String> {
        Ok(Self {
            objects: Mutex::new(Resources::new(Kind {
                group: "argocd-image-updater.argoproj.io",
                api_version: API_VERSION,
                plural: RESOURCE,
                list_kind: "ImageUpdaterList",
            })),
            crd: Mutex::new(Arc::new(Crd::of(CRD_YAML)?)),
        })
    }

    fn crd(&self) -> Arc<Crd> {
        lock(&self.crd).clone()
    }

    /// Serves the objects with another version of the CRD (`V1_3_0_CRD`), as a cluster that
    /// installed it does: the objects stored are read with its defaults from now on.
    pub fn use_crd(&self, yaml: &str) -> Result<(), String> {
        let crd = Crd::of(yaml)?;
        let mut objects = lock(&self.objects);
        for key in objects.keys() {
            if let Some(mut object) = objects.get(&key.0, &key.1).map(|s| s.object()) {
                crd.defaults.apply(&mut object);
                objects.put(key, object);
            }
        }
        *lock(&self.crd) = Arc::new(crd);
        Ok(())
    }

    /// Prunes unknown fields, fills the schema's defaults and checks the object as the API
    /// server would: the schema, the CEL rules and unique list-map keys.
    pub fn validate(&self, object: &mut Value) -> Result<(), String> {
        let crd = self.crd();
        let mut dropped = Vec::new();
        crd.structure.prune(object, FieldPath::Root, &mut dropped);
        crd.defaults.apply(object);
        let mut problems: Vec<String> = crd
            .schema
            .iter_errors(object)
            .map(|e| format!("{}: Invalid value: {e}", e.instance_path()))
            .collect();
        problems.extend(crate::schema_rules::violations(&crd.schema_value, object));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join(", "))
        }
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.objects)
            .get(namespace, name)
            .map(|stored| stored.object())
    }

    /// Removes an object, as `kubectl delete` would.
    pub fn delete(&self, namespace: &str, name: &str) {
        lock(&self.objects).remove(namespace, name);
    }
}

impl KubeState {
    /// Creates an ImageUpdater object as `kubectl apply` would: validated, with a uid,
    /// `generation` 1 and a fresh resourceVersion.
    pub fn insert_image_updater(&self, object: Value) -> Result<(), String> {
        self.create_image_updater(object, "kubectl-client-side-apply")
            .map(|_| ())
    }

    /// Creates an ImageUpdater object written by `manager`; the object as stored.
    fn create_image_updater(&self, mut object: Value, manager: &str) -> Result<Value, String> {
        let name = object["metadata"]["name"]
            .as_str()
            .ok_or("imageupdater without metadata.name")?
            .to_string();
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("argocd")
            .to_string();
        object["apiVersion"] = json!(API_VERSION);
        object["kind"] = json!("ImageUpdater");
        object["metadata"]["namespace"] = json!(namespace);
        self.image_updaters
            .validate(&mut object)
            .map_err(|e| format!("{namespace}/{name}: {e}"))?;
        let version = self.next_resource_version();
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        object["metadata"]["generation"] = json!(1);
        object["metadata"]["uid"] = json!(format!("00000000-0000-0000-1111-{version:012}"));
        object["metadata"]["creationTimestamp"] = json!(crate::kube::creation_timestamp());
        let writer = Writer {
            manager,
            operation: "Update",
            part: Some(managed_fields::Part::Object),
        };
        managed_fields::record(
            &self.image_updaters.crd().fields,
            None,
            &mut object,
            &writer,
        );
        lock(&self.image_updaters.objects).put((namespace, name), object.clone());
        Ok(object)
    }

    /// Changes an object's spec as a user would: `generation` moves, status stays.
    pub fn edit_image_updater(
        &self,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), String> {
        let mut objects = lock(&self.image_updaters.objects);
        let mut object = objects
            .get(namespace, name)
            .map(|stored| stored.object())
            .ok_or("no such imageupdater")?;
        let before = object["spec"].clone();
        change(&mut object);
        written(&mut object, &before, self.next_resource_version());
        objects.put((namespace.to_string(), name.to_string()), object);
        Ok(())
    }

    pub fn image_updater(&self, namespace: &str, name: &str) -> Option<Value> {
        self.image_updaters.get(namespace, name)
    }
}

pub fn router(state: Arc<KubeState>) -> Router {
    let base = "/apis/argocd-image-updater.argoproj.io/v1alpha1";
    Router::new()
        .route(base, get(resources))
        .route(&format!("{base}/imageupdaters"), get(list_route))
        .route(
            &format!("{base}/namespaces/{{namespace}}/imageupdaters"),
            get(list_route).post(create),
        )
        .route(
            &format!("{base}/namespaces/{{namespace}}/imageupdaters/{{name}}"),
            get(get_one).patch(patch_object),
        )
        .route(
            &format!("{base}/namespaces/{{namespace}}/imageupdaters/{{name}}/status"),
            get(get_one).patch(patch_status),
        )
        .with_state(state)
}

pub fn group() -> Value {
    json!({"name": "argocd-image-updater.argoproj.io",
           "versions": [{"groupVersion": API_VERSION, "version": "v1alpha1"}],
           "preferredVersion": {"groupVersion": API_VERSION, "version": "v1alpha1"}})
}

async fn resources() -> Response {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION, "resources": [
        {"name": RESOURCE, "singularName": "imageupdater", "namespaced": true, "kind": "ImageUpdater",
         "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]},
        {"name": "imageupdaters/status", "singularName": "", "namespaced": true, "kind": "ImageUpdater",
         "verbs": ["get", "patch", "update"]}]}))
    .into_response()
}

/// Both list routes: the cluster-wide one has no namespace in its path.
async fn list_route(
    State(state): State<Arc<KubeState>>,
    namespace: Option<Path<String>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let namespace = namespace.map(|Path(ns)| ns);
    list(
        &state,
        &headers,
        namespace.as_deref(),
        query.as_deref().unwrap_or_default(),
    )
}

fn list(state: &KubeState, headers: &HeaderMap, namespace: Option<&str>, query: &str) -> Response {
    if let Err(denied) = authorize_on(state, headers, "list", RESOURCE, namespace, None) {
        return denied;
    }
    let metadata_only = match negotiate(headers) {
        Ok(metadata_only) => metadata_only,
        Err(refused) => return refused,
    };
    let query = match ListQuery::parse(query) {
        Ok(query) => query,
        Err(refused) => return refused,
    };
    let resource_version = state.current_resource_version();
    lock(&state.image_updaters.objects).list_response(
        &query,
        namespace,
        metadata_only,
        resource_version,
    )
}

async fn get_one(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize_on(
        &state,
        &headers,
        "get",
        RESOURCE,
        Some(&namespace),
        Some(&name),
    ) {
        return denied;
    }
    lock(&state.image_updaters.objects).get_response(&namespace, &name)
}

/// `POST` of an ImageUpdater object (`kubectl create`), in the namespace of its path.
async fn create(
    State(state): State<Arc<KubeState>>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let Ok(mut object) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "the body of the request was in an unknown format");
    };
    object["metadata"]["namespace"] = json!(namespace);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if state.image_updater(&namespace, &name).is_some() {
        return crate::access::failure(
            409,
            "AlreadyExists",
            &format!("imageupdaters.argocd-image-updater.argoproj.io \"{name}\" already exists"),
            crate::access::details(Some(&name), "argocd-image-updater.argoproj.io", RESOURCE),
        );
    }
    let agent = headers.get("user-agent").and_then(|v| v.to_str().ok());
    let manager = managed_fields::manager_of(query.as_deref().unwrap_or_default(), agent);
    match state.create_image_updater(object, &manager) {
        Ok(created) => (axum::http::StatusCode::CREATED, axum::Json(created)).into_response(),
        Err(problems) => status(
            422,
            &format!(
                "ImageUpdater.argocd-image-updater.argoproj.io \"{name}\" is invalid: {problems}"
            ),
        ),
    }
}

async fn patch_object(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let request = Request {
        namespace: &namespace,
        name: &name,
        query: query.as_deref().unwrap_or_default(),
        part: Part::Object,
    };
    patch(&state, &headers, &request, &body)
}

async fn patch_status(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let request = Request {
        namespace: &namespace,
        name: &name,
        query: query.as_deref().unwrap_or_default(),
        part: Part::Status,
    };
    patch(&state, &headers, &request, &body)
}

/// A PATCH: of which object, with which query, to which part.
struct Request<'a> {
    namespace: &'a str,
    name: &'a str,
    query: &'a str,
    part: Part,
}

fn patch(state: &KubeState, headers: &HeaderMap, request: &Request, body: &[u8]) -> Response {
    let Request {
        namespace,
        name,
        part,
        ..
    } = *request;
    let resource = match part {
        Part::Object => RESOURCE,
        Part::Status => "imageupdaters/status",
    };
    if let Err(denied) = authorize_on(
        state,
        headers,
        "patch",
        resource,
        Some(namespace),
        Some(name),
    ) {
        return denied;
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !content_type.starts_with("application/merge-patch+json") {
        return status(
            415,
            &format!(
                "unsupported patch type {content_type} (this stand-in takes merge patches for imageupdaters)"
            ),
        );
    }
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "the body of the request was in an unknown format");
    };
    let mut objects = lock(&state.image_updaters.objects);
    let Some(current) = objects.get(namespace, name).map(|s| s.object()) else {
        return objects.not_found(name);
    };
    let mut patched = current.clone();
    json_patch::merge(&mut patched, &patch);
    let mut updated = current.clone();
    match part {
        // The status subresource ignores everything but status.
        Part::Status => updated["status"] = patched["status"].clone(),
        // The main resource ignores status.
        Part::Object => {
            updated = patched;
            updated["status"] = current["status"].clone();
            if updated["status"].is_null()
                && let Some(map) = updated.as_object_mut()
            {
                map.remove("status");
            }
        }
    }
    if let Err(problems) = state.image_updaters.validate(&mut updated) {
        return status(
            422,
            &format!(
                "ImageUpdater.argocd-image-updater.argoproj.io \"{name}\" is invalid: {problems}"
            ),
        );
    }
    if updated == current {
        return axum::Json(updated).into_response();
    }
    let user_agent = headers.get("user-agent").and_then(|v| v.to_str().ok());
    let manager = managed_fields::manager_of(request.query, user_agent);
    let writer = Writer {
        manager: &manager,
        operation: "Update",
        part: Some(part),
    };
    let fields = &state.image_updaters.crd().fields;
    managed_fields::record(fields, Some(&current), &mut updated, &writer);
    written(
        &mut updated,
        &current["spec"],
        state.next_resource_version(),
    );
    let key = (namespace.to_string(), name.to_string());
    json_response(&objects.put(key, updated).json)
}
