//! End to end on the layout of AWS's managed Argo CD, the EKS capability for Argo CD: the
//! controllers run on AWS's side and reconcile the Applications of one namespace of the hub
//! cluster (the Argo CD controller stand-in as [`Controller::hub`], polling Git every 6
//! minutes), the Applications deploy to spoke clusters named by their EKS ARN, and the
//! function holds only `deploy/rbac.yaml`'s Role and RoleBinding in that namespace. A push is
//! patched or committed (with the refresh the managed controller honours) and followed until
//! live; an Application outside the namespace is skipped with the reason; the SNS report goes
//! out as a chat notification in the documented schema.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Scenario, event, expect_decision, only};
use argocd_ecr_updater::report::{Action, Report, RolloutReport};
use argocd_ecr_updater_standins::argocd::{Controller, Rendered, Script, Timeline};
use argocd_ecr_updater_standins::aws::QueueMessage;
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG};
use argocd_ecr_updater_standins::{Grant, shipped_grants};
use serde_json::{Value, json};

const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";
const TOPIC: &str = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-chat";
/// A spoke cluster, registered with the capability by its ARN.
const SPOKE: &str = "arn:aws:eks:ap-northeast-2:768157413559:cluster/barun-prod";

/// The hub: the seed's Application deploying to [`SPOKE`], the function's RBAC `grants` (all
/// namespaced), `ARGOCD_EKS_CAPABILITY=true`, a sweep queue to follow writes on, and the
/// managed controller on the test's clock. The queue's URL.
async fn hub(grants: Vec<Grant>, git: bool) -> (Scenario, String) {
    assert!(
        grants.iter().all(|g| g.namespace != "*"),
        "the managed layout grants nothing cluster-wide"
    );
    let clock = Arc::new(SimClock::scripted());
    let scenario = Scenario::seeded_with_grants(grants).await;
    let scenario = if git {
        crate::git::git_on(scenario, &[])
    } else {
        scenario
    };
    let standins = scenario.on_clock(clock.clone());
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["spec"]["destination"] = json!({"server": SPOKE, "namespace": "invitation"});
        })
        .unwrap();
    let queue = standins.aws.create_queue("sweep");
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", SWEEP_ARN)
        .var("ARGOCD_EKS_CAPABILITY", "true");
    let mut controller = Controller::timed(Script::Healthy, Timeline::eks_capability(), clock);
    if git {
        controller = controller.rendering(Arc::new(rendered_from_git(&standins)));
    }
    standins.kube.run_controller(controller.hub("argocd"));
    (standins, queue)
}

/// The entries of one Application in one namespace.
fn for_app<'r>(
    report: &'r Report,
    namespace: &str,
    name: &str,
) -> Vec<&'r argocd_ecr_updater::report::Entry> {
    report
        .entries
        .iter()
        .filter(|e| e.namespace == namespace && e.name == name)
        .collect()
}

/// What the repo server renders: the write-back file at the branch's head.
fn rendered_from_git(standins: &Scenario) -> impl Fn(&Value) -> Option<Rendered> + use<> {
    let github = standins.github.clone();
    move |_: &Value| {
        let (repo, file) = (crate::git::REPO, crate::git::OVERRIDE);
        let revision = github.head(repo, "main")?;
        let text = github.file(repo, "main", file)?;
        let source: Value = serde_yaml_ng::from_str(&text).ok()?;
        let images =
            argocd_ecr_updater_standins::argocd::images_of_spec(&json!({"source": source}));
        Some(Rendered { revision, images })
    }
}

fn pass(standins: &Scenario, seconds: u64) {
    let until = standins.test_clock().now() + Duration::from_secs(seconds);
    standins.kube.step_to(until);
}

/// Seconds until the Application is Synced to `revision` (its spec as compared, when
/// `None`), stepping the controller one second at a time, at most `limit`.
fn seconds_to_synced(standins: &Scenario, revision: Option<&str>, limit: u64) -> Option<u64> {
    (0..=limit).find(|_| {
        let app = standins.kube.get("argocd", SEED_APP).unwrap();
        let sync = &app["status"]["sync"];
        let synced = sync["status"] == "Synced"
            && app["status"]["operationState"]["phase"] == "Succeeded"
            && revision.is_none_or(|r| sync["revision"] == r);
        if !synced {
            pass(standins, 1);
        }
        synced
    })
}

fn checks(standins: &Scenario, queue: &str) -> Vec<QueueMessage> {
    standins
        .aws
        .queue(queue)
        .into_iter()
        .filter(|m| m.body.contains("confirm-rollout"))
        .collect()
}

