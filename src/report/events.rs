//! A Kubernetes Event about an Application, in one shape for every reason the function
//! records (`ImagesUpdated`, `RollbackRespected`, the rollout outcomes): involving the
//! Application by uid and resourceVersion, reported by `argocd-ecr-updater` (pure). The
//! Application is named by [`Involved`], what an Event says of it, so that everything the
//! function reports is built here, below what decides it.

use serde_json::{Value, json};

use crate::report::{Action, Entry};

/// How a skip that respects a manual rollback begins; the `RollbackRespected` Event gathers
/// the entries that do.
pub const ROLLBACK_RESPECTED: &str = "respecting a manual rollback";

/// How the entry of a write auto-rollback decided begins; the `RolledBack` Event gathers
/// the entries that do.
pub const AUTO_ROLLBACK: &str = "auto-rollback";

/// The Application an Event is about, as `involvedObject` names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Involved {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// What an Event says.
pub struct EventText<'a> {
    /// Appended to the Application's name: `<app>.<suffix>`. A suffix derived from what the
    /// Event records names the same thing the same way, so the API server refuses it twice.
    pub suffix: String,
    pub reason: &'a str,
    pub message: String,
    /// `Normal` or `Warning`.
    pub kind: &'a str,
    /// Annotations on the Event itself (Image Updater's, for `ImagesUpdated`).
    pub annotations: serde_json::Map<String, Value>,
}

/// The Event about `app`, stamped `now` (RFC 3339).
pub fn about(app: &Involved, text: EventText<'_>, now: &str) -> Value {
    let (namespace, name) = (&app.namespace, &app.name);
    let mut metadata = json!({"name": format!("{name}.{}", text.suffix), "namespace": namespace});
    if !text.annotations.is_empty() {
        metadata["annotations"] = Value::Object(text.annotations);
    }
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": metadata,
        "involvedObject": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "name": name,
            "namespace": namespace, "uid": app.uid, "resourceVersion": app.resource_version},
        "reason": text.reason,
        "message": text.message,
        "type": text.kind,
        "source": {"component": "argocd-ecr-updater"},
        "reportingComponent": "argocd-ecr-updater",
        "firstTimestamp": now, "lastTimestamp": now, "count": 1})
}

/// The `PromotionRefused` Warning Event: a promoted image's configuration names no upstream
/// it can be promoted from (`why`). Named after the reason: the same refusal, decided again
/// by every push and sweep, is recorded once (the API server refuses the same name).
pub fn promotion_refused(app: &Involved, why: &str, now: &str) -> Value {
    let text = EventText {
        suffix: format!("promotion-refused-{}", short_key(why)),
        reason: "PromotionRefused",
        message: crate::redact::scrub(why),
        kind: "Warning",
        annotations: serde_json::Map::new(),
    };
    about(app, text, now)
}

/// Eight hex digits of the SHA-256 of `text`: a short name part that is the same for the same
/// thing recorded.
pub fn short_key(text: &str) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `RollbackRespected` Event of a decision that left a rollback alone, or `None`.
/// Named after the rollback itself (what was rolled back to what), so that every later
/// push or sweep that respects the same rollback finds it recorded (409) instead of adding
/// one Event per event.
pub fn rollback_respected(app: &Involved, entries: &[Entry], now: &str) -> Option<Value> {
    let held: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.action == Action::Skipped && e.reason.starts_with(ROLLBACK_RESPECTED))
        .collect();
    let first = held.first()?;
    // "… from `a` to `b`, deployed …" or "… set `a`, the Application now asks for `b` …":
    // the part before the first `:` names the rollback.
    let rollback = first.reason.split(':').next().unwrap_or(&first.reason);
    let key = short_key(&format!("{}|{rollback}", first.image));
    let message: Vec<String> = held
        .iter()
        .map(|e| {
            format!(
                "{} {}: {}",
                e.alias.as_deref().unwrap_or("-"),
                e.image,
                e.reason
            )
        })
        .collect();
    let text = EventText {
        suffix: format!("rollback-{key}"),
        reason: "RollbackRespected",
        message: message.join("; "),
        kind: "Normal",
        annotations: Default::default(),
    };
    Some(about(app, text, now))
}

/// The `RolledBack` Event (`Warning`) of a write that took a failed image back, or `None`.
/// Named after what was taken back, so a rollback written again after a conflict records it
/// once.
pub fn rolled_back(app: &Involved, entries: &[Entry], now: &str) -> Option<Value> {
    let taken: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.action == Action::Updated && e.reason.starts_with(AUTO_ROLLBACK))
        .collect();
    let first = taken.first()?;
    // The reason names the failure and when it was recorded: a later failure of the same
    // image, released in between, is another rollback with its own Event.
    let key = short_key(&format!(
        "{}|{}|{}",
        first.image,
        first.from.as_deref().unwrap_or_default(),
        first.reason
    ));
    let message: Vec<String> = taken
        .iter()
        .map(|e| {
            format!(
                "{} {} {} -> {}: {}",
                e.alias.as_deref().unwrap_or("-"),
                e.image,
                e.from.as_deref().unwrap_or("(none)"),
                e.to.as_deref().unwrap_or(""),
                e.reason
            )
        })
        .collect();
    let text = EventText {
        suffix: format!("rolled-back-{key}"),
        reason: "RolledBack",
        message: crate::redact::scrub(&message.join("; ")),
        kind: "Warning",
        annotations: Default::default(),
    };
    Some(about(app, text, now))
}

