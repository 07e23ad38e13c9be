//! `cosign-key` (ours) or an ImageUpdater object's `imagesVerification.cosignKey`: an image
//! goes out only if its digest carries a cosign signature by that key, found under cosign's
//! `sha256-<hex>.sig` tag or among the digest's OCI 1.1 referrers and checked in Rust
//! (`registry::signatures`, `registry::cosign`). Fact: the signature check of the digest
//! (`ecr:BatchGetImage`, `ecr:ListImageReferrers` where referrers are on,
//! `ecr:GetDownloadUrlForLayer`; the key from Secrets Manager or a Kubernetes Secret).

use async_trait::async_trait;

use crate::gates::{Candidate, Facts, Gate, Verdict};

pub struct Cosign;

#[async_trait]
impl Gate for Cosign {
    async fn judge(&self, candidate: &Candidate<'_>, facts: &dyn Facts) -> Option<Verdict> {
        let key = candidate.image.cosign_key.as_ref()?;
        let Some(digest) = candidate.digest else {
            return Some(Verdict::Refuse(
                "signature check: ECR named no digest for the image to roll out".into(),
            ));
        };
        let checked = facts
            .cosign_signed(candidate.registry, candidate.repository, digest, key)
            .await;
        Some(match checked {
            Ok(Ok(())) => Verdict::Pass(format!("{digest} is signed with the cosign key ({key})")),
            Ok(Err(reason)) => Verdict::Refuse(format!("signature check failed: {reason}")),
            Err(failure) => Verdict::Failed(failure),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AppConfig;
    use crate::failure::Failure;
    use crate::gates::answers::{Answers, candidate, said};
    use std::collections::BTreeMap;

    fn signed(cosign: Result<Result<(), String>, Failure>) -> Answers {
        Answers {
            cosign,
            ..Answers::default()
        }
    }

    fn configured(key: Option<&str>) -> AppConfig {
        let mut annotations = BTreeMap::from([(
            "argocd-image-updater.argoproj.io/image-list".to_string(),
            "app=1.dkr.ecr.r.amazonaws.com/web".to_string(),
        )]);
        if let Some(key) = key {
            annotations.insert("argocd-ecr-updater.io/app.cosign-key".into(), key.into());
        }
        AppConfig::parse(&annotations).unwrap()
    }

    #[tokio::test]
    async fn an_image_with_a_cosign_key_goes_out_only_signed_by_it() {
        let key = Some("secretsmanager:arn:aws:secretsmanager:ap-northeast-2:1:secret:cosign-Ab12");
        let cases: Vec<(&str, Option<&str>, Option<&str>, Answers, &str)> = vec![
            (
                "signed by the key: through, saying so",
                key,
                Some("sha256:a"),
                signed(Ok(Ok(()))),
                "pass: sha256:a is signed with the cosign key",
            ),
            (
                "not signed: refused with the exact reason",
                key,
                Some("sha256:a"),
                signed(Ok(Err("sha256:a is not signed".into()))),
                "refuse: signature check failed: sha256:a is not signed",
            ),
            (
                "the signature unreadable: failed as the failure says",
                key,
                Some("sha256:a"),
                signed(Err(Failure::new("ECR throttled", true))),
                "failed: ECR throttled (retryable true)",
            ),
            (
                "no digest: refused",
                key,
                None,
                signed(Ok(Ok(()))),
                "refuse: signature check: ECR named no digest",
            ),
            (
                "no key configured: not gated",
                None,
                Some("sha256:a"),
                signed(Ok(Ok(()))),
                "not asked",
            ),
        ];
        for (case, key, digest, facts, expected) in cases {
            let config = configured(key);
            let image = config.images[0].config.as_ref().unwrap();
            let got = said(Cosign.judge(&candidate(image, digest), &facts).await);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
    }
}
