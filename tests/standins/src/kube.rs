//! The Kubernetes API server, for `applications.argoproj.io/v1alpha1` (and reading
//! `applicationsets`).
//!
//! It behaves like kube-apiserver where the function depends on it: bearer tokens checked
//! like EKS checks them, RBAC denials with the real message shape, metadata-only lists with
//! `limit`/`continue` and the real content negotiation (406 for a media type it cannot
//! serve), merge and JSON patches with their real failure codes, optimistic concurrency on
//! `resourceVersion`, structural pruning of unknown fields with a `Warning` header,
//! validation of every write against the Argo CD CRD (422 with field causes), discovery and
//! `SelfSubjectAccessReview`, so that `kubectl` itself runs against it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::faults::{Shared, lock, reason_for};
use crate::resources::{Kind, Resources, json_response, written};
use crate::token::{Identity, verify};

const CRD_YAML: &str = include_str!("../crd/application-crd.yaml");
const API_VERSION: &str = "argoproj.io/v1alpha1";

/// The Application store and what the API server needs to judge requests.
pub struct KubeState {
    pub cluster_name: String,
    pub identities: Vec<Identity>,
    pub shared: Arc<Shared>,
    apps: Mutex<Store>,
    schema: jsonschema::Validator,
    structure: StructuralSchema,
    /// Core `Event`s created, oldest first.
    events: Mutex<Vec<Value>>,
    /// Core `Secret`s by (namespace, name), served read-only.
    secrets: Mutex<BTreeMap<(String, String), Value>>,
    /// Core `ConfigMap`s by (namespace, name), served read-only (`kube-system/aws-auth`).
    config_maps: Mutex<BTreeMap<(String, String), Value>>,
    /// Image Updater v1.x objects, with their own CRD.
    pub image_updaters: crate::imageupdaters::ImageUpdaterStore,
    /// Every `Warning` header sent, oldest first: tests assert the function causes none.
    warnings: Mutex<Vec<String>>,
    /// Edits that land just before the next PATCH of an Application is judged.
    races: Mutex<BTreeMap<(String, String), RacingEdit>>,
    /// Argo CD's application controller, when a test runs one.
    controller: Mutex<Option<crate::argocd::Run>>,
}

type RacingEdit = Box<dyn FnOnce(&mut Value) + Send>;

struct Store {
    apps: Resources,
    /// ApplicationSets, served read-only for their `ignoreApplicationDifferences`.
    application_sets: BTreeMap<(String, String), Value>,
    resource_version: u64,
}

/// The `openAPIV3Schema` of `v1alpha1` in the vendored CRD.
pub fn application_schema() -> Result<Value, String> {
    let crd: Value = serde_yaml_ng::from_str(CRD_YAML).map_err(|e| format!("CRD YAML: {e}"))?;
    crd["spec"]["versions"]
        .as_array()
        .and_then(|versions| versions.iter().find(|v| v["name"] == "v1alpha1"))
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .filter(|s| s.is_object())
        .ok_or_else(|| "CRD has no v1alpha1 openAPIV3Schema".to_string())
}

impl KubeState {
    pub fn new(
        cluster_name: &str,
        identities: Vec<Identity>,
        shared: Arc<Shared>,
    ) -> Result<Self, String> {
        let schema_value = application_schema()?;
        let schema = jsonschema::validator_for(&schema_value).map_err(|e| e.to_string())?;
        Ok(Self {
            cluster_name: cluster_name.to_string(),
            identities,
            shared,
            apps: Mutex::new(Store {
                apps: Resources::new(Kind {
                    group: "argoproj.io",
                    api_version: API_VERSION,
                    plural: "applications",
                    list_kind: "ApplicationList",
                }),
                application_sets: BTreeMap::new(),
                resource_version: 0,
            }),
            schema,
            structure: StructuralSchema::of(&schema_value),
            image_updaters: crate::imageupdaters::ImageUpdaterStore::new()?,
            events: Mutex::new(Vec::new()),
            secrets: Mutex::new(BTreeMap::new()),
            config_maps: Mutex::new(BTreeMap::new()),
            warnings: Mutex::new(Vec::new()),
            races: Mutex::new(BTreeMap::new()),
            controller: Mutex::new(None),
        })
    }

    /// Runs Argo CD's application controller: from now on, a write it acts on moves the
    /// Application's status as [`crate::argocd`] says. A controller on the wall clock steps
    /// itself; one on a test's clock moves only with [`KubeState::step_to`]. Running another
    /// script keeps what the controller knows of each Application.
    pub fn run_controller(&self, controller: crate::argocd::Controller) {
        let mut run = lock(&self.controller);
        match run.as_mut() {
            Some(run) => run.controller = controller,
            None => *run = Some(crate::argocd::Run::new(controller)),
        }
    }

    /// The clock the controller runs on, when one runs.
    pub fn controller_clock(&self) -> Option<Arc<crate::clock::SimClock>> {
        lock(&self.controller)
            .as_ref()
            .map(|run| run.controller.clock.clone())
    }

    /// How many sync operations the controller ran on an Application.
    pub fn syncs(&self, namespace: &str, name: &str) -> usize {
        lock(&self.controller).as_ref().map_or(0, |run| {
            run.operations(&(namespace.to_string(), name.to_string()))
        })
    }

    /// Runs every controller step due up to `until`, in time order, each stamped with its own
    /// time, then moves the controller's clock to `until`.
    pub fn step_to(&self, until: time::OffsetDateTime) {
        let mut guard = lock(&self.controller);
        let Some(run) = guard.as_mut() else {
            return;
        };
        loop {
            let due = run.next_due(until);
            let poll = run.poll_due(until);
            if let Some(at) = poll.filter(|p| due.as_ref().is_none_or(|(_, d)| p < d)) {
                run.controller.clock.set(at);
                let apps: Vec<((String, String), Value)> = {
                    let store = lock(&self.apps);
                    let keys = store.apps.keys();
                    keys.into_iter()
                        .filter_map(|k| store.apps.get(&k.0, &k.1).map(|s| (k, s.object())))
                        .collect()
                };
                run.poll(at, &apps);
                continue;
            }
            let Some((key, at)) = due else { break };
            run.controller.clock.set(at);
            let stepped = self.edit(&key.0, &key.1, |app| run.step(&key, app));
            if stepped.is_err() {
                // The Application is gone: its steps go with it.
                run.forget(&key);
            }
        }
        run.controller.clock.set(until);
    }

