//! The report: one entry per Application and image, saying what happened and why.
//!
//! It is the handler's return value, what `plan` prints, and (one JSON line per entry) what
//! the logs show. Failures carry their retry class: if any can be fixed by a retry or an
//! operator, the invocation fails after all other targets are done, so AWS retries the event.

pub mod chat;
pub mod entries;
pub mod events;
pub mod metrics;
pub mod sns;

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Updated,
    Unchanged,
    Skipped,
    Failed,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Entry {
    /// The cluster, when the function writes to several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub namespace: String,
    pub name: String,
    pub alias: Option<String>,
    pub image: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub action: Action,
    pub reason: String,
    /// Where the value was written: `spec.source (helm)`, `spec.sources[1] (kustomize)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// The patch, in dry-run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// Whether a retry (or an operator) can fix this failure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retryable: bool,
    /// Which configuration decided: `annotations`, or `ImageUpdater ns/name, ref "app-*"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_by: Option<String>,
    /// The ImageUpdater object (`namespace`, `name`) behind the decision, for its status.
    #[serde(skip)]
    pub configuring_object: Option<(String, String)>,
    /// Git write-back: `{repository, branch, file, commit, pullRequest}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<Value>,
}

impl Entry {
    /// This entry failed for `reason`; `retryable` when a retry of the event can fix it.
    pub fn failed(self, reason: &str, retryable: bool) -> Self {
        let mut entry = self.with(Action::Failed, reason);
        entry.retryable = retryable;
        entry
    }

    pub fn new(namespace: &str, name: &str, alias: Option<&str>, image: &str) -> Self {
        Self {
            cluster: None,
            namespace: namespace.to_string(),
            name: name.to_string(),
            alias: alias.map(str::to_string),
            image: image.to_string(),
            from: None,
            to: None,
            action: Action::Skipped,
            reason: String::new(),
            sources: Vec::new(),
            patch: None,
            retryable: false,
            configured_by: None,
            configuring_object: None,
            git: None,
        }
    }

    pub fn with(mut self, action: Action, reason: impl Into<String>) -> Self {
        self.action = action;
        self.reason = reason.into();
        self
    }
}

/// What one invocation cost, by kind of request.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    pub list_pages: u32,
    pub applications_listed: usize,
    pub applications_matched: usize,
    pub gets: u32,
    pub patches: u32,
    pub conflicts: u32,
    pub ecr_calls: u32,
    /// ImageUpdater object requests: list pages (metadata-only revalidations included) and
    /// status writes.
    pub image_updater_requests: u32,
    /// Kubernetes Events recorded for updated Applications.
    pub events: u32,
    /// Git write-back: requests to the Git host, and commits made.
    pub git_requests: u32,
    pub git_commits: u32,
}

/// Why a whole cluster could not be worked on (unreachable, token refused, not listable).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterFailure {
    pub message: String,
    /// The `errorType` the invocation would have had with this cluster alone.
    pub error_type: &'static str,
    /// Waiting will not fix it: a missing access entry, RBAC, a wrong name.
    pub needs_operator: bool,
}

/// One cluster's part of a multi-cluster report: its counts, or why it was not worked on.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterSummary {
    pub cluster: String,
    pub updated: usize,
    pub unchanged: usize,
    pub skipped: usize,
    pub failed: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<ClusterFailure>,
}

impl Stats {
    /// Adds another part's counts (another cluster's, or another Application's).
    pub fn add(&mut self, other: &Stats) {
        self.list_pages += other.list_pages;
        self.applications_listed += other.applications_listed;
        self.applications_matched += other.applications_matched;
        self.gets += other.gets;
        self.patches += other.patches;
        self.conflicts += other.conflicts;
        self.ecr_calls += other.ecr_calls;
        self.image_updater_requests += other.image_updater_requests;
        self.events += other.events;
        self.git_requests += other.git_requests;
        self.git_commits += other.git_commits;
    }
}

/// What one invocation was: the mode its report, its log line and its metrics carry.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InvocationKind {
    /// An ECR push (or a replicated image) to decide.
    Push,
    /// A scan finished: each tag it covered decided as if pushed now.
    Scan,
    /// A reconcile sweep, run here or sent out in shards (the coordinator).
    Reconcile,
    /// Shards of a sweep, from the queue or redriven.
    Shard,
    /// An event that was not work (another registry, an action we ignore).
    Skip,
}

