//! Image Updater v1.x `ImageUpdater` objects: which one configures an Application, and the
//! configuration it gives, resolved as Image Updater resolves it (pure, no I/O).
//!
//! Image Updater's rules, from its source (`pkg/argocd/argocd.go`): an object's
//! `applicationRefs` are tried most specific first (an exact name beats any glob, more
//! literal characters beat fewer, label selectors add weight) and the first whose
//! `namePattern` (Go's `filepath.Match`) and `labelSelectors` match the Application wins;
//! settings merge image > ref > spec. Where Image Updater lets two objects matching one
//! Application fight, we skip the Application and name both.
//!
//! The configuration is synthesised in the shape of the annotations and read by the same
//! code ([`AppConfig::parse_synthesized`]), so both ways of configuring decide identically;
//! errors name the object's field.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::appconfig::annotations::{AppConfig, ImageRef, PREFIX};
use crate::failure::Refused;
use crate::policy::go_glob::{self, GoGlob};

pub const GROUP: &str = "argocd-image-updater.argoproj.io";
pub const VERSION: &str = "v1alpha1";
pub const PLURAL: &str = "imageupdaters";

/// An `ImageUpdater` object, as far as we read it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageUpdaterObject {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Spec,
    #[serde(default)]
    pub status: Value,
    /// The refs' patterns compiled and their order by specificity, made once per object by
    /// [`ImageUpdaterObject::prepared`]: a push resolves every listed Application against
    /// every object, so this must not be redone per Application.
    #[serde(skip)]
    matchers: Option<Matchers>,
}

/// `None` inside when a pattern is invalid: the object matches nothing.
#[derive(Debug, Clone, PartialEq)]
struct Matchers(Option<Vec<(usize, GoGlob)>>);

impl ImageUpdaterObject {
    /// The object with its matchers made, ready to resolve many Applications.
    pub fn prepared(mut self) -> Self {
        self.matchers = Some(matchers(&self.spec.application_refs));
        self
    }
}

fn matchers(refs: &[ApplicationRef]) -> Matchers {
    let patterns: Option<Vec<GoGlob>> = refs
        .iter()
        .map(|r| GoGlob::parse(&r.name_pattern).ok())
        .collect();
    Matchers(patterns.map(|patterns| {
        let mut order: Vec<(usize, GoGlob)> = patterns.into_iter().enumerate().collect();
        // Stable, most specific first: equal scores keep the order they are written in.
        order.sort_by_key(|(i, _)| std::cmp::Reverse(specificity(&refs[*i])));
        order
    }))
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub generation: i64,
    /// Only our own (`argocd-ecr-updater.io/…`) annotations are read from here.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_update_settings: Option<UpdateSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_back_config: Option<WriteBackSettings>,
    #[serde(default)]
    pub application_refs: Vec<ApplicationRef>,
    /// `imagesVerification` (`cosignKey: {secretName, key}`, `enabled`), at each level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_verification: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationRef {
    pub name_pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selectors: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_annotations: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_update_settings: Option<UpdateSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_back_config: Option<WriteBackSettings>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_verification: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    pub alias: String,
    pub image_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_update_settings: Option<UpdateSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_targets: Option<ManifestTargets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_verification: Option<Value>,
}

/// `commonUpdateSettings`, at any of the three levels.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_update: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_tags: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platforms: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WriteBackSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_config: Option<GitConfig>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_back_target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestTargets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm: Option<NameTagSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<KustomizeTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<NameTagSpec>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct NameTagSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct KustomizeTarget {
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelExpression>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct LabelExpression {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

impl LabelSelector {
    /// `metav1.LabelSelector` semantics; an invalid selector (unknown operator, `In` without
    /// values, `Exists` with values) matches nothing, as in Image Updater.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let labels_match = self
            .match_labels
            .iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v));
        let expressions_match = self.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let label = labels.get(&e.key);
            match e.operator.as_str() {
                "In" if !values.is_empty() => label.is_some_and(|l| values.contains(l)),
                "NotIn" if !values.is_empty() => label.is_none_or(|l| !values.contains(l)),
                "Exists" if values.is_empty() => label.is_some(),
                "DoesNotExist" if values.is_empty() => label.is_none(),
                _ => false,
            }
        });
        labels_match && expressions_match
    }
}

/// Image Updater's `calculateSpecificity`: the higher, the more specific.
pub fn specificity(reference: &ApplicationRef) -> usize {
    let pattern = reference.name_pattern.as_str();
    let mut score = 0;
    if !pattern.contains(['*', '?', '[', ']']) {
        score += 1_000_000;
    }
    // Character classes `[...]` count for nothing, then the other wildcards are removed.
    let mut literals = String::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('[') {
        match rest[open..].find(']') {
            Some(close) => {
                literals.push_str(&rest[..open]);
                rest = &rest[open + close + 1..];
            }
            None => break,
        }
    }
    literals.push_str(rest);
    score += literals.replace(['*', '?'], "").len();
    if let Some(selector) = &reference.label_selectors {
        score += 10_000;
        score += selector.match_labels.as_ref().map_or(0, BTreeMap::len) * 100;
        score += selector.match_expressions.as_ref().map_or(0, Vec::len) * 100;
    }
    score
}

/// Where an Application's configuration comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigSource<'a> {
    /// No ImageUpdater object matches: its own annotations, as Image Updater v0.x reads them.
    Annotations,
    /// One object's `applicationRefs[reference]` matches.
    Object {
        object: &'a ImageUpdaterObject,
        reference: usize,
    },
    /// More than one object matches; named by `namespace/name`.
    Conflict(Vec<String>),
}

/// A [`ConfigSource`] by position in the objects it was resolved against: the listing's
/// resolution handed on to the read of the same Application, which then matches nothing again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Annotations,
    Object { index: usize, reference: usize },
    Conflict(Vec<String>),
}

impl ConfigSource<'_> {
    /// The ImageUpdater object (namespace, name) that configures, if one does.
    pub fn configuring_object(&self) -> Option<(String, String)> {
        match self {
            Self::Object { object, .. } => Some((
                object.metadata.namespace.clone(),
                object.metadata.name.clone(),
            )),
            _ => None,
        }
    }

    /// Where this was resolved, in `objects` (the same slice [`resolve`] was given); `None`
    /// for an object that is not among them, which cannot be handed on.
    pub fn resolution(&self, objects: &[ImageUpdaterObject]) -> Option<Resolution> {
        Some(match self {
            Self::Annotations => Resolution::Annotations,
            Self::Object { object, reference } => Resolution::Object {
                index: objects.iter().position(|o| std::ptr::eq(o, *object))?,
                reference: *reference,
            },
            Self::Conflict(names) => Resolution::Conflict(names.clone()),
        })
    }
}

