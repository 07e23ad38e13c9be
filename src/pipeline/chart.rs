//! One Application's Helm charts, from its read to its entries in the report: each chart its
//! `chart-list` names that the invocation concerns is decided against the versions ECR holds,
//! and the moved `targetRevision`s are handed to a write-back [`Writer`]: one guarded patch
//! ([`ApplicationPatch`]), or one conditional commit of the files holding the Application's
//! manifest ([`ManifestBranch`]); read and decided again after a race.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::change::{Attempt, Change, read_and_write};
use super::context::{Context, Work};
use super::resolved::Resolved;
use crate::appconfig::annotations;
use crate::appconfig::charts::{ChartConfig, ChartEntry, ChartWriteBack};
use crate::appconfig::imageupdater::ImageUpdaterObject;
use crate::application::app::Application;
use crate::apply::writeback::{ApplicationPatch, WriteError, Writer};
use crate::decision::chart::{self, ChartOutcome};
use crate::decision::controls::{self, Hold};
use crate::decision::decide::{self, AppDecision, Mode};
use crate::git::appmanifest;
use crate::git::commit::short;
use crate::git::githost::{Commit, GitHost};
use crate::git::manifests::{ManifestBranch, ManifestEdit};
use crate::policy::TagPolicy;
use crate::report::entries;
use crate::report::{Action, Entry, Report};

/// One chart source decided: the entry, and what to write to it.
struct Decided {
    entry: Entry,
    write: Option<(chart::ChartSource, String)>,
}

/// Where an Application's chart versions are committed.
struct GitTarget<'a> {
    credentials: &'a str,
    repository: &'a str,
    branch: Option<&'a str>,
    /// The ImageUpdater objects of the Application's namespace: a freeze on the one that
    /// configures it holds the commit.
    objects: &'a [ImageUpdaterObject],
}

/// A write a guard refused because the Application or the branch moved since the read:
/// what moved, and the entries decided before it.
type Race = (String, Vec<Entry>);

/// An Application's charts, one [`Change`]: the ImageUpdater objects of its namespace (a
/// freeze on the one that configures it holds a chart's write too).
struct Charts<'o> {
    objects: &'o [ImageUpdaterObject],
}

impl Change for Charts<'_> {
    /// The images' path reports an Application the selector no longer selects.
    const REPORTS_UNSELECTED: bool = false;

    async fn attempt(
        &mut self,
        ctx: &Context,
        app: &Application<'_>,
        work: &Work<'_>,
        report: &mut Report,
    ) -> Attempt {
        let Some(config) = ChartConfig::parse(&annotations::configuring(&app.metadata.annotations))
        else {
            return Attempt::Done;
        };
        let written = match &config.write_back {
            Err(e) => {
                let reason = format!("configuration error: {e}");
                let failed =
                    |c: &ChartEntry| decide::failed_entry(base_entry(app, c), &reason, false);
                report
                    .entries
                    .extend(concerned(&config, work.mode).map(failed));
                None
            }
            Ok(ChartWriteBack::Patch) => {
                let decided = decide_charts(ctx, app, &config, work).await;
                write_charts(ctx, app, decided, self.objects, work, report).await
            }
            Ok(ChartWriteBack::Git {
                credentials,
                repository,
                branch,
            }) => {
                let git = GitTarget {
                    credentials,
                    repository,
                    branch: branch.as_deref(),
                    objects: self.objects,
                };
                commit_charts(ctx, app, &config, &git, work, report).await
            }
        };
        match written {
            None => Attempt::Done,
            Some((race, entries)) => Attempt::Raced {
                race,
                decided: Box::new(AppDecision::skipped(entries)),
            },
        }
    }
}

/// The charts of the Application `namespace/name`: read (unless `first` is its read
/// already), decide, write; re-read and re-decide after a race.
pub(super) async fn process_charts(
    ctx: &Context,
    names: (&str, &str),
    first: Option<Value>,
    objects: &[ImageUpdaterObject],
    work: &Work<'_>,
    report: &mut Report,
) {
    let mut charts = Charts { objects };
    read_and_write(ctx, names, first, &mut charts, work, report).await;
}

/// Every chart of `config` this invocation concerns, decided on `app` as read.
async fn decide_charts(
    ctx: &Context,
    app: &Application<'_>,
    config: &ChartConfig,
    work: &Work<'_>,
) -> Vec<Decided> {
    let mut decided = Vec::new();
    for entry in concerned(config, work.mode) {
        decided.extend(decide_chart(ctx, app, app, entry, work).await);
    }
    decided
}

