use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use argocd_ecr_updater::select_cli::{self, SelectRequest};

/// Roll new ECR images out through Argo CD, from a Lambda function.
///
/// Without a subcommand it runs as the Lambda function.
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
        None => usage_error("the Lambda runtime is not wired yet".into()),
    }
}

fn read_input(path: &str) -> std::io::Result<String> {
    if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path)
    }
}

fn usage_error(message: String) -> ExitCode {
    eprintln!("argocd-ecr-updater: {message}");
    ExitCode::from(2)
}