    /// An edit by a person or another tool, written as field manager `manager` (`kubectl-edit`
    /// for `kubectl edit`, `argocd-controller` for a parent Application re-applying its
    /// child): `managedFields` move as kube-apiserver moves them, and the controller sees the
    /// write as it sees the function's.
    pub fn edit_as(
        self: &Arc<Self>,
        manager: &str,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), String> {
        let before = self.get(namespace, name).ok_or("no such application")?;
        self.edit(namespace, name, |app| {
            change(app);
            let writer = crate::managed_fields::Writer {
                manager,
                operation: "Update",
                part: None,
            };
            let (fields, _) = crate::writes::application_fields();
            crate::managed_fields::record(fields, Some(&before), app, &writer);
        })?;
        let after = self.get(namespace, name).ok_or("no such application")?;
        self.observed(namespace, name, &before, &after);
        Ok(())
    }

    /// `argocd app rollback <app> <id>` as Argo CD's API server runs it
    /// (`server/application/application.go` `Rollback`, then `util/argo/argo.go`
    /// `SetAppOperation`): refused while automated sync is on, while an operation is set, or
    /// for a history id it does not hold; otherwise an operation that syncs that entry's
    /// revision(s) and source(s) with the apply strategy (hooks skipped), initiated by
    /// `user`, with `operationState` nulled, written as `argocd-server`. The spec is left as
    /// it is: the next refresh shows the Application OutOfSync.
    pub fn rollback(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
        id: i64,
        user: &str,
    ) -> Result<(), String> {
        let app = self.get(namespace, name).ok_or("no such application")?;
        if crate::argocd::automated(&app) {
            return Err("rollback cannot be initiated when auto-sync is enabled".into());
        }
        if !app["operation"].is_null() {
            return Err("another operation is already in progress".into());
        }
        let entry = app["status"]["history"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|h| h["id"] == id)
            .cloned()
            .ok_or_else(|| format!("application {name} does not have deployment with id {id}"))?;
        let mut sync = json!({"prune": false, "syncStrategy": {"apply": {}},
            "syncOptions": app["spec"]["syncPolicy"]["syncOptions"]});
        for key in ["revision", "revisions", "source", "sources"] {
            if !entry[key].is_null() {
                sync[key] = entry[key].clone();
            }
        }
        self.edit_as("argocd-server", namespace, name, |app| {
            app["operation"] = json!({"sync": sync, "initiatedBy": {"username": user}});
            app["status"]["operationState"] = Value::Null;
        })
    }

    /// A write the controller watches: it schedules what it does about it, and steps itself
    /// when it runs on the wall clock.
    fn observed(self: &Arc<Self>, namespace: &str, name: &str, before: &Value, after: &Value) {
        let wall = {
            let mut guard = lock(&self.controller);
            let Some(run) = guard.as_mut() else {
                return;
            };
            run.observe((namespace.to_string(), name.to_string()), before, after);
            !run.controller.clock.is_scripted()
        };
        if !wall {
            return;
        }
        let state = self.clone();
        tokio::spawn(async move {
            loop {
                let next = lock(&state.controller)
                    .as_ref()
                    .and_then(|run| run.next_at());
                let Some(at) = next else { break };
                let wait = at - time::OffsetDateTime::now_utc();
                if wait.is_positive() {
                    tokio::time::sleep(wait.unsigned_abs()).await;
                }
                state.step_to(time::OffsetDateTime::now_utc());
            }
        });
    }

