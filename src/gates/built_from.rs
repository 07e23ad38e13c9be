//! `built-from`: an image goes out only if its OCI labels say it was built from one of the
//! named source repositories at a full commit: `org.opencontainers.image.source`, compared
//! as a URL (scheme and host case-insensitive; a trailing `/` or `.git` ignored), and
//! `org.opencontainers.image.revision`, a full commit id. It keeps out what was pushed by
//! hand from a laptop, from a fork, or by another repository's pipeline sharing the ECR
//! repository. A label is what the build wrote, so it binds only as far as who may push:
//! pair it with `signing-profile` or `cosign-key` where the pusher is not trusted.
//!
//! Setting: `argocd-ecr-updater.io/<alias>.built-from: https://github.com/acme/web` (several,
//! comma-separated). Fact: the image's config labels (`ecr:BatchGetImage`,
//! `ecr:GetDownloadUrlForLayer`, the config blob from S3), shared with commit statuses.

use async_trait::async_trait;

use crate::gates::{Candidate, Facts, Gate, Verdict};

pub struct BuiltFrom;

/// A repository URL as compared: `https://host/path`, host lower-case, no trailing `/` or
/// `.git`.
fn normal(url: &str) -> Option<String> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    if host.is_empty() || path.is_empty() || !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    Some(format!("https://{}/{path}", host.to_ascii_lowercase()))
}

/// The repositories the setting names, or what is wrong with it.
fn allowed(value: &str) -> Result<Vec<String>, String> {
    let named: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if named.is_empty() {
        return Err("name the source repositories, such as https://github.com/acme/web".into());
    }
    named
        .iter()
        .map(|url| {
            normal(url).ok_or_else(|| format!("`{url}` is not an https URL of a repository"))
        })
        .collect()
}

#[async_trait]
impl Gate for BuiltFrom {
    async fn judge(&self, candidate: &Candidate<'_>, facts: &dyn Facts) -> Option<Verdict> {
        let (key, value) = candidate.image.own_setting("built-from")?;
        Some(match allowed(value) {
            Ok(allowed) => judged(&allowed, candidate, facts).await,
            Err(problem) => Verdict::Misconfigured(format!(
                "`{key}: {}`: {problem}",
                crate::redact::scrub(value)
            )),
        })
    }
}

/// The verdict on a candidate under a readable setting.
async fn judged(allowed: &[String], candidate: &Candidate<'_>, facts: &dyn Facts) -> Verdict {
    let Some(digest) = candidate.digest else {
        return Verdict::Refuse(format!(
            "built-from: ECR named no digest for `{}`, so its labels cannot be read",
            candidate.to
        ));
    };
    let labels = facts
        .source_commit(candidate.registry, candidate.repository, digest)
        .await;
    let source = match labels {
        Err(failure) => return Verdict::Failed(failure),
        Ok(Err(why)) => {
            return Verdict::Refuse(format!(
                "built-from: the labels of {digest} do not say where it was built ({why}); only images built from {} go out",
                allowed.join(", ")
            ));
        }
        Ok(Ok(source)) => source,
    };
    let short = &source.revision[..12.min(source.revision.len())];
    match normal(&source.url) {
        Some(url) if allowed.contains(&url) => {
            Verdict::Pass(format!("built from {url} at {short} (built-from)"))
        }
        _ => Verdict::Refuse(format!(
            "built-from: {digest} was built from {} at {short}, not from {}",
            crate::redact::scrub(&source.url),
            allowed.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AppConfig;
    use crate::failure::Failure;
    use crate::gates::answers::{Answers, candidate, said};
    use crate::registry::provenance::SourceCommit;
    use std::collections::BTreeMap;

    const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

    fn built(url: &str) -> Answers {
        labels(Ok(Ok(SourceCommit {
            url: url.into(),
            revision: REVISION.into(),
        })))
    }

    fn labels(source_commit: Result<Result<SourceCommit, String>, Failure>) -> Answers {
        Answers {
            source_commit,
            ..Answers::default()
        }
    }

    #[tokio::test]
    async fn an_image_goes_out_only_if_its_labels_name_an_allowed_repository() {
        let allowed = "https://github.com/acme/web, https://gitlab.com/acme/web-mirror";
        let cases: Vec<(&str, &str, Answers, Option<&str>, &str)> = vec![
            (
                "labels naming the repository pass",
                allowed,
                built("https://github.com/acme/web"),
                Some("sha256:a"),
                "pass: built from https://github.com/acme/web at 0123456789ab",
            ),
            (
                "the same URL with .git and another case passes",
                allowed,
                built("https://GitHub.com/acme/web.git/"),
                Some("sha256:a"),
                "pass: built from https://github.com/acme/web",
            ),
            (
                "a fork is refused, naming both",
                allowed,
                built("https://github.com/mallory/web"),
                Some("sha256:a"),
                "refuse: built-from: sha256:a was built from https://github.com/mallory/web at 0123456789ab, not from https://github.com/acme/web, https://gitlab.com/acme/web-mirror",
            ),
            (
                "an image without labels (pushed by hand) is refused, saying why",
                allowed,
                labels(Ok(Err("no org.opencontainers.image.source label".into()))),
                Some("sha256:a"),
                "refuse: built-from: the labels of sha256:a do not say where it was built (no org.opencontainers.image.source label)",
            ),
            (
                "no digest named: refused",
                allowed,
                built("https://github.com/acme/web"),
                None,
                "refuse: built-from: ECR named no digest for `1.4.0`",
            ),
            (
                "ECR unreadable: failed, retryable as the failure says",
                allowed,
                labels(Err(Failure::new("ECR throttled", true))),
                Some("sha256:a"),
                "failed: ECR throttled (retryable true)",
            ),
            (
                "a setting naming no https repository is a configuration error",
                "http://github.com/acme/web",
                built("https://github.com/acme/web"),
                Some("sha256:a"),
                "misconfigured: `argocd-ecr-updater.io/app.built-from: http://github.com/acme/web`: `http://github.com/acme/web` is not an https URL of a repository",
            ),
            (
                "an empty setting is a configuration error",
                " , ",
                built("https://github.com/acme/web"),
                Some("sha256:a"),
                "misconfigured: `argocd-ecr-updater.io/app.built-from:  , `: name the source repositories",
            ),
        ];
        for (case, value, facts, digest, expected) in cases {
            let config = configured(Some(value));
            let image = config.images[0].config.as_ref().unwrap();
            let got = said(BuiltFrom.judge(&candidate(image, digest), &facts).await);
            assert!(got.starts_with(expected), "{case}: {got}");
        }
        let config = configured(None);
        let image = config.images[0].config.as_ref().unwrap();
        let unasked = BuiltFrom
            .judge(&candidate(image, Some("sha256:a")), &built("x"))
            .await;
        assert_eq!(unasked, None, "an image without the setting is not gated");
    }

    fn configured(built_from: Option<&str>) -> AppConfig {
        let mut annotations = BTreeMap::from([(
            "argocd-image-updater.argoproj.io/image-list".to_string(),
            "app=1.dkr.ecr.r.amazonaws.com/web".to_string(),
        )]);
        if let Some(value) = built_from {
            annotations.insert("argocd-ecr-updater.io/app.built-from".into(), value.into());
        }
        AppConfig::parse(&annotations).unwrap()
    }
}
