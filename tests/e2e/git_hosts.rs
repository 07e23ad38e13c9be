//! End to end: one scenario table, run against every Git host git write-back supports, each
//! through its stand-in: GitHub (REST + GraphQL over HTTPS, a token from Secrets Manager),
//! GitLab (REST v4 over HTTPS, a token from Secrets Manager) and AWS CodeCommit (AWS JSON 1.1,
//! the function's IAM role, no secret). The same contract holds
//! on each: first write, update, duplicate, late older tag, racing commit, protected branch,
//! bad credentials.

use crate::common::{Scenario, event};
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, push_event};
use argocd_ecr_updater_standins::github::GitHubState;
use argocd_ecr_updater_standins::{FaultAction, Route, Service};
use serde_json::{Value, json};

const IU: &str = "argocd-image-updater.argoproj.io/";
const FILE: &str = "argocd/.argocd-source-aws-pipeline-test.yaml";
const TOKEN: &str = "ghp_hosts_scenario_token";
const SECRET: &str = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:hosts-Ab12Cd";

#[derive(Debug, Clone, Copy)]
enum Host {
    GitHub,
    GitLab,
    CodeCommit,
}

impl Host {
    fn repository(self) -> &'static str {
        match self {
            Host::GitHub | Host::GitLab => "barun/invitation",
            Host::CodeCommit => "invitation",
        }
    }

    fn url(self) -> &'static str {
        match self {
            Host::GitHub => "https://github.com/barun/invitation.git",
            Host::GitLab => "https://gitlab.com/barun/invitation.git",
            Host::CodeCommit => {
                "https://git-codecommit.ap-northeast-2.amazonaws.com/v1/repos/invitation"
            }
        }
    }

    fn store(self, standins: &Scenario) -> &GitHubState {
        match self {
            Host::GitHub => &standins.github,
            Host::GitLab => &standins.gitlab,
            Host::CodeCommit => &standins.aws.codecommit,
        }
    }

    fn service(self) -> Service {
        match self {
            Host::GitHub => Service::GitHub,
            Host::GitLab => Service::GitLab,
            Host::CodeCommit => Service::CodeCommit,
        }
    }

    /// Takes the function's credentials away: a revoked token, or an IAM role without
    /// access to the repository.
    fn revoke(self, standins: &Scenario) {
        match self {
            Host::GitHub | Host::GitLab => {
                standins
                    .aws
                    .put_secret(SECRET, &json!({"token": "ghp_revoked"}).to_string(), true)
            }
            Host::CodeCommit => {
                standins
                    .aws
                    .codecommit_denied
                    .lock()
                    .unwrap()
                    .insert("invitation".into());
            }
        }
    }
}

async fn setup(host: Host) -> Scenario {
    let standins = Scenario::seeded().await;
    host.store(&standins).create_repository(
        host.repository(),
        "main",
        &[(
            "argocd/Chart.yaml",
            "apiVersion: v2\nname: invitation\nversion: 0.1.0\n",
        )],
    );
    standins
        .github
        .grant_token(TOKEN, &["barun/invitation"], true);
    standins
        .gitlab
        .grant_token(TOKEN, &["barun/invitation"], true);
    standins
        .aws
        .put_secret(SECRET, &json!({"token": TOKEN}).to_string(), true);
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    let annotations = &mut app["metadata"]["annotations"];
    annotations[format!("{IU}write-back-method")] = json!("git");
    annotations[format!("{IU}git-repository")] = json!(host.url());
    annotations[format!("{IU}git-branch")] = json!("main");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    standins
}

async fn run(standins: &Scenario, event: &Value) -> Report {
    let vars = [
        ("GIT_CREDENTIALS_SECRET_ARNS", SECRET.to_string()),
        ("GITHUB_API_URL", standins.github_api()),
        ("GITLAB_API_URL", standins.gitlab_api()),
        ("GIT_CA_BUNDLE", standins.ca_pem.clone()),
    ];
    let borrowed: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    match standins.handler(&borrowed).handle(event, None).await {
        Ok(report) => report,
        Err(HandlerError::Targets { report, .. }) => *report,
        Err(e) => panic!("{e}"),
    }
}

