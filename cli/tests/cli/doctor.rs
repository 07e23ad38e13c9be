//! `doctor` against the stand-ins' deployed stack: healthy, it passes every check; each
//! broken setup fails the one check that names it, with the command that fixes it.

use std::process::Command;

use argocd_ecr_updater_standins::cloudformation::generated_name;
use argocd_ecr_updater_standins::deployment::Deployment;
use argocd_ecr_updater_standins::{
    FUNCTION_IAM_ROLE_ARN, Grant, Identity, Options, StandIns, function_identity,
    image_updater_grants, shipped_grants,
};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");

/// The stack's dead-letter queue, as the seed deployment names it.
static QUEUE: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| generated_name("argocd-ecr-updater", "DeadLetterQueue"));

/// The name CloudFormation gives the stack's rule `logical_id` in the seed deployment.
fn rule(logical_id: &str) -> String {
    generated_name("argocd-ecr-updater", logical_id)
}

/// The seed stack (with its queue), and the function's role assumable by the operator (as a
/// role whose trust policy allows the operator's principal would be).
pub(crate) async fn deployed() -> StandIns {
    let standins = StandIns::start_seeded().await.unwrap();
    let grants = standins.options.identities[0].grants.clone();
    standins
        .aws
        .add_role(FUNCTION_IAM_ROLE_ARN, Some(function_identity(grants)));
    standins
}

/// Runs `doctor --output json` on the deployed function: whether it passed, and its checks.
pub(crate) fn doctor(standins: &StandIns) -> (bool, Vec<Value>) {
    let function = standins.aws.deployed().function_name;
    let topic = alarm_topic(standins);
    doctor_with(
        standins,
        &["--function", &function, "--alarm-topic", &topic],
    )
}

/// The topic the stand-ins' stack pages.
fn alarm_topic(standins: &StandIns) -> String {
    argocd_ecr_updater_standins::deployment::alarm_topic_arn(
        &standins.aws.account,
        &standins.aws.region,
    )
}

/// Runs `doctor --output json` with `args`.
fn doctor_with(standins: &StandIns, args: &[&str]) -> (bool, Vec<Value>) {
    let output = Command::new(BINARY)
        .env_clear()
        .envs(standins.operator_env())
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
pub(crate) fn check<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    let found: Vec<&Value> = checks
        .iter()
        .filter(|c| c["name"].as_str().unwrap().contains(name))
        .collect();
    assert_eq!(found.len(), 1, "{name}: {checks:#?}");
    found[0]
}

/// The check named exactly `name`.
pub(crate) fn named<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

/// The failed checks of a run.
pub(crate) fn failed(checks: &[Value]) -> Vec<&Value> {
    checks.iter().filter(|c| c["status"] == "fail").collect()
}

/// Breaks the deployment with `change` and returns the failed check named `name`.
async fn failing(change: impl FnOnce(&mut Deployment), name: &str) -> Value {
    let standins = deployed().await;
    standins.aws.deployment(change);
    let (ok, checks) = doctor(&standins);
    assert!(!ok, "{checks:#?}");
    let failed_check = named_or_one(&checks, name).clone();
    assert_eq!(failed_check["status"], "fail", "{failed_check:#}");
    // Only the broken thing fails.
    let others: Vec<&Value> = failed(&checks)
        .into_iter()
        .filter(|c| **c != failed_check)
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    failed_check
}

/// The names of the stack's rules, as the template makes them.
fn rule_names(standins: &StandIns) -> Vec<String> {
    standins.aws.deployed().rules.keys().cloned().collect()
}

pub(crate) fn fix(check: &Value) -> &str {
    check["fix"].as_str().unwrap()
}

