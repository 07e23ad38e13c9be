//! End to end: git write-back against the GitHub stand-in (HTTPS, the run's CA), with
//! credentials from the Secrets Manager stand-in, the real handler, and the seed's
//! Terraform-managed Application switched to `write-back-method: git`.

use crate::common::{Scenario, event, expect_decision, only, report_of};
use argocd_ecr_updater::report::{Action, Entry, Report};
use argocd_ecr_updater_standins::fixtures::{
    PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_TAG, image, push_event,
};
use argocd_ecr_updater_standins::{FaultAction, Route, Service};
use serde_json::{Value, json};

pub(crate) const REPO: &str = "barun/invitation";
const TOKEN: &str = "ghp_standin0write0token0for0invitation";
const SECRET_ARN: &str =
    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/github-Ab12Cd";
pub(crate) const OVERRIDE: &str = "argocd/.argocd-source-aws-pipeline-test.yaml";

/// A values file as people write them: comments, quoting, an anchor, a second document.
const VALUES: &str = "# Default values for invitation.\n# This is a YAML-formatted file.\n\nreplicaCount: 2\n\nimage:\n  repository: 768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr\n  # Overrides the image tag whose default is the chart appVersion.\n  tag: \"20250825-120000\"\n  pullPolicy: IfNotPresent\n\nresources: &resources\n  limits:\n    cpu: 500m   # half a core\n    memory: 256Mi\n\nsidecar:\n  resources: *resources\n";

/// The seed with the GitHub repository its Application points at, a write token for it in
/// Secrets Manager, and the Application switched to `git` write-back (plus `extra`
/// annotations).
async fn git_standins(extra: &[(&str, &str)]) -> Scenario {
    git_on(Scenario::seeded().await, extra)
}

/// [`git_standins`] on stand-ins of the test's own.
pub(crate) fn git_on(scenario: Scenario, extra: &[(&str, &str)]) -> Scenario {
    let standins = with_git_vars(scenario);
    with_repository(&standins);
    standins.annotate("argocd", SEED_APP, &[("write-back-method", "git")]);
    standins.annotate("argocd", SEED_APP, extra);
    standins
}

/// The GitHub repository the seed Application points at, and a write token for it in
/// Secrets Manager.
pub(crate) fn with_repository(standins: &Scenario) {
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
    standins
        .aws
        .put_secret(SECRET_ARN, &json!({"token": TOKEN}).to_string(), true);
}

/// The seed written back by Git, with a sweep queue to follow its commits on; the queue's URL.
pub(crate) async fn git_following() -> (Scenario, String) {
    let standins = git_standins(&[]).await;
    let queue = standins.aws.create_queue("sweep");
    let standins = standins.var("SWEEP_QUEUE_URL", &queue).var(
        "SWEEP_QUEUE_ARN",
        "arn:aws:sqs:ap-northeast-2:768157413559:sweep",
    );
    (standins, queue)
}

/// The scenario's runs with the GitHub stand-in's API and CA, and the token's secret.
pub(crate) fn with_git_vars(scenario: Scenario) -> Scenario {
    let vars = vars(&scenario);
    vars.iter().fold(scenario, |s, (k, v)| s.var(k, v))
}

fn vars(standins: &Scenario) -> Vec<(String, String)> {
    vec![
        ("GIT_CREDENTIALS_SECRET_ARNS".into(), SECRET_ARN.into()),
        ("GITHUB_API_URL".into(), standins.github_api()),
        ("GIT_CA_BUNDLE".into(), standins.ca_pem.clone()),
    ]
}

async fn push(standins: &Scenario) -> Report {
    standins
        .outcome(&[], &event("push-date-tag.json"))
        .await
        .unwrap()
}

fn commits(standins: &Scenario, branch: &str) -> usize {
    standins.github.history(REPO, branch).len()
}

fn seed_parameters(standins: &Scenario) -> Value {
    standins.kube.get("argocd", SEED_APP).unwrap()["spec"]["source"]["helm"]["parameters"].clone()
}

fn github_requests(standins: &Scenario) -> Vec<(String, String)> {
    standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::GitHub)
        .map(|r| (r.method, r.path))
        .collect()
}

/// A pinned image goes to Git as Image Updater writes the digest strategy's value.
#[tokio::test]
async fn a_pinned_image_is_committed_with_its_digest() {
    let standins = git_standins(&[("argocd-ecr-updater.io/pin-digest", "true")]).await;
    let pushed = event("push-date-tag.json");
    let digest = pushed["detail"]["image-digest"]
        .as_str()
        .unwrap()
        .to_string();
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let file = standins.github.file(REPO, "main", OVERRIDE).unwrap();
    assert!(
        file.contains(&format!(
            "- name: image.tag\n    value: {PUSHED_TAG}@{digest}\n"
        )),
        "{file}"
    );
    let before = commits(&standins, "main");
    let report = push(&standins).await;
    assert_ne!(
        only(&report).action,
        Action::Updated,
        "{}",
        only(&report).reason
    );
    assert_eq!(
        commits(&standins, "main"),
        before,
        "the same digest again: no commit"
    );
}

/// A Git revert of our commit, deployed by Argo CD, sticks: the reverted image is not
/// committed again, and an image pushed after the revert's deploy is.
#[tokio::test]
async fn a_reverted_commit_stays_reverted_until_an_image_pushed_after_the_revert() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    let standins = git_standins(&[]).await;
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let audit: Value = serde_json::from_str(
        app["metadata"]["annotations"]["argocd-ecr-updater.io/last-update"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let ours = audit["git"]["commit"].as_str().unwrap().to_string();
    // Someone reverts the commit; Argo CD synced ours, then the revert, and runs the old tag.
    let reverted = format!(
        "helm:\n  parameters:\n  - name: image.repository\n    value: {SEED_IMAGE}\n    forcestring: true\n  - name: image.tag\n    value: {SEED_TAG}\n    forcestring: true\n"
    );
    let revert = standins
        .github
        .push(REPO, "main", OVERRIDE, &reverted, "Revert the image update")
        .unwrap();
    standins
        .kube
        .edit("argocd", SEED_APP, |a| {
            a["status"]["history"] = json!([
                {"id": 1, "revision": ours, "deployedAt": "2099-01-01T00:00:00Z", "source": a["spec"]["source"].clone()},
                {"id": 2, "revision": revert, "deployedAt": "2099-01-02T00:00:00Z", "source": a["spec"]["source"].clone()},
            ]);
            a["status"]["summary"]["images"] = json!([format!("{SEED_IMAGE}:{SEED_TAG}")]);
        })
        .unwrap();
    let before = commits(&standins, "main");
    let report = push(&standins).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        &format!(
            "respecting a manual rollback from `{PUSHED_TAG}` to `{SEED_TAG}`, deployed 2099-01-02T00:00:00Z"
        ),
    );
    assert_eq!(commits(&standins, "main"), before, "the revert stands");
    // The fix, pushed after the revert was deployed, is committed.
    standins.aws.push(image(
        "barun-dev-ecr",
        "20990103-000000",
        '8',
        "2099-01-03T00:00:00Z",
    ));
    let fix = push_event("barun-dev-ecr", "20990103-000000", "2099-01-03T00:00:01Z");
    let report = standins.report(&[], &fix).await;
    expect_decision(only(&report), Action::Updated, "committed");
    assert_eq!(commits(&standins, "main"), before + 1);
}

