//! An invocation's Applications, cluster by cluster: each cluster listed
//! ([`super::listing`]), each Application it concerns read, decided and written (its images,
//! [`super::application`], then its charts, [`super::chart`]) while later pages are listed,
//! and what the listing could not list and the ImageUpdater objects' status into the report.
//! [`Invocation`] is the same work as a sweep asks for it ([`crate::sweep::applications::Applications`]).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::application::process;
use super::chart::process_charts;
use super::context::{CONCURRENCY, Context, Work, kube_of};
use super::error::{HandlerError, cluster_failure};
use super::facts::RegistryFacts;
use super::listing::{self, Concerned, Found, Listed};
use crate::cluster::connect::Connection;
use crate::cluster::kube::KubeClient;
use crate::cluster::objects::Objects;
use crate::decision::decide::Mode;
use crate::report::entries;
use crate::report::{ClusterFailure, InvocationKind, Report};
use crate::sweep::gather::{self, Kept};
use crate::sweep::shard::{Shard, Tracked};

/// A sweep starts no Application this close to Lambda's deadline: it ends, reported, before
/// Lambda would stop it (a timeout is an invocation error, which Lambda retries into the
/// dead-letter queue meant for lost pushes). One Application takes well under this.
const SWEEP_MARGIN: Duration = Duration::from_secs(10);

/// Decides the event against every cluster. With one cluster, a cluster-wide failure is
/// the invocation's error. Several run concurrently, so the latency is the slowest one's; a
/// cluster that fails is reported by name and fails the invocation retryably once the others
/// are written (a retry finds them unchanged).
pub(super) async fn run_clusters(
    ctx: &Context,
    report: &mut Report,
    mode: Mode<'_>,
    deadline: Option<Instant>,
) -> Result<(), HandlerError> {
    let facts = ctx.facts();
    if let [cluster] = ctx.clusters.as_slice() {
        return run(ctx, report, cluster, mode, &facts, deadline).await;
    }
    let (kind, event_id, dry_run) = (report.mode, report.event_id.clone(), report.dry_run);
    let runs = ctx.clusters.iter().map(|cluster| {
        let (facts, event_id) = (&facts, event_id.as_str());
        async move {
            let mut part = Report::new(kind, event_id, dry_run);
            let result = run(ctx, &mut part, cluster, mode, facts, deadline).await;
            (cluster.name(), part, result)
        }
    });
    for (name, part, result) in futures_util::future::join_all(runs).await {
        let failure = result.err().map(|e| cluster_failure(name, &e));
        report.add_cluster(name, part, failure);
    }
    Ok(())
}

/// Lists every namespace (its ImageUpdater objects, then its Applications metadata-only),
/// reads, decides and writes the Applications the invocation concerns, then writes the
/// status of the objects that configured them.
async fn run(
    ctx: &Context,
    report: &mut Report,
    cluster: &Connection,
    mode: Mode<'_>,
    facts: &RegistryFacts<'_>,
    deadline: Option<Instant>,
) -> Result<(), HandlerError> {
    let kube = kube_of(cluster).await?;
    let work = &Work {
        mode,
        facts,
        deadline,
        kube,
        cluster: cluster.name(),
        soak_hop: None,
    };
    // The listing sends each Application that concerns the invocation as soon as its
    // page is parsed; they are read, decided and written while later pages are listed.
    let (found, arrivals) = tokio::sync::mpsc::unbounded_channel::<listing::Found>();
    let listed = listing::concerned(
        kube,
        cluster.config(),
        cluster.objects(),
        work.mode,
        work.deadline,
        &mut report.stats,
        found,
    );
    let arrivals = futures_util::stream::unfold(arrivals, |mut arrivals| async move {
        let found = arrivals.recv().await?;
        Some((found.concerned(), arrivals))
    });
    let kind = (report.mode, report.event_id.clone(), report.dry_run);
    let processed = process_all(ctx, &kind, arrivals, work, CONCURRENCY);
    let (listed, outcomes) = futures_util::future::join(listed, processed).await;
    finish(ctx, report, cluster, kube, listed, outcomes).await
}

/// Reads, decides and writes each Application `concurrency` at a time, in the order
/// given; in a sweep, none is started in the last [`SWEEP_MARGIN`] before the deadline.
async fn process_all(
    ctx: &Context,
    (mode, event_id, dry_run): &(InvocationKind, String, bool),
    found: impl futures_util::Stream<Item = (Concerned, Objects)>,
    work: &Work<'_>,
    concurrency: usize,
) -> Vec<Report> {
    let (mode, event_id, dry_run) = (*mode, event_id.as_str(), *dry_run);
    found
        .map(|(concerned, objects)| async move {
            let mut outcome = Report::new(mode, event_id, dry_run);
            let out_of_time = matches!(work.mode, Mode::Reconcile)
                && work
                    .deadline
                    .is_some_and(|d| d.saturating_duration_since(Instant::now()) < SWEEP_MARGIN);
            if out_of_time {
                let (namespace, name) = concerned.names();
                outcome.entries.push(entries::not_reached(namespace, name));
            } else {
                let concerns = concerned.concerns();
                let read = match concerns.images {
                    true => process(ctx, &concerned, &objects, work, &mut outcome).await,
                    false => None,
                };
                // By name, the image path's read tells whether it has charts at all.
                let unread = !concerns.images;
                if concerns.charts && (read.is_some() || unread) {
                    let names = concerned.names();
                    process_charts(ctx, names, read, &objects, work, &mut outcome).await;
                }
            }
            outcome
        })
        .buffered(concurrency.max(1))
        .collect::<Vec<Report>>()
        .await
}

