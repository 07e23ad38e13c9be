//! `signing-profile` (ours): an image goes out only once ECR managed signing has signed its
//! digest with the named AWS Signer profile (`ecr:DescribeImageSigningStatus`), and, where
//! `NOTATION_TRUST_ROOTS` is set, once a Notation signature of it verifies in Rust against
//! those roots (`registry::managed_signing`). Signing in progress holds the image: decided
//! again a minute later for as long as it is under 30 minutes old (then by the next push or
//! sweep); a failed signing refuses it.

use async_trait::async_trait;

use crate::gates::{Candidate, Facts, Gate, Verdict};
use crate::policy::signing::{SigningProfile, SigningState};

/// How long after its push an image whose signing is in progress is re-checked; past it, ECR's
/// signing has stalled and the next push or sweep decides.
pub const SIGNING_WAIT: time::Duration = time::Duration::minutes(30);

/// A signature takes seconds to minutes: a minute between checks.
pub const SIGNING_RECHECK_SECONDS: u32 = 60;

pub struct ManagedSigning;

#[async_trait]
impl Gate for ManagedSigning {
    async fn judge(&self, candidate: &Candidate<'_>, facts: &dyn Facts) -> Option<Verdict> {
        let profile = candidate.image.signing_profile.as_ref()?;
        let Some(digest) = candidate.digest else {
            return Some(Verdict::Refuse(
                "managed signing: ECR named no digest for the image to roll out".into(),
            ));
        };
        let (registry, repository) = (candidate.registry, candidate.repository);
        let states = match facts.signing_statuses(registry, repository, digest).await {
            Ok(states) => states,
            Err(failure) => return Some(Verdict::Failed(failure)),
        };
        Some(match verdict(profile, digest, &states) {
            SigningVerdict::Signed { note, profile_arn } => {
                match facts
                    .notation_verified(registry, repository, digest, &profile_arn)
                    .await
                {
                    None => Verdict::Pass(note),
                    Some(Ok(Ok(verified))) => Verdict::Pass(format!(
                        "{note}; its Notation signature verifies: made by `{}` at {}, chain to `{}` (NOTATION_TRUST_ROOTS)",
                        verified.profile_version,
                        verified
                            .signed_at
                            .format(&time::format_description::well_known::Rfc3339)
                            .unwrap_or_default(),
                        verified.root
                    )),
                    Some(Ok(Err(reason))) => Verdict::Refuse(format!(
                        "ECR reports {digest} signed by `{profile_arn}`, but no Notation signature of it verifies against NOTATION_TRUST_ROOTS: {reason}; not rolled out"
                    )),
                    Some(Err(failure)) => Verdict::Failed(failure),
                }
            }
            SigningVerdict::Refused(reason) => Verdict::Refuse(reason),
            SigningVerdict::InProgress(reason) => {
                let young = candidate
                    .pushed_at
                    .is_none_or(|at| candidate.now - at < SIGNING_WAIT);
                Verdict::Hold {
                    reason,
                    again_in: young.then_some(SIGNING_RECHECK_SECONDS),
                }
            }
        })
    }
}

/// What ECR's statuses say of a digest under the named profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigningVerdict {
    /// Signed: the note, and the ARN of the profile ECR says signed.
    Signed { note: String, profile_arn: String },
    /// Not yet: held, and decided again.
    InProgress(String),
    /// Not to be rolled out: the reason.
    Refused(String),
}

