//! The Argo CD Application, typed, read once from the API server's JSON: its metadata, its
//! sync policy, its status (sync, health, operation state, history, the images Pods run,
//! when Argo CD last compared it) and our audit record, next to the spec view (`AppView`:
//! identity, sources, where each image lives).
//!
//! A new type rather than a bigger `AppView`: the view borrows the spec as read and is what
//! the patch builder works on, while the status is parsed into owned fields; the Application
//! holds both, and the raw object for what must read the JSON as such (a guarded patch tests
//! the text it read; Argo CD's source objects are compared with our audit record's places).
//!
//! The read is lenient: an Application another controller or a person wrote may carry an odd
//! field (a number where a string belongs, a malformed time, an entry of the wrong shape).
//! One such field reads as absent, never as a failed read of the whole Application.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::application::audit::{AuditRecord, AuditedImage, rfc3339_at};
use crate::application::identity::Identity;
use crate::application::view::AppView;

/// One Application as read: typed where the crate reasons about it, raw where it must not.
#[derive(Debug, Clone)]
pub struct Application<'a> {
    /// The object as read: the patch builder's guards test its lists and its
    /// resourceVersion exactly, and our audit record's places are read in its spec.
    pub raw: &'a Value,
    /// Identity and sources, as the decision and the patch builder read them.
    pub view: AppView<'a>,
    pub metadata: Metadata,
    pub spec: Spec,
    pub status: Status,
    /// The operation requested and not yet picked up by the controller (`operation`).
    pub operation: Option<Operation>,
    /// Our audit record (`argocd-ecr-updater.io/last-update`), when it carries one that reads.
    pub audit: Option<AuditRecord>,
}

impl<'a> Application<'a> {
    pub fn of(raw: &'a Value) -> Self {
        Self {
            raw,
            view: AppView::of(raw),
            metadata: part(&raw["metadata"]),
            spec: part(&raw["spec"]),
            status: part(&raw["status"]),
            operation: (!raw["operation"].is_null()).then(|| part(&raw["operation"])),
            audit: AuditRecord::of(raw),
        }
    }

