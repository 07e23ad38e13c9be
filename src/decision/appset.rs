//! ApplicationSet ownership: may we patch an Application that an ApplicationSet generates?
//!
//! The ApplicationSet controller rewrites its Applications from the template at every
//! reconcile, so a patched parameter is reverted within minutes, unless the ApplicationSet's
//! `spec.ignoreApplicationDifferences` tells the controller to keep those fields as they are
//! in the Application. We patch exactly when it covers every path we write.

use serde_json::Value;

use crate::application::app::Application;
use crate::failure::Failure;
use crate::failure::Refused;
use crate::report::Action;

/// What reading the owning ApplicationSet gave.
#[derive(Debug)]
pub enum Lookup<'a> {
    Found(&'a Value),
    Missing,
    Unreadable(Failure),
}

/// Why the write does not happen: the entries' new action, reason and retry class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub action: Action,
    pub reason: String,
    pub retryable: bool,
}

/// May the Application owned by `owner` be patched at `written`?
pub fn verdict(
    owner: &str,
    lookup: Lookup<'_>,
    app_name: &str,
    written: &[String],
) -> Result<(), Refusal> {
    match lookup {
        Lookup::Found(set) => covers(set, app_name, written).map_err(|Refused(reason)| Refusal {
            action: Action::Skipped,
            reason,
            retryable: false,
        }),
        Lookup::Missing => Err(Refusal {
            action: Action::Skipped,
            reason: format!(
                "owned by ApplicationSet `{owner}`, which cannot be found to check its ignoreApplicationDifferences"
            ),
            retryable: false,
        }),
        Lookup::Unreadable(Failure { message, retryable }) => Err(Refusal {
            action: Action::Failed,
            reason: format!(
                "owned by ApplicationSet `{owner}`, whose ignoreApplicationDifferences cannot be read: {message}"
            ),
            retryable,
        }),
    }
}

/// The name of the ApplicationSet that owns this Application, if one does.
pub fn owner<'a>(app: &'a Application<'_>) -> Option<&'a str> {
    app.metadata
        .owner_references
        .iter()
        .find(|r| r.kind.as_deref() == Some("ApplicationSet"))
        .and_then(|r| r.name.as_deref())
}