impl InvocationKind {
    pub const ALL: [Self; 5] = [
        Self::Push,
        Self::Scan,
        Self::Reconcile,
        Self::Shard,
        Self::Skip,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Scan => "scan",
            Self::Reconcile => "reconcile",
            Self::Shard => "shard",
            Self::Skip => "skip",
        }
    }

    /// A sweep (coordinator or shard): its quiet decisions go to debug, and its failure is
    /// reported rather than retried by Lambda.
    pub fn is_sweep(self) -> bool {
        matches!(self, Self::Reconcile | Self::Shard)
    }

    /// Whether the invocation decides images (all but a skipped event).
    pub fn decides_images(self) -> bool {
        !matches!(self, Self::Skip)
    }
}

impl std::fmt::Display for InvocationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// What the invocation was.
    pub mode: InvocationKind,
    pub event_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    pub dry_run: bool,
    /// Why the whole event was not work, if it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Why a reconcile sweep failed. A sweep is not retried by Lambda (the next scheduled one
    /// is its retry, and the dead-letter queue stays for events that would otherwise be
    /// lost): its failure is reported here and counted in `InvocationsFailed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// With several clusters: one summary per cluster, in configuration order; `entries`
    /// are grouped the same way, each naming its cluster.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterSummary>,
    pub entries: Vec<Entry>,
    pub stats: Stats,
    /// A sweep sent out in shards (`reconcile`), or the shards one invocation ran (`shard`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSummary>,
    /// The SQS message ids of the shards that failed: the partial batch response, so that
    /// SQS delivers only those again.
    #[serde(skip)]
    pub failed_messages: Vec<String>,
    /// Rollout checks this invocation made: writes followed until live, failed or out of
    /// time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<RolloutReport>,
}

/// One check of one followed write.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RolloutReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub namespace: String,
    pub name: String,
    /// `image:value` of each image the write moved.
    pub images: Vec<String>,
    /// The write's time, as its audit record says.
    pub written_at: String,
    /// 1 for the first check of the write.
    pub check: u32,
    /// `confirmed`, `failed`, `timed-out` (an outcome, reported once); `pending`, `superseded`,
    /// `already-reported`, `unfollowed`.
    pub state: String,
    pub reason: String,
    /// ECR push to live observed, per image whose push time is known (confirmed only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lead_seconds: Vec<f64>,
    /// The write to live observed (confirmed only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_to_live_seconds: Option<f64>,
    /// Whether the Application gets a lead-time metric of its own.
    #[serde(skip)]
    pub own_metric: bool,
}

impl RolloutReport {
    /// Whether this check reported an outcome (once per write).
    pub fn is_outcome(&self) -> bool {
        matches!(self.state.as_str(), "confirmed" | "failed" | "timed-out")
    }
}

/// How a sweep was shared out, or how the shards of one invocation went.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SweepSummary {
    /// Applications the sweep found (coordinator), or the shards named (shard).
    pub applications: usize,
    /// Shards sent (coordinator), or run (shard).
    pub shards: usize,
    /// Shards not sent (coordinator), or that failed and go back to the queue (shard).
    pub shards_failed: usize,
}

impl Report {
    pub fn new(mode: InvocationKind, event_id: &str, dry_run: bool) -> Self {
        Self {
            mode,
            event_id: event_id.to_string(),
            image: None,
            tag: None,
            dry_run,
            skipped: None,
            failure: None,
            clusters: Vec::new(),
            entries: Vec::new(),
            stats: Stats::default(),
            sweep: None,
            failed_messages: Vec::new(),
            rollouts: Vec::new(),
        }
    }

    /// What Lambda's SQS event source mapping reads back: the shards to deliver again.
    pub fn batch_response(&self) -> serde_json::Value {
        let failures: Vec<serde_json::Value> = self
            .failed_messages
            .iter()
            .map(|id| serde_json::json!({ "itemIdentifier": id }))
            .collect();
        serde_json::json!({ "batchItemFailures": failures })
    }

