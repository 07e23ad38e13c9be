//! Whose credentials `plan` and `redrive --local` run the pipeline with. An Application's
//! editor chooses what the pipeline reads (a `git:secret:` or cosign `secret:` Kubernetes
//! Secret, a cosign `secretsmanager:` key, CodeCommit and ECR repositories); a local run must
//! reach no more of it than the deployed function could, whoever runs it. So it runs as the
//! function's role, and the authorities (RBAC here, IAM in AWS) refuse what they refuse the
//! function; the operator's own credentials only with a loud `--operator-credentials`.

use std::process::{Command, Output};

use argocd_ecr_updater_standins::fixtures::{
    SEED_APP, SEED_TAG, sample_event, strip_server_fields,
};
use argocd_ecr_updater_standins::{
    FUNCTION_IAM_ROLE_ARN, FUNCTION_ROLE_ARN, Grant, OPERATOR_ARN, Service, StandIns,
    function_identity, shipped_grants,
};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");
const REPO: &str = "barun/invitation";
/// The token of the Secret the function's RBAC names.
const TOKEN: &str = "ghp_standin0token0the0function0may0read";
/// The token of a Secret in the same namespace that RBAC does not name: only a cluster admin
/// (the operator) may read it.
const ADMIN_TOKEN: &str = "ghp_standin0token0only0an0admin0may0read";
const VALUES: &str = "image:\n  repository: 768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr\n  tag: \"20250825-120000\"\n";

/// The function's RBAC: `deploy/rbac.yaml`, and `get` on the one Secret
/// `deploy/rbac-git-secret.yaml` names.
fn grants() -> Vec<Grant> {
    let mut grants = shipped_grants("argocd");
    grants.push(Grant::named(
        "secrets",
        &["get"],
        "argocd",
        &["invitation-git", "cosign"],
    ));
    grants
}

/// The seed, a Git repository both tokens may write, and the two Secrets. `assumable`: the
/// function's role trusts the operator (OperatorRoleArns).
async fn standins(assumable: bool) -> StandIns {
    let standins = StandIns::start_seeded_with_grants(grants()).await.unwrap();
    if assumable {
        standins
            .aws
            .add_role(FUNCTION_IAM_ROLE_ARN, Some(function_identity(grants())));
    }
    standins.github.create_repository(
        REPO,
        "main",
        &[
            (
                "argocd/Chart.yaml",
                "apiVersion: v2\nname: invitation\nversion: 0.1.0\n",
            ),
            ("argocd/values.yaml", VALUES),
        ],
    );
    standins.github.grant_token(TOKEN, &[REPO], true);
    standins.github.grant_token(ADMIN_TOKEN, &[REPO], true);
    standins.kube.insert_secret(
        "argocd",
        "invitation-git",
        json!({}),
        &[("password", TOKEN)],
    );
    standins.kube.insert_secret(
        "argocd",
        "admin-git",
        json!({}),
        &[("password", ADMIN_TOKEN)],
    );
    standins
}

/// Sets Image Updater annotations on the seed Application, as `kubectl annotate` would.
fn annotate(standins: &StandIns, pairs: &[(&str, &str)]) {
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    for (key, value) in pairs {
        let key = if key.contains('/') {
            key.to_string()
        } else {
            format!("argocd-image-updater.argoproj.io/{key}")
        };
        app["metadata"]["annotations"][key] = json!(value);
    }
    strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
}

/// The operator's laptop: their own AWS keys, every service at the stand-ins, and the
/// function's Git settings.
fn run(standins: &StandIns, args: &[&str]) -> Output {
    Command::new(BINARY)
        .env_clear()
        .envs(standins.operator_env())
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("GITHUB_API_URL", standins.github_api())
        .env("GIT_CA_BUNDLE", &standins.ca_pem)
        .env("READ_IMAGEUPDATERS", "false")
        .args(args)
        .output()
        .unwrap()
}

