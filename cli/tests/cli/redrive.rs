//! `redrive`, run as the compiled CLI a user runs: parked events handed to the deployed
//! function (the default), run here (`--local`) or discarded, both shapes of a parked event
//! read, and a message deleted only once its event was accepted, succeeded or is discarded.

use std::process::Command;

use argocd_ecr_updater_standins::StandIns;
use argocd_ecr_updater_standins::fixtures::sample_event;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_TAG, push_event};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");

fn redrive(standins: &StandIns, args: &[&str]) -> (bool, String) {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    // A local run acts as the function's role: name the function.
    if args.iter().any(|a| a == "--local")
        && !args.iter().any(|a| a == "--function" || a == "--discard")
    {
        args.extend(["--function".into(), function(standins)]);
    }
    let output = Command::new(BINARY)
        .env_clear()
        .envs(standins.function_env())
        // The operator's laptop reaches Lambda and STS too (the function's environment does
        // not); its credentials are a session of the function's role (a profile of it).
        .env("AWS_ENDPOINT_URL_LAMBDA", standins.aws_endpoint())
        .env("AWS_ENDPOINT_URL_STS", standins.aws_endpoint())
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .arg("redrive")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.success(), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_redrive_replays_both_shapes_of_a_parked_event_and_deletes_only_what_succeeded() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    let original = sample_event("push-date-tag.json");
    // The rule's dead-letter queue keeps the event itself ...
    standins.aws.send_message(&queue, &original.to_string());
    // ... the function's on-failure destination a record around it.
    let late = push_event("barun-dev-ecr", "20250824-093000", "2025-08-24T00:30:05Z");
    let record = json!({"version": "1.0", "timestamp": "2025-08-25T06:31:00.000Z",
        "requestContext": {"requestId": "r", "condition": "RetriesExhausted", "approximateInvokeCount": 3,
                           "functionArn": "arn:aws:lambda:ap-northeast-2:768157413559:function:argocd-ecr-updater"},
        "requestPayload": late, "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "responsePayload": {"errorType": "Retryable.TargetsFailed", "errorMessage": "403"}});
    standins.aws.send_message(&queue, &record.to_string());
    standins.aws.send_message(&queue, "not an event");

    // A dry run decides and keeps everything.
    let (ok, out) = redrive(
        &standins,
        &["--queue", &queue, "--local", "--wait-seconds", "1"],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("dry run, kept"), "{out}");
    assert_eq!(standins.aws.queue(&queue).len(), 3);
    assert_eq!(standins.kube.seed_tag().as_deref(), Some(SEED_TAG));

    // With --apply (the dry run released what it read) the two events run and go; the
    // broken message stays for a person.
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--local",
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(!ok, "one message failed: {out}");
    assert!(out.contains("1 updated"), "{out}");
    assert!(out.contains("-> deleted"), "{out}");
    assert!(out.contains("not JSON") && out.contains("-> kept"), "{out}");
    assert!(out.contains("3 message(s) redriven, 1 failed"), "{out}");
    let left = standins.aws.queue(&queue);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].body, "not an event");
    assert_eq!(standins.kube.seed_tag().as_deref(), Some(PUSHED_TAG));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_does_not_end_the_redrive_while_the_queue_counts_messages() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    for _ in 0..3 {
        standins
            .aws
            .send_message(&queue, &sample_event("push-date-tag.json").to_string());
    }
    // SQS documents that a short poll may answer empty while messages wait.
    standins.aws.short_polls_miss(10);
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--local",
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("3 message(s) redriven, 0 failed"), "{out}");
    assert!(standins.aws.queue(&queue).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redrive_stops_once_the_queue_counts_no_visible_message() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    standins.aws.send_message(&queue, "not an event");
    let (ok, out) = redrive(
        &standins,
        &["--queue", &queue, "--local", "--wait-seconds", "2"],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("1 message(s) redriven, 1 failed"), "{out}");
    // The receive that got the message, one that came back empty, then the counts (the kept
    // message is not visible): and it stops there, however long each took.
    assert_eq!(
        standins.shared.count(|r| r.operation == "ReceiveMessage"),
        2,
        "{out}"
    );
    assert_eq!(
        standins
            .shared
            .count(|r| r.operation == "GetQueueAttributes"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_shard_parked_after_its_receives_runs_again_locally() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    // What SQS's redrive policy moves: the shard's body as the coordinator sent it.
    let shard = json!({"action": "reconcile-shard", "sweep": "s-1", "cluster": "barun-dev",
        "shard": 1, "shards": 1,
        "applications": [{"namespace": "argocd", "name": "aws-pipeline-test"}]});
    standins.aws.send_message(&queue, &shard.to_string());
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--local",
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(
        standins.kube.seed_tag().as_deref(),
        Some(PUSHED_TAG),
        "{out}"
    );
    assert!(standins.aws.queue(&queue).is_empty(), "{out}");
}

/// The function's name as the stand-ins' deployed stack has it.
fn function(standins: &StandIns) -> String {
    standins.aws.deployed().function_name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_hands_each_parked_event_to_the_deployed_function_and_deletes_what_it_accepted() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    let original = sample_event("push-date-tag.json");
    standins.aws.send_message(&queue, &original.to_string());
    let late = push_event("barun-dev-ecr", "20250824-093000", "2025-08-24T00:30:05Z");
    let record = json!({"version": "1.0", "timestamp": "2025-08-25T06:31:00.000Z",
        "requestContext": {"requestId": "r", "condition": "RetriesExhausted", "approximateInvokeCount": 3,
                           "functionArn": "arn:aws:lambda:ap-northeast-2:768157413559:function:argocd-ecr-updater"},
        "requestPayload": late, "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "responsePayload": {"errorType": "Retryable.TargetsFailed", "errorMessage": "403 patching"}});
    standins.aws.send_message(&queue, &record.to_string());
    let shard = json!({"action": "reconcile-shard", "sweep": "s-1", "cluster": "barun-dev",
        "shard": 1, "shards": 1,
        "applications": [{"namespace": "argocd", "name": "aws-pipeline-test"}]});
    standins.aws.send_message(&queue, &shard.to_string());
    let function = function(&standins);

    // A dry run says what it would hand on, and hands on nothing.
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--function",
            &function,
            "--wait-seconds",
            "1",
        ],
    );
    assert!(!ok, "the shard is not redriven: {out}");
    assert!(
        out.contains(&format!(
            "push barun-dev-ecr:{PUSHED_TAG} -> would invoke {function}"
        )),
        "{out}"
    );
    assert!(
        out.contains("(it failed with Retryable.TargetsFailed: 403 patching)"),
        "{out}"
    );
    assert!(
        out.contains("the function takes shards from its sweep queue only"),
        "{out}"
    );
    assert!(standins.aws.invocations().is_empty());
    assert_eq!(standins.aws.queue(&queue).len(), 3);

    // With --apply each event goes to the function as EventBridge sends it: the rule's copy
    // as it was, the on-failure record unwrapped; nothing runs here, and nothing is written.
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--function",
            &function,
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("3 message(s) redriven, 1 failed"), "{out}");
    let invoked = standins.aws.invocations();
    assert_eq!(invoked.len(), 2, "{invoked:?}");
    assert!(
        invoked
            .iter()
            .all(|(name, kind, _)| *name == function && kind == "Event")
    );
    let payloads: Vec<&serde_json::Value> = invoked.iter().map(|(_, _, p)| p).collect();
    assert!(
        payloads.contains(&&original) && payloads.contains(&&late),
        "{payloads:?}"
    );
    assert_eq!(
        standins.kube.seed_tag().as_deref(),
        Some(SEED_TAG),
        "the function decides, not the laptop"
    );
    let left = standins.aws.queue(&queue);
    assert_eq!(left.len(), 1, "only the shard stays");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&left[0].body).unwrap(),
        shard
    );
    // Each invocation reached Lambda's API signed with the credentials redrive was run with.
    assert_eq!(
        standins
            .shared
            .count(|r| r.path.ends_with("/invocations") && !r.caller.is_empty()),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_the_function_does_not_accept_stays_in_the_queue() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    standins
        .aws
        .send_message(&queue, &sample_event("push-date-tag.json").to_string());
    standins.aws.deployment(|d| {
        d.refused
            .insert("Invoke".into(), "AccessDeniedException".into());
    });
    let function = function(&standins);
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--function",
            &function,
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "invoking {function} failed: AccessDeniedException"
        )),
        "{out}"
    );
    assert!(out.contains("-> kept"), "{out}");
    assert_eq!(standins.aws.queue(&queue).len(), 1);
    // A function that is not there is named as such.
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--function",
            "not-deployed",
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(!ok);
    assert!(out.contains("invoking not-deployed failed"), "{out}");
    assert_eq!(standins.aws.queue(&queue).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_lists_what_it_would_delete_and_deletes_only_with_apply() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-sweep-dlq");
    let shard = json!({"action": "reconcile-shard", "sweep": "s-1", "cluster": "barun-dev",
        "shard": 2, "shards": 3, "applications": [{"namespace": "argocd", "name": "a"}]});
    standins.aws.send_message(&queue, &shard.to_string());
    standins.aws.send_message(&queue, "not an event");
    let (ok, out) = redrive(
        &standins,
        &["--queue", &queue, "--discard", "--wait-seconds", "1"],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("sweep shard 2/3 of barun-dev (1 Applications) -> would be deleted"),
        "{out}"
    );
    assert!(
        out.contains("a message that is not JSON -> would be deleted"),
        "{out}"
    );
    assert_eq!(standins.aws.queue(&queue).len(), 2);
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--discard",
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("2 message(s) discarded, 0 failed"), "{out}");
    assert!(standins.aws.queue(&queue).is_empty());
    assert!(standins.aws.invocations().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_without_a_way_to_handle_the_events_says_which_to_choose() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-dlq");
    let (ok, out) = redrive(&standins, &["--queue", &queue]);
    assert!(!ok);
    assert!(out.contains("--function"), "{out}");
    let (ok, out) = redrive(&standins, &["--queue", &queue, "--local", "--discard"]);
    assert!(!ok);
    assert!(out.contains("cannot be used with"), "{out}");
}

