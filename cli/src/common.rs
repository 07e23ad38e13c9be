//! What the commands share: the laptop's AWS configuration, the function's configuration as
//! a command sees it, reading input, and printing. Each command returns the process exit
//! code: 0 done, 1 a target failed in a way a retry could fix, 2 the input or the environment
//! is wrong.

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use serde::Serialize;

/// The AWS SDK configuration of a laptop: the whole credential chain (profiles, SSO,
/// `credential_process`),
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

/// The function's configuration from the environment, as a CLI command sees it: `--cluster`
/// picks one cluster (with its `CLUSTERS` settings, if listed there), `dry_run` overrides
/// `DRY_RUN`.
pub fn config_from_env(
    cluster: Option<&str>,
    dry_run: Option<bool>,
) -> Result<argocd_ecr_updater::config::Config, argocd_ecr_updater::config::ConfigError> {
    let config =
        argocd_ecr_updater::config::Config::from_lookup(|name| match (name, cluster, dry_run) {
            ("CLUSTER_NAME", Some(c), _) => Some(c.to_string()),
            ("DRY_RUN", _, Some(dry)) => Some(dry.to_string()),
            _ => std::env::var(name).ok(),
        })?;
    match cluster {
        Some(name) => config.narrowed_to(name),
        None => Ok(config),
    }
}

/// Reads a file, or standard input for `-`.
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
