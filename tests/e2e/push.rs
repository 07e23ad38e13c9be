//! End to end, in process: the real handler (SDK clients, token signing, TLS, patches)
//! against the stand-ins, for every case the function must get right.

use std::time::Duration;

use crate::common::{Scenario, event, expect_decision, helm_parameter, only, seed_tag};
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::{
    Application, SEED_IMAGE, SEED_TAG, digest as D, image, push_event as push,
};
use argocd_ecr_updater_standins::{
    FaultAction, Grant, Image, LoggedRequest, Route, Service, image_updater_grants,
};
use serde_json::{Value, json};

/// An Application with exactly these annotations, source and status.
fn app(name: &str, namespace: &str, annotations: Value, source: Value, status: Value) -> Value {
    Application::tracking(name, SEED_IMAGE, SEED_TAG)
        .namespace(namespace)
        .with(|app| {
            app["metadata"]["annotations"] = annotations;
            app["spec"]["source"] = source;
            app["status"] = status;
        })
        .build()
}

#[tokio::test]
async fn the_seed_application_moves_to_the_newly_pushed_date_tag() {
    let standins = Scenario::seeded().await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    let entry = only(&report);
    assert_eq!(entry.action, Action::Updated, "{}", entry.reason);
    assert_eq!(entry.from.as_deref(), Some("20250825-120000"));
    assert_eq!(entry.to.as_deref(), Some("20250825-153012"));
    assert_eq!(entry.sources, vec!["spec.source (helm)".to_string()]);
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-153012"));
    assert_eq!(
        helm_parameter(&standins, "argocd", "aws-pipeline-test", "image.repository").as_deref(),
        Some(SEED_IMAGE)
    );
    let stored = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    standins.kube.validate(&stored).unwrap();
    let audit: Value = serde_json::from_str(
        stored["metadata"]["annotations"]["argocd-ecr-updater.io/last-update"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(audit["images"][0]["from"], "20250825-120000");
    assert_eq!(audit["eventId"], "6f0c5a4e-1d2b-4c3a-9e8f-7a6b5c4d3e21");
    // Cost: one metadata-only list of ImageUpdater objects (none here), one list page, one
    // GET, one PATCH, one ECR call (the current tag's push time).
    assert_eq!(report.stats.image_updater_requests, 1);
    assert_eq!(standins.kube_requests("GET"), 3);
    assert_eq!(standins.kube_requests("PATCH"), 1);
    assert_eq!(report.stats.ecr_calls, 1);
    assert_eq!(standins.shared.count(|r| r.service == Service::Ecr), 1);
    assert_eq!(standins.shared.count(|r| r.service == Service::Eks), 1);
    let patch = standins
        .shared
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH")
        .unwrap();
    assert_eq!(patch.content_type, "application/json-patch+json");
}

#[tokio::test]
async fn out_of_order_and_duplicate_deliveries_never_downgrade() {
    let standins = Scenario::seeded().await;
    let h = standins.handler(&[]);
    h.handle(&event("push-date-tag.json"), None).await.unwrap();
    // A late event for an older push arrives after the newer one.
    let late = push("barun-dev-ecr", "20250824-093000", "2025-08-24T00:30:05Z");
    let report = h.handle(&late, None).await.unwrap();
    expect_decision(only(&report), Action::Skipped, "ranks below");
    // The same event delivered twice: the second is a no-op.
    let report = h.handle(&event("push-date-tag.json"), None).await.unwrap();
    assert_eq!(only(&report).action, Action::Unchanged);
    assert_eq!(standins.kube_requests("PATCH"), 1);
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-153012"));
}

#[tokio::test]
async fn a_new_date_tag_on_an_old_image_does_not_count_as_newer() {
    let standins = Scenario::seeded().await;
    // Someone tags yesterday's image (digest 1111…, first pushed 2025-08-24) with today's date.
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250901-000000",
        '1',
        "2025-09-01T00:00:00Z",
    ));
    let retag = push("barun-dev-ecr", "20250901-000000", "2025-09-01T00:00:00Z");
    let report = standins.report(&[], &retag).await;
    expect_decision(only(&report), Action::Skipped, "ranks below");
    // ECR ranked both tags in one request, as reconcile's select ranks them.
    assert_eq!(report.stats.ecr_calls, 1);
    let describe = standins
        .shared
        .requests()
        .into_iter()
        .find(|r| r.operation == "DescribeImages")
        .unwrap();
    assert!(
        describe.body.contains("20250901-000000") && describe.body.contains("20250825-120000"),
        "{}",
        describe.body
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-120000"));
}

#[tokio::test]
async fn a_tag_that_allow_tags_rejects_costs_no_ecr_call_and_no_write() {
    let standins = Scenario::seeded().await;
    let report = standins
        .report(&[], &event("retag-existing-digest.json"))
        .await;
    expect_decision(only(&report), Action::Skipped, "not allowed by allow-tags");
    assert_eq!(report.stats.ecr_calls, 0);
    assert_eq!(standins.kube_requests("PATCH"), 0);
}

/// (A completed scan is work since scan gates exist: `tests/e2e_gates.rs`.)
#[tokio::test]
async fn events_that_are_not_work_touch_nothing() {
    let standins = Scenario::seeded().await;
    for name in [
        "delete.json",
        "push-failure.json",
        "push-untagged-platform-manifest.json",
    ] {
        let report = standins.report(&[], &event(name)).await;
        assert!(report.skipped.is_some(), "{name}");
        assert!(report.entries.is_empty());
    }
    assert!(standins.shared.requests().is_empty());
}

#[tokio::test]
async fn a_malformed_event_fails_the_invocation_as_permanent() {
    let standins = Scenario::seeded().await;
    let mut bad = event("push-date-tag.json");
    bad["detail"]
        .as_object_mut()
        .unwrap()
        .remove("repository-name");
    let error = standins.handler(&[]).handle(&bad, None).await.unwrap_err();
    assert_eq!(error.error_type(), "Permanent.MalformedEvent");
    assert!(error.to_string().contains("repository-name"));
}

#[tokio::test]
async fn semver_with_a_constraint_moves_within_it_only() {
    // The seed's ECR holds `api:v1.3.0`, which events/push-semver-tag.json pushes.
    let standins = Scenario::seeded().await;
    let api = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api";
    standins.kube.insert(app("api", "argocd",
        json!({"argocd-image-updater.argoproj.io/image-list": format!("api={api}:^1.2")}),
        json!({"repoURL": "r", "chart": "api", "helm": {"parameters": [{"name": "image.name", "value": api}, {"name": "image.tag", "value": "v1.2.0"}]}}),
        json!({"sourceType": "Helm", "summary": {"images": [format!("{api}:v1.2.0")]}}))).unwrap();
    let report = standins.report(&[], &event("push-semver-tag.json")).await;
    assert_eq!(
        only(&report).action,
        Action::Updated,
        "{}",
        only(&report).reason
    );
    // semver ranks by name alone; the one request is ECR confirming the tag exists.
    assert_eq!(report.stats.ecr_calls, 1);
    let major = push("api", "v2.0.0", "2025-09-02T00:00:00Z");
    let report = standins.report(&[], &major).await;
    assert!(
        only(&report)
            .reason
            .contains("does not meet constraint `^1.2`"),
        "{}",
        only(&report).reason
    );
    let pre = push("api", "v1.4.0-rc.1", "2025-09-02T00:00:00Z");
    assert_eq!(
        only(&standins.report(&[], &pre).await).action,
        Action::Skipped
    );
    assert_eq!(
        standins.kube.get("argocd", "api").unwrap()["spec"]["source"]["helm"]["parameters"][1]["value"],
        "v1.3.0"
    );
}

#[tokio::test]
async fn the_digest_strategy_follows_what_the_tag_points_to_in_ecr_now() {
    let standins = Scenario::seeded().await;
    standins.kube.insert(app("pinned", "argocd",
        json!({"argocd-image-updater.argoproj.io/image-list": format!("app={SEED_IMAGE}:latest"),
               "argocd-image-updater.argoproj.io/app.update-strategy": "digest"}),
        json!({"repoURL": "r", "path": "p", "helm": {"parameters": [{"name": "image.tag", "value": format!("latest@{}", D('2'))}]}}),
        json!({"sourceType": "Helm", "summary": {"images": [format!("{SEED_IMAGE}:latest")]}}))).unwrap();
    // The event is stale: ECR moved `latest` to 3333… already; the event says 9999….
    let mut stale = event("retag-existing-digest.json");
    stale["detail"]["image-digest"] = json!(D('9'));
    let report = standins.report(&[], &stale).await;
    let pinned = report.entries.iter().find(|e| e.name == "pinned").unwrap();
    assert_eq!(pinned.action, Action::Updated, "{}", pinned.reason);
    assert_eq!(
        pinned.to.as_deref(),
        Some(format!("latest@{}", D('3')).as_str())
    );
    let report = standins.report(&[], &stale).await;
    assert_eq!(
        report
            .entries
            .iter()
            .find(|e| e.name == "pinned")
            .unwrap()
            .action,
        Action::Unchanged
    );
}

#[tokio::test]
async fn kustomize_multi_source_directory_and_applicationset_apps_are_each_handled() {
    let standins = Scenario::seeded().await;
    let annotations = json!({"argocd-image-updater.argoproj.io/image-list": format!("app={SEED_IMAGE}"),
                             "argocd-image-updater.argoproj.io/app.update-strategy": "alphabetical"});
    let status = |t: &str| json!({"sourceType": t, "summary": {"images": [format!("{SEED_IMAGE}:20250825-120000")]}});
    standins.kube.insert(app("kust", "argocd", annotations.clone(),
        json!({"repoURL": "r", "path": "overlays/prod", "kustomize": {"images": [format!("{SEED_IMAGE}:20250825-120000")]}}),
        status("Kustomize"))).unwrap();
    standins
        .kube
        .insert(app(
            "dir",
            "argocd",
            annotations.clone(),
            json!({"repoURL": "r", "path": "manifests"}),
            status("Directory"),
        ))
        .unwrap();
    let mut multi = app(
        "multi",
        "argocd",
        annotations.clone(),
        Value::Null,
        Value::Null,
    );
    let spec = multi["spec"].as_object_mut().unwrap();
    spec.remove("source");
    spec.insert("sources".into(), json!([
        {"repoURL": "values", "targetRevision": "main", "ref": "values"},
        {"repoURL": "r", "chart": "web", "helm": {"parameters": [{"name": "image.name", "value": SEED_IMAGE}, {"name": "image.tag", "value": "20250825-120000"}]}},
        // A second chart pinning its own image under the same parameter names.
        {"repoURL": "r", "chart": "worker", "helm": {"parameters": [{"name": "image.name", "value": "public.ecr.aws/docker/library/redis"}, {"name": "image.tag", "value": "20250825-120000"}]}}]));
    multi["status"] = json!({"sourceTypes": ["Directory", "Helm", "Helm"], "summary": {"images": [format!("{SEED_IMAGE}:20250825-120000")]}});
    standins.kube.insert(multi).unwrap();
    let mut owned = app(
        "owned",
        "argocd",
        annotations,
        json!({"repoURL": "r", "chart": "c", "helm": {}}),
        status("Helm"),
    );
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": "fleet", "uid": "u1"}]);
    standins.kube.insert(owned).unwrap();
    standins
        .kube
        .insert_application_set(
            json!({"metadata": {"name": "fleet", "namespace": "argocd"}, "spec": {"template": {}}}),
        )
        .unwrap();

    let report = standins.report(&[], &event("push-date-tag.json")).await;
    let by = |n: &str| report.entries.iter().find(|e| e.name == n).unwrap();
    assert_eq!(by("kust").action, Action::Updated);
    assert_eq!(
        standins.kube.get("argocd", "kust").unwrap()["spec"]["source"]["kustomize"]["images"],
        json!([format!("{SEED_IMAGE}:20250825-153012")])
    );
    assert_eq!(
        by("multi").sources,
        vec!["spec.sources[1] (helm)".to_string()]
    );
    let stored = standins.kube.get("argocd", "multi").unwrap();
    assert_eq!(
        stored["spec"]["sources"][1]["helm"]["parameters"][1]["value"],
        "20250825-153012"
    );
    // The worker chart's own image is untouched.
    assert_eq!(
        stored["spec"]["sources"][2]["helm"]["parameters"][1]["value"],
        "20250825-120000"
    );
    assert_eq!(
        stored["spec"]["sources"][0],
        json!({"repoURL": "values", "targetRevision": "main", "ref": "values"})
    );
    assert_eq!(by("dir").action, Action::Skipped);
    assert_eq!(
        by("dir").reason,
        "skipping app 'argocd/dir' of type 'Directory' because it's not of supported source type"
    );
    assert_eq!(by("owned").action, Action::Skipped);
    assert!(
        by("owned").reason.contains("ApplicationSet `fleet`"),
        "{}",
        by("owned").reason
    );
    assert!(by("owned").reason.contains("ignoreApplicationDifferences"));
    assert!(
        standins.kube.get("argocd", "owned").unwrap()["spec"]["source"]["helm"]
            .get("parameters")
            .is_none()
    );
}

#[tokio::test]
async fn a_push_no_application_tracks_costs_one_list_and_nothing_else() {
    let standins = Scenario::seeded().await;
    let report = standins
        .report(&[], &push("unrelated", "1.0.0", "2025-09-01T00:00:00Z"))
        .await;
    assert!(report.entries.is_empty());
    assert_eq!(report.stats.applications_listed, 1);
    // The ImageUpdater objects' metadata and the Applications' metadata.
    assert_eq!(standins.kube_requests("GET"), 2);
    assert_eq!(report.stats.ecr_calls, 0);
}

#[tokio::test]
async fn two_applications_in_two_namespaces_tracking_one_repository_both_move() {
    let standins = Scenario::seeded_with_grants(
        [
            vec![
                Grant::new(&["get", "list", "patch"], "argocd"),
                Grant::new(&["get", "list", "patch"], "team-b"),
            ],
            image_updater_grants("argocd"),
            image_updater_grants("team-b"),
        ]
        .concat(),
    )
    .await;
    let mut second = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    second["metadata"]["namespace"] = json!("team-b");
    for key in ["resourceVersion", "uid", "generation"] {
        second["metadata"].as_object_mut().unwrap().remove(key);
    }
    standins.kube.insert(second).unwrap();
    let report = standins
        .report(
            &[("ARGOCD_NAMESPACES", "argocd,team-b")],
            &event("push-date-tag.json"),
        )
        .await;
    assert_eq!(report.entries.len(), 2);
    assert!(report.entries.iter().all(|e| e.action == Action::Updated));
    // Both run the same tag: its push time is asked of ECR once per invocation.
    assert_eq!(report.stats.ecr_calls, 1);
    for ns in ["argocd", "team-b"] {
        assert_eq!(
            helm_parameter(&standins, ns, "aws-pipeline-test", "image.tag").as_deref(),
            Some("20250825-153012")
        );
    }
}

#[tokio::test]
async fn a_concurrent_edit_of_another_field_survives_our_write() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .race_next_patch("argocd", "aws-pipeline-test", |a| {
            a["spec"]["syncPolicy"]["syncOptions"] =
                json!(["CreateNamespace=true", "ServerSideApply=true"]);
            a["metadata"]["labels"] = json!({"edited-by": "human"});
        });
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    assert_eq!(only(&report).action, Action::Updated);
    // The edit landed between our read and our write; the patch tests only the parameter it
    // changes, so an edit elsewhere is no conflict and is kept.
    assert_eq!(report.stats.conflicts, 0);
    let stored = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    assert_eq!(
        stored["spec"]["syncPolicy"]["syncOptions"],
        json!(["CreateNamespace=true", "ServerSideApply=true"])
    );
    assert_eq!(stored["metadata"]["labels"]["edited-by"], "human");
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-153012"));
}

