//! Argo CD Image Updater's annotations, read unchanged into a typed configuration.
//!
//! Users migrate from the in-cluster controller without touching a single annotation, so
//! this module accepts every key and old name Image Updater accepts. What we cannot honour
//! (git write-back) is reported, never silently replaced by something else. A malformed value
//! spoils only the image it belongs to: each image is parsed on its own.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::failure::Refused;
use crate::policy::{AllowTags, IgnoreTags, PolicyError, Strategy, TagPolicy, UnknownStrategy};

pub const PREFIX: &str = "argocd-image-updater.argoproj.io/";
/// `{PREFIX}image-list`, spelled out so the listing's per-Application check builds no key.
pub const IMAGE_LIST: &str = "argocd-image-updater.argoproj.io/image-list";
/// Our own annotations, for settings Image Updater has no annotation for.
pub const OWN_PREFIX: &str = "argocd-ecr-updater.io/";

/// Where an image's tag is written in the Application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HelmTarget {
    /// Two parameters: repository and tag.
    NameAndTag { name: String, tag: String },
    /// One parameter holding `repository:tag`.
    Spec { param: String },
}

/// A registry and repository, as written in `image-list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageRef {
    /// `None` for Docker Hub style names with no registry host.
    pub registry: Option<String>,
    pub repository: String,
}

impl ImageRef {
    /// Splits `registry/path/name` the way Docker does: the first component is a registry
    /// host only if it has a `.` or a `:`, or is `localhost`.
    pub fn parse(text: &str) -> Self {
        match text.split_once('/') {
            Some((host, rest))
                if host.contains('.') || host.contains(':') || host == "localhost" =>
            {
                Self {
                    registry: Some(host.to_ascii_lowercase()),
                    repository: rest.to_string(),
                }
            }
            _ => Self {
                registry: None,
                repository: text.to_string(),
            },
        }
    }

    pub fn is(&self, registry: &str, repository: &str) -> bool {
        self.registry.as_deref() == Some(registry) && self.repository == repository
    }

    /// `ImageRef::parse(text).is(registry, repository)` without building the `ImageRef`: the
    /// listing asks it of every Application's every image.
    pub fn names(text: &str, registry: &str, repository: &str) -> bool {
        match text.split_once('/') {
            Some((host, rest))
                if host.contains('.') || host.contains(':') || host == "localhost" =>
            {
                // `parse` lowercases the host; a registry with capitals never equals that.
                !registry.bytes().any(|b| b.is_ascii_uppercase())
                    && host.eq_ignore_ascii_case(registry)
                    && rest == repository
            }
            _ => false,
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.registry {
            Some(r) => write!(f, "{r}/{}", self.repository),
            None => f.write_str(&self.repository),
        }
    }
}

/// An `os/arch[/variant]` platform from the `platforms` annotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Platform {
    pub os: String,
    pub arch: String,
    pub variant: Option<String>,
}

/// Everything we know about one entry of `image-list`.
#[derive(Debug, Clone)]
pub struct ImageConfig {
    pub alias: Option<String>,
    pub image: ImageRef,
    pub constraint: Option<String>,
    pub policy: TagPolicy,
    pub force_update: bool,
    pub platforms: Vec<Platform>,
    /// `argocd-ecr-updater.io/<alias>.scan-gate`: hold the image back until its scan passes.
    pub scan_gate: Option<crate::policy::scan_limits::ScanGate>,
    /// `argocd-ecr-updater.io/<alias>.cosign-key` (or an ImageUpdater object's
    /// `imagesVerification.cosignKey`): roll out only images signed with this key.
    pub cosign_key: Option<crate::appconfig::cosign_key::KeyRef>,
    /// `min-age` (ours): an image is written only once it has been in ECR this long, by
    /// ECR's push time.
    pub min_age: Option<std::time::Duration>,
    /// `hold-on-failure` (ours): after a failed rollout of this image, hold further writes
    /// of it until the Application is Healthy again.
    pub hold_on_failure: bool,
    /// `auto-rollback` (ours): after a failed rollout of this image, write back what it
    /// replaced, and never write the failed image again until a person releases it.
    pub auto_rollback: bool,
    /// `signing-profile` (ours): roll out only a digest ECR managed signing has signed with
    /// this AWS Signer profile.
    pub signing_profile: Option<crate::policy::signing::SigningProfile>,
    pub helm: HelmTarget,
    /// `kustomize.image-name`: the image name Kustomize replaces; defaults to the image.
    pub kustomize_image_name: Option<String>,
    /// An ImageUpdater object's `manifestTargets.plugin`: environment variables of a
    /// Config Management Plugin source that carry the image. Annotations have no such key.
    pub plugin: Option<PluginTarget>,
    /// Things the user set that we accept but do not need, said in the report.
    pub notes: Vec<String>,
    /// Every setting of ours this image's configuration carries (`argocd-ecr-updater.io/…`,
    /// per alias and app-wide), as [`ImageConfig::own_setting`] reads them for a gate.
    pub own: BTreeMap<String, String>,
}

impl ImageConfig {
    /// Our setting `name` for this image: `argocd-ecr-updater.io/<alias>.<name>`, else the
    /// app-wide `argocd-ecr-updater.io/<name>`; its key and value.
    pub fn own_setting(&self, name: &str) -> Option<(&str, &str)> {
        let keys = self
            .alias
            .as_ref()
            .map(|a| format!("{OWN_PREFIX}{a}.{name}"))
            .into_iter()
            .chain(std::iter::once(format!("{OWN_PREFIX}{name}")));
        for key in keys {
            if let Some((key, value)) = self.own.get_key_value(&key) {
                return Some((key.as_str(), value.as_str()));
            }
        }
        None
    }
}

/// The plugin environment variables an image is written to: `spec` holds `repo:tag`, else
/// `name` holds the repository and `tag` the tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginTarget {
    pub name: Option<String>,
    pub tag: Option<String>,
    pub spec: Option<String>,
}

/// One image-list entry that we can name, and what went wrong with its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} = `{value}`: {problem}", self.setting())]
pub struct AnnotationError {
    /// The annotation key, or for an ImageUpdater object `ImageUpdater ns/name <field path>`.
    pub annotation: String,
    pub value: String,
    pub problem: String,
}

impl ImageConfig {
    /// The platforms a candidate's manifest is checked against: Image Updater reads
    /// manifests, and so filters by platform, only for the strategies that fetch metadata
    /// (`newest-build`, `digest`); under `semver` and `alphabetical` the setting has no
    /// effect there, and none here.
    pub fn platform_filter(&self) -> &[Platform] {
        match self.policy.strategy {
            Strategy::NewestBuild | Strategy::Digest => &self.platforms,
            Strategy::Semver | Strategy::Alphabetical => &[],
        }
    }
}