    /// Its namespace and name, read one way everywhere.
    pub fn identity(&self) -> Identity<'a> {
        self.view.identity
    }

    /// Its namespace and name.
    pub fn names(&self) -> (&'a str, &'a str) {
        (self.view.identity.namespace, self.view.identity.name)
    }

    /// The failed rollouts it remembers per image (`argocd-ecr-updater.io/failed-rollouts`).
    pub fn failed_rollouts(
        &self,
    ) -> std::collections::BTreeMap<String, crate::application::failures::FailedRollout> {
        crate::application::failures::of(self.raw)
    }

    /// The images auto-rollback took back, per image (`argocd-ecr-updater.io/rolled-back`).
    pub fn rolled_back(
        &self,
    ) -> std::collections::BTreeMap<String, Vec<crate::application::rolled_back::RolledBack>> {
        crate::application::rolled_back::of(self.raw)
    }

    /// Why its images-taken-back annotation does not read, when it is present and does not.
    pub fn rolled_back_unreadable(&self) -> Option<String> {
        crate::application::rolled_back::unreadable(self.raw)
    }

    /// The guarded patch operations that set the images taken back to `next`.
    pub fn rolled_back_ops(
        &self,
        next: &std::collections::BTreeMap<String, Vec<crate::application::rolled_back::RolledBack>>,
    ) -> Vec<Value> {
        crate::application::rolled_back::patch_ops(self.raw, next)
    }

    /// The manual rollbacks it remembers per image (`argocd-ecr-updater.io/rollbacks`).
    pub fn remembered_rollbacks(
        &self,
    ) -> std::collections::BTreeMap<String, crate::application::rollbacks::RememberedRollback> {
        crate::application::rollbacks::of(self.raw)
    }

    /// The guarded patch operations that set the failed rollouts to `next`.
    pub fn failed_rollouts_ops(
        &self,
        next: &std::collections::BTreeMap<String, crate::application::failures::FailedRollout>,
    ) -> Vec<Value> {
        crate::application::failures::patch_ops(self.raw, next)
    }

    /// The guarded patch operations that set the remembered rollbacks to `next`, tested
    /// against our audit record as read (what they are derived from).
    pub fn remembered_rollbacks_ops(
        &self,
        next: &std::collections::BTreeMap<
            String,
            crate::application::rollbacks::RememberedRollback,
        >,
    ) -> Vec<Value> {
        let key = crate::appconfig::annotations::AUDIT_ANNOTATION;
        // The key as a JSON pointer token (RFC 6901): `/` is `~1`.
        let audit = format!(
            "/metadata/annotations/{}",
            key.replace('~', "~0").replace('/', "~1")
        );
        let mut ops = vec![serde_json::json!({"op": "test", "path": audit,
            "value": self.raw["metadata"]["annotations"][key]})];
        ops.extend(crate::application::rollbacks::patch_ops(self.raw, next));
        ops
    }

    /// The Application as a Kubernetes Event involves it.
    pub fn involved(&self) -> crate::report::events::Involved {
        crate::report::events::Involved {
            namespace: self.metadata.namespace.clone(),
            name: self.metadata.name.clone(),
            uid: self.metadata.uid.clone(),
            resource_version: self.metadata.resource_version.clone(),
        }
    }

    /// An annotation's value, when it is a string.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.get(key).map(String::as_str)
    }

    /// Whether the spec still asks for this write where the record says it went; `None`
    /// when the record does not say (a commit, or an older record).
    pub fn asks_for(&self, image: &AuditedImage) -> Option<bool> {
        image.asked_by(self.raw)
    }

    /// `spec.source` and `spec.sources`, read as what a sync would deploy.
    pub fn spec_synced(&self) -> Synced {
        Synced::read(&self.raw["spec"])
    }

    /// `spec.source` and `spec.sources` as stored, for a sync to deploy with a place of
    /// ours set to what another sync deployed.
    pub fn spec_sources(&self) -> Value {
        json!({"spec": {"source": self.raw["spec"]["source"], "sources": self.raw["spec"]["sources"]}})
    }

    /// Whether Argo CD syncs the Application by itself: `syncPolicy.automated` set and its
    /// `enabled` not false (`types.go` `IsAutomatedSyncEnabled`; `enabled` since Argo CD 3.1).
    pub fn automated_sync(&self) -> bool {
        self.spec
            .sync_policy
            .automated
            .as_ref()
            .is_some_and(|a| a.enabled != Some(false))
    }

    /// The `managedFields` entry of the latest writer of the lists that carry images (Helm
    /// parameters, Kustomize images, plugin environment, or a multi-source `sources` list).
    pub fn lists_entry(&self) -> Option<&ManagedFields> {
        self.metadata
            .managed_fields
            .iter()
            .filter(|entry| entry.sets_image_lists)
            .max_by_key(|entry| entry.time)
    }
}

impl<'a> From<&'a Value> for Application<'a> {
    fn from(raw: &'a Value) -> Self {
        Self::of(raw)
    }
}

/// `metadata`, as far as the crate reads it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default, deserialize_with = "lenient")]
    pub name: String,
    #[serde(default, deserialize_with = "lenient")]
    pub namespace: String,
    #[serde(default, deserialize_with = "lenient")]
    pub resource_version: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub uid: Option<String>,
    /// The string annotations (a value of another type is none the crate reads).
    #[serde(default, deserialize_with = "string_map")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "string_map")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "items")]
    pub managed_fields: Vec<ManagedFields>,
    #[serde(default, deserialize_with = "items")]
    pub owner_references: Vec<OwnerReference>,
}

/// An object that owns the Application (an ApplicationSet, for a generated one).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct OwnerReference {
    #[serde(default, deserialize_with = "lenient")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
}

impl Metadata {
    /// The metadata alone, for a reader that needs no more (labels and annotations while
    /// listing).
    pub fn of(raw: &Value) -> Self {
        part(&raw["metadata"])
    }
}

/// One writer of the Application, as the API server records it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ManagedFields {
    #[serde(default, deserialize_with = "lenient")]
    pub manager: Option<String>,
    #[serde(default, deserialize_with = "time")]
    pub time: Option<OffsetDateTime>,
    /// Whether its fields hold a list that carries images: those lists are atomic in Argo
    /// CD's CRD, so this writer set their whole value.
    #[serde(default, rename = "fieldsV1", deserialize_with = "image_lists")]
    pub sets_image_lists: bool,
}

