//! Release controls end to end: a freeze set on the Application or on the ImageUpdater
//! object that configures it holds every write, on a push and on a sweep, while the decision
//! is still reported; when the freeze ends, the next event rolls out the newest image.

use crate::common::{Scenario, event, expect_decision, only, seed_tag};
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG, seed_image_updater};
use serde_json::{Value, json};

const FREEZE: &str = "argocd-ecr-updater.io/freeze";

#[tokio::test]
async fn a_frozen_application_is_decided_and_reported_but_not_written_on_a_push() {
    let standins = Scenario::seeded().await;
    standins.annotate("argocd", SEED_APP, &[(FREEZE, "true")]);
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    let entry = only(&report);
    expect_decision(
        entry,
        Action::Skipped,
        &format!(
            "frozen by `{FREEZE}` on the Application: would update `{SEED_TAG}` to `{PUSHED_TAG}`"
        ),
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    assert_eq!(standins.kube_requests("PATCH"), 0, "nothing written");
    // Lifted: the same event again rolls the image out.
    standins.annotate("argocd", SEED_APP, &[(FREEZE, "false")]);
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));
}

#[tokio::test]
async fn a_freeze_until_a_time_holds_before_it_and_not_after_it() {
    let standins = Scenario::seeded().await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[(FREEZE, "until=2999-01-01T00:00:00Z")],
    );
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Skipped, "until 2999-01-01T00:00:00Z");
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    standins.annotate(
        "argocd",
        SEED_APP,
        &[(FREEZE, "until=2020-01-01T00:00:00Z")],
    );
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));
}

#[tokio::test]
async fn a_sweep_during_a_freeze_writes_nothing_and_the_first_sweep_after_it_rolls_out() {
    let standins = Scenario::seeded().await;
    standins.annotate("argocd", SEED_APP, &[(FREEZE, "true")]);
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(only(&report), Action::Skipped, "frozen by");
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            if let Some(map) = app["metadata"]["annotations"].as_object_mut() {
                map.remove(FREEZE);
            }
        })
        .unwrap();
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(only(&report), Action::Updated, "is the best allowed tag");
    assert_eq!(seed_tag(&standins).as_deref(), Some(PUSHED_TAG));
}

#[tokio::test]
async fn an_unreadable_freeze_writes_nothing_and_says_how_to_write_one() {
    let standins = Scenario::seeded().await;
    standins.annotate("argocd", SEED_APP, &[(FREEZE, "until=friday")]);
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "is not an RFC 3339 time");
    assert!(
        !entry.retryable,
        "the user's to fix: Lambda retrying cannot help"
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
}

#[tokio::test]
async fn a_freeze_on_the_imageupdater_object_holds_every_application_it_configures() {
    let standins = Scenario::seeded().await;
    standins.strip_image_updater_annotations("argocd", SEED_APP);
    let mut object = seed_image_updater();
    object["metadata"]["annotations"] = json!({FREEZE: "true"});
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    standins.kube.insert_image_updater(object).unwrap();
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        &format!("frozen by `{FREEZE}` on ImageUpdater argocd/{name}"),
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
}

/// `pin-digest`: the chosen tag is written with the digest ECR says it points to; the same
/// tag pushed again moves the pin, and the same event delivered twice writes once.
#[tokio::test]
async fn a_pinned_image_is_written_with_its_digest_and_a_repush_of_the_tag_moves_it() {
    use argocd_ecr_updater_standins::fixtures::{digest, image, push_event};
    let standins = Scenario::seeded().await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/app.pin-digest", "true")],
    );
    let pushed = event("push-date-tag.json");
    let first_digest = pushed["detail"]["image-digest"]
        .as_str()
        .unwrap()
        .to_string();
    let report = standins.report(&[], &pushed).await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    let pinned = format!("{PUSHED_TAG}@{first_digest}");
    assert_eq!(seed_tag(&standins).as_deref(), Some(pinned.as_str()));
    // The same event again: the same digest is already pinned.
    let report = standins.report(&[], &pushed).await;
    expect_decision(only(&report), Action::Unchanged, "already running");
    assert_eq!(
        standins.kube_requests("PATCH"),
        1,
        "one write for two deliveries"
    );
    // CI pushes the same tag again: a new image behind a tag that was live.
    standins.aws.push(image(
        "barun-dev-ecr",
        PUSHED_TAG,
        '7',
        "2025-08-25T07:00:00Z",
    ));
    let repushed = push_event("barun-dev-ecr", PUSHED_TAG, "2025-08-25T07:00:01Z");
    let report = standins.report(&[], &repushed).await;
    expect_decision(
        only(&report),
        Action::Updated,
        "was pushed again: the pinned digest moves",
    );
    let moved = format!("{PUSHED_TAG}@{}", digest('7'));
    assert_eq!(seed_tag(&standins).as_deref(), Some(moved.as_str()));
    // A sweep finds the pin current.
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    assert_eq!(
        only(&report).action,
        Action::Unchanged,
        "{}",
        only(&report).reason
    );
}

