//! Manual rollbacks, without I/O: whether the value an image runs was taken back from our
//! last write of it, by whom, and what that holds back.
//!
//! Three ways to take an image back are told apart, each from what the Application carries:
//!
//! - **The spec edited back** (`argocd app set`, the UI, `kubectl edit`/`patch`, a Git revert
//!   for a Git write-back): the spec asks for what our write replaced, or for a value ranking
//!   below it. Argo CD's history (`status.history`, one entry per successful sync: argo-cd
//!   `controller/state.go` `persistRevisionHistory`) says when that went live.
//! - **`argocd app rollback`** (argo-cd `server/application/application.go` `Rollback`):
//!   allowed only with automated sync off, it runs an operation that syncs an older history
//!   entry's source or revision and **leaves the spec asking for our write**; the controller
//!   adds a history entry for it, initiated by the user (`initiatedBy.username`), and the
//!   Application shows OutOfSync. The newest history entry deploying something other than our
//!   write, after our write went live, by a person, is that rollback.
//! - **The Application's owner re-applying its manifest** (an app-of-apps parent, CI, Helm,
//!   Terraform) puts back the value its manifest has, over our patch. That is no one's
//!   decision against the image, and is not respected as one: `metadata.managedFields` says
//!   who last set the lists that carry images (they are atomic lists in Argo CD's CRD, so
//!   their whole value belongs to the last writer that changed it), and [`OWNER_MANAGERS`]
//!   are the owners' field managers (kube-apiserver names a writer by its `fieldManager`,
//!   else its User-Agent up to the first `/`).
//!
//! A rollback seen deployed is remembered per image (`application::rollbacks`), so it still
//! holds once our write's deploy has rotated out of the history (`revisionHistoryLimit`) and
//! once another image's write has replaced the audit record's main entry (each image's last
//! write is carried forward in the record).

use std::collections::BTreeMap;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::{AppConfig, ImageConfig};
use crate::application::app::{Application, HistoryEntry};
use crate::application::audit::ImageWrite;
use crate::application::rollbacks::{self, RememberedRollback};
use crate::application::sources;
use crate::policy::{TagInfo, TagRef};
use crate::report::events::ROLLBACK_RESPECTED;
use crate::report::{Action, Entry};

/// Field managers of an Application's owner, whose change of the spec re-applies a manifest
/// rather than rolls an image back: Argo CD applying a child Application (`argocd-controller`,
/// client-side and server-side apply alike), ApplicationSets, Helm, Terraform's
/// `kubernetes_manifest` (`Terraform`) and typed resources (`HashiCorp`, its User-Agent),
/// `kubectl apply` (`kubectl-client-side-apply`) and `kubectl apply --server-side`
/// (`kubectl`). Any other writer (`kubectl-edit`, `kubectl-patch`, `argocd-server` for
/// `argocd app set` and the UI, a tool of one's own) is taken as a person's decision.
pub const OWNER_MANAGERS: &[&str] = &[
    "argocd-controller",
    "argocd-applicationset-controller",
    "helm",
    "Terraform",
    "HashiCorp",
    "kubectl-client-side-apply",
    "kubectl",
];

/// Our own field manager (the function's User-Agent up to its first `/`).
pub const OUR_MANAGER: &str = "argocd-ecr-updater";

/// A manual rollback of an image: our last write moved it to `written`; Argo CD now runs, or
/// the spec now asks for, `current`, which is what that write replaced or ranks below it.
/// `deployed` is when Argo CD deployed `current` after our write, if it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub written: String,
    pub current: String,
    pub deployed: Option<OffsetDateTime>,
    /// Who took it back, when the Application says: a field manager, or
    /// `argocd app rollback by <user>`.
    pub by: Option<String>,
    /// `argocd app rollback`: the spec still asks for `written`.
    pub operation: bool,
}

/// What became of our last write of an image that no longer runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakenBack {
    /// A person's rollback: respected.
    Rollback(Rollback),
    /// The owner re-applied the Application's manifest over our patch: not respected, and
    /// said, since every patch loses to such an owner.
    Reapplied {
        manager: String,
        written: String,
        current: String,
    },
}

impl Rollback {
    /// Why `candidate` may not be written: pushed before the rollback was deployed (the
    /// rollback decided against it), or the rollback is not deployed yet. An image pushed
    /// after it is the fix that follows a rollback, and rolls out.
    pub fn holds(&self, candidate: &TagInfo) -> Option<String> {
        let (written, current) = (&self.written, &self.current);
        let by = self
            .by
            .as_deref()
            .map(|by| format!(" ({by})"))
            .unwrap_or_default();
        let Some(deployed) = self.deployed else {
            return Some(format!(
                "{ROLLBACK_RESPECTED}{by}: our last write set `{written}`, the Application now asks for `{current}`, which Argo CD has not deployed yet; held until it has (status.history), then images pushed after it roll out"
            ));
        };
        let at = deployed.format(&Rfc3339).unwrap_or_default();
        match candidate.pushed_at {
            Some(pushed) if pushed > deployed => None,
            Some(pushed) => Some(format!(
                "{ROLLBACK_RESPECTED} from `{written}` to `{current}`, deployed {at}{by}: `{}` was pushed {} before it; an image pushed after the rollback rolls out",
                candidate.name,
                pushed.format(&Rfc3339).unwrap_or_default()
            )),
            None => Some(format!(
                "{ROLLBACK_RESPECTED} from `{written}` to `{current}`, deployed {at}{by}: when `{}` was pushed is unknown",
                candidate.name
            )),
        }
    }

    /// The rollback as the annotation remembers it, once deployed.
    pub fn remembered(&self) -> Option<RememberedRollback> {
        Some(RememberedRollback {
            written: self.written.clone(),
            to: self.current.clone(),
            deployed: self.deployed?.format(&Rfc3339).ok()?,
            by: self.by.clone().unwrap_or_default(),
            operation: self.operation,
        })
    }

    fn from_remembered(remembered: RememberedRollback) -> Option<Self> {
        Some(Self {
            deployed: Some(remembered.deployed_at()?),
            by: Some(remembered.by).filter(|by| !by.is_empty()),
            written: remembered.written,
            current: remembered.to,
            operation: remembered.operation,
        })
    }
}

impl TakenBack {
    /// The rollback, if this is one.
    pub fn rollback(self) -> Option<Rollback> {
        match self {
            Self::Rollback(rollback) => Some(rollback),
            Self::Reapplied { .. } => None,
        }
    }

