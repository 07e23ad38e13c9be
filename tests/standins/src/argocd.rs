//! A stand-in for Argo CD's application controller: after a write it would act on, it moves
//! the Application's status as the controller does, after a scripted delay and to a scripted
//! end. It acts when the spec of an Application with automated sync changes, when an
//! `operation` is set (a sync asked for, as `argocd app sync` does, then cleared), and when
//! an Application with automated sync is asked to refresh (a commit Argo CD sees on refresh).
//!
//! What it writes is what Argo CD writes: `status.operationState` (phase, message,
//! `startedAt`/`finishedAt` in whole seconds, `syncResult.revision` and source),
//! `status.sync` (status and revision), `status.summary.images` (the images the rendered
//! manifests run), `status.health.status` at the Application level (Argo CD 3.x keeps no
//! per-resource health in the Application), and a `status.history` entry per successful sync.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How a sync ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// Synced, the new image running, Healthy.
    Healthy,
    /// Synced, then Degraded (a Deployment past its progress deadline).
    DegradedAfterSync,
    /// Synced, Progressing for ever.
    StuckProgressing,
    /// The sync operation fails; nothing new runs.
    SyncFailed,
    /// The controller never acts.
    NeverSynced,
}

/// What the Application's source renders to, for a source the controller cannot render from
/// its spec (a Git write-back: the file lives in the Git stand-in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub revision: String,
    pub images: Vec<String>,
}

pub type Render = Arc<dyn Fn(&Value) -> Option<Rendered> + Send + Sync>;

/// The controller's script.
#[derive(Clone)]
pub struct Controller {
    pub delay: Duration,
    pub script: Script,
    pub render: Option<Render>,
}

impl Controller {
    pub fn new(script: Script, delay: Duration) -> Self {
        Self {
            delay,
            script,
            render: None,
        }
    }

    pub fn rendering(mut self, render: Render) -> Self {
        self.render = Some(render);
        self
    }
}

/// Whether the controller acts on the write from `before` to `after`.
pub fn acts_on(before: &Value, after: &Value) -> bool {
    let automated = !after["spec"]["syncPolicy"]["automated"].is_null();
    let operation_set = !after["operation"].is_null() && before["operation"] != after["operation"];
    let refresh = "argocd.argoproj.io/refresh";
    let refreshed = after["metadata"]["annotations"][refresh].is_string()
        && before["metadata"]["annotations"][refresh] != after["metadata"]["annotations"][refresh];
    operation_set || (automated && (before["spec"] != after["spec"] || refreshed))
}

/// The images a spec's sources run: Helm parameters in pairs (`x.repository` or `x.name`
/// with `x.tag`), and Kustomize images (`name=new:tag`, `name:tag`, `name@digest`).
pub fn images_of_spec(spec: &Value) -> Vec<String> {
    let sources: Vec<&Value> = match spec["sources"].as_array() {
        Some(sources) => sources.iter().collect(),
        None => vec![&spec["source"]],
    };
    let mut images = Vec::new();
    for source in sources {
        let parameters: Vec<(&str, &str)> = source["helm"]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["name"].as_str()?, p["value"].as_str()?)))
            .collect();
        for (name, repository) in &parameters {
            let Some(prefix) = name
                .strip_suffix("repository")
                .or_else(|| name.strip_suffix("name"))
            else {
                continue;
            };
            if let Some((_, tag)) = parameters
                .iter()
                .find(|(n, _)| *n == format!("{prefix}tag"))
            {
                images.push(format!("{repository}:{tag}"));
            }
        }
        for image in source["kustomize"]["images"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(text) = image.as_str() else { continue };
            let rendered = text.split_once('=').map_or(text, |(_, new)| new);
            images.push(rendered.to_string());
        }
    }
    images
}

