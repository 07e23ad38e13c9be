//! Following a write until it is live. After a write that moved an image, the function
//! starts a sync where the Application asks for one and sends the first rollout check to the
//! sweep queue with a delay; each check reads the Application again, judges the write
//! ([`crate::rollout::judge`]), and either sends the next check or reports the outcome once:
//! recorded in our audit record by a guarded patch (of two deliveries of one check, one
//! records and reports), then the Kubernetes Event, the log line, the metrics and the SNS
//! report.

use std::time::Instant;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::application::app::Application;
use crate::application::audit::AuditRecord;
use crate::application::failures;
use crate::cluster::connect::{ConnectError, Connection};
use crate::cluster::eks_auth::Clock;
use crate::cluster::kube::{KubeClient, KubeError, Patch};
use crate::cluster::retry::retry_transient;
use crate::config::Config;
use crate::decision::decide;
use crate::decision::patch::escape_pointer;
use crate::git::hosts::GitHosts;
use crate::registry::ecr::Ecr;
use crate::report::{Report, RolloutReport};
use crate::rollout::alarms::{self, Verification};
use crate::rollout::judge::{self, Outcome, Verdict};
use crate::rollout::message::{self, Confirmation};
use crate::rollout::status;
use crate::rollout::watched::Unreadable;

/// What following a write borrows of the warm container: the pipeline lends it after a
/// write, the sweep's run loop for each rollout check the queue brings back.
pub struct Follow<'a> {
    /// `CONFLICT_RETRIES`, `APPLICATION_LABEL_SELECTOR` and the rollout settings.
    pub config: &'a Config,
    /// The clusters a check may name.
    pub clusters: &'a [Connection],
    /// Now: when a check judges, and what an outcome records.
    pub clock: &'a dyn Clock,
    /// Where the checks are sent (the sweep queue); `None`: no rollout is followed.
    pub checks: Option<&'a dyn Checks>,
    /// The hosts a commit status is set on.
    pub git: &'a GitHosts,
    /// ECR and the blobs it hands out: the commit an image's labels name.
    pub ecr: &'a Ecr,
    /// Downloads the image configs ECR hands out (their labels).
    pub blobs: &'a crate::http::LazyClient,
    /// The function's region: an image outside its ECR has no labels to read, and the
    /// alarms a rollout is verified by are read there.
    pub region: &'a str,
    /// CloudWatch: the alarms a rollout is verified by.
    pub alarms: &'a crate::rollout::watched::Alarms,
}

/// Sends a rollout check to come back after a delay: the sweep queue, from above.
#[async_trait::async_trait]
pub trait Checks: Send + Sync {
    /// `Err`: why it was not sent.
    async fn send_check(&self, check: &Confirmation, delay_seconds: u32) -> Result<(), String>;

    /// Wakes a downstream of a verified rollout; `Err`: why it was not sent.
    async fn send_wake(
        &self,
        wake: &crate::rollout::downstreams::Wake,
        delay_seconds: u32,
    ) -> Result<(), String>;
}

/// Where a write landed: the cluster's client and name, and the invocation's deadline.
pub struct OnCluster<'a> {
    pub kube: &'a KubeClient,
    /// Its name, which the rollout check names.
    pub cluster: &'a str,
    /// When Lambda will stop the invocation that wrote.
    pub deadline: Option<Instant>,
}

/// What a check concluded, before it is put in the report.
struct Checked {
    state: &'static str,
    reason: String,
    record: Option<AuditRecord>,
    timings: Option<judge::Timings>,
}

impl Checked {
    /// Concluded without an outcome of ours to record.
    fn ended(state: &'static str, reason: String, record: Option<AuditRecord>) -> Self {
        Checked {
            state,
            reason,
            record,
            timings: None,
        }
    }

    fn unfollowed(reason: String, record: Option<AuditRecord>) -> Self {
        Checked::ended("unfollowed", reason, record)
    }
}

