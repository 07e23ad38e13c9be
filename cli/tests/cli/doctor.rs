//! `doctor` against the stand-ins' deployed stack: healthy, it passes every check; each
//! broken setup fails the one check that names it, with the command that fixes it.

use std::process::Command;

use argocd_ecr_updater_standins::deployment::Deployment;
use argocd_ecr_updater_standins::{
    FUNCTION_IAM_ROLE_ARN, Grant, StandIns, function_identity, image_updater_grants,
};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");

/// The stack's dead-letter queue, as the seed deployment names it.
const QUEUE: &str = "argocd-ecr-updater-DeadLetterQueue-7TQ2";

/// The seed stack (with its queue), and the function's role assumable by the operator (as a
/// role whose trust policy allows the operator's principal would be).
async fn deployed() -> StandIns {
    let standins = StandIns::start_seeded().await.unwrap();
    let grants = standins.options.identities[0].grants.clone();
    standins
        .aws
        .add_role(FUNCTION_IAM_ROLE_ARN, Some(function_identity(grants)));
    standins
}

/// Runs `doctor --output json` on the deployed function: whether it passed, and its checks.
fn doctor(standins: &StandIns) -> (bool, Vec<Value>) {
    let function = standins.aws.deployed().function_name;
    doctor_with(standins, &["--function", &function])
}

/// Runs `doctor --output json` with `args`.
fn doctor_with(standins: &StandIns, args: &[&str]) -> (bool, Vec<Value>) {
    let output = Command::new(BINARY)
        .env_clear()
        .envs(standins.function_env())
        .env("AWS_ENDPOINT_URL", standins.aws_endpoint())
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(["doctor", "--output", "json"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let checks: Vec<Value> = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&output.stderr)));
    (output.status.success(), checks)
}

/// The one check whose name contains `name`.
fn check<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    let found: Vec<&Value> = checks
        .iter()
        .filter(|c| c["name"].as_str().unwrap().contains(name))
        .collect();
    assert_eq!(found.len(), 1, "{name}: {checks:#?}");
    found[0]
}

/// Breaks the deployment with `change` and returns the failed check named `name`.
async fn failing(change: impl FnOnce(&mut Deployment), name: &str) -> Value {
    let standins = deployed().await;
    standins.aws.deployment(change);
    let (ok, checks) = doctor(&standins);
    assert!(!ok, "{checks:#?}");
    let failed = check(&checks, name).clone();
    assert_eq!(failed["status"], "fail", "{failed:#}");
    // Only the broken thing fails.
    let others: Vec<&Value> = checks
        .iter()
        .filter(|c| c["status"] == "fail" && **c != failed)
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    failed
}