/// A rollout check parked in the sweep dead-letter queue is known for what it is: handed to
/// the function (which takes a check sent directly as from its queue), run here, or
/// discarded saying what is lost; never read as a malformed event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_rollout_check_is_redriven_as_a_check_and_its_discard_says_what_is_lost() {
    let standins = StandIns::start_seeded().await.unwrap();
    let queue = standins.aws.create_queue("argocd-ecr-updater-sweep-dlq");
    let check = json!({"action": "confirm-rollout", "cluster": "barun-dev",
        "namespace": "argocd", "name": "aws-pipeline-test",
        "write": "2026-12-03T10:00:00Z", "check": 3});
    standins.aws.send_message(&queue, &check.to_string());
    let (ok, out) = redrive(
        &standins,
        &["--queue", &queue, "--discard", "--wait-seconds", "1"],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("rollout check 3 of argocd/aws-pipeline-test (barun-dev), write 2026-12-03T10:00:00Z, whose outcome is then never reported"),
        "{out}"
    );
    // Run here: judged as a check (the Application carries no record of ours), not refused as
    // an event.
    let (_, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--local",
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(!out.contains("MalformedEvent"), "{out}");
    assert!(
        out.contains("rollout of argocd/aws-pipeline-test: unfollowed"),
        "{out}"
    );
    // Handed to the deployed function as it is.
    standins.aws.send_message(&queue, &check.to_string());
    let function = function(&standins);
    let (ok, out) = redrive(
        &standins,
        &[
            "--queue",
            &queue,
            "--function",
            &function,
            "--apply",
            "--wait-seconds",
            "1",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("-> invoked"), "{out}");
    let invoked = standins.aws.invocations();
    assert_eq!(invoked.len(), 1);
    assert_eq!(invoked[0].2, check);
    assert!(standins.aws.queue(&queue).is_empty());
}
