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
    // The function's identity may touch only what it uses; a person looking (kubectl get
    // events, kubectl describe app, doctor) is a cluster admin with keys of their own.
    println!("# As the operator (a cluster admin, every read allowed), in another shell:");
    for (key, value) in standins.operator_env() {
        if key.starts_with("AWS_ACCESS_KEY_ID")
            || key == "AWS_SECRET_ACCESS_KEY"
            || key == "AWS_ENDPOINT_URL"
        {
            println!("#   export {key}='{value}'");
        }
    }
    println!(
        "#   argocd-ecr-updater-cli token --cluster {} --region {} | jq -r .status.token > /tmp/t",
        standins.options.cluster_name, standins.options.region
    );
    println!("# Ctrl-C stops them.");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
