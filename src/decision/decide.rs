//! Decisions, without I/O: for each image of one Application, whether it moves, where, and
//! why not.
//!
//! The handler gathers the registry facts a strategy asks for ([`ImageCase::needs`]) and
//! hands them in; every rule lives here: the liveness gate, which sources an image is written
//! to, never-downgrade per source, what to do when the running tag has left ECR, the
//! reconcile selection turned into a decision, the report's reason texts and the audit
//! record (with the clock passed in).

use std::collections::HashMap;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::AUDIT_ANNOTATION;
use crate::appconfig::annotations::{AppConfig, ImageConfig, ImageEntry, ImageRef, Platform};
use crate::appconfig::imageupdater::ConfigSource;
use crate::application::app::Application;
use crate::application::failures::FailedRollout;
use crate::application::identity::Identity;
use crate::application::sources::{self, Targets};
use crate::decision::patch::{self, Audit, ImageChange, ImageUpdate, WritePlan};
use crate::decision::rollback::{self, TakenBack};
use crate::event::PushEvent;
use crate::failure::Refused;
use crate::partition::registry_host;
use crate::policy::{Decision, KeepReason, Strategy, TagInfo, TagRef};
use crate::registry::manifest::{Platforms, offers_any};
use crate::report::{Action, Entry};

use crate::report::events::AUTO_ROLLBACK;

/// The failed rollout auto-rollback takes back for `config`'s image, if it is on and the
/// image's last rollout failed (`failed`, not `timed-out`: a slow rollout is not a bad
/// image) with something to go back to.
pub fn rollback_due<'f>(
    config: &ImageConfig,
    failures: &'f std::collections::BTreeMap<String, FailedRollout>,
) -> Option<&'f FailedRollout> {
    let failed = failures.get(&config.image.to_string())?;
    (config.auto_rollback && failed.outcome == "failed" && failed.from.is_some()).then_some(failed)
}

/// What the invocation compares against.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// An ECR push of one tag: move forward to it, or keep.
    Push(&'a PushEvent),
    /// Re-evaluate against the repository's full tag list, as Image Updater's poll would.
    Reconcile,
}

/// What the handler must fetch from ECR before [`ImageCase::decide_push`] or
/// [`ImageCase::decide_reconcile`] can answer: exactly what the strategy needs, no more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Tags whose push time and digest ECR must describe (one request for all).
    pub describe: Vec<String>,
    /// The repository's full tag list (reconcile).
    pub tag_list: bool,
    /// Manifests must be checked for the platforms annotation.
    pub manifests: bool,
}

/// What ECR said about described tags: `None` where it has no such tag.
pub type DescribedTags = HashMap<String, Option<TagInfo>>;

/// One image of one Application that passed the gates, with where it is written.
#[derive(Debug)]
pub struct ImageCase<'a> {
    pub config: &'a ImageConfig,
    pub registry: String,
    pub repository: String,
    app: &'a Application<'a>,
    targets: Targets<'a>,
    base: Entry,
}

/// The outcome for one image: an entry per target, and the move if any target moves.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageOutcome {
    pub entries: Vec<Entry>,
    pub update: Option<Move>,
}

/// A value to write into some of an image's sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub to: TagRef,
    /// Indexes into [`sources::sources`].
    pub sources: Vec<usize>,
    /// Tags whose manifests must offer the wanted platforms before the write (push mode).
    pub check_platforms: Option<String>,
    /// When ECR received the image written, when known: the audit record keeps it, and a
    /// rollout check measures the lead time from it.
    pub pushed_at: Option<OffsetDateTime>,
    /// ECR's digest of the image written, when known: the audit record keeps it, and
    /// auto-rollback remembers it.
    pub digest: Option<String>,
    /// Auto-rollback writing back what a failed write replaced: no gate, soak or
    /// hold-on-failure stands between it and its write (it restores what ran before).
    pub rolls_back: bool,
}

impl ImageOutcome {
    fn only(entry: Entry) -> Self {
        Self {
            entries: vec![entry],
            update: None,
        }
    }

    /// Turns a planned update into a skip: the platform check or ECR said no.
    pub fn refuse(mut self, action: Action, reason: &str, retryable: bool) -> Self {
        for entry in self
            .entries
            .iter_mut()
            .filter(|e| e.action == Action::Updated)
        {
            entry.action = action;
            entry.reason = reason.to_string();
            entry.retryable = retryable;
            entry.to = None;
        }
        self.update = None;
        self
    }
}

impl ImageOutcome {
    /// Adds a note to the reason of every skip the soak made (`controls::soak`).
    pub fn noted_on_soaking(mut self, note: &str) -> Self {
        for entry in self
            .entries
            .iter_mut()
            .filter(|e| e.action == Action::Skipped && e.reason.starts_with("soaking:"))
        {
            entry.reason = format!("{}; {note}", entry.reason);
        }
        self
    }

    /// Adds a note to the reason of every update.
    pub fn noted(mut self, note: &str) -> Self {
        for entry in self
            .entries
            .iter_mut()
            .filter(|e| e.action == Action::Updated)
        {
            entry.reason = format!("{}; {note}", entry.reason);
        }
        self
    }
}

/// Whether a push-shaped event is this image's business: a scan-completed event moves only
/// an image with a scan gate (its push moved an image without one).
pub fn concerns(config: &ImageConfig, push: &PushEvent) -> bool {
    !push.scan_completed || config.scan_gate.is_some()
}

/// Why a push of a tag ECR does not list is not written: the tag was deleted since the push,
/// or the event did not come from ECR.
pub fn tag_not_in_registry(tag: &str, repository: &str) -> String {
    format!(
        "ECR does not list tag `{tag}` in `{repository}` now (deleted since the push, or the event did not come from ECR): nothing is written for a tag ECR does not have"
    )
}

/// What deciding one Application produced: its report entries and, if anything moves, the
/// write that moves it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppDecision {
    pub entries: Vec<Entry>,
    pub plan: Option<WritePlan>,
}

impl AppDecision {
    /// Every image of the Application left alone, for one reason.
    pub fn skipped(entries: Vec<Entry>) -> Self {
        Self {
            entries,
            plan: None,
        }
    }

    /// The write did not happen: the updates become `action` with `reason`.
    pub fn refused(self, action: Action, reason: &str, retryable: bool) -> Vec<Entry> {
        ImageOutcome {
            entries: self.entries,
            update: None,
        }
        .refuse(action, reason, retryable)
        .entries
    }
}

