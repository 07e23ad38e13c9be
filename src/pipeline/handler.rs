//! The handler: one invocation, from event to report.
//!
//! [`Handler`] is built once per warm container (its [`Context`]) and dispatches each
//! event by its kind: a push or a scan decided against every cluster
//! ([`super::run::run_clusters`]); a scheduled sweep, in this invocation or sent out in shards
//! ([`crate::sweep::run`]); a batch of shards and rollout checks from the sweep queue. Every
//! report then leaves one way: redacted, logged, and published where a topic is set and
//! something was decided. Every target is finished before the invocation fails for the ones a
//! retry can fix.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::announce;
use super::context::Context;
use super::run::{Invocation, run_clusters};
use crate::cluster::connect::StartError;
use crate::cluster::eks_auth::Clock;
use crate::config::Config;
use crate::decision::decide::Mode;
use crate::event::{self, Invocation as Event};
use crate::report::entries;
use crate::report::{InvocationKind, Report};
use crate::sweep::run::Sweep;

use crate::pipeline::error::HandlerError;

/// Everything an invocation needs, built once per warm container.
pub struct Handler {
    context: Context,
}

/// How a dispatched invocation ends, once its report is out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Nothing was decided: the report leaves by the log only.
    Skipped,
    /// A push or a scan: targets that failed fail the invocation, for Lambda to retry.
    Decided,
    /// A scheduled sweep: its failure is in the report; the next sweep is its retry (not
    /// Lambda, so the dead-letter queue holds only events that would be lost).
    Swept,
    /// A batch from the sweep queue: a failed message is named for SQS to deliver again; a
    /// batch sent directly (a redrive) fails the invocation instead.
    Batch { direct: bool },
}

impl Handler {
    /// The handler as a cold start makes it ([`Context::start`]).
    pub async fn start(
        config: Config,
        eks_sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        let context = Context::start(config, eks_sdk, clock).await?;
        Ok(Self { context })
    }

    /// Builds the handler from the SDK configuration `main` loads once per container
    /// ([`Context::from_sdk`]).
    pub fn from_sdk(
        config: Config,
        eks_sdk: &aws_config::SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        let context = Context::from_sdk(config, eks_sdk, clock)?;
        Ok(Self { context })
    }

    /// Handles one invocation. `deadline` is when Lambda will stop us.
    pub async fn handle(
        &self,
        event: &Value,
        deadline: Option<Instant>,
    ) -> Result<Report, HandlerError> {
        let ctx = &self.context;
        let ecr_calls_before = ctx.ecr.calls();
        let (mut report, ending) = self.dispatch(event, deadline).await?;
        report.stats.ecr_calls = ctx.ecr.calls() - ecr_calls_before;
        report.redact();
        report.log();
        // The report itself says whether it is worth a message.
        if ending != Ending::Skipped
            && let Some(topic) = &ctx.config.notification_topic_arn
        {
            announce::publish_report(&ctx.sns, topic, ctx.config.notification_format, &report)
                .await;
        }
        match (ending, report.failure.clone()) {
            (Ending::Batch { direct: true }, Some(summary)) => Err(HandlerError::Targets {
                summary,
                report: Box::new(report),
            }),
            (Ending::Batch { .. }, Some(failure)) => {
                tracing::error!(
                    failure,
                    failed_messages = report.failed_messages.len(),
                    "shards failed; SQS delivers them again, and after the queue's receive limit parks them in the dead-letter queue"
                );
                Ok(report)
            }
            (Ending::Swept, Some(failure)) => {
                tracing::error!(
                    failure,
                    "the reconcile sweep failed; the next scheduled sweep retries it (not Lambda, so the dead-letter queue holds only events that would be lost)"
                );
                Ok(report)
            }
            (Ending::Decided, None) => match report.failure_summary() {
                Some(summary) => Err(HandlerError::Targets {
                    summary,
                    report: Box::new(report),
                }),
                None => Ok(report),
            },
            _ => Ok(report),
        }
    }

    /// The event parsed and run by its kind, into its report.
    async fn dispatch(
        &self,
        event: &Value,
        deadline: Option<Instant>,
    ) -> Result<(Report, Ending), HandlerError> {
        let ctx = &self.context;
        let dry_run = ctx.config.dry_run;
        let intake = event::Intake {
            sweep_queue_arn: ctx.config.sweep.queue_arn.as_deref(),
        };
        let report = match event::parse(event, &intake)? {
            Event::Skip { id, reason } => {
                let mut report = Report::new(InvocationKind::Skip, &id, dry_run);
                report.skipped = Some(reason);
                (report, Ending::Skipped)
            }
            Event::Push(push) => {
                let mut report = Report::new(InvocationKind::Push, &push.id, dry_run);
                report.image = Some(push.image());
                report.tag = Some(push.tag.clone());
                if push.region != ctx.region {
                    report.skipped = Some(entries::other_region(&push.region, &ctx.region));
                    return Ok((report, Ending::Skipped));
                }
                run_clusters(ctx, &mut report, Mode::Push(&push), deadline).await?;
                (report, Ending::Decided)
            }
            Event::Scan(pushes) => {
                let Some(first) = pushes.first() else {
                    let report = Report::new(InvocationKind::Scan, "", dry_run);
                    return Ok((report, Ending::Skipped));
                };
                let mut report = Report::new(InvocationKind::Scan, &first.id, dry_run);
                report.image = Some(first.image());
                let tags: Vec<&str> = pushes.iter().map(|p| p.tag.as_str()).collect();
                report.tag = Some(tags.join(","));
                if first.region != ctx.region {
                    report.skipped = Some(entries::other_region(&first.region, &ctx.region));
                    return Ok((report, Ending::Skipped));
                }
                // One decision per tag of the scanned image, as if each were pushed now.
                for push in &pushes {
                    run_clusters(ctx, &mut report, Mode::Push(push), deadline).await?;
                }
                (report, Ending::Decided)
            }
            Event::Reconcile { id } => {
                let mut report = Report::new(InvocationKind::Reconcile, &id, dry_run);
                let swept = match &ctx.sweep_queue {
                    Some(queue) => {
                        let apps = self.invocation();
                        let sweep = self.sweep(&apps);
                        sweep.coordinate(&mut report, queue, deadline).await
                    }
                    None => run_clusters(ctx, &mut report, Mode::Reconcile, deadline).await,
                };
                if let Err(error) = swept {
                    report.failure = Some(format!("{}: {error}", error.error_type()));
                }
                if report.failure.is_none() {
                    report.failure = report.failure_summary();
                }
                (report, Ending::Swept)
            }
            Event::Shards(records) => {
                let mut report = Report::new(InvocationKind::Shard, "", dry_run);
                let direct = records.iter().any(|r| r.message_id.is_none());
                let apps = self.invocation();
                let follow = ctx.follow();
                let sweep = self.sweep(&apps);
                sweep
                    .run_batch(&mut report, &records, &follow, deadline)
                    .await;
                (report, Ending::Batch { direct })
            }
        };
        Ok(report)
    }

    /// This invocation's Applications, as a sweep asks for them.
    fn invocation(&self) -> Invocation<'_> {
        Invocation {
            ctx: &self.context,
            facts: self.context.facts(),
        }
    }

    fn sweep<'a>(&'a self, apps: &'a Invocation<'a>) -> Sweep<'a, Invocation<'a>> {
        Sweep {
            apps,
            clusters: &self.context.clusters,
            settings: &self.context.config.sweep,
        }
    }
}
