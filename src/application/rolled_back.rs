//! The images auto-rollback took back, remembered per image
//! (`argocd-ecr-updater.io/rolled-back`) so that no automatic path (a push, a sweep, a
//! promotion) writes one of them again: unlike a failed rollout, which the next confirmed
//! rollout of the image forgets, an entry here stays until a person deletes it (pure).
//!
//! The value is JSON: `{"<registry>/<repository>": [{"to", "digest", "from", "at",
//! "reason"}]}`, newest last, at most [`MAX_PER_IMAGE`] per image.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::appconfig::annotations::ROLLED_BACK_ANNOTATION;
use crate::application::remembered;
use crate::policy::TagRef;

/// The most images taken back one image remembers; past it the oldest is forgotten (an image
/// taken back long ago ranks below every image written since, so never-downgrade still keeps
/// it out).
pub const MAX_PER_IMAGE: usize = 16;

/// One image taken back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolledBack {
    /// What the failed write wrote: a tag, a digest, or `tag@sha256:…`.
    pub to: String,
    /// The digest ECR named for it when it was taken back, when it named one: what a later
    /// push of the same image under another tag is recognised by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// What was written back.
    pub from: String,
    /// When it was taken back (RFC 3339).
    pub at: String,
    /// Why its rollout failed.
    pub reason: String,
}

impl RolledBack {
    /// Whether `value` (a value to write) with `digest` (ECR's for it, when known) is this
    /// image again: the same digest where both are known, else the same tag.
    pub fn is(&self, value: &str, digest: Option<&str>) -> bool {
        let ours = TagRef::from(self.to.as_str());
        let theirs = TagRef::from(value);
        let known = |r: &TagRef, d: Option<&str>| {
            r.digest
                .clone()
                .or_else(|| r.tag.starts_with("sha256:").then(|| r.tag.clone()))
                .or(d.map(str::to_string))
        };
        match (known(&ours, self.digest.as_deref()), known(&theirs, digest)) {
            (Some(a), Some(b)) => a == b,
            _ => !ours.tag.is_empty() && ours.tag == theirs.tag,
        }
    }

    /// Why a write of this image is refused, for the report.
    pub fn refusal(&self, image: &str) -> String {
        format!(
            "`{}` was rolled back at {} after its rollout failed ({}); no automatic write deploys it again until a person deletes it from `{image}` in the {ROLLED_BACK_ANNOTATION} annotation",
            self.to, self.at, self.reason
        )
    }
}

/// Every image's entries as the annotation holds them (an annotation that does not read is
/// taken as none: only a person edits it).
pub fn of(app: &Value) -> BTreeMap<String, Vec<RolledBack>> {
    remembered::read(app, ROLLED_BACK_ANNOTATION)
}

/// Why the annotation, present, does not read (`None`: absent, or it reads). An entry a
/// person broke while editing must not release every image it held: the gate holds every
/// write of the Application's images until it reads again.
pub fn unreadable(app: &Value) -> Option<String> {
    let text = app["metadata"]["annotations"][ROLLED_BACK_ANNOTATION].as_str()?;
    match serde_json::from_str::<BTreeMap<String, Vec<RolledBack>>>(text) {
        Ok(_) => None,
        Err(e) => Some(format!(
            "the {ROLLED_BACK_ANNOTATION} annotation does not read ({e}): every write of its images is held until it is fixed or deleted (deleting it releases every image it held)"
        )),
    }
}

/// The first entry of `image` that `value` (with `digest`) is, if any.
pub fn find<'r>(
    remembered: &'r BTreeMap<String, Vec<RolledBack>>,
    image: &str,
    value: &str,
    digest: Option<&str>,
) -> Option<&'r RolledBack> {
    remembered
        .get(image)?
        .iter()
        .find(|entry| entry.is(value, digest))
}

/// The annotation's value with `entry` added to `image`'s (once: an entry for the same
/// value is kept as it was), bounded; `None` when it holds it already.
pub fn with(
    current: &BTreeMap<String, Vec<RolledBack>>,
    image: &str,
    entry: RolledBack,
) -> Option<BTreeMap<String, Vec<RolledBack>>> {
    if find(current, image, &entry.to, entry.digest.as_deref()).is_some() {
        return None;
    }
    let mut next = current.clone();
    let entries = next.entry(image.to_string()).or_default();
    entries.push(entry);
    if entries.len() > MAX_PER_IMAGE {
        let excess = entries.len() - MAX_PER_IMAGE;
        entries.drain(..excess);
    }
    remembered::bound(&mut next, |list| {
        list.last().map_or("", |entry| entry.at.as_str())
    });
    Some(next)
}

