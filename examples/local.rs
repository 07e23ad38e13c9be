//! The whole job on a laptop, no AWS account needed: starts the stand-ins with the seed (the
//! `invitation` Application at `20250825-120000`), runs the function on a sample push event,
//! and prints the Helm parameters before and after, and the decision report.
//!
//! With `--git`, the Application uses `write-back-method: git`: a GitHub stand-in holds its
//! repository, Secrets Manager its token, and the example prints the commit and the file.
//!
//! The stand-ins include Argo CD's application controller, which moves the Application as
//! Argo CD does after the write: compared, an operation Running then Succeeded, status stale
//! until compared again, Progressing while the Pods roll, then Healthy. It runs on a clock the
//! example moves (the function's clock too), so no time is waited: the example prints each
//! state as the clock passes it, delivers each rollout check when SQS would hand it out, and
//! prints what it found, up to the confirmation: the outcome, the lead time from the push, and
//! the `RolloutConfirmed` Event.
//!
//! `cargo run --example local [-- EVENT_FILE] [--dry-run] [--git]`

use std::sync::Arc;
use std::time::Duration;

use argocd_ecr_updater::cluster::eks_auth::Clock;
use argocd_ecr_updater::config::Config;
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::pipeline::handler::Handler;
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::{StandIns, argocd};
use serde_json::Value;

const APP: (&str, &str) = ("argocd", "aws-pipeline-test");

/// The stand-ins' clock as the function's: both read the time the example sets.
#[derive(Debug)]
struct Scripted(Arc<SimClock>);

impl Clock for Scripted {
    fn now(&self) -> std::time::SystemTime {
        self.0.now().into()
    }
}

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
    let git = args.iter().any(|a| a == "--git");
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

    if git {
        use_git(&standins)?;
    }
    let queue = standins.aws.create_queue("sweep");
    let queue_arn = format!(
        "arn:aws:sqs:{}:{}:sweep",
        standins.options.region, standins.options.account
    );
    let clock = Arc::new(SimClock::scripted());
    standins
        .kube
        .run_controller(controller(&standins, git, clock.clone()));
    let config = Config::from_lookup(|name| match name {
        "CLUSTER_NAME" => Some(standins.options.cluster_name.clone()),
        "SWEEP_QUEUE_URL" => Some(queue.clone()),
        "SWEEP_QUEUE_ARN" => Some(queue_arn.clone()),
        "DRY_RUN" => Some(dry_run.to_string()),
        "GIT_CREDENTIALS_SECRET_ARNS" if git => Some(GIT_SECRET.into()),
        "GITHUB_API_URL" if git => Some(standins.github_api()),
        "GIT_CA_BUNDLE" if git => Some(standins.ca_pem.clone()),
        _ => None,
    })?;
    let handler = Handler::from_sdk(config, &standins.sdk_config(), Arc::new(Scripted(clock)))?;
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
    if git {
        let history = standins.github.history(GIT_REPO, "main");
        println!("\nCommits on {GIT_REPO}@main, newest first:");
        for (oid, commit) in &history {
            println!(
                "  {} {}",
                &oid[..7],
                commit.message.lines().next().unwrap_or("")
            );
        }
        println!(
            "\n{GIT_FILE} on main:\n{}",
            standins
                .github
                .file(GIT_REPO, "main", GIT_FILE)
                .unwrap_or_else(|| "(absent)".into())
        );
        let app = standins.kube.get(APP.0, APP.1).unwrap_or_default();
        println!(
            "Application annotation argocd.argoproj.io/refresh: {}",
            app["metadata"]["annotations"]["argocd.argoproj.io/refresh"]
        );
    }
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
    if git {
        println!(
            "Requests to GitHub: {}",
            requests
                .iter()
                .filter(|r| r.service == argocd_ecr_updater_standins::Service::GitHub)
                .count()
        );
    }
    if let Err(e) = outcome {
        return Err(e.to_string().into());
    }
    confirm(&standins, &handler, &queue, &queue_arn).await
}

/// Argo CD's application controller on `clock`, a typical one rolling out to Healthy. With
/// Git write-back it renders the override file committed to the GitHub stand-in.
fn controller(standins: &StandIns, git: bool, clock: Arc<SimClock>) -> argocd::Controller {
    let synced =
        argocd::Controller::timed(argocd::Script::Healthy, argocd::Timeline::typical(), clock);
    if !git {
        return synced;
    }
    let github = standins.github.clone();
    synced.rendering(Arc::new(move |_| {
        let revision = github.head(GIT_REPO, "main")?;
        let source: Value =
            serde_yaml_ng::from_str(&github.file(GIT_REPO, "main", GIT_FILE)?).ok()?;
        let images = argocd::images_of_spec(&serde_json::json!({"source": source}));
        Some(argocd::Rendered { revision, images })
    }))
}

