//! Registry facts for one invocation: what ECR says about tags, each asked at most once.
//!
//! Applications tracking one repository usually share a tag, so the answers are kept for the
//! invocation. Each repository has a slot of its own whose lock is held across its request:
//! concurrent Applications of one repository wait for the one request instead of repeating
//! it, while those of other repositories are answered at the same time (reconcile reads
//! every tracked repository's tag list, one per Application in many fleets).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Mutex as AsyncMutex, OnceCell};

use crate::decision::decide::{self, DescribedTags, ImageCase};
use crate::failure::Failure;
use crate::failure::Refused;
use crate::policy::TagInfo;
use crate::policy::signing::SigningState;
use crate::registry::ecr::{ArtifactTag, Ecr, EcrError};
use crate::registry::notation::Verified;

/// Reconcile with a platforms annotation reads candidates' manifests this many at a time,
/// best first, and stops at the first batch holding one that passes.
const MANIFEST_BATCH: usize = 10;

impl From<EcrError> for Failure {
    fn from(error: EcrError) -> Self {
        Failure::new(error.to_string(), error.is_retryable())
    }
}

/// The reconcile choice: the best candidate that passed the manifest check, and how many
/// better ones lacked a platform.
#[derive(Debug, Clone, Copy)]
pub struct Choice<'t> {
    pub chosen: Option<&'t TagInfo>,
    pub platform_refusals: usize,
}

type TagList = Result<Arc<Vec<TagInfo>>, Failure>;
type ArtifactList = Result<Arc<Vec<ArtifactTag>>, Failure>;
type SigningStates = Result<Arc<Vec<SigningState>>, Failure>;
type NotationVerdict = Result<Result<Verified, String>, Failure>;
type ScanFact = Result<crate::registry::manifest::ScanState, Failure>;
type SourceCommitFact = Result<Result<crate::registry::provenance::SourceCommit, String>, Failure>;

/// One value per key, made on first use: a caller for a key that is being made waits for it,
/// callers for other keys do not. The map's own lock is held only to find a key's slot.
struct Slots<V> {
    slots: AsyncMutex<HashMap<String, Arc<V>>>,
}

impl<V: Default> Slots<V> {
    fn new() -> Self {
        Self {
            slots: AsyncMutex::new(HashMap::new()),
        }
    }

    async fn slot(&self, key: String) -> Arc<V> {
        self.slots.lock().await.entry(key).or_default().clone()
    }
}

impl<T: Clone> Slots<OnceCell<T>> {
    /// The value for `key`, made by `make` unless it was made (or is being made) already.
    async fn get_or_make<F, Fut>(&self, key: String, make: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        self.slot(key).await.get_or_init(make).await.clone()
    }
}

pub struct RegistryFacts<'a> {
    ecr: &'a Ecr,
    /// The client that reads blobs from where ECR's download URLs point.
    blobs: &'a crate::http::LazyClient,
    /// Per repository, what ECR said of each tag asked about.
    described: Slots<AsyncMutex<HashMap<String, Option<TagInfo>>>>,
    tag_lists: Slots<OnceCell<TagList>>,
    artifact_lists: Slots<OnceCell<ArtifactList>>,
    /// Per digest: ECR managed signing's statuses, and whether a Notation signature of a
    /// profile verifies; the Applications of one image share one answer.
    signing: Slots<OnceCell<SigningStates>>,
    notation: Slots<OnceCell<NotationVerdict>>,
    /// Per digest: the source repository and commit its labels name, and ECR's scan
    /// findings (the gates').
    source_commits: Slots<OnceCell<SourceCommitFact>>,
    scans: Slots<OnceCell<ScanFact>>,
}

impl<'a> RegistryFacts<'a> {
    pub fn new(ecr: &'a Ecr, blobs: &'a crate::http::LazyClient) -> Self {
        Self {
            ecr,
            blobs,
            source_commits: Slots::new(),
            scans: Slots::new(),
            described: Slots::new(),
            tag_lists: Slots::new(),
            artifact_lists: Slots::new(),
            signing: Slots::new(),
            notation: Slots::new(),
        }
    }

