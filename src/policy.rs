//! Tag policy: which tag an image should run, decided without any I/O.
//!
//! Two questions share one ordering per strategy, so they can never disagree:
//! [`TagPolicy::select`] answers "which tag is best in this full list" (what Image Updater
//! computes on every poll, and what reconcile mode uses); [`TagPolicy::decide`] answers
//! "should this pushed tag replace the one the Application runs now" (what an ECR event
//! asks). A candidate never replaces a current tag that ranks higher, so events that arrive
//! late, twice or out of order cannot roll an Application back.

pub mod constraint;
pub mod go_glob;
pub mod scan_limits;
pub mod signing;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use regex::bytes::Regex;
use semver::Version;
use serde::Serialize;
use time::OffsetDateTime;

use crate::policy::constraint::{Constraint, ConstraintError, parse_lenient_version};

/// The update strategies of Argo CD Image Updater, under their current names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    Semver,
    NewestBuild,
    Alphabetical,
    Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown update strategy `{0}`: use one of semver, newest-build, alphabetical, digest (or the old names latest, name)"
)]
pub struct UnknownStrategy(pub String);

impl FromStr for Strategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Image Updater lower-cases the name first: `Latest` and `SemVer` are valid there.
        match s.trim().to_ascii_lowercase().as_str() {
            "semver" => Ok(Self::Semver),
            "newest-build" | "latest" => Ok(Self::NewestBuild),
            "alphabetical" | "name" => Ok(Self::Alphabetical),
            "digest" => Ok(Self::Digest),
            _ => Err(UnknownStrategy(s.trim().to_string())),
        }
    }
}

impl Strategy {
    /// Image Updater's `NeedsMetadata`: ranking needs when each tag was pushed.
    pub fn needs_push_times(self) -> bool {
        matches!(self, Self::NewestBuild)
    }

    /// The value written needs what the tracked tag points to now.
    pub fn needs_digest(self) -> bool {
        matches!(self, Self::Digest)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Semver => "semver",
            Self::NewestBuild => "newest-build",
            Self::Alphabetical => "alphabetical",
            Self::Digest => "digest",
        })
    }
}

/// `allow-tags`: `any`, or `regexp:<re>`.
#[derive(Debug, Clone)]
pub enum AllowTags {
    Any,
    Regexp(Regex),
}

/// Regexes come from annotations anyone with write access to an Application can set; bound
/// what one may cost. The `regex` crate already runs in linear time, so this only caps size.
///
/// Image Updater's patterns are Go's (RE2). Tags are ASCII, so they are matched as bytes with
/// Unicode mode off: `\d`, `\w`, `\s` and `\b` are then ASCII classes, as in Go, and so is
/// `(?i)`. What this refuses, with a hint in the skip reason, is Unicode classes (`\pL`,
/// `\p{Greek}`): Go accepts them, but on an ASCII tag `\pL` is `[A-Za-z]`.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiled patterns kept for the warm process, at most this many: a reconcile reads every
/// Application's `allow-tags`, most fleets share a handful of patterns, and compiling the
/// same one again for each Application took a tenth of a reconcile's CPU (profiled over
/// 2,000 Applications). The bound keeps hostile annotations from growing it.
const COMPILED_PATTERNS: usize = 256;

static SHARED_PATTERNS: CompiledPatterns = CompiledPatterns::new(COMPILED_PATTERNS);

/// `allow-tags` patterns compiled once and handed out as clones (a clone shares the compiled
/// program, and matching from several tasks at once is safe).
struct CompiledPatterns {
    kept: std::sync::Mutex<Option<HashMap<String, Regex>>>,
    limit: usize,
    compilations: std::sync::atomic::AtomicUsize,
}

impl CompiledPatterns {
    const fn new(limit: usize) -> Self {
        Self {
            kept: std::sync::Mutex::new(None),
            limit,
            compilations: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// `pattern` compiled as `allow-tags` compiles it, or the copy kept from an earlier call.
    /// A pattern that does not compile is not kept: its error is made again each time.
    fn get(&self, pattern: &str) -> Result<Regex, regex::Error> {
        // A poisoned lock only means the cache is passed by: compiling again is always right.
        if let Ok(guard) = self.kept.lock()
            && let Some(re) = guard.as_ref().and_then(|kept| kept.get(pattern))
        {
            return Ok(re.clone());
        }
        self.compilations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let re = regex::bytes::RegexBuilder::new(pattern)
            .unicode(false)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()?;
        if let Ok(mut guard) = self.kept.lock() {
            let kept = guard.get_or_insert_with(HashMap::new);
            if kept.len() >= self.limit {
                kept.clear();
            }
            kept.insert(pattern.to_string(), re.clone());
        }
        Ok(re)
    }
}

impl AllowTags {
    pub fn parse(value: &str) -> Result<Self, PolicyError> {
        let value = value.trim();
        // Image Updater compares `any` and the `regexp:` prefix case-insensitively.
        if value.eq_ignore_ascii_case("any") || value.is_empty() {
            return Ok(Self::Any);
        }
        let pattern = value
            .split_once(':')
            .filter(|(kind, _)| kind.eq_ignore_ascii_case("regexp"))
            .map(|(_, pattern)| pattern);
        let Some(pattern) = pattern else {
            return Err(PolicyError::BadAllowTags {
                value: value.to_string(),
                reason: "expected `any` or `regexp:<pattern>`".to_string(),
            });
        };
        SHARED_PATTERNS.get(pattern).map(Self::Regexp).map_err(|e| {
                let hint = if pattern.contains("\\p") || pattern.contains("\\P") {
                    " (Unicode classes such as \\pL are not supported: tags are ASCII, so write [A-Za-z])"
                } else {
                    ""
                };
                PolicyError::BadAllowTags {
                    value: value.to_string(),
                    reason: format!("the pattern does not compile: {e}{hint}"),
                }
            })
    }

    fn allows(&self, tag: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Regexp(re) => re.is_match(tag.as_bytes()),
        }
    }
}

/// `ignore-tags`: glob patterns matched exactly as Go's `filepath.Match` matches them.
#[derive(Debug, Clone, Default)]
pub struct IgnoreTags(Vec<go_glob::GoGlob>);

impl IgnoreTags {
    /// An annotation's comma-separated patterns.
    pub fn parse(value: &str) -> Result<Self, PolicyError> {
        Self::of_patterns(value.split(','))
    }

