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
pub(crate) mod managed_signing;
pub(crate) mod not_rolled_back;
pub(crate) mod scan;

use async_trait::async_trait;

use crate::appconfig::annotations::ImageConfig;
use crate::appconfig::cosign_key::KeyRef;
use crate::decision::decide::ImageOutcome;
use crate::failure::Failure;
use crate::policy::signing::SigningState;
use crate::registry::manifest::ScanState;
use crate::registry::notation::Verified;
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

    /// ECR managed signing's statuses of the digest.
    async fn signing_statuses(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<std::sync::Arc<Vec<SigningState>>, Failure>;

    /// Whether a Notation signature of the digest by `profile` verifies against the trust
    /// roots; `None` when no roots are configured (ECR's word is taken).
    async fn notation_verified(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
        profile: &str,
    ) -> Option<Result<Result<Verified, String>, Failure>>;

    /// ECR's findings for the digest (`DescribeImageScanFindings`), never an event's counts.
    async fn scan_findings(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<ScanState, Failure>;

    /// The digest ECR names for `tag` now (`None`: no such tag).
    async fn digest(
        &self,
        registry: &str,
        repository: &str,
        tag: &str,
    ) -> Result<Option<String>, Failure>;

    /// Whether the digest carries a valid cosign signature by `key`, or exactly why not.
    async fn cosign_signed(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
        key: &KeyRef,
    ) -> Result<Result<(), String>, Failure>;
}

/// What asked for the decision a gate judges: only the scan gate tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger<'a> {
    /// A push of the image (the event's digest, when it named one).
    Push { digest: Option<&'a str> },
    /// A scan-completed event of `digest`, or a promotion of a verified image (decided as
    /// the completed scan of the digest verified upstream).
    Scanned { digest: Option<&'a str> },
    /// A sweep, or a follow-up of one Application.
    Sweep,
}

/// The update a gate judges.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub image: &'a ImageConfig,
    /// What asked for the decision.
    pub trigger: Trigger<'a>,
    /// The images of this image auto-rollback took back on the Application, or why the
    /// annotation that holds them does not read.
    pub rolled_back: Result<&'a [crate::application::rolled_back::RolledBack], &'a str>,
    /// The ECR registry (account id) and repository.
    pub registry: &'a str,
    pub repository: &'a str,
    /// The value to be written (a tag, or `tag@sha256:…`), and its tag.
    pub to: &'a str,
    pub tag: &'a str,
    /// The digest ECR names for it, when it named one.
    pub digest: Option<&'a str>,
    /// When ECR received it, when known.
    pub pushed_at: Option<time::OffsetDateTime>,
    /// The function's clock now.
    pub now: time::OffsetDateTime,
}

/// A gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Through, with what the gate found (a note on the entry).
    Pass(String),
    /// Not written, and why (a skip: the next image may pass).
    Refuse(String),
    /// Not yet: not written now, and decided again in `again_in` seconds where that helps
    /// (else by the next push or sweep).
    Hold {
        reason: String,
        again_in: Option<u32>,
    },
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

/// Every gate, in the order they run.
pub const ALL: &[&dyn Gate] = &[
    &not_rolled_back::NotRolledBack,
    &scan::Scan,
    &managed_signing::ManagedSigning,
    &built_from::BuiltFrom,
    &cosign::Cosign,
];

/// What the gates made of an update: the outcome (refused by the first gate that did not
/// pass), and a hold the caller carries out (a re-decision to schedule, then the skip).
pub struct Gated {
    pub outcome: ImageOutcome,
    pub hold: Option<Held>,
}

/// A gate held the update: why, and when to decide it again if that helps.
pub struct Held {
    pub reason: String,
    pub again_in: Option<u32>,
}

/// Runs every gate of [`ALL`] on the update `outcome` carries; the first that does not pass
/// ends it.
pub async fn run(mut outcome: ImageOutcome, candidate: &Candidate<'_>, facts: &dyn Facts) -> Gated {
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
            Verdict::Hold { reason, again_in } => {
                return Gated {
                    outcome,
                    hold: Some(Held { reason, again_in }),
                };
            }
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
    Gated {
        outcome,
        hold: None,
    }
}

/// A [`Facts`] that answers what a test sets, for the gates' tables.
#[cfg(test)]
pub(crate) mod answers {
    use super::*;

    type Labels = Result<Result<SourceCommit, String>, Failure>;

    pub(crate) struct Answers {
        pub source_commit: Labels,
        pub cosign: Result<Result<(), String>, Failure>,
        pub signing: Result<Vec<SigningState>, Failure>,
        pub notation: Option<Result<Result<Verified, String>, Failure>>,
        pub digest: Result<Option<String>, Failure>,
        pub scan: Result<ScanState, Failure>,
        /// How many times the findings were asked for.
        pub scans: std::sync::atomic::AtomicUsize,
    }

    impl Answers {
        pub(crate) fn scans_asked(&self) -> usize {
            self.scans.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl Default for Answers {
        fn default() -> Self {
            Self {
                source_commit: Ok(Err("no labels set by the test".into())),
                cosign: Ok(Err("no signature set by the test".into())),
                signing: Ok(Vec::new()),
                notation: None,
                digest: Ok(None),
                scan: Ok(ScanState::Failed("no scan set by the test".into())),
                scans: Default::default(),
            }
        }
    }

    #[async_trait]
    impl Facts for Answers {
        async fn source_commit(&self, _: &str, _: &str, _: &str) -> Labels {
            self.source_commit.clone()
        }

        async fn signing_statuses(
            &self,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<std::sync::Arc<Vec<SigningState>>, Failure> {
            self.signing.clone().map(std::sync::Arc::new)
        }

        async fn notation_verified(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
        ) -> Option<Result<Result<Verified, String>, Failure>> {
            self.notation.clone()
        }

        async fn cosign_signed(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &KeyRef,
        ) -> Result<Result<(), String>, Failure> {
            self.cosign.clone()
        }

        async fn digest(&self, _: &str, _: &str, _: &str) -> Result<Option<String>, Failure> {
            self.digest.clone()
        }

        async fn scan_findings(&self, _: &str, _: &str, _: &str) -> Result<ScanState, Failure> {
            self.scans.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.scan.clone()
        }
    }

    /// A verdict as the tables read it.
    pub(crate) fn said(verdict: Option<Verdict>) -> String {
        match verdict {
            None => "not asked".into(),
            Some(Verdict::Pass(note)) => format!("pass: {note}"),
            Some(Verdict::Refuse(reason)) => format!("refuse: {reason}"),
            Some(Verdict::Hold { reason, again_in }) => format!("hold {again_in:?}: {reason}"),
            Some(Verdict::Misconfigured(problem)) => format!("misconfigured: {problem}"),
            Some(Verdict::Failed(f)) => {
                format!("failed: {} (retryable {})", f.message, f.retryable)
            }
        }
    }

    /// A candidate of `image`, pushed at 10:00, judged at 10:05.
    pub(crate) fn candidate<'a>(image: &'a ImageConfig, digest: Option<&'a str>) -> Candidate<'a> {
        Candidate {
            image,
            trigger: Trigger::Sweep,
            rolled_back: Ok(&[]),
            registry: "1",
            repository: "web",
            to: "1.4.0",
            tag: "1.4.0",
            digest,
            pushed_at: Some(time::macros::datetime!(2026-12-03 10:00 UTC)),
            now: time::macros::datetime!(2026-12-03 10:05 UTC),
        }
    }
}