/// A freeze holds a Git write-back too: decided on the file, reported, nothing committed.
#[tokio::test]
async fn a_frozen_application_written_back_by_git_gets_no_commit() {
    let standins = git_standins(&[("argocd-ecr-updater.io/freeze", "true")]).await;
    let before = commits(&standins, "main");
    let report = push(&standins).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "frozen by `argocd-ecr-updater.io/freeze` on the Application: would update",
    );
    assert_eq!(commits(&standins, "main"), before, "no commit");
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/freeze", "false")],
    );
    let report = push(&standins).await;
    assert_eq!(
        only(&report).action,
        Action::Updated,
        "{}",
        only(&report).reason
    );
    assert_eq!(commits(&standins, "main"), before + 1);
}

#[tokio::test]
async fn the_seeds_terraform_managed_application_gets_a_commit_and_a_refresh_not_a_patch() {
    let standins = git_standins(&[]).await;
    let spec_before = seed_parameters(&standins);
    let report = push(&standins).await;
    let entry = only(&report);
    expect_decision(entry, Action::Updated, "committed");
    assert_eq!(entry.to.as_deref(), Some(PUSHED_TAG));
    assert_eq!(entry.from.as_deref(), Some(SEED_TAG));

    // The file Image Updater would have written, byte for byte.
    let file = standins
        .github
        .file(REPO, "main", OVERRIDE)
        .expect("the override file is committed");
    assert_eq!(
        file,
        format!(
            "helm:\n  parameters:\n  - name: image.repository\n    value: {SEED_IMAGE}\n    forcestring: true\n  - name: image.tag\n    value: {PUSHED_TAG}\n    forcestring: true\n"
        )
    );
    let history = standins.github.history(REPO, "main");
    assert_eq!(history.len(), 2);
    assert_eq!(
        history[0].1.message,
        format!(
            "build: automatic update of aws-pipeline-test\n\nupdates image barun-dev-ecr tag '{SEED_TAG}' to '{PUSHED_TAG}'"
        )
    );
    let git = entry.git.as_ref().unwrap();
    assert_eq!(git["commit"], history[0].0);
    assert_eq!(git["file"], OVERRIDE);
    assert_eq!(entry.sources, vec![format!("{REPO}@main:{OVERRIDE}")]);

    // The Application's spec is what Terraform wrote; only the refresh and audit keys moved.
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(seed_parameters(&standins), spec_before);
    assert_eq!(
        app["metadata"]["annotations"]["argocd.argoproj.io/refresh"],
        "normal"
    );
    let audit: Value = serde_json::from_str(
        app["metadata"]["annotations"]["argocd-ecr-updater.io/last-update"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(audit["git"]["commit"], history[0].0);
    let patch = standins
        .shared
        .requests()
        .into_iter()
        .find(|r| r.service == Service::Kube && r.method == "PATCH")
        .unwrap();
    // A JSON patch guarded by the resourceVersion as read, writing those two keys only.
    assert_eq!(patch.content_type, "application/json-patch+json");
    let body: Value = serde_json::from_str(&patch.body).unwrap();
    let ops: Vec<(String, String)> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            (
                op["op"].as_str().unwrap().to_string(),
                op["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("test", "/metadata/resourceVersion"),
            (
                "add",
                "/metadata/annotations/argocd-ecr-updater.io~1last-update"
            ),
            ("add", "/metadata/annotations/argocd.argoproj.io~1refresh"),
        ]
        .map(|(op, path)| (op.to_string(), path.to_string())),
        "{body}"
    );

    // Read the head, read the file, commit: three requests on a token.
    assert_eq!(
        github_requests(&standins),
        vec![
            (
                "GET".to_string(),
                format!("/repos/{REPO}/git/ref/heads/main")
            ),
            (
                "GET".to_string(),
                format!("/repos/{REPO}/contents/{OVERRIDE}")
            ),
            ("POST".to_string(), "/graphql".to_string()),
        ]
    );
    assert_eq!(report.stats.git_commits, 1);
    assert_eq!(report.stats.git_requests, 3);
    // The Kubernetes Event Image Updater users look for is recorded as for a patch.
    assert!(
        standins
            .kube
            .events()
            .iter()
            .any(|e| e["reason"] == "ImagesUpdated")
    );
}

#[tokio::test]
async fn a_duplicate_event_commits_nothing_and_a_late_older_tag_never_downgrades_git() {
    let standins = git_standins(&[]).await;
    push(&standins).await;
    assert_eq!(commits(&standins, "main"), 2);

    let again = push(&standins).await;
    // The tag is read from Git, where it is already the pushed one.
    expect_decision(only(&again), Action::Unchanged, "already the current tag");
    assert_eq!(commits(&standins, "main"), 2, "no empty commit");

    let late = standins
        .outcome(
            &[],
            &push_event("barun-dev-ecr", "20250824-093000", "2025-08-25T07:00:00Z"),
        )
        .await
        .unwrap();
    expect_decision(
        only(&late),
        Action::Skipped,
        "tag `20250824-093000` ranks below the current tag `20250825-153012`",
    );
    assert_eq!(commits(&standins, "main"), 2);
    assert!(
        standins
            .github
            .file(REPO, "main", OVERRIDE)
            .unwrap()
            .contains(PUSHED_TAG)
    );
}

#[tokio::test]
async fn the_tag_in_git_decides_even_when_the_application_spec_says_otherwise() {
    let standins = git_standins(&[]).await;
    // Git already runs a newer tag than the push; the Application spec still says the seed's.
    standins.github.push(
        REPO,
        "main",
        OVERRIDE,
        "helm:\n  parameters:\n  - name: image.tag\n    value: 20250901-000000\n    forcestring: true\n",
        "someone bumped it by hand",
    );
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250901-000000",
        '7',
        "2025-09-01T00:00:00Z",
    ));
    let report = push(&standins).await;
    // Ranked against Git's tag, not the spec's older one (against which it would be newer).
    expect_decision(
        only(&report),
        Action::Skipped,
        "ranks below the current tag `20250901-000000`",
    );
    assert_eq!(commits(&standins, "main"), 2);
}

#[tokio::test]
async fn a_commit_that_races_another_rereads_and_decides_again() {
    let standins = git_standins(&[]).await;
    standins
        .github
        .race_next_commit(REPO, "argocd/README.md", "someone else's change\n");
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "committed");
    assert_eq!(report.stats.conflicts, 1);
    let history = standins.github.history(REPO, "main");
    // Ours on top of theirs: nothing of theirs lost.
    assert_eq!(history.len(), 3);
    assert_eq!(
        standins
            .github
            .file(REPO, "main", "argocd/README.md")
            .as_deref(),
        Some("someone else's change\n")
    );
    assert!(
        standins
            .github
            .file(REPO, "main", OVERRIDE)
            .unwrap()
            .contains(PUSHED_TAG)
    );
}

