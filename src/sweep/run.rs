//! Running a sweep over the sweep queue. The coordinator lists every cluster metadata-only,
//! as a sweep always does; under `SWEEP_FAN_OUT_AT` Applications it decides them itself, as
//! a sweep without a queue does, and from there on it sends them out in shards. Each shard
//! invocation reads its Applications again and decides from what it reads: a shard that runs
//! twice, late or after a newer push writes nothing a fresh sweep would not. A batch of queue
//! messages may also hold rollout checks, each run by [`crate::rollout::follow`].
//!
//! How an Application is listed, read, decided and written is the pipeline's, behind
//! [`crate::sweep::applications::Applications`]: this module only says which Applications,
//! where, and how the outcomes add up.

use std::time::Instant;

use crate::cluster::connect::Connection;
use crate::config::SweepSettings;
use crate::event::ShardRecord;
use crate::report::{Report, SweepSummary};
use crate::rollout::follow::Follow;
use crate::sweep::applications::Applications;
use crate::sweep::gather::{self, Kept};
use crate::sweep::queue::ShardQueue;
use crate::sweep::shard::{self, QueueMessage, Shard};

/// A sweep's run: the Applications' side, the clusters and the sweep's settings.
pub(crate) struct Sweep<'a, A> {
    /// The pipeline, for this invocation.
    pub apps: &'a A,
    /// Every cluster the function decides for; a shard names one.
    pub clusters: &'a [Connection],
    /// `SWEEP_*`: when to fan out, and how many Applications a shard carries.
    pub settings: &'a SweepSettings,
}

/// One cluster as the coordinator listed it.
struct Gathered<'c, A: Applications> {
    cluster: &'c Connection,
    listed: A::Listed,
    found: Kept<A::Found>,
    report: Report,
}