impl Follow<'_> {
    /// After a write recorded at `written` (the audit record's time): a sync started where
    /// the Application asks for one (`revision`: the commit, for a write by Git), and the
    /// first rollout check sent. Returns notes for the updated images' entries.
    pub async fn follow_write(
        &self,
        on: &OnCluster<'_>,
        app: &Application<'_>,
        audit: &Value,
        revision: Option<&str>,
    ) -> Vec<String> {
        let mut notes = Vec::new();
        let written = audit["time"].as_str().unwrap_or_default();
        let (namespace, name) = app.names();
        // Asked for on the Application as read before the write: only then is it read again.
        let sync_asked = app.annotation(judge::SYNC_ANNOTATION).is_some();
        if sync_asked
            && let Some(note) = self
                .start_sync(on.kube, namespace, name, revision, on.deadline)
                .await
        {
            notes.push(note);
        }
        let followed = self.send_first_check(on, namespace, name, written).await;
        match &followed {
            Ok(()) => notes.push(format!(
                "rollout followed until live (first check in {} s)",
                message::FIRST_WAIT_SECONDS
            )),
            // Turned off on purpose: the entries need not say so each time.
            Err(_) if !self.config.rollouts.confirm => {}
            Err(why) => notes.push(format!("rollout not followed: {why}")),
        }
        // The record is read back only for an Application that asks for commit statuses:
        // `pending` when an outcome will follow, else a status that says why none will.
        let statuses_asked = app.annotation(status::ANNOTATION).is_some();
        if !statuses_asked {
            return notes;
        }
        let context = status::context(on.cluster, namespace, name);
        // The write before this one, still followed: the images this write moves again are
        // superseded (its check follows only the others), so their statuses are settled now.
        let moved: Vec<&str> = audit["images"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["image"].as_str())
            .collect();
        if let Some(mut previous) = app.audit.clone()
            && previous.rollout.is_none()
            && !previous.pull_request
            && {
                previous
                    .images
                    .retain(|i| moved.contains(&i.image.as_str()));
                !previous.images.is_empty()
            }
        {
            let settled = self
                .commit_statuses(app, &previous, |image, _| {
                    status::superseded(context.clone(), image, written)
                })
                .await;
            notes.extend(settled);
        }
        if let Some(record) = AuditRecord::from_json(&audit.to_string(), audit.clone()) {
            let statuses = self
                .commit_statuses(app, &record, |image, _| match &followed {
                    Ok(()) => status::pending(context.clone(), image),
                    Err(why) => status::unfollowed(context.clone(), image, why),
                })
                .await;
            notes.extend(statuses);
        }
        notes
    }

    /// Sends the first rollout check of the write at `written`; `Err`: why the rollout is not
    /// followed.
    async fn send_first_check(
        &self,
        on: &OnCluster<'_>,
        namespace: &str,
        name: &str,
        written: &str,
    ) -> Result<(), String> {
        if !self.config.rollouts.confirm {
            return Err("rollout confirmation is off (CONFIRM_ROLLOUTS)".into());
        }
        let Some(queue) = self.checks else {
            return Err("no sweep queue (SWEEP_QUEUE_URL)".into());
        };
        let check = Confirmation::first(on.cluster, namespace, name, written);
        queue
            .send_check(&check, message::FIRST_WAIT_SECONDS)
            .await
            .map_err(|e| {
                tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "the rollout check was not sent; the write stands, unfollowed");
                "the check could not be sent".to_string()
            })
    }

    /// Starts a sync as `argocd app sync` does, where the Application asks for it
    /// (`argocd-ecr-updater.io/sync`) and has no automated sync: read again after our write,
    /// and patched only as read (never over an operation set or running meanwhile).
    async fn start_sync(
        &self,
        kube: &KubeClient,
        namespace: &str,
        name: &str,
        revision: Option<&str>,
        deadline: Option<Instant>,
    ) -> Option<String> {
        let read = match retry_transient(deadline, || kube.get_application(namespace, name)).await {
            Ok(read) => read,
            Err(e) => {
                return Some(format!(
                    "sync not started: the Application could not be read again ({e})"
                ));
            }
        };
        let app = Application::of(&read);
        match judge::sync_wanted(&app) {
            Ok(false) => None,
            Err(why) => Some(format!("sync not started: {why}")),
            Ok(true) => {
                let (patch, kept) = judge::start_sync(&app, revision);
                let patch = Patch::Json(patch);
                match kube.patch_application(namespace, name, &patch).await {
                    Ok(_) if kept.is_empty() => {
                        Some("sync started (argocd-ecr-updater.io/sync)".into())
                    }
                    Ok(_) => Some(format!(
                        "sync started (argocd-ecr-updater.io/sync), keeping the argocd app rollback of {}: it syncs the spec with their values as rolled back",
                        kept.join(", ")
                    )),
                    Err(e @ KubeError::Invalid { .. }) => Some(format!(
                        "sync not started: the Application changed after the write ({e}); Argo CD or its next sync picks the write up"
                    )),
                    Err(e) => Some(format!("sync not started: {e}")),
                }
            }
        }
    }

    /// One rollout check. Returns why it failed when the message must come back (a retry can
    /// help) or must be parked (it names a write the Application does not show).
    pub async fn run_check(
        &self,
        report: &mut Report,
        check: &Confirmation,
        deadline: Option<Instant>,
    ) -> Option<String> {
        let label = format!(
            "rollout check {} of {}/{} ({})",
            check.check, check.namespace, check.name, check.cluster
        );
        let Some(cluster) = self.clusters.iter().find(|c| c.name() == check.cluster) else {
            let reason = format!(
                "{label}: its cluster is not in CLUSTER_NAME or CLUSTERS any more; not followed"
            );
            tracing::warn!(reason, "rollout check skipped");
            report.skipped = Some(reason);
            return None;
        };
        // Every record from the queue passes the scope checks a shard passes: a check for an
        // Application outside the watched namespaces is not read, whoever sent it.
        if !cluster.config().namespaces.contains(&check.namespace) {
            let reason = format!(
                "{label}: its namespace is outside ARGOCD_NAMESPACES; not followed (the function follows only its own writes in the namespaces it watches)"
            );
            tracing::warn!(reason, "rollout check skipped");
            report.skipped = Some(reason);
            return None;
        }
        let kube = match cluster.client().await {
            Ok(kube) => kube,
            Err(e) => return Some(format!("{label}: {}", unreachable(e))),
        };
        let checked = match self.check_once(kube, check, deadline).await {
            Ok(checked) => checked,
            Err(failure) => return Some(format!("{label}: {failure}")),
        };
        let record = checked.record.as_ref();
        let several = self.clusters.len() > 1;
        let own_metric = self
            .config
            .rollouts
            .metric_applications
            .contains(&format!("{}/{}", check.namespace, check.name));
        report.rollouts.push(RolloutReport {
            cluster: several.then(|| check.cluster.clone()),
            namespace: check.namespace.clone(),
            name: check.name.clone(),
            images: record.map_or_else(Vec::new, |r| {
                r.images
                    .iter()
                    .map(|i| format!("{}:{}", i.image, i.to))
                    .collect()
            }),
            written_at: check.write.clone(),
            check: check.check,
            state: checked.state.into(),
            reason: checked.reason,
            lead_seconds: checked
                .timings
                .as_ref()
                .map_or_else(Vec::new, |t| t.lead_seconds.clone()),
            write_to_live_seconds: checked.timings.map(|t| t.write_to_live_seconds),
            own_metric,
        });
        None
    }

    /// Reads, judges, and carries the verdict out: the next check sent, or the outcome
    /// recorded and announced. `Err` when the message must come back or be parked.
    async fn check_once(
        &self,
        kube: &KubeClient,
        check: &Confirmation,
        deadline: Option<Instant>,
    ) -> Result<Checked, String> {
        let (namespace, name) = (check.namespace.as_str(), check.name.as_str());
        let Some(written) = check.written_at() else {
            return Err("the write time does not read".into());
        };
        // Two deliveries of one check: the guard lets one record; the other reads it back.
        for _ in 0..=self.config.conflict_retries {
            let read = match self.read_followed(kube, check, deadline).await? {
                Ok(read) => read,
                Err(left) => return Ok(left),
            };
            let app = Application::of(&read);
            let timeout = judge::timeout(&app).unwrap_or_else(|problem| {
                tracing::warn!(application = %format!("{namespace}/{name}"), problem, "the confirm-timeout annotation does not read; following for the default 15 minutes");
                judge::DEFAULT_TIMEOUT
            });
            let now = OffsetDateTime::from(self.clock.now());
            // The write followed, as far as the record still knows it (an earlier write's
            // images, after a later write of others); none once all were written again.
            let record = app.audit.as_ref().and_then(|r| r.write_at(written));
            // A window being watched keeps the check going past the deadline to its end.
            let watching = record
                .as_ref()
                .and_then(|r| r.verifying_since)
                .zip(self.watch(&app).ok().flatten())
                .map(|(live, watch)| live + watch.window);
            let until = (written + timeout).max(watching.unwrap_or(written));
            let verdict = judge::judge(&app, written, now, until).map_err(|e| e.to_string())?;
            let (outcome, reason) = match verdict {
                Verdict::Pending(awaited) => {
                    let Some(record) = record else {
                        return Err("the audit record vanished between two reads".into());
                    };
                    // Not live again (Progressing) inside a window being watched: an alarm
                    // in it still fails the rollout.
                    let alarmed = self.alarmed_while_pending(kube, &app, check, &record, now);
                    match alarmed.await? {
                        Some(Step::Done(checked)) => return *checked,
                        Some(Step::Again) => continue,
                        None => {}
                    }
                    let next = check.next();
                    let later = Later {
                        state: "pending",
                        wait: message::wait_until_next(next.check, now, until),
                        awaited,
                        also: Vec::new(),
                    };
                    match self
                        .send_later(kube, &app, check, record, later, deadline)
                        .await
                    {
                        Step::Done(checked) => return *checked,
                        Step::Again => continue,
                    }
                }
                Verdict::Live { observed } => {
                    let Some(record) = record.clone() else {
                        return Err("the audit record vanished between two reads".into());
                    };
                    match self.verification(&app, &record, observed, now).await? {
                        Verify::Unwatched => (Outcome::Confirmed, "running and Healthy".into()),
                        Verify::Ended(outcome, reason) => (outcome, reason),
                        Verify::Watching(later) => {
                            match self
                                .send_later(kube, &app, check, record, later, deadline)
                                .await
                            {
                                Step::Done(checked) => return *checked,
                                Step::Again => continue,
                            }
                        }
                    }
                }
                Verdict::Superseded(at) => {
                    let at = at
                        .format(&time::format_description::well_known::Rfc3339)
                        .unwrap_or_default();
                    let reason = format!("a newer write at {at} is followed instead");
                    // The record no longer holds this write; the values the newer one
                    // replaced are what it had written, unless someone changed them between.
                    let replaced = app.audit.as_ref().map(|newer| newer.replaced());
                    return Ok(Checked::ended("superseded", reason, replaced));
                }
                Verdict::Reported(outcome) => {
                    let reason = format!("reported {outcome} by an earlier check");
                    return Ok(Checked::ended("already-reported", reason, record));
                }
                Verdict::Unfollowed(reason) => return Ok(Checked::unfollowed(reason, record)),
                ref ended => match ended.outcome() {
                    Some(found) => found,
                    None => return Err("the verdict has no outcome".into()),
                },
            };
            let Some(record) = record else {
                return Err("the audit record vanished between two reads".into());
            };
            let ended = Ended {
                outcome,
                reason: &reason,
                at: now,
            };
            match self
                .record_ended(kube, &app, check, record, &ended, deadline)
                .await
            {
                Step::Done(checked) => return *checked,
                Step::Again => continue,
            }
        }
        Err("the Application kept changing while the outcome was recorded".into())
    }

    /// The outcome recorded (guarded by the record as read) and announced.
    async fn record_ended(
        &self,
        kube: &KubeClient,
        app: &Application<'_>,
        check: &Confirmation,
        record: AuditRecord,
        ended: &Ended<'_>,
        deadline: Option<Instant>,
    ) -> Step {
        let (outcome, reason) = (ended.outcome, ended.reason.to_string());
        let checked = match record_outcome(kube, app, &record, ended, deadline).await {
            Ok(()) => Ok(self
                .announce(check, app, record, outcome, reason, ended.at)
                .await),
            // Another delivery recorded first, or another write came: judge again.
            Err(
                KubeError::Invalid {
                    validation: false, ..
                }
                | KubeError::Conflict { .. },
            ) => return Step::Again,
            Err(e) if e.is_retryable() => Err(e.to_string()),
            Err(e) => {
                let reason = format!(
                    "the outcome ({}: {reason}) could not be recorded: {e}",
                    outcome.as_str()
                );
                Ok(Checked::unfollowed(reason, Some(record)))
            }
        };
        Step::Done(Box::new(checked))
    }

    /// The checked Application as read now, or why it is no longer followed (deleted,
    /// unreadable, or no longer selected by APPLICATION_LABEL_SELECTOR, which leaves it as
    /// read). `Err`: a retryable failure, for the queue to deliver the check again.
    async fn read_followed(
        &self,
        kube: &KubeClient,
        check: &Confirmation,
        deadline: Option<Instant>,
    ) -> Result<Result<Value, Checked>, String> {
        let (namespace, name) = (check.namespace.as_str(), check.name.as_str());
        let app = match retry_transient(deadline, || kube.get_application(namespace, name)).await {
            Ok(app) => app,
            Err(KubeError::NotFound { .. }) => {
                let reason = "the Application was deleted".to_string();
                return Ok(Err(Checked::unfollowed(reason, None)));
            }
            Err(e) if e.is_retryable() => return Err(e.to_string()),
            Err(e) => {
                let reason = format!("the Application cannot be read: {e}");
                return Ok(Err(Checked::unfollowed(reason, None)));
            }
        };
        if !self
            .config
            .selects
            .matches(&crate::application::app::Metadata::of(&app).labels)
        {
            let reason = format!(
                "its labels as read now do not match APPLICATION_LABEL_SELECTOR `{}`; nothing recorded or announced",
                self.config.label_selector.as_deref().unwrap_or_default()
            );
            return Ok(Err(Checked::unfollowed(reason, None)));
        }
        Ok(Ok(app))
    }

    /// After a failure with auto-rollback on: the Application decided again now, which
    /// writes back what the failed write replaced; a wake not sent leaves it to the next
    /// sweep.
    async fn wake_for_rollback(
        &self,
        queue: &dyn Checks,
        check: &Confirmation,
        now: OffsetDateTime,
    ) {
        let (namespace, name) = (check.namespace.as_str(), check.name.as_str());
        let wake = crate::rollout::downstreams::Wake {
            id: format!("rollback-{name}-{}", now.unix_timestamp()),
            cluster: check.cluster.clone(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            promoting: None,
            what: format!("auto-rollback of {namespace}/{name}"),
        };
        match queue.send_wake(&wake, 0).await {
            Ok(()) => {
                tracing::info!(application = %format!("{namespace}/{name}"), "auto-rollback: the Application is decided again now")
            }
            Err(e) => {
                tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "auto-rollback: the wake-up was not sent; the next sweep takes the image back")
            }
        }
    }

    /// A recorded outcome, announced on the commits the write made.
    async fn announce(
        &self,
        check: &Confirmation,
        app: &Application<'_>,
        record: AuditRecord,
        outcome: Outcome,
        reason: String,
        now: OffsetDateTime,
    ) -> Checked {
        let (namespace, name) = (check.namespace.as_str(), check.name.as_str());
        let context = status::context(&check.cluster, namespace, name);
        let notes = self
            .commit_statuses(app, &record, |_, pushed| {
                let lead = pushed.map(|p| (now - p).as_seconds_f64());
                status::outcome(context.clone(), outcome, &reason, lead)
            })
            .await;
        for note in notes {
            tracing::info!(application = %format!("{namespace}/{name}"), note, "commit status");
        }
        // A verified rollout is what its downstreams are promoted on.
        if outcome == Outcome::Confirmed
            && let Some(queue) = self.checks
        {
            let upstream = crate::decision::promotion::Place {
                cluster: check.cluster.clone(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            };
            let (wakes, mut notes) =
                crate::rollout::downstreams::find(self.clusters, &upstream, &record).await;
            for wake in wakes {
                notes.push(match queue.send_wake(&wake, 0).await {
                    Ok(()) => format!("{} woken", wake.what),
                    Err(e) => format!("{} not woken ({e}): the next sweep promotes it", wake.what),
                });
            }
            for note in notes {
                tracing::info!(application = %format!("{namespace}/{name}"), note, "promotion");
            }
        }
        if outcome == Outcome::Failed
            && let Some(queue) = self.checks
            && crate::appconfig::annotations::asks_auto_rollback(&app.metadata.annotations)
        {
            self.wake_for_rollback(queue, check, now).await;
        }
        let live = record.verifying_since.unwrap_or(now);
        let timings = (outcome == Outcome::Confirmed).then(|| judge::timings(&record, live));
        Checked {
            state: outcome.as_str(),
            reason,
            record: Some(record),
            timings,
        }
    }

    /// Not yet: the next check, sent `later.wait` seconds from now.
    async fn check_later(
        &self,
        check: &Confirmation,
        later: Later,
        record: Option<AuditRecord>,
    ) -> Result<Checked, String> {
        let next = check.next();
        let Some(queue) = self.checks else {
            return Err("no sweep queue (SWEEP_QUEUE_URL) to send the next check to".into());
        };
        queue
            .send_check(&next, later.wait)
            .await
            .map_err(|e| format!("the next check was not sent: {e}"))?;
        Ok(Checked {
            state: later.state,
            reason: format!("{}; checked again in {} s", later.awaited, later.wait),
            record,
            timings: None,
        })
    }

    /// The next check claimed in the write's record (with `later.also`), then sent. Of two
    /// deliveries of one check, the one that claims sends it: one chain of checks per write.
    async fn send_later(
        &self,
        kube: &KubeClient,
        app: &Application<'_>,
        check: &Confirmation,
        record: AuditRecord,
        later: Later,
        deadline: Option<Instant>,
    ) -> Step {
        if record.checks > check.check {
            let reason = format!(
                "check {} of this write is already on its way (sent by another delivery of check {}): that chain follows it",
                record.checks, check.check
            );
            return Step::Done(Box::new(Ok(Checked::ended(
                "duplicate",
                reason,
                Some(record),
            ))));
        }
        let next = check.check.saturating_add(1);
        match claim_check(kube, app, &record, next, &later.also, deadline).await {
            Ok(()) => {}
            Err(
                KubeError::Invalid {
                    validation: false, ..
                }
                | KubeError::Conflict { .. },
            ) => return Step::Again,
            Err(e) => {
                return Step::Done(Box::new(Err(format!(
                    "the next check was not claimed: {e}"
                ))));
            }
        }
        let sent = self.check_later(check, later, Some(record)).await;
        if sent.is_err() {
            // Given back, so that this message, delivered again, sends it.
            let (namespace, name) = app.names();
            if let Err(e) = release_check(kube, namespace, name, check, deadline).await {
                tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "the claim of the next check was not given back; the write is no longer followed");
            }
        }
        Step::Done(Box::new(sent))
    }

    /// For a write whose window is being watched and that is not live now: why an alarm
    /// fails it, if one was in `ALARM` in the window so far.
    async fn alarmed_while_pending(
        &self,
        kube: &KubeClient,
        app: &Application<'_>,
        check: &Confirmation,
        record: &AuditRecord,
        now: OffsetDateTime,
    ) -> Result<Option<Step>, String> {
        let Some(since) = record.verifying_since else {
            return Ok(None);
        };
        let Verify::Ended(Outcome::Failed, why) =
            self.verification(app, record, since, now).await?
        else {
            return Ok(None);
        };
        let ended = Ended {
            outcome: Outcome::Failed,
            reason: &why,
            at: now,
        };
        // The Lambda deadline only bounds retries of transient errors; none here.
        let step = self.record_ended(kube, app, check, record.clone(), &ended, None);
        Ok(Some(step.await))
    }

    /// The alarms the Application asks its rollouts to be verified by, if any.
    fn watch(&self, app: &Application<'_>) -> Result<Option<alarms::Watch>, String> {
        let home = alarms::Home {
            region: self.region,
            account: self.config.own_account.as_deref(),
        };
        alarms::settings(
            app.annotation(alarms::ALARMS_ANNOTATION),
            app.annotation(alarms::WINDOW_ANNOTATION),
            home,
        )
    }

    /// A live write verified by the Application's alarms, if it names any: their states and
    /// history since the write judged over the window that began when a check first saw it
    /// live (`observed`, unless the record says earlier). `Err`: a read a retry can fix.
    async fn verification(
        &self,
        app: &Application<'_>,
        record: &AuditRecord,
        observed: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<Verify, String> {
        let unverifiable = |why: &str| {
            Verify::Ended(
                Outcome::Failed,
                format!("running and Healthy, but it cannot be verified: {why}"),
            )
        };
        let watch = match self.watch(app) {
            Ok(None) => {
                return Ok(match record.verifying_since {
                    None => Verify::Unwatched,
                    Some(since) => Verify::Ended(
                        Outcome::Confirmed,
                        format!(
                            "running and Healthy; the alarms watched since {} were not watched to the window's end: verify-alarms was removed",
                            since.format(&Rfc3339).unwrap_or_default()
                        ),
                    ),
                });
            }
            Ok(Some(watch)) => watch,
            Err(problem) => return Ok(unverifiable(&problem)),
        };
        let live = record.verifying_since.unwrap_or(observed);
        let seen = match self.alarms.observe(&watch.alarms, record.time, now).await {
            Ok(seen) => seen,
            Err(Unreadable::Failed(failure)) if failure.retryable => return Err(failure.message),
            Err(Unreadable::Failed(failure)) => return Ok(unverifiable(&failure.message)),
            Err(denied @ Unreadable::Denied(_)) => return Ok(unverifiable(&denied.to_string())),
        };
        Ok(match alarms::judge(&watch, live, now, &seen) {
            Verification::Failed(why) => Verify::Ended(Outcome::Failed, why),
            Verification::Verified(note) => {
                Verify::Ended(Outcome::Confirmed, format!("running and Healthy; {note}"))
            }
            Verification::Watching { left } => {
                let wait = alarms::next_check_in(&watch, left).as_secs();
                let stamp = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
                Verify::Watching(Later {
                    state: "verifying",
                    wait: u32::try_from(wait).unwrap_or(u32::MAX),
                    awaited: format!(
                        "live since {}; watching {} until {}",
                        stamp(live),
                        watch.alarms.join(", "),
                        stamp(live + watch.window)
                    ),
                    also: match record.verifying_since {
                        Some(_) => Vec::new(),
                        None => vec![("verification", serde_json::json!({"live": stamp(live)}))],
                    },
                })
            }
        })
    }

    /// Where the Application asks for them, sets `status_of(image:value, pushed)` on the
    /// commit each image of `record` names as its source. Returns a note per image: where
    /// the status was set, or why not (no labels, no credential scoped to the repository).
    /// Never fails the write or the check: a status is a report.
    async fn commit_statuses(
        &self,
        app: &Application<'_>,
        record: &AuditRecord,
        status_of: impl Fn(&str, Option<OffsetDateTime>) -> crate::git::githost::CommitStatus,
    ) -> Vec<String> {
        match status::wanted(app) {
            Ok(true) => {}
            Ok(false) => return Vec::new(),
            Err(problem) => return vec![format!("no commit status: {problem}")],
        }
        let mut notes = Vec::new();
        for image in &record.images {
            let reference = format!("{}:{}", image.image, image.to);
            let note = match self.source_of(&image.image, &image.to).await {
                Err(why) => format!("no commit status for {reference}: {why}"),
                Ok(source) => match self.git.open_source(&source.url).await {
                    Err(stop) => format!("no commit status for {reference}: {}", stop.reason),
                    Ok(host) => {
                        let short = &source.revision[..12.min(source.revision.len())];
                        let wanted = status_of(&reference, image.pushed);
                        match host.commit_status(&source.revision, &wanted).await {
                            Ok(()) => format!(
                                "commit status {} on {}@{short}",
                                wanted.state.as_str(),
                                host.name()
                            ),
                            Err(e) => format!("no commit status for {reference}: {e}"),
                        }
                    }
                },
            };
            notes.push(crate::redact::scrub(&note));
        }
        notes
    }

    /// The commit an image names as its source, from its labels in ECR.
    async fn source_of(
        &self,
        image: &str,
        value: &str,
    ) -> Result<crate::registry::provenance::SourceCommit, String> {
        let image_ref = crate::appconfig::annotations::ImageRef::parse(image);
        let Some((registry, repository)) = decide::ecr_repository(&image_ref, self.region) else {
            return Err(format!("`{image}` is not in this region's ECR"));
        };
        // The digest decides which image it is, when the value carries one.
        let reference = value.split_once('@').map_or(value, |(_, digest)| digest);
        let read = crate::registry::provenance::read(
            self.ecr,
            self.blobs,
            &registry,
            &repository,
            reference,
        );
        match read.await {
            Ok(found) => found,
            Err(failure) => Err(failure.message),
        }
    }
}

