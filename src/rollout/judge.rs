//! Whether a write of ours is live, from the Application alone (pure). The write followed is
//! the one our audit record names; Argo CD's status says the rest, read as Argo CD's
//! application controller writes it (argoproj/argo-cd `controller/appcontroller.go`,
//! `controller/sync.go`, `controller/state.go`): the sync operation and what it synced,
//! `status.reconciledAt`, `status.summary.images` (the images of the Pods Argo CD sees,
//! `controller/cache/info.go` `populatePodInfo`), and the Application's health (Argo CD 3.x
//! keeps health per Application, not per resource).
//!
//! The write's sync is an operation (or a `status.history` entry) that started after the write
//! and synced the spec as written, or for a commit its revision: one started before the write
//! synced the spec before it, however late it ended (`autoSync` copies the spec into the
//! operation). Live: that sync `Succeeded`, Argo CD compared the Application after it finished
//! (the operation worker never writes health: `setOperationState` only asks for a refresh),
//! and it is `Synced` and `Healthy` with our images running and the replaced ones gone.
//! Failed: that operation ended `Failed`/`Error`, or a comparison after it says
//! `Degraded`/`Missing`. A newer write of ours supersedes the one followed; past the
//! deadline, the check says which condition was missing.

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::application::app::{
    Application, HistoryEntry, InitiatedBy, OperationState, Status, Synced as SyncedFields,
};
use crate::application::audit::{AuditRecord, AuditedImage, ImageWrite};

/// How long a write is followed unless the Application says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The Application's own deadline for its rollouts (`30m`, `2h`; at most 7 days).
pub const TIMEOUT_ANNOTATION: &str = "argocd-ecr-updater.io/confirm-timeout";

/// `"true"`: start a sync after a write, as `argocd app sync` does, for an Application
/// without automated sync.
pub const SYNC_ANNOTATION: &str = "argocd-ecr-updater.io/sync";

/// Who a sync we start names as its initiator.
pub const INITIATOR: &str = "argocd-ecr-updater";

/// How a followed write ended, or that it has not yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Running and healthy at `observed` (the check that saw it).
    Live {
        observed: OffsetDateTime,
    },
    Failed(String),
    /// The deadline passed; says which condition was still missing.
    TimedOut(String),
    /// Not yet: says what is awaited, to check again later.
    Pending(String),
    /// A newer write of ours replaced the one followed (at that time): it is followed instead.
    Superseded(OffsetDateTime),
    /// Someone took the write back before it was confirmed (says who and how): the spec no
    /// longer asks for it, or `argocd app rollback` synced an earlier entry instead.
    TakenBack(String),
    /// An earlier check recorded the outcome: nothing to report twice.
    Reported(String),
    /// Nothing to follow: the record is gone, or the write went to a pull request.
    Unfollowed(String),
}

/// The outcomes a rollout is reported with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Confirmed,
    Failed,
    TimedOut,
    TakenBack,
}

impl Outcome {
    /// As recorded and as the `Outcome` metric dimension says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Failed => "failed",
            Self::TimedOut => "timed-out",
            Self::TakenBack => "taken-back",
        }
    }

    /// The Kubernetes Event's reason.
    pub fn event_reason(self) -> &'static str {
        match self {
            Self::Confirmed => "RolloutConfirmed",
            Self::Failed => "RolloutFailed",
            Self::TimedOut => "RolloutTimedOut",
            Self::TakenBack => "RolloutTakenBack",
        }
    }
}

impl Verdict {
    /// The outcome to report, for a verdict that ends the rollout and is not yet reported.
    pub fn outcome(&self) -> Option<(Outcome, String)> {
        match self {
            Self::Live { .. } => Some((Outcome::Confirmed, "running and Healthy".into())),
            Self::Failed(reason) => Some((Outcome::Failed, reason.clone())),
            Self::TimedOut(reason) => Some((Outcome::TimedOut, reason.clone())),
            Self::TakenBack(reason) => Some((Outcome::TakenBack, reason.clone())),
            _ => None,
        }
    }
}

/// Why a check message cannot be taken as one of our writes: the Application's record does
/// not show it. Permanent: the same message reads the same on every delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Permanent.NotOurWrite: {0}; a rollout check follows only a write the Application's argocd-ecr-updater.io/last-update record shows"
)]
pub struct NotOurWrite(pub String);

/// How long the Application's rollouts are followed: its annotation, else the default.
pub fn timeout(app: &Application<'_>) -> Result<Duration, String> {
    match app.annotation(TIMEOUT_ANNOTATION) {
        None => Ok(DEFAULT_TIMEOUT),
        Some(value) => crate::appconfig::annotations::parse_duration(value)
            .map_err(|problem| format!("`{TIMEOUT_ANNOTATION}`: {problem}")),
    }
}

/// Judges the write made at `write` (as the check message names it) on `app` as read at
/// `now`, with `deadline` the write's time plus its timeout.
pub fn judge(
    app: &Application<'_>,
    write: OffsetDateTime,
    now: OffsetDateTime,
    deadline: OffsetDateTime,
) -> Result<Verdict, NotOurWrite> {
    let Some(record) = app.audit.clone() else {
        return Ok(Verdict::Unfollowed(
            "the Application no longer carries our audit record".into(),
        ));
    };
    let record = match record.write_at(write) {
        Some(followed) => followed,
        // Every image of the write has been written again since.
        None if record.time > write => return Ok(Verdict::Superseded(record.time)),
        None => record,
    };
    if record.time < write {
        return Err(NotOurWrite(format!(
            "the message names a write at {}, the Application's last write by this function was at {}",
            stamp(write),
            stamp(record.time)
        )));
    }
    if let Some(done) = &record.rollout {
        return Ok(Verdict::Reported(done.outcome.clone()));
    }
    if record.pull_request {
        return Ok(Verdict::Unfollowed(
            "the write went to a pull request: it is live only once merged, under another revision"
                .into(),
        ));
    }
    Ok(status_verdict(app, &record, now, deadline))
}

/// The verdict from Argo CD's status on a write the record names.
fn status_verdict(
    app: &Application<'_>,
    record: &AuditRecord,
    now: OffsetDateTime,
    deadline: OffsetDateTime,
) -> Verdict {
    let status = &app.status;
    let operation = &status.operation_state;
    let phase = operation.phase();
    let running = running_images(status);
    let missing: Vec<String> = record
        .images
        .iter()
        .filter(|image| !runs(&running, image))
        .map(|image| format!("{}:{}", image.image, image.to))
        .collect();
    let spec = spec_sources(app);
    let current = Synced::of_operation(operation);
    let current_ours = current.carries(record, &spec, missing.is_empty());
    // Failed or Error only: a failed attempt being retried stays Running (with `finishedAt`).
    if current_ours && matches!(phase, "Failed" | "Error") {
        let message = operation.message.as_deref().unwrap_or("no message");
        return Verdict::Failed(format!(
            "the sync operation after the write ended {phase}: {}",
            crate::redact::scrub(message)
        ));
    }
    if let Some(how) = taken_back(app, record, &current, current_ours) {
        return Verdict::TakenBack(how);
    }
    let synced = match (phase, operation.finished_at) {
        ("Succeeded", Some(finished)) if current_ours => Some(finished),
        _ => history_sync(status, record, &spec, missing.is_empty()),
    };
    let awaited = match synced {
        Some(finished) => match synced_verdict(status, record, &running, &missing, finished, now) {
            Ok(verdict) => return verdict,
            Err(awaited) => awaited,
        },
        None => unsynced(app, &current, record, phase),
    };
    if now >= deadline {
        Verdict::TimedOut(format!("{awaited} at the deadline {}", stamp(deadline)))
    } else {
        Verdict::Pending(awaited)
    }
}

/// What one operation, or one history entry, synced: when it started, the source(s) it
/// synced, and the revision(s).
struct Synced {
    started: Option<OffsetDateTime>,
    sources: Option<Value>,
    revisions: Vec<String>,
}

impl Synced {
    /// `status.operationState`: its `syncResult` once Argo CD has written one (`sync.go`
    /// `SyncAppState` copies the operation's source and pins the revisions), else the
    /// operation as set.
    fn of_operation(state: &OperationState) -> Self {
        let from = state.sync_result.as_ref().unwrap_or(&state.operation.sync);
        Self {
            started: state.started_at,
            sources: sources_of(from),
            revisions: from.all_revisions(),
        }
    }

    /// A `status.history` entry: `deployStartedAt` is the operation's `startedAt`.
    fn of_history(entry: &HistoryEntry) -> Self {
        Self {
            started: entry.deploy_started_at,
            sources: sources_of(&entry.synced),
            revisions: entry.synced.all_revisions(),
        }
    }

    /// Whether this sync contains the write. A commit: the sync is at its revision (in any
    /// source), or at a later one started after the write with our images running. A spec
    /// write: the sync started after the write and synced the spec as it is now. Argo CD
    /// writes times in whole seconds, so in the write's own second an operation may have
    /// started before the write: there only the synced source(s) decide.
    fn carries(&self, record: &AuditRecord, spec: &Value, ours_running: bool) -> bool {
        let second = whole_second(record.time);
        if let Some(commit) = record.commit.as_deref() {
            if self.revisions.iter().any(|r| r == commit) {
                return true;
            }
            return !self.revisions.is_empty()
                && self.started.is_some_and(|s| s > second)
                && ours_running;
        }
        match self.started {
            Some(started) if started < second => false,
            Some(started) if started == second => self
                .sources
                .as_ref()
                .is_some_and(|s| asks_for(record, s, spec)),
            Some(_) => self
                .sources
                .as_ref()
                .is_none_or(|s| asks_for(record, s, spec)),
            None => false,
        }
    }
}

