//! A push decided for one image: the tags its strategy compares described and the tag
//! checked against ECR; the soak with its follow-up chain; what an event's push and a
//! promotion's push of an upstream's verified image share, with the follow-up shards both
//! send.

use super::context::{Context, Work};
use crate::application::soak_chains;
use crate::cluster::kube::{KubeError, Patch};
use crate::decision::controls::{self, Decider, FollowUp};
use crate::decision::decide::{self, DescribedTags, ImageCase, ImageOutcome, Mode};
use crate::event::PushEvent;
use crate::failure::Failure;
use crate::report::Action;
use crate::sweep::queue::MAX_DELAY_SECONDS;
use crate::sweep::shard::SoakHop;

/// Sends a one-Application shard that re-decides `case`'s Application in `delay` seconds;
/// says when, or why it will be decided otherwise.
pub(super) async fn decide_again_later(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    why: &str,
    delay: u32,
    soak: Option<SoakHop>,
) -> String {
    let Some(queue) = &ctx.sweep_queue else {
        return "no sweep queue (SWEEP_QUEUE_URL): the next sweep decides it".into();
    };
    let identity = case.identity();
    // A shard's run has no event id of its own: the follow-up is named after the Application
    // and the hour it is sent, so its log lines can be told apart.
    let id = match work.event_id() {
        "" => format!(
            "{why}-{}-{}",
            identity.name,
            time::OffsetDateTime::from(ctx.clock.now()).unix_timestamp()
        ),
        event => format!("{why}-{event}"),
    };
    let shard =
        crate::sweep::shard::follow_up(&id, work.cluster, identity.namespace, identity.name, soak);
    match queue.send_after(&shard, delay).await {
        Ok(()) => format!("re-decided in {delay} s"),
        Err(e) => {
            tracing::warn!(error = %e, application = %identity, "the follow-up was not sent; the next sweep decides it");
            "the follow-up was not sent: the next sweep decides it".into()
        }
    }
}

/// Sends the next hop of `hop`'s chain in `delay` seconds: the hop after `its_chain`'s
/// (the hop being run, when this decision is one), or the chain's first, claimed on the
/// Application first so that one chain runs; says when, or why none was sent.
pub(super) async fn send_hop(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    mut hop: SoakHop,
    its_chain: Option<&SoakHop>,
    delay: u32,
    why: &str,
) -> String {
    let link = match its_chain {
        Some(running) => soak_chains::Link::Hop(running.hop),
        None => soak_chains::Link::Start,
    };
    let now = time::OffsetDateTime::from(ctx.clock.now());
    let due = now + time::Duration::seconds(delay.into());
    match claim_hop(ctx, case, work, &hop.image, &hop.candidate, link, due).await {
        Ok(number) => {
            hop.hop = number;
            decide_again_later(ctx, case, work, why, delay, Some(hop)).await
        }
        Err(why) => format!("no follow-up sent: {why}"),
    }
}

/// Claims the next hop of `image`'s soak chain on the Application (guarded, read again
/// on a conflict): its number, or why none is sent.
pub(super) async fn claim_hop(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    image: &str,
    candidate: &str,
    link: soak_chains::Link,
    due: time::OffsetDateTime,
) -> Result<u32, String> {
    let identity = case.identity();
    let (namespace, name) = (identity.namespace, identity.name);
    let now = time::OffsetDateTime::from(ctx.clock.now());
    let mut app = case.object().clone();
    for _ in 0..=ctx.config.conflict_retries {
        let (next, number) =
            soak_chains::claim(&soak_chains::of(&app), image, candidate, link, now, due)?;
        let patch = Patch::Json(soak_chains::patch(&app, &next));
        match work.kube.patch_application(namespace, name, &patch).await {
            Ok(_) => return Ok(number),
            Err(
                KubeError::Invalid {
                    validation: false, ..
                }
                | KubeError::Conflict { .. },
            ) => {
                app = work
                    .kube
                    .get_application(namespace, name)
                    .await
                    .map_err(|e| format!("the Application could not be read again: {e}"))?;
            }
            // Sent unclaimed rather than not at all: a second chain costs invocations,
            // a lost one the rollout at the window's end.
            Err(e) => {
                tracing::warn!(application = %format!("{namespace}/{name}"), error = %e, "the soak hop was not recorded; sent unrecorded");
                return Ok(match link {
                    soak_chains::Link::Start => 1,
                    soak_chains::Link::Hop(n) => n.saturating_add(1),
                });
            }
        }
    }
    Err("the Application kept changing while the follow-up was recorded; the next sweep re-decides it".into())
}

/// An image decided before its gates and its soak: the outcome, the digest it would move
/// to, ECR's push time of that image (what the soak counts from), and the push that decided
/// it (an event's, or a promotion's of its upstream's verified image), if one did.
pub(super) struct Chosen {
    pub outcome: ImageOutcome,
    pub digest: Option<String>,
    pub pushed_at: Option<time::OffsetDateTime>,
    pub push: Option<PushEvent>,
}

impl Chosen {
    /// An outcome that moves nothing, or moves without a digest, push time or push.
    pub(super) fn only(outcome: ImageOutcome) -> Self {
        Self {
            outcome,
            digest: None,
            pushed_at: None,
            push: None,
        }
    }
}

