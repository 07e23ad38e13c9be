//! What kube-apiserver does to every write of a custom resource, in its own words: schema
//! refusals with the field written as `spec.a[0].b` and the reason per kind of violation,
//! `fieldValidation=Strict` refusing an unknown field, a JSON patch that does not apply,
//! `generation` moved by any change outside `metadata` when the CRD has no status
//! subresource, and the managed fields of Applications.

use std::sync::OnceLock;

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::access::{details, failure};
use crate::defaults::Defaults;
use crate::kube::status;
use crate::managed_fields::{self, FieldSchema, Writer};

/// One violation of a CRD's schema: the field, the cause's reason and its message.
pub struct Cause {
    pub field: String,
    pub reason: &'static str,
    pub message: String,
}

/// A JSON pointer as the API server writes a field: `spec.source.helm.parameters[0].name`.
pub fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    out
}

/// The JSON type the API server names in a type error: integers are `integer`.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A schema violation as the API server reports it.
pub fn cause(error: &jsonschema::ValidationError) -> Cause {
    use jsonschema::error::{TypeKind, ValidationErrorKind};
    let field = field_path(&error.instance_path().to_string());
    match error.kind() {
        ValidationErrorKind::Type {
            kind: TypeKind::Single(expected),
        } => {
            let actual = type_name(error.instance());
            Cause {
                message: format!(
                    "Invalid value: \"{actual}\": {field} in body must be of type {expected}: \"{actual}\""
                ),
                field,
                reason: "FieldValueTypeInvalid",
            }
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            Cause {
                field: if field.is_empty() {
                    name.to_string()
                } else {
                    format!("{field}.{name}")
                },
                reason: "FieldValueRequired",
                message: "Required value".to_string(),
            }
        }
        _ => Cause {
            message: format!("Invalid value: {}: {error}", error.instance()),
            field,
            reason: "FieldValueInvalid",
        },
    }
}