pub(crate) fn detail(check: &Value) -> &str {
    check["detail"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_deployment_passes_every_check() {
    let standins = deployed().await;
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    for name in [
        "state",
        "environment",
        "binary for arm64",
        "barun-dev-ecr",
        "authentication mode",
        "access entry",
        "barun-dev endpoint",
        "barun-dev endpoint and CA",
        "namespace argocd",
        "on-failure destination",
        "archived running images in barun-dev",
        QUEUE.as_str(),
    ] {
        assert_eq!(
            named_or_one(&checks, name)["status"],
            "ok",
            "{name}: {checks:#?}"
        );
    }
    // The stack the template makes: its five rules, each enabled as the parameters say,
    // parking in the stack's queue, and allowed to invoke the function.
    let rules = rule_names(&standins);
    assert_eq!(rules.len(), 5, "{rules:?}");
    for (logical_id, state) in [
        ("FunctionEcrPush", "enabled"),
        ("FunctionReconcile", "enabled"),
        (
            "FunctionEcrReplication",
            "disabled (as the stack's parameters set it)",
        ),
        (
            "FunctionEcrScan",
            "disabled (as the stack's parameters set it)",
        ),
        (
            "InspectorScanRule",
            "disabled (as the stack's parameters set it)",
        ),
    ] {
        let rule = rules
            .iter()
            .find(|r| r.contains(&format!("-{logical_id}-")))
            .unwrap();
        assert_eq!(detail(named(&checks, rule)), state, "{rule}");
        let parked = named(&checks, &format!("{rule} dead-letter queue"));
        assert_eq!(
            detail(parked),
            format!("parks undeliverable events in {}", *QUEUE)
        );
        let invoke = named(&checks, &format!("{rule} invoke permission"));
        assert_eq!(invoke["status"], "ok", "{invoke:#}");
    }
}

/// The check named exactly `name`, else the one whose name contains it.
fn named_or_one<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| check(checks, name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_that_does_not_exist_says_where_its_name_comes_from() {
    let standins = deployed().await;
    standins
        .aws
        .deployment(|d| d.function_name = "renamed".into());
    let output = Command::new(BINARY)
        .env_clear()
        .envs(standins.operator_env())
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
async fn a_config_map_cluster_is_checked_through_aws_auth() {
    // Not in aws-auth: unknown to the cluster, with both ways to map it.
    let failed = failing(
        |d| d.authentication_mode = Some("CONFIG_MAP".into()),
        "barun-dev aws-auth",
    )
    .await;
    assert!(detail(&failed).contains("does not map"), "{failed:#}");
    assert!(
        fix(&failed).starts_with(&format!(
            "eksctl create iamidentitymapping --cluster barun-dev --region ap-northeast-2 --arn {FUNCTION_IAM_ROLE_ARN} --group argocd-ecr-updater"
        )) && fix(&failed).contains("authenticationMode=API_AND_CONFIG_MAP"),
        "{failed:#}"
    );
    // Mapped there (with the path aws-auth leaves out): it passes, and RBAC is asked about
    // the groups aws-auth gives the role.
    let standins = deployed().await;
    standins
        .aws
        .deployment(|d| d.authentication_mode = Some("CONFIG_MAP".into()));
    let map_roles = "- rolearn: arn:aws:iam::768157413559:role/argocd-ecr-updater-role\n  username: argocd-ecr-updater:{{SessionName}}\n  groups:\n    - argocd-ecr-updater\n";
    standins
        .kube
        .insert_config_map("kube-system", "aws-auth", &[("mapRoles", map_roles)]);
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert_eq!(
        detail(named(&checks, "barun-dev aws-auth")),
        "aws-auth maps the role to group argocd-ecr-updater"
    );
    assert_eq!(named(&checks, "barun-dev namespace argocd")["status"], "ok");
    assert!(!checks.iter().any(|c| c["name"] == "barun-dev access entry"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_an_entry_that_aws_auth_maps_passes_in_api_and_config_map_mode() {
    let standins = deployed().await;
    standins.aws.deployment(|d| d.access_entries.clear());
    let map_roles = "- rolearn: arn:aws:iam::768157413559:role/argocd-ecr-updater-role\n  groups: [argocd-ecr-updater]\n";
    standins
        .kube
        .insert_config_map("kube-system", "aws-auth", &[("mapRoles", map_roles)]);
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert_eq!(
        detail(check(&checks, "access entry")),
        "none, but aws-auth maps the role to group argocd-ecr-updater"
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
    let standins = deployed().await;
    standins.aws.deployment(|d| {
        for groups in d.access_entries.values_mut() {
            *groups = vec!["viewers".into()];
        }
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let entry = check(&checks, "access entry");
    assert_eq!(entry["status"], "fail");
    assert!(detail(entry).contains("viewers"));
    assert!(fix(entry).contains("update-access-entry"), "{entry:#}");
    // RBAC is asked about the groups the role really gets, which are bound to nothing.
    let rbac = named(&checks, "barun-dev namespace argocd");
    assert_eq!(rbac["status"], "fail");
    assert!(
        detail(rbac).starts_with("not allowed: get applications.argoproj.io"),
        "{rbac:#}"
    );
    assert_eq!(failed(&checks).len(), 2, "{checks:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_endpoint_the_function_cannot_reach_fails() {
    let failed = failing(
        |d| {
            d.endpoint_public = false;
            d.endpoint_private = true;
        },
        "barun-dev endpoint",
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
        "barun-dev endpoint",
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
        |d| d.rule_mut("FunctionEcrPush").enabled = false,
        &rule("FunctionEcrPush"),
    )
    .await;
    assert_eq!(
        fix(&failed),
        format!("aws events enable-rule --name {}", rule("FunctionEcrPush"))
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
async fn rbac_is_asked_as_the_operator_about_the_roles_groups_without_assuming_the_role() {
    // The template's trust policy: Lambda alone may assume the role.
    let standins = StandIns::start_seeded().await.unwrap();
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert!(!checks.iter().any(|c| c["name"] == "function's role"));
    let rbac = named(&checks, "barun-dev namespace argocd");
    assert_eq!(
        detail(rbac),
        "every verb the function uses is allowed to groups argocd-ecr-updater, system:authenticated"
    );
    assert_eq!(named(&checks, "barun-dev excess")["status"], "ok");
    // The reviews were SubjectAccessReviews, sent with the operator's token.
    assert!(
        standins
            .shared
            .count(|r| r.path.ends_with("/subjectaccessreviews") && r.status == 201)
            >= 5
    );
    // --assume-role with a role the operator may not assume says so, and checks nothing as
    // the role.
    let function = standins.aws.deployed().function_name;
    let (ok, checks) = doctor_with(&standins, &["--function", &function, "--assume-role"]);
    assert!(ok, "{checks:#?}");
    let role = check(&checks, "function's role");
    assert_eq!(role["status"], "skipped");
    assert!(fix(role).contains("without --assume-role"), "{role:#}");
    assert!(
        !checks
            .iter()
            .any(|c| c["area"] == "rbac" && c["status"] == "ok")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_allowed_more_than_it_uses_fails_naming_the_excess() {
    let grants = [
        shipped_grants("argocd"),
        vec![
            Grant::on("secrets", &["get", "list"], "*"),
            Grant::on("applications", &["delete"], "argocd"),
        ],
    ]
    .concat();
    let standins = StandIns::start_seeded_with_grants(grants).await.unwrap();
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let excess = failures[0];
    assert_eq!(excess["name"], "barun-dev excess");
    assert_eq!(
        detail(excess),
        "groups argocd-ecr-updater, system:authenticated may also: get secrets in every namespace; list secrets in every namespace; delete applications.argoproj.io in argocd"
    );
    assert!(fix(excess).contains("rolebindings"), "{excess:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_who_may_not_review_others_is_told_how_to_check_by_hand() {
    let limited = Identity {
        grants: vec![Grant::on("configmaps", &["get"], "kube-system")],
        ..argocd_ecr_updater_standins::operator_identity()
    };
    let options = Options {
        identities: vec![function_identity(shipped_grants("argocd")), limited],
        ..Options::default()
    };
    let standins = StandIns::start(options).await.unwrap();
    argocd_ecr_updater_standins::seed::load_builtin(&standins).unwrap();
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let rbac = named(&checks, "barun-dev namespace argocd");
    assert_eq!(rbac["status"], "skipped");
    assert!(
        detail(rbac).contains("SubjectAccessReview needs a cluster admin"),
        "{rbac:#}"
    );
    assert!(
        fix(rbac).starts_with("kubectl auth can-i --list -n argocd --as ")
            && fix(rbac).contains("--as-group argocd-ecr-updater"),
        "{rbac:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_events_fail_the_queue_check_with_their_age_and_the_redrive_command() {
    let standins = deployed().await;
    let url = standins.aws.create_queue(&QUEUE);
    let ten_days_ago = (time::OffsetDateTime::now_utc().unix_timestamp() - 10 * 86_400) * 1000;
    standins.aws.send_message_at(&url, "{}", ten_days_ago);
    standins.aws.send_message(&url, "{}");
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let queue = named(&checks, &QUEUE);
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
    // Read with the operator's credentials: the shape is checked, the role's access is not.
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let good = check(&checks, "git-token");
    assert_eq!(good["status"], "skipped", "{good:#}");
    assert!(detail(good).contains("whether the function's role may read it is not checked"));
    assert!(fix(good).contains("simulate-principal-policy"));
    assert!(!detail(good).contains("customer managed key"), "{good:#}");
    // A customer managed key: the role needs kms:Decrypt on it too, which is said.
    let key = "arn:aws:kms:ap-northeast-2:768157413559:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    standins.aws.deployment(|d| {
        d.secret_kms_keys.insert(
            "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-token-AbCdEf".into(),
            key.to_string(),
        );
    });
    let (_, checks) = doctor(&standins);
    let encrypted = check(&checks, "git-token");
    assert!(
        detail(encrypted).contains(&format!("encrypted with the customer managed key {key}"))
            && detail(encrypted).contains("kms:Decrypt"),
        "{encrypted:#}"
    );
    assert!(fix(encrypted).contains(&format!("aws kms get-key-policy --key-id {key}")));
    // As the role (--assume-role): readable by it.
    let function = standins.aws.deployed().function_name;
    let (ok, checks) = doctor_with(&standins, &["--function", &function, "--assume-role"]);
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
    assert_eq!(named(&checks, "barun-dev-ecr")["status"], "fail");
    let (ok, checks) = doctor_with(
        &standins,
        &["--function", &function, "--registry-account", CENTRAL],
    );
    assert!(ok, "{checks:#?}");
    assert_eq!(
        named(&checks, "barun-dev-ecr")["detail"],
        format!("exists in {CENTRAL}")
    );
    // A registry whose policy does not admit the caller: not checkable, not failed.
    standins.aws.add_registry(CENTRAL, false);
    let (ok, checks) = doctor_with(
        &standins,
        &["--function", &function, "--registry-account", CENTRAL],
    );
    assert!(ok, "{checks:#?}");
    assert_eq!(named(&checks, "barun-dev-ecr")["status"], "skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_deleted_outside_the_stack_fails_everything_that_names_it() {
    let standins = deployed().await;
    standins.aws.delete_queue(&QUEUE);
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failures = failed(&checks);
    // Each rule's target, the on-failure destination, and the queue itself.
    let mut names: Vec<String> = failures
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let mut expected: Vec<String> = rule_names(&standins)
        .iter()
        .map(|r| format!("{r} dead-letter queue"))
        .chain([QUEUE.clone(), "on-failure destination".into()])
        .collect();
    expected.sort();
    assert_eq!(names, expected, "{failures:#?}");
    let push = named(
        &checks,
        &format!("{} dead-letter queue", rule("FunctionEcrPush")),
    );
    assert!(
        detail(push).contains("which is gone: they are lost"),
        "{push:#}"
    );
    let destination = named(&checks, "on-failure destination");
    assert!(detail(destination).contains(&format!("names the queue {}, which is gone", *QUEUE)));
    let queue = named(&checks, &QUEUE);
    assert!(
        detail(queue).starts_with("gone, while 6 name(s) it"),
        "{queue:#}"
    );
    // An unchanged deploy does not bring it back: the fix says what does.
    assert!(
        fix(queue).contains(&format!("aws sqs create-queue --queue-name {}", *QUEUE))
            && fix(queue).contains("An unchanged `sam deploy` does not recreate")
            && fix(queue).contains("terraform apply"),
        "{queue:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_whose_target_parks_nothing_fails_as_losing_what_it_cannot_deliver() {
    let name = format!("{} dead-letter queue", rule("FunctionReconcile"));
    let failed = failing(
        |d| {
            for target in &mut d.rule_mut("FunctionReconcile").targets {
                target.dead_letter_queue = None;
            }
        },
        &name,
    )
    .await;
    assert!(
        detail(&failed).contains("no dead-letter queue"),
        "{failed:#}"
    );
    assert!(fix(&failed).contains("redeploy the template"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_without_leave_to_invoke_the_function_fails_every_rule_with_add_permission() {
    let standins = deployed().await;
    // One rule's permission removed: only that rule fails.
    let push = rule("FunctionEcrPush");
    standins.aws.deployment(|d| {
        d.permissions
            .retain(|p| !p.source_arn.as_deref().is_some_and(|s| s.ends_with(&push)));
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let failed_check = failures[0];
    assert_eq!(failed_check["name"], format!("{push} invoke permission"));
    assert!(detail(failed_check).contains("does not let EventBridge invoke it"));
    let function = standins.aws.deployed().function_name;
    assert!(
        fix(failed_check).starts_with(&format!(
            "aws lambda add-permission --function-name {function} --statement-id {push} --action lambda:InvokeFunction --principal events.amazonaws.com --source-arn arn:aws:events:ap-northeast-2:768157413559:rule/{push}"
        )),
        "{failed_check:#}"
    );
    // Every permission removed: the function has no resource policy, and every rule fails.
    standins.aws.deployment(|d| d.permissions.clear());
    let (_, checks) = doctor(&standins);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 5, "{failures:#?}");
    assert!(
        failures
            .iter()
            .all(|c| detail(c).contains("no resource policy"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_without_an_on_failure_destination_fails_with_the_command_that_sets_it() {
    let failed = failing(|d| d.on_failure = None, "on-failure destination").await;
    assert!(detail(&failed).contains("is dropped"), "{failed:#}");
    assert!(
        fix(&failed).starts_with("aws lambda put-function-event-invoke-config --function-name"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_operator_is_refused_is_reported_as_that_call_not_as_something_absent() {
    // (operation refused, its error code, the check that reports it, its IAM action)
    let cases = [
        (
            "ListTargetsByRule",
            "AccessDeniedException",
            format!("{} dead-letter queue", rule("FunctionEcrPush")),
            "events:ListTargetsByRule",
        ),
        (
            "GetFunctionEventInvokeConfig",
            "AccessDeniedException",
            "on-failure destination".to_string(),
            "lambda:GetFunctionEventInvokeConfig",
        ),
        (
            "DescribeAccessEntry",
            "AccessDeniedException",
            "barun-dev access entry".to_string(),
            "eks:DescribeAccessEntry",
        ),
        (
            "GetPolicy",
            "AccessDeniedException",
            format!("{} invoke permission", rule("FunctionEcrPush")),
            "lambda:GetPolicy",
        ),
        (
            "ListTargetsByRule",
            "ThrottlingException",
            format!("{} dead-letter queue", rule("FunctionReconcile")),
            "events:ListTargetsByRule",
        ),
    ];
    for (operation, code, name, action) in cases {
        let standins = deployed().await;
        standins.aws.deployment(|d| {
            d.refused.insert(operation.into(), code.into());
        });
        let (ok, checks) = doctor(&standins);
        assert!(!ok, "{operation}");
        let reported = named(&checks, &name);
        assert_eq!(reported["status"], "fail", "{reported:#}");
        assert!(
            detail(reported).starts_with(&format!("{operation} failed: {code}")),
            "{reported:#}"
        );
        if code == "AccessDeniedException" {
            assert!(
                fix(reported).contains(&format!("your credentials may not call {action}"))
                    && fix(reported).contains("your permission, not the deployment's"),
                "{reported:#}"
            );
        } else {
            assert!(fix(reported).contains("run doctor again"), "{reported:#}");
        }
        // Nothing is reported absent that was only unreadable.
        let printed = serde_json::to_string(&checks).unwrap();
        for absent in [
            "no dead-letter queue",
            "no on-failure destination",
            "none for the function's role",
            "create-access-entry",
            "no resource policy",
        ] {
            assert!(
                !printed.contains(absent),
                "{operation}: {absent} in {printed}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_access_config_is_read_as_config_map_and_says_why() {
    let standins = deployed().await;
    standins.aws.deployment(|d| d.authentication_mode = None);
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let mode = check(&checks, "authentication mode");
    assert!(
        detail(mode).starts_with("CONFIG_MAP (DescribeCluster's answer has no accessConfig"),
        "{mode:#}"
    );
    assert!(detail(mode).contains("authenticationMode=API_AND_CONFIG_MAP"));
    // The role is then looked for in aws-auth, which does not map it.
    assert_eq!(named(&checks, "barun-dev aws-auth")["status"], "fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_only_cluster_passes_and_its_access_entry_is_checked() {
    let standins = deployed().await;
    standins
        .aws
        .deployment(|d| d.authentication_mode = Some("API".into()));
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert_eq!(
        detail(check(&checks, "authentication mode")),
        "API: access entries apply"
    );
    assert_eq!(
        detail(check(&checks, "access entry")),
        "the access entry maps the role to group argocd-ecr-updater"
    );
    // And without its entry, the entry fails: API mode has no aws-auth to fall back on.
    standins.aws.deployment(|d| d.access_entries.clear());
    let (_, checks) = doctor(&standins);
    assert_eq!(check(&checks, "access entry")["status"], "fail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_still_being_created_says_it_has_no_endpoint_and_rbac_is_not_checked() {
    let failed = failing(
        |d| d.cluster_endpoint_listed = false,
        "barun-dev endpoint and CA",
    )
    .await;
    assert!(
        detail(&failed)
            .starts_with("DescribeCluster hands out no endpoint and no CA (status CREATING)"),
        "{failed:#}"
    );
    assert!(fix(&failed).contains("wait for ACTIVE"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_that_does_not_decode_fails_instead_of_leaving_rbac_silently_unchecked() {
    let standins = deployed().await;
    standins
        .aws
        .deployment(|d| d.cluster_ca_data = Some("bm90IGEgY2VydGlmaWNhdGU=".into()));
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert_eq!(failures[0]["name"], "barun-dev endpoint and CA");
    assert!(detail(failures[0]).contains("does not decode as a PEM certificate"));
    assert!(
        !checks
            .iter()
            .any(|c| c["area"] == "rbac" && c["name"] != "function's role"),
        "{checks:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_git_secret_says_it_does_not_exist_not_that_the_role_lacks_a_grant() {
    let gone = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-deleted-XyZ123";
    let failed = failing(
        |d| {
            d.environment
                .insert("GIT_CREDENTIALS_SECRET_ARNS".into(), gone.into());
        },
        gone,
    )
    .await;
    assert!(
        detail(&failed).starts_with("it does not exist"),
        "{failed:#}"
    );
    assert!(fix(&failed).contains("create-secret"), "{failed:#}");
    assert!(!fix(&failed).contains("list it in"), "{failed:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_lambda_could_not_make_ready_fails_with_lambdas_reason() {
    let failed = failing(
        |d| {
            d.state = "Failed".into();
            d.state_reason = Some("The subnet subnet-1 has no free IP addresses".into());
        },
        "state",
    )
    .await;
    assert!(
        detail(&failed).contains("no free IP addresses"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_that_cannot_be_downloaded_says_why_without_its_url() {
    let standins = deployed().await;
    // A port nothing listens on: the connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    standins.aws.deployment(|d| {
        d.package_location = Some(format!("http://127.0.0.1:{port}/package.zip"));
    });
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let binary = check(&checks, "binary for arm64");
    assert_eq!(binary["status"], "skipped");
    let why = detail(binary);
    assert!(
        why.starts_with("cannot read the package: the download failed: error sending request"),
        "{why}"
    );
    assert!(
        why.to_ascii_lowercase().contains("connection refused"),
        "{why}"
    );
    let printed = serde_json::to_string(&checks).unwrap();
    assert!(
        !printed.contains("package.zip")
            && !printed.contains(argocd_ecr_updater_standins::aws::PRESIGNED_SECRET)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_queue_is_read_into_the_function_with_room_left_for_pushes() {
    let standins = deployed().await;
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let mapping = named(&checks, "event source mapping");
    assert_eq!(mapping["status"], "ok", "{mapping:#}");
    assert_eq!(
        detail(mapping),
        "Enabled; last processing: No records processed"
    );
    let room = named(&checks, "concurrency");
    assert_eq!(room["status"], "ok", "{room:#}");
    assert!(
        detail(room).contains("of the account's 1000 unreserved"),
        "{room:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_queue_other_queues_may_redrive_into_warns_with_the_call_that_denies_them() {
    // As deployed, the template's denyAll passes.
    let standins = deployed().await;
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    let line = named(&checks, "sweep queue redrive");
    assert_eq!(line["status"], "ok", "{line:#}");
    // Without the policy (SQS's default, allowAll): a warning, not a failure, with the fix.
    let queue = standins.aws.deployed().environment["SWEEP_QUEUE_ARN"].clone();
    standins.aws.deployment(|d| {
        assert!(d.redrive_allow_policies.remove(&queue).is_some());
    });
    let (ok, checks) = doctor(&standins);
    assert!(ok, "a warning does not fail the run: {checks:#?}");
    let line = named(&checks, "sweep queue redrive");
    assert_eq!(line["status"], "warn", "{line:#}");
    assert!(
        detail(line).contains("no redrive allow policy")
            && detail(line).contains("trusts them as shards"),
        "{line:#}"
    );
    let url = &standins.aws.deployed().environment["SWEEP_QUEUE_URL"];
    assert!(
        fix(line).starts_with(&format!("aws sqs set-queue-attributes --queue-url {url} "))
            && fix(line).contains("denyAll"),
        "{line:#}"
    );
    // Admitting some queue is the same risk.
    standins.aws.deployment(|d| {
        d.redrive_allow_policies.insert(
            queue.clone(),
            serde_json::json!({"redrivePermission": "byQueue", "sourceQueueArns": ["arn:aws:sqs:ap-northeast-2:123456789012:other"]}),
        );
    });
    let (_, checks) = doctor(&standins);
    let line = named(&checks, "sweep queue redrive");
    assert_eq!(line["status"], "warn", "{line:#}");
    assert!(detail(line).contains("is byQueue"), "{line:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_sweep_mapping_fails_with_the_command_that_enables_it() {
    let failed = failing(
        |d| d.event_source_mappings[0].state = "Disabled".into(),
        "event source mapping",
    )
    .await;
    assert!(detail(&failed).contains("none runs"), "{failed:#}");
    assert!(
        fix(&failed).starts_with("aws lambda update-event-source-mapping --uuid ")
            && fix(&failed).ends_with(" --enabled"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_mapping_lambda_reports_a_problem_with_fails_with_lambdas_words() {
    let failed = failing(
        |d| {
            d.event_source_mappings[0].last_processing_result =
                "PROBLEM: Lambda function failed to assume role".into()
        },
        "event source mapping",
    )
    .await;
    assert!(
        detail(&failed).contains("PROBLEM: Lambda function failed to assume role"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_queue_nothing_reads_fails_with_the_command_that_maps_it() {
    let failed = failing(|d| d.event_source_mappings.clear(), "event source mapping").await;
    assert!(
        detail(&failed).contains("sends shards that never run"),
        "{failed:#}"
    );
    assert!(
        fix(&failed).starts_with("aws lambda create-event-source-mapping --function-name ")
            && fix(&failed).contains("--function-response-types ReportBatchItemFailures"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_concurrency_no_higher_than_the_shards_fails_as_pushes_waiting_behind_them() {
    let maximum = {
        let standins = deployed().await;
        standins.aws.deployed().event_source_mappings[0]
            .maximum_concurrency
            .unwrap()
    };
    let failed = failing(
        |d| d.reserved_concurrency = Some(maximum as i32),
        "concurrency",
    )
    .await;
    assert!(
        detail(&failed).contains("pushes wait behind shards"),
        "{failed:#}"
    );
    // Above it, the same function passes and says what pushes keep.
    let standins = deployed().await;
    standins
        .aws
        .deployment(|d| d.reserved_concurrency = Some(maximum as i32 + 5));
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert!(detail(named(&checks, "concurrency")).ends_with("pushes keep 5"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_queue_whose_policy_refuses_eventbridge_fails_the_rules_it_would_lose() {
    // The push rule dropped from the queue policy's Allow: only that rule's parking fails.
    let standins = deployed().await;
    let push = rule("FunctionEcrPush");
    let queue_arn = standins.aws.deployed().dead_letter_queue;
    standins.aws.deployment(|d| {
        let policy = d.queue_policies.get_mut(&queue_arn).unwrap();
        let sources = policy["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"]
            .as_array_mut()
            .unwrap();
        sources.retain(|arn| !arn.as_str().unwrap().ends_with(&push));
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert_eq!(failures[0]["name"], format!("{push} dead-letter queue"));
    assert!(
        detail(failures[0]).contains("whose policy does not let EventBridge send for this rule"),
        "{:#}",
        failures[0]
    );
    assert!(fix(failures[0]).contains("aws sqs set-queue-attributes"));
    // The deny's exception for EventBridge removed: it denies every rule, and says which
    // statement does.
    standins.aws.deployment(|d| {
        let policy = d.queue_policies.get_mut(&queue_arn).unwrap();
        policy["Statement"][1]["Condition"]
            .as_object_mut()
            .unwrap()
            .remove("StringNotEquals");
    });
    let (_, checks) = doctor(&standins);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 5, "{failures:#?}");
    assert!(
        failures
            .iter()
            .filter(|c| !c["name"].as_str().unwrap().contains(&push))
            .all(|c| detail(c).contains("denies EventBridge (statement OnlyTheStackSends)")),
        "{failures:#?}"
    );
    // No policy at all: EventBridge may not send to the queue.
    standins.aws.deployment(|d| {
        d.queue_policies.clear();
    });
    let (_, checks) = doctor(&standins);
    assert!(
        failed(&checks)
            .iter()
            .all(|c| detail(c).contains("which has no queue policy")),
        "{checks:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_with_mutable_tags_warns_without_failing_the_run() {
    let standins = deployed().await;
    let (_, checks) = doctor(&standins);
    let line = named(&checks, "barun-dev-ecr tag mutability");
    assert_eq!(line["status"], "ok", "{line:#}");
    standins
        .aws
        .deployment(|d| d.mutable_repositories.push("barun-dev-ecr".into()));
    let (ok, checks) = doctor(&standins);
    assert!(ok, "a warning does not fail the run: {checks:#?}");
    let line = named(&checks, "barun-dev-ecr tag mutability");
    assert_eq!(line["status"], "warn", "{line:#}");
    assert!(detail(line).starts_with("MUTABLE: a tag can be pushed again"));
    assert!(fix(line).contains("--image-tag-mutability IMMUTABLE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarms_page_someone_only_once_a_subscription_is_confirmed() {
    let standins = deployed().await;
    let topic = alarm_topic(&standins);
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert_eq!(
        detail(named(&checks, "alarm topic")),
        "1 confirmed subscription(s): email"
    );
    let subscribe = |confirmed: bool| argocd_ecr_updater_standins::deployment::Subscription {
        protocol: "email".into(),
        confirmed,
    };
    // Only unconfirmed subscriptions: nobody is paged.
    let pending = vec![subscribe(false)];
    standins.aws.deployment(|d| {
        d.topics.insert(topic.clone(), pending);
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let line = named(&checks, "alarm topic");
    assert_eq!(line["status"], "fail");
    assert!(
        detail(line).contains("await confirmation, none is confirmed"),
        "{line:#}"
    );
    // One confirmed beside one pending: a warning, and the run passes.
    let mixed = vec![subscribe(true), subscribe(false)];
    standins.aws.deployment(|d| {
        d.topics.insert(topic.clone(), mixed);
    });
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert_eq!(named(&checks, "alarm topic")["status"], "warn");
    // No endpoint is ever printed (a paging service's URL carries its key).
    assert!(
        !serde_json::to_string(&checks)
            .unwrap()
            .contains("endpoint-")
    );
    // The topic gone: every notification is lost.
    standins.aws.deployment(|d| {
        d.topics.clear();
    });
    let (_, checks) = doctor(&standins);
    let line = named(&checks, "alarm topic");
    assert!(detail(line).contains("does not exist"), "{line:#}");
    // No endpoint is ever printed (a paging service's URL carries its key).
    assert!(
        !serde_json::to_string(&checks)
            .unwrap()
            .contains("endpoint-0")
    );
    // Without --alarm-topic: not checked, and says how.
    let function = standins.aws.deployed().function_name;
    let (_, checks) = doctor_with(&standins, &["--function", &function]);
    let line = named(&checks, "alarm topic");
    assert_eq!(line["status"], "skipped");
    assert!(fix(line).contains("--alarm-topic"), "{line:#}");
}

/// The function moved into the cluster's VPC, whose endpoint is private.
fn in_cluster_vpc(d: &mut Deployment) {
    d.endpoint_public = false;
    d.endpoint_private = true;
    d.vpc_id = Some(d.cluster_vpc_id.clone());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vpc_function_is_checked_for_its_egress_its_way_out_and_the_cluster_groups_leave() {
    let standins = deployed().await;
    standins.aws.deployment(in_cluster_vpc);
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert_eq!(
        detail(named(&checks, "security groups")),
        "HTTPS out to anywhere"
    );
    assert_eq!(
        detail(named(&checks, "subnet-1 way out")),
        "out through nat-0standin"
    );
    assert_eq!(
        detail(named(&checks, "barun-dev network path")),
        "sg-cluster admits the function on 443"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_group_that_does_not_admit_the_function_fails_with_the_rule_that_does() {
    let failed = failing(
        |d| {
            in_cluster_vpc(d);
            d.network
                .security_groups
                .get_mut("sg-cluster")
                .unwrap()
                .ingress
                .clear();
        },
        "barun-dev network path",
    )
    .await;
    assert!(detail(&failed).contains("time out"), "{failed:#}");
    assert_eq!(
        fix(&failed),
        "aws ec2 authorize-security-group-ingress --group-id sg-cluster --protocol tcp --port 443 --source-group sg-function"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_routed_to_an_internet_gateway_fails_as_no_way_out() {
    let failed = failing(
        |d| {
            in_cluster_vpc(d);
            d.network.route_tables[0].default_target = Some("igw-0public".into());
        },
        "subnet-1 way out",
    )
    .await;
    assert!(
        detail(&failed)
            .contains("internet gateway igw-0public, which a Lambda function cannot use"),
        "{failed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_route_out_every_api_the_function_calls_needs_an_interface_endpoint() {
    let standins = deployed().await;
    standins.aws.deployment(|d| {
        in_cluster_vpc(d);
        d.network.route_tables[0].default_target = None;
        d.network
            .endpoints
            .push(argocd_ecr_updater_standins::deployment::VpcEndpoint {
                service: "com.amazonaws.ap-northeast-2.ecr.api".into(),
                interface: true,
                private_dns: true,
            });
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let line = named(&checks, "subnet-1 way out");
    assert_eq!(line["status"], "fail");
    // The seed deployment asks EKS for its cluster and sends shards to SQS.
    assert!(
        detail(line).contains("no interface endpoint for ecr.dkr, eks, sqs"),
        "{line:#}"
    );
    assert!(
        fix(line).contains("aws ec2 create-vpc-endpoint"),
        "{line:#}"
    );
    // With one for each, the subnet needs no way out.
    standins.aws.deployment(|d| {
        for service in ["ecr.dkr", "eks", "sqs"] {
            d.network
                .endpoints
                .push(argocd_ecr_updater_standins::deployment::VpcEndpoint {
                    service: format!("com.amazonaws.ap-northeast-2.{service}"),
                    interface: true,
                    private_dns: true,
                });
        }
    });
    let (ok, checks) = doctor(&standins);
    assert!(ok, "{checks:#?}");
    assert!(
        detail(named(&checks, "subnet-1 way out"))
            .starts_with("no route to the internet; an interface endpoint for each")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_groups_that_let_no_https_out_fail() {
    let failed = failing(
        |d| {
            in_cluster_vpc(d);
            d.network
                .security_groups
                .get_mut("sg-function")
                .unwrap()
                .egress
                .clear();
        },
        "security groups",
    )
    .await;
    assert!(detail(&failed).contains("let no HTTPS out"), "{failed:#}");
    assert!(fix(&failed).starts_with("aws ec2 authorize-security-group-egress"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_endpoint_from_subnets_without_a_nat_fails_the_network_path() {
    let standins = deployed().await;
    standins.aws.deployment(|d| {
        d.vpc_id = Some("vpc-0function".into());
        d.network.route_tables[0].default_target = None;
        for service in ["ecr.api", "ecr.dkr", "eks", "sqs"] {
            d.network
                .endpoints
                .push(argocd_ecr_updater_standins::deployment::VpcEndpoint {
                    service: format!("com.amazonaws.ap-northeast-2.{service}"),
                    interface: true,
                    private_dns: true,
                });
        }
    });
    let (ok, checks) = doctor(&standins);
    assert!(!ok);
    let failures = failed(&checks);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert_eq!(failures[0]["name"], "barun-dev network path");
    assert!(detail(failures[0]).contains("(subnet-1) have no NAT gateway"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ec2_read_the_operator_is_refused_is_reported_as_that_call() {
    let failed = failing(
        |d| {
            in_cluster_vpc(d);
            d.refused
                .insert("DescribeSecurityGroups".into(), "AccessDenied".into());
        },
        "security groups",
    )
    .await;
    assert!(
        detail(&failed).starts_with("DescribeSecurityGroups failed: UnauthorizedOperation"),
        "{failed:#}"
    );
    assert!(
        fix(&failed).contains("ec2:DescribeSecurityGroups"),
        "{failed:#}"
    );
}

/// An image archived after Argo CD deployed it: the Application still runs it, and a Pod
/// started again cannot pull it. doctor names the Application, the image and the restore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_running_an_archived_image_is_a_warning_with_the_restore() {
    let standins = deployed().await;
    // The seed Application runs 20250825-120000.
    standins.aws.archive(
        "barun-dev-ecr",
        "sha256:2222222222222222222222222222222222222222222222222222222222222222",
    );
    let (ok, checks) = doctor(&standins);
    assert!(ok, "a warning does not fail doctor: {checks:#?}");
    let archived = named(&checks, "archived running images in barun-dev");
    assert_eq!(archived["status"], "warn", "{archived:#}");
    assert!(
        detail(archived).starts_with("argocd/aws-pipeline-test runs 768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr:20250825-120000: archived in ECR"),
        "{archived:#}"
    );
    assert!(
        fix(archived).contains("update-image-storage-class"),
        "{archived:#}"
    );
}
