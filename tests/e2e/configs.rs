//! End to end against the stand-ins: the configurations real Image Updater users have, each
//! of which the function once got wrong (wrong image deployed, a wrong skip, a loop).

use crate::common::{Scenario, event, expect_decision, for_app, one};
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::kube_ca_data;
use argocd_ecr_updater_standins::fixtures::{
    Application, SEED_IMAGE, SEED_TAG, helm_source as helm, multi_arch_image as image,
    push_event as push, reconcile_event as reconcile,
};
use argocd_ecr_updater_standins::kube::PROXY_PREFIX;
use argocd_ecr_updater_standins::{FaultAction, Grant, Route, Service, image_updater_grants};
use serde_json::{Value, json};

/// An Application tracking the seed image with these Image Updater annotations and source.
fn app(name: &str, annotations: &[(&str, &str)], source: Value, running: &[&str]) -> Value {
    annotations
        .iter()
        .fold(
            Application::tracking(name, SEED_IMAGE, SEED_TAG),
            |a, (k, v)| a.annotate(k, v),
        )
        .source(source, "Helm")
        .running(running)
        .build()
}

/// Shaped like the seed: the image under `image.repository`, running the seed's tag.
fn seed_shaped(name: &str, annotations: &[(&str, &str)]) -> Value {
    let mut all = vec![("app.helm.image-name", "image.repository")];
    all.extend_from_slice(annotations);
    app(
        name,
        &all,
        helm(&[("image.repository", SEED_IMAGE), ("image.tag", SEED_TAG)]),
        &[&running_seed()],
    )
}

fn running_seed() -> String {
    format!("{SEED_IMAGE}:{SEED_TAG}")
}

fn params(standins: &Scenario, name: &str, source: &str) -> Value {
    let stored = standins.kube.get("argocd", name).unwrap();
    stored
        .pointer(&format!("/spec/{source}/helm/parameters"))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_multi_source_image_moves_only_where_a_source_names_it_and_never_down_per_source() {
    let standins = Scenario::seeded().await;
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250826-000000",
        '4',
        "2025-08-26T00:00:00Z",
        &[],
    ));
    let names = [("image.name", SEED_IMAGE)];
    let mut multi = app(
        "multi",
        &[("app.update-strategy", "newest-build")],
        Value::Null,
        &[&running_seed()],
    );
    let spec = multi["spec"].as_object_mut().unwrap();
    spec.remove("source");
    spec.insert(
        "sources".into(),
        json!([
            helm(&[names[0], ("image.tag", "20250825-120000")]),
            // A canary chart of the same image, already ahead of the push.
            helm(&[names[0], ("image.tag", "20250826-000000")]),
            // A third-party chart pinning its own image under the same parameter names.
            helm(&[
                ("image.name", "public.ecr.aws/bitnami/redis"),
                ("image.tag", "7.2.4")
            ]),
        ]),
    );
    multi["status"] =
        json!({"sourceTypes": ["Helm", "Helm", "Helm"], "summary": {"images": [running_seed()]}});
    standins.kube.insert(multi).unwrap();

    let report = standins.report(&[], &event("push-date-tag.json")).await;
    let entries = for_app(&report, "multi");
    assert_eq!(entries.len(), 2, "{entries:#?}");
    assert_eq!(entries[0].action, Action::Updated, "{}", entries[0].reason);
    assert_eq!(
        entries[0].sources,
        vec!["spec.sources[0] (helm)".to_string()]
    );
    assert_eq!(entries[1].action, Action::Skipped);
    assert!(
        entries[1].reason.contains("ranks below"),
        "{}",
        entries[1].reason
    );
    assert_eq!(
        params(&standins, "multi", "sources/0")[1]["value"],
        "20250825-153012"
    );
    assert_eq!(
        params(&standins, "multi", "sources/1")[1]["value"],
        "20250826-000000"
    );
    assert_eq!(
        params(&standins, "multi", "sources/2"),
        json!([{"name": "image.name", "value": "public.ecr.aws/bitnami/redis"}, {"name": "image.tag", "value": "7.2.4"}])
    );
}

