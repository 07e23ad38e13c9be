//! ECR: the few facts the event does not carry.
//!
//! The push event already names the repository, the tag and when it was pushed. ECR is asked
//! only where a strategy needs more: the current tag's push time (`newest-build`), the digest
//! a tracked tag points to now (`digest`), a manifest's platforms (`platforms`), and the full
//! tag list in reconcile mode.

use std::sync::atomic::{AtomicU32, Ordering};

use aws_sdk_ecr::error::ProvideErrorMetadata;
use aws_sdk_ecr::types::{ImageDetail, ImageIdentifier, TagStatus};
use time::OffsetDateTime;

use crate::failure::Refused;
use crate::policy::TagInfo;
use crate::registry::manifest::{Platforms, ScanState, parse_platforms, scan_state};

#[derive(Debug, thiserror::Error)]
pub enum EcrError {
    #[error("ECR repository `{repository}` does not exist in registry {registry}")]
    RepositoryNotFound {
        repository: String,
        registry: String,
    },
    #[error(
        "the function's role may not read ECR repository `{repository}` ({message}): grant ecr:DescribeImages and ecr:BatchGetImage on it (template.yaml's EcrRepositoryArns parameter)"
    )]
    AccessDenied { repository: String, message: String },
    #[error(
        "registry {registry} refuses the function's role on `{repository}` ({message}): that account's repository policy must allow it (docs/clusters-and-registries.md, images in a central registry account), and the template must list {registry} in RegistryAccounts; not retried"
    )]
    ForeignDenied {
        registry: String,
        repository: String,
        message: String,
    },
    #[error("ECR {operation} on `{repository}` failed, and may succeed on retry: {message}")]
    Transient {
        operation: &'static str,
        repository: String,
        message: String,
    },
    #[error("ECR returned a manifest for `{repository}:{tag}` that is not JSON: {message}")]
    BadManifest {
        repository: String,
        tag: String,
        message: String,
    },
}

impl EcrError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Transient { .. } | Self::AccessDenied { .. })
    }
}

/// A tag with what ECR says its artifact is: `artifactMediaType`, the manifest's config media
/// type (a Helm chart's is `application/vnd.cncf.helm.config.v1+json`).
#[derive(Debug, Clone)]
pub struct ArtifactTag {
    pub info: TagInfo,
    pub artifact_media_type: Option<String>,
}

/// One tag of an image ECR described.
fn tag_info(detail: &aws_sdk_ecr::types::ImageDetail, tag: &str) -> TagInfo {
    TagInfo {
        name: tag.to_string(),
        pushed_at: pushed_at(detail),
        digest: detail.image_digest().map(str::to_string),
        archived: archived(detail),
    }
}

/// The most bytes of referrer digests listed for one image (about 14,000 referrers): every
/// page is read, so a pusher cannot hide the genuine signature behind newer ones, and the
/// list stays bounded in memory whatever was pushed.
pub const MAX_REFERRER_LIST_BYTES: usize = 1 << 20;

/// The Notation signatures of a digest as listed: their digests, and whether the list is
/// whole (`false`: it stopped at [`MAX_REFERRER_LIST_BYTES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referrers {
    pub digests: Vec<String>,
    pub complete: bool,
}

#[derive(Debug)]
pub struct Ecr {
    client: aws_sdk_ecr::Client,
    calls: AtomicU32,
    /// The function's own account (`FUNCTION_ACCOUNT_ID`): a refusal by another account's
    /// registry is that account's repository policy, which no retry changes.
    own_account: Option<String>,
}

/// Whether ECR keeps the image in its archive storage class (`ARCHIVED`, or `ACTIVATING` while
/// a restore runs): not pullable.
fn archived(detail: &aws_sdk_ecr::types::ImageDetail) -> bool {
    matches!(
        detail.image_status(),
        Some(
            aws_sdk_ecr::types::ImageStatus::Archived | aws_sdk_ecr::types::ImageStatus::Activating
        )
    )
}

fn pushed_at(detail: &ImageDetail) -> Option<OffsetDateTime> {
    let t = detail.image_pushed_at()?;
    OffsetDateTime::from_unix_timestamp(t.secs())
        .ok()
        .map(|base| base + time::Duration::nanoseconds(i64::from(t.subsec_nanos())))
}

