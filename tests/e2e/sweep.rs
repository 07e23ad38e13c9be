//! End to end: a sweep fanned out over the sweep queue. The coordinator lists and sends
//! shards to the SQS stand-in; shards run through the real handler, or through the compiled
//! function fed by the event source mapping stand-in (partial batch responses, redelivery,
//! the redrive to the dead-letter queue). Shards are idempotent: a duplicate, a late one or
//! one that runs after a newer push decides from what it reads then.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{LambdaProcess, Scenario, report_of, spawn_lambda};
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::{
    Application, SEED_IMAGE, SEED_REPOSITORY, image, push_event, reconcile_event,
};
use argocd_ecr_updater_standins::mapping::{self, Mapping};
use argocd_ecr_updater_standins::{FaultAction, Options, Route, Service};

const OLD: &str = "20250824-093000";
const NEWEST: &str = "20250825-153012";

/// The seed stand-ins with `count` more Applications `app-<n>` on an old tag of the seed
/// repository, and the sweep queue.
async fn fleet(count: usize) -> (Scenario, String) {
    let standins = Scenario::seeded().await;
    add_apps(&standins.kube, count);
    let queue = standins.aws.create_queue("sweep");
    (standins, queue)
}

fn add_apps(kube: &argocd_ecr_updater_standins::kube::KubeState, count: usize) {
    for n in 0..count {
        let app = Application::tracking(&format!("app-{n}"), SEED_IMAGE, OLD)
            .annotate("app.update-strategy", "newest-build")
            .annotate("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$")
            .build();
        kube.insert(app).unwrap();
    }
}

/// The stand-in's `sweep` queue by ARN (the queue every test here creates).
const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";

fn vars<'a>(queue: &'a str, at: &'a str, size: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("SWEEP_QUEUE_URL", queue),
        ("SWEEP_QUEUE_ARN", SWEEP_ARN),
        ("SWEEP_FAN_OUT_AT", at),
        ("SWEEP_SHARD_SIZE", size),
        // The queue carries shards only here: rollout checks have their own tests.
        ("CONFIRM_ROLLOUTS", "false"),
    ]
}

fn tag_of(kube: &argocd_ecr_updater_standins::kube::KubeState, name: &str) -> Option<String> {
    kube.helm_parameter("argocd", name, "image.tag")
}

/// The queue's messages as the mapping hands them over: one SQS record each.
fn records(standins: &Scenario, queue: &str) -> Vec<Value> {
    standins
        .aws
        .queue(queue)
        .iter()
        .map(|m| {
            json!({"Records": [{"messageId": m.id, "eventSource": "aws:sqs",
                "eventSourceARN": SWEEP_ARN, "body": m.body}]})
        })
        .collect()
}

fn patches(standins: &Scenario) -> usize {
    standins
        .shared
        .count(|r| r.service == Service::Kube && r.method == "PATCH")
}

#[tokio::test]
async fn a_fleet_under_the_threshold_is_swept_in_the_invocation_that_listed_it() {
    let (standins, queue) = fleet(3).await;
    let h = standins.handler(&vars(&queue, "10", "2"));
    let report = h.handle(&reconcile_event(), None).await.unwrap();
    assert_eq!(report.failure, None, "{report:#?}");
    assert!(standins.aws.queue(&queue).is_empty(), "no queue traffic");
    assert_eq!(report.sweep, None);
    assert_eq!(tag_of(&standins.kube, "app-2").as_deref(), Some(NEWEST));
    let updated = report
        .entries
        .iter()
        .filter(|e| e.action == Action::Updated);
    assert_eq!(updated.count(), 4, "the seed Application and three more");
}

/// The threshold counts every Application the sweep found: one under it is decided here, at
/// it the sweep goes out in shards.
#[tokio::test]
async fn the_fan_out_starts_exactly_at_the_threshold() {
    for (threshold, sent) in [("5", true), ("6", false)] {
        // Five Applications: the seed's and four more.
        let (standins, queue) = fleet(4).await;
        let h = standins.handler(&vars(&queue, threshold, "10"));
        let report = h.handle(&reconcile_event(), None).await.unwrap();
        assert_eq!(report.failure, None, "{report:#?}");
        assert_eq!(report.sweep.is_some(), sent, "threshold {threshold}");
        assert_eq!(
            standins.aws.queue(&queue).len(),
            usize::from(sent),
            "threshold {threshold}"
        );
        assert_eq!(
            patches(&standins),
            if sent { 0 } else { 5 },
            "threshold {threshold}"
        );
    }
}