    /// Another client's edit that lands between the function's read and its write: applied,
    /// as `edit` applies it, when the next PATCH of this Application arrives and before that
    /// PATCH is judged. A race without a sleep: the order is the same on any machine.
    pub fn race_next_patch(
        &self,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value) + Send + 'static,
    ) {
        lock(&self.races).insert((namespace.to_string(), name.to_string()), Box::new(change));
    }

    /// A new resourceVersion: one counter for every kind, as etcd's revision is.
    pub(crate) fn next_resource_version(&self) -> u64 {
        let mut store = lock(&self.apps);
        store.resource_version += 1;
        store.resource_version
    }

    pub(crate) fn current_resource_version(&self) -> u64 {
        lock(&self.apps).resource_version
    }

    /// The Events created so far.
    pub fn events(&self) -> Vec<Value> {
        lock(&self.events).clone()
    }

    /// Where Events are kept, for [`crate::events`].
    pub(crate) fn events_store(&self) -> &Mutex<Vec<Value>> {
        &self.events
    }

    /// The `Warning` headers sent so far.
    pub fn warnings(&self) -> Vec<String> {
        lock(&self.warnings).clone()
    }

    /// Stores an ApplicationSet (read-only here: the function only reads them).
    pub fn insert_application_set(&self, mut set: Value) -> Result<(), String> {
        let name = set["metadata"]["name"]
            .as_str()
            .ok_or("applicationset without metadata.name")?
            .to_string();
        let namespace = set["metadata"]["namespace"]
            .as_str()
            .unwrap_or("argocd")
            .to_string();
        set["metadata"]["namespace"] = json!(namespace);
        set["apiVersion"] = json!(API_VERSION);
        set["kind"] = json!("ApplicationSet");
        let mut store = lock(&self.apps);
        store.resource_version += 1;
        let version = store.resource_version;
        set["metadata"]["resourceVersion"] = json!(version.to_string());
        set["metadata"]["uid"] = json!(format!("00000000-0000-0000-4444-{version:012}"));
        set["metadata"]["generation"] = json!(1);
        set["metadata"]["creationTimestamp"] = json!(creation_timestamp());
        crate::events::created(&mut set, &json!({}), "kubectl-client-side-apply");
        store.application_sets.insert((namespace, name), set);
        Ok(())
    }

    /// Drops the fields the CRD's structural schema does not declare, as kube-apiserver
    /// prunes custom resources, and returns their paths for the `Warning` header.
    pub fn prune(&self, app: &mut Value) -> Vec<String> {
        let mut dropped = Vec::new();
        self.structure.prune(app, FieldPath::Root, &mut dropped);
        dropped
    }

    /// Stores an Application as a create would: validated, with a fresh resourceVersion.
    pub fn insert(&self, mut app: Value) -> Result<(), String> {
        let name = app["metadata"]["name"]
            .as_str()
            .ok_or("application without metadata.name")?
            .to_string();
        let namespace = app["metadata"]["namespace"]
            .as_str()
            .unwrap_or("argocd")
            .to_string();
        app["metadata"]["namespace"] = json!(namespace);
        app["apiVersion"] = json!(API_VERSION);
        app["kind"] = json!("Application");
        let dropped = self.prune(&mut app);
        if !dropped.is_empty() {
            lock(&self.warnings).extend(dropped.iter().map(|f| format!("unknown field \"{f}\"")));
        }
        self.validate(&app)
            .map_err(|e| format!("{namespace}/{name}: {e}"))?;
        let mut store = lock(&self.apps);
        app["metadata"]["creationTimestamp"] = json!(creation_timestamp());
        store.resource_version += 1;
        app["metadata"]["resourceVersion"] = json!(store.resource_version.to_string());
        app["metadata"]["generation"] = json!(1);
        app["metadata"]["uid"] = json!(format!(
            "00000000-0000-0000-0000-{:012}",
            store.resource_version
        ));
        crate::writes::created_by_kubectl_apply(&mut app);
        store.apps.put((namespace, name), app);
        Ok(())
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.apps)
            .apps
            .get(namespace, name)
            .map(|stored| stored.object())
    }

    pub fn len(&self) -> usize {
        lock(&self.apps).apps.len()
    }

    /// Deletes an Application, as `kubectl delete application` would (no finalizers).
    pub fn delete(&self, namespace: &str, name: &str) {
        let mut store = lock(&self.apps);
        store.resource_version += 1;
        store.apps.remove(namespace, name);
    }

    /// The Helm parameter `name` of `namespace/app` (its single source) as stored now.
    pub fn helm_parameter(&self, namespace: &str, app: &str, name: &str) -> Option<String> {
        self.get(namespace, app)?["spec"]["source"]["helm"]["parameters"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name)?["value"]
            .as_str()
            .map(str::to_string)
    }

    /// The seed Application's `image.tag` as stored now.
    pub fn seed_tag(&self) -> Option<String> {
        self.helm_parameter("argocd", crate::fixtures::SEED_APP, "image.tag")
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Edits an Application as another client would (a user, Argo CD): a write that bumps
    /// the resourceVersion. Used to race the function.
    pub fn edit(
        &self,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Result<(), String> {
        let mut store = lock(&self.apps);
        let key = (namespace.to_string(), name.to_string());
        let mut app = store
            .apps
            .get(namespace, name)
            .map(|stored| stored.object())
            .ok_or("no such application")?;
        store.resource_version += 1;
        let before = app["spec"].clone();
        change(&mut app);
        written(&mut app, &before, store.resource_version);
        store.apps.put(key, app);
        Ok(())
    }

    /// Validates against the CRD schema; the error lists every violation as the API does.
    pub fn validate(&self, app: &Value) -> Result<(), String> {
        let causes = self.causes(app);
        if causes.is_empty() {
            Ok(())
        } else {
            Err(causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect::<Vec<_>>()
                .join(", "))
        }
    }

    /// Each violation, the `details.causes` of a 422.
    fn causes(&self, app: &Value) -> Vec<crate::writes::Cause> {
        self.schema
            .iter_errors(app)
            .map(|e| crate::writes::cause(&e))
            .collect()
    }
}

/// Where a value sits in the object being pruned, kept as a chain of borrowed steps and
/// written out only for a field that is dropped: most objects drop nothing, and a path
/// built for each of the thousands of fields of a 50 KB status cost the stand-in more
/// than the rest of a PATCH.
#[derive(Clone, Copy)]
pub(crate) enum FieldPath<'a> {
    Root,
    Key(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl FieldPath<'_> {
    /// The path as kube-apiserver writes it in a `Warning`: `spec.source.helm[0].name`.
    fn render(&self, out: &mut String) {
        match self {
            FieldPath::Root => {}
            FieldPath::Key(parent, key) => {
                parent.render(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            FieldPath::Index(parent, index) => {
                parent.render(out);
                out.push_str(&format!("[{index}]"));
            }
        }
    }

    fn to_field(self) -> String {
        let mut out = String::new();
        self.render(&mut out);
        out
    }
}

/// What structural pruning reads of a CRD's schema, taken out of it once: walking the
/// schema as JSON looked up three or four of its keys for every field of the object pruned.
#[derive(Default)]
pub(crate) struct StructuralSchema {
    preserves_unknown_fields: bool,
    properties: Option<HashMap<String, StructuralSchema>>,
    additional_properties: Option<Box<StructuralSchema>>,
    items: Option<Box<StructuralSchema>>,
}

impl StructuralSchema {
    pub(crate) fn of(schema: &Value) -> Self {
        let nested = |key: &str| {
            Some(&schema[key])
                .filter(|s| s.is_object())
                .map(|s| Box::new(Self::of(s)))
        };
        Self {
            preserves_unknown_fields: schema["x-kubernetes-preserve-unknown-fields"] == json!(true),
            properties: schema["properties"].as_object().map(|properties| {
                properties
                    .iter()
                    .map(|(key, schema)| (key.clone(), Self::of(schema)))
                    .collect()
            }),
            additional_properties: nested("additionalProperties"),
            items: nested("items"),
        }
    }

    /// Structural pruning: an object whose schema declares `properties` keeps only those,
    /// unless it preserves unknown fields; lists and maps are walked with their item schemas.
    /// Each dropped field's path goes to `dropped`, unknown fields of an object before those
    /// of its children.
    pub(crate) fn prune(&self, value: &mut Value, path: FieldPath, dropped: &mut Vec<String>) {
        if self.preserves_unknown_fields {
            return;
        }
        match value {
            Value::Object(map) => {
                if let Some(properties) = &self.properties {
                    let unknown: Vec<String> = map
                        .keys()
                        .filter(|k| !properties.contains_key(*k))
                        .cloned()
                        .collect();
                    for key in unknown {
                        map.remove(&key);
                        dropped.push(FieldPath::Key(&path, &key).to_field());
                    }
                    for (key, child) in map.iter_mut() {
                        if let Some(child_schema) = properties.get(key) {
                            child_schema.prune(child, FieldPath::Key(&path, key), dropped);
                        }
                    }
                } else if let Some(item_schema) = &self.additional_properties {
                    for (key, child) in map.iter_mut() {
                        item_schema.prune(child, FieldPath::Key(&path, key), dropped);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = &self.items {
                    for (i, item) in items.iter_mut().enumerate() {
                        item_schema.prune(item, FieldPath::Index(&path, i), dropped);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Where the API is served a second time, as behind a proxy that routes by path
/// (Rancher's `/k8s/clusters/<id>`), so a client that drops an endpoint's path is caught.
pub const PROXY_PREFIX: &str = "/k8s/clusters/c-1";

pub fn router(state: Arc<KubeState>) -> Router {
    let api = api_router(state.clone())
        .merge(crate::imageupdaters::router(state.clone()))
        .layer(axum::middleware::from_fn_with_state(
            state,
            crate::access::authorize_first,
        ));
    Router::new()
        .nest(PROXY_PREFIX, api.clone())
        .merge(api)
        .layer(axum::middleware::from_fn(compress))
}

/// kube-apiserver's response compression (`APIResponseCompression`, on since 1.16): a body
/// larger than 128 KiB goes out gzipped, at level 1, to a client whose `Accept-Encoding`
/// names gzip; smaller bodies, and clients that do not ask, get it as it is.
pub const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

async fn compress(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use std::io::Write;
    let asks = request
        .headers()
        .get_all("accept-encoding")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| coding.split(';').next().unwrap_or_default().trim() == "gzip");
    let response = next.run(request).await;
    if !asks {
        return response;
    }
    let (mut head, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(head, axum::body::Body::empty());
    };
    if bytes.len() <= GZIP_THRESHOLD_BYTES {
        return Response::from_parts(head, axum::body::Body::from(bytes));
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
    let compressed = encoder.write_all(&bytes).and_then(|()| encoder.finish());
    let Ok(compressed) = compressed else {
        return Response::from_parts(head, axum::body::Body::from(bytes));
    };
    head.headers.insert(
        axum::http::header::CONTENT_ENCODING,
        axum::http::HeaderValue::from_static("gzip"),
    );
    head.headers.append(
        axum::http::header::VARY,
        axum::http::HeaderValue::from_static("Accept-Encoding"),
    );
    head.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(head, axum::body::Body::from(compressed))
}

fn api_router(state: Arc<KubeState>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/api", get(core_versions))
        .route("/api/v1", get(core_resources))
        .route("/api/v1/namespaces/{namespace}", get(get_namespace))
        .route("/api/v1/namespaces/{namespace}/secrets", get(list_secrets))
        .route(
            "/api/v1/namespaces/{namespace}/secrets/{name}",
            get(get_secret),
        )
        .route(
            "/api/v1/namespaces/{namespace}/events",
            axum::routing::post(crate::events::create).get(list_namespace_events),
        )
        .route("/api/v1/events", get(list_all_events))
        .route("/apis", get(group_list))
        .route("/apis/argoproj.io", get(argoproj_group))
        .route("/apis/argoproj.io/v1alpha1", get(argoproj_resources))
        .route(
            "/apis/authorization.k8s.io/v1",
            get(authorization_resources),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            axum::routing::post(access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            axum::routing::post(subject_access_review),
        )
        .route(
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            get(get_config_map),
        )
        .route(
            "/apis/argoproj.io/v1alpha1/namespaces/{namespace}/applicationsets/{name}",
            get(get_application_set),
        )
        .route("/apis/argoproj.io/v1alpha1/applications", get(list_route))
        .route(
            "/apis/argoproj.io/v1alpha1/namespaces/{namespace}/applications",
            get(list_route),
        )
        .route(
            "/apis/argoproj.io/v1alpha1/namespaces/{namespace}/applications/{name}",
            get(get_one).patch(patch_one),
        )
        .fallback(|| async { status(404, "the server could not find the requested resource") })
        .with_state(state)
}

/// A Kubernetes `Status` body.
pub fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

pub(crate) fn status(code: u16, message: &str) -> Response {
    let http = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        http,
        axum::Json(status_body(code, reason_for(code), message)),
    )
        .into_response()
}

/// Authenticates only: who is asking.
fn authenticate<'a>(state: &'a KubeState, headers: &HeaderMap) -> Result<&'a Identity, Response> {
    let unauthorized = || status(401, "Unauthorized");
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(unauthorized)?;
    if state.shared.take_token_rejection() {
        return Err(unauthorized());
    }
    verify(
        token,
        &state.cluster_name,
        &state.identities,
        state.shared.now(),
    )
    .map_err(|reason| {
        tracing::debug!(%reason, "token refused");
        unauthorized()
    })
}

/// Authenticates and authorizes `verb` on `applications`. `name` is for a denial's message.
fn authorize<'a>(
    state: &'a KubeState,
    headers: &HeaderMap,
    verb: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<&'a Identity, Response> {
    authorize_on(state, headers, verb, "applications", namespace, name)
}

pub(crate) fn authorize_on<'a>(
    state: &'a KubeState,
    headers: &HeaderMap,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<&'a Identity, Response> {
    let identity = authenticate(state, headers)?;
    if identity.may_on(verb, resource, namespace, name) {
        return Ok(identity);
    }
    let group = if resource.starts_with("imageupdaters") {
        "argocd-image-updater.argoproj.io"
    } else if matches!(resource, "events" | "secrets" | "configmaps") {
        ""
    } else {
        "argoproj.io"
    };
    let plural = resource.split('/').next().unwrap_or(resource);
    let qualified = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let object = match name {
        Some(n) => format!("{qualified} \"{n}\""),
        None => qualified,
    };
    let scope = match namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    Err(status(
        403,
        &format!(
            "{object} is forbidden: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}",
            identity.arn
        ),
    ))
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
    if let Err(denied) = authorize(state, headers, "list", namespace, None) {
        return denied;
    }
    let query = match ListQuery::parse(query) {
        Ok(query) => query,
        Err(refused) => return refused,
    };
    let metadata_only = match negotiate(headers) {
        Ok(metadata_only) => metadata_only,
        Err(refused) => return refused,
    };

    let store = lock(&state.apps);
    store
        .apps
        .list_response(&query, namespace, metadata_only, store.resource_version)
}

/// Now, as the API server writes `creationTimestamp`: RFC 3339, whole seconds.
pub(crate) fn creation_timestamp() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Content negotiation as kube-apiserver does it for a list: the first acceptable media
/// type wins; `as=PartialObjectMetadataList` is served only with `g=meta.k8s.io;v=v1`
/// (or `v1beta1`); `as=Table` is not served here, so a client falls back to its next
/// choice; nothing acceptable is a 406. `Ok(true)` means metadata only.
pub(crate) fn negotiate(headers: &HeaderMap) -> Result<bool, Response> {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        let essence = parts.next().unwrap_or_default();
        if !matches!(essence, "application/json" | "application/*" | "*/*") {
            continue;
        }
        let params: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
        match params.get("as") {
            None => return Ok(false),
            Some(&"PartialObjectMetadataList")
                if params.get("g") == Some(&"meta.k8s.io")
                    && matches!(params.get("v"), Some(&"v1") | Some(&"v1beta1")) =>
            {
                return Ok(true);
            }
            Some(_) => continue,
        }
    }
    Err(status(
        406,
        &format!(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf (asked: {accept})"
        ),
    ))
}

/// A list request's query, read as kube-apiserver reads it for every resource: a bad
/// `labelSelector`, `limit` or `continue` is a 400, `limit=0` means no limit.
pub(crate) struct ListQuery {
    selector: Option<LabelSelector>,
    /// `fieldSelector` on `metadata.name`/`metadata.namespace`, the fields every custom
    /// resource can be selected by.
    fields: Vec<FieldRequirement>,
    pub limit: Option<usize>,
    /// Where the page starts: after the last key of the previous page.
    pub after: std::ops::Bound<(String, String)>,
}

impl ListQuery {
    pub(crate) fn parse(query: &str) -> Result<Self, Response> {
        let params: BTreeMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let selector = params
            .get("labelSelector")
            .map(|s| LabelSelector::parse(s))
            .transpose()
            .map_err(|e| status(400, &format!("unable to parse requirement: {e}")))?;
        let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
            None | Some(Ok(0)) => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => return Err(status(400, "limit must be an integer")),
        };
        let after = match params.get("continue").filter(|c| !c.is_empty()) {
            None => std::ops::Bound::Unbounded,
            Some(token) => std::ops::Bound::Excluded(
                decode_continue(token).ok_or_else(|| status(400, "continue key is not valid"))?,
            ),
        };
        let fields = field_requirements(
            params.get("fieldSelector").map_or("", String::as_str),
            &["metadata.name", "metadata.namespace"],
        )?;
        Ok(Self {
            selector,
            fields,
            limit,
            after,
        })
    }

    /// Whether a selector narrows the list (the API server then does not count what remains).
    pub(crate) fn selects(&self) -> bool {
        self.selector.as_ref().is_some_and(|s| !s.0.is_empty()) || !self.fields.is_empty()
    }

    /// Whether an object keyed `(namespace, name)` belongs in a list of `namespace`
    /// (all namespaces for `None`) under this query's label selector.
    pub(crate) fn admits(
        &self,
        namespace: Option<&str>,
        key: &(String, String),
        labels: &Value,
    ) -> bool {
        namespace.is_none_or(|wanted| wanted == key.0)
            && self.selector.as_ref().is_none_or(|s| s.matches(labels))
            && self.fields.iter().all(|(field, value, equal)| {
                let actual = if field == "metadata.name" {
                    &key.1
                } else {
                    &key.0
                };
                (actual == value) == *equal
            })
    }
}

/// A list's `metadata`: its resource version, and `continue` when more items remain.
pub(crate) fn list_metadata(resource_version: u64, next: Option<String>) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if let Some(token) = next {
        metadata["continue"] = json!(token);
    }
    metadata
}

pub(crate) fn encode_continue(key: &(String, String)) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!([key.0, key.1])).unwrap_or_default())
}

pub(crate) fn decode_continue(token: &str) -> Option<(String, String)> {
    let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
    let parsed: (String, String) = serde_json::from_slice(&bytes).ok()?;
    Some(parsed)
}

async fn get_one(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize(&state, &headers, "get", Some(&namespace), Some(&name)) {
        return denied;
    }
    let metadata_only = crate::resources::wants_metadata_object(&headers);
    lock(&state.apps)
        .apps
        .get_response_as(&namespace, &name, metadata_only)
}

async fn patch_one(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    if let Err(denied) = authorize(&state, &headers, "patch", Some(&namespace), Some(&name)) {
        return denied;
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let racing = lock(&state.races).remove(&(namespace.clone(), name.clone()));
    if let Some(change) = racing
        && let Err(e) = state.edit(&namespace, &name, change)
    {
        return status(500, &format!("the racing edit failed: {e}"));
    }
    let mut store = lock(&state.apps);
    let key = (namespace.clone(), name.clone());
    // The store stays locked for the whole request, as one etcd transaction would be.
    let Some(stored) = store.apps.get(&namespace, &name) else {
        return store.apps.not_found(&name);
    };
    let (current, current_json) = (&stored.object(), &stored.json);
    let query = query.unwrap_or_default();
    let patched = match crate::writes::apply_patch(&content_type, current, &body, &query, &name) {
        Ok(patched) => patched,
        Err(refused) => return refused,
    };
    let mut updated = patched.object.clone();
    if let Some(field) = immutable_changed(current, &updated) {
        return status(
            422,
            &format!("Application.argoproj.io \"{name}\" is invalid: {field}: field is immutable"),
        );
    }
    let dropped = state.prune(&mut updated);
    if crate::writes::strict(&query) && !dropped.is_empty() {
        return crate::writes::strict_refusal(&patched.object, &dropped);
    }
    let causes = state.causes(&updated);
    if !causes.is_empty() {
        return crate::writes::invalid("Application", "argoproj.io", &name, &causes);
    }
    let warnings: Vec<String> = dropped
        .iter()
        .map(|f| format!("299 - \"unknown field \\\"{f}\\\"\""))
        .collect();
    lock(&state.warnings).extend(dropped.iter().map(|f| format!("unknown field \"{f}\"")));
    let respond = |json: &Bytes| {
        let mut response = json_response(json);
        for warning in &warnings {
            if let Ok(value) = axum::http::HeaderValue::from_str(warning) {
                response.headers_mut().append("warning", value);
            }
        }
        response
    };
    if updated == *current {
        // A no-op patch does not bump the resourceVersion: the answer is the object stored.
        return respond(current_json);
    }
    let before = current.clone();
    store.resource_version += 1;
    let writer = crate::writes::PatchWriter {
        query: &query,
        headers: &headers,
        applied: patched.applied.as_ref(),
    };
    writer.record(current, &mut updated, store.resource_version);
    let after = updated.clone();
    let response = respond(&store.apps.put(key, updated).json);
    drop(store);
    state.observed(&namespace, &name, &before, &after);
    response
}

/// The immutable field a patch changed, as the API server names it.
fn immutable_changed(current: &Value, updated: &Value) -> Option<&'static str> {
    if updated["metadata"]["name"] != current["metadata"]["name"]
        || updated["metadata"]["namespace"] != current["metadata"]["namespace"]
    {
        return Some("metadata.name");
    }
    (updated["apiVersion"] != current["apiVersion"] || updated["kind"] != current["kind"])
        .then_some("apiVersion/kind")
}

async fn get_application_set(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize_on(
        &state,
        &headers,
        "get",
        "applicationsets",
        Some(&namespace),
        Some(&name),
    ) {
        return denied;
    }
    match lock(&state.apps)
        .application_sets
        .get(&(namespace, name.clone()))
    {
        Some(set) => axum::Json(set.clone()).into_response(),
        None => crate::access::failure(
            404,
            "NotFound",
            &format!("applicationsets.argoproj.io \"{name}\" not found"),
            crate::access::details(Some(&name), "argoproj.io", "applicationsets"),
        ),
    }
}

/// kube-apiserver's protobuf envelope (`k8s\0` + `runtime.Unknown`) and the fields of a
/// `SelfSubjectAccessReview` that `kubectl auth can-i` sends, with the field numbers of
/// `k8s.io/api/authorization/v1/generated.proto`. kubectl speaks protobuf to built-in types.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Unknown {
        #[prost(bytes = "vec", tag = "2")]
        pub raw: Vec<u8>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SelfSubjectAccessReview {
        #[prost(message, optional, tag = "2")]
        pub spec: Option<Spec>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Spec {
        #[prost(message, optional, tag = "1")]
        pub resource_attributes: Option<ResourceAttributes>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceAttributes {
        #[prost(string, tag = "1")]
        pub namespace: String,
        #[prost(string, tag = "2")]
        pub verb: String,
        #[prost(string, tag = "3")]
        pub group: String,
        #[prost(string, tag = "4")]
        pub version: String,
        #[prost(string, tag = "5")]
        pub resource: String,
        #[prost(string, tag = "6")]
        pub subresource: String,
        #[prost(string, tag = "7")]
        pub name: String,
    }
}

/// A SelfSubjectAccessReview body, JSON or protobuf, as JSON.
fn access_review_body(headers: &HeaderMap, body: &[u8]) -> Option<Value> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !content_type.starts_with("application/vnd.kubernetes.protobuf") {
        return serde_json::from_slice(body).ok();
    }
    use prost::Message;
    let envelope = proto::Unknown::decode(body.strip_prefix(b"k8s\0")?).ok()?;
    let review = proto::SelfSubjectAccessReview::decode(envelope.raw.as_slice()).ok()?;
    let attributes = review.spec?.resource_attributes?;
    Some(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": attributes.namespace, "verb": attributes.verb,
            "group": attributes.group, "version": attributes.version, "resource": attributes.resource,
            "subresource": attributes.subresource, "name": attributes.name}}}),
    )
}

