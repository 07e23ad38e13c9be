//! The scheduled sweep of a large fleet, fanned out over the sweep queue. The coordinator
//! lists every cluster metadata-only, as a sweep always does; under `SWEEP_FAN_OUT_AT`
//! Applications it decides them itself, as a sweep without a queue does, and from there on it
//! sends them out in shards. Each shard invocation reads its Applications again and decides
//! from what it reads: a shard that runs twice, late or after a newer push writes nothing a
//! fresh sweep would not.

use std::time::Instant;

use super::handler::{CONCURRENCY, Handler, HandlerError, Work, cluster_failure};
use crate::cluster::connect::Connection;
use crate::cluster::kube::KubeClient;
use crate::cluster::objects::Objects;
use crate::decision::decide::Mode;
use crate::event::ShardRecord;
use crate::pipeline::facts::RegistryFacts;
use crate::pipeline::listing::{self, Concerned, Found, Listed};
use crate::report::entries;
use crate::report::{Report, SweepSummary};
use crate::sweep::gather::{self, Kept};
use crate::sweep::queue::ShardQueue;
use crate::sweep::shard::{self, QueueMessage, Shard};

/// One cluster as the coordinator listed it.
struct Gathered<'c> {
    cluster: &'c Connection,
    kube: &'c KubeClient,
    listed: Listed,
    found: Kept<Found>,
    report: Report,
}

impl Handler {
    /// A scheduled sweep with a sweep queue: list every cluster, then decide here (a small
    /// fleet) or send the Applications out in shards.
    pub(super) async fn sweep(
        &self,
        report: &mut Report,
        queue: &ShardQueue,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let fan_out_at = self.config.sweep.fan_out_at as usize;
        let several = self.clusters.len() > 1;
        let (mode, event_id, dry_run) = (report.mode, report.event_id.as_str(), report.dry_run);
        let gathering = self.clusters.iter().map(|cluster| async move {
            let mut part = Report::new(mode, event_id, dry_run);
            let gathered = self.gather(cluster, &mut part, deadline, fan_out_at).await;
            (cluster, gathered, part)
        });
        let mut gathered = Vec::new();
        for (cluster, result, part) in futures_util::future::join_all(gathering).await {
            match result {
                Ok((kube, listed, found)) => gathered.push(Gathered {
                    cluster,
                    kube,
                    listed,
                    found,
                    report: part,
                }),
                Err(e) if several => {
                    let name = cluster.name();
                    let failure = cluster_failure(name, &e);
                    report.add_cluster(name, part, Some(failure));
                }
                Err(e) => return Err(e),
            }
        }
        let total: usize = gathered.iter().map(|g| g.found.len()).sum();
        let kept: Vec<&Kept<Found>> = gathered.iter().map(|g| &g.found).collect();
        if gather::decided_here(&kept, fan_out_at) {
            return self.sweep_here(report, gathered, deadline, several).await;
        }
        let mut named = Vec::new();
        for g in gathered {
            let name = g.cluster.name().to_string();
            let mut part = g.report;
            // The objects' status from the listing (what each matched); the shards' updates
            // are in their own reports, logs and Kubernetes Events.
            let finished = self
                .finish(&mut part, g.cluster, g.kube, g.listed, Vec::new())
                .await;
            self.merge(report, &name, part, finished, several)?;
            named.push((name, g.found.into_named(|f| gather::tracked(f.meta))));
        }
        let shards = shard::plan(
            &report.event_id,
            named,
            self.config.sweep.shard_size as usize,
        );
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
            shard_size = self.config.sweep.shard_size,
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

    /// Lists one cluster as a sweep does, keeping what it finds: whole while the cluster alone
    /// is under the fan-out threshold, by name from there on.
    async fn gather<'c>(
        &self,
        cluster: &'c Connection,
        part: &mut Report,
        deadline: Option<Instant>,
        fan_out_at: usize,
    ) -> Result<(&'c KubeClient, Listed, Kept<Found>), HandlerError> {
        let kube = self.kube_of(cluster).await?;
        let (sender, mut arrivals) = tokio::sync::mpsc::unbounded_channel::<Found>();
        let listed = listing::concerned(
            kube,
            cluster.config(),
            cluster.objects(),
            Mode::Reconcile,
            deadline,
            &mut part.stats,
            sender,
        );
        let collect = async {
            let mut found = Kept::default();
            while let Some(arrived) = arrivals.recv().await {
                found = found.keep(arrived, fan_out_at, |f| gather::tracked(f.meta));
            }
            found
        };
        let (listed, found) = futures_util::future::join(listed, collect).await;
        Ok((kube, listed, found))
    }

