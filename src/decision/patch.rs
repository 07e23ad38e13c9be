//! The JSON patch that carries a decision out, computed without I/O from where each image
//! lives ([`crate::application::sources`]).
//!
//! The patch touches only the entries we manage (one Helm parameter list or Kustomize image
//! list per source), and every list it rewrites is guarded by a `test` of the list as it was
//! read, as are the Image Updater annotations the decision came from. A concurrent edit to
//! those makes the API server refuse the patch (422), so the caller re-reads and decides
//! again; an edit to anything else survives because the patch never mentions it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::{
    self, AUDIT_ANNOTATION, AppConfig, HelmTarget, ImageConfig, ImageRef, PluginTarget, WriteBack,
};
use crate::application::app::Application;
use crate::application::audit::Place;
use crate::application::identity::Identity;
use crate::application::sources::{
    Source, SourceKind, kustomize_entry_name, kustomize_images, kustomize_name, parameters,
    plugin_env,
};
use crate::application::view::AppView;
use crate::policy::TagRef;

/// Why a whole Application is left alone, or `None`.
pub fn app_skip_reason(app: &AppView<'_>, config: &AppConfig) -> Option<String> {
    let Identity { namespace, name } = app.identity;
    match &config.write_back {
        Err(e) => return Some(format!("invalid write-back configuration: {e}")),
        Ok(WriteBack::Git { .. } | WriteBack::Argocd) => {}
    }
    let all = app.sources();
    // Plugin sources are written only through an ImageUpdater object's plugin targets.
    let plugin_targets = config
        .images
        .iter()
        .any(|i| i.config.as_ref().is_ok_and(|c| c.plugin.is_some()));
    if !all.iter().any(|s| match s.kind {
        SourceKind::Helm | SourceKind::Kustomize => true,
        SourceKind::Plugin => plugin_targets,
        SourceKind::Directory => false,
    }) {
        let kind = all.first().map_or("Directory", |s| s.kind.name());
        // Image Updater's own wording, which users grep their logs for.
        return Some(format!(
            "skipping app '{namespace}/{name}' of type '{kind}' because it's not of supported source type"
        ));
    }
    None
}

/// One image to move: its configuration, the value to write, and the sources (indexes into
/// [`crate::application::sources`]) it goes to.
#[derive(Debug, Clone)]
pub struct ImageUpdate<'a> {
    pub config: &'a ImageConfig,
    pub to: TagRef,
    pub sources: Vec<usize>,
}

/// The computed write: a JSON patch whose every write is guarded by a `test`.
#[derive(Debug, Clone, PartialEq)]
pub struct WritePlan {
    pub patch: Value,
    /// The audit record the patch writes: `{time, eventId, images: [{alias, image, from, to}]}`.
    pub audit: Value,
    /// What the plan moves, typed: what a commit message and a change branch are made of.
    pub changes: Vec<ImageChange>,
}

/// One image a plan moves, from what to what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageChange {
    /// The image's alias in the configuration, if it has one.
    pub alias: Option<String>,
    pub image: ImageRef,
    pub from: Option<String>,
    pub to: Option<String>,
    /// When ECR received the image written, when known.
    pub pushed: Option<time::OffsetDateTime>,
    /// ECR's digest of the image written, when known.
    pub digest: Option<String>,
}

/// The audit record a plan writes into the Application: when, for which event, and what it
/// moves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    /// RFC 3339.
    pub time: String,
    pub event_id: String,
    pub changes: Vec<ImageChange>,
}

impl Audit {
    fn record(&self) -> Value {
        let images: Vec<Value> = self
            .changes
            .iter()
            .map(|c| {
                let pushed = c.pushed.and_then(|t| t.format(&Rfc3339).ok());
                let mut image = json!({"alias": c.alias, "image": c.image.to_string(), "from": c.from, "to": c.to, "pushed": pushed});
                if let Some(digest) = &c.digest {
                    image["digest"] = json!(digest);
                }
                image
            })
            .collect();
        json!({"time": self.time, "eventId": self.event_id, "images": images})
    }
}