/// `spec`, but its sources (read through [`AppView`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// The AppProject (Argo CD reads an absent one as `default`).
    #[serde(default, deserialize_with = "lenient")]
    pub project: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub sync_policy: SyncPolicy,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct SyncPolicy {
    /// Set (even empty) when automated sync is configured.
    #[serde(default, deserialize_with = "lenient")]
    pub automated: Option<Automated>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Automated {
    /// `false` turns automated sync off while keeping its settings (Argo CD 3.1).
    #[serde(default, deserialize_with = "lenient")]
    pub enabled: Option<bool>,
}

/// `status`, as Argo CD's application controller writes it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default, deserialize_with = "lenient")]
    pub sync: SyncStatus,
    #[serde(default, deserialize_with = "lenient")]
    pub health: Health,
    /// The last operation; every field empty when there has been none.
    #[serde(default, deserialize_with = "lenient")]
    pub operation_state: OperationState,
    /// One entry per successful sync, in the order Argo CD appended them.
    #[serde(default, deserialize_with = "items")]
    pub history: Vec<HistoryEntry>,
    #[serde(default, deserialize_with = "lenient")]
    pub summary: Summary,
    #[serde(default, deserialize_with = "time")]
    pub reconciled_at: Option<OffsetDateTime>,
}

/// `status.sync`: the last comparison's result and the revision(s) compared.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SyncStatus {
    /// `Synced`, `OutOfSync`, `Unknown`.
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
    #[serde(flatten)]
    pub compared: Synced,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Health {
    /// `Healthy`, `Progressing`, `Degraded`, `Suspended`, `Missing`, `Unknown`.
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub message: Option<String>,
    /// When the status last changed (the controller sets it only on a change,
    /// `persistAppStatus`); absent before Argo CD kept it.
    #[serde(default, rename = "lastTransitionTime", deserialize_with = "time")]
    pub last_transition: Option<OffsetDateTime>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Summary {
    /// The images of the Pods Argo CD sees (`controller/cache/info.go` `populatePodInfo`).
    #[serde(default, deserialize_with = "items")]
    pub images: Vec<String>,
}

/// `status.operationState`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    /// `Running`, `Terminating`, `Succeeded`, `Failed`, `Error`.
    #[serde(default, deserialize_with = "lenient")]
    pub phase: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub message: Option<String>,
    #[serde(default, deserialize_with = "time")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(default, deserialize_with = "time")]
    pub finished_at: Option<OffsetDateTime>,
    #[serde(default, deserialize_with = "lenient")]
    pub operation: Operation,
    /// Set (even empty) once Argo CD has synced: the source(s) and pinned revision(s).
    #[serde(default, deserialize_with = "lenient")]
    pub sync_result: Option<Synced>,
    #[serde(default, deserialize_with = "lenient")]
    pub retry_count: Option<i64>,
}

impl OperationState {
    pub fn phase(&self) -> &str {
        self.phase.as_deref().unwrap_or("")
    }
}

/// An operation as requested (`operation`, or `status.operationState.operation`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    #[serde(default, deserialize_with = "lenient")]
    pub sync: Synced,
    #[serde(default, deserialize_with = "lenient")]
    pub initiated_by: InitiatedBy,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct InitiatedBy {
    #[serde(default, deserialize_with = "lenient")]
    pub username: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub automated: bool,
}

/// One `status.history` entry: a successful sync.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<i64>,
    #[serde(flatten)]
    pub synced: Synced,
    #[serde(default, deserialize_with = "time")]
    pub deployed_at: Option<OffsetDateTime>,
    /// The operation's `startedAt`.
    #[serde(default, deserialize_with = "time")]
    pub deploy_started_at: Option<OffsetDateTime>,
    #[serde(default, deserialize_with = "lenient")]
    pub initiated_by: InitiatedBy,
}

/// What a sync names or synced: the source(s), as Argo CD's source objects (compared with
/// the places our audit record names, so kept as JSON), and the revision(s).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Synced {
    #[serde(default, deserialize_with = "lenient")]
    pub revision: Option<String>,
    /// Multi-source: one per source (`revision` then empty). `None` when absent.
    #[serde(default, deserialize_with = "optional_items")]
    pub revisions: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient")]
    pub source: Option<Value>,
    #[serde(default, deserialize_with = "optional_items")]
    pub sources: Option<Vec<Value>>,
}

