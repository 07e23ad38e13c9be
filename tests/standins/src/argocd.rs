//! A stand-in for Argo CD's application controller that moves an Application's status through
//! time as the controller does, one scripted step at a time. Each step is stamped with the
//! stand-ins' clock ([`crate::clock::SimClock`]); a test moves that clock (and the function's,
//! the same one) with [`crate::kube::KubeState::step_to`], so no test waits on the wall clock.
//! The steps follow Argo CD's controller source (argoproj/argo-cd, controller/):
//!
//! - **Refresh** (`appcontroller.go` `needRefreshAppStatus`, `processAppRefreshQueueItem`;
//!   `state.go` `CompareAppState`): a write of the spec or the `argocd.argoproj.io/refresh`
//!   annotation is compared at the next refresh ([`Timeline::refresh`] later), not before:
//!   `sync.status` OutOfSync or Synced, `sync.comparedTo`, `sync.revision(s)`, `reconciledAt`
//!   (the refresh's time), health from the live workload, the refresh annotation removed.
//! - **Automated sync** (`appcontroller.go` `autoSync`, `alreadyAttemptedSync`; `types.go`
//!   `IsAutomatedSyncEnabled`): only with `syncPolicy.automated` set and `automated.enabled`
//!   not `false`, only OutOfSync and with no operation set; the same reconciliation writes
//!   `operation` (`sync.source(s)`, `sync.revision(s)`, `initiatedBy.automated`, `retry`) and
//!   nulls `operationState` (`util/argo/argo.go` `SetAppOperation`). A source and revision
//!   already attempted are not synced again: a failed attempt leaves a `SyncError` condition.
//! - **Operation** (`appcontroller.go` `processRequestedAppOperation`, `setOperationState`;
//!   `sync.go` `SyncAppState`): [`Timeline::start`] after the operation is set, `{phase:
//!   Running, startedAt}`; [`Timeline::sync`] later Succeeded (or Failed), with `finishedAt`,
//!   `syncResult.revision(s)` and `source(s)` of what the operation synced (the spec as it was
//!   when the operation was written: an operation that started before a later spec write
//!   synced the older spec), `operation` nulled. A failing sync is retried
//!   ([`Timeline::retries`]): phase Running with `finishedAt` and `retryCount`, "Retrying
//!   attempt #N", the next attempt 5 s × 2^(N−1) later (`types.go` `NextRetryAt`).
//! - **History** (`state.go` `persistRevisionHistory`): one entry per successful sync (`id`
//!   one above the last, `revision`+`source` or `revisions`+`sources`, `deployStartedAt` =
//!   `startedAt`, `deployedAt`, `initiatedBy`), trimmed to `spec.revisionHistoryLimit`
//!   (default 10, `types.go` `Trunc`).
//! - **Stale status** (`appcontroller.go` `setOperationState` requests a refresh; the
//!   operation worker never writes health): `sync` and `health` stay as last compared from
//!   `finishedAt` until the post-sync refresh [`Timeline::post_sync_refresh`] later.
//! - **Health** (gitops-engine `pkg/health/health_deployment.go`; `controller/health.go`
//!   `setApplicationHealth`): from the post-sync refresh the workload is Progressing while it
//!   rolls ([`Timeline::rollout`]), then Healthy, or Degraded at its progress deadline;
//!   Suspended for a paused rollout. Those later changes come from resource events (level 1):
//!   `health.lastTransitionTime` moves, `reconciledAt` does not.
//! - **Images** (`controller/cache/info.go` `populatePodInfo`; `types.go`
//!   `ApplicationTree.GetSummary`): `summary.images` lists the images of the Pods running,
//!   not of the manifests: from the sync's apply both the old and the new image, the old one
//!   until its Pods are gone ([`Timeline::termination`] after Healthy).
//! - **Multi-source** (`types.go`): `sources` in the operation, `sync.revisions`,
//!   `syncResult.revisions`/`sources` with `revision` empty, `history[].revisions`/`sources`,
//!   in `spec.sources` order. A source tracking a branch resolves to the rendered revision; a
//!   pinned one (a chart version) to itself.
//! - **`argocd app rollback`** ([`crate::kube::KubeState::rollback`], `server/application/
//!   application.go` `Rollback`): an operation naming a history entry's revision(s) and
//!   source(s), initiated by a user, is synced as named (a revision rendered before applies
//!   what it rendered to, as the repo-server's cache would), gets its own history entry
//!   (`initiatedBy.username`), and leaves the spec alone, so the next refresh finds the
//!   Application OutOfSync.
//!
//! - **Git polling** ([`Timeline::poll`], `appcontroller.go` `needRefreshAppStatus`: a
//!   `reconciledAt` older than the timeout): every Application the controller reconciles is
//!   refreshed at each poll, so a commit nobody announced is compared at the next one. The
//!   EKS capability for Argo CD polls every 6 minutes ([`Timeline::eks_capability`]).
//! - **The EKS capability's hub** ([`Controller::hub`]): the managed controllers reconcile
//!   the Applications of one namespace only; a write elsewhere is never acted on.
//!
//! A [`Controller::new`] script runs every step at once, its delay after the write (benches
//! and examples, on the wall clock); [`Controller::timed`] spaces them as a [`Timeline`] says.
//! Not modelled: self-heal's partial syncs, sync waves and hooks; the poll's jitter.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::clock::SimClock;