#[tokio::test]
async fn a_values_file_target_changes_the_tag_and_keeps_every_other_byte() {
    let standins = git_standins(&[("write-back-target", "helmvalues:values.yaml")]).await;
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "argocd/values.yaml");
    let file = standins
        .github
        .file(REPO, "main", "argocd/values.yaml")
        .unwrap();
    assert_eq!(
        file,
        VALUES.replace(&format!("\"{SEED_TAG}\""), &format!("\"{PUSHED_TAG}\""))
    );
    assert!(standins.github.file(REPO, "main", OVERRIDE).is_none());
}

/// Commits `values` as the values file that alone holds the image (no Helm parameter in the
/// spec overrides it), pushes, and returns the file as committed.
async fn values_file_push(standins: &Scenario, values: &str) -> String {
    standins
        .github
        .push(REPO, "main", "argocd/values.yaml", values, "their values")
        .unwrap();
    standins
        .kube
        .edit("argocd", SEED_APP, |a| {
            a["spec"]["source"]["helm"]["parameters"] = json!([]);
        })
        .unwrap();
    let report = push(standins).await;
    expect_decision(only(&report), Action::Updated, "argocd/values.yaml");
    standins
        .github
        .file(REPO, "main", "argocd/values.yaml")
        .unwrap()
}

#[tokio::test]
async fn helm_keys_with_list_indexes_and_literal_dots_are_written_where_image_updater_writes_them()
{
    let listed = format!(
        "images:\n- repository: other\n  tag: keep\n- repository: {SEED_IMAGE}\n  tag: \"{SEED_TAG}\"\n"
    );
    let literal = format!("image.repository: {SEED_IMAGE}\nimage.tag: \"{SEED_TAG}\"\n");
    for (values, name_key, tag_key) in [
        (listed.as_str(), "images[1].repository", "images[1].tag"),
        (literal.as_str(), "image.repository", "image.tag"),
    ] {
        let standins = git_standins(&[
            ("write-back-target", "helmvalues:values.yaml"),
            ("app.helm.image-name", name_key),
            ("app.helm.image-tag", tag_key),
        ])
        .await;
        let file = values_file_push(&standins, values).await;
        // The one value changed in place: no new block, nothing else touched.
        assert_eq!(file, values.replace(SEED_TAG, PUSHED_TAG), "{tag_key}");
        // The next push of the same tag reads it back from the same place.
        let again = push(&standins).await;
        expect_decision(only(&again), Action::Unchanged, "already the current tag");
    }
}

/// Image Updater's `helmvalues` writes of the image's name (its `update.go`): the
/// Application's parameter, in the short form where the file writes the name without a
/// registry, and the image-list's repository where the file names another registry.
#[tokio::test]
async fn a_values_file_gets_the_image_name_in_the_form_image_updater_writes_it() {
    let short_spec = format!("image: barun-dev-ecr:{SEED_TAG}\n");
    let other_registry =
        format!("image:\n  repository: old.example.com/barun-dev-ecr\n  tag: \"{SEED_TAG}\"\n");
    let cases: [(&str, &str, Vec<(&str, &str)>, String); 2] = [
        (
            "image-spec without a registry keeps the short form",
            short_spec.as_str(),
            vec![("app.helm.image-spec", "image")],
            format!("image: barun-dev-ecr:{PUSHED_TAG}\n"),
        ),
        (
            "image-name naming another registry gets the image-list's repository",
            other_registry.as_str(),
            vec![],
            format!("image:\n  repository: {SEED_IMAGE}\n  tag: \"{PUSHED_TAG}\"\n"),
        ),
    ];
    for (case, values, extra, expected) in cases {
        let mut annotations = vec![("write-back-target", "helmvalues:values.yaml")];
        annotations.extend(extra);
        let standins = git_standins(&annotations).await;
        let file = values_file_push(&standins, values).await;
        assert_eq!(file, expected, "{case}");
    }
}

#[tokio::test]
async fn a_bare_write_back_target_is_a_values_file_from_the_repository_root() {
    let standins = git_standins(&[("write-back-target", "config/values-prod.yaml")]).await;
    standins
        .github
        .push(
            REPO,
            "main",
            "config/values-prod.yaml",
            VALUES,
            "prod values",
        )
        .unwrap();
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "config/values-prod.yaml");
    let file = standins
        .github
        .file(REPO, "main", "config/values-prod.yaml")
        .unwrap();
    assert_eq!(
        file,
        VALUES.replace(&format!("\"{SEED_TAG}\""), &format!("\"{PUSHED_TAG}\""))
    );
    assert!(standins.github.file(REPO, "main", OVERRIDE).is_none());
}

#[tokio::test]
async fn a_values_file_nested_thousands_deep_fails_its_application_and_not_the_process() {
    let standins = git_standins(&[("write-back-target", "helmvalues:values.yaml")]).await;
    // 40 KB nested 20,000 deep: without a bound the YAML walk overflows the stack.
    let deep = format!("{}1\n", "- ".repeat(20_000));
    standins
        .github
        .push(REPO, "main", "argocd/values.yaml", &deep, "nest it")
        .unwrap();
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "nests deeper than 100 levels");
    assert!(!entry.retryable, "{}", entry.reason);
    assert_eq!(commits(&standins, "main"), 2, "nothing committed");
}

#[tokio::test]
async fn an_override_file_whose_aliases_expand_past_the_bound_fails_its_application_unread() {
    let standins = git_standins(&[]).await;
    // 80 KB that serde_yaml_ng reads into two million nodes (its alias limit counts jumps,
    // not what they bring in); a few more aliases and it is a gigabyte.
    let bomb = argocd_ecr_updater::yaml::alias_bomb(100, 1, 20_000);
    assert!(bomb.len() < 90_000, "{}", bomb.len());
    standins
        .github
        .push(REPO, "main", OVERRIDE, &bomb, "laughs")
        .unwrap();
    let before = commits(&standins, "main");
    for trigger in ["push-date-tag.json", "scheduled-reconcile.json"] {
        let report = report_of(standins.outcome(&[], &event(trigger)).await);
        let entry = only(&report);
        expect_decision(entry, Action::Failed, "expands to more than 4 MiB");
        assert!(!entry.retryable, "{trigger}: {}", entry.reason);
        assert!(
            entry.reason.contains(OVERRIDE),
            "{trigger}: {}",
            entry.reason
        );
    }
    assert_eq!(commits(&standins, "main"), before, "nothing committed");
    assert_eq!(
        standins.github.file(REPO, "main", OVERRIDE).as_deref(),
        Some(bomb.as_str())
    );
}