/// One chart decided on the sources of `declared` (the Application as read, or its
/// manifest in Git), reported as `app`'s.
async fn decide_chart(
    ctx: &Context,
    app: &Application<'_>,
    declared: &Application<'_>,
    entry: &ChartEntry,
    work: &Work<'_>,
) -> Vec<Decided> {
    let base = base_entry(app, entry);
    let only = |entry: Entry| vec![Decided { entry, write: None }];
    let policy = match &entry.policy {
        Ok(policy) => policy,
        Err(e) => {
            let reason = format!("configuration error: {e}");
            return only(decide::failed_entry(base, &reason, false));
        }
    };
    let reference = entry.chart.to_string();
    let Some((registry, repository)) = decide::ecr_repository(&entry.chart, &ctx.region) else {
        let reason = format!(
            "`{reference}` is not an ECR repository of this account's registry in {}",
            ctx.region
        );
        return only(base.with(Action::Skipped, reason));
    };
    let host = entry.chart.registry.as_deref().unwrap_or_default();
    let sources = chart::sources_of(declared, host, &repository);
    if sources.is_empty() {
        return only(base.with(
            Action::Skipped,
            format!(
                "no source of the Application is the chart `{reference}` (repoURL `{host}/<path>` with chart `<name>`, or repoURL `oci://{reference}`)"
            ),
        ));
    }
    let tags = match work.facts.artifact_tags(&registry, &repository).await {
        Ok(tags) => tags,
        Err(failure) => {
            return only(decide::failed_entry(
                base,
                &failure.message,
                failure.retryable,
            ));
        }
    };
    let versions = chart::versions(&tags);
    sources
        .into_iter()
        .map(|source| decided(&base, source, policy, &versions))
        .collect()
}

/// A write's `ChartUpdated` Event; a failure to record it is logged, never the write's.
async fn record_chart_event(
    ctx: &Context,
    app: &Application<'_>,
    entries: &[Entry],
    work: &Work<'_>,
    report: &mut Report,
) {
    let now = time::OffsetDateTime::from(ctx.clock.now());
    crate::pipeline::announce::record_chart_event(work.kube, app, entries, now).await;
    report.stats.events += 1;
}

/// `entries` back when nothing holds the Application's writes; otherwise they are
/// reported as held (a freeze) and `None` comes back.
/// A freeze is read where the image path reads it: on the Application, and on the
/// ImageUpdater object that configures it.
fn unless_frozen(
    ctx: &Context,
    app: &Application<'_>,
    objects: &[ImageUpdaterObject],
    entries: Vec<Entry>,
    report: &mut Report,
) -> Option<Vec<Entry>> {
    let resolved = Resolved::of_read(app, objects);
    let now = time::OffsetDateTime::from(ctx.clock.now());
    let hold = controls::hold(&resolved.freeze_settings(), now);
    if hold == Hold::Open {
        return Some(entries);
    }
    report.entries.extend(controls::held(entries, &hold));
    None
}

/// Commits the charts' new versions to the files holding the Application's manifest,
/// deciding on what Git holds; `Some` when the branch moved under the commit.
async fn commit_charts(
    ctx: &Context,
    app: &Application<'_>,
    config: &ChartConfig,
    git: &GitTarget<'_>,
    work: &Work<'_>,
    report: &mut Report,
) -> Option<Race> {
    let chosen: Vec<&ChartEntry> = concerned(config, work.mode).collect();
    if chosen.is_empty() {
        return None;
    }
    let opened = match ctx.git.parse_repository(git.repository) {
        Ok(repo) => {
            ctx.git
                .open_repository(app, &repo, git.repository, git.credentials, work.kube)
                .await
        }
        Err(unavailable) => Err(unavailable),
    };
    let host = match opened {
        Ok(host) => host,
        Err(stop) => {
            let failed = |c: &&ChartEntry| {
                decide::failed_entry(base_entry(app, c), &stop.reason, stop.retryable)
            };
            report.entries.extend(chosen.iter().map(failed));
            return None;
        }
    };
    // Applications of one invocation that commit to the same repository take turns.
    let lock = ctx.git.lock(&host.name());
    let _turn = lock.lock().await;
    let before = host.requests();
    let outcome = commit_on(ctx, app, &chosen, git, host.as_ref(), work, report).await;
    report.stats.git_requests += (host.requests() - before) as u32;
    outcome
}

