//! `metadata.managedFields` as kube-apiserver keeps them: one entry per writer (the
//! `fieldManager` a request names, else its User-Agent up to the first `/`), operation
//! `Update` for creates and patches and `Apply` for server-side apply, holding the fields
//! the writer set (`FieldsV1`). A write takes the fields it added or changed from every
//! other writer, and a field removed leaves every writer. An entry that is left with no
//! field goes; a write that changes nothing leaves the entries (and their times) alone.
//!
//! Tests read them to tell writers apart (a person's `kubectl edit` from an owner's
//! re-apply), and they are over half of a real Application's metadata: a list that leaves
//! them out underestimates what the sweep reads.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

/// A set of fields, as `fieldsV1` writes it: `"."` for the node itself, `f:<name>` for an
/// object's field, `k:{...}` for an item of a keyed list, `v:<json>` for an item of a set.
#[derive(Clone, Default, PartialEq, Debug)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Only the leaves and the items of keyed lists and sets: what a configuration applied
    /// with server-side apply sets (the maps and objects holding them are not its own).
    fn leaves(&mut self) {
        for (key, child) in &mut self.children {
            if !child.children.is_empty() && !key.starts_with("k:") && !key.starts_with("v:") {
                child.member = false;
            }
            child.leaves();
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (key, child) in &other.children {
            self.children.entry(key.clone()).or_default().union(child);
        }
    }

    fn difference(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (key, child) in &other.children {
            if let Some(mine) = self.children.get_mut(key) {
                mine.difference(child);
                if mine.is_empty() {
                    self.children.remove(key);
                }
            }
        }
    }

    /// Drops `path` and everything under it.
    fn remove_tree(&mut self, path: &[&str]) {
        match path.split_first() {
            None => *self = FieldSet::default(),
            Some((first, rest)) => {
                if let Some(child) = self.children.get_mut(*first) {
                    child.remove_tree(rest);
                    if child.is_empty() {
                        self.children.remove(*first);
                    }
                }
            }
        }
    }

    /// Drops the node `path` itself, keeping what is under it.
    fn remove_member(&mut self, path: &[&str]) {
        match path.split_first() {
            None => self.member = false,
            Some((first, rest)) => {
                if let Some(child) = self.children.get_mut(*first) {
                    child.remove_member(rest);
                    if child.is_empty() {
                        self.children.remove(*first);
                    }
                }
            }
        }
    }

    /// A node that is a member with nothing under it is written `{}`; one with fields
    /// under it says it is a member itself with `"."`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        if self.member && !self.children.is_empty() {
            out.insert(".".into(), json!({}));
        }
        for (key, child) in &self.children {
            out.insert(key.clone(), child.to_json());
        }
        Value::Object(out)
    }

    /// A `fieldsV1` read back (its root is never a member itself).
    pub fn from_json(value: &Value) -> Self {
        let mut set = Self::node_from_json(value);
        set.member = false;
        set
    }

    fn node_from_json(value: &Value) -> Self {
        let mut set = FieldSet {
            member: value.as_object().is_some_and(|m| m.is_empty()),
            ..FieldSet::default()
        };
        for (key, child) in value.as_object().into_iter().flatten() {
            if key == "." {
                set.member = true;
            } else {
                set.children
                    .insert(key.clone(), Self::node_from_json(child));
            }
        }
        set
    }
}

/// How a list's items are told apart.
#[derive(Clone, Default)]
enum ListType {
    /// Replaced whole: a CRD's default.
    #[default]
    Atomic,
    Set,
    Map(Vec<String>),
}

/// What managed fields read of a schema: which values are leaves and how lists are keyed.
#[derive(Clone, Default)]
pub struct FieldSchema {
    properties: HashMap<String, FieldSchema>,
    additional: Option<Box<FieldSchema>>,
    items: Option<Box<FieldSchema>>,
    list: ListType,
    atomic_map: bool,
}

impl FieldSchema {
    /// From a CRD's `openAPIV3Schema`, with `metadata` as ObjectMeta's own schema.
    pub fn of_crd(schema: &Value) -> Self {
        let mut out = Self::of(schema);
        out.properties
            .insert("metadata".into(), Self::object_meta());
        out
    }