/// How an operation ends, and what the workload does after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Synced, the new image rolled out, Healthy.
    Healthy,
    /// Synced, the new Pods never ready: Progressing, then Degraded at the progress deadline.
    DegradedAfterSync,
    /// Synced, the new ReplicaSet's Pods refused (a quota): only the old Pods run, then
    /// Degraded at the progress deadline.
    PodsRefused,
    /// Synced, Progressing for ever.
    StuckProgressing,
    /// Synced, the rollout paused (a paused Deployment or Argo Rollout): Suspended.
    Suspended,
    /// The sync operation fails (after its retries); nothing new runs.
    SyncFailed,
    /// The controller never acts.
    NeverSynced,
}

/// The time each step takes. All zero but the first: every step at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// From a write to the refresh that compares it.
    pub refresh: Duration,
    /// From an operation set to its `Running` patch.
    pub start: Duration,
    /// From `Running` to the attempt's end.
    pub sync: Duration,
    /// From `finishedAt` to the post-sync refresh (status stale until then).
    pub post_sync_refresh: Duration,
    /// From the post-sync refresh to the rollout's end (Healthy, or the progress deadline).
    pub rollout: Duration,
    /// From Healthy until the old Pods are gone from `summary.images`.
    pub termination: Duration,
    /// Retries of a failing sync before it ends Failed.
    pub retries: u32,
    /// Git polled (every Application refreshed) this often, from the controller's start;
    /// `None`: only writes and the refresh annotation are noticed.
    pub poll: Option<Duration>,
}

impl Timeline {
    /// Every step `delay` after the write.
    pub fn at_once(delay: Duration) -> Self {
        Self {
            refresh: delay,
            start: Duration::ZERO,
            sync: Duration::ZERO,
            post_sync_refresh: Duration::ZERO,
            rollout: Duration::ZERO,
            termination: Duration::ZERO,
            retries: 0,
            poll: None,
        }
    }

    /// A small Deployment on a quiet controller: compared 1 s after the write, Running 1 s
    /// later, synced in 4 s, re-compared 2 s after, rolled out in 20 s, old Pods gone at once.
    pub fn typical() -> Self {
        Self {
            refresh: Duration::from_secs(1),
            start: Duration::from_secs(1),
            sync: Duration::from_secs(4),
            post_sync_refresh: Duration::from_secs(2),
            rollout: Duration::from_secs(20),
            termination: Duration::ZERO,
            retries: 0,
            poll: None,
        }
    }

    /// [`Timeline::typical`] on the EKS capability for Argo CD, which polls Git every 6
    /// minutes (its default; a `reconciledAt` older than that is refreshed).
    pub fn eks_capability() -> Self {
        Self {
            poll: Some(Duration::from_secs(360)),
            ..Self::typical()
        }
    }
}

/// What the Application's source renders to, for a source the controller cannot render from
/// its spec (a Git write-back: the file lives in the Git stand-in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub revision: String,
    pub images: Vec<String>,
}

pub type Render = Arc<dyn Fn(&Value) -> Option<Rendered> + Send + Sync>;

/// The controller's script: how long each step takes, how each operation ends (the last
/// script repeats), and the clock it stamps status with.
#[derive(Clone)]
pub struct Controller {
    pub timeline: Timeline,
    pub scripts: Vec<Script>,
    pub render: Option<Render>,
    pub clock: Arc<SimClock>,
    /// The one namespace whose Applications it reconciles (the EKS capability's); `None`:
    /// every namespace.
    pub namespace: Option<String>,
}

impl Controller {
    /// Every step at once, `delay` after a write, on the wall clock.
    pub fn new(script: Script, delay: Duration) -> Self {
        Self::timed(script, Timeline::at_once(delay), Arc::new(SimClock::wall()))
    }

