//! One image of one Application: the registry facts its strategy needs, the decision, its
//! soak, the gates (`gates/`) on an update the soak lets go, and last the platforms its
//! manifest offers.

use super::context::{Context, Work};
use super::pushed::{Chosen, decide_again_later, decide_pushed, soaked, trigger};
use crate::decision::decide::{self, ImageCase, ImageOutcome, Mode};
use crate::event::PushEvent;
use crate::failure::{Failure, Refused};
use crate::report::Action;

/// Fetches what the image's strategy needs from ECR and lets `decide` answer; then the soak
/// says when, the gates whether, and the manifest which platforms.
///
/// The soak comes first: it is about time, and the chain of follow-ups it starts from the
/// candidate's push is what decides the image again when the window ends. The gates then
/// judge the image when it may go out, on what ECR says then (a signature ECR managed
/// signing or cosign adds after the push, an Inspector finding published during the soak),
/// and no hop in the middle of a window asks their facts.
pub(super) async fn decide_image(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
) -> ImageOutcome {
    // A rollback restores what ran before the failure: no gate stands before it.
    if let Some(rollback) = super::auto_rollback::decide_rollback(ctx, case, work).await {
        return rollback;
    }
    let Chosen {
        mut outcome,
        digest,
        pushed_at: ecr_pushed_at,
        push,
    } = decide_image_facts(ctx, case, work).await;
    let Some(update) = outcome.update.as_mut() else {
        return outcome;
    };
    // The audit record keeps the digest written: what auto-rollback remembers.
    update.digest.clone_from(&digest);
    let outcome = soaked(ctx, outcome, case, ecr_pushed_at, push.as_ref(), work).await;
    if outcome.update.is_none() {
        return outcome;
    }
    let outcome = gated(ctx, case, work, outcome, digest.as_deref(), push.as_ref()).await;
    let Some(tag) = outcome
        .update
        .as_ref()
        .and_then(|u| u.check_platforms.clone())
    else {
        return outcome;
    };
    match work.facts.check_platforms(case, &tag).await {
        Ok(Ok(())) => outcome,
        Ok(Err(Refused(reason))) => outcome.refuse(Action::Skipped, &reason, false),
        Err(e) => ImageOutcome {
            entries: vec![decide::failed_entry(case.entry(), &e.message, e.retryable)],
            update: None,
        },
    }
}

/// Every gate of `gates` on the update `outcome` carries; a gate's hold is decided again
/// later where it asks.
async fn gated(
    ctx: &Context,
    case: &ImageCase<'_>,
    work: &Work<'_>,
    outcome: ImageOutcome,
    digest: Option<&str>,
    push: Option<&PushEvent>,
) -> ImageOutcome {
    let Some(update) = outcome.update.as_ref() else {
        return outcome;
    };
    let (to, tag, pushed_at) = (
        update.to.to_string(),
        update.to.tag.clone(),
        update.pushed_at,
    );
    let read = crate::application::app::Application::of(case.object());
    let unreadable = read.rolled_back_unreadable();
    let rolled_back = read
        .rolled_back()
        .remove(&case.config.image.to_string())
        .unwrap_or_default();
    let candidate = crate::gates::Candidate {
        image: case.config,
        trigger: trigger(push),
        rolled_back: match &unreadable {
            Some(problem) => Err(problem),
            None => Ok(&rolled_back),
        },
        registry: &case.registry,
        repository: &case.repository,
        to: &to,
        tag: &tag,
        digest,
        pushed_at,
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

/// [`decide_image`] before the soak, the gates and the platforms.
async fn decide_image_facts(ctx: &Context, case: &ImageCase<'_>, work: &Work<'_>) -> Chosen {
    let decided = match crate::decision::promotion::settings(case.config) {
        // A promoted image takes its upstream's verified image, never a push or a sweep's.
        Ok(Some(settings)) => super::promoted::decide_promoted(ctx, case, &settings, work).await,
        Err(problem) => Err(Failure::new(problem, false)),
        Ok(None) => match work.mode {
            Mode::Push(push) => decide_pushed(case, push, work).await,
            Mode::Reconcile => decide_reconciled(case, work).await,
        },
    };
    decided.unwrap_or_else(|e| {
        let entries = vec![decide::failed_entry(case.entry(), &e.message, e.retryable)];
        Chosen::only(ImageOutcome {
            entries,
            update: None,
        })
    })
}

/// A reconcile: the whole tag list and the best candidate.
async fn decide_reconciled(case: &ImageCase<'_>, work: &Work<'_>) -> Result<Chosen, Failure> {
    let (registry, repository) = (case.registry.as_str(), case.repository.as_str());
    let tags = work.facts.tag_list(registry, repository).await?;
    let candidates = case.candidates(&tags);
    let choice = work.facts.choose(case, &candidates).await?;
    let chosen_digest = choice.chosen.and_then(|t| t.digest.clone());
    let mut outcome = case.decide_reconcile(&tags, choice.chosen, choice.platform_refusals);
    let digest = outcome
        .update
        .as_ref()
        .and_then(|u| u.to.digest.clone())
        .or(chosen_digest);
    let pushed_at = choice.chosen.and_then(|t| t.pushed_at);
    if let Some(update) = outcome.update.as_mut() {
        update.pushed_at = pushed_at;
    }
    Ok(Chosen {
        outcome,
        digest,
        pushed_at,
        push: None,
    })
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

    async fn scan_findings(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<crate::registry::manifest::ScanState, Failure> {
        self.registry
            .scan_findings(registry, repository, digest)
            .await
    }

    async fn digest(
        &self,
        registry: &str,
        repository: &str,
        tag: &str,
    ) -> Result<Option<String>, Failure> {
        let described = self
            .registry
            .describe_one(registry, repository, tag)
            .await?;
        Ok(described.and_then(|info| info.digest))
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