/// What the listing could not list, and what was done, into the report; then the
/// status of the ImageUpdater objects that configured the Applications.
async fn finish(
    ctx: &Context,
    report: &mut Report,
    cluster: &Connection,
    kube: &KubeClient,
    listed: Listed,
    outcomes: Vec<Report>,
) -> Result<(), HandlerError> {
    let Listed {
        matched,
        mut unlisted,
        tally,
        scopes,
    } = listed;
    // Nothing listed anywhere and nothing written: the invocation's own failure. Once
    // something was written, the failure is an entry beside what was, and still fails
    // the invocation retryably (a retry finds the written Applications unchanged).
    if unlisted.len() == scopes
        && matched == 0
        && let Some((_, _, error)) = unlisted.pop()
    {
        return Err(HandlerError::List(error));
    }
    for (namespace, listing, e) in unlisted {
        let entry = entries::unlisted(&namespace, listing, &e.to_string(), e.is_retryable());
        report.entries.push(entry);
    }
    report.stats.applications_matched += matched;
    for outcome in outcomes {
        report.entries.extend(outcome.entries);
        report.stats.add(&outcome.stats);
    }
    if !ctx.config.dry_run {
        let now = OffsetDateTime::from(ctx.clock.now())
            .format(&Rfc3339)
            .unwrap_or_default();
        let requests = &mut report.stats.image_updater_requests;
        tally
            .write_statuses(kube, cluster.objects(), &report.entries, &now, requests)
            .await;
    }
    Ok(())
}

/// One invocation's Applications as a sweep asks for them: the context, and the registry
/// facts the invocation asks once (shared by every cluster and shard it runs).
pub(super) struct Invocation<'a> {
    pub ctx: &'a Context,
    pub facts: RegistryFacts<'a>,
}

impl crate::sweep::applications::Applications for Invocation<'_> {
    type Found = Found;
    type Listed = Listed;
    type Error = HandlerError;

    fn cluster_failure(&self, cluster: &str, error: &HandlerError) -> ClusterFailure {
        cluster_failure(cluster, error)
    }

    fn tracked(found: Found) -> Tracked {
        gather::tracked(found.meta)
    }

    async fn list(
        &self,
        cluster: &Connection,
        part: &mut Report,
        deadline: Option<Instant>,
        fan_out_at: usize,
    ) -> Result<(Listed, Kept<Found>), HandlerError> {
        let kube = kube_of(cluster).await?;
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
                found = found.keep(arrived, fan_out_at, Self::tracked);
            }
            found
        };
        Ok(futures_util::future::join(listed, collect).await)
    }

    async fn decide(
        &self,
        cluster: &Connection,
        part: &mut Report,
        listed: Listed,
        found: Vec<Found>,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let kube = kube_of(cluster).await?;
        let work = Work {
            mode: Mode::Reconcile,
            facts: &self.facts,
            deadline,
            kube,
            cluster: cluster.name(),
            soak_hop: None,
        };
        let kind = (part.mode, part.event_id.clone(), part.dry_run);
        let stream = futures_util::stream::iter(found.into_iter().map(Found::concerned));
        let outcomes = process_all(self.ctx, &kind, stream, &work, CONCURRENCY).await;
        finish(self.ctx, part, cluster, kube, listed, outcomes).await
    }

    async fn decide_named(
        &self,
        cluster: &Connection,
        part: &mut Report,
        shard: &Shard,
        deadline: Option<Instant>,
    ) -> Result<(), String> {
        let kube = kube_of(cluster).await.map_err(|e| e.to_string())?;
        let work = Work {
            mode: Mode::Reconcile,
            facts: &self.facts,
            deadline,
            kube,
            cluster: cluster.name(),
            soak_hop: shard.soak.as_ref(),
        };
        let found = named(cluster, kube, part, shard).await;
        part.stats.applications_matched += found.len();
        let kind = (part.mode, part.event_id.clone(), part.dry_run);
        let concurrency = self.ctx.config.sweep.shard_concurrency();
        let stream = futures_util::stream::iter(found);
        let outcomes = process_all(self.ctx, &kind, stream, &work, concurrency).await;
        for outcome in outcomes {
            part.entries.extend(outcome.entries);
            part.stats.add(&outcome.stats);
        }
        Ok(())
    }
}

/// The Applications a shard names that the cluster watches, each with the ImageUpdater
/// objects of its namespace as the listing read them (cached in the warm container,
/// revalidated by one metadata list); the others are entries in `part`.
async fn named(
    cluster: &Connection,
    kube: &KubeClient,
    part: &mut Report,
    shard: &Shard,
) -> Vec<(Concerned, Objects)> {
    let watched = KubeClient::list_scopes(&cluster.config().namespaces);
    let all_namespaces = watched.iter().any(String::is_empty);
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
    found
}
