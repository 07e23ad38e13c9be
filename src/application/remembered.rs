//! What an Application remembers per image in an annotation of ours: a JSON map from the
//! image (`<registry>/<repository>`) to what is kept of it, read leniently (a value that does
//! not read is taken as nothing remembered: only a person edits it, and that is how a person
//! releases what it holds), bounded, and written by guarded JSON-patch operations (pure).

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The most images an annotation remembers: an Application tracks a handful; past this the
/// oldest are forgotten, never the annotation grown without end.
pub const MAX_REMEMBERED: usize = 64;

/// The map `key` holds on `app`; empty if absent or unreadable.
pub fn read<T: DeserializeOwned>(app: &Value, key: &str) -> BTreeMap<String, T> {
    app["metadata"]["annotations"][key]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Drops the oldest entries, by `time` (RFC 3339 text, which sorts as time), past the bound.
pub fn bound<T>(map: &mut BTreeMap<String, T>, time: impl Fn(&T) -> &str) {
    while map.len() > MAX_REMEMBERED {
        let oldest = map
            .iter()
            .min_by(|a, b| time(a.1).cmp(time(b.1)))
            .map(|(image, _)| image.clone());
        match oldest {
            Some(image) => map.remove(&image),
            None => break,
        };
    }
}

/// The JSON-patch operations that bring annotation `key` from what `app` holds to `next`,
/// guarded by its text as read; adding it where it is absent, and removing it once empty.
pub fn patch_ops<T: Serialize>(app: &Value, key: &str, next: &BTreeMap<String, T>) -> Vec<Value> {
    // The key as a JSON pointer token (RFC 6901): `/` is `~1`.
    let path = format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    );
    let read = &app["metadata"]["annotations"][key];
    let text = serde_json::to_string(next).unwrap_or_default();
    match (read.as_str(), next.is_empty()) {
        (Some(_), true) => vec![
            json!({"op": "test", "path": path, "value": read}),
            json!({"op": "remove", "path": path}),
        ],
        (Some(_), false) => vec![
            json!({"op": "test", "path": path, "value": read}),
            json!({"op": "replace", "path": path, "value": text}),
        ],
        (None, true) => Vec::new(),
        (None, false) => vec![json!({"op": "add", "path": path, "value": text})],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "argocd-ecr-updater.io/kept";

    #[test]
    fn the_patch_tests_what_it_replaces_and_adds_only_what_is_absent() {
        let next: BTreeMap<_, _> = [("r/web".to_string(), "1.1".to_string())].into();
        let bare = json!({"metadata": {"annotations": {}}});
        let ops = patch_ops(&bare, KEY, &next);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0]["op"], "add");
        assert_eq!(
            ops[0]["path"],
            "/metadata/annotations/argocd-ecr-updater.io~1kept"
        );
        let held = json!({"metadata": {"annotations": {KEY: "{}"}}});
        let ops = patch_ops(&held, KEY, &next);
        assert_eq!(
            (ops[0]["op"].as_str(), ops[1]["op"].as_str()),
            (Some("test"), Some("replace"))
        );
        assert_eq!(ops[0]["value"], "{}", "guarded by the text as read");
        let ops = patch_ops(&held, KEY, &BTreeMap::<String, String>::new());
        assert_eq!(ops[1]["op"], "remove");
        assert!(patch_ops(&bare, KEY, &BTreeMap::<String, String>::new()).is_empty());
    }

    #[test]
    fn an_annotation_edited_into_something_else_reads_as_nothing_remembered() {
        for text in ["released", "[]", "{\"r/web\": 3}"] {
            let app = json!({"metadata": {"annotations": {KEY: text}}});
            assert!(read::<String>(&app, KEY).is_empty(), "{text}");
        }
    }

    #[test]
    fn the_oldest_entries_are_forgotten_past_the_bound() {
        let mut map: BTreeMap<String, String> = (0..MAX_REMEMBERED)
            .map(|i| {
                (
                    format!("r/i{i:03}"),
                    format!("2026-12-03T10:{:02}:00Z", i % 60),
                )
            })
            .collect();
        map.insert("r/old".into(), "2026-12-01T00:00:00Z".into());
        bound(&mut map, |t| t.as_str());
        assert_eq!(map.len(), MAX_REMEMBERED);
        assert!(!map.contains_key("r/old"), "the oldest goes first");
    }
}