impl Resolution {
    /// The source again, against the `objects` it was resolved in; `None` if they are not
    /// those (an index past their end).
    pub fn source<'a>(&self, objects: &'a [ImageUpdaterObject]) -> Option<ConfigSource<'a>> {
        Some(match self {
            Self::Annotations => ConfigSource::Annotations,
            Self::Object { index, reference } => ConfigSource::Object {
                object: objects.get(*index)?,
                reference: *reference,
            },
            Self::Conflict(names) => ConfigSource::Conflict(names.clone()),
        })
    }
}

impl fmt::Display for ConfigSource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Annotations => f.write_str("annotations"),
            Self::Object { object, reference } => {
                let pattern = object
                    .spec
                    .application_refs
                    .get(*reference)
                    .map_or("", |r| r.name_pattern.as_str());
                write!(
                    f,
                    "ImageUpdater {}/{}, ref \"{pattern}\"",
                    object.metadata.namespace, object.metadata.name
                )?;
                if self.uses_annotations() {
                    f.write_str(" (useAnnotations)")?;
                }
                Ok(())
            }
            Self::Conflict(names) => write!(f, "ImageUpdater {}", names.join(", ")),
        }
    }
}

impl ConfigSource<'_> {
    fn uses_annotations(&self) -> bool {
        match self {
            Self::Object { object, reference } => object
                .spec
                .application_refs
                .get(*reference)
                .and_then(|r| r.use_annotations)
                .unwrap_or(false),
            _ => false,
        }
    }

    /// The configuration this source gives the Application with these annotations; `None`
    /// when there is none (no image-list, no images).
    pub fn config(&self, annotations: &BTreeMap<String, String>) -> Option<AppConfig> {
        match self {
            Self::Annotations => AppConfig::parse(annotations),
            Self::Conflict(_) => None,
            Self::Object { object, reference } if self.uses_annotations() => {
                let mut config = AppConfig::parse(annotations)?;
                ref_verification(object, *reference, &mut config);
                Some(config)
            }
            Self::Object { object, reference } => {
                let (synthesized, origins) = synthesize(object, *reference)?;
                AppConfig::parse_synthesized(&synthesized, &origins)
            }
        }
    }

    /// Does the configuration name `registry/repository` (for the push path's cheap
    /// filter on metadata)?
    pub fn names(
        &self,
        annotations: &BTreeMap<String, String>,
        registry: &str,
        repository: &str,
    ) -> bool {
        match self {
            Self::Annotations => {
                crate::appconfig::annotations::image_list_names(annotations, registry, repository)
            }
            Self::Object { .. } if self.uses_annotations() => {
                crate::appconfig::annotations::image_list_names(annotations, registry, repository)
            }
            Self::Object { object, reference } => object
                .spec
                .application_refs
                .get(*reference)
                .is_some_and(|r| {
                    r.images.iter().any(|i| {
                        let (name, _) = split_constraint(&i.image_name);
                        ImageRef::parse(name).is(registry, repository)
                    })
                }),
            // Kept so the report can say why it is skipped.
            Self::Conflict(_) => true,
        }
    }
}

/// With `useAnnotations`, Image Updater still verifies signatures as the ref's own
/// `imagesVerification` says (only the ref's: not the spec's, and not per image, since the
/// images come from the annotations). An image whose own annotation names a key keeps it.
fn ref_verification(object: &ImageUpdaterObject, reference: usize, config: &mut AppConfig) {
    let Some(verification) = object
        .spec
        .application_refs
        .get(reference)
        .and_then(|r| r.images_verification.as_ref())
        .filter(|v| v["enabled"] != false)
    else {
        return;
    };
    let field = format!(
        "ImageUpdater {}/{} `spec.applicationRefs[{reference}].imagesVerification.cosignKey`",
        object.metadata.namespace, object.metadata.name
    );
    let key = &verification["cosignKey"];
    let parsed = match (key["secretName"].as_str(), key["key"].as_str()) {
        (Some(name), Some(data_key)) => crate::appconfig::cosign_key::KeyRef::parse(&format!(
            "secret:{}/{name}:{data_key}",
            object.metadata.namespace
        )),
        _ => Err(Refused::from(
            "missing cosignKey.secretName or cosignKey.key",
        )),
    };
    for image in &mut config.images {
        let Ok(settings) = &mut image.config else {
            continue;
        };
        if settings.cosign_key.is_some() {
            continue;
        }
        match &parsed {
            Ok(key) => settings.cosign_key = Some(key.clone()),
            Err(Refused(problem)) => {
                image.config = Err(crate::appconfig::annotations::AnnotationError {
                    annotation: field.clone(),
                    value: key.to_string(),
                    problem: problem.clone(),
                });
            }
        }
    }
}

