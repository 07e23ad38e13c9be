//! Gates between a decided update and its write, as one idea: each gate is one file behind
//! [`Gate`]: whether the image's configuration asks for it (its own setting,
//! `argocd-ecr-updater.io/<alias>.<name>` read with [`ImageConfig::own_setting`], or a typed
//! field such as an ImageUpdater object's cosign key), what it needs to know about the
//! candidate (asked through [`Facts`], which the pipeline answers at most once per digest and
//! invocation), and its verdict: pass, saying what it found, or refuse, saying why. [`run`]
//! applies every gate of [`ALL`] in order to an update the decision and the checks before it
//! let through.
//!
//! A new gate is its file here and its line in [`ALL`]; a fact no gate asked before is one
//! method of [`Facts`] answered in `pipeline::facts`, with the IAM action it calls; its
//! section in docs/gates.md.

pub(crate) mod built_from;
pub(crate) mod cosign;

use async_trait::async_trait;

use crate::appconfig::annotations::ImageConfig;
use crate::appconfig::cosign_key::KeyRef;
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

    /// Whether the digest carries a valid cosign signature by `key`, or exactly why not.
    async fn cosign_signed(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
        key: &KeyRef,
    ) -> Result<Result<(), String>, Failure>;
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
    /// Its setting does not read: the annotation and what is wrong with it.
    Misconfigured(String),
    /// A fact could not be read (retryable or not, as the failure says).
    Failed(Failure),
}

/// One gate.
#[async_trait]
pub trait Gate: Sync {
    /// The verdict on `candidate`; `None` when the image's configuration does not ask for
    /// this gate.
    async fn judge(&self, candidate: &Candidate<'_>, facts: &dyn Facts) -> Option<Verdict>;
}

/// Every gate, in the order they run: the cheapest first, so a refusal saves the rest.
pub const ALL: &[&dyn Gate] = &[&built_from::BuiltFrom, &cosign::Cosign];

/// Runs every gate of [`ALL`] on the update `outcome` carries; the first that does not pass
/// ends it.
pub async fn run(
    mut outcome: ImageOutcome,
    candidate: &Candidate<'_>,
    facts: &dyn Facts,
) -> ImageOutcome {
    for gate in ALL {
        if outcome.update.is_none() {
            break;
        }
        let Some(verdict) = gate.judge(candidate, facts).await else {
            continue;
        };
        outcome = match verdict {
            Verdict::Pass(note) => outcome.noted(&note),
            Verdict::Refuse(reason) => outcome.refuse(Action::Skipped, &reason, false),
            Verdict::Misconfigured(problem) => outcome.refuse(
                Action::Failed,
                &format!("configuration error: {problem}"),
                false,
            ),
            Verdict::Failed(failure) => {
                outcome.refuse(Action::Failed, &failure.message, failure.retryable)
            }
        };
    }
    outcome
}