/// `kubectl auth can-i`: answers from the same RBAC grants the other routes enforce.
async fn access_review(
    State(state): State<Arc<KubeState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let identity = match authenticate(&state, &headers) {
        Ok(identity) => identity,
        Err(denied) => return denied,
    };
    let Some(mut review) = access_review_body(&headers, &body) else {
        return status(400, "the body of the request was in an unknown format");
    };
    let allowed = reviewed(&review["spec"]["resourceAttributes"], &[identity]);
    review["status"] = json!({"allowed": allowed});
    review["metadata"] = crate::events::review_metadata(&review, &headers);
    (StatusCode::CREATED, axum::Json(review)).into_response()
}

/// Whether any of `identities` may do what a review's `resourceAttributes` ask, by the same
/// RBAC grants the other routes enforce.
fn reviewed(attributes: &Value, identities: &[&Identity]) -> bool {
    let verb = attributes["verb"].as_str().unwrap_or_default();
    let resource = attributes["resource"].as_str().unwrap_or_default();
    let group = attributes["group"].as_str().unwrap_or_default();
    let namespace = attributes["namespace"].as_str().filter(|n| !n.is_empty());
    let subresource = attributes["subresource"].as_str().unwrap_or_default();
    let resource = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    // The groups whose resources the grants name: Argo CD's, Image Updater's, the core
    // group's Events, Secrets and ConfigMaps, and `*` (which only a `*` grant allows).
    let known = match group {
        "argoproj.io" | "argocd-image-updater.argoproj.io" | "*" => true,
        "" => matches!(
            attributes["resource"].as_str(),
            Some("events" | "secrets" | "configmaps")
        ),
        _ => false,
    };
    known && identities.iter().any(|i| i.may(verb, &resource, namespace))
}

