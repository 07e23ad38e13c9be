//! The failed rollouts an Application remembers, per image
//! (`argocd-ecr-updater.io/failed-rollouts`), for hold-on-failure (pure). Our audit record
//! keeps only the last write and how its rollout ended, so a write of another image would
//! forget a failure; this annotation keeps each image's until that image's rollout is
//! confirmed, or a person deletes it (the release by hand).
//!
//! The value is JSON: `{"<registry>/<repository>": {"to", "outcome", "at", "reason"}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::appconfig::annotations::FAILED_ROLLOUTS_ANNOTATION;
use crate::application::audit::{AuditRecord, rfc3339_at};
use crate::application::remembered;

/// One image's failed rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedRollout {
    /// What the failed write wrote.
    pub to: String,
    /// `failed` or `timed-out`.
    pub outcome: String,
    /// When the failure was recorded (RFC 3339).
    pub at: String,
    pub reason: String,
    /// What the failed write replaced, when it replaced something: what auto-rollback
    /// writes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Auto-rollback remembered the image as taken back (once: a person who deletes that
    /// entry has released it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub taken_back: bool,
}

impl FailedRollout {
    pub fn time(&self) -> Option<OffsetDateTime> {
        rfc3339_at(&Value::String(self.at.clone()))
    }
}

/// The failures as the annotation holds them (an annotation that does not read is taken as
/// none: only a person edits it, which is how a person releases a hold).
pub fn of(app: &Value) -> BTreeMap<String, FailedRollout> {
    remembered::read(app, FAILED_ROLLOUTS_ANNOTATION)
}

/// The annotation's value after a followed write's rollout ended with `outcome`
/// (`confirmed`, `failed`, `timed-out`): the write's images marked failed, or their earlier
/// failures cleared once confirmed. `None`: the annotation is left as it is.
pub fn after_outcome(
    current: &BTreeMap<String, FailedRollout>,
    record: &AuditRecord,
    outcome: &str,
    reason: &str,
    at: &str,
) -> Option<BTreeMap<String, FailedRollout>> {
    // A write taken back by someone else says nothing about the image.
    if outcome == "taken-back" {
        return None;
    }
    let mut next = current.clone();
    for image in &record.images {
        if outcome == "confirmed" {
            next.remove(&image.image);
        } else {
            next.insert(
                image.image.clone(),
                FailedRollout {
                    to: image.to.clone(),
                    outcome: outcome.to_string(),
                    at: at.to_string(),
                    reason: reason.chars().take(512).collect(),
                    from: image.from.clone(),
                    taken_back: false,
                },
            );
        }
    }
    remembered::bound(&mut next, |f| f.at.as_str());
    (&next != current).then_some(next)
}

/// The JSON-patch operations that bring the annotation from what `app` holds to `next`,
/// guarded by its text as read (the caller's patch also tests our audit record, so no write
/// of ours came between).
pub fn patch_ops(app: &Value, next: &BTreeMap<String, FailedRollout>) -> Vec<Value> {
    remembered::patch_ops(app, FAILED_ROLLOUTS_ANNOTATION, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(images: &[(&str, &str)]) -> AuditRecord {
        let images: Vec<Value> = images
            .iter()
            .map(|(image, to)| json!({"image": image, "from": "0", "to": to}))
            .collect();
        let json = json!({"time": "2026-12-03T10:00:00Z", "eventId": "e", "images": images});
        AuditRecord::from_json(&json.to_string(), json).unwrap()
    }

    fn failed(to: &str, at: &str) -> FailedRollout {
        FailedRollout {
            to: to.into(),
            outcome: "failed".into(),
            at: at.into(),
            reason: "Degraded".into(),
            from: Some("0".into()),
            taken_back: false,
        }
    }

    #[test]
    fn each_images_failure_is_kept_until_that_images_rollout_is_confirmed() {
        let web_failed: BTreeMap<_, _> =
            [("r/web".to_string(), failed("1.1", "2026-12-03T10:05:00Z"))].into();
        let cases = [
            (
                "a failed rollout marks the images it wrote, with what each replaced",
                BTreeMap::new(),
                record(&[("r/web", "1.1")]),
                "failed",
                Some(web_failed.clone()),
            ),
            (
                "another image's confirmed rollout keeps the failure",
                web_failed.clone(),
                record(&[("r/api", "2.0")]),
                "confirmed",
                None,
            ),
            (
                "the image's own confirmed rollout clears it",
                web_failed.clone(),
                record(&[("r/web", "1.2")]),
                "confirmed",
                Some(BTreeMap::new()),
            ),
            (
                "a confirmed rollout with nothing remembered changes nothing",
                BTreeMap::new(),
                record(&[("r/web", "1.2")]),
                "confirmed",
                None,
            ),
        ];
        for (case, current, record, outcome, expected) in cases {
            let got = after_outcome(
                &current,
                &record,
                outcome,
                "Degraded",
                "2026-12-03T10:05:00Z",
            );
            assert_eq!(got, expected, "{case}");
        }
        let timed_out = after_outcome(
            &web_failed,
            &record(&[("r/api", "2.0")]),
            "timed-out",
            "Progressing",
            "2026-12-03T11:00:00Z",
        )
        .unwrap();
        assert_eq!(
            timed_out.len(),
            2,
            "a timeout is a failure too, kept beside"
        );
    }

    #[test]
    fn the_oldest_failures_are_forgotten_past_the_bound() {
        let current: BTreeMap<_, _> = (0..remembered::MAX_REMEMBERED)
            .map(|i| {
                (
                    format!("r/i{i:03}"),
                    failed("1", &format!("2026-12-03T10:{:02}:00Z", i % 60)),
                )
            })
            .collect();
        let next = after_outcome(
            &current,
            &record(&[("r/new", "1")]),
            "failed",
            "x",
            "2026-12-03T11:00:00Z",
        )
        .unwrap();
        assert_eq!(next.len(), remembered::MAX_REMEMBERED);
        assert!(next.contains_key("r/new"));
    }
}
