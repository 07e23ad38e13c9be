//! Every file the Git write-back edits, read back the way its consumer reads it before it is
//! committed.
//!
//! The edit itself ([`super::yamledit`]) is made with a YAML 1.2 parser, but Helm and
//! kustomize read with YAML 1.1 readers (go-yaml, like libyaml) that, for one, break lines
//! at U+0085, U+2028 and U+2029 where a YAML 1.2 reader sees one line: a key that is one
//! scalar to the editor can be an injected block to Helm. So the old and the new text are
//! both parsed with libyaml (`serde_yaml_ng`, first document, merge keys applied), the
//! intended edits are applied to the old tree, and the commit goes ahead only if the new
//! text reads as exactly that tree. Whatever the cause (a hostile key, a bug in the splice,
//! a reader difference nobody thought of), a file that Helm would read differently from what
//! was meant is never committed. Pure, no I/O.

use serde_yaml_ng::{Mapping, Value};

/// One step of a path into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

impl From<super::yamledit::Step<'_>> for Step {
    fn from(step: super::yamledit::Step<'_>) -> Self {
        match step {
            super::yamledit::Step::Key(key) => Self::Key(key.to_string()),
            super::yamledit::Step::Index(index) => Self::Index(index),
        }
    }
}

/// A path as `a.b[0].c`, for messages.
fn shown(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key.escape_debug().to_string());
            }
            Step::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    if out.is_empty() {
        "the top level".into()
    } else {
        out
    }
}

/// What the write-back meant to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// The string at `path`, adding the mappings that are missing on the way.
    Set(Vec<Step>, String),
    /// The key at `path` removed.
    Remove(Vec<Step>),
    /// A mapping of string fields added at the end of the sequence at `path` (made if
    /// missing).
    Append(Vec<Step>, Vec<(String, String)>),
}

/// Why a file is not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadBackError {
    #[error(
        "`{file}`: Helm's and kustomize's YAML reader (libyaml) cannot read the file as it is in Git ({message}); it is not edited"
    )]
    Unreadable { file: String, message: String },
    #[error(
        "`{file}`: the edited text does not read as YAML to Helm's and kustomize's reader (libyaml): {message}; not committed"
    )]
    Broken { file: String, message: String },
    #[error(
        "`{file}`: read as Helm and kustomize read it (libyaml), the edit would change {at} beyond what was meant ({why}); not committed. A key or value with a character that YAML 1.1 reads as a line break (U+0085, U+2028, U+2029) does this"
    )]
    Unintended {
        file: String,
        at: String,
        why: String,
    },
    #[error("`{file}`: cannot apply the intended edit at {at} to the file as read: {why}")]
    Inapplicable {
        file: String,
        at: String,
        why: String,
    },
}

/// The first document of `text` as libyaml reads it, merge keys applied; `Null` for an
/// empty file.
pub fn read(text: &str) -> Result<Value, serde_yaml_ng::Error> {
    use serde::Deserialize;
    let mut value = match serde_yaml_ng::Deserializer::from_str(text).next() {
        Some(document) => Value::deserialize(document)?,
        None => Value::Null,
    };
    value.apply_merge()?;
    Ok(value)
}

/// Refuses `new` unless it reads as `old` with `edits` applied.
pub fn check(
    file: &str,
    old: Option<&str>,
    new: &str,
    edits: &[Edit],
) -> Result<(), ReadBackError> {
    let mut expected = match old {
        Some(old) => read(old).map_err(|e| ReadBackError::Unreadable {
            file: file.to_string(),
            message: e.to_string(),
        })?,
        None => Value::Null,
    };
    for edit in edits {
        apply(&mut expected, edit).map_err(|(at, why)| ReadBackError::Inapplicable {
            file: file.to_string(),
            at,
            why,
        })?;
    }
    check_whole(file, new, &expected)
}

