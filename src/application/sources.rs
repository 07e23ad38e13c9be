//! Where each image lives in an Application, read without I/O: its sources and their types
//! (as Argo CD reports them, else from the spec), which of them name an image and the value
//! they hold for it now, and what Argo CD reports running.
//!
//! The decision reads these to choose, the patch and the Git write-back to write: one reading
//! of the Application for all three.

use serde_json::{Value, json};

use crate::appconfig::annotations::{HelmTarget, ImageConfig, ImageRef};
use crate::policy::TagRef;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Helm,
    Kustomize,
    Directory,
    Plugin,
}

impl SourceKind {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "Helm" => Some(Self::Helm),
            "Kustomize" => Some(Self::Kustomize),
            "Directory" => Some(Self::Directory),
            "Plugin" => Some(Self::Plugin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Helm => "Helm",
            Self::Kustomize => "Kustomize",
            Self::Directory => "Directory",
            Self::Plugin => "Plugin",
        }
    }
}

/// One source of an Application, single (`spec.source`) or one of `spec.sources`.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    /// JSON pointer to the source.
    pub pointer: String,
    /// How the report names it: `spec.source` or `spec.sources[1]`.
    pub label: String,
    pub kind: SourceKind,
    pub value: &'a Value,
}

/// The sources with their types: as Argo CD reports them in `status`, else from the spec.
pub fn sources(app: &Value) -> Vec<Source<'_>> {
    let from_spec = |source: &Value| {
        if source.get("helm").is_some() || source.get("chart").is_some() {
            SourceKind::Helm
        } else if source.get("kustomize").is_some() {
            SourceKind::Kustomize
        } else if source.get("plugin").is_some() {
            SourceKind::Plugin
        } else {
            SourceKind::Directory
        }
    };
    if let Some(list) = app["spec"]["sources"].as_array().filter(|l| !l.is_empty()) {
        let reported = app["status"]["sourceTypes"].as_array();
        return list
            .iter()
            .enumerate()
            .map(|(i, source)| Source {
                pointer: format!("/spec/sources/{i}"),
                label: format!("spec.sources[{i}]"),
                kind: reported
                    .and_then(|r| r.get(i))
                    .and_then(Value::as_str)
                    .and_then(SourceKind::parse)
                    .unwrap_or_else(|| from_spec(source)),
                value: source,
            })
            .collect();
    }
    let source = &app["spec"]["source"];
    if !source.is_object() {
        return Vec::new();
    }
    vec![Source {
        pointer: "/spec/source".into(),
        label: "spec.source".into(),
        kind: app["status"]["sourceType"]
            .as_str()
            .and_then(SourceKind::parse)
            .unwrap_or_else(|| from_spec(source)),
        value: source,
    }]
}

/// An image reference split into name, tag and digest.
pub fn split_reference(reference: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, digest) = match reference.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (reference, None),
    };
    let name_start = rest.rfind('/').map_or(0, |i| i + 1);
    match rest[name_start..].rfind(':') {
        Some(i) => (
            &rest[..name_start + i],
            Some(&rest[name_start + i + 1..]),
            digest,
        ),
        None => (rest, None, digest),
    }
}

/// Does Argo CD report the Application running this image (any tag)? Like Image Updater,
/// the `kustomize.image-name` is looked for first: a Kustomize app runs the image under the
/// name its manifests use until the override has been applied once.
pub fn runs_image(app: &Value, image: &ImageConfig) -> bool {
    let reference = image.image.to_string();
    let wanted: Vec<ImageRef> = image
        .kustomize_image_name
        .iter()
        .map(|name| ImageRef::parse(name))
        .chain(std::iter::once(ImageRef::parse(&reference)))
        .collect();
    app["status"]["summary"]["images"]
        .as_array()
        .is_some_and(|images| {
            images.iter().filter_map(Value::as_str).any(|i| {
                let running = ImageRef::parse(split_reference(i).0);
                wanted.contains(&running)
            })
        })
}

pub(crate) fn parameters(source: &Value) -> &[Value] {
    source["helm"]["parameters"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

pub(crate) fn plugin_env(source: &Value) -> &[Value] {
    source["plugin"]["env"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn env_value<'a>(source: &'a Value, name: &str) -> Option<&'a str> {
    plugin_env(source)
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
}

pub(crate) fn kustomize_images(source: &Value) -> &[Value] {
    source["kustomize"]["images"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// The first parameter of that name, as Argo CD's Helm rendering reads it.
fn parameter<'a>(source: &'a Value, name: &str) -> Option<&'a str> {
    parameters(source)
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["value"].as_str())
}

/// The name a Kustomize `images` entry overrides: before `=`, else the image without tag.
pub fn kustomize_entry_name(entry: &str) -> &str {
    match entry.split_once('=') {
        Some((name, _)) => name,
        None => split_reference(entry).0,
    }
}

fn kustomize_entry<'a>(source: &'a Value, image: &ImageConfig) -> Option<&'a str> {
    let wanted = kustomize_name(image);
    kustomize_images(source)
        .iter()
        .filter_map(Value::as_str)
        .find(|e| kustomize_entry_name(e) == wanted)
}