impl AnnotationError {
    /// How the message names the setting: an annotation, or an ImageUpdater object's field.
    fn setting(&self) -> String {
        if self.annotation.starts_with("ImageUpdater ") {
            self.annotation.clone()
        } else {
            format!("annotation `{}`", self.annotation)
        }
    }
}

/// Keys an ImageUpdater object's plugin targets are read under. They exist only in the
/// configuration this crate synthesises from such an object; Image Updater has no plugin
/// annotations, so an Application's own annotations never reach them.
pub const PLUGIN_KEYS: [&str; 3] = ["plugin.env-name", "plugin.env-tag", "plugin.env-spec"];

/// How the Application wants its updates written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum WriteBack {
    /// Patch the Application itself: the only method we implement.
    Argocd,
    /// Commit to the Application's Git repository (see [`crate::git::gitwrite`]).
    Git {
        /// `git`, `git:repocreds` or `git:secret:<namespace>/<name>`: where credentials come from.
        credentials: String,
        /// `write-back-target`: the default `.argocd-source-<app>.yaml`, `helmvalues[:<path>]`
        /// or `kustomization[:<path>]`.
        target: Option<String>,
        /// `git-branch`: `<branch>`, `<base>:<target>` or `:<target>`.
        branch: Option<String>,
        /// `git-repository`: overrides the source's `repoURL`.
        repository: Option<String>,
        /// Open a pull request (GitHub) instead of committing to the branch, with these
        /// labels: `argocd-ecr-updater.io/git-pull-request: github` (and `...-labels`), or an
        /// ImageUpdater object's `gitConfig.pullRequest`.
        pull_request: Option<Vec<String>>,
    },
}

/// One image-list entry after parsing: a config, or the error that spoils it.
#[derive(Debug, Clone)]
pub struct ImageEntry {
    pub alias: Option<String>,
    /// The raw image text, so a broken entry can still be matched and reported.
    pub image: ImageRef,
    pub config: Result<ImageConfig, AnnotationError>,
}

/// All the Image Updater configuration of one Application.
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub images: Vec<ImageEntry>,
    pub write_back: Result<WriteBack, AnnotationError>,
}

/// The annotation our audit record of the last update is kept in: ours, but no configuration.
pub const AUDIT_ANNOTATION: &str = "argocd-ecr-updater.io/last-update";

/// The annotation the failed rollouts hold-on-failure remembers are kept in
/// (`application::failures`): ours, but no configuration.
pub const FAILED_ROLLOUTS_ANNOTATION: &str = "argocd-ecr-updater.io/failed-rollouts";

/// The annotation the manual rollbacks we respect are remembered in
/// (`application::rollbacks`): ours, but no configuration.
pub const ROLLBACKS_ANNOTATION: &str = "argocd-ecr-updater.io/rollbacks";

/// The annotation the images auto-rollback took back are remembered in
/// (`application::rolled_back`): ours, but no configuration; a person deletes an entry to
/// release the image.
pub const ROLLED_BACK_ANNOTATION: &str = "argocd-ecr-updater.io/rolled-back";

/// Whether `annotations` turn auto-rollback on for some image (`<alias>.auto-rollback` or
/// `auto-rollback`, true): what tells a rollout check that a failure is worth deciding again
/// at once rather than at the next sweep.
pub fn asks_auto_rollback(annotations: &BTreeMap<String, String>) -> bool {
    annotations.iter().any(|(key, value)| {
        key.strip_prefix(OWN_PREFIX).is_some_and(|setting| {
            setting == "auto-rollback" || setting.ends_with(".auto-rollback")
        }) && go_parse_bool(value) == Some(true)
    })
}

/// Whether an annotation is one an Application's configuration is read from: Image
/// Updater's, and ours (gates, keys, pull requests) but the records we keep.
pub fn is_configuring(key: &str) -> bool {
    key.starts_with(PREFIX)
        || (key.starts_with(OWN_PREFIX)
            && key != AUDIT_ANNOTATION
            && key != FAILED_ROLLOUTS_ANNOTATION
            && key != ROLLBACKS_ANNOTATION
            && key != ROLLED_BACK_ANNOTATION)
}