    /// Steps spaced as `timeline` says, on `clock`.
    pub fn timed(script: Script, timeline: Timeline, clock: Arc<SimClock>) -> Self {
        Self {
            timeline,
            scripts: vec![script],
            render: None,
            clock,
            namespace: None,
        }
    }

    /// The EKS capability for Argo CD on its hub cluster: only the Applications of
    /// `namespace` are reconciled.
    pub fn hub(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// Whether the controller reconciles Applications in `namespace`.
    pub fn reconciles(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == namespace)
    }

    /// The next operation ends as `script` says (the first as `new`/`timed` said).
    pub fn then(mut self, script: Script) -> Self {
        self.scripts.push(script);
        self
    }

    pub fn rendering(mut self, render: Render) -> Self {
        self.render = Some(render);
        self
    }

    fn script(&self, operation: usize) -> Script {
        let last = self.scripts.last().copied().unwrap_or(Script::Healthy);
        self.scripts.get(operation).copied().unwrap_or(last)
    }
}

/// What an operation syncs, or the last one applied.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    /// `spec.source` or `spec.sources`, normalised.
    sources: Value,
    /// One per source (one for a single source).
    revisions: Vec<String>,
    images: Vec<String>,
    multi: bool,
}

/// A step due for one Application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Refresh,
    Run,
    Finish,
    Retry,
    Rolled,
    Terminated,
}

/// What the controller knows of one Application.
#[derive(Debug, Default)]
struct Track {
    pending: Vec<(OffsetDateTime, u64, Step)>,
    /// The last sync applied, from the first write seen.
    live: Option<Target>,
    /// What the operation set is to sync (an automated one: the spec it was written from).
    planned: Option<Target>,
    syncing: Option<Target>,
    /// Images of the Pods running, and the workload's health.
    pods: Vec<String>,
    health: Value,
    /// Images of the rollout under way: the new ones alone, once the old Pods are gone.
    rolling_to: Vec<String>,
    attempt: u32,
    operations: usize,
    /// The images each revision rendered to, as the repo-server's cache keeps them: what an
    /// operation syncing an older revision (a rollback) applies.
    rendered: BTreeMap<String, Vec<String>>,
}

/// The controller running: its script and what it knows of each Application.
pub struct Run {
    pub controller: Controller,
    apps: BTreeMap<(String, String), Track>,
    sequence: u64,
    /// The last Git poll (the controller's start before the first).
    polled_at: OffsetDateTime,
}

impl Run {
    pub fn new(controller: Controller) -> Self {
        let polled_at = controller.clock.now();
        Self {
            controller,
            apps: BTreeMap::new(),
            sequence: 0,
            polled_at,
        }
    }

    /// The next Git poll, if the controller polls and it is due at or before `until`.
    pub fn poll_due(&self, until: OffsetDateTime) -> Option<OffsetDateTime> {
        let poll = self.controller.timeline.poll?;
        let at = self.polled_at + poll;
        (at <= until).then_some(at)
    }

    /// The Git poll at `at`: each of `apps` (every Application in the store) that the
    /// controller reconciles is refreshed now.
    pub fn poll(&mut self, at: OffsetDateTime, apps: &[((String, String), Value)]) {
        self.polled_at = at;
        if self.controller.script(0) == Script::NeverSynced {
            return;
        }
        for (key, app) in apps {
            if !self.controller.reconciles(&key.0) {
                continue;
            }
            self.sequence += 1;
            let sequence = self.sequence;
            let track = self.track(key.clone(), app);
            track.pending.push((at, sequence, Step::Refresh));
        }
    }

    /// What the controller knows of `key`, first learnt from `before`.
    fn track(&mut self, key: (String, String), before: &Value) -> &mut Track {
        let track = self.apps.entry(key).or_default();
        if track.live.is_none() {
            let mut images: Vec<String> = match before["status"]["summary"]["images"].as_array() {
                Some(images) => images
                    .iter()
                    .filter_map(|i| i.as_str().map(String::from))
                    .collect(),
                None => images_of_spec(&before["spec"]),
            };
            images.sort();
            images.dedup();
            let mut live = target(before, None);
            live.images = images.clone();
            track.live = Some(live);
            track.pods = images;
            track.health = match before["status"]["health"]["status"].as_str() {
                Some(_) => before["status"]["health"].clone(),
                None => json!({"status": "Healthy"}),
            };
        }
        track
    }

