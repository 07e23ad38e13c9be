//! Followed writes on every shape of Application and delivery: the real handler against the
//! moving Argo CD controller stand-in and the AWS stand-ins, on the test clock (Kustomize
//! and multi-source take-backs and confirmations, unrelated edits, a person setting our own
//! value, a failed send after a claimed check, hops delivered twice at once or from before
//! hops were numbered, one image written, another, then the first again).

use crate::common::{Scenario, event, expect_decision, only};
use crate::moving::{
    WORKER, annotate, checks, deliver, deliver_body, entry, follow_every_chain, follow_to_the_end,
    image_at, pass, push_now, seeded, set_param, with_worker,
};
use argocd_ecr_updater::report::{Action, RolloutReport};
use argocd_ecr_updater_standins::argocd::Script;
use argocd_ecr_updater_standins::aws::QueueMessage;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG, image};
use argocd_ecr_updater_standins::{FaultAction, Route, Service};
use serde_json::{Value, json};

const NEWER: &str = "20991231-000000";

/// The seed as a Kustomize Application: the image in `kustomize.images`.
fn kustomized(app: &mut Value) {
    let p = argocd_ecr_updater::appconfig::annotations::PREFIX;
    let annotations = app["metadata"]["annotations"].as_object_mut().unwrap();
    annotations.remove(&format!("{p}app.helm.image-name"));
    annotations.remove(&format!("{p}app.helm.image-tag"));
    let source = app["spec"]["source"].as_object_mut().unwrap();
    source.remove("helm");
    source.insert("kustomize".into(), json!({"images": [image_at(SEED_TAG)]}));
    app["status"]["sourceType"] = json!("Kustomize");
}

/// The seed as a multi-source Application: a values `ref` source, then the chart.
fn multi_source(app: &mut Value) {
    let spec = app["spec"].as_object_mut().unwrap();
    let chart = spec.remove("source").unwrap();
    spec.insert(
        "sources".into(),
        json!([{"repoURL": "https://github.com/barun/values.git", "targetRevision": "main", "ref": "values"}, chart]),
    );
    let status = app["status"].as_object_mut().unwrap();
    status.remove("sourceType");
    status.insert("sourceTypes".into(), json!(["Directory", "Helm"]));
}

fn edit_kustomize_back(standins: &Scenario) {
    standins
        .kube
        .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
            app["spec"]["source"]["kustomize"]["images"] = json!([image_at(SEED_TAG)]);
        })
        .unwrap();
}

fn edit_multi_back(standins: &Scenario) {
    standins
        .kube
        .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
            for parameter in app["spec"]["sources"][1]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
            {
                if parameter["name"] == "image.tag" {
                    parameter["value"] = json!(SEED_TAG);
                }
            }
        })
        .unwrap();
}

fn hop_of(message: &QueueMessage) -> Value {
    serde_json::from_str::<Value>(&message.body).unwrap()["soak"].clone()
}

/// Two deliveries of one soak hop AT THE SAME TIME (SQS at-least-once, two concurrent Lambda
/// invocations): the guarded claim on the soak-chains annotation lets exactly one send hop 2.
#[tokio::test]
async fn one_hop_delivered_twice_at_once_sends_one_next_hop() {
    let (standins, queue) = seeded(
        |app| annotate(app, "argocd-ecr-updater.io/min-age", "168h"),
        &[Script::Healthy],
    )
    .await;
    let report = push_now(&standins, "barun-dev-ecr", NEWER, '6').await;
    expect_decision(only(&report), Action::Skipped, "re-decided in 900 s");
    let hops = standins.aws.queue(&queue);
    assert_eq!(hops.len(), 1);
    let (a, b) =
        futures_util::future::join(deliver(&standins, &hops[0]), deliver(&standins, &hops[0]))
            .await;
    let after = standins.aws.queue(&queue);
    assert_eq!(
        after.len(),
        2,
        "two concurrent deliveries of hop 1 sent {} next hops: {} / {}",
        after.len() - 1,
        only(&a).reason,
        only(&b).reason
    );
    assert_eq!(hop_of(&after[1])["hop"], json!(2));
}