/// Checks that `written` (JSON pointers into the Application, metadata excluded) are all
/// kept by the ApplicationSet's `ignoreApplicationDifferences` for this Application. `Err`
/// names the first uncovered path and what to add.
pub fn covers(appset: &Value, app_name: &str, written: &[String]) -> Result<(), Refused> {
    let set_name = appset["metadata"]["name"].as_str().unwrap_or_default();
    let rules: Vec<&Value> = appset["spec"]["ignoreApplicationDifferences"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .filter(|r| {
                    r["name"]
                        .as_str()
                        .is_none_or(|n| n.is_empty() || n == app_name)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut kept: Vec<Vec<Segment>> = Vec::new();
    let mut not_understood = Vec::new();
    for rule in &rules {
        for pointer in rule["jsonPointers"].as_array().into_iter().flatten() {
            if let Some(pointer) = pointer.as_str() {
                kept.push(pointer_segments(pointer));
            }
        }
        for expression in rule["jqPathExpressions"].as_array().into_iter().flatten() {
            let Some(expression) = expression.as_str() else {
                continue;
            };
            match jq_path_segments(expression) {
                Some(segments) => kept.push(segments),
                None => not_understood.push(expression.to_string()),
            }
        }
    }
    for path in written.iter().filter(|p| !p.starts_with("/metadata/")) {
        let segments = pointer_segments(path);
        if !kept.iter().any(|prefix| is_prefix(prefix, &segments)) {
            let mut reason = format!(
                "owned by ApplicationSet `{set_name}`, whose controller would revert `{path}` at its next reconcile: add it to the ApplicationSet's spec.ignoreApplicationDifferences (jsonPointers: [{path}]), or put the tag into its template or generator"
            );
            if !not_understood.is_empty() {
                reason.push_str(&format!(
                    "; these jqPathExpressions are not plain paths and were not evaluated: {}",
                    not_understood.join(", ")
                ));
            }
            return Err(Refused::from(reason));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    /// `[]` in a jq path: every element.
    AnyIndex,
}

fn pointer_segments(pointer: &str) -> Vec<Segment> {
    pointer
        .split('/')
        .skip(1)
        .map(|s| Segment::Key(s.replace("~1", "/").replace("~0", "~")))
        .collect()
}

/// `.spec.source.helm.parameters`, `.spec.sources[1].helm`, `.spec.sources[].helm`: the
/// plain path forms of jq. Anything else (pipes, selects, functions) is not a path we can
/// evaluate without jq, and is reported rather than guessed at.
fn jq_path_segments(expression: &str) -> Option<Vec<Segment>> {
    let mut segments = Vec::new();
    let mut rest = expression.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let key = &after[..end];
            if key.is_empty()
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return None;
            }
            segments.push(Segment::Key(key.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inside = after[..end].trim();
            if inside.is_empty() {
                segments.push(Segment::AnyIndex);
            } else if inside.chars().all(|c| c.is_ascii_digit()) {
                segments.push(Segment::Key(inside.to_string()));
            } else {
                let key = inside.strip_prefix('"')?.strip_suffix('"')?;
                segments.push(Segment::Key(key.to_string()));
            }
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    (!segments.is_empty()).then_some(segments)
}

fn is_prefix(prefix: &[Segment], path: &[Segment]) -> bool {
    prefix.len() <= path.len()
        && prefix.iter().zip(path).all(|(p, s)| match (p, s) {
            (Segment::AnyIndex, Segment::Key(k)) => k.chars().all(|c| c.is_ascii_digit()),
            (a, b) => a == b,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(rules: Value) -> Value {
        json!({"metadata": {"name": "web-set"}, "spec": {"ignoreApplicationDifferences": rules}})
    }

    const PARAMS: &str = "/spec/source/helm/parameters";

    #[test]
    fn ignore_rules_that_keep_the_written_paths_allow_the_patch() {
        let table: &[(&str, Value, &str, bool)] = &[
            (
                "the exact json pointer",
                json!([{"jsonPointers": [PARAMS]}]),
                PARAMS,
                true,
            ),
            (
                "a parent json pointer",
                json!([{"jsonPointers": ["/spec/source"]}]),
                PARAMS,
                true,
            ),
            (
                "a sibling json pointer",
                json!([{"jsonPointers": ["/spec/source/targetRevision"]}]),
                PARAMS,
                false,
            ),
            (
                "a plain jq path",
                json!([{"jqPathExpressions": [".spec.source.helm.parameters"]}]),
                PARAMS,
                true,
            ),
            (
                "a jq path over every source",
                json!([{"jqPathExpressions": [".spec.sources[].helm"]}]),
                "/spec/sources/1/helm/parameters",
                true,
            ),
            (
                "a jq path naming another source",
                json!([{"jqPathExpressions": [".spec.sources[0].helm"]}]),
                "/spec/sources/1/helm/parameters",
                false,
            ),
            (
                "a rule for this Application by name",
                json!([{"name": "web", "jsonPointers": [PARAMS]}]),
                PARAMS,
                true,
            ),
            (
                "a rule for another Application",
                json!([{"name": "api", "jsonPointers": [PARAMS]}]),
                PARAMS,
                false,
            ),
            ("no rules at all", json!(null), PARAMS, false),
        ];
        for (case, rules, path, allowed) in table {
            let verdict = covers(&set(rules.clone()), "web", &[path.to_string()]);
            assert_eq!(verdict.is_ok(), *allowed, "{case}: {verdict:?}");
        }
    }

    #[test]
    fn the_audit_annotation_is_not_what_the_rules_must_cover() {
        let written = vec![
            PARAMS.to_string(),
            "/metadata/annotations/argocd-ecr-updater.io~1last-update".to_string(),
        ];
        assert!(covers(&set(json!([{"jsonPointers": [PARAMS]}])), "web", &written).is_ok());
    }

    #[test]
    fn a_refusal_names_the_path_to_add_and_the_expressions_it_could_not_read() {
        let rules = json!([{"jqPathExpressions": [".spec.source.helm.parameters[] | select(.name == \"image.tag\")"]}]);
        let reason = covers(&set(rules), "web", &[PARAMS.to_string()]).unwrap_err();
        assert!(reason.contains("ApplicationSet `web-set`"), "{reason}");
        assert!(
            reason.contains("jsonPointers: [/spec/source/helm/parameters]"),
            "{reason}"
        );
        assert!(reason.contains("select(.name"), "{reason}");
    }

    #[test]
    fn the_owner_is_read_from_the_owner_references() {
        let app = json!({"metadata": {"ownerReferences": [{"kind": "ApplicationSet", "name": "web-set"}]}});
        assert_eq!(owner(&Application::of(&app)), Some("web-set"));
        assert_eq!(owner(&Application::of(&json!({"metadata": {}}))), None);
    }
}
