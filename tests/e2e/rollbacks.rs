//! Manual rollbacks end to end, on the Argo CD controller stand-in moving through time: the
//! real handler writes, Argo CD deploys, a person takes the image back (the spec edited with
//! `kubectl edit`, or `argocd app rollback`), Argo CD deploys that, and later pushes and
//! sweeps respect it: across writes of another image, after the history has rotated our
//! deploy out, and with the function starting syncs itself. The Application's owner putting
//! its manifest back is told apart by its field manager and is not respected as a rollback.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Scenario, event, expect_decision, only, seed_tag};
use argocd_ecr_updater::appconfig::annotations::ROLLBACKS_ANNOTATION;
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::argocd::{Controller, Script, Timeline, normalised, stamp};
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG, image, push_event};
use serde_json::{Value, json};

const WORKER: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/worker";

/// The seed on a test clock, the controller stand-in running a typical Healthy script, and
/// the Application's history holding the seed's own deploy (id 0) an hour ago.
async fn deployed_seed() -> Scenario {
    let clock = Arc::new(SimClock::scripted());
    let standins = Scenario::seeded().await.on_clock(clock.clone());
    let an_hour_ago = stamp(clock.now() - time::Duration::hours(1));
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["history"] = json!([{"id": 0, "revision": "main",
                "source": normalised(app["spec"]["source"].clone()),
                "deployStartedAt": an_hour_ago, "deployedAt": an_hour_ago,
                "initiatedBy": {"automated": true}}]);
        })
        .unwrap();
    standins.kube.run_controller(Controller::timed(
        Script::Healthy,
        Timeline::typical(),
        clock,
    ));
    standins
}

/// Lets `seconds` pass on the test's clock: the controller takes every step due in them.
fn pass(standins: &Scenario, seconds: u64) {
    let until = standins.test_clock().now() + Duration::from_secs(seconds);
    standins.kube.step_to(until);
}

/// The seed's push, written and deployed.
async fn pushed_and_deployed(standins: &Scenario) {
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    pass(standins, 40);
    assert_eq!(running(standins), [image_at(PUSHED_TAG)]);
}

fn image_at(tag: &str) -> String {
    format!(
        "{}:{tag}",
        argocd_ecr_updater_standins::fixtures::SEED_IMAGE
    )
}

/// The images the Application's Pods run, as Argo CD last saw them.
fn running(standins: &Scenario) -> Vec<String> {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["status"]["summary"]["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect()
}

/// `image.tag` set to `tag` by field manager `manager`.
fn set_tag(standins: &Scenario, manager: &str, tag: &str) {
    standins
        .kube
        .edit_as(manager, "argocd", SEED_APP, |app| {
            for parameter in app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
            {
                if parameter["name"] == "image.tag" {
                    parameter["value"] = json!(tag);
                }
            }
        })
        .unwrap();
}

/// A new image of the seed's repository (digest of `digest`, none the seed has: ECR keeps a
/// push time per image), tagged `tag`, pushed at `at`.
async fn push_at(standins: &Scenario, tag: &str, digest: char, at: &str) -> Report {
    standins.aws.push(image("barun-dev-ecr", tag, digest, at));
    standins
        .report(&[], &push_event("barun-dev-ecr", tag, at))
        .await
}

/// A tag pushed now, by the test's clock: after anything deployed so far.
async fn push_now(standins: &Scenario, tag: &str) -> Report {
    let now = stamp(standins.test_clock().now());
    push_at(standins, tag, 'f', &now).await
}

fn remembered(standins: &Scenario) -> Value {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"][ROLLBACKS_ANNOTATION]
        .as_str()
        .map(|text| serde_json::from_str(text).unwrap())
        .unwrap_or(Value::Null)
}

/// A person edits the tag back (`kubectl edit`); Argo CD deploys it; pushes and sweeps of
/// images pushed before that respect it, the Application remembers it, and the fix pushed
/// after it rolls out. An owner putting its manifest back (`argocd-controller` applying the
/// parent's copy) is no one's decision against the image: the sweep writes again, and says
/// the owner will revert it.
#[tokio::test]
async fn a_persons_edit_back_is_respected_and_an_owners_reapply_is_not() {
    for (manager, respected) in [("kubectl-edit", true), ("argocd-controller", false)] {
        let standins = deployed_seed().await;
        pushed_and_deployed(&standins).await;
        set_tag(&standins, manager, SEED_TAG);
        pass(&standins, 40);
        assert_eq!(running(&standins), [image_at(SEED_TAG)], "{manager}");
        let report = standins
            .report(&[], &event("scheduled-reconcile.json"))
            .await;
        if respected {
            expect_decision(
                only(&report),
                Action::Skipped,
                &format!("respecting a manual rollback from `{PUSHED_TAG}` to `{SEED_TAG}`"),
            );
            expect_decision(only(&report), Action::Skipped, "(kubectl-edit)");
            assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
            let memory = remembered(&standins);
            let image = argocd_ecr_updater_standins::fixtures::SEED_IMAGE;
            assert_eq!(memory[image]["to"], SEED_TAG, "{memory}");
            assert_eq!(memory[image]["written"], PUSHED_TAG);
            // The fix, pushed after the rollback was deployed, rolls out.
            let report = push_now(&standins, "20991231-000001").await;
            expect_decision(only(&report), Action::Updated, "ranks above");
        } else {
            expect_decision(only(&report), Action::Updated, "the best allowed tag");
            expect_decision(
                only(&report),
                Action::Updated,
                "by `argocd-controller`, the Application's owner re-applying its manifest",
            );
            assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));
            assert_eq!(remembered(&standins), Value::Null, "nothing to remember");
        }
    }
}