    /// What ECR knows of `tags` (`None` where it has no such tag); the ones not yet asked
    /// in this invocation go out in a single request.
    pub async fn describe(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
    ) -> Result<DescribedTags, Failure> {
        let slot = self
            .described
            .slot(format!("{registry}/{repository}"))
            .await;
        let mut described = slot.lock().await;
        let unknown: Vec<String> = tags
            .iter()
            .filter(|t| !described.contains_key(t.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            let found = self
                .ecr
                .describe_tags(registry, repository, &unknown)
                .await?;
            for tag in unknown {
                let info = found.iter().find(|f| f.name == tag).cloned();
                described.insert(tag, info);
            }
        }
        Ok(tags
            .iter()
            .map(|t| (t.clone(), described.get(t.as_str()).cloned().flatten()))
            .collect())
    }

    /// What ECR knows of one tag (`None`: no such tag), asked at most once per invocation.
    pub async fn describe_one(
        &self,
        registry: &str,
        repository: &str,
        tag: &str,
    ) -> Result<Option<TagInfo>, Failure> {
        let mut described = self
            .describe(registry, repository, &[tag.to_string()])
            .await?;
        Ok(described.remove(tag).flatten())
    }

    /// A repository's full tag list, fetched at most once per invocation.
    pub async fn tag_list(&self, registry: &str, repository: &str) -> TagList {
        self.tag_lists
            .get_or_make(format!("{registry}/{repository}"), || async {
                self.ecr
                    .list_tags(registry, repository)
                    .await
                    .map(Arc::new)
                    .map_err(Failure::from)
            })
            .await
    }

    /// A repository's tags with the artifact each names (for Helm charts), fetched at most
    /// once per invocation.
    pub async fn artifact_tags(&self, registry: &str, repository: &str) -> ArtifactList {
        self.artifact_lists
            .get_or_make(format!("{registry}/{repository}"), || async {
                self.ecr
                    .list_artifact_tags(registry, repository)
                    .await
                    .map(Arc::new)
                    .map_err(Failure::from)
            })
            .await
    }

    /// ECR managed signing's statuses of `digest`, asked at most once per invocation.
    pub async fn signing_statuses(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> SigningStates {
        self.signing
            .get_or_make(format!("{registry}/{repository}@{digest}"), || async {
                self.ecr
                    .signing_statuses(registry, repository, digest)
                    .await
                    .map(Arc::new)
                    .map_err(Failure::from)
            })
            .await
    }

    /// Whether a Notation signature of `expected` verifies, found out at most once per
    /// digest and profile in an invocation.
    pub async fn notation(
        &self,
        http: &crate::http::LazyClient,
        expected: &crate::registry::managed_signing::Expected<'_>,
        store: &crate::registry::notation::TrustStore,
        now: time::OffsetDateTime,
    ) -> NotationVerdict {
        let key = format!(
            "{}/{}@{}#{}",
            expected.registry, expected.repository, expected.digest, expected.profile
        );
        self.notation
            .get_or_make(key, || {
                crate::registry::managed_signing::verify(self.ecr, http, expected, store, now)
            })
            .await
    }

    /// Whether `tag`'s manifest offers a platform the image allows; `Err` of the
    /// inner result is the skip reason.
    pub async fn check_platforms(
        &self,
        case: &ImageCase<'_>,
        tag: &str,
    ) -> Result<Result<(), Refused>, Failure> {
        let manifest = self
            .ecr
            .platforms(&case.registry, &case.repository, tag)
            .await?;
        Ok(decide::platform_verdict(
            tag,
            manifest.as_ref(),
            case.config.platform_filter(),
        ))
    }

    /// Reconcile: the first candidate, in rank order, whose manifest offers an allowed
    /// platform; without platforms to filter by, simply the first.
    pub async fn choose<'t>(
        &self,
        case: &ImageCase<'_>,
        candidates: &[&'t TagInfo],
    ) -> Result<Choice<'t>, Failure> {
        if case.config.platform_filter().is_empty() {
            return Ok(Choice {
                chosen: candidates.first().copied(),
                platform_refusals: 0,
            });
        }
        let mut platform_refusals = 0;
        for batch in candidates.chunks(MANIFEST_BATCH) {
            let names: Vec<String> = batch.iter().map(|t| t.name.clone()).collect();
            let manifests = self
                .ecr
                .platforms_of(&case.registry, &case.repository, &names)
                .await?;
            for (candidate, manifest) in batch.iter().zip(&manifests) {
                match decide::platform_verdict(
                    &candidate.name,
                    manifest.as_ref(),
                    case.config.platform_filter(),
                ) {
                    Ok(()) => {
                        return Ok(Choice {
                            chosen: Some(candidate),
                            platform_refusals,
                        });
                    }
                    Err(_) => platform_refusals += 1,
                }
            }
        }
        Ok(Choice {
            chosen: None,
            platform_refusals,
        })
    }
}

impl RegistryFacts<'_> {
    /// ECR's scan findings for the digest, read once per digest: every Application gated
    /// on one image shares one `DescribeImageScanFindings`.
    pub async fn scan_findings(&self, registry: &str, repository: &str, digest: &str) -> ScanFact {
        let key = format!("{registry}/{repository}@{digest}");
        self.scans
            .get_or_make(key, || async {
                self.ecr
                    .scan_findings(registry, repository, digest)
                    .await
                    .map_err(Failure::from)
            })
            .await
    }

