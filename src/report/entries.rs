//! Entries about a whole Application or namespace, saying why it was not decided: deleted
//! or no longer configured meanwhile, contested by two ImageUpdater objects, outside the
//! watched scope, unreadable, unlisted, or not reached before the deadline; the reasons a
//! write that kept racing gives; and what every entry of a decision says besides its
//! verdict (which configuration decided, a dry run's patch) (pure).

use serde_json::Value;

use crate::report::{Action, Entry};

/// Two ImageUpdater objects match: Image Updater would let them take turns.
pub fn contested(namespace: &str, name: &str, objects: &[String]) -> Entry {
    Entry::new(namespace, name, None, "").with(
        Action::Skipped,
        format!(
            "matched by more than one ImageUpdater object ({}); Image Updater would let them fight, flipping the Application between their decisions. Narrow their applicationRefs until one matches",
            objects.join(", ")
        ),
    )
}

/// Says on every entry which configuration decided (`annotations`, or `ImageUpdater ns/name,
/// ref …`), and the ImageUpdater object behind it, for its status.
pub fn configured_by(entries: &mut [Entry], by: &str, object: Option<(String, String)>) {
    for entry in entries {
        entry.configured_by = Some(by.to_string());
        entry.configuring_object = object.clone();
    }
}

/// A push in another region than the function's: why it is not handled here.
pub fn other_region(pushed_in: &str, served: &str) -> String {
    format!(
        "the push is in region {pushed_in}, this function serves {served}: deploy one function per region"
    )
}

/// An update of a dry run: said so, with the patch that was computed and not sent.
pub fn dry_run(mut entry: Entry, patch: &Value) -> Entry {
    if entry.action == Action::Updated {
        entry.reason = format!("dry run: {} (patch computed, not sent)", entry.reason);
        entry.patch = Some(patch.clone());
    }
    entry
}

pub fn deleted(namespace: &str, name: &str) -> Entry {
    Entry::new(namespace, name, None, "")
        .with(Action::Skipped, "the Application was deleted meanwhile")
}

pub fn not_annotated(namespace: &str, name: &str) -> Entry {
    Entry::new(namespace, name, None, "")
        .with(Action::Skipped, "no longer annotated for Image Updater")
}

/// An Application a reconcile sweep did not reach before its time ran out.
pub fn not_reached(namespace: &str, name: &str) -> Entry {
    Entry::new(namespace, name, None, "").failed("the sweep stopped before the function's timeout and did not check it; the next sweep does (raise Timeout or MemorySize if this repeats)",
        true,
    )
}

/// A shard named an Application outside `ARGOCD_NAMESPACES`: not ours to touch.
pub fn unwatched(namespace: &str, name: &str) -> Entry {
    Entry::new(namespace, name, None, "").failed("the shard names an Application outside ARGOCD_NAMESPACES; it was not read (shards are made from the watched namespaces only, so this one was not sent by this function's sweep)",
        false,
    )
}

/// An Application read (by a shard, or again after its listing) that
/// `APPLICATION_LABEL_SELECTOR` does not select: not ours to touch, whoever named it.
pub fn unselected(namespace: &str, name: &str, selector: &str) -> Entry {
    Entry::new(namespace, name, None, "").with(
        Action::Skipped,
        format!(
            "its labels as read now do not match APPLICATION_LABEL_SELECTOR `{selector}`; it was not decided"
        ),
    )
}

pub fn unreadable(namespace: &str, name: &str, error: &str, retryable: bool) -> Entry {
    Entry::new(namespace, name, None, "").failed(error, retryable)
}

/// What could not be listed in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Applications,
    ImageUpdaters,
}

/// A namespace (`""` for all) whose Applications, or ImageUpdater objects, could not be
/// listed: none of its Applications was decided.
pub fn unlisted(namespace: &str, listing: Listing, error: &str, retryable: bool) -> Entry {
    let scope = if namespace.is_empty() { "*" } else { namespace };
    let reason = match listing {
        Listing::Applications => {
            format!("cannot list Applications in namespace `{scope}`: {error}")
        }
        Listing::ImageUpdaters => format!(
            "cannot list ImageUpdater objects in namespace `{scope}`, so its Applications were not decided: {error}. Or set READ_IMAGEUPDATERS=false to read annotations only"
        ),
    };
    Entry::new(scope, "(all Applications)", None, "").failed(&reason, retryable)
}

pub fn refused_twice(race: &str) -> String {
    format!("the API server refused the same patch twice: {race}")
}

pub fn kept_changing(attempts: u32, race: &str) -> String {
    format!("the Application kept changing under us: {attempts} conflicts in a row (last: {race})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_entry_of_a_decision_names_the_configuration_that_decided_it() {
        let mut decided = vec![
            Entry::new("argocd", "web", Some("app"), "img").with(Action::Updated, "ranks above"),
            Entry::new("argocd", "web", Some("worker"), "img2").with(Action::Skipped, "kept"),
        ];
        let object = Some(("argocd".to_string(), "updater".to_string()));
        configured_by(&mut decided, "ImageUpdater argocd/updater", object.clone());
        for entry in &decided {
            assert_eq!(
                entry.configured_by.as_deref(),
                Some("ImageUpdater argocd/updater")
            );
            assert_eq!(entry.configuring_object, object);
        }
    }

    #[test]
    fn a_dry_run_shows_the_patch_of_updates_only() {
        let patch = json!([{"op": "replace", "path": "/spec", "value": 1}]);
        let updated = dry_run(
            Entry::new("a", "b", None, "i").with(Action::Updated, "ranks above"),
            &patch,
        );
        assert_eq!(
            updated.reason,
            "dry run: ranks above (patch computed, not sent)"
        );
        assert_eq!(updated.patch, Some(patch.clone()));
        let kept = dry_run(
            Entry::new("a", "b", None, "i").with(Action::Skipped, "kept"),
            &patch,
        );
        assert_eq!((kept.reason.as_str(), kept.patch), ("kept", None));
    }

    #[test]
    fn a_contested_application_names_both_objects_and_a_push_elsewhere_its_region() {
        let entry = contested("argocd", "web", &["a/x".into(), "a/y".into()]);
        assert_eq!(entry.action, Action::Skipped);
        assert!(entry.reason.contains("(a/x, a/y)"), "{}", entry.reason);
        assert!(other_region("us-east-1", "eu-west-1").contains("deploy one function per region"));
    }
}