/// The refs of one object that match an Application, most specific first. An object whose
/// patterns do not compile matches nothing (its status says why).
fn matching_refs(
    object: &ImageUpdaterObject,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<usize> {
    let refs = &object.spec.application_refs;
    let made;
    let matchers = match &object.matchers {
        Some(prepared) => prepared,
        None => {
            made = matchers(refs);
            &made
        }
    };
    let Some(ordered) = matchers.0.as_ref() else {
        return Vec::new();
    };
    ordered
        .iter()
        .filter(|(i, pattern)| {
            pattern.matches(name)
                && refs[*i]
                    .label_selectors
                    .as_ref()
                    .is_none_or(|s| s.matches(labels))
        })
        .map(|(i, _)| *i)
        .collect()
}

/// Whether Image Updater would use this ref for an Application with these annotations: it
/// passes over a ref whose write-back configuration is invalid, and a `useAnnotations` ref
/// whose annotations give no image list (`FilterApplicationsForUpdate`'s `continue`s).
fn usable(
    object: &ImageUpdaterObject,
    reference: usize,
    annotations: &BTreeMap<String, String>,
) -> bool {
    let source = ConfigSource::Object { object, reference };
    source
        .config(annotations)
        .is_some_and(|config| config.write_back.is_ok())
}

/// What an Application's name must start with for any of a set of objects to select it: the
/// literal prefixes of their refs' name patterns, by length. A listing asks it about every
/// Application and resolves only those some object may select; without it, each of 2,000
/// Applications was matched against each of 50 objects' patterns on every push (the matching
/// code alone a tenth of the event's CPU; A/B with the filter: 18.4 -> 13.5 ms per event). It answers `true` for a superset of the names [`resolve`] gives to an
/// object (a pattern's prefix is necessary, not sufficient; an invalid pattern, which makes
/// its object match nothing, only adds a prefix).
#[derive(Debug, Default)]
pub struct NamePrefixes {
    /// Some pattern starts with a special character (`*`, `?`, `[`, `\`): any name may match.
    any: bool,
    by_length: Vec<(usize, HashSet<String>)>,
}

impl NamePrefixes {
    pub fn of(objects: &[ImageUpdaterObject]) -> Self {
        let mut any = false;
        let mut by_length: BTreeMap<usize, HashSet<String>> = BTreeMap::new();
        for reference in objects.iter().flat_map(|o| &o.spec.application_refs) {
            match go_glob::literal_prefix(&reference.name_pattern) {
                "" => any = true,
                prefix => {
                    by_length
                        .entry(prefix.len())
                        .or_default()
                        .insert(prefix.to_string());
                }
            }
        }
        Self {
            any,
            by_length: by_length.into_iter().collect(),
        }
    }

    /// Whether some object may select an Application named `name`: `false` only where none
    /// can, so that its configuration is its annotations.
    pub fn may_select(&self, name: &str) -> bool {
        self.any
            || self.by_length.iter().any(|(length, prefixes)| {
                name.get(..*length)
                    .is_some_and(|head| prefixes.contains(head))
            })
    }
}

/// Which configuration applies to the Application `namespace/name` with `labels` and
/// `annotations`, given the ImageUpdater objects of its namespace: in the one object that
/// matches, its most specific ref that Image Updater would use. When none is usable the most
/// specific is kept, so the report says what is wrong with it (Image Updater only logs it).
pub fn resolve<'a>(
    objects: &'a [ImageUpdaterObject],
    namespace: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> ConfigSource<'a> {
    let matches: Vec<(&ImageUpdaterObject, Vec<usize>)> = objects
        .iter()
        .filter(|o| o.metadata.namespace == namespace)
        .map(|o| (o, matching_refs(o, name, labels)))
        .filter(|(_, refs)| !refs.is_empty())
        .collect();
    match matches.as_slice() {
        [] => ConfigSource::Annotations,
        [(object, refs)] => {
            let reference = match refs.as_slice() {
                [only] => *only,
                several => several
                    .iter()
                    .copied()
                    .find(|r| usable(object, *r, annotations))
                    .unwrap_or(several[0]),
            };
            ConfigSource::Object { object, reference }
        }
        several => ConfigSource::Conflict(
            several
                .iter()
                .map(|(o, _)| format!("{}/{}", o.metadata.namespace, o.metadata.name))
                .collect(),
        ),
    }
}

/// Why an object's patterns make it match nothing, for its status.
pub fn invalid_patterns(object: &ImageUpdaterObject) -> Option<String> {
    object
        .spec
        .application_refs
        .iter()
        .enumerate()
        .find_map(|(i, r)| {
            GoGlob::parse(&r.name_pattern).err().map(|e| {
                format!(
                    "spec.applicationRefs[{i}].namePattern `{}`: {e}; the object matches no Application until it is fixed",
                    r.name_pattern
                )
            })
        })
}

/// `registry/repo[:constraint]` into the repository and its constraint.
fn split_constraint(image_name: &str) -> (&str, Option<&str>) {
    let name_start = image_name.rfind('/').map_or(0, |i| i + 1);
    match image_name[name_start..].find(':') {
        Some(i) => (
            &image_name[..name_start + i],
            Some(&image_name[name_start + i + 1..]),
        ),
        None => (image_name, None),
    }
}

/// The configuration of `applicationRefs[reference]` in the annotations' shape, and for
/// each synthesised key the object field it came from.
fn synthesize(
    object: &ImageUpdaterObject,
    reference: usize,
) -> Option<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let app_ref = object.spec.application_refs.get(reference)?;
    if app_ref.images.is_empty() {
        return None;
    }
    let mut synthesis = Synthesis {
        object,
        app_ref,
        ref_path: format!("spec.applicationRefs[{reference}]"),
        owner: format!(
            "ImageUpdater {}/{}",
            object.metadata.namespace, object.metadata.name
        ),
        map: BTreeMap::new(),
        origins: BTreeMap::new(),
    };
    synthesis.own_annotations();
    let list: Vec<String> = app_ref
        .images
        .iter()
        .map(|i| format!("{}={}", i.alias, i.image_name))
        .collect();
    let field = format!("{}.images[].imageName", synthesis.ref_path);
    synthesis.put("image-list".into(), list.join(","), field);
    for (index, image) in app_ref.images.iter().enumerate() {
        let alias = image.alias.replace('/', "_");
        let image_path = format!("{}.images[{index}]", synthesis.ref_path);
        synthesis.verification(image, &alias, &image_path);
        synthesis.update_settings(image, &alias, &image_path);
        synthesis.manifest_targets(image, &alias, &image_path);
    }
    synthesis.write_back();
    Some((synthesis.map, synthesis.origins))
}

/// One application reference's configuration being written in the annotations' shape.
struct Synthesis<'a> {
    object: &'a ImageUpdaterObject,
    app_ref: &'a ApplicationRef,
    /// `spec.applicationRefs[<n>]`, the start of every origin in it.
    ref_path: String,
    /// `ImageUpdater <namespace>/<name>`.
    owner: String,
    map: BTreeMap<String, String>,
    /// Synthesised key -> the object field it came from.
    origins: BTreeMap<String, String>,
}