    /// What a decision that writes anyway says about an owner's re-apply.
    pub fn note(&self) -> Option<String> {
        match self {
            Self::Rollback(_) => None,
            Self::Reapplied {
                manager,
                written,
                current,
            } => Some(format!(
                "`{current}` was put back over our write of `{written}` by `{manager}`, the Application's owner re-applying its manifest, not a person's rollback: written again, though the owner will revert it at its next apply (write-back-method: git writes where the owner reads)"
            )),
        }
    }
}

/// Whether the value `current` of `image` is our last write of it taken back, and how: see
/// the module's documentation. `None`: it is not (nothing of ours was written, the spec still
/// asks for our write and nothing rolled it back, or the value moved on past ours).
///
/// `pushed` says when ECR received a tag, where known: a strategy that ranks by push time
/// (`newest-build`) judges "ranks below our write" by it, never by the tags' names.
pub fn taken_back(
    app: &Application<'_>,
    image: &ImageConfig,
    current: &TagRef,
    pushed: &dyn Fn(&str) -> Option<OffsetDateTime>,
) -> Option<TakenBack> {
    taken_back_ranked(app, image, current, |to, current| {
        let info = |tag: &TagRef| TagInfo {
            pushed_at: pushed(&tag.tag),
            ..TagInfo::named(&tag.tag)
        };
        let (to, current) = (info(to), info(current));
        let times_known = to.pushed_at.is_some() && current.pushed_at.is_some();
        (times_known || !image.policy.strategy.needs_push_times())
            && image.policy.ranks_above(&to, &current) == Some(true)
    })
}

/// [`taken_back`], with `ranks_below(written, current)` saying whether the value now asked
/// for ranks below our write under the image's strategy.
fn taken_back_ranked(
    app: &Application<'_>,
    image: &ImageConfig,
    current: &TagRef,
    ranks_below: impl FnOnce(&TagRef, &TagRef) -> bool,
) -> Option<TakenBack> {
    let reference = image.image.to_string();
    let write = app.audit.as_ref()?.last_write_of(&reference)?;
    let to = TagRef::parse(&write.image.to)?;
    // What the annotation remembers holds only while our last write is the one taken back.
    let remembered = app
        .remembered_rollbacks()
        .remove(&reference)
        .filter(|r| r.written == write.image.to);
    if &to == current {
        let stands = |r: &RememberedRollback| r.operation && operation_stands(app, image, r);
        return operation_rollback(app, image, &write, &to)
            .or_else(|| {
                remembered
                    .filter(stands)
                    .and_then(Rollback::from_remembered)
            })
            .map(TakenBack::Rollback);
    }
    let replaced = write.image.from.as_deref() == Some(current.to_string().as_str());
    if !(replaced || ranks_below(&to, current)) {
        return None;
    }
    // A Git write-back's value lives in the repository: the spec's managers say nothing of it.
    let by = match write.commit {
        Some(_) => None,
        // Our write of another image since took the atomic lists over: who set this image's
        // value is who had set the lists before it, as that write kept it.
        None => match lists_manager(app) {
            Some(manager) if manager == OUR_MANAGER => write.kept_set_by.clone(),
            manager => manager,
        },
    };
    if let Some(manager) = by.as_ref().filter(|m| OWNER_MANAGERS.contains(&m.as_str())) {
        return Some(TakenBack::Reapplied {
            manager: manager.clone(),
            written: to.to_string(),
            current: current.to_string(),
        });
    }
    let remembered = remembered.filter(|r| !r.operation && r.to == current.to_string());
    let rollback = |deployed| Rollback {
        written: to.to_string(),
        current: current.to_string(),
        deployed,
        by: by.clone(),
        operation: false,
    };
    // The history's evidence wins over the memory only while it still holds our deploy:
    // once that has rotated out, the run of `current` it shows may have begun earlier.
    let found = match (
        spec_rollback_deployed(app, image, &write, &to, current),
        remembered,
    ) {
        (Some(SpecRollback::SinceOurDeploy(deployed)), _) => rollback(deployed),
        (_, Some(remembered)) => Rollback::from_remembered(remembered)?,
        (Some(SpecRollback::Unsynced(deployed)), None) => rollback(deployed),
        (None, None) => return None,
    };
    Some(TakenBack::Rollback(found))
}

/// The rollbacks annotation's value after a decision: each image whose update a deployed
/// rollback held is remembered (what it took back, to what, when, by whom), so that it holds
/// after its evidence has rotated out of Argo CD's history. `None`: nothing new to remember.
pub fn to_remember(
    app: &Application<'_>,
    config: &AppConfig,
    entries: &[Entry],
) -> Option<BTreeMap<String, RememberedRollback>> {
    let before = app.remembered_rollbacks();
    let mut next = before.clone();
    let respected = entries
        .iter()
        .filter(|e| e.action == Action::Skipped && e.reason.starts_with(ROLLBACK_RESPECTED));
    for entry in respected {
        let image = config
            .images
            .iter()
            .filter(|i| i.alias == entry.alias && i.image.to_string() == entry.image)
            .find_map(|i| i.config.as_ref().ok());
        let current = entry.from.as_deref().and_then(TagRef::parse);
        let (Some(image), Some(current)) = (image, current) else {
            continue;
        };
        // The decision that held the update already judged the value to rank below ours.
        let remembered = taken_back_ranked(app, image, &current, |_, _| true)
            .and_then(TakenBack::rollback)
            .and_then(|rollback| rollback.remembered());
        if let Some(remembered) = remembered
            && let Some(updated) =
                rollbacks::remembering(&next, &image.image.to_string(), remembered)
        {
            next = updated;
        }
    }
    (next != before).then_some(next)
}

/// A spec edited back, with when Argo CD deployed `current` after our write (`None`: not yet).
enum SpecRollback {
    /// Judged from the history after a deploy of our write.
    SinceOurDeploy(Option<OffsetDateTime>),
    /// No deploy of our write in the history: never synced, or rotated out.
    Unsynced(Option<OffsetDateTime>),
}