    /// An ImageUpdater object's `ignoreTags` list, item by item: a pattern may hold a comma.
    pub fn of_patterns<'p>(
        patterns: impl IntoIterator<Item = &'p str>,
    ) -> Result<Self, PolicyError> {
        patterns
            .into_iter()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                go_glob::GoGlob::parse(p).map_err(|e| PolicyError::BadIgnoreTags {
                    pattern: p.to_string(),
                    reason: format!("{e}; patterns follow Go's filepath.Match"),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    fn ignores(&self, tag: &str) -> bool {
        self.0.iter().any(|p| p.matches(tag))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("invalid semver constraint `{constraint}`: {source}")]
    BadConstraint {
        constraint: String,
        source: ConstraintError,
    },
    #[error("the digest strategy needs the tag to track as its constraint, e.g. `repo:latest`")]
    DigestWithoutTag,
    #[error("invalid allow-tags `{value}`: {reason}")]
    BadAllowTags { value: String, reason: String },
    #[error("invalid ignore-tags pattern `{pattern}`: {reason}")]
    BadIgnoreTags { pattern: String, reason: String },
}

/// A tag as the registry knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagInfo {
    pub name: String,
    pub pushed_at: Option<OffsetDateTime>,
    pub digest: Option<String>,
    /// ECR's archive storage class (`imageStatus` `ARCHIVED`, or `ACTIVATING` while it is
    /// restored): no node can pull it, so it is never a candidate.
    pub archived: bool,
}

impl TagInfo {
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            pushed_at: None,
            digest: None,
            archived: false,
        }
    }
}

/// A value written where an image's tag lives: a tag, or `tag@sha256:…` for the digest
/// strategy. Parsed and printed only here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TagRef {
    pub tag: String,
    pub digest: Option<String>,
}

impl TagRef {
    pub fn tag(tag: impl Into<String>) -> Self {
        Self {
            tag: tag.into(),
            digest: None,
        }
    }

    /// `tag`, `tag@digest`; `None` for an empty tag.
    pub fn parse(value: &str) -> Option<Self> {
        let (tag, digest) = match value.split_once('@') {
            Some((tag, digest)) => (tag, Some(digest.to_string())),
            None => (value, None),
        };
        (!tag.is_empty()).then(|| Self {
            tag: tag.to_string(),
            digest,
        })
    }
}

impl From<&str> for TagRef {
    fn from(value: &str) -> Self {
        Self::parse(value).unwrap_or_else(|| Self::tag(value))
    }
}

impl fmt::Display for TagRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.digest {
            Some(digest) => write!(f, "{}@{digest}", self.tag),
            None => f.write_str(&self.tag),
        }
    }
}

/// How one image's tags are filtered and ranked.
#[derive(Debug, Clone)]
pub struct TagPolicy {
    pub strategy: Strategy,
    semver: Option<Constraint>,
    /// For `digest`: the mutable tag being tracked.
    tracked_tag: Option<String>,
    pub allow: AllowTags,
    pub ignore: IgnoreTags,
    /// `pin-digest` (ours): the chosen tag is written with the digest it points to, so a
    /// later push of the same tag is a new value to decide, not silently live.
    pin_digest: bool,
}

/// The outcome of [`TagPolicy::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write this value (a tag, or `tag@sha256:…` for `digest`).
    Update {
        to: TagRef,
    },
    Keep(KeepReason),
}

/// Why a candidate does not replace the current tag. The text is what the report shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeepReason {
    #[error("tag `{0}` is not allowed by allow-tags")]
    NotAllowed(String),
    #[error("tag `{0}` matches ignore-tags")]
    Ignored(String),
    #[error("tag `{0}` is not a semantic version")]
    NotAVersion(String),
    #[error("tag `{tag}` does not meet constraint `{constraint}`")]
    ConstraintNotMet { tag: String, constraint: String },
    #[error("tag `{0}` is not the tag this image tracks by digest (`{1}`)")]
    NotTrackedTag(String, String),
    #[error("tag `{0}` is already the current tag")]
    SameAsCurrent(String),
    #[error("digest {0} is already running")]
    SameDigest(String),
    #[error("tag `{candidate}` ranks below the current tag `{current}` under {strategy}")]
    OlderThanCurrent {
        candidate: String,
        current: String,
        strategy: Strategy,
    },
    #[error(
        "the current tag `{0}` is not a semantic version, so semver cannot rank against it (Image Updater refuses this too): set a version tag once by hand"
    )]
    CurrentNotAVersion(String),
    #[error("the registry has no digest for tag `{0}`")]
    NoDigest(String),
    #[error(
        "tag `{0}` is in ECR's archive storage class: no node can pull it until it is restored (`aws ecr update-image-storage-class --target-storage-class STANDARD`)"
    )]
    Archived(String),
    #[error("none of the {0} tags in the registry satisfies the policy")]
    NoEligibleTag(usize),
}

