use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_credential_types::provider::ProvideCredentials;
use clap::{Parser, Subcommand};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;

use argocd_ecr_updater::config::Config;
use argocd_ecr_updater::eks_auth::{IamTokenSource, SystemClock, exec_credential};
use argocd_ecr_updater::handler::{Handler, HandlerError};
use argocd_ecr_updater::select_cli::{self, SelectRequest};

/// Roll new ECR images out through Argo CD, from a Lambda function.
///
/// Without a subcommand it runs as the Lambda function (configured by environment variables;
/// see the README's configuration table).
#[derive(Parser)]
#[command(name = "argocd-ecr-updater", version)]
struct Cli {
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
            let text = match read_input(&tags_file) {
                Ok(text) => text,
                Err(e) => return usage_error(format!("cannot read tags file `{tags_file}`: {e}")),
            };
            let request = SelectRequest {
                strategy: &strategy,
                constraint: constraint.as_deref(),
                allow_tags: allow_tags.as_deref(),
                ignore_tags: ignore_tags.as_deref(),
            };
            match select_cli::run(&request, &text) {
                Ok(output) => {
                    println!(
                        "{}",
                        serde_json::to_string(&output).expect("select output serialises")
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(e.to_string()),
            }
        }
        Some(Command::Token { cluster, region }) => runtime().block_on(token(cluster, region)),
        Some(Command::Plan {
            event,
            reconcile,
            apply,
            cluster,
        }) => runtime().block_on(plan(event, reconcile, apply, cluster)),
        None => runtime().block_on(lambda()),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

fn init_tracing(level: &str, json: bool) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level: tracing::Level = level.parse().unwrap_or(tracing::Level::INFO);
    // Our own events at the configured level; the libraries' only when they warn.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::WARN)
        .with_target("argocd_ecr_updater", level);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    if json {
        // CloudWatch already stamps time; one JSON object per line is what Logs Insights parses.
        let layer = fmt
            .json()
            .flatten_event(true)
            .without_time()
            .with_current_span(false)
            .with_span_list(false);
        tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .init();
    } else {
        tracing_subscriber::registry()
            .with(fmt.with_filter(filter))
            .init();
    }
}

async fn sdk_config(region: Option<String>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        // Short backoffs: a Lambda has seconds, not minutes, and AWS retries the event anyway.
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(100)),
        );
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region));
    }
    loader.load().await
}

fn build_handler(config: Config, sdk: &aws_config::SdkConfig) -> Result<Handler, String> {
    Handler::from_sdk(config, sdk, Arc::new(SystemClock))
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
    init_tracing(&config.log_level, true);
    let sdk = sdk_config(None).await;
    let handler = match build_handler(config, &sdk) {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            return ExitCode::FAILURE;
        }
    };
    let handler = &handler;
    let result = lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let remaining = event
            .context
            .deadline()
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let deadline = Instant::now() + remaining;
        // Boxed: the handler's future is large, and nesting it in the runtime's types
        // otherwise exceeds the compiler's layout query depth.
        match Box::pin(handler.handle(&event.payload, Some(deadline))).await {
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

async fn token(cluster: String, region: Option<String>) -> ExitCode {
    let sdk = sdk_config(region).await;
    let Some(region) = sdk.region().map(|r| r.to_string()) else {
        return usage_error("no AWS region: pass --region or set AWS_REGION".into());
    };
    let Some(credentials) = sdk.credentials_provider() else {
        return usage_error(
            "no AWS credentials: configure the standard AWS credential chain".into(),
        );
    };
    if let Err(e) = credentials.provide_credentials().await {
        return usage_error(format!("no AWS credentials: {e}"));
    }
    let source = IamTokenSource::new(cluster, region, credentials, Arc::new(SystemClock));
    match source.fresh().await {
        Ok((token, signed_at)) => {
            let credential = exec_credential(token, signed_at);
            println!(
                "{}",
                serde_json::to_string(&credential).expect("ExecCredential serialises")
            );
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(e.to_string()),
    }
}

async fn plan(
    event: Option<String>,
    reconcile: bool,
    apply: bool,
    cluster: Option<String>,
) -> ExitCode {
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
    let config = Config::from_lookup(|name| match (name, &cluster) {
        ("CLUSTER_NAME", Some(c)) => Some(c.clone()),
        ("DRY_RUN", _) => Some((!apply).to_string()),
        _ => std::env::var(name).ok(),
    });
    let config = match config {
        Ok(c) => c,
        Err(e) => return usage_error(e.to_string()),
    };
    init_tracing(&config.log_level, false);
    let sdk = sdk_config(None).await;
    let handler = match build_handler(config, &sdk) {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    match handler.handle(&payload, None).await {
        Ok(report) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).expect("report serialises")
            );
            ExitCode::SUCCESS
        }
        Err(HandlerError::Targets { summary, report }) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).expect("report serialises")
            );
            eprintln!("argocd-ecr-updater: {summary}");
            ExitCode::FAILURE
        }
        // The input is wrong, like unreadable JSON: a usage error, as the README says.
        Err(e @ HandlerError::Event(_)) => usage_error(e.to_string()),
        Err(e) => {
            eprintln!("argocd-ecr-updater: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_input(path: &str) -> std::io::Result<String> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(PathBuf::from(path))
    }
}

fn usage_error(message: String) -> ExitCode {
    eprintln!("argocd-ecr-updater: {message}");
    ExitCode::from(2)
}