    /// The source repository and commit the digest's labels name, read once per digest.
    pub async fn source_commit(
        &self,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> SourceCommitFact {
        let key = format!("{registry}/{repository}@{digest}");
        self.source_commits
            .get_or_make(key, || {
                crate::registry::provenance::read(
                    self.ecr, self.blobs, registry, repository, digest,
                )
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn callers_for_one_key_share_one_fetch_even_while_it_is_under_way() {
        let slots: Slots<OnceCell<usize>> = Slots::new();
        let fetches = AtomicUsize::new(0);
        let fetch = || async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            fetches.fetch_add(1, Ordering::SeqCst) + 100
        };
        let answers = futures_util::future::join_all(
            (0..5).map(|_| slots.get_or_make("ecr/svc".into(), fetch)),
        )
        .await;
        assert_eq!(answers, vec![100; 5]);
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn callers_for_different_keys_fetch_at_the_same_time() {
        // Each fetch waits until every key's fetch has begun: a cache that makes one key
        // wait for another's fetch never gets there.
        let slots: Slots<OnceCell<String>> = Slots::new();
        let keys = ["ecr/a", "ecr/b", "ecr/c"];
        let barrier = tokio::sync::Barrier::new(keys.len());
        let answers = tokio::time::timeout(
            Duration::from_secs(5),
            futures_util::future::join_all(keys.iter().map(|key| {
                let barrier = &barrier;
                slots.get_or_make(key.to_string(), move || async move {
                    barrier.wait().await;
                    format!("tags of {key}")
                })
            })),
        )
        .await
        .expect("every key's fetch ran while the others were under way");
        assert_eq!(answers, ["tags of ecr/a", "tags of ecr/b", "tags of ecr/c"]);
    }

    #[tokio::test]
    async fn a_fetch_given_up_midway_is_made_again_by_the_next_caller() {
        let slots: Slots<OnceCell<&str>> = Slots::new();
        let abandoned = tokio::time::timeout(
            Duration::from_millis(10),
            slots.get_or_make("ecr/svc".into(), std::future::pending),
        )
        .await;
        assert!(abandoned.is_err());
        let answer = slots
            .get_or_make("ecr/svc".into(), || async { "listed" })
            .await;
        assert_eq!(answer, "listed");
    }
}