impl Synced {
    /// The source(s) and revision(s) of a JSON object that holds them (a spec).
    pub fn read(value: &Value) -> Self {
        part(value)
    }

    /// `sources` when it lists any, else `source` when it is one: as Argo CD's Go omits
    /// empty fields.
    pub fn sources(&self) -> Option<Value> {
        match (&self.sources, &self.source) {
            (Some(list), _) if !list.is_empty() => Some(Value::Array(list.clone())),
            (_, Some(source)) if source.is_object() => Some(source.clone()),
            _ => None,
        }
    }

    /// Every revision named, `revisions` then `revision`, empty ones left out.
    pub fn all_revisions(&self) -> Vec<String> {
        self.revisions
            .iter()
            .flatten()
            .chain(&self.revision)
            .filter(|r| !r.is_empty())
            .cloned()
            .collect()
    }

    /// `revisions` when present (several sources), else `revision`.
    pub fn listed_revisions(&self) -> Vec<&str> {
        match &self.revisions {
            Some(revisions) => revisions.iter().map(String::as_str).collect(),
            None => self.revision.as_deref().into_iter().collect(),
        }
    }

    /// The source(s) as an Application's `spec` holds them (`{"source", "sources"}`).
    pub fn as_spec(&self) -> Value {
        json!({"source": self.source, "sources": self.sources})
    }

    /// Whether a source synced reads `branch` (its `targetRevision`).
    pub fn reads_branch(&self, branch: &str) -> bool {
        let reads = |s: &Value| s["targetRevision"].as_str() == Some(branch);
        self.source.as_ref().is_some_and(reads) || self.sources.iter().flatten().any(reads)
    }
}

/// A part of the Application, or its default when it does not read as one.
fn part<T: DeserializeOwned + Default>(value: &Value) -> T {
    T::deserialize(value).unwrap_or_default()
}

/// A field that does not read as its type reads as absent (its default).
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).unwrap_or_default())
}

/// An RFC 3339 time; a malformed one reads as absent.
fn time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OffsetDateTime>, D::Error> {
    Ok(rfc3339_at(&Value::deserialize(d)?))
}

/// A list whose entries that do not read are left out, the others kept.
fn items<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(optional_items(d)?.unwrap_or_default())
}

/// [`items`], `None` when the field is not a list.
fn optional_items<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(list) => Some(
            list.into_iter()
                .filter_map(|item| T::deserialize(item).ok())
                .collect(),
        ),
        _ => None,
    })
}

/// A map of strings, other values left out.
fn string_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Object(map) => map
            .into_iter()
            .filter_map(|(k, v)| match v {
                Value::String(v) => Some((k, v)),
                _ => None,
            })
            .collect(),
        _ => BTreeMap::new(),
    })
}