fn commits(host: Host, standins: &Scenario) -> usize {
    host.store(standins)
        .history(host.repository(), "main")
        .len()
}

fn outcome(report: &Report) -> (Action, String, bool) {
    assert_eq!(report.entries.len(), 1, "{:#?}", report.entries);
    let e = &report.entries[0];
    (e.action, e.reason.clone(), e.retryable)
}

/// Every scenario, in order, against one host.
/// Runs the scenarios; returns how many times Secrets Manager was read in all of them.
async fn scenario_table(host: Host) -> usize {
    let secret_reads = |standins: &Scenario| {
        standins
            .shared
            .count(|r| r.service == Service::SecretsManager)
    };
    // First write: the file does not exist; the tag is read from the Application.
    let standins = setup(host).await;
    let report = run(&standins, &event("push-date-tag.json")).await;
    let (action, reason, _) = outcome(&report);
    assert_eq!(action, Action::Updated, "{host:?} first write: {reason}");
    assert!(reason.contains("committed"), "{host:?}: {reason}");
    let file = host
        .store(&standins)
        .file(host.repository(), "main", FILE)
        .unwrap();
    assert!(
        file.contains(&format!("value: {PUSHED_TAG}")),
        "{host:?}: {file}"
    );
    assert_eq!(commits(host, &standins), 2);
    assert!(standins.shared.count(|r| r.service == host.service()) >= 3);

    // Update: a newer push changes the file.
    let newer = push_event("barun-dev-ecr", "20250826-000000", "2025-08-26T00:00:00Z");
    standins
        .aws
        .push(argocd_ecr_updater_standins::fixtures::image(
            "barun-dev-ecr",
            "20250826-000000",
            '6',
            "2025-08-26T00:00:00Z",
        ));
    let (action, reason, _) = outcome(&run(&standins, &newer).await);
    assert_eq!(action, Action::Updated, "{host:?} update: {reason}");
    assert_eq!(commits(host, &standins), 3);

    // Duplicate event: nothing committed.
    let (action, reason, _) = outcome(&run(&standins, &newer).await);
    assert_eq!(action, Action::Unchanged, "{host:?} duplicate: {reason}");
    assert_eq!(commits(host, &standins), 3);

    // Late older tag: never a downgrade, nothing committed.
    let (action, reason, _) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Skipped, "{host:?} late: {reason}");
    assert!(
        reason.contains("tag `20250825-153012` ranks below the current tag `20250826-000000`"),
        "{host:?} late: {reason}"
    );
    assert_eq!(commits(host, &standins), 3);
    assert!(
        host.store(&standins)
            .file(host.repository(), "main", FILE)
            .unwrap()
            .contains("20250826-000000")
    );

    // Racing commit: someone else's edit of the same file lands first; read again, decide
    // again, commit on top, keeping their entry.
    let racing = push_event("barun-dev-ecr", "20250827-000000", "2025-08-27T00:00:00Z");
    standins
        .aws
        .push(argocd_ecr_updater_standins::fixtures::image(
            "barun-dev-ecr",
            "20250827-000000",
            '7',
            "2025-08-27T00:00:00Z",
        ));
    let theirs = "helm:\n  parameters:\n  - name: image.tag\n    value: 20250826-000000\n    forcestring: true\n  - name: replicaCount\n    value: \"3\"\n    forcestring: false\n";
    host.store(&standins)
        .race_next_commit(host.repository(), FILE, theirs);
    let report = run(&standins, &racing).await;
    let (action, reason, _) = outcome(&report);
    assert_eq!(action, Action::Updated, "{host:?} race: {reason}");
    assert_eq!(report.stats.conflicts, 1, "{host:?} {report:#?}");
    assert_eq!(commits(host, &standins), 5, "theirs and ours");
    let file = host
        .store(&standins)
        .file(host.repository(), "main", FILE)
        .unwrap();
    assert!(
        file.contains("name: replicaCount") && file.contains("20250827-000000"),
        "{host:?}: {file}"
    );

    let mut reads = secret_reads(&standins);

    // Protected branch: permanent, with the way out.
    let standins = setup(host).await;
    host.store(&standins).protect(host.repository(), "main");
    let (action, reason, retryable) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Failed, "{host:?} protected: {reason}");
    assert!(
        reason.contains("refused the commit") && reason.contains("<base>:<new branch>"),
        "{host:?}: {reason}"
    );
    assert!(!retryable, "{host:?}");
    assert_eq!(commits(host, &standins), 1);

    reads += secret_reads(&standins);

    // Bad credentials: permanent, saying what to fix.
    let standins = setup(host).await;
    host.revoke(&standins);
    let (action, reason, retryable) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Failed, "{host:?} credentials: {reason}");
    let fix = match host {
        Host::GitHub | Host::GitLab => "refused the credentials",
        Host::CodeCommit => "CodeCommitRepositories",
    };
    assert!(reason.contains(fix), "{host:?}: {reason}");
    assert!(!retryable, "{host:?}");
    assert_eq!(commits(host, &standins), 1);
    reads += secret_reads(&standins);

    // A file over the one cap (512 KiB) every host shares: refused before it is parsed,
    // permanently, with the way out; one at the cap is written. Over GitHub's own 1 MB, the
    // contents API leaves the content out: refused the same way.
    for (size, written) in [
        (512 << 10, true),
        ((512 << 10) + 1, false),
        ((1 << 20) + 1, false),
    ] {
        let standins = setup(host).await;
        let mut big = String::from("helm:\n  parameters: []\n# ");
        big.push_str(&"x".repeat(size - big.len() - 1));
        big.push('\n');
        assert_eq!(big.len(), size);
        host.store(&standins)
            .push(host.repository(), "main", FILE, &big, "a large file");
        let (action, reason, retryable) =
            outcome(&run(&standins, &event("push-date-tag.json")).await);
        if written {
            assert_eq!(action, Action::Updated, "{host:?} {size}: {reason}");
            assert_eq!(commits(host, &standins), 3);
        } else {
            assert_eq!(action, Action::Failed, "{host:?} {size}: {reason}");
            assert!(
                reason.contains("over the 524288 bytes (512 KiB)"),
                "{host:?}: {reason}"
            );
            assert!(!retryable, "{host:?}");
            assert_eq!(commits(host, &standins), 2);
        }
        reads += secret_reads(&standins);
    }
    reads
}

