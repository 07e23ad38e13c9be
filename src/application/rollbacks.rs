//! The manual rollbacks an Application remembers, per image
//! (`argocd-ecr-updater.io/rollbacks`) (pure). A rollback is told from Argo CD's sync history
//! (`status.history`), which keeps only the newest `revisionHistoryLimit` syncs (10 by
//! default): once our write's deploy has rotated out of it, the history no longer shows that
//! the value running was taken back from ours. What a respected rollback was (what our write
//! set, what it was taken back to, when that was deployed, by whom) is written here once it
//! is seen deployed, and holds for as long as our last write of the image is still the one
//! it took back and the rollback still stands.
//!
//! The value is JSON: `{"<registry>/<repository>": {"written", "to", "deployed", "by",
//! "operation"}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::appconfig::annotations::ROLLBACKS_ANNOTATION;
use crate::application::audit::rfc3339_at;
use crate::application::remembered;

/// One image's rollback, as remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberedRollback {
    /// What our write had set, which the rollback took back.
    pub written: String,
    /// What the image was taken back to.
    pub to: String,
    /// When Argo CD deployed the rollback (RFC 3339).
    pub deployed: String,
    /// Who took it back: a field manager, or `argocd app rollback by <user>`.
    pub by: String,
    /// `argocd app rollback`: an operation that synced an older entry of the history and
    /// left the spec asking for our write.
    #[serde(default)]
    pub operation: bool,
}

impl RememberedRollback {
    pub fn deployed_at(&self) -> Option<OffsetDateTime> {
        rfc3339_at(&Value::String(self.deployed.clone()))
    }
}

/// The rollbacks as the annotation holds them (an annotation that does not read is taken as
/// none: only a person edits it, which is how a person lets a rollback go).
pub fn of(app: &Value) -> BTreeMap<String, RememberedRollback> {
    remembered::read(app, ROLLBACKS_ANNOTATION)
}

/// The annotation's value with `image`'s rollback remembered, or `None` when it already is.
pub fn remembering(
    current: &BTreeMap<String, RememberedRollback>,
    image: &str,
    rollback: RememberedRollback,
) -> Option<BTreeMap<String, RememberedRollback>> {
    if current.get(image) == Some(&rollback) {
        return None;
    }
    let mut next = current.clone();
    next.insert(image.to_string(), rollback);
    remembered::bound(&mut next, |r| r.deployed.as_str());
    Some(next)
}

/// The JSON-patch operations that bring the annotation from what `app` holds to `next`,
/// guarded by its text as read.
pub fn patch_ops(app: &Value, next: &BTreeMap<String, RememberedRollback>) -> Vec<Value> {
    remembered::patch_ops(app, ROLLBACKS_ANNOTATION, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollback(to: &str, deployed: &str) -> RememberedRollback {
        RememberedRollback {
            written: "1.1".into(),
            to: to.into(),
            deployed: deployed.into(),
            by: "kubectl-edit".into(),
            operation: false,
        }
    }

    #[test]
    fn a_rollback_is_remembered_once_and_a_newer_one_replaces_it() {
        let first = rollback("1.0", "2026-12-03T10:00:00Z");
        let once = remembering(&BTreeMap::new(), "r/web", first.clone()).unwrap();
        assert_eq!(once.get("r/web"), Some(&first));
        assert_eq!(
            remembering(&once, "r/web", first),
            None,
            "already remembered"
        );
        let again = rollback("0.9", "2026-12-04T10:00:00Z");
        let next = remembering(&once, "r/web", again.clone()).unwrap();
        assert_eq!(next.get("r/web"), Some(&again));
        let other = remembering(&next, "r/api", rollback("2.0", "2026-12-04T11:00:00Z")).unwrap();
        assert_eq!(other.len(), 2, "each image keeps its own");
    }

    #[test]
    fn the_annotation_reads_back_what_was_written_and_an_operation_flag_defaults_off() {
        let text = r#"{"r/web":{"written":"1.1","to":"1.0","deployed":"2026-12-03T10:00:00Z","by":"kubectl-edit"}}"#;
        let app = json!({"metadata": {"annotations": {ROLLBACKS_ANNOTATION: text}}});
        let read = of(&app);
        assert_eq!(
            read.get("r/web"),
            Some(&rollback("1.0", "2026-12-03T10:00:00Z"))
        );
        assert_eq!(
            read["r/web"].deployed_at(),
            Some(time::macros::datetime!(2026-12-03 10:00:00 UTC))
        );
    }
}
