//! Gates between a decided update and its write, as one idea: each gate is one file behind
//! [`Gate`]: the setting that asks for it on an image (`argocd-ecr-updater.io/<alias>.<name>`,
//! or app-wide without the alias; on an ImageUpdater object, in its annotations), what it
//! needs to know about the candidate (asked through [`Facts`], which the pipeline answers at
//! most once per digest and invocation), and its verdict: pass, saying what it found, or
//! refuse, saying why. [`run`] applies every gate of [`ALL`] an image asks for, in order, to
//! an update the decision and the checks before it let through.
//!
//! A new gate is its file here and its line in [`ALL`]; a fact no gate asked before is one
//! method of [`Facts`] answered in `pipeline::facts`, with the IAM action it calls; its
//! section in docs/gates.md.

pub(crate) mod built_from;

use async_trait::async_trait;

use crate::appconfig::annotations::ImageConfig;
use crate::decision::decide::ImageOutcome;
use crate::failure::Failure;
use crate::registry::provenance::SourceCommit;
use crate::report::Action;

/// What gates may ask about a candidate, each answered once per digest and invocation.
#[async_trait]
pub trait Facts: Sync {
    /// The source repository and commit the image's OCI labels name, or why they do not;
    /// `Err` when ECR could not be read.
    async fn source_commit(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Result<SourceCommit, String>, Failure>;
}

/// The update a gate judges.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub image: &'a ImageConfig,
    /// The ECR registry (account id) and repository.
    pub registry: &'a str,
    pub repository: &'a str,
    /// The value to be written (a tag, or `tag@sha256:…`).
    pub to: &'a str,
    /// The digest ECR names for it, when it named one.
    pub digest: Option<&'a str>,
}

/// A gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Through, with what the gate found (a note on the entry).
    Pass(String),
    /// Not written, and why (a skip: the next image may pass).
    Refuse(String),
    /// The setting does not read: what is wrong with it.
    Misconfigured(String),
    /// A fact could not be read (retryable or not, as the failure says).
    Failed(Failure),
}

/// One gate.
#[async_trait]
pub trait Gate: Sync {
    /// The setting that asks for it, and its name in reasons.
    fn setting(&self) -> &'static str;

    /// The verdict on `candidate`, given the setting's value.
    async fn judge(&self, value: &str, candidate: &Candidate<'_>, facts: &dyn Facts) -> Verdict;
}

/// Every gate, in the order they run.
pub const ALL: &[&dyn Gate] = &[&built_from::BuiltFrom];

/// Runs every gate of [`ALL`] the image asks for on the update `outcome` carries; the first
/// that does not pass ends it.
pub async fn run(
    mut outcome: ImageOutcome,
    candidate: &Candidate<'_>,
    facts: &dyn Facts,
) -> ImageOutcome {
    for gate in ALL {
        if outcome.update.is_none() {
            break;
        }
        let Some((key, value)) = candidate.image.own_setting(gate.setting()) else {
            continue;
        };
        outcome = match gate.judge(value, candidate, facts).await {
            Verdict::Pass(note) => outcome.noted(&note),
            Verdict::Refuse(reason) => outcome.refuse(Action::Skipped, &reason, false),
            Verdict::Misconfigured(problem) => outcome.refuse(
                Action::Failed,
                &format!(
                    "configuration error: `{key}: {}`: {problem}",
                    crate::redact::scrub(value)
                ),
                false,
            ),
            Verdict::Failed(failure) => {
                outcome.refuse(Action::Failed, &failure.message, failure.retryable)
            }
        };
    }
    outcome
}
