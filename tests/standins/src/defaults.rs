//! Structural-schema defaulting of custom resources, as kube-apiserver does it on create, on
//! update and on every read from storage: a property with a `default` that is missing (or
//! null where the schema does not allow null) gets a copy of the default, then the walk goes
//! on into it. Defaults apply only inside objects that exist: a `default` under an object
//! the writer left out is not used (Image Updater v1.3.0's per-image `updateStrategy` is
//! filled only where the image has `commonUpdateSettings`).

use std::collections::HashMap;

use serde_json::{Value, json};

/// What defaulting reads of a CRD's schema, taken out of it once.
#[derive(Default)]
pub struct Defaults {
    default: Option<Value>,
    nullable: bool,
    properties: HashMap<String, Defaults>,
    additional_properties: Option<Box<Defaults>>,
    items: Option<Box<Defaults>>,
    /// Whether anything at or under this schema has a default: most of a large object is
    /// walked past without looking.
    any: bool,
}

impl Defaults {
    /// The defaults of an `openAPIV3Schema`.
    pub fn of(schema: &Value) -> Self {
        let nested = |key: &str| {
            Some(&schema[key])
                .filter(|s| s.is_object())
                .map(|s| Box::new(Self::of(s)))
        };
        let properties: HashMap<String, Defaults> = schema["properties"]
            .as_object()
            .map(|properties| {
                properties
                    .iter()
                    .map(|(key, schema)| (key.clone(), Self::of(schema)))
                    .collect()
            })
            .unwrap_or_default();
        let additional_properties = nested("additionalProperties");
        let items = nested("items");
        let default = schema.get("default").cloned();
        let any = default.is_some()
            || properties.values().any(|p| p.any)
            || additional_properties.as_ref().is_some_and(|p| p.any)
            || items.as_ref().is_some_and(|p| p.any);
        Self {
            default,
            nullable: schema["nullable"] == json!(true),
            properties,
            additional_properties,
            items,
            any,
        }
    }

    /// Fills the defaults into `value`, in place.
    pub fn apply(&self, value: &mut Value) {
        if !self.any {
            return;
        }
        match value {
            Value::Object(map) => {
                for (key, property) in &self.properties {
                    let Some(default) = &property.default else {
                        continue;
                    };
                    let missing = match map.get(key) {
                        None => true,
                        Some(Value::Null) => !property.nullable,
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if let Some(property) = self.properties.get(key) {
                        property.apply(child);
                    } else if let Some(property) = &self.additional_properties {
                        property.apply(child);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for value in items {
                        item.apply(value);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Defaults {
        Defaults::of(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "common": {"type": "object", "properties": {
                "strategy": {"type": "string", "default": "semver"},
                "force": {"type": "boolean", "default": false}}},
            "images": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "common": {"type": "object", "properties": {
                    "strategy": {"type": "string", "default": "semver"}}}}}},
            "enabled": {"type": "boolean", "default": true},
            "labels": {"type": "object", "nullable": true, "default": {"a": "b"}}}}}}),
        )
    }

    fn defaulted(mut object: Value) -> Value {
        schema().apply(&mut object);
        object
    }

    #[test]
    fn a_missing_field_with_a_default_gets_it_inside_an_object_that_exists() {
        let object = defaulted(json!({"spec": {"common": {}}}));
        assert_eq!(
            object,
            json!({"spec": {"common": {"strategy": "semver", "force": false}, "enabled": true, "labels": {"a": "b"}}})
        );
    }

    #[test]
    fn a_default_under_an_object_the_writer_left_out_is_not_used() {
        let object =
            defaulted(json!({"spec": {"images": [{"name": "a"}, {"name": "b", "common": {}}]}}));
        assert_eq!(object["spec"]["images"][0], json!({"name": "a"}));
        assert_eq!(
            object["spec"]["images"][1]["common"],
            json!({"strategy": "semver"})
        );
        assert!(object["spec"].get("common").is_none());
    }

    #[test]
    fn a_value_that_is_set_is_kept_and_a_null_is_defaulted_unless_null_is_allowed() {
        let object = defaulted(
            json!({"spec": {"common": {"strategy": "latest", "force": null}, "labels": null}}),
        );
        assert_eq!(
            object["spec"]["common"],
            json!({"strategy": "latest", "force": false})
        );
        assert_eq!(object["spec"]["labels"], Value::Null);
    }

    #[test]
    fn an_object_without_the_root_schema_defaults_is_left_alone() {
        assert_eq!(defaulted(json!({"other": 1})), json!({"other": 1}));
    }
}