/// The seed Application as it is after a manual rollback: our write moved it from the seed's
/// tag to the pushed one (deployed), and someone rolled it back to the seed's tag with
/// `kubectl edit` (its field manager now holds the Helm parameters), which Argo CD deployed
/// on 2025-08-26.
fn rolled_back(standins: &Scenario) {
    for (manager, tag) in [
        ("argocd-ecr-updater", PUSHED_TAG),
        ("kubectl-edit", SEED_TAG),
    ] {
        standins
            .kube
            .edit_as(manager, "argocd", SEED_APP, |app| {
                let parameters = app["spec"]["source"]["helm"]["parameters"].as_array_mut();
                for parameter in parameters.unwrap() {
                    if parameter["name"] == "image.tag" {
                        parameter["value"] = json!(tag);
                    }
                }
            })
            .unwrap();
    }
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            let audit = json!({"time": "2025-08-25T07:00:00Z", "eventId": "e",
                "images": [{"alias": "app", "image": argocd_ecr_updater_standins::fixtures::SEED_IMAGE,
                            "from": SEED_TAG, "to": PUSHED_TAG}]});
            app["metadata"]["annotations"]["argocd-ecr-updater.io/last-update"] =
                json!(audit.to_string());
            let source = |tag: &str| {
                let mut source = app["spec"]["source"].clone();
                for parameter in source["helm"]["parameters"].as_array_mut().unwrap() {
                    if parameter["name"] == "image.tag" {
                        parameter["value"] = json!(tag);
                    }
                }
                source
            };
            app["status"]["history"] = json!([
                {"id": 1, "deployedAt": "2025-08-25T07:01:00Z", "source": source(PUSHED_TAG)},
                {"id": 2, "deployedAt": "2025-08-26T00:00:00Z", "source": source(SEED_TAG)},
            ]);
        })
        .unwrap();
}

#[tokio::test]
async fn a_manual_rollback_sticks_until_an_image_pushed_after_it() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    let standins = Scenario::seeded().await;
    rolled_back(&standins);
    // The rolled-back image's push delivered again (a retry, a redrive): respected.
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        &format!(
            "respecting a manual rollback from `{PUSHED_TAG}` to `{SEED_TAG}`, deployed 2025-08-26T00:00:00Z"
        ),
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    // A sweep finds the rolled-back image the newest, and respects the rollback too.
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "respecting a manual rollback",
    );
    // The one write: the rollback remembered, once, whatever respects it again.
    assert_eq!(standins.kube_requests("PATCH"), 1);
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let remembered = app["metadata"]["annotations"]["argocd-ecr-updater.io/rollbacks"]
        .as_str()
        .unwrap();
    assert!(remembered.contains("2025-08-26T00:00:00Z"), "{remembered}");
    // One RollbackRespected Event for the rollback, however often it is respected.
    let recorded: Vec<_> = standins
        .kube
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "RollbackRespected")
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    assert!(recorded[0]["message"].as_str().unwrap().contains(SEED_TAG));
    // The fix, pushed after the rollback, rolls out.
    standins.aws.push(image(
        "barun-dev-ecr",
        "20250827-090000",
        '8',
        "2025-08-27T00:00:00Z",
    ));
    let fix = push_event("barun-dev-ecr", "20250827-090000", "2025-08-27T00:00:01Z");
    let report = standins.report(&[], &fix).await;
    expect_decision(only(&report), Action::Updated, "ranks above");
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250827-090000"));
}