#[tokio::test]
async fn ignore_tags_follow_go_filepath_match_and_a_malformed_pattern_names_itself() {
    let standins = Scenario::seeded().await;
    // In Go `!` is a literal inside a class, so `[!2]*` ignores tags starting with `!` or
    // `2`; the glob crate would read it as a negation and ignore nothing starting with 2.
    let cases = [("bang", "[!2]*"), ("caret", "[^2]*"), ("broken", "2025[0-")];
    for (name, pattern) in cases {
        standins
            .kube
            .insert(seed_shaped(
                name,
                &[
                    ("app.update-strategy", "latest"),
                    ("app.ignore-tags", pattern),
                ],
            ))
            .unwrap();
    }
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    assert_eq!(one(&report, "bang").action, Action::Skipped);
    assert!(one(&report, "bang").reason.contains("matches ignore-tags"));
    expect_decision(one(&report, "caret"), Action::Updated, "");
    let broken = one(&report, "broken");
    assert_eq!(broken.action, Action::Failed);
    assert!(!broken.retryable);
    assert!(broken.reason.contains("`2025[0-`"), "{}", broken.reason);
    assert!(
        broken.reason.contains("filepath.Match"),
        "{}",
        broken.reason
    );
}

#[tokio::test]
async fn a_kustomize_app_running_its_original_image_name_gets_its_first_update() {
    let standins = Scenario::seeded().await;
    let mut kust = app(
        "kust",
        &[
            ("app.update-strategy", "latest"),
            ("app.kustomize.image-name", "invitation"),
        ],
        json!({"repoURL": "https://git.example.com/k.git", "path": "overlays/prod"}),
        &["invitation:1.0"],
    );
    kust["status"]["sourceType"] = json!("Kustomize");
    standins.kube.insert(kust).unwrap();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(one(&report, "kust"), Action::Updated, "");
    assert_eq!(
        standins.kube.get("argocd", "kust").unwrap()["spec"]["source"]["kustomize"]["images"],
        json!([format!("invitation={SEED_IMAGE}:20250825-153012")])
    );
}

#[tokio::test]
async fn strategy_names_and_allow_tags_prefixes_are_read_case_insensitively() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert(seed_shaped(
            "cased",
            &[
                ("app.update-strategy", "Latest"),
                ("app.allow-tags", "Regexp:^[0-9]{8}-[0-9]{6}$"),
            ],
        ))
        .unwrap();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(one(&report, "cased"), Action::Updated, "");
}

#[tokio::test]
async fn every_duplicate_of_the_managed_helm_parameter_is_rewritten() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert(app(
            "dup",
            &[("app.update-strategy", "latest")],
            helm(&[
                ("image.name", SEED_IMAGE),
                ("image.tag", "20250825-120000"),
                ("image.tag", "20250825-120000"),
            ]),
            &[&running_seed()],
        ))
        .unwrap();
    standins.report(&[], &event("push-date-tag.json")).await;
    let stored = params(&standins, "dup", "source");
    assert_eq!(stored[1]["value"], "20250825-153012");
    assert_eq!(stored[2]["value"], "20250825-153012");
}