#[tokio::test]
async fn github_passes_the_git_host_scenario_table() {
    assert!(scenario_table(Host::GitHub).await > 0, "the token is read");
}

#[tokio::test]
async fn gitlab_passes_the_git_host_scenario_table() {
    assert!(scenario_table(Host::GitLab).await > 0, "the token is read");
}

#[tokio::test]
async fn gitlab_merge_requests_are_opened_once_and_labelled() {
    let standins = setup(Host::GitLab).await;
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"]["argocd-ecr-updater.io/git-pull-request"] = json!("true");
    app["metadata"]["annotations"]["argocd-ecr-updater.io/git-pull-request-labels"] =
        json!("image-update,automerge");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let (action, reason, _) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Updated, "{reason}");
    assert!(
        reason.contains("gitlab.com/barun/invitation/-/merge_requests/1"),
        "{reason}"
    );
    let requests = standins.gitlab.pull_requests("barun/invitation");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].labels, vec!["image-update", "automerge"]);
    let (action, reason, _) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Skipped, "{reason}");
    assert!(
        reason.contains("holds this tag (a duplicate or late event)"),
        "{reason}"
    );
    assert_eq!(standins.gitlab.pull_requests("barun/invitation").len(), 1);
}

#[tokio::test]
async fn an_imageupdater_objects_gitlab_pull_request_opens_a_merge_request() {
    let standins = setup(Host::GitLab).await;
    let mut object = argocd_ecr_updater_standins::fixtures::seed_image_updater();
    object["spec"]["applicationRefs"][0]["writeBackConfig"] = json!({"method": "git",
        "gitConfig": {"repository": Host::GitLab.url(), "branch": "main",
                      "pullRequest": {"gitlab": {}, "labels": ["image-update"]}}});
    standins.kube.insert_image_updater(object).unwrap();
    let (action, reason, _) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Updated, "{reason}");
    assert!(
        reason.contains("gitlab.com/barun/invitation/-/merge_requests/1"),
        "{reason}"
    );
    let requests = standins.gitlab.pull_requests("barun/invitation");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].labels, vec!["image-update"]);
    assert_eq!(
        commits(Host::GitLab, &standins),
        1,
        "nothing pushed to the base"
    );
}