/// Whether synced `sources` ask for the write: where the record says where each value went,
/// those places read the same in them (whatever else changed since); else they are the spec
/// as it is now.
fn asks_for(record: &AuditRecord, sources: &Value, spec: &Value) -> bool {
    let synced = as_spec(sources);
    let asked: Option<Vec<bool>> = record.images.iter().map(|i| i.asked_by(&synced)).collect();
    match asked {
        Some(asked) if !asked.is_empty() => asked.iter().all(|a| *a),
        _ => sources == spec,
    }
}

/// Synced source(s) as an Application's `spec` holds them, for the written places
/// (`/spec/source/…`, `/spec/sources/N/…`) to be read in.
fn as_spec(sources: &Value) -> Value {
    if sources.is_array() {
        json!({"spec": {"sources": sources}})
    } else {
        json!({"spec": {"source": sources}})
    }
}

/// How the write was taken back before it was confirmed, if it was: the spec no longer asks
/// for a value it wrote (a person's edit, or the Application's owner re-applying its
/// manifest, told apart by `metadata.managedFields`), or, with the spec still asking,
/// `argocd app rollback` (argo-cd `server/application/application.go` `Rollback`) runs or
/// ran an operation, started after the write by a user, that syncs an earlier history
/// entry's source or revision instead. Only a record that says where its values went (a
/// patch's places) or names its commit is judged so.
fn taken_back(
    app: &Application<'_>,
    record: &AuditRecord,
    current: &Synced,
    current_ours: bool,
) -> Option<String> {
    let no_longer: Vec<String> = record
        .images
        .iter()
        .filter(|image| app.asks_for(image) == Some(false))
        .map(|image| format!("{}:{}", image.image, image.to))
        .collect();
    if !no_longer.is_empty() {
        let manager = crate::decision::rollback::lists_manager(app);
        let by = match manager.as_deref() {
            Some(owner) if crate::decision::rollback::OWNER_MANAGERS.contains(&owner) => format!(
                "the Application's owner ({owner}) re-applied its manifest over the write; the next sweep writes it again"
            ),
            Some(person) => format!("taken back by {person}"),
            None => "taken back (no field manager recorded)".into(),
        };
        return Some(format!(
            "the spec no longer asks for {}: {by}",
            no_longer.join(", ")
        ));
    }
    if current_ours {
        return None;
    }
    match record.commit.as_deref() {
        Some(commit) => commit_rolled_back(app, record, current, commit),
        None => patch_rolled_back(app, record),
    }
}

/// A person's user name on an operation or history entry's `initiatedBy`: not automated,
/// not ours.
fn person(initiated: &InitiatedBy) -> Option<&str> {
    initiated
        .username
        .as_deref()
        .filter(|u| !u.is_empty() && *u != INITIATOR && !initiated.automated)
}

/// For a commit: reverted in Git, or rolled back by an operation.
fn commit_rolled_back(
    app: &Application<'_>,
    record: &AuditRecord,
    current: &Synced,
    commit: &str,
) -> Option<String> {
    reverted_in_git(app, record, current, commit)
        .or_else(|| commit_operation_rollback(app, record, current, commit))
}

/// For a commit: Git no longer asks for it. A later revision (a revert, a reset of the
/// branch) is what Argo CD compared after the write, `Synced` and `Healthy`, with none of the
/// written images running and what they replaced running again: synced by an operation that
/// started after the write, or, where our commit never went live, compared equal to what runs
/// (Argo CD then starts no sync: `status.sync.revision` alone names it, a revision neither
/// the last operation nor any sync before the write deployed). A revision deployed before the
/// write is a stale comparison, not a revert.
fn reverted_in_git(
    app: &Application<'_>,
    record: &AuditRecord,
    current: &Synced,
    commit: &str,
) -> Option<String> {
    let status = &app.status;
    let state = &status.operation_state;
    let second = whole_second(record.time);
    let synced_after = current.started.is_some_and(|s| s > second)
        && state.phase() == "Succeeded"
        && state
            .finished_at
            .is_some_and(|f| reconciled_after(status, f));
    let compared = status.sync.compared.all_revisions();
    let (revisions, at) = if synced_after {
        (current.revisions.clone(), current.started?)
    } else {
        // Compared after the write, at a revision no operation has synced: the last one's
        // revision compared again is only a comparison of what ran before.
        let at = status.reconciled_at.filter(|at| *at > second)?;
        if compared.is_empty() || compared == current.revisions {
            return None;
        }
        (compared, at)
    };
    let deployed_before = status
        .history
        .iter()
        .filter(|entry| entry.deployed_at.is_some_and(|at| at < second))
        .any(|entry| Synced::of_history(entry).revisions == revisions);
    let revision = revisions.first()?;
    if revisions.iter().any(|r| r == commit) || deployed_before {
        return None;
    }
    let settled = status.sync.status.as_deref() == Some("Synced")
        && status.health.status.as_deref() == Some("Healthy");
    let running = running_images(status);
    let back = !record.images.is_empty()
        && record.images.iter().all(|image| {
            let replaced = image.from.as_deref().map(|from| AuditedImage {
                to: from.to_string(),
                ..image.clone()
            });
            !runs(&running, image) && replaced.is_some_and(|r| runs(&running, &r))
        });
    (settled && back).then(|| {
        format!(
            "Git no longer asks for it: revision {} compared at {} runs what the write replaced",
            &revision[..12.min(revision.len())],
            stamp(at)
        )
    })
}

/// For a commit: the current operation, started after the write by a person, pins an earlier
/// revision that Argo CD deployed before the write (`argocd app rollback`).
fn commit_operation_rollback(
    app: &Application<'_>,
    record: &AuditRecord,
    current: &Synced,
    commit: &str,
) -> Option<String> {
    let state = &app.status.operation_state;
    let user = person(&state.operation.initiated_by)?;
    let second = whole_second(record.time);
    let started = current.started.filter(|s| *s > second)?;
    let earlier = app.status.history.iter().any(|entry| {
        entry.deployed_at.is_some_and(|at| at < second)
            && Synced::of_history(entry).revisions == current.revisions
    });
    (!current.revisions.is_empty() && !current.revisions.iter().any(|r| r == commit) && earlier)
        .then(|| rolled_back_by(user, started))
}

/// For a patch: the syncs since the write, oldest first (the history's entries, then the
/// current operation's explicit source), read as what each did to it: a sync of source(s)
/// asking for the write puts it back; a person's sync of an explicit source without it (what
/// `argocd app rollback` runs) takes it back; our own syncs that kept a rollback (see
/// [`start_sync`]) and automated ones change nothing. The last person's take-back standing.
fn patch_rolled_back(app: &Application<'_>, record: &AuditRecord) -> Option<String> {
    let second = whole_second(record.time);
    let status = &app.status;
    let mut syncs: Vec<(OffsetDateTime, Value, &InitiatedBy)> = status
        .history
        .iter()
        .filter_map(|entry| {
            let started = entry.deploy_started_at.or(entry.deployed_at)?;
            Some((started, sources_of(&entry.synced)?, &entry.initiated_by))
        })
        .collect();
    let state = &status.operation_state;
    if let (Some(started), Some(explicit)) = (state.started_at, sources_of(&state.operation.sync)) {
        syncs.push((started, explicit, &state.operation.initiated_by));
    }
    syncs.sort_by_key(|(started, _, _)| *started);
    let mut taken = None;
    for (started, sources, initiated) in syncs.iter().filter(|(at, _, _)| *at > second) {
        let synced = as_spec(sources);
        let without = record
            .images
            .iter()
            .any(|image| image.asked_by(&synced) == Some(false));
        match (without, person(initiated)) {
            (false, _) => taken = None,
            (true, Some(user)) => taken = Some(rolled_back_by(user, *started)),
            (true, None) => {}
        }
    }
    taken
}

fn rolled_back_by(user: &str, started: OffsetDateTime) -> String {
    format!(
        "argocd app rollback by {user} at {}: Argo CD synced an earlier history entry instead of the write (the spec still asks for it)",
        stamp(started)
    )
}

/// `source` or `sources` (multi-source), as Argo CD's Go omits empty fields.
fn sources_of(from: &SyncedFields) -> Option<Value> {
    from.sources().as_ref().map(go_normalised)
}

/// The Application's `spec.source`, or `spec.sources`, as compared with a synced one.
fn spec_sources(app: &Application<'_>) -> Value {
    app.spec_synced()
        .sources()
        .as_ref()
        .map_or(Value::Null, go_normalised)
}

/// A value with what Go's `omitempty` leaves out dropped (null, false, 0, "", [], {}): the
/// spec as stored and the copy Argo CD writes back then compare equal.
fn go_normalised(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), go_normalised(v)))
                .filter(|(_, v)| !go_empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(go_normalised).collect()),
        other => other.clone(),
    }
}

fn go_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The latest `status.history` entry that contains the write, by its `deployedAt`: the
/// operation that synced it may since have been replaced by another.
fn history_sync(
    status: &Status,
    record: &AuditRecord,
    spec: &Value,
    ours_running: bool,
) -> Option<OffsetDateTime> {
    status
        .history
        .iter()
        .filter(|entry| Synced::of_history(entry).carries(record, spec, ours_running))
        .filter_map(|entry| entry.deployed_at)
        .max()
}