/// The stand-in's `sweep` queue by ARN.
const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";

/// The seed with a sweep queue and a 4-second soak set by `key`, on a test clock (the
/// function's too: a soak's window passes when the test moves it); the queue's URL.
async fn soaking(key: &str) -> (Scenario, String) {
    let clock = std::sync::Arc::new(argocd_ecr_updater_standins::clock::SimClock::scripted());
    let standins = Scenario::seeded().await.on_clock(clock);
    let queue = standins.aws.create_queue("sweep");
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", SWEEP_ARN);
    standins.annotate("argocd", SEED_APP, &[(key, "4s")]);
    (standins, queue)
}

/// `min-age`: an image is written once it has been in ECR that long, by ECR's push time. The
/// push inside the window is held, and a follow-up on the sweep queue, delayed to the
/// window's end, re-decides the Application; the same push delivered twice writes once.
#[tokio::test]
async fn a_soaking_image_is_held_and_its_follow_up_after_the_window_writes_it_once() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    use time::format_description::well_known::Rfc3339;
    let (standins, queue) = soaking("argocd-ecr-updater.io/app.min-age").await;
    // Pushed a second ago, by ECR's clock: inside its 4-second window.
    let pushed_at = standins.test_clock().now() - time::Duration::seconds(1);
    let tag = "20991231-000000";
    standins.aws.push(image(
        "barun-dev-ecr",
        tag,
        '6',
        &pushed_at.format(&Rfc3339).unwrap(),
    ));
    let event = push_event("barun-dev-ecr", tag, &pushed_at.format(&Rfc3339).unwrap());
    for follow_up in [
        "re-decided in",
        "no follow-up sent: its follow-up chain already follows",
    ] {
        let report = standins.report(&[], &event).await;
        expect_decision(
            only(&report),
            Action::Skipped,
            "soaking: `20991231-000000` was pushed",
        );
        expect_decision(only(&report), Action::Skipped, "min-age 4s");
        expect_decision(only(&report), Action::Skipped, follow_up);
    }
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    let queued = standins.aws.queue(&queue);
    assert_eq!(queued.len(), 1, "one follow-up for both deliveries");
    for message in &queued {
        let delay = message.delay_seconds;
        assert!(
            (1..=5).contains(&delay),
            "delayed to the window's end: {delay} s"
        );
    }
    // SQS hands the follow-ups out after their delay; by then the image has soaked.
    standins
        .test_clock()
        .advance(std::time::Duration::from_secs(4));
    for message in queued {
        let batch = json!({"Records": [{"messageId": message.id, "eventSource": "aws:sqs",
            "eventSourceARN": SWEEP_ARN, "body": message.body}]});
        standins.report(&[], &batch).await;
    }
    assert_eq!(seed_tag(&standins).as_deref(), Some(tag));
    assert_eq!(standins.spec_writes(), 1, "two deliveries, one write");
}

