//! Where an image was built from: the OCI labels `org.opencontainers.image.source` (the
//! repository) and `org.opencontainers.image.revision` (the commit) of its config, read from
//! ECR: the manifest (of an index, its first platform image), then the config blob through
//! the URL `GetDownloadUrlForLayer` gives, bounded and checked against its digest.

use serde_json::Value;

use crate::failure::Failure;
use crate::registry::blob::download;
use crate::registry::ecr::Ecr;

/// An image config is a few kilobytes; one larger than this is not one.
const MAX_CONFIG: usize = 256 * 1024;

pub const SOURCE_LABEL: &str = "org.opencontainers.image.source";
pub const REVISION_LABEL: &str = "org.opencontainers.image.revision";

/// The repository and commit an image names in its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceCommit {
    pub url: String,
    /// A full commit id: 40 (SHA-1) or 64 (SHA-256) hex digits.
    pub revision: String,
}

/// The two labels of an image config, or why they are not usable (pure).
pub fn source_commit(config: &[u8]) -> Result<SourceCommit, String> {
    let config: Value = serde_json::from_slice(config)
        .map_err(|e| format!("the image config is not JSON ({e})"))?;
    let labels = &config["config"]["Labels"];
    let label = |name: &str| {
        labels[name]
            .as_str()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the image has no `{name}` label"))
    };
    let url = label(SOURCE_LABEL)?;
    let revision = label(REVISION_LABEL)?;
    let full = matches!(revision.len(), 40 | 64) && revision.bytes().all(|b| b.is_ascii_hexdigit());
    if !full {
        return Err(format!(
            "`{REVISION_LABEL}: {}` is not a full commit id",
            crate::redact::scrub(revision)
        ));
    }
    Ok(SourceCommit {
        url: url.to_string(),
        revision: revision.to_ascii_lowercase(),
    })
}

/// What a manifest points to for the config: the config's digest, or (an index) the digest
/// of the image manifest to read next: linux/amd64 if listed, else the first real platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Config(String),
    Manifest(String),
}

pub fn next_of(manifest: &str) -> Result<Next, String> {
    let manifest: Value =
        serde_json::from_str(manifest).map_err(|e| format!("the manifest is not JSON ({e})"))?;
    if let Some(digest) = manifest["config"]["digest"].as_str() {
        return Ok(Next::Config(digest.to_string()));
    }
    let entries = manifest["manifests"]
        .as_array()
        .ok_or("the manifest names no config")?;
    let real = |e: &&Value| e["platform"]["os"] != "unknown";
    let amd64 = entries
        .iter()
        .filter(real)
        .find(|e| e["platform"]["os"] == "linux" && e["platform"]["architecture"] == "amd64");
    amd64
        .or_else(|| entries.iter().find(real))
        .and_then(|e| e["digest"].as_str())
        .map(|d| Next::Manifest(d.to_string()))
        .ok_or_else(|| "the image index lists no platform image".into())
}

/// The source commit of `reference` (a tag or a digest) in `repository`: `Ok(Err)` says why
/// it has none (no labels, not a commit), `Err` is a fetch a retry may fix.
pub async fn read(
    ecr: &Ecr,
    http: &crate::http::LazyClient,
    registry: &str,
    repository: &str,
    reference: &str,
) -> Result<Result<SourceCommit, String>, Failure> {
    let failed = |message: String| Failure {
        message,
        retryable: true,
    };
    let first = if reference.starts_with("sha256:") {
        ecr.manifest_by_digest(registry, repository, reference)
            .await
    } else {
        ecr.manifest(registry, repository, reference).await
    }
    .map_err(|e| failed(e.to_string()))?;
    let Some(mut manifest) = first else {
        return Ok(Err(format!("`{reference}` is not in `{repository}`")));
    };
    // An index, then its image: two manifests at most.
    for _ in 0..2 {
        match next_of(&manifest) {
            Err(reason) => return Ok(Err(reason)),
            Ok(Next::Manifest(digest)) => {
                match ecr
                    .manifest_by_digest(registry, repository, &digest)
                    .await
                    .map_err(|e| failed(e.to_string()))?
                {
                    Some(image) => manifest = image,
                    None => return Ok(Err(format!("the platform image {digest} is missing"))),
                }
            }
            Ok(Next::Config(digest)) => {
                return config(ecr, http, registry, repository, &digest).await;
            }
        }
    }
    Ok(Err("the image index nests another index".into()))
}

async fn config(
    ecr: &Ecr,
    http: &crate::http::LazyClient,
    registry: &str,
    repository: &str,
    digest: &str,
) -> Result<Result<SourceCommit, String>, Failure> {
    let place = (registry, repository);
    let downloaded = download(ecr, http, place, digest, MAX_CONFIG, "image config").await?;
    Ok(downloaded.and_then(|bytes| source_commit(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn config(labels: Value) -> Vec<u8> {
        json!({"architecture": "amd64", "config": {"Labels": labels}})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn the_labels_name_the_repository_and_the_commit_or_say_what_is_missing() {
        let cases: Vec<(Value, Result<(&str, &str), &str>)> = vec![
            (
                json!({SOURCE_LABEL: "https://github.com/acme/web", REVISION_LABEL: SHA}),
                Ok(("https://github.com/acme/web", SHA)),
            ),
            (
                json!({SOURCE_LABEL: "https://github.com/acme/web", REVISION_LABEL: SHA.to_uppercase()}),
                Ok(("https://github.com/acme/web", SHA)),
            ),
            (
                json!({REVISION_LABEL: SHA}),
                Err("no `org.opencontainers.image.source` label"),
            ),
            (
                json!({SOURCE_LABEL: "https://github.com/acme/web"}),
                Err("no `org.opencontainers.image.revision` label"),
            ),
            (
                json!({SOURCE_LABEL: "https://github.com/acme/web", REVISION_LABEL: "main"}),
                Err("`org.opencontainers.image.revision: main` is not a full commit id"),
            ),
            (
                json!({SOURCE_LABEL: "https://github.com/acme/web", REVISION_LABEL: "0123456"}),
                Err("not a full commit id"),
            ),
            (
                Value::Null,
                Err("no `org.opencontainers.image.source` label"),
            ),
        ];
        for (labels, expected) in cases {
            let got = source_commit(&config(labels.clone()));
            match (got, expected) {
                (Ok(c), Ok((url, revision))) => {
                    assert_eq!((c.url.as_str(), c.revision.as_str()), (url, revision))
                }
                (Err(e), Err(want)) => assert!(e.contains(want), "{labels}: {e}"),
                (got, want) => panic!("{labels}: {got:?}, expected {want:?}"),
            }
        }
        assert!(source_commit(b"not json").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn an_index_leads_to_its_linux_amd64_image_and_an_image_to_its_config() {
        let image = json!({"config": {"digest": "sha256:c0"}, "layers": []}).to_string();
        assert_eq!(next_of(&image), Ok(Next::Config("sha256:c0".into())));
        let index = json!({"manifests": [
            {"digest": "sha256:att", "platform": {"os": "unknown", "architecture": "unknown"}},
            {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
            {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}}]})
        .to_string();
        assert_eq!(next_of(&index), Ok(Next::Manifest("sha256:amd".into())));
        let arm_only = json!({"manifests": [
            {"digest": "sha256:att", "platform": {"os": "unknown", "architecture": "unknown"}},
            {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}}]})
        .to_string();
        assert_eq!(next_of(&arm_only), Ok(Next::Manifest("sha256:arm".into())));
        assert!(next_of(r#"{"manifests":[]}"#).is_err());
        assert!(next_of("{}").unwrap_err().contains("names no config"));
    }
}
