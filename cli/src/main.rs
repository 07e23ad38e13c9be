//! `argocd-ecr-updater-cli`: the laptop commands (`select`, `token`, `plan`, `migrate`,
//! `redrive`, `doctor`), one module each, with the whole AWS credential chain a laptop uses
//! (`aws sso login` profiles, `credential_process`). The Lambda function is the package's
//! other binary, `argocd-ecr-updater`, built without those providers.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod common;
mod doctor;
mod migrate;
mod plan;
mod redrive;
mod run_as;
mod select;
mod status;
mod token;

use argocd_ecr_updater::telemetry::LogFormat;

use common::{print_json, usage_error};
use doctor::DoctorRequest;
use migrate::MigrateRequest;
use plan::PlanRequest;
use redrive::RedriveRequest;
use select::SelectRequest;
use status::StatusRequest;

/// The laptop side of argocd-ecr-updater: pick a tag offline, print an EKS token, run the
/// function's pipeline as a dry run, migrate annotations, redrive the dead-letter queue,
/// check a deployment.
///
/// They read the function's environment variables (see the README's configuration table).
#[derive(Parser)]
#[command(name = "argocd-ecr-updater-cli", version = argocd_ecr_updater::VERSION)]
struct Cli {
    /// Log format of the commands: `text` (colours only on a terminal) or `json`.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormatArg,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`'s values; the function crate's [`LogFormat`] carries no argument parser.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (what the Lambda function writes).
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(arg: LogFormatArg) -> Self {
        match arg {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
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
    /// Where each image of one Application stands, as the function would judge it now: what
    /// the spec asks for and whether it runs, the last write and its rollout, the alarms it
    /// is verified by, its promotion against its upstream, and what holds it back. Read-only,
    /// with your credentials. Prints JSON.
    Status {
        /// The Application, as <namespace>/<name>.
        application: String,
        /// The cluster it is in (CLUSTER_NAME, or one of CLUSTERS; default the first).
        #[arg(long)]
        cluster: Option<String>,
    },
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
    /// Hand the events parked in a dead-letter queue to the deployed function again
    /// (asynchronously, as EventBridge does), run them here (--local), or delete them
    /// (--discard). A dry run unless --apply; a message is deleted only once its event was
    /// accepted, succeeded, or is discarded.
    ///
    /// Credentials: the queue is read and emptied, and the function invoked, with your AWS
    /// credentials. --local runs the pipeline as the function's role (--function), assumed
    /// with your credentials, so the Applications' references (git:secret:, git:repocreds,
    /// cosign secret: and secretsmanager: keys, CodeCommit and ECR repositories) reach no more
    /// than the function's IAM and RBAC allow.
    Redrive {
        /// The queue's URL (the stack's DeadLetterQueueUrl or SweepDeadLetterQueueUrl output).
        #[arg(long)]
        queue: String,
        /// The deployed function (the stack's FunctionName output): invoked with each event,
        /// or with --local, the function whose role the events run as (assumed: its trust
        /// policy must let you, see OperatorRoleArns).
        #[arg(long, required_unless_present_any = ["local", "discard"], conflicts_with = "discard")]
        function: Option<String>,
        /// Run the events on this machine through the pipeline, as the function's role
        /// (--function) and with the environment's configuration, instead of invoking the
        /// function.
        #[arg(long, conflicts_with = "discard")]
        local: bool,
        /// With --local, instead of --function: run with YOUR credentials and Kubernetes
        /// access. The Applications' references then reach whatever you may reach, not what
        /// the function's IAM and RBAC allow; a warning says so on every run.
        #[arg(long, requires = "local", conflicts_with = "function")]
        operator_credentials: bool,
        /// Delete the messages (a superseded push; a sweep shard, whose work the next sweep
        /// does again).
        #[arg(long)]
        discard: bool,
        /// Act: invoke, write or delete. Without it nothing changes.
        #[arg(long)]
        apply: bool,
        /// Stop after this many messages.
        #[arg(long, default_value_t = 100)]
        max: usize,
        /// With --local: overrides CLUSTER_NAME.
        #[arg(long, requires = "local")]
        cluster: Option<String>,
        /// Seconds each receive waits for messages (SQS long polling, at most 20).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(i32).range(1..=20))]
        wait_seconds: i32,
    },
    /// Check a deployed function end to end: configuration, binary, rules, clusters, access
    /// entries, RBAC, repositories, the dead-letter queue and Git secrets. Exits 1 if any fails.
    Doctor {
        /// The function's name or ARN (the stack's FunctionName output).
        #[arg(long, required_unless_present = "stack", conflicts_with = "stack")]
        function: Option<String>,
        /// The stack that made the function, instead of --function (needs tag:GetResources).
        #[arg(long)]
        stack: Option<String>,
        /// A registry account holding tracked repositories (the stack's RegistryAccounts);
        /// repeat for several.
        #[arg(long = "registry-account")]
        registry_accounts: Vec<String>,
        /// The stack's region (else the AWS configuration's).
        #[arg(long)]
        region: Option<String>,
        /// The group the access entry maps the role to (the stack's KubernetesGroup).
        #[arg(long, default_value = "argocd-ecr-updater")]
        kubernetes_group: String,
        /// Check RBAC and Git secrets as the function's role, assumed (its trust policy must
        /// let you), instead of asking the API server about the role's user and groups.
        #[arg(long)]
        assume_role: bool,
        /// The topic the alarms notify (the stack's AlarmTopicArn): its subscriptions must be
        /// confirmed, or nobody is paged.
        #[arg(long)]
        alarm_topic: Option<String>,
        /// `text` (a checklist) or `json`.
        #[arg(long, value_parser = ["text", "json"], default_value = "text")]
        output: String,
    },
    /// Run the function's pipeline from a laptop: dry-run unless --apply.
    ///
    /// Credentials: the pipeline runs as the deployed function's role (--function), assumed
    /// with your AWS credentials (or used as they are when they are a session of that role),
    /// so the Applications' references (git:secret:, git:repocreds, cosign secret: and
    /// secretsmanager: keys, CodeCommit and ECR repositories) reach no more than the
    /// function's IAM and RBAC allow. The configuration is the environment's.
    Plan {
        /// The deployed function whose role the run acts as (the stack's FunctionName
        /// output); its trust policy must let you assume it (OperatorRoleArns).
        #[arg(long, required_unless_present = "operator_credentials")]
        function: Option<String>,
        /// Instead of --function: run with YOUR credentials and Kubernetes access. The
        /// Applications' references then reach whatever you may reach, not what the
        /// function's IAM and RBAC allow; a warning says so on every run.
        #[arg(long, conflicts_with = "function")]
        operator_credentials: bool,
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
        Command::Select {
            strategy,
            constraint,
            allow_tags,
            ignore_tags,
            tags_file,
        } => select_tags(
            SelectRequest {
                strategy: &strategy,
                constraint: constraint.as_deref(),
                allow_tags: allow_tags.as_deref(),
                ignore_tags: ignore_tags.as_deref(),
            },
            &tags_file,
        ),
        Command::Token { cluster, region } => runtime().block_on(token::run(cluster, region)),
        Command::Plan {
            function,
            operator_credentials,
            event,
            reconcile,
            apply,
            cluster,
        } => {
            let run_as = match (function, operator_credentials) {
                (Some(function), false) => run_as::RunAs::FunctionRole(function),
                (None, true) => run_as::RunAs::Operator,
                _ => return usage_error(RUN_AS_CHOICE.into()),
            };
            runtime().block_on(plan::run(PlanRequest {
                event,
                reconcile,
                apply,
                cluster,
                run_as,
                log_format: cli.log_format.into(),
            }))
        }
        Command::Status {
            application,
            cluster,
        } => runtime().block_on(status::run(StatusRequest {
            application,
            cluster,
            log_format: cli.log_format.into(),
        })),
        Command::Migrate {
            namespace,
            name,
            cluster,
        } => runtime().block_on(migrate::run(MigrateRequest {
            namespace,
            name,
            cluster,
            log_format: cli.log_format.into(),
        })),
        Command::Doctor {
            function,
            stack,
            registry_accounts,
            region,
            kubernetes_group,
            assume_role,
            alarm_topic,
            output,
        } => runtime().block_on(doctor::run(DoctorRequest {
            target: match (function, stack) {
                (Some(function), _) => doctor::Target::Function(function),
                (None, Some(stack)) => doctor::Target::Stack(stack),
                (None, None) => return usage_error("doctor needs --function or --stack".into()),
            },
            registry_accounts,
            region,
            kubernetes_group,
            assume_role,
            alarm_topic,
            json: output == "json",
        })),
        Command::Redrive {
            queue,
            function,
            local,
            operator_credentials,
            discard,
            apply,
            max,
            cluster,
            wait_seconds,
        } => {
            let how = match (function, local, discard) {
                (_, _, true) => redrive::How::Discard,
                (function, true, _) => redrive::How::Local {
                    cluster,
                    run_as: match (function, operator_credentials) {
                        (Some(function), false) => run_as::RunAs::FunctionRole(function),
                        (None, true) => run_as::RunAs::Operator,
                        _ => return usage_error(RUN_AS_CHOICE.into()),
                    },
                },
                (Some(function), _, _) => redrive::How::Invoke { function },
                (None, false, false) => {
                    return usage_error(
                        "redrive needs --function (invoke the deployed function), --local or --discard".into(),
                    );
                }
            };
            runtime().block_on(redrive::run(RedriveRequest {
                queue_url: queue,
                how,
                apply,
                max,
                wait_seconds,
                log_format: cli.log_format.into(),
            }))
        }
    }
}

/// `select`: the best tag of a list read from `tags_file` (`-`: standard input), streamed, so
/// memory follows the best tag kept, not the file's size.
fn select_tags(request: SelectRequest<'_>, tags_file: &str) -> ExitCode {
    let input: Box<dyn std::io::BufRead> = if tags_file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        match std::fs::File::open(tags_file) {
            Ok(file) => Box::new(std::io::BufReader::new(file)),
            Err(e) => {
                return usage_error(format!("cannot read tags file `{tags_file}`: {e}"));
            }
        }
    };
    match select::run(&request, input) {
        Ok(output) => match print_json(&output, false) {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        },
        Err(e) => usage_error(e.to_string()),
    }
}

/// What a local run needs to be told: whose credentials the pipeline runs with.
const RUN_AS_CHOICE: &str = "a local run needs --function <FunctionName> (the pipeline runs as the function's role, limited as the function is) or --operator-credentials (your own credentials: the Applications' references then reach whatever you may reach)";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}