async fn commit_on(
    ctx: &Context,
    app: &Application<'_>,
    chosen: &[&ChartEntry],
    git: &GitTarget<'_>,
    host: &dyn GitHost,
    work: &Work<'_>,
    report: &mut Report,
) -> Option<Race> {
    let fail_all = |report: &mut Report, reason: &str, retryable: bool| {
        let failed = |c: &&ChartEntry| decide::failed_entry(base_entry(app, c), reason, retryable);
        report.entries.extend(chosen.iter().map(failed));
    };
    let target = match ManifestBranch::open(host, git.branch).await {
        Ok(target) => target,
        Err(e) => {
            fail_all(report, &e.to_string(), e.is_retryable());
            return None;
        }
    };
    let (changed, entries) = edit_manifests(ctx, app, chosen, &target, work).await;
    if changed.is_empty() {
        report.entries.extend(entries);
        return None;
    }
    let entries = unless_frozen(ctx, app, git.objects, entries, report)?;
    let edit = ManifestEdit {
        message: commit_message(app.names().1, &entries),
        files: changed,
    };
    if let Err(refusal) = target.check(app, &edit).await {
        report.entries.extend(refused(entries, &refusal));
        return None;
    }
    if ctx.config.dry_run {
        let would = entries.into_iter().map(|mut e| {
            if e.action == Action::Updated {
                e.reason = format!(
                    "dry run: {} (would commit to {})",
                    e.reason,
                    e.sources.join(", ")
                );
            }
            e
        });
        report.entries.extend(would);
        return None;
    }
    match target.write(app, &edit).await {
        Ok(commit) => {
            let landed = Landed {
                target: &target,
                edit: &edit,
                commit,
            };
            report_commit(ctx, app, landed, entries, work, report).await;
            None
        }
        Err(WriteError::Race(race)) => Some((race, entries)),
        Err(refusal) => {
            report.entries.extend(refused(entries, &refusal));
            None
        }
    }
}

/// A chart's commit that landed, with the branch and the edit it was made of.
struct Landed<'a> {
    target: &'a ManifestBranch<'a>,
    edit: &'a ManifestEdit,
    commit: Commit,
}

/// A chart's commit landed: each updated chart's entry says which commit carries it, and
/// the `ChartUpdated` Event is sent.
async fn report_commit(
    ctx: &Context,
    app: &Application<'_>,
    landed: Landed<'_>,
    mut entries: Vec<Entry>,
    work: &Work<'_>,
    report: &mut Report,
) {
    let Landed {
        target,
        edit,
        commit,
    } = landed;
    report.stats.git_commits += 1;
    let files: Vec<&str> = edit.files.iter().map(|(f, _)| f.as_str()).collect();
    let record = json!({"repository": target.host_name(), "branch": target.branch,
        "file": files.join(", "), "commit": commit.oid});
    for entry in entries.iter_mut().filter(|e| e.action == Action::Updated) {
        entry.reason = format!(
            "{}; committed {} to {}: the Application that renders this manifest takes it at its next sync",
            entry.reason,
            short(&commit.oid),
            entry.sources.join(", ")
        );
        entry.git = Some(record.clone());
    }
    record_chart_event(ctx, app, &entries, work, report).await;
    report.entries.extend(entries);
}

/// Each chosen chart's manifest file read at the branch's head, decided and edited in
/// memory: the files whose text changed, and every chart's entry.
async fn edit_manifests(
    ctx: &Context,
    app: &Application<'_>,
    chosen: &[&ChartEntry],
    target: &ManifestBranch<'_>,
    work: &Work<'_>,
) -> (Vec<(String, String)>, Vec<Entry>) {
    let (host, branch) = (target.host_name(), target.branch.as_str());
    let (namespace, name) = app.names();
    let mut originals: BTreeMap<String, String> = BTreeMap::new();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut entries = Vec::new();
    for entry in chosen {
        let base = base_entry(app, entry);
        let Some(file) = entry.write_back_target.as_deref() else {
            let reason = format!(
                "configuration error: the Application is written back by Git: set argocd-ecr-updater.io/chart.write-back-target to the file in {} that holds its manifest",
                host
            );
            entries.push(decide::failed_entry(base, &reason, false));
            continue;
        };
        let text = match texts.get(file) {
            Some(text) => text.clone(),
            None => match target.file(file).await {
                Ok(Some(text)) => {
                    originals.insert(file.to_string(), text.clone());
                    text
                }
                Ok(None) => {
                    let reason = format!(
                        "`{file}` does not exist on branch `{branch}` of {}: set chart.write-back-target to the file holding the Application's manifest",
                        host
                    );
                    entries.push(decide::failed_entry(base, &reason, false));
                    continue;
                }
                Err(e) => {
                    entries.push(decide::failed_entry(base, &e.to_string(), e.is_retryable()));
                    continue;
                }
            },
        };
        let manifest = match appmanifest::application(file, &text, namespace, name) {
            Ok(manifest) => manifest,
            Err(e) => {
                entries.push(decide::failed_entry(base, &e.to_string(), false));
                continue;
            }
        };
        let mut text = text;
        for Decided { mut entry, write } in
            decide_chart(ctx, app, &Application::of(&manifest), entry, work).await
        {
            let target = format!("{} {branch} {file}", host);
            entry.sources = entry
                .sources
                .iter()
                .map(|s| format!("{target} ({s})"))
                .collect();
            if let Some((source, to)) = write {
                match appmanifest::set_target_revision(file, &text, &source.pointer, &to) {
                    Ok(edited) => text = edited,
                    Err(e) => entry = decide::failed_entry(entry, &e.to_string(), false),
                }
            }
            entries.push(entry);
        }
        texts.insert(file.to_string(), text);
    }
    let changed = texts
        .into_iter()
        .filter(|(file, text)| originals.get(file) != Some(text))
        .collect();
    (changed, entries)
}