/// A `SubjectAccessReview` (what `doctor` asks as the operator, and `kubectl auth can-i --as
/// --as-group`): the caller must be allowed to create one; the answer is about the identities
/// the subject's user or groups name (`system:*` groups name nobody in particular).
async fn subject_access_review(
    State(state): State<Arc<KubeState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = match authenticate(&state, &headers) {
        Ok(identity) => identity,
        Err(denied) => return denied,
    };
    if !caller.may("create", "subjectaccessreviews", None) {
        return crate::access::failure(
            403,
            "Forbidden",
            &format!(
                "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope",
                caller.arn
            ),
            crate::access::details(None, "authorization.k8s.io", "subjectaccessreviews"),
        );
    }
    let Ok(mut review) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "the body of the request was in an unknown format");
    };
    let spec = &review["spec"];
    let user = spec["user"].as_str().unwrap_or_default();
    let groups: Vec<&str> = spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|g| !g.starts_with("system:"))
        .collect();
    if user.is_empty() && groups.is_empty() {
        return status(422, "at least one of user or group must be specified");
    }
    let subjects: Vec<&Identity> = state
        .identities
        .iter()
        .filter(|i| i.arn == user || i.groups.iter().any(|g| groups.contains(&g.as_str())))
        .collect();
    let allowed = reviewed(&spec["resourceAttributes"], &subjects);
    review["status"] = json!({"allowed": allowed});
    review["metadata"] = crate::events::review_metadata(&review, &headers);
    (StatusCode::CREATED, axum::Json(review)).into_response()
}