impl WritePlan {
    /// The patch without the audit annotation, whose timestamp differs on every attempt:
    /// what tells "the same patch refused again" apart from a new decision.
    pub fn content(&self) -> Vec<&Value> {
        let audit = format!("/metadata/annotations/{}", escape_pointer(AUDIT_ANNOTATION));
        self.patch
            .as_array()
            .map(|ops| {
                ops.iter()
                    .filter(|op| {
                        op["path"] != audit.as_str() && op["path"] != "/metadata/annotations"
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The JSON pointers of what the patch writes (not what it only tests).
    pub fn written_paths(&self) -> Vec<String> {
        self.patch
            .as_array()
            .map(|ops| {
                ops.iter()
                    .filter(|op| op["op"] != "test")
                    .filter_map(|op| op["path"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Sets a plugin environment variable, adding it if absent (Image Updater's `AddEnvEntry`).
fn set_env(list: &mut Vec<Value>, name: &str, value: &str) {
    match list.iter_mut().find(|e| e["name"] == name) {
        Some(entry) => entry["value"] = json!(value),
        None => list.push(json!({"name": name, "value": value})),
    }
}

/// Image Updater rewrites every parameter of the managed name, not only the first.
fn set_parameter(list: &mut Vec<Value>, name: &str, value: &str) {
    let mut found = false;
    for entry in list.iter_mut().filter(|p| p["name"] == name) {
        entry["value"] = json!(value);
        entry["forceString"] = json!(true);
        found = true;
    }
    if !found {
        list.push(json!({"name": name, "value": value, "forceString": true}));
    }
}

pub fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Builds the patch for all of one Application's updates, plus the audit annotation.
///
/// Every write is guarded by a `test` of what it replaces, or, where it creates something
/// that was absent when read (a `parameters` list, a `helm` or `kustomize` block, the
/// annotations map), of the object it is created in: JSON patch has no "test absent", and a
/// plain `add` would silently replace what someone created meanwhile.
pub fn plan(read: &Application<'_>, updates: &[ImageUpdate<'_>], audit: Audit) -> WritePlan {
    // The raw object: the guards test what was read exactly.
    let (app, all) = (read.raw, read.view.sources());
    let lists = rewritten_lists(all, updates);
    let mut ops = guarded_replacements(app, all, &lists);
    let audit_path = format!("/metadata/annotations/{}", escape_pointer(AUDIT_ANNOTATION));
    let mut audit_record = audit.record();
    // Where each value went: what a rollout check tells "still asked for" by.
    if let Some(images) = audit_record["images"].as_array_mut() {
        for image in images {
            let written = image["image"]
                .as_str()
                .and_then(|name| lists.places.get(name))
                .filter(|places| !places.is_empty());
            if let Some(places) = written {
                image["at"] = json!(places);
            }
        }
    }
    // Other images' last writes outlive this one: a rollback of one is judged against it.
    if let Some(previous) = &read.audit {
        let moved: Vec<String> = audit.changes.iter().map(|c| c.image.to_string()).collect();
        let set_by = crate::decision::rollback::lists_manager(read)
            .filter(|manager| manager != crate::decision::rollback::OUR_MANAGER);
        let earlier = previous.carried_forward(&moved, set_by.as_deref());
        if !earlier.is_empty() {
            audit_record["earlier"] = Value::Array(earlier);
        }
    }
    let audit_text = Value::String(audit_record.to_string());
    if app["metadata"]["annotations"].is_object() {
        ops.push(json!({"op": "add", "path": audit_path, "value": audit_text}));
    } else {
        // No annotations map to test against: the resourceVersion stands for "still absent".
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": app["metadata"]["resourceVersion"]}));
        let mut map = Map::new();
        map.insert(AUDIT_ANNOTATION.into(), audit_text);
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": map}));
    }
    WritePlan {
        patch: Value::Array(ops),
        audit: audit_record,
        changes: audit.changes,
    }
}

/// Working copies of every list a plan rewrites, by source index (`None`: left alone), and
/// where each image's values went, by image.
struct Lists {
    helm: Vec<Option<Vec<Value>>>,
    kustomize: Vec<Option<Vec<Value>>>,
    plugin: Vec<Option<Vec<Value>>>,
    places: BTreeMap<String, Vec<Place>>,
}

/// Every source's lists with the updates written into them.
fn rewritten_lists(all: &[Source<'_>], updates: &[ImageUpdate<'_>]) -> Lists {
    let mut helm: Vec<Option<Vec<Value>>> = vec![None; all.len()];
    let mut kustomize: Vec<Option<Vec<Value>>> = vec![None; all.len()];
    let mut plugin: Vec<Option<Vec<Value>>> = vec![None; all.len()];
    let mut places: BTreeMap<String, Vec<Place>> = BTreeMap::new();
    for update in updates {
        let image = update.config;
        let reference = image.image.to_string();
        let to = update.to.to_string();
        let written = places.entry(reference.clone()).or_default();
        for &index in &update.sources {
            let Some(source) = all.get(index) else {
                continue;
            };
            let mut place = |block: &str, name: &str, value: &str| {
                written.push(Place {
                    list: format!("{}/{block}", source.pointer),
                    name: name.to_string(),
                    value: value.to_string(),
                });
            };
            match source.kind {
                SourceKind::Helm => {
                    let list = helm[index].get_or_insert_with(|| parameters(source.value).to_vec());
                    match &image.helm {
                        HelmTarget::NameAndTag { name, tag } => {
                            set_parameter(list, name, &reference);
                            set_parameter(list, tag, &to);
                            place("helm/parameters", name, &reference);
                            place("helm/parameters", tag, &to);
                        }
                        HelmTarget::Spec { param } => {
                            let value = format!("{reference}:{to}");
                            set_parameter(list, param, &value);
                            place("helm/parameters", param, &value);
                        }
                    }
                }
                SourceKind::Kustomize => {
                    let list = kustomize[index]
                        .get_or_insert_with(|| kustomize_images(source.value).to_vec());
                    let (name, entry) = set_kustomize_image(list, image, &reference, &to);
                    place("kustomize/images", &name, &entry);
                }
                SourceKind::Plugin => {
                    let list =
                        plugin[index].get_or_insert_with(|| plugin_env(source.value).to_vec());
                    if let Some(target) = &image.plugin {
                        for (name, value) in set_plugin_env(list, target, &reference, &to) {
                            place("plugin/env", &name, &value);
                        }
                    }
                }
                SourceKind::Directory => {}
            }
        }
    }
    Lists {
        helm,
        kustomize,
        plugin,
        places,
    }
}

/// A Kustomize `images` entry for the image, replacing the one with its name; returns the
/// name and the entry written.
fn set_kustomize_image(
    list: &mut Vec<Value>,
    image: &ImageConfig,
    reference: &str,
    to: &str,
) -> (String, String) {
    let name = kustomize_name(image);
    let entry = if name == reference {
        format!("{reference}:{to}")
    } else {
        format!("{name}={reference}:{to}")
    };
    match list
        .iter_mut()
        .find(|e| e.as_str().is_some_and(|s| kustomize_entry_name(s) == name))
    {
        Some(existing) => *existing = json!(entry),
        None => list.push(json!(entry)),
    }
    (name, entry)
}

/// A plugin's environment: the whole image in its spec variable, or its name and tag;
/// returns each variable set and its value.
fn set_plugin_env(
    list: &mut Vec<Value>,
    target: &PluginTarget,
    reference: &str,
    to: &str,
) -> Vec<(String, String)> {
    let set: Vec<(String, String)> = match (&target.spec, &target.name, &target.tag) {
        (Some(spec), _, _) => vec![(spec.clone(), format!("{reference}:{to}"))],
        (None, name, tag) => name
            .iter()
            .map(|name| (name.clone(), reference.to_string()))
            .chain(tag.iter().map(|tag| (tag.clone(), to.to_string())))
            .collect(),
    };
    for (name, value) in &set {
        set_env(list, name, value);
    }
    set
}

/// The JSON patch's operations before the audit record: a `test` of every input the
/// decision read (the Image Updater annotations, each list or the block it goes into), then
/// the replacement.
fn guarded_replacements(app: &Value, all: &[Source<'_>], lists: &Lists) -> Vec<Value> {
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
            ("helm", "parameters", &lists.helm[index]),
            ("kustomize", "images", &lists.kustomize[index]),
            ("plugin", "env", &lists.plugin[index]),
        ] {
            let Some(list) = list else { continue };
            let block_pointer = format!("{}/{block}", source.pointer);
            let list_pointer = format!("{block_pointer}/{field}");
            match source.value.get(block) {
                Some(existing) if existing.get(field).is_some() => {
                    ops.push(json!({"op": "test", "path": list_pointer, "value": existing[field]}));
                    ops.push(json!({"op": "replace", "path": list_pointer, "value": list}));
                }
                Some(existing) if existing.is_object() => {
                    ops.push(json!({"op": "test", "path": block_pointer, "value": existing}));
                    ops.push(json!({"op": "add", "path": list_pointer, "value": list}));
                }
                _ => {
                    ops.push(json!({"op": "test", "path": source.pointer, "value": source.value}));
                    ops.push(json!({"op": "add", "path": block_pointer, "value": {field: list}}));
                }
            }
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::application::app::Application as Read;
    use crate::application::audit::AuditRecord;
    use crate::application::sources::{runs_image, sources, split_reference};
    use argocd_ecr_updater_standins::fixtures::{Application, SEED_IMAGE as IMAGE};
    use std::collections::BTreeMap;

    const WORKER: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/worker";

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

    /// The seed's Application with one annotation of someone else's.
    fn seed_app() -> Value {
        Application::seed()
            .annotation("other/annotation", "x")
            .with(|app| {
                app["metadata"]["resourceVersion"] = json!("7");
                let params = &mut app["spec"]["source"]["helm"]["parameters"];
                if let Some(list) = params.as_array_mut() {
                    list.push(json!({"name": "replicas", "value": "2"}));
                }
            })
            .build()
    }

    fn apply(app: &Value, patch: &Value) -> Result<Value, json_patch::PatchError> {
        let mut doc = app.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
        json_patch::patch(&mut doc, &patch)?;
        Ok(doc)
    }

    /// The patch that moves `image` to `to` in every source `targets` picks.
    fn plan_for(app: &Value, image: &ImageConfig, to: &str) -> Value {
        let sources = AppView::of(app)
            .targets(image)
            .targets
            .iter()
            .map(|t| t.index)
            .collect();
        plan(
            &Read::of(app),
            &[ImageUpdate {
                config: image,
                to: TagRef::from(to),
                sources,
            }],
            Audit {
                changes: vec![ImageChange {
                    alias: image.alias.clone(),
                    image: image.image.clone(),
                    from: None,
                    to: Some(to.to_string()),
                    pushed: None,
                    digest: None,
                }],
                ..Audit::default()
            },
        )
        .patch
    }

    fn current(app: &Value, image: &ImageConfig) -> Option<TagRef> {
        AppView::of(app)
            .targets(image)
            .targets
            .first()?
            .current
            .clone()
    }

    #[test]
    fn the_seed_application_gets_its_tag_parameter_replaced_in_place() {
        let app = seed_app();
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        let found = AppView::of(&app).targets(image);
        assert!(!found.fallback);
        assert_eq!(found.targets.len(), 1);
        assert_eq!(
            found.targets[0].current,
            Some(TagRef::tag("20250825-120000"))
        );
        let after = apply(&app, &plan_for(&app, image, "20250825-153012")).unwrap();
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
        let patch = plan_for(&app, image, "20250825-153012");
        let mut raced = app.clone();
        raced["spec"]["source"]["helm"]["parameters"][1]["value"] = json!("20250826-000000");
        assert!(apply(&raced, &patch).is_err());
        let mut raced = app.clone();
        raced["metadata"]["annotations"]["argocd-image-updater.argoproj.io/image-list"] =
            json!("changed");
        assert!(apply(&raced, &patch).is_err());
        // An edit elsewhere does not stop it and is kept.
        let mut raced = app.clone();
        raced["spec"]["syncPolicy"] = json!({"automated": {}});
        let after = apply(&raced, &patch).unwrap();
        assert_eq!(after["spec"]["syncPolicy"], json!({"automated": {}}));
    }

    #[test]
    fn creating_what_was_absent_is_refused_when_someone_created_it_meanwhile() {
        let cfg = config(&[
            ("image-list", &format!("a={IMAGE}")),
            ("a.force-update", "true"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let base = |source: Value, annotations: bool| {
            let mut app = json!({"metadata": {"name": "a", "namespace": "argocd", "resourceVersion": "5"},
                "spec": {"source": source}, "status": {"sourceType": "Helm"}});
            if annotations {
                app["metadata"]["annotations"] = json!({});
            }
            app
        };
        // (shape as read, the concurrent edit, what must survive or refuse)
        let concurrent_list = json!([{"name": "other", "value": "1"}]);
        type Race<'a> = Box<dyn Fn(&mut Value) + 'a>;
        let table: Vec<(&str, Value, bool, Race)> = vec![
            (
                "no parameters list in an existing helm block",
                json!({"chart": "web", "helm": {"valueFiles": ["v.yaml"]}}),
                true,
                Box::new(|app: &mut Value| {
                    app["spec"]["source"]["helm"]["parameters"] = concurrent_list.clone()
                }),
            ),
            (
                "no helm block at all",
                json!({"chart": "web"}),
                true,
                Box::new(|app: &mut Value| {
                    app["spec"]["source"]["helm"] = json!({"parameters": concurrent_list.clone()})
                }),
            ),
            (
                "no annotations map",
                json!({"chart": "web", "helm": {"parameters": []}}),
                false,
                Box::new(|app: &mut Value| {
                    app["metadata"]["annotations"] = json!({"team": "web"});
                    app["metadata"]["resourceVersion"] = json!("6");
                }),
            ),
        ];
        for (shape, source, annotations, race) in table {
            let app = base(source, annotations);
            let patch = plan_for(&app, image, "2.0.0");
            let mut unchanged = apply(&app, &patch).unwrap_or_else(|e| panic!("{shape}: {e}"));
            assert_eq!(
                unchanged["spec"]["source"]["helm"]["parameters"][0]["value"]
                    .as_str()
                    .or_else(
                        || unchanged["spec"]["source"]["helm"]["parameters"][1]["value"].as_str()
                    ),
                Some(IMAGE),
                "{shape}"
            );
            unchanged = app.clone();
            race(&mut unchanged);
            assert!(
                apply(&unchanged, &patch).is_err(),
                "{shape}: a concurrent create was overwritten"
            );
        }
    }

    #[test]
    fn every_parameter_of_the_managed_name_is_rewritten_as_image_updater_does() {
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = json!({"metadata": {"annotations": {}}, "spec": {"source": {"chart": "web", "helm": {"parameters": [
            {"name": "image.name", "value": IMAGE},
            {"name": "image.tag", "value": "1.0.0"},
            {"name": "image.tag", "value": "0.9.0"}]}}}});
        let after = apply(&app, &plan_for(&app, image, "1.1.0")).unwrap();
        let params = &after["spec"]["source"]["helm"]["parameters"];
        assert_eq!(params[1]["value"], "1.1.0");
        assert_eq!(params[2]["value"], "1.1.0");
        assert_eq!(params.as_array().unwrap().len(), 3);
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
        assert_eq!(current(&app, image), Some(TagRef::tag("1.0.0")));
        let after = apply(&app, &plan_for(&app, image, "1.1.0")).unwrap();
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
        assert_eq!(current(&app, image), Some(TagRef::tag("v1")));
        let after = apply(&app, &plan_for(&app, image, "v2")).unwrap();
        assert_eq!(
            after["spec"]["source"]["kustomize"]["images"],
            json!(["sidecar:1", format!("web={IMAGE}:v2")])
        );
        // Without kustomize.image-name, the image itself is the name, and a missing block is added.
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let bare = json!({"metadata": {"annotations": {}}, "spec": {"source": {"path": "k"}}, "status": {"sourceType": "Kustomize"}});
        let after = apply(&bare, &plan_for(&bare, image, "v3")).unwrap();
        assert_eq!(
            after["spec"]["source"]["kustomize"]["images"],
            json!([format!("{IMAGE}:v3")])
        );
    }

    #[test]
    fn the_record_says_where_each_value_went_and_the_patched_spec_holds_it_there() {
        let kustomize = config(&[
            ("image-list", &format!("a={IMAGE}")),
            ("a.kustomize.image-name", "web"),
        ]);
        let spec_param = config(&[
            ("image-list", &format!("a={IMAGE}")),
            ("a.helm.image-spec", "app.image"),
        ]);
        let multi = config(&[("image-list", &format!("a={IMAGE}"))]);
        let cases: Vec<(&str, AppConfig, Value, usize)> = vec![
            ("helm name and tag", seed_config(), seed_app(), 2),
            (
                "a helm spec parameter",
                spec_param,
                json!({"metadata": {"annotations": {}}, "spec": {"source": {"chart": "web", "helm": {"parameters": [
                {"name": "app.image", "value": format!("{IMAGE}:1.0.0")}]}}}}),
                1,
            ),
            (
                "a kustomize image",
                kustomize,
                json!({"metadata": {"annotations": {}}, "spec": {"source": {"path": "k", "kustomize": {"images": [
                "sidecar:1", format!("web={IMAGE}:v1")]}}}, "status": {"sourceType": "Kustomize"}}),
                1,
            ),
            (
                "one source of several",
                multi,
                multi_source("1.0.0", "9.9.9"),
                2,
            ),
        ];
        for (case, cfg, app, places) in cases {
            let image = cfg.images[0].config.as_ref().unwrap();
            let after = apply(&app, &plan_for(&app, image, "2.0.0")).unwrap();
            let text = after["metadata"]["annotations"][AUDIT_ANNOTATION]
                .as_str()
                .unwrap();
            let mut json: Value = serde_json::from_str(text).unwrap();
            json["time"] = json!("2026-12-03T10:00:00Z");
            let record = AuditRecord::from_json(text, json).unwrap();
            let written = &record.images[0];
            assert_eq!(written.places.len(), places, "{case}: {:?}", written.places);
            assert_eq!(written.asked_by(&after), Some(true), "{case}");
            assert_eq!(
                written.asked_by(&app),
                Some(false),
                "{case}: before the write"
            );
        }
    }

    fn multi_source(web_tag: &str, worker_tag: &str) -> Value {
        json!({"metadata": {"annotations": {}}, "spec": {"sources": [
            {"repoURL": "values", "ref": "values"},
            {"chart": "web", "helm": {"parameters": [{"name": "image.name", "value": IMAGE}, {"name": "image.tag", "value": web_tag}]}},
            {"chart": "worker", "helm": {"parameters": [{"name": "image.name", "value": WORKER}, {"name": "image.tag", "value": worker_tag}]}},
            {"chart": "redis", "helm": {"parameters": [{"name": "image.tag", "value": "7.2"}]}}]},
            "status": {"sourceTypes": ["Directory", "Helm", "Helm", "Helm"]}})
    }

    #[test]
    fn a_multi_source_image_goes_only_to_the_sources_that_name_it() {
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = multi_source("1.0.0", "9.9.9");
        let found = AppView::of(&app).targets(image);
        assert!(!found.fallback);
        assert_eq!(
            found.targets.iter().map(|t| t.index).collect::<Vec<_>>(),
            vec![1]
        );
        let after = apply(&app, &plan_for(&app, image, "2.0.0")).unwrap();
        assert_eq!(
            after["spec"]["sources"][1]["helm"]["parameters"][1]["value"],
            "2.0.0"
        );
        assert_eq!(
            after["spec"]["sources"][2]["helm"]["parameters"][1]["value"],
            "9.9.9"
        );
        assert_eq!(
            after["spec"]["sources"][3]["helm"]["parameters"],
            json!([{"name": "image.tag", "value": "7.2"}])
        );
        assert_eq!(
            after["spec"]["sources"][0],
            json!({"repoURL": "values", "ref": "values"})
        );
    }

    #[test]
    fn each_source_naming_the_image_keeps_its_own_current_tag() {
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let mut app = multi_source("1.0.0", "9.9.9");
        app["spec"]["sources"][2]["helm"]["parameters"][0]["value"] = json!(IMAGE);
        let found = AppView::of(&app).targets(image);
        let currents: Vec<_> = found
            .targets
            .iter()
            .map(|t| (t.index, t.current.clone()))
            .collect();
        assert_eq!(
            currents,
            vec![
                (1, Some(TagRef::tag("1.0.0"))),
                (2, Some(TagRef::tag("9.9.9")))
            ]
        );
    }

    #[test]
    fn when_no_source_names_the_image_the_first_helm_or_kustomize_source_gets_it() {
        let cfg = config(&[("image-list", &format!("a={IMAGE}"))]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = json!({"metadata": {"annotations": {}}, "spec": {"sources": [
            {"repoURL": "values", "ref": "values"}, {"chart": "web"}, {"chart": "other"}]}});
        let found = AppView::of(&app).targets(image);
        assert!(found.fallback);
        assert_eq!(
            found.targets.iter().map(|t| t.index).collect::<Vec<_>>(),
            vec![1]
        );
        let after = apply(&app, &plan_for(&app, image, "2")).unwrap();
        assert_eq!(
            after["spec"]["sources"][1]["helm"]["parameters"][1],
            json!({"name": "image.tag", "value": "2", "forceString": true})
        );
        assert!(after["spec"]["sources"][2].get("helm").is_none());
    }

    #[test]
    fn the_current_tag_comes_from_the_spec_and_only_then_from_status() {
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        let mut app = seed_app();
        app["status"]["summary"]["images"] = json!([format!("{IMAGE}:20250824-000000")]);
        assert_eq!(current(&app, image), Some(TagRef::tag("20250825-120000")));
        app["spec"]["source"]["helm"]["parameters"] =
            json!([{"name": "image.repository", "value": IMAGE}]);
        let found = AppView::of(&app).targets(image);
        assert_eq!(
            found.targets[0].current,
            Some(TagRef::tag("20250824-000000"))
        );
        app["status"]["summary"]["images"] = json!(["other/image:1"]);
        assert_eq!(current(&app, image), None);
        app["spec"]["source"]["helm"]["parameters"] = json!([{"name": "image.repository", "value": IMAGE},
            {"name": "image.tag", "value": "latest@sha256:abc"}]);
        assert_eq!(
            current(&app, image),
            Some(TagRef::from("latest@sha256:abc"))
        );
    }

    #[test]
    fn a_kustomize_app_runs_its_image_under_the_kustomize_image_name() {
        let cfg = config(&[
            ("image-list", &format!("a={IMAGE}")),
            ("a.kustomize.image-name", "nginx"),
        ]);
        let image = cfg.images[0].config.as_ref().unwrap();
        let app = json!({"status": {"summary": {"images": ["nginx:1.25"]}}});
        assert!(runs_image(&app, image));
        let app = json!({"status": {"summary": {"images": [format!("{IMAGE}:1")]}}});
        assert!(runs_image(&app, image));
        let app = json!({"status": {"summary": {"images": ["redis:7"]}}});
        assert!(!runs_image(&app, image));
    }

    #[test]
    fn applications_we_must_not_patch_get_a_reason() {
        let app = seed_app();
        assert_eq!(app_skip_reason(&AppView::of(&app), &seed_config()), None);
        let git = config(&[
            ("image-list", IMAGE),
            ("write-back-method", "git:secret:argocd/creds"),
        ]);
        assert_eq!(app_skip_reason(&AppView::of(&app), &git), None);
        let directory = json!({"metadata": {"name": "d", "namespace": "argocd"}, "spec": {"source": {"path": "manifests"}}, "status": {"sourceType": "Directory"}});
        assert_eq!(
            app_skip_reason(&AppView::of(&directory), &seed_config()).unwrap(),
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
    fn the_content_of_a_plan_leaves_out_the_audit_timestamp() {
        let app = seed_app();
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        let sources = vec![0];
        let at = |time: &str| {
            plan(
                &Read::of(&app),
                &[ImageUpdate {
                    config: image,
                    to: TagRef::tag("20250825-153012"),
                    sources: sources.clone(),
                }],
                Audit {
                    time: time.into(),
                    ..Audit::default()
                },
            )
        };
        let (first, second) = (at("2025-08-25T15:30:13Z"), at("2025-08-25T15:30:14Z"));
        assert_ne!(first.patch, second.patch);
        assert_eq!(first.content(), second.content());
        assert_eq!(
            first.written_paths(),
            vec![
                "/spec/source/helm/parameters".to_string(),
                "/metadata/annotations/argocd-ecr-updater.io~1last-update".to_string()
            ]
        );
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
        let cfg = seed_config();
        let image = cfg.images[0].config.as_ref().unwrap();
        assert!(runs_image(&seed_app(), image));
        let mut other = seed_app();
        other["status"]["summary"]["images"] = json!([format!("{WORKER}:1")]);
        assert!(!runs_image(&other, image));
    }
}
