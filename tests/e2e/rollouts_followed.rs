//! Followed writes on every shape of Application and delivery: the real handler against the
//! moving Argo CD controller stand-in and the AWS stand-ins, on the test clock (Kustomize
//! and multi-source take-backs and confirmations, unrelated edits, a person setting our own
//! value, a failed send after a claimed check, hops delivered twice at once or from before
//! hops were numbered, one image written, another, then the first again).

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Scenario, event, expect_decision, only};
use argocd_ecr_updater::report::{Action, Report, RolloutReport};
use argocd_ecr_updater_standins::argocd::{Controller, Script, Timeline, normalised, stamp};
use argocd_ecr_updater_standins::aws::QueueMessage;
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::fixtures::{
    PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_TAG, image, push_event,
};
use argocd_ecr_updater_standins::{FaultAction, Route, Service};
use serde_json::{Value, json};

const WORKER: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/worker";
const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";
const NEWER: &str = "20991231-000000";

/// As `rollouts_moving::seeded`, but the history entry follows the spec's shape (single or
/// multi-source) as Argo CD writes it.
async fn seeded(prepare: impl FnOnce(&mut Value), scripts: &[Script]) -> (Scenario, String) {
    let clock = Arc::new(SimClock::scripted());
    let standins = Scenario::seeded().await.on_clock(clock.clone());
    let queue = standins.aws.create_queue("sweep");
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", SWEEP_ARN);
    let an_hour_ago = stamp(clock.now() - time::Duration::hours(1));
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            prepare(app);
            let mut entry = json!({"id": 0, "deployStartedAt": an_hour_ago,
                "deployedAt": an_hour_ago, "initiatedBy": {"automated": true}});
            if let Some(sources) = app["spec"]["sources"].as_array() {
                entry["revisions"] = json!(vec!["main"; sources.len()]);
                entry["sources"] = normalised(json!(sources));
            } else {
                entry["revision"] = json!("main");
                entry["source"] = normalised(app["spec"]["source"].clone());
            }
            app["status"]["history"] = json!([entry]);
        })
        .unwrap();
    let mut controller = Controller::timed(scripts[0], Timeline::typical(), clock);
    for script in &scripts[1..] {
        controller = controller.then(*script);
    }
    standins.kube.run_controller(controller);
    (standins, queue)
}

fn pass(standins: &Scenario, seconds: u64) {
    let until = standins.test_clock().now() + Duration::from_secs(seconds);
    standins.kube.step_to(until);
}

fn image_at(tag: &str) -> String {
    format!("{SEED_IMAGE}:{tag}")
}

fn annotate(app: &mut Value, key: &str, value: &str) {
    app["metadata"]["annotations"][key] = json!(value);
}

fn set_param(standins: &Scenario, manager: &str, name: &str, value: &str) {
    standins
        .kube
        .edit_as(manager, "argocd", SEED_APP, |app| {
            for parameter in app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
            {
                if parameter["name"] == name {
                    parameter["value"] = json!(value);
                }
            }
        })
        .unwrap();
}

fn entry<'r>(report: &'r Report, alias: &str) -> &'r argocd_ecr_updater::report::Entry {
    report
        .entries
        .iter()
        .find(|e| e.alias.as_deref() == Some(alias))
        .unwrap_or_else(|| panic!("no entry for {alias}: {:#?}", report.entries))
}

fn checks(standins: &Scenario, queue: &str) -> Vec<QueueMessage> {
    standins
        .aws
        .queue(queue)
        .into_iter()
        .filter(|m| m.body.contains("confirm-rollout"))
        .collect()
}

async fn deliver(standins: &Scenario, message: &QueueMessage) -> Report {
    let batch = json!({"Records": [{"messageId": message.id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": message.body}]});
    standins.report(&[], &batch).await
}

async fn deliver_body(standins: &Scenario, id: &str, body: &str) -> Report {
    let batch = json!({"Records": [{"messageId": id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": body}]});
    standins.report(&[], &batch).await
}

async fn follow_to_the_end(standins: &Scenario, queue: &str) -> (Vec<String>, String) {
    let mut states = Vec::new();
    for _ in 0..60 {
        let next = checks(standins, queue).pop().expect("a check on the queue");
        pass(standins, next.delay_seconds.into());
        let report = deliver(standins, &next).await;
        let Some(rollout) = report.rollouts.first() else {
            panic!(
                "no rollout in the report after {states:?}: {:#?} {:#?} body {}",
                report.entries, report.skipped, next.body
            );
        };
        states.push(rollout.state.clone());
        if rollout.state != "pending" {
            return (states, rollout.reason.clone());
        }
    }
    panic!("never ended: {states:?}");
}

async fn follow_every_chain(standins: &Scenario, queue: &str) -> Vec<RolloutReport> {
    let mut delivered = std::collections::BTreeSet::new();
    let mut ended = Vec::new();
    for _ in 0..200 {
        let Some(next) = checks(standins, queue)
            .into_iter()
            .find(|m| !delivered.contains(&m.id))
        else {
            return ended;
        };
        delivered.insert(next.id.clone());
        pass(standins, next.delay_seconds.into());
        let report = deliver(standins, &next).await;
        ended.extend(report.rollouts.into_iter().filter(|r| r.state != "pending"));
    }
    panic!("the chains never ended: {ended:#?}");
}

async fn push_now(standins: &Scenario, repository: &str, tag: &str, digest: char) -> Report {
    let now = stamp(standins.test_clock().now());
    standins.aws.push(image(repository, tag, digest, &now));
    standins
        .report(&[], &push_event(repository, tag, &now))
        .await
}

fn with_worker(app: &mut Value) {
    let p = argocd_ecr_updater::appconfig::annotations::PREFIX;
    let annotations = app["metadata"]["annotations"].as_object_mut().unwrap();
    annotations.insert(
        format!("{p}image-list"),
        json!(format!("app={SEED_IMAGE},worker={WORKER}")),
    );
    annotations.insert(format!("{p}worker.update-strategy"), json!("latest"));
    annotations.insert(format!("{p}worker.allow-tags"), json!("regexp:^v[0-9]+$"));
    annotations.insert(
        format!("{p}worker.helm.image-name"),
        json!("worker.image.repository"),
    );
    annotations.insert(
        format!("{p}worker.helm.image-tag"),
        json!("worker.image.tag"),
    );
    app["spec"]["source"]["helm"]["parameters"]
        .as_array_mut()
        .unwrap()
        .extend([
            json!({"name": "worker.image.repository", "value": WORKER}),
            json!({"name": "worker.image.tag", "value": "v1"}),
        ]);
    app["status"]["summary"]["images"] = json!([image_at(SEED_TAG), format!("{WORKER}:v1")]);
}

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