fn report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn entry_reason(report: &Value) -> String {
    let entries = report["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{report:#}");
    entries[0].to_string()
}

fn function(standins: &StandIns) -> String {
    standins.aws.deployed().function_name
}

/// The Kubernetes answers to reads of the Secret `namespace/name`, by status.
fn secret_reads(standins: &StandIns, namespace: &str, name: &str) -> Vec<u16> {
    let path = format!("/api/v1/namespaces/{namespace}/secrets/{name}");
    standins
        .shared
        .requests()
        .iter()
        .filter(|r| r.service == Service::Kube && r.path == path)
        .map(|r| r.status)
        .collect()
}

/// Every GitHub request's credential carries `token`, and at least one was made.
fn github_used_only(standins: &StandIns, token: &str) -> bool {
    let requests: Vec<_> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::GitHub && !r.authorization.is_empty())
        .collect();
    !requests.is_empty() && requests.iter().all(|r| r.authorization.contains(token))
}

/// Every AWS call of the pipeline (the cluster's endpoint, ECR) was signed by the function's
/// role; the operator's keys only found the role (Lambda) and assumed it (STS).
fn only_the_role_ran_the_pipeline(standins: &StandIns) {
    let aws: Vec<_> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| !r.caller.is_empty())
        .collect();
    assert!(
        aws.iter()
            .any(|r| r.service == Service::Eks && r.caller == FUNCTION_ROLE_ARN),
        "{aws:#?}"
    );
    for request in aws.iter().filter(|r| r.caller != FUNCTION_ROLE_ARN) {
        let finding_the_role = request.path.contains("/functions/")
            || request.body.contains("Action=GetCallerIdentity")
            || request.body.starts_with("Action=AssumeRole&");
        assert!(
            finding_the_role && request.caller == OPERATOR_ARN,
            "made with the operator's keys: {request:?}"
        );
    }
}