#[tokio::test]
async fn a_concurrent_edit_of_the_managed_parameter_makes_us_read_again_and_decide_again() {
    let standins = Scenario::seeded().await;
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250826-080000",
        '5',
        "2025-08-25T23:00:00Z",
    ));
    standins
        .kube
        .race_next_patch("argocd", "aws-pipeline-test", |a| {
            a["spec"]["source"]["helm"]["parameters"][1]["value"] = json!("20250826-080000");
        });
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    // Re-decided against the newer tag someone else set: ours is older, so nothing is written.
    expect_decision(only(&report), Action::Skipped, "ranks below");
    assert_eq!(report.stats.conflicts, 1);
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250826-080000"));
}

#[tokio::test]
async fn a_conflict_storm_is_retried_a_bounded_number_of_times_then_fails_the_invocation() {
    let standins = Scenario::seeded().await;
    standins.shared.inject(
        Route::kube("PATCH", "aws-pipeline-test"),
        2,
        FaultAction::Status {
            code: 409,
            retry_after: None,
        },
    );
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    assert_eq!(only(&report).action, Action::Updated);
    assert_eq!(report.stats.conflicts, 2);

    let standins = Scenario::seeded().await;
    standins.shared.inject(
        Route::kube("PATCH", "aws-pipeline-test"),
        100,
        FaultAction::Status {
            code: 409,
            retry_after: None,
        },
    );
    let error = standins
        .handler(&[("CONFLICT_RETRIES", "3")])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    let HandlerError::Targets { report, summary } = &error else {
        panic!("{error}")
    };
    assert_eq!(error.error_type(), "Retryable.TargetsFailed");
    assert!(summary.contains("4 conflicts in a row"), "{summary}");
    assert_eq!(report.stats.patches, 4);
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-120000"));
}

