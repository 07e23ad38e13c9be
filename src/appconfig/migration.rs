//! Annotations into an `ImageUpdater` object (pure): the reverse of Image Updater's own
//! migration guide, for `argocd-ecr-updater-cli migrate`. The object must be one the API
//! server accepts (the CRD's patterns, CEL rules and unique aliases) and must decide as the
//! annotations do; where a setting has no place in the object's schema, the Application keeps
//! its annotations through a `useAnnotations: true` ref and the reason is given.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::appconfig::annotations::{OWN_PREFIX, PREFIX, go_parse_bool};
use crate::appconfig::cosign_key::KeyRef;
use crate::appconfig::imageupdater::{
    ApplicationRef, GROUP, GitConfig, ImageSpec, KustomizeTarget, ManifestTargets, NameTagSpec,
    UpdateSettings, VERSION, WriteBackSettings,
};

/// An Application as `migrate` reads it.
#[derive(Debug, Clone)]
pub struct Annotated {
    pub name: String,
    pub annotations: BTreeMap<String, String>,
    /// `Helm`, `Kustomize`, … as Argo CD reports it: an object names one manifest target
    /// per image, annotations may carry both the Helm and the Kustomize keys.
    pub source_type: Option<String>,
    /// The Application's `spec.source.repoURL`, which decides a pull request's provider
    /// when no `git-repository` annotation names another repository.
    pub repository: Option<String>,
}

/// The migrated object, and what was kept on annotations and why.
#[derive(Debug, Clone)]
pub struct Migration {
    pub object: Value,
    pub notes: Vec<String>,
}

/// Why an Application's annotations cannot be migrated: Image Updater itself would refuse them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Application `{application}`: {problem}")]
pub struct MigrationError {
    pub application: String,
    pub problem: String,
}

/// One `applicationRef` per Application (its exact name), images and settings as annotated.
pub fn from_annotations(
    name: &str,
    namespace: &str,
    applications: &[Annotated],
) -> Result<Migration, Vec<MigrationError>> {
    let mut refs = Vec::new();
    let mut notes = Vec::new();
    let mut errors = Vec::new();
    for app in applications {
        match reference(app, namespace) {
            Ok(Some((reference, note))) => {
                refs.push(reference);
                notes.extend(note);
            }
            Ok(None) => {}
            Err(problem) => errors.push(MigrationError {
                application: app.name.clone(),
                problem,
            }),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let object = json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "ImageUpdater",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"applicationRefs": refs}});
    Ok(Migration { object, notes })
}

/// Reads annotations as Image Updater does: trimmed, and blank where it counts as unset.
struct Reader<'a> {
    annotations: &'a BTreeMap<String, String>,
}

impl Reader<'_> {
    fn raw(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(&format!("{PREFIX}{key}"))
            .map(String::as_str)
    }

    /// A value that is unset when blank.
    fn set(&self, key: &str) -> Option<String> {
        self.raw(key)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    }

    fn per_image_or_app(&self, alias_key: &str, key: &str) -> Option<String> {
        self.set(&format!("{alias_key}.{key}"))
            .or_else(|| self.set(key))
    }

    fn own(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(&format!("{OWN_PREFIX}{key}"))
            .map(String::as_str)
    }
}

