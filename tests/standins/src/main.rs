//! Runs the stand-ins on their own, for `cargo lambda watch` or manual poking:
//! `cargo run -p argocd-ecr-updater-standins -- [--seed DIR]`.

use std::path::PathBuf;

use argocd_ecr_updater_standins::{Options, StandIns, seed};
use clap::Parser;

/// Local stand-ins for ECR, EKS and the EKS Kubernetes API server.
#[derive(Parser)]
struct Args {
    /// A seed folder (applications/*.yaml, images.json); default: the shipped seed.
    #[arg(long)]
    seed: Option<PathBuf>,
    /// Write the cluster CA here (for kubectl --certificate-authority).
    #[arg(long)]
    ca_file: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let standins = StandIns::start(Options::default()).await?;
    match &args.seed {
        Some(dir) => seed::load_dir(&standins, dir)?,
        None => seed::load_builtin(&standins)?,
    }
    if let Some(path) = &args.ca_file {
        std::fs::write(path, &standins.ca_pem)?;
    }
    println!("# Stand-ins are up. Point the function at them with:");
    for (key, value) in standins.function_env() {
        println!("export {key}='{value}'");
    }
    println!(
        "# Kubernetes API: {} ({} applications)",
        standins.kube_endpoint(),
        standins.kube.len()
    );
    println!("# Ctrl-C stops them.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