fn now_whole_seconds() -> String {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0)
        .unwrap_or(now)
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// One reconcile: the status the controller leaves after the sync the write asked for.
pub fn reconcile(controller: &Controller, app: &mut Value) {
    if controller.script == Script::NeverSynced {
        return;
    }
    let rendered = controller
        .render
        .as_ref()
        .and_then(|render| render(app))
        .unwrap_or_else(|| Rendered {
            revision: app["spec"]["source"]["targetRevision"]
                .as_str()
                .unwrap_or("HEAD")
                .to_string(),
            images: images_of_spec(&app["spec"]),
        });
    let now = now_whole_seconds();
    let initiated = match app["operation"]["initiatedBy"].clone() {
        Value::Null => json!({"automated": true}),
        by => by,
    };
    if let Some(annotations) = app["metadata"]["annotations"].as_object_mut() {
        annotations.remove("argocd.argoproj.io/refresh");
    }
    if let Some(object) = app.as_object_mut() {
        object.remove("operation");
    }
    let source = app["spec"]["source"].clone();
    let status = &mut app["status"];
    let failed = controller.script == Script::SyncFailed;
    status["operationState"] = json!({
        "operation": {"sync": {"revision": rendered.revision}, "initiatedBy": initiated},
        "phase": if failed { "Failed" } else { "Succeeded" },
        "message": if failed { "one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid" } else { "successfully synced (all tasks run)" },
        "startedAt": now, "finishedAt": now,
        "syncResult": {"revision": rendered.revision, "source": source},
    });
    if failed {
        status["sync"]["status"] = json!("OutOfSync");
        return;
    }
    status["sync"] = json!({"status": "Synced", "revision": rendered.revision});
    status["summary"]["images"] = json!(rendered.images);
    status["health"] = match controller.script {
        Script::DegradedAfterSync => json!({"status": "Degraded",
            "message": "Deployment \"web\" exceeded its progress deadline", "lastTransitionTime": now}),
        Script::StuckProgressing => json!({"status": "Progressing",
            "message": "Waiting for rollout to finish: 0 of 1 updated replicas are available...", "lastTransitionTime": now}),
        _ => json!({"status": "Healthy", "lastTransitionTime": now}),
    };
    let mut history = status["history"].as_array().cloned().unwrap_or_default();
    let id = history.len();
    history.push(
        json!({"id": id, "revision": rendered.revision, "deployedAt": now, "source": source,
        "deployStartedAt": now}),
    );
    status["history"] = json!(history);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_pairs_and_kustomize_images_render_to_image_references() {
        let spec = json!({"sources": [
            {"helm": {"parameters": [{"name": "image.repository", "value": "r/web"},
                {"name": "image.tag", "value": "1.2"}, {"name": "replicas", "value": "2"}]}},
            {"kustomize": {"images": ["api=r/api:3.0", "r/db@sha256:00"]}}]});
        assert_eq!(
            images_of_spec(&spec),
            ["r/web:1.2", "r/api:3.0", "r/db@sha256:00"]
        );
    }

    #[test]
    fn the_controller_acts_on_what_argo_cd_acts_on() {
        let app = |automated: bool, tag: &str| {
            let mut app = json!({"metadata": {"annotations": {}}, "spec": {"source": {"helm": {"parameters": [{"name": "image.tag", "value": tag}]}}, "syncPolicy": {}}});
            if automated {
                app["spec"]["syncPolicy"]["automated"] = json!({"prune": true});
            }
            app
        };
        assert!(acts_on(&app(true, "1"), &app(true, "2")));
        assert!(
            !acts_on(&app(false, "1"), &app(false, "2")),
            "manual sync: waits"
        );
        assert!(!acts_on(&app(true, "1"), &app(true, "1")));
        let mut operated = app(false, "2");
        operated["operation"] = json!({"sync": {}});
        assert!(acts_on(&app(false, "2"), &operated));
        let mut refreshed = app(true, "1");
        refreshed["metadata"]["annotations"]["argocd.argoproj.io/refresh"] = json!("normal");
        assert!(acts_on(&app(true, "1"), &refreshed));
    }
}