#[tokio::test]
async fn git_branch_base_and_target_creates_the_target_branch_from_the_base() {
    let standins = git_standins(&[("git-branch", "main:image-updates")]).await;
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "image-updates");
    assert_eq!(commits(&standins, "main"), 1, "the base is untouched");
    assert_eq!(commits(&standins, "image-updates"), 2);
    // The next push reads the target branch, where the state now lives.
    let again = push(&standins).await;
    expect_decision(only(&again), Action::Unchanged, "already the current tag");
    assert_eq!(commits(&standins, "image-updates"), 2);
}

#[tokio::test]
async fn pull_request_mode_opens_one_labelled_pull_request_per_change() {
    let standins = git_standins(&[
        ("argocd-ecr-updater.io/git-pull-request", "github"),
        (
            "argocd-ecr-updater.io/git-pull-request-labels",
            "image-update,automerge",
        ),
    ])
    .await;
    let report = push(&standins).await;
    let entry = only(&report);
    expect_decision(
        entry,
        Action::Updated,
        "pull request https://github.com/barun/invitation/pull/1",
    );
    let pulls = standins.github.pull_requests(REPO);
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].base, "main");
    assert!(
        pulls[0].head.starts_with("image-updater-"),
        "{}",
        pulls[0].head
    );
    assert_eq!(pulls[0].labels, vec!["image-update", "automerge"]);
    assert_eq!(
        pulls[0].title,
        "build: automatic update of aws-pipeline-test"
    );
    assert_eq!(commits(&standins, "main"), 1, "nothing pushed to the base");
    assert_eq!(
        entry.git.as_ref().unwrap()["pullRequest"],
        "https://github.com/barun/invitation/pull/1"
    );

    // The same event again: that change's branch exists, no second pull request.
    let again = push(&standins).await;
    expect_decision(
        only(&again),
        Action::Skipped,
        "holds this tag (a duplicate or late event); nothing committed",
    );
    assert_eq!(standins.github.pull_requests(REPO).len(), 1);
}

/// The seed push with one 502 from the Git host on `route`: a retryable failure saying `words`.
async fn fails_retryably_once(standins: &Scenario, route: Route, words: &str) {
    standins.shared.inject(
        route,
        1,
        FaultAction::Status {
            code: 502,
            retry_after: None,
        },
    );
    let failed = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    let entry = only(&failed);
    expect_decision(entry, Action::Failed, words);
    assert!(entry.retryable, "{}", entry.reason);
}

#[tokio::test]
async fn a_change_branch_whose_commit_failed_gets_the_commit_on_the_retry() {
    let standins = git_standins(&[("git-branch", "main:image-updates-{{.SHA256}}")]).await;
    fails_retryably_once(&standins, Route::github("POST", "/graphql"), "502").await;
    let branch = standins
        .github
        .branches(REPO)
        .into_iter()
        .find(|b| b.starts_with("image-updates-"))
        .expect("the first attempt created the change branch");
    assert_eq!(commits(&standins, &branch), 1, "but committed nothing");

    // AWS retries the event: the branch exists, its file does not say the tag, so commit.
    let retried = push(&standins).await;
    expect_decision(only(&retried), Action::Updated, &branch);
    assert_eq!(commits(&standins, &branch), 2);
    let values = standins
        .github
        .file(
            REPO,
            &branch,
            "argocd/.argocd-source-aws-pipeline-test.yaml",
        )
        .expect("the override file is on the change branch");
    assert!(values.contains(PUSHED_TAG), "{values}");

    // A third delivery finds the branch holding the tag: nothing to do.
    let duplicate = push(&standins).await;
    assert_eq!(
        only(&duplicate).action,
        Action::Skipped,
        "{:?}",
        only(&duplicate)
    );
    assert_eq!(commits(&standins, &branch), 2);
}

#[tokio::test]
async fn a_pull_request_that_failed_to_open_is_opened_by_the_retry() {
    let standins = git_standins(&[
        ("argocd-ecr-updater.io/git-pull-request", "github"),
        (
            "argocd-ecr-updater.io/git-pull-request-labels",
            "image-update",
        ),
    ])
    .await;
    fails_retryably_once(
        &standins,
        Route::github("POST", "/pulls"),
        "opening the pull request failed",
    )
    .await;
    assert!(standins.github.pull_requests(REPO).is_empty());

    let retried = push(&standins).await;
    let entry = only(&retried);
    expect_decision(
        entry,
        Action::Updated,
        "pull request https://github.com/barun/invitation/pull/1",
    );
    assert!(entry.reason.contains("earlier attempt"), "{}", entry.reason);
    let pulls = standins.github.pull_requests(REPO);
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].labels, vec!["image-update"]);
    assert_eq!(commits(&standins, &pulls[0].head), 2, "one commit, not two");

    // Commit and pull request both there: a duplicate event changes nothing.
    let duplicate = push(&standins).await;
    assert_eq!(
        only(&duplicate).action,
        Action::Skipped,
        "{:?}",
        only(&duplicate)
    );
    assert_eq!(standins.github.pull_requests(REPO).len(), 1);
    assert_eq!(commits(&standins, &pulls[0].head), 2);
}

#[tokio::test]
async fn a_refused_label_is_a_note_not_a_failure() {
    let standins = git_standins(&[
        ("argocd-ecr-updater.io/git-pull-request", "github"),
        ("argocd-ecr-updater.io/git-pull-request-labels", "x"),
    ])
    .await;
    standins.github.refuse_labels(REPO);
    let report = push(&standins).await;
    expect_decision(only(&report), Action::Updated, "labels not applied");
    assert_eq!(standins.github.pull_requests(REPO).len(), 1);
}

#[tokio::test]
async fn a_protected_branch_is_a_permanent_failure_that_says_how_to_fix_it() {
    let standins = git_standins(&[]).await;
    standins.github.protect(REPO, "main");
    let outcome = standins.outcome(&[], &event("push-date-tag.json")).await;
    let report = report_of(outcome);
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "refused the commit");
    assert!(
        entry.reason.contains("<base>:<new branch>"),
        "{}",
        entry.reason
    );
    assert!(!entry.retryable);
    assert_eq!(commits(&standins, "main"), 1);
}

#[tokio::test]
async fn rate_limits_and_server_errors_fail_retryably_and_bad_credentials_permanently() {
    for (action, retryable, words) in [
        (
            FaultAction::Status {
                code: 403,
                retry_after: None,
            },
            true,
            "rate limit",
        ),
        (
            FaultAction::Status {
                code: 429,
                retry_after: Some(30),
            },
            true,
            "rate limit",
        ),
        (
            FaultAction::Status {
                code: 502,
                retry_after: None,
            },
            true,
            "502",
        ),
    ] {
        let standins = git_standins(&[]).await;
        standins
            .shared
            .inject(Route::github("GET", "/git/ref/heads/main"), 1, action);
        let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
        let entry = only(&report);
        expect_decision(entry, Action::Failed, words);
        assert_eq!(entry.retryable, retryable, "{}", entry.reason);
        assert_eq!(commits(&standins, "main"), 1);
    }
    let standins = git_standins(&[]).await;
    standins.aws.put_secret(
        SECRET_ARN,
        &json!({"token": "ghp_revoked"}).to_string(),
        true,
    );
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "refused the credentials");
    assert!(!entry.retryable);
    assert!(
        !serde_json::to_string(&report)
            .unwrap()
            .contains("ghp_revoked"),
        "a secret leaked into the report"
    );
}

