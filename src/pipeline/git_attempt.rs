//! One attempt with Image Updater's `git` write-back: the repository and its credentials,
//! the branch and file read, the decision on the Application as Git renders it, the
//! conditional commit, and Argo CD asked to refresh.

use serde_json::{Value, json};

use super::change::Attempt;
use super::context::{Context, Work};
use super::decided::{concerned_images, decide_to_write, every_image};
use super::resolved::{GitSettings, Resolved};
use crate::appconfig::annotations::ImageConfig;
use crate::application::app::Application;
use crate::apply::writeback::{WriteError, Writer};
use crate::cluster::kube::KubeError;
use crate::cluster::retry::retry_transient;
use crate::decision::decide::AppDecision;
use crate::decision::patch::WritePlan;
use crate::git::commit::{Committed, GitCommit, GitOutcome, GitSnapshot, Read, short};
use crate::git::githost::GitHost;
use crate::git::gitwrite::{self, Location};
use crate::git::hosts::Unavailable;
use crate::report::entries;
use crate::report::{Action, Report};

/// Argo CD refreshes an Application carrying this annotation, then removes it.
const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/refresh";

/// A repository opened for one attempt: its host, what was read, and what the commit needs.
struct Opened<'h> {
    host: &'h dyn GitHost,
    snapshot: GitSnapshot,
    effective: Value,
    images: Vec<&'h ImageConfig>,
    target_key: String,
    /// The host's request count before this attempt, for the report's budget.
    requests_before: usize,
}

/// One git write-back attempt. [`Attempt::Raced`] when the branch moved under the
/// commit (read Git and decide again); every other outcome is in the report.
pub(super) async fn attempt_git(
    ctx: &Context,
    app: &Application<'_>,
    resolved: &Resolved<'_>,
    git: &GitSettings<'_>,
    work: &Work<'_>,
    report: &mut Report,
) -> Attempt {
    let (ns, name) = app.names();
    let config = resolved.config.as_ref();
    let concerned = config.map_or_else(Vec::new, |c| concerned_images(c, work.mode));
    if concerned.is_empty() {
        report.entries.push(entries::not_annotated(ns, name));
        return Attempt::Done;
    }
    let images: Vec<&ImageConfig> = config
        .into_iter()
        .flat_map(|c| &c.images)
        .filter_map(|i| i.config.as_ref().ok())
        .collect();
    let stop = |report: &mut Report, stop: Unavailable| {
        let entries = every_image(
            app,
            &concerned,
            Action::Failed,
            &stop.reason,
            stop.retryable,
        );
        let mut decided = AppDecision::skipped(entries);
        let source = &resolved.source;
        entries::configured_by(
            &mut decided.entries,
            &source.to_string(),
            source.configuring_object(),
        );
        report.entries.extend(decided.entries);
    };
    let opened = ctx
        .git
        .open(app, git.method, git.credentials, work.kube)
        .await;
    let (location, host) = match opened {
        Ok(found) => found,
        Err(reason) => {
            stop(report, reason);
            return Attempt::Done;
        }
    };
    // Applications of one invocation that commit to the same repository take turns.
    let lock = ctx.git.lock(&host.name());
    let _turn = lock.lock().await;
    let requests_before = host.requests();
    let target_key = gitwrite::target_key(&location, git.branch);
    let pull_request = git.pull_request.is_some();
    let read = Read::of(host.as_ref(), location, pull_request, app, &images).await;
    let Read {
        snapshot,
        effective,
    } = match read {
        Ok(read) => read,
        Err(reason) => {
            report.stats.git_requests += (host.requests() - requests_before) as u32;
            stop(report, reason);
            return Attempt::Done;
        }
    };
    let opened = Opened {
        host: host.as_ref(),
        snapshot,
        effective,
        images,
        target_key,
        requests_before,
    };
    decide_and_commit(ctx, app, resolved, git, opened, work, report).await
}

/// Decides on the Application as Git renders it, and commits the change (or, in a dry
/// run, says where it would).
async fn decide_and_commit(
    ctx: &Context,
    app: &Application<'_>,
    resolved: &Resolved<'_>,
    git: &GitSettings<'_>,
    opened: Opened<'_>,
    work: &Work<'_>,
    report: &mut Report,
) -> Attempt {
    let Opened {
        host,
        snapshot,
        effective,
        images,
        target_key,
        requests_before,
    } = opened;
    // The Application as Git renders it: decided and written as such.
    let effective = Application::of(&effective);
    let Some((decided, plan)) = decide_to_write(ctx, &effective, resolved, work, report).await
    else {
        return Attempt::Done;
    };
    if ctx.config.dry_run {
        let target = snapshot.location.describe(&snapshot.branch, &snapshot.file);
        report.entries.extend(would_commit(decided, &target));
        return Attempt::Done;
    }
    let writer = GitCommit {
        host,
        snapshot: &snapshot,
        images,
        pull_request: git.pull_request.cloned(),
        target_key,
    };
    let written = writer.write(&effective, &plan).await;
    report.stats.git_requests += (host.requests() - requests_before) as u32;
    let committed = match written {
        Ok(GitOutcome::Committed(committed)) => committed,
        Ok(GitOutcome::Unchanged { branch, file }) => {
            let reason = format!(
                "already in Git: {} holds this tag (a duplicate or late event); nothing committed",
                snapshot.location.describe(&branch, &file)
            );
            report
                .entries
                .extend(decided.refused(Action::Skipped, &reason, false));
            return Attempt::Done;
        }
        Err(WriteError::Race(race)) => {
            return Attempt::Raced {
                race,
                decided: Box::new(decided),
            };
        }
        Err(refusal) => {
            let (action, reason, retryable) = refusal.as_entry();
            report
                .entries
                .extend(decided.refused(action, &reason, retryable));
            return Attempt::Done;
        }
    };
    let landed = Landed {
        location: &snapshot.location,
        plan: &plan,
        committed,
    };
    report_commit(ctx, app, landed, decided, work, report).await;
    Attempt::Done
}