/// A hop sent before hops were numbered (no `"hop"` in `soak`) with no chain remembered (the
/// function was upgraded mid-soak) continues its chain: it sends hop 1; delivered again, it
/// sends nothing more.
#[tokio::test]
async fn an_unnumbered_hop_from_before_the_upgrade_continues_its_chain_once() {
    let (standins, queue) = seeded(
        |app| annotate(app, "argocd-ecr-updater.io/min-age", "168h"),
        &[Script::Healthy],
    )
    .await;
    push_now(&standins, "barun-dev-ecr", NEWER, '6').await;
    let sent = standins.aws.queue(&queue);
    let mut old: Value = serde_json::from_str(&sent[0].body).unwrap();
    old["soak"].as_object_mut().unwrap().remove("hop");
    // The chain as the old code left it: not remembered.
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove("argocd-ecr-updater.io/soak-chains");
        })
        .unwrap();
    let report = deliver_body(&standins, "old-hop", &old.to_string()).await;
    expect_decision(only(&report), Action::Skipped, "re-decided in 900 s");
    let now = standins.aws.queue(&queue);
    assert_eq!(now.len(), 2, "{}", only(&report).reason);
    assert_eq!(hop_of(&now[1])["hop"], json!(1));
    let again = deliver_body(&standins, "old-hop", &old.to_string()).await;
    expect_decision(only(&again), Action::Skipped, "no follow-up sent");
    assert_eq!(standins.aws.queue(&queue).len(), 2);
}

/// A Kustomize Application: a person sets `kustomize.images` back while our write is
/// followed. The write was taken back (the record's place is the Kustomize entry), not
/// failed or timed out.
#[tokio::test]
async fn kustomize_edit_back_while_followed_is_taken_back() {
    let (standins, queue) = seeded(
        |app| {
            kustomized(app);
            annotate(app, "argocd-ecr-updater.io/confirm-timeout", "2m");
        },
        &[Script::Healthy],
    )
    .await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    pass(&standins, 3);
    edit_kustomize_back(&standins);
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "taken-back", "{states:?}: {reason}");
    assert!(reason.contains("kubectl-edit"), "{reason}");
}

/// A Kustomize Application's plain sync is confirmed.
#[tokio::test]
async fn kustomize_plain_sync_is_confirmed() {
    let (standins, queue) = seeded(kustomized, &[Script::Healthy]).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "confirmed", "{states:?}: {reason}");
}

/// A multi-source Application (a values `ref` source, then the chart): a person edits the
/// chart's tag back while followed: taken back, by kubectl-edit.
#[tokio::test]
async fn multi_source_edit_back_while_followed_is_taken_back() {
    let (standins, queue) = seeded(
        |app| {
            multi_source(app);
            annotate(app, "argocd-ecr-updater.io/confirm-timeout", "2m");
        },
        &[Script::Healthy],
    )
    .await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    pass(&standins, 3);
    edit_multi_back(&standins);
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "taken-back", "{states:?}: {reason}");
    assert!(reason.contains("kubectl-edit"), "{reason}");
}

/// A multi-source Application's plain sync is confirmed.
#[tokio::test]
async fn multi_source_plain_sync_is_confirmed() {
    let (standins, queue) = seeded(multi_source, &[Script::Healthy]).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "confirmed", "{states:?}: {reason}");
}

/// The sweep queue's SendMessage fails right after a pending check claimed the next check
/// number: the claim is given back, so the same check delivered again sends the next check
/// (it is `pending`, not `duplicate`), and the rollout is still followed to its end.
#[tokio::test]
async fn a_check_whose_next_send_failed_sends_it_when_delivered_again() {
    let (standins, queue) = seeded(|_| {}, &[Script::StuckProgressing]).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    let first = checks(&standins, &queue).remove(0);
    pass(&standins, 15);
    let sqs_send = Route {
        service: Some(Service::Sqs),
        operation: Some("SendMessage".into()),
        ..Route::default()
    };
    standins.shared.inject(
        sqs_send,
        20,
        FaultAction::AwsError {
            code: 400,
            kind: "InvalidParameterValue",
        },
    );
    let failed = deliver(&standins, &first).await;
    standins.shared.clear_faults();
    assert!(
        failed.rollouts.iter().all(|r| r.state != "pending"),
        "a pending check reported though its next check was not sent: {:#?}",
        failed.rollouts
    );
    assert_eq!(
        checks(&standins, &queue).len(),
        1,
        "nothing sent while SQS failed"
    );
    let again = deliver(&standins, &first).await;
    assert_eq!(
        again.rollouts.first().map(|r| r.state.as_str()),
        Some("pending"),
        "the redelivered check did not send the next one: {:#?}",
        again.rollouts
    );
    assert_eq!(checks(&standins, &queue).len(), 2);
}

