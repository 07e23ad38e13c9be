//! Registry facts for one invocation: what ECR says about tags, each asked at most once.
//!
//! Applications tracking one repository usually share a tag, so the answers are kept for the
//! invocation. The caches sit behind async locks held across the request, so concurrent
//! Applications wait for the one request instead of repeating it.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Mutex as AsyncMutex;

use crate::decide::{self, Described, ImageCase};
use crate::ecr::{Ecr, EcrError};
use crate::policy::TagInfo;

/// Reconcile with a platforms annotation reads candidates' manifests this many at a time,
/// best first, and stops at the first batch holding one that passes.
const MANIFEST_BATCH: usize = 10;

/// A registry read that failed, with whether a retry (or an operator) may fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchFailure {
    pub message: String,
    pub retryable: bool,
}

impl From<EcrError> for FetchFailure {
    fn from(error: EcrError) -> Self {
        Self {
            retryable: error.is_retryable(),
            message: error.to_string(),
        }
    }
}

/// The reconcile choice: the best candidate that passed the manifest check, and how many
/// better ones lacked a platform.
#[derive(Debug, Clone, Copy)]
pub struct Choice<'t> {
    pub chosen: Option<&'t TagInfo>,
    pub platform_refusals: usize,
}

type TagList = Result<Arc<Vec<TagInfo>>, FetchFailure>;

pub struct RegistryFacts<'a> {
    ecr: &'a Ecr,
    described: AsyncMutex<HashMap<String, Option<TagInfo>>>,
    tag_lists: AsyncMutex<HashMap<String, TagList>>,
}

impl<'a> RegistryFacts<'a> {
    pub fn new(ecr: &'a Ecr) -> Self {
        Self {
            ecr,
            described: AsyncMutex::new(HashMap::new()),
            tag_lists: AsyncMutex::new(HashMap::new()),
        }
    }

    /// What ECR knows of `tags` (`None` where it has no such tag); the ones not yet asked
    /// in this invocation go out in a single request.
    pub async fn describe(
        &self,
        registry: &str,
        repository: &str,
        tags: &[String],
    ) -> Result<Described, FetchFailure> {
        let key = |tag: &str| format!("{registry}/{repository}:{tag}");
        let mut described = self.described.lock().await;
        let unknown: Vec<String> = tags
            .iter()
            .filter(|t| !described.contains_key(&key(t)))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            let found = self
                .ecr
                .describe_tags(registry, repository, &unknown)
                .await?;
            for tag in &unknown {
                described.insert(key(tag), found.iter().find(|f| &f.name == tag).cloned());
            }
        }
        Ok(tags
            .iter()
            .map(|t| (t.clone(), described.get(&key(t)).cloned().flatten()))
            .collect())
    }

    /// A repository's full tag list, fetched at most once per invocation.
    pub async fn tag_list(&self, registry: &str, repository: &str) -> TagList {
        let mut cache = self.tag_lists.lock().await;
        let key = format!("{registry}/{repository}");
        if let Some(known) = cache.get(&key) {
            return known.clone();
        }
        let listed = self
            .ecr
            .list_tags(registry, repository)
            .await
            .map(Arc::new)
            .map_err(FetchFailure::from);
        cache.insert(key, listed.clone());
        listed
    }

    /// Whether `tag`'s manifest offers every platform the image asks for; `Err` of the
    /// inner result is the skip reason.
    pub async fn check_platforms(
        &self,
        case: &ImageCase<'_>,
        tag: &str,
    ) -> Result<Result<(), String>, FetchFailure> {
        let manifest = self
            .ecr
            .platforms(&case.registry, &case.repository, tag)
            .await?;
        Ok(decide::platform_verdict(
            tag,
            manifest.as_ref(),
            &case.config.platforms,
        ))
    }

    /// Reconcile: the first candidate, in rank order, whose manifest offers every wanted
    /// platform; without a platforms annotation, simply the first.
    pub async fn choose<'t>(
        &self,
        case: &ImageCase<'_>,
        candidates: &[&'t TagInfo],
    ) -> Result<Choice<'t>, FetchFailure> {
        if case.config.platforms.is_empty() {
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
                    &case.config.platforms,
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