/// The gate for `digest` under `profile`, from ECR's statuses of it.
pub fn verdict(profile: &SigningProfile, digest: &str, states: &[SigningState]) -> SigningVerdict {
    let Some(state) = states.iter().find(|s| profile.is(&s.profile_arn)) else {
        let others: Vec<&str> = states.iter().map(|s| s.profile_arn.as_str()).collect();
        let signed_by = if others.is_empty() {
            "no profile".to_string()
        } else {
            others.join(", ")
        };
        return SigningVerdict::Refused(format!(
            "{digest} has no managed signature by signing profile `{profile}` (ECR lists {signed_by}): add the profile to the registry's signing rules for this repository (PutSigningConfiguration)"
        ));
    };
    match state.status.as_str() {
        "COMPLETE" => SigningVerdict::Signed {
            note: format!(
                "{digest} is signed by `{}` (ECR managed signing)",
                state.profile_arn
            ),
            profile_arn: state.profile_arn.clone(),
        },
        "IN_PROGRESS" => SigningVerdict::InProgress(format!(
            "managed signing of {digest} by `{}` is in progress",
            state.profile_arn
        )),
        "FAILED" => SigningVerdict::Refused(format!(
            "managed signing of {digest} by `{}` failed ({}: {}): not rolled out; push the image again once signing works",
            state.profile_arn,
            state.failure_code.as_deref().unwrap_or("no code"),
            crate::redact::scrub(state.failure_reason.as_deref().unwrap_or("no reason given"))
        )),
        other => SigningVerdict::Refused(format!(
            "managed signing of {digest} by `{}` reports `{other}`, which this version does not know: not rolled out",
            state.profile_arn
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AppConfig;
    use crate::failure::Failure;
    use crate::gates::answers::{Answers, candidate, said};
    use crate::policy::signing::SigningState;
    use crate::registry::notation::Verified;
    use std::collections::BTreeMap;

    const ARN: &str = "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod";

    fn state(status: &str) -> Answers {
        Answers {
            signing: Ok(vec![SigningState {
                profile_arn: ARN.into(),
                status: status.into(),
                failure_code: Some("KeyRevoked".into()),
                failure_reason: Some("the key was revoked".into()),
            }]),
            ..Answers::default()
        }
    }

    #[tokio::test]
    async fn an_image_goes_out_once_signed_held_while_signing_and_refused_when_it_failed() {
        let config = AppConfig::parse(&BTreeMap::from([
            (
                "argocd-image-updater.argoproj.io/image-list".to_string(),
                "app=1.dkr.ecr.r.amazonaws.com/web".to_string(),
            ),
            (
                "argocd-ecr-updater.io/app.signing-profile".to_string(),
                ARN.to_string(),
            ),
        ]))
        .unwrap();
        let image = config.images[0].config.as_ref().unwrap();
        let verified = Verified {
            profile_version: format!("{ARN}/v1"),
            signed_at: time::macros::datetime!(2026-12-03 10:01 UTC),
            root: "CN=AWS Signer".into(),
        };
        let notation = |answer| Answers {
            notation: Some(answer),
            ..state("COMPLETE")
        };
        let a = Some("sha256:a");
        let cases: Vec<(&str, Option<&str>, Option<i64>, Answers, &str)> = vec![
            (
                "signed, no trust roots: ECR's word",
                a,
                None,
                state("COMPLETE"),
                "pass: sha256:a is signed by",
            ),
            (
                "signed, and its Notation signature verifies",
                a,
                None,
                notation(Ok(Ok(verified))),
                "pass: sha256:a is signed by",
            ),
            (
                "signed, but no Notation signature verifies: refused",
                a,
                None,
                notation(Ok(Err("the chain ends at another root".into()))),
                "refuse: ECR reports sha256:a signed by",
            ),
            (
                "signing failed: refused with its code",
                a,
                None,
                state("FAILED"),
                "refuse: managed signing of sha256:a by",
            ),
            (
                "signing in progress, pushed 5 minutes ago: held, again in a minute",
                a,
                None,
                state("IN_PROGRESS"),
                "hold Some(60): managed signing of sha256:a",
            ),
            (
                "signing in progress for 40 minutes: held, left to the next push or sweep",
                a,
                Some(40),
                state("IN_PROGRESS"),
                "hold None: managed signing",
            ),
            (
                "ECR unreadable: failed as it says",
                a,
                None,
                Answers {
                    signing: Err(Failure::new("throttled", true)),
                    ..Answers::default()
                },
                "failed: throttled (retryable true)",
            ),
            (
                "no digest: refused",
                None,
                None,
                state("COMPLETE"),
                "refuse: managed signing: ECR named no digest",
            ),
        ];
        for (case, digest, minutes_old, facts, expected) in cases {
            let mut candidate = candidate(image, digest);
            if let Some(minutes) = minutes_old {
                candidate.pushed_at = Some(candidate.now - time::Duration::minutes(minutes));
            }
            let got = said(ManagedSigning.judge(&candidate, &facts).await);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }

    fn signing_state(arn: &str, status: &str) -> SigningState {
        SigningState {
            profile_arn: arn.into(),
            status: status.into(),
            failure_code: (status == "FAILED").then(|| "AccessDenied".into()),
            failure_reason: (status == "FAILED").then(|| "the profile was revoked".into()),
        }
    }

    #[test]
    fn only_a_complete_signature_by_the_named_profile_lets_an_image_through() {
        let profile = SigningProfile::Name("release_prod".into());
        let other = "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/nightly";
        let cases: Vec<(&str, Vec<SigningState>, &str)> = vec![
            (
                "complete",
                vec![signing_state(ARN, "COMPLETE")],
                "signed: sha256:d is signed by",
            ),
            (
                "in progress",
                vec![signing_state(ARN, "IN_PROGRESS")],
                "held: managed signing of sha256:d by",
            ),
            (
                "failed",
                vec![signing_state(ARN, "FAILED")],
                "refused: managed signing of sha256:d by `arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod` failed (AccessDenied: the profile was revoked)",
            ),
            (
                "signed by another profile only",
                vec![signing_state(other, "COMPLETE")],
                "refused: sha256:d has no managed signature by signing profile `release_prod` (ECR lists arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/nightly)",
            ),
            (
                "no signing at all",
                vec![],
                "refused: sha256:d has no managed signature by signing profile `release_prod` (ECR lists no profile)",
            ),
            (
                "complete beside another in progress",
                vec![
                    signing_state(other, "IN_PROGRESS"),
                    signing_state(ARN, "COMPLETE"),
                ],
                "signed",
            ),
            (
                "a status ECR adds later",
                vec![signing_state(ARN, "REVOKED")],
                "refused: managed signing of sha256:d by `arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod` reports `REVOKED`",
            ),
        ];
        for (case, states, expected) in cases {
            let got = match verdict(&profile, "sha256:d", &states) {
                SigningVerdict::Signed { note, .. } => format!("signed: {note}"),
                SigningVerdict::InProgress(r) => format!("held: {r}"),
                SigningVerdict::Refused(r) => format!("refused: {r}"),
            };
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }
}