    fn of(schema: &Value) -> Self {
        let nested = |key: &str| {
            Some(&schema[key])
                .filter(|s| s.is_object())
                .map(|s| Box::new(Self::of(s)))
        };
        let list = match schema["x-kubernetes-list-type"].as_str() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            ),
            _ => ListType::Atomic,
        };
        Self {
            properties: schema["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(key, schema)| (key.clone(), Self::of(schema)))
                .collect(),
            additional: nested("additionalProperties"),
            items: nested("items"),
            list,
            atomic_map: schema["x-kubernetes-map-type"] == "atomic",
        }
    }

    /// ObjectMeta: labels and annotations are maps of their own keys, ownerReferences a list
    /// keyed by uid, finalizers a set.
    fn object_meta() -> Self {
        let schema = json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"], "items": {"type": "object"}},
            "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}});
        Self::of(&schema)
    }

    fn child(&self, key: &str) -> FieldSchema {
        self.properties
            .get(key)
            .or(self.additional.as_deref())
            .cloned()
            .unwrap_or_default()
    }
}

/// What a write did, as structured-merge-diff compares the object before and after it.
#[derive(Default)]
pub struct Comparison {
    /// Added or modified.
    pub changed: FieldSet,
    pub removed: FieldSet,
}

fn is_empty_container(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        _ => false,
    }
}

impl Comparison {
    pub fn of(schema: &FieldSchema, old: Option<&Value>, new: Option<&Value>) -> Self {
        let mut comparison = Comparison::default();
        comparison.walk(schema, old, new, &mut Vec::new());
        comparison
    }

    fn leaf(&mut self, old: Option<&Value>, new: Option<&Value>, path: &[String]) {
        match (old, new) {
            (None, Some(_)) => self.changed.insert(path),
            (Some(_), None) => self.removed.insert(path),
            (Some(a), Some(b)) if a != b => self.changed.insert(path),
            _ => {}
        }
    }

    fn walk(
        &mut self,
        schema: &FieldSchema,
        old: Option<&Value>,
        new: Option<&Value>,
        path: &mut Vec<String>,
    ) {
        let both_empty = is_empty_container(old) && is_empty_container(new);
        let kind = |v: Option<&Value>| match v {
            Some(Value::Object(_)) => 1,
            Some(Value::Array(_)) => 2,
            None => 0,
            Some(_) => 3,
        };
        let (a, b) = (kind(old), kind(new));
        let container = (a == 1 || b == 1) && (a | b) & 2 == 0 && a != 3 && b != 3;
        let list = (a == 2 || b == 2) && a != 1 && b != 1 && a != 3 && b != 3;
        let leaf = both_empty
            || !(container || list)
            || (container && schema.atomic_map)
            || (list && matches!(schema.list, ListType::Atomic));
        if leaf {
            self.leaf(old, new, path);
            return;
        }
        if !path.is_empty() {
            match (old, new) {
                (None, Some(_)) => self.changed.insert(path),
                (Some(_), None) => self.removed.insert(path),
                _ => {}
            }
        }
        if container {
            let empty = Map::new();
            let old_map = old.and_then(Value::as_object).unwrap_or(&empty);
            let new_map = new.and_then(Value::as_object).unwrap_or(&empty);
            let mut keys: Vec<&String> = old_map.keys().chain(new_map.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                path.push(format!("f:{key}"));
                self.walk(&schema.child(key), old_map.get(key), new_map.get(key), path);
                path.pop();
            }
        } else {
            let item_schema = schema.items.as_deref().cloned().unwrap_or_default();
            let keyed = |items: Option<&Value>| -> BTreeMap<String, Value> {
                items
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|item| (item_key(&schema.list, item), item.clone()))
                    .collect()
            };
            let (old_items, new_items) = (keyed(old), keyed(new));
            let mut keys: Vec<&String> = old_items.keys().chain(new_items.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                path.push(key.clone());
                let set_item = matches!(schema.list, ListType::Set);
                if set_item {
                    self.leaf(old_items.get(key), new_items.get(key), path);
                } else {
                    self.walk(&item_schema, old_items.get(key), new_items.get(key), path);
                }
                path.pop();
            }
        }
    }
}