    /// Adds one cluster's part of a multi-cluster event: its entries (named by cluster), its
    /// counts, and its failure if it could not be worked on at all.
    pub fn add_cluster(&mut self, cluster: &str, part: Report, failure: Option<ClusterFailure>) {
        let count = |action: Action| part.entries.iter().filter(|e| e.action == action).count();
        // A scan event decides each tag of the image in turn: one summary per cluster still.
        let at = match self.clusters.iter().position(|c| c.cluster == cluster) {
            Some(at) => at,
            None => {
                self.clusters.push(ClusterSummary {
                    cluster: cluster.to_string(),
                    updated: 0,
                    unchanged: 0,
                    skipped: 0,
                    failed: 0,
                    failure: None,
                });
                self.clusters.len() - 1
            }
        };
        let summary = &mut self.clusters[at];
        summary.updated += count(Action::Updated);
        summary.unchanged += count(Action::Unchanged);
        summary.skipped += count(Action::Skipped);
        summary.failed += count(Action::Failed);
        if summary.failure.is_none() {
            summary.failure = failure;
        }
        self.entries.extend(part.entries.into_iter().map(|mut e| {
            e.cluster = Some(cluster.to_string());
            e
        }));
        self.stats.add(&part.stats);
    }

    pub fn retryable_failures(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(|e| e.action == Action::Failed && e.retryable)
    }

    /// Every URL in every reason and message reduced to scheme, host and path
    /// ([`crate::redact::scrub`]): the report is returned, logged, published and, failed, put
    /// in the dead-letter queue.
    pub fn redact(&mut self) {
        use crate::redact::scrub;
        if let Some(skipped) = &mut self.skipped {
            *skipped = scrub(skipped);
        }
        if let Some(failure) = &mut self.failure {
            *failure = scrub(failure);
        }
        for entry in &mut self.entries {
            entry.reason = scrub(&entry.reason);
        }
        for cluster in &mut self.clusters {
            if let Some(failure) = &mut cluster.failure {
                failure.message = scrub(&failure.message);
            }
        }
        for rollout in &mut self.rollouts {
            rollout.reason = scrub(&rollout.reason);
        }
    }

    /// One structured line per decision, at a level that matches its weight.
    fn is_sweep(&self) -> bool {
        self.mode.is_sweep()
    }

    fn count(&self, action: Action) -> usize {
        self.entries.iter().filter(|e| e.action == action).count()
    }

    /// The decisions a sweep logs at DEBUG, summed: unchanged, skipped, and the skip reasons
    /// by how often they occurred (the ten most frequent, `reason ×n`).
    fn quiet_decisions(&self) -> (usize, usize, String) {
        let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
        for e in self.entries.iter().filter(|e| e.action == Action::Skipped) {
            *reasons.entry(e.reason.as_str()).or_default() += 1;
        }
        let mut ranked: Vec<(&str, usize)> = reasons.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> = ranked
            .iter()
            .take(10)
            .map(|(reason, n)| format!("{reason} ×{n}"))
            .collect();
        let mut text = shown.join("; ");
        if ranked.len() > 10 {
            text.push_str(&format!("; and {} other reason(s)", ranked.len() - 10));
        }
        (
            self.count(Action::Unchanged),
            self.count(Action::Skipped),
            text,
        )
    }