/// For a spec edited back: when Argo CD deployed `current` after our write; `None` when the
/// value is no rollback of ours.
///
/// The patch method's write is in the spec itself: whoever set the spec back decided against
/// it, live or not (a sync that failed, one not started yet). A Git write-back's value lives
/// in the repository, and only a commit that went live can be rolled back: one still in a
/// pull request, or on a branch Argo CD does not read, is not live, and the value it left is
/// no rollback.
fn spec_rollback_deployed(
    app: &Application<'_>,
    image: &ImageConfig,
    write: &ImageWrite,
    to: &TagRef,
    current: &TagRef,
) -> Option<SpecRollback> {
    if write.commit.is_some() {
        return git_rollback_deployed(app, write, image, current).map(SpecRollback::SinceOurDeploy);
    }
    let live = deploys_of(app, image, to)
        .filter(|deployed| *deployed >= write.time)
        .min();
    // The rollback is the deploy that began the run of `current` still going: taken back,
    // forward and back again dates from the last time back, which decided against what was
    // pushed before.
    if let Some(live) = live {
        let since = current_run_since(app, image, current, |d| d.deployed > live);
        return Some(SpecRollback::SinceOurDeploy(since));
    }
    // Without a deploy of ours, only syncs begun after the write count (one begun before it
    // deployed the old spec, no decision against ours). Set back to what still runs (our
    // write's sync failed, or never began), there is nothing to deploy: the rollback stands
    // from when the spec was set back.
    let since = current_run_since(app, image, current, |d| d.started > write.time).or_else(|| {
        runs(app, image, current).then(|| {
            lists_set_at(app)
                .filter(|at| *at > write.time)
                .unwrap_or(write.time)
        })
    });
    Some(SpecRollback::Unsynced(since))
}

/// When the run of deploys of `current` that Argo CD's history ends with began, among the
/// deploys `counted`; `None` if the newest such deploy of the image is of another value.
fn current_run_since(
    app: &Application<'_>,
    image: &ImageConfig,
    current: &TagRef,
    counted: impl Fn(&Deploy<'_>) -> bool,
) -> Option<OffsetDateTime> {
    let mut since = None;
    for deploy in history(app).iter().filter(|d| counted(d)) {
        let values = values_of(deploy, image);
        if values.is_empty() {
            continue;
        }
        since = match (values.contains(current), since) {
            (true, None) => Some(deploy.deployed),
            (true, started) => started,
            (false, _) => None,
        };
    }
    since
}

/// For a Git write-back, `None` unless our commit went live ([`git_live`]); then, if Argo CD
/// now runs `current` for the image, when it was deployed: the latest sync after ours, the
/// revision running now (a later sync of something else makes this later than the revert,
/// which only holds more back, never less).
fn git_rollback_deployed(
    app: &Application<'_>,
    write: &ImageWrite,
    image: &ImageConfig,
    current: &TagRef,
) -> Option<Option<OffsetDateTime>> {
    let history = history(app);
    let live = git_live(&history, write)?;
    let deployed = runs(app, image, current)
        .then(|| {
            history
                .iter()
                .map(|entry| entry.deployed)
                .filter(|at| *at > live)
                .max()
        })
        .flatten();
    Some(deployed)
}

/// When our commit went live: a sync of exactly that revision at or after the write, else
/// the first sync begun after the write of a revision never synced before it. Argo CD syncs
/// the branch's head, so a commit pushed on top of ours before Argo CD polled deploys ours
/// under its descendant's revision. `None` for a pull request's commit (live only once
/// merged, under another revision) or a write no sync followed.
fn git_live(history: &[Deploy<'_>], write: &ImageWrite) -> Option<OffsetDateTime> {
    let commit = write.commit.as_deref().filter(|_| !write.pull_request)?;
    let exact = history
        .iter()
        .filter(|entry| revisions(entry).contains(&commit) && entry.deployed >= write.time)
        .map(|entry| entry.deployed)
        .min();
    if exact.is_some() {
        return exact;
    }
    // Only where the entry says it read the branch our commit went to: its descendants are
    // known to carry our commit there, and nowhere else.
    let branch = write.branch.as_deref()?;
    let reads_our_branch = |entry: &Deploy<'_>| entry.entry.synced.reads_branch(branch);
    let before: Vec<Vec<&str>> = history
        .iter()
        .filter(|entry| entry.started <= write.time)
        .map(revisions)
        .collect();
    history
        .iter()
        .find(|entry| {
            entry.started > write.time
                && reads_our_branch(entry)
                && !before.contains(&revisions(entry))
        })
        .map(|entry| entry.deployed)
}

/// `argocd app rollback` after our write: the spec still asks for it, and the newest sync
/// after the one that deployed it is a person's of something else. For the patch method the
/// history entry's source carries the value; for a Git write-back it re-deploys a revision
/// that ran before our commit, so the image is back at what our write replaced.
fn operation_rollback(
    app: &Application<'_>,
    image: &ImageConfig,
    write: &ImageWrite,
    to: &TagRef,
) -> Option<Rollback> {
    let history = history(app);
    let commit = match &write.commit {
        Some(_) if write.pull_request => return None,
        commit => commit.as_deref(),
    };
    let deploys_ours = |entry: &Deploy<'_>| match commit {
        Some(commit) => revisions(entry).contains(&commit),
        None => values_of(entry, image).contains(to),
    };
    let live = history
        .iter()
        .position(|entry| entry.deployed >= write.time && deploys_ours(entry))?;
    // Our own syncs since (writes of other images) that kept the rollback deploying something
    // else for this image are not what took it back: the rollback before them is.
    let newest = history[live + 1..]
        .iter()
        .rev()
        .find(|entry| !by_us(entry) || deploys_ours(entry))?;
    let initiated = &newest.entry.initiated_by;
    // Our own sync (`sync: "true"`) names us: no person's decision.
    let user = initiated
        .username
        .as_deref()
        .filter(|u| !u.is_empty() && *u != OUR_MANAGER)?;
    if initiated.automated || deploys_ours(newest) {
        return None;
    }
    let rolled_to = match commit {
        None => values_of(newest, image).into_iter().next()?,
        Some(_) => {
            let before_ours = history[..live]
                .iter()
                .any(|entry| revisions(entry) == revisions(newest));
            // The entry rolled back to may have been trimmed (Argo CD appends the rollback's
            // entry, then keeps `revisionHistoryLimit`): the Pods then say what runs. A
            // person's sync of a commit after ours runs ours, and is no rollback.
            let running = running_values(app, image);
            let ours_runs = running.iter().any(|value| value.tag == to.tag);
            let rolled_to = running.iter().find(|value| value.tag != to.tag);
            match (before_ours, rolled_to) {
                (_, Some(value)) if !ours_runs => value.clone(),
                (true, _) => TagRef::parse(write.image.from.as_deref()?)?,
                _ => return None,
            }
        }
    };
    Some(Rollback {
        written: to.to_string(),
        current: rolled_to.to_string(),
        deployed: Some(newest.deployed),
        by: Some(format!("argocd app rollback by {user}")),
        operation: true,
    })
}

/// Whether a remembered `argocd app rollback` still stands: no sync since it but our own
/// that kept it (they deploy the value rolled back to: see `rollout::judge::start_sync`), or
/// no history left to say otherwise.
fn operation_stands(
    app: &Application<'_>,
    image: &ImageConfig,
    remembered: &RememberedRollback,
) -> bool {
    let Some(deployed) = remembered.deployed_at() else {
        return history(app).is_empty();
    };
    let kept = TagRef::parse(&remembered.to);
    history(app)
        .iter()
        .filter(|entry| entry.deployed > deployed)
        .all(|entry| {
            by_us(entry)
                && kept
                    .as_ref()
                    .is_some_and(|to| values_of(entry, image).contains(to))
        })
}

/// Whether a history entry is a sync this function started.
fn by_us(entry: &Deploy<'_>) -> bool {
    entry.entry.initiated_by.username.as_deref() == Some(OUR_MANAGER)
}

/// One entry of Argo CD's sync history, with when it was deployed.
struct Deploy<'a> {
    entry: &'a HistoryEntry,
    deployed: OffsetDateTime,
    /// When the sync began (`deployStartedAt`; the deploy time where an entry lacks it): a
    /// sync begun before our write deployed the spec as it was then.
    started: OffsetDateTime,
}