async fn version() -> Response {
    axum::Json(json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0-standin", "platform": "linux/amd64"})).into_response()
}

async fn core_versions() -> Response {
    axum::Json(json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})).into_response()
}

async fn authorization_resources() -> Response {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "authorization.k8s.io/v1", "resources": [
        {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": false,
         "kind": "SelfSubjectAccessReview", "verbs": ["create"]}]})).into_response()
}

async fn core_resources() -> Response {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
        {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
         "verbs": ["get", "list"], "shortNames": ["ns"]},
        {"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
         "verbs": ["create", "get", "list"], "shortNames": ["ev"]}]})).into_response()
}

/// The field selectors kube-apiserver accepts for core Events (`kubectl describe` sends
/// `involvedObject.*`); any other field is refused as the API server refuses it.
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.name",
    "metadata.namespace",
];

/// One `fieldSelector` requirement: the field's path, the value, and whether it must equal.
type FieldRequirement = (String, String, bool);

fn field_requirements(selector: &str, known: &[&str]) -> Result<Vec<FieldRequirement>, Response> {
    let mut out = Vec::new();
    for part in selector.split(',').filter(|p| !p.is_empty()) {
        let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = part.split_once("==") {
            (f, v, true)
        } else if let Some((f, v)) = part.split_once('=') {
            (f, v, true)
        } else {
            return Err(status(
                400,
                &format!("invalid selector: '{selector}'; can't understand '{part}'"),
            ));
        };
        if !known.contains(&field) {
            return Err(status(400, &format!("field label not supported: {field}")));
        }
        out.push((field.to_string(), value.to_string(), equal));
    }
    Ok(out)
}