/// The JSON-patch operations that bring the annotation from what `app` holds to `next`,
/// guarded by its text as read, or, where it is absent, by the Application's
/// `resourceVersion` (JSON patch cannot test for absence, and two writers must not both add
/// it, the second dropping the first's entry).
pub fn patch_ops(app: &Value, next: &BTreeMap<String, Vec<RolledBack>>) -> Vec<Value> {
    let mut ops = Vec::new();
    if app["metadata"]["annotations"][ROLLED_BACK_ANNOTATION].is_null() {
        ops.push(serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": app["metadata"]["resourceVersion"]}));
        if !app["metadata"]["annotations"].is_object() {
            ops.push(
                serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {}}),
            );
        }
    }
    ops.extend(remembered::patch_ops(app, ROLLED_BACK_ANNOTATION, next));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMAGE: &str = "1.dkr.ecr.r.amazonaws.com/web";
    const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const OTHER: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn entry(to: &str, digest: Option<&str>) -> RolledBack {
        RolledBack {
            to: to.into(),
            digest: digest.map(str::to_string),
            from: "1.0".into(),
            at: "2026-12-06T10:00:00Z".into(),
            reason: "alarm 5xx is ALARM".into(),
        }
    }

    #[test]
    fn an_image_is_the_one_taken_back_by_its_digest_where_both_are_known_else_by_its_tag() {
        let other_tag_same_digest = format!("1.2@{DIGEST}");
        let cases = [
            (
                "the same tag, no digest known",
                entry("1.1", None),
                "1.1",
                None,
                true,
            ),
            (
                "another tag, no digest known",
                entry("1.1", None),
                "1.2",
                None,
                false,
            ),
            (
                "another tag with the same digest",
                entry("1.1", Some(DIGEST)),
                "1.2",
                Some(DIGEST),
                true,
            ),
            (
                "the same tag re-pushed with another digest",
                entry("1.1", Some(DIGEST)),
                "1.1",
                Some(OTHER),
                false,
            ),
            (
                "the same tag whose digest is not known now",
                entry("1.1", Some(DIGEST)),
                "1.1",
                None,
                true,
            ),
            (
                "a written digest against ECR's",
                entry(&format!("1.1@{DIGEST}"), None),
                &other_tag_same_digest,
                None,
                true,
            ),
            (
                "a bare digest written",
                entry(DIGEST, None),
                "1.3",
                Some(DIGEST),
                true,
            ),
        ];
        for (case, taken_back, value, digest, is) in cases {
            assert_eq!(taken_back.is(value, digest), is, "{case}");
        }
    }

    #[test]
    fn an_image_is_remembered_once_and_the_oldest_goes_past_the_bound() {
        let none = BTreeMap::new();
        let once = with(&none, IMAGE, entry("1.1", Some(DIGEST))).unwrap();
        assert!(
            with(&once, IMAGE, entry("1.1", None)).is_none(),
            "the same image again changes nothing"
        );
        let mut many = once;
        for i in 0..MAX_PER_IMAGE {
            many = with(&many, IMAGE, entry(&format!("2.{i}"), None)).unwrap();
        }
        assert_eq!(many[IMAGE].len(), MAX_PER_IMAGE);
        assert!(find(&many, IMAGE, "1.1", Some(DIGEST)).is_none());
        assert!(find(&many, IMAGE, "2.15", None).is_some());
    }

    #[test]
    fn the_annotation_reads_back_what_was_written_and_an_edited_one_reads_as_nothing() {
        let next = with(&BTreeMap::new(), IMAGE, entry("1.1", Some(DIGEST))).unwrap();
        let bare = json!({"metadata": {"resourceVersion": "7", "annotations": {}}});
        let ops = patch_ops(&bare, &next);
        assert_eq!(
            (ops[0]["op"].as_str(), ops[0]["value"].as_str()),
            (Some("test"), Some("7")),
            "an absent annotation is added only to the Application as read"
        );
        let mut app = bare.clone();
        app["metadata"]["annotations"][ROLLED_BACK_ANNOTATION] = ops[1]["value"].clone();
        assert_eq!(of(&app), next);
        app["metadata"]["annotations"][ROLLED_BACK_ANNOTATION] = json!("released");
        assert!(of(&app).is_empty());
    }

    #[test]
    fn a_broken_annotation_is_named_and_an_absent_or_readable_one_is_not() {
        let with = |text: Option<&str>| match text {
            Some(text) => json!({"metadata": {"annotations": {ROLLED_BACK_ANNOTATION: text}}}),
            None => json!({"metadata": {"annotations": {}}}),
        };
        assert!(unreadable(&with(None)).is_none());
        assert!(unreadable(&with(Some("{}"))).is_none());
        let broken = unreadable(&with(Some("{\"r/web\": [{\"to\": 1}"))).unwrap();
        assert!(
            broken.contains("does not read") && broken.contains("held"),
            "{broken}"
        );
    }

    #[test]
    fn a_refusal_names_the_image_the_time_the_reason_and_how_to_release_it() {
        let why = entry("1.1", None).refusal(IMAGE);
        for part in [
            "`1.1`",
            "2026-12-06T10:00:00Z",
            "alarm 5xx",
            IMAGE,
            ROLLED_BACK_ANNOTATION,
        ] {
            assert!(why.contains(part), "{why} names {part}");
        }
    }
}