/// Puts the images' outcomes together into one write, with the audit record of it.
pub fn assemble(
    app: &Application<'_>,
    mut entries: Vec<Entry>,
    outcomes: Vec<(&ImageConfig, ImageOutcome)>,
    now: OffsetDateTime,
    event_id: &str,
) -> AppDecision {
    let mut updates = Vec::new();
    let mut audited = Vec::new();
    for (config, outcome) in outcomes {
        if let Some(update) = outcome.update {
            audited.extend(
                outcome
                    .entries
                    .iter()
                    .filter(|e| e.action == Action::Updated)
                    .map(|e| audit_image(config, e, &update)),
            );
            updates.push(ImageUpdate {
                config,
                to: update.to,
                sources: update.sources,
            });
        }
        entries.extend(outcome.entries);
    }
    if updates.is_empty() {
        return AppDecision::skipped(entries);
    }
    let audit = Audit {
        time: now.format(&Rfc3339).unwrap_or_default(),
        event_id: event_id.to_string(),
        changes: audited,
    };
    AppDecision {
        plan: Some(patch::plan(app, &updates, audit)),
        entries,
    }
}

/// What an Application's configuration must name to concern this invocation, worked out
/// once: the listing asks it of every Application in every page.
pub struct Concern {
    /// The pushed image's registry host and repository; `None` to reconcile.
    pushed: Option<(String, String)>,
}

impl Concern {
    pub fn of(mode: Mode<'_>) -> Self {
        Self {
            pushed: match mode {
                Mode::Push(push) => Some((push.registry(), push.repository.clone())),
                Mode::Reconcile => None,
            },
        }
    }

    /// Does an Application, configured by `source`, concern this invocation? A push
    /// concerns the Applications whose configuration names the pushed repository; reconcile
    /// every configured one (a conflict included, so the report can say why it is left
    /// alone).
    pub fn concerns(
        &self,
        source: &ConfigSource<'_>,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> bool {
        match (&self.pushed, source) {
            (_, ConfigSource::Annotations) => self.concerns_image_list(
                annotations
                    .get(crate::appconfig::annotations::IMAGE_LIST)
                    .map(String::as_str),
            ),
            (Some((registry, repository)), _) => source.names(annotations, registry, repository),
            (None, ConfigSource::Object { .. } | ConfigSource::Conflict(_)) => true,
        }
    }

    /// The pushed repository, which the `image-list` of an Application the push concerns
    /// names; `None` to reconcile.
    pub fn pushed_repository(&self) -> Option<&str> {
        self.pushed
            .as_ref()
            .map(|(_, repository)| repository.as_str())
    }

    /// Does an Application's `chart-list` concern this invocation: naming the pushed
    /// repository, or for a reconcile, being there at all?
    pub fn concerns_chart_list(&self, chart_list: Option<&str>) -> bool {
        match (&self.pushed, chart_list) {
            (_, None) => false,
            (Some((registry, repository)), Some(list)) => {
                crate::appconfig::charts::list_names(list, registry, repository)
            }
            (None, Some(_)) => true,
        }
    }

    /// [`Self::concerns`] for an Application configured by its annotations, which only its
    /// `image-list` decides: asked of metadata still borrowed from its list page.
    pub fn concerns_image_list(&self, image_list: Option<&str>) -> bool {
        match &self.pushed {
            Some((registry, repository)) => image_list.is_some_and(|list| {
                crate::appconfig::annotations::list_names(list, registry, repository)
            }),
            None => image_list.is_some(),
        }
    }
}

/// The entry for a whole image that failed for a reason of its own (ECR, configuration).
pub fn failed_entry(base: Entry, reason: &str, retryable: bool) -> Entry {
    base.failed(reason, retryable)
}

/// The report entry an image starts from: it needs only which Application.
pub fn base_entry(app: Identity<'_>, alias: Option<&str>, image: &str) -> Entry {
    let Identity { namespace, name } = app;
    Entry::new(namespace, name, alias, image)
}

/// The gates before any registry fact is needed: configuration errors, the liveness rule,
/// an image outside this function's registry, an Application with nowhere to write.
pub fn prepare<'a>(
    app: &'a Application<'a>,
    image_entry: &'a ImageEntry,
    region: &str,
) -> Result<ImageCase<'a>, Box<Entry>> {
    let reference = image_entry.image.to_string();
    let Identity { namespace, name } = app.identity();
    let base = Entry::new(namespace, name, image_entry.alias.as_deref(), &reference);
    let config = match &image_entry.config {
        Ok(config) => config,
        // The user's to fix; retrying the event would not help.
        Err(e) => {
            return Err(Box::new(failed_entry(
                base,
                &format!("configuration error: {e}"),
                false,
            )));
        }
    };
    if !config.force_update && !app.view.runs_image(config) {
        let names = match &config.kustomize_image_name {
            Some(name) => format!("`{name}` or `{reference}`"),
            None => format!("`{reference}`"),
        };
        return Err(Box::new(base.with(
            Action::Skipped,
            format!(
                "{names} is not among the images the Application runs (status.summary.images); set force-update to write it anyway"
            ),
        )));
    }
    let Some((registry, repository)) = ecr_location(config, region) else {
        return Err(Box::new(base.with(
            Action::Skipped,
            format!(
                "`{reference}` is not an ECR repository of this account's registry in {region}"
            ),
        )));
    };
    let targets = app.view.targets(config);
    if targets.targets.is_empty() {
        return Err(Box::new(base.with(
            Action::Skipped,
            "the Application has no Helm or Kustomize source to write the image to",
        )));
    }
    Ok(ImageCase {
        config,
        registry,
        repository,
        app,
        targets,
        base,
    })
}

/// The ECR repositories whose tag lists a reconcile of an Application with `config` asks
/// for, each once, as the configuration alone names them: an image the Application turns out
/// not to run is skipped after its read, but its configuration is already known from the
/// listing, so the lists can be asked for while the Application is read.
pub fn reconcile_repositories(config: &AppConfig, region: &str) -> Vec<(String, String)> {
    let mut repositories: Vec<(String, String)> = config
        .images
        .iter()
        .filter_map(|entry| entry.config.as_ref().ok())
        .filter_map(|image| ecr_location(image, region))
        .collect();
    repositories.sort();
    repositories.dedup();
    repositories
}