fn reference(
    app: &Annotated,
    namespace: &str,
) -> Result<Option<(ApplicationRef, Option<String>)>, String> {
    let read = Reader {
        annotations: &app.annotations,
    };
    let Some(list) = read.raw("image-list") else {
        return Ok(None);
    };
    if let Some(reason) = kept_on_annotations(&read, namespace) {
        let reference = ApplicationRef {
            name_pattern: app.name.clone(),
            use_annotations: Some(true),
            ..ApplicationRef::default()
        };
        let note = format!(
            "Application `{}` keeps its annotations (`useAnnotations: true`): {reason}",
            app.name
        );
        return Ok(Some((reference, Some(note))));
    }
    let entries: Vec<(Option<&str>, &str)> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| match entry.split_once('=') {
            Some((alias, image)) => (Some(alias.trim()), image.trim()),
            None => (None, entry),
        })
        .collect();
    let aliases = object_aliases(&entries);
    let images = entries
        .iter()
        .zip(aliases)
        .map(|((alias, image_name), object_alias)| {
            image(&read, app, namespace, *alias, image_name, object_alias)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let write_back = write_back(&read, app);
    // A freeze is read from the Application whatever configures it, so it needs no field.
    let freeze = read.own("freeze").map(|value| {
        format!(
            "Application `{}`: `{OWN_PREFIX}freeze: {value}` stays on the Application, where it holds writes whatever configures it (the object's `metadata.annotations` may carry one for every Application it configures)",
            app.name
        )
    });
    Ok(Some((
        ApplicationRef {
            name_pattern: app.name.clone(),
            write_back_config: (write_back != WriteBackSettings::default()).then_some(write_back),
            images,
            ..ApplicationRef::default()
        },
        freeze,
    )))
}

/// Settings only our own annotations hold and the object's schema has no place for.
fn kept_on_annotations(read: &Reader<'_>, namespace: &str) -> Option<String> {
    let own_keys: Vec<&String> = read
        .annotations
        .keys()
        .filter(|k| k.starts_with(OWN_PREFIX))
        .collect();
    if let Some(key) = own_keys.iter().find(|k| {
        [
            "scan-gate",
            "pin-digest",
            "min-age",
            "hold-on-failure",
            "auto-rollback",
            "signing-profile",
        ]
        .iter()
        .any(|own| k.ends_with(own))
    }) {
        return Some(format!("`{key}` has no ImageUpdater field"));
    }
    for key in own_keys.iter().filter(|k| k.ends_with("cosign-key")) {
        let expressible = KeyRef::parse(&read.annotations[key.as_str()]).is_ok_and(
            |k| matches!(k, KeyRef::KubeSecret { namespace: ns, .. } if ns == namespace),
        );
        if !expressible {
            return Some(format!(
                "`{key}` is not a Secret of namespace `{namespace}`, the only key `imagesVerification.cosignKey` can name"
            ));
        }
    }
    if let Some(mode) = read.own("git-pull-request")
        && !matches!(mode.trim(), "true" | "github" | "gitlab" | "false" | "")
    {
        return Some(format!(
            "`git-pull-request: {mode}` names no pull-request provider"
        ));
    }
    None
}

/// The object's alias for each entry: the CRD allows `[a-zA-Z0-9][a-zA-Z0-9-._]*`, unique in
/// the ref. A `/` becomes `_` (as Image Updater's own per-image annotation keys write it), a
/// name that cannot start as it is gets `image-` before it, a duplicate gets `-2`, `-3`…, and
/// an entry with no alias is `image<n>`, never one of the user's names.
fn object_aliases(entries: &[(Option<&str>, &str)]) -> Vec<String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut wanted: Vec<Option<String>> = Vec::new();
    for (alias, _) in entries {
        wanted.push(alias.filter(|a| !a.is_empty()).map(|alias| {
            let cleaned: String = alias
                .chars()
                .map(|c| if valid(c) { c } else { '_' })
                .collect();
            if cleaned.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                cleaned
            } else {
                format!("image-{cleaned}")
            }
        }));
    }
    let user_names: BTreeSet<String> = wanted.iter().flatten().cloned().collect();
    wanted
        .into_iter()
        .enumerate()
        .map(|(index, name)| {
            let base = name.unwrap_or_else(|| {
                (index..)
                    .map(|n| format!("image{n}"))
                    .find(|n| !user_names.contains(n) && !taken.contains(n))
                    .unwrap_or_default()
            });
            let unique = std::iter::once(base.clone())
                .chain((2..).map(|n| format!("{base}-{n}")))
                .find(|candidate| !taken.contains(candidate))
                .unwrap_or(base);
            taken.insert(unique.clone());
            unique
        })
        .collect()
}