impl<A: Applications> Sweep<'_, A> {
    /// A scheduled sweep with a sweep queue: list every cluster, then decide here (a small
    /// fleet) or send the Applications out in shards.
    pub(crate) async fn coordinate(
        &self,
        report: &mut Report,
        queue: &ShardQueue,
        deadline: Option<Instant>,
    ) -> Result<(), A::Error> {
        let fan_out_at = self.settings.fan_out_at as usize;
        let several = self.clusters.len() > 1;
        let (mode, event_id, dry_run) = (report.mode, report.event_id.as_str(), report.dry_run);
        let gathering = self.clusters.iter().map(|cluster| async move {
            let mut part = Report::new(mode, event_id, dry_run);
            let gathered = self
                .apps
                .list(cluster, &mut part, deadline, fan_out_at)
                .await;
            (cluster, gathered, part)
        });
        let mut gathered = Vec::new();
        for (cluster, result, part) in futures_util::future::join_all(gathering).await {
            match result {
                Ok((listed, found)) => gathered.push(Gathered::<A> {
                    cluster,
                    listed,
                    found,
                    report: part,
                }),
                Err(e) if several => {
                    let name = cluster.name();
                    let failure = self.apps.cluster_failure(name, &e);
                    report.add_cluster(name, part, Some(failure));
                }
                Err(e) => return Err(e),
            }
        }
        let total: usize = gathered.iter().map(|g| g.found.len()).sum();
        let kept: Vec<&Kept<A::Found>> = gathered.iter().map(|g| &g.found).collect();
        if gather::decided_here(&kept, fan_out_at) {
            return self.decide_here(report, gathered, deadline, several).await;
        }
        let mut named = Vec::new();
        for g in gathered {
            let name = g.cluster.name().to_string();
            let mut part = g.report;
            // The objects' status from the listing (what each matched); the shards' updates
            // are in their own reports, logs and Kubernetes Events.
            let finished = self
                .apps
                .decide(g.cluster, &mut part, g.listed, Vec::new(), deadline)
                .await;
            self.merge(report, &name, part, finished, several)?;
            named.push((name, g.found.into_named(A::tracked)));
        }
        let shards = shard::plan(&report.event_id, named, self.settings.shard_size as usize);
        let (sent, result) = queue.send(&shards).await;
        report.sweep = Some(SweepSummary {
            applications: total,
            shards: sent,
            shards_failed: shards.len() - sent,
        });
        tracing::info!(
            applications = total,
            shards = shards.len(),
            sent,
            shard_size = self.settings.shard_size,
            "the sweep was sent out in shards"
        );
        if let Err(e) = result {
            report.failure = Some(format!(
                "{} of {} shards were not sent: {e}",
                shards.len() - sent,
                shards.len()
            ));
        }
        Ok(())
    }

    /// A sweep under the threshold: decided in this invocation, cluster by cluster side by
    /// side, as a sweep without a queue is.
    async fn decide_here(
        &self,
        report: &mut Report,
        gathered: Vec<Gathered<'_, A>>,
        deadline: Option<Instant>,
        several: bool,
    ) -> Result<(), A::Error> {
        let runs = gathered.into_iter().map(|g| async move {
            let found = match g.found {
                Kept::Whole(found) => found,
                // Not reached: `coordinate` sends a sweep with any cluster kept by name out.
                Kept::Named(_) => Vec::new(),
            };
            let mut part = g.report;
            let finished = self
                .apps
                .decide(g.cluster, &mut part, g.listed, found, deadline)
                .await;
            (g.cluster.name().to_string(), part, finished)
        });
        for (name, part, finished) in futures_util::future::join_all(runs).await {
            self.merge(report, &name, part, finished, several)?;
        }
        Ok(())
    }

    /// One cluster's part into the sweep's report: by cluster when there are several, as
    /// the report itself when there is one.
    fn merge(
        &self,
        report: &mut Report,
        cluster: &str,
        part: Report,
        finished: Result<(), A::Error>,
        several: bool,
    ) -> Result<(), A::Error> {
        if several {
            let failure = finished
                .err()
                .map(|e| self.apps.cluster_failure(cluster, &e));
            report.add_cluster(cluster, part, failure);
            return Ok(());
        }
        finished?;
        report.entries.extend(part.entries);
        report.stats.add(&part.stats);
        Ok(())
    }

    /// The shards and rollout checks of one SQS batch, one after another; one that failed is
    /// named in `failed_messages` (or, sent directly, in `failure`).
    pub(crate) async fn run_batch(
        &self,
        report: &mut Report,
        records: &[ShardRecord],
        follow: &Follow<'_>,
        deadline: Option<Instant>,
    ) {
        let mut summary = SweepSummary::default();
        let mut failures = Vec::new();
        for record in records {
            let message_id = record.message_id.as_deref().unwrap_or("");
            let parsed = match &record.body {
                Ok(body) => shard::read(body).map_err(|e| e.to_string()),
                Err(refused) => Err(refused.clone()),
            };
            let failure = match parsed {
                Err(e) => {
                    tracing::error!(error = %e, message_id, "not a shard of this function's sweep; it fails on its own, and the queue's redrive policy parks it once SQS gives up on it");
                    Some(e)
                }
                Ok(QueueMessage::Check(check)) => {
                    let failure = follow.run_check(report, &check, deadline).await;
                    if let Some(failure) = &failure {
                        tracing::error!(
                            failure,
                            message_id,
                            "the rollout check failed; SQS delivers it again, and after the queue's receive limit parks it"
                        );
                        failures.push(failure.clone());
                        if let Some(id) = &record.message_id {
                            report.failed_messages.push(id.clone());
                        }
                    }
                    continue;
                }
                Ok(QueueMessage::Shard(shard)) => {
                    if report.event_id.is_empty() {
                        report.event_id.clone_from(&shard.sweep);
                    }
                    summary.applications += shard.applications.len();
                    self.run_shard(report, &shard, deadline).await
                }
            };
            summary.shards += 1;
            if let Some(failure) = failure {
                summary.shards_failed += 1;
                failures.push(failure);
                if let Some(id) = &record.message_id {
                    report.failed_messages.push(id.clone());
                }
            }
        }
        report.sweep = Some(summary);
        if !failures.is_empty() {
            report.failure = Some(failures.join("; "));
        }
    }

    /// One shard: its Applications read again, decided and written. Returns why it failed,
    /// if a retry can help.
    async fn run_shard(
        &self,
        report: &mut Report,
        shard: &Shard,
        deadline: Option<Instant>,
    ) -> Option<String> {
        let label = format!(
            "shard {} of {} ({})",
            shard.shard, shard.shards, shard.cluster
        );
        let Some(cluster) = self.clusters.iter().find(|c| c.name() == shard.cluster) else {
            // The clusters changed since the sweep: this one is not the function's any more.
            let reason = format!(
                "{label}: its cluster is not in CLUSTER_NAME or CLUSTERS any more; skipped (the next sweep lists the clusters configured now)"
            );
            tracing::warn!(reason, "shard skipped");
            report.skipped = Some(reason);
            return None;
        };
        let mut part = Report::new(report.mode, &shard.sweep, report.dry_run);
        if let Err(e) = self
            .apps
            .decide_named(cluster, &mut part, shard, deadline)
            .await
        {
            return Some(format!("{label}: {e}"));
        }
        let failure = part.failure_summary().map(|f| format!("{label}: {f}"));
        if self.clusters.len() > 1 {
            for entry in &mut part.entries {
                entry.cluster = Some(shard.cluster.clone());
            }
        }
        report.entries.extend(part.entries);
        report.stats.add(&part.stats);
        failure
    }
}
