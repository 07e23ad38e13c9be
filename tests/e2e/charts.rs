//! Helm charts in ECR, end to end: a chart pushed to ECR moves the `targetRevision` of the
//! Applications that use it (single source, multi-source, Argo CD's OCI source), never
//! backwards, never another field, and only for a Helm chart.

use crate::common::{Scenario, for_app, one};
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::{
    ACCOUNT, REGION, chart, image, push_event, reconcile_event,
};
use serde_json::{Value, json};

fn registry() -> String {
    format!("{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com")
}

/// An Application whose only configuration is a `chart-list` naming `charts/web`.
fn chart_app(name: &str, spec_sources: Value, annotations: &[(&str, &str)]) -> Value {
    let mut metadata_annotations = serde_json::Map::new();
    metadata_annotations.insert(
        "argocd-ecr-updater.io/chart-list".into(),
        json!(format!("web={}/charts/web", registry())),
    );
    for (k, v) in annotations {
        metadata_annotations.insert((*k).into(), json!(v));
    }
    let mut app = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd", "annotations": metadata_annotations},
        "spec": {"project": "default",
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"}}});
    match spec_sources {
        Value::Array(sources) => app["spec"]["sources"] = Value::Array(sources),
        source => app["spec"]["source"] = source,
    }
    app
}

fn helm_chart_source(version: &str) -> Value {
    json!({"repoURL": format!("{}/charts", registry()), "chart": "web", "targetRevision": version,
        "helm": {"valueFiles": ["values-prod.yaml"]}})
}

/// The stand-ins with charts 1.2.0 and 1.3.0 of `charts/web` in ECR and `apps` in the cluster.
async fn with_charts(apps: &[Value]) -> Scenario {
    let standins = Scenario::seeded().await;
    standins
        .aws
        .push(chart("charts/web", "1.2.0", 'a', "2026-11-01T10:00:00Z"));
    standins
        .aws
        .push(chart("charts/web", "1.3.0", 'b', "2026-12-01T10:00:00Z"));
    for app in apps {
        standins.kube.insert(app.clone()).unwrap();
    }
    standins
}

fn stored(standins: &Scenario, name: &str) -> Value {
    let app = standins.kube.get("argocd", name).unwrap();
    standins.kube.validate(&app).unwrap();
    app
}

#[tokio::test]
async fn a_chart_push_moves_the_target_revision_of_the_application_using_it_and_nothing_else() {
    let app = chart_app("web", helm_chart_source("1.2.0"), &[]);
    let standins = with_charts(std::slice::from_ref(&app)).await;
    let push = push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z");
    let report = standins.report(&[], &push).await;
    let entry = one(&report, "web");
    assert_eq!(entry.action, Action::Updated, "{}", entry.reason);
    assert_eq!(entry.from.as_deref(), Some("1.2.0"));
    assert_eq!(entry.to.as_deref(), Some("1.3.0"));
    assert_eq!(entry.sources, ["spec.source"]);
    let after = stored(&standins, "web");
    assert_eq!(after["spec"]["source"]["targetRevision"], "1.3.0");
    // Every other field as it was.
    let mut expected = app["spec"].clone();
    expected["source"]["targetRevision"] = json!("1.3.0");
    assert_eq!(after["spec"], expected);
    let events = standins.kube.events();
    let event = events
        .iter()
        .find(|e| e["reason"] == "ChartUpdated")
        .expect("a ChartUpdated event");
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .contains("charts/web 1.2.0 -> 1.3.0 (spec.source)"),
        "{event}"
    );
    // The seed Application, tracking an image, is not this push's concern.
    assert!(for_app(&report, "aws-pipeline-test").is_empty());
    // Delivered again, nothing more is written.
    let again = standins.report(&[], &push).await;
    assert_eq!(one(&again, "web").action, Action::Unchanged);
    assert_eq!(standins.kube_requests("PATCH"), 1);
}