/// The annotations of an Application (its string annotations, as the typed Application
/// reads them) its configuration is read from ([`is_configuring`]).
pub fn configuring(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter(|(key, _)| is_configuring(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Does this Application have an `image-list` naming `registry/repository`? Used on
/// metadata-only listings to decide what to GET, so it must not parse anything else.
pub fn image_list_names(
    annotations: &BTreeMap<String, String>,
    registry: &str,
    repository: &str,
) -> bool {
    annotations
        .get(IMAGE_LIST)
        .is_some_and(|list| list_names(list, registry, repository))
}

/// Does this `image-list` value name `registry/repository`?
pub fn list_names(list: &str, registry: &str, repository: &str) -> bool {
    split_image_list(list).any(|entry| {
        let (_, image, _) = split_entry(entry);
        ImageRef::names(image, registry, repository)
    })
}

fn split_image_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// `[alias=]image[:constraint]`. The constraint is whatever follows the first `:` after the
/// last `/`, kept verbatim: `~1.2`, `^0.1`, `1.x` are constraints, not tags.
pub fn split_entry(entry: &str) -> (Option<&str>, &str, Option<&str>) {
    let (alias, rest) = match entry.split_once('=') {
        Some((a, r)) => (Some(a.trim()), r.trim()),
        None => (None, entry),
    };
    let name_start = rest.rfind('/').map_or(0, |i| i + 1);
    match rest[name_start..].find(':') {
        Some(i) => {
            let at = name_start + i;
            (alias, &rest[..at], Some(&rest[at + 1..]))
        }
        None => (alias, rest, None),
    }
}

impl AppConfig {
    /// Reads the annotations of one Application. Returns `None` when it has no `image-list`
    /// (it is not managed by Image Updater at all).
    pub fn parse(annotations: &BTreeMap<String, String>) -> Option<Self> {
        Self::read(Reader {
            annotations,
            synthesized: false,
        })
    }

    /// Reads configuration synthesised from an ImageUpdater object in the annotations'
    /// shape (so both go through the same rules), with its plugin targets, and names each
    /// error by the object field it came from (`origins`: annotation key -> field).
    pub fn parse_synthesized(
        annotations: &BTreeMap<String, String>,
        origins: &BTreeMap<String, String>,
    ) -> Option<Self> {
        let mut config = Self::read(Reader {
            annotations,
            synthesized: true,
        })?;
        let rename = |error: &mut AnnotationError| {
            if let Some(field) = origins.get(&error.annotation) {
                error.annotation = field.clone();
            }
        };
        for image in &mut config.images {
            if let Err(error) = &mut image.config {
                rename(error);
            }
        }
        if let Err(error) = &mut config.write_back {
            rename(error);
        }
        Some(config)
    }

    fn read(reader: Reader<'_>) -> Option<Self> {
        let list = reader.get("image-list")?;
        let write_back = reader.write_back();
        let images = split_image_list(list)
            .map(|entry| {
                let (alias, image, constraint) = split_entry(entry);
                ImageEntry {
                    alias: alias.map(str::to_string),
                    image: ImageRef::parse(image),
                    config: reader.image(alias, image, constraint),
                }
            })
            .collect();
        Some(Self { images, write_back })
    }
}

/// The write-back method an Application's own annotations name (`write-back-method`,
/// `git-branch`, `git-repository`, the pull-request settings), whether or not it has an
/// `image-list`: its charts are written back the same way.
pub fn write_back_of(annotations: &BTreeMap<String, String>) -> Result<WriteBack, AnnotationError> {
    Reader {
        annotations,
        synthesized: false,
    }
    .write_back()
}

struct Reader<'a> {
    annotations: &'a BTreeMap<String, String>,
    /// Read from an ImageUpdater object: plugin targets exist.
    synthesized: bool,
}

impl Reader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(&format!("{PREFIX}{key}"))
            .map(String::as_str)
    }

    /// The per-image key, then (where Image Updater has one) the app-wide key. Returns the
    /// full annotation name too, so errors can say exactly which one was wrong. As Image
    /// Updater reads annotations, a key whose value is blank is not set (the next one
    /// applies), except `force-update` (blank is an error there) and `ignore-tags` (blank
    /// clears). An ImageUpdater object's fields are taken as they are.
    fn lookup(&self, alias: Option<&str>, key: &str, app_wide: bool) -> Option<(String, &str)> {
        let blank_is_unset = !self.synthesized && !matches!(key, "force-update" | "ignore-tags");
        let set = |name: String| {
            self.get(&name)
                .filter(|v| !(blank_is_unset && v.trim().is_empty()))
                .map(|v| (format!("{PREFIX}{name}"), v))
        };
        let per_image = alias.and_then(|a| set(format!("{}.{key}", a.replace('/', "_"))));
        per_image.or_else(|| app_wide.then(|| set(key.to_string())).flatten())
    }

    fn image(
        &self,
        alias: Option<&str>,
        image: &str,
        constraint: Option<&str>,
    ) -> Result<ImageConfig, AnnotationError> {
        check_image_text(alias, image)?;
        let mut notes = Vec::new();
        let (strategy, policy) = self.tag_policy(alias, constraint)?;
        let pin = self.pin_digest(alias)?;
        if pin && strategy == Strategy::Digest {
            notes.push(
                "`pin-digest` has no effect under digest, which always writes the digest".into(),
            );
        }
        let policy = policy.pinning_digest(pin);
        let force_update = match self.lookup(alias, "force-update", true) {
            Some((key, value)) => parse_bool(&key, value)?,
            None => false,
        };
        let platforms = match self.lookup(alias, "platforms", false) {
            Some((key, value)) => {
                let platforms = parse_platforms(&key, value)?;
                if matches!(strategy, Strategy::Semver | Strategy::Alphabetical) {
                    notes.push(format!(
                        "`{key}` has no effect under {strategy}: as in Image Updater, only newest-build and digest check platforms"
                    ));
                }
                platforms
            }
            None => Vec::new(),
        };
        if let Some((key, _)) = self.lookup(alias, "pull-secret", true) {
            notes.push(format!(
                "`{key}` is not needed: the function reads ECR with its IAM role"
            ));
        }
        let (helm, kustomize_image_name, plugin) = self.targets(alias)?;
        let scan_gate = self.scan_gate(alias)?;
        let cosign_key = self.cosign_key(alias)?;
        let min_age = self.min_age(alias)?;
        let hold_on_failure = self.own_flag(alias, "hold-on-failure")?;
        let auto_rollback = self.own_flag(alias, "auto-rollback")?;
        let signing_profile = self.signing_profile(alias)?;
        Ok(ImageConfig {
            alias: alias.map(str::to_string),
            image: ImageRef::parse(image),
            constraint: constraint.map(str::to_string),
            policy,
            force_update,
            platforms,
            scan_gate,
            cosign_key,
            min_age,
            hold_on_failure,
            auto_rollback,
            signing_profile,
            helm,
            kustomize_image_name,
            plugin,
            notes,
            own: self
                .annotations
                .iter()
                .filter(|(key, _)| key.starts_with(OWN_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// The strategy, and the tag policy it ranks with: `update-strategy`, `allow-tags` (or the
    /// old `tag-match`), `ignore-tags` and the image-list constraint.
    fn tag_policy(
        &self,
        alias: Option<&str>,
        constraint: Option<&str>,
    ) -> Result<(Strategy, TagPolicy), AnnotationError> {
        let strategy = match self
            .lookup(alias, "update-strategy", true)
        {
            Some((key, value)) => value.parse::<Strategy>().map_err(|UnknownStrategy(v)| AnnotationError {
                annotation: key,
                value: v,
                problem: "unknown update strategy: use semver, newest-build, alphabetical or digest (old names: latest, name). Image Updater would silently fall back to semver; we refuse to guess".into(),
            })?,
            None => Strategy::Semver,
        };

        let allow = match self
            .lookup(alias, "allow-tags", true)
            .or_else(|| self.lookup(alias, "tag-match", true))
        {
            Some((key, value)) => {
                AllowTags::parse(value).map_err(|e| policy_error(key, value, e))?
            }
            None => AllowTags::Any,
        };
        let ignore = match self.lookup(alias, "ignore-tags", true) {
            // An object's list arrives as JSON, so an item holding a comma stays one item.
            Some((key, value)) if self.synthesized => {
                let items: Vec<String> = serde_json::from_str(value).unwrap_or_default();
                IgnoreTags::of_patterns(items.iter().map(String::as_str))
                    .map_err(|e| policy_error(key, value, e))?
            }
            Some((key, value)) => {
                IgnoreTags::parse(value).map_err(|e| policy_error(key, value, e))?
            }
            None => IgnoreTags::default(),
        };
        let policy = TagPolicy::new(strategy, constraint, allow, ignore)
            .map_err(|e| policy_error(IMAGE_LIST.to_string(), constraint.unwrap_or_default(), e))?;
        Ok((strategy, policy))
    }

    /// Where the image is written: Helm parameters, a Kustomize image, or (from an
    /// ImageUpdater object) a plugin's environment.
    fn targets(
        &self,
        alias: Option<&str>,
    ) -> Result<(HelmTarget, Option<String>, Option<PluginTarget>), AnnotationError> {
        let helm = match self.lookup(alias, "helm.image-spec", false) {
            Some((key, value)) => HelmTarget::Spec {
                param: non_empty(&key, value)?,
            },
            None => HelmTarget::NameAndTag {
                name: self
                    .lookup(alias, "helm.image-name", false)
                    .map(|(key, v)| non_empty(&key, v))
                    .transpose()?
                    .unwrap_or_else(|| "image.name".into()),
                tag: self
                    .lookup(alias, "helm.image-tag", false)
                    .map(|(key, v)| non_empty(&key, v))
                    .transpose()?
                    .unwrap_or_else(|| "image.tag".into()),
            },
        };
        let kustomize_image_name = self
            .lookup(alias, "kustomize.image-name", false)
            .map(|(key, v)| non_empty(&key, v))
            .transpose()?;
        let plugin = if self.synthesized {
            let [name, tag, spec] = PLUGIN_KEYS.map(|key| {
                self.lookup(alias, key, false)
                    .map(|(key, v)| non_empty(&key, v))
                    .transpose()
            });
            let (name, tag, spec) = (name?, tag?, spec?);
            (name.is_some() || tag.is_some() || spec.is_some()).then_some(PluginTarget {
                name,
                tag,
                spec,
            })
        } else {
            None
        };
        Ok((helm, kustomize_image_name, plugin))
    }

    /// Our own annotation, per alias then for every image. On an ImageUpdater object it is
    /// read from the object's `metadata.annotations` (its spec is pruned to Image Updater's
    /// schema, so our settings cannot live there).
    fn scan_gate(
        &self,
        alias: Option<&str>,
    ) -> Result<Option<crate::policy::scan_limits::ScanGate>, AnnotationError> {
        self.own_setting(alias, "scan-gate", |value| {
            crate::policy::scan_limits::ScanGate::parse(value).map_err(|Refused(problem)| problem)
        })
    }

    /// One of our own settings, per alias then for every image, read with `parse`; an
    /// unreadable value names the annotation it is in.
    fn own_setting<T>(
        &self,
        alias: Option<&str>,
        name: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, AnnotationError> {
        let keys = alias
            .map(|a| format!("{OWN_PREFIX}{a}.{name}"))
            .into_iter()
            .chain(std::iter::once(format!("{OWN_PREFIX}{name}")));
        for key in keys {
            if let Some(value) = self.annotations.get(&key) {
                return parse(value).map(Some).map_err(|problem| AnnotationError {
                    annotation: key,
                    value: value.clone(),
                    problem,
                });
            }
        }
        Ok(None)
    }

    /// Our own annotation, per alias then for every image (on an ImageUpdater object, in its
    /// `metadata.annotations`): the AWS Signer profile ECR managed signing must have signed
    /// a digest with.
    fn signing_profile(
        &self,
        alias: Option<&str>,
    ) -> Result<Option<crate::policy::signing::SigningProfile>, AnnotationError> {
        self.own_setting(alias, "signing-profile", |value| {
            crate::policy::signing::SigningProfile::parse(value).map_err(|Refused(problem)| problem)
        })
    }

    /// Our own annotation, per alias then for every image (on an ImageUpdater object, in its
    /// `metadata.annotations`): how long an image soaks in ECR before it is written.
    fn min_age(&self, alias: Option<&str>) -> Result<Option<std::time::Duration>, AnnotationError> {
        self.own_setting(alias, "min-age", parse_duration)
    }

    /// Our own annotation, per alias then for every image (on an ImageUpdater object, in its
    /// `metadata.annotations`): write the chosen tag with the digest it points to.
    fn pin_digest(&self, alias: Option<&str>) -> Result<bool, AnnotationError> {
        self.own_flag(alias, "pin-digest")
    }

    /// One of our boolean annotations, per alias then for every image.
    fn own_flag(&self, alias: Option<&str>, name: &str) -> Result<bool, AnnotationError> {
        let flag = self.own_setting(alias, name, |value| {
            go_parse_bool(value).ok_or_else(|| BOOL_PROBLEM.to_string())
        })?;
        Ok(flag.unwrap_or(false))
    }

    /// Our own annotation; from an ImageUpdater object, its `imagesVerification` arrives
    /// under Image Updater's prefix.
    fn cosign_key(
        &self,
        alias: Option<&str>,
    ) -> Result<Option<crate::appconfig::cosign_key::KeyRef>, AnnotationError> {
        let mut keys: Vec<String> = alias
            .map(|a| format!("{OWN_PREFIX}{a}.cosign-key"))
            .into_iter()
            .chain(std::iter::once(format!("{OWN_PREFIX}cosign-key")))
            .collect();
        if self.synthesized
            && let Some(a) = alias
        {
            keys.insert(0, format!("{PREFIX}{a}.cosign-key"));
        }
        for key in keys {
            if let Some(value) = self.annotations.get(&key) {
                return crate::appconfig::cosign_key::KeyRef::parse(value)
                    .map(Some)
                    .map_err(|Refused(problem)| AnnotationError {
                        annotation: key,
                        value: if value.contains("BEGIN") {
                            "(a PEM key)".into()
                        } else {
                            value.clone()
                        },
                        problem,
                    });
            }
        }
        Ok(None)
    }

    fn write_back(&self) -> Result<WriteBack, AnnotationError> {
        let Some(method) = self.get("write-back-method").map(str::trim) else {
            return Ok(WriteBack::Argocd);
        };
        let error = |problem: &str| AnnotationError {
            annotation: format!("{PREFIX}write-back-method"),
            value: method.to_string(),
            problem: problem.to_string(),
        };
        match method {
            "argocd" => Ok(WriteBack::Argocd),
            m if m.starts_with("git") && self.pull_request_unsupported() => Err(error(
                "the pull request names no provider Image Updater knows (`pullRequest` needs exactly one of `github` or `gitlab`; the annotation `argocd-ecr-updater.io/git-pull-request` takes `true`, `github` or `gitlab`), and committing to the branch instead would bypass the review you asked for",
            )),
            "git" | "git:repocreds" => self.git(method),
            m if m.starts_with("git:secret:") => {
                match m.trim_start_matches("git:secret:").split_once('/') {
                    Some((ns, name)) if !ns.is_empty() && !name.is_empty() => self.git(m),
                    _ => Err(error("expected `git:secret:<namespace>/<name>`")),
                }
            }
            _ => Err(error(
                "expected `argocd`, `git`, `git:repocreds` or `git:secret:<namespace>/<name>`",
            )),
        }
    }

    fn git(&self, method: &str) -> Result<WriteBack, AnnotationError> {
        let branch = self.get("git-branch").map(str::to_string);
        // Image Updater's `parseGitConfig`: at most one `:` (`<base>:<target>`). Refused here,
        // with the write-back configuration, so that an ImageUpdater ref carrying it is passed
        // over for the next matching one, as Image Updater passes it over.
        if let Some(branch) = branch
            .as_deref()
            .filter(|b| b.trim().split(':').count() > 2)
        {
            return Err(AnnotationError {
                annotation: format!("{PREFIX}git-branch"),
                value: branch.to_string(),
                problem: "invalid format for git-branch: expected `<branch>` or `<base>:<target>`, with one `:` at most".into(),
            });
        }
        let pull_request = self.pull_request();
        // Image Updater: "pullRequest mode does not support colon branch format".
        if pull_request.is_some()
            && let Some(branch) = branch.as_deref().filter(|b| b.contains(':'))
        {
            return Err(AnnotationError {
                annotation: format!("{PREFIX}git-branch"),
                value: branch.to_string(),
                problem: "a pull request names only its base branch (e.g. `main`): the change branch is made for it, so `<base>:<target>` is refused, as Image Updater refuses it".into(),
            });
        }
        Ok(WriteBack::Git {
            credentials: method.to_string(),
            target: self.get("write-back-target").map(str::to_string),
            branch,
            repository: self.get("git-repository").map(str::to_string),
            pull_request,
        })
    }

    fn pull_request_unsupported(&self) -> bool {
        let own = self
            .annotations
            .get(&format!("{OWN_PREFIX}git-pull-request"))
            .map(String::as_str);
        let synthesized = if self.synthesized {
            self.get("git-pull-request")
        } else {
            None
        };
        own.or(synthesized)
            .is_some_and(|m| !matches!(m.trim(), "github" | "gitlab" | "true" | "false" | ""))
    }

    /// Our own annotation for annotation users (Image Updater has none); an ImageUpdater
    /// object's `pullRequest` arrives under the synthesised key.
    fn pull_request(&self) -> Option<Vec<String>> {
        let own = |key: &str| {
            self.annotations
                .get(&format!("{OWN_PREFIX}{key}"))
                .map(String::as_str)
        };
        let synthesized = |key: &str| {
            if self.synthesized {
                self.get(key)
            } else {
                None
            }
        };
        let mode = own("git-pull-request").or_else(|| synthesized("git-pull-request"))?;
        // The repository's host decides where it is opened: a GitHub pull request or a
        // GitLab merge request.
        if !matches!(mode.trim(), "github" | "gitlab" | "true") {
            return None;
        }
        let labels = own("git-pull-request-labels")
            .or_else(|| synthesized("git-pull-request-labels"))
            .unwrap_or_default();
        Some(
            labels
                .split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }
}

/// An image-list entry's text: `[alias=]registry/repository`, no spaces, control
/// characters or digest.
fn check_image_text(alias: Option<&str>, image: &str) -> Result<(), AnnotationError> {
    let list_key = IMAGE_LIST.to_string();
    if image.is_empty() || alias == Some("") || image.split('/').any(str::is_empty) {
        return Err(AnnotationError {
            annotation: list_key,
            value: image.to_string(),
            problem: "expected `[alias=]registry/repository[:constraint]`".into(),
        });
    }
    if [image, alias.unwrap_or_default()]
        .iter()
        .any(|part| part.chars().any(|c| breaks_yaml(c) || c.is_whitespace()))
    {
        return Err(AnnotationError {
            annotation: list_key,
            value: image.escape_debug().to_string(),
            problem: "an alias or image with a control character or a space: image references have neither".into(),
        });
    }
    if image.contains('@') {
        return Err(AnnotationError {
            annotation: list_key,
            value: image.to_string(),
            problem:
                "image-list names a repository; put no digest in it (use update-strategy digest)"
                    .into(),
        });
    }
    Ok(())
}

fn policy_error(annotation: String, value: &str, error: PolicyError) -> AnnotationError {
    AnnotationError {
        annotation,
        value: value.to_string(),
        problem: error.to_string(),
    }
}

/// Go's `strconv.ParseBool` on the trimmed value, as Image Updater reads `force-update`.
fn parse_bool(key: &str, value: &str) -> Result<bool, AnnotationError> {
    go_parse_bool(value).ok_or_else(|| AnnotationError {
        annotation: key.to_string(),
        value: value.to_string(),
        problem: BOOL_PROBLEM.into(),
    })
}

/// What a value that is not a boolean is told.
const BOOL_PROBLEM: &str = "expected a boolean as Image Updater reads it: true or false (also 1/0, t/f, T/F, TRUE/FALSE, True/False)";

/// `1h30m`, `45s`: a duration as [`parse_duration`] reads it.
pub fn format_duration(duration: std::time::Duration) -> String {
    let total = duration.as_secs();
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    let mut text = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
        }
    }
    if text.is_empty() { "0s".into() } else { text }
}

/// A duration as Go's `time.ParseDuration` writes the common ones: whole numbers with `h`,
/// `m` or `s`, in that order, one or more (`30m`, `1h30m`, `90s`); at most 7 days.
pub fn parse_duration(value: &str) -> Result<std::time::Duration, String> {
    let text = value.trim();
    let bad = || {
        format!(
            "expected a duration such as `30m`, `2h` or `1h30m` (whole hours, minutes, seconds), not `{}`",
            crate::redact::scrub(text)
        )
    };
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut last_unit = 0;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let (rank, seconds) = match c {
            'h' => (1, 3600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => return Err(bad()),
        };
        if digits.is_empty() || rank <= last_unit || digits.len() > 9 {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = total.saturating_add(n.saturating_mul(seconds));
        digits.clear();
        last_unit = rank;
    }
    if !digits.is_empty() || last_unit == 0 {
        return Err(bad());
    }
    if total > 7 * 24 * 3600 {
        return Err(format!(
            "{} is over 7 days: a soak that long is a freeze (`argocd-ecr-updater.io/freeze`)",
            crate::redact::scrub(text)
        ));
    }
    Ok(std::time::Duration::from_secs(total))
}

/// Go's `strconv.ParseBool` of the trimmed text; `None` where Go returns an error.
pub fn go_parse_bool(value: &str) -> Option<bool> {
    match value.trim() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A character that some YAML reader takes as a line break, or a control or byte-order
/// mark: C0 and C1 controls (U+0085, NEL, among them), U+2028 and U+2029, which YAML 1.1
/// readers (libyaml, go-yaml: what Helm and kustomize use) break lines at while a YAML 1.2
/// reader does not, and U+FEFF. No key or value the function writes into a file may hold
/// one: the file would read as one thing to the editor and another to Helm.
pub fn breaks_yaml(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{FEFF}' | '\u{FFFE}' | '\u{FFFF}'
        )
}

fn non_empty(key: &str, value: &str) -> Result<String, AnnotationError> {
    let value = value.trim();
    if value.is_empty() || value.chars().any(breaks_yaml) {
        return Err(AnnotationError {
            annotation: key.to_string(),
            value: value.escape_debug().to_string(),
            problem: "expected a Helm parameter or image name without control characters or line breaks (U+0085, U+2028, U+2029 break lines for Helm's YAML reader)".into(),
        });
    }
    Ok(value.to_string())
}

fn parse_platforms(key: &str, value: &str) -> Result<Vec<Platform>, AnnotationError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            let valid = |s: &&str| {
                !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            };
            match parts.as_slice() {
                [os, arch] if valid(os) && valid(arch) => Ok(Platform {
                    os: os.to_string(),
                    arch: arch.to_string(),
                    variant: None,
                }),
                [os, arch, variant] if valid(os) && valid(arch) && valid(variant) => Ok(Platform {
                    os: os.to_string(),
                    arch: arch.to_string(),
                    variant: Some(variant.to_string()),
                }),
                _ => Err(AnnotationError {
                    annotation: key.to_string(),
                    value: value.to_string(),
                    problem: format!("`{p}` is not `os/arch[/variant]`, e.g. linux/arm64/v8"),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_rollback_is_asked_for_by_a_true_setting_for_some_image_or_every_image() {
        let cases = [
            (
                "per alias",
                "argocd-ecr-updater.io/app.auto-rollback",
                "true",
                true,
            ),
            (
                "for every image",
                "argocd-ecr-updater.io/auto-rollback",
                "1",
                true,
            ),
            (
                "off",
                "argocd-ecr-updater.io/app.auto-rollback",
                "false",
                false,
            ),
            (
                "unreadable",
                "argocd-ecr-updater.io/app.auto-rollback",
                "yes please",
                false,
            ),
            (
                "Image Updater's prefix is not ours",
                "argocd-image-updater.argoproj.io/app.auto-rollback",
                "true",
                false,
            ),
            (
                "another setting ending alike",
                "argocd-ecr-updater.io/app.no-auto-rollback",
                "true",
                false,
            ),
        ];
        for (case, key, value, asked) in cases {
            let annotations = BTreeMap::from([(key.to_string(), value.to_string())]);
            assert_eq!(asks_auto_rollback(&annotations), asked, "{case}");
        }
    }
    use crate::policy::{Decision, TagInfo};

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
            .collect()
    }

    fn only_image(pairs: &[(&str, &str)]) -> Result<ImageConfig, AnnotationError> {
        let app = AppConfig::parse(&annotations(pairs)).unwrap();
        assert_eq!(app.images.len(), 1);
        app.images.into_iter().next().unwrap().config
    }

    const SEED_REGISTRY: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com";

    #[test]
    fn soak_durations_read_as_go_writes_the_common_ones() {
        let ok = [
            ("30m", 1800),
            ("2h", 7200),
            ("1h30m", 5400),
            ("90s", 90),
            (" 45s ", 45),
            ("1h0m5s", 3605),
            ("168h", 604_800),
        ];
        for (text, seconds) in ok {
            assert_eq!(
                parse_duration(text),
                Ok(std::time::Duration::from_secs(seconds)),
                "{text}"
            );
        }
        for bad in [
            "",
            "30",
            "m",
            "1.5h",
            "30m1h",
            "1h1h",
            "1d",
            "-5m",
            "169h",
            "9999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("169h").unwrap_err().contains("is a freeze"));
    }

    #[test]
    fn the_seeds_exact_annotations_parse_into_a_newest_build_helm_image() {
        let seed = annotations(&[
            (
                "image-list",
                "app=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr",
            ),
            ("app.update-strategy", "latest"),
            ("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$"),
            ("write-back-method", "argocd"),
            ("app.helm.image-name", "image.repository"),
            ("app.helm.image-tag", "image.tag"),
        ]);
        let app = AppConfig::parse(&seed).unwrap();
        assert_eq!(app.write_back, Ok(WriteBack::Argocd));
        let image = app.images[0].config.clone().unwrap();
        assert_eq!(image.alias.as_deref(), Some("app"));
        assert!(image.image.is(SEED_REGISTRY, "barun-dev-ecr"));
        assert_eq!(image.policy.strategy, Strategy::NewestBuild);
        assert_eq!(
            image.helm,
            HelmTarget::NameAndTag {
                name: "image.repository".into(),
                tag: "image.tag".into()
            }
        );
        assert_eq!(
            image.policy.decide(None, &TagInfo::named("latest")),
            Decision::Keep(crate::policy::KeepReason::NotAllowed("latest".into()))
        );
        assert!(image_list_names(&seed, SEED_REGISTRY, "barun-dev-ecr"));
        assert!(!image_list_names(&seed, SEED_REGISTRY, "barun-dev-ecr-2"));
        assert!(!image_list_names(
            &seed,
            "768157413559.dkr.ecr.us-east-1.amazonaws.com",
            "barun-dev-ecr"
        ));
    }

    #[test]
    fn naming_an_image_without_parsing_it_agrees_with_parsing_it() {
        let registry = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com";
        let texts = [
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/svc",
            "768157413559.DKR.ecr.ap-northeast-2.amazonaws.com/svc",
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/team/svc",
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/Svc",
            "768157413559.dkr.ecr.us-east-1.amazonaws.com/svc",
            "svc",
            "library/svc",
            "localhost/svc",
            "localhost:5000/svc",
            "",
            "/svc",
        ];
        for text in texts {
            for (registry, repository) in [
                (registry, "svc"),
                (registry, "team/svc"),
                ("768157413559.DKR.ecr.ap-northeast-2.amazonaws.com", "svc"),
                ("localhost", "svc"),
                ("localhost:5000", "svc"),
            ] {
                assert_eq!(
                    ImageRef::names(text, registry, repository),
                    ImageRef::parse(text).is(registry, repository),
                    "{text} against {registry}/{repository}"
                );
            }
        }
        assert_eq!(IMAGE_LIST, format!("{PREFIX}image-list"));
    }

    #[test]
    fn image_list_entries_keep_aliases_and_constraints_verbatim() {
        let table: &[(&str, Option<&str>, &str, &str, Option<&str>)] = &[
            (
                "api=1.dkr.ecr.us-east-1.amazonaws.com/api:~1.2",
                Some("api"),
                "1.dkr.ecr.us-east-1.amazonaws.com",
                "api",
                Some("~1.2"),
            ),
            (
                "r.example.com/team/web:^0.1",
                None,
                "r.example.com",
                "team/web",
                Some("^0.1"),
            ),
            (
                "w=localhost:5000/web:1.x",
                Some("w"),
                "localhost:5000",
                "web",
                Some("1.x"),
            ),
            (
                "x = r.example.com/a/b",
                Some("x"),
                "r.example.com",
                "a/b",
                None,
            ),
        ];
        for (entry, alias, registry, repository, constraint) in table {
            let (a, image, c) = split_entry(entry);
            let image = ImageRef::parse(image);
            assert_eq!(a, *alias, "{entry}");
            assert!(image.is(registry, repository), "{entry}: {image:?}");
            assert_eq!(c, *constraint, "{entry}");
        }
        assert_eq!(ImageRef::parse("nginx").registry, None);
        assert_eq!(ImageRef::parse("library/nginx").registry, None);
    }

    #[test]
    fn per_image_keys_win_over_app_wide_ones_and_slashes_in_aliases_become_underscores() {
        let image = only_image(&[
            ("image-list", "team/api=r.example.com/api"),
            ("update-strategy", "alphabetical"),
            ("team_api.update-strategy", "digest"),
            ("allow-tags", "regexp:^v"),
        ])
        .unwrap_err();
        // digest without a tracked tag: proves the per-image key was the one read.
        assert_eq!(image.annotation, format!("{PREFIX}image-list"));
        let image = only_image(&[
            ("image-list", "team/api=r.example.com/api"),
            ("update-strategy", "alphabetical"),
            ("force-update", "true"),
        ])
        .unwrap();
        assert_eq!(image.policy.strategy, Strategy::Alphabetical);
        assert!(image.force_update);
    }

    #[test]
    fn an_image_without_alias_gets_the_app_wide_settings_and_default_helm_names() {
        let image = only_image(&[
            ("image-list", "r.example.com/api:^1"),
            ("update-strategy", "semver"),
            ("helm.image-name", "ignored.because.per.image.only"),
        ])
        .unwrap();
        assert_eq!(
            image.helm,
            HelmTarget::NameAndTag {
                name: "image.name".into(),
                tag: "image.tag".into()
            }
        );
        assert_eq!(image.constraint.as_deref(), Some("^1"));
    }

    #[test]
    fn old_annotation_names_are_accepted() {
        let image = only_image(&[
            ("image-list", "a=r.example.com/api"),
            ("a.update-strategy", "name"),
            ("a.tag-match", "regexp:^release-"),
        ])
        .unwrap();
        assert_eq!(image.policy.strategy, Strategy::Alphabetical);
        assert!(matches!(image.policy.allow, AllowTags::Regexp(_)));
    }

    #[test]
    fn helm_spec_kustomize_platforms_and_pull_secret_are_read() {
        let image = only_image(&[
            ("image-list", "a=r.example.com/api"),
            ("a.helm.image-spec", "foo[1].image"),
            ("a.kustomize.image-name", "api"),
            ("a.platforms", "linux/amd64, linux/arm64/v8"),
            ("a.pull-secret", "secret:argocd/ecr"),
        ])
        .unwrap();
        assert_eq!(
            image.helm,
            HelmTarget::Spec {
                param: "foo[1].image".into()
            }
        );
        assert_eq!(image.kustomize_image_name.as_deref(), Some("api"));
        assert_eq!(image.platforms.len(), 2);
        assert_eq!(image.platforms[1].variant.as_deref(), Some("v8"));
        // Under semver the platforms are read but, as in Image Updater, filter nothing.
        assert!(image.platform_filter().is_empty());
        assert!(
            image.notes[0].contains("has no effect under semver"),
            "{:?}",
            image.notes
        );
        assert!(image.notes[1].contains("IAM role"), "{:?}", image.notes);
    }

    #[test]
    fn git_write_back_settings_are_read_from_the_annotations() {
        let table: &[(&str, &str)] = &[
            ("git", "git"),
            ("git:repocreds", "git:repocreds"),
            ("git:secret:argocd/git-creds", "git:secret:argocd/git-creds"),
        ];
        for (method, credentials) in table {
            let app = AppConfig::parse(&annotations(&[
                ("image-list", "r.example.com/api"),
                ("write-back-method", method),
                ("write-back-target", "kustomization:../base"),
                ("git-branch", "main:image-updates"),
                ("git-repository", "https://github.com/acme/deploy.git"),
            ]))
            .unwrap();
            assert_eq!(
                app.write_back,
                Ok(WriteBack::Git {
                    credentials: credentials.to_string(),
                    target: Some("kustomization:../base".into()),
                    branch: Some("main:image-updates".into()),
                    repository: Some("https://github.com/acme/deploy.git".into()),
                    pull_request: None,
                })
            );
        }
    }

    #[test]
    fn every_malformed_value_names_the_annotation_the_value_and_what_was_expected() {
        let table: &[(&[(&str, &str)], &str, &str, &str)] = &[
            (
                &[("a.update-strategy", "newest")],
                "a.update-strategy",
                "newest",
                "unknown update strategy",
            ),
            (
                &[("a.allow-tags", "regexp:(")],
                "a.allow-tags",
                "regexp:(",
                "does not compile",
            ),
            (
                &[("allow-tags", "^v1")],
                "allow-tags",
                "^v1",
                "regexp:<pattern>",
            ),
            (
                &[("a.ignore-tags", "[x")],
                "a.ignore-tags",
                "[x",
                "invalid ignore-tags",
            ),
            (
                &[("a.force-update", "yes")],
                "a.force-update",
                "yes",
                "true or false",
            ),
            (
                &[("a.platforms", "linux")],
                "a.platforms",
                "linux",
                "os/arch",
            ),
            (
                &[("a.helm.image-tag", "image.\u{7}tag")],
                "a.helm.image-tag",
                // Shown escaped: a control character is never echoed raw into a message.
                "image.\\u{7}tag",
                "Helm parameter",
            ),
        ];
        for (extra, key, value, expected) in table {
            let mut pairs = vec![("image-list", "a=r.example.com/api")];
            pairs.extend_from_slice(extra);
            let error = only_image(&pairs).unwrap_err();
            assert_eq!(error.annotation, format!("{PREFIX}{key}"));
            assert_eq!(error.value, *value);
            assert!(error.problem.contains(expected), "{key}: {}", error.problem);
        }
        let bad_constraint =
            only_image(&[("image-list", "a=r.example.com/api:latest")]).unwrap_err();
        assert_eq!(bad_constraint.value, "latest");
        assert!(bad_constraint.problem.contains("invalid semver constraint"));
        let digest_in_list =
            only_image(&[("image-list", "r.example.com/api@sha256:00")]).unwrap_err();
        assert!(digest_in_list.problem.contains("no digest"));
        let bad_method = AppConfig::parse(&annotations(&[
            ("image-list", "r.example.com/api"),
            ("write-back-method", "git:secret:nope"),
        ]))
        .unwrap();
        assert!(
            bad_method
                .write_back
                .unwrap_err()
                .problem
                .contains("git:secret:<namespace>/<name>")
        );
    }

    #[test]
    fn one_bad_image_does_not_stop_the_others() {
        let app = AppConfig::parse(&annotations(&[
            (
                "image-list",
                "good=r.example.com/good, bad=r.example.com/bad",
            ),
            ("bad.update-strategy", "fastest"),
        ]))
        .unwrap();
        assert!(app.images[0].config.is_ok());
        assert!(app.images[1].config.is_err());
        assert!(app.images[1].image.is("r.example.com", "bad"));
    }

    #[test]
    fn applications_without_an_image_list_are_not_managed() {
        assert!(AppConfig::parse(&annotations(&[("update-strategy", "semver")])).is_none());
    }

    #[test]
    fn force_update_reads_every_spelling_go_parse_bool_reads_and_nothing_else() {
        let table: &[(&str, Option<bool>)] = &[
            ("true", Some(true)),
            ("True", Some(true)),
            ("TRUE", Some(true)),
            ("t", Some(true)),
            ("T", Some(true)),
            ("1", Some(true)),
            (" true ", Some(true)),
            ("false", Some(false)),
            ("False", Some(false)),
            ("FALSE", Some(false)),
            ("f", Some(false)),
            ("F", Some(false)),
            ("0", Some(false)),
            ("", None),
            ("yes", None),
            ("tRUE", None),
            ("on", None),
        ];
        for (value, expected) in table {
            let read = only_image(&[
                ("image-list", "a=r.example.com/api"),
                ("a.force-update", value),
            ]);
            match (expected, read) {
                (Some(flag), Ok(image)) => assert_eq!(image.force_update, *flag, "{value:?}"),
                (None, Err(error)) => {
                    assert_eq!(error.annotation, format!("{PREFIX}a.force-update"))
                }
                (expected, read) => panic!("{value:?}: expected {expected:?}, got {read:?}"),
            }
        }
    }

    #[test]
    fn a_blank_per_image_value_is_unset_so_the_application_wide_one_applies() {
        let image = only_image(&[
            ("image-list", "a=r.example.com/api"),
            ("update-strategy", "newest-build"),
            ("a.update-strategy", "  "),
            ("allow-tags", "regexp:^v"),
            ("a.allow-tags", ""),
            ("a.helm.image-tag", " "),
        ])
        .unwrap();
        assert_eq!(image.policy.strategy, Strategy::NewestBuild);
        assert!(matches!(&image.policy.allow, AllowTags::Regexp(re) if re.as_str().contains("^v")));
        assert!(matches!(&image.helm, HelmTarget::NameAndTag { tag, .. } if tag == "image.tag"));
    }

    #[test]
    fn hostile_values_are_errors_not_panics() {
        let huge = "a".repeat(300 * 1024);
        let many: Vec<String> = (0..10_000)
            .map(|i| format!("i{i}=r.example.com/repo{i}"))
            .collect();
        let many = many.join(",");
        let bad_entry = "expected `[alias=]registry/repository[:constraint]`";
        let hidden = "an alias or image with a control character or a space";
        let bad_constraint = "is not a version comparator";
        for (list, problem) in [
            ("=", Some(bad_entry)),
            ("==", Some(bad_entry)),
            (":", Some(bad_entry)),
            ("/", Some(bad_entry)),
            ("a=", Some(bad_entry)),
            ("\u{0}=\u{7}", Some(hidden)),
            ("a=r.example.com/x\u{1b}[31m", Some(hidden)),
            ("r.example.com/é:\u{202e}", Some(bad_constraint)),
            (huge.as_str(), None),
        ] {
            let app = AppConfig::parse(&annotations(&[
                ("image-list", list),
                ("helm.image-tag", "\u{1b}[31m"),
            ]))
            .unwrap();
            let [image] = app.images.as_slice() else {
                panic!("{list:?} is one entry, read as {}", app.images.len());
            };
            match (problem, &image.config) {
                (None, Ok(_)) => {}
                (Some(expected), Err(error)) => {
                    assert_eq!(error.annotation, format!("{PREFIX}image-list"));
                    assert!(
                        error.problem.contains(expected),
                        "{list:?}: {}",
                        error.problem
                    );
                }
                (expected, got) => panic!("{list:?}: expected {expected:?}, got {got:?}"),
            }
        }
        let app = AppConfig::parse(&annotations(&[("image-list", &many)])).unwrap();
        assert_eq!(app.images.len(), 10_000);
        let error = only_image(&[("image-list", "a=")]).unwrap_err();
        assert!(error.problem.contains("[alias=]registry/repository"));
    }

    /// Every key or name an annotation hands to a file the function writes, with each
    /// character some YAML reader breaks a line at (or that is a control or byte-order mark):
    /// refused, naming the annotation, before anything is written.
    #[test]
    fn a_key_or_name_with_a_yaml_line_break_or_control_is_refused() {
        let breaks = [
            ("NEL", "\u{85}"),
            ("LINE SEPARATOR", "\u{2028}"),
            ("PARAGRAPH SEPARATOR", "\u{2029}"),
            ("BOM", "\u{FEFF}"),
            ("C1", "\u{9b}"),
            ("DEL", "\u{7f}"),
            ("newline", "\n"),
            ("carriage return", "\r"),
            ("tab", "\t"),
            ("NUL", "\u{0}"),
        ];
        for setting in [
            "a.helm.image-name",
            "a.helm.image-tag",
            "a.helm.image-spec",
            "a.kustomize.image-name",
        ] {
            for (name, character) in breaks {
                let hostile = format!("image{character}securityContext: {{privileged: true}}");
                let error = only_image(&[
                    ("image-list", "a=r.example.com/web"),
                    (setting, hostile.as_str()),
                ])
                .err()
                .unwrap_or_else(|| panic!("{setting} with {name} was accepted"));
                assert_eq!(error.annotation, format!("{PREFIX}{setting}"), "{name}");
                assert!(
                    error.problem.contains("line breaks"),
                    "{setting} with {name}: {}",
                    error.problem
                );
                assert!(!error.value.contains(character), "{name} is echoed raw");
            }
        }
        for (name, character) in breaks {
            let list = format!("a=r.example.com/web{character}evil");
            let error = only_image(&[("image-list", list.as_str())])
                .err()
                .unwrap_or_else(|| panic!("an image-list with {name} was accepted"));
            assert!(
                error.problem.contains("control character"),
                "{name}: {}",
                error.problem
            );
        }
    }
}