/// Whether `fieldsV1` holds a list that carries images.
fn image_lists<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    const IMAGE_LISTS: [&[&str]; 4] = [
        &["f:spec", "f:source", "f:helm", "f:parameters"],
        &["f:spec", "f:source", "f:kustomize", "f:images"],
        &["f:spec", "f:source", "f:plugin", "f:env"],
        &["f:spec", "f:sources"],
    ];
    let fields = Value::deserialize(d)?;
    Ok(IMAGE_LISTS.iter().any(|path| {
        path.iter()
            .try_fold(&fields, |node, key| node.get(*key))
            .is_some()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AUDIT_ANNOTATION;
    use time::macros::datetime;

    fn full() -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "argocd", "resourceVersion": "7", "uid": "u",
                "annotations": {"a": "1", AUDIT_ANNOTATION: r#"{"time":"2026-12-03T10:00:00Z","eventId":"e","images":[]}"#},
                "labels": {"team": "a"},
                "managedFields": [
                    {"manager": "kubectl-edit", "time": "2026-12-03T09:00:00Z",
                        "fieldsV1": {"f:spec": {"f:source": {"f:helm": {"f:parameters": {}}}}}},
                    {"manager": "argocd-controller", "time": "2026-12-03T11:00:00Z",
                        "fieldsV1": {"f:status": {}}}]},
            "spec": {"source": {"repoURL": "r", "helm": {}}, "syncPolicy": {"automated": {"enabled": true}}},
            "status": {
                "sync": {"status": "Synced", "revision": "c1"},
                "health": {"status": "Healthy", "message": "ok"},
                "operationState": {"phase": "Succeeded", "message": "done",
                    "startedAt": "2026-12-03T10:00:00Z", "finishedAt": "2026-12-03T10:00:20Z",
                    "retryCount": 2,
                    "operation": {"sync": {"revision": "c1"}, "initiatedBy": {"username": "ana"}},
                    "syncResult": {"revision": "c1", "source": {"repoURL": "r"}}},
                "history": [{"id": 3, "revision": "c1", "source": {"repoURL": "r"},
                    "deployedAt": "2026-12-03T10:00:20Z", "deployStartedAt": "2026-12-03T10:00:00Z",
                    "initiatedBy": {"automated": true}}],
                "summary": {"images": ["r/web:1.1"]},
                "reconciledAt": "2026-12-03T10:00:22Z"}})
    }

    #[test]
    fn every_field_the_crate_reasons_about_reads_typed() {
        let raw = full();
        let app = Application::of(&raw);
        assert_eq!(app.identity().to_string(), "argocd/web");
        let m = &app.metadata;
        assert_eq!((m.name.as_str(), m.namespace.as_str()), ("web", "argocd"));
        assert_eq!(
            (m.resource_version.as_deref(), m.uid.as_deref()),
            (Some("7"), Some("u"))
        );
        assert_eq!(app.annotation("a"), Some("1"));
        assert_eq!(m.labels["team"], "a");
        assert_eq!(
            app.lists_entry().and_then(|e| e.manager.as_deref()),
            Some("kubectl-edit")
        );
        assert!(app.automated_sync());
        let s = &app.status;
        assert_eq!(s.sync.status.as_deref(), Some("Synced"));
        assert_eq!(s.sync.compared.all_revisions(), ["c1"]);
        assert_eq!(
            (s.health.status.as_deref(), s.health.message.as_deref()),
            (Some("Healthy"), Some("ok"))
        );
        let op = &s.operation_state;
        assert_eq!(
            (op.phase(), op.message.as_deref(), op.retry_count),
            ("Succeeded", Some("done"), Some(2))
        );
        assert_eq!(op.started_at, Some(datetime!(2026-12-03 10:00 UTC)));
        assert_eq!(op.finished_at, Some(datetime!(2026-12-03 10:00:20 UTC)));
        assert_eq!(op.operation.initiated_by.username.as_deref(), Some("ana"));
        assert_eq!(op.operation.sync.all_revisions(), ["c1"]);
        let result = op.sync_result.as_ref().unwrap();
        assert_eq!(result.sources(), Some(json!({"repoURL": "r"})));
        let h = &s.history[0];
        assert_eq!((h.id, h.synced.listed_revisions()), (Some(3), vec!["c1"]));
        assert_eq!(h.deployed_at, Some(datetime!(2026-12-03 10:00:20 UTC)));
        assert_eq!(h.deploy_started_at, Some(datetime!(2026-12-03 10:00 UTC)));
        assert!(h.initiated_by.automated);
        assert_eq!(s.summary.images, ["r/web:1.1"]);
        assert_eq!(s.reconciled_at, Some(datetime!(2026-12-03 10:00:22 UTC)));
        assert_eq!(app.audit.as_ref().map(|a| a.event_id.as_str()), Some("e"));
        assert!(app.operation.is_none());
    }

    #[test]
    fn an_odd_field_reads_as_absent_and_leaves_the_rest_read() {
        // Each case: what is changed in a full Application, and what then reads.
        type Check = fn(&Application<'_>) -> bool;
        let cases: [(&str, &str, Value, Check); 15] = [
            (
                "a missing status reads as no status",
                "/status",
                json!(null),
                |a| {
                    a.status.sync.status.is_none()
                        && a.status.history.is_empty()
                        && a.status.operation_state.phase().is_empty()
                },
            ),
            (
                "an operation without syncResult has none",
                "/status/operationState/syncResult",
                json!(null),
                |a| {
                    a.status.operation_state.sync_result.is_none()
                        && a.status.operation_state.operation.sync.all_revisions() == ["c1"]
                },
            ),
            (
                "an empty syncResult is one",
                "/status/operationState/syncResult",
                json!({}),
                |a| {
                    a.status
                        .operation_state
                        .sync_result
                        .as_ref()
                        .is_some_and(|r| r.sources().is_none())
                },
            ),
            (
                "a malformed timestamp reads as no time",
                "/status/operationState/startedAt",
                json!("yesterday"),
                |a| {
                    a.status.operation_state.started_at.is_none()
                        && a.status.operation_state.finished_at.is_some()
                },
            ),
            (
                "a number where a phase belongs reads as no phase",
                "/status/operationState/phase",
                json!(3),
                |a| {
                    a.status.operation_state.phase().is_empty()
                        && a.status.operation_state.message.as_deref() == Some("done")
                },
            ),
            (
                "a history entry of the wrong shape is left out, the others kept",
                "/status/history/1",
                json!("odd"),
                |a| a.status.history.len() == 1,
            ),
            (
                "a multi-source history entry lists its sources and revisions",
                "/status/history/0",
                json!({"revisions": ["c1", "c2"], "sources": [{"repoURL": "a"}, {"repoURL": "b"}], "deployedAt": "2026-12-03T10:00:20Z"}),
                |a| {
                    a.status.history[0].synced.listed_revisions() == ["c1", "c2"]
                        && a.status.history[0]
                            .synced
                            .sources()
                            .is_some_and(|s| s.as_array().is_some_and(|l| l.len() == 2))
                },
            ),
            (
                "a non-string image is left out of the summary",
                "/status/summary/images/1",
                json!(7),
                |a| a.status.summary.images == ["r/web:1.1"],
            ),
            (
                "a non-string annotation is left out",
                "/metadata/annotations/a",
                json!(1),
                |a| a.annotation("a").is_none() && a.audit.is_some(),
            ),
            (
                "automated sync turned off by enabled false",
                "/spec/syncPolicy/automated/enabled",
                json!(false),
                |a| !a.automated_sync(),
            ),
            (
                "an automated policy that is not an object is no automated sync",
                "/spec/syncPolicy/automated",
                json!(true),
                |a| !a.automated_sync(),
            ),
            (
                "a requested operation reads even when odd",
                "/operation",
                json!("odd"),
                |a| a.operation.is_some(),
            ),
            (
                "a writer of other fields is not the image lists' writer",
                "/metadata/managedFields/0/fieldsV1",
                json!({"f:metadata": {}}),
                |a| a.lists_entry().is_none() && a.metadata.managed_fields.len() == 2,
            ),
            (
                "a history entry with a malformed deployedAt keeps its revision",
                "/status/history/0/deployedAt",
                json!("2026-13-40"),
                |a| {
                    a.status.history[0].deployed_at.is_none()
                        && a.status.history[0].synced.listed_revisions() == ["c1"]
                },
            ),
            (
                "an operation without a requester reads as no one's",
                "/status/operationState/operation/initiatedBy",
                json!(null),
                |a| {
                    a.status
                        .operation_state
                        .operation
                        .initiated_by
                        .username
                        .is_none()
                        && !a.status.operation_state.operation.initiated_by.automated
                },
            ),
        ];
        for (case, pointer, value, check) in cases {
            let mut raw = full();
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let target = if parent.is_empty() {
                &mut raw
            } else {
                raw.pointer_mut(parent).unwrap()
            };
            match target {
                Value::Array(list) => {
                    let i: usize = key.parse().unwrap();
                    if i < list.len() {
                        list[i] = value;
                    } else {
                        list.push(value);
                    }
                }
                other => other[key] = value,
            }
            assert!(check(&Application::of(&raw)), "{case}");
        }
    }

    #[test]
    fn what_is_not_an_application_reads_as_an_empty_one() {
        for raw in [json!(null), json!("text"), json!([1]), json!({"status": 7})] {
            let app = Application::of(&raw);
            assert_eq!(app.identity().to_string(), "/", "{raw}");
            assert!(
                app.status.history.is_empty() && app.audit.is_none(),
                "{raw}"
            );
        }
    }
}