#[tokio::test]
async fn a_git_host_redirect_is_not_followed_with_the_token() {
    let standins = git_standins(&[]).await;
    let trap = format!("{}/captured", standins.github_api());
    standins.shared.inject(
        Route::github("GET", "/git/ref/heads/main"),
        100,
        FaultAction::Redirect { location: trap },
    );
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "a redirect, which is not followed");
    assert!(!entry.retryable, "{}", entry.reason);
    assert_eq!(
        standins.shared.count(|r| r.path.contains("/captured")),
        0,
        "the token followed the redirect"
    );
    assert_eq!(commits(&standins, "main"), 1);
}

#[tokio::test]
async fn a_token_without_write_access_is_told_to_get_contents_write() {
    let standins = git_standins(&[]).await;
    standins.github.grant_token(TOKEN, &[REPO], false);
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "contents:write");
    assert!(!entry.retryable);
}

#[tokio::test]
async fn missing_or_unreadable_credentials_say_what_to_configure() {
    let standins = git_standins(&[]).await;
    // The scenario's secret list emptied: no credentials configured at all.
    let unset = [("GIT_CREDENTIALS_SECRET_ARNS", "")];
    let report = report_of(standins.outcome(&unset, &event("push-date-tag.json")).await);
    expect_decision(only(&report), Action::Failed, "GIT_CREDENTIALS_SECRET_ARNS");
    assert!(github_requests(&standins).is_empty());

    standins
        .aws
        .put_secret(SECRET_ARN, &json!({"token": TOKEN}).to_string(), false);
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    expect_decision(
        only(&report),
        Action::Failed,
        "secretsmanager:GetSecretValue",
    );
}

#[tokio::test]
async fn a_repository_on_an_unsupported_host_fails_permanently_with_that_reason() {
    let standins = git_standins(&[(
        "git-repository",
        "https://bitbucket.org/barun/invitation.git",
    )])
    .await;
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    expect_decision(
        only(&report),
        Action::Failed,
        "`bitbucket.org` is not supported",
    );
    assert!(!only(&report).retryable);
}

#[tokio::test]
async fn a_repository_url_that_could_route_a_token_to_another_host_is_refused_and_never_echoed() {
    // Scoped to gitlab.com/acme/, the token must not reach github.com through an `@`.
    let gitlab_arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/gitlab-Zz99Yy";
    for repository in [
        "https://gitlab.com/acme/x@github.com/barun/invitation.git",
        "https://deploy:PlantedRepoPassword42@github.com/barun/invitation.git",
    ] {
        let standins = git_standins(&[("git-repository", repository)]).await;
        standins.aws.put_secret(
            gitlab_arn,
            &json!({"token": "glpat-PlantedGitLabToken", "url": "https://gitlab.com/acme/"})
                .to_string(),
            true,
        );
        let arns = format!("{gitlab_arn},{SECRET_ARN}");
        let report = report_of(
            standins
                .outcome(
                    &[("GIT_CREDENTIALS_SECRET_ARNS", arns.as_str())],
                    &event("push-date-tag.json"),
                )
                .await,
        );
        let entry = only(&report);
        assert_eq!(
            entry.action,
            Action::Failed,
            "{repository}: {}",
            entry.reason
        );
        assert!(!entry.retryable, "{}", entry.reason);
        assert!(
            github_requests(&standins).is_empty(),
            "{repository}: a request reached the GitHub stand-in"
        );
        let text = serde_json::to_string(&report).unwrap();
        for secret in ["PlantedRepoPassword42", "glpat-PlantedGitLabToken"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }
}

#[tokio::test]
async fn a_dry_run_reads_git_and_says_where_it_would_commit() {
    let standins = git_standins(&[]).await;
    let report = standins
        .outcome(&[("DRY_RUN", "true")], &event("push-date-tag.json"))
        .await
        .unwrap();
    expect_decision(
        only(&report),
        Action::Updated,
        &format!("would commit to {REPO}@main:{OVERRIDE}"),
    );
    assert_eq!(commits(&standins, "main"), 1);
    assert!(
        standins.kube.get("argocd", SEED_APP).unwrap()["metadata"]["annotations"]
            .get("argocd.argoproj.io/refresh")
            .is_none()
    );
}

/// Secrets are a channel between tenants: a team's `git:secret:` Secret can name the
/// platform's App installation. With a key that cannot sign for that App it must get nothing,
/// least of all the token the platform's own key minted; and every token is narrowed to the
/// one repository written.
#[tokio::test]
async fn an_installation_token_serves_only_the_key_that_minted_it_and_only_its_repository() {
    let standins = with_git_vars(
        Scenario::seeded_with_grants(vec![
            argocd_ecr_updater_standins::Grant::new(&["get", "list", "patch"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("events", &["create"], "argocd"),
            argocd_ecr_updater_standins::Grant::named(
                "secrets",
                &["get"],
                "argocd",
                &["invitation-git"],
            ),
        ])
        .await,
    );
    standins
        .github
        .create_repository(REPO, "main", &[("argocd/values.yaml", VALUES)]);
    standins.annotate("argocd", SEED_APP, &[("write-back-method", "git")]);
    let (platform_key, platform_public) =
        argocd_ecr_updater_standins::github::app_key_pair().unwrap();
    let (junk_key, _) = argocd_ecr_updater_standins::github::app_key_pair().unwrap();
    standins
        .github
        .create_repository("barun/platform", "main", &[]);
    standins.github.register_app(
        "123456",
        "7890",
        &platform_public,
        &[REPO, "barun/platform"],
    );
    let app_fields = |key: &str| json!({"githubAppID": "123456", "githubAppInstallationID": "7890", "githubAppPrivateKey": key});
    standins
        .aws
        .put_secret(SECRET_ARN, &app_fields(&platform_key).to_string(), true);
    let mut all = vars(&standins);
    all.push(("DRY_RUN".into(), "false".into()));
    all.push(("READ_IMAGEUPDATERS".into(), "false".into()));
    let borrowed: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let function = standins.handler(&borrowed);
    let first = function
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&first), Action::Updated, "committed");
    assert_eq!(
        standins.github.minted_for(),
        vec![vec![REPO.to_string()]],
        "narrowed to the repository written"
    );

    // The team's Secret: the platform's App and installation, a key of its own.
    let fields = app_fields(&junk_key);
    let team_fields: Vec<(&str, &str)> = fields
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
        .collect();
    standins
        .kube
        .insert_secret("argocd", "invitation-git", json!({}), &team_fields);
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("write-back-method", "git:secret:argocd/invitation-git")],
    );
    standins
        .github
        .push(REPO, "main", OVERRIDE, "helm:\n  parameters: []\n", "reset");
    let before = commits(&standins, "main");
    let team = report_of(function.handle(&event("push-date-tag.json"), None).await);
    let entry = only(&team);
    assert_eq!(entry.action, Action::Failed, "{}", entry.reason);
    assert!(
        entry.reason.contains("JSON web token could not be decoded"),
        "{}",
        entry.reason
    );
    assert_eq!(commits(&standins, "main"), before, "nothing committed");
    assert_eq!(
        standins.github.minted_for().len(),
        1,
        "the junk key minted nothing"
    );
}

