//! The whole job on a laptop, no AWS account needed: starts the stand-ins with the seed (the
//! `invitation` Application at `20250825-120000`), runs the function on a sample push event,
//! and prints the Helm parameters before and after, and the decision report.
//!
//! `cargo run --example local [-- EVENT_FILE] [--dry-run]`

use std::sync::Arc;

use argocd_ecr_updater::config::Config;
use argocd_ecr_updater::eks_auth::SystemClock;
use argocd_ecr_updater::handler::{Handler, HandlerError};
use argocd_ecr_updater_standins::StandIns;
use serde_json::Value;

const APP: (&str, &str) = ("argocd", "aws-pipeline-test");

fn parameters(standins: &StandIns) -> String {
    let app = standins.kube.get(APP.0, APP.1).unwrap_or_default();
    app["spec"]["source"]["helm"]["parameters"]
        .as_array()
        .map(|params| {
            params
                .iter()
                .map(|p| {
                    format!(
                        "    {} = {}",
                        p["name"].as_str().unwrap_or(""),
                        p["value"].as_str().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dry_run = args.iter().any(|a| a == "--dry-run");
    let event_path = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/events/push-date-tag.json").to_string()
        });
    let event: Value = serde_json::from_str(&std::fs::read_to_string(&event_path)?)?;

    let standins = StandIns::start_seeded().await?;
    println!(
        "Stand-ins: ECR and EKS at {}, Kubernetes API at {}",
        standins.aws_endpoint(),
        standins.kube_endpoint()
    );
    println!("Event: {event_path}");
    println!(
        "\nApplication {}/{} Helm parameters before:\n{}",
        APP.0,
        APP.1,
        parameters(&standins)
    );

    let config = Config::from_lookup(|name| match name {
        "CLUSTER_NAME" => Some(standins.options.cluster_name.clone()),
        "DRY_RUN" => Some(dry_run.to_string()),
        _ => None,
    })?;
    let handler = Handler::from_sdk(config, &standins.sdk_config(), Arc::new(SystemClock))?;
    let outcome = handler.handle(&event, None).await;

    println!("\nHelm parameters after:\n{}", parameters(&standins));
    let report = match &outcome {
        Ok(report) => report,
        Err(HandlerError::Targets { report, .. }) => report,
        Err(e) => return Err(e.to_string().into()),
    };
    println!(
        "\nDecision report:\n{}",
        serde_json::to_string_pretty(report)?
    );
    let requests = standins.shared.requests();
    println!(
        "\nRequests made: {} to ECR, {} to EKS, {} to the Kubernetes API",
        requests
            .iter()
            .filter(|r| r.service == argocd_ecr_updater_standins::Service::Ecr)
            .count(),
        requests
            .iter()
            .filter(|r| r.service == argocd_ecr_updater_standins::Service::Eks)
            .count(),
        requests
            .iter()
            .filter(|r| r.service == argocd_ecr_updater_standins::Service::Kube)
            .count(),
    );
    if let Err(e) = outcome {
        return Err(e.to_string().into());
    }
    Ok(())
}