/// The Kubernetes Event of a write, as Image Updater records one (`reason: ImagesUpdated`,
/// the per-image annotations it sets), so the update shows in Argo CD's UI and in
/// `kubectl describe`. `now` is RFC 3339, `nanos` makes the name unique.
pub fn images_updated(app: &Involved, entries: &[Entry], now: &str, nanos: i128) -> Value {
    let name = &app.name;
    let updated: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.action == Action::Updated)
        .collect();
    let mut annotations = serde_json::Map::new();
    for (i, entry) in updated.iter().enumerate() {
        let prefix = format!("argocd-image-updater.image-{i}");
        let short = entry.image.rsplit('/').next().unwrap_or(&entry.image);
        for (key, value) in [
            ("full-image-name", entry.image.as_str()),
            ("image-name", short),
            ("old-tag", entry.from.as_deref().unwrap_or("")),
            ("new-tag", entry.to.as_deref().unwrap_or("")),
        ] {
            annotations.insert(format!("{prefix}/{key}"), json!(value));
        }
    }
    let changes: Vec<String> = updated
        .iter()
        .map(|e| {
            format!(
                "{} {} {} -> {}",
                e.alias.as_deref().unwrap_or("-"),
                e.image,
                e.from.as_deref().unwrap_or("(none)"),
                e.to.as_deref().unwrap_or("")
            )
        })
        .collect();
    let text = EventText {
        suffix: format!("{nanos:x}"),
        reason: "ImagesUpdated",
        message: format!(
            "Successfully updated application '{name}': {}",
            changes.join("; ")
        ),
        kind: "Normal",
        annotations,
    };
    about(app, text, now)
}

/// The `ChartUpdated` Event of a write: each chart, where, from and to. `now` is RFC 3339,
/// `nanos` makes the name unique.
pub fn chart_updated(app: &Involved, entries: &[Entry], now: &str, nanos: i128) -> Value {
    let changes: Vec<String> = entries
        .iter()
        .filter(|e| e.action == Action::Updated)
        .map(|e| {
            format!(
                "{} {} -> {} ({})",
                e.image,
                e.from.as_deref().unwrap_or_default(),
                e.to.as_deref().unwrap_or_default(),
                e.sources.join(", ")
            )
        })
        .collect();
    let text = EventText {
        suffix: format!("{nanos:x}"),
        reason: "ChartUpdated",
        message: format!(
            "Updated the chart version of application '{}': {}",
            app.name,
            changes.join("; ")
        ),
        kind: "Normal",
        annotations: serde_json::Map::new(),
    };
    about(app, text, now)
}

/// What the Event of a rollout's outcome says: the write (its record's text and time, the
/// images it wrote) and how it ended.
pub struct RolloutEnded<'a> {
    pub record_text: &'a str,
    /// When the write was made (RFC 3339).
    pub written_at: &'a str,
    /// `image:value` of each image written.
    pub images: Vec<String>,
    /// `RolloutConfirmed`, `RolloutFailed`, …
    pub event_reason: &'a str,
    /// A `Normal` Event (else `Warning`).
    pub normal: bool,
    pub reason: &'a str,
}

/// The Kubernetes Event of a rollout's outcome, named by the write so that one write has one
/// Event per outcome (the API server refuses the same name twice).
pub fn rollout_ended(app: &Involved, ended: &RolloutEnded<'_>, now: &str) -> Value {
    let text = EventText {
        suffix: format!(
            "rollout-{}",
            short_key(&format!("{}@{}", ended.record_text, ended.written_at))
        ),
        reason: ended.event_reason,
        message: format!(
            "{} written at {}: {}",
            ended.images.join(", "),
            ended.written_at,
            ended.reason
        ),
        kind: if ended.normal { "Normal" } else { "Warning" },
        annotations: Default::default(),
    };
    about(app, text, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_involves_its_application_and_is_named_after_it() {
        let app = Involved {
            namespace: "argocd".into(),
            name: "web".into(),
            uid: Some("u-1".into()),
            resource_version: Some("7".into()),
        };
        let text = EventText {
            suffix: format!("rollout-{}", short_key("x")),
            reason: "RolloutConfirmed",
            message: "live".into(),
            kind: "Normal",
            annotations: Default::default(),
        };
        let event = about(&app, text, "2026-12-03T10:00:00Z");
        assert_eq!(
            event["metadata"]["name"],
            format!("web.rollout-{}", short_key("x"))
        );
        assert_eq!(event["involvedObject"]["uid"], "u-1");
        assert_eq!(event["involvedObject"]["resourceVersion"], "7");
        assert!(event["metadata"].get("annotations").is_none());
        assert_eq!(short_key("x"), short_key("x"));
        assert_ne!(short_key("x"), short_key("y"));
        assert_eq!(short_key("x").len(), 8);
    }

    #[test]
    fn the_event_names_each_chart_moved_and_where() {
        let app = Involved {
            namespace: "argocd".into(),
            name: "web".into(),
            uid: Some("u1".into()),
            resource_version: None,
        };
        let mut moved =
            Entry::new("argocd", "web", None, "r/charts/web").with(Action::Updated, "x");
        moved.from = Some("1.2.0".into());
        moved.to = Some("1.3.0".into());
        moved.sources = vec!["spec.sources[1]".into()];
        let kept = Entry::new("argocd", "web", None, "r/charts/db").with(Action::Unchanged, "y");
        let event = chart_updated(&app, &[moved, kept], "2026-12-03T10:00:00Z", 255);
        assert_eq!(event["reason"], "ChartUpdated");
        assert_eq!(event["metadata"]["name"], "web.ff");
        assert_eq!(
            event["message"],
            "Updated the chart version of application 'web': r/charts/web 1.2.0 -> 1.3.0 (spec.sources[1])"
        );
    }
}