fn event_field<'v>(event: &'v Value, field: &str) -> &'v str {
    let value = match field {
        "source" => &event["source"]["component"],
        dotted => dotted.split('.').fold(event, |v, key| &v[key]),
    };
    value.as_str().unwrap_or("")
}

async fn list_namespace_events(
    State(state): State<Arc<KubeState>>,
    Path(namespace): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    list_events(&state, Some(&namespace), &query, &headers)
}

async fn list_all_events(
    State(state): State<Arc<KubeState>>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    list_events(&state, None, &query, &headers)
}

/// Lists core Events as the API server does: `list events` authorized in the namespace (or
/// cluster-wide), filtered by `fieldSelector`, in an `EventList` with a resourceVersion.
fn list_events(
    state: &KubeState,
    namespace: Option<&str>,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    if let Err(denied) = authorize_on(state, headers, "list", "events", namespace, None) {
        return denied;
    }
    let requirements = match field_requirements(
        query.get("fieldSelector").map_or("", String::as_str),
        EVENT_FIELDS,
    ) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let mut items: Vec<Value> = lock(&state.events)
        .iter()
        .map(crate::events::as_list_item)
        .filter(|e| namespace.is_none_or(|ns| e["metadata"]["namespace"] == ns))
        .filter(|e| {
            requirements
                .iter()
                .all(|(field, value, equal)| (event_field(e, field) == value) == *equal)
        })
        .collect();
    // In etcd's order: by namespace, then name.
    items.sort_by_key(|e| {
        (
            e["metadata"]["namespace"].to_string(),
            e["metadata"]["name"].to_string(),
        )
    });
    axum::Json(json!({"apiVersion": "v1", "kind": "EventList",
        "metadata": {"resourceVersion": state.next_resource_version().to_string()}, "items": items}))
    .into_response()
}

/// `POST` of a core Event: stored for tests, with the fields kube-apiserver requires.
/// `stringData` written into `data` as base64, as the API server stores a Secret.
impl KubeState {
    pub fn insert_secret(
        &self,
        namespace: &str,
        name: &str,
        labels: Value,
        string_data: &[(&str, &str)],
    ) {
        use base64::Engine;
        let data: serde_json::Map<String, Value> = string_data
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    json!(base64::engine::general_purpose::STANDARD.encode(v)),
                )
            })
            .collect();
        let version = self.next_resource_version();
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "uid": format!("00000000-0000-0000-2222-{version:012}"),
                         "resourceVersion": version.to_string(), "creationTimestamp": creation_timestamp()},
            "data": data});
        crate::events::created(&mut secret, &json!({}), "kubectl-client-side-apply");
        lock(&self.secrets).insert((namespace.to_string(), name.to_string()), secret);
    }
}

impl KubeState {
    /// A ConfigMap with `data` (for `aws-auth`: `mapRoles` holding YAML).
    pub fn insert_config_map(&self, namespace: &str, name: &str, data: &[(&str, &str)]) {
        let data: BTreeMap<&str, &str> = data.iter().copied().collect();
        let version = self.next_resource_version();
        let mut config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": format!("00000000-0000-0000-3333-{version:012}"),
                         "resourceVersion": version.to_string(), "creationTimestamp": creation_timestamp()},
            "data": data});
        crate::events::created(&mut config_map, &json!({}), "kubectl-client-side-apply");
        lock(&self.config_maps).insert((namespace.to_string(), name.to_string()), config_map);
    }
}

async fn get_config_map(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize_on(
        &state,
        &headers,
        "get",
        "configmaps",
        Some(&namespace),
        Some(&name),
    ) {
        return denied;
    }
    match lock(&state.config_maps).get(&(namespace, name.clone())) {
        Some(config_map) => axum::Json(config_map.clone()).into_response(),
        None => status(404, &format!("configmaps \"{name}\" not found")),
    }
}

async fn get_secret(
    State(state): State<Arc<KubeState>>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize_on(
        &state,
        &headers,
        "get",
        "secrets",
        Some(&namespace),
        Some(&name),
    ) {
        return denied;
    }
    match lock(&state.secrets).get(&(namespace, name.clone())) {
        Some(secret) => axum::Json(secret.clone()).into_response(),
        None => status(404, &format!("secrets \"{name}\" not found")),
    }
}