fn image(
    read: &Reader<'_>,
    app: &Annotated,
    namespace: &str,
    alias: Option<&str>,
    image_name: &str,
    object_alias: String,
) -> Result<ImageSpec, String> {
    // Annotation keys use the alias as written, `/` as `_`.
    let key = alias.unwrap_or_default().replace('/', "_");
    let force_update = match read
        .raw(&format!("{key}.force-update"))
        .or_else(|| read.raw("force-update"))
    {
        Some(value) => Some(go_parse_bool(value).ok_or_else(|| {
            format!("force-update `{value}` is not a boolean (Image Updater refuses it too)")
        })?),
        None => None,
    };
    let split = |value: String, keep_blank: bool| -> Vec<String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|p| keep_blank || !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    let settings = UpdateSettings {
        update_strategy: read.per_image_or_app(&key, "update-strategy"),
        force_update,
        allow_tags: read
            .per_image_or_app(&key, "allow-tags")
            .or_else(|| read.per_image_or_app(&key, "tag-match")),
        ignore_tags: read
            .raw(&format!("{key}.ignore-tags"))
            .or_else(|| read.raw("ignore-tags"))
            .map(|v| split(v.to_string(), false)),
        pull_secret: read.per_image_or_app(&key, "pull-secret"),
        platforms: read
            .set(&format!("{key}.platforms"))
            .map(|v| split(v, false))
            .filter(|p| !p.is_empty()),
    };
    let helm = NameTagSpec {
        name: read.set(&format!("{key}.helm.image-name")),
        tag: read.set(&format!("{key}.helm.image-tag")),
        spec: read.set(&format!("{key}.helm.image-spec")),
    };
    let kustomize = read
        .set(&format!("{key}.kustomize.image-name"))
        .map(|name| KustomizeTarget { name: Some(name) });
    let kustomize_app = app.source_type.as_deref() == Some("Kustomize");
    let helm_set = helm != NameTagSpec::default() && !kustomize_app;
    let targets = ManifestTargets {
        helm: helm_set.then_some(helm),
        kustomize: if helm_set { None } else { kustomize },
        plugin: None,
    };
    let verification = read
        .own(&format!("{key}.cosign-key"))
        .or_else(|| read.own("cosign-key"))
        .and_then(|text| KeyRef::parse(text).ok())
        .and_then(|key| match key {
            KeyRef::KubeSecret {
                namespace: ns,
                name,
                key,
            } if ns == namespace => Some(json!({"enabled": true,
                "cosignKey": {"secretName": name, "key": key}})),
            _ => None,
        });
    Ok(ImageSpec {
        alias: object_alias,
        image_name: image_name.to_string(),
        common_update_settings: (settings != UpdateSettings::default()).then_some(settings),
        manifest_targets: (targets != ManifestTargets::default()).then_some(targets),
        images_verification: verification,
    })
}