/// Why a cluster's client could not be had, as an invocation names it.
fn unreachable(error: ConnectError) -> String {
    match error {
        ConnectError::Cluster(e) => format!("cannot reach the cluster: {e}"),
        ConnectError::Client(e) => format!("cannot list Applications: {e}"),
    }
}

/// Records on the followed write that check `next` is the last sent, guarded by the record as
/// read.
async fn claim_check(
    kube: &KubeClient,
    app: &Application<'_>,
    record: &AuditRecord,
    next: u32,
    also: &[(&str, Value)],
    deadline: Option<Instant>,
) -> Result<(), KubeError> {
    let (namespace, name) = app.names();
    let mut fields = vec![("checks", Value::from(next))];
    fields.extend(also.iter().cloned());
    let patch = Patch::Json(Value::Array(record_ops(
        record,
        record.with_fields(&fields),
    )));
    retry_transient(deadline, || kube.patch_application(namespace, name, &patch))
        .await
        .map(|_| ())
}

/// Gives a claimed check back after its message was not sent: the record read again, and its
/// count set back to `check`'s if it still names the next one.
async fn release_check(
    kube: &KubeClient,
    namespace: &str,
    name: &str,
    check: &Confirmation,
    deadline: Option<Instant>,
) -> Result<(), KubeError> {
    let read = retry_transient(deadline, || kube.get_application(namespace, name)).await?;
    let app = Application::of(&read);
    let followed = check
        .written_at()
        .and_then(|at| app.audit.as_ref()?.write_at(at));
    let Some(record) = followed.filter(|r| r.checks == check.check.saturating_add(1)) else {
        return Ok(());
    };
    claim_check(kube, &app, &record, check.check, &[], deadline).await
}

