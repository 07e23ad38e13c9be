//! The Lambda function: sets up logging, reads the configuration once, builds the AWS clients
//! and the handler once, then runs the Lambda runtime. The laptop commands (`select`, `token`,
//! `plan`, `migrate`, `redrive`) are the separate `argocd-ecr-updater-cli` binary (`cli/`), so
//! this one carries neither their argument parser nor the credential providers only a laptop
//! uses (`aws sso login` profiles, `credential_process`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;

use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::config::Config;
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::pipeline::handler::Handler;
use argocd_ecr_updater::report::InvocationKind;
use argocd_ecr_updater::report::metrics;
use argocd_ecr_updater::telemetry::{LogFormat, init_tracing};

fn main() -> ExitCode {
    // This binary takes no arguments; someone who ran the laptop commands from it before they
    // moved to their own binary is told where they went.
    match std::env::args().nth(1).as_deref() {
        None => runtime().block_on(lambda()),
        Some("--version" | "-V") => {
            println!("argocd-ecr-updater {}", argocd_ecr_updater::VERSION);
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!(
                "argocd-ecr-updater: `{other}`: this is the Lambda function, which takes no arguments. The laptop commands (select, token, plan, migrate, redrive) are `argocd-ecr-updater-cli`: cargo install --locked --path cli"
            );
            ExitCode::from(2)
        }
    }
}

/// One thread. Lambda gives a function a share of CPU time in proportion to its memory (a
/// fraction of one vCPU below 1,769 MB), and a second worker thread only spends that share on
/// handing work between threads: held to a 128 MB share, a push took 104 ms at p50 here
/// against 193 ms on the multi-threaded runtime, and 16% less CPU with two whole cores.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

fn diagnostic(error: &HandlerError) -> Diagnostic {
    Diagnostic {
        error_type: error.error_type().to_string(),
        error_message: argocd_ecr_updater::redact::scrub(&error.to_string()),
    }
}

/// One invocation: handled within Lambda's deadline, its metrics printed, its report
/// returned or its failure turned into the `errorType` the dead-letter queue shows.
async fn invoke(
    handler: &Handler,
    function_name: &str,
    event: LambdaEvent<Value>,
) -> Result<Value, Diagnostic> {
    let started = Instant::now();
    let remaining = event
        .context
        .deadline()
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    let deadline = Instant::now() + remaining;
    // Boxed: the handler's future is large, and nesting it in the runtime's types
    // otherwise exceeds the compiler's layout query depth.
    let result = Box::pin(handler.handle(&event.payload, Some(deadline))).await;
    // Metrics in Embedded Metric Format, on stdout: CloudWatch extracts them from the log.
    let (mode, failed, report) = match &result {
        Ok(report) => (Some(report.mode), report.failure.is_some(), Some(report)),
        Err(HandlerError::Targets { report, .. }) => (Some(report.mode), true, Some(&**report)),
        Err(_) => (None, true, None),
    };
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i128);
    let elapsed = started.elapsed();
    let metrics = metrics::emf(function_name, mode, failed, report, elapsed, now_ms);
    println!("{metrics}");
    for rollout in report.map_or(&[][..], |r| r.rollouts.as_slice()) {
        if let Some(line) = metrics::rollout_emf(function_name, rollout, now_ms) {
            println!("{line}");
        }
    }
    match result {
        // Lambda's SQS event source mapping reads only the partial batch response.
        Ok(report) if report.mode == InvocationKind::Shard => Ok(report.batch_response()),
        Ok(report) => Ok(serde_json::to_value(&report).unwrap_or(Value::Null)),
        Err(e) => {
            tracing::error!(error_type = e.error_type(), error = %e, "invocation failed");
            Err(diagnostic(&e))
        }
    }
}

async fn lambda() -> ExitCode {
    // Configuration is read once; a bad variable stops the cold start with its name.
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("argocd-ecr-updater: {e}");
            return ExitCode::FAILURE;
        }
    };
    init_tracing(&config.log_level, LogFormat::Json);
    // Once per cold start: what this function is and how it is configured (no secrets).
    tracing::info!(
        version = argocd_ecr_updater::VERSION,
        cluster = %config.cluster_name,
        clusters = %config.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(","),
        namespaces = ?config.namespaces,
        label_selector = config.label_selector.as_deref().unwrap_or(""),
        dry_run = config.dry_run,
        read_image_updaters = config.read_image_updaters,
        endpoint_override = config.cluster_override.as_ref().map_or("", |a| a.endpoint.as_str()),
        page_size = config.page_size,
        conflict_retries = config.conflict_retries,
        "starting"
    );
    // Built from the variables Lambda sets, not by aws-config's loader: see `sdk_env`.
    let sdk = match argocd_ecr_updater::aws::sdk_env::sdk_config_from_env(|name| {
        std::env::var(name).ok()
    }) {
        Ok(sdk) => sdk,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    let handler = match Handler::start(config, &sdk, Arc::new(SystemClock)).await {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    let handler = &handler;
    let function_name =
        std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "argocd-ecr-updater".into());
    let function_name = function_name.as_str();
    let result = lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        invoke(handler, function_name, event)
    }))
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the Lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}
