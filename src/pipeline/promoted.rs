//! One promoted image of one Application (`<alias>.promote-from`): its upstream read where it
//! is (its cluster, if `CLUSTERS` names it), the chain above walked for a cycle, the
//! promotion judged ([`crate::decision::promotion`]), and then either the upstream's verified
//! image decided as a push of exactly it (the same rules, filters, gates and never-downgrade a
//! push meets, with ECR's digest for the tag checked against the one verified upstream), a
//! follow-up for the end of promote-after, or the reason nothing moves.

use super::context::{Context, Work};
use super::pushed::{Chosen, decide_pushed, send_hop};
use crate::application::app::Application;
use crate::cluster::kube::KubeError;
use crate::cluster::retry::retry_transient;
use crate::decision::controls::{self, Decider, FollowUp};
use crate::decision::decide::{self, ImageCase, ImageOutcome};
use crate::decision::promotion::{self, Judged, Place, Settings, Verified};
use crate::event::PushEvent;
use crate::failure::Failure;
use crate::report::Action;
use crate::sweep::queue::MAX_DELAY_SECONDS;
use crate::sweep::shard::SoakHop;

/// Decides a promoted image from its upstream; the digest it would move to.
pub(super) async fn decide_promoted(
    ctx: &Context,
    case: &ImageCase<'_>,
    settings: &Settings,
    work: &Work<'_>,
) -> Result<Chosen, Failure> {
    let image = case.config.image.to_string();
    let identity = case.identity();
    let here = Place {
        cluster: work.cluster.to_string(),
        namespace: identity.namespace.to_string(),
        name: identity.name.to_string(),
    };
    let place = settings.from.from_cluster(work.cluster);
    let upstream = match read_chain(ctx, work, &here, &place, &image).await? {
        Ok(upstream) => upstream,
        Err(why) => return Ok(Chosen::only(refused(ctx, case, work, &why).await)),
    };
    let now = time::OffsetDateTime::from(ctx.clock.now());
    let judged = promotion::judge(
        &Application::of(&upstream),
        &place,
        &image,
        settings.after,
        now,
    );
    let skip = |why: String| {
        let entry = case
            .entry()
            .with(Action::Skipped, format!("promoted from {place}: {why}"));
        ImageOutcome {
            entries: vec![entry],
            update: None,
        }
    };
    match judged {
        Judged::Refused(why) => Ok(Chosen::only(refused(ctx, case, work, &why).await)),
        Judged::Waiting(why) => Ok(Chosen::only(skip(why))),
        Judged::Unhealthy { verified, why } => {
            let next = if promotion::looks_again(&Application::of(&upstream), verified.at, now) {
                // The next look lands within the queue's longest delay: a hop of its chain.
                let look = now + time::Duration::seconds(i64::from(MAX_DELAY_SECONDS) - 1);
                follow_up(ctx, case, work, &verified, look).await
            } else {
                "not Healthy for over an hour: the scheduled sweep promotes once it finds it Healthy".to_string()
            };
            Ok(Chosen::only(skip(format!("{why}; {next}"))))
        }
        Judged::Soaking { verified, ripe } => {
            let next = follow_up(ctx, case, work, &verified, ripe).await;
            let why = format!(
                "verified there at {}, {} of promote-after left; {next}",
                stamp(verified.at),
                promotion::left(now, ripe)
            );
            Ok(Chosen::only(skip(why)))
        }
        Judged::Ready(verified) => {
            // An image the upstream's auto-rollback took back is promoted nowhere, even once
            // a person has put it back there.
            // Told by digest where ECR names one: a fix re-pushed under the tag taken back
            // is another image.
            let taken_back = Application::of(&upstream).rolled_back();
            let digest = match &verified.tag.digest {
                Some(digest) => Some(digest.clone()),
                None => work
                    .facts
                    .describe_one(&case.registry, &case.repository, &verified.tag.tag)
                    .await?
                    .and_then(|info| info.digest),
            };
            match crate::application::rolled_back::find(
                &taken_back,
                &image,
                &verified.value,
                digest.as_deref(),
            ) {
                Some(entry) => Ok(Chosen::only(skip(format!(
                    "upstream: {}",
                    entry.refusal(&image)
                )))),
                None => promote(ctx, case, work, &place, &verified).await,
            }
        }
    }
}