fn fix(check: &Value) -> &str {
    check["fix"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_deployment_passes_every_check() {
    let standins = deployed().await;
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    for name in [
        "environment",
        "binary for arm64",
        "FunctionEcrPush",
        "barun-dev-ecr",
        "authentication mode",
        "access entry",
        "endpoint",
        "namespace argocd",
        QUEUE,
    ] {
        assert_eq!(check(&checks, name)["status"], "ok", "{name}: {checks:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_that_does_not_exist_says_where_its_name_comes_from() {
    let standins = deployed().await;
    standins
        .aws
        .deployment(|d| d.function_name = "renamed".into());
    let output = Command::new(BINARY)
        .env_clear()
        .envs(standins.function_env())
        .env("AWS_ENDPOINT_URL", standins.aws_endpoint())
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .args(["doctor", "--function", "argocd-ecr-updater-updater"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("✗ function: argocd-ecr-updater-updater"),
        "{text}"
    );
    assert!(text.contains("FunctionName output"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_the_function_would_refuse_fails_with_the_variables_name() {
    let failed = failing(
        |d| {
            d.environment
                .insert("CLUSTERS".into(), "[{\"name\": ".into());
        },
        "environment",
    )
    .await;
    assert!(
        failed["detail"].as_str().unwrap().contains("CLUSTERS"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_x86_binary_on_arm64_fails_and_says_how_to_build_for_arm64() {
    let failed = failing(|d| d.binary_machine = 62, "binary for arm64").await;
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("built for x86_64")
    );
    assert!(fix(&failed).contains("--arm64"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_map_cluster_fails_with_the_command_that_switches_its_mode() {
    let failed = failing(
        |d| d.authentication_mode = "CONFIG_MAP".into(),
        "authentication mode",
    )
    .await;
    assert!(
        fix(&failed).contains("update-cluster-config --name barun-dev")
            && fix(&failed).contains("authenticationMode=API_AND_CONFIG_MAP"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_access_entry_fails_with_the_command_that_creates_it() {
    let failed = failing(|d| d.access_entries.clear(), "access entry").await;
    assert!(
        fix(&failed).contains(&format!(
            "create-access-entry --cluster-name barun-dev --region ap-northeast-2 --principal-arn {FUNCTION_IAM_ROLE_ARN}"
        )),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_entry_to_another_group_fails_naming_both_groups() {
    let failed = failing(
        |d| {
            for groups in d.access_entries.values_mut() {
                *groups = vec!["viewers".into()];
            }
        },
        "access entry",
    )
    .await;
    assert!(failed["detail"].as_str().unwrap().contains("viewers"));
    assert!(fix(&failed).contains("update-access-entry"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_endpoint_the_function_cannot_reach_fails() {
    let failed = failing(
        |d| {
            d.endpoint_public = false;
            d.endpoint_private = true;
        },
        "endpoint",
    )
    .await;
    assert!(fix(&failed).contains("SubnetIds"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_in_another_vpc_than_the_private_cluster_fails() {
    let failed = failing(
        |d| {
            d.endpoint_public = false;
            d.endpoint_private = true;
            d.vpc_id = Some("vpc-0elsewhere".into());
        },
        "endpoint",
    )
    .await;
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("vpc-0elsewhere")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_push_rule_fails_with_the_command_that_enables_it() {
    let failed = failing(
        |d| {
            for (name, rule) in &mut d.rules {
                if name.contains("EcrPush") {
                    rule.enabled = false;
                }
            }
        },
        "FunctionEcrPush",
    )
    .await;
    assert!(
        fix(&failed).starts_with("aws events enable-rule --name"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracked_repository_that_does_not_exist_fails() {
    let failed = failing(|d| d.repositories.clear(), "barun-dev-ecr").await;
    assert!(fix(&failed).contains("--registry-account"), "{failed:#}");
    assert!(fix(&failed).contains("EcrRepositoryNames"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_missing_a_verb_fails_naming_it_as_the_functions_role() {
    // The function's role may read Applications but not patch them.
    let grants = [
        vec![
            Grant::new(&["get", "list"], "argocd"),
            Grant::on("applicationsets", &["get"], "argocd"),
            Grant::on("events", &["create"], "argocd"),
        ],
        image_updater_grants("argocd"),
    ]
    .concat();
    let standins = StandIns::start_seeded_with_grants(grants.clone())
        .await
        .unwrap();
    standins
        .aws
        .add_role(FUNCTION_IAM_ROLE_ARN, Some(function_identity(grants)));
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failed = check(&checks, "namespace argocd");
    assert_eq!(failed["status"], "fail");
    assert_eq!(
        failed["detail"], "not allowed: patch applications.argoproj.io",
        "{failed:#}"
    );
    assert!(fix(failed).contains("kubectl apply -f deploy/rbac.yaml"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_cannot_be_assumed_skips_rbac_and_says_how_to_check_by_hand() {
    let standins = StandIns::start_seeded().await.unwrap();
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let role = check(&checks, "function's role");
    assert_eq!(role["status"], "skipped");
    assert!(fix(role).contains("kubectl auth can-i"));
    assert!(
        !checks
            .iter()
            .any(|c| c["area"] == "rbac" && c["status"] == "ok")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_events_fail_the_queue_check_with_their_age_and_the_redrive_command() {
    let standins = deployed().await;
    let url = standins.aws.create_queue(QUEUE);
    let ten_days_ago = (time::OffsetDateTime::now_utc().unix_timestamp() - 10 * 86_400) * 1000;
    standins.aws.send_message_at(&url, "{}", ten_days_ago);
    standins.aws.send_message(&url, "{}");
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let queue = check(&checks, QUEUE);
    let detail = queue["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("2 event(s) parked, the oldest seen 10 day(s) old"),
        "{detail}"
    );
    assert!(detail.contains("14 days"), "{detail}");
    assert!(fix(queue).contains(&format!("redrive --queue {url}")));
    // Looking does not take them: both are still there and visible.
    assert_eq!(standins.aws.queue(&url).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_credentials_secrets_are_checked_for_their_shape_and_never_printed() {
    let standins = deployed().await;
    let good = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-token-AbCdEf";
    let bad = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-wrong-GhIjKl";
    standins
        .aws
        .put_secret(good, r#"{"token": "ghp_doctor_never_prints_this"}"#, true);
    standins
        .aws
        .put_secret(bad, r#"{"user": "x", "pass": "doctor-secret-2"}"#, true);
    standins.aws.deployment(|d| {
        d.environment.insert(
            "GIT_CREDENTIALS_SECRET_ARNS".into(),
            format!("{good},{bad}"),
        );
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let printed = serde_json::to_string(&checks).unwrap();
    assert!(
        !printed.contains("ghp_doctor_never_prints_this") && !printed.contains("doctor-secret-2")
    );
    let good = check(&checks, "git-token");
    assert_eq!(good["status"], "ok");
    assert!(
        good["detail"]
            .as_str()
            .unwrap()
            .contains("the function's role; holds a token")
    );
    let bad = check(&checks, "git-wrong");
    assert_eq!(bad["status"], "fail");
    assert!(
        bad["detail"].as_str().unwrap().contains("neither `token`"),
        "{bad:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_name_finds_the_function_its_stack_made() {
    let standins = deployed().await;
    let (ok, checks) = doctor_with(&standins, &["--stack", "argocd-ecr-updater"]);
    assert!(ok, "{checks:#?}");
    let function = standins.aws.deployed().function_name;
    assert_eq!(check(&checks, &function)["status"], "ok");
    let (ok, checks) = doctor_with(&standins, &["--stack", "someone-elses"]);
    assert!(!ok);
    let missing = check(&checks, "stack someone-elses");
    assert!(
        missing["detail"]
            .as_str()
            .unwrap()
            .contains("no function of this stack")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_of_a_central_registry_is_found_in_the_account_named() {
    const CENTRAL: &str = "111122223333";
    let standins = deployed().await;
    standins.aws.deployment(|d| {
        d.repositories.clear();
        d.repositories
            .insert(CENTRAL.into(), vec!["barun-dev-ecr".into()]);
    });
    standins.aws.add_registry(CENTRAL, true);
    let function = standins.aws.deployed().function_name;
    let (ok, checks) = doctor_with(&standins, &["--function", &function]);
    assert!(!ok);
    assert_eq!(check(&checks, "barun-dev-ecr")["status"], "fail");
    let (ok, checks) = doctor_with(
        &standins,
        &["--function", &function, "--registry-account", CENTRAL],
    );
    assert!(ok, "{checks:#?}");
    assert_eq!(
        check(&checks, "barun-dev-ecr")["detail"],
        format!("exists in {CENTRAL}")
    );
    // A registry whose policy does not admit the caller: not checkable, not failed.
    standins.aws.add_registry(CENTRAL, false);
    let (ok, checks) = doctor_with(
        &standins,
        &["--function", &function, "--registry-account", CENTRAL],
    );
    assert!(ok, "{checks:#?}");
    assert_eq!(check(&checks, "barun-dev-ecr")["status"], "skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_that_is_gone_fails_with_the_redeploy_that_makes_it_anew() {
    let failed = failing(
        |d| d.dead_letter_queue = d.dead_letter_queue.replace("7TQ2", "GONE"),
        "DeadLetterQueue-GONE",
    )
    .await;
    assert!(fix(&failed).contains("redeploy the stack"), "{failed:#}");
}