#[tokio::test]
async fn a_429_then_success_is_absorbed_within_the_invocation() {
    let standins = Scenario::seeded().await;
    standins.shared.inject(
        Route::kube("GET", "/applications/aws-pipeline-test"),
        1,
        FaultAction::Status {
            code: 429,
            retry_after: Some(1),
        },
    );
    standins.shared.inject(
        Route::kube("PATCH", "aws-pipeline-test"),
        1,
        FaultAction::Status {
            code: 503,
            retry_after: None,
        },
    );
    let started = std::time::Instant::now();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    assert_eq!(only(&report).action, Action::Updated);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
}

#[tokio::test]
async fn a_403_fails_the_invocation_with_the_fix_in_the_message() {
    let standins = Scenario::seeded_with_grants(
        [
            vec![Grant::new(&["get", "list"], "argocd")],
            image_updater_grants("argocd"),
        ]
        .concat(),
    )
    .await;
    let error = standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    assert_eq!(error.error_type(), "Retryable.TargetsFailed");
    let message = error.to_string();
    assert!(
        message.contains("may not patch applications in namespace \"argocd\""),
        "{message}"
    );
    assert!(message.contains("deploy/rbac.yaml"), "{message}");
}

#[tokio::test]
async fn dry_run_reports_the_exact_patch_and_leaves_the_object_untouched() {
    let standins = Scenario::seeded().await;
    let before = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    let report = standins
        .report(&[("DRY_RUN", "true")], &event("push-date-tag.json"))
        .await;
    assert!(report.dry_run);
    let entry = only(&report);
    assert!(entry.reason.starts_with("dry run:"));
    let patch = entry.patch.clone().unwrap();
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op["op"] == "replace" && op["value"][1]["value"] == "20250825-153012")
    );
    assert_eq!(
        standins.kube.get("argocd", "aws-pipeline-test").unwrap(),
        before
    );
    assert_eq!(standins.kube_requests("PATCH"), 0);
}