#[tokio::test]
async fn a_github_app_key_is_exchanged_for_an_installation_token_once_and_reused() {
    let standins = git_standins(&[]).await;
    let (private_pem, public_pem) = argocd_ecr_updater_standins::github::app_key_pair().unwrap();
    standins
        .github
        .register_app("123456", "7890", &public_pem, &[REPO]);
    standins.aws.put_secret(
        SECRET_ARN,
        &json!({"githubAppID": "123456", "githubAppInstallationID": "7890", "githubAppPrivateKey": private_pem}).to_string(),
        true,
    );
    let mut all = vars(&standins);
    all.push(("DRY_RUN".into(), "false".into()));
    let borrowed: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // One handler, as one warm container: the token is minted once for both invocations.
    let function = standins.handler(&borrowed);
    let first = function
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&first), Action::Updated, "committed");
    let second = function
        .handle(
            &push_event("barun-dev-ecr", "20250825-153012", "2025-08-25T06:31:00Z"),
            None,
        )
        .await
        .unwrap();
    expect_decision(only(&second), Action::Unchanged, "already the current tag");
    assert_eq!(
        standins
            .github
            .tokens_minted
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );

    // A token GitHub revoked early is dropped and a new one minted in the same invocation.
    standins.github.expire_installation_tokens();
    standins
        .github
        .push(REPO, "main", OVERRIDE, "helm:\n  parameters: []\n", "reset");
    let retried = function
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&retried), Action::Updated, "committed");
    assert_eq!(
        standins
            .github
            .tokens_minted
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
}

#[tokio::test]
async fn git_secret_reads_the_one_named_kubernetes_secret() {
    let standins = with_git_vars(
        Scenario::seeded_with_grants(vec![
            argocd_ecr_updater_standins::Grant::new(&["get", "list", "patch"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("events", &["create"], "argocd"),
            argocd_ecr_updater_standins::Grant::named(
                "secrets",
                &["get"],
                "argocd",
                &["invitation-git"],
            ),
        ])
        .await,
    );
    standins
        .github
        .create_repository(REPO, "main", &[("argocd/values.yaml", VALUES)]);
    standins.github.grant_token(TOKEN, &[REPO], true);
    standins.kube.insert_secret(
        "argocd",
        "invitation-git",
        json!({}),
        &[("username", "git"), ("password", TOKEN)],
    );
    standins
        .kube
        .insert_secret("argocd", "other-git", json!({}), &[("password", TOKEN)]);
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("write-back-method", "git:secret:argocd/invitation-git")],
    );
    let vars = [
        ("GITHUB_API_URL", standins.github_api()),
        ("GIT_CA_BUNDLE", standins.ca_pem.clone()),
        ("READ_IMAGEUPDATERS", "false".into()),
    ];
    let borrowed: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let report = standins
        .handler(&borrowed)
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&report), Action::Updated, "committed");

    // A Secret the function's RBAC does not name is refused, with the fix.
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("write-back-method", "git:secret:argocd/other-git")],
    );
    let refused = report_of(
        standins
            .handler(&borrowed)
            .handle(&event("push-date-tag.json"), None)
            .await,
    );
    expect_decision(only(&refused), Action::Failed, "resourceNames: [other-git]");
}

/// A Secret named by `git:secret:` is held to its `project` and `url` as Argo CD holds its
/// repository Secrets: an Application of `default` cannot borrow team-b's token, nor send a
/// token scoped to one repository to another.
#[tokio::test]
async fn git_secret_honours_the_project_and_url_of_the_secret_it_names() {
    let standins = with_git_vars(
        Scenario::seeded_with_grants(vec![
            argocd_ecr_updater_standins::Grant::new(&["get", "list", "patch"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("events", &["create"], "argocd"),
            argocd_ecr_updater_standins::Grant::named(
                "secrets",
                &["get"],
                "argocd",
                &["team-b-git", "elsewhere-git", "this-repo-git"],
            ),
        ])
        .await,
    );
    standins
        .github
        .create_repository(REPO, "main", &[("argocd/values.yaml", VALUES)]);
    standins.github.grant_token(TOKEN, &[REPO], true);
    let repository = json!({"argocd.argoproj.io/secret-type": "repository"});
    standins.kube.insert_secret(
        "argocd",
        "team-b-git",
        repository.clone(),
        &[
            ("project", "team-b"),
            ("url", "https://github.com/barun/invitation.git"),
            ("password", "ghp_team_b"),
        ],
    );
    standins.kube.insert_secret(
        "argocd",
        "elsewhere-git",
        json!({}),
        &[
            ("url", "https://github.com/someone-else"),
            ("password", "ghp_elsewhere"),
        ],
    );
    standins.kube.insert_secret(
        "argocd",
        "this-repo-git",
        repository,
        &[
            ("project", "default"),
            ("url", "https://github.com/barun/invitation"),
            ("password", TOKEN),
        ],
    );
    let vars = [
        ("GITHUB_API_URL", standins.github_api()),
        ("GIT_CA_BUNDLE", standins.ca_pem.clone()),
        ("READ_IMAGEUPDATERS", "false".into()),
    ];
    let borrowed: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cases = [
        ("argocd/team-b-git", "is scoped to AppProject `team-b`"),
        (
            "argocd/elsewhere-git",
            "serves `https://github.com/someone-else`",
        ),
    ];
    for (secret, refusal) in cases {
        standins.annotate(
            "argocd",
            SEED_APP,
            &[("write-back-method", &format!("git:secret:{secret}"))],
        );
        let report = report_of(
            standins
                .handler(&borrowed)
                .handle(&event("push-date-tag.json"), None)
                .await,
        );
        let entry = only(&report);
        expect_decision(entry, Action::Failed, refusal);
        assert!(!entry.retryable, "{secret}: {}", entry.reason);
    }
    // No refused token ever left for GitHub.
    let used: Vec<String> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::GitHub)
        .map(|r| r.authorization)
        .collect();
    assert!(used.is_empty(), "{used:?}");
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("write-back-method", "git:secret:argocd/this-repo-git")],
    );
    let report = standins
        .handler(&borrowed)
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&report), Action::Updated, "committed");
}