/// Writes what was decided; `Some((race, entries))` when a guard found the Application
/// changed since the read, so it is read and decided again.
async fn write_charts(
    ctx: &Context,
    app: &Application<'_>,
    decided: Vec<Decided>,
    objects: &[ImageUpdaterObject],
    work: &Work<'_>,
    report: &mut Report,
) -> Option<Race> {
    let writes: Vec<(&chart::ChartSource, &str)> = decided
        .iter()
        .filter_map(|d| d.write.as_ref().map(|(s, to)| (s, to.as_str())))
        .collect();
    if writes.is_empty() {
        report.entries.extend(decided.into_iter().map(|d| d.entry));
        return None;
    }
    let plan = chart::plan(&writes);
    let entries: Vec<Entry> = decided.into_iter().map(|d| d.entry).collect();
    let entries = unless_frozen(ctx, app, objects, entries, report)?;
    let writer = ApplicationPatch {
        kube: work.kube,
        deadline: work.deadline,
    };
    if let Err(refusal) = writer.check(app, &plan).await {
        report.entries.extend(refused(entries, &refusal));
        return None;
    }
    if ctx.config.dry_run {
        report.entries.extend(
            entries
                .into_iter()
                .map(|e| entries::dry_run(e, &plan.patch)),
        );
        return None;
    }
    report.stats.patches += 1;
    match writer.write(app, &plan).await {
        Ok(()) => {
            record_chart_event(ctx, app, &entries, work, report).await;
            report.entries.extend(entries);
            None
        }
        Err(WriteError::Race(race) | WriteError::Conflict(race)) => Some((race, entries)),
        Err(refusal) => {
            report.entries.extend(refused(entries, &refusal));
            None
        }
    }
}

/// The entries of a decision whose write did not happen: the updates take the refusal, the
/// rest keep their own reasons.
fn refused(entries: Vec<Entry>, error: &WriteError) -> Vec<Entry> {
    let (action, reason, retryable) = error.as_entry();
    decide::AppDecision::skipped(entries).refused(action, &reason, retryable)
}

/// A chart source decided: updated to the best version, or kept with the reason.
fn decided(
    base: &Entry,
    source: chart::ChartSource,
    policy: &TagPolicy,
    versions: &chart::Versions,
) -> Decided {
    let mut entry = base.clone();
    entry.sources = vec![source.label.clone()];
    entry.from = Some(source.target_revision.clone());
    match chart::decide(&source, policy, versions) {
        ChartOutcome::Update { to, .. } => {
            entry.to = Some(to.clone());
            let reason = format!("chart version {to} is the newest under {}", policy.strategy);
            Decided {
                entry: entry.with(Action::Updated, reason),
                write: Some((source, to)),
            }
        }
        ChartOutcome::Keep(reason) => Decided {
            entry: entry.with(Action::Unchanged, reason),
            write: None,
        },
    }
}

/// The commit message, in the shape of Image Updater's default: a title naming the
/// Application, a line per chart moved.
fn commit_message(app: &str, entries: &[Entry]) -> String {
    let lines: Vec<String> = entries
        .iter()
        .filter(|e| e.action == Action::Updated)
        .map(|e| {
            format!(
                "updates chart {} version '{}' to '{}'",
                e.image,
                e.from.as_deref().unwrap_or_default(),
                e.to.as_deref().unwrap_or_default()
            )
        })
        .collect();
    format!("build: automatic update of {app}\n\n{}\n", lines.join("\n"))
}

/// The chart entries of `config` this invocation concerns: those naming the pushed
/// repository, or every one for a reconcile.
fn concerned<'c>(config: &'c ChartConfig, mode: Mode<'c>) -> impl Iterator<Item = &'c ChartEntry> {
    config.charts.iter().filter(move |entry| match mode {
        Mode::Push(push) => entry.chart.is(&push.registry(), &push.repository),
        Mode::Reconcile => true,
    })
}

/// The report entry a chart of `app` starts from.
fn base_entry(app: &Application<'_>, entry: &ChartEntry) -> Entry {
    let (namespace, name) = app.names();
    Entry::new(
        namespace,
        name,
        entry.alias.as_deref(),
        &entry.chart.to_string(),
    )
}