    /// How many sync operations the controller ran on an Application.
    pub fn operations(&self, key: &(String, String)) -> usize {
        self.apps.get(key).map_or(0, |t| t.operations)
    }

    /// A write by anyone but the controller, from `before` to `after`, at the clock's now: a
    /// spec or refresh-annotation change is compared at the next refresh; an operation set is
    /// run.
    pub fn observe(&mut self, key: (String, String), before: &Value, after: &Value) {
        if self.controller.script(0) == Script::NeverSynced || !self.controller.reconciles(&key.0) {
            return;
        }
        let now = self.controller.clock.now();
        let timeline = self.controller.timeline;
        let mut sequence = self.sequence;
        let track = self.track(key, before);
        let refresh = "argocd.argoproj.io/refresh";
        let refreshed = after["metadata"]["annotations"][refresh].is_string()
            && before["metadata"]["annotations"][refresh]
                != after["metadata"]["annotations"][refresh];
        let mut due = Vec::new();
        if before["spec"] != after["spec"] || refreshed {
            due.push((now + timeline.refresh, Step::Refresh));
        }
        if !after["operation"].is_null() && before["operation"] != after["operation"] {
            track.planned = None;
            due.push((now + timeline.start, Step::Run));
        }
        for (at, step) in due {
            sequence += 1;
            track.pending.push((at, sequence, step));
        }
        self.sequence = sequence;
    }

    /// Drops what the controller knows of a deleted Application.
    pub fn forget(&mut self, key: &(String, String)) {
        self.apps.remove(key);
    }

    /// The earliest step due at or before `until`, of any Application.
    pub fn next_due(&self, until: OffsetDateTime) -> Option<((String, String), OffsetDateTime)> {
        self.apps
            .iter()
            .flat_map(|(key, track)| {
                track
                    .pending
                    .iter()
                    .map(move |(at, seq, _)| (*at, *seq, key))
            })
            .filter(|(at, _, _)| *at <= until)
            .min_by_key(|(at, seq, _)| (*at, *seq))
            .map(|(at, _, key)| (key.clone(), at))
    }

    /// The earliest step due for any Application, however far ahead.
    pub fn next_at(&self) -> Option<OffsetDateTime> {
        self.apps
            .values()
            .flat_map(|t| t.pending.iter().map(|(at, _, _)| *at))
            .min()
    }

    /// Runs the earliest step due for `key` on `app`, stamped with its own time.
    pub fn step(&mut self, key: &(String, String), app: &mut Value) {
        let Some(track) = self.apps.get_mut(key) else {
            return;
        };
        let Some(index) = (0..track.pending.len()).min_by_key(|i| {
            let (at, seq, _) = track.pending[*i];
            (at, seq)
        }) else {
            return;
        };
        let (at, _, step) = track.pending.remove(index);
        let controller = self.controller.clone();
        let mut next = Vec::new();
        match step {
            Step::Refresh => refresh(&controller, track, app, at, &mut next),
            Step::Run => run(&controller, track, app, at, &mut next),
            Step::Finish => finish(&controller, track, app, at, &mut next),
            Step::Retry => retry(&controller, app, at, &mut next),
            Step::Rolled => rolled(&controller, track, app, at, &mut next),
            Step::Terminated => {
                track.pods = track.rolling_to.clone();
                app["status"]["summary"]["images"] = json!(track.pods);
            }
        }
        for (due, step) in next {
            self.sequence += 1;
            track.pending.push((due, self.sequence, step));
        }
    }
}

/// `metav1.Time` as Argo CD writes it: RFC 3339 in whole seconds.
pub fn stamp(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0)
        .unwrap_or(t)
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// Whether Argo CD syncs this Application by itself (`types.go` `IsAutomatedSyncEnabled`).
pub fn automated(app: &Value) -> bool {
    let automated = &app["spec"]["syncPolicy"]["automated"];
    automated.is_object() && automated["enabled"] != json!(false)
}

/// Whether a source tracks a branch (resolved to the rendered commit) rather than a pinned
/// version.
fn tracks_branch(source: &Value) -> bool {
    matches!(
        source["targetRevision"].as_str().unwrap_or(""),
        "" | "HEAD" | "main" | "master"
    )
}

