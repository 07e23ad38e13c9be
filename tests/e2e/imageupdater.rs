//! End to end: Image Updater v1.x `ImageUpdater` objects configure Applications as Image
//! Updater would, side by side with annotations, against the stand-in serving the vendored
//! CRD with its status subresource.

use crate::common::{Scenario, event, expect_decision, for_app, seed_tag};
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::fixtures::{
    Application, PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_TAG, image_updater, seed_image_updater,
};
use argocd_ecr_updater_standins::{FaultAction, Route};
use serde_json::{Value, json};

async fn push(standins: &Scenario) -> Report {
    standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap()
}

/// The seed Application with every Image Updater annotation removed.
fn strip_annotations(standins: &Scenario) {
    standins.strip_image_updater_annotations("argocd", SEED_APP);
}

fn status(standins: &Scenario, name: &str) -> Value {
    standins.kube.image_updater("argocd", name).unwrap()["status"].clone()
}

#[tokio::test]
async fn the_seeds_push_decides_the_same_from_annotations_and_from_the_equivalent_object() {
    let by_annotations = Scenario::seeded().await;
    let expected = push(&by_annotations).await;

    let by_object = Scenario::seeded().await;
    strip_annotations(&by_object);
    by_object
        .kube
        .insert_image_updater(seed_image_updater())
        .unwrap();
    let got = push(&by_object).await;

    let (expected, got) = (&expected.entries[0], &got.entries[0]);
    assert_eq!(
        (got.action, &got.from, &got.to, &got.sources),
        (
            expected.action,
            &expected.from,
            &expected.to,
            &expected.sources
        )
    );
    assert_eq!(expected.configured_by.as_deref(), Some("annotations"));
    assert_eq!(
        got.configured_by.as_deref(),
        Some("ImageUpdater argocd/invitation, ref \"aws-pipeline-test\"")
    );
    assert_eq!(seed_tag(&by_object).as_deref(), Some(PUSHED_TAG));
}

#[tokio::test]
async fn the_v1_seed_folder_decides_like_the_annotated_seed() {
    let expected = push(&Scenario::seeded().await).await;
    let standins = Scenario::start(argocd_ecr_updater_standins::Options::default()).await;
    let folder =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standins/seed-imageupdater");
    argocd_ecr_updater_standins::seed::load_dir(&standins, &folder).unwrap();
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert!(
        app["metadata"]
            .get("annotations")
            .is_none_or(|a| a.as_object().is_none_or(|m| m.is_empty())),
        "the v1 seed has no annotations"
    );
    let got = push(&standins).await;
    let (expected, got) = (&expected.entries[0], &got.entries[0]);
    assert_eq!(
        (got.action, &got.from, &got.to),
        (expected.action, &expected.from, &expected.to)
    );
    assert!(
        got.configured_by
            .as_deref()
            .unwrap()
            .starts_with("ImageUpdater argocd/invitation")
    );
}

#[tokio::test]
async fn the_objects_status_shows_what_it_matched_and_what_moved() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert_image_updater(seed_image_updater())
        .unwrap();
    // As stored: the CRD's defaults filled in.
    let spec_before = standins.kube.image_updater("argocd", "invitation").unwrap()["spec"].clone();
    push(&standins).await;
    let status = status(&standins, "invitation");
    assert_eq!(status["applicationsMatched"], 1);
    assert_eq!(status["imagesManaged"], 1);
    assert_eq!(status["observedGeneration"], 1);
    assert!(status["lastCheckedAt"].is_string());
    assert_eq!(status["lastUpdatedAt"], status["lastCheckedAt"]);
    assert_eq!(status["recentUpdates"][0]["alias"], "app");
    assert_eq!(status["recentUpdates"][0]["image"], SEED_IMAGE);
    assert_eq!(status["recentUpdates"][0]["newVersion"], PUSHED_TAG);
    assert_eq!(status["recentUpdates"][0]["applicationsUpdated"], 1);
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["conditions"][0]["status"], "True");
    // Status writes never touch the spec, nor bump the generation.
    let stored = standins.kube.image_updater("argocd", "invitation").unwrap();
    assert_eq!(stored["spec"], spec_before);
    assert_eq!(stored["metadata"]["generation"], 1);
}

#[tokio::test]
async fn objects_are_listed_once_per_warm_container_and_revalidated_by_generation() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert_image_updater(seed_image_updater())
        .unwrap();
    let h = standins.handler(&[]);
    let first = h.handle(&event("push-date-tag.json"), None).await.unwrap();
    // Metadata list, full list, status write.
    assert_eq!(first.stats.image_updater_requests, 3);
    let again = h.handle(&event("push-date-tag.json"), None).await.unwrap();
    // Metadata list (unchanged generations), status write.
    assert_eq!(again.stats.image_updater_requests, 2);
    expect_decision(
        &again.entries[0],
        Action::Unchanged,
        "already the current tag",
    );
    // A spec change is seen on the next event.
    standins
        .kube
        .edit_image_updater("argocd", "invitation", |o| {
            o["spec"]["applicationRefs"][0]["images"][0]["commonUpdateSettings"]["allowTags"] =
                json!("regexp:^v");
        })
        .unwrap();
    let changed = h.handle(&event("push-date-tag.json"), None).await.unwrap();
    assert_eq!(changed.stats.image_updater_requests, 3);
    expect_decision(
        &changed.entries[0],
        Action::Skipped,
        "is not allowed by allow-tags",
    );
}