#[tokio::test]
async fn reconcile_catches_a_missed_event_and_follows_a_changed_constraint() {
    let standins = Scenario::seeded().await;
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    assert_eq!(
        report.mode,
        argocd_ecr_updater::report::InvocationKind::Reconcile
    );
    assert_eq!(
        only(&report).action,
        Action::Updated,
        "{}",
        only(&report).reason
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-153012"));
    // The user narrows allow-tags to the 24th: like Image Updater, reconcile moves there.
    standins
        .kube
        .edit("argocd", "aws-pipeline-test", |a| {
            a["metadata"]["annotations"]["argocd-image-updater.argoproj.io/app.allow-tags"] =
                json!("regexp:^20250824-[0-9]{6}$");
        })
        .unwrap();
    let report = standins.report(&[], &json!({"action": "reconcile"})).await;
    assert_eq!(only(&report).to.as_deref(), Some("20250824-093000"));
    let report = standins.report(&[], &json!({"action": "reconcile"})).await;
    assert_eq!(only(&report).action, Action::Unchanged);
}

#[tokio::test]
async fn a_reconcile_asks_for_the_tag_list_while_the_application_is_read() {
    let standins = Scenario::seeded().await;
    let read = Duration::from_millis(500);
    standins.shared.inject(
        Route::kube("GET", "/applications/aws-pipeline-test"),
        1,
        FaultAction::Delay(read),
    );
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(only(&report), Action::Updated, "");
    let log = standins.shared.requests();
    // (arrived, answer begun): the read's answer begins only after its delay.
    let arrived = |wanted: &dyn Fn(&LoggedRequest) -> bool| {
        log.iter()
            .filter(|r| wanted(r))
            .map(|r| (r.arrived.unwrap(), r.handling_started.unwrap()))
            .collect::<Vec<_>>()
    };
    let gets = arrived(&|r| {
        r.service == Service::Kube
            && r.method == "GET"
            && r.path.ends_with("/applications/aws-pipeline-test")
    });
    let tag_lists = arrived(&|r| r.service == Service::Ecr && r.operation == "DescribeImages");
    assert_eq!(
        (gets.len(), tag_lists.len()),
        (1, 1),
        "one read, one tag list"
    );
    assert!(
        tag_lists[0].0 < gets[0].1,
        "the tag list was asked for only after the Application's read was answered"
    );
}

#[tokio::test]
async fn a_bad_annotation_is_reported_without_failing_the_invocation_or_the_other_apps() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert(app(
            "broken",
            "argocd",
            json!({"argocd-image-updater.argoproj.io/image-list": format!("app={SEED_IMAGE}"),
               "argocd-image-updater.argoproj.io/app.update-strategy": "fastest"}),
            json!({"repoURL": "r", "chart": "c", "helm": {}}),
            json!({"sourceType": "Helm", "summary": {"images": [format!("{SEED_IMAGE}:1")]}}),
        ))
        .unwrap();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    let broken = report.entries.iter().find(|e| e.name == "broken").unwrap();
    assert_eq!(broken.action, Action::Failed);
    assert!(!broken.retryable);
    assert!(
        broken.reason.contains("app.update-strategy"),
        "{}",
        broken.reason
    );
    assert_eq!(
        report
            .entries
            .iter()
            .find(|e| e.name == "aws-pipeline-test")
            .unwrap()
            .action,
        Action::Updated
    );
}