/// Refuses `new` unless it reads as exactly `expected` (a file written whole).
pub fn check_whole(file: &str, new: &str, expected: &Value) -> Result<(), ReadBackError> {
    let got = read(new).map_err(|e| ReadBackError::Broken {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    match difference(expected, &got, &mut Vec::new()) {
        None => Ok(()),
        Some((at, why)) => Err(ReadBackError::Unintended {
            file: file.to_string(),
            at,
            why,
        }),
    }
}

/// A JSON value (what the write-back builds whole) as the YAML tree it should read as.
pub fn from_json(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Value::Number(u.into()),
            (_, Some(i), _) => Value::Number(i.into()),
            (_, _, Some(f)) => Value::Number(f.into()),
            _ => Value::Null,
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Sequence(items.iter().map(from_json).collect()),
        serde_json::Value::Object(map) => Value::Mapping(
            map.iter()
                .map(|(k, v)| (Value::String(k.clone()), from_json(v)))
                .collect(),
        ),
    }
}

fn key(text: &str) -> Value {
    Value::String(text.to_string())
}

/// `edit` applied to `tree`; the error names where and why it cannot be.
fn apply(tree: &mut Value, edit: &Edit) -> Result<(), (String, String)> {
    let (path, last) = match edit {
        Edit::Set(path, _) | Edit::Remove(path) | Edit::Append(path, _) => {
            match path.split_last() {
                Some((last, parent)) => (parent, last),
                None => return Err(("the top level".into(), "an empty path".into())),
            }
        }
    };
    let whole = match edit {
        Edit::Set(path, _) | Edit::Remove(path) | Edit::Append(path, _) => shown(path),
    };
    let removing = matches!(edit, Edit::Remove(_));
    let mut node = tree;
    for step in path {
        node = match step {
            Step::Key(name) => {
                if node.is_null() && !removing {
                    *node = Value::Mapping(Mapping::new());
                }
                let Value::Mapping(map) = node else {
                    return Err((whole, format!("`{name}`'s parent is not a mapping")));
                };
                if removing && !map.contains_key(key(name)) {
                    return Ok(());
                }
                map.entry(key(name)).or_insert(Value::Null)
            }
            Step::Index(index) => match node {
                Value::Sequence(items) if *index < items.len() => &mut items[*index],
                _ => return Err((whole, format!("no item {index} in a list there"))),
            },
        };
    }
    match (edit, last) {
        (Edit::Set(_, value), Step::Key(name)) => {
            if node.is_null() {
                *node = Value::Mapping(Mapping::new());
            }
            let Value::Mapping(map) = node else {
                return Err((whole, format!("`{name}`'s parent is not a mapping")));
            };
            map.insert(key(name), Value::String(value.clone()));
        }
        (Edit::Set(_, value), Step::Index(index)) => match node {
            Value::Sequence(items) if *index < items.len() => {
                items[*index] = Value::String(value.clone());
            }
            _ => return Err((whole, format!("no item {index} in a list there"))),
        },
        (Edit::Remove(_), Step::Key(name)) => {
            if let Value::Mapping(map) = node {
                map.remove(key(name));
            }
        }
        (Edit::Append(_, fields), Step::Key(name)) => {
            if node.is_null() {
                *node = Value::Mapping(Mapping::new());
            }
            let Value::Mapping(map) = node else {
                return Err((whole, format!("`{name}`'s parent is not a mapping")));
            };
            let list = map.entry(key(name)).or_insert(Value::Sequence(Vec::new()));
            if list.is_null() {
                *list = Value::Sequence(Vec::new());
            }
            let Value::Sequence(items) = list else {
                return Err((whole, format!("`{name}` is not a list")));
            };
            items.push(Value::Mapping(
                fields
                    .iter()
                    .map(|(k, v)| (key(k), Value::String(v.clone())))
                    .collect(),
            ));
        }
        (_, Step::Index(_)) => {
            return Err((whole, "a list item cannot be removed or added to".into()));
        }
    }
    Ok(())
}

/// Where `got` first differs from `expected`, and how.
fn difference(expected: &Value, got: &Value, path: &mut Vec<Step>) -> Option<(String, String)> {
    match (expected, got) {
        (Value::Mapping(want), Value::Mapping(have)) => {
            for (k, v) in want {
                let step = Step::Key(scalar_text(k));
                match have.get(k) {
                    None => return Some((shown_with(path, step), "it would be gone".into())),
                    Some(h) => {
                        path.push(step);
                        let found = difference(v, h, path);
                        path.pop();
                        if found.is_some() {
                            return found;
                        }
                    }
                }
            }
            have.keys().find(|k| !want.contains_key(*k)).map(|k| {
                (
                    shown_with(path, Step::Key(scalar_text(k))),
                    "a key that was not meant to be there would appear".into(),
                )
            })
        }
        (Value::Sequence(want), Value::Sequence(have)) => {
            if want.len() != have.len() {
                return Some((
                    shown(path),
                    format!("a list of {} items would have {}", want.len(), have.len()),
                ));
            }
            for (index, (w, h)) in want.iter().zip(have).enumerate() {
                path.push(Step::Index(index));
                let found = difference(w, h, path);
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (want, have) if want == have => None,
        (want, have) => Some((
            shown(path),
            format!("expected {}, read {}", brief(want), brief(have)),
        )),
    }
}

fn shown_with(path: &[Step], step: Step) -> String {
    let mut whole = path.to_vec();
    whole.push(step);
    shown(&whole)
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_yaml_ng::to_string(other)
            .map(|t| t.trim_end().to_string())
            .unwrap_or_default(),
    }
}

/// A value in a message: its kind, and a scalar's first characters.
fn brief(value: &Value) -> String {
    match value {
        Value::Null => "nothing".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Sequence(_) => "a list".into(),
        Value::Tagged(_) => "a tagged value".into(),
        scalar => {
            let text = scalar_text(scalar);
            let cut: String = text.chars().take(40).collect();
            format!("`{}`", cut.escape_debug())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &[&str], value: &str) -> Edit {
        Edit::Set(
            path.iter().map(|k| Step::Key(k.to_string())).collect(),
            value.into(),
        )
    }

    #[test]
    fn an_edit_that_changes_only_what_was_meant_passes() {
        let old = "# comment\nimage:\n  repository: web\n  tag: \"1.0\"\nreplicas: 2\n";
        let new = "# comment\nimage:\n  repository: web\n  tag: \"1.1\"\nreplicas: 2\n";
        assert_eq!(
            check(
                "values.yaml",
                Some(old),
                new,
                &[set(&["image", "tag"], "1.1")]
            ),
            Ok(())
        );
        // Missing keys are added on the way; an empty file is an empty mapping.
        let added = "image:\n  tag: \"1.1\"\n";
        assert_eq!(
            check("values.yaml", None, added, &[set(&["image", "tag"], "1.1")]),
            Ok(())
        );
        assert_eq!(
            check(
                "values.yaml",
                Some(""),
                added,
                &[set(&["image", "tag"], "1.1")]
            ),
            Ok(())
        );
    }

    /// Texts a YAML 1.2 editor could produce from hostile keys or values, each of which Helm's
    /// reader would see as more than the intended change.
    #[test]
    fn a_file_helm_would_read_differently_from_what_was_meant_is_refused() {
        let old = "image:\n  tag: \"1.0\"\n";
        for (case, new, words) in [
            (
                "a U+2028 in a key becomes a second key",
                "image:\n  tag: \"1.1\"\nx\u{2028}securityContext: {privileged: true}: 1\n",
                "",
            ),
            (
                "a U+0085 (NEL) breaks a plain key into a block",
                "image:\n  tag: \"1.1\"\nx\u{85}securityContext:\n  privileged: true\n",
                "",
            ),
            (
                "a U+2029 in a plain value starts a new key",
                "image:\n  tag: 1.1\u{2029}privileged: true\n",
                "",
            ),
            (
                "an extra key beside the intended one",
                "image:\n  tag: \"1.1\"\n  pullPolicy: Always\n",
                "image.pullPolicy",
            ),
            (
                "the intended key with another value",
                "image:\n  tag: \"1.2\"\n",
                "expected `1.1`",
            ),
            (
                "a tag read as a number",
                "image:\n  tag: 1.1\n",
                "image.tag",
            ),
            ("a key lost", "{}\n", "image"),
            (
                "two documents where the first lost the key",
                "other: 1\n---\nimage:\n  tag: \"1.1\"\n",
                "",
            ),
            (
                "an injected merge key",
                "base: &b {privileged: true}\nimage:\n  tag: \"1.1\"\n  <<: *b\n",
                "",
            ),
            (
                "not YAML to libyaml",
                "image:\n  tag: \"1.1\n",
                "does not read as YAML",
            ),
        ] {
            let result = check(
                "values.yaml",
                Some(old),
                new,
                &[set(&["image", "tag"], "1.1")],
            );
            let error = result.err().unwrap_or_else(|| panic!("{case}: accepted"));
            assert!(error.to_string().contains(words), "{case}: {error}");
            assert!(
                error.to_string().contains("not committed"),
                "{case}: {error}"
            );
        }
    }

    #[test]
    fn a_file_libyaml_cannot_read_is_not_edited() {
        let error = check("values.yaml", Some("a: [1\n"), "a: 1\n", &[]).unwrap_err();
        assert!(matches!(error, ReadBackError::Unreadable { .. }), "{error}");
        let duplicate = check("values.yaml", Some("a: 1\na: 2\n"), "a: 1\n", &[]).unwrap_err();
        assert!(
            matches!(duplicate, ReadBackError::Unreadable { .. }),
            "{duplicate}"
        );
    }

    #[test]
    fn kustomization_edits_set_remove_and_append_list_items() {
        let old = "images:\n- name: web\n  newTag: \"1.0\"\n  digest: sha256:aa\n";
        let new = "images:\n- name: web\n  newTag: \"1.1\"\n- name: api\n  newTag: \"2.0\"\n";
        let at = |i: usize, field: &str| {
            vec![
                Step::Key("images".into()),
                Step::Index(i),
                Step::Key(field.into()),
            ]
        };
        let edits = [
            Edit::Set(at(0, "newTag"), "1.1".into()),
            Edit::Remove(at(0, "digest")),
            Edit::Append(
                vec![Step::Key("images".into())],
                vec![
                    ("name".into(), "api".into()),
                    ("newTag".into(), "2.0".into()),
                ],
            ),
        ];
        assert_eq!(check("kustomization.yaml", Some(old), new, &edits), Ok(()));
        // The same edits, but a hostile image name turned one entry into two for kustomize.
        let injected = "images:\n- name: web\n  newTag: \"1.1\"\n- name: api\n  newTag: \"2.0\"\n- name: busybox\n  newName: evil.example/backdoor\n";
        let error = check("kustomization.yaml", Some(old), injected, &edits).unwrap_err();
        assert!(
            error.to_string().contains("a list of 2 items would have 3"),
            "{error}"
        );
    }

    #[test]
    fn a_file_written_whole_must_read_as_the_value_it_was_built_from() {
        let expected = serde_json::json!({"helm": {"parameters": [
            {"name": "image.tag", "value": "1.1", "forcestring": true}]}});
        let good = "helm:\n  parameters:\n  - name: image.tag\n    value: \"1.1\"\n    forcestring: true\n";
        assert_eq!(
            check_whole(".argocd-source-web.yaml", good, &from_json(&expected)),
            Ok(())
        );
        let bad =
            "helm:\n  parameters:\n  - name: image.tag\n    value: 1.1\n    forcestring: true\n";
        assert!(check_whole(".argocd-source-web.yaml", bad, &from_json(&expected)).is_err());
    }
}