/// A sync containing the write finished at `finished`: live, failed, or what is awaited.
fn synced_verdict(
    status: &Status,
    record: &AuditRecord,
    running: &[&str],
    missing: &[String],
    finished: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<Verdict, String> {
    let sync_status = status.sync.status.as_deref().unwrap_or("Unknown");
    let health = status.health.status.as_deref().unwrap_or("Unknown");
    if !reconciled_after(status, finished) {
        let at = status.reconciled_at.map_or_else(|| "never".into(), stamp);
        return Err(format!(
            "synced at {}, not yet compared again by Argo CD (status.reconciledAt {at}): health {health} is from before the sync",
            stamp(finished)
        ));
    }
    if matches!(health, "Degraded" | "Missing") {
        let message = status
            .health
            .message
            .as_deref()
            .map(|m| format!(": {}", crate::redact::scrub(m)))
            .unwrap_or_default();
        return Ok(Verdict::Failed(format!(
            "health is {health} after the sync of the write{message}"
        )));
    }
    if health == "Suspended" {
        return Err("synced, the rollout is paused (health Suspended): a paused Deployment or Argo Rollout waits for someone to resume it".into());
    }
    if !missing.is_empty() {
        return Err(format!(
            "synced, but status.summary.images does not show {}",
            missing.join(", ")
        ));
    }
    if sync_status != "Synced" {
        return Err(format!("synced after the write, now {sync_status}"));
    }
    if health != "Healthy" {
        return Err(format!("synced, health is {health}"));
    }
    let replaced = still_running_replaced(record, running);
    if !replaced.is_empty() {
        return Err(format!(
            "Healthy, but Pods of the replaced {} still run (status.summary.images lists the images of every Pod Argo CD sees, old ones until they are gone)",
            replaced.join(", ")
        ));
    }
    Ok(Verdict::Live { observed: now })
}

/// Whether Argo CD compared the Application after the sync finished at `finished`: a later
/// `reconciledAt`, or one in the same second showing the result (Synced). Until then health
/// and sync status are as compared before the sync: the operation worker never writes them
/// (`appcontroller.go` `setOperationState` only asks for a refresh).
fn reconciled_after(status: &Status, finished: OffsetDateTime) -> bool {
    match status.reconciled_at {
        Some(at) if at > finished => true,
        Some(at) if at == finished => status.sync.status.as_deref() == Some("Synced"),
        _ => false,
    }
}

/// The images the write replaced that Pods still run: `summary.images` lists the images of
/// live Pods (`controller/cache/info.go` `populatePodInfo`), so the old ones stay listed until
/// their Pods are gone, after the Deployment is already Healthy.
fn still_running_replaced(record: &AuditRecord, running: &[&str]) -> Vec<String> {
    record
        .images
        .iter()
        .filter_map(|image| {
            let from = image.from.as_deref().filter(|from| *from != image.to)?;
            let replaced = AuditedImage {
                to: from.to_string(),
                ..image.clone()
            };
            let only_old: Vec<&str> = running
                .iter()
                .copied()
                .filter(|r| !runs(&[r], image))
                .collect();
            runs(&only_old, &replaced).then(|| format!("{}:{from}", image.image))
        })
        .collect()
}

/// What is awaited when no sync containing the write has finished.
fn unsynced(app: &Application<'_>, current: &Synced, record: &AuditRecord, phase: &str) -> String {
    let status = &app.status;
    let sync_status = status.sync.status.as_deref().unwrap_or("Unknown");
    let second = whole_second(record.time);
    let state = &status.operation_state;
    match (phase, current.started) {
        ("Running", Some(at)) if at < second => format!(
            "the operation started at {}, before the write, is still running: Argo CD syncs the write after it",
            stamp(at)
        ),
        ("Running", Some(at)) if state.finished_at.is_some() => format!(
            "the sync started at {} is retrying after a failed attempt: {}",
            stamp(at),
            crate::redact::scrub(state.message.as_deref().unwrap_or("no message"))
        ),
        ("Running", Some(at)) => format!("the sync started at {} is still running", stamp(at)),
        (_, Some(at)) if at <= second => format!(
            "the last operation started at {}, before the write, and synced what was there before it; no sync of the write yet (sync status {sync_status})",
            stamp(at)
        ),
        _ if !app.automated_sync() => format!(
            "never synced after the write (sync status {sync_status}); the Application has no automated sync: it waits for someone to sync it"
        ),
        _ => format!("never synced after the write (sync status {sync_status})"),
    }
}

fn running_images(status: &Status) -> Vec<&str> {
    status.summary.images.iter().map(String::as_str).collect()
}

/// Whether a Pod runs `image` at what was written: `name:tag`,
/// `name:tag@sha256:…`, or `name@sha256:…` for a written digest.
fn runs(running: &[&str], image: &AuditedImage) -> bool {
    let name = image.image.as_str();
    let written = image.to.as_str();
    let digest = written
        .split_once('@')
        .map(|(_, d)| d)
        .or_else(|| written.starts_with("sha256:").then_some(written));
    let by_tag = format!("{name}:{written}");
    running.iter().any(|r| {
        *r == by_tag
            || digest.is_some_and(|d| {
                // `name@digest`, or `name:<any tag>@digest`: the digest decides what runs.
                let tagged = r.strip_prefix(name).and_then(|rest| rest.strip_prefix(':'));
                *r == format!("{name}@{d}")
                    || tagged.is_some_and(|rest| rest.ends_with(&format!("@{d}")))
            })
    })
}

fn whole_second(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(0).unwrap_or(t)
}

fn stamp(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// The audit record with the outcome added: written back guarded by the record read, so
/// that of two checks delivered at once, one reports.
pub fn recorded(record: &AuditRecord, outcome: Outcome, reason: &str, at: OffsetDateTime) -> Value {
    record.with(
        "rollout",
        json!({"outcome": outcome.as_str(), "at": stamp(at), "reason": reason}),
    )
}

/// The lead times of a live write: from each image's push (when known) and from the write.
#[derive(Debug, Clone, PartialEq)]
pub struct Timings {
    /// ECR push to live observed, per image whose push time is known.
    pub lead_seconds: Vec<f64>,
    /// Our write to live observed.
    pub write_to_live_seconds: f64,
}

pub fn timings(record: &AuditRecord, observed: OffsetDateTime) -> Timings {
    let seconds = |from: OffsetDateTime| ((observed - from).as_seconds_f64()).max(0.0);
    Timings {
        lead_seconds: record
            .images
            .iter()
            .filter_map(|i| i.pushed)
            .map(seconds)
            .collect(),
        write_to_live_seconds: seconds(record.time),
    }
}

/// The Kubernetes Event of an outcome, named by the write so that one write has one
/// Event per outcome (the API server refuses the same name twice).
pub fn event(
    app: &Application<'_>,
    record: &AuditRecord,
    outcome: Outcome,
    reason: &str,
    now: OffsetDateTime,
) -> Value {
    let images: Vec<String> = record
        .images
        .iter()
        .map(|i| format!("{}:{}", i.image, i.to))
        .collect();
    let written_at = stamp(record.time);
    let ended = crate::report::events::RolloutEnded {
        record_text: &record.text,
        written_at: &written_at,
        images,
        event_reason: outcome.event_reason(),
        normal: matches!(outcome, Outcome::Confirmed | Outcome::TakenBack),
        reason,
    };
    crate::report::events::rollout_ended(&app.involved(), &ended, &stamp(now))
}

/// Whether to start a sync of `app` after our write, and why not when not: only when the
/// Application asks for it, has no automated sync enabled (Argo CD syncs those itself), and
/// no operation is set or running.
pub fn sync_wanted(app: &Application<'_>) -> Result<bool, String> {
    let asked = match app.annotation(SYNC_ANNOTATION) {
        None => return Ok(false),
        Some(value) => crate::appconfig::annotations::go_parse_bool(value).ok_or_else(|| {
            format!(
                "`{SYNC_ANNOTATION}: {}` is not true or false",
                crate::redact::scrub(value)
            )
        })?,
    };
    if !asked || app.automated_sync() {
        return Ok(false);
    }
    if app.operation.is_some() || app.status.operation_state.phase() == "Running" {
        return Err("an operation is running: Argo CD syncs the write after it".into());
    }
    Ok(true)
}

/// The JSON patch that starts a sync as `argocd app sync` does: the `operation` field, set
/// only on the Application as read (its resourceVersion tested), so never over a running one;
/// and the images whose `argocd app rollback` it keeps ([`kept_rollbacks`]).
pub fn start_sync(app: &Application<'_>, revision: Option<&str>) -> (Value, Vec<String>) {
    let mut sync = json!({"syncStrategy": {"hook": {}}});
    if let Some(revision) = revision {
        sync["revision"] = json!(revision);
    }
    let mut kept = Vec::new();
    if revision.is_none()
        && let Some((sources, images)) = kept_rollbacks(app)
    {
        let field = if sources.is_array() {
            "sources"
        } else {
            "source"
        };
        sync[field] = sources;
        kept = images;
    }
    let patch = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": app.metadata.resource_version},
        {"op": "add", "path": "/operation", "value": {
            "initiatedBy": {"username": INITIATOR},
            "info": [{"name": "Reason", "value": "image written by argocd-ecr-updater"}],
            "sync": sync}}
    ]);
    (patch, kept)
}