#[tokio::test]
async fn an_image_the_application_does_not_run_is_skipped_unless_forced() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .edit("argocd", "aws-pipeline-test", |a| {
            a["status"]["summary"]["images"] = json!([])
        })
        .unwrap();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    assert!(only(&report).reason.contains("force-update"));
    standins
        .kube
        .edit("argocd", "aws-pipeline-test", |a| {
            a["metadata"]["annotations"]["argocd-image-updater.argoproj.io/app.force-update"] =
                json!("true");
        })
        .unwrap();
    assert_eq!(
        only(&standins.report(&[], &event("push-date-tag.json")).await).action,
        Action::Updated
    );
}

#[tokio::test]
async fn a_pushed_index_is_rolled_out_only_if_it_offers_a_platform_the_annotation_allows() {
    let standins = Scenario::seeded().await;
    let index: Image = serde_json::from_value(json!({"repository": "barun-dev-ecr", "tag": "20250825-153012", "digest": D('3'),
        "pushedAt": "2025-08-25T06:30:14Z", "mediaType": "application/vnd.oci.image.index.v1+json", "platforms": ["linux/amd64"]})).unwrap();
    standins.aws.push(index);
    let allow = |platforms: &'static str| {
        standins
            .kube
            .edit("argocd", "aws-pipeline-test", move |a| {
                a["metadata"]["annotations"]["argocd-image-updater.argoproj.io/app.platforms"] =
                    json!(platforms);
            })
            .unwrap();
    };
    allow("linux/arm64");
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "offers none of the platform(s) linux/arm64 the platforms annotation allows (it has linux/amd64)",
    );
    assert_eq!(standins.kube_requests("PATCH"), 0);
    // Any one allowed platform is enough, as in Image Updater: Kubernetes picks per node.
    allow("linux/amd64,linux/arm64");
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "");
    assert_eq!(standins.kube_requests("PATCH"), 1);
}

