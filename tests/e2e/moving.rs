//! The harness of the tests on the Argo CD controller stand-in moving through time: the seed
//! on a test clock with a sweep queue and a scripted controller, time passed tick by tick,
//! the queue's checks delivered as SQS would hand them out, and what the Application shows.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Scenario, event, expect_decision};
use argocd_ecr_updater::report::{Action, Report, RolloutReport};
use argocd_ecr_updater_standins::argocd::{Controller, Script, Timeline, normalised, stamp};
use argocd_ecr_updater_standins::aws::QueueMessage;
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::fixtures::{
    PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_TAG, image, push_event,
};
use serde_json::{Value, json};

pub const WORKER: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/worker";
pub const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";

/// The seed on a test clock with a sweep queue; `prepare` edits the Application before its
/// history (id 0, the spec as it is then, an hour ago, in the spec's shape: single or
/// multi-source, as Argo CD writes it) is written; the controller runs `scripts` (the last
/// repeating) on a typical timeline. Returns the queue's URL.
pub async fn seeded(prepare: impl FnOnce(&mut Value), scripts: &[Script]) -> (Scenario, String) {
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

pub fn pass(standins: &Scenario, seconds: u64) {
    let until = standins.test_clock().now() + Duration::from_secs(seconds);
    standins.kube.step_to(until);
}

pub fn image_at(tag: &str) -> String {
    format!("{SEED_IMAGE}:{tag}")
}

pub fn annotate(app: &mut Value, key: &str, value: &str) {
    app["metadata"]["annotations"][key] = json!(value);
}

pub fn set_param(standins: &Scenario, manager: &str, name: &str, value: &str) {
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

pub fn entry<'r>(report: &'r Report, alias: &str) -> &'r argocd_ecr_updater::report::Entry {
    report
        .entries
        .iter()
        .find(|e| e.alias.as_deref() == Some(alias))
        .unwrap_or_else(|| panic!("no entry for {alias}: {:#?}", report.entries))
}

pub fn checks(standins: &Scenario, queue: &str) -> Vec<QueueMessage> {
    standins
        .aws
        .queue(queue)
        .into_iter()
        .filter(|m| m.body.contains("confirm-rollout"))
        .collect()
}

/// One queue message delivered as SQS hands it to the function.
pub async fn deliver(standins: &Scenario, message: &QueueMessage) -> Report {
    deliver_body(standins, &message.id, &message.body).await
}

pub async fn deliver_body(standins: &Scenario, id: &str, body: &str) -> Report {
    let batch = json!({"Records": [{"messageId": id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": body}]});
    standins.report(&[], &batch).await
}

/// Delivers the newest check of the queue after its delay, until one ends the rollout;
/// returns the states seen, the last one's reason.
pub async fn follow_to_the_end(standins: &Scenario, queue: &str) -> (Vec<String>, String) {
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

/// Delivers every check on the queue once, in the order sent, each after its delay, until no
/// chain sends another; returns the rollouts that ended (not `pending`).
pub async fn follow_every_chain(standins: &Scenario, queue: &str) -> Vec<RolloutReport> {
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

pub async fn push_now(standins: &Scenario, repository: &str, tag: &str, digest: char) -> Report {
    let now = stamp(standins.test_clock().now());
    standins.aws.push(image(repository, tag, digest, &now));
    standins
        .report(&[], &push_event(repository, tag, &now))
        .await
}

/// The seed, also tracking `worker` (latest `v[0-9]+`, at v1) in the same Helm parameters.
pub fn with_worker(app: &mut Value) {
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

pub fn running(standins: &Scenario) -> Vec<String> {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["status"]["summary"]["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect()
}

pub fn set_tag(standins: &Scenario, manager: &str, tag: &str) {
    set_param(standins, manager, "image.tag", tag);
}

/// The seed's push (PUSHED_TAG), written, and 40 s for Argo CD to deploy it.
pub async fn pushed_and_deployed(standins: &Scenario) -> Report {
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(entry(&report, "app"), Action::Updated, "ranks above");
    pass(standins, 40);
    assert!(running(standins).contains(&image_at(PUSHED_TAG)));
    report
}

pub async fn sweep(standins: &Scenario) -> Report {
    standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await
}

pub fn manual(app: &mut Value) {
    app["spec"]["syncPolicy"]
        .as_object_mut()
        .unwrap()
        .remove("automated");
}

pub fn events(standins: &Scenario, reason: &str) -> Vec<Value> {
    standins
        .kube
        .events()
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect()
}

pub fn failed_rollouts(standins: &Scenario) -> Value {
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"]["argocd-ecr-updater.io/failed-rollouts"]
        .as_str()
        .map(|t| serde_json::from_str(t).unwrap())
        .unwrap_or(Value::Null)
}
