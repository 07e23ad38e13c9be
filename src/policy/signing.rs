//! ECR managed signing's values, without I/O: the signing profile an image's configuration
//! names (`argocd-ecr-updater.io/<alias>.signing-profile`, read with the configuration, so a
//! bad value is reported whether or not anything moves), and one profile's signing status of
//! a digest as `DescribeImageSigningStatus` answers it. The gate that judges them is
//! `gates/managed_signing.rs`.

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

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod";

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
}