/// The registry id and repository of an ECR image in this region.
fn ecr_location(image: &ImageConfig, region: &str) -> Option<(String, String)> {
    ecr_repository(&image.image, region)
}

/// The registry id and repository of an image reference, when it is ECR's in this region.
pub fn ecr_repository(image: &ImageRef, region: &str) -> Option<(String, String)> {
    let registry = image.registry.as_deref()?;
    let account = registry.split('.').next()?;
    (registry == registry_host(account, region))
        .then(|| (account.to_string(), image.repository.clone()))
}

impl ImageCase<'_> {
    /// The Application this image belongs to, as read.
    pub fn object(&self) -> &Value {
        self.app.raw
    }

    pub fn identity(&self) -> Identity<'_> {
        self.app.identity()
    }

    /// The registry facts this image's strategy needs in this mode.
    pub fn needs(&self, mode: Mode<'_>) -> Needs {
        let policy = &self.config.policy;
        let manifests = !self.config.platform_filter().is_empty();
        match mode {
            Mode::Reconcile => Needs {
                describe: Vec::new(),
                tag_list: true,
                manifests,
            },
            Mode::Push(push) => {
                // Filters first: a tag the policy refuses costs no ECR call.
                if self.refused_by_filters(&push.tag).is_some() {
                    return Needs::default();
                }
                let mut describe = Vec::new();
                // A scan event for a gated image must know where the tag points now: only
                // the scanned digest may be released.
                let scan_gated = push.scan_completed && self.config.scan_gate.is_some();
                if policy.strategy.needs_push_times() || policy.writes_digest() || scan_gated {
                    describe.push(push.tag.clone());
                }
                if policy.strategy.needs_push_times() {
                    // Our last write's tag too: a value ranking below it is a rollback, by
                    // push time (one DescribeImages asks for all of them).
                    let written = (self.app.audit.as_ref())
                        .and_then(|audit| audit.last_write_of(&self.config.image.to_string()))
                        .and_then(|write| TagRef::parse(&write.image.to));
                    let currents = self
                        .targets
                        .targets
                        .iter()
                        .filter_map(|t| t.current.as_ref());
                    for current in currents.chain(written.as_ref()) {
                        if !describe.contains(&current.tag) {
                            describe.push(current.tag.clone());
                        }
                    }
                }
                Needs {
                    describe,
                    tag_list: false,
                    manifests,
                }
            }
        }
    }

    fn refused_by_filters(&self, tag: &str) -> Option<KeepReason> {
        match self.config.policy.decide(None, &TagInfo::named(tag)) {
            Decision::Keep(KeepReason::NoDigest(_)) | Decision::Update { .. } => None,
            Decision::Keep(reason) => Some(reason),
        }
    }

    /// The report entry for the image as a whole.
    pub fn entry(&self) -> Entry {
        self.base.clone()
    }

    fn target_entry(&self, index: usize) -> Entry {
        let target = &self.targets.targets[index];
        let mut entry = self.base.clone();
        entry.from = target.current.as_ref().map(ToString::to_string);
        let kind = match target.source.kind {
            sources::SourceKind::Kustomize => "kustomize",
            sources::SourceKind::Plugin => "plugin env",
            _ => "helm",
        };
        entry.sources = vec![format!("{} ({kind})", target.source.label)];
        entry
    }

    /// One verdict per target, in target order, made into the outcome.
    fn each_target(&self, verdict: impl FnMut(&sources::Target<'_>) -> Verdict) -> ImageOutcome {
        self.outcome(self.targets.targets.iter().map(verdict).collect())
    }

    /// Builds the outcome from one verdict per target.
    fn outcome(&self, verdicts: Vec<Verdict>) -> ImageOutcome {
        let mut entries = Vec::new();
        let mut update: Option<Move> = None;
        for (index, verdict) in verdicts.into_iter().enumerate() {
            let mut entry = self.target_entry(index);
            match verdict {
                Verdict::Keep(action, reason) => entries.push(entry.with(action, reason)),
                Verdict::Update(to, mut reason) => {
                    if self.targets.fallback {
                        reason.push_str("; no source names the image, so it goes to the first Helm or Kustomize source, as Image Updater does");
                    }
                    entry.to = Some(to.to_string());
                    entries.push(entry.with(Action::Updated, reason));
                    let source = self.targets.targets[index].index;
                    match &mut update {
                        Some(existing) => existing.sources.push(source),
                        None => {
                            update = Some(Move {
                                to,
                                sources: vec![source],
                                check_platforms: None,
                                pushed_at: None,
                                digest: None,
                                rolls_back: false,
                            })
                        }
                    }
                }
            }
        }
        ImageOutcome { entries, update }
    }

    /// Push: does the pushed tag replace what each target runs?
    pub fn decide_push(&self, push: &PushEvent, described: &DescribedTags) -> ImageOutcome {
        let policy = &self.config.policy;
        if let Some(reason) = self.refused_by_filters(&push.tag) {
            let outcome = self.each_target(|_| Verdict::keep(&reason));
            return outcome;
        }
        let asked = policy.strategy.needs_push_times() || policy.writes_digest();
        let candidate = if asked {
            match described.get(&push.tag).cloned().flatten() {
                Some(known) => known,
                None => {
                    let reason = tag_not_in_registry(&push.tag, &self.repository);
                    return ImageOutcome::only(self.base.clone().with(Action::Skipped, reason));
                }
            }
        } else {
            TagInfo {
                name: push.tag.clone(),
                pushed_at: Some(push.time),
                digest: None,
                archived: false,
            }
        };
        let mut outcome = self.each_target(|target| {
            let Some(current) = &target.current else {
                return self.update_verdict(Mode::Push(push), TagRef::tag(&candidate.name));
            };
            let mut current_info = TagInfo {
                name: current.tag.clone(),
                pushed_at: None,
                digest: current.digest.clone(),
                archived: false,
            };
            if policy.strategy.needs_push_times() && current.tag != candidate.name {
                match described.get(&current.tag).cloned().flatten() {
                    Some(known) => current_info.pushed_at = known.pushed_at,
                    None => match self.running_since(current) {
                        Some(since) => current_info.pushed_at = Some(since.time),
                        None => {
                            return Verdict::Keep(Action::Skipped, self.unknown_age(current));
                        }
                    },
                }
            }
            match policy.decide(Some(&current_info), &candidate) {
                // Pinned, the running tag pushed again: the pin moves to its new digest.
                Decision::Update { to } if to.tag == current.tag && policy.strategy != Strategy::Digest => {
                    let digest = to.digest.clone().unwrap_or_default();
                    Verdict::Update(to, format!("`{}` was pushed again: the pinned digest moves to {digest} (pin-digest)", current.tag))
                }
                Decision::Update { to } => match self.after_taken_back(current, &candidate, &|tag| {
                    described.get(tag).cloned().flatten().and_then(|known| known.pushed_at)
                }) {
                    Err(held) => Verdict::Keep(Action::Skipped, held),
                    Ok(note) => self.update_verdict(Mode::Push(push), to).noted(note),
                },
                Decision::Keep(reason) => Verdict::keep(&reason),
            }
        });
        if let Some(update) = outcome.update.as_mut()
            && !self.config.platform_filter().is_empty()
        {
            update.check_platforms = Some(update.to.tag.clone());
        }
        outcome
    }

    fn update_verdict(&self, mode: Mode<'_>, to: TagRef) -> Verdict {
        let strategy = self.config.policy.strategy;
        let reason = match (mode, strategy) {
            (Mode::Reconcile, _) => {
                format!("reconcile: `{to}` is the best allowed tag under {strategy}")
            }
            (Mode::Push(_), Strategy::Digest) => format!(
                "tracked tag now points to {}",
                to.digest.as_deref().unwrap_or_default()
            ),
            (Mode::Push(_), strategy) => {
                format!("`{to}` ranks above the current tag under {strategy}")
            }
        };
        Verdict::Update(to, reason)
    }

    /// Auto-rollback (`<alias>.auto-rollback`): every target running the value whose
    /// rollout `failed` goes back to what that write replaced; `None` when no target runs it
    /// (someone moved it since, or the rollback is written already).
    pub fn decide_rollback(&self, failed: &FailedRollout) -> Option<ImageOutcome> {
        let from = TagRef::parse(failed.from.as_deref()?)?;
        let bad = TagRef::from(failed.to.as_str());
        if !self
            .targets
            .targets
            .iter()
            .any(|t| t.current.as_ref() == Some(&bad))
        {
            return None;
        }
        let mut outcome = self.each_target(|target| match &target.current {
            Some(current) if current == &bad => Verdict::Update(
                from.clone(),
                format!(
                    "{AUTO_ROLLBACK}: the rollout of `{bad}` failed at {} ({}); `{from}`, which it replaced, is written back",
                    failed.at, failed.reason
                ),
            ),
            current => Verdict::Keep(
                Action::Unchanged,
                format!(
                    "runs `{}`, not `{bad}`, whose rollout failed",
                    current.as_ref().map(ToString::to_string).unwrap_or_default()
                ),
            ),
        });
        if let Some(update) = outcome.update.as_mut() {
            update.rolls_back = true;
        }
        Some(outcome)
    }

    /// Reconcile: the candidates in the order to try them. With a platforms annotation the
    /// best tag may lack a platform, so the handler checks manifests in this order and
    /// stops at the first that passes; without one only the best is needed.
    pub fn candidates<'t>(&self, tags: &'t [TagInfo]) -> Vec<&'t TagInfo> {
        let ranked = self.config.policy.ranked(tags);
        if self.config.platform_filter().is_empty() {
            ranked.into_iter().take(1).collect()
        } else {
            ranked
        }
    }

    /// Reconcile: move each target to `chosen` (the best candidate that passed every check),
    /// unless that would move it back to an image pushed before the one it runs.
    pub fn decide_reconcile(
        &self,
        tags: &[TagInfo],
        chosen: Option<&TagInfo>,
        platform_refusals: usize,
    ) -> ImageOutcome {
        let policy = &self.config.policy;
        let Some(chosen) = chosen else {
            let reason = if platform_refusals > 0 {
                format!(
                    "none of the {platform_refusals} allowed tags offers any of the platform(s) {} the platforms annotation allows",
                    platform_list(self.config.platform_filter())
                )
            } else {
                KeepReason::NoEligibleTag(tags.len()).to_string()
            };
            let outcome = self.each_target(|_| Verdict::Keep(Action::Skipped, reason.clone()));
            return outcome;
        };
        let Some(to) = policy.value_for(chosen) else {
            let reason = KeepReason::NoDigest(chosen.name.clone());
            return self.each_target(|_| Verdict::keep(&reason));
        };
        self.each_target(|target| {
                let Some(current) = &target.current else {
                    return self.update_verdict(Mode::Reconcile, to.clone());
                };
                if current == &to {
                    return Verdict::keep(&KeepReason::SameAsCurrent(to.to_string()));
                }
                let in_registry = tags.iter().any(|t| t.name == current.tag);
                if !in_registry && policy.strategy != Strategy::Digest {
                    // The running tag has left ECR (lifecycle policy, manual delete): an
                    // unknown tag must not count as oldest and pull the app back in time.
                    let Some(since) = self.running_since(current) else {
                        return Verdict::Keep(Action::Skipped, self.unknown_age(current));
                    };
                    if chosen.pushed_at.is_none_or(|pushed| pushed <= since.time) {
                        return Verdict::Keep(
                            Action::Skipped,
                            format!(
                                "`{}` was pushed before the running tag `{current}` ({}); the running tag is no longer in ECR, and a move would go back in time",
                                chosen.name, since.described()
                            ),
                        );
                    }
                    let running = TagInfo::named(&current.tag);
                    if policy.is_eligible(&running) && policy.ranks_above(chosen, &running) != Some(true) {
                        return Verdict::keep(&KeepReason::OlderThanCurrent {
                            candidate: chosen.name.clone(),
                            current: current.tag.clone(),
                            strategy: policy.strategy,
                        });
                    }
                }
                let pushed = |tag: &str| tags.iter().find(|t| t.name == tag).and_then(|t| t.pushed_at);
                match self.after_taken_back(current, chosen, &pushed) {
                    Err(held) => Verdict::Keep(Action::Skipped, held),
                    Ok(note) => self.update_verdict(Mode::Reconcile, to.clone()).noted(note),
                }
            })
    }

    /// Whether a move of the target running `current` to `candidate` is held by a manual
    /// rollback (`Err`: why), or goes ahead, with a note when the value it replaces was put
    /// back by the Application's owner: see [`rollback::taken_back`].
    fn after_taken_back(
        &self,
        current: &TagRef,
        candidate: &TagInfo,
        pushed: &dyn Fn(&str) -> Option<OffsetDateTime>,
    ) -> Result<Option<String>, String> {
        match rollback::taken_back(self.app, self.config, current, pushed) {
            None => Ok(None),
            Some(TakenBack::Rollback(rollback)) => rollback.holds(candidate).map_or(Ok(None), Err),
            Some(reapplied) => Ok(reapplied.note()),
        }
    }

    /// When the running value was known to run: ECR does not know the tag any more, so the
    /// audit record of our own write, else Argo CD's sync history, bounds its push time.
    fn running_since(&self, current: &TagRef) -> Option<Since> {
        running_since(self.app, self.config, current)
    }

    fn unknown_age(&self, current: &TagRef) -> String {
        format!(
            "the running tag `{current}` is no longer in ECR and when it was pushed is unknown (no {AUDIT_ANNOTATION} record of it, no Argo CD sync history naming it): not moving, since the candidate might be older. Set the tag once by hand to resume updates"
        )
    }
}