/// The key that orders eligible tags under one strategy. Higher is better.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RankKey<'a> {
    Semver(Version, &'a str),
    PushedAt(Option<OffsetDateTime>, &'a str),
    Name(&'a str),
}

impl TagPolicy {
    /// Builds a policy. `constraint` is the version-constraint position of `image-list`.
    pub fn new(
        strategy: Strategy,
        constraint: Option<&str>,
        allow: AllowTags,
        ignore: IgnoreTags,
    ) -> Result<Self, PolicyError> {
        let constraint = constraint.map(str::trim).filter(|c| !c.is_empty());
        let (semver, tracked_tag) = match strategy {
            Strategy::Semver => {
                // No constraint means `*`, which still keeps pre-releases out.
                let c = constraint.unwrap_or("*");
                let parsed = Constraint::parse(c).map_err(|source| PolicyError::BadConstraint {
                    constraint: c.to_string(),
                    source,
                })?;
                (Some(parsed), None)
            }
            Strategy::Digest => (
                None,
                Some(constraint.ok_or(PolicyError::DigestWithoutTag)?.to_string()),
            ),
            // Image Updater ignores the constraint under these strategies; so do we.
            Strategy::NewestBuild | Strategy::Alphabetical => (None, None),
        };
        Ok(Self {
            strategy,
            semver,
            tracked_tag,
            allow,
            ignore,
            pin_digest: false,
        })
    }

    /// The same policy, writing the chosen tag with its digest (`pin-digest`). A no-op
    /// under `digest`, which always writes one.
    pub fn pinning_digest(mut self, pin: bool) -> Self {
        self.pin_digest = pin && self.strategy != Strategy::Digest;
        self
    }

    /// Whether the value written carries the digest: under `digest`, or pinned.
    pub fn writes_digest(&self) -> bool {
        self.pin_digest || self.strategy.needs_digest()
    }

    /// The tag `digest` tracks, if that is the strategy.
    pub fn tracked_tag(&self) -> Option<&str> {
        self.tracked_tag.as_deref()
    }

    /// The filters every candidate passes first, in Image Updater's order.
    fn eligibility<'a>(&self, tag: &'a TagInfo) -> Result<RankKey<'a>, KeepReason> {
        let name = tag.name.as_str();
        if tag.archived {
            return Err(KeepReason::Archived(name.to_string()));
        }
        if !self.allow.allows(name) {
            return Err(KeepReason::NotAllowed(name.to_string()));
        }
        if self.ignore.ignores(name) {
            return Err(KeepReason::Ignored(name.to_string()));
        }
        match self.strategy {
            Strategy::Semver => {
                let version = parse_lenient_version(name)
                    .ok_or_else(|| KeepReason::NotAVersion(name.to_string()))?;
                if let Some(c) = &self.semver
                    && !c.matches(&version)
                {
                    return Err(KeepReason::ConstraintNotMet {
                        tag: name.to_string(),
                        constraint: c.to_string(),
                    });
                }
                Ok(RankKey::Semver(version, name))
            }
            Strategy::NewestBuild => Ok(RankKey::PushedAt(tag.pushed_at, name)),
            Strategy::Alphabetical => Ok(RankKey::Name(name)),
            Strategy::Digest => {
                let tracked = self.tracked_tag.as_deref().unwrap_or_default();
                if name != tracked {
                    return Err(KeepReason::NotTrackedTag(
                        name.to_string(),
                        tracked.to_string(),
                    ));
                }
                Ok(RankKey::Name(name))
            }
        }
    }

    /// The best tag in a full list, as Image Updater would choose it; `None` if no tag is
    /// eligible. For `digest`, the value is `tag@sha256:…`.
    pub fn select(&self, tags: &[TagInfo]) -> Option<TagRef> {
        let best = tags
            .iter()
            .filter_map(|t| self.eligibility(t).ok().map(|key| (key, t)))
            .max_by(|(a, _), (b, _)| a.cmp(b))
            .map(|(_, tag)| tag)?;
        self.value_for(best)
    }

    /// The best tag of a stream, keeping only the best so far: memory does not grow with
    /// the number of tags (the `select` command reads files of any size this way). The same
    /// order as [`TagPolicy::select`]. Returns the choice and how many tags were read.
    pub fn select_streaming<E>(
        &self,
        tags: impl IntoIterator<Item = Result<TagInfo, E>>,
    ) -> Result<(Option<TagRef>, usize), E> {
        let mut best: Option<TagInfo> = None;
        let mut read = 0;
        for tag in tags {
            let tag = tag?;
            read += 1;
            let Ok(key) = self.eligibility(&tag) else {
                continue;
            };
            let better = match &best {
                None => true,
                Some(current) => self
                    .eligibility(current)
                    .is_ok_and(|current_key| key > current_key),
            };
            if better {
                best = Some(tag);
            }
        }
        Ok((best.and_then(|b| self.value_for(&b)), read))
    }

    /// Every eligible tag, best first: the order in which reconcile tries candidates when a
    /// later check (the platforms a manifest offers) may refuse the best one.
    pub fn ranked<'a>(&self, tags: &'a [TagInfo]) -> Vec<&'a TagInfo> {
        let mut eligible: Vec<(RankKey<'a>, &'a TagInfo)> = tags
            .iter()
            .filter_map(|t| self.eligibility(t).ok().map(|key| (key, t)))
            .collect();
        eligible.sort_by(|(a, _), (b, _)| b.cmp(a));
        eligible.into_iter().map(|(_, tag)| tag).collect()
    }

    /// The value written for a chosen tag: the tag, or `tag@digest` under `digest` (which
    /// needs the digest).
    pub fn value_for(&self, tag: &TagInfo) -> Option<TagRef> {
        if !self.writes_digest() {
            return Some(TagRef::tag(&tag.name));
        }
        tag.digest.as_ref().map(|d| TagRef {
            tag: tag.name.clone(),
            digest: Some(d.clone()),
        })
    }

    /// Does the tag pass the filters and the constraint?
    pub fn is_eligible(&self, tag: &TagInfo) -> bool {
        self.eligibility(tag).is_ok()
    }

    /// Does `candidate` rank strictly above `current` under the strategy? `current` is
    /// ranked without the filters, as in [`TagPolicy::decide`]; `None` when it cannot be
    /// ranked at all (a non-version under semver).
    pub fn ranks_above(&self, candidate: &TagInfo, current: &TagInfo) -> Option<bool> {
        let candidate = self.rank_current(candidate).ok()?;
        let current = self.rank_current(current).ok()?;
        Some(candidate > current)
    }

    /// Should `candidate` replace `current`? `current` is what the Application's spec asks
    /// for (its tag, and for `newest-build` its push time; for `digest` its running digest).
    /// For `digest`, `candidate` must carry the digest the tracked tag points to *now*.
    pub fn decide(&self, current: Option<&TagInfo>, candidate: &TagInfo) -> Decision {
        let candidate_key = match self.eligibility(candidate) {
            Ok(key) => key,
            Err(reason) => return Decision::Keep(reason),
        };
        if self.strategy == Strategy::Digest {
            let Some(digest) = &candidate.digest else {
                return Decision::Keep(KeepReason::NoDigest(candidate.name.clone()));
            };
            if current.and_then(|c| c.digest.as_ref()) == Some(digest) {
                return Decision::Keep(KeepReason::SameDigest(digest.clone()));
            }
            return Decision::Update {
                to: TagRef {
                    tag: candidate.name.clone(),
                    digest: Some(digest.clone()),
                },
            };
        }
        // The value to write: the tag, or pinned, the tag with the digest it points to now.
        let Some(to) = self.value_for(candidate) else {
            return Decision::Keep(KeepReason::NoDigest(candidate.name.clone()));
        };
        let Some(current) = current else {
            return Decision::Update { to };
        };
        if current.name == candidate.name {
            // Pinned, the same tag pushed again is a new image: it moves the pin.
            return match (&to.digest, &current.digest) {
                (Some(new), Some(old)) if new == old => {
                    Decision::Keep(KeepReason::SameDigest(new.clone()))
                }
                (Some(_), _) => Decision::Update { to },
                (None, _) => Decision::Keep(KeepReason::SameAsCurrent(candidate.name.clone())),
            };
        }
        let current_key = match self.rank_current(current) {
            Ok(key) => key,
            Err(reason) => return Decision::Keep(reason),
        };
        match candidate_key.cmp(&current_key) {
            Ordering::Greater => Decision::Update { to },
            Ordering::Less | Ordering::Equal => Decision::Keep(KeepReason::OlderThanCurrent {
                candidate: candidate.name.clone(),
                current: current.name.clone(),
                strategy: self.strategy,
            }),
        }
    }

    /// The current tag is ranked without the filters: a tag the user has since excluded
    /// still has a place in the order, so a lower allowed tag does not count as newer.
    fn rank_current<'a>(&self, current: &'a TagInfo) -> Result<RankKey<'a>, KeepReason> {
        let name = current.name.as_str();
        Ok(match self.strategy {
            Strategy::Semver => RankKey::Semver(
                parse_lenient_version(name)
                    .ok_or_else(|| KeepReason::CurrentNotAVersion(name.to_string()))?,
                name,
            ),
            Strategy::NewestBuild => RankKey::PushedAt(current.pushed_at, name),
            Strategy::Alphabetical | Strategy::Digest => RankKey::Name(name),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering as AtomicOrdering;

    use super::*;
    use time::macros::datetime;

    fn policy(strategy: Strategy, constraint: Option<&str>) -> TagPolicy {
        TagPolicy::new(strategy, constraint, AllowTags::Any, IgnoreTags::default()).unwrap()
    }

    fn tags(names: &[&str]) -> Vec<TagInfo> {
        names.iter().map(|n| TagInfo::named(*n)).collect()
    }

    fn pushed(name: &str, at: OffsetDateTime) -> TagInfo {
        TagInfo {
            name: name.into(),
            pushed_at: Some(at),
            digest: None,
            archived: false,
        }
    }

    fn with_digest(name: &str, digest: Option<&str>) -> TagInfo {
        TagInfo {
            name: name.into(),
            pushed_at: None,
            digest: digest.map(str::to_string),
            archived: false,
        }
    }

    #[test]
    fn an_archived_image_is_never_a_candidate_under_any_strategy() {
        let base = datetime!(2026-12-03 12:00 UTC);
        let archived = |name: &str, minutes: i64| TagInfo {
            archived: true,
            ..pushed(name, base + time::Duration::minutes(minutes))
        };
        let tags = vec![
            pushed("1.0.0", base),
            archived("1.2.0", 10),
            pushed("1.1.0", base + time::Duration::minutes(5)),
        ];
        for strategy in [
            Strategy::Semver,
            Strategy::NewestBuild,
            Strategy::Alphabetical,
        ] {
            let p = policy(strategy, None);
            let best = p.ranked(&tags).first().map(|t| t.name.clone());
            assert_eq!(
                best.as_deref(),
                Some("1.1.0"),
                "{strategy}: the best pullable tag"
            );
            assert_eq!(
                p.decide(Some(&TagInfo::named("1.0.0")), &archived("1.2.0", 10)),
                Decision::Keep(KeepReason::Archived("1.2.0".into())),
                "{strategy}"
            );
        }
        assert!(
            KeepReason::Archived("1.2.0".into())
                .to_string()
                .contains("archive storage class")
        );
    }

    #[test]
    fn a_pinned_choice_is_written_with_its_digest_and_a_repush_moves_the_pin() {
        let pinned = policy(Strategy::Semver, None).pinning_digest(true);
        let plain = policy(Strategy::Semver, None);
        let update = |tag: &str, digest: &str| Decision::Update {
            to: TagRef {
                tag: tag.into(),
                digest: Some(digest.into()),
            },
        };
        // (case, policy, current, candidate, decision)
        let cases: Vec<(&str, &TagPolicy, Option<TagInfo>, TagInfo, Decision)> = vec![
            (
                "a higher version is written with its digest",
                &pinned,
                Some(with_digest("1.0.0", Some("sha256:a"))),
                with_digest("1.1.0", Some("sha256:b")),
                update("1.1.0", "sha256:b"),
            ),
            (
                "a first write is pinned",
                &pinned,
                None,
                with_digest("1.1.0", Some("sha256:b")),
                update("1.1.0", "sha256:b"),
            ),
            (
                "the same tag pushed again moves the pin",
                &pinned,
                Some(with_digest("1.1.0", Some("sha256:a"))),
                with_digest("1.1.0", Some("sha256:b")),
                update("1.1.0", "sha256:b"),
            ),
            (
                "an unpinned running tag gets its pin",
                &pinned,
                Some(with_digest("1.1.0", None)),
                with_digest("1.1.0", Some("sha256:b")),
                update("1.1.0", "sha256:b"),
            ),
            (
                "the same digest again is kept",
                &pinned,
                Some(with_digest("1.1.0", Some("sha256:b"))),
                with_digest("1.1.0", Some("sha256:b")),
                Decision::Keep(KeepReason::SameDigest("sha256:b".into())),
            ),
            (
                "a lower version is never written, pinned or not",
                &pinned,
                Some(with_digest("1.1.0", Some("sha256:b"))),
                with_digest("1.0.0", Some("sha256:c")),
                Decision::Keep(KeepReason::OlderThanCurrent {
                    candidate: "1.0.0".into(),
                    current: "1.1.0".into(),
                    strategy: Strategy::Semver,
                }),
            ),
            (
                "without its digest a pinned choice is not written",
                &pinned,
                Some(with_digest("1.0.0", None)),
                with_digest("1.1.0", None),
                Decision::Keep(KeepReason::NoDigest("1.1.0".into())),
            ),
            (
                "unpinned, the tag alone",
                &plain,
                Some(with_digest("1.0.0", None)),
                with_digest("1.1.0", Some("sha256:b")),
                Decision::Update {
                    to: TagRef::tag("1.1.0"),
                },
            ),
            (
                "unpinned, a repush of the running tag changes nothing",
                &plain,
                Some(with_digest("1.1.0", Some("sha256:a"))),
                with_digest("1.1.0", Some("sha256:b")),
                Decision::Keep(KeepReason::SameAsCurrent("1.1.0".into())),
            ),
        ];
        for (case, policy, current, candidate, expected) in cases {
            assert_eq!(
                policy.decide(current.as_ref(), &candidate),
                expected,
                "{case}"
            );
        }
        assert!(pinned.writes_digest() && !plain.writes_digest());
        assert_eq!(
            pinned
                .value_for(&with_digest("2.0.0", Some("sha256:d")))
                .unwrap()
                .to_string(),
            "2.0.0@sha256:d"
        );
        let digest = policy(Strategy::Digest, Some("stable"));
        assert!(
            digest.clone().pinning_digest(true).writes_digest(),
            "digest always writes one"
        );
    }

    #[test]
    fn semver_selection_matches_image_updaters_own_reference_cases() {
        let all = tags(&["0.1", "0.5.1", "0.9", "1.0", "1.0.1", "1.1.2", "2.0.3"]);
        let table: &[(Option<&str>, &[TagInfo], Option<&str>)] = &[
            (None, &all, Some("2.0.3")),
            (Some("^1.0"), &all, Some("1.1.2")),
            (Some("~1.0"), &all, Some("1.0.1")),
            (Some("~1.0"), &tags(&["0.1", "0.5.1", "0.9", "2.0.3"]), None),
            (
                None,
                &tags(&["v2.2.0", "v2.3.0-rc.0", "v2.3.0-rc.1"]),
                Some("v2.2.0"),
            ),
            (
                Some("2.x-0"),
                &tags(&["v2.2.0", "v2.3.0-rc.0", "v2.3.0-rc.1"]),
                Some("v2.3.0-rc.1"),
            ),
            (None, &tags(&["latest", "stable", "1.0.0"]), Some("1.0.0")),
            (None, &tags(&["latest"]), None),
        ];
        for (constraint, list, expected) in table {
            assert_eq!(
                policy(Strategy::Semver, *constraint)
                    .select(list)
                    .map(|t| t.to_string())
                    .as_deref(),
                *expected,
                "constraint {constraint:?}"
            );
        }
    }

    #[test]
    fn newest_build_selects_the_latest_push_and_breaks_ties_by_the_greater_name() {
        let p = policy(Strategy::NewestBuild, None);
        let t = datetime!(2025-08-25 12:00 UTC);
        let list = vec![
            pushed("b", t),
            pushed("z-old", t - time::Duration::hours(1)),
            pushed("a", t),
        ];
        assert_eq!(p.select(&list).map(|t| t.to_string()).as_deref(), Some("b"));
        let list = vec![
            pushed("20250825-120000", t),
            pushed("20250825-153012", t + time::Duration::hours(3)),
        ];
        assert_eq!(
            p.select(&list).map(|t| t.to_string()).as_deref(),
            Some("20250825-153012")
        );
    }

    #[test]
    fn alphabetical_selection_is_byte_wise() {
        let p = policy(Strategy::Alphabetical, None);
        assert_eq!(
            p.select(&tags(&["b", "B", "a10", "a9"]))
                .map(|t| t.to_string())
                .as_deref(),
            Some("b")
        );
        assert_eq!(
            p.select(&tags(&["a10", "a9"]))
                .map(|t| t.to_string())
                .as_deref(),
            Some("a9")
        );
        assert_eq!(
            p.select(&tags(&["Z", "Ä"]))
                .map(|t| t.to_string())
                .as_deref(),
            Some("Ä")
        );
    }

    #[test]
    fn digest_selection_pins_the_tracked_tag_to_its_digest() {
        let p = policy(Strategy::Digest, Some("latest"));
        let mut list = tags(&["latest", "1.0"]);
        list[0].digest = Some("sha256:abc".into());
        list[1].digest = Some("sha256:def".into());
        assert_eq!(
            p.select(&list).map(|t| t.to_string()).as_deref(),
            Some("latest@sha256:abc")
        );
        assert_eq!(p.select(&tags(&["1.0"])), None);
    }

    #[test]
    fn allow_and_ignore_filters_apply_before_the_strategy() {
        let allow = AllowTags::parse("regexp:^[0-9]{8}-[0-9]{6}$").unwrap();
        let ignore = IgnoreTags::parse("*-999999, dev-*").unwrap();
        let p = TagPolicy::new(Strategy::Alphabetical, None, allow, ignore).unwrap();
        let list = tags(&[
            "latest",
            "zzz",
            "20250825-120000",
            "20250826-999999",
            "dev-1",
        ]);
        assert_eq!(
            p.select(&list).map(|t| t.to_string()).as_deref(),
            Some("20250825-120000")
        );
        let everything = IgnoreTags::parse("*").unwrap();
        let p = TagPolicy::new(Strategy::Alphabetical, None, AllowTags::Any, everything).unwrap();
        assert_eq!(p.select(&list), None);
    }

    #[test]
    fn ignore_globs_follow_go_filepath_match_where_star_stops_at_a_slash() {
        let ignore = IgnoreTags::parse("feature*").unwrap();
        assert!(ignore.ignores("feature-x"));
        assert!(!ignore.ignores("feature/x"));
        assert!(IgnoreTags::parse("v1.?").unwrap().ignores("v1.2"));
        assert!(IgnoreTags::parse("[ab]*").unwrap().ignores("beta"));
    }

    #[test]
    fn strategy_names_include_the_old_ones() {
        let table = [
            ("semver", Strategy::Semver),
            ("newest-build", Strategy::NewestBuild),
            ("latest", Strategy::NewestBuild),
            ("alphabetical", Strategy::Alphabetical),
            ("name", Strategy::Alphabetical),
            ("digest", Strategy::Digest),
            // Image Updater lower-cases the name before matching.
            ("Latest", Strategy::NewestBuild),
            ("SemVer", Strategy::Semver),
            ("NAME", Strategy::Alphabetical),
        ];
        for (name, expected) in table {
            assert_eq!(name.parse::<Strategy>(), Ok(expected));
        }
        assert_eq!(
            "newest".parse::<Strategy>(),
            Err(UnknownStrategy("newest".into()))
        );
    }

    #[test]
    fn allow_tags_keywords_and_prefixes_are_case_insensitive_as_in_image_updater() {
        for value in ["any", "ANY", "Any"] {
            assert!(
                matches!(AllowTags::parse(value), Ok(AllowTags::Any)),
                "{value}"
            );
        }
        for value in ["regexp:^v1", "Regexp:^v1", "REGEXP:^v1"] {
            let allow = AllowTags::parse(value).unwrap();
            assert!(allow.allows("v1.2"), "{value}");
            assert!(!allow.allows("2.0"), "{value}");
        }
        // The pattern itself stays case-sensitive.
        assert!(!AllowTags::parse("regexp:^v1").unwrap().allows("V1"));
    }

    #[test]
    fn a_pattern_asked_for_again_is_not_compiled_again_and_matches_the_same() {
        let patterns = CompiledPatterns::new(8);
        let first = patterns.get("^[0-9]{8}-[0-9]{6}$").unwrap();
        let again = patterns.get("^[0-9]{8}-[0-9]{6}$").unwrap();
        assert_eq!(patterns.compilations.load(AtomicOrdering::Relaxed), 1);
        for tag in ["20250825-153012", "20250825-15301", "latest"] {
            assert_eq!(
                first.is_match(tag.as_bytes()),
                again.is_match(tag.as_bytes())
            );
        }
        assert!(again.is_match(b"20250825-153012"));
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_refused_every_time_and_not_kept() {
        let patterns = CompiledPatterns::new(8);
        assert!(patterns.get("(unclosed").is_err());
        assert!(patterns.get("(unclosed").is_err());
        assert_eq!(patterns.compilations.load(AtomicOrdering::Relaxed), 2);
        let kept = patterns.kept.lock().unwrap();
        assert!(kept.as_ref().is_none_or(|kept| kept.is_empty()));
    }

    #[test]
    fn the_kept_patterns_never_outgrow_their_bound_and_still_answer_right() {
        let patterns = CompiledPatterns::new(4);
        for n in 0..10 {
            let re = patterns.get(&format!("^v{n}$")).unwrap();
            assert!(re.is_match(format!("v{n}").as_bytes()));
            assert!(!re.is_match(format!("v{n}0").as_bytes()));
            let kept = patterns.kept.lock().unwrap();
            assert!(kept.as_ref().map_or(0, HashMap::len) <= 4);
        }
        assert_eq!(patterns.compilations.load(AtomicOrdering::Relaxed), 10);
    }

    #[test]
    fn allow_tags_patterns_keep_their_semantics_when_shared() {
        // Unicode mode stays off for a pattern served from the shared cache: `\d` is ASCII.
        for _ in 0..2 {
            let allow = AllowTags::parse("regexp:^\\d+$").unwrap();
            assert!(allow.allows("123"));
            assert!(!allow.allows("١٢٣"));
        }
    }

    #[test]
    fn bad_policy_inputs_are_specific_errors() {
        assert!(matches!(
            AllowTags::parse("regexp:(unclosed"),
            Err(PolicyError::BadAllowTags { reason, .. }) if reason.contains("does not compile")
        ));
        assert!(matches!(
            AllowTags::parse("^[0-9]+$"),
            Err(PolicyError::BadAllowTags { reason, .. }) if reason.contains("regexp:")
        ));
        assert!(matches!(
            IgnoreTags::parse("ok,[unclosed"),
            Err(PolicyError::BadIgnoreTags { pattern, .. }) if pattern == "[unclosed"
        ));
        assert!(matches!(
            TagPolicy::new(Strategy::Semver, Some("latest"), AllowTags::Any, IgnoreTags::default()),
            Err(PolicyError::BadConstraint { constraint, .. }) if constraint == "latest"
        ));
        assert_eq!(
            TagPolicy::new(
                Strategy::Digest,
                None,
                AllowTags::Any,
                IgnoreTags::default()
            )
            .err(),
            Some(PolicyError::DigestWithoutTag)
        );
    }

    #[test]
    fn allow_tags_classes_are_ascii_as_in_go_and_unicode_classes_are_refused_with_a_hint() {
        let dated = AllowTags::parse(r"regexp:^\d{8}-\d{6}$").unwrap();
        assert!(dated.allows("20250825-153012"));
        // Go's `\d` is [0-9]: Arabic-Indic digits are not digits there, nor here.
        assert!(!dated.allows("\u{662}\u{660}\u{662}\u{665}0825-153012"));
        let word = AllowTags::parse(r"regexp:^\w+$").unwrap();
        assert!(word.allows("v1_2"));
        assert!(!word.allows("v\u{e9}"));
        let folded = AllowTags::parse("regexp:(?i)^V1").unwrap();
        assert!(folded.allows("v1.0"));
        for pattern in [r"regexp:^\pL+$", r"regexp:^\p{Greek}$", r"regexp:\PN"] {
            assert!(
                matches!(AllowTags::parse(pattern),
                    Err(PolicyError::BadAllowTags { reason, .. })
                        if reason.contains("does not compile") && reason.contains("[A-Za-z]")),
                "{pattern}"
            );
        }
    }

    #[test]
    fn a_pathological_regex_compiles_in_bounded_size_or_is_refused() {
        // Linear-time engine: catastrophic backtracking cannot happen; huge repetition is
        // refused by the size limit rather than eating the function's memory.
        let p = AllowTags::parse("regexp:^(a+)+$").unwrap();
        assert!(!p.allows(&format!("{}b", "a".repeat(50_000))));
        assert!(matches!(
            AllowTags::parse("regexp:(\\w{1000}){1000}"),
            Err(PolicyError::BadAllowTags { .. })
        ));
    }

    #[test]
    fn decide_answers_update_or_keep_with_the_reason() {
        let allow = AllowTags::parse("regexp:^v?[0-9.]+$").unwrap();
        let ignore = IgnoreTags::parse("1.9.*").unwrap();
        let p = TagPolicy::new(Strategy::Semver, Some("^1.0"), allow, ignore).unwrap();
        let cur = TagInfo::named("1.2.0");
        let table: &[(&str, Decision)] = &[
            ("1.3.0", Decision::Update { to: "1.3.0".into() }),
            (
                "1.1.0",
                Decision::Keep(KeepReason::OlderThanCurrent {
                    candidate: "1.1.0".into(),
                    current: "1.2.0".into(),
                    strategy: Strategy::Semver,
                }),
            ),
            (
                "1.2.0",
                Decision::Keep(KeepReason::SameAsCurrent("1.2.0".into())),
            ),
            (
                "1.3.0-rc1",
                Decision::Keep(KeepReason::NotAllowed("1.3.0-rc1".into())),
            ),
            ("1.9.1", Decision::Keep(KeepReason::Ignored("1.9.1".into()))),
            (
                "2.0.0",
                Decision::Keep(KeepReason::ConstraintNotMet {
                    tag: "2.0.0".into(),
                    constraint: "^1.0".into(),
                }),
            ),
            // Same version, two spellings: the tie goes to the greater name, in select as
            // here, so events and reconcile agree and the move happens at most once.
            (
                "v1.2.0",
                Decision::Update {
                    to: "v1.2.0".into(),
                },
            ),
        ];
        for (candidate, expected) in table {
            assert_eq!(
                &p.decide(Some(&cur), &TagInfo::named(*candidate)),
                expected,
                "{candidate}"
            );
        }
    }

    #[test]
    fn decide_updates_when_the_application_names_no_tag_yet() {
        let p = policy(Strategy::Semver, None);
        assert_eq!(
            p.decide(None, &TagInfo::named("1.0.0")),
            Decision::Update { to: "1.0.0".into() }
        );
    }

    #[test]
    fn decide_under_semver_refuses_to_rank_against_a_non_version_current_tag() {
        let p = policy(Strategy::Semver, None);
        assert_eq!(
            p.decide(Some(&TagInfo::named("latest")), &TagInfo::named("1.0.0")),
            Decision::Keep(KeepReason::CurrentNotAVersion("latest".into()))
        );
    }

    #[test]
    fn decide_under_newest_build_compares_push_times_and_never_goes_back() {
        let p = policy(Strategy::NewestBuild, None);
        let t = datetime!(2025-08-25 12:00 UTC);
        let current = pushed("20250825-120000", t);
        assert_eq!(
            p.decide(
                Some(&current),
                &pushed("20250825-153012", t + time::Duration::hours(3))
            ),
            Decision::Update {
                to: "20250825-153012".into()
            }
        );
        assert!(matches!(
            p.decide(
                Some(&current),
                &pushed("20250824-090000", t - time::Duration::days(1))
            ),
            Decision::Keep(KeepReason::OlderThanCurrent { .. })
        ));
        // Without a push time the current tag ranks lowest here; `decide` never hands the
        // policy such a tag without first finding when it ran (or keeping it).
        assert_eq!(
            p.decide(Some(&TagInfo::named("gone")), &pushed("20250826-000000", t)),
            Decision::Update {
                to: "20250826-000000".into()
            }
        );
    }

    #[test]
    fn decide_under_digest_follows_the_tracked_tags_digest_now() {
        let p = policy(Strategy::Digest, Some("stable"));
        let running = TagInfo {
            name: "stable".into(),
            pushed_at: None,
            digest: Some("sha256:old".into()),
            archived: false,
        };
        let mut now = running.clone();
        now.digest = Some("sha256:new".into());
        assert_eq!(
            p.decide(Some(&running), &now),
            Decision::Update {
                to: "stable@sha256:new".into()
            }
        );
        assert_eq!(
            p.decide(Some(&now), &now),
            Decision::Keep(KeepReason::SameDigest("sha256:new".into()))
        );
        assert_eq!(
            p.decide(Some(&running), &TagInfo::named("other")),
            Decision::Keep(KeepReason::NotTrackedTag("other".into(), "stable".into()))
        );
        assert_eq!(
            p.decide(Some(&running), &TagInfo::named("stable")),
            Decision::Keep(KeepReason::NoDigest("stable".into()))
        );
    }

    #[test]
    fn the_seeds_annotations_move_a_date_tag_forward_only() {
        let allow = AllowTags::parse("regexp:^[0-9]{8}-[0-9]{6}$").unwrap();
        let p = TagPolicy::new(Strategy::NewestBuild, None, allow, IgnoreTags::default()).unwrap();
        let t = datetime!(2025-08-25 12:00 UTC);
        let current = pushed("20250825-120000", t);
        assert_eq!(
            p.decide(
                Some(&current),
                &pushed("20250825-153012", t + time::Duration::minutes(210))
            ),
            Decision::Update {
                to: "20250825-153012".into()
            }
        );
        assert_eq!(
            p.decide(
                Some(&current),
                &pushed("latest", t + time::Duration::hours(4))
            ),
            Decision::Keep(KeepReason::NotAllowed("latest".into()))
        );
    }

    #[test]
    fn streaming_selection_agrees_with_selection_over_the_whole_list() {
        let t = datetime!(2025-08-25 12:00 UTC);
        let list: Vec<TagInfo> = ["1.0.0", "v2.1.0", "2.1.0", "latest", "2.0.0-rc.1", "1.9.9"]
            .iter()
            .enumerate()
            .map(|(i, name)| TagInfo {
                name: name.to_string(),
                pushed_at: Some(t + time::Duration::minutes(i as i64 % 3)),
                digest: Some(format!("sha256:{i}")),
                archived: false,
            })
            .collect();
        for (strategy, constraint) in [
            (Strategy::Semver, None),
            (Strategy::Semver, Some("^1.0")),
            (Strategy::NewestBuild, None),
            (Strategy::Alphabetical, None),
            (Strategy::Digest, Some("latest")),
        ] {
            let p = policy(strategy, constraint);
            let streamed = p
                .select_streaming(list.iter().cloned().map(Ok::<_, ()>))
                .unwrap();
            assert_eq!(streamed, (p.select(&list), list.len()), "{strategy}");
        }
    }

    mod properties {
        use super::Strategy;
        use super::*;
        use proptest::prelude::*;

        fn apply_all(p: &TagPolicy, start: &TagInfo, pushes: &[TagInfo]) -> (TagInfo, bool) {
            let mut current = start.clone();
            let mut never_lowered = true;
            for push in pushes {
                if let Decision::Update { to } = p.decide(Some(&current), push) {
                    let next = pushes.iter().find(|t| t.name == to.tag).cloned().unwrap();
                    let before = p.rank_current(&current).unwrap();
                    let after = p.rank_current(&next).unwrap();
                    never_lowered &= after > before;
                    current = next;
                }
            }
            (current, never_lowered)
        }

        proptest! {
            #[test]
            fn any_order_of_pushes_ends_at_the_same_tag_and_never_lowers_it(
                versions in proptest::collection::vec((0u64..4, 0u64..4, 0u64..4), 1..12),
                seed in any::<u64>(),
                duplicate in any::<bool>(),
            ) {
                let p = TagPolicy::new(
                    Strategy::Semver, Some(">=0.1"), AllowTags::Any, IgnoreTags::default(),
                ).unwrap();
                let mut pushes: Vec<TagInfo> = versions
                    .iter()
                    .map(|(a, b, c)| TagInfo::named(format!("{a}.{b}.{c}")))
                    .collect();
                if duplicate {
                    pushes.push(pushes[0].clone());
                }
                let start = TagInfo::named("0.0.1");
                let (in_order, _) = apply_all(&p, &start, &pushes);
                let mut shuffled = pushes.clone();
                let mut state = seed;
                for i in (1..shuffled.len()).rev() {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    shuffled.swap(i, (state >> 33) as usize % (i + 1));
                }
                let (any_order, never_lowered) = apply_all(&p, &start, &shuffled);
                prop_assert_eq!(&in_order.name, &any_order.name);
                prop_assert!(never_lowered);
                let best = p.select(&pushes).map_or_else(|| start.name.clone(), |t| t.tag);
                prop_assert_eq!(any_order.name, best);
            }

            #[test]
            fn newest_build_events_in_any_order_end_at_the_latest_push(
                minutes in proptest::collection::vec(0i64..10_000, 1..12),
                seed in any::<u64>(),
            ) {
                let p = TagPolicy::new(
                    Strategy::NewestBuild, None, AllowTags::Any, IgnoreTags::default(),
                ).unwrap();
                let base = datetime!(2025-01-01 0:00 UTC);
                let pushes: Vec<TagInfo> = minutes
                    .iter()
                    .enumerate()
                    .map(|(i, m)| pushed(&format!("t{i}"), base + time::Duration::minutes(*m)))
                    .collect();
                let mut shuffled = pushes.clone();
                let mut state = seed;
                for i in (1..shuffled.len()).rev() {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    shuffled.swap(i, (state >> 33) as usize % (i + 1));
                }
                let start = pushed("start", base - time::Duration::days(1));
                let (a, lowered_a) = apply_all(&p, &start, &pushes);
                let (b, lowered_b) = apply_all(&p, &start, &shuffled);
                prop_assert_eq!(&a.name, &b.name);
                prop_assert!(lowered_a && lowered_b);
                prop_assert_eq!(Some(a.name), p.select(&pushes).map(|t| t.tag));
            }
        }
    }
}