#[tokio::test]
async fn a_running_tag_deleted_from_ecr_is_never_replaced_by_an_older_image() {
    let standins = Scenario::seeded().await;
    // The lifecycle policy expired the running tag; only an older and the pushed one remain.
    standins.aws.remove("barun-dev-ecr", "20250825-120000");
    standins.aws.remove("barun-dev-ecr", "20250825-153012");
    standins.aws.remove("barun-dev-ecr", "latest");
    let late = push("barun-dev-ecr", "20250824-093000", "2025-08-24T00:30:05Z");

    // Nothing says when the running tag was pushed: keep it and say why.
    let report = standins.report(&[], &late).await;
    let entry = one(&report, "aws-pipeline-test");
    assert_eq!(entry.action, Action::Skipped);
    assert!(
        entry.reason.contains("no longer in ECR"),
        "{}",
        entry.reason
    );
    let report = standins.report(&[], &reconcile()).await;
    assert_eq!(one(&report, "aws-pipeline-test").action, Action::Skipped);
    assert!(
        one(&report, "aws-pipeline-test")
            .reason
            .contains("no longer in ECR")
    );

    // Argo CD's sync history says it ran from 2025-08-25: the 08-24 image is older.
    standins.kube.edit("argocd", "aws-pipeline-test", |a| {
        a["status"]["history"] = json!([{"id": 1, "revision": "abc", "deployedAt": "2025-08-25T03:05:00Z",
            "source": {"repoURL": "https://github.com/barun/invitation.git", "path": "argocd",
                       "helm": {"parameters": [{"name": "image.repository", "value": SEED_IMAGE}, {"name": "image.tag", "value": "20250825-120000"}]}}}]);
    }).unwrap();
    for event in [&late, &reconcile()] {
        let report = standins.report(&[], event).await;
        let entry = one(&report, "aws-pipeline-test");
        assert_eq!(entry.action, Action::Skipped, "{}", entry.reason);
        assert!(
            entry.reason.contains("ranks below") || entry.reason.contains("pushed before"),
            "{}",
            entry.reason
        );
    }
    assert_eq!(standins.kube_requests("PATCH"), 0);

    // A genuinely newer push still moves it.
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250826-000000",
        '4',
        "2025-08-26T00:00:00Z",
        &[],
    ));
    let report = standins
        .report(
            &[],
            &push("barun-dev-ecr", "20250826-000000", "2025-08-26T00:00:00Z"),
        )
        .await;
    assert_eq!(one(&report, "aws-pipeline-test").action, Action::Updated);
}

#[tokio::test]
async fn reconcile_skips_a_better_tag_lacking_a_platform_and_takes_the_best_that_has_it() {
    let standins = Scenario::seeded().await;
    standins.aws.push(image(
        "web",
        "1.0.0",
        'a',
        "2025-08-01T00:00:00Z",
        &["linux/amd64", "linux/arm64"],
    ));
    standins.aws.push(image(
        "web",
        "1.1.0",
        'b',
        "2025-08-02T00:00:00Z",
        &["linux/amd64", "linux/arm64"],
    ));
    standins.aws.push(image(
        "web",
        "1.2.0",
        'c',
        "2025-08-03T00:00:00Z",
        &["linux/amd64"],
    ));
    let web = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web";
    standins
        .kube
        .insert(app(
            "web",
            &[
                ("image-list", &format!("app={web}")),
                ("app.update-strategy", "newest-build"),
                ("app.platforms", "linux/arm64"),
            ],
            helm(&[("image.name", web), ("image.tag", "1.0.0")]),
            &[&format!("{web}:1.0.0")],
        ))
        .unwrap();
    let report = standins.report(&[], &reconcile()).await;
    let entry = one(&report, "web");
    assert_eq!(entry.action, Action::Updated, "{}", entry.reason);
    assert_eq!(entry.to.as_deref(), Some("1.1.0"));
    // One BatchGetImage for both candidates, in rank order.
    let batches: Vec<_> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::Ecr && r.operation == "BatchGetImage")
        .collect();
    assert_eq!(batches.len(), 1);
    let asked: Value = serde_json::from_str(&batches[0].body).unwrap();
    assert_eq!(asked["imageIds"][0]["imageTag"], "1.2.0");
    assert_eq!(asked["imageIds"][1]["imageTag"], "1.1.0");
}

#[tokio::test]
async fn creating_a_missing_helm_block_loses_nothing_someone_created_meanwhile() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert(app(
            "bare",
            &[
                ("app.force-update", "true"),
                ("app.update-strategy", "latest"),
            ],
            json!({"repoURL": "https://git.example.com/web.git", "chart": "web"}),
            &[],
        ))
        .unwrap();
    standins.kube.race_next_patch("argocd", "bare", |a| {
        a["spec"]["source"]["helm"] = json!({"parameters": [{"name": "replicas", "value": "3"}]});
    });
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(one(&report, "bare"), Action::Updated, "");
    assert_eq!(report.stats.conflicts, 1);
    assert_eq!(
        params(&standins, "bare", "source"),
        json!([{"name": "replicas", "value": "3"},
               {"name": "image.name", "value": SEED_IMAGE, "forceString": true},
               {"name": "image.tag", "value": "20250825-153012", "forceString": true}])
    );
}

