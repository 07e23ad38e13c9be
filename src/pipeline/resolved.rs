//! An Application's configuration, resolved once from the labels and annotations it was
//! seen with ([`Resolved`]): which ImageUpdater object (or its own annotations) configures
//! it, what that says, and how it is written back (by patch, or by commit: [`GitSettings`]).

use std::collections::BTreeMap;

use crate::appconfig::annotations::{self, AppConfig, WriteBack as Method};
use crate::appconfig::imageupdater::{self, ConfigSource, ImageUpdaterObject, Resolution};
use crate::application::app::Application;
use crate::cluster::kube::AppMeta;
use crate::decision::controls;

/// An Application's configuration, resolved once from the labels and annotations it was
/// seen with: which ImageUpdater object (or its own annotations) configures it, what that
/// configuration says, and so how it is written back. The decision and both write-back
/// paths take this value; a re-read that shows the same labels and annotations keeps it.
pub(super) struct Resolved<'o> {
    labels: BTreeMap<String, String>,
    /// Only those configuration is read from ([`annotations::is_configuring`]).
    annotations: BTreeMap<String, String>,
    pub source: ConfigSource<'o>,
    /// `None` when nothing configures it: no `image-list` and no ImageUpdater object, or
    /// more than one object.
    pub config: Option<AppConfig>,
}

/// The `git` write-back's settings of a resolved Application.
pub(super) struct GitSettings<'r> {
    pub method: &'r Method,
    /// `git`, `git:repocreds` or `git:secret:<namespace>/<name>`.
    pub credentials: &'r str,
    pub branch: Option<&'r str>,
    pub pull_request: Option<&'r Vec<String>>,
}

impl<'o> Resolved<'o> {
    pub fn resolve(
        objects: &'o [ImageUpdaterObject],
        namespace: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> Self {
        let source = imageupdater::resolve(objects, namespace, name, &labels, &annotations);
        Self::of_source(source, labels, annotations)
    }

    fn of_source(
        source: ConfigSource<'o>,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    ) -> Self {
        let config = source.config(&annotations);
        Self {
            labels,
            annotations,
            source,
            config,
        }
    }

    /// As the listing saw the Application, with the listing's resolution when it has one.
    pub fn of_listed(
        meta: &AppMeta,
        resolution: Option<&Resolution>,
        objects: &'o [ImageUpdaterObject],
    ) -> Self {
        let (labels, annotations) = (meta.labels.clone(), meta.annotations.clone());
        match resolution.and_then(|r| r.source(objects)) {
            Some(source) => Self::of_source(source, labels, annotations),
            None => Self::resolve(objects, &meta.namespace, &meta.name, labels, annotations),
        }
    }

    /// As the Application was read.
    pub fn of_read(app: &Application<'_>, objects: &'o [ImageUpdaterObject]) -> Self {
        let (namespace, name) = app.names();
        let (labels, configuring) = (
            app.metadata.labels.clone(),
            annotations::configuring(&app.metadata.annotations),
        );
        Self::resolve(objects, namespace, name, labels, configuring)
    }

    /// The resolution for `app` as read: this one if the labels and annotations it was
    /// resolved from are unchanged, a new one otherwise.
    pub fn for_read(self, app: &Application<'_>, objects: &'o [ImageUpdaterObject]) -> Self {
        let labels = app.metadata.labels.clone();
        let configuring = annotations::configuring(&app.metadata.annotations);
        if labels == self.labels && configuring == self.annotations {
            return self;
        }
        let (namespace, name) = app.names();
        Self::resolve(objects, namespace, name, labels, configuring)
    }

    /// Where a freeze may be set for this Application, with its value: its own annotation,
    /// and the annotation of the ImageUpdater object that configures it.
    pub fn freeze_settings(&self) -> Vec<(String, &str)> {
        let mut settings = Vec::new();
        if let Some(value) = self.annotations.get(controls::FREEZE) {
            settings.push(("the Application".to_string(), value.as_str()));
        }
        if let ConfigSource::Object { object, .. } = &self.source
            && let Some(value) = object.metadata.annotations.get(controls::FREEZE)
        {
            let meta = &object.metadata;
            let origin = format!("ImageUpdater {}/{}", meta.namespace, meta.name);
            settings.push((origin, value.as_str()));
        }
        settings
    }

    /// The `git` write-back's settings, when the Application is written back by a commit.
    pub fn git(&self) -> Option<GitSettings<'_>> {
        let config = self.config.as_ref()?;
        match &config.write_back {
            Ok(
                method @ Method::Git {
                    credentials,
                    branch,
                    pull_request,
                    ..
                },
            ) => Some(GitSettings {
                method,
                credentials,
                branch: branch.as_deref(),
                pull_request: pull_request.as_ref(),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::application::app::Metadata;
    use serde_json::{Value, json};

    const IMAGE_LIST: &str = "argocd-image-updater.argoproj.io/image-list";
    const WRITE_BACK: &str = "argocd-image-updater.argoproj.io/write-back-method";

    fn app(annotations: Value, labels: Value) -> Value {
        json!({"metadata": {"namespace": "argocd", "name": "web",
            "annotations": annotations, "labels": labels}})
    }

    fn resolved_from(app: &Value) -> Resolved<'static> {
        let app = Application::of(app);
        let (namespace, name) = app.names();
        Resolved::resolve(
            &[],
            namespace,
            name,
            app.metadata.labels.clone(),
            annotations::configuring(&app.metadata.annotations),
        )
    }

    #[test]
    fn a_read_with_the_same_configuration_keeps_the_resolution() {
        let listed = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web"}),
            json!({}),
        );
        // Another annotation and our audit record changed: neither is configuration.
        let read = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web", "note": "x",
                annotations::AUDIT_ANNOTATION: "{}"}),
            json!({}),
        );
        let resolved = resolved_from(&listed);
        let before = resolved.config.as_ref().map(|c| c.images.len());
        let again = resolved.for_read(&Application::of(&read), &[]);
        assert_eq!(again.config.as_ref().map(|c| c.images.len()), before);
        assert_eq!(
            again.annotations,
            annotations::configuring(&Metadata::of(&listed).annotations)
        );
    }

    #[test]
    fn a_read_whose_image_list_changed_is_resolved_again() {
        let listed = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web"}),
            json!({}),
        );
        let read = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web,api=1.dkr.ecr.r.amazonaws.com/api"}),
            json!({}),
        );
        let again = resolved_from(&listed).for_read(&Application::of(&read), &[]);
        assert_eq!(again.config.map(|c| c.images.len()), Some(2));
    }

    #[test]
    fn a_read_that_lost_its_image_list_is_no_longer_configured() {
        let listed = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web"}),
            json!({}),
        );
        let read = app(json!({}), json!({"team": "a"}));
        assert!(
            resolved_from(&listed)
                .for_read(&Application::of(&read), &[])
                .config
                .is_none()
        );
    }

    #[test]
    fn git_settings_come_from_the_write_back_method_and_argocd_has_none() {
        let git = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web",
                WRITE_BACK: "git:secret:argocd/creds",
                "argocd-image-updater.argoproj.io/git-branch": "main:image-updates"}),
            json!({}),
        );
        let resolved = resolved_from(&git);
        let settings = resolved.git().map(|g| (g.credentials, g.branch));
        assert_eq!(
            settings,
            Some(("git:secret:argocd/creds", Some("main:image-updates")))
        );
        let patched = app(
            json!({IMAGE_LIST: "web=1.dkr.ecr.r.amazonaws.com/web", WRITE_BACK: "argocd"}),
            json!({}),
        );
        assert!(resolved_from(&patched).git().is_none());
    }
}