impl Synthesis<'_> {
    /// Sets Image Updater's annotation `key` (without its prefix) from object field `field`.
    fn put(&mut self, key: String, value: String, field: String) {
        let key = format!("{PREFIX}{key}");
        self.origins
            .insert(key.clone(), format!("{} `{field}`", self.owner));
        self.map.insert(key, value);
    }

    /// Our settings (a scan gate) live in the object's annotations: its spec is pruned to
    /// Image Updater's schema by the API server.
    fn own_annotations(&mut self) {
        for (key, value) in &self.object.metadata.annotations {
            if key.starts_with(crate::appconfig::annotations::OWN_PREFIX) {
                let origin = format!("{} annotation `{key}`", self.owner);
                self.origins.insert(key.clone(), origin);
                self.map.insert(key.clone(), value.clone());
            }
        }
    }

    /// imagesVerification: image > ref > spec; `enabled: false` at the nearest level that
    /// sets one switches verification off.
    fn verification(&mut self, image: &ImageSpec, alias: &str, image_path: &str) {
        let levels = [
            (
                image.images_verification.as_ref(),
                format!("{image_path}.imagesVerification"),
            ),
            (
                self.app_ref.images_verification.as_ref(),
                format!("{}.imagesVerification", self.ref_path),
            ),
            (
                self.object.spec.images_verification.as_ref(),
                "spec.imagesVerification".to_string(),
            ),
        ];
        let nearest = levels
            .into_iter()
            .find_map(|(v, path)| v.map(|v| (v.clone(), path)));
        let Some((verification, path)) = nearest else {
            return;
        };
        if verification["enabled"] == false {
            return;
        }
        let key = &verification["cosignKey"];
        let reference = match (key["secretName"].as_str(), key["key"].as_str()) {
            (Some(name), Some(data_key)) => {
                format!(
                    "secret:{}/{name}:{data_key}",
                    self.object.metadata.namespace
                )
            }
            // Reported as a bad key reference of this image.
            _ => "missing cosignKey.secretName or cosignKey.key".to_string(),
        };
        self.put(
            format!("{alias}.cosign-key"),
            reference,
            format!("{path}.cosignKey"),
        );
    }

    /// commonUpdateSettings: image > ref > spec, field by field; the nearest level that sets
    /// a field wins.
    fn update_settings(&mut self, image: &ImageSpec, alias: &str, image_path: &str) {
        let levels = [
            (
                image.common_update_settings.as_ref(),
                format!("{image_path}.commonUpdateSettings"),
            ),
            (
                self.app_ref.common_update_settings.as_ref(),
                format!("{}.commonUpdateSettings", self.ref_path),
            ),
            (
                self.object.spec.common_update_settings.as_ref(),
                "spec.commonUpdateSettings".to_string(),
            ),
        ];
        let nearest = |pick: &dyn Fn(&UpdateSettings) -> Option<String>, field: &str| {
            levels.iter().find_map(|(settings, path)| {
                settings
                    .and_then(pick)
                    .map(|v| (v, format!("{path}.{field}")))
            })
        };
        let ignore_tags = |s: &UpdateSettings| {
            s.ignore_tags
                .as_ref()
                .map(|t| serde_json::to_string(t).unwrap_or_default())
        };
        let fields = [
            (
                "update-strategy",
                nearest(&|s| s.update_strategy.clone(), "updateStrategy"),
            ),
            (
                "allow-tags",
                nearest(&|s| s.allow_tags.clone(), "allowTags"),
            ),
            ("ignore-tags", nearest(&ignore_tags, "ignoreTags")),
            (
                "force-update",
                nearest(&|s| s.force_update.map(|f| f.to_string()), "forceUpdate"),
            ),
            (
                "platforms",
                nearest(&|s| s.platforms.as_ref().map(|p| p.join(",")), "platforms"),
            ),
            (
                "pull-secret",
                nearest(&|s| s.pull_secret.clone(), "pullSecret"),
            ),
        ];
        for (key, found) in fields {
            if let Some((value, field)) = found {
                self.put(format!("{alias}.{key}"), value, field);
            }
        }
    }

    /// manifestTargets: one of helm, kustomize and plugin, into their annotations.
    fn manifest_targets(&mut self, image: &ImageSpec, alias: &str, image_path: &str) {
        let targets = image.manifest_targets.clone().unwrap_or_default();
        let target_path = format!("{image_path}.manifestTargets");
        let chosen = [
            targets.helm.is_some(),
            targets.kustomize.is_some(),
            targets.plugin.is_some(),
        ]
        .iter()
        .filter(|set| **set)
        .count();
        if chosen > 1 {
            // Image Updater skips such an image; we report it as a configuration error.
            self.put(
                format!("{alias}.helm.image-spec"),
                String::new(),
                format!("{target_path} (only one of helm, kustomize, plugin may be set)"),
            );
            return;
        }
        if let Some(helm) = &targets.helm {
            let keys = ["helm.image-name", "helm.image-tag", "helm.image-spec"];
            self.name_tag_spec(helm, keys, alias, &format!("{target_path}.helm"));
        }
        if let Some(name) = targets.kustomize.as_ref().and_then(|k| k.name.clone()) {
            self.put(
                format!("{alias}.kustomize.image-name"),
                name,
                format!("{target_path}.kustomize.name"),
            );
        }
        if let Some(plugin) = &targets.plugin {
            let keys = crate::appconfig::annotations::PLUGIN_KEYS;
            self.name_tag_spec(plugin, keys, alias, &format!("{target_path}.plugin"));
        }
    }

    /// A target's `spec` (the whole image in one parameter), or else its `name` and `tag`.
    fn name_tag_spec(&mut self, target: &NameTagSpec, keys: [&str; 3], alias: &str, path: &str) {
        let [name_key, tag_key, spec_key] = keys;
        if let Some(spec) = &target.spec {
            self.put(
                format!("{alias}.{spec_key}"),
                spec.clone(),
                format!("{path}.spec"),
            );
            return;
        }
        if let Some(name) = &target.name {
            self.put(
                format!("{alias}.{name_key}"),
                name.clone(),
                format!("{path}.name"),
            );
        }
        if let Some(tag) = &target.tag {
            self.put(
                format!("{alias}.{tag_key}"),
                tag.clone(),
                format!("{path}.tag"),
            );
        }
    }

    /// Write-back: the ref's settings over the object's, field by field (`mergeWBCSettings`).
    fn write_back(&mut self) {
        let spec_wbc = self
            .object
            .spec
            .write_back_config
            .clone()
            .unwrap_or_default();
        let ref_wbc = self.app_ref.write_back_config.clone().unwrap_or_default();
        let ref_path = self.ref_path.clone();
        let pick = |field: &str, get: &dyn Fn(&WriteBackSettings) -> Option<String>| {
            get(&ref_wbc)
                .map(|v| (v, format!("{ref_path}.writeBackConfig.{field}")))
                .or_else(|| get(&spec_wbc).map(|v| (v, format!("spec.writeBackConfig.{field}"))))
        };
        let git = |w: &WriteBackSettings| w.git_config.clone().unwrap_or_default();
        let write_back = [
            ("write-back-method", pick("method", &|w| w.method.clone())),
            ("git-branch", pick("gitConfig.branch", &|w| git(w).branch)),
            (
                "write-back-target",
                pick("gitConfig.writeBackTarget", &|w| git(w).write_back_target),
            ),
            (
                "git-repository",
                pick("gitConfig.repository", &|w| git(w).repository),
            ),
        ];
        let pull_request = pick("gitConfig.pullRequest", &|w| {
            git(w).pull_request.map(|p| p.to_string())
        });
        for (key, found) in write_back {
            if let Some((value, field)) = found {
                self.put(key.to_string(), value, field);
            }
        }
        // `pullRequest: {github: {}, labels: [...]}` or `{gitlab: {}}`; neither or both (the
        // CRD refuses that too) is reported by the write-back as unsupported.
        if let Some((request, field)) = pull_request {
            let request: Value = serde_json::from_str(&request).unwrap_or_default();
            let mode = match (
                request.get("github").is_some(),
                request.get("gitlab").is_some(),
            ) {
                (true, false) => "github",
                (false, true) => "gitlab",
                _ => "unsupported",
            };
            self.put("git-pull-request".into(), mode.into(), field.clone());
            if let Some(labels) = request["labels"].as_array() {
                let labels: Vec<&str> = labels.iter().filter_map(Value::as_str).collect();
                self.put("git-pull-request-labels".into(), labels.join(","), field);
            }
        }
    }
}