/// One target's answer.
enum Verdict {
    Update(TagRef, String),
    Keep(Action, String),
}

impl Verdict {
    /// The verdict with `note` added to an update's reason.
    fn noted(self, note: Option<String>) -> Self {
        match (self, note) {
            (Self::Update(to, reason), Some(note)) => Self::Update(to, format!("{reason}; {note}")),
            (verdict, _) => verdict,
        }
    }

    fn keep(reason: &KeepReason) -> Self {
        let action = match reason {
            KeepReason::SameAsCurrent(_) | KeepReason::SameDigest(_) => Action::Unchanged,
            _ => Action::Skipped,
        };
        Self::Keep(action, reason.to_string())
    }
}

/// The latest time a running value is known to have existed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since {
    pub time: OffsetDateTime,
    pub source: &'static str,
}

impl Since {
    fn described(&self) -> String {
        format!(
            "running since {} per {}",
            self.time.format(&Rfc3339).unwrap_or_default(),
            self.source
        )
    }
}

/// When `current` of `image` was last written by us (the audit annotation), else when Argo
/// CD first synced it (`status.history[].deployedAt`). Either is later than its push, so a
/// candidate pushed before it is certainly older.
pub fn running_since(
    app: &Application<'_>,
    image: &ImageConfig,
    current: &TagRef,
) -> Option<Since> {
    let reference = image.image.to_string();
    let current_text = current.to_string();
    let audited = (app.audit.as_ref())
        .filter(|audit| audit.moved(&reference, &current_text))
        .map(|audit| audit.time);
    if let Some(time) = audited {
        return Some(Since {
            time,
            source: "the argocd-ecr-updater.io/last-update annotation",
        });
    }
    crate::decision::rollback::deploys_of(app, image, current)
        .min()
        .map(|time| Since {
            time,
            source: "Argo CD's status.history",
        })
}

