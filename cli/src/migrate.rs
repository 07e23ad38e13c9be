//! `argocd-ecr-updater-cli migrate`: prints the `ImageUpdater` object equivalent to the Image
//! Updater annotations of a namespace's Applications, the reverse of Image Updater's own
//! migration guide, so a team can move to v1.x-style configuration without changing
//! behaviour. Read-only: it writes nothing to the cluster.

use std::process::ExitCode;
use std::sync::Arc;

use crate::common::config_from_env;
use crate::common::{print_json, sdk_config, usage_error};
use argocd_ecr_updater::appconfig::annotations;
use argocd_ecr_updater::appconfig::migration::{self, Annotated};
use argocd_ecr_updater::cluster::connect::Connection;
use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::cluster::kube::APPLICATIONS;
use argocd_ecr_updater::telemetry::{LogFormat, init_tracing};

/// What `migrate` was asked.
pub struct MigrateRequest {
    pub namespace: String,
    /// The name of the printed object.
    pub name: String,
    /// One cluster only (`CLUSTER_NAME`, or one of `CLUSTERS`).
    pub cluster: Option<String>,
    pub log_format: LogFormat,
}

pub async fn run(request: MigrateRequest) -> ExitCode {
    let config = config_from_env(request.cluster.as_deref(), None);
    let config = match config {
        Ok(c) => c,
        Err(e) => return usage_error(e.to_string()),
    };
    init_tracing(&config.log_level, request.log_format);
    let page_size = config.page_size;
    let sdk = sdk_config(None).await;
    let connections = match Connection::each(&config, &sdk, Arc::new(SystemClock)) {
        Ok(connections) => connections,
        Err(e) => return usage_error(e.to_string()),
    };
    let Some(connection) = connections.first() else {
        return usage_error("no cluster: set CLUSTER_NAME or CLUSTERS".into());
    };
    let kube = match connection.client().await {
        Ok(kube) => kube,
        Err(e) => {
            eprintln!("argocd-ecr-updater: {e}");
            return ExitCode::FAILURE;
        }
    };
    let applications = match kube
        .list_objects(APPLICATIONS, &request.namespace, page_size, false)
        .await
    {
        Ok(items) => items,
        Err(e) => {
            eprintln!("argocd-ecr-updater: cannot list Applications: {e}");
            return ExitCode::FAILURE;
        }
    };
    let annotated: Vec<Annotated> = applications
        .iter()
        .map(|app| Annotated {
            name: app["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            // The string annotations, as the function's typed Application reads them.
            annotations: app["metadata"]["annotations"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect(),
            source_type: app["status"]["sourceType"].as_str().map(str::to_string),
            repository: app["spec"]["source"]["repoURL"]
                .as_str()
                .map(str::to_string),
        })
        .filter(|a| {
            a.annotations
                .contains_key(&format!("{}image-list", annotations::PREFIX))
        })
        .collect();
    if annotated.is_empty() {
        eprintln!(
            "argocd-ecr-updater: no Application in namespace `{}` has an image-list annotation: nothing to migrate",
            request.namespace
        );
        return ExitCode::from(2);
    }
    let migrated = match migration::from_annotations(&request.name, &request.namespace, &annotated)
    {
        Ok(migrated) => migrated,
        Err(errors) => {
            for error in errors {
                eprintln!("argocd-ecr-updater: cannot migrate {error}");
            }
            return ExitCode::FAILURE;
        }
    };
    for note in &migrated.notes {
        eprintln!("argocd-ecr-updater: {note}");
    }
    match print_json(&migrated.object, true) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