/// The 422 of a schema refusal: `<Kind>.<group> "<name>" is invalid: <field>: <message>, …`
/// with every cause in `details`.
pub fn invalid(kind: &str, group: &str, name: &str, causes: &[Cause]) -> Response {
    let problems = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect::<Vec<_>>()
        .join(", ");
    let details = json!({"name": name, "group": group, "kind": kind,
        "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect::<Vec<_>>()});
    failure(
        422,
        "Invalid",
        &format!("{kind}.{group} \"{name}\" is invalid: {problems}"),
        details,
    )
}

/// `value` as Go writes a map: keys sorted, compact.
pub fn sorted_json(value: &Value) -> String {
    fn sort(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sort(&map[k])))
                        .collect::<Map<String, Value>>(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

/// `fieldValidation=Strict` and a patch that sets fields the schema does not declare: the
/// API server quotes the patched object and names each unknown field.
pub fn strict_refusal(patched: &Value, unknown: &[String]) -> Response {
    let fields = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let message = format!(
        "Invalid value: \"{}\": strict decoding error: {fields}",
        sorted_json(patched).replace('"', "\\\"")
    );
    failure(
        422,
        "Invalid",
        &format!(" \"\" is invalid: patch: {message}"),
        json!({"causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]}),
    )
}

/// Whether the query asks for `fieldValidation=Strict`.
pub fn strict(query: &str) -> bool {
    url::form_urlencoded::parse(query.as_bytes())
        .any(|(k, v)| k == "fieldValidation" && v == "Strict")
}

/// A bare 422, as the API server answers a JSON patch that does not apply (a failed `test`,
/// a path that is not there): no cause, no detail.
pub fn patch_not_applied() -> Response {
    failure(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        json!({}),
    )
}

/// `generation` after a write to a custom resource without a status subresource: any change
/// outside `metadata` moves it (a status write too, as Argo CD's Applications show).
pub fn generation_after(before: &Value, after: &Value) -> i64 {
    let content = |object: &Value| {
        let mut copy = object.clone();
        if let Some(map) = copy.as_object_mut() {
            map.remove("metadata");
        }
        copy
    };
    let generation = before["metadata"]["generation"].as_i64().unwrap_or(1);
    if content(before) == content(after) {
        generation
    } else {
        generation + 1
    }
}

/// The Application CRD's schema, as managed fields and defaulting read it.
pub fn application_fields() -> &'static (FieldSchema, Defaults) {
    static FIELDS: OnceLock<(FieldSchema, Defaults)> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let schema = crate::kube::application_schema().unwrap_or(Value::Null);
        (FieldSchema::of_crd(&schema), Defaults::of(&schema))
    })
}

/// An Application created as `kubectl apply` creates it: the schema's defaults filled, and
/// every field it set managed by `kubectl-client-side-apply`.
pub fn created_by_kubectl_apply(app: &mut Value) {
    let (fields, defaults) = application_fields();
    defaults.apply(app);
    let writer = Writer {
        manager: "kubectl-client-side-apply",
        operation: "Update",
        part: None,
    };
    managed_fields::record(fields, None, app, &writer);
}

/// An Application with a patch applied, and for server-side apply the configuration applied.
pub struct Patched {
    pub object: Value,
    pub applied: Option<Value>,
}

/// Applies a PATCH body of `content_type` to `current`, or answers as the API server would.
pub fn apply_patch(
    content_type: &str,
    current: &Value,
    body: &[u8],
    query: &str,
    name: &str,
) -> Result<Patched, Response> {
    let unknown_format = || status(400, "the body of the request was in an unknown format");
    let mut object = current.clone();
    let mut applied = None;
    match content_type {
        "application/merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body).map_err(|_| unknown_format())?;
            if let Some(rv) = patch["metadata"]["resourceVersion"].as_str()
                && current["metadata"]["resourceVersion"].as_str() != Some(rv)
            {
                return Err(failure(
                    409,
                    "Conflict",
                    &format!(
                        "Operation cannot be fulfilled on applications.argoproj.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                    ),
                    details(Some(name), "argoproj.io", "applications"),
                ));
            }
            json_patch::merge(&mut object, &patch);
        }
        "application/json-patch+json" => {
            let patch: json_patch::Patch =
                serde_json::from_slice(body).map_err(|_| unknown_format())?;
            if json_patch::patch(&mut object, &patch).is_err() {
                return Err(patch_not_applied());
            }
        }
        "application/apply-patch+yaml" => {
            let manager = url::form_urlencoded::parse(query.as_bytes())
                .any(|(k, v)| k == "fieldManager" && !v.is_empty());
            if !manager {
                return Err(status(
                    422,
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            let config: Value = serde_yaml_ng::from_slice(body).map_err(|_| unknown_format())?;
            json_patch::merge(&mut object, &config);
            applied = Some(config);
        }
        "application/strategic-merge-patch+json" => {
            return Err(status(
                415,
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        other => return Err(status(415, &format!("unsupported patch type {other}"))),
    }
    Ok(Patched { object, applied })
}

/// Who wrote a PATCH, and what it applied if it was server-side apply.
pub struct PatchWriter<'a> {
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub applied: Option<&'a Value>,
}

impl PatchWriter<'_> {
    /// A patched Application's new `resourceVersion`, `generation` and managed fields.
    pub fn record(&self, current: &Value, updated: &mut Value, resource_version: u64) {
        updated["metadata"]["resourceVersion"] = json!(resource_version.to_string());
        updated["metadata"]["generation"] = json!(generation_after(current, updated));
        let agent = self.headers.get("user-agent").and_then(|v| v.to_str().ok());
        let manager = managed_fields::manager_of(self.query, agent);
        let writer = Writer {
            manager: &manager,
            operation: if self.applied.is_some() {
                "Apply"
            } else {
                "Update"
            },
            part: None,
        };
        let (fields, _) = application_fields();
        managed_fields::record_with(fields, Some(current), updated, &writer, self.applied);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_is_written_with_list_indexes_in_brackets() {
        for (pointer, field) in [
            (
                "/spec/source/helm/parameters/0/name",
                "spec.source.helm.parameters[0].name",
            ),
            ("/spec/sources/1", "spec.sources[1]"),
            ("/metadata/annotations/a~1b", "metadata.annotations.a/b"),
            ("", ""),
        ] {
            assert_eq!(field_path(pointer), field, "{pointer}");
        }
    }

    #[test]
    fn a_type_error_is_worded_as_the_api_server_words_it() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let object = json!({"spec": {"items": [{"name": 5}]}});
        let causes: Vec<Cause> = validator.iter_errors(&object).map(|e| cause(&e)).collect();
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.items[0].name");
        assert_eq!(causes[0].reason, "FieldValueTypeInvalid");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"integer\": spec.items[0].name in body must be of type string: \"integer\""
        );
    }

    #[test]
    fn generation_moves_for_any_change_outside_metadata() {
        let before = json!({"metadata": {"generation": 2, "labels": {}}, "spec": {"a": 1}});
        for (after, generation) in [
            (
                json!({"metadata": {"generation": 2, "labels": {"x": "y"}}, "spec": {"a": 1}}),
                2,
            ),
            (json!({"metadata": {"generation": 2}, "spec": {"a": 2}}), 3),
            (
                json!({"metadata": {"generation": 2}, "spec": {"a": 1}, "status": {"s": 1}}),
                3,
            ),
        ] {
            assert_eq!(generation_after(&before, &after), generation, "{after}");
        }
    }

    #[test]
    fn go_writes_a_map_with_its_keys_sorted() {
        assert_eq!(
            sorted_json(&json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": null}})),
            r#"{"a":{"c":null,"d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }
}