#[tokio::test]
async fn two_objects_matching_one_application_leave_it_alone_and_name_both() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert_image_updater(seed_image_updater())
        .unwrap();
    let mut other = seed_image_updater();
    other["metadata"]["name"] = json!("catch-all");
    other["spec"]["applicationRefs"][0]["namePattern"] = json!("aws-*");
    standins.kube.insert_image_updater(other).unwrap();
    let report = push(&standins).await;
    let entries = for_app(&report, SEED_APP);
    assert_eq!(entries.len(), 1);
    expect_decision(
        entries[0],
        Action::Skipped,
        "argocd/catch-all, argocd/invitation",
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
}

#[tokio::test]
async fn a_bad_value_fails_that_image_and_the_objects_ready_condition_says_why() {
    let standins = Scenario::seeded().await;
    strip_annotations(&standins);
    let mut broken = seed_image_updater();
    broken["spec"]["applicationRefs"][0]["images"][0]["commonUpdateSettings"]["allowTags"] =
        json!("regexp:(unclosed");
    standins.kube.insert_image_updater(broken).unwrap();
    let report = push(&standins).await;
    let entry = for_app(&report, SEED_APP)[0];
    expect_decision(
        entry,
        Action::Failed,
        "ImageUpdater argocd/invitation `spec.applicationRefs[0].images[0].commonUpdateSettings.allowTags`",
    );
    assert!(!entry.retryable);
    let status = status(&standins, "invitation");
    assert_eq!(status["conditions"][0]["status"], "False");
    assert!(
        status["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("does not compile"),
        "{status}"
    );
}

#[tokio::test]
async fn use_annotations_lets_an_object_select_applications_that_keep_their_annotations() {
    let standins = Scenario::seeded().await;
    standins
        .kube
        .insert_image_updater(image_updater(
            "legacy",
            json!([{"namePattern": "*", "useAnnotations": true}]),
        ))
        .unwrap();
    let report = push(&standins).await;
    let entry = for_app(&report, SEED_APP)[0];
    expect_decision(entry, Action::Updated, "ranks above");
    assert_eq!(
        entry.configured_by.as_deref(),
        Some("ImageUpdater argocd/legacy, ref \"*\" (useAnnotations)")
    );
}

#[tokio::test]
async fn label_selectors_choose_between_refs_of_one_object() {
    let standins = Scenario::seeded().await;
    strip_annotations(&standins);
    standins
        .kube
        .edit("argocd", SEED_APP, |a| {
            a["metadata"]["labels"] = json!({"tier": "frontend"})
        })
        .unwrap();
    let refs = json!([
        {"namePattern": "*", "labelSelectors": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}]},
         "images": [{"alias": "app", "imageName": SEED_IMAGE,
                     "commonUpdateSettings": {"updateStrategy": "newest-build"},
                     "manifestTargets": {"helm": {"name": "image.repository", "tag": "image.tag"}}}]},
        {"namePattern": SEED_APP,
         "images": [{"alias": "app", "imageName": SEED_IMAGE,
                     "commonUpdateSettings": {"updateStrategy": "newest-build", "allowTags": "regexp:^v"},
                     "manifestTargets": {"helm": {"name": "image.repository", "tag": "image.tag"}}}]}]);
    standins
        .kube
        .insert_image_updater(image_updater("tiers", refs))
        .unwrap();
    // The exact name outranks the label selector (1,000,000 against 10,100): its allowTags
    // refuses the push.
    let report = push(&standins).await;
    let entry = for_app(&report, SEED_APP)[0];
    expect_decision(entry, Action::Skipped, "is not allowed by allow-tags");
    assert!(
        entry
            .configured_by
            .as_deref()
            .unwrap()
            .contains("ref \"aws-pipeline-test\"")
    );
}

