//! `argocd-ecr-updater-cli plan`: the function's pipeline from a laptop, as the deployed
//! function's role (or, with `--operator-credentials`, the caller's own credentials; see
//! [`crate::run_as`]); a dry run unless `--apply`. Prints the report.

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use crate::common::config_from_env;
use crate::common::{print_json, read_input, sdk_config, usage_error};
use crate::run_as::{RunAs, pipeline_sdk};
use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::pipeline::handler::Handler;
use argocd_ecr_updater::telemetry::{LogFormat, init_tracing};

/// What `plan` was asked.
pub struct PlanRequest {
    /// An event file, or `-` for standard input; ignored with `reconcile`.
    pub event: Option<String>,
    pub reconcile: bool,
    pub apply: bool,
    /// One cluster only (`CLUSTER_NAME`, or one of `CLUSTERS`).
    pub cluster: Option<String>,
    /// Whose credentials the pipeline runs with.
    pub run_as: RunAs,
    pub log_format: LogFormat,
}

pub async fn run(request: PlanRequest) -> ExitCode {
    let PlanRequest {
        event,
        reconcile,
        apply,
        cluster,
        run_as,
        log_format,
    } = request;
    let payload: Value = if reconcile {
        serde_json::json!({"action": "reconcile"})
    } else {
        let path = event.unwrap_or_else(|| "-".into());
        let text = match read_input(&path) {
            Ok(text) => text,
            Err(e) => return usage_error(format!("cannot read event `{path}`: {e}")),
        };
        match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => return usage_error(format!("event `{path}` is not JSON: {e}")),
        }
    };
    let config = config_from_env(cluster.as_deref(), Some(!apply));
    let config = match config {
        Ok(c) => c,
        Err(e) => return usage_error(e.to_string()),
    };
    init_tracing(&config.log_level, log_format);
    let sdk = match pipeline_sdk(&sdk_config(None).await, &run_as).await {
        Ok(sdk) => sdk,
        Err(e) => return usage_error(e.to_string()),
    };
    let handler = match Handler::from_sdk(config, &sdk, Arc::new(SystemClock)) {
        Ok(h) => h,
        Err(e) => return usage_error(e.to_string()),
    };
    match handler.handle(&payload, None).await {
        Ok(report) => match print_json(&report, true) {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        },
        Err(HandlerError::Targets { summary, report }) => {
            if let Err(code) = print_json(&report, true) {
                return code;
            }
            eprintln!("argocd-ecr-updater: {summary}");
            ExitCode::FAILURE
        }
        // The input is wrong, like unreadable JSON: a usage error, as documented.
        Err(e @ HandlerError::Event(_)) => usage_error(e.to_string()),
        Err(e) => {
            eprintln!("argocd-ecr-updater: {e}");
            ExitCode::FAILURE
        }
    }
}