#[tokio::test]
async fn in_a_multi_source_application_only_the_chart_source_moves() {
    let sources = json!([
        {"repoURL": "https://github.com/org/values.git", "targetRevision": "main", "ref": "values"},
        helm_chart_source("1.2.0"),
        {"repoURL": format!("{}/charts", registry()), "chart": "db", "targetRevision": "0.4.0"},
    ]);
    let app = chart_app("multi", sources, &[]);
    let standins = with_charts(&[app]).await;
    let push = push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z");
    let report = standins.report(&[], &push).await;
    let entry = one(&report, "multi");
    assert_eq!(entry.action, Action::Updated, "{}", entry.reason);
    assert_eq!(entry.sources, ["spec.sources[1]"]);
    let after = stored(&standins, "multi");
    let revisions: Vec<&Value> = after["spec"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["targetRevision"])
        .collect();
    assert_eq!(
        revisions,
        [&json!("main"), &json!("1.3.0"), &json!("0.4.0")]
    );
}

#[tokio::test]
async fn argo_cds_oci_source_is_a_chart_too() {
    let source = json!({"repoURL": format!("oci://{}/charts/web", registry()), "path": ".",
        "targetRevision": "1.2.0"});
    let standins = with_charts(&[chart_app("oci", source, &[])]).await;
    let push = push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z");
    let report = standins.report(&[], &push).await;
    assert_eq!(one(&report, "oci").action, Action::Updated);
    let after = stored(&standins, "oci");
    assert_eq!(after["spec"]["source"]["targetRevision"], "1.3.0");
    assert_eq!(after["spec"]["source"]["path"], ".");
}

#[tokio::test]
async fn an_older_chart_push_never_downgrades_and_a_constraint_holds_the_range() {
    let pinned = chart_app(
        "pinned",
        helm_chart_source("1.2.0"),
        &[(
            "argocd-ecr-updater.io/chart-list",
            &format!("web={}/charts/web:~1.2", registry()),
        )],
    );
    let ahead = chart_app("ahead", helm_chart_source("1.4.0"), &[]);
    let standins = with_charts(&[pinned, ahead]).await;
    standins.aws.push(chart(
        "charts/web",
        "1.2.7_build.3",
        'c',
        "2026-12-02T10:00:00Z",
    ));
    let push = push_event("charts/web", "1.2.7_build.3", "2026-12-02T10:00:05Z");
    let report = standins.report(&[], &push).await;
    let pinned = one(&report, "pinned");
    assert_eq!(pinned.action, Action::Updated, "{}", pinned.reason);
    // Helm's `+` comes back from the tag's `_`.
    assert_eq!(pinned.to.as_deref(), Some("1.2.7+build.3"));
    let ahead = one(&report, "ahead");
    assert_eq!(ahead.action, Action::Unchanged);
    assert!(
        ahead.reason.contains("ranks below the current tag `1.4.0`"),
        "{}",
        ahead.reason
    );
    assert_eq!(
        stored(&standins, "ahead")["spec"]["source"]["targetRevision"],
        "1.4.0"
    );
    assert_eq!(standins.kube_requests("PATCH"), 1);
}

#[tokio::test]
async fn an_image_pushed_to_a_chart_repository_is_never_written_as_a_version() {
    let standins = with_charts(&[chart_app("web", helm_chart_source("1.3.0"), &[])]).await;
    standins
        .aws
        .push(image("charts/web", "9.9.9", 'd', "2026-12-02T10:00:00Z"));
    let push = push_event("charts/web", "9.9.9", "2026-12-02T10:00:05Z");
    let report = standins.report(&[], &push).await;
    let entry = one(&report, "web");
    assert_eq!(entry.action, Action::Unchanged, "{}", entry.reason);
    assert_eq!(standins.kube_requests("PATCH"), 0);
}