#[tokio::test]
async fn a_schema_refusal_is_a_permanent_failure_of_that_application_not_a_retry_loop() {
    let standins = Scenario::seeded().await;
    // The stored object already violates the CRD (written before a stricter CRD version):
    // every write to it is refused with field causes.
    standins
        .kube
        .edit("argocd", "aws-pipeline-test", |a| {
            a["spec"]["syncPolicy"]["automated"]["prune"] = json!("yes");
        })
        .unwrap();
    let report = standins
        .report(&[("CONFLICT_RETRIES", "5")], &event("push-date-tag.json"))
        .await;
    let entry = one(&report, "aws-pipeline-test");
    assert_eq!(entry.action, Action::Failed);
    assert!(!entry.retryable);
    assert!(entry.reason.contains("is invalid"), "{}", entry.reason);
    assert_eq!(standins.kube_requests("PATCH"), 1);
}

#[tokio::test]
async fn the_same_patch_refused_twice_on_a_fresh_read_stops_despite_the_audit_timestamp() {
    let standins = Scenario::seeded().await;
    // A bare 422 (what a failed `test` looks like) that is not a race: nothing changed.
    standins.shared.inject(
        Route::kube("PATCH", "aws-pipeline-test"),
        100,
        FaultAction::Status {
            code: 422,
            retry_after: None,
        },
    );
    let report = standins
        .report(&[("CONFLICT_RETRIES", "5")], &event("push-date-tag.json"))
        .await;
    let entry = one(&report, "aws-pipeline-test");
    assert_eq!(entry.action, Action::Failed);
    assert!(!entry.retryable);
    assert!(
        entry.reason.contains("refused the same patch twice"),
        "{}",
        entry.reason
    );
    assert_eq!(standins.kube_requests("PATCH"), 2);
}

#[tokio::test]
async fn a_namespace_that_cannot_be_listed_does_not_stop_the_others() {
    // team-b: its ImageUpdater objects may be read, its Applications not; team-c: nothing.
    let grants = [
        vec![Grant::new(&["get", "list", "patch"], "argocd")],
        image_updater_grants("argocd"),
        image_updater_grants("team-b"),
    ]
    .concat();
    let standins = Scenario::seeded_with_grants(grants).await;
    let error = standins
        .outcome(
            &[("ARGOCD_NAMESPACES", "team-c,team-b,argocd")],
            &event("push-date-tag.json"),
        )
        .await
        .unwrap_err();
    assert_eq!(error.error_type(), "Retryable.TargetsFailed");
    let HandlerError::Targets { report, summary } = error else {
        unreachable!()
    };
    expect_decision(one(&report, "aws-pipeline-test"), Action::Updated, "");
    let unlisted = |namespace: &str| {
        report
            .entries
            .iter()
            .find(|e| e.namespace == namespace)
            .unwrap()
    };
    for (namespace, part) in [
        (
            "team-b",
            "may not list applications in namespace \"team-b\"",
        ),
        (
            "team-c",
            "may not list imageupdaters in namespace \"team-c\"",
        ),
        ("team-c", "READ_IMAGEUPDATERS=false"),
    ] {
        expect_decision(unlisted(namespace), Action::Failed, part);
        assert!(unlisted(namespace).retryable);
        assert!(summary.contains(namespace), "{summary}");
    }
    assert_eq!(standins.kube_requests("PATCH"), 1);

    // With `*`, a denial names the cluster scope and the manifest that grants it.
    let error = standins
        .handler(&[("ARGOCD_NAMESPACES", "*")])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("at the cluster scope"), "{message}");
    assert!(message.contains("rbac-all-namespaces.yaml"), "{message}");
}