/// What the spec (or the operation's copy of it) renders to now.
fn target(app: &Value, render: Option<&Render>) -> Target {
    let rendered = render.and_then(|render| render(app));
    let spec = &app["spec"];
    let multi = spec["sources"].is_array();
    let sources: Vec<Value> = match spec["sources"].as_array() {
        Some(sources) => sources.clone(),
        None => vec![spec["source"].clone()],
    };
    let revisions = sources
        .iter()
        .map(|source| match &rendered {
            Some(r) if tracks_branch(source) => r.revision.clone(),
            _ => source["targetRevision"]
                .as_str()
                .unwrap_or("HEAD")
                .to_string(),
        })
        .collect();
    let mut images = rendered.map_or_else(|| images_of_spec(spec), |r| r.images);
    images.sort();
    images.dedup();
    Target {
        sources: normalised(if multi {
            json!(sources)
        } else {
            spec["source"].clone()
        }),
        revisions,
        images,
        multi,
    }
}

/// What an operation that names its source(s) syncs (`argocd app rollback`: a history
/// entry's), or `None` for one that names none. A source tracking a branch at a revision
/// rendered before applies what that revision rendered to.
fn operation_target(sync: &Value, rendered: &BTreeMap<String, Vec<String>>) -> Option<Target> {
    let multi = sync["sources"].is_array();
    let sources: Vec<Value> = match sync["sources"].as_array() {
        Some(sources) => sources.clone(),
        None if sync["source"].is_object() => vec![sync["source"].clone()],
        None => return None,
    };
    let revisions: Vec<String> = match sync["revisions"].as_array() {
        Some(revisions) => revisions
            .iter()
            .filter_map(|r| r.as_str().map(String::from))
            .collect(),
        None => vec![sync["revision"].as_str().unwrap_or("HEAD").to_string()],
    };
    let mut images = Vec::new();
    for (source, revision) in sources.iter().zip(&revisions) {
        match rendered.get(revision).filter(|_| tracks_branch(source)) {
            Some(known) => images.extend(known.iter().cloned()),
            None => images.extend(images_of_spec(&json!({"source": source}))),
        }
    }
    images.sort();
    images.dedup();
    Some(Target {
        sources: normalised(if multi {
            json!(sources)
        } else {
            sources[0].clone()
        }),
        revisions,
        images,
        multi,
    })
}

/// A source with its empty parts dropped, as `util/argo/argo.go` `NormalizeApplicationSpec`
/// drops an empty `helm`/`kustomize`.
pub fn normalised(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, normalised(v)))
                .filter(|(_, v)| !v.is_null() && v != &json!({}))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(normalised).collect()),
        other => other,
    }
}

/// The operation's or the result's source fields for `target`.
fn sourced(target: &Target, mut into: Value) -> Value {
    if target.multi {
        into["sources"] = target.sources.clone();
        into["revisions"] = json!(target.revisions);
    } else {
        into["source"] = target.sources.clone();
        into["revision"] = json!(target.revisions.first().cloned().unwrap_or_default());
    }
    into
}

type Next = Vec<(OffsetDateTime, Step)>;

/// One reconciliation (`processAppRefreshQueueItem`): compare, health, then auto-sync.
fn refresh(
    controller: &Controller,
    track: &mut Track,
    app: &mut Value,
    at: OffsetDateTime,
    next: &mut Next,
) {
    let wanted = target(app, controller.render.as_ref());
    if controller.render.is_some() {
        for revision in &wanted.revisions {
            track
                .rendered
                .insert(revision.clone(), wanted.images.clone());
        }
    }
    let differs = track
        .live
        .as_ref()
        .is_none_or(|live| live.sources != wanted.sources || live.images != wanted.images);
    if let Some(annotations) = app["metadata"]["annotations"].as_object_mut() {
        annotations.remove("argocd.argoproj.io/refresh");
    }
    let mut sync = json!({"status": if differs { "OutOfSync" } else { "Synced" },
        "comparedTo": {"destination": app["spec"]["destination"]}});
    if wanted.multi {
        sync["comparedTo"]["sources"] = wanted.sources.clone();
        sync["revisions"] = json!(wanted.revisions);
    } else {
        sync["comparedTo"]["source"] = wanted.sources.clone();
        sync["revision"] = json!(wanted.revisions.first().cloned().unwrap_or_default());
    }
    let status = &mut app["status"];
    status["sync"] = sync;
    status["reconciledAt"] = json!(stamp(at));
    set_health(status, &track.health, at);
    status["summary"]["images"] = json!(track.pods);
    if !differs || !automated(app) || !app["operation"].is_null() {
        return;
    }
    // `alreadyAttemptedSync`: the same source and revisions are not synced twice.
    let last = &app["status"]["operationState"];
    let result = &last["syncResult"];
    let attempted = sourced(&wanted, json!({}));
    let same = ["source", "sources", "revision", "revisions"]
        .iter()
        .all(|k| normalised(result[*k].clone()) == normalised(attempted[*k].clone()));
    if same && !result.is_null() {
        if last["phase"] != "Succeeded" {
            app["status"]["conditions"] = json!([{"type": "SyncError", "lastTransitionTime": stamp(at),
                "message": format!("Failed last sync attempt to {:?}: {}", wanted.revisions, last["message"].as_str().unwrap_or(""))}]);
        }
        return;
    }
    let retry = match &app["spec"]["syncPolicy"]["retry"] {
        Value::Null => json!({"limit": 5}),
        retry => retry.clone(),
    };
    let sync = sourced(
        &wanted,
        json!({"prune": app["spec"]["syncPolicy"]["automated"]["prune"].as_bool().unwrap_or(false)}),
    );
    app["operation"] = json!({"sync": sync, "initiatedBy": {"automated": true}, "retry": retry});
    app["status"]["operationState"] = Value::Null;
    track.planned = Some(wanted);
    next.push((at + controller.timeline.start, Step::Run));
}