/// Delivers each rollout check the write sent when SQS would hand it out, printing the
/// Application's states as the controller moves it meanwhile, until an outcome.
async fn confirm(
    standins: &StandIns,
    handler: &Handler,
    queue: &str,
    queue_arn: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let checks = || -> Vec<argocd_ecr_updater_standins::aws::QueueMessage> {
        standins
            .aws
            .queue(queue)
            .into_iter()
            .filter(|m| m.body.contains("confirm-rollout"))
            .collect()
    };
    if checks().is_empty() {
        println!("\nNo rollout to follow: nothing was written.");
        return Ok(());
    }
    let clock = standins
        .kube
        .controller_clock()
        .ok_or("no controller runs")?;
    let written = clock.now();
    println!(
        "\nArgo CD, as the controller stand-in moves the Application (seconds after the write):"
    );
    let mut seen = String::new();
    for _ in 0..12 {
        let Some(check) = checks().pop() else { break };
        for _ in 0..check.delay_seconds {
            standins.kube.step_to(clock.now() + Duration::from_secs(1));
            let state = status_line(&standins.kube.get(APP.0, APP.1).unwrap_or_default());
            if state != seen {
                println!(
                    "  {:>3} s  {state}",
                    (clock.now() - written).whole_seconds()
                );
                seen = state;
            }
        }
        let batch = serde_json::json!({"Records": [{"messageId": check.id, "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn, "body": check.body}]});
        let report = handler
            .handle(&batch, None)
            .await
            .map_err(|e| e.to_string())?;
        let ended = report.rollouts.iter().any(|r| r.state != "pending");
        print_rollouts(&report.rollouts);
        if ended {
            break;
        }
    }
    for event in standins.kube.events() {
        if event["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("Rollout"))
        {
            println!("Event {}: {}", event["reason"], event["message"]);
        }
    }
    Ok(())
}

/// One line of what Argo CD's status says now.
fn status_line(app: &Value) -> String {
    let status = &app["status"];
    let text = |v: &Value| v.as_str().unwrap_or("-").to_string();
    format!(
        "sync {}, operation {}, health {}, reconciledAt {}, images {}",
        text(&status["sync"]["status"]),
        text(&status["operationState"]["phase"]),
        text(&status["health"]["status"]),
        text(&status["reconciledAt"]),
        status["summary"]["images"]
    )
}

/// What each rollout check found.
fn print_rollouts(rollouts: &[argocd_ecr_updater::report::RolloutReport]) {
    for rollout in rollouts {
        println!(
            "Rollout check {}: {} of {}/{}: {}",
            rollout.check, rollout.state, rollout.namespace, rollout.name, rollout.reason
        );
        for lead in &rollout.lead_seconds {
            if *lead > 86_400.0 {
                println!(
                    "  lead time, ECR push to live: {:.0} days (the sample image was pushed long ago; a fresh push measures seconds)",
                    lead / 86_400.0
                );
            } else {
                println!("  lead time, ECR push to live: {lead:.0} s");
            }
        }
        if let Some(seconds) = rollout.write_to_live_seconds {
            println!("  write to live: {seconds:.1} s");
        }
    }
}

const GIT_REPO: &str = "barun/invitation";
const GIT_FILE: &str = "argocd/.argocd-source-aws-pipeline-test.yaml";
const GIT_SECRET: &str =
    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-Local1";

/// The seed's repository on the GitHub stand-in, a token for it in Secrets Manager, and the
/// Application switched to `write-back-method: git`.
fn use_git(standins: &StandIns) -> Result<(), Box<dyn std::error::Error>> {
    standins.github.create_repository(
        GIT_REPO,
        "main",
        &[
            (
                "argocd/Chart.yaml",
                "apiVersion: v2\nname: invitation\nversion: 0.1.0\n",
            ),
            (
                "argocd/values.yaml",
                "image:\n  repository: barun-dev-ecr\n  tag: latest\n",
            ),
        ],
    );
    let token = "ghp_local_example_token";
    standins.github.grant_token(token, &[GIT_REPO], true);
    standins.aws.put_secret(
        GIT_SECRET,
        &serde_json::json!({"token": token}).to_string(),
        true,
    );
    let mut app = standins
        .kube
        .get(APP.0, APP.1)
        .ok_or("the seed Application is missing")?;
    app["metadata"]["annotations"]["argocd-image-updater.argoproj.io/write-back-method"] =
        "git".into();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app)?;
    println!(
        "Git write-back: {GIT_REPO} on the GitHub stand-in at {}",
        standins.github_api()
    );
    Ok(())
}