async fn deliver(standins: &Scenario, message: &QueueMessage, vars: &[(&str, &str)]) -> Report {
    let batch = json!({"Records": [{"messageId": message.id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": message.body}]});
    standins.report(vars, &batch).await
}

async fn confirmed(standins: &Scenario, queue: &str) -> RolloutReport {
    let check = checks(standins, queue).remove(0);
    let mut report = deliver(standins, &check, &[]).await;
    assert_eq!(report.rollouts.len(), 1, "{:#?}", report.rollouts);
    report.rollouts.remove(0)
}

#[tokio::test]
async fn on_the_hub_a_push_is_patched_and_confirmed_live_with_only_the_namespaced_role() {
    let (standins, queue) = hub(shipped_grants("argocd"), false).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "rollout followed until live",
    );
    let seconds = seconds_to_synced(&standins, None, 60).expect("synced");
    eprintln!("hub, argocd write-back: write to Synced in {seconds} s on the stand-in's clock");
    pass(&standins, 40);
    let rollout = confirmed(&standins, &queue).await;
    assert_eq!(rollout.state, "confirmed", "{rollout:#?}");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(
        app["status"]["sync"]["comparedTo"]["destination"]["server"],
        SPOKE
    );
    assert_eq!(standins.kube.syncs("argocd", SEED_APP), 1);
}

/// A commit is noticed at the refresh the function asks for, seconds after the write, not at
/// the capability's next Git poll; the rollout is confirmed.
#[tokio::test]
async fn on_the_hub_a_commit_is_synced_at_the_refresh_not_at_the_next_git_poll() {
    let (standins, queue) = hub(shipped_grants("argocd"), true).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let head = standins.github.head(crate::git::REPO, "main").unwrap();
    let seconds = seconds_to_synced(&standins, Some(&head), 400).expect("synced");
    eprintln!("hub, git write-back with the refresh: commit to Synced in {seconds} s");
    assert!(seconds < 30, "{seconds} s: the refresh was not honoured");
    pass(&standins, 40);
    let rollout = confirmed(&standins, &queue).await;
    assert_eq!(rollout.state, "confirmed", "{rollout:#?}");
}

/// Without `patch` on Applications the refresh is refused: the commit lands and waits for
/// the capability's Git poll (6 minutes), and the entry says so.
#[tokio::test]
async fn on_the_hub_a_commit_without_the_refresh_waits_for_the_git_poll() {
    let mut grants = shipped_grants("argocd");
    for grant in grants.iter_mut().filter(|g| g.resource == "applications") {
        grant.verbs.retain(|v| v != "patch");
    }
    let (standins, _queue) = hub(grants, true).await;
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "Argo CD picks the commit up at its next Git poll",
    );
    let head = standins.github.head(crate::git::REPO, "main").unwrap();
    let seconds = seconds_to_synced(&standins, Some(&head), 400).expect("synced at the poll");
    eprintln!("hub, git write-back without the refresh: commit to Synced in {seconds} s");
    assert!((360..=370).contains(&seconds), "{seconds} s");
}

/// The capability never reconciles an Application outside its namespace: one there is
/// skipped with the reason and left as it was, while the one in `argocd` is written.
#[tokio::test]
async fn an_application_outside_the_capabilitys_namespace_is_skipped_with_the_reason() {
    let mut grants = shipped_grants("argocd");
    grants.extend(shipped_grants("team-a"));
    let (standins, _queue) = hub(grants, false).await;
    let mut other = standins.kube.get("argocd", SEED_APP).unwrap();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut other);
    other["metadata"]["namespace"] = json!("team-a");
    standins.kube.insert(other).unwrap();
    let vars = [
        ("ARGOCD_NAMESPACES", "argocd,team-a"),
        ("ARGOCD_NAMESPACE", "argocd"),
    ];
    let report = standins.report(&vars, &event("push-date-tag.json")).await;
    let skipped = for_app(&report, "team-a", SEED_APP);
    assert_eq!(skipped.len(), 1, "{report:#?}");
    expect_decision(
        skipped[0],
        Action::Skipped,
        "which the EKS capability for Argo CD does not reconcile",
    );
    expect_decision(
        for_app(&report, "argocd", SEED_APP)[0],
        Action::Updated,
        "ranks above",
    );
    let tag = |ns| standins.kube.helm_parameter(ns, SEED_APP, "image.tag");
    assert_eq!(
        (tag("team-a").as_deref(), tag("argocd").as_deref()),
        (Some(SEED_TAG), Some(PUSHED_TAG))
    );
    // A cluster-wide listing is refused at cold start on the managed layout.
    let wide = [("ARGOCD_NAMESPACES", "*")];
    let mut map: std::collections::HashMap<&str, &str> = wide.into_iter().collect();
    map.insert("ARGOCD_EKS_CAPABILITY", "true");
    map.insert("CLUSTER_NAME", "barun-dev");
    let refused =
        argocd_ecr_updater::config::Config::from_lookup(|k| map.get(k).map(|v| v.to_string()))
            .unwrap_err();
    assert_eq!(refused.variable, "ARGOCD_EKS_CAPABILITY");
}

/// The update and its rollout outcome reach the chat channel as custom notifications in the
/// documented schema, in one thread per image written.
#[tokio::test]
async fn the_update_and_its_rollout_go_out_as_chat_notifications_in_the_documented_schema() {
    let (standins, queue) = hub(shipped_grants("argocd"), false).await;
    let vars = [
        ("NOTIFICATION_TOPIC_ARN", TOPIC),
        ("NOTIFICATION_FORMAT", "chat"),
    ];
    standins.report(&vars, &event("push-date-tag.json")).await;
    pass(&standins, 60);
    let check = checks(&standins, &queue).remove(0);
    let report = deliver(&standins, &check, &vars).await;
    assert_eq!(report.rollouts[0].state, "confirmed");
    let published = standins.aws.published();
    assert_eq!(published.len(), 2, "{published:#?}");
    let mut kinds = Vec::new();
    for message in &published {
        let text = message["Message"].as_str().unwrap();
        let violations = argocd_ecr_updater_standins::chatbot::violations(text);
        assert!(violations.is_empty(), "{violations:?} in {text}");
        let notification: Value = serde_json::from_str(text).unwrap();
        kinds.push(notification["metadata"]["eventType"].clone());
        assert!(
            notification["metadata"]["threadId"]
                .as_str()
                .unwrap()
                .ends_with(&format!(":{PUSHED_TAG}")),
            "{notification:#}"
        );
    }
    assert_eq!(kinds, [json!("ImagesUpdated"), json!("RolloutConfirmed")]);
    let threads: Vec<Value> = published
        .iter()
        .map(|m| {
            let n: Value = serde_json::from_str(m["Message"].as_str().unwrap()).unwrap();
            n["metadata"]["threadId"].clone()
        })
        .collect();
    assert_eq!(
        threads[0], threads[1],
        "one thread for the update and its rollout"
    );
}

/// Commit to Synced on the stand-in's clock, with the commit landing `offset` seconds into
/// the capability's 6-minute Git poll; `refresh`: the function may patch Applications, so it
/// asks for the refresh.
async fn commit_to_synced(offset: u64, refresh: bool) -> u64 {
    let mut grants = shipped_grants("argocd");
    if !refresh {
        for grant in grants.iter_mut().filter(|g| g.resource == "applications") {
            grant.verbs.retain(|v| v != "patch");
        }
    }
    let (standins, _queue) = hub(grants, true).await;
    pass(&standins, offset);
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let head = standins.github.head(crate::git::REPO, "main").unwrap();
    seconds_to_synced(&standins, Some(&head), 400).expect("synced")
}

/// The figure docs/deploy.md states: a commit lands anywhere in the capability's poll cycle
/// (offsets 0 to 330 s, every 30 s); with the refresh it is Synced in the same few seconds
/// wherever it lands, without it when the next poll comes round, 6 minutes at worst.
#[tokio::test]
async fn with_the_refresh_a_commit_is_synced_in_seconds_wherever_it_lands_in_the_poll_cycle() {
    let offsets: Vec<u64> = (0..12).map(|i| i * 30).collect();
    let mut with = Vec::new();
    let mut without = Vec::new();
    for &offset in &offsets {
        with.push(commit_to_synced(offset, true).await);
        without.push(commit_to_synced(offset, false).await);
    }
    let summary = |seconds: &mut Vec<u64>| {
        seconds.sort_unstable();
        let median = (seconds[5] + seconds[6]) as f64 / 2.0;
        (median, seconds[0], seconds[11])
    };
    let (with, without) = (summary(&mut with), summary(&mut without));
    eprintln!(
        "commit to Synced over {} offsets in the poll cycle: with the refresh median {} s (range {} to {} s), without median {} s (range {} to {} s)",
        offsets.len(),
        with.0,
        with.1,
        with.2,
        without.0,
        without.1,
        without.2
    );
    assert!(with.2 < 30, "{with:?}");
    assert!(without.0 > 150.0 && without.2 >= 330, "{without:?}");
}