    pub fn log(&self) {
        if let Some(reason) = &self.skipped {
            tracing::info!(event_id = %self.event_id, mode = self.mode.as_str(), reason = %reason, "event skipped");
        }
        for e in &self.entries {
            let from = e.from.as_deref().unwrap_or("");
            let to = e.to.as_deref().unwrap_or("");
            let alias = e.alias.as_deref().unwrap_or("");
            let sources = e.sources.join(", ");
            let configured_by = e.configured_by.as_deref().unwrap_or("");
            let cluster = e.cluster.as_deref().unwrap_or("");
            macro_rules! decision {
                ($level:ident) => {
                    tracing::$level!(
                        event_id = %self.event_id, cluster = %cluster, namespace = %e.namespace, application = %e.name,
                        alias = %alias, image = %e.image, from = %from, to = %to,
                        action = e.action.as_str(), sources = %sources, configured_by = %configured_by,
                        dry_run = self.dry_run, reason = %e.reason,
                        "decision"
                    )
                };
            }
            match e.action {
                Action::Failed => decision!(error),
                Action::Updated => decision!(info),
                // A sweep decides every tracked Application each time, and nearly all are
                // unchanged: one line each at INFO would be most of what the function logs.
                // The summary below says how many and why; LOG_LEVEL=debug shows each.
                Action::Unchanged | Action::Skipped if self.is_sweep() => decision!(debug),
                Action::Unchanged | Action::Skipped => decision!(info),
            }
        }
        if self.is_sweep() {
            let (unchanged, skipped, reasons) = self.quiet_decisions();
            tracing::info!(
                event_id = %self.event_id, mode = self.mode.as_str(), updated = self.count(Action::Updated),
                failed = self.count(Action::Failed), unchanged, skipped, skip_reasons = %reasons,
                "sweep decisions"
            );
        }
        for c in &self.clusters {
            match &c.failure {
                Some(f) => tracing::error!(
                    event_id = %self.event_id, cluster = %c.cluster, error_type = f.error_type,
                    needs_operator = f.needs_operator, reason = %f.message, "cluster failed"
                ),
                None => tracing::info!(
                    event_id = %self.event_id, cluster = %c.cluster, updated = c.updated,
                    unchanged = c.unchanged, skipped = c.skipped, failed = c.failed, "cluster done"
                ),
            }
        }
        for r in &self.rollouts {
            let cluster = r.cluster.as_deref().unwrap_or("");
            let images = r.images.join(", ");
            let lead = r
                .lead_seconds
                .iter()
                .copied()
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            macro_rules! rollout {
                ($level:ident) => {
                    tracing::$level!(
                        cluster = %cluster, namespace = %r.namespace, application = %r.name,
                        images = %images, written_at = %r.written_at, check = r.check, state = %r.state,
                        lead_time_seconds = lead, write_to_live_seconds = r.write_to_live_seconds,
                        reason = %r.reason, "rollout"
                    )
                };
            }
            match r.state.as_str() {
                "failed" | "timed-out" => rollout!(warn),
                "confirmed" => rollout!(info),
                _ => rollout!(debug),
            }
        }
        let st = &self.stats;
        tracing::info!(
            event_id = %self.event_id, mode = self.mode.as_str(), list_pages = st.list_pages,
            applications_listed = st.applications_listed, applications_matched = st.applications_matched,
            gets = st.gets, patches = st.patches, conflicts = st.conflicts, ecr_calls = st.ecr_calls,
            image_updater_requests = st.image_updater_requests, events = st.events,
            "invocation done"
        );
    }

    /// The subject of the notification of this report, if it is worth one: something was
    /// updated or failed. SNS subjects are plain text under 100 characters.
    pub fn notification_subject(&self) -> Option<String> {
        let count = |action: Action| self.entries.iter().filter(|e| e.action == action).count();
        let (updated, failed) = (count(Action::Updated), count(Action::Failed));
        let outcomes: Vec<&RolloutReport> =
            self.rollouts.iter().filter(|r| r.is_outcome()).collect();
        if updated + failed == 0 && !outcomes.is_empty() {
            let states: Vec<String> = outcomes
                .iter()
                .map(|r| format!("{} {}/{}", r.state, r.namespace, r.name))
                .collect();
            let subject = format!("argocd-ecr-updater: rollout {}", states.join(", "));
            return Some(clipped(subject, 99));
        }
        (updated + failed > 0).then(|| {
            let what = self.image.as_deref().unwrap_or(self.mode.as_str());
            let subject =
                format!("argocd-ecr-updater: {updated} updated, {failed} failed ({what})");
            clipped(subject, 99)
        })
    }

    /// The message an invocation fails with: every retryable failure, each with its fix.
    pub fn failure_summary(&self) -> Option<String> {
        let clusters = self
            .clusters
            .iter()
            .filter_map(|c| c.failure.as_ref().map(|f| f.message.clone()));
        let failures: Vec<String> = clusters
            .chain(self.retryable_failures().map(|e| {
                let cluster = e
                    .cluster
                    .as_deref()
                    .map(|c| format!("{c}: "))
                    .unwrap_or_default();
                format!(
                    "{cluster}{}/{} ({}): {}",
                    e.namespace, e.name, e.image, e.reason
                )
            }))
            .collect();
        (!failures.is_empty()).then(|| {
            format!(
                "{} target(s) failed and may succeed on retry; all other targets were finished. {}",
                failures.len(),
                failures.join("; ")
            )
        })
    }
}