/// The history entries with a deploy time, oldest first (Argo CD appends them in order).
fn history<'a>(app: &'a Application<'_>) -> Vec<Deploy<'a>> {
    let mut entries: Vec<Deploy<'_>> = app
        .status
        .history
        .iter()
        .filter_map(|entry| {
            let deployed = entry.deployed_at?;
            Some(Deploy {
                entry,
                deployed,
                started: entry.deploy_started_at.unwrap_or(deployed),
            })
        })
        .collect();
    entries.sort_by_key(|d| d.deployed);
    entries
}

/// The revisions a history entry synced: `revision`, or `revisions` for several sources.
fn revisions<'a>(deploy: &Deploy<'a>) -> Vec<&'a str> {
    deploy.entry.synced.listed_revisions()
}

/// The values of `image` a history entry's source(s) carry.
fn values_of(deploy: &Deploy<'_>, image: &ImageConfig) -> Vec<TagRef> {
    sources::values_in_spec(&deploy.entry.synced.as_spec(), image)
}

/// When Argo CD deployed `value` of `image`, by its sync history's sources.
pub fn deploys_of<'a>(
    app: &'a Application<'_>,
    image: &'a ImageConfig,
    value: &'a TagRef,
) -> impl Iterator<Item = OffsetDateTime> + 'a {
    app.status
        .history
        .iter()
        .filter(move |entry| {
            sources::values_in_spec(&entry.synced.as_spec(), image).contains(value)
        })
        .filter_map(|entry| entry.deployed_at)
}

/// Whether the Pods Argo CD last saw run `value` of `image` (`status.summary.images`).
fn runs(app: &Application<'_>, image: &ImageConfig, value: &TagRef) -> bool {
    running_values(app, image)
        .iter()
        .any(|running| running.tag == value.tag)
}

/// The tags of `image` the Pods Argo CD last saw run (`status.summary.images`).
fn running_values(app: &Application<'_>, image: &ImageConfig) -> Vec<TagRef> {
    app.status
        .summary
        .images
        .iter()
        .filter_map(|running| {
            let (name, tag, _) = sources::split_reference(running);
            (crate::appconfig::annotations::ImageRef::parse(name) == image.image)
                .then(|| tag.map(TagRef::tag))
                .flatten()
        })
        .collect()
}

/// The field manager that last set the lists that carry images in the spec (Helm parameters,
/// Kustomize images, plugin environment, or a multi-source `sources` list), ours included;
/// the latest by its entry's time when several hold such lists.
pub fn lists_manager(app: &Application<'_>) -> Option<String> {
    app.lists_entry().and_then(|entry| entry.manager.clone())
}