fn classify<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
    operation: &'static str,
    repository: &str,
    registry: &str,
    error: aws_sdk_ecr::error::SdkError<E>,
) -> Result<(), EcrError> {
    let described = crate::aws::aws_error::describe(&error);
    let code = described.code.clone().unwrap_or_default();
    let message = described.text.clone();
    match code.as_str() {
        "ImageNotFoundException" => Ok(()),
        "RepositoryNotFoundException" => Err(EcrError::RepositoryNotFound {
            repository: repository.to_string(),
            registry: registry.to_string(),
        }),
        "AccessDeniedException" => Err(EcrError::AccessDenied {
            repository: repository.to_string(),
            message,
        }),
        _ => Err(EcrError::Transient {
            operation,
            repository: repository.to_string(),
            message: described.to_string(),
        }),
    }
}

impl Ecr {
    pub fn new(client: aws_sdk_ecr::Client) -> Self {
        Self {
            client,
            calls: AtomicU32::new(0),
            own_account: None,
        }
    }

    /// Knows the function's own account, so another account's refusal is told apart.
    pub fn with_own_account(mut self, account: Option<String>) -> Self {
        self.own_account = account;
        self
    }

    fn classify<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        &self,
        operation: &'static str,
        repository: &str,
        registry: &str,
        error: aws_sdk_ecr::error::SdkError<E>,
    ) -> Result<(), EcrError> {
        match classify(operation, repository, registry, error) {
            Err(EcrError::AccessDenied {
                repository,
                message,
            }) if self
                .own_account
                .as_deref()
                .is_some_and(|own| own != registry) =>
            {
                Err(EcrError::ForeignDenied {
                    registry: registry.to_string(),
                    repository,
                    message,
                })
            }
            other => other,
        }
    }

    /// How many ECR requests this client has made; the report shows the cost of an event.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The scan findings of one image (by digest).
    pub async fn scan_findings(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<ScanState, EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .client
            .describe_image_scan_findings()
            .registry_id(registry)
            .repository_name(repository)
            .image_id(ImageIdentifier::builder().image_digest(digest).build())
            .send()
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) if e.code() == Some("ScanNotFoundException") => {
                return Ok(ScanState::Failed(format!(
                    "{digest} was never scanned (turn on scan-on-push for `{repository}`)"
                )));
            }
            Err(e) => {
                self.classify("DescribeImageScanFindings", repository, registry, e)?;
                return Ok(ScanState::Failed(format!(
                    "{digest} is not in `{repository}`"
                )));
            }
        };
        let status = answer
            .image_scan_status()
            .and_then(|s| s.status())
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        let described = answer
            .image_scan_status()
            .and_then(|s| s.description())
            .unwrap_or_default()
            .to_string();
        let counts: crate::policy::scan_limits::ScanCounts = answer
            .image_scan_findings()
            .and_then(|f| f.finding_severity_counts())
            .map(|counts| {
                counts
                    .iter()
                    .map(|(s, n)| {
                        (
                            s.as_str().to_ascii_uppercase(),
                            u64::try_from(*n).unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(scan_state(&status, &described, digest, counts))
    }

    /// Several tags in one `DescribeImages` call; tags ECR does not know are left out. If
    /// ECR refuses the batch because one is missing, each is asked on its own.
    pub async fn describe_tags(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
    ) -> Result<Vec<TagInfo>, EcrError> {
        if let Some(found) = self.describe_batch(registry, repository, tags).await? {
            return Ok(found);
        }
        let mut found = Vec::new();
        if tags.len() > 1 {
            for tag in tags {
                let one = self
                    .describe_batch(registry, repository, std::slice::from_ref(tag))
                    .await?;
                found.extend(one.into_iter().flatten());
            }
        }
        Ok(found)
    }

    /// One `DescribeImages` by tags; `None` when ECR answers that one of them is missing.
    async fn describe_batch(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
    ) -> Result<Option<Vec<TagInfo>>, EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let ids = by_tag(tags);
        let result = self
            .client
            .describe_images()
            .registry_id(registry)
            .repository_name(repository)
            .set_image_ids(Some(ids))
            .send()
            .await;
        match result {
            Ok(output) => Ok(Some(
                output
                    .image_details()
                    .iter()
                    .flat_map(|d| {
                        d.image_tags()
                            .iter()
                            .filter(|t| tags.contains(t))
                            .map(move |t| tag_info(d, t))
                    })
                    .collect(),
            )),
            Err(e) => self
                .classify("DescribeImages", repository, registry, e)
                .map(|()| None),
        }
    }

    /// Every tag in the repository, one `TagInfo` per tag, following `nextToken`.
    pub async fn list_tags(
        &self,
        registry: &str,
        repository: &str,
    ) -> Result<Vec<TagInfo>, EcrError> {
        self.list_tagged(registry, repository, tag_info).await
    }

    /// Every tag in the repository with the artifact it names (a Helm chart's config media
    /// type, an image's), following `nextToken`.
    pub async fn list_artifact_tags(
        &self,
        registry: &str,
        repository: &str,
    ) -> Result<Vec<ArtifactTag>, EcrError> {
        self.list_tagged(registry, repository, |detail, tag| ArtifactTag {
            info: tag_info(detail, tag),
            artifact_media_type: detail.artifact_media_type().map(str::to_string),
        })
        .await
    }

    /// Every tagged image of the repository, one `T` per tag, following `nextToken`.
    async fn list_tagged<T>(
        &self,
        registry: &str,
        repository: &str,
        each: impl Fn(&aws_sdk_ecr::types::ImageDetail, &str) -> T,
    ) -> Result<Vec<T>, EcrError> {
        let mut tags = Vec::new();
        let mut next: Option<String> = None;
        loop {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let output = self
                .client
                .describe_images()
                .registry_id(registry)
                .repository_name(repository)
                .filter(
                    aws_sdk_ecr::types::DescribeImagesFilter::builder()
                        .tag_status(TagStatus::Tagged)
                        .build(),
                )
                .max_results(1000)
                .set_next_token(next.take())
                .send()
                .await;
            let output = match output {
                Ok(o) => o,
                Err(e) => {
                    // ECR answers ImageNotFoundException when an image of the page it resumes
                    // from was deleted: what came so far is a partial list, and a decision on
                    // it could pick a tag that is not the newest. It is retried whole.
                    self.classify("DescribeImages", repository, registry, e)?;
                    return Err(EcrError::Transient {
                        operation: "DescribeImages",
                        repository: repository.to_string(),
                        message: format!(
                            "the tag list stopped after {} tags with ImageNotFoundException (images were deleted while it was read); a partial list is never decided on",
                            tags.len()
                        ),
                    });
                }
            };
            for detail in output.image_details() {
                for tag in detail.image_tags() {
                    tags.push(each(detail, tag));
                }
            }
            match output.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => return Ok(tags),
            }
        }
    }

    /// The raw manifest of one tag (a cosign signature's), or `None` if there is no such tag.
    pub async fn manifest(
        &self,
        registry: &str,
        repository: &str,
        tag: &str,
    ) -> Result<Option<String>, EcrError> {
        self.manifest_of(registry, repository, by_tag(&[tag.to_string()]))
            .await
    }

    /// The raw manifest of one digest (a referrer's), or `None` if there is none.
    pub async fn manifest_by_digest(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Option<String>, EcrError> {
        let id = ImageIdentifier::builder().image_digest(digest).build();
        self.manifest_of(registry, repository, vec![id]).await
    }

    /// A registry API endpoint and the `Authorization` header value for it
    /// (`GetAuthorizationToken`), for the OCI referrers API the ECR API does not offer.
    pub async fn registry_auth(&self, registry: &str) -> Result<(String, String), EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        #[allow(deprecated)]
        let result = self
            .client
            .get_authorization_token()
            .registry_ids(registry)
            .send()
            .await;
        let output = match result {
            Ok(output) => output,
            Err(e) => {
                self.classify("GetAuthorizationToken", "(registry)", registry, e)?;
                return Err(EcrError::Transient {
                    operation: "GetAuthorizationToken",
                    repository: "(registry)".into(),
                    message: "no token".into(),
                });
            }
        };
        let data = output.authorization_data().first();
        match (
            data.and_then(|d| d.proxy_endpoint()),
            data.and_then(|d| d.authorization_token()),
        ) {
            (Some(endpoint), Some(token)) => Ok((
                endpoint.trim_end_matches('/').to_string(),
                format!("Basic {token}"),
            )),
            _ => Err(EcrError::Transient {
                operation: "GetAuthorizationToken",
                repository: "(registry)".into(),
                message: "the answer holds no token".into(),
            }),
        }
    }

    async fn manifest_of(
        &self,
        registry: &str,
        repository: &str,
        ids: Vec<ImageIdentifier>,
    ) -> Result<Option<String>, EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let result = self
            .client
            .batch_get_image()
            .registry_id(registry)
            .repository_name(repository)
            .set_image_ids(Some(ids))
            .set_accepted_media_types(Some(vec![
                "application/vnd.oci.image.manifest.v1+json".to_string(),
                "application/vnd.docker.distribution.manifest.v2+json".to_string(),
            ]))
            .send()
            .await;
        match result {
            Ok(output) => Ok(output
                .images()
                .first()
                .and_then(|i| i.image_manifest())
                .map(str::to_string)),
            Err(e) => {
                self.classify("BatchGetImage", repository, registry, e)?;
                Ok(None)
            }
        }
    }

    /// A URL the layer `digest` can be downloaded from (valid for a short while), or `None`
    /// if the repository has no such layer.
    pub async fn layer_url(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Option<String>, EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let result = self
            .client
            .get_download_url_for_layer()
            .registry_id(registry)
            .repository_name(repository)
            .layer_digest(digest)
            .send()
            .await;
        match result {
            Ok(output) => Ok(output.download_url().map(str::to_string)),
            Err(e)
                if matches!(
                    e.code(),
                    Some("LayersNotFoundException" | "LayerInaccessibleException")
                ) =>
            {
                Ok(None)
            }
            Err(e) => {
                self.classify("GetDownloadUrlForLayer", repository, registry, e)?;
                Ok(None)
            }
        }
    }

    /// The digests of the Notation signatures ECR lists as referrers of `digest`
    /// (`ListImageReferrers`, artifact type `application/vnd.cncf.notary.signature`), every
    /// page, up to [`MAX_REFERRER_LIST_BYTES`] of digests.
    pub async fn signature_referrers(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Referrers, EcrError> {
        let mut digests: Vec<String> = Vec::new();
        let mut listed_bytes = 0;
        let mut next: Option<String> = None;
        loop {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let result = self
                .client
                .list_image_referrers()
                .registry_id(registry)
                .repository_name(repository)
                .set_subject_id(
                    aws_sdk_ecr::types::SubjectIdentifier::builder()
                        .image_digest(digest)
                        .build()
                        .ok(),
                )
                .filter(
                    aws_sdk_ecr::types::ListImageReferrersFilter::builder()
                        .artifact_types(crate::registry::notation::SIGNATURE_ARTIFACT_TYPE)
                        .build(),
                )
                .max_results(50)
                .set_next_token(next.take())
                .send()
                .await;
            let output = match result {
                Ok(output) => output,
                Err(e) => {
                    self.classify("ListImageReferrers", repository, registry, e)?;
                    return Ok(Referrers {
                        digests,
                        complete: true,
                    });
                }
            };
            for referrer in output.referrers().iter().filter(|r| {
                r.artifact_type() == Some(crate::registry::notation::SIGNATURE_ARTIFACT_TYPE)
            }) {
                listed_bytes += referrer.digest().len();
                if listed_bytes > MAX_REFERRER_LIST_BYTES {
                    return Ok(Referrers {
                        digests,
                        complete: false,
                    });
                }
                digests.push(referrer.digest().to_string());
            }
            match output.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => {
                    return Ok(Referrers {
                        digests,
                        complete: true,
                    });
                }
            }
        }
    }

    /// ECR managed signing's status of `digest`, per signing profile
    /// (`DescribeImageSigningStatus`); empty when no signing rule covers the image.
    pub async fn signing_statuses(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Vec<crate::policy::signing::SigningState>, EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let result = self
            .client
            .describe_image_signing_status()
            .registry_id(registry)
            .repository_name(repository)
            .image_id(ImageIdentifier::builder().image_digest(digest).build())
            .send()
            .await;
        match result {
            Ok(output) => Ok(output
                .signing_statuses()
                .iter()
                .map(|s| crate::policy::signing::SigningState {
                    profile_arn: s.signing_profile_arn().unwrap_or_default().to_string(),
                    status: s
                        .status()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_default(),
                    failure_code: s.failure_code().map(str::to_string),
                    failure_reason: s.failure_reason().map(str::to_string),
                })
                .collect()),
            Err(e) => {
                self.classify("DescribeImageSigningStatus", repository, registry, e)?;
                Ok(Vec::new())
            }
        }
    }

    /// What one tag's manifest says about platforms; `None` if the tag does not exist.
    pub async fn platforms(
        &self,
        registry: &str,
        repository: &str,
        tag: &str,
    ) -> Result<Option<Platforms>, EcrError> {
        Ok(self
            .platforms_of(registry, repository, &[tag.to_string()])
            .await?
            .pop()
            .flatten())
    }

    /// The manifests of several tags in one `BatchGetImage` (reconcile tries candidates in
    /// rank order, a batch at a time), in the order asked; `None` for a tag ECR lacks.
    pub async fn platforms_of(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
    ) -> Result<Vec<Option<Platforms>>, EcrError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let ids = by_tag(tags);
        let result = self
            .client
            .batch_get_image()
            .registry_id(registry)
            .repository_name(repository)
            .set_image_ids(Some(ids))
            .set_accepted_media_types(Some(
                [
                    "application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json",
                ]
                .map(String::from)
                .to_vec(),
            ))
            .send()
            .await;
        let output = match result {
            Ok(o) => o,
            Err(e) => {
                self.classify("BatchGetImage", repository, registry, e)?;
                return Ok(vec![None; tags.len()]);
            }
        };
        tags.iter()
            .map(|tag| {
                let manifest = output
                    .images()
                    .iter()
                    .find(|i| i.image_id().and_then(|id| id.image_tag()) == Some(tag.as_str()))
                    .and_then(|i| i.image_manifest());
                manifest
                    .map(|m| {
                        parse_platforms(m).map_err(|Refused(message)| EcrError::BadManifest {
                            repository: repository.to_string(),
                            tag: tag.to_string(),
                            message,
                        })
                    })
                    .transpose()
            })
            .collect()
    }
}