    /// A sweep under the threshold: decided in this invocation, cluster by cluster side by
    /// side, as a sweep without a queue is.
    async fn sweep_here(
        &self,
        report: &mut Report,
        gathered: Vec<Gathered<'_>>,
        deadline: Option<Instant>,
        several: bool,
    ) -> Result<(), HandlerError> {
        let facts = RegistryFacts::new(&self.ecr, &self.blobs);
        let kind = (report.mode, report.event_id.clone(), report.dry_run);
        let runs = gathered.into_iter().map(|g| {
            let (facts, kind) = (&facts, &kind);
            async move {
                let work = Work {
                    mode: Mode::Reconcile,
                    facts,
                    deadline,
                    kube: g.kube,
                    cluster: g.cluster.name(),
                    soak_hop: None,
                };
                let found = match g.found {
                    Kept::Whole(found) => found,
                    // Not reached: `sweep` sends a sweep with any cluster kept by name out.
                    Kept::Named(_) => Vec::new(),
                };
                let listed = found.into_iter().map(Found::concerned);
                let stream = futures_util::stream::iter(listed);
                let outcomes = self.process_all(kind, stream, &work, CONCURRENCY).await;
                let mut part = g.report;
                let finished = self
                    .finish(&mut part, g.cluster, g.kube, g.listed, outcomes)
                    .await;
                (g.cluster.name().to_string(), part, finished)
            }
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
        finished: Result<(), HandlerError>,
        several: bool,
    ) -> Result<(), HandlerError> {
        if several {
            let failure = finished.err().map(|e| cluster_failure(cluster, &e));
            report.add_cluster(cluster, part, failure);
            return Ok(());
        }
        finished?;
        report.entries.extend(part.entries);
        report.stats.add(&part.stats);
        Ok(())
    }

    /// The shards of one SQS batch, one after another; a shard that failed is named in
    /// `failed_messages` (or, sent directly, in `failure`).
    pub(super) async fn run_shards(
        &self,
        report: &mut Report,
        records: &[ShardRecord],
        deadline: Option<Instant>,
    ) {
        let facts = RegistryFacts::new(&self.ecr, &self.blobs);
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
                    let failure = self.run_check(report, &check, deadline).await;
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
                    self.run_shard(report, &shard, &facts, deadline).await
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

    /// One shard: its Applications read again, decided and written, at most the shard's
    /// share of the cluster's request budget at a time. Returns why it failed, if a retry
    /// can help.
    async fn run_shard(
        &self,
        report: &mut Report,
        shard: &Shard,
        facts: &RegistryFacts<'_>,
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
        let kube = match self.kube_of(cluster).await {
            Ok(kube) => kube,
            Err(e) => return Some(format!("{label}: {e}")),
        };
        let work = Work {
            mode: Mode::Reconcile,
            facts,
            deadline,
            kube,
            cluster: cluster.name(),
            soak_hop: shard.soak.as_ref(),
        };
        let watched = KubeClient::list_scopes(&cluster.config().namespaces);
        let all_namespaces = watched.iter().any(String::is_empty);
        // Each namespace's ImageUpdater objects, as the listing read them (cached in the
        // warm container, revalidated by one metadata list).
        let mut scopes: std::collections::BTreeMap<String, Option<Objects>> = Default::default();
        let mut found = Vec::new();
        for app in &shard.applications {
            if !cluster.config().namespaces.contains(&app.namespace) {
                part.entries
                    .push(entries::unwatched(&app.namespace, &app.name));
                continue;
            }
            let scope = if all_namespaces {
                ""
            } else {
                app.namespace.as_str()
            };
            if !scopes.contains_key(scope) {
                let objects = if cluster.config().read_image_updaters {
                    let requests = &mut part.stats.image_updater_requests;
                    match cluster.objects().load(kube, scope, requests).await {
                        Ok(objects) => Some(objects),
                        Err(e) => {
                            part.entries.push(entries::unlisted(
                                scope,
                                entries::Listing::ImageUpdaters,
                                &e.to_string(),
                                e.is_retryable(),
                            ));
                            None
                        }
                    }
                } else {
                    Some(Objects::default())
                };
                scopes.insert(scope.to_string(), objects);
            }
            let Some(Some(objects)) = scopes.get(scope) else {
                continue;
            };
            let named = Concerned::Named {
                namespace: app.namespace.clone(),
                name: app.name.clone(),
            };
            found.push((named, objects.clone()));
        }
        part.stats.applications_matched += found.len();
        let kind = (part.mode, part.event_id.clone(), part.dry_run);
        let concurrency = self.config.sweep.shard_concurrency();
        let stream = futures_util::stream::iter(found);
        let outcomes = self.process_all(&kind, stream, &work, concurrency).await;
        for outcome in outcomes {
            part.entries.extend(outcome.entries);
            part.stats.add(&outcome.stats);
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