#[tokio::test]
async fn codecommit_passes_the_git_host_scenario_table_with_no_secret_at_all() {
    // A token secret is configured (setup puts one there for every host); CodeCommit signs
    // with the function's role and never reads it.
    assert_eq!(scenario_table(Host::CodeCommit).await, 0);
}

#[tokio::test]
async fn a_codecommit_pull_request_that_failed_to_open_is_opened_by_the_retry_once() {
    let standins = setup(Host::CodeCommit).await;
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"]["argocd-ecr-updater.io/git-pull-request"] = json!("true");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    // Enough failures to outlast the SDK's own retries within the invocation.
    standins.shared.inject(
        Route::codecommit("CreatePullRequest"),
        10,
        FaultAction::Status {
            code: 500,
            retry_after: None,
        },
    );
    let (action, reason, retryable) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Failed, "{reason}");
    assert!(retryable, "{reason}");
    assert!(
        standins
            .aws
            .codecommit
            .pull_requests("invitation")
            .is_empty()
    );
    standins.shared.clear_faults();
    let (action, reason, _) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Updated, "{reason}");
    assert!(reason.contains("earlier attempt"), "{reason}");
    assert_eq!(standins.aws.codecommit.pull_requests("invitation").len(), 1);
    let (action, reason, _) = outcome(&run(&standins, &event("push-date-tag.json")).await);
    assert_eq!(action, Action::Skipped, "{reason}");
    assert!(
        reason.contains("holds this tag (a duplicate or late event)"),
        "{reason}"
    );
    assert_eq!(
        standins.aws.codecommit.pull_requests("invitation").len(),
        1,
        "the open pull request is found, not opened twice"
    );
}

#[tokio::test]
async fn codecommit_pull_requests_are_opened_from_a_branch_per_change() {
    let standins = setup(Host::CodeCommit).await;
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"]["argocd-ecr-updater.io/git-pull-request"] = json!("true");
    app["metadata"]["annotations"]["argocd-ecr-updater.io/git-pull-request-labels"] =
        json!("image-update");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let report = run(&standins, &event("push-date-tag.json")).await;
    let (action, reason, _) = outcome(&report);
    assert_eq!(action, Action::Updated, "{reason}");
    assert!(
        reason.contains("codecommit/repositories/invitation/pull-requests/1"),
        "{reason}"
    );
    // CodeCommit has no labels: a note, not a failure.
    assert!(reason.contains("have no labels"), "{reason}");
    let pulls = standins.aws.codecommit.pull_requests("invitation");
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].base, "main");
    assert_eq!(
        commits(Host::CodeCommit, &standins),
        1,
        "nothing pushed to main"
    );
    // No secret was read for CodeCommit.
    assert_eq!(
        standins
            .shared
            .count(|r| r.service == Service::SecretsManager),
        0
    );
}

#[tokio::test]
async fn gitlab_rate_limits_and_server_errors_fail_retryably() {
    for (code, words) in [(429, "rate limit"), (502, "502")] {
        let standins = setup(Host::GitLab).await;
        standins.shared.inject(
            argocd_ecr_updater_standins::Route::gitlab("POST", "/repository/commits"),
            1,
            argocd_ecr_updater_standins::FaultAction::Status {
                code,
                retry_after: Some(2),
            },
        );
        let (action, reason, retryable) =
            outcome(&run(&standins, &event("push-date-tag.json")).await);
        assert_eq!(action, Action::Failed, "{reason}");
        assert!(reason.contains(words), "{reason}");
        assert!(retryable, "{reason}");
        assert_eq!(commits(Host::GitLab, &standins), 1);
    }
}
