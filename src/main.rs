//! The binary: the Lambda function by default, or one of the laptop commands in
//! [`argocd_ecr_updater::cli`]. Sets up logging, reads the configuration once, builds the
//! AWS clients and the handler once, then runs the Lambda runtime.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use clap::{Parser, Subcommand};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;

use argocd_ecr_updater::cli::migrate::MigrateRequest;
use argocd_ecr_updater::cli::plan::PlanRequest;
use argocd_ecr_updater::cli::redrive::RedriveRequest;
use argocd_ecr_updater::cli::select::SelectRequest;
use argocd_ecr_updater::cli::{self, LogFormat, init_tracing, print_json, sdk_config, usage_error};
use argocd_ecr_updater::config::Config;
use argocd_ecr_updater::eks_auth::SystemClock;
use argocd_ecr_updater::handler::{Handler, HandlerError};
use argocd_ecr_updater::metrics;

/// Roll new ECR images out through Argo CD, from a Lambda function.
///
/// Without a subcommand it runs as the Lambda function (configured by environment variables;
/// see the README's configuration table).
#[derive(Parser)]
#[command(name = "argocd-ecr-updater", version = argocd_ecr_updater::VERSION)]
struct Cli {
    /// Log format of the commands: `text` (colours only on a terminal) or `json`.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Pick the best tag from a list, offline, with Image Updater's rules.
    Select {
        /// semver, newest-build, alphabetical, digest (or the old names latest, name).
        #[arg(long)]
        strategy: String,
        /// The image-list constraint: a semver range, or for digest the tracked tag.
        #[arg(long)]
        constraint: Option<String>,
        /// `any` or `regexp:<pattern>`.
        #[arg(long)]
        allow_tags: Option<String>,
        /// Comma-separated glob patterns.
        #[arg(long)]
        ignore_tags: Option<String>,
        /// One tag a line [TAB RFC 3339 push time [TAB digest]]; `-` for stdin.
        #[arg(long)]
        tags_file: String,
    },
    /// Print an EKS bearer token as an ExecCredential, like `aws eks get-token`.
    Token {
        #[arg(long)]
        cluster: String,
        /// Defaults to the standard AWS region chain (AWS_REGION, profile).
        #[arg(long)]
        region: Option<String>,
    },
    /// Print the ImageUpdater object equivalent to a namespace's Image Updater annotations.
    Migrate {
        /// The namespace whose Applications to read.
        #[arg(long, default_value = "argocd")]
        namespace: String,
        /// The name of the printed ImageUpdater object.
        #[arg(long, default_value = "migrated-from-annotations")]
        name: String,
        /// Overrides CLUSTER_NAME.
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Run the events parked in the dead-letter queue again: dry-run unless --apply; a
    /// message is deleted only after its event succeeded.
    Redrive {
        /// The dead-letter queue's URL (the stack's DeadLetterQueueUrl output).
        #[arg(long)]
        queue: String,
        /// Write, and delete the messages whose events succeeded.
        #[arg(long)]
        apply: bool,
        /// Stop after this many messages.
        #[arg(long, default_value_t = 100)]
        max: usize,
        /// Overrides CLUSTER_NAME.
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Run the function's pipeline from a laptop: dry-run unless --apply.
    Plan {
        /// An event file (EventBridge JSON), or `-` for stdin.
        #[arg(
            long,
            conflicts_with = "reconcile",
            required_unless_present = "reconcile"
        )]
        event: Option<String>,
        /// Re-evaluate every annotated Application against ECR's full tag lists.
        #[arg(long)]
        reconcile: bool,
        /// Send the patches. Without it nothing is written.
        #[arg(long)]
        apply: bool,
        /// Overrides CLUSTER_NAME.
        #[arg(long)]
        cluster: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Select {
            strategy,
            constraint,
            allow_tags,
            ignore_tags,
            tags_file,
        }) => {
            // Streamed: memory follows the best tag kept, not the file's size.
            let input: Box<dyn std::io::BufRead> = if tags_file == "-" {
                Box::new(std::io::stdin().lock())
            } else {
                match std::fs::File::open(&tags_file) {
                    Ok(file) => Box::new(std::io::BufReader::new(file)),
                    Err(e) => {
                        return usage_error(format!("cannot read tags file `{tags_file}`: {e}"));
                    }
                }
            };
            let request = SelectRequest {
                strategy: &strategy,
                constraint: constraint.as_deref(),
                allow_tags: allow_tags.as_deref(),
                ignore_tags: ignore_tags.as_deref(),
            };
            match cli::select::run(&request, input) {
                Ok(output) => match print_json(&output, false) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(code) => code,
                },
                Err(e) => usage_error(e.to_string()),
            }
        }
        Some(Command::Token { cluster, region }) => {
            runtime().block_on(cli::token::run(cluster, region))
        }
        Some(Command::Plan {
            event,
            reconcile,
            apply,
            cluster,
        }) => runtime().block_on(cli::plan::run(PlanRequest {
            event,
            reconcile,
            apply,
            cluster,
            log_format: cli.log_format,
        })),
        Some(Command::Migrate {
            namespace,
            name,
            cluster,
        }) => runtime().block_on(cli::migrate::run(MigrateRequest {
            namespace,
            name,
            cluster,
            log_format: cli.log_format,
        })),
        Some(Command::Redrive {
            queue,
            apply,
            max,
            cluster,
        }) => runtime().block_on(cli::redrive::run(RedriveRequest {
            queue_url: queue,
            apply,
            max,
            cluster,
            log_format: cli.log_format,
        })),
        None => runtime().block_on(lambda()),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

fn diagnostic(error: &HandlerError) -> Diagnostic {
    Diagnostic {
        error_type: error.error_type().to_string(),
        error_message: error.to_string(),
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
    let sdk = sdk_config(None).await;
    let handler = match Handler::from_sdk(config, &sdk, Arc::new(SystemClock)) {
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
    let result = lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
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
            Ok(report) => (report.mode, false, Some(report)),
            Err(HandlerError::Targets { report, .. }) => (report.mode, true, Some(&**report)),
            Err(_) => ("none", true, None),
        };
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i128);
        println!(
            "{}",
            metrics::emf(
                function_name,
                mode,
                failed,
                report,
                started.elapsed(),
                now_ms
            )
        );
        match result {
            Ok(report) => Ok(serde_json::to_value(&report).unwrap_or(Value::Null)),
            Err(e) => {
                tracing::error!(error_type = e.error_type(), error = %e, "invocation failed");
                Err(diagnostic(&e))
            }
        }
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
