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
    use crate::appconfig::cosign_key::KeyRef;
    use crate::failure::Failure;
    use crate::registry::provenance::SourceCommit;
    use std::collections::BTreeMap;

    struct Signed(Result<Result<(), String>, Failure>);

    #[async_trait]
    impl Facts for Signed {
        async fn source_commit(
            &self,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<Result<SourceCommit, String>, Failure> {
            Ok(Err("this gate's tests ask no labels".into()))
        }

        async fn cosign_signed(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &KeyRef,
        ) -> Result<Result<(), String>, Failure> {
            self.0.clone()
        }
    }

    #[tokio::test]
    async fn an_image_with_a_cosign_key_goes_out_only_signed_by_it() {
        let mut annotations = BTreeMap::from([(
            "argocd-image-updater.argoproj.io/image-list".to_string(),
            "app=1.dkr.ecr.r.amazonaws.com/web".to_string(),
        )]);
        let unkeyed = AppConfig::parse(&annotations).unwrap();
        annotations.insert(
            "argocd-ecr-updater.io/app.cosign-key".into(),
            "secretsmanager:arn:aws:secretsmanager:ap-northeast-2:1:secret:cosign-Ab12".into(),
        );
        let keyed = AppConfig::parse(&annotations).unwrap();
        let candidate = |config: &'static AppConfig, digest| Candidate {
            image: config.images[0].config.as_ref().unwrap(),
            registry: "1",
            repository: "web",
            to: "1.4.0",
            digest,
        };
        let keyed: &'static AppConfig = Box::leak(Box::new(keyed));
        let unkeyed: &'static AppConfig = Box::leak(Box::new(unkeyed));
        let cases: Vec<(&str, &'static AppConfig, Option<&str>, Signed, Option<&str>)> = vec![
            (
                "signed by the key: through, saying so",
                keyed,
                Some("sha256:a"),
                Signed(Ok(Ok(()))),
                Some("pass: sha256:a is signed with the cosign key"),
            ),
            (
                "not signed: refused with the exact reason",
                keyed,
                Some("sha256:a"),
                Signed(Ok(Err("sha256:a is not signed".into()))),
                Some("refuse: signature check failed: sha256:a is not signed"),
            ),
            (
                "the signature unreadable: failed as the failure says",
                keyed,
                Some("sha256:a"),
                Signed(Err(Failure::new("ECR throttled", true))),
                Some("failed: ECR throttled"),
            ),
            (
                "no digest: refused",
                keyed,
                None,
                Signed(Ok(Ok(()))),
                Some("refuse: signature check: ECR named no digest"),
            ),
            (
                "no key configured: not gated",
                unkeyed,
                Some("sha256:a"),
                Signed(Ok(Ok(()))),
                None,
            ),
        ];
        for (case, config, digest, facts, expected) in cases {
            let got = Cosign
                .judge(&candidate(config, digest), &facts)
                .await
                .map(|v| match v {
                    Verdict::Pass(note) => format!("pass: {note}"),
                    Verdict::Refuse(reason) => format!("refuse: {reason}"),
                    Verdict::Misconfigured(problem) => format!("misconfigured: {problem}"),
                    Verdict::Failed(f) => format!("failed: {}", f.message),
                });
            match (got, expected) {
                (Some(got), Some(want)) => assert!(got.starts_with(want), "{case}: {got}"),
                (None, None) => {}
                (got, want) => panic!("{case}: {got:?}, wanted {want:?}"),
            }
        }
    }
}