/// A change landed: the refresh asked for, the Kubernetes Event sent, and the updated
/// images' entries say where the change went.
async fn report_commit(
    ctx: &Context,
    app: &Application<'_>,
    landed: Landed<'_>,
    decided: AppDecision,
    work: &Work<'_>,
    report: &mut Report,
) {
    let Landed {
        location,
        plan,
        committed:
            Committed {
                commit,
                branch,
                file,
                pull_request,
                mut notes,
            },
    } = landed;
    report.stats.git_commits += 1;
    let record = json!({
        "repository": location.repo.full_name(),
        "branch": branch,
        "file": file,
        "commit": commit.oid,
        "pullRequest": pull_request,
    });
    match request_refresh(app, plan, &record, work, ctx.config.conflict_retries).await {
        // A pull request's commit is live only once merged: nothing to follow yet.
        Ok(()) if pull_request.is_none() => {
            let on = work.on_cluster();
            let follow = ctx.follow();
            let followed = follow.follow_write(&on, app, &plan.audit, Some(&commit.oid));
            notes.extend(followed.await);
        }
        Ok(()) => {}
        Err(e) => notes.push(format!(
            "refresh not requested ({e}): Argo CD picks the commit up at its next Git poll; the rollout is not followed (the Application carries no record of the commit)"
        )),
    }
    report.stats.patches += 1;
    let target = location.describe(&branch, &file);
    let done = match &pull_request {
        Some(url) => format!("pull request {url} (commit {})", short(&commit.oid)),
        None => format!("committed {} to {target}", short(&commit.oid)),
    };
    let mut entries = decided.entries;
    for entry in entries.iter_mut().filter(|e| e.action == Action::Updated) {
        entry.reason = format!("{}; {done}", entry.reason);
        for note in &notes {
            entry.reason.push_str(&format!("; {note}"));
        }
        entry.sources = vec![target.clone()];
        entry.git = Some(record.clone());
    }
    let now = time::OffsetDateTime::from(ctx.clock.now());
    crate::pipeline::announce::record_event(work.kube, app, &entries, now).await;
    report.stats.events += 1;
    report.entries.extend(entries);
}

/// Asks Argo CD to refresh now (`argocd.argoproj.io/refresh: normal`, leaving a `hard` one
/// someone asked for alone) and records the commit in our audit annotation, guarded by the
/// Application's `resourceVersion` as read: a record another invocation wrote meanwhile is
/// read again and carried forward under `earlier`, never overwritten.
async fn request_refresh(
    app: &Application<'_>,
    plan: &WritePlan,
    record: &Value,
    work: &Work<'_>,
    retries: u32,
) -> Result<(), KubeError> {
    let (ns, name) = app.names();
    let kube = work.kube;
    let mut read = app.raw.clone();
    let mut attempt = 0;
    loop {
        let patch = crate::cluster::kube::Patch::Json(refresh_ops(&read, plan, record));
        match retry_transient(work.deadline, || kube.patch_application(ns, name, &patch)).await {
            Err(
                KubeError::Invalid {
                    validation: false, ..
                }
                | KubeError::Conflict { .. },
            ) if attempt < retries => {
                attempt += 1;
                read = kube.get_application(ns, name).await?;
            }
            done => return done.map(|_| ()),
        }
    }
}

/// The guarded JSON patch of [`request_refresh`] on the Application as `read`.
fn refresh_ops(read: &Value, plan: &WritePlan, record: &Value) -> Value {
    let fresh = Application::of(read);
    let mut audit = plan.audit.clone();
    audit["git"] = record.clone();
    // Other images' last writes, as the record read now holds them.
    let moved: Vec<String> = plan.changes.iter().map(|c| c.image.to_string()).collect();
    let set_by = crate::decision::rollback::lists_manager(&fresh)
        .filter(|manager| manager != crate::decision::rollback::OUR_MANAGER);
    let earlier = fresh
        .audit
        .as_ref()
        .map(|previous| previous.carried_forward(&moved, set_by.as_deref()))
        .unwrap_or_default();
    if let Some(fields) = audit.as_object_mut() {
        if earlier.is_empty() {
            fields.remove("earlier");
        } else {
            fields.insert("earlier".into(), Value::Array(earlier));
        }
    }
    let annotation = |key: &str| {
        format!(
            "/metadata/annotations/{}",
            crate::decision::patch::escape_pointer(key)
        )
    };
    let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion",
        "value": read["metadata"]["resourceVersion"]})];
    if !read["metadata"]["annotations"].is_object() {
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    ops.push(json!({"op": "add",
        "path": annotation(crate::appconfig::annotations::AUDIT_ANNOTATION),
        "value": audit.to_string()}));
    if read["metadata"]["annotations"][REFRESH_ANNOTATION] != "hard" {
        ops.push(json!({"op": "add", "path": annotation(REFRESH_ANNOTATION), "value": "normal"}));
    }
    Value::Array(ops)
}

/// A dry run's entries: each update says where it would be committed.
fn would_commit(decided: AppDecision, target: &str) -> impl Iterator<Item = crate::report::Entry> {
    decided.entries.into_iter().map(move |mut e| {
        if e.action == Action::Updated {
            e.reason = format!("dry run: {} (would commit to {target})", e.reason);
            e.sources = vec![target.to_string()];
        }
        e
    })
}

/// A commit that landed, with what it was made of.
struct Landed<'a> {
    location: &'a Location,
    plan: &'a WritePlan,
    committed: Committed,
}
