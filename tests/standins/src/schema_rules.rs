//! What kube-apiserver checks of a custom resource beyond its OpenAPI schema: the CRD's
//! `x-kubernetes-validations` CEL rules, and the unique keys of `x-kubernetes-list-type: map`
//! lists. Messages follow the API server's field-error form (`<path>: Invalid value: …`,
//! `<path>: Duplicate value: …`).

use serde_json::Value;

/// Every violation of `object` against `schema` (an `openAPIV3Schema`), in document order.
pub fn violations(schema: &Value, object: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, object, "", &mut out);
    out
}

fn walk(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if value.is_null() {
        return;
    }
    let shown = if path.is_empty() { "<root>" } else { path };
    for validation in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let rule = validation["rule"].as_str().unwrap_or_default();
        let message = validation["message"].as_str().unwrap_or(rule);
        match evaluate(rule, value) {
            Ok(true) => {}
            Ok(false) => out.push(format!("{shown}: Invalid value: \"object\": {message}")),
            Err(error) => out.push(format!("{shown}: Invalid value: \"object\": {error}")),
        }
    }
    if let (Some(items), Some(schema_items)) = (value.as_array(), schema.get("items")) {
        if schema["x-kubernetes-list-type"] == "map" {
            let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut seen = Vec::new();
            for (index, item) in items.iter().enumerate() {
                let key: serde_json::Map<String, Value> = keys
                    .iter()
                    .map(|k| ((*k).to_string(), item[*k].clone()))
                    .collect();
                if seen.contains(&key) {
                    out.push(format!(
                        "{path}[{index}]: Duplicate value: {}",
                        Value::Object(key)
                    ));
                } else {
                    seen.push(key);
                }
            }
        }
        for (index, item) in items.iter().enumerate() {
            walk(schema_items, item, &format!("{path}[{index}]"), out);
        }
    }
    if let Some(fields) = value.as_object() {
        let properties = schema["properties"].as_object();
        for (name, field) in fields {
            let child = format!("{}{name}", if path.is_empty() { "" } else { "." });
            let child = format!("{path}{child}");
            match properties.and_then(|p| p.get(name)) {
                Some(sub) => walk(sub, field, &child, out),
                None => {
                    if let Some(additional) =
                        schema.get("additionalProperties").filter(|a| a.is_object())
                    {
                        walk(additional, field, &child, out);
                    }
                }
            }
        }
    }
}

/// A rule with `self` bound to `value`; an error where the API server's would be one (a rule
/// that does not compile, or that does not return a boolean).
fn evaluate(rule: &str, value: &Value) -> Result<bool, String> {
    let program = cel::Program::compile(rule).map_err(|e| format!("rule {rule:?}: {e}"))?;
    let mut context = cel::Context::default();
    context
        .add_variable("self", value.clone())
        .map_err(|e| format!("rule {rule:?}: {e}"))?;
    match program.execute(&context) {
        Ok(cel::Value::Bool(answer)) => Ok(answer),
        Ok(other) => Err(format!("rule {rule:?} returned {other:?}, not a boolean")),
        Err(e) => Err(format!("rule {rule:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"list": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["alias"],
            "items": {"type": "object",
                      "x-kubernetes-validations": [{"rule": "has(self.a) || has(self.b)", "message": "a or b"}]}}}})
    }

    #[test]
    fn a_false_rule_and_a_duplicate_map_key_are_each_named_at_their_path() {
        let object =
            json!({"list": [{"alias": "x", "a": 1}, {"alias": "x", "b": 2}, {"alias": "y"}]});
        assert_eq!(
            violations(&schema(), &object),
            vec![
                "list[1]: Duplicate value: {\"alias\":\"x\"}".to_string(),
                "list[2]: Invalid value: \"object\": a or b".to_string(),
            ]
        );
    }

    #[test]
    fn an_object_that_keeps_the_rules_has_no_violation() {
        let object = json!({"list": [{"alias": "x", "a": 1}, {"alias": "y", "b": 2}]});
        assert!(violations(&schema(), &object).is_empty());
    }
}