/// Where `argocd app rollback` stands for images our write did not move: the source(s) a sync
/// of ours deploys instead of the spec, so that it rolls our write out without undoing the
/// rollback, and those images. A rollback (argo-cd `server/application/application.go`
/// `Rollback`) is an operation that synced an explicit, earlier source and left the spec
/// asking for our earlier write; the spec as it is now is synced with each of those images'
/// values (where the record says our write put them) as that operation synced them. A later
/// sync of ours that kept them is read the same way, so the rollback stands through every
/// write of other images until someone syncs the spec. `None`: no rollback stands, or the
/// record does not say where the values went (a commit; then the sync is of the spec).
/// Only an image written before that operation began is kept: one written since is the
/// fix, which rolls out.
fn kept_rollbacks(app: &Application<'_>) -> Option<(Value, Vec<String>)> {
    let record = app.audit.as_ref()?;
    let state = &app.status.operation_state;
    let initiated = &state.operation.initiated_by;
    let by_user = initiated
        .username
        .as_deref()
        .is_some_and(|u| !u.is_empty() && !initiated.automated);
    if !by_user || record.commit.is_some() {
        return None;
    }
    // Whatever its phase: a rollback that failed, or our sync that kept one and failed, still
    // says what the person wants running; a sync of the spec since (no explicit source)
    // ends it.
    let synced = as_spec(&sources_of(&state.operation.sync)?);
    let started = state.started_at;
    let rolled_back: Vec<&ImageWrite> = record
        .earlier
        .iter()
        .filter(|w| w.commit.is_none())
        // A write of the image after the rollback began (its fix) is not held by it.
        .filter(|w| started.is_none_or(|at| w.time < at))
        .filter(|w| {
            app.asks_for(&w.image) == Some(true) && w.image.asked_by(&synced) == Some(false)
        })
        .collect();
    if rolled_back.is_empty() {
        return None;
    }
    let mut spec = app.spec_sources();
    for place in rolled_back.iter().flat_map(|w| &w.image.places) {
        place.take_from(&synced, &mut spec);
    }
    let sources = sources_of(&SyncedFields::read(&spec["spec"]))?;
    let images = rolled_back.iter().map(|w| w.image.image.clone()).collect();
    Some((sources, images))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AUDIT_ANNOTATION;
    use time::macros::datetime;

    // The judge's functions on the Application each JSON fixture is, as read.

    fn judge(
        app: &Value,
        write: OffsetDateTime,
        now: OffsetDateTime,
        deadline: OffsetDateTime,
    ) -> Result<Verdict, NotOurWrite> {
        super::judge(&Application::of(app), write, now, deadline)
    }

    fn start_sync(app: &Value, revision: Option<&str>) -> (Value, Vec<String>) {
        super::start_sync(&Application::of(app), revision)
    }

    fn sync_wanted(app: &Value) -> Result<bool, String> {
        super::sync_wanted(&Application::of(app))
    }

    fn timeout(app: &Value) -> Result<Duration, String> {
        super::timeout(&Application::of(app))
    }

    fn event(
        app: &Value,
        record: &AuditRecord,
        outcome: Outcome,
        reason: &str,
        now: OffsetDateTime,
    ) -> Value {
        super::event(&Application::of(app), record, outcome, reason, now)
    }

    const IMAGE: &str = "1.dkr.ecr.r.amazonaws.com/web";
    const NEW: &str = "1.dkr.ecr.r.amazonaws.com/web:1.1";
    const OLD: &str = "1.dkr.ecr.r.amazonaws.com/web:1.0";
    const WRITE: OffsetDateTime = datetime!(2026-12-03 10:00:00.600 UTC);
    const DEADLINE: OffsetDateTime = datetime!(2026-12-03 10:15:00.600 UTC);
    const NOW: OffsetDateTime = datetime!(2026-12-03 10:01:00 UTC);

    fn record(extra: Value) -> String {
        let mut record = json!({"time": "2026-12-03T10:00:00.6Z", "eventId": "e",
            "images": [{"alias": "app", "image": IMAGE, "from": "1.0", "to": "1.1",
                "pushed": "2026-12-03T09:59:50Z"}]});
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                record[k] = v;
            }
        }
        record.to_string()
    }

    /// The Application's source with the tag at `tag` (ours is 1.1), with an empty Kustomize
    /// section and a false `forceString` that Argo CD's copy leaves out.
    fn source(tag: &str) -> Value {
        json!({"repoURL": "https://git.example/web", "targetRevision": "main", "kustomize": {},
            "helm": {"parameters": [{"name": "image.tag", "value": tag, "forceString": false}]}})
    }

    fn app(record: &str, status: Value) -> Value {
        json!({"metadata": {"namespace": "argocd", "name": "web", "uid": "u", "resourceVersion": "7",
            "annotations": {AUDIT_ANNOTATION: record}}, "spec": {"source": source("1.1")}, "status": status})
    }

    /// An operation as Argo CD leaves it, syncing the source at `tag`.
    fn operation(phase: &str, started: &str, finished: Option<&str>, tag: &str) -> Value {
        let mut state = json!({"phase": phase, "startedAt": started,
            "message": "one or more objects failed to apply",
            "operation": {"sync": {"source": source(tag)}}});
        if let Some(finished) = finished {
            state["finishedAt"] = json!(finished);
            state["syncResult"] = json!({"revision": "c0",
                "source": {"repoURL": "https://git.example/web", "targetRevision": "main",
                    "helm": {"parameters": [{"name": "image.tag", "value": tag}]}}});
        }
        state
    }

    /// A status: the operation, the last comparison, health and the images Pods run.
    fn status(op: Value, reconciled: &str, sync: &str, health: &str, images: &[&str]) -> Value {
        json!({"operationState": op, "reconciledAt": reconciled, "sync": {"status": sync},
            "summary": {"images": images}, "health": {"status": health,
                "message": "Deployment \"web\" exceeded its progress deadline"}})
    }

    /// Our sync: started in the write's own second, finished at 10:00:20, compared at 10:00:22.
    fn ours(health: &str, images: &[&str]) -> Value {
        let op = operation(
            "Succeeded",
            "2026-12-03T10:00:00Z",
            Some("2026-12-03T10:00:20Z"),
            "1.1",
        );
        status(op, "2026-12-03T10:00:22Z", "Synced", health, images)
    }

    fn verdict(app: &Value, now: OffsetDateTime) -> String {
        match judge(app, WRITE, now, DEADLINE) {
            Ok(Verdict::Live { .. }) => "live".into(),
            Ok(Verdict::Failed(r)) => format!("failed: {r}"),
            Ok(Verdict::TimedOut(r)) => format!("timed out: {r}"),
            Ok(Verdict::Pending(r)) => format!("pending: {r}"),
            Ok(Verdict::Superseded(at)) => format!("superseded at {}", stamp(at)),
            Ok(Verdict::Reported(o)) => format!("reported {o}"),
            Ok(Verdict::Unfollowed(r)) => format!("unfollowed: {r}"),
            Ok(Verdict::TakenBack(r)) => format!("taken back: {r}"),
            Err(e) => e.to_string(),
        }
    }

    fn judged(cases: Vec<(&str, Value, OffsetDateTime, &str)>) {
        let ours = record(json!({}));
        for (case, status, now, expected) in cases {
            let got = verdict(&app(&ours, status), now);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }

    #[test]
    fn a_write_is_judged_by_argo_cds_status() {
        judged(vec![
            (
                "synced in the write's own second, our source, compared after, running, healthy: live",
                ours("Healthy", &[NEW]),
                NOW,
                "live",
            ),
            (
                "the last sync finished before the write: not yet",
                status(
                    operation(
                        "Succeeded",
                        "2026-12-03T09:59:58Z",
                        Some("2026-12-03T09:59:59Z"),
                        "1.0",
                    ),
                    "2026-12-03T10:00:01Z",
                    "OutOfSync",
                    "Healthy",
                    &[OLD],
                ),
                NOW,
                "pending: the last operation started at 2026-12-03T09:59:58Z, before the write, and synced what was there before it; no sync of the write yet (sync status OutOfSync)",
            ),
            (
                "synced but still progressing",
                ours("Progressing", &[OLD, NEW]),
                NOW,
                "pending: synced, health is Progressing",
            ),
            (
                "synced but the new image not yet in a Pod",
                ours("Healthy", &[OLD]),
                NOW,
                "pending: synced, but status.summary.images does not show 1.dkr.ecr.r.amazonaws.com/web:1.1",
            ),
            (
                "degraded after the sync: failed with Argo CD's message",
                ours("Degraded", &[OLD, NEW]),
                NOW,
                "failed: health is Degraded after the sync of the write: Deployment \"web\" exceeded its progress deadline",
            ),
            (
                "missing after the sync: failed",
                ours("Missing", &[]),
                NOW,
                "failed: health is Missing",
            ),
            (
                "the sync operation of the write failed",
                status(
                    operation(
                        "Failed",
                        "2026-12-03T10:00:05Z",
                        Some("2026-12-03T10:00:20Z"),
                        "1.1",
                    ),
                    "2026-12-03T10:00:01Z",
                    "OutOfSync",
                    "Healthy",
                    &[OLD],
                ),
                NOW,
                "failed: the sync operation after the write ended Failed: one or more objects failed to apply",
            ),
            (
                "a sync still running",
                status(
                    operation("Running", "2026-12-03T10:00:05Z", None, "1.1"),
                    "2026-12-03T10:00:01Z",
                    "OutOfSync",
                    "Healthy",
                    &[OLD],
                ),
                NOW,
                "pending: the sync started at 2026-12-03T10:00:05Z is still running",
            ),
            (
                "never synced, before the deadline",
                json!({"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}),
                NOW,
                "pending: never synced after the write (sync status OutOfSync)",
            ),
            (
                "never synced, at the deadline: timed out naming what was missing",
                json!({"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}),
                DEADLINE,
                "timed out: never synced after the write (sync status OutOfSync); the Application has no automated sync: it waits for someone to sync it at the deadline 2026-12-03T10:15:00.6Z",
            ),
            (
                "stuck progressing at the deadline",
                ours("Progressing", &[OLD, NEW]),
                DEADLINE,
                "timed out: synced, health is Progressing at the deadline",
            ),
        ]);
    }

    /// Argo CD's `startedAt` is in whole seconds; our write is at 10:00:00.6. An operation
    /// started before the write synced what was there before it, whatever it ended as.
    #[test]
    fn an_operation_contains_the_write_only_if_it_started_after_it_and_synced_it() {
        let straddling = |phase: &str, finished: Option<&str>, health: &str| {
            let op = operation(phase, "2026-12-03T09:59:50Z", finished, "1.0");
            status(op, "2026-12-03T10:00:25Z", "OutOfSync", health, &[OLD])
        };
        let in_second = |phase: &str, tag: &str| {
            let op = operation(
                phase,
                "2026-12-03T10:00:00Z",
                Some("2026-12-03T10:00:04Z"),
                tag,
            );
            status(
                op,
                "2026-12-03T10:00:05Z",
                "Synced",
                "Degraded",
                &[OLD, NEW],
            )
        };
        let mut unsourced = ours("Healthy", &[NEW]);
        unsourced["operationState"]["startedAt"] = json!("2026-12-03T10:00:01Z");
        unsourced["operationState"]["operation"] = json!({"sync": {"revision": "c0"}});
        unsourced["operationState"]["syncResult"] = json!({"revision": "c0"});
        let mut same_second_unsourced = unsourced.clone();
        same_second_unsourced["operationState"]["startedAt"] = json!("2026-12-03T10:00:00Z");
        let mut later_spec = ours("Healthy", &[NEW]);
        later_spec["operationState"]["startedAt"] = json!("2026-12-03T10:00:03Z");
        later_spec["operationState"]["syncResult"]["source"] = source("1.2");
        judged(vec![
            (
                "started before the write, Succeeded after it, the Application Degraded: not ours",
                straddling("Succeeded", Some("2026-12-03T10:00:20Z"), "Degraded"),
                NOW,
                "pending: the last operation started at 2026-12-03T09:59:50Z, before the write",
            ),
            (
                "started before the write, Failed after it: not ours",
                straddling("Failed", Some("2026-12-03T10:00:20Z"), "Healthy"),
                NOW,
                "pending: the last operation started at 2026-12-03T09:59:50Z, before the write",
            ),
            (
                "started before the write, still running: Argo CD syncs the write after it",
                straddling("Running", None, "Healthy"),
                NOW,
                "pending: the operation started at 2026-12-03T09:59:50Z, before the write, is still running",
            ),
            (
                "in the write's own second, our source, Failed: ours",
                in_second("Failed", "1.1"),
                NOW,
                "failed: the sync operation after the write ended Failed",
            ),
            (
                "in the write's own second, the old source, Failed: started before the write",
                in_second("Failed", "1.0"),
                NOW,
                "pending: the last operation started at 2026-12-03T10:00:00Z",
            ),
            (
                "in the write's own second, the old source, Succeeded and Degraded: not ours",
                in_second("Succeeded", "1.0"),
                NOW,
                "pending: the last operation started at 2026-12-03T10:00:00Z",
            ),
            (
                "in the write's own second without a source to tell: not ours",
                same_second_unsourced,
                NOW,
                "pending: the last operation started at 2026-12-03T10:00:00Z",
            ),
            (
                "a second after the write, no source recorded: ours",
                unsourced,
                NOW,
                "live",
            ),
            (
                "after the write but of a spec changed since: not this write's sync",
                later_spec,
                NOW,
                "pending: never synced after the write",
            ),
        ]);
    }

    /// Health and sync status are as Argo CD last compared them: from the sync's end until
    /// the next comparison (`reconciledAt`) they describe the Application before the sync.
    #[test]
    fn health_counts_only_from_a_comparison_after_the_sync_finished() {
        let compared = |at: &str, sync: &str, health: &str| {
            let mut s = ours(health, &[OLD, NEW]);
            s["reconciledAt"] = json!(at);
            s["sync"]["status"] = json!(sync);
            s
        };
        let mut retrying = status(
            operation("Running", "2026-12-03T10:00:05Z", None, "1.1"),
            "2026-12-03T10:00:01Z",
            "OutOfSync",
            "Healthy",
            &[OLD],
        );
        retrying["operationState"]["finishedAt"] = json!("2026-12-03T10:00:09Z");
        retrying["operationState"]["message"] =
            json!("Retrying attempt #1: one or more objects failed to apply");
        judged(vec![
            (
                "Degraded, last compared before the sync finished: stale",
                compared("2026-12-03T10:00:01Z", "OutOfSync", "Degraded"),
                NOW,
                "pending: synced at 2026-12-03T10:00:20Z, not yet compared again by Argo CD (status.reconciledAt 2026-12-03T10:00:01Z): health Degraded is from before the sync",
            ),
            (
                "Healthy, last compared before the sync finished: stale too",
                compared("2026-12-03T10:00:01Z", "OutOfSync", "Healthy"),
                NOW,
                "pending: synced at 2026-12-03T10:00:20Z, not yet compared again",
            ),
            (
                "compared in the sync's last second, still OutOfSync: before the sync",
                compared("2026-12-03T10:00:20Z", "OutOfSync", "Degraded"),
                NOW,
                "pending: synced at 2026-12-03T10:00:20Z, not yet compared again",
            ),
            (
                "compared in the sync's last second, Synced: after it",
                compared("2026-12-03T10:00:20Z", "Synced", "Degraded"),
                NOW,
                "failed: health is Degraded after the sync of the write",
            ),
            (
                "compared after the sync: Degraded fails",
                compared("2026-12-03T10:00:21Z", "Synced", "Degraded"),
                NOW,
                "failed: health is Degraded",
            ),
            (
                "a failed attempt being retried is Running with finishedAt: not a failure",
                retrying,
                NOW,
                "pending: the sync started at 2026-12-03T10:00:05Z is retrying after a failed attempt: Retrying attempt #1",
            ),
            (
                "a paused rollout says so",
                compared("2026-12-03T10:00:21Z", "Synced", "Suspended"),
                NOW,
                "pending: synced, the rollout is paused (health Suspended)",
            ),
            (
                "a paused rollout at the deadline says so",
                compared("2026-12-03T10:00:21Z", "Synced", "Suspended"),
                DEADLINE,
                "timed out: synced, the rollout is paused (health Suspended): a paused Deployment or Argo Rollout waits for someone to resume it at the deadline",
            ),
            (
                "Healthy while Pods of the old image are still there: not yet",
                compared("2026-12-03T10:00:21Z", "Synced", "Healthy"),
                NOW,
                "pending: Healthy, but Pods of the replaced 1.dkr.ecr.r.amazonaws.com/web:1.0 still run",
            ),
        ]);
    }

    #[test]
    fn the_record_decides_which_write_a_check_follows() {
        let live = ours("Healthy", &[NEW]);
        let later = record(json!({"time": "2026-12-03T10:05:00Z"}));
        let earlier = record(json!({"time": "2026-12-03T09:00:00Z"}));
        let reported =
            record(json!({"rollout": {"outcome": "confirmed", "at": "2026-12-03T10:00:30Z"}}));
        let pull = record(json!({"git": {"commit": "c1", "pullRequest": "https://example/pr/1"}}));
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "a newer write of ours supersedes",
                app(&later, live.clone()),
                "superseded at 2026-12-03T10:05:00Z",
            ),
            (
                "a message naming a write newer than the record is not ours",
                app(&earlier, live.clone()),
                "Permanent.NotOurWrite: the message names a write at 2026-12-03T10:00:00.6Z",
            ),
            (
                "an outcome recorded by an earlier delivery is not reported again",
                app(&reported, live.clone()),
                "reported confirmed",
            ),
            (
                "a pull request's commit is not followed",
                app(&pull, live.clone()),
                "unfollowed: the write went to a pull request",
            ),
            (
                "no record at all",
                json!({"metadata": {}, "status": live}),
                "unfollowed: the Application no longer carries our audit record",
            ),
        ];
        for (case, app, expected) in cases {
            let got = verdict(&app, NOW);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }

    /// Our record as a patch writes it: where the tag went.
    fn placed(extra: Value) -> String {
        let mut record: Value = serde_json::from_str(&record(extra)).unwrap();
        record["images"][0]["at"] = json!([{"list": "/spec/source/helm/parameters",
            "name": "image.tag", "value": "1.1"}]);
        record.to_string()
    }

    fn with_spec_tag(mut app: Value, tag: &str, manager: &str) -> Value {
        app["spec"]["source"] = source(tag);
        app["metadata"]["managedFields"] = json!([{"manager": manager, "operation": "Update",
            "time": "2026-12-03T10:00:05Z",
            "fieldsV1": {"f:spec": {"f:source": {"f:helm": {"f:parameters": {}}}}}}]);
        app
    }

    /// An operation started by `user` after the write, syncing the source at `tag` explicitly
    /// (as `argocd app rollback` does), Succeeded and compared after.
    fn by_user(user: &str, tag: &str, images: &[&str]) -> Value {
        let mut op = operation(
            "Succeeded",
            "2026-12-03T10:00:40Z",
            Some("2026-12-03T10:00:50Z"),
            tag,
        );
        op["operation"]["initiatedBy"] = json!({"username": user});
        status(op, "2026-12-03T10:00:55Z", "OutOfSync", "Healthy", images)
    }

    #[test]
    fn a_write_someone_took_back_ends_its_check_as_taken_back_not_failed() {
        let placed = placed(json!({}));
        let running_old = ours_status_old();
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "a person edited the tag back before any sync: taken back, by whom",
                with_spec_tag(app(&placed, running_old.clone()), "1.0", "kubectl-edit"),
                "taken back: the spec no longer asks for 1.dkr.ecr.r.amazonaws.com/web:1.1: taken back by kubectl-edit",
            ),
            (
                "the owner re-applied its manifest: taken back, and said to be written again",
                with_spec_tag(
                    app(&placed, running_old.clone()),
                    "1.0",
                    "argocd-controller",
                ),
                "taken back: the spec no longer asks for 1.dkr.ecr.r.amazonaws.com/web:1.1: the Application's owner (argocd-controller) re-applied",
            ),
            (
                "another field edited since our sync, our value standing: judged live by it",
                {
                    let mut app = app(&placed, ours("Healthy", &[NEW]));
                    app["spec"]["source"]["helm"]["parameters"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"name": "replicas", "value": "3"}));
                    app
                },
                "live",
            ),
            (
                "argocd app rollback by a person after the write: taken back, the spec untouched",
                app(&placed, by_user("admin", "1.0", &[OLD])),
                "taken back: argocd app rollback by admin at 2026-12-03T10:00:40Z",
            ),
            (
                "our own sync of an explicit source is no rollback",
                app(&placed, by_user(INITIATOR, "1.0", &[OLD])),
                "pending",
            ),
            (
                "a person's sync of the spec (our value) is no rollback",
                app(&placed, by_user("admin", "1.1", &[NEW])),
                "pending",
            ),
        ];
        for (case, app, expected) in cases {
            let got = verdict(&app, NOW);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }

    /// Argo CD has not synced since an hour before the write.
    fn ours_status_old() -> Value {
        let op = operation(
            "Succeeded",
            "2026-12-03T09:00:00Z",
            Some("2026-12-03T09:00:20Z"),
            "1.0",
        );
        status(op, "2026-12-03T10:00:30Z", "OutOfSync", "Healthy", &[OLD])
    }

    #[test]
    fn an_earlier_write_is_followed_per_image_after_a_later_write_of_another() {
        let worker = "1.dkr.ecr.r.amazonaws.com/worker";
        let later = json!({"time": "2026-12-03T10:00:05Z", "eventId": "e2",
            "images": [{"image": worker, "from": "v1", "to": "v2"}],
            "earlier": [{"image": IMAGE, "from": "1.0", "to": "1.1",
                "time": "2026-12-03T10:00:00.6Z"}]});
        let degraded = ours("Degraded", &[NEW]);
        assert!(
            verdict(&app(&later.to_string(), degraded.clone()), NOW)
                .starts_with("failed: health is Degraded"),
            "the earlier write of the image is still judged"
        );
        let mut moved_again = later.clone();
        moved_again["images"][0]["image"] = json!(IMAGE);
        moved_again["earlier"] = json!([]);
        assert!(
            verdict(&app(&moved_again.to_string(), degraded.clone()), NOW)
                .starts_with("superseded at 2026-12-03T10:00:05Z"),
            "the same image written again supersedes"
        );
        let mut reported = later.clone();
        reported["earlier"][0]["rollout"] = json!({"outcome": "failed"});
        assert_eq!(
            verdict(&app(&reported.to_string(), degraded), NOW),
            "reported failed"
        );
        let record = AuditRecord::from_json(&later.to_string(), later.clone()).unwrap();
        let followed = record.write_at(WRITE).unwrap();
        let written = recorded(&followed, Outcome::Failed, "Degraded", NOW);
        assert_eq!(written["earlier"][0]["rollout"]["outcome"], "failed");
        assert!(
            written.get("rollout").is_none(),
            "the later write's own is untouched"
        );
    }

    #[test]
    fn a_sync_of_ours_keeps_an_argocd_app_rollback_of_another_image() {
        let worker_place = json!([{"list": "/spec/source/helm/parameters",
            "name": "worker.tag", "value": "v2"}]);
        let app_place = json!([{"list": "/spec/source/helm/parameters",
            "name": "image.tag", "value": "1.1"}]);
        let record = json!({"time": "2026-12-03T10:05:00Z", "eventId": "e2",
            "images": [{"image": "r/worker", "from": "v1", "to": "v2", "at": worker_place}],
            "earlier": [{"image": IMAGE, "from": "1.0", "to": "1.1", "at": app_place,
                "time": "2026-12-03T10:00:00.6Z"}]});
        let spec = |web: &str, worker: &str| {
            json!({"repoURL": "https://git.example/web", "targetRevision": "main",
                "helm": {"parameters": [{"name": "image.tag", "value": web},
                    {"name": "worker.tag", "value": worker}]}})
        };
        let rolled_back = |user: &str| {
            json!({"metadata": {"resourceVersion": "9",
                    "annotations": {AUDIT_ANNOTATION: record.to_string()}},
                "spec": {"source": spec("1.1", "v2")},
                "status": {"operationState": {"phase": "Succeeded",
                    "operation": {"initiatedBy": {"username": user},
                        "sync": {"source": spec("1.0", "v1")}}}}})
        };
        let (patch, kept) = start_sync(&rolled_back("admin"), None);
        assert_eq!(kept, [IMAGE]);
        assert_eq!(
            patch[1]["value"]["sync"]["source"],
            spec("1.0", "v2"),
            "the spec, with the rolled-back image as rolled back"
        );
        let (patch, kept) = start_sync(&rolled_back(INITIATOR), None);
        assert_eq!(kept, [IMAGE], "our own sync that kept it keeps it again");
        assert_eq!(patch[1]["value"]["sync"]["source"], spec("1.0", "v2"));
        let mut synced_spec = rolled_back("admin");
        synced_spec["status"]["operationState"]["operation"]["sync"] = json!({});
        let (patch, kept) = start_sync(&synced_spec, None);
        assert!(kept.is_empty(), "a sync of the spec since: nothing stands");
        assert!(patch[1]["value"]["sync"].get("source").is_none());
    }

    #[test]
    fn a_commit_is_live_once_its_revision_or_a_later_one_with_our_images_synced() {
        let ours = record(json!({"git": {"commit": "c1", "pullRequest": null}}));
        let at_revision = json!({"operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:00:30Z",
                "finishedAt": "2026-12-03T10:00:31Z", "syncResult": {"revision": "c1"}},
            "reconciledAt": "2026-12-03T10:00:32Z",
            "sync": {"status": "Synced", "revision": "c1"}, "summary": {"images": [NEW]}, "health": {"status": "Healthy"}});
        assert_eq!(verdict(&app(&ours, at_revision.clone()), NOW), "live");
        let mut later_revision = at_revision.clone();
        later_revision["sync"]["revision"] = json!("c2");
        later_revision["operationState"]["syncResult"]["revision"] = json!("c2");
        assert_eq!(verdict(&app(&ours, later_revision.clone()), NOW), "live");
        // A later revision synced Healthy running what the write replaced: reverted in Git.
        let mut reverted = later_revision;
        reverted["summary"]["images"] = json!([OLD]);
        assert!(
            verdict(&app(&ours, reverted.clone()), NOW)
                .starts_with("taken back: Git no longer asks for it: revision c2 compared at"),
            "{}",
            verdict(&app(&ours, reverted.clone()), NOW)
        );
        // Running neither ours nor what it replaced: not told, still awaited.
        let mut third = reverted.clone();
        third["summary"]["images"] = json!(["1.dkr.ecr.r.amazonaws.com/web:0.9"]);
        assert!(verdict(&app(&ours, third), NOW).starts_with("pending: never synced"));
        // Not yet compared after the revert's sync: not told yet.
        let mut stale = reverted;
        stale["reconciledAt"] = json!("2026-12-03T10:00:20Z");
        assert!(verdict(&app(&ours, stale), NOW).starts_with("pending"));
        // Synced at the old revision, before the commit: not ours.
        let mut old = at_revision;
        old["sync"]["revision"] = json!("c0");
        old["operationState"]["syncResult"]["revision"] = json!("c0");
        old["operationState"]["startedAt"] = json!("2026-12-03T09:58:59Z");
        old["operationState"]["finishedAt"] = json!("2026-12-03T09:59:00Z");
        assert!(verdict(&app(&ours, old), NOW).starts_with("pending: the last operation started"));
    }

    /// Multi-source: `syncResult.revisions`/`sources` (with `revision` empty) and
    /// `history[].revisions`, in `spec.sources` order.
    #[test]
    fn a_multi_source_sync_is_read_from_its_revisions_and_sources() {
        let commit = record(json!({"git": {"commit": "c1", "pullRequest": null}}));
        let sources = json!([source("1.1"), {"repoURL": "https://charts.example", "chart": "db", "targetRevision": "1.2.0"}]);
        let multi = |revisions: Value, health: &str, images: &[&str]| {
            json!({"operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:00:30Z",
                    "finishedAt": "2026-12-03T10:00:31Z",
                    "syncResult": {"revision": "", "revisions": revisions, "sources": sources}},
                "reconciledAt": "2026-12-03T10:00:32Z",
                "sync": {"status": "Synced", "revisions": revisions},
                "summary": {"images": images}, "health": {"status": health,
                    "message": "Deployment \"web\" exceeded its progress deadline"}})
        };
        let with_sources = |record: &str, status: Value| {
            let mut app = app(record, status);
            app["spec"] = json!({"sources": sources});
            app
        };
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "at our commit, running, Healthy",
                with_sources(&commit, multi(json!(["c1", "1.2.0"]), "Healthy", &[NEW])),
                "live",
            ),
            (
                "at our commit, its Pods refused, Degraded: failed, not never synced",
                with_sources(&commit, multi(json!(["c1", "1.2.0"]), "Degraded", &[OLD])),
                "failed: health is Degraded after the sync of the write",
            ),
            (
                "at an older commit started before the write",
                with_sources(&commit, {
                    let mut s = multi(json!(["c0", "1.2.0"]), "Healthy", &[OLD]);
                    s["operationState"]["startedAt"] = json!("2026-12-03T09:59:00Z");
                    s
                }),
                "pending: the last operation started at 2026-12-03T09:59:00Z",
            ),
            (
                "a spec write synced by its sources",
                with_sources(
                    &record(json!({})),
                    multi(json!(["c0", "1.2.0"]), "Healthy", &[NEW]),
                ),
                "live",
            ),
            (
                "a spec write, the sources synced not the spec's",
                with_sources(&record(json!({})), {
                    let mut s = multi(json!(["c0", "1.2.0"]), "Healthy", &[NEW]);
                    s["operationState"]["syncResult"]["sources"][1]["targetRevision"] =
                        json!("1.1.0");
                    s
                }),
                "pending: never synced after the write",
            ),
        ];
        for (case, app, expected) in cases {
            let got = verdict(&app, NOW);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
        // The history keeps what an operation replaced since synced.
        let mut replaced = multi(json!(["c1", "1.2.0"]), "Healthy", &[NEW]);
        replaced["operationState"] =
            json!({"phase": "Running", "startedAt": "2026-12-03T10:00:50Z"});
        replaced["history"] = json!([{"id": 3, "revisions": ["c1", "1.2.0"], "sources": sources,
            "deployStartedAt": "2026-12-03T10:00:30Z", "deployedAt": "2026-12-03T10:00:31Z"}]);
        assert_eq!(verdict(&with_sources(&commit, replaced), NOW), "live");
    }

    #[test]
    fn a_digest_written_is_recognised_however_the_manifests_name_it() {
        let image = |to: &str| AuditedImage {
            alias: None,
            image: IMAGE.into(),
            from: None,
            to: to.into(),
            pushed: None,
            digest: None,
            places: Vec::new(),
        };
        let digest = "sha256:0123";
        let cases: &[(&str, &[&str], bool)] = &[
            ("1.1", &["1.dkr.ecr.r.amazonaws.com/web:1.1"], true),
            ("1.1", &["1.dkr.ecr.r.amazonaws.com/web:1.10"], false),
            ("1.1", &["1.dkr.ecr.r.amazonaws.com/other:1.1"], false),
            (
                "1.1@sha256:0123",
                &["1.dkr.ecr.r.amazonaws.com/web:1.1@sha256:0123"],
                true,
            ),
            (
                "1.1@sha256:0123",
                &["1.dkr.ecr.r.amazonaws.com/web@sha256:0123"],
                true,
            ),
            (digest, &["1.dkr.ecr.r.amazonaws.com/web@sha256:0123"], true),
            (
                digest,
                &["1.dkr.ecr.r.amazonaws.com/web@sha256:9999"],
                false,
            ),
        ];
        for (to, running, expected) in cases {
            assert_eq!(runs(running, &image(to)), *expected, "{to} in {running:?}");
        }
    }

    #[test]
    fn lead_times_run_from_the_push_and_from_the_write() {
        let read = AuditRecord::of(&app(&record(json!({})), json!({}))).unwrap();
        let t = timings(&read, datetime!(2026-12-03 10:01:00.600 UTC));
        assert_eq!(t.write_to_live_seconds, 60.0);
        assert_eq!(t.lead_seconds, vec![70.6]);
    }

    #[test]
    fn one_write_has_one_event_name_per_application() {
        let read = AuditRecord::of(&app(&record(json!({})), json!({}))).unwrap();
        let a = event(
            &app(&read.text, json!({})),
            &read,
            Outcome::Confirmed,
            "ok",
            NOW,
        );
        let b = event(
            &app(&read.text, json!({})),
            &read,
            Outcome::Confirmed,
            "ok",
            DEADLINE,
        );
        assert_eq!(a["metadata"]["name"], b["metadata"]["name"]);
        assert!(
            a["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("web.rollout-")
        );
        assert_eq!(
            (a["reason"].as_str(), a["type"].as_str()),
            (Some("RolloutConfirmed"), Some("Normal"))
        );
        let failed = event(
            &app(&read.text, json!({})),
            &read,
            Outcome::Failed,
            "Degraded",
            NOW,
        );
        assert_eq!(
            (failed["reason"].as_str(), failed["type"].as_str()),
            (Some("RolloutFailed"), Some("Warning"))
        );
        let recorded = recorded(&read, Outcome::Failed, "Degraded", NOW);
        assert_eq!(recorded["rollout"]["outcome"], "failed");
        assert_eq!(recorded["images"], read.json["images"]);
    }

    #[test]
    fn a_sync_is_started_only_where_asked_and_nothing_runs() {
        let base = |annotation: Option<&str>, automated: bool, phase: &str| {
            let mut app = json!({"metadata": {"resourceVersion": "9", "annotations": {}},
                "spec": {"syncPolicy": {}}, "status": {"operationState": {"phase": phase}}});
            if let Some(value) = annotation {
                app["metadata"]["annotations"][SYNC_ANNOTATION] = json!(value);
            }
            if automated {
                app["spec"]["syncPolicy"]["automated"] = json!({});
            }
            app
        };
        let cases: Vec<(&str, Value, Result<bool, &str>)> = vec![
            ("not asked", base(None, false, "Succeeded"), Ok(false)),
            ("asked", base(Some("true"), false, "Succeeded"), Ok(true)),
            (
                "asked with false",
                base(Some("false"), false, "Succeeded"),
                Ok(false),
            ),
            (
                "automated sync does it itself",
                base(Some("true"), true, "Succeeded"),
                Ok(false),
            ),
            (
                "automated sync turned off (`enabled: false`, Argo CD 3.1+) syncs nothing",
                {
                    let mut app = base(Some("true"), true, "Succeeded");
                    app["spec"]["syncPolicy"]["automated"]["enabled"] = json!(false);
                    app
                },
                Ok(true),
            ),
            (
                "an operation is running",
                base(Some("true"), false, "Running"),
                Err("an operation is running"),
            ),
            (
                "unreadable",
                base(Some("yes please"), false, "Succeeded"),
                Err("is not true or false"),
            ),
        ];
        for (case, app, expected) in cases {
            match (sync_wanted(&app), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{case}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{case}: {got}"),
                (got, want) => panic!("{case}: {got:?}, expected {want:?}"),
            }
        }
        let (patch, kept) = start_sync(&base(Some("true"), false, "Succeeded"), Some("c1"));
        assert!(kept.is_empty());
        assert_eq!(
            patch[0]["value"], "9",
            "guarded by the resourceVersion read"
        );
        assert_eq!(patch[1]["value"]["initiatedBy"]["username"], INITIATOR);
        assert_eq!(patch[1]["value"]["sync"]["revision"], "c1");
    }

    #[test]
    fn the_timeout_is_the_applications_or_fifteen_minutes() {
        let with = |value: &str| json!({"metadata": {"annotations": {TIMEOUT_ANNOTATION: value}}});
        assert_eq!(timeout(&json!({})), Ok(DEFAULT_TIMEOUT));
        assert_eq!(timeout(&with("1h")), Ok(Duration::from_secs(3600)));
        assert!(
            timeout(&with("soon"))
                .unwrap_err()
                .contains(TIMEOUT_ANNOTATION)
        );
    }

    /// `argocd app rollback` around writes of two images: what our sync keeps and what a
    /// check of the earlier write concludes, on states Argo CD and our own syncs produce.
    mod around_a_rollback {
        use super::super::*;
        use super::{judge, start_sync};
        use crate::appconfig::annotations::AUDIT_ANNOTATION;
        use time::macros::datetime;

        const WEB: &str = "1.dkr.ecr.r.amazonaws.com/web";
        const WORKER: &str = "1.dkr.ecr.r.amazonaws.com/worker";

        fn spec(web: &str, worker: &str) -> Value {
            json!({"repoURL": "https://git.example/web", "targetRevision": "main",
                "helm": {"parameters": [{"name": "image.tag", "value": web},
                    {"name": "worker.tag", "value": worker}]}})
        }

        fn place(name: &str, value: &str) -> Value {
            json!([{"list": "/spec/source/helm/parameters", "name": name, "value": value}])
        }

        /// A record: our last write moved worker to `worker` at 10:05; web's write (to `web`, at
        /// `web_at`) is carried under `earlier`.
        fn record(web: &str, web_at: &str, worker: &str) -> String {
            json!({"time": "2026-12-03T10:05:00Z", "eventId": "e2",
                "images": [{"alias": "worker", "image": WORKER, "from": "v1", "to": worker,
                    "at": place("worker.tag", worker)}],
                "earlier": [{"alias": "web", "image": WEB, "from": "1.0", "to": web,
                    "at": place("image.tag", web), "time": web_at}]})
            .to_string()
        }

        fn app(record: &str, spec_source: Value, status: Value) -> Value {
            json!({"metadata": {"namespace": "argocd", "name": "web", "uid": "u", "resourceVersion": "9",
                    "annotations": {AUDIT_ANNOTATION: record}},
                "spec": {"source": spec_source}, "status": status})
        }

        /// After `argocd app rollback` of web (admin), a sync of ours for a worker write kept the
        /// rollback (explicit source with web at 1.0) but that sync FAILED (e.g. the new worker image
        /// is broken). The rollback still stands (Argo CD's history has no entry for a failed sync;
        /// the Pods run web 1.0), so the next sync we start for the next worker write must keep it
        /// too: it must not sync the spec, which still asks for web 1.1 — that would redeploy the
        /// very image a person rolled back.
        #[test]
        fn a_failed_sync_of_ours_that_kept_a_rollback_still_keeps_it_next_time() {
            let rec = record("1.1", "2026-12-03T10:00:00Z", "v3");
            let status = json!({
                "operationState": {"phase": "Failed", "startedAt": "2026-12-03T10:05:01Z",
                    "finishedAt": "2026-12-03T10:05:30Z", "message": "one or more objects failed to apply",
                    "operation": {"initiatedBy": {"username": INITIATOR},
                        "sync": {"source": spec("1.0", "v2")}}},
                "history": [
                    {"id": 1, "revision": "c0", "source": spec("1.1", "v1"),
                     "deployStartedAt": "2026-12-03T10:00:01Z", "deployedAt": "2026-12-03T10:00:20Z",
                     "initiatedBy": {"username": INITIATOR}},
                    {"id": 2, "revision": "c0", "source": spec("1.0", "v1"),
                     "deployStartedAt": "2026-12-03T10:02:00Z", "deployedAt": "2026-12-03T10:02:20Z",
                     "initiatedBy": {"username": "admin"}}],
                "summary": {"images": [format!("{WEB}:1.0"), format!("{WORKER}:v1")]}});
            let app = app(&rec, spec("1.1", "v3"), status);
            let (patch, kept) = start_sync(&app, None);
            assert_eq!(
                kept,
                [WEB],
                "the rollback of web still stands after our failed sync that kept it; patch {patch}"
            );
            assert_eq!(patch[1]["value"]["sync"]["source"], spec("1.0", "v3"));
        }

        /// The same, with our keeping sync Succeeded: kept again.
        #[test]
        fn a_succeeded_sync_of_ours_that_kept_a_rollback_keeps_it() {
            let rec = record("1.1", "2026-12-03T10:00:00Z", "v3");
            let status = json!({
                "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:05:01Z",
                    "finishedAt": "2026-12-03T10:05:30Z",
                    "operation": {"initiatedBy": {"username": INITIATOR},
                        "sync": {"source": spec("1.0", "v2")}}}});
            let app = app(&rec, spec("1.1", "v3"), status);
            let (_patch, kept) = start_sync(&app, None);
            assert_eq!(kept, [WEB]);
        }

        /// `argocd app rollback` of web (admin, 10:02) was the last operation, then web's FIX was
        /// written by us at 10:04 (pushed after the rollback, so it rolls out by design), but its sync
        /// could not start (the rollback's operation was still running, or the patch raced). A worker
        /// write at 10:05 then starts a sync. The rollback predates web's last write: it decided
        /// against 1.1, not against the fix 1.2. Our sync must deploy web's fix (the spec), not keep
        /// web at the rolled-back 1.0 — otherwise the fix is silently never deployed.
        #[test]
        fn a_rollback_older_than_the_images_last_write_is_not_kept() {
            let rec = record("1.2", "2026-12-03T10:04:00Z", "v2");
            let status = json!({
                "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:02:00Z",
                    "finishedAt": "2026-12-03T10:02:20Z",
                    "operation": {"initiatedBy": {"username": "admin"},
                        "sync": {"source": spec("1.0", "v1")}}}});
            let app = app(&rec, spec("1.2", "v2"), status);
            let (patch, kept) = start_sync(&app, None);
            assert!(
                kept.is_empty(),
                "a rollback from before web's last write (the fix) must not be kept: kept {kept:?}, patch {patch}"
            );
        }

        /// Web written 1.1 at 10:00 (carried now), its check still pending (Pods still Progressing);
        /// admin ran `argocd app rollback` of web at 10:02 (history entry by admin, web 1.0); then a
        /// worker write at 10:05 started our sync that KEPT web's rollback. The next check of web's
        /// write reads the state after our sync: the write was taken back by a person's rollback, so
        /// the verdict must be TakenBack — not Pending until a RolloutTimedOut (Warning, `failure`
        /// commit status, hold-on-failure for a write a person deliberately took back).
        #[test]
        fn a_carried_writes_argocd_app_rollback_is_taken_back_after_our_keeping_sync() {
            let rec = record("1.1", "2026-12-03T10:00:00Z", "v2");
            let status = json!({
                "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:05:01Z",
                    "finishedAt": "2026-12-03T10:05:20Z",
                    "operation": {"initiatedBy": {"username": INITIATOR},
                        "sync": {"source": spec("1.0", "v2")}},
                    "syncResult": {"revision": "c0", "source": spec("1.0", "v2")}},
                "history": [
                    {"id": 1, "revision": "c0", "source": spec("1.1", "v1"),
                     "deployStartedAt": "2026-12-03T10:00:01Z", "deployedAt": "2026-12-03T10:00:20Z",
                     "initiatedBy": {"username": INITIATOR}},
                    {"id": 2, "revision": "c0", "source": spec("1.0", "v1"),
                     "deployStartedAt": "2026-12-03T10:02:00Z", "deployedAt": "2026-12-03T10:02:20Z",
                     "initiatedBy": {"username": "admin"}},
                    {"id": 3, "revision": "c0", "source": spec("1.0", "v2"),
                     "deployStartedAt": "2026-12-03T10:05:01Z", "deployedAt": "2026-12-03T10:05:20Z",
                     "initiatedBy": {"username": INITIATOR}}],
                "reconciledAt": "2026-12-03T10:05:25Z", "sync": {"status": "OutOfSync"},
                "health": {"status": "Healthy"},
                "summary": {"images": [format!("{WEB}:1.0"), format!("{WORKER}:v2")]}});
            let app = app(&rec, spec("1.1", "v2"), status);
            let write: OffsetDateTime = datetime!(2026-12-03 10:00:00 UTC);
            let verdict = judge(
                &app,
                write,
                datetime!(2026-12-03 10:05:30 UTC),
                datetime!(2026-12-03 10:15:00 UTC),
            )
            .unwrap();
            assert!(
                matches!(verdict, Verdict::TakenBack(_)),
                "web's write was taken back by argocd app rollback (admin); got {verdict:?}"
            );
            // At the deadline it must not become a timeout (a failure) either.
            let late = judge(
                &app,
                write,
                datetime!(2026-12-03 10:16:00 UTC),
                datetime!(2026-12-03 10:15:00 UTC),
            )
            .unwrap();
            assert!(
                !matches!(late, Verdict::TimedOut(_)),
                "a write a person rolled back must not time out as a failure; got {late:?}"
            );
        }

        /// Web's check delivered right after the admin rollback (the rollback is the current
        /// operation): TakenBack.
        #[test]
        fn an_argocd_app_rollback_as_the_current_operation_is_taken_back() {
            let rec = json!({"time": "2026-12-03T10:00:00Z", "eventId": "e1",
                "images": [{"alias": "web", "image": WEB, "from": "1.0", "to": "1.1",
                    "at": place("image.tag", "1.1")}]})
            .to_string();
            let status = json!({
                "operationState": {"phase": "Succeeded", "startedAt": "2026-12-03T10:02:00Z",
                    "finishedAt": "2026-12-03T10:02:20Z",
                    "operation": {"initiatedBy": {"username": "admin"},
                        "sync": {"source": spec("1.0", "v1")}},
                    "syncResult": {"revision": "c0", "source": spec("1.0", "v1")}},
                "reconciledAt": "2026-12-03T10:02:25Z", "sync": {"status": "OutOfSync"},
                "health": {"status": "Healthy"},
                "summary": {"images": [format!("{WEB}:1.0")]}});
            let app = app(&rec, spec("1.1", "v1"), status);
            let verdict = judge(
                &app,
                datetime!(2026-12-03 10:00:00 UTC),
                datetime!(2026-12-03 10:02:30 UTC),
                datetime!(2026-12-03 10:15:00 UTC),
            )
            .unwrap();
            assert!(matches!(verdict, Verdict::TakenBack(_)), "{verdict:?}");
        }
    }
}