#[tokio::test]
async fn a_plugin_target_writes_the_plugins_environment_variables() {
    let standins = Scenario::seeded().await;
    let plugin_app = Application::tracking("cmp", SEED_IMAGE, SEED_TAG)
        .source(
            json!({"repoURL": "https://git.example.com/cmp.git", "path": "deploy",
                   "plugin": {"name": "envsubst", "env": [
                       {"name": "IMAGE", "value": SEED_IMAGE}, {"name": "TAG", "value": SEED_TAG},
                       {"name": "REPLICAS", "value": "2"}]}}),
            "Plugin",
        )
        .with(|a| {
            if let Some(map) = a["metadata"]["annotations"].as_object_mut() {
                map.clear();
            }
        })
        .build();
    standins.kube.insert(plugin_app).unwrap();
    standins
        .kube
        .insert_image_updater(image_updater(
            "cmp",
            json!([{"namePattern": "cmp", "images": [{"alias": "app", "imageName": SEED_IMAGE,
                "commonUpdateSettings": {"updateStrategy": "newest-build"},
                "manifestTargets": {"plugin": {"name": "IMAGE", "tag": "TAG"}}}]}]),
        ))
        .unwrap();
    let report = push(&standins).await;
    let entry = for_app(&report, "cmp")[0];
    expect_decision(entry, Action::Updated, "ranks above");
    assert_eq!(entry.sources, vec!["spec.source (plugin env)".to_string()]);
    assert_eq!(
        standins.kube.get("argocd", "cmp").unwrap()["spec"]["source"]["plugin"]["env"],
        json!([{"name": "IMAGE", "value": SEED_IMAGE}, {"name": "TAG", "value": PUSHED_TAG},
               {"name": "REPLICAS", "value": "2"}])
    );
}

#[tokio::test]
async fn without_the_crd_installed_annotations_work_and_cost_nothing_after_the_first_look() {
    let standins = Scenario::seeded().await;
    // A cluster without the CRD answers 404 for the resource.
    standins.shared.inject(
        Route::kube("GET", "imageupdaters"),
        1,
        FaultAction::Status {
            code: 404,
            retry_after: None,
        },
    );
    let h = standins.handler(&[]);
    let first = h.handle(&event("push-date-tag.json"), None).await.unwrap();
    assert_eq!(first.stats.image_updater_requests, 1);
    expect_decision(&first.entries[0], Action::Updated, "ranks above");
    let second = h.handle(&event("push-date-tag.json"), None).await.unwrap();
    assert_eq!(
        second.stats.image_updater_requests, 0,
        "the absence is remembered"
    );

    // Switched off, not even the first look happens.
    let off = standins.handler(&[("READ_IMAGEUPDATERS", "false")]);
    let report = off
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    assert_eq!(report.stats.image_updater_requests, 0);
}

/// The tag `web` runs after a sweep over 1.0.0, 2.0.0 and 1.9.0 (built last), configured by an object with
/// a spec-level `newest-build` and an image-level `commonUpdateSettings` that names no
/// strategy, served with `crd` (the vendored CRD when `None`).
async fn web_after_a_push_under(crd: Option<&str>) -> (Action, Option<String>) {
    let standins = Scenario::start(argocd_ecr_updater_standins::Options::default()).await;
    if let Some(crd) = crd {
        standins.kube.image_updaters.use_crd(crd).unwrap();
    }
    let repository = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web";
    for (tag, digest, pushed_at) in [
        ("1.0.0", '1', "2025-01-01T00:00:00Z"),
        ("2.0.0", '2', "2025-02-01T00:00:00Z"),
        ("1.9.0", '3', "2025-03-01T00:00:00Z"),
    ] {
        standins
            .aws
            .push(argocd_ecr_updater_standins::fixtures::image(
                "web", tag, digest, pushed_at,
            ));
    }
    let app = Application::tracking("web", repository, "1.0.0")
        .with(|a| {
            if let Some(map) = a["metadata"]["annotations"].as_object_mut() {
                map.clear();
            }
        })
        .build();
    standins.kube.insert(app).unwrap();
    let mut object = image_updater(
        "web",
        json!([{"namePattern": "web", "images": [{"alias": "app", "imageName": repository,
            "commonUpdateSettings": {"allowTags": "regexp:^[0-9]+[.][0-9]+[.][0-9]+$"},
            "manifestTargets": {"helm": {"name": "image.name", "tag": "image.tag"}}}]}]),
    );
    object["spec"]["commonUpdateSettings"] = json!({"updateStrategy": "newest-build"});
    standins.kube.insert_image_updater(object).unwrap();
    let sweep = argocd_ecr_updater_standins::fixtures::reconcile_event();
    let report = standins.report(&[], &sweep).await;
    let action = for_app(&report, "web")[0].action;
    (
        action,
        standins.kube.helm_parameter("argocd", "web", "image.tag"),
    )
}

#[tokio::test]
async fn image_updater_v1_3_0_crd_defaults_make_an_image_semver_over_the_specs_newest_build() {
    // The vendored CRD (Image Updater's main branch) has no defaults: the spec's newest-build
    // decides, and 1.9.0, the newest build, is taken.
    let (action, tag) = web_after_a_push_under(None).await;
    assert_eq!((action, tag.as_deref()), (Action::Updated, Some("1.9.0")));
    // v1.3.0's CRD fills `updateStrategy: semver` into the image's `commonUpdateSettings`
    // (docs/compatibility.md): the image's semver outranks the spec, and 2.0.0 is taken, as
    // Image Updater reading the same object decides.
    let v130 = argocd_ecr_updater_standins::imageupdaters::V1_3_0_CRD;
    let (action, tag) = web_after_a_push_under(Some(v130)).await;
    assert_eq!((action, tag.as_deref()), (Action::Updated, Some("2.0.0")));
}