/// Lists Secrets by a label selector of the forms the function sends (`k=v`, `k in (a,b)`).
async fn list_secrets(
    State(state): State<Arc<KubeState>>,
    Path(namespace): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize_on(&state, &headers, "list", "secrets", Some(&namespace), None) {
        return denied;
    }
    let selector = query.get("labelSelector").cloned().unwrap_or_default();
    let requirement: Option<(String, Vec<String>)> = if selector.is_empty() {
        None
    } else if let Some((key, rest)) = selector.split_once(" in (") {
        let values = rest
            .trim_end_matches(')')
            .split(',')
            .map(|v| v.trim().to_string())
            .collect();
        Some((key.trim().to_string(), values))
    } else if let Some((key, value)) = selector.split_once('=') {
        Some((key.trim().to_string(), vec![value.trim().to_string()]))
    } else {
        return status(400, &format!("unable to parse requirement: {selector}"));
    };
    let items: Vec<Value> = lock(&state.secrets)
        .iter()
        .filter(|((ns, _), _)| *ns == namespace)
        .map(|(_, s)| crate::events::as_list_item(s))
        .filter(|s| {
            requirement.as_ref().is_none_or(|(key, values)| {
                s["metadata"]["labels"][key]
                    .as_str()
                    .is_some_and(|v| values.iter().any(|w| w == v))
            })
        })
        .collect();
    axum::Json(json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": state.next_resource_version().to_string()}, "items": items}))
        .into_response()
}

/// A namespace exists here when something lives in it. kubectl asks after a 404 to tell
/// "no such object" from "no such namespace". (Served to any authenticated identity, where
/// a cluster would check `get namespaces`; kubectl treats a denial the same way.)
async fn get_namespace(
    State(state): State<Arc<KubeState>>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authenticate(&state, &headers) {
        return denied;
    }
    let store = lock(&state.apps);
    let exists = store.apps.has_namespace(&namespace)
        || store
            .application_sets
            .keys()
            .any(|(ns, _)| *ns == namespace);
    if exists {
        axum::Json(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
            "status": {"phase": "Active"}}),
        )
        .into_response()
    } else {
        status(404, &format!("namespaces \"{namespace}\" not found"))
    }
}

fn argoproj_group_value() -> Value {
    json!({"name": "argoproj.io", "versions": [{"groupVersion": API_VERSION, "version": "v1alpha1"}],
           "preferredVersion": {"groupVersion": API_VERSION, "version": "v1alpha1"}})
}

async fn group_list() -> Response {
    let authorization = json!({"name": "authorization.k8s.io", "versions": [{"groupVersion": "authorization.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "authorization.k8s.io/v1", "version": "v1"}});
    axum::Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [argoproj_group_value(), crate::imageupdaters::group(), authorization]})).into_response()
}

async fn argoproj_group() -> Response {
    let mut group = argoproj_group_value();
    group["kind"] = json!("APIGroup");
    group["apiVersion"] = json!("v1");
    axum::Json(group).into_response()
}

async fn argoproj_resources() -> Response {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION, "resources": [
        {"name": "applications", "singularName": "application", "namespaced": true, "kind": "Application",
         "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
         "shortNames": ["app", "apps"], "categories": ["argocd"]},
        {"name": "applicationsets", "singularName": "applicationset", "namespaced": true, "kind": "ApplicationSet",
         "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
         "shortNames": ["appset", "appsets"]}
    ]})).into_response()
}

/// Equality-based label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma as AND.
#[derive(Debug)]
struct LabelSelector(Vec<Requirement>);

#[derive(Debug)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

impl LabelSelector {
    fn parse(text: &str) -> Result<Self, String> {
        text.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|part| {
                let valid = |s: &str| {
                    !s.is_empty()
                        && s.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
                };
                let requirement = if let Some((k, v)) = part.split_once("!=") {
                    Requirement::NotEquals(k.trim().into(), v.trim().into())
                } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('='))
                {
                    Requirement::Equals(k.trim().into(), v.trim().into())
                } else if let Some(k) = part.strip_prefix('!') {
                    Requirement::Absent(k.trim().into())
                } else {
                    Requirement::Exists(part.into())
                };
                let key = match &requirement {
                    Requirement::Equals(k, _)
                    | Requirement::NotEquals(k, _)
                    | Requirement::Exists(k)
                    | Requirement::Absent(k) => k,
                };
                if valid(key) {
                    Ok(requirement)
                } else {
                    Err(format!("invalid label key in `{part}`"))
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    fn matches(&self, labels: &Value) -> bool {
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::Absent(k) => label(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> StructuralSchema {
        StructuralSchema::of(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "sources": {"type": "array", "items": {"type": "object", "properties": {
                        "repoURL": {"type": "string"},
                        "helm": {"type": "object", "properties": {
                            "valuesObject": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }}
                    }}},
                    "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}}
                }}
            }
        }))
    }

    fn pruned(mut object: Value) -> (Value, Vec<String>) {
        let mut dropped = Vec::new();
        schema().prune(&mut object, FieldPath::Root, &mut dropped);
        (object, dropped)
    }

    #[test]
    fn an_object_with_only_declared_fields_is_left_as_it_is() {
        let object = json!({"spec": {"sources": [{"repoURL": "r", "helm": {"valuesObject": {"any": {"thing": 1}}}}], "labels": {"a": {"v": "x"}}}});
        assert_eq!(pruned(object.clone()), (object, vec![]));
    }

    #[test]
    fn unknown_fields_are_dropped_and_named_by_their_path_as_the_api_server_writes_it() {
        let (object, dropped) = pruned(json!({
            "extra": 1,
            "spec": {"stray": true, "sources": [{"repoURL": "r"}, {"repoURL": "s", "imageTag": "t", "helm": {"valuesObject": {"kept": 1}, "odd": 2}}],
                     "labels": {"a": {"v": "x", "w": "y"}}}
        }));
        assert_eq!(
            object,
            json!({"spec": {"sources": [{"repoURL": "r"}, {"repoURL": "s", "helm": {"valuesObject": {"kept": 1}}}], "labels": {"a": {"v": "x"}}}})
        );
        assert_eq!(
            dropped,
            [
                "extra",
                "spec.stray",
                "spec.labels.a.w",
                "spec.sources[1].imageTag",
                "spec.sources[1].helm.odd",
            ]
        );
    }

    #[test]
    fn a_field_under_a_schema_that_preserves_unknown_fields_is_kept() {
        let object =
            json!({"spec": {"sources": [{"helm": {"valuesObject": {"image": {"tag": "1"}}}}]}});
        assert_eq!(pruned(object.clone()).1, Vec::<String>::new());
        assert_eq!(pruned(object.clone()).0, object);
    }
}