/// Whether any GitHub request carried `token`.
fn github_carried(standins: &StandIns, token: &str) -> bool {
    standins
        .shared
        .requests()
        .iter()
        .any(|r| r.service == Service::GitHub && r.authorization.contains(token))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_runs_as_the_functions_role_so_a_git_secret_its_rbac_does_not_name_is_refused() {
    let standins = standins(true).await;
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");
    let name = function(&standins);

    // The Secret the function's RBAC names: used, as the function would.
    annotate(
        &standins,
        &[("write-back-method", "git:secret:argocd/invitation-git")],
    );
    let output = run(&standins, &["plan", "--event", event, "--function", &name]);
    assert!(output.status.success(), "{output:?}");
    let reason = entry_reason(&report(&output));
    assert!(reason.contains("would commit"), "{reason}");
    assert!(github_used_only(&standins, TOKEN));
    only_the_role_ran_the_pipeline(&standins);

    // A Secret of the same namespace that RBAC does not name: the operator may read it, the
    // function may not, and neither may the run.
    standins.shared.clear_log();
    annotate(
        &standins,
        &[("write-back-method", "git:secret:argocd/admin-git")],
    );
    let output = run(&standins, &["plan", "--event", event, "--function", &name]);
    assert!(!output.status.success(), "{output:?}");
    let reason = entry_reason(&report(&output));
    assert!(
        reason.contains("Secret argocd/admin-git") && reason.contains("resourceNames: [admin-git]"),
        "{reason}"
    );
    assert_eq!(secret_reads(&standins, "argocd", "admin-git"), [403]);
    assert!(
        !github_carried(&standins, ADMIN_TOKEN),
        "the admin's token reached the Git host"
    );
    assert_eq!(standins.kube.seed_tag().as_deref(), Some(SEED_TAG));
    only_the_role_ran_the_pipeline(&standins);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("WARNING"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_credentials_reach_what_the_operator_may_and_say_so_loudly() {
    // The problem, kept only behind the flag: the same annotation reads the Secret the
    // function could not, and sends its token to the Git host.
    let standins = standins(true).await;
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");
    annotate(
        &standins,
        &[("write-back-method", "git:secret:argocd/admin-git")],
    );
    let output = run(
        &standins,
        &["plan", "--event", event, "--operator-credentials"],
    );
    assert!(output.status.success(), "{output:?}");
    let reason = entry_reason(&report(&output));
    assert!(reason.contains("would commit"), "{reason}");
    assert_eq!(secret_reads(&standins, "argocd", "admin-git"), [200]);
    assert!(github_used_only(&standins, ADMIN_TOKEN));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("WARNING: --operator-credentials")
            && stderr.contains("git:secret:")
            && stderr.contains("--function"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_does_not_trust_the_operator_stops_the_run_before_anything_is_read() {
    let standins = standins(false).await;
    annotate(
        &standins,
        &[("write-back-method", "git:secret:argocd/admin-git")],
    );
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");
    let output = run(
        &standins,
        &["plan", "--event", event, "--function", &function(&standins)],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for says in [
        "cannot assume the function's role",
        FUNCTION_IAM_ROLE_ARN,
        "OperatorRoleArns",
        "operator_role_arns",
        "--operator-credentials",
    ] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
    assert!(
        standins
            .shared
            .requests()
            .iter()
            .all(|r| r.service != Service::Kube && r.service != Service::GitHub),
        "the cluster or Git host was reached"
    );

    // Neither way chosen: the command says which to choose.
    let output = run(&standins, &["plan", "--event", event]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--function"), "{stderr}");
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    let output = run(&standins, &["redrive", "--queue", &queue, "--local"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--function <FunctionName>") && stderr.contains("--operator-credentials"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_redrive_runs_as_the_functions_role_and_reads_the_queue_as_the_operator() {
    let standins = standins(true).await;
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    standins
        .aws
        .send_message(&queue, &sample_event("push-date-tag.json").to_string());
    let name = function(&standins);
    let pem = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n";
    for namespace in ["argocd", "kube-system"] {
        standins
            .kube
            .insert_secret(namespace, "cosign", json!({}), &[("cosign.pub", pem)]);
    }

    // A cosign key in a namespace the function's RBAC does not reach: refused.
    annotate(
        &standins,
        &[(
            "argocd-ecr-updater.io/app.cosign-key",
            "secret:kube-system/cosign",
        )],
    );
    let args = [
        "redrive",
        "--queue",
        &queue,
        "--local",
        "--function",
        &name,
        "--wait-seconds",
        "1",
    ];
    let output = run(&standins, &args);
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.contains("1 message(s) redriven"), "{output:?}");
    assert_eq!(secret_reads(&standins, "kube-system", "cosign"), [403]);
    assert_eq!(standins.aws.queue(&queue).len(), 1, "a dry run keeps it");

    // The one RBAC names: read.
    annotate(
        &standins,
        &[(
            "argocd-ecr-updater.io/app.cosign-key",
            "secret:argocd/cosign",
        )],
    );
    let output = run(&standins, &args);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 message(s) redriven"),
        "{output:?}"
    );
    assert_eq!(secret_reads(&standins, "argocd", "cosign"), [200]);

    // The queue is the operator's to read; the pipeline's ECR reads are the role's.
    let requests = standins.shared.requests();
    let callers = |operation: &str| -> Vec<String> {
        requests
            .iter()
            .filter(|r| r.operation == operation)
            .map(|r| r.caller.clone())
            .collect()
    };
    let receives = callers("ReceiveMessage");
    assert!(
        !receives.is_empty() && receives.iter().all(|c| c == OPERATOR_ARN),
        "{receives:?}"
    );
    let reads = callers("DescribeImages");
    assert!(
        !reads.is_empty() && reads.iter().all(|c| c == FUNCTION_ROLE_ARN),
        "{reads:?}"
    );
}