fn write_back(read: &Reader<'_>, app: &Annotated) -> WriteBackSettings {
    let repository = read.set("git-repository");
    let pull_request = read
        .own("git-pull-request")
        .map(str::trim)
        .filter(|m| matches!(*m, "true" | "github" | "gitlab"))
        .map(|mode| {
            let host_is_gitlab = repository
                .as_deref()
                .or(app.repository.as_deref())
                .and_then(|url| url::Url::parse(url).ok())
                .and_then(|url| url.host_str().map(|h| h.contains("gitlab")))
                .unwrap_or(false);
            let provider = if mode == "gitlab" || (mode == "true" && host_is_gitlab) {
                "gitlab"
            } else {
                "github"
            };
            let labels: Vec<String> = read
                .own("git-pull-request-labels")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            let mut request = json!({ provider: {} });
            if !labels.is_empty() {
                request["labels"] = json!(labels);
            }
            request
        });
    let git = GitConfig {
        repository,
        branch: read.set("git-branch"),
        write_back_target: read.set("write-back-target"),
        pull_request,
    };
    WriteBackSettings {
        method: read.set("write-back-method"),
        git_config: (git != GitConfig::default()).then_some(git),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AppConfig;
    use crate::appconfig::imageupdater::{ImageUpdaterObject, resolve};
    use argocd_ecr_updater_standins::fixtures::Application;
    use argocd_ecr_updater_standins::imageupdaters::ImageUpdaterStore;

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

    const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com";

    fn annotated(name: &str, pairs: &[(&str, &str)], source_type: &str) -> Annotated {
        Annotated {
            name: name.to_string(),
            annotations: pairs
                .iter()
                .map(|(k, v)| {
                    let key = if k.starts_with(OWN_PREFIX) {
                        (*k).to_string()
                    } else {
                        format!("{PREFIX}{k}")
                    };
                    (key, (*v).to_string())
                })
                .collect(),
            source_type: Some(source_type.to_string()),
            repository: Some("https://github.com/barun/invitation.git".to_string()),
        }
    }

    /// What decides: every image's settings (its alias aside, since the object may rename
    /// it) and the write-back.
    fn decisive(config: &AppConfig, kustomize: bool) -> String {
        let images: Vec<String> = config
            .images
            .iter()
            .map(|entry| match &entry.config {
                Ok(c) => format!(
                    "{} {:?} {:?} {:?} force={} {:?} gate={:?} key={:?} kustomize={:?} helm={}",
                    c.image,
                    c.constraint,
                    c.policy,
                    c.platforms,
                    c.force_update,
                    c.plugin,
                    c.scan_gate,
                    c.cosign_key,
                    c.kustomize_image_name,
                    if kustomize {
                        String::new()
                    } else {
                        format!("{:?}", c.helm)
                    },
                ),
                Err(e) => format!("{} error {}", entry.image, e.problem),
            })
            .collect();
        format!("{images:#?} {:?}", config.write_back)
    }

    fn annotation_sets() -> Vec<(
        &'static str,
        Vec<(&'static str, &'static str)>,
        &'static str,
    )> {
        let git = [
            ("write-back-method", "git "),
            ("git-branch", "main"),
            ("git-repository", "https://github.com/barun/invitation.git"),
        ];
        let mut sets = vec![
            (
                "slash-alias",
                vec![
                    (
                        "image-list",
                        "team/api=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("team_api.update-strategy", "newest-build"),
                ],
                "Helm",
            ),
            (
                "underscore-alias",
                vec![(
                    "image-list",
                    "_api=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api:^1.2",
                )],
                "Helm",
            ),
            (
                "duplicate-alias",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api,a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web",
                    ),
                    ("a.helm.image-tag", "tag"),
                ],
                "Helm",
            ),
            (
                "generated-collides",
                vec![(
                    "image-list",
                    "image1=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/x,768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/y",
                )],
                "Helm",
            ),
            (
                "force-true",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("force-update", "True"),
                ],
                "Helm",
            ),
            (
                "force-one",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("a.force-update", "1"),
                ],
                "Helm",
            ),
            (
                "blank-strategy",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("update-strategy", "newest-build"),
                    ("a.update-strategy", ""),
                ],
                "Helm",
            ),
            (
                "filters",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api:~1.0",
                    ),
                    ("a.allow-tags", "regexp:^1\\."),
                    ("ignore-tags", "1.0.1, 1.0.2*"),
                    ("a.platforms", "linux/amd64, linux/arm64"),
                ],
                "Helm",
            ),
            (
                "helm-spec",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("a.helm.image-spec", "api.image"),
                ],
                "Helm",
            ),
            (
                "kustomize",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("a.kustomize.image-name", "api"),
                    ("a.helm.image-tag", "t"),
                ],
                "Kustomize",
            ),
            (
                "cosign-key",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    (
                        "argocd-ecr-updater.io/a.cosign-key",
                        "secret:argocd/cosign:cosign.pub",
                    ),
                ],
                "Helm",
            ),
            (
                "cosign-elsewhere",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    (
                        "argocd-ecr-updater.io/cosign-key",
                        "secretsmanager:arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:cosign",
                    ),
                ],
                "Helm",
            ),
            (
                "scan-gate",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("argocd-ecr-updater.io/scan-gate", "critical"),
                ],
                "Helm",
            ),
            (
                "git-target",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("write-back-target", "helmvalues:values.yaml"),
                ],
                "Helm",
            ),
            (
                "pull-request",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("argocd-ecr-updater.io/git-pull-request", "true"),
                    (
                        "argocd-ecr-updater.io/git-pull-request-labels",
                        "image-update, automerge",
                    ),
                ],
                "Helm",
            ),
            (
                "merge-request",
                vec![
                    (
                        "image-list",
                        "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                    ),
                    ("git-repository", "https://gitlab.com/barun/invitation.git"),
                    ("argocd-ecr-updater.io/git-pull-request", "true"),
                ],
                "Helm",
            ),
        ];
        for (_, pairs, _) in &mut sets {
            if !pairs.iter().any(|(k, _)| *k == "git-repository") {
                pairs.extend_from_slice(&git);
            } else {
                pairs.extend_from_slice(&git[..2]);
            }
        }
        sets.push((
            "argocd",
            vec![
                (
                    "image-list",
                    "a=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api",
                ),
                ("write-back-method", "argocd"),
            ],
            "Helm",
        ));
        let seed = Application::seed().build();
        let seed_pairs: Vec<(&'static str, &'static str)> = string_annotations(&seed)
            .into_iter()
            .map(|(k, v)| {
                let k: &'static str =
                    Box::leak(k.trim_start_matches(PREFIX).to_string().into_boxed_str());
                let v: &'static str = Box::leak(v.into_boxed_str());
                (k, v)
            })
            .collect();
        sets.push(("seed", seed_pairs, "Helm"));
        sets
    }

    #[test]
    fn every_migrated_object_passes_the_crd_and_decides_as_its_annotations_do() {
        assert!(IMAGE.len() > 1);
        let store = ImageUpdaterStore::new().unwrap();
        let sets = annotation_sets();
        let applications: Vec<Annotated> = sets
            .iter()
            .map(|(name, pairs, source_type)| annotated(name, pairs, source_type))
            .collect();
        let migrated = from_annotations("migrated", "argocd", &applications).unwrap();
        let mut object = migrated.object.clone();
        store
            .validate(&mut object)
            .unwrap_or_else(|e| panic!("the API server would refuse it: {e}"));
        let objects = vec![serde_json::from_value::<ImageUpdaterObject>(object).unwrap()];
        for app in &applications {
            let none = BTreeMap::new();
            let source = resolve(&objects, "argocd", &app.name, &none, &app.annotations);
            let from_object = source.config(&app.annotations).unwrap();
            let from_annotations = AppConfig::parse(&app.annotations).unwrap();
            let kustomize = app.source_type.as_deref() == Some("Kustomize");
            assert_eq!(
                decisive(&from_object, kustomize),
                decisive(&from_annotations, kustomize),
                "{}: {source}",
                app.name
            );
        }
        // What the schema cannot hold stays on annotations, and says so.
        assert_eq!(migrated.notes.len(), 2, "{:#?}", migrated.notes);
        for kept in ["scan-gate", "cosign-elsewhere"] {
            assert!(
                migrated
                    .notes
                    .iter()
                    .any(|n| n.contains(&format!("`{kept}`"))),
                "{kept}"
            );
        }
    }

    #[test]
    fn a_freeze_stays_on_the_application_and_a_pin_keeps_its_annotations() {
        let annotations: BTreeMap<String, String> = [
            (
                format!("{PREFIX}image-list"),
                "web=r.example/web".to_string(),
            ),
            (
                format!("{OWN_PREFIX}freeze"),
                "until=2026-12-24T18:00:00Z".to_string(),
            ),
        ]
        .into_iter()
        .collect();
        let app = Annotated {
            name: "web".into(),
            annotations,
            source_type: Some("Helm".into()),
            repository: None,
        };
        let migrated = from_annotations("team", "argocd", &[app]).unwrap();
        assert_eq!(
            migrated.object["spec"]["applicationRefs"][0]["useAnnotations"],
            Value::Null,
            "migrated, not kept on annotations"
        );
        assert_eq!(migrated.notes.len(), 1, "{:#?}", migrated.notes);
        assert!(
            migrated.notes[0]
                .contains("freeze: until=2026-12-24T18:00:00Z` stays on the Application")
        );
        // A pinned image's setting has no field: that Application keeps its annotations.
        let pinned = Annotated {
            name: "api".into(),
            annotations: [
                (
                    format!("{PREFIX}image-list"),
                    "api=r.example/api".to_string(),
                ),
                (format!("{OWN_PREFIX}api.pin-digest"), "true".to_string()),
            ]
            .into_iter()
            .collect(),
            source_type: Some("Helm".into()),
            repository: None,
        };
        let migrated = from_annotations("team", "argocd", &[pinned]).unwrap();
        assert_eq!(
            migrated.object["spec"]["applicationRefs"][0]["useAnnotations"],
            true
        );
        assert!(migrated.notes[0].contains("api.pin-digest` has no ImageUpdater field"));
    }

    #[test]
    fn aliases_become_valid_unique_names_that_never_take_a_users_name() {
        let table: &[(&[(Option<&str>, &str)], &[&str])] = &[
            (&[(Some("team/api"), "x")], &["team_api"]),
            (&[(Some("_api"), "x")], &["image-_api"]),
            (
                &[(Some("a"), "x"), (Some("a"), "y"), (Some("a"), "z")],
                &["a", "a-2", "a-3"],
            ),
            (&[(Some("image1"), "x"), (None, "y")], &["image1", "image2"]),
            (&[(None, "x"), (Some("image0"), "y")], &["image1", "image0"]),
        ];
        for (entries, expected) in table {
            assert_eq!(object_aliases(entries), *expected, "{entries:?}");
        }
    }

    #[test]
    fn a_force_update_image_updater_refuses_is_not_migrated() {
        let app = annotated(
            "bad",
            &[
                ("image-list", "a=r.example.com/api"),
                ("force-update", "yes"),
            ],
            "Helm",
        );
        let errors = from_annotations("m", "argocd", &[app]).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains("force-update `yes`"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn own_settings_with_a_place_in_the_schema_are_migrated_into_it() {
        let sets = annotation_sets();
        let applications: Vec<Annotated> = sets
            .iter()
            .map(|(name, pairs, source_type)| annotated(name, pairs, source_type))
            .collect();
        let object = from_annotations("m", "argocd", &applications)
            .unwrap()
            .object;
        let reference = |name: &str| {
            object["spec"]["applicationRefs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["namePattern"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(
            reference("cosign-key")["images"][0]["imagesVerification"],
            json!({"enabled": true, "cosignKey": {"secretName": "cosign", "key": "cosign.pub"}})
        );
        assert_eq!(
            reference("pull-request")["writeBackConfig"]["gitConfig"]["pullRequest"],
            json!({"github": {}, "labels": ["image-update", "automerge"]})
        );
        assert_eq!(
            reference("merge-request")["writeBackConfig"]["gitConfig"]["pullRequest"],
            json!({"gitlab": {}})
        );
        assert_eq!(reference("slash-alias")["writeBackConfig"]["method"], "git");
        assert_eq!(reference("scan-gate")["useAnnotations"], true);
    }
}