pub fn kustomize_name(image: &ImageConfig) -> String {
    image
        .kustomize_image_name
        .clone()
        .unwrap_or_else(|| image.image.to_string())
}

/// A reference's `tag[@digest]`, if it has a tag.
fn reference_tag(reference: &str) -> Option<TagRef> {
    let (_, tag, digest) = split_reference(reference);
    TagRef::parse(tag?).map(|t| TagRef {
        digest: digest.map(str::to_string),
        ..t
    })
}

/// Does this source name the tracked image itself (not just a parameter of the same name)?
/// A second chart in a multi-source Application pins its own image under the same
/// parameter names; writing ours there would deploy the wrong image.
fn names_image(source: &Source<'_>, image: &ImageConfig) -> bool {
    if let Some(plugin) = &image.plugin {
        return source.kind == SourceKind::Plugin
            && match (&plugin.spec, &plugin.name) {
                (Some(spec), _) => env_value(source.value, spec)
                    .is_some_and(|v| ImageRef::parse(split_reference(v).0) == image.image),
                (None, Some(name)) => {
                    env_value(source.value, name).is_some_and(|v| ImageRef::parse(v) == image.image)
                }
                (None, None) => false,
            };
    }
    match source.kind {
        SourceKind::Helm => match &image.helm {
            HelmTarget::NameAndTag { name, .. } => {
                parameter(source.value, name).is_some_and(|v| ImageRef::parse(v) == image.image)
            }
            HelmTarget::Spec { param } => parameter(source.value, param)
                .is_some_and(|v| ImageRef::parse(split_reference(v).0) == image.image),
        },
        SourceKind::Kustomize => kustomize_entry(source.value, image).is_some(),
        SourceKind::Directory | SourceKind::Plugin => false,
    }
}

/// The value this source holds for the image now, if it holds one.
fn value_in(source: &Source<'_>, image: &ImageConfig) -> Option<TagRef> {
    if let Some(plugin) = &image.plugin {
        if source.kind != SourceKind::Plugin {
            return None;
        }
        return match (&plugin.spec, &plugin.tag) {
            (Some(spec), _) => env_value(source.value, spec).and_then(reference_tag),
            (None, Some(tag)) => env_value(source.value, tag).and_then(TagRef::parse),
            (None, None) => None,
        };
    }
    match source.kind {
        SourceKind::Helm => match &image.helm {
            HelmTarget::NameAndTag { tag, .. } => {
                parameter(source.value, tag).and_then(TagRef::parse)
            }
            HelmTarget::Spec { param } => parameter(source.value, param).and_then(reference_tag),
        },
        SourceKind::Kustomize => kustomize_entry(source.value, image)
            .and_then(|entry| reference_tag(entry.split_once('=').map_or(entry, |(_, r)| r))),
        SourceKind::Directory | SourceKind::Plugin => None,
    }
}

/// The tag Argo CD reports the image running with, for a source whose spec names none yet.
fn running_tag(app: &Value, image: &ImageConfig) -> Option<TagRef> {
    app["status"]["summary"]["images"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|i| ImageRef::parse(split_reference(i).0) == image.image)
        .and_then(reference_tag)
}

/// One source an image is written to, with the value it holds there now.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// Position in [`sources`], which the write plan refers to.
    pub index: usize,
    pub source: Source<'a>,
    /// What the spec asks for; only when the spec names nothing, what `status` reports.
    /// Comparing against status instead would downgrade whenever two pushes beat a sync.
    pub current: Option<TagRef>,
}

/// Where an image is written, and why there.
#[derive(Debug, Clone)]
pub struct Targets<'a> {
    pub targets: Vec<Target<'a>>,
    /// No source names the image, so Image Updater's rule chose the first Helm or
    /// Kustomize source; the report says so.
    pub fallback: bool,
}

/// Every source among `all` (the sources of `app`, read once by the caller) that names the
/// image; if none does, the first Helm or Kustomize source.
pub fn targets_among<'a>(app: &'a Value, all: &[Source<'a>], image: &ImageConfig) -> Targets<'a> {
    let naming: Vec<usize> = (0..all.len())
        .filter(|&i| names_image(&all[i], image))
        .collect();
    let fallback = naming.is_empty();
    let writable = |kind: SourceKind| match image.plugin {
        Some(_) => kind == SourceKind::Plugin,
        None => matches!(kind, SourceKind::Helm | SourceKind::Kustomize),
    };
    let chosen: Vec<usize> = if fallback {
        all.iter()
            .position(|s| writable(s.kind))
            .into_iter()
            .collect()
    } else {
        naming
    };
    let targets = chosen
        .into_iter()
        .map(|index| {
            let source = all[index].clone();
            let in_spec = value_in(&source, image);
            let current = in_spec.or_else(|| running_tag(app, image));
            Target {
                index,
                source,
                current,
            }
        })
        .collect();
    Targets { targets, fallback }
}

/// The value of `image` in each source of a historical sync (`status.history[].source(s)`).
pub fn values_in_spec(spec: &Value, image: &ImageConfig) -> Vec<TagRef> {
    let app = json!({"spec": spec});
    sources(&app)
        .iter()
        .filter_map(|source| value_in(source, image))
        .collect()
}