/// `k:{"uid":"..."}` for an item of a keyed list (its keys in order), `v:<json>` for a set's.
fn item_key(list: &ListType, item: &Value) -> String {
    match list {
        ListType::Map(keys) => {
            let mut sorted = keys.clone();
            sorted.sort();
            let fields: Map<String, Value> = sorted
                .iter()
                .map(|k| (k.clone(), item[k].clone()))
                .collect();
            format!("k:{}", Value::Object(fields))
        }
        _ => format!("v:{item}"),
    }
}

/// The fields the API server sets itself, which no writer manages.
const SERVER_FIELDS: &[&str] = &[
    "f:name",
    "f:namespace",
    "f:creationTimestamp",
    "f:selfLink",
    "f:uid",
    "f:clusterName",
    "f:generation",
    "f:managedFields",
    "f:resourceVersion",
];

fn strip_server_fields(set: &mut FieldSet, status_subresource: Option<Part>) {
    set.remove_tree(&["f:apiVersion"]);
    set.remove_tree(&["f:kind"]);
    set.remove_member(&["f:metadata"]);
    for field in SERVER_FIELDS {
        set.remove_tree(&["f:metadata", field]);
    }
    // With a status subresource, a write to the object leaves status alone and a write to
    // status leaves the rest alone: neither can own what it cannot change.
    match status_subresource {
        Some(Part::Object) => set.remove_tree(&["f:status"]),
        Some(Part::Status) => {
            set.remove_tree(&["f:spec"]);
            set.remove_tree(&["f:metadata"]);
        }
        None => {}
    }
}

/// Which part of an object with a status subresource a write went to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Object,
    Status,
}

/// One write, by whom.
pub struct Writer<'a> {
    pub manager: &'a str,
    /// `Update` or `Apply`.
    pub operation: &'a str,
    /// `None` for a resource without a status subresource.
    pub part: Option<Part>,
}

impl Writer<'_> {
    fn subresource(&self) -> Option<&'static str> {
        (self.part == Some(Part::Status)).then_some("status")
    }
}

/// The manager a request writes as: its `fieldManager`, else its User-Agent up to the first
/// `/`, as kube-apiserver names it.
pub fn manager_of(query: &str, user_agent: Option<&str>) -> String {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "fieldManager")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| {
            let agent = user_agent.unwrap_or_default();
            agent
                .split('/')
                .next()
                .unwrap_or_default()
                .chars()
                .take(128)
                .collect()
        })
}

/// Now, as a managed field's `time`: RFC 3339, whole seconds.
fn now() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Records `writer`'s write of `old` (nothing for a create) into `new`: `new`'s
/// `managedFields` are `old`'s, moved by what changed.
pub fn record(schema: &FieldSchema, old: Option<&Value>, new: &mut Value, writer: &Writer) {
    let applied = None;
    record_with(schema, old, new, writer, applied);
}