fn owned_app(name: &str) -> Value {
    let mut owned = app(
        name,
        &[("app.update-strategy", "latest")],
        helm(&[("image.name", SEED_IMAGE), ("image.tag", "20250825-120000")]),
        &[&running_seed()],
    );
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": "fleet", "uid": "u1"}]);
    owned
}

#[tokio::test]
async fn an_applicationset_app_is_patched_when_the_set_ignores_the_managed_parameters() {
    let standins = Scenario::seeded().await;
    standins.kube.insert(owned_app("covered")).unwrap();
    standins.kube.insert(owned_app("other")).unwrap();
    standins
        .kube
        .insert_application_set(
            json!({"metadata": {"name": "fleet", "namespace": "argocd"}, "spec": {
        "template": {}, "ignoreApplicationDifferences": [
            {"name": "covered", "jqPathExpressions": [".spec.source.helm.parameters"]}]}}),
        )
        .unwrap();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(one(&report, "covered"), Action::Updated, "");
    assert_eq!(
        params(&standins, "covered", "source")[1]["value"],
        "20250825-153012"
    );
    let other = one(&report, "other");
    assert_eq!(other.action, Action::Skipped);
    assert!(
        other
            .reason
            .contains("jsonPointers: [/spec/source/helm/parameters]"),
        "{}",
        other.reason
    );
    assert_eq!(
        params(&standins, "other", "source")[1]["value"],
        "20250825-120000"
    );
}

#[tokio::test]
async fn an_applicationset_that_may_not_be_read_fails_retryably_with_the_rbac_fix() {
    let standins = Scenario::seeded_with_grants(
        [
            vec![Grant::new(&["get", "list", "patch"], "argocd")],
            image_updater_grants("argocd"),
        ]
        .concat(),
    )
    .await;
    standins.kube.insert(owned_app("owned")).unwrap();
    let error = standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    let HandlerError::Targets { report, .. } = error else {
        unreachable!()
    };
    let entry = one(&report, "owned");
    assert_eq!(entry.action, Action::Failed);
    assert!(entry.retryable);
    assert!(
        entry.reason.contains("may not get applicationsets"),
        "{}",
        entry.reason
    );
    assert!(
        entry.reason.contains("deploy/rbac.yaml"),
        "{}",
        entry.reason
    );
}

#[tokio::test]
async fn an_endpoint_behind_a_path_prefix_keeps_the_prefix_on_every_request() {
    let standins = Scenario::seeded().await;
    let endpoint = format!("{}{PROXY_PREFIX}", standins.kube_endpoint());
    let ca = kube_ca_data(&standins.ca_pem);
    let report = standins
        .report(
            &[("KUBE_API_ENDPOINT", &endpoint), ("KUBE_CA_DATA", &ca)],
            &event("push-date-tag.json"),
        )
        .await;
    assert_eq!(one(&report, "aws-pipeline-test").action, Action::Updated);
    let paths: Vec<String> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::Kube)
        .map(|r| r.path)
        .collect();
    assert!(!paths.is_empty());
    assert!(
        paths.iter().all(|p| p.starts_with(PROXY_PREFIX)),
        "{paths:?}"
    );
}

#[tokio::test]
async fn a_pushed_tag_ecr_does_not_know_is_skipped_with_that_reason() {
    let standins = Scenario::seeded().await;
    let report = standins
        .report(
            &[],
            &push("barun-dev-ecr", "20250830-000000", "2025-08-30T00:00:00Z"),
        )
        .await;
    let entry = one(&report, "aws-pipeline-test");
    assert_eq!(entry.action, Action::Skipped);
    assert!(
        entry
            .reason
            .contains("ECR does not list tag `20250830-000000`"),
        "{}",
        entry.reason
    );
}

#[tokio::test]
async fn the_functions_own_writes_never_make_the_api_server_prune_a_field() {
    let standins = Scenario::seeded().await;
    standins.report(&[], &event("push-date-tag.json")).await;
    assert_eq!(standins.kube_requests("PATCH"), 1);
    assert_eq!(standins.kube.warnings(), Vec::<String>::new());
}
