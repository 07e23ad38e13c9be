//! One image of one Application: the registry facts its strategy needs, the decision, and
//! the signature check before an update is let through.

use super::context::{Context, Work};
use crate::application::soak_chains;
use crate::cluster::kube::{KubeError, Patch};
use crate::decision::controls::{self, Decider, FollowUp};
use crate::decision::decide::{self, DescribedTags, ImageCase, ImageOutcome, Mode};
use crate::event::PushEvent;
use crate::failure::Failure;
use crate::failure::Refused;
use crate::report::Action;
use crate::sweep::queue::MAX_DELAY_SECONDS;
use crate::sweep::shard::SoakHop;

/// Fetches what the image's strategy needs from ECR, lets `decide` answer, then runs every
/// gate of `gates` on an update; a gate's hold is decided again later where it asks.
pub(super) async fn decide_image(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
) -> ImageOutcome {
    let (outcome, digest) = decide_image_facts(ctx, case, work).await;
    let Some(update) = outcome.update.as_ref() else {
        return outcome;
    };
    let to = update.to.to_string();
    let candidate = crate::gates::Candidate {
        image: case.config,
        registry: &case.registry,
        repository: &case.repository,
        to: &to,
        digest: digest.as_deref(),
        pushed_at: update.pushed_at,
        now: time::OffsetDateTime::from(ctx.clock.now()),
    };
    let facts = GateFacts {
        registry: work.facts,
        ctx,
        kube: work.kube,
        now: candidate.now,
    };
    let gated = crate::gates::run(outcome, &candidate, &facts).await;
    let Some(held) = gated.hold else {
        return gated.outcome;
    };
    let next = match held.again_in {
        Some(delay) if !ctx.config.dry_run => {
            decide_again_later(ctx, case, work, "signing", delay, None).await
        }
        _ => "the next push of the image or the next sweep decides it".to_string(),
    };
    gated.outcome.refuse(
        Action::Skipped,
        &format!("{}: held; {next}", held.reason),
        false,
    )
}

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
    let id = format!("{why}-{}", work.event_id());
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

/// [`decide_image`] before the signature check, with the digest it would move to.
async fn decide_image_facts(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
) -> (ImageOutcome, Option<String>) {
    let decided = match crate::decision::promotion::settings(case.config) {
        // A promoted image takes its upstream's verified image, never a push or a sweep's.
        Ok(Some(settings)) => super::promoted::decide_promoted(ctx, case, &settings, work).await,
        Err(problem) => Err(Failure::new(problem, false)),
        Ok(None) => match work.mode {
            Mode::Push(push) => decide_pushed(ctx, case, push, work).await,
            Mode::Reconcile => decide_reconciled(ctx, case, work).await,
        },
    };
    decided.unwrap_or_else(|e| {
        let entries = vec![decide::failed_entry(case.entry(), &e.message, e.retryable)];
        let outcome = ImageOutcome {
            entries,
            update: None,
        };
        (outcome, None)
    })
}

/// A push: the tags the strategy compares described, the tag checked against ECR, the
/// scan gate with ECR's findings, the platforms. The event only says what to look at:
/// a tag is written only if ECR lists it now, and the digest returned (which the
/// signature gate checks) is the one ECR says it points at now.
pub(super) async fn decide_pushed(
    ctx: &Context,
    case: &ImageCase<'_>,
    push: &PushEvent,
    work: &Work<'_>,
) -> Result<(ImageOutcome, Option<String>), Failure> {
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
        return Ok((decided.refuse(Action::Skipped, &reason, false), None));
    }
    // A strategy that ranked by name saw the tag only now: an archived image stays put.
    if decided.update.is_some() && tag_now.is_some_and(|t| t.archived) {
        let reason = crate::policy::KeepReason::Archived(push.tag.clone()).to_string();
        return Ok((decided.refuse(Action::Skipped, &reason, false), None));
    }
    // Where ECR says the tag points now.
    let tag_digest = tag_now.and_then(|d| d.digest.clone());
    let findings = match decide::findings_needed(&decided, case.config, push, tag_digest.as_deref())
    {
        Some(digest) => Some(ctx.ecr.scan_findings(registry, repository, digest).await?),
        None => None,
    };
    let pushed_at = tag_now.and_then(|t| t.pushed_at);
    let outcome = decide::gate_push(
        decided,
        case.config,
        push,
        tag_digest.as_deref(),
        findings.as_ref(),
    );
    let mut outcome = soaked(ctx, outcome, case, pushed_at, work).await;
    if let Some(update) = outcome.update.as_mut() {
        // ECR's push time; the event's when ECR did not say (it follows the push closely).
        update.pushed_at = pushed_at.or(Some(push.time));
    }
    let digest = outcome
        .update
        .as_ref()
        .and_then(|u| u.to.digest.clone())
        .or(tag_digest);
    let Some(tag) = outcome
        .update
        .as_ref()
        .and_then(|u| u.check_platforms.clone())
    else {
        return Ok((outcome, digest));
    };
    match work.facts.check_platforms(case, &tag).await? {
        Ok(()) => Ok((outcome, digest)),
        Err(Refused(reason)) => Ok((outcome.refuse(Action::Skipped, &reason, false), digest)),
    }
}