/// Health as `persistAppStatus` writes it: `lastTransitionTime` only on a change.
fn set_health(status: &mut Value, health: &Value, at: OffsetDateTime) {
    if status["health"]["status"] == health["status"]
        && status["health"]["message"] == health["message"]
    {
        return;
    }
    let mut health = health.clone();
    health["lastTransitionTime"] = json!(stamp(at));
    status["health"] = health;
}

/// The operation worker picks the operation up: `{phase: Running, startedAt}`.
fn run(
    controller: &Controller,
    track: &mut Track,
    app: &mut Value,
    at: OffsetDateTime,
    next: &mut Next,
) {
    let operation = app["operation"].clone();
    if operation.is_null() {
        return;
    }
    // An operation that names a source (a rollback's) syncs it; one that names none syncs
    // the spec as it is now.
    let syncing = match track.planned.take() {
        Some(planned) => planned,
        None => operation_target(&operation["sync"], &track.rendered)
            .unwrap_or_else(|| target(app, controller.render.as_ref())),
    };
    track.syncing = Some(syncing);
    track.attempt = 0;
    app["status"]["operationState"] = json!({"operation": operation, "phase": "Running",
        "message": "", "startedAt": stamp(at)});
    next.push((at + controller.timeline.sync, Step::Finish));
}

/// A failed attempt retried: `finishedAt` and `syncResult` cleared.
fn retry(controller: &Controller, app: &mut Value, at: OffsetDateTime, next: &mut Next) {
    let state = &mut app["status"]["operationState"];
    if let Some(state) = state.as_object_mut() {
        state.remove("finishedAt");
        state.remove("syncResult");
    }
    state["message"] = json!("");
    next.push((at + controller.timeline.sync, Step::Finish));
}

/// The attempt ends: retried, Failed, or Succeeded with its history entry (`setOperationState`).
fn finish(
    controller: &Controller,
    track: &mut Track,
    app: &mut Value,
    at: OffsetDateTime,
    next: &mut Next,
) {
    let Some(syncing) = track.syncing.clone() else {
        return;
    };
    let script = controller.script(track.operations);
    let timeline = controller.timeline;
    let state = &mut app["status"]["operationState"];
    if script == Script::SyncFailed && track.attempt < timeline.retries {
        track.attempt += 1;
        state["finishedAt"] = json!(stamp(at));
        state["retryCount"] = json!(track.attempt);
        state["message"] = json!(format!(
            "Retrying attempt #{}: one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid",
            track.attempt
        ));
        let backoff = Duration::from_secs(5 * 2u64.pow(track.attempt - 1));
        next.push((at + backoff, Step::Retry));
        return;
    }
    track.operations += 1;
    track.syncing = None;
    state["finishedAt"] = json!(stamp(at));
    state["syncResult"] = sourced(&syncing, json!({}));
    if syncing.multi {
        state["syncResult"]["revision"] = json!("");
    }
    next.push((at + timeline.post_sync_refresh, Step::Refresh));
    if script == Script::SyncFailed {
        state["phase"] = json!("Failed");
        let retried = if track.attempt > 0 {
            format!(" (retried {} times).", track.attempt)
        } else {
            String::new()
        };
        state["message"] = json!(format!(
            "one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid{retried}"
        ));
        remove_operation(app);
        return;
    }
    state["phase"] = json!("Succeeded");
    state["message"] = json!("successfully synced (all tasks run)");
    let started = state["startedAt"].clone();
    let initiated = state["operation"]["initiatedBy"].clone();
    remove_operation(app);
    add_history(app, &syncing, started, initiated, at);
    // The apply: the new ReplicaSet's Pods start beside the old ones (`populatePodInfo`
    // lists both); pod events refresh the summary, not health (level 0).
    let old = std::mem::take(&mut track.pods);
    let mut pods = old.clone();
    if script != Script::PodsRefused {
        pods.extend(syncing.images.iter().cloned());
    }
    pods.sort();
    pods.dedup();
    track.pods = pods;
    track.rolling_to = syncing.images.clone();
    track.health = if script == Script::Suspended {
        json!({"status": "Suspended", "message": "Deployment is paused"})
    } else {
        json!({"status": "Progressing", "message": "Waiting for rollout to finish: 0 of 1 updated replicas are available..."})
    };
    app["status"]["summary"]["images"] = json!(track.pods);
    track.live = Some(syncing);
    if matches!(
        script,
        Script::Healthy | Script::DegradedAfterSync | Script::PodsRefused
    ) {
        next.push((
            at + timeline.post_sync_refresh + timeline.rollout,
            Step::Rolled,
        ));
    }
}