#[tokio::test]
async fn git_repocreds_reads_argo_cds_repository_secret_only_when_enabled() {
    let standins = git_standins(&[("write-back-method", "git:repocreds")]).await;
    standins.kube.insert_secret(
        "argocd",
        "repo-invitation",
        json!({"argocd.argoproj.io/secret-type": "repository"}),
        &[
            ("url", "https://github.com/barun/invitation.git"),
            ("password", TOKEN),
        ],
    );
    standins.kube.insert_secret(
        "argocd",
        "creds-elsewhere",
        json!({"argocd.argoproj.io/secret-type": "repo-creds"}),
        &[
            ("url", "https://github.com/someone-else"),
            ("password", "ghp_wrong"),
        ],
    );
    let off = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    expect_decision(only(&off), Action::Failed, "GIT_REPOCREDS=true");
    let on = standins
        .outcome(&[("GIT_REPOCREDS", "true")], &event("push-date-tag.json"))
        .await;
    let report = report_of(on);
    // The default grants have no `list` on Secrets: the message says which RBAC to apply.
    expect_decision(only(&report), Action::Failed, "rbac-repocreds.yaml");
}

/// A repository Secret with a `project` serves that AppProject's Applications only (and is
/// preferred there over one without), as Argo CD's project-scoped repositories are: an
/// annotation editor in one project cannot borrow another project's credentials.
#[tokio::test]
async fn git_repocreds_honours_the_project_a_repository_secret_is_scoped_to() {
    let standins = with_git_vars(
        Scenario::seeded_with_grants(vec![
            argocd_ecr_updater_standins::Grant::new(&["get", "list", "patch"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("events", &["create"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("secrets", &["list"], "argocd"),
        ])
        .await,
    );
    standins
        .github
        .create_repository(REPO, "main", &[("argocd/values.yaml", VALUES)]);
    standins.github.grant_token(TOKEN, &[REPO], true);
    let secret = |name: &str, kind: &str, url: &str, project: Option<&str>, password: &str| {
        let mut fields = vec![("url", url), ("password", password)];
        if let Some(project) = project {
            fields.push(("project", project));
        }
        standins.kube.insert_secret(
            "argocd",
            name,
            json!({"argocd.argoproj.io/secret-type": kind}),
            &fields,
        );
    };
    let exact = "https://github.com/barun/invitation.git";
    secret(
        "repo-team-b",
        "repository",
        exact,
        Some("team-b"),
        "ghp_team_b",
    );
    secret(
        "creds-default",
        "repo-creds",
        "https://github.com/barun",
        Some("default"),
        TOKEN,
    );
    secret(
        "creds-global",
        "repo-creds",
        "https://github.com/barun",
        None,
        "ghp_global",
    );
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("write-back-method", "git:repocreds")],
    );
    let vars = [
        ("GITHUB_API_URL", standins.github_api()),
        ("GIT_CA_BUNDLE", standins.ca_pem.clone()),
        ("GIT_REPOCREDS", "true".into()),
        ("READ_IMAGEUPDATERS", "false".into()),
    ];
    let borrowed: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let function = standins.handler(&borrowed);
    // The seed's Application is in project `default`: its own scoped credential wins over
    // team-b's exact one (not its project) and the global one.
    let report = function
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&report), Action::Updated, "committed");
    // In another project, only the global credential is left, and GitHub refuses it.
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["spec"]["project"] = json!("team-c");
    standins.kube.insert(app).unwrap();
    standins
        .github
        .push(REPO, "main", OVERRIDE, "helm:\n  parameters: []\n", "reset");
    let refused = report_of(function.handle(&event("push-date-tag.json"), None).await);
    let entry = only(&refused);
    assert_eq!(entry.action, Action::Failed, "{}", entry.reason);
    let used: Vec<String> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::GitHub)
        .map(|r| r.authorization)
        .collect();
    assert!(used.iter().any(|a| a.contains("ghp_global")), "{used:?}");
    assert!(!used.iter().any(|a| a.contains("ghp_team_b")), "{used:?}");
}

#[tokio::test]
async fn git_repocreds_picks_the_repository_secret_for_exactly_this_url() {
    let standins = with_git_vars(
        Scenario::seeded_with_grants(vec![
            argocd_ecr_updater_standins::Grant::new(&["get", "list", "patch"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("events", &["create"], "argocd"),
            argocd_ecr_updater_standins::Grant::on("secrets", &["list"], "argocd"),
        ])
        .await,
    );
    standins
        .github
        .create_repository(REPO, "main", &[("argocd/values.yaml", VALUES)]);
    standins.github.grant_token(TOKEN, &[REPO], true);
    standins.kube.insert_secret(
        "argocd",
        "creds-barun",
        json!({"argocd.argoproj.io/secret-type": "repo-creds"}),
        &[
            ("url", "https://github.com/barun"),
            ("password", "ghp_prefix_only"),
        ],
    );
    standins.kube.insert_secret(
        "argocd",
        "repo-invitation",
        json!({"argocd.argoproj.io/secret-type": "repository"}),
        &[
            ("url", "https://github.com/barun/invitation"),
            ("password", TOKEN),
        ],
    );
    standins.kube.insert_secret(
        "argocd",
        "unlabelled",
        json!({}),
        &[
            ("url", "https://github.com/barun/invitation.git"),
            ("password", "ghp_x"),
        ],
    );
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("write-back-method", "git:repocreds")],
    );
    let vars = [
        ("GITHUB_API_URL", standins.github_api()),
        ("GIT_CA_BUNDLE", standins.ca_pem.clone()),
        ("GIT_REPOCREDS", "true".into()),
        ("READ_IMAGEUPDATERS", "false".into()),
    ];
    let borrowed: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let report = standins
        .handler(&borrowed)
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    expect_decision(only(&report), Action::Updated, "committed");
    let list = standins
        .shared
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/secrets"))
        .unwrap();
    assert!(list.query.contains("labelSelector"), "{}", list.query);
}

#[tokio::test]
async fn a_kustomization_target_gets_its_images_entry_changed_and_the_rest_byte_identical() {
    let standins = git_standins(&[
        ("write-back-target", "kustomization"),
        ("app.kustomize.image-name", "invitation"),
    ])
    .await;
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\n# the shared base\nresources:\n  - ../../base\n\nimages:\n  - name: invitation   # the app\n    newName: {SEED_IMAGE}\n    newTag: \"{SEED_TAG}\"\n  - name: redis\n    newTag: \"7.2\"\n"
    );
    standins.github.push(
        REPO,
        "main",
        "overlays/dev/kustomization.yaml",
        &kustomization,
        "overlay",
    );
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["spec"]["source"] = json!({"repoURL": "https://github.com/barun/invitation.git", "targetRevision": "main", "path": "overlays/dev", "kustomize": {}});
    app["status"]["sourceType"] = json!("Kustomize");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();

    let report = push(&standins).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "overlays/dev/kustomization.yaml",
    );
    let file = standins
        .github
        .file(REPO, "main", "overlays/dev/kustomization.yaml")
        .unwrap();
    assert_eq!(
        file,
        kustomization.replace(&format!("\"{SEED_TAG}\""), &format!("\"{PUSHED_TAG}\""))
    );
    assert_eq!(
        standins.github.history(REPO, "main")[0].1.files.len(),
        3,
        "one file changed, none added"
    );
}