#[tokio::test]
async fn a_range_a_freeze_and_a_missing_source_each_say_why_nothing_was_written() {
    let range = chart_app("range", helm_chart_source("1.*"), &[]);
    let frozen = chart_app(
        "frozen",
        helm_chart_source("1.2.0"),
        &[("argocd-ecr-updater.io/freeze", "true")],
    );
    let elsewhere = chart_app(
        "elsewhere",
        json!({"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.0"}),
        &[],
    );
    let standins = with_charts(&[range, frozen, elsewhere]).await;
    let push = push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z");
    let report = standins.report(&[], &push).await;
    let cases = [
        (
            "range",
            Action::Unchanged,
            "a version range, which Argo CD resolves itself",
        ),
        (
            "frozen",
            Action::Skipped,
            "frozen by `argocd-ecr-updater.io/freeze`",
        ),
        (
            "elsewhere",
            Action::Skipped,
            "no source of the Application is the chart",
        ),
    ];
    for (name, action, reason) in cases {
        let entry = one(&report, name);
        assert_eq!(entry.action, action, "{name}: {}", entry.reason);
        assert!(entry.reason.contains(reason), "{name}: {}", entry.reason);
    }
    assert_eq!(standins.kube_requests("PATCH"), 0);
}

/// An ImageUpdater object in `argocd` configuring the Application `web`, frozen.
fn frozen_image_updater() -> Value {
    let mut object = argocd_ecr_updater_standins::fixtures::image_updater(
        "frozen-team",
        json!([{"namePattern": "web",
                "images": [{"alias": "api", "imageName": format!("{}/services/api", registry())}]}]),
    );
    object["metadata"]["annotations"] = json!({"argocd-ecr-updater.io/freeze": "true"});
    object
}

#[tokio::test]
async fn a_freeze_on_the_imageupdater_object_configuring_the_application_holds_its_chart_patch() {
    let app = chart_app("web", helm_chart_source("1.2.0"), &[]);
    let standins = with_charts(&[app]).await;
    standins
        .kube
        .insert_image_updater(frozen_image_updater())
        .unwrap();
    let push = push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z");
    let report = standins.report(&[], &push).await;
    let entry = one(&report, "web");
    assert_eq!(entry.action, Action::Skipped, "{}", entry.reason);
    assert!(
        entry.reason.contains(
            "frozen by `argocd-ecr-updater.io/freeze` on ImageUpdater argocd/frozen-team"
        ),
        "{}",
        entry.reason
    );
    assert_eq!(standins.kube_requests("PATCH"), 0);
    assert_eq!(
        stored(&standins, "web")["spec"]["source"]["targetRevision"],
        "1.2.0"
    );
}

#[tokio::test]
async fn a_bad_setting_fails_the_chart_permanently_naming_the_annotation() {
    let app = chart_app(
        "web",
        helm_chart_source("1.2.0"),
        &[("argocd-ecr-updater.io/chart.update-strategy", "digest")],
    );
    let standins = with_charts(&[app]).await;
    let push = push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z");
    let report = standins.settled(&[], &push).await;
    let entry = one(&report, "web");
    assert_eq!(entry.action, Action::Failed);
    assert!(!entry.retryable);
    assert!(
        entry
            .reason
            .contains("argocd-ecr-updater.io/chart.update-strategy"),
        "{}",
        entry.reason
    );
}

#[tokio::test]
async fn the_sweep_moves_charts_and_images_of_one_application_in_one_read() {
    let mut both = chart_app("both", helm_chart_source("1.2.0"), &[]);
    both["metadata"]["annotations"]["argocd-image-updater.argoproj.io/image-list"] =
        json!(format!("app={}/barun-dev-ecr", registry()));
    both["spec"]["source"]["helm"]["parameters"] = json!([
        {"name": "image.repository", "value": format!("{}/barun-dev-ecr", registry())},
        {"name": "image.tag", "value": "20250825-120000"}]);
    let standins = with_charts(&[both]).await;
    let report = standins.report(&[], &reconcile_event()).await;
    let entries = for_app(&report, "both");
    let chart = entries
        .iter()
        .find(|e| e.image.ends_with("charts/web"))
        .expect("the chart's entry");
    assert_eq!(chart.action, Action::Updated, "{}", chart.reason);
    let after = stored(&standins, "both");
    assert_eq!(after["spec"]["source"]["targetRevision"], "1.3.0");
    // The image entry is decided as before (the Application does not run the image, so it is
    // skipped by the liveness rule); the chart needed no read of its own.
    assert!(entries.iter().any(|e| e.image.ends_with("barun-dev-ecr")));
    let gets = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/applications/both"))
        .count();
    assert_eq!(gets, 1);
}