/// A shard SQS refuses is not lost quietly: the sweep reports how many were not sent and
/// fails, so its alarm and the next sweep pick them up.
#[tokio::test]
async fn a_shard_the_queue_refuses_is_reported_as_not_sent() {
    let (standins, queue) = fleet(11).await;
    standins.shared.inject(
        argocd_ecr_updater_standins::Route {
            service: Some(Service::Sqs),
            operation: Some("SendMessage".into()),
            ..Default::default()
        },
        1,
        FaultAction::AwsError {
            code: 400,
            kind: "AccessDenied",
        },
    );
    let h = standins.handler(&vars(&queue, "5", "5"));
    let report = h.handle(&reconcile_event(), None).await.unwrap();
    let sweep = report.sweep.clone().unwrap();
    assert_eq!((sweep.shards, sweep.shards_failed), (2, 1), "{report:#?}");
    let failure = report.failure.as_deref().unwrap_or_default();
    assert!(failure.contains("1 of 3 shards were not sent"), "{failure}");
    assert!(failure.contains("sqs:SendMessage"), "{failure}");
    assert_eq!(standins.aws.queue(&queue).len(), 2);
}

#[tokio::test]
async fn a_large_fleet_goes_out_in_shards_and_the_shards_update_it() {
    let (standins, queue) = fleet(11).await;
    let h = standins.handler(&vars(&queue, "5", "5"));
    let report = h.handle(&reconcile_event(), None).await.unwrap();
    assert_eq!(report.failure, None, "{report:#?}");
    let sweep = report.sweep.clone().unwrap();
    assert_eq!(
        (sweep.applications, sweep.shards, sweep.shards_failed),
        (12, 3, 0)
    );
    assert_eq!(
        patches(&standins),
        0,
        "the coordinator writes no Application"
    );
    assert_eq!(
        standins.shared.count(|r| r.service == Service::Kube
            && r.method == "GET"
            && r.path.contains("/applications/")),
        0,
        "nor reads one whole"
    );
    let shards = records(&standins, &queue);
    let bodies: Vec<Value> = standins
        .aws
        .queue(&queue)
        .iter()
        .map(|m| serde_json::from_str(&m.body).unwrap())
        .collect();
    let sizes: Vec<usize> = bodies
        .iter()
        .map(|b| b["applications"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [5, 5, 2]);
    assert!(
        bodies
            .iter()
            .all(|b| b["sweep"] == report.event_id.as_str())
    );
    standins.shared.clear_log();
    for shard in &shards {
        let report = h.handle(shard, None).await.unwrap();
        assert!(report.failed_messages.is_empty(), "{report:#?}");
        assert_eq!(report.batch_response(), json!({"batchItemFailures": []}));
    }
    for n in 0..11 {
        assert_eq!(
            tag_of(&standins.kube, &format!("app-{n}")).as_deref(),
            Some(NEWEST)
        );
    }
    assert_eq!(patches(&standins), 12);
}

#[tokio::test]
async fn a_shard_that_runs_twice_writes_once() {
    let (standins, queue) = fleet(6).await;
    let h = standins.handler(&vars(&queue, "2", "10"));
    h.handle(&reconcile_event(), None).await.unwrap();
    let shard = records(&standins, &queue).remove(0);
    let first = h.handle(&shard, None).await.unwrap();
    assert_eq!(patches(&standins), 7);
    assert!(first.entries.iter().all(|e| e.action == Action::Updated));
    let again = h.handle(&shard, None).await.unwrap();
    assert_eq!(patches(&standins), 7, "the duplicate wrote nothing");
    assert!(
        again.entries.iter().all(|e| e.action == Action::Unchanged),
        "{again:#?}"
    );
}

#[tokio::test]
async fn a_late_shard_decides_from_what_it_reads_now_not_from_the_sweep_it_came_from() {
    let (standins, queue) = fleet(4).await;
    let h = standins.handler(&vars(&queue, "2", "10"));
    h.handle(&reconcile_event(), None).await.unwrap();
    let shard = records(&standins, &queue).remove(0);
    // After the sweep listed them: a newer image is pushed and its event updates them all,
    // and one Application's owner narrows what it may run.
    standins.aws.push(image(
        SEED_REPOSITORY,
        "20250826-080000",
        '9',
        "2025-08-26T08:00:00Z",
    ));
    let push = push_event(SEED_REPOSITORY, "20250826-080000", "2025-08-26T08:00:00Z");
    report_of(h.handle(&push, None).await);
    assert_eq!(
        tag_of(&standins.kube, "app-0").as_deref(),
        Some("20250826-080000")
    );
    standins
        .kube
        .edit("argocd", "app-1", |a| {
            a["metadata"]["annotations"]["argocd-image-updater.argoproj.io/app.allow-tags"] =
                json!("regexp:^20250825-[0-9]{6}$");
        })
        .unwrap();
    let before = patches(&standins);
    let report = h.handle(&shard, None).await.unwrap();
    // Never back to what the sweep saw: the newer tag stays where it is allowed, and the
    // narrowed Application follows its new constraint, as a sweep now would.
    assert_eq!(
        tag_of(&standins.kube, "app-0").as_deref(),
        Some("20250826-080000")
    );
    assert_eq!(
        tag_of(&standins.kube, "app-3").as_deref(),
        Some("20250826-080000")
    );
    assert_eq!(tag_of(&standins.kube, "app-1").as_deref(), Some(NEWEST));
    assert_eq!(patches(&standins) - before, 1, "{report:#?}");
}

#[tokio::test]
async fn what_is_not_a_shard_of_ours_fails_alone_and_names_why() {
    let (standins, queue) = fleet(0).await;
    let h = standins.handler(&vars(&queue, "2", "10"));
    let good = r#"{"action":"reconcile-shard","sweep":"s","cluster":"barun-dev","shard":1,"shards":2,"applications":[{"namespace":"argocd","name":"aws-pipeline-test"}]}"#;
    let foreign = r#"{"action":"reconcile-shard","sweep":"s","cluster":"barun-dev","shard":2,"shards":2,"applications":[{"namespace":"kube-system","name":"x"}]}"#;
    // A push of a tag ECR does not have, as anyone with sqs:SendMessage could write it.
    let forged = push_event(SEED_REPOSITORY, "20991231-000000", "2099-12-31T00:00:00Z").to_string();
    let batch = json!({"Records": [
        {"messageId": "good", "eventSource": "aws:sqs", "eventSourceARN": SWEEP_ARN, "body": good},
        {"messageId": "broken", "eventSource": "aws:sqs", "eventSourceARN": SWEEP_ARN, "body": "{\"action\":\"reconcile-shard\",\"cluster\":1}"},
        {"messageId": "foreign", "eventSource": "aws:sqs", "eventSourceARN": SWEEP_ARN, "body": foreign},
        {"messageId": "forged", "eventSource": "aws:sqs", "eventSourceARN": SWEEP_ARN, "body": forged},
        {"messageId": "elsewhere", "eventSource": "aws:sqs",
         "eventSourceARN": "arn:aws:sqs:ap-northeast-2:768157413559:someone-elses", "body": good},
    ]});
    let report = h.handle(&batch, None).await.unwrap();
    assert_eq!(
        report.failed_messages,
        ["broken", "forged", "elsewhere"],
        "{report:#?}"
    );
    assert_eq!(
        report.batch_response(),
        json!({"batchItemFailures": [{"itemIdentifier": "broken"},
            {"itemIdentifier": "forged"}, {"itemIdentifier": "elsewhere"}]})
    );
    let failure = report.failure.as_deref().unwrap();
    assert!(failure.contains("not a shard"), "{failure}");
    assert!(failure.contains("Permanent.NotAShard"), "{failure}");
    assert!(failure.contains("not from the sweep queue"), "{failure}");
    let foreign = report.entries.iter().find(|e| e.name == "x").unwrap();
    assert!(
        foreign.reason.contains("outside ARGOCD_NAMESPACES"),
        "{}",
        foreign.reason
    );
    assert!(standins.kube.get("kube-system", "x").is_none());
    assert_eq!(
        tag_of(&standins.kube, "aws-pipeline-test").as_deref(),
        Some(NEWEST)
    );
}

#[tokio::test]
async fn a_shard_keeps_at_most_its_share_of_the_cluster_budget_in_flight() {
    // Twelve Applications with the seed's: whole waves of one and of four reads.
    let (standins, queue) = fleet(11).await;
    for (budget, expected) in [("2", 1), ("8", 4)] {
        let mut v = vars(&queue, "2", "20");
        v.extend([
            ("SWEEP_CLUSTER_REQUESTS", budget),
            ("SWEEP_CONCURRENCY", "2"),
        ]);
        let h = standins.handler(&v);
        h.handle(&reconcile_event(), None).await.unwrap();
        let shard = records(&standins, &queue).remove(0);
        for message in standins.aws.receive(&queue, 10, Duration::from_secs(60)) {
            standins.aws.delete(&queue, &message.receipt);
        }
        // Reads are held until the share the shard may keep in flight is: a shard that
        // sent one more would be caught holding it, one that sent fewer would never open it.
        let gate = argocd_ecr_updater_standins::faults::Gate::new(expected);
        standins.shared.inject(
            Route::kube("GET", "/applications/"),
            1_000,
            FaultAction::Gate(gate.clone()),
        );
        h.handle(&shard, None).await.unwrap();
        standins.shared.clear_faults();
        assert_eq!(
            gate.most(),
            expected,
            "budget {budget} over 2 shards at once"
        );
    }
}

/// The compiled function, `count` processes polling one Runtime API stand-in.
fn functions(standins: &Scenario, env: &[(&str, &str)], count: usize) -> Vec<LambdaProcess> {
    let mut all = standins.lambda_env();
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    (0..count)
        .map(|_| spawn_lambda(&crate::common::function_binary(), &all))
        .collect()
}

fn mapping(queue: &str) -> Mapping {
    Mapping {
        queue_url: queue.to_string(),
        batch_size: 1,
        maximum_concurrency: 2,
        // The template's; it runs out only when the mapping stand-in moves the queues' clock.
        visibility: Duration::from_secs(900),
        function_timeout: Duration::from_secs(30),
    }
}

#[tokio::test]
async fn a_shard_that_fails_once_is_delivered_again_alone_and_then_succeeds() {
    let (standins, queue) = fleet(9).await;
    let dead_letters = standins.aws.create_queue("sweep-dead-letters");
    standins.aws.set_redrive(&queue, &dead_letters, 3);
    let env = vars(&queue, "5", "5");
    let _functions = functions(&standins, &env, 2);
    let sweep = standins
        .runtime
        .invoke(reconcile_event(), Duration::from_secs(30))
        .await;
    let argocd_ecr_updater_standins::Outcome::Response(report) = sweep.unwrap() else {
        panic!("the coordinator failed");
    };
    assert_eq!(report["sweep"]["shards"], 2, "{report:#}");
    // One Application's read is refused once.
    standins.shared.inject(
        Route::kube("GET", "/applications/app-4"),
        1,
        FaultAction::Status {
            code: 403,
            retry_after: None,
        },
    );
    let runs = mapping::drain(
        &standins.aws,
        &standins.runtime,
        &mapping(&queue),
        Duration::from_secs(60),
    )
    .await;
    let failed: Vec<Vec<String>> = runs.iter().map(|d| d.failed()).collect();
    assert_eq!(runs.len(), 3, "two shards, one of them twice: {failed:?}");
    let again = &runs[2];
    assert_eq!(
        again.receive_counts,
        [2],
        "the failed shard came back alone"
    );
    assert_eq!(failed.iter().filter(|f| !f.is_empty()).count(), 1);
    assert!(failed[2].is_empty());
    assert!(standins.aws.queue(&queue).is_empty());
    assert!(standins.aws.queue(&dead_letters).is_empty());
    for n in 0..9 {
        assert_eq!(
            tag_of(&standins.kube, &format!("app-{n}")).as_deref(),
            Some(NEWEST)
        );
    }
}

#[tokio::test]
async fn a_cluster_that_is_down_fails_only_its_shards_which_end_in_the_shards_dead_letter_queue() {
    let (standins, queue) = fleet(4).await;
    let staging = standins
        .add_cluster("staging", "ap-northeast-2", Options::default().identities)
        .await
        .unwrap();
    add_apps(&staging.kube, 5);
    let dead_letters = standins.aws.create_queue("sweep-dead-letters");
    standins.aws.set_redrive(&queue, &dead_letters, 2);
    let clusters = r#"[{"name":"barun-dev"},{"name":"staging"}]"#;
    let mut env = vars(&queue, "5", "3");
    env.push(("CLUSTERS", clusters));
    let h = standins.handler(&env);
    let report = h.handle(&reconcile_event(), None).await.unwrap();
    assert_eq!(report.sweep.as_ref().unwrap().shards, 4, "{report:#?}");
    // Down after the sweep listed it.
    drop(staging);
    let _functions = functions(&standins, &env, 2);
    let runs = mapping::drain(
        &standins.aws,
        &standins.runtime,
        &mapping(&queue),
        Duration::from_secs(90),
    )
    .await;
    let parked: Vec<Value> = standins
        .aws
        .queue(&dead_letters)
        .iter()
        .map(|m| serde_json::from_str(&m.body).unwrap())
        .collect();
    assert_eq!(parked.len(), 2, "staging's two shards");
    assert!(parked.iter().all(|s| s["cluster"] == "staging"));
    assert!(standins.aws.queue(&queue).is_empty());
    let succeeded = runs.iter().filter(|d| d.failed().is_empty()).count();
    assert_eq!(succeeded, 2, "barun-dev's two shards, once each");
    for n in 0..4 {
        assert_eq!(
            tag_of(&standins.kube, &format!("app-{n}")).as_deref(),
            Some(NEWEST)
        );
    }
}

#[tokio::test]
async fn a_shard_decides_only_applications_the_label_selector_and_namespaces_select_now() {
    let (standins, queue) = fleet(2).await;
    let mut selected = Application::tracking("selected", SEED_IMAGE, OLD)
        .annotate("app.update-strategy", "newest-build")
        .annotate("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$")
        .build();
    selected["metadata"]["labels"] = json!({"team": "a"});
    standins.kube.insert(selected).unwrap();
    let mut env = vars(&queue, "2", "10");
    env.push(("APPLICATION_LABEL_SELECTOR", "team in (a)"));
    env.push(("ARGOCD_NAMESPACES", "argocd"));
    let h = standins.handler(&env);
    // A shard naming Applications the selector never selected (app-0, app-1) and one in a
    // namespace the function does not watch, beside the one it selects.
    let shard = json!({"action": "reconcile-shard", "sweep": "s", "cluster": "barun-dev", "shard": 1,
        "shards": 1, "applications": [
            {"namespace": "argocd", "name": "app-0"}, {"namespace": "argocd", "name": "app-1"},
            {"namespace": "team-b", "name": "app-0"}, {"namespace": "argocd", "name": "selected"}]});
    let batch = json!({"Records": [{"messageId": "m", "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": shard.to_string()}]});
    let report = h.handle(&batch, None).await.unwrap();
    let reason = |name: &str, namespace: &str| {
        report
            .entries
            .iter()
            .find(|e| e.name == name && e.namespace == namespace)
            .map(|e| (e.action, e.reason.clone()))
            .unwrap_or_else(|| panic!("{namespace}/{name}: {report:#?}"))
    };
    for name in ["app-0", "app-1"] {
        let (action, why) = reason(name, "argocd");
        assert_eq!(action, Action::Skipped, "{why}");
        assert!(
            why.contains("APPLICATION_LABEL_SELECTOR `team in (a)`"),
            "{why}"
        );
        assert_eq!(tag_of(&standins.kube, name).as_deref(), Some(OLD));
    }
    let (_, why) = reason("app-0", "team-b");
    assert!(why.contains("outside ARGOCD_NAMESPACES"), "{why}");
    assert_eq!(reason("selected", "argocd").0, Action::Updated);
    assert_eq!(tag_of(&standins.kube, "selected").as_deref(), Some(NEWEST));
}