/// When the lists that carry images were last set, by `metadata.managedFields`.
fn lists_set_at(app: &Application<'_>) -> Option<OffsetDateTime> {
    app.lists_entry().and_then(|entry| entry.time)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::{AUDIT_ANNOTATION, PREFIX, ROLLBACKS_ANNOTATION};
    use crate::application::app::Application as Read;
    use argocd_ecr_updater_standins::fixtures::{Application, helm_source};
    use serde_json::{Value, json};
    use time::macros::datetime;

    /// [`super::taken_back`] on the Application the JSON fixture is, as read.
    fn taken_back(
        app: &Value,
        image: &ImageConfig,
        current: &TagRef,
        pushed: &dyn Fn(&str) -> Option<OffsetDateTime>,
    ) -> Option<TakenBack> {
        super::taken_back(&Read::of(app), image, current, pushed)
    }

    /// [`super::to_remember`] on the Application the JSON fixture is, as read.
    fn to_remember(
        app: &Value,
        config: &AppConfig,
        entries: &[Entry],
    ) -> Option<BTreeMap<String, RememberedRollback>> {
        super::to_remember(&Read::of(app), config, entries)
    }

    const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web";

    /// No push time known: strategies that rank by name still judge.
    fn unknown_times(_: &str) -> Option<OffsetDateTime> {
        None
    }

    fn config(pairs: &[(&str, &str)]) -> AppConfig {
        let mut map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect();
        map.insert(format!("{PREFIX}image-list"), format!("app={IMAGE}"));
        AppConfig::parse(&map).unwrap()
    }

    fn semver() -> AppConfig {
        config(&[
            ("app.update-strategy", "semver"),
            ("app.helm.image-name", "image.name"),
        ])
    }

    /// A history entry deploying IMAGE at `tag`, initiated by `by` (`None`: automated).
    fn deploy(tag: &str, at: &str, by: Option<&str>) -> Value {
        let initiated = match by {
            Some(user) => json!({"username": user}),
            None => json!({"automated": true}),
        };
        json!({"deployedAt": at, "initiatedBy": initiated,
            "source": helm_source(&[("image.name", IMAGE), ("image.tag", tag)])})
    }

    /// The managedFields of a spec whose Helm parameters `manager` set last.
    fn managed_by(manager: &str) -> Value {
        json!([
            {"manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-11-01T00:00:00Z",
             "fieldsV1": {"f:spec": {"f:destination": {}}}},
            {"manager": OUR_MANAGER, "operation": "Update", "time": "2026-12-01T10:00:00Z",
             "fieldsV1": {"f:metadata": {"f:annotations": {}}}},
            {"manager": manager, "operation": "Update", "time": "2026-12-02T07:59:00Z",
             "fieldsV1": {"f:spec": {"f:source": {"f:helm": {"f:parameters": {}}}}}},
        ])
    }

    /// What a found rollback says: the value taken back to, when deployed, by an operation.
    type Found = Option<(String, Option<String>, bool)>;

    fn when(found: Option<Rollback>) -> Found {
        found.map(|r| {
            (
                r.current,
                r.deployed.map(|d| d.format(&Rfc3339).unwrap()),
                r.operation,
            )
        })
    }

    /// An Application tracking IMAGE at `current`, with our audit record of a write from
    /// `from` to `to` at 2026-12-01T10:00:00Z and Argo CD's history `(value, deployedAt)`.
    fn rolled(current: &str, write: Option<(&str, &str)>, history: &[(&str, &str)]) -> Value {
        let mut app = Application::tracking("web", IMAGE, current);
        if let Some((from, to)) = write {
            let audit = json!({"time": "2026-12-01T10:00:00Z", "eventId": "e",
                "images": [{"alias": "app", "image": IMAGE, "from": from, "to": to}]});
            app = app.annotation(AUDIT_ANNOTATION, &audit.to_string());
        }
        let history: Vec<Value> = history
            .iter()
            .map(|(value, at)| {
                json!({"deployedAt": at, "source": argocd_ecr_updater_standins::fixtures::helm_source(
                    &[("image.name", IMAGE), ("image.tag", value)])})
            })
            .collect();
        app.history(json!(history)).build()
    }

    #[test]
    fn a_git_revert_counts_once_our_commit_was_synced_and_the_old_image_runs() {
        let cfg = config(&[
            ("app.update-strategy", "semver"),
            ("app.helm.image-name", "image.name"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = |pull_request: Value, history: Value, running: &str| {
            let audit = json!({"time": "2026-12-01T10:00:00Z", "eventId": "e",
                "images": [{"alias": "app", "image": IMAGE, "from": "1.0.0", "to": "1.1.0"}],
                "git": {"repository": "acme/deploy", "branch": "main", "file": "f", "commit": "c-ours", "pullRequest": pull_request}});
            Application::tracking("web", IMAGE, "1.0.0")
                .annotation(AUDIT_ANNOTATION, &audit.to_string())
                .history(history)
                .running(&[&format!("{IMAGE}:{running}")])
                .build()
        };
        let synced = json!([
            {"revision": "c-ours", "deployedAt": "2026-12-01T10:01:00Z"},
            {"revision": "c-revert", "deployedAt": "2026-12-02T08:00:00Z"},
        ]);
        let current = TagRef::tag("1.0.0");
        let deployed = |app: &Value| {
            taken_back(app, image, &current, &unknown_times)
                .and_then(TakenBack::rollback)
                .map(|r| r.deployed.map(|d| d.format(&Rfc3339).unwrap()))
        };
        // (case, app, expected)
        let cases: Vec<(&str, Value, Option<Option<String>>)> = vec![
            (
                "our commit synced, the revert synced and running",
                app(Value::Null, synced.clone(), "1.0.0"),
                Some(Some("2026-12-02T08:00:00Z".into())),
            ),
            (
                "the revert not running yet",
                app(Value::Null, synced.clone(), "1.1.0"),
                Some(None),
            ),
            (
                "our commit never synced",
                app(
                    Value::Null,
                    json!([{"revision": "c-other", "deployedAt": "2026-12-02T08:00:00Z"}]),
                    "1.0.0",
                ),
                None,
            ),
            (
                "our commit is a pull request's",
                app(
                    json!("https://github.com/acme/deploy/pull/7"),
                    synced,
                    "1.0.0",
                ),
                None,
            ),
        ];
        for (case, app, expected) in cases {
            assert_eq!(deployed(&app), expected, "{case}");
        }
    }

    #[test]
    fn a_rollback_is_a_deployed_write_taken_back_and_only_that() {
        let cfg = config(&[
            ("app.update-strategy", "semver"),
            ("app.helm.image-name", "image.name"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let live = ("1.1.0", "2026-12-01T10:01:00Z");
        let cases: &[(&str, Value, Option<Option<&str>>)] = &[
            (
                "no write of ours on record",
                rolled("1.0.0", None, &[live]),
                None,
            ),
            (
                "the spec holds what we wrote",
                rolled("1.1.0", Some(("1.0.0", "1.1.0")), &[live]),
                None,
            ),
            (
                "taken back to what we replaced, deployed",
                rolled(
                    "1.0.0",
                    Some(("1.0.0", "1.1.0")),
                    &[live, ("1.0.0", "2026-12-02T08:00:00Z")],
                ),
                Some(Some("2026-12-02T08:00:00Z")),
            ),
            (
                "set to an older version than ours, deployed",
                rolled(
                    "0.9.0",
                    Some(("1.0.0", "1.1.0")),
                    &[live, ("0.9.0", "2026-12-02T09:00:00Z")],
                ),
                Some(Some("2026-12-02T09:00:00Z")),
            ),
            (
                "taken back, not deployed yet",
                rolled("1.0.0", Some(("1.0.0", "1.1.0")), &[live]),
                Some(None),
            ),
            (
                "set back before our write was synced, the old image still running: in force from then",
                rolled(
                    "1.0.0",
                    Some(("1.0.0", "1.1.0")),
                    &[("1.0.0", "2026-11-30T08:00:00Z")],
                ),
                Some(Some("2026-12-01T10:00:00Z")),
            ),
            (
                "moved forward by hand",
                rolled(
                    "1.2.0",
                    Some(("1.0.0", "1.1.0")),
                    &[live, ("1.2.0", "2026-12-02T08:00:00Z")],
                ),
                None,
            ),
            (
                "the old value's deploy before our write is not the rollback",
                rolled(
                    "1.0.0",
                    Some(("1.0.0", "1.1.0")),
                    &[("1.0.0", "2026-11-30T08:00:00Z"), live],
                ),
                Some(None),
            ),
        ];
        for (case, app, expected) in cases {
            let current = TagRef::parse(
                app["spec"]["source"]["helm"]["parameters"][1]["value"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
            let found =
                taken_back(app, image, &current, &unknown_times).and_then(TakenBack::rollback);
            let got = found
                .as_ref()
                .map(|r| r.deployed.map(|d| d.format(&Rfc3339).unwrap()));
            let expected = expected.map(|d| d.map(str::to_string));
            assert_eq!(got, expected, "{case}");
        }
        let rollback = Rollback {
            written: "1.1.0".into(),
            current: "1.0.0".into(),
            deployed: Some(datetime!(2026-12-02 08:00 UTC)),
            by: Some("kubectl-edit".into()),
            operation: false,
        };
        let at = |name: &str, pushed: Option<OffsetDateTime>| TagInfo {
            name: name.into(),
            pushed_at: pushed,
            digest: None,
            archived: false,
        };
        assert!(
            rollback
                .holds(&at("1.1.0", Some(datetime!(2026-12-01 09:00 UTC))))
                .unwrap()
                .contains("was pushed 2026-12-01T09:00:00Z before it")
        );
        assert_eq!(
            rollback.holds(&at("1.1.1", Some(datetime!(2026-12-02 08:00:01 UTC)))),
            None,
            "the fix after the rollback"
        );
        assert!(
            rollback
                .holds(&at("1.1.1", None))
                .unwrap()
                .contains("is unknown")
        );
        let pending = Rollback {
            deployed: None,
            ..rollback
        };
        assert!(
            pending
                .holds(&at("1.1.1", Some(datetime!(2030-01-01 00:00 UTC))))
                .unwrap()
                .contains("has not deployed yet")
        );
    }

    #[test]
    fn an_argocd_app_rollback_is_a_persons_sync_of_something_else_after_ours_went_live() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let ours = deploy("1.1.0", "2026-12-01T10:01:00Z", None);
        let before = deploy("1.0.0", "2026-11-30T08:00:00Z", None);
        let rollback = deploy("1.0.0", "2026-12-02T08:00:00Z", Some("admin"));
        let cases: Vec<(&str, Vec<Value>, Found)> = vec![
            (
                "the newest sync is a person's of the value we replaced",
                vec![before.clone(), ours.clone(), rollback.clone()],
                Some(("1.0.0".into(), Some("2026-12-02T08:00:00Z".into()), true)),
            ),
            (
                "no sync since ours",
                vec![before.clone(), ours.clone()],
                None,
            ),
            (
                "a person synced again after the rollback: ours runs",
                vec![
                    ours.clone(),
                    rollback.clone(),
                    deploy("1.1.0", "2026-12-02T09:00:00Z", Some("admin")),
                ],
                None,
            ),
            (
                "an automated sync of something else is no person's rollback",
                vec![ours.clone(), deploy("1.0.0", "2026-12-02T08:00:00Z", None)],
                None,
            ),
            (
                "our write never went live",
                vec![before.clone(), rollback.clone()],
                None,
            ),
        ];
        for (case, history, expected) in cases {
            let app = Application::tracking("web", IMAGE, "1.1.0")
                .annotation(AUDIT_ANNOTATION, &audit_of("1.0.0", "1.1.0", None))
                .history(json!(history))
                .build();
            let found = taken_back(&app, image, &TagRef::tag("1.1.0"), &unknown_times)
                .and_then(TakenBack::rollback);
            assert_eq!(when(found.clone()), expected, "{case}");
            if let Some(found) = found {
                assert_eq!(
                    found.by.as_deref(),
                    Some("argocd app rollback by admin"),
                    "{case}"
                );
            }
        }
    }

    #[test]
    fn an_argocd_app_rollback_of_a_git_write_back_redeploys_a_revision_from_before_our_commit() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let synced = |revision: &str, at: &str, by: Option<&str>| {
            let mut entry = deploy("ignored", at, by);
            entry["revision"] = json!(revision);
            entry
        };
        let history = |newest: Value| {
            json!([
                synced("c-before", "2026-11-30T08:00:00Z", None),
                synced("c-ours", "2026-12-01T10:01:00Z", None),
                newest
            ])
        };
        let cases = [
            (
                "a person's sync of the revision before ours",
                history(synced("c-before", "2026-12-02T08:00:00Z", Some("admin"))),
                Some((
                    "1.0.0".to_string(),
                    Some("2026-12-02T08:00:00Z".to_string()),
                    true,
                )),
            ),
            (
                "a person's sync of a newer commit is no rollback",
                history(synced("c-newer", "2026-12-02T08:00:00Z", Some("admin"))),
                None,
            ),
        ];
        for (case, history, expected) in cases {
            let app = Application::tracking("web", IMAGE, "1.1.0")
                .annotation(
                    AUDIT_ANNOTATION,
                    &audit_of("1.0.0", "1.1.0", Some("c-ours")),
                )
                .history(history)
                .build();
            let found = taken_back(&app, image, &TagRef::tag("1.1.0"), &unknown_times)
                .and_then(TakenBack::rollback);
            assert_eq!(when(found), expected, "{case}");
        }
    }

    #[test]
    fn an_owner_reapplying_its_manifest_is_not_a_rollback_and_anyone_else_is() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let cases = [
            ("kubectl-edit", true),
            ("kubectl-patch", true),
            ("argocd-server", true),
            ("my-own-tool", true),
            ("argocd-controller", false),
            ("helm", false),
            ("Terraform", false),
            ("HashiCorp", false),
            ("kubectl-client-side-apply", false),
            ("kubectl", false),
        ];
        for (manager, rollback) in cases {
            let app = rolled(
                "1.0.0",
                Some(("1.0.0", "1.1.0")),
                &[
                    ("1.1.0", "2026-12-01T10:01:00Z"),
                    ("1.0.0", "2026-12-02T08:00:00Z"),
                ],
            );
            let mut app = app;
            app["metadata"]["managedFields"] = managed_by(manager);
            let found = taken_back(&app, image, &TagRef::tag("1.0.0"), &unknown_times).unwrap();
            match found {
                TakenBack::Rollback(r) => {
                    assert!(rollback, "{manager} is an owner");
                    assert_eq!(r.by.as_deref(), Some(manager));
                }
                reapplied => {
                    assert!(!rollback, "{manager} is a person");
                    assert!(reapplied.note().unwrap().contains(manager), "{manager}");
                }
            }
        }
    }

    #[test]
    fn a_rollback_of_an_image_outlives_writes_of_other_images() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let audit = json!({"time": "2026-12-03T10:00:00Z", "eventId": "e2",
            "images": [{"alias": "api", "image": "1.dkr.ecr.r.amazonaws.com/api", "from": "1", "to": "2"}],
            "earlier": [{"alias": "app", "image": IMAGE, "from": "1.0.0", "to": "1.1.0",
                         "time": "2026-12-01T10:00:00Z", "commit": null, "pullRequest": false}]});
        let app = Application::tracking("web", IMAGE, "1.0.0")
            .annotation(AUDIT_ANNOTATION, &audit.to_string())
            .history(json!([
                deploy("1.1.0", "2026-12-01T10:01:00Z", None),
                deploy("1.0.0", "2026-12-02T08:00:00Z", Some("admin")),
            ]))
            .build();
        let found = taken_back(&app, image, &TagRef::tag("1.0.0"), &unknown_times)
            .and_then(TakenBack::rollback);
        assert_eq!(
            when(found),
            Some(("1.0.0".into(), Some("2026-12-02T08:00:00Z".into()), false))
        );
    }

    #[test]
    fn a_remembered_rollback_holds_once_the_history_rotated_and_only_for_the_write_it_took_back() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let memory = |written: &str, to: &str, operation: bool| {
            json!({IMAGE: {"written": written, "to": to, "deployed": "2026-12-02T08:00:00Z",
                "by": "kubectl-edit", "operation": operation}})
            .to_string()
        };
        // Ten later syncs of other things: our write's deploy and the rollback's are gone.
        let rotated: Vec<Value> = (0..10)
            .map(|i| deploy("1.0.0", &format!("2026-12-03T0{i}:00:00Z"), None))
            .collect();
        let cases = [
            (
                "the spec still asks for the rolled-back value",
                "1.0.0",
                memory("1.1.0", "1.0.0", false),
                json!(rotated),
                Some((
                    "1.0.0".to_string(),
                    Some("2026-12-02T08:00:00Z".to_string()),
                    false,
                )),
            ),
            (
                "moved on by hand since",
                "1.2.0",
                memory("1.1.0", "1.0.0", false),
                json!(rotated),
                None,
            ),
            (
                "a later write of ours is not the one taken back: the history dates it, from what is left",
                "1.0.0",
                memory("1.0.5", "1.0.0", false),
                json!(rotated),
                Some((
                    "1.0.0".to_string(),
                    Some("2026-12-03T00:00:00Z".to_string()),
                    false,
                )),
            ),
            (
                "an argocd app rollback no one has synced over",
                "1.1.0",
                memory("1.1.0", "1.0.0", true),
                json!([deploy("1.0.0", "2026-12-02T08:00:00Z", Some("admin"))]),
                Some((
                    "1.0.0".to_string(),
                    Some("2026-12-02T08:00:00Z".to_string()),
                    true,
                )),
            ),
            (
                "an argocd app rollback synced over since",
                "1.1.0",
                memory("1.1.0", "1.0.0", true),
                json!([deploy("1.1.0", "2026-12-02T09:00:00Z", Some("admin"))]),
                None,
            ),
        ];
        for (case, current, remembered, history, expected) in cases {
            let app = Application::tracking("web", IMAGE, current)
                .annotation(AUDIT_ANNOTATION, &audit_of("1.0.0", "1.1.0", None))
                .annotation(ROLLBACKS_ANNOTATION, &remembered)
                .history(history)
                .build();
            let found = taken_back(&app, image, &TagRef::tag(current), &unknown_times)
                .and_then(TakenBack::rollback);
            assert_eq!(when(found), expected, "{case}");
        }
    }

    #[test]
    fn taken_back_forward_and_back_again_dates_from_the_last_time_back() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = rolled(
            "1.0.0",
            Some(("1.0.0", "1.1.0")),
            &[
                ("1.1.0", "2026-12-01T10:01:00Z"),
                ("1.0.0", "2026-12-02T08:00:00Z"),
                ("1.1.0", "2026-12-03T08:00:00Z"),
                ("1.0.0", "2026-12-04T08:00:00Z"),
            ],
        );
        let found = taken_back(&app, image, &TagRef::tag("1.0.0"), &unknown_times)
            .and_then(TakenBack::rollback);
        assert_eq!(
            when(found),
            Some(("1.0.0".into(), Some("2026-12-04T08:00:00Z".into()), false))
        );
    }

    #[test]
    fn a_deployed_rollback_respected_is_remembered_once() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = rolled(
            "1.0.0",
            Some(("1.0.0", "1.1.0")),
            &[
                ("1.1.0", "2026-12-01T10:01:00Z"),
                ("1.0.0", "2026-12-02T08:00:00Z"),
            ],
        );
        let candidate = TagInfo {
            name: "1.1.0".into(),
            pushed_at: Some(datetime!(2026-12-01 09:00 UTC)),
            digest: None,
            archived: false,
        };
        let held = taken_back(&app, image, &TagRef::tag("1.0.0"), &unknown_times)
            .and_then(TakenBack::rollback)
            .unwrap()
            .holds(&candidate)
            .unwrap();
        let entry = Entry {
            from: Some("1.0.0".into()),
            ..Entry::new("argocd", "web", Some("app"), IMAGE).with(Action::Skipped, held)
        };
        let next = to_remember(&app, &cfg, std::slice::from_ref(&entry)).unwrap();
        assert_eq!(next[IMAGE].to, "1.0.0");
        assert_eq!(next[IMAGE].deployed, "2026-12-02T08:00:00Z");
        let mut remembered = app.clone();
        remembered["metadata"]["annotations"][ROLLBACKS_ANNOTATION] =
            json!(serde_json::to_string(&next).unwrap());
        assert_eq!(
            to_remember(&remembered, &cfg, &[entry]),
            None,
            "already remembered"
        );
    }

    fn running(mut app: Value, tag: &str) -> Value {
        app["status"]["summary"]["images"] = json!([format!("{IMAGE}:{tag}")]);
        app
    }

    /// A history entry syncing `revision` of branch `main`, deployed at `at`.
    fn synced_rev(revision: &str, at: &str, by: Option<&str>) -> Value {
        let mut entry = deploy("ignored", at, by);
        entry["revision"] = json!(revision);
        entry["source"]["targetRevision"] = json!("main");
        entry
    }

    #[test]
    fn a_git_commit_synced_under_a_descendant_went_live_and_its_revert_is_a_rollback() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = |revisions: &[(&str, &str)]| {
            let history: Vec<Value> = revisions
                .iter()
                .map(|(revision, at)| synced_rev(revision, at, None))
                .collect();
            let app = Application::tracking("web", IMAGE, "1.0.0")
                .annotation(
                    AUDIT_ANNOTATION,
                    &audit_of("1.0.0", "1.1.0", Some("c-ours")),
                )
                .history(json!(history))
                .build();
            running(app, "1.0.0")
        };
        let before = ("c-before", "2026-11-30T08:00:00Z");
        let revert = ("c-revert", "2026-12-02T08:00:00Z");
        // (case, history, rollback deployed)
        let cases: &[(&str, Vec<(&str, &str)>, Option<Option<&str>>)] = &[
            (
                "a commit on top of ours synced first, then the revert",
                vec![
                    before,
                    ("c-ours-plus-other", "2026-12-01T10:03:00Z"),
                    revert,
                ],
                Some(Some("2026-12-02T08:00:00Z")),
            ),
            (
                "only a revision synced before our write synced again after it",
                vec![before, ("c-before", "2026-12-01T10:03:00Z")],
                None,
            ),
            ("no sync after our write", vec![before], None),
        ];
        for (case, history, expected) in cases {
            let found = taken_back(&app(history), image, &TagRef::tag("1.0.0"), &unknown_times)
                .and_then(TakenBack::rollback)
                .map(|r| r.deployed.map(|d| d.format(&Rfc3339).unwrap()));
            assert_eq!(found, expected.map(|d| d.map(str::to_string)), "{case}");
        }
    }

    #[test]
    fn an_argocd_app_rollback_to_an_entry_trimmed_from_the_history_is_told_by_what_runs() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let history = json!([
            synced_rev("c-ours", "2026-12-01T10:01:00Z", None),
            synced_rev("c-before", "2026-12-02T08:00:00Z", Some("admin")),
        ]);
        let app = |runs: &str| {
            let app = Application::tracking("web", IMAGE, "1.1.0")
                .annotation(
                    AUDIT_ANNOTATION,
                    &audit_of("1.0.0", "1.1.0", Some("c-ours")),
                )
                .history(history.clone())
                .build();
            running(app, runs)
        };
        let found = |app: &Value| {
            when(
                taken_back(app, image, &TagRef::tag("1.1.0"), &unknown_times)
                    .and_then(TakenBack::rollback),
            )
        };
        assert_eq!(
            found(&app("1.0.0")),
            Some(("1.0.0".into(), Some("2026-12-02T08:00:00Z".into()), true)),
            "the Pods run the old image"
        );
        assert_eq!(
            found(&app("1.1.0")),
            None,
            "a person's sync of a commit after ours runs ours: no rollback"
        );
    }

    #[test]
    fn our_own_sync_is_no_argocd_app_rollback() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = Application::tracking("web", IMAGE, "1.1.0")
            .annotation(AUDIT_ANNOTATION, &audit_of("1.0.0", "1.1.0", None))
            .history(json!([
                deploy("1.1.0", "2026-12-01T10:01:00Z", None),
                deploy("1.0.0", "2026-12-02T08:00:00Z", Some(OUR_MANAGER)),
            ]))
            .build();
        let found = taken_back(&app, image, &TagRef::tag("1.1.0"), &unknown_times);
        assert_eq!(found, None);
    }

    #[test]
    fn a_second_rollback_to_the_same_value_dates_from_the_second() {
        let cfg = semver();
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = rolled(
            "1.0.0",
            Some(("1.0.0", "1.1.0")),
            &[
                ("1.1.0", "2026-12-01T10:01:00Z"),
                ("1.0.0", "2026-12-02T08:00:00Z"),
                ("1.1.0", "2026-12-03T08:00:00Z"),
                ("1.0.0", "2026-12-04T08:00:00Z"),
            ],
        );
        let found = taken_back(&app, image, &TagRef::tag("1.0.0"), &unknown_times)
            .and_then(TakenBack::rollback)
            .unwrap();
        let candidate = TagInfo {
            name: "1.2.0".into(),
            pushed_at: Some(datetime!(2026-12-03 12:00 UTC)),
            digest: None,
            archived: false,
        };
        assert_eq!(found.deployed, Some(datetime!(2026-12-04 08:00 UTC)));
        assert!(
            found.holds(&candidate).is_some(),
            "pushed before the second rollback"
        );
    }

    #[test]
    fn under_newest_build_ranking_below_our_write_is_judged_by_push_time_not_name() {
        let cfg = config(&[
            ("app.update-strategy", "newest-build"),
            ("app.helm.image-name", "image.name"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = rolled(
            "e2d4",
            Some(("b7f3", "c1a9")),
            &[
                ("c1a9", "2026-12-01T10:01:00Z"),
                ("e2d4", "2026-12-02T08:00:00Z"),
            ],
        );
        let ours = datetime!(2026-11-30 00:00 UTC);
        // (case, push time of e2d4, a rollback)
        let cases = [
            (
                "a build pushed before ours",
                Some(datetime!(2026-11-20 00:00 UTC)),
                true,
            ),
            (
                "a build pushed after ours, set by hand",
                Some(datetime!(2026-12-01 00:00 UTC)),
                false,
            ),
            ("when it was pushed is unknown", None, false),
        ];
        for (case, e2d4, expected) in cases {
            let pushed = |tag: &str| match tag {
                "c1a9" => Some(ours),
                "e2d4" => e2d4,
                _ => None,
            };
            let found = taken_back(&app, image, &TagRef::tag("e2d4"), &pushed)
                .and_then(TakenBack::rollback);
            assert_eq!(found.is_some(), expected, "{case}");
        }
    }

    /// Our audit record of a write of IMAGE from `from` to `to` at 2026-12-01T10:00:00Z.
    fn audit_of(from: &str, to: &str, commit: Option<&str>) -> String {
        let mut audit = json!({"time": "2026-12-01T10:00:00Z", "eventId": "e",
            "images": [{"alias": "app", "image": IMAGE, "from": from, "to": to}]});
        if let Some(commit) = commit {
            audit["git"] = json!({"branch": "main", "commit": commit, "pullRequest": null});
        }
        audit.to_string()
    }
}