mod git_write_back {
    //! A chart's version committed to the Application's manifest in Git (app of apps), on
    //! the GitHub stand-in.

    use super::*;

    const APPS: &str = "org/apps";
    const FILE: &str = "apps/web.yaml";
    const TOKEN: &str = "ghp_standin0write0token0for0apps0repo";
    const SECRET_ARN: &str =
        "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:argocd-ecr-updater/apps-Zz12Yy";

    /// The manifest as a platform team keeps it: comments, a quoted version, a second
    /// Application after it.
    fn manifest(version: &str) -> String {
        format!(
            "# Deployed by the apps Application (app of apps).\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: {}/charts   # ECR\n    chart: web\n    targetRevision: \"{version}\"\n    helm:\n      valueFiles: [values-prod.yaml]\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: web\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: db\n",
            registry()
        )
    }

    /// The stand-ins with the chart Application (live at `live`), its manifest in Git at
    /// `in_git`, and a write token for the repository.
    async fn committing(live: &str, in_git: &str, extra: &[(&str, &str)]) -> Scenario {
        let mut annotations = vec![
            ("argocd-image-updater.argoproj.io/write-back-method", "git"),
            (
                "argocd-image-updater.argoproj.io/git-repository",
                "https://github.com/org/apps.git",
            ),
            ("argocd-ecr-updater.io/chart.write-back-target", FILE),
        ];
        annotations.extend_from_slice(extra);
        let app = chart_app("web", helm_chart_source(live), &annotations);
        let standins = with_charts(&[app]).await;
        let (api, ca) = (standins.github_api(), standins.ca_pem.clone());
        let standins = standins
            .var("GIT_CREDENTIALS_SECRET_ARNS", SECRET_ARN)
            .var("GITHUB_API_URL", &api)
            .var("GIT_CA_BUNDLE", &ca);
        standins
            .github
            .create_repository(APPS, "main", &[(FILE, &manifest(in_git))]);
        standins.github.grant_token(TOKEN, &[APPS], true);
        standins
            .aws
            .put_secret(SECRET_ARN, &json!({"token": TOKEN}).to_string(), true);
        standins
    }

    fn push() -> Value {
        push_event("charts/web", "1.3.0", "2026-12-01T10:00:05Z")
    }