/// Does a manifest offer a platform the annotation allows? `Err` holds the skip reason.
pub fn platform_verdict(
    tag: &str,
    manifest: Option<&Platforms>,
    wanted: &[Platform],
) -> Result<(), Refused> {
    match manifest {
        None => Err(Refused::from(format!(
            "ECR has no manifest for `{tag}` any more"
        ))),
        Some(Platforms::Index(offered)) if offers_any(offered, wanted) => Ok(()),
        Some(Platforms::Index(offered)) => Err(Refused::from(format!(
            "`{tag}` offers none of the platform(s) {} the platforms annotation allows (it has {})",
            platform_list(wanted),
            platform_list(offered)
        ))),
        Some(Platforms::Single) => {
            tracing::warn!(
                tag,
                "single-platform manifest: its platform cannot be read through the ECR API, so the platforms annotation is not checked"
            );
            Ok(())
        }
    }
}

fn platform_list(platforms: &[Platform]) -> String {
    platforms
        .iter()
        .map(|p| match &p.variant {
            Some(v) => format!("{}/{}/{v}", p.os, p.arch),
            None => format!("{}/{}", p.os, p.arch),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The audit annotation's record of one image's move.
fn audit_image(image: &ImageConfig, entry: &Entry, update: &Move) -> ImageChange {
    ImageChange {
        alias: image.alias.clone(),
        image: image.image.clone(),
        from: entry.from.clone(),
        to: entry.to.clone(),
        pushed: update.pushed_at,
        digest: update.digest.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::{AppConfig, PREFIX};
    use crate::application::app::Application as Read;
    use argocd_ecr_updater_standins::fixtures::Application;
    use serde_json::json;

    /// [`super::running_since`] on the Application the JSON fixture is, as read.
    fn running_since(app: &Value, image: &ImageConfig, current: &TagRef) -> Option<Since> {
        super::running_since(&Read::of(app), image, current)
    }
    use std::collections::BTreeMap;
    use time::macros::datetime;

    const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web";
    const REGION: &str = "ap-northeast-2";

    /// One table row's verdict: the action, and a reason that says why in the words given.
    fn assert_entry(case_name: &str, entry: &Entry, action: Action, reason: &str) {
        assert_eq!(entry.action, action, "{case_name}: {}", entry.reason);
        assert!(
            entry.reason.contains(reason),
            "{case_name}: {}",
            entry.reason
        );
    }

    fn config(pairs: &[(&str, &str)]) -> AppConfig {
        // Image Updater's keys by their short name; the function's own by their whole name.
        let mut map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| match k.contains('/') {
                true => (k.to_string(), v.to_string()),
                false => (format!("{PREFIX}{k}"), v.to_string()),
            })
            .collect();
        map.entry(format!("{PREFIX}image-list"))
            .or_insert(format!("app={IMAGE}"));
        AppConfig::parse(&map).unwrap()
    }

    #[test]
    fn a_reconcile_asks_for_each_ecr_repository_of_this_region_that_a_valid_image_names_once() {
        let config = config(&[
            (
                "image-list",
                "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web, \
                 b=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web, \
                 api=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/team/api, \
                 tokyo=768157413559.dkr.ecr.ap-northeast-1.amazonaws.com/web, \
                 hub=nginx, \
                 broken=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/broken",
            ),
            ("broken.update-strategy", "fastest"),
        ]);
        assert_eq!(
            reconcile_repositories(&config, REGION),
            vec![
                ("768157413559".to_string(), "team/api".to_string()),
                ("768157413559".to_string(), "web".to_string()),
            ]
        );
    }

    fn app(tag: &str, running: &str) -> Value {
        Application::tracking("web", IMAGE, tag)
            .running(&[running])
            .build()
    }

    fn push(tag: &str) -> PushEvent {
        PushEvent {
            id: "e".into(),
            account: "768157413559".into(),
            region: REGION.into(),
            time: datetime!(2025-08-25 12:00 UTC),
            repository: "web".into(),
            tag: tag.into(),
            digest: None,
            scan_completed: false,
        }
    }

    #[test]
    fn the_image_list_alone_decides_as_the_annotations_would() {
        let event = push("20250825-153012");
        let registry = event.registry();
        let lists = [
            None,
            Some(String::new()),
            Some(format!("{registry}/web")),
            Some(format!("app={registry}/web:~1.2, other=r.example.com/x")),
            Some(format!("{registry}/web-2")),
            Some(format!("{}/web", registry.to_uppercase())),
            Some("web".to_string()),
        ];
        for mode in [Mode::Push(&event), Mode::Reconcile] {
            let concern = Concern::of(mode);
            for list in &lists {
                let annotations: BTreeMap<String, String> = list
                    .iter()
                    .map(|l| (format!("{PREFIX}image-list"), l.clone()))
                    .collect();
                assert_eq!(
                    concern.concerns_image_list(list.as_deref()),
                    concern.concerns(&ConfigSource::Annotations, &annotations),
                    "{list:?}"
                );
            }
        }
        assert!(
            Concern::of(Mode::Push(&event)).concerns_image_list(Some(&format!("{registry}/web")))
        );
        assert!(!Concern::of(Mode::Push(&event)).concerns_image_list(None));
    }

    fn tag(name: &str, pushed: Option<OffsetDateTime>) -> TagInfo {
        TagInfo {
            name: name.into(),
            pushed_at: pushed,
            digest: Some(format!("sha256:{name}")),
            archived: false,
        }
    }

    fn described(tags: &[TagInfo], missing: &[&str]) -> DescribedTags {
        tags.iter()
            .map(|t| (t.name.clone(), Some(t.clone())))
            .chain(missing.iter().map(|m| (m.to_string(), None)))
            .collect()
    }

    fn running(tag: &str) -> String {
        format!("{IMAGE}:{tag}")
    }

    #[test]
    fn an_image_the_application_does_not_run_is_skipped_unless_forced() {
        let table: &[(&[(&str, &str)], &str, bool)] = &[
            (&[], "other/image:1", false),
            (&[("app.force-update", "true")], "other/image:1", true),
            (&[], &running("1.0.0"), true),
        ];
        for (pairs, runs, passes) in table {
            let cfg = config(pairs);
            let app = app("1.0.0", runs);
            let view = Read::of(&app);
            let prepared = prepare(&view, &cfg.images[0], REGION);
            assert_eq!(prepared.is_ok(), *passes, "{pairs:?} {runs}");
            if let Err(entry) = prepared {
                assert!(entry.reason.contains("force-update"), "{}", entry.reason);
            }
        }
    }

    #[test]
    fn each_strategy_asks_ecr_for_exactly_what_it_needs() {
        let event = push("2.0.0");
        let table: &[(&str, &[&str])] = &[
            ("semver", &[]),
            ("alphabetical", &[]),
            ("newest-build", &["2.0.0", "1.0.0"]),
        ];
        for (strategy, asked) in table {
            let cfg = config(&[("app.update-strategy", strategy)]);
            let app = app("1.0.0", &running("1.0.0"));
            let view = Read::of(&app);
            let case = prepare(&view, &cfg.images[0], REGION).unwrap();
            assert_eq!(
                case.needs(Mode::Push(&event)).describe,
                *asked,
                "{strategy}"
            );
            assert!(case.needs(Mode::Reconcile).tag_list, "{strategy}");
        }
        // A tag the filters refuse costs nothing.
        let cfg = config(&[
            ("app.update-strategy", "newest-build"),
            ("app.allow-tags", "regexp:^v"),
        ]);
        let app = app("1.0.0", &running("1.0.0"));
        let view = Read::of(&app);
        let case = prepare(&view, &cfg.images[0], REGION).unwrap();
        assert_eq!(case.needs(Mode::Push(&event)), Needs::default());
    }

    #[test]
    fn a_push_decides_against_what_ecr_says_and_what_the_application_recorded() {
        let t = datetime!(2025-08-25 12:00 UTC);
        let newer = tag("2.0.0", Some(t));
        let older = tag("0.9.0", Some(t - time::Duration::days(3)));
        let current = tag("1.0.0", Some(t - time::Duration::days(1)));
        let audit =
            json!({"time": "2025-08-24T12:00:00Z", "images": [{"image": IMAGE, "to": "1.0.0"}]})
                .to_string();
        // (case, pushed tag, what ECR knows, audit record of the running tag, action, reason part)
        let table: &[(&str, &TagInfo, DescribedTags, Option<&str>, Action, &str)] = &[
            (
                "a newer push moves",
                &newer,
                described(&[newer.clone(), current.clone()], &[]),
                None,
                Action::Updated,
                "ranks above",
            ),
            (
                "an older push stays",
                &older,
                described(&[older.clone(), current.clone()], &[]),
                None,
                Action::Skipped,
                "ranks below",
            ),
            (
                "a pushed tag ECR lost is skipped",
                &newer,
                described(std::slice::from_ref(&current), &["2.0.0"]),
                None,
                Action::Skipped,
                "ECR does not list tag `2.0.0`",
            ),
            (
                "a gone running tag with no record stays",
                &older,
                described(std::slice::from_ref(&older), &["1.0.0"]),
                None,
                Action::Skipped,
                "no longer in ECR",
            ),
            (
                "a gone running tag with our record refuses an older push",
                &older,
                described(std::slice::from_ref(&older), &["1.0.0"]),
                Some(&audit),
                Action::Skipped,
                "ranks below",
            ),
            (
                "a gone running tag with our record takes a newer push",
                &newer,
                described(std::slice::from_ref(&newer), &["1.0.0"]),
                Some(&audit),
                Action::Updated,
                "ranks above",
            ),
        ];
        let cfg = config(&[("app.update-strategy", "newest-build")]);
        for (case_name, pushed, known, audit, action, reason) in table {
            let mut app = app("1.0.0", &running("1.0.0"));
            if let Some(audit) = audit {
                app["metadata"]["annotations"][AUDIT_ANNOTATION] = json!(audit);
            }
            let view = Read::of(&app);
            let case = prepare(&view, &cfg.images[0], REGION).unwrap();
            let outcome = case.decide_push(&push(&pushed.name), known);
            let entry = &outcome.entries[0];
            assert_entry(case_name, entry, *action, reason);
            assert_eq!(
                outcome.update.is_some(),
                *action == Action::Updated,
                "{case_name}"
            );
        }
    }

    #[test]
    fn a_scan_event_concerns_only_an_image_with_a_scan_gate() {
        let table = [
            ("a push of an ungated image", None, false, true),
            ("a push of a gated image", Some("critical=0"), false, true),
            ("a scan event of an ungated image", None, true, false),
            (
                "a scan event of a gated image",
                Some("critical=0"),
                true,
                true,
            ),
        ];
        for (case_name, gate, scan_event, concerned) in table {
            let mut pairs = vec![("app.update-strategy", "semver")];
            if let Some(gate) = gate {
                pairs.push(("argocd-ecr-updater.io/app.scan-gate", gate));
            }
            let cfg = config(&pairs);
            let image = cfg.images[0].config.as_ref().unwrap();
            let mut event = push("2.0.0");
            event.scan_completed = scan_event;
            assert_eq!(concerns(image, &event), concerned, "{case_name}");
        }
    }

    #[test]
    fn reconcile_moves_to_the_chosen_tag_but_never_back_past_a_running_tag_ecr_lost() {
        let t = datetime!(2025-08-25 12:00 UTC);
        let history = json!([{"deployedAt": "2025-08-25T00:00:00Z", "source": {"chart": "web", "helm": {"parameters": [
            {"name": "image.name", "value": IMAGE}, {"name": "image.tag", "value": "1.5.0"}]}}}]);
        // (case, tags in ECR, the running tag, its sync history, action, reason part)
        let table: &[(&str, Vec<TagInfo>, &str, Value, Action, &str)] = &[
            (
                "the best tag moves",
                vec![tag("1.0.0", Some(t)), tag("1.1.0", Some(t))],
                "1.0.0",
                Value::Null,
                Action::Updated,
                "best allowed tag",
            ),
            (
                "the same tag is unchanged",
                vec![tag("1.0.0", Some(t))],
                "1.0.0",
                Value::Null,
                Action::Unchanged,
                "already the current tag",
            ),
            (
                "no eligible tag stays",
                vec![tag("latest", Some(t))],
                "1.0.0",
                Value::Null,
                Action::Skipped,
                "none of the 1 tags",
            ),
            (
                "a lost running tag of unknown age stays",
                vec![tag("1.4.0", Some(t))],
                "1.5.0",
                Value::Null,
                Action::Skipped,
                "no longer in ECR",
            ),
            (
                "a lost running tag outranks an older candidate",
                vec![tag("1.4.0", Some(t - time::Duration::days(2)))],
                "1.5.0",
                history.clone(),
                Action::Skipped,
                "pushed before",
            ),
            (
                "a lost running tag still ranks above a later hotfix of an older line",
                vec![tag("1.4.1", Some(t))],
                "1.5.0",
                history.clone(),
                Action::Skipped,
                "ranks below",
            ),
            (
                "a lost running tag gives way to a newer, higher tag",
                vec![tag("1.6.0", Some(t))],
                "1.5.0",
                history,
                Action::Updated,
                "best allowed tag",
            ),
        ];
        let cfg = config(&[]);
        for (case_name, tags, current, history, action, reason) in table {
            let mut app = app(current, &running(current));
            app["status"]["history"] = history.clone();
            let view = Read::of(&app);
            let case = prepare(&view, &cfg.images[0], REGION).unwrap();
            let chosen = case.candidates(tags).first().copied();
            let outcome = case.decide_reconcile(tags, chosen, 0);
            let entry = &outcome.entries[0];
            assert_entry(case_name, entry, *action, reason);
        }
    }

    /// A newer push inside the window supersedes a soaking one: when the older image's
    /// window ends, the best candidate is the newer, still soaking, so the older is not
    /// written; once the newer has soaked, it is.
    #[test]
    fn a_newer_push_inside_the_soak_window_supersedes_the_older_one() {
        let cfg = config(&[
            ("app.update-strategy", "newest-build"),
            ("argocd-ecr-updater.io/app.min-age", "10m"),
        ]);
        let app = app("1.0.0", &running("1.0.0"));
        let view = Read::of(&app);
        let case = prepare(&view, &cfg.images[0], REGION).unwrap();
        let base = datetime!(2026-12-03 12:00 UTC);
        let tags = vec![
            tag("1.0.0", Some(base - time::Duration::days(1))),
            tag("1.1.0", Some(base)),
            tag("1.2.0", Some(base + time::Duration::minutes(5))),
        ];
        let image = cfg.images[0].config.as_ref().unwrap();
        // (case, now, written, follow-up)
        let cases = [
            (
                "the older window over, the newer soaking",
                base + time::Duration::minutes(10),
                None,
                Some(base + time::Duration::minutes(15)),
            ),
            (
                "the newer soaked too",
                base + time::Duration::minutes(15),
                Some("1.2.0"),
                None,
            ),
        ];
        for (name, now, written, follow_up) in cases {
            let chosen = case.candidates(&tags).first().copied();
            assert_eq!(
                chosen.map(|t| t.name.as_str()),
                Some("1.2.0"),
                "{name}: the newest is the candidate"
            );
            let outcome = case.decide_reconcile(&tags, chosen, 0);
            let (outcome, next) = crate::decision::controls::soak(
                outcome,
                image,
                chosen.and_then(|t| t.pushed_at),
                now,
            );
            assert_eq!(
                outcome.update.as_ref().map(|u| u.to.tag.as_str()),
                written,
                "{name}"
            );
            assert_eq!(next, follow_up, "{name}");
        }
    }

    #[test]
    fn reconcile_names_the_platforms_when_every_allowed_tag_lacks_one() {
        let cfg = config(&[
            ("app.platforms", "linux/arm64"),
            ("app.update-strategy", "newest-build"),
        ]);
        let app = app("1.0.0", &running("1.0.0"));
        let view = Read::of(&app);
        let case = prepare(&view, &cfg.images[0], REGION).unwrap();
        let tags = vec![tag("1.1.0", None), tag("1.2.0", None)];
        assert_eq!(case.candidates(&tags).len(), 2);
        let outcome = case.decide_reconcile(&tags, None, 2);
        assert!(
            outcome.entries[0]
                .reason
                .contains("none of the 2 allowed tags offers any of the platform(s) linux/arm64"),
            "{}",
            outcome.entries[0].reason
        );
    }

    #[test]
    fn platforms_filter_only_the_strategies_that_read_manifests_as_in_image_updater() {
        for (strategy, filters) in [
            ("semver", false),
            ("alphabetical", false),
            ("newest-build", true),
            ("digest", true),
        ] {
            let list = if strategy == "digest" {
                format!("app={IMAGE}:stable")
            } else {
                format!("app={IMAGE}")
            };
            let cfg = config(&[
                ("image-list", list.as_str()),
                ("app.platforms", "linux/arm64"),
                ("app.update-strategy", strategy),
            ]);
            let app = app("1.0.0", &running("1.0.0"));
            let view = Read::of(&app);
            let case = prepare(&view, &cfg.images[0], REGION).unwrap();
            let tags = vec![tag("1.1.0", None), tag("1.2.0", None)];
            if strategy != "digest" {
                // Filtering, every ranked tag is a candidate to check; not, only the best.
                let expected = if filters { 2 } else { 1 };
                assert_eq!(case.candidates(&tags).len(), expected, "{strategy}");
            }
            assert_eq!(case.needs(Mode::Reconcile).manifests, filters, "{strategy}");
        }
    }

    #[test]
    fn the_running_since_time_comes_from_our_record_then_from_argo_cds_history() {
        let cfg = config(&[]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let mut app = app("1.0.0", &running("1.0.0"));
        let current = TagRef::tag("1.0.0");
        assert_eq!(running_since(&app, image, &current), None);
        app["status"]["history"] = json!([
            {"deployedAt": "2025-08-20T00:00:00Z", "source": {"chart": "web", "helm": {"parameters": [{"name": "image.name", "value": IMAGE}, {"name": "image.tag", "value": "0.9.0"}]}}},
            {"deployedAt": "2025-08-21T00:00:00Z", "source": {"chart": "web", "helm": {"parameters": [{"name": "image.name", "value": IMAGE}, {"name": "image.tag", "value": "1.0.0"}]}}},
            {"deployedAt": "2025-08-22T00:00:00Z", "source": {"chart": "web", "helm": {"parameters": [{"name": "image.name", "value": IMAGE}, {"name": "image.tag", "value": "1.0.0"}]}}}]);
        assert_eq!(
            running_since(&app, image, &current).map(|s| s.time),
            Some(datetime!(2025-08-21 0:00 UTC))
        );
        app["metadata"]["annotations"][AUDIT_ANNOTATION] = json!(
            json!({"time": "2025-08-23T00:00:00Z", "images": [{"image": IMAGE, "to": "1.0.0"}]})
                .to_string()
        );
        let since = running_since(&app, image, &current).unwrap();
        assert_eq!(since.time, datetime!(2025-08-23 0:00 UTC));
        assert!(since.source.contains("last-update"));
    }
}

#[cfg(test)]
mod auto_rollback_tests {
    use super::*;
    use crate::appconfig::annotations::{AppConfig, PREFIX};
    use crate::application::app::Application as Read;
    use argocd_ecr_updater_standins::fixtures::Application;
    use std::collections::BTreeMap;

    const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web";

    fn config(auto_rollback: Option<&str>) -> AppConfig {
        let mut map = BTreeMap::from([(format!("{PREFIX}image-list"), format!("app={IMAGE}"))]);
        if let Some(value) = auto_rollback {
            map.insert(
                "argocd-ecr-updater.io/app.auto-rollback".into(),
                value.into(),
            );
        }
        AppConfig::parse(&map).unwrap()
    }

    fn failed(to: &str, outcome: &str, from: Option<&str>) -> BTreeMap<String, FailedRollout> {
        BTreeMap::from([(
            IMAGE.to_string(),
            FailedRollout {
                to: to.into(),
                outcome: outcome.into(),
                at: "2026-12-06T10:00:00Z".into(),
                reason: "alarm web-5xx went to ALARM".into(),
                from: from.map(str::to_string),
                taken_back: false,
            },
        )])
    }

    #[test]
    fn a_rollback_is_due_only_when_asked_for_after_a_failure_with_something_to_go_back_to() {
        let cases = [
            (
                "on, failed, with what it replaced",
                Some("true"),
                failed("1.1", "failed", Some("1.0")),
                true,
            ),
            ("off", None, failed("1.1", "failed", Some("1.0")), false),
            (
                "turned off explicitly",
                Some("false"),
                failed("1.1", "failed", Some("1.0")),
                false,
            ),
            (
                "a rollout that timed out is slow, not bad",
                Some("true"),
                failed("1.1", "timed-out", Some("1.0")),
                false,
            ),
            (
                "the first write replaced nothing",
                Some("true"),
                failed("1.1", "failed", None),
                false,
            ),
            ("no failure", Some("true"), BTreeMap::new(), false),
        ];
        for (case, setting, failures, due) in cases {
            let cfg = config(setting);
            let image = cfg.images[0].config.as_ref().unwrap();
            assert_eq!(rollback_due(image, &failures).is_some(), due, "{case}");
        }
    }

    #[test]
    fn a_rollback_writes_back_what_the_failed_write_replaced_only_where_it_still_runs() {
        let cfg = config(Some("true"));
        // (case, the spec's tag, decided)
        let cases = [
            ("the failed image still asked for", "1.1", Some("1.0")),
            ("moved since by someone or a newer push", "1.2", None),
            ("already rolled back", "1.0", None),
        ];
        for (case, tag, to) in cases {
            let app = Application::tracking("web", IMAGE, tag).build();
            let view = Read::of(&app);
            let image_case = prepare(&view, &cfg.images[0], "ap-northeast-2").unwrap();
            let failures = failed("1.1", "failed", Some("1.0"));
            let outcome = image_case.decide_rollback(&failures[IMAGE]);
            let update = outcome.as_ref().and_then(|o| o.update.as_ref());
            assert_eq!(update.map(|u| u.to.to_string()).as_deref(), to, "{case}");
            if let Some(update) = update {
                assert!(update.rolls_back, "{case}");
                let entry = &outcome.as_ref().unwrap().entries[0];
                assert!(
                    entry.reason.starts_with(AUTO_ROLLBACK)
                        && entry
                            .reason
                            .contains("`1.1` failed at 2026-12-06T10:00:00Z")
                        && entry.reason.contains("alarm web-5xx"),
                    "{case}: {}",
                    entry.reason
                );
            }
        }
    }
}
