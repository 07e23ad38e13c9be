//! Entries about a whole Application or namespace, saying why it was not decided: deleted
//! or no longer configured meanwhile, outside the watched scope, unreadable, unlisted, or not
//! reached before the deadline; and the reasons a write that kept racing gives (pure).

use crate::report::{Action, Entry};

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