    #[tokio::test]
    async fn the_version_is_committed_to_the_manifest_and_the_application_is_left_to_its_parent() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        let report = standins.report(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Updated, "{}", entry.reason);
        assert_eq!(entry.to.as_deref(), Some("1.3.0"));
        assert!(entry.reason.contains("committed"), "{}", entry.reason);
        assert_eq!(entry.git.as_ref().unwrap()["file"], FILE);
        // Only the version changed: comments, quoting and the second document as they were.
        assert_eq!(
            standins.github.file(APPS, "main", FILE).unwrap(),
            manifest("1.3.0")
        );
        let history = standins.github.history(APPS, "main");
        let (_, last) = history.first().unwrap();
        assert!(
            last.message
                .contains("updates chart 768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/charts/web version '1.2.0' to '1.3.0'"),
            "{}",
            last.message
        );
        // The Application itself is not patched: its parent renders it from Git.
        assert_eq!(standins.kube_requests("PATCH"), 0);
        assert_eq!(
            stored(&standins, "web")["spec"]["source"]["targetRevision"],
            "1.2.0"
        );
        assert!(
            standins
                .kube
                .events()
                .iter()
                .any(|e| e["reason"] == "ChartUpdated")
        );
        // Delivered again: Git holds the version, nothing is committed.
        let again = standins.report(&[], &push()).await;
        let entry = one(&again, "web");
        assert_eq!(entry.action, Action::Unchanged, "{}", entry.reason);
        assert_eq!(standins.github.history(APPS, "main").len(), history.len());
    }

    #[tokio::test]
    async fn git_holds_the_version_compared_against_not_the_live_application() {
        // Git moved ahead by hand (1.4.0) and the parent has not synced yet: no downgrade.
        let standins = committing("1.2.0", "1.4.0", &[]).await;
        let before = standins.github.history(APPS, "main").len();
        let report = standins.report(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Unchanged, "{}", entry.reason);
        assert_eq!(entry.from.as_deref(), Some("1.4.0"));
        assert_eq!(standins.github.history(APPS, "main").len(), before);
    }

    #[tokio::test]
    async fn a_branch_moved_under_the_commit_is_read_again_and_the_other_change_kept() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        let theirs = manifest("1.2.0").replace("namespace: web", "namespace: web-prod");
        standins.github.race_next_commit(APPS, FILE, &theirs);
        let report = standins.report(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Updated, "{}", entry.reason);
        assert_eq!(report.stats.conflicts, 1);
        assert_eq!(
            standins.github.file(APPS, "main", FILE).unwrap(),
            theirs.replace("\"1.2.0\"", "\"1.3.0\"")
        );
    }

    #[tokio::test]
    async fn a_file_that_does_not_declare_the_application_first_is_refused_permanently() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        let other_first = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n{}",
            manifest("1.2.0")
        );
        standins
            .github
            .push(APPS, "main", FILE, &other_first, "reorder");
        let before = standins.github.history(APPS, "main").len();
        let report = standins.settled(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Failed);
        assert!(!entry.retryable);
        assert!(
            entry.reason.contains("its first document is ConfigMap `x`"),
            "{}",
            entry.reason
        );
        assert_eq!(standins.github.history(APPS, "main").len(), before);
    }

    #[tokio::test]
    async fn a_freeze_on_the_imageupdater_object_holds_the_chart_commit() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        standins
            .kube
            .insert_image_updater(frozen_image_updater())
            .unwrap();
        let before = standins.github.history(APPS, "main").len();
        let report = standins.report(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Skipped, "{}", entry.reason);
        assert!(
            entry.reason.contains("on ImageUpdater argocd/frozen-team"),
            "{}",
            entry.reason
        );
        assert_eq!(standins.github.history(APPS, "main").len(), before);
    }

    #[tokio::test]
    async fn a_manifest_of_the_same_name_in_another_namespace_is_never_edited() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        let other_team = manifest("1.2.0").replacen("namespace: argocd", "namespace: team-b", 1);
        standins
            .github
            .push(APPS, "main", FILE, &other_team, "team-b's web");
        let before = standins.github.history(APPS, "main").len();
        let report = standins.settled(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Failed, "{}", entry.reason);
        assert!(!entry.retryable);
        assert!(
            entry
                .reason
                .contains("does not begin with the Application `argocd/web` (its first document is Application `team-b/web`)"),
            "{}",
            entry.reason
        );
        assert_eq!(standins.github.history(APPS, "main").len(), before);
    }

    #[tokio::test]
    async fn a_manifest_whose_aliases_expand_past_the_bound_is_refused_unread() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        // The Application first, then a billion laughs inside its own document.
        let bomb = format!(
            "{}x-bomb:\n{}",
            manifest("1.2.0").split("---").next().unwrap(),
            argocd_ecr_updater::yaml::alias_bomb(100, 1, 20_000)
                .lines()
                .map(|line| format!("  {line}\n"))
                .collect::<String>()
        );
        standins.github.push(APPS, "main", FILE, &bomb, "laughs");
        let before = standins.github.history(APPS, "main").len();
        let report = standins.settled(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Failed, "{}", entry.reason);
        assert!(!entry.retryable);
        assert!(
            entry.reason.contains("expands to more than 4 MiB"),
            "{}",
            entry.reason
        );
        assert_eq!(standins.github.history(APPS, "main").len(), before);
    }

    #[tokio::test]
    async fn git_without_a_manifest_file_is_a_configuration_error_not_a_patch() {
        let standins = committing("1.2.0", "1.2.0", &[]).await;
        standins.annotate(
            "argocd",
            "web",
            &[("argocd-image-updater.argoproj.io/git-repository", "")],
        );
        let report = standins.settled(&[], &push()).await;
        let entry = one(&report, "web");
        assert_eq!(entry.action, Action::Failed);
        assert!(entry.reason.contains("git-repository"), "{}", entry.reason);
        assert_eq!(standins.kube_requests("PATCH"), 0);
    }
}