/// One chain of follow-ups per candidate, however many pushes and sweeps see it soak: its
/// push starts the chain, sweeps early in a long window send nothing, each hop of the chain
/// sends the next, and a sweep in the window's last 15 minutes sends the last hop (it lands
/// on the window's end even where no chain was started). A chain per sweep made a 7-day soak
/// cost the square of its sweeps.
#[tokio::test]
async fn one_push_and_three_sweeps_leave_one_chain_of_follow_ups() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    use time::format_description::well_known::Rfc3339;
    let (standins, queue) = soaking("argocd-ecr-updater.io/min-age").await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/min-age", "2h")],
    );
    let at = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap();
    let tag = "20991231-000000";
    let pushed = standins.test_clock().now();
    standins
        .aws
        .push(image("barun-dev-ecr", tag, '6', &at(pushed)));
    let report = standins
        .report(&[], &push_event("barun-dev-ecr", tag, &at(pushed)))
        .await;
    expect_decision(only(&report), Action::Skipped, "re-decided in 900 s");
    for _ in 0..3 {
        let report = standins
            .report(&[], &event("scheduled-reconcile.json"))
            .await;
        expect_decision(
            only(&report),
            Action::Skipped,
            "no follow-up sent: the chain its push started re-decides it",
        );
    }
    let sent = standins.aws.queue(&queue);
    assert_eq!(sent.len(), 1, "one chain, started by the push");
    let hop: Value = serde_json::from_str(&sent[0].body).unwrap();
    assert_eq!(
        hop["soak"],
        json!({"image": "768157413559/barun-dev-ecr", "candidate": tag, "hop": 1})
    );
    assert_eq!(sent[0].delay_seconds, 900);
    // The hop, delivered: still soaking, it sends the next hop, and only that.
    let record = json!({"Records": [{"messageId": sent[0].id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": sent[0].body}]});
    let report = standins.report(&[], &record).await;
    expect_decision(only(&report), Action::Skipped, "re-decided in 900 s");
    assert_eq!(standins.aws.queue(&queue).len(), 2);
    // A hop for a candidate no longer held ends its chain.
    let mut stale: Value = serde_json::from_str(&sent[0].body).unwrap();
    stale["soak"]["candidate"] = json!("20991230-000000");
    let record = json!({"Records": [{"messageId": "stale-hop", "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": stale.to_string()}]});
    let report = standins.report(&[], &record).await;
    expect_decision(only(&report), Action::Skipped, "no follow-up sent");
    assert_eq!(standins.aws.queue(&queue).len(), 2);
    // In the window's last 15 minutes a sweep sends the last hop, to a second past its end.
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/min-age", "10m")],
    );
    standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    let sent = standins.aws.queue(&queue);
    assert_eq!(sent.len(), 3);
    assert!(
        (595..=601).contains(&sent[2].delay_seconds),
        "{}",
        sent[2].delay_seconds
    );
    // It took the chain over: the hop it replaced, arriving later, ends there.
    let replaced = json!({"Records": [{"messageId": sent[1].id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": sent[1].body}]});
    let report = standins.report(&[], &replaced).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "no follow-up sent: hop 2 was delivered again or replaced: hop 3",
    );
    assert_eq!(standins.aws.queue(&queue).len(), 3);
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
}

/// A newer push inside the soak window supersedes the older one: when the older one's window
/// ends, the newer is the best candidate, still soaking, so nothing is written until it has
/// soaked in turn; the older image is never written.
#[tokio::test]
async fn a_newer_push_inside_the_window_supersedes_the_soaking_one() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    use time::format_description::well_known::Rfc3339;
    let (standins, queue) = soaking("argocd-ecr-updater.io/min-age").await;
    let now = standins.test_clock().now();
    let at = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap();
    let (older, newer) = ("20991230-000000", "20991231-000000");
    let older_at = now - time::Duration::seconds(3);
    standins
        .aws
        .push(image("barun-dev-ecr", older, '4', &at(older_at)));
    standins
        .report(&[], &push_event("barun-dev-ecr", older, &at(older_at)))
        .await;
    standins
        .aws
        .push(image("barun-dev-ecr", newer, '5', &at(now)));
    standins
        .report(&[], &push_event("barun-dev-ecr", newer, &at(now)))
        .await;
    let follow_up = |message: argocd_ecr_updater_standins::aws::QueueMessage| {
        json!({"Records": [{"messageId": message.id, "eventSource": "aws:sqs",
            "eventSourceARN": SWEEP_ARN, "body": message.body}]})
    };
    // The older image's window is over, the newer one's is not.
    standins
        .test_clock()
        .advance(std::time::Duration::from_millis(1500));
    let first = standins.aws.queue(&queue).remove(0);
    let report = standins.report(&[], &follow_up(first)).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        &format!("soaking: `{newer}`"),
    );
    assert_eq!(
        seed_tag(&standins).as_deref(),
        Some(SEED_TAG),
        "the older image is never written"
    );
    // The newer image's window is over: its follow-up writes it.
    standins
        .test_clock()
        .advance(std::time::Duration::from_secs(3));
    for message in standins.aws.queue(&queue) {
        standins.report(&[], &follow_up(message)).await;
    }
    assert_eq!(seed_tag(&standins).as_deref(), Some(newer));
    assert_eq!(standins.spec_writes(), 1);
}

/// What `plan` runs (the pipeline in a dry run) reports each control as the function would:
/// a freeze, a soak and a rollback as their skips, a pin as the value it would write.
#[tokio::test]
async fn a_dry_run_reports_each_control_as_a_real_run_would_decide() {
    let dry = [("DRY_RUN", "true")];
    let frozen = Scenario::seeded().await;
    frozen.annotate("argocd", SEED_APP, &[(FREEZE, "true")]);
    let report = frozen.report(&dry, &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Skipped, "frozen by");

    let rolled = Scenario::seeded().await;
    rolled_back(&rolled);
    let report = rolled.report(&dry, &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "respecting a manual rollback",
    );
    assert!(
        rolled.kube.events().is_empty(),
        "a dry run records no Event"
    );

    let pinned = Scenario::seeded().await;
    pinned.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/pin-digest", "true")],
    );
    let report = pinned.report(&dry, &event("push-date-tag.json")).await;
    let entry = only(&report);
    expect_decision(entry, Action::Updated, "dry run");
    assert!(
        entry
            .to
            .as_deref()
            .is_some_and(|to| to.starts_with(&format!("{PUSHED_TAG}@sha256:"))),
        "{:?}",
        entry.to
    );
    for standins in [&frozen, &rolled, &pinned] {
        assert_eq!(standins.kube_requests("PATCH"), 0);
        assert_eq!(seed_tag(standins).as_deref(), Some(SEED_TAG));
    }
}

/// The soak decides when and the gates whether: the hop at the window's end judges the image
/// on what ECR says then (Amazon Inspector re-scans an image as new findings are published,
/// so a clean scan at push time may not be clean a week later).
#[tokio::test]
async fn a_soaking_image_meets_its_gates_on_what_ecr_says_when_its_window_ends() {
    use argocd_ecr_updater_standins::fixtures::image;
    use time::format_description::well_known::Rfc3339;
    let (standins, queue) = soaking("argocd-ecr-updater.io/app.min-age").await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/app.scan-gate", "critical=0")],
    );
    let at = |t: time::OffsetDateTime| t.format(&Rfc3339).unwrap();
    let pushed = standins.test_clock().now() - time::Duration::seconds(1);
    // Clean when scanned: it soaks, with one follow-up at the window's end.
    let (good, good_digest) = ("20991231-000000", format!("sha256:{}", "6".repeat(64)));
    standins
        .aws
        .push(image("barun-dev-ecr", good, '6', &at(pushed)));
    standins
        .aws
        .set_scan("barun-dev-ecr", &good_digest, "COMPLETE", &[]);
    let scan = crate::common::scan_event(good, &good_digest, json!({}));
    let report = standins.report(&[], &scan).await;
    expect_decision(only(&report), Action::Skipped, "soaking: `20991231-000000`");
    let queued = standins.aws.queue(&queue);
    assert_eq!(queued.len(), 1, "one follow-up");

    // A critical finding published during the soak: the hop at the window's end holds it.
    standins.aws.set_scan(
        "barun-dev-ecr",
        &good_digest,
        "COMPLETE",
        &[("CRITICAL", 1)],
    );
    standins
        .test_clock()
        .advance(std::time::Duration::from_secs(4));
    let message = &queued[0];
    let batch = json!({"Records": [{"messageId": message.id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": message.body}]});
    let report = standins.report(&[], &batch).await;
    expect_decision(only(&report), Action::Skipped, "critical 1 > 0");
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
    assert_eq!(standins.spec_writes(), 0, "nothing written");

    // Cleared (the finding suppressed or fixed upstream): the next sweep writes it.
    standins
        .aws
        .set_scan("barun-dev-ecr", &good_digest, "COMPLETE", &[]);
    let report = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(only(&report), Action::Updated, "its scan passed scan-gate");
    expect_decision(only(&report), Action::Updated, "soaked 4s");
    assert_eq!(seed_tag(&standins).as_deref(), Some(good));
}