/// The seed Application first in its namespace, then `others` tracking other images.
async fn seed_then_others(others: usize) -> Scenario {
    let standins = Scenario::seeded().await;
    for i in 0..others {
        standins
            .kube
            .insert(
                Application::tracking(&format!("zz-{i:03}"), "r.example.com/other", "1").build(),
            )
            .unwrap();
    }
    standins
}

#[tokio::test]
async fn an_application_found_on_an_early_page_is_written_while_later_pages_are_listed() {
    let standins = seed_then_others(9).await;
    let later_pages = Route::kube("GET", "/applications").with_query("continue=");
    standins.shared.inject(
        later_pages,
        10,
        FaultAction::Delay(Duration::from_millis(200)),
    );
    let report = standins
        .report(&[("LIST_PAGE_SIZE", "2")], &event("push-date-tag.json"))
        .await;
    assert_eq!(only(&report).action, Action::Updated);
    assert_eq!(report.stats.list_pages, 5);
    let log = standins.shared.requests();
    let patched = log
        .iter()
        .find(|r| r.method == "PATCH")
        .and_then(|r| r.arrived)
        .unwrap();
    let last_page = log
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/applications"))
        .filter_map(|r| r.arrived)
        .max()
        .unwrap();
    assert!(
        patched < last_page,
        "the seed Application (page 1) was written only after the last page was asked for"
    );
}

