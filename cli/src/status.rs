//! `argocd-ecr-updater-cli status <namespace>/<application>`: where each image of one
//! Application stands, as the function would judge it now: what the spec asks for and
//! whether it runs, our last write and its rollout (and the alarms it is verified by, with
//! the window left), its promotion against its upstream (read where it is), and what holds
//! it back. Read-only, with your credentials, like `migrate`. Prints JSON.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::common::{config_from_env, print_json, sdk_config, usage_error};
use argocd_ecr_updater::appconfig::annotations::AppConfig;
use argocd_ecr_updater::application::app::Application;
use argocd_ecr_updater::cluster::connect::Connection;
use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::decision::promotion::Place;
use argocd_ecr_updater::decision::standing::{self, Standing};
use argocd_ecr_updater::rollout::alarms;
use argocd_ecr_updater::telemetry::{LogFormat, init_tracing};

/// What `status` was asked.
pub struct StatusRequest {
    /// `namespace/name`.
    pub application: String,
    /// The cluster the Application is in (default: CLUSTER_NAME, or the first of CLUSTERS).
    pub cluster: Option<String>,
    pub log_format: LogFormat,
}

/// What `status` prints.
#[derive(Serialize)]
struct Status {
    cluster: String,
    #[serde(flatten)]
    standing: Standing,
    /// The alarms a rollout of it is verified by, when it names any.
    verification: Option<Verification>,
}

#[derive(Serialize)]
struct Verification {
    alarms: Vec<String>,
    window: String,
    /// The window left for the write being verified now, if one is.
    left: Option<String>,
}

pub async fn run(request: StatusRequest) -> ExitCode {
    let Some((namespace, name)) = request.application.split_once('/') else {
        return usage_error(format!(
            "`{}`: name the Application as <namespace>/<name>",
            request.application
        ));
    };
    let config = match config_from_env(None, Some(true)) {
        Ok(c) => c,
        Err(e) => return usage_error(e.to_string()),
    };
    init_tracing(&config.log_level, request.log_format);
    let sdk = sdk_config(None).await;
    let connections = match Connection::each(&config, &sdk, Arc::new(SystemClock)) {
        Ok(connections) => connections,
        Err(e) => return usage_error(e.to_string()),
    };
    let here = match &request.cluster {
        Some(cluster) => connections.iter().find(|c| c.name() == cluster),
        None => connections.first(),
    };
    let Some(here) = here else {
        return usage_error(format!(
            "no cluster {}: it must be CLUSTER_NAME or one of CLUSTERS",
            request.cluster.unwrap_or_default()
        ));
    };
    let raw = match read(&connections, here.name(), namespace, name).await {
        Ok(raw) => raw,
        Err(e) => {
            eprintln!("argocd-ecr-updater: {e}");
            return ExitCode::FAILURE;
        }
    };
    let app = Application::of(&raw);
    // Annotations only: an Application an ImageUpdater object configures shows no images
    // here (`plan` decides it with its object).
    let Some(app_config) = AppConfig::parse(&app.metadata.annotations) else {
        eprintln!(
            "argocd-ecr-updater: {namespace}/{name} names no images in its annotations (an ImageUpdater object may configure it: `plan` decides it with that object)"
        );
        return ExitCode::FAILURE;
    };
    let mut upstreams = BTreeMap::new();
    for place in standing::upstreams(&app_config, here.name()) {
        let read = read(&connections, &place.cluster, &place.namespace, &place.name).await;
        upstreams.insert(place, read);
    }
    let now = time::OffsetDateTime::now_utc();
    let status = Status {
        cluster: here.name().to_string(),
        standing: standing::standing(&app, &app_config, here.name(), &upstreams, now),
        verification: verification(&app, &config, &sdk, now),
    };
    match print_json(&status, true) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// The Application at `namespace/name` in `cluster`, or why it cannot be read.
async fn read(
    connections: &[Connection],
    cluster: &str,
    namespace: &str,
    name: &str,
) -> Result<Value, String> {
    let place = Place {
        cluster: cluster.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    };
    let Some(connection) = connections.iter().find(|c| c.name() == cluster) else {
        return Err(format!(
            "{place}: its cluster is not CLUSTER_NAME or one of CLUSTERS"
        ));
    };
    let kube = connection
        .client()
        .await
        .map_err(|e| format!("{place}: {e}"))?;
    kube.get_application(namespace, name)
        .await
        .map_err(|e| format!("{place}: {e}"))
}

fn verification(
    app: &Application<'_>,
    config: &argocd_ecr_updater::config::Config,
    sdk: &aws_config::SdkConfig,
    now: time::OffsetDateTime,
) -> Option<Verification> {
    let region = sdk.region().map(ToString::to_string).unwrap_or_default();
    let home = alarms::Home {
        region: &region,
        account: config.own_account.as_deref(),
    };
    let watch = alarms::settings(
        app.annotation(alarms::ALARMS_ANNOTATION),
        app.annotation(alarms::WINDOW_ANNOTATION),
        home,
    )
    .ok()
    .flatten()?;
    let live = app.audit.as_ref().and_then(|record| {
        (record.rollout.is_none())
            .then_some(record.verifying_since)
            .flatten()
    });
    let left = live.map(|since| {
        let end = since + watch.window;
        argocd_ecr_updater::decision::promotion::left(now, end)
    });
    Some(Verification {
        alarms: watch.alarms,
        window: argocd_ecr_updater::appconfig::annotations::format_duration(watch.window),
        left,
    })
}
