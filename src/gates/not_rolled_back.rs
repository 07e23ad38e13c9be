//! `not-rolled-back`: an image auto-rollback took back on this Application
//! (`argocd-ecr-updater.io/rolled-back`) is never written again by a push, a sweep or a
//! promotion, whatever its tag: it is recognised by its digest where ECR names one, else by
//! its tag. A person releases it by deleting its entry. Asked of every image with such an
//! entry, whether or not auto-rollback is still on: turning it off does not release what it
//! took back.
//!
//! Setting: none (the entries are written by auto-rollback). Fact: the candidate's digest
//! (`ecr:DescribeImages`) when the decision did not name one.

use async_trait::async_trait;

use crate::gates::{Candidate, Facts, Gate, Verdict};
use crate::policy::TagRef;

pub struct NotRolledBack;

#[async_trait]
impl Gate for NotRolledBack {
    async fn judge(&self, candidate: &Candidate<'_>, facts: &dyn Facts) -> Option<Verdict> {
        let taken_back = match candidate.rolled_back {
            Ok([]) => return None,
            Ok(taken_back) => taken_back,
            Err(problem) => return Some(Verdict::Refuse(problem.to_string())),
        };
        let written = TagRef::from(candidate.to);
        let digest = match (candidate.digest, &written.digest) {
            (Some(digest), _) => Some(digest.to_string()),
            (None, Some(digest)) => Some(digest.clone()),
            (None, None) => {
                match facts
                    .digest(candidate.registry, candidate.repository, &written.tag)
                    .await
                {
                    Ok(digest) => digest,
                    Err(failure) => return Some(Verdict::Failed(failure)),
                }
            }
        };
        let image = candidate.image.image.to_string();
        Some(
            match taken_back
                .iter()
                .find(|entry| entry.is(candidate.to, digest.as_deref()))
            {
                Some(entry) => Verdict::Refuse(entry.refusal(&image)),
                None => Verdict::Pass(format!(
                    "not among the {} image(s) auto-rollback took back",
                    taken_back.len()
                )),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::application::rolled_back::RolledBack;
    use crate::failure::Failure;
    use crate::gates::answers::{Answers, candidate, said};

    const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const OTHER: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn taken_back(to: &str, digest: Option<&str>) -> RolledBack {
        RolledBack {
            to: to.into(),
            digest: digest.map(str::to_string),
            from: "1.3.0".into(),
            at: "2026-12-03T09:00:00Z".into(),
            reason: "alarm web-5xx is ALARM".into(),
        }
    }

    #[tokio::test]
    async fn an_image_taken_back_is_refused_under_any_tag_and_others_pass() {
        let annotations = std::collections::BTreeMap::from([(
            "argocd-image-updater.argoproj.io/image-list".to_string(),
            "app=1.dkr.ecr.r.amazonaws.com/web".to_string(),
        )]);
        let config = crate::appconfig::annotations::AppConfig::parse(&annotations).unwrap();
        let config = config.images[0].config.as_ref().unwrap();
        // (case, taken back, the decision's digest, ECR's digest for the tag, verdict)
        let cases: Vec<(
            &str,
            Vec<RolledBack>,
            Option<&str>,
            Result<Option<String>, Failure>,
            &str,
        )> = vec![
            (
                "nothing taken back: not asked",
                vec![],
                None,
                Ok(None),
                "not asked",
            ),
            (
                "the same tag again",
                vec![taken_back("1.4.0", None)],
                None,
                Ok(None),
                "refuse: `1.4.0` was rolled back",
            ),
            (
                "the same digest under a new tag, named by the decision",
                vec![taken_back("1.3.9", Some(DIGEST))],
                Some(DIGEST),
                Ok(None),
                "refuse: `1.3.9` was rolled back",
            ),
            (
                "the same digest under a new tag, asked of ECR",
                vec![taken_back("1.3.9", Some(DIGEST))],
                None,
                Ok(Some(DIGEST.into())),
                "refuse: `1.3.9` was rolled back",
            ),
            (
                "the tag re-pushed as another image",
                vec![taken_back("1.4.0", Some(DIGEST))],
                Some(OTHER),
                Ok(None),
                "pass: not among the 1",
            ),
            (
                "another image",
                vec![taken_back("1.3.9", Some(DIGEST))],
                None,
                Ok(Some(OTHER.into())),
                "pass: not among the 1",
            ),
            (
                "ECR cannot be asked",
                vec![taken_back("1.3.9", Some(DIGEST))],
                None,
                Err(Failure::new("ECR throttled", true)),
                "failed: ECR throttled (retryable true)",
            ),
        ];
        for (case, entries, digest, ecr, verdict) in cases {
            let facts = Answers {
                digest: ecr,
                ..Answers::default()
            };
            let mut judged = candidate(config, digest);
            judged.rolled_back = Ok(&entries);
            let said = said(NotRolledBack.judge(&judged, &facts).await);
            assert!(said.starts_with(verdict), "{case}: {said}");
        }
        let mut judged = candidate(config, None);
        judged.rolled_back = Err("the annotation does not read");
        let said = said(NotRolledBack.judge(&judged, &Answers::default()).await);
        assert_eq!(
            said, "refuse: the annotation does not read",
            "a broken memory holds"
        );
    }
}