#[tokio::test]
async fn a_later_page_that_cannot_be_listed_fails_the_invocation_after_what_was_found_is_written() {
    let standins = seed_then_others(9).await;
    let later_pages = Route::kube("GET", "/applications").with_query("continue=");
    standins.shared.inject(
        later_pages,
        100,
        FaultAction::Status {
            code: 503,
            retry_after: None,
        },
    );
    let vars = [("LIST_PAGE_SIZE", "2")];
    let error = standins
        .handler(&vars)
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    let HandlerError::Targets { report, .. } = &error else {
        panic!("expected a retryable failure with the report, got {error:?}");
    };
    assert_eq!(error.error_type(), "Retryable.TargetsFailed", "{error}");
    let updated: Vec<_> = report
        .entries
        .iter()
        .filter(|e| e.action == Action::Updated)
        .collect();
    assert_eq!(updated.len(), 1, "{:#?}", report.entries);
    assert!(
        report
            .entries
            .iter()
            .any(|e| e.action == Action::Failed && e.retryable && e.reason.contains("cannot list")),
        "{:#?}",
        report.entries
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-153012"));
    // The retry AWS makes lists everything and finds the seed Application already there.
    standins.shared.clear_faults();
    let retried = standins.report(&vars, &event("push-date-tag.json")).await;
    assert_eq!(
        only(&retried).action,
        Action::Unchanged,
        "{:#?}",
        retried.entries
    );
}

#[tokio::test]
async fn a_retried_listing_sends_each_application_on_once() {
    let standins = seed_then_others(9).await;
    let second_page = Route::kube("GET", "/applications").with_query("continue=");
    standins.shared.inject(
        second_page,
        1,
        FaultAction::Status {
            code: 503,
            retry_after: None,
        },
    );
    let report = standins
        .report(&[("LIST_PAGE_SIZE", "2")], &event("push-date-tag.json"))
        .await;
    assert_eq!(
        only(&report).action,
        Action::Updated,
        "{:#?}",
        report.entries
    );
    assert_eq!(report.stats.applications_matched, 1);
    assert_eq!(standins.kube_requests("PATCH"), 1);
}

/// ECR's archive storage class: an archived image cannot be pulled until it is restored, so
/// a push of it is skipped naming the tag, and a sweep rolls out the newest pullable image.
#[tokio::test]
async fn an_archived_image_is_never_rolled_out() {
    let standins = Scenario::seeded().await;
    let pushed = event("push-date-tag.json");
    let digest = pushed["detail"]["image-digest"]
        .as_str()
        .unwrap()
        .to_string();
    standins.aws.archive("barun-dev-ecr", &digest);
    let report = standins.report(&[], &pushed).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "tag `20250825-153012` is in ECR's archive storage class",
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    // A newer pullable image beside it: the sweep takes that one, never the archived one.
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250826-080000",
        '5',
        "2025-08-26T08:00:00Z",
    ));
    standins.aws.archive("barun-dev-ecr", &D('5'));
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250825-170000",
        '4',
        "2025-08-25T17:00:00Z",
    ));
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    assert_eq!(
        only(&report).action,
        Action::Updated,
        "{}",
        only(&report).reason
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-170000"));
}
