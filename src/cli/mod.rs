//! The command-line side of the binary: `select`, `token`, `plan`, `migrate` and `redrive`, for a laptop. Each
//! returns the process exit code: 0 done, 1 a target failed in a way a retry could fix, 2 the
//! input or the environment is wrong.

pub mod migrate;
pub mod plan;
pub mod redrive;
pub mod select;
pub mod token;

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use serde::Serialize;

/// The AWS SDK configuration the function and the commands share: the standard chain,
/// with short backoffs (a Lambda has seconds, not minutes, and AWS retries the event).
pub async fn sdk_config(region: Option<String>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).retry_config(
        RetryConfig::standard()
            .with_max_attempts(3)
            .with_initial_backoff(Duration::from_millis(100)),
    );
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region));
    }
    loader.load().await
}

/// Logging: our own events at `level`, the libraries' only when they warn; JSON lines (as
/// CloudWatch Logs Insights parses them) or text.
pub fn init_tracing(level: &str, format: LogFormat) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level: tracing::Level = level.parse().unwrap_or(tracing::Level::INFO);
    // Our own events at the configured level; the libraries' only when they warn.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::WARN)
        .with_target("argocd_ecr_updater", level);
    // Colour only for a person at a terminal: a file or a pipe gets plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(ScrubbedLine::default)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if format == LogFormat::Json {
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

/// One log line, written to standard error with every URL in it scrubbed
/// ([`crate::redact::scrub`]) when the formatter is done with it: whatever a message or a
/// field carries, no query string or userinfo reaches CloudWatch.
#[derive(Default)]
struct ScrubbedLine(Vec<u8>);

impl std::io::Write for ScrubbedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        // Most lines name no URL: they are written as they are, without a copy.
        let written = if memchr::memmem::find(&self.0, b"://").is_some() {
            std::io::stderr()
                .write_all(crate::redact::scrub(&String::from_utf8_lossy(&self.0)).as_bytes())
        } else {
            std::io::stderr().write_all(&self.0)
        };
        self.0.clear();
        written
    }
}

impl Drop for ScrubbedLine {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (what the Lambda function writes).
    Json,
}

/// Reads a file, or standard input for `-`.
/// The function's configuration from the environment, as a CLI command sees it: `--cluster`
/// picks one cluster (with its `CLUSTERS` settings, if listed there), `dry_run` overrides
/// `DRY_RUN`.
pub fn config_from_env(
    cluster: Option<&str>,
    dry_run: Option<bool>,
) -> Result<crate::config::Config, crate::config::ConfigError> {
    let config = crate::config::Config::from_lookup(|name| match (name, cluster, dry_run) {
        ("CLUSTER_NAME", Some(c), _) => Some(c.to_string()),
        ("DRY_RUN", _, Some(dry)) => Some(dry.to_string()),
        _ => std::env::var(name).ok(),
    })?;
    match cluster {
        Some(name) => config.narrowed_to(name),
        None => Ok(config),
    }
}

pub fn read_input(path: &str) -> std::io::Result<String> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path)
    }
}

/// Says what is wrong and exits 2.
pub fn usage_error(message: String) -> ExitCode {
    eprintln!("argocd-ecr-updater: {message}");
    ExitCode::from(2)
}

/// Prints `value` as JSON on standard output.
pub fn print_json(value: &impl Serialize, pretty: bool) -> Result<(), ExitCode> {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    match text {
        Ok(text) => {
            println!("{text}");
            Ok(())
        }
        Err(e) => Err(usage_error(format!("cannot print the output: {e}"))),
    }
}