/// A reconcile: the whole tag list, the best candidate, and its scan when gated.
async fn decide_reconciled(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
) -> Result<(ImageOutcome, Option<String>), Failure> {
    let (registry, repository) = (case.registry.as_str(), case.repository.as_str());
    let tags = work.facts.tag_list(registry, repository).await?;
    let candidates = case.candidates(&tags);
    let choice = work.facts.choose(case, &candidates).await?;
    let chosen_digest = choice.chosen.and_then(|t| t.digest.clone());
    let outcome = case.decide_reconcile(&tags, choice.chosen, choice.platform_refusals);
    // A gated image moves only to a candidate whose scan passes.
    let digest = outcome
        .update
        .as_ref()
        .and_then(|u| u.to.digest.clone())
        .or(chosen_digest);
    let gated = match (&case.config.scan_gate, &digest) {
        (Some(_), Some(digest)) => {
            let scan = ctx.ecr.scan_findings(registry, repository, digest).await?;
            decide::gate_reconcile(outcome, case.config, &scan)
        }
        (Some(gate), None) if outcome.update.is_some() => outcome.refuse(
            Action::Skipped,
            &format!("scan-gate `{gate}`: ECR named no digest for the candidate"),
            false,
        ),
        _ => outcome,
    };
    let pushed_at = choice.chosen.and_then(|t| t.pushed_at);
    let mut soaked = soaked(ctx, gated, case, pushed_at, work).await;
    if let Some(update) = soaked.update.as_mut() {
        update.pushed_at = pushed_at;
    }
    Ok((soaked, digest))
}

/// The soak gate; an update it holds is re-decided when its window ends, by a follow-up
/// shard of this one Application on the sweep queue (SQS delays a message by 15 minutes
/// at most: a longer soak is a chain of hops). One chain per image and candidate: see
/// [`controls::soak_follow_up`] for who sends a hop.
async fn soaked(
    ctx: &Context,
    outcome: ImageOutcome,
    case: &ImageCase<'_>,
    pushed_at: Option<time::OffsetDateTime>,
    work: &Work<'_>,
) -> ImageOutcome {
    let now = time::OffsetDateTime::from(ctx.clock.now());
    // A candidate is its tag and, under the digest strategy, the digest it points at.
    let held = outcome
        .update
        .as_ref()
        .map(|u| (u.to.tag.clone(), u.to.to_string()));
    let (outcome, ripe) = decide::gate_soak(outcome, case.config, pushed_at, now);
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
    let decider = match work.mode {
        _ if its_chain.is_some() => Decider::ItsChain,
        Mode::Push(push) if push.tag == tag && push.repository == case.repository => {
            Decider::ItsPush
        }
        _ => Decider::Other,
    };
    let remaining = (ripe - now).whole_seconds();
    let note = match controls::soak_follow_up(decider, remaining, MAX_DELAY_SECONDS) {
        FollowUp::Send(delay) => {
            let link = match its_chain {
                Some(hop) => soak_chains::Link::Hop(hop.hop),
                None => soak_chains::Link::Start,
            };
            let due = now + time::Duration::seconds(delay.into());
            match claim_hop(ctx, case, work, &image, &candidate, link, due).await {
                Ok(number) => {
                    let hop = SoakHop {
                        image,
                        candidate,
                        hop: number,
                    };
                    decide_again_later(ctx, case, work, "soak", delay, Some(hop)).await
                }
                Err(why) => format!("no follow-up sent: {why}"),
            }
        }
        FollowUp::Leave(why) => format!("no follow-up sent: {why}"),
    };
    outcome.noted_on_soaking(&note)
}

/// What the gates ask, answered by the invocation's registry facts and the context's
/// signature verifier.
struct GateFacts<'a> {
    registry: &'a crate::pipeline::facts::RegistryFacts<'a>,
    ctx: &'a Context,
    kube: &'a crate::cluster::kube::KubeClient,
    now: time::OffsetDateTime,
}

#[async_trait::async_trait]
impl crate::gates::Facts for GateFacts<'_> {
    async fn source_commit(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Result<crate::registry::provenance::SourceCommit, String>, Failure> {
        self.registry
            .source_commit(registry, repository, digest)
            .await
    }

    async fn signing_statuses(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<std::sync::Arc<Vec<crate::policy::signing::SigningState>>, Failure> {
        self.registry
            .signing_statuses(registry, repository, digest)
            .await
    }

    async fn notation_verified(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
        profile: &str,
    ) -> Option<Result<Result<crate::registry::notation::Verified, String>, Failure>> {
        let store = self.ctx.notation_trust.as_ref()?;
        let expected = crate::registry::managed_signing::Expected {
            registry,
            repository,
            digest,
            profile,
        };
        Some(
            self.registry
                .notation(&self.ctx.blobs, &expected, store, self.now)
                .await,
        )
    }

    async fn cosign_signed(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
        key: &crate::appconfig::cosign_key::KeyRef,
    ) -> Result<Result<(), String>, Failure> {
        self.ctx
            .signatures
            .check(&self.ctx.ecr, self.kube, registry, repository, digest, key)
            .await
    }
}