/// One update of the invocation, for an object's `status.recentUpdates`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentUpdate {
    pub alias: String,
    pub image: String,
    pub new_version: String,
    pub applications_updated: usize,
    pub message: String,
}

/// What one invocation saw of an object, to write into its status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub applications_matched: usize,
    pub images_managed: usize,
    pub updates: Vec<RecentUpdate>,
    /// The first configuration error or failure, for the Ready condition.
    pub error: Option<String>,
}

/// How many updates `status.recentUpdates` keeps, newest first.
const RECENT_UPDATES: usize = 20;

/// The merge patch of the status subresource for what this invocation observed, as Image
/// Updater writes it (`kubectl get imageupdaters` shows the same columns).
pub fn status_patch(object: &ImageUpdaterObject, observed: &Observed, now: &str) -> Value {
    let previous = &object.status;
    let mut recent: Vec<Value> = observed
        .updates
        .iter()
        .map(|u| {
            json!({"alias": u.alias, "image": u.image, "newVersion": u.new_version,
                   "applicationsUpdated": u.applications_updated, "updatedAt": now, "message": u.message})
        })
        .collect();
    recent.extend(
        previous["recentUpdates"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    recent.truncate(RECENT_UPDATES);
    let (status, reason, message) = match &observed.error {
        None => (
            "True",
            "Reconciled",
            "the configuration was applied".to_string(),
        ),
        Some(error) => ("False", "Error", error.clone()),
    };
    let ready_before = previous["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let transitioned = ready_before
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(now);
    let mut patch = json!({"status": {
        "observedGeneration": object.metadata.generation,
        "applicationsMatched": observed.applications_matched,
        "imagesManaged": observed.images_managed,
        "lastCheckedAt": now,
        "recentUpdates": recent,
        "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message,
                        "lastTransitionTime": transitioned, "observedGeneration": object.metadata.generation}],
    }});
    if !observed.updates.is_empty() {
        patch["status"]["lastUpdatedAt"] = json!(now);
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::HelmTarget;
    use crate::policy::Strategy;
    use argocd_ecr_updater_standins::fixtures::Application;

    /// The string annotations of an Application fixture, as the typed Application reads
    /// them (`application::app`, above this module).
    fn string_annotations(app: &Value) -> BTreeMap<String, String> {
        app["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect()
    }

    fn object(name: &str, spec: Value) -> ImageUpdaterObject {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "argocd", "generation": 3}, "spec": spec}))
            .unwrap()
    }

    fn reference(pattern: &str, selector: Value) -> ApplicationRef {
        serde_json::from_value(json!({"namePattern": pattern, "labelSelectors": selector})).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn objects_with_patterns(patterns: &[&str]) -> Vec<ImageUpdaterObject> {
        patterns
            .iter()
            .enumerate()
            .map(|(i, pattern)| {
                object(
                    &format!("o{i}"),
                    json!({"applicationRefs": [{"namePattern": pattern}]}),
                )
                .prepared()
            })
            .collect()
    }

    #[test]
    fn a_name_no_pattern_prefix_starts_may_not_be_selected_by_any_object() {
        let cases: &[(&[&str], &str, bool)] = &[
            (&["team-a-*"], "team-a-api", true),
            (&["team-a-*"], "team-b-api", false),
            (&["team-a-*"], "team-", false),
            (&["checkout"], "checkout", true),
            (&["checkout"], "checkout-v2", true),
            (&["checkout"], "check", false),
            (&["*-svc"], "anything", true),
            (&["?pp-*"], "zzz", true),
            (&["[ab]pp"], "zzz", true),
            (&["app\\*x"], "app*x", true),
            (&["app\\*x"], "apq", false),
            (&["team-a-*", "platform-*"], "platform-dns", true),
            (&["team-a-*", "platform-*"], "payments", false),
            (&["ünï-*"], "ünï-api", true),
            (&["ünï-*"], "ü", false),
            (&[], "app-1", false),
        ];
        for (patterns, name, may) in cases {
            let prefixes = NamePrefixes::of(&objects_with_patterns(patterns));
            assert_eq!(prefixes.may_select(name), *may, "{patterns:?} and {name}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_application_an_object_selects_passes_the_name_prefixes(
            patterns in proptest::collection::vec("[ab*?\\[\\]\\\\-]{0,5}", 0..4),
            name in "[ab*?\\[\\]\\\\-]{0,6}",
        ) {
            let patterns: Vec<&str> = patterns.iter().map(String::as_str).collect();
            let objects = objects_with_patterns(&patterns);
            let selected = !matches!(resolve(&objects, "argocd", &name, &labels(&[]), &BTreeMap::new()), ConfigSource::Annotations);
            if selected {
                proptest::prop_assert!(NamePrefixes::of(&objects).may_select(&name));
            }
        }
    }

    #[test]
    fn the_most_specific_ref_ranks_first_by_image_updaters_score() {
        // (pattern, label selector, score) in Image Updater's calculateSpecificity.
        let table: &[(&str, Value, usize)] = &[
            ("web-prod", Value::Null, 1_000_008),
            ("web-*", Value::Null, 4),
            ("web-prod-*", Value::Null, 9),
            ("web-?", Value::Null, 4),
            ("web-[a-z]*", Value::Null, 4),
            ("*", Value::Null, 0),
            ("*", json!({"matchLabels": {"team": "a"}}), 10_100),
            (
                "*",
                json!({"matchLabels": {"team": "a", "env": "prod"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                10_300,
            ),
            ("web-*", json!({}), 10_004),
        ];
        for (pattern, selector, score) in table {
            assert_eq!(
                specificity(&reference(pattern, selector.clone())),
                *score,
                "{pattern} {selector}"
            );
        }
    }

    #[test]
    fn an_exact_name_beats_a_longer_glob_and_a_label_selector_beats_literals() {
        let spec = json!({"applicationRefs": [
            {"namePattern": "*", "images": [{"alias": "any", "imageName": "r.example.com/any"}]},
            {"namePattern": "web-prod-*", "images": [{"alias": "glob", "imageName": "r.example.com/glob"}]},
            {"namePattern": "web-prod-eu", "images": [{"alias": "exact", "imageName": "r.example.com/exact"}]},
            {"namePattern": "web-*", "labelSelectors": {"matchLabels": {"team": "a"}}, "images": [{"alias": "labelled", "imageName": "r.example.com/labelled"}]}]});
        let objects = vec![object("iu", spec)];
        let picked = |name: &str, l: &[(&str, &str)]| match resolve(
            &objects,
            "argocd",
            name,
            &labels(l),
            &BTreeMap::new(),
        ) {
            ConfigSource::Object { reference, .. } => objects[0].spec.application_refs[reference]
                .images[0]
                .alias
                .clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(picked("web-prod-eu", &[("team", "a")]), "exact");
        assert_eq!(picked("web-prod-us", &[("team", "a")]), "labelled");
        assert_eq!(picked("web-prod-us", &[("team", "b")]), "glob");
        assert_eq!(picked("api", &[]), "any");
    }

    #[test]
    fn label_selectors_follow_kubernetes_semantics_and_an_invalid_one_matches_nothing() {
        let l = labels(&[("team", "a"), ("env", "prod")]);
        let table: &[(Value, bool)] = &[
            (json!({"matchLabels": {"team": "a"}}), true),
            (json!({"matchLabels": {"team": "b"}}), false),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "stage"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "In", "values": []}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "Gt", "values": ["1"]}]}),
                false,
            ),
            (json!({}), true),
        ];
        for (selector, matches) in table {
            let selector: LabelSelector = serde_json::from_value(selector.clone()).unwrap();
            assert_eq!(selector.matches(&l), *matches, "{selector:?}");
        }
    }

    #[test]
    fn an_ignore_tags_item_holding_a_comma_stays_one_pattern() {
        let objects = vec![object(
            "iu",
            json!({"applicationRefs": [{"namePattern": "web", "images": [
                {"alias": "a", "imageName": "r.example.com/a",
                 "commonUpdateSettings": {"updateStrategy": "alphabetical", "ignoreTags": ["v2,v3", "v4*"]}}]}]}),
        )];
        let none = BTreeMap::new();
        let config = resolve(&objects, "argocd", "web", &none, &none)
            .config(&none)
            .unwrap();
        let policy = &config.images[0].config.as_ref().unwrap().policy;
        let named = |names: &[&str]| -> Vec<crate::policy::TagInfo> {
            names
                .iter()
                .map(|n| crate::policy::TagInfo::named(*n))
                .collect()
        };
        // `v2,v3` is one Go glob (it matches no tag); split, it would have hidden v3.
        assert_eq!(
            policy.select(&named(&["v1", "v3"])).map(|t| t.to_string()),
            Some("v3".to_string())
        );
        assert_eq!(
            policy
                .select(&named(&["v1", "v4.1"]))
                .map(|t| t.to_string()),
            Some("v1".to_string())
        );
    }

    #[test]
    fn a_ref_with_an_invalid_write_back_is_passed_over_for_the_next_matching_one() {
        let image = json!([{"alias": "api", "imageName": "r.example.com/api"}]);
        let refs = |specific_method: &str| {
            vec![object(
                "o",
                json!({"applicationRefs": [
                    {"namePattern": "*", "images": image},
                    {"namePattern": "api", "images": image,
                     "writeBackConfig": {"method": specific_method}},
                ]}),
            )]
        };
        let none = BTreeMap::new();
        // The exact name ranks first; its method is not one Image Updater knows.
        let objects = refs("git:secret:no-slash");
        assert_eq!(
            resolve(&objects, "argocd", "api", &none, &none).to_string(),
            "ImageUpdater argocd/o, ref \"*\""
        );
        // Valid, it is the one used.
        let objects = refs("argocd");
        assert_eq!(
            resolve(&objects, "argocd", "api", &none, &none).to_string(),
            "ImageUpdater argocd/o, ref \"api\""
        );
        // The only matching ref, invalid: kept, so the report names what is wrong.
        let only = vec![object(
            "o",
            json!({"applicationRefs": [{"namePattern": "api", "images": image,
                     "writeBackConfig": {"method": "git:secret:no-slash"}}]}),
        )];
        let source = resolve(&only, "argocd", "api", &none, &none);
        assert!(source.config(&none).unwrap().write_back.is_err());
    }

    #[test]
    fn no_object_means_annotations_and_two_objects_are_a_conflict_naming_both() {
        let a = object("a", json!({"applicationRefs": [{"namePattern": "web*"}]}));
        let b = object("b", json!({"applicationRefs": [{"namePattern": "*"}]}));
        let objects = vec![a, b];
        assert_eq!(
            resolve(
                &objects,
                "argocd",
                "api",
                &BTreeMap::new(),
                &BTreeMap::new()
            )
            .to_string(),
            "ImageUpdater argocd/b, ref \"*\""
        );
        assert_eq!(
            resolve(
                &objects,
                "argocd",
                "web",
                &BTreeMap::new(),
                &BTreeMap::new()
            ),
            ConfigSource::Conflict(vec!["argocd/a".into(), "argocd/b".into()])
        );
        assert_eq!(
            resolve(
                &objects,
                "team-b",
                "web",
                &BTreeMap::new(),
                &BTreeMap::new()
            ),
            ConfigSource::Annotations
        );
        let broken = vec![object(
            "c",
            json!({"applicationRefs": [{"namePattern": "web[", "images": []}]}),
        )];
        assert_eq!(
            resolve(&broken, "argocd", "web", &BTreeMap::new(), &BTreeMap::new()),
            ConfigSource::Annotations
        );
        assert!(
            invalid_patterns(&broken[0])
                .unwrap()
                .contains("namePattern `web[`")
        );
    }

    #[test]
    fn settings_merge_image_over_ref_over_spec() {
        let spec = json!({
            "commonUpdateSettings": {"updateStrategy": "alphabetical", "allowTags": "regexp:^v", "forceUpdate": true},
            "applicationRefs": [{"namePattern": "web",
                "commonUpdateSettings": {"updateStrategy": "newest-build", "ignoreTags": ["v0*"]},
                "images": [
                    {"alias": "a", "imageName": "r.example.com/a"},
                    {"alias": "b", "imageName": "r.example.com/b:^1.0", "commonUpdateSettings": {"updateStrategy": "semver", "allowTags": "any"}}]}]});
        let objects = vec![object("iu", spec)];
        let config = resolve(
            &objects,
            "argocd",
            "web",
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .config(&BTreeMap::new())
        .unwrap();
        let a = config.images[0].config.as_ref().unwrap();
        assert_eq!(a.policy.strategy, Strategy::NewestBuild, "ref over spec");
        assert!(a.force_update, "spec when nothing closer sets it");
        assert!(
            a.policy
                .select(&[crate::policy::TagInfo::named("x1")])
                .is_none(),
            "spec's allowTags applies"
        );
        let b = config.images[1].config.as_ref().unwrap();
        assert_eq!(b.policy.strategy, Strategy::Semver, "image over ref");
        assert_eq!(b.constraint.as_deref(), Some("^1.0"));
        assert_eq!(
            b.policy
                .select(&[
                    crate::policy::TagInfo::named("1.2.0"),
                    crate::policy::TagInfo::named("v0.9")
                ])
                .map(|t| t.to_string()),
            Some("1.2.0".to_string())
        );
    }

    #[test]
    fn a_bad_value_is_an_error_of_that_image_naming_the_objects_field() {
        let spec = json!({"applicationRefs": [{"namePattern": "web", "images": [
            {"alias": "a", "imageName": "r.example.com/a", "commonUpdateSettings": {"allowTags": "regexp:(unclosed"}},
            {"alias": "b", "imageName": "r.example.com/b", "commonUpdateSettings": {"updateStrategy": "newest"}},
            {"alias": "c", "imageName": "r.example.com/c", "commonUpdateSettings": {"ignoreTags": ["v[1-"]}},
            {"alias": "d", "imageName": "r.example.com/d", "manifestTargets": {"helm": {"name": "n"}, "kustomize": {"name": "k"}}},
            {"alias": "e", "imageName": "r.example.com/e"}]}]});
        let objects = vec![object("iu", spec)];
        let config = resolve(
            &objects,
            "argocd",
            "web",
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .config(&BTreeMap::new())
        .unwrap();
        let error = |i: usize| config.images[i].config.as_ref().unwrap_err().to_string();
        assert!(error(0).starts_with("ImageUpdater argocd/iu `spec.applicationRefs[0].images[0].commonUpdateSettings.allowTags` = `regexp:(unclosed`"), "{}", error(0));
        assert!(
            error(1).contains("images[1].commonUpdateSettings.updateStrategy"),
            "{}",
            error(1)
        );
        assert!(
            error(2).contains("images[2].commonUpdateSettings.ignoreTags"),
            "{}",
            error(2)
        );
        assert!(
            error(3).contains("only one of helm, kustomize, plugin"),
            "{}",
            error(3)
        );
        assert!(config.images[4].config.is_ok());
    }

    /// The ImageUpdater objects channel: every field that becomes a key or name the function
    /// writes, holding a character some YAML reader breaks a line at (or a control): the
    /// image is refused, naming the object's field as the annotation it stands for.
    #[test]
    fn hostile_manifest_targets_in_an_object_are_refused_before_anything_is_written() {
        for character in ["\u{2028}", "\u{2029}", "\u{85}", "\n", "\u{1b}", "\u{FEFF}"] {
            let hostile = format!("image.tag{character}securityContext: {{privileged: true}}");
            for (target, setting) in [
                (
                    json!({"helm": {"name": "image.repository", "tag": hostile}}),
                    "helm.image-tag",
                ),
                (
                    json!({"helm": {"name": hostile, "tag": "image.tag"}}),
                    "helm.image-name",
                ),
                (json!({"helm": {"spec": hostile}}), "helm.image-spec"),
                (
                    json!({"kustomize": {"name": hostile}}),
                    "kustomize.image-name",
                ),
            ] {
                let spec = json!({"applicationRefs": [{"namePattern": "web", "images": [
                    {"alias": "a", "imageName": "r.example.com/web", "manifestTargets": target}]}]});
                let objects = vec![object("iu", spec)];
                let config = resolve(
                    &objects,
                    "argocd",
                    "web",
                    &BTreeMap::new(),
                    &BTreeMap::new(),
                )
                .config(&BTreeMap::new())
                .unwrap();
                let error = config.images[0]
                    .config
                    .as_ref()
                    .err()
                    .unwrap_or_else(|| panic!("{setting} with {character:?} was accepted"));
                // Named by the object's field the setting came from.
                let field = match setting {
                    "helm.image-tag" => "manifestTargets.helm.tag",
                    "helm.image-name" => "manifestTargets.helm.name",
                    "helm.image-spec" => "manifestTargets.helm.spec",
                    _ => "manifestTargets.kustomize.name",
                };
                assert!(
                    error.annotation.contains(field),
                    "{setting}: {}",
                    error.annotation
                );
                assert!(error.problem.contains("line breaks"), "{}", error.problem);
            }
        }
    }

    #[test]
    fn manifest_targets_become_helm_kustomize_or_plugin_targets() {
        let spec = json!({"applicationRefs": [{"namePattern": "web", "images": [
            {"alias": "h", "imageName": "r.example.com/h", "manifestTargets": {"helm": {"name": "app.repo", "tag": "app.tag"}}},
            {"alias": "s", "imageName": "r.example.com/s", "manifestTargets": {"helm": {"spec": "app.image"}}},
            {"alias": "k", "imageName": "r.example.com/k", "manifestTargets": {"kustomize": {"name": "nginx"}}},
            {"alias": "p", "imageName": "r.example.com/p", "manifestTargets": {"plugin": {"name": "IMAGE", "tag": "TAG"}}}]}]});
        let objects = vec![object("iu", spec)];
        let config = resolve(
            &objects,
            "argocd",
            "web",
            &BTreeMap::new(),
            &BTreeMap::new(),
        )
        .config(&BTreeMap::new())
        .unwrap();
        let image = |i: usize| config.images[i].config.as_ref().unwrap();
        assert_eq!(
            image(0).helm,
            HelmTarget::NameAndTag {
                name: "app.repo".into(),
                tag: "app.tag".into()
            }
        );
        assert_eq!(
            image(1).helm,
            HelmTarget::Spec {
                param: "app.image".into()
            }
        );
        assert_eq!(image(2).kustomize_image_name.as_deref(), Some("nginx"));
        let plugin = image(3).plugin.as_ref().unwrap();
        assert_eq!(
            (
                plugin.name.as_deref(),
                plugin.tag.as_deref(),
                plugin.spec.as_deref()
            ),
            (Some("IMAGE"), Some("TAG"), None)
        );
    }

    #[test]
    fn use_annotations_reads_the_applications_own_annotations() {
        let objects = vec![object(
            "iu",
            json!({"applicationRefs": [{"namePattern": "*", "useAnnotations": true}]}),
        )];
        let app = Application::seed().build();
        let annotations = string_annotations(&app);
        let source = resolve(
            &objects,
            "argocd",
            "aws-pipeline-test",
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert!(source.to_string().ends_with("(useAnnotations)"));
        let config = source.config(&annotations).unwrap();
        assert_eq!(
            config.images[0].config.as_ref().unwrap().policy.strategy,
            Strategy::NewestBuild
        );
        assert!(source.names(
            &annotations,
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com",
            "barun-dev-ecr"
        ));
    }

    #[test]
    fn use_annotations_still_verifies_with_the_refs_own_images_verification_only() {
        let verification =
            json!({"enabled": true, "cosignKey": {"secretName": "cosign", "key": "cosign.pub"}});
        let app = Application::seed().build();
        let annotations = string_annotations(&app);
        let key_of = |spec: Value| {
            let objects = vec![object("iu", spec)];
            let source = resolve(
                &objects,
                "argocd",
                "aws-pipeline-test",
                &BTreeMap::new(),
                &annotations,
            );
            let config = source.config(&annotations).unwrap();
            config.images[0].config.as_ref().unwrap().cosign_key.clone()
        };
        let on_the_ref = key_of(
            json!({"applicationRefs": [{"namePattern": "*", "useAnnotations": true,
            "imagesVerification": verification}]}),
        );
        assert_eq!(
            on_the_ref,
            Some(
                crate::appconfig::cosign_key::KeyRef::parse("secret:argocd/cosign:cosign.pub")
                    .unwrap()
            )
        );
        // The spec's default does not reach a useAnnotations ref, as in Image Updater.
        let on_the_spec = key_of(json!({"imagesVerification": verification,
            "applicationRefs": [{"namePattern": "*", "useAnnotations": true}]}));
        assert_eq!(on_the_spec, None);
        let switched_off = key_of(
            json!({"applicationRefs": [{"namePattern": "*", "useAnnotations": true,
            "imagesVerification": {"enabled": false}}]}),
        );
        assert_eq!(switched_off, None);
    }

    #[test]
    fn the_status_keeps_the_ready_transition_time_while_it_stays_ready() {
        let mut iu = object("iu", json!({"applicationRefs": []}));
        let observed = Observed {
            applications_matched: 2,
            images_managed: 3,
            ..Observed::default()
        };
        let first = status_patch(&iu, &observed, "2025-08-25T00:00:00Z");
        assert_eq!(first["status"]["conditions"][0]["status"], "True");
        assert_eq!(first["status"]["applicationsMatched"], 2);
        assert_eq!(first["status"]["observedGeneration"], 3);
        assert!(first["status"].get("lastUpdatedAt").is_none());
        iu.status = first["status"].clone();
        let again = status_patch(&iu, &observed, "2025-08-25T01:00:00Z");
        assert_eq!(
            again["status"]["conditions"][0]["lastTransitionTime"],
            "2025-08-25T00:00:00Z"
        );
        let failing = Observed {
            error: Some("bad allowTags".into()),
            ..observed.clone()
        };
        let failed = status_patch(&iu, &failing, "2025-08-25T02:00:00Z");
        assert_eq!(failed["status"]["conditions"][0]["status"], "False");
        assert_eq!(
            failed["status"]["conditions"][0]["lastTransitionTime"],
            "2025-08-25T02:00:00Z"
        );
        assert_eq!(
            failed["status"]["conditions"][0]["message"],
            "bad allowTags"
        );
        let updated = Observed {
            updates: vec![RecentUpdate {
                alias: "app".into(),
                image: "r/x".into(),
                new_version: "2".into(),
                applications_updated: 1,
                message: "m".into(),
            }],
            ..observed
        };
        let with_update = status_patch(&iu, &updated, "2025-08-25T03:00:00Z");
        assert_eq!(
            with_update["status"]["lastUpdatedAt"],
            "2025-08-25T03:00:00Z"
        );
        assert_eq!(with_update["status"]["recentUpdates"][0]["newVersion"], "2");
    }

    /// Image Updater's `argocd.go` takes the first matching ref, most specific first, whose
    /// write-back configuration builds; a ref whose `git-branch` has two `:` is passed over.
    #[test]
    fn a_ref_with_an_invalid_write_back_configuration_yields_to_the_next_matching_one() {
        let object: ImageUpdaterObject = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "argocd", "name": "team", "generation": 1},
            "spec": {"applicationRefs": [
                {"namePattern": "web-*", "images": [{"alias": "web", "imageName": "r.example/web"}]},
                {"namePattern": "web-prod", "writeBackConfig": {"method": "git", "gitConfig": {"branch": "a:b:c"}},
                 "images": [{"alias": "web", "imageName": "r.example/web"}]},
            ]}
        }))
        .unwrap();
        let objects = vec![object.prepared()];
        let none = BTreeMap::new();
        let source = resolve(&objects, "argocd", "web-prod", &none, &none);
        let ConfigSource::Object { reference, .. } = source else {
            panic!("{source}");
        };
        assert_eq!(
            reference, 0,
            "the less specific ref, whose configuration is valid"
        );
        // Alone, the invalid ref is taken, and its error says why nothing is written.
        let alone = vec![
            serde_json::from_value::<ImageUpdaterObject>(serde_json::json!({
                "metadata": {"namespace": "argocd", "name": "team", "generation": 1},
                "spec": {"applicationRefs": [
                    {"namePattern": "web-prod", "writeBackConfig": {"method": "git", "gitConfig": {"branch": "a:b:c"}},
                     "images": [{"alias": "web", "imageName": "r.example/web"}]},
                ]}
            }))
            .unwrap()
            .prepared(),
        ];
        let source = resolve(&alone, "argocd", "web-prod", &none, &none);
        let error = source.config(&none).unwrap().write_back.unwrap_err();
        assert!(
            error.to_string().contains("invalid format for git-branch"),
            "{error}"
        );
    }

    #[test]
    fn a_resolution_handed_on_names_the_same_source_against_the_same_objects() {
        let object: ImageUpdaterObject = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "argocd", "name": "team", "generation": 1},
            "spec": {"applicationRefs": [{"namePattern": "web-*", "images": []}]}
        }))
        .unwrap();
        let objects = vec![object.clone(), object];
        let none = BTreeMap::new();
        for (name, expected) in [("web-1", "conflict"), ("api", "annotations")] {
            let source = resolve(&objects, "argocd", name, &none, &none);
            let handed = source.resolution(&objects).unwrap();
            let again = handed.source(&objects).unwrap();
            assert_eq!(again.to_string(), source.to_string(), "{name}: {expected}");
        }
        let single = &objects[..1];
        let source = resolve(single, "argocd", "web-1", &none, &none);
        let handed = source.resolution(single).unwrap();
        assert_eq!(
            handed,
            Resolution::Object {
                index: 0,
                reference: 0
            }
        );
        assert_eq!(
            handed.source(single).unwrap().to_string(),
            source.to_string()
        );
        assert!(
            handed.source(&[]).is_none(),
            "not the objects it was resolved in"
        );
        assert!(
            source.resolution(&objects[1..]).is_none(),
            "an object not among them"
        );
    }
}
