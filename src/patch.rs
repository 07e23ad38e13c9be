//! Application patching, computed without I/O: where an image lives in an Application, what
//! tag it runs now, and the JSON patch that moves it.
//!
//! The patch touches only the entries we manage (one Helm parameter list or Kustomize image
//! list per source), and every list it rewrites is guarded by a `test` of the list as it was
//! read, as are the Image Updater annotations the decision came from. A concurrent edit to
//! those makes the API server refuse the patch (422), so the caller re-reads and decides
//! again; an edit to anything else survives because the patch never mentions it.

use serde_json::{Map, Value, json};

use crate::annotations::{self, AppConfig, HelmTarget, ImageConfig, WriteBack};

/// Our own annotation: what the last write changed, for humans and audits.
pub const AUDIT_ANNOTATION: &str = "argocd-ecr-updater.io/last-update";

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

    fn name(self) -> &'static str {
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

/// Why a whole Application is left alone, or `None`.
pub fn app_skip_reason(app: &Value, config: &AppConfig) -> Option<String> {
    let namespace = app["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = app["metadata"]["name"].as_str().unwrap_or_default();
    match &config.write_back {
        Err(e) => return Some(format!("invalid write-back configuration: {e}")),
        Ok(WriteBack::Git { credentials, .. }) => {
            return Some(format!(
                "write-back-method `{credentials}` (git) is not supported yet; the Application is left untouched rather than patched the argocd way behind your back. Use write-back-method argocd, or keep Image Updater for this Application"
            ));
        }
        Ok(WriteBack::Argocd) => {}
    }
    if let Some(owner) = app["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["kind"] == "ApplicationSet"))
    {
        return Some(format!(
            "owned by ApplicationSet `{}`, whose controller would revert a patched parameter at its next reconcile. Put the tag into the ApplicationSet's template or generator instead, or add `ignoreApplicationDifferences` for the managed parameters to the ApplicationSet",
            owner["name"].as_str().unwrap_or_default()
        ));
    }
    let all = sources(app);
    if !all
        .iter()
        .any(|s| matches!(s.kind, SourceKind::Helm | SourceKind::Kustomize))
    {
        let kind = all.first().map_or("Directory", |s| s.kind.name());
        // Image Updater's own wording, which users grep their logs for.
        return Some(format!(
            "skipping app '{namespace}/{name}' of type '{kind}' because it's not of supported source type"
        ));
    }
    None
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

/// Does Argo CD report the Application running this image (any tag)?
pub fn runs_image(app: &Value, image: &str) -> bool {
    app["status"]["summary"]["images"]
        .as_array()
        .is_some_and(|images| {
            images
                .iter()
                .filter_map(Value::as_str)
                .any(|i| split_reference(i).0 == image)
        })
}

/// The tag an image runs, as the Application's spec asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub tag: String,
    pub digest: Option<String>,
    /// True when read from `status.summary.images` because the spec names no tag.
    pub from_status: bool,
}

fn parameters(source: &Value) -> &[Value] {
    source["helm"]["parameters"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn kustomize_images(source: &Value) -> &[Value] {
    source["kustomize"]["images"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn parameter<'a>(source: &'a Value, name: &str) -> Option<&'a str> {
    parameters(source)
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["value"].as_str())
}

/// The name a Kustomize `images` entry overrides: before `=`, else the image without tag.
fn kustomize_entry_name(entry: &str) -> &str {
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

fn kustomize_name(image: &ImageConfig) -> String {
    image
        .kustomize_image_name
        .clone()
        .unwrap_or_else(|| image.image.to_string())
}

/// Does this source carry the entry we manage for `image`?
fn carries(source: &Source<'_>, image: &ImageConfig) -> bool {
    match source.kind {
        SourceKind::Helm => match &image.helm {
            HelmTarget::NameAndTag { tag, .. } => parameter(source.value, tag).is_some(),
            HelmTarget::Spec { param } => parameter(source.value, param).is_some(),
        },
        SourceKind::Kustomize => kustomize_entry(source.value, image).is_some(),
        _ => false,
    }
}

fn tag_and_digest(value: &str) -> (String, Option<String>) {
    match value.split_once('@') {
        Some((tag, digest)) => (tag.to_string(), Some(digest.to_string())),
        None => (value.to_string(), None),
    }
}

/// What the spec asks for; only when the spec names nothing, what `status` reports.
/// Comparing against status instead would downgrade whenever two pushes beat a sync.
pub fn current(app: &Value, image: &ImageConfig) -> Option<Current> {
    for source in sources(app) {
        let found = match source.kind {
            SourceKind::Helm => match &image.helm {
                HelmTarget::NameAndTag { tag, .. } => {
                    parameter(source.value, tag).map(tag_and_digest)
                }
                HelmTarget::Spec { param } => parameter(source.value, param).and_then(|v| {
                    let (_, tag, digest) = split_reference(v);
                    tag.map(|t| (t.to_string(), digest.map(str::to_string)))
                }),
            },
            SourceKind::Kustomize => kustomize_entry(source.value, image).and_then(|entry| {
                let reference = entry.split_once('=').map_or(entry, |(_, r)| r);
                let (_, tag, digest) = split_reference(reference);
                tag.map(|t| (t.to_string(), digest.map(str::to_string)))
            }),
            _ => None,
        };
        if let Some((tag, digest)) = found.filter(|(t, _)| !t.is_empty()) {
            return Some(Current {
                tag,
                digest,
                from_status: false,
            });
        }
    }
    let wanted = image.image.to_string();
    app["status"]["summary"]["images"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find_map(|i| {
            let (name, tag, digest) = split_reference(i);
            (name == wanted).then(|| Current {
                tag: tag.unwrap_or_default().to_string(),
                digest: digest.map(str::to_string),
                from_status: true,
            })
        })
        .filter(|c| !c.tag.is_empty())
}

/// One image to move: its configuration and the value to write (`tag` or `tag@sha256:…`).
#[derive(Debug, Clone)]
pub struct ImageUpdate<'a> {
    pub config: &'a ImageConfig,
    pub from: Option<String>,
    pub to: String,
}

/// The computed write: a JSON patch, and which sources each image was written to.
#[derive(Debug, Clone, PartialEq)]
pub struct WritePlan {
    pub patch: Value,
    pub targets: Vec<Vec<String>>,
}

/// Where each image goes: every source carrying its entry, else the first Helm or Kustomize
/// source (Image Updater would pick only one; multi-source users asked for all of them).
fn targets_for(all: &[Source<'_>], image: &ImageConfig) -> Vec<usize> {
    let carrying: Vec<usize> = (0..all.len())
        .filter(|&i| carries(&all[i], image))
        .collect();
    if !carrying.is_empty() {
        return carrying;
    }
    all.iter()
        .position(|s| matches!(s.kind, SourceKind::Helm | SourceKind::Kustomize))
        .into_iter()
        .collect()
}

fn set_parameter(list: &mut Vec<Value>, name: &str, value: &str) {
    match list.iter_mut().find(|p| p["name"] == name) {
        Some(entry) => {
            entry["value"] = json!(value);
            entry["forceString"] = json!(true);
        }
        None => list.push(json!({"name": name, "value": value, "forceString": true})),
    }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Builds the patch for all of one Application's updates, plus the audit annotation.
pub fn plan(app: &Value, updates: &[ImageUpdate<'_>], audit: Value) -> WritePlan {
    let all = sources(app);
    // Working copies of every list we may rewrite, keyed by source index.
    let mut helm: Vec<Option<Vec<Value>>> = vec![None; all.len()];
    let mut kustomize: Vec<Option<Vec<Value>>> = vec![None; all.len()];
    let mut targets = Vec::new();
    for update in updates {
        let image = update.config;
        let reference = image.image.to_string();
        let mut written = Vec::new();
        for index in targets_for(&all, image) {
            let source = &all[index];
            match source.kind {
                SourceKind::Helm => {
                    let list = helm[index].get_or_insert_with(|| parameters(source.value).to_vec());
                    match &image.helm {
                        HelmTarget::NameAndTag { name, tag } => {
                            set_parameter(list, name, &reference);
                            set_parameter(list, tag, &update.to);
                        }
                        HelmTarget::Spec { param } => {
                            set_parameter(list, param, &format!("{reference}:{}", update.to))
                        }
                    }
                    written.push(format!("{} (helm)", source.label));
                }
                SourceKind::Kustomize => {
                    let list = kustomize[index]
                        .get_or_insert_with(|| kustomize_images(source.value).to_vec());
                    let name = kustomize_name(image);
                    let entry = if name == reference {
                        format!("{reference}:{}", update.to)
                    } else {
                        format!("{name}={reference}:{}", update.to)
                    };
                    match list
                        .iter_mut()
                        .find(|e| e.as_str().is_some_and(|s| kustomize_entry_name(s) == name))
                    {
                        Some(existing) => *existing = json!(entry),
                        None => list.push(json!(entry)),
                    }
                    written.push(format!("{} (kustomize)", source.label));
                }
                SourceKind::Directory | SourceKind::Plugin => {}
            }
        }
        targets.push(written);
    }

    let mut ops = Vec::new();
    // Guard the decision's inputs: the Image Updater annotations as read.
    if let Some(existing) = app["metadata"]["annotations"].as_object() {
        for (key, value) in existing
            .iter()
            .filter(|(k, _)| k.starts_with(annotations::PREFIX))
        {
            ops.push(json!({"op": "test", "path": format!("/metadata/annotations/{}", escape_pointer(key)), "value": value}));
        }
    }
    for (index, source) in all.iter().enumerate() {
        for (block, field, list) in [
            ("helm", "parameters", &helm[index]),
            ("kustomize", "images", &kustomize[index]),
        ] {
            let Some(list) = list else { continue };
            let block_pointer = format!("{}/{block}", source.pointer);
            let list_pointer = format!("{block_pointer}/{field}");
            match source.value.get(block).and_then(|b| b.get(field)) {
                Some(old) => {
                    ops.push(json!({"op": "test", "path": list_pointer, "value": old}));
                    ops.push(json!({"op": "replace", "path": list_pointer, "value": list}));
                }
                None if source.value.get(block).is_some_and(Value::is_object) => {
                    ops.push(json!({"op": "add", "path": list_pointer, "value": list}));
                }
                None => {
                    ops.push(json!({"op": "add", "path": block_pointer, "value": {field: list}}));
                }
            }
        }
    }
    let audit_path = format!("/metadata/annotations/{}", escape_pointer(AUDIT_ANNOTATION));
    let audit_text = Value::String(audit.to_string());
    if app["metadata"]["annotations"].is_object() {
        ops.push(json!({"op": "add", "path": audit_path, "value": audit_text}));
    } else {
        let mut map = Map::new();
        map.insert(AUDIT_ANNOTATION.into(), audit_text);
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": map}));
    }
    WritePlan {
        patch: Value::Array(ops),
        targets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";

    fn config(pairs: &[(&str, &str)]) -> AppConfig {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (format!("{}{k}", annotations::PREFIX), v.to_string()))
            .collect();
        AppConfig::parse(&map).unwrap()
    }

    fn seed_config() -> AppConfig {
        config(&[
            ("image-list", &format!("app={IMAGE}")),
            ("app.update-strategy", "latest"),
            ("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$"),
            ("write-back-method", "argocd"),
            ("app.helm.image-name", "image.repository"),
            ("app.helm.image-tag", "image.tag"),
        ])
    }

    fn seed_app() -> Value {
        json!({
            "metadata": {"name": "aws-pipeline-test", "namespace": "argocd", "annotations": {
                "argocd-image-updater.argoproj.io/image-list": format!("app={IMAGE}"),
                "other/annotation": "x"}},
            "spec": {"source": {"repoURL": "r", "path": "argocd", "helm": {"valueFiles": ["values.yaml"], "parameters": [
                {"name": "image.repository", "value": IMAGE},
                {"name": "image.tag", "value": "20250825-120000"},
                {"name": "replicas", "value": "2"}]}}},
            "status": {"sourceType": "Helm", "summary": {"images": [format!("{IMAGE}:20250825-120000")]}}
        })
    }

    fn apply(app: &Value, patch: &Value) -> Value {
        let mut doc = app.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        doc
    }

    #[test]
    fn the_seed_application_gets_its_tag_parameter_replaced_in_place() {
        let app = seed_app();
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        assert_eq!(
            current(&app, image),
            Some(Current {
                tag: "20250825-120000".into(),
                digest: None,
                from_status: false
            })
        );
        let written = plan(
            &app,
            &[ImageUpdate {
                config: image,
                from: None,
                to: "20250825-153012".into(),
            }],
            json!({"to": "20250825-153012"}),
        );
        assert_eq!(
            written.targets,
            vec![vec!["spec.source (helm)".to_string()]]
        );
        let after = apply(&app, &written.patch);
        assert_eq!(
            after["spec"]["source"]["helm"]["parameters"],
            json!([
                {"name": "image.repository", "value": IMAGE, "forceString": true},
                {"name": "image.tag", "value": "20250825-153012", "forceString": true},
                {"name": "replicas", "value": "2"}])
        );
        assert_eq!(
            after["spec"]["source"]["helm"]["valueFiles"],
            json!(["values.yaml"])
        );
        assert_eq!(after["metadata"]["annotations"]["other/annotation"], "x");
        assert!(
            after["metadata"]["annotations"][AUDIT_ANNOTATION]
                .as_str()
                .unwrap()
                .contains("20250825-153012")
        );
    }

    #[test]
    fn the_patch_is_refused_when_the_managed_list_or_the_annotations_changed_meanwhile() {
        let app = seed_app();
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        let written = plan(
            &app,
            &[ImageUpdate {
                config: image,
                from: None,
                to: "20250825-153012".into(),
            }],
            json!({}),
        );
        let patch: json_patch::Patch = serde_json::from_value(written.patch.clone()).unwrap();
        let mut raced = app.clone();
        raced["spec"]["source"]["helm"]["parameters"][1]["value"] = json!("20250826-000000");
        assert!(json_patch::patch(&mut raced, &patch).is_err());
        let mut raced = app.clone();
        raced["metadata"]["annotations"]["argocd-image-updater.argoproj.io/image-list"] =
            json!("changed");
        assert!(json_patch::patch(&mut raced, &patch).is_err());
        // An edit elsewhere does not stop it and is kept.
        let mut raced = app.clone();
        raced["spec"]["syncPolicy"] = json!({"automated": {}});
        json_patch::patch(&mut raced, &patch).unwrap();
        assert_eq!(raced["spec"]["syncPolicy"], json!({"automated": {}}));
    }

    #[test]
    fn helm_spec_parameters_carry_repository_and_tag_in_one_value() {
        let cfg = config(&[
            ("image-list", &format!("a={IMAGE}")),
            ("a.helm.image-spec", "app.image"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = json!({"metadata": {"annotations": {}}, "spec": {"source": {"chart": "web", "helm": {"parameters": [
            {"name": "app.image", "value": format!("{IMAGE}:1.0.0")}]}}}});
        assert_eq!(current(&app, image).unwrap().tag, "1.0.0");
        let after = apply(
            &app,
            &plan(
                &app,
                &[ImageUpdate {
                    config: image,
                    from: None,
                    to: "1.1.0".into(),
                }],
                json!({}),
            )
            .patch,
        );
        assert_eq!(
            after["spec"]["source"]["helm"]["parameters"][0]["value"],
            format!("{IMAGE}:1.1.0")
        );
    }

    #[test]
    fn kustomize_images_are_rewritten_by_their_name() {
        let cfg = config(&[
            ("image-list", &format!("a={IMAGE}")),
            ("a.kustomize.image-name", "web"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = json!({"metadata": {"annotations": {}}, "spec": {"source": {"path": "k", "kustomize": {"images": [
            "sidecar:1", format!("web={IMAGE}:v1")]}}}, "status": {"sourceType": "Kustomize"}});
        assert_eq!(current(&app, image).unwrap().tag, "v1");
        let written = plan(
            &app,
            &[ImageUpdate {
                config: image,
                from: None,
                to: "v2".into(),
            }],
            json!({}),
        );
        let after = apply(&app, &written.patch);
        assert_eq!(
            after["spec"]["source"]["kustomize"]["images"],
            json!(["sidecar:1", format!("web={IMAGE}:v2")])
        );
        // Without kustomize.image-name, the image itself is the name, and a missing block is added.
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let bare = json!({"metadata": {"annotations": {}}, "spec": {"source": {"path": "k"}}, "status": {"sourceType": "Kustomize"}});
        let after = apply(&bare, &plan_for(&bare, image, "v3"));
        assert_eq!(
            after["spec"]["source"]["kustomize"]["images"],
            json!([format!("{IMAGE}:v3")])
        );
    }

    fn plan_for(app: &Value, image: &ImageConfig, to: &str) -> Value {
        plan(
            app,
            &[ImageUpdate {
                config: image,
                from: None,
                to: to.into(),
            }],
            json!({}),
        )
        .patch
    }

    #[test]
    fn multi_source_applications_update_every_source_carrying_the_parameter() {
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = json!({"metadata": {"annotations": {}}, "spec": {"sources": [
            {"repoURL": "values", "ref": "values"},
            {"chart": "web", "helm": {"parameters": [{"name": "image.tag", "value": "1"}]}},
            {"chart": "web2", "helm": {"parameters": [{"name": "image.tag", "value": "1"}]}}]},
            "status": {"sourceTypes": ["Directory", "Helm", "Helm"]}});
        let written = plan(
            &app,
            &[ImageUpdate {
                config: image,
                from: None,
                to: "2".into(),
            }],
            json!({}),
        );
        assert_eq!(
            written.targets[0],
            vec![
                "spec.sources[1] (helm)".to_string(),
                "spec.sources[2] (helm)".to_string()
            ]
        );
        let after = apply(&app, &written.patch);
        assert_eq!(
            after["spec"]["sources"][1]["helm"]["parameters"][0]["value"],
            "2"
        );
        assert_eq!(
            after["spec"]["sources"][2]["helm"]["parameters"][0]["value"],
            "2"
        );
        assert_eq!(
            after["spec"]["sources"][0],
            json!({"repoURL": "values", "ref": "values"})
        );
        // None carries it: the first Helm or Kustomize source gets it.
        let app = json!({"metadata": {"annotations": {}}, "spec": {"sources": [
            {"repoURL": "values", "ref": "values"}, {"chart": "web"}]}});
        let written = plan(
            &app,
            &[ImageUpdate {
                config: image,
                from: None,
                to: "2".into(),
            }],
            json!({}),
        );
        assert_eq!(
            written.targets[0],
            vec!["spec.sources[1] (helm)".to_string()]
        );
        let after = apply(&app, &written.patch);
        assert_eq!(
            after["spec"]["sources"][1]["helm"]["parameters"][1],
            json!({"name": "image.tag", "value": "2", "forceString": true})
        );
    }

    #[test]
    fn the_current_tag_comes_from_the_spec_and_only_then_from_status() {
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        let mut app = seed_app();
        app["status"]["summary"]["images"] = json!([format!("{IMAGE}:20250824-000000")]);
        assert_eq!(current(&app, image).unwrap().tag, "20250825-120000");
        app["spec"]["source"]["helm"]["parameters"] = json!([]);
        assert_eq!(
            current(&app, image),
            Some(Current {
                tag: "20250824-000000".into(),
                digest: None,
                from_status: true
            })
        );
        app["status"]["summary"]["images"] = json!(["other/image:1"]);
        assert_eq!(current(&app, image), None);
        app["spec"]["source"]["helm"]["parameters"] =
            json!([{"name": "image.tag", "value": "latest@sha256:abc"}]);
        assert_eq!(
            current(&app, image),
            Some(Current {
                tag: "latest".into(),
                digest: Some("sha256:abc".into()),
                from_status: false
            })
        );
    }

    #[test]
    fn applications_we_must_not_patch_get_a_reason() {
        let mut app = seed_app();
        assert_eq!(app_skip_reason(&app, &seed_config()), None);
        let git = config(&[
            ("image-list", IMAGE),
            ("write-back-method", "git:secret:argocd/creds"),
        ]);
        assert!(
            app_skip_reason(&app, &git)
                .unwrap()
                .contains("not supported yet")
        );
        app["metadata"]["ownerReferences"] = json!([{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": "set", "uid": "u"}]);
        assert!(
            app_skip_reason(&app, &seed_config())
                .unwrap()
                .contains("ApplicationSet `set`")
        );
        let directory = json!({"metadata": {"name": "d", "namespace": "argocd"}, "spec": {"source": {"path": "manifests"}}, "status": {"sourceType": "Directory"}});
        assert_eq!(
            app_skip_reason(&directory, &seed_config()).unwrap(),
            "skipping app 'argocd/d' of type 'Directory' because it's not of supported source type"
        );
    }

    #[test]
    fn the_reported_source_type_wins_over_the_spec() {
        let app = json!({"spec": {"source": {"path": "x", "helm": {}}}, "status": {"sourceType": "Kustomize"}});
        assert_eq!(sources(&app)[0].kind, SourceKind::Kustomize);
        let app = json!({"spec": {"source": {"chart": "c"}}});
        assert_eq!(sources(&app)[0].kind, SourceKind::Helm);
    }

    #[test]
    fn references_split_into_name_tag_and_digest() {
        let table = [
            (
                "r.example.com:5000/a/b:1.0",
                ("r.example.com:5000/a/b", Some("1.0"), None),
            ),
            ("a/b@sha256:x", ("a/b", None, Some("sha256:x"))),
            ("a/b:t@sha256:x", ("a/b", Some("t"), Some("sha256:x"))),
            ("localhost:5000/b", ("localhost:5000/b", None, None)),
        ];
        for (reference, expected) in table {
            assert_eq!(split_reference(reference), expected, "{reference}");
        }
        assert!(runs_image(&seed_app(), IMAGE));
        assert!(!runs_image(
            &seed_app(),
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/other"
        ));
    }
}