#[tokio::test]
async fn an_imageupdater_objects_git_write_back_config_commits_like_the_annotations() {
    let standins = git_standins(&[]).await;
    // The object, not the annotations, configures the Application (and wins over them).
    standins.annotate("argocd", SEED_APP, &[("write-back-method", "argocd")]);
    let mut object = argocd_ecr_updater_standins::fixtures::seed_image_updater();
    object["spec"]["applicationRefs"][0]["writeBackConfig"] = json!({"method": "git", "gitConfig": {"branch": "main:image-updates", "writeBackTarget": "helmvalues:values.yaml"}});
    standins.kube.insert_image_updater(object).unwrap();
    let report = push(&standins).await;
    let entry = only(&report);
    expect_decision(entry, Action::Updated, "committed");
    assert!(
        entry
            .configured_by
            .as_deref()
            .unwrap_or_default()
            .contains("ImageUpdater"),
        "{:?}",
        entry.configured_by
    );
    let file = standins
        .github
        .file(REPO, "image-updates", "argocd/values.yaml")
        .unwrap();
    assert!(file.contains(&format!("tag: \"{PUSHED_TAG}\"")), "{file}");
    assert_eq!(commits(&standins, "main"), 1);

    // A pull request with `base:target` is refused, as Image Updater refuses it, never
    // turned into a direct commit.
    let mut object = argocd_ecr_updater_standins::fixtures::seed_image_updater();
    object["spec"]["applicationRefs"][0]["writeBackConfig"] = json!({"method": "git",
        "gitConfig": {"branch": "main:image-updates", "pullRequest": {"github": {}}}});
    standins.kube.insert_image_updater(object).unwrap();
    let refused = report_of(
        standins
            .outcome(
                &[],
                &push_event("barun-dev-ecr", "20250826-000000", "2025-08-26T00:00:00Z"),
            )
            .await,
    );
    expect_decision(
        only(&refused),
        Action::Skipped,
        "a pull request names only its base branch",
    );
    assert_eq!(
        commits(&standins, "image-updates"),
        2,
        "nothing more committed"
    );
    assert!(standins.github.pull_requests(REPO).is_empty());
}

#[tokio::test]
async fn applications_sharing_a_repository_take_turns_instead_of_racing() {
    let standins = git_standins(&[]).await;
    // Four more Applications like the seed's, each with its own path in the same repository.
    for i in 0..4 {
        let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
        app["metadata"]["name"] = json!(format!("invitation-{i}"));
        app["spec"]["source"]["path"] = json!(format!("apps/{i}"));
        argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
        standins.kube.insert(app).unwrap();
    }
    let report = push(&standins).await;
    assert_eq!(report.entries.len(), 5, "{:#?}", report.entries);
    assert!(
        report.entries.iter().all(|e| e.action == Action::Updated),
        "{:#?}",
        report.entries
    );
    assert_eq!(report.stats.conflicts, 0, "no self-inflicted races");
    assert_eq!(commits(&standins, "main"), 6);
    for i in 0..4 {
        let file = standins.github.file(
            REPO,
            "main",
            &format!("apps/{i}/.argocd-source-invitation-{i}.yaml"),
        );
        assert!(file.unwrap().contains(PUSHED_TAG));
    }
}

#[tokio::test]
async fn a_tag_as_target_revision_is_a_clear_configuration_error() {
    let standins = git_standins(&[]).await;
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["spec"]["source"]["targetRevision"] = json!("v1.0.0");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let report = report_of(standins.outcome(&[], &event("push-date-tag.json")).await);
    let entry = only(&report);
    expect_decision(
        entry,
        Action::Failed,
        "a tag or a deleted branch cannot be committed to; set git-branch",
    );
    assert!(!entry.retryable);
}

#[tokio::test]
async fn several_images_of_one_application_go_in_one_commit() {
    let worker = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/worker";
    let standins = git_standins(&[
        ("image-list", &format!("app={SEED_IMAGE},worker={worker}")),
        ("worker.update-strategy", "latest"),
        ("worker.allow-tags", "regexp:^v[0-9]+$"),
        ("worker.helm.image-name", "worker.image.repository"),
        ("worker.helm.image-tag", "worker.image.tag"),
    ])
    .await;
    standins
        .aws
        .push(argocd_ecr_updater_standins::fixtures::image(
            "worker",
            "v1",
            'a',
            "2025-08-20T00:00:00Z",
        ));
    standins
        .aws
        .push(argocd_ecr_updater_standins::fixtures::image(
            "worker",
            "v2",
            'b',
            "2025-08-21T00:00:00Z",
        ));
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["spec"]["source"]["helm"]["parameters"]
        .as_array_mut()
        .unwrap()
        .extend([
            json!({"name": "worker.image.repository", "value": worker}),
            json!({"name": "worker.image.tag", "value": "v1"}),
        ]);
    app["status"]["summary"]["images"]
        .as_array_mut()
        .unwrap()
        .push(json!(format!("{worker}:v1")));
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();

    let report = standins
        .outcome(&[], &event("scheduled-reconcile.json"))
        .await
        .unwrap();
    let updated: Vec<&Entry> = report
        .entries
        .iter()
        .filter(|e| e.action == Action::Updated)
        .collect();
    assert_eq!(updated.len(), 2, "{:#?}", report.entries);
    assert_eq!(report.stats.git_commits, 1);
    let history = standins.github.history(REPO, "main");
    assert_eq!(history.len(), 2, "one commit for both images");
    assert!(
        history[0]
            .1
            .message
            .contains("updates image worker tag 'v1' to 'v2'"),
        "{}",
        history[0].1.message
    );
    assert!(history[0].1.message.contains(&format!(
        "updates image barun-dev-ecr tag '{SEED_TAG}' to '{PUSHED_TAG}'"
    )));
    let file = standins.github.file(REPO, "main", OVERRIDE).unwrap();
    assert!(
        file.contains("value: v2") && file.contains(PUSHED_TAG),
        "{file}"
    );
}

#[tokio::test]
async fn two_clusters_writing_one_file_make_one_commit_without_racing_each_other() {
    let standins = git_standins(&[]).await;
    // The same Application name in both clusters: the same `.argocd-source-<app>.yaml`.
    // Kept alive to the end: dropping it takes its API server down.
    let _staging = standins.add_seeded_cluster("staging").await.unwrap();
    let before = commits(&standins, "main");
    let report = report_of(
        standins
            .outcome(
                &[("CLUSTERS", "barun-dev,staging")],
                &event("push-date-tag.json"),
            )
            .await,
    );
    assert_eq!(
        commits(&standins, "main"),
        before + 1,
        "{:#?}",
        report.entries
    );
    let mut actions: Vec<Action> = report.entries.iter().map(|e| e.action).collect();
    actions.sort_by_key(|a| a.as_str());
    assert_eq!(
        actions,
        [Action::Unchanged, Action::Updated],
        "{:#?}",
        report.entries
    );
    // The clusters took turns on the repository: no commit had to be retried.
    assert_eq!(report.stats.conflicts, 0);
    let file = standins.github.file(REPO, "main", OVERRIDE).unwrap();
    assert!(file.contains("20250825-153012"), "{file}");
}