/// The upstream at `place` as read now, after the chain above it was walked for a cycle;
/// `Ok(Err)`: why there is no upstream to promote from (an error of configuration).
async fn read_chain(
    ctx: &Context,
    work: &Work<'_>,
    here: &Place,
    place: &Place,
    image: &str,
) -> Result<Result<serde_json::Value, String>, Failure> {
    let mut walked = vec![here.clone()];
    let mut next = place.clone();
    let mut first = None;
    loop {
        if let Err(why) = promotion::check_chain(&walked, &next) {
            return Ok(Err(why));
        }
        let app = match read(ctx, work, &next).await? {
            Ok(app) => app,
            // Only the named upstream's absence is this downstream's error; one further up
            // is the upstream's own to report.
            Err(why) if first.is_none() => return Ok(Err(why)),
            Err(_) => break,
        };
        let above = promotion::upstream_of(&Application::of(&app), image);
        let cluster = next.cluster.clone();
        walked.push(next);
        if first.is_none() {
            first = Some(app);
        }
        match above {
            Ok(Some(settings)) => next = settings.from.from_cluster(&cluster),
            Ok(None) | Err(_) => break,
        }
    }
    Ok(first.ok_or_else(|| "the upstream was not read".to_string()))
}

/// One Application of the chain, read where it is; `Ok(Err)`: why it cannot be (not in a
/// cluster or namespace the function watches, or not there).
async fn read(
    ctx: &Context,
    work: &Work<'_>,
    place: &Place,
) -> Result<Result<serde_json::Value, String>, Failure> {
    let Some(cluster) = ctx.clusters.iter().find(|c| c.name() == place.cluster) else {
        return Ok(Err(format!(
            "promote-from names {place}, whose cluster `{}` is not in CLUSTER_NAME or CLUSTERS",
            place.cluster
        )));
    };
    if !cluster.config().namespaces.contains(&place.namespace) {
        return Ok(Err(format!(
            "promote-from names {place}, outside the namespaces the function watches there (ARGOCD_NAMESPACES)"
        )));
    }
    let kube = cluster
        .client()
        .await
        .map_err(|e| Failure::new(format!("cannot reach the upstream's cluster: {e}"), true))?;
    match retry_transient(work.deadline, || {
        kube.get_application(&place.namespace, &place.name)
    })
    .await
    {
        Ok(app) => Ok(Ok(app)),
        Err(KubeError::NotFound { .. }) => Ok(Err(format!(
            "promote-from names {place}, and there is no such Application"
        ))),
        Err(e) => Err(Failure::new(
            format!("the upstream {place} cannot be read: {e}"),
            e.is_retryable(),
        )),
    }
}

/// The upstream's verified image, decided as a push of exactly it.
async fn promote(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    place: &Place,
    verified: &Verified,
) -> Result<Chosen, Failure> {
    let push = as_push(ctx, case, work, verified);
    let mut chosen = decide_pushed(case, &push, work).await?;
    let Some(update) = &chosen.outcome.update else {
        return Ok(chosen);
    };
    let digest = &chosen.digest;
    // The tag may have moved in ECR since the upstream verified it: only what it verified
    // is promoted.
    let moved = match (&verified.tag.digest, digest) {
        (Some(wanted), Some(now)) if wanted != now => Some(format!(
            "`{}` now points at {now} in ECR, not at {wanted}, which {place} verified",
            verified.tag.tag
        )),
        (Some(wanted), None) => Some(format!(
            "ECR names no digest for `{}`: {wanted}, which {place} verified, cannot be matched",
            verified.tag.tag
        )),
        // A tag written alone: ECR's push time for it must be the one the upstream's write
        // recorded (a re-push between that write and its verification is another image), or,
        // where the record kept none, no later than the verification.
        (None, _) => update
            .pushed_at
            .filter(|pushed| match verified.pushed {
                Some(written) => (*pushed - written).abs() >= time::Duration::seconds(1),
                None => *pushed > verified.at,
            })
            .map(|pushed| {
                format!(
                    "`{}` was pushed again at {} in ECR: {place} was written the image pushed at {} and verified it at {}",
                    verified.tag.tag,
                    stamp(pushed),
                    verified.pushed.map(stamp).unwrap_or_else(|| "an unrecorded time".into()),
                    stamp(verified.at)
                )
            }),
        _ => None,
    };
    if let Some(why) = moved {
        let reason = format!("promoted from {place}: {why}; nothing is promoted");
        chosen.outcome = chosen.outcome.refuse(Action::Skipped, &reason, false);
        return Ok(chosen);
    }
    let note = format!(
        "promoted from {place}, verified there at {}",
        stamp(verified.at)
    );
    chosen.outcome = chosen.outcome.noted(&note);
    // A tag the upstream wrote alone is judged by the digest ECR names for it now, which the
    // push time checked above ties to the image verified.
    if let Some(push) = chosen.push.as_mut()
        && push.digest.is_none()
    {
        push.digest.clone_from(&chosen.digest);
    }
    Ok(chosen)
}