/// As [`record`]; for server-side apply, `applied` is the configuration the writer applied,
/// whose fields become its `Apply` entry.
pub fn record_with(
    schema: &FieldSchema,
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer,
    applied: Option<&Value>,
) {
    let api_version = new["apiVersion"].as_str().unwrap_or_default().to_string();
    let mut entries: Vec<Value> = old
        .and_then(|o| o["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    let empty = json!({});
    let mut comparison = Comparison::of(schema, Some(old.unwrap_or(&empty)), Some(new));
    strip_server_fields(&mut comparison.changed, writer.part);
    strip_server_fields(&mut comparison.removed, writer.part);
    let mine = |e: &Value| {
        e["manager"] == writer.manager
            && e["operation"] == writer.operation
            && e["subresource"].as_str() == writer.subresource()
    };
    for entry in entries.iter_mut().filter(|e| !mine(e)) {
        let mut set = FieldSet::from_json(&entry["fieldsV1"]);
        set.difference(&comparison.changed);
        set.difference(&comparison.removed);
        entry["fieldsV1"] = set.to_json();
    }
    let own = match applied {
        Some(config) => {
            let mut set = Comparison::of(schema, Some(&empty), Some(config)).changed;
            strip_server_fields(&mut set, writer.part);
            set.leaves();
            Some(set)
        }
        None if comparison.changed.is_empty() => None,
        None => {
            let mut set = entries
                .iter()
                .find(|e| mine(e))
                .map(|e| FieldSet::from_json(&e["fieldsV1"]))
                .unwrap_or_default();
            set.difference(&comparison.removed);
            set.union(&comparison.changed);
            Some(set)
        }
    };
    if let Some(set) = own {
        entries.retain(|e| !mine(e));
        let mut entry = json!({"manager": writer.manager, "operation": writer.operation,
            "apiVersion": api_version, "time": now(), "fieldsType": "FieldsV1",
            "fieldsV1": set.to_json()});
        if let Some(subresource) = writer.subresource() {
            entry["subresource"] = json!(subresource);
        }
        entries.push(entry);
    }
    entries.retain(|e| !FieldSet::from_json(&e["fieldsV1"]).is_empty());
    // As the API server orders them: Apply before Update, then by time, then by manager.
    entries.sort_by(|a, b| {
        let key = |e: &Value| {
            (
                e["operation"].as_str().unwrap_or_default().to_string(),
                e["time"].as_str().unwrap_or_default().to_string(),
                e["manager"].as_str().unwrap_or_default().to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
    if let Some(meta) = new["metadata"].as_object_mut() {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> FieldSchema {
        FieldSchema::of_crd(&json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "project": {"type": "string"},
                "source": {"type": "object", "properties": {
                    "helm": {"type": "object", "properties": {
                        "parameters": {"type": "array", "items": {"type": "object"}}}}}}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}))
    }

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            operation: "Update",
            part: None,
        }
    }

    fn app(tag: &str) -> Value {
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "a", "namespace": "argocd", "labels": {"team": "a"}},
            "spec": {"project": "default", "source": {"helm": {"parameters": [{"name": "t", "value": tag}]}}}})
    }

    #[test]
    fn a_create_gives_its_writer_every_field_it_set_but_the_servers_own() {
        let mut created = app("1");
        record(
            &schema(),
            None,
            &mut created,
            &writer("kubectl-client-side-apply"),
        );
        let entries = created["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:team": {}}},
                   "f:spec": {".": {}, "f:project": {}, "f:source": {".": {}, "f:helm": {".": {}, "f:parameters": {}}}}})
        );
    }

    #[test]
    fn a_later_writer_takes_the_fields_it_changed_and_an_empty_entry_goes() {
        let schema = schema();
        let mut created = app("1");
        record(
            &schema,
            None,
            &mut created,
            &writer("kubectl-client-side-apply"),
        );
        let mut patched = created.clone();
        patched["spec"]["source"]["helm"]["parameters"][0]["value"] = json!("2");
        record(
            &schema,
            Some(&created),
            &mut patched,
            &writer("argocd-ecr-updater"),
        );
        let entries = patched["metadata"]["managedFields"].as_array().unwrap();
        let of = |manager: &str| {
            entries
                .iter()
                .find(|e| e["manager"] == manager)
                .map(|e| e["fieldsV1"].clone())
                .unwrap()
        };
        assert_eq!(entries.len(), 2);
        assert_eq!(
            of("argocd-ecr-updater"),
            json!({"f:spec": {"f:source": {"f:helm": {"f:parameters": {}}}}})
        );
        // Left with the Helm source itself, which it still set: a member with nothing under.
        assert_eq!(
            of("kubectl-client-side-apply")["f:spec"]["f:source"]["f:helm"],
            json!({})
        );
    }

    #[test]
    fn a_write_that_changes_nothing_leaves_the_entries_alone() {
        let schema = schema();
        let mut created = app("1");
        record(
            &schema,
            None,
            &mut created,
            &writer("kubectl-client-side-apply"),
        );
        let mut same = created.clone();
        record(&schema, Some(&created), &mut same, &writer("someone-else"));
        assert_eq!(same, created);
    }

    #[test]
    fn the_manager_is_the_field_manager_else_the_user_agent_up_to_its_first_slash() {
        for (query, agent, manager) in [
            (
                "fieldManager=kubectl-edit",
                Some("kubectl/v1.36"),
                "kubectl-edit",
            ),
            ("", Some("argocd-ecr-updater/0.1.0"), "argocd-ecr-updater"),
            ("limit=1", None, ""),
        ] {
            assert_eq!(manager_of(query, agent), manager, "{query} {agent:?}");
        }
    }
}