/// What asked for a decision, as the gates read it: the push that decided it (a scan event
/// is a push whose scan completed), or none for a sweep.
pub(super) fn trigger(push: Option<&PushEvent>) -> crate::gates::Trigger<'_> {
    match push {
        Some(push) if push.scan_completed => crate::gates::Trigger::Scanned {
            digest: push.digest.as_deref(),
        },
        Some(push) => crate::gates::Trigger::Push {
            digest: push.digest.as_deref(),
        },
        None => crate::gates::Trigger::Sweep,
    }
}

/// A push: the tags the strategy compares described, the tag checked against ECR. The event
/// only says what to look at: a tag is written only if ECR lists it now, and the digest
/// returned (which the gates check) is the one ECR says it points at now.
pub(super) async fn decide_pushed(
    case: &ImageCase<'_>,
    push: &PushEvent,
    work: &Work<'_>,
) -> Result<Chosen, Failure> {
    if !decide::concerns(case.config, push) {
        return Ok(Chosen::only(ImageOutcome {
            entries: Vec::new(),
            update: None,
        }));
    }
    let (registry, repository) = (case.registry.as_str(), case.repository.as_str());
    let needs = case.needs(Mode::Push(push));
    let mut described = if needs.describe.is_empty() {
        DescribedTags::new()
    } else {
        let wanted = &needs.describe;
        work.facts.describe(registry, repository, wanted).await?
    };
    let decided = case.decide_push(push, &described);
    // A strategy that ranks by name alone (semver, alphabetical) decided without ECR:
    // before anything is written, ECR must list the tag (one DescribeImages, shared by
    // every Application of the invocation).
    if decided.update.is_some() && !described.contains_key(&push.tag) {
        let asked = std::slice::from_ref(&push.tag);
        described.extend(work.facts.describe(registry, repository, asked).await?);
    }
    let tag_now = described.get(&push.tag).and_then(|d| d.as_ref());
    if decided.update.is_some() && tag_now.is_none() {
        let reason = decide::tag_not_in_registry(&push.tag, repository);
        return Ok(Chosen::only(decided.refuse(
            Action::Skipped,
            &reason,
            false,
        )));
    }
    // A strategy that ranked by name saw the tag only now: an archived image stays put.
    if decided.update.is_some() && tag_now.is_some_and(|t| t.archived) {
        let reason = crate::policy::KeepReason::Archived(push.tag.clone()).to_string();
        return Ok(Chosen::only(decided.refuse(
            Action::Skipped,
            &reason,
            false,
        )));
    }
    // Where ECR says the tag points now, and when it was pushed there.
    let tag_digest = tag_now.and_then(|d| d.digest.clone());
    let pushed_at = tag_now.and_then(|t| t.pushed_at);
    let mut outcome = decided;
    if let Some(update) = outcome.update.as_mut() {
        // ECR's push time; the event's when ECR did not say (it follows the push closely).
        update.pushed_at = pushed_at.or(Some(push.time));
    }
    let digest = outcome
        .update
        .as_ref()
        .and_then(|u| u.to.digest.clone())
        .or(tag_digest);
    Ok(Chosen {
        outcome,
        digest,
        pushed_at,
        push: Some(push.clone()),
    })
}

/// The soak gate; an update it holds is re-decided when its window ends, by a follow-up
/// shard of this one Application on the sweep queue (SQS delays a message by 15 minutes
/// at most: a longer soak is a chain of hops). One chain per image and candidate: see
/// [`controls::soak_follow_up`] for who sends a hop.
pub(super) async fn soaked(
    ctx: &Context,
    outcome: ImageOutcome,
    case: &ImageCase<'_>,
    pushed_at: Option<time::OffsetDateTime>,
    push: Option<&PushEvent>,
    work: &Work<'_>,
) -> ImageOutcome {
    let now = time::OffsetDateTime::from(ctx.clock.now());
    // A candidate is its tag and, under the digest strategy, the digest it points at.
    let held = outcome
        .update
        .as_ref()
        .map(|u| (u.to.tag.clone(), u.to.to_string()));
    let (outcome, ripe) = controls::soak(outcome, case.config, pushed_at, now);
    let (Some(ripe), Some((tag, candidate))) = (ripe, held) else {
        return outcome;
    };
    if ctx.config.dry_run {
        return outcome;
    }
    if ctx.sweep_queue.is_none() {
        return outcome.noted_on_soaking(
            "no sweep queue (SWEEP_QUEUE_URL): the first sweep after the window rolls it out",
        );
    }
    let image = format!("{}/{}", case.registry, case.repository);
    let its_chain = work
        .soak_hop
        .filter(|h| h.image == image && h.candidate == candidate);
    // The push decided: the event's, or a promotion's push of its upstream's verified image,
    // which starts the chain as the candidate's own push would.
    let decider = match push {
        _ if its_chain.is_some() => Decider::ItsChain,
        Some(push) if push.tag == tag && push.repository == case.repository => Decider::ItsPush,
        _ => Decider::Other,
    };
    let remaining = (ripe - now).whole_seconds();
    let note = match controls::soak_follow_up(decider, remaining, MAX_DELAY_SECONDS) {
        FollowUp::Send(delay) => {
            let hop = SoakHop {
                image,
                candidate,
                hop: 0,
            };
            send_hop(ctx, case, work, hop, its_chain, delay, "soak").await
        }
        FollowUp::Leave(why) => format!("no follow-up sent: {why}"),
    };
    outcome.noted_on_soaking(&note)
}