/// The verified image as a push of its tag (with its digest, when the upstream wrote one),
/// so that it meets every rule a push of it would; a scan event for an image with a scan
/// gate, so that the gate reads ECR's findings for exactly that digest.
fn as_push(ctx: &Context, case: &ImageCase<'_>, work: &Work<'_>, verified: &Verified) -> PushEvent {
    PushEvent {
        id: work.event_id().to_string(),
        // The registry's id is its account; its images are in the function's region.
        account: case.registry.clone(),
        region: ctx.region.clone(),
        time: verified.at,
        repository: case.repository.clone(),
        tag: verified.tag.tag.clone(),
        digest: verified.tag.digest.clone(),
        scan_completed: case.config.scan_gate.is_some(),
    }
}

/// The follow-up that re-decides the downstream when promote-after ends: a chain of hops
/// (SQS delays a message 15 minutes at most), one per image and candidate, as a soak's.
/// Started by the upstream's verification (hop 0, sent by its rollout check); a push or a
/// sweep sends only the last hop.
async fn follow_up(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    verified: &Verified,
    ripe: time::OffsetDateTime,
) -> String {
    if ctx.config.dry_run {
        return "a dry run sends no follow-up".into();
    }
    if ctx.sweep_queue.is_none() {
        return "no sweep queue (SWEEP_QUEUE_URL): the first sweep after it promotes".into();
    }
    let now = time::OffsetDateTime::from(ctx.clock.now());
    // As the upstream's record names it, which is how its verification wakes this chain.
    let image = case.config.image.to_string();
    let candidate = verified.candidate();
    let its_chain = work
        .soak_hop
        .filter(|h| h.image == image && h.candidate == candidate);
    let decider = if its_chain.is_some() {
        Decider::ItsChain
    } else {
        Decider::Other
    };
    let remaining = (ripe - now).whole_seconds();
    match controls::soak_follow_up(decider, remaining, MAX_DELAY_SECONDS) {
        FollowUp::Send(delay) => {
            let hop = SoakHop {
                image,
                candidate,
                hop: 0,
            };
            send_hop(ctx, case, work, hop, its_chain, delay, "promotion").await
        }
        FollowUp::Leave(_) => "the chain its upstream's verification started re-decides it, or the sweep in its last 15 minutes".into(),
    }
}

/// An error of configuration: a failed entry, and a `PromotionRefused` Warning Event on the
/// Application (named after the reason, so the same refusal is recorded once).
async fn refused(ctx: &Context, case: &ImageCase<'_>, work: &Work<'_>, why: &str) -> ImageOutcome {
    if !ctx.config.dry_run {
        let app = Application::of(case.object());
        let now = time::OffsetDateTime::from(ctx.clock.now());
        let event = crate::report::events::promotion_refused(&app.involved(), why, &stamp(now));
        match work
            .kube
            .create_event(&app.metadata.namespace, &event)
            .await
        {
            Ok(()) | Err(KubeError::Conflict { .. }) => {}
            Err(e) => {
                tracing::warn!(application = %case.identity(), error = %e, "cannot record the PromotionRefused event");
            }
        }
    }
    let entries = vec![decide::failed_entry(case.entry(), why, false)];
    ImageOutcome {
        entries,
        update: None,
    }
}

fn stamp(at: time::OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