/// A person edits an unrelated Helm parameter (`replicaCount`) after our write, while it is
/// followed: the spec still asks for our tag, Argo CD syncs both; the rollout is confirmed
/// (not taken back), and a later push is written (not held as a person's rollback).
#[tokio::test]
async fn an_unrelated_parameter_edit_after_the_write_still_confirms() {
    let (standins, queue) = seeded(
        |app| {
            app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "replicaCount", "value": "1"}));
        },
        &[Script::Healthy],
    )
    .await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    pass(&standins, 20);
    set_param(&standins, "kubectl-edit", "replicaCount", "3");
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "confirmed", "{states:?}: {reason}");
    pass(&standins, 60);
    let report = push_now(&standins, "barun-dev-ecr", NEWER, 'e').await;
    expect_decision(only(&report), Action::Updated, "ranks above");
}

/// The same, with the edit before Argo CD's first refresh (one sync carries both).
#[tokio::test]
async fn an_unrelated_parameter_edit_before_the_refresh_still_confirms() {
    let (standins, queue) = seeded(
        |app| {
            app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "replicaCount", "value": "1"}));
        },
        &[Script::Healthy],
    )
    .await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    pass(&standins, 1);
    set_param(&standins, "kubectl-edit", "replicaCount", "3");
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "confirmed", "{states:?}: {reason}");
}

/// Our write, then a person sets the tag to our exact value again (`kubectl edit`): the spec
/// still asks for the write; confirmed, not taken back; a later push is written.
#[tokio::test]
async fn a_person_setting_our_own_value_again_is_not_a_take_back() {
    let (standins, queue) = seeded(|_| {}, &[Script::Healthy]).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    pass(&standins, 5);
    set_param(&standins, "kubectl-edit", "image.tag", PUSHED_TAG);
    let (states, reason) = follow_to_the_end(&standins, &queue).await;
    assert_eq!(states.last().unwrap(), "confirmed", "{states:?}: {reason}");
    let report = push_now(&standins, "barun-dev-ecr", NEWER, 'e').await;
    expect_decision(only(&report), Action::Updated, "ranks above");
}

/// A write of `app`, then of `worker`, then of `app` again, 5 s apart: the first `app`
/// write's check ends `superseded` (it must not follow `app`'s old write or the new one) and
/// reports the write it followed (`app` at PUSHED_TAG), not the one superseding it (SNS,
/// metrics and logs read `images`); the newest `app` write and `worker` are each confirmed.
#[tokio::test]
async fn app_then_worker_then_app_again_supersedes_the_first_app_write() {
    let (standins, queue) = seeded(with_worker, &[Script::Healthy]).await;
    standins
        .aws
        .push(image("worker", "v1", 'a', "2025-08-20T00:00:00Z"));
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(entry(&report, "app"), Action::Updated, "rollout followed");
    let first: Value = serde_json::from_str(&checks(&standins, &queue)[0].body).unwrap();
    let first_write = first["write"].as_str().unwrap().to_string();
    pass(&standins, 5);
    let report = push_now(&standins, "worker", "v2", 'c').await;
    expect_decision(
        entry(&report, "worker"),
        Action::Updated,
        "rollout followed",
    );
    pass(&standins, 5);
    let report = push_now(&standins, "barun-dev-ecr", NEWER, 'e').await;
    expect_decision(entry(&report, "app"), Action::Updated, "rollout followed");
    let ended = follow_every_chain(&standins, &queue).await;
    let of_first: Vec<&RolloutReport> = ended
        .iter()
        .filter(|r| r.written_at == first_write)
        .collect();
    assert!(
        !of_first.is_empty(),
        "the first write's chain never ended: {ended:#?}"
    );
    assert!(
        of_first.iter().all(|r| r.state == "superseded"),
        "the first app write's check: {of_first:#?}"
    );
    // It reports the write it followed (app at PUSHED_TAG), not the write superseding it.
    assert!(
        of_first.iter().all(|r| r.images == [image_at(PUSHED_TAG)]),
        "the superseded check of the first app write names the wrong images: {:?}",
        of_first.iter().map(|r| &r.images).collect::<Vec<_>>()
    );
    let newest = ended
        .iter()
        .find(|r| r.written_at != first_write && r.images.contains(&image_at(NEWER)))
        .unwrap_or_else(|| panic!("no end for the newest app write: {ended:#?}"));
    assert_eq!(newest.state, "confirmed", "{newest:#?}");
    let worker = ended
        .iter()
        .find(|r| r.images.contains(&format!("{WORKER}:v2")))
        .unwrap_or_else(|| panic!("no end for worker: {ended:#?}"));
    assert_eq!(worker.state, "confirmed", "{worker:#?}");
}