/// A rollback outlives our write of another image and the history's rotation: the person
/// edits the tag back, a push of the Application's other image is written before Argo CD has
/// deployed the rollback (the audit record's main entry is now that image's), Argo CD deploys
/// both, and then so many syncs that neither our deploy nor the rollback's is in the history
/// any more (`revisionHistoryLimit: 3`). A late delivery of the rolled-back image's push is
/// still respected.
#[tokio::test]
async fn a_rollback_outlives_another_images_write_and_the_history_rotating() {
    let standins = deployed_seed().await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[
            (
                "image-list",
                &format!(
                    "app={},worker={WORKER}",
                    argocd_ecr_updater_standins::fixtures::SEED_IMAGE
                ),
            ),
            ("worker.update-strategy", "latest"),
            ("worker.allow-tags", "regexp:^v[0-9]+$"),
            ("worker.helm.image-name", "worker.image.repository"),
            ("worker.helm.image-tag", "worker.image.tag"),
        ],
    );
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["spec"]["revisionHistoryLimit"] = json!(3);
            app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
                .extend([
                    json!({"name": "worker.image.repository", "value": WORKER}),
                    json!({"name": "worker.image.tag", "value": "v1"}),
                ]);
        })
        .unwrap();
    standins
        .aws
        .push(image("worker", "v1", 'a', "2025-08-20T00:00:00Z"));
    pushed_and_deployed_any(&standins).await;
    set_tag(&standins, "kubectl-edit", SEED_TAG);
    // The worker's push, written before Argo CD has compared the edit.
    let now = stamp(standins.test_clock().now());
    standins.aws.push(image("worker", "v2", 'b', &now));
    let report = standins
        .report(&[], &push_event("worker", "v2", &now))
        .await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    pass(&standins, 60);
    assert!(running(&standins).contains(&image_at(SEED_TAG)));
    let respected = format!("respecting a manual rollback from `{PUSHED_TAG}` to `{SEED_TAG}`");
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    let app_entry = report
        .entries
        .iter()
        .find(|e| e.alias.as_deref() == Some("app"))
        .unwrap();
    expect_decision(app_entry, Action::Skipped, &respected);
    // Three syncs of other changes: the history holds none of the rollback's evidence.
    for replicas in ["2", "3", "4"] {
        standins
            .kube
            .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
                app["spec"]["source"]["helm"]["parameters"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "replicaCount", "value": replicas}));
            })
            .unwrap();
        pass(&standins, 40);
    }
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let history = app["status"]["history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    let pushed_deploy = history.iter().any(|h| {
        h["source"]["helm"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["value"] == PUSHED_TAG)
    });
    assert!(!pushed_deploy, "our deploy rotated out: {history:#?}");
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Skipped, &respected);
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
}

/// [`pushed_and_deployed`] for an Application with several images: the seed image's entry.
async fn pushed_and_deployed_any(standins: &Scenario) {
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    let entry = report
        .entries
        .iter()
        .find(|e| e.alias.as_deref() == Some("app"))
        .unwrap();
    expect_decision(entry, Action::Updated, "ranks above");
    pass(standins, 40);
}

/// `argocd app rollback` leaves the spec asking for our write and syncs an older history
/// entry: recognised from the history (a person's sync of something else after ours), even
/// with the function starting syncs itself (`argocd-ecr-updater.io/sync`): a late push of an
/// image pushed before the rollback is neither written nor synced; the fix pushed after it is.
#[tokio::test]
async fn argocd_app_rollback_is_recognised_and_a_late_push_is_neither_written_nor_synced() {
    let standins = deployed_seed().await;
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["spec"]["syncPolicy"]
                .as_object_mut()
                .unwrap()
                .remove("automated");
        })
        .unwrap();
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/sync", "true")],
    );
    pushed_and_deployed(&standins).await;
    let syncs = standins.kube.syncs("argocd", SEED_APP);
    standins
        .kube
        .rollback("argocd", SEED_APP, 0, "admin")
        .unwrap();
    pass(&standins, 40);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(running(&standins), [image_at(SEED_TAG)]);
    assert_eq!(
        seed_tag(&standins).as_deref(),
        Some(PUSHED_TAG),
        "spec untouched"
    );
    assert_eq!(app["status"]["sync"]["status"], "OutOfSync");
    let late = push_at(&standins, "20250825-160000", 'e', "2025-08-25T16:00:00Z").await;
    expect_decision(
        only(&late),
        Action::Skipped,
        &format!("respecting a manual rollback from `{PUSHED_TAG}` to `{SEED_TAG}`, deployed"),
    );
    expect_decision(
        only(&late),
        Action::Skipped,
        "(argocd app rollback by admin)",
    );
    pass(&standins, 40);
    assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));
    assert_eq!(
        standins.kube.syncs("argocd", SEED_APP),
        syncs + 1,
        "no sync but the rollback"
    );
    assert_eq!(running(&standins), [image_at(SEED_TAG)]);
    let memory = remembered(&standins);
    let image = argocd_ecr_updater_standins::fixtures::SEED_IMAGE;
    assert_eq!(memory[image]["operation"], true, "{memory}");
    // The fix after the rollback is written and synced.
    let fix = push_now(&standins, "20991231-000001").await;
    expect_decision(only(&fix), Action::Updated, "sync started");
    pass(&standins, 40);
    assert_eq!(running(&standins), [image_at("20991231-000001")]);
}