/// Image identifiers that name images by tag.
fn by_tag(tags: &[String]) -> Vec<ImageIdentifier> {
    tags.iter()
        .map(|t| ImageIdentifier::builder().image_tag(t).build())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ecr::operation::describe_images::{DescribeImagesError, DescribeImagesOutput};
    use aws_sdk_ecr::types::error::ImageNotFoundException;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    fn page(tag: &str, next: Option<&str>) -> DescribeImagesOutput {
        DescribeImagesOutput::builder()
            .image_details(ImageDetail::builder().image_tags(tag).build())
            .set_next_token(next.map(str::to_string))
            .build()
    }

    #[tokio::test]
    async fn a_tag_list_that_stops_on_a_later_page_is_an_error_not_a_shorter_list() {
        let first = mock!(aws_sdk_ecr::Client::describe_images)
            .then_output(|| page("20250101-000000", Some("page-2")));
        let gone = mock!(aws_sdk_ecr::Client::describe_images).then_error(|| {
            DescribeImagesError::ImageNotFoundException(
                ImageNotFoundException::builder()
                    .message("image deleted")
                    .meta(
                        aws_smithy_types::error::ErrorMetadata::builder()
                            .code("ImageNotFoundException")
                            .message("image deleted")
                            .build(),
                    )
                    .build(),
            )
        });
        let client = mock_client!(aws_sdk_ecr, RuleMode::Sequential, [&first, &gone]);
        let error = Ecr::new(client)
            .list_tags("111111111111", "app")
            .await
            .expect_err("a partial list must not be returned");
        assert!(
            matches!(error, EcrError::Transient { .. }),
            "partial lists are retried: {error:?}"
        );
        assert!(error.to_string().contains("partial list"), "{error}");
    }

    #[tokio::test]
    async fn a_tag_list_follows_every_page_to_the_end() {
        let first = mock!(aws_sdk_ecr::Client::describe_images)
            .match_requests(|r| r.next_token().is_none())
            .then_output(|| page("a", Some("page-2")));
        let second = mock!(aws_sdk_ecr::Client::describe_images)
            .match_requests(|r| r.next_token() == Some("page-2"))
            .then_output(|| page("b", None));
        let client = mock_client!(aws_sdk_ecr, RuleMode::Sequential, [&first, &second]);
        let tags = Ecr::new(client)
            .list_tags("111111111111", "app")
            .await
            .expect("listed");
        let names: Vec<&str> = tags.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }
}