/// `text` cut to at most `max` bytes, at a character's boundary (SNS takes a subject of at
/// most 100 characters; a name from outside may hold any).
fn clipped(mut text: String, max: usize) -> String {
    if text.len() > max {
        let end = (0..=max)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_cut_at_a_character_never_inside_one() {
        let table = [
            ("short text stays whole", "abc", 99, "abc"),
            ("long text is cut to the limit", "abcdef", 4, "abcd"),
            (
                "a two-byte character across the limit goes whole",
                "abcé",
                4,
                "abc",
            ),
            ("a character ending at the limit stays", "abé", 4, "abé"),
        ];
        for (case, text, max, expected) in table {
            assert_eq!(clipped(text.to_string(), max), expected, "{case}");
        }
    }

    #[test]
    fn a_sweep_sums_its_quiet_decisions_by_reason_most_frequent_first() {
        let mut report = Report::new(InvocationKind::Shard, "e-1", false);
        let entry = |name: &str, action: Action, reason: &str| {
            Entry::new("argocd", name, None, "r/x").with(action, reason)
        };
        report
            .entries
            .push(entry("a", Action::Unchanged, "already runs it"));
        report
            .entries
            .push(entry("b", Action::Skipped, "scan gate: 2 critical"));
        report
            .entries
            .push(entry("c", Action::Skipped, "no tag matches"));
        report
            .entries
            .push(entry("d", Action::Skipped, "no tag matches"));
        report.entries.push(entry("e", Action::Updated, "newer"));
        assert_eq!(
            report.quiet_decisions(),
            (
                1,
                3,
                "no tag matches ×2; scan gate: 2 critical ×1".to_string()
            )
        );
        for n in 0..12 {
            report
                .entries
                .push(entry("f", Action::Skipped, &format!("reason {n:02}")));
        }
        let (_, skipped, reasons) = report.quiet_decisions();
        assert_eq!(skipped, 15);
        assert!(reasons.starts_with("no tag matches ×2; "), "{reasons}");
        assert!(reasons.ends_with("; and 4 other reason(s)"), "{reasons}");
    }

    #[test]
    fn only_sweeps_keep_unchanged_and_skipped_decisions_to_debug() {
        let cases = [
            (InvocationKind::Push, false),
            (InvocationKind::Scan, false),
            (InvocationKind::Reconcile, true),
            (InvocationKind::Shard, true),
            (InvocationKind::Skip, false),
        ];
        for (mode, sweep) in cases {
            assert_eq!(Report::new(mode, "e", false).is_sweep(), sweep, "{mode}");
        }
    }

    #[test]
    fn only_retryable_failures_fail_the_invocation() {
        let mut report = Report::new(InvocationKind::Push, "e-1", false);
        report
            .entries
            .push(Entry::new("argocd", "a", Some("app"), "r/x").with(Action::Updated, "ok"));
        let mut config =
            Entry::new("argocd", "b", None, "r/x").with(Action::Failed, "bad annotation");
        config.retryable = false;
        report.entries.push(config);
        assert_eq!(report.failure_summary(), None);
        let mut throttled =
            Entry::new("argocd", "c", None, "r/x").with(Action::Failed, "throttled");
        throttled.retryable = true;
        report.entries.push(throttled);
        let summary = report.failure_summary().unwrap();
        assert!(summary.starts_with("1 target(s) failed"), "{summary}");
        assert!(summary.contains("argocd/c (r/x): throttled"));
    }

    #[test]
    fn a_cluster_added_twice_keeps_one_summary_with_both_parts_counted() {
        let part = |action: Action| {
            let mut part = Report::new(InvocationKind::Scan, "e-1", false);
            part.entries
                .push(Entry::new("argocd", "a", None, "r/x").with(action, "why"));
            part
        };
        let mut report = Report::new(InvocationKind::Scan, "e-1", false);
        report.add_cluster("dev", part(Action::Updated), None);
        report.add_cluster("prod", part(Action::Skipped), None);
        let failure = ClusterFailure {
            message: "cluster `dev`: down".into(),
            error_type: "Retryable.ListApplications",
            needs_operator: false,
        };
        report.add_cluster("dev", part(Action::Unchanged), Some(failure));
        let dev = &report.clusters[0];
        assert_eq!(report.clusters.len(), 2);
        assert_eq!((dev.updated, dev.unchanged), (1, 1));
        assert!(dev.failure.is_some());
        assert_eq!(report.entries.len(), 3);
        assert!(report.entries.iter().all(|e| e.cluster.is_some()));
        assert!(
            report
                .failure_summary()
                .unwrap()
                .contains("cluster `dev`: down")
        );
    }

    #[test]
    fn the_report_serialises_with_lowercase_actions_and_no_empty_extras() {
        let mut report = Report::new(InvocationKind::Push, "e-1", true);
        report
            .entries
            .push(Entry::new("argocd", "a", Some("app"), "r/x").with(Action::Unchanged, "same"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["entries"][0]["action"], "unchanged");
        assert!(json["entries"][0].get("patch").is_none());
        assert!(json["entries"][0].get("retryable").is_none());
        assert_eq!(json["dry_run"], true);
    }
}