/// The audit record replaced by `next`, guarded by its text as read.
fn record_ops(record: &AuditRecord, next: Value) -> Vec<Value> {
    let path = format!(
        "/metadata/annotations/{}",
        escape_pointer(crate::appconfig::annotations::AUDIT_ANNOTATION)
    );
    vec![
        serde_json::json!({"op": "test", "path": path, "value": record.text}),
        serde_json::json!({"op": "replace", "path": path, "value": next.to_string()}),
    ]
}

/// A check that sends the next one: its state, what it awaits, when the next comes, and
/// what it records with the claim besides the next check's number.
struct Later {
    state: &'static str,
    awaited: String,
    wait: u32,
    also: Vec<(&'static str, Value)>,
}

/// How a check's write to the Application went: done (what the check concluded, or why the
/// message must come back), or another delivery or write raced it, and the Application is
/// read and judged again.
enum Step {
    Done(Box<Result<Checked, String>>),
    Again,
}

/// A live write, as its verification stands.
enum Verify {
    /// The Application names no alarms: live is confirmed.
    Unwatched,
    /// Failed or verified.
    Ended(Outcome, String),
    /// Watched until its window ends.
    Watching(Later),
}

/// How a followed rollout ended, as the check found it.
struct Ended<'a> {
    outcome: Outcome,
    reason: &'a str,
    at: OffsetDateTime,
}