fn remove_operation(app: &mut Value) {
    if let Some(object) = app.as_object_mut() {
        object.remove("operation");
    }
}

/// `persistRevisionHistory`: an entry per successful sync, the newest `revisionHistoryLimit`.
fn add_history(
    app: &mut Value,
    synced: &Target,
    started: Value,
    initiated: Value,
    at: OffsetDateTime,
) {
    let mut history = app["status"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let id = history
        .last()
        .and_then(|h| h["id"].as_i64())
        .map_or(0, |id| id + 1);
    let mut entry = json!({"id": id, "deployStartedAt": started, "deployedAt": stamp(at), "initiatedBy": initiated});
    if synced.multi {
        entry["revisions"] = json!(synced.revisions);
        entry["sources"] = synced.sources.clone();
    } else {
        entry["revision"] = json!(synced.revisions.first().cloned().unwrap_or_default());
        entry["source"] = synced.sources.clone();
    }
    history.push(entry);
    let limit = app["spec"]["revisionHistoryLimit"].as_u64().unwrap_or(10) as usize;
    let drop = history.len().saturating_sub(limit);
    history.drain(..drop);
    app["status"]["history"] = json!(history);
}

/// The workload's rollout ends (resource events, level 1: health moves, `reconciledAt` not).
fn rolled(
    controller: &Controller,
    track: &mut Track,
    app: &mut Value,
    at: OffsetDateTime,
    next: &mut Next,
) {
    let script = controller.script(track.operations.saturating_sub(1));
    if script == Script::Healthy {
        track.health = json!({"status": "Healthy"});
        if controller.timeline.termination.is_zero() {
            track.pods = track.rolling_to.clone();
        } else {
            next.push((at + controller.timeline.termination, Step::Terminated));
        }
    } else {
        track.health = json!({"status": "Degraded",
            "message": "Deployment \"web\" exceeded its progress deadline"});
    }
    set_health(&mut app["status"], &track.health, at);
    app["status"]["summary"]["images"] = json!(track.pods);
}

/// The images a spec's sources run: Helm parameters in pairs (`x.repository` or `x.name`
/// with `x.tag`), and Kustomize images (`name=new:tag`, `name:tag`, `name@digest`).
pub fn images_of_spec(spec: &Value) -> Vec<String> {
    let sources: Vec<&Value> = match spec["sources"].as_array() {
        Some(sources) => sources.iter().collect(),
        None => vec![&spec["source"]],
    };
    let mut images = Vec::new();
    for source in sources {
        let parameters: Vec<(&str, &str)> = source["helm"]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["name"].as_str()?, p["value"].as_str()?)))
            .collect();
        for (name, repository) in &parameters {
            let Some(prefix) = name
                .strip_suffix("repository")
                .or_else(|| name.strip_suffix("name"))
            else {
                continue;
            };
            if let Some((_, tag)) = parameters
                .iter()
                .find(|(n, _)| *n == format!("{prefix}tag"))
            {
                images.push(format!("{repository}:{tag}"));
            }
        }
        for image in source["kustomize"]["images"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(text) = image.as_str() else { continue };
            let rendered = text.split_once('=').map_or(text, |(_, new)| new);
            images.push(rendered.to_string());
        }
    }
    images
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_pairs_and_kustomize_images_render_to_image_references() {
        let spec = json!({"sources": [
            {"helm": {"parameters": [{"name": "image.repository", "value": "r/web"},
                {"name": "image.tag", "value": "1.2"}, {"name": "replicas", "value": "2"}]}},
            {"kustomize": {"images": ["api=r/api:3.0", "r/db@sha256:00"]}}]});
        assert_eq!(
            images_of_spec(&spec),
            ["r/web:1.2", "r/api:3.0", "r/db@sha256:00"]
        );
    }

    #[test]
    fn automated_sync_is_on_only_when_set_and_not_disabled() {
        let with = |policy: Value| json!({"spec": {"syncPolicy": policy}});
        let cases = [
            (json!({}), false),
            (json!({"automated": {}}), true),
            (json!({"automated": {"enabled": true}}), true),
            (
                json!({"automated": {"enabled": false, "prune": true}}),
                false,
            ),
        ];
        for (policy, expected) in cases {
            assert_eq!(automated(&with(policy.clone())), expected, "{policy}");
        }
    }

    fn app(tag: &str) -> Value {
        json!({"metadata": {"annotations": {}}, "spec": {"source": {"repoURL": "r", "targetRevision": "main",
            "helm": {"parameters": [{"name": "image.repository", "value": "r/web"},
                {"name": "image.tag", "value": tag}]}}, "syncPolicy": {"automated": {}}},
            "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"},
                "summary": {"images": ["r/web:1"]}}})
    }

    /// Steps the controller to `until`, returning the status after each step.
    fn walk(run: &mut Run, app: &mut Value, until: OffsetDateTime) -> Vec<Value> {
        let mut seen = Vec::new();
        while let Some((key, _)) = run.next_due(until) {
            run.step(&key, app);
            seen.push(app["status"].clone());
        }
        seen
    }

    #[test]
    fn a_spec_write_moves_through_refresh_operation_stale_status_and_rollout() {
        let clock = Arc::new(SimClock::at(
            time::macros::datetime!(2026-12-03 10:00:00.6 UTC),
        ));
        let mut run = Run::new(Controller::timed(
            Script::Healthy,
            Timeline::typical(),
            clock.clone(),
        ));
        let key = ("argocd".to_string(), "web".to_string());
        let (before, mut app) = (app("1"), app("2"));
        run.observe(key.clone(), &before, &app);
        let t = clock.now();
        assert_eq!(
            app["status"]["sync"]["status"], "Synced",
            "not compared before the refresh"
        );
        let steps = walk(&mut run, &mut app, t + Duration::from_secs(60));
        let phases: Vec<String> = steps
            .iter()
            .map(|s| {
                format!(
                    "{} {} {} {} {}",
                    s["sync"]["status"].as_str().unwrap_or("-"),
                    s["operationState"]["phase"].as_str().unwrap_or("-"),
                    s["health"]["status"].as_str().unwrap_or("-"),
                    s["reconciledAt"].as_str().unwrap_or("-"),
                    s["summary"]["images"]
                )
            })
            .collect();
        assert_eq!(
            phases,
            [
                r#"OutOfSync - Healthy 2026-12-03T10:00:01Z ["r/web:1"]"#,
                r#"OutOfSync Running Healthy 2026-12-03T10:00:01Z ["r/web:1"]"#,
                r#"OutOfSync Succeeded Healthy 2026-12-03T10:00:01Z ["r/web:1","r/web:2"]"#,
                r#"Synced Succeeded Progressing 2026-12-03T10:00:08Z ["r/web:1","r/web:2"]"#,
                r#"Synced Succeeded Healthy 2026-12-03T10:00:08Z ["r/web:2"]"#,
            ]
        );
        let state = &app["status"]["operationState"];
        assert_eq!(
            (state["startedAt"].as_str(), state["finishedAt"].as_str()),
            (Some("2026-12-03T10:00:02Z"), Some("2026-12-03T10:00:06Z"))
        );
        assert!(app["operation"].is_null());
        assert_eq!(
            app["status"]["history"][0]["deployStartedAt"],
            "2026-12-03T10:00:02Z"
        );
        assert_eq!(run.operations(&key), 1);
    }

    #[test]
    fn history_keeps_the_newest_revision_history_limit_entries() {
        let mut app = app("9");
        app["spec"]["revisionHistoryLimit"] = json!(2);
        let target = target(&app, None);
        for _ in 0..3 {
            add_history(
                &mut app,
                &target,
                json!("t"),
                json!({}),
                time::macros::datetime!(2026-12-03 10:00 UTC),
            );
        }
        let ids: Vec<i64> = app["status"]["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, [1, 2]);
    }
}
