//! The managed-signing gate, decided without I/O. ECR managed signing signs a pushed image
//! with an AWS Signer profile after the push (`PutSigningConfiguration`), so a push event
//! races its own signature: `DescribeImageSigningStatus` says, per signing profile,
//! `IN_PROGRESS`, `COMPLETE` or `FAILED`. An image whose configuration names a profile
//! (`argocd-ecr-updater.io/<alias>.signing-profile`) rolls out only once that profile's
//! signature is `COMPLETE`; in progress it is held and decided again, failed it is refused
//! with ECR's reason.

use std::fmt;

use crate::failure::Refused;

/// The signing profile an image must be signed with: its ARN, or its name (any account and
/// region, as the profile's ARN ends `/signing-profiles/<name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SigningProfile {
    Arn(String),
    Name(String),
}

impl SigningProfile {
    /// `arn:aws:signer:<region>:<account>:/signing-profiles/<name>` or `<name>` (letters,
    /// digits and `_`, at least two: Signer's own rule).
    pub fn parse(text: &str) -> Result<Self, Refused> {
        let text = text.trim();
        let is_name = |n: &str| {
            n.len() >= 2
                && n.len() <= 64
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        if let Some(rest) = text.strip_prefix("arn:") {
            let parts: Vec<&str> = rest.splitn(5, ':').collect();
            let valid = matches!(parts.as_slice(), [partition, "signer", region, account, resource]
                if partition.starts_with("aws")
                    && !region.is_empty()
                    && account.len() == 12
                    && account.bytes().all(|b| b.is_ascii_digit())
                    && resource.strip_prefix("/signing-profiles/").is_some_and(is_name));
            return if valid {
                Ok(Self::Arn(text.to_string()))
            } else {
                Err(Refused::from(format!(
                    "`{}` is not a signing profile ARN (arn:aws:signer:<region>:<account>:/signing-profiles/<name>)",
                    crate::redact::scrub(text)
                )))
            };
        }
        if is_name(text) {
            return Ok(Self::Name(text.to_string()));
        }
        Err(Refused::from(format!(
            "`{}` is neither a signing profile ARN nor a profile name (letters, digits and `_`, 2 to 64)",
            crate::redact::scrub(text)
        )))
    }

    /// Whether ECR's `signingProfileArn` is this profile.
    pub fn is(&self, arn: &str) -> bool {
        match self {
            Self::Arn(own) => own == arn,
            Self::Name(name) => arn
                .rsplit_once("/signing-profiles/")
                .is_some_and(|(_, n)| n == name),
        }
    }
}

impl fmt::Display for SigningProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Arn(arn) => f.write_str(arn),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// One profile's signing status of a digest, as `DescribeImageSigningStatus` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningState {
    pub profile_arn: String,
    /// `IN_PROGRESS`, `COMPLETE`, `FAILED`, or what a later ECR adds.
    pub status: String,
    pub failure_code: Option<String>,
    pub failure_reason: Option<String>,
}

/// What the gate says of a digest.
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

    const ARN: &str = "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod";

    fn state(arn: &str, status: &str) -> SigningState {
        SigningState {
            profile_arn: arn.into(),
            status: status.into(),
            failure_code: (status == "FAILED").then(|| "AccessDenied".into()),
            failure_reason: (status == "FAILED").then(|| "the profile was revoked".into()),
        }
    }

    #[test]
    fn a_profile_is_named_by_its_arn_or_its_name() {
        let cases: &[(&str, Result<SigningProfile, &str>)] = &[
            (ARN, Ok(SigningProfile::Arn(ARN.into()))),
            (
                "release_prod",
                Ok(SigningProfile::Name("release_prod".into())),
            ),
            (
                "arn:aws-cn:signer:cn-north-1:768157413559:/signing-profiles/p1",
                Ok(SigningProfile::Arn(
                    "arn:aws-cn:signer:cn-north-1:768157413559:/signing-profiles/p1".into(),
                )),
            ),
            (
                "arn:aws:signer:ap-northeast-2:768157413559:/signing-jobs/x",
                Err("not a signing profile ARN"),
            ),
            (
                "arn:aws:kms:ap-northeast-2:768157413559:/signing-profiles/x1",
                Err("not a signing profile ARN"),
            ),
            (
                "release-prod",
                Err("neither a signing profile ARN nor a profile name"),
            ),
            ("p", Err("neither")),
        ];
        for (text, expected) in cases {
            match (SigningProfile::parse(text), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{text}"),
                (Err(Refused(got)), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
                (got, want) => panic!("{text}: {got:?}, expected {want:?}"),
            }
        }
        let by_name = SigningProfile::Name("release_prod".into());
        assert!(by_name.is(ARN));
        assert!(
            !by_name
                .is("arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod2")
        );
        assert!(SigningProfile::Arn(ARN.into()).is(ARN));
    }

    #[test]
    fn only_a_complete_signature_by_the_named_profile_lets_an_image_through() {
        let profile = SigningProfile::Name("release_prod".into());
        let other = "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/nightly";
        let cases: Vec<(&str, Vec<SigningState>, &str)> = vec![
            (
                "complete",
                vec![state(ARN, "COMPLETE")],
                "signed: sha256:d is signed by",
            ),
            (
                "in progress",
                vec![state(ARN, "IN_PROGRESS")],
                "held: managed signing of sha256:d by",
            ),
            (
                "failed",
                vec![state(ARN, "FAILED")],
                "refused: managed signing of sha256:d by `arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod` failed (AccessDenied: the profile was revoked)",
            ),
            (
                "signed by another profile only",
                vec![state(other, "COMPLETE")],
                "refused: sha256:d has no managed signature by signing profile `release_prod` (ECR lists arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/nightly)",
            ),
            (
                "no signing at all",
                vec![],
                "refused: sha256:d has no managed signature by signing profile `release_prod` (ECR lists no profile)",
            ),
            (
                "complete beside another in progress",
                vec![state(other, "IN_PROGRESS"), state(ARN, "COMPLETE")],
                "signed",
            ),
            (
                "a status ECR adds later",
                vec![state(ARN, "REVOKED")],
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