/// Records the outcome in our audit record (guarded by the record as read), then sends the
/// Kubernetes Event. `Err` only when the record was not written.
async fn record_outcome(
    kube: &KubeClient,
    app: &Application<'_>,
    record: &AuditRecord,
    ended: &Ended<'_>,
    deadline: Option<Instant>,
) -> Result<(), KubeError> {
    let (namespace, name) = app.names();
    let recorded = judge::recorded(record, ended.outcome, ended.reason, ended.at);
    let mut ops = record_ops(record, recorded);
    // Each image's failure outlives this record (another image's write replaces it),
    // for hold-on-failure; the same guarded patch keeps both in step.
    let at = ended
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    if let Some(next) = failures::after_outcome(
        &app.failed_rollouts(),
        record,
        ended.outcome.as_str(),
        ended.reason,
        &at,
    ) {
        ops.extend(app.failed_rollouts_ops(&next));
    }
    let patch = Patch::Json(Value::Array(ops));
    retry_transient(deadline, || kube.patch_application(namespace, name, &patch)).await?;
    let event = judge::event(app, record, ended.outcome, ended.reason, ended.at);
    match kube.create_event(namespace, &event).await {
        Ok(()) | Err(KubeError::Conflict { .. }) => {}
        Err(e) => {
            tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "cannot record the rollout event");
        }
    }
    Ok(())
}
