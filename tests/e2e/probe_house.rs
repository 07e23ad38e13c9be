//! Probes of the scan gate behind `Gate` and of the order of the soak and the gates, as an
//! adversary found them, against the stand-ins: a signature made after the push, a soak hop
//! inside the window, a gated push waiting for its scan, a scan event delivered twice or
//! after its tag moved. Each finding failed while every gate ran before the soak; the soak
//! now runs first and the platforms last.

use crate::common::{Scenario, expect_decision, only, scan_event, seed_tag};
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::Service;
use argocd_ecr_updater_standins::cosign;
use argocd_ecr_updater_standins::fixtures::{SEED_APP, SEED_TAG, digest, image, push_event};
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";
const REPO: &str = "barun-dev-ecr";
const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";
const PROFILE_ARN: &str =
    "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod";
const SIGNING: (&str, &str) = ("argocd-ecr-updater.io/app.signing-profile", "release_prod");
const FRESH: &str = "20991231-000000";

/// The seed on the test's clock, with a sweep queue, `min-age` and `annotations`.
async fn soaking(min_age: &str, annotations: &[(&str, &str)]) -> (Scenario, String) {
    let (standins, queue) = queued(annotations).await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/app.min-age", min_age)],
    );
    (standins, queue)
}

/// The seed on the test's clock, with a sweep queue and `annotations`.
async fn queued(annotations: &[(&str, &str)]) -> (Scenario, String) {
    let clock = std::sync::Arc::new(argocd_ecr_updater_standins::clock::SimClock::scripted());
    let standins = Scenario::seeded().await.on_clock(clock);
    let queue = standins.aws.create_queue("sweep");
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", SWEEP_ARN)
        .var("CONFIRM_ROLLOUTS", "false");
    standins.annotate("argocd", SEED_APP, annotations);
    (standins, queue)
}

fn at(t: time::OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap()
}

/// A fresh image `FRESH` (digest of `6`s) pushed a second ago by ECR's clock, and its push
/// event.
fn push_fresh(standins: &Scenario) -> (String, Value) {
    let pushed = at(standins.test_clock().now() - time::Duration::seconds(1));
    standins.aws.push(image(REPO, FRESH, '6', &pushed));
    (digest('6'), push_event(REPO, FRESH, &pushed))
}

fn batch_of(id: &str, body: &str) -> Value {
    json!({"Records": [{"messageId": id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": body}]})
}

fn is_soak_hop(body: &str) -> bool {
    serde_json::from_str::<Value>(body).is_ok_and(|b| b["soak"].is_object())
}

/// SQS as time passes, with no scheduled sweep: each follow-up not yet delivered is delivered
/// once its delay has passed (the clock moved on by it), until none is left or `max` were
/// delivered. The reports, in order.
async fn run_follow_ups(standins: &Scenario, queue: &str, max: usize) -> Vec<Report> {
    let mut delivered = std::collections::BTreeSet::new();
    let mut reports = Vec::new();
    while reports.len() < max {
        let Some(next) = standins
            .aws
            .queue(queue)
            .into_iter()
            .find(|m| !delivered.contains(&m.id))
        else {
            break;
        };
        delivered.insert(next.id.clone());
        standins
            .test_clock()
            .advance(std::time::Duration::from_secs(next.delay_seconds.into()));
        reports.push(standins.settled(&[], &batch_of(&next.id, &next.body)).await);
    }
    reports
}

fn ecr_calls(standins: &Scenario, operation: &str) -> usize {
    standins
        .shared
        .count(|r| r.service == Service::Ecr && r.operation == operation)
}

fn reasons(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .flat_map(|r| {
            r.entries
                .iter()
                .map(|e| format!("{:?}: {}", e.action, e.reason))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Findings (each failed while every gate ran before the soak)
// ---------------------------------------------------------------------------------------

/// Found: a push whose managed signing is still IN_PROGRESS (the usual case: ECR signs
/// after the push) is held by the signing gate before the soak is ever reached, and the
/// signing re-decision a minute later is a sweep-shaped follow-up that is not "its push": the
/// soak then sends no chain for a window longer than 15 minutes. Nothing re-decides the image
/// at the window's end; it waits for whatever sweep happens to come. The old order (soak
/// before the signing gate) started the chain from the push, and the last hop wrote it.
#[tokio::test]
async fn a_push_held_for_its_signature_still_ships_when_its_soak_ends() {
    let (standins, queue) = soaking("20m", &[SIGNING]).await;
    let (digest, push) = push_fresh(&standins);
    standins
        .aws
        .set_signing(REPO, &digest, &[(PROFILE_ARN, "IN_PROGRESS")]);
    let held = standins.report(&[], &push).await;
    assert_eq!(
        only(&held).action,
        Action::Skipped,
        "{}",
        only(&held).reason
    );
    // AWS Signer finishes within the minute.
    standins
        .aws
        .set_signing(REPO, &digest, &[(PROFILE_ARN, "COMPLETE")]);
    let reports = run_follow_ups(&standins, &queue, 10).await;
    let chain = standins
        .aws
        .queue(&queue)
        .iter()
        .filter(|m| is_soak_hop(&m.body))
        .count();
    assert!(
        chain > 0,
        "no soak chain was ever started for the candidate; push said `{}`, then {:#?}",
        only(&held).reason,
        reasons(&reports)
    );
    assert_eq!(
        seed_tag(&standins).as_deref(),
        Some(FRESH),
        "not written at the window's end: {:#?}",
        reasons(&reports)
    );
}

/// Found: cosign signs after `docker push` (the `.sig` tag comes seconds later), so the push
/// of an image with a cosign key and a soak is refused "not signed" at once and starts no
/// chain; once signed, nothing re-decides it at the window's end (only a sweep that happens
/// to run in its last 15 minutes, or after it). Before, the push started the chain and the
/// hop at the window's end checked the signature, which was there by then.
#[tokio::test]
async fn an_image_signed_just_after_its_push_ships_when_its_soak_ends() {
    let (private, public) = cosign::key_pair().unwrap();
    let (standins, queue) =
        soaking("20m", &[("argocd-ecr-updater.io/app.cosign-key", &public)]).await;
    let (digest, push) = push_fresh(&standins);
    let first = standins.settled(&[], &push).await;
    // `cosign sign` right after the push.
    let payload = cosign::payload(IMAGE, &digest);
    cosign::store_signature(&standins.aws, REPO, &digest, &private, &payload).unwrap();
    let reports = run_follow_ups(&standins, &queue, 10).await;
    assert_eq!(
        seed_tag(&standins).as_deref(),
        Some(FRESH),
        "a signed, soaked image is not written at the window's end; its push said `{}`, then {:#?}",
        only(&first).reason,
        reasons(&reports)
    );
}

/// Found (cost): a soak hop in the middle of the window re-asks every gate's facts though
/// the soak holds the image anyway (one DescribeImageSigningStatus per hop here; the cosign
/// gate's BatchGetImage, blob download and Notation's referrers likewise). A 7-day soak is
/// 673 hops (docs/operations.md). Before, the soak held the image first and the gates ran
/// only on the hop that could write.
#[tokio::test]
async fn a_soak_hop_inside_the_window_asks_ecr_for_no_gate_fact() {
    let (standins, queue) = soaking("40m", &[SIGNING]).await;
    let (digest, push) = push_fresh(&standins);
    standins
        .aws
        .set_signing(REPO, &digest, &[(PROFILE_ARN, "COMPLETE")]);
    let report = standins.report(&[], &push).await;
    expect_decision(only(&report), Action::Skipped, "soaking:");
    let before = ecr_calls(&standins, "DescribeImageSigningStatus");
    // The chain's first two hops land inside the 40-minute window.
    let reports = run_follow_ups(&standins, &queue, 2).await;
    assert_eq!(reports.len(), 2);
    for r in &reports {
        expect_decision(only(r), Action::Skipped, "soaking:");
    }
    let during = ecr_calls(&standins, "DescribeImageSigningStatus") - before;
    assert_eq!(
        during, 0,
        "DescribeImageSigningStatus called {during} times by two hops that could not write"
    );
}

/// Found (cost): the platform check now runs before the gates, so the push of a scan-gated
/// image reads its manifest (BatchGetImage) only to be told "waiting for the scan"; the scan
/// event reads it again. Before, the scan gate held the push first and the manifest was read
/// once, on the scan event.
#[tokio::test]
async fn a_gated_push_that_waits_for_its_scan_reads_no_manifest() {
    use argocd_ecr_updater_standins::fixtures::multi_arch_image;
    let standins = Scenario::seeded().await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[
            ("argocd-ecr-updater.io/app.scan-gate", "critical=0"),
            ("app.platforms", "linux/amd64"),
        ],
    );
    let pushed = at(time::OffsetDateTime::now_utc());
    standins.aws.push(multi_arch_image(
        REPO,
        FRESH,
        '6',
        &pushed,
        &["linux/amd64", "linux/arm64"],
    ));
    let before = ecr_calls(&standins, "BatchGetImage");
    let report = standins
        .report(&[], &push_event(REPO, FRESH, &pushed))
        .await;
    expect_decision(only(&report), Action::Skipped, "waiting for the scan");
    let read = ecr_calls(&standins, "BatchGetImage") - before;
    assert_eq!(
        read, 0,
        "{read} manifest reads for a push that waits anyway"
    );
}

// ---------------------------------------------------------------------------------------
// Controls (pass): what was checked and holds
// ---------------------------------------------------------------------------------------

/// CONTROL: scan gate + min-age: the push starts the one chain (the scan event, delivered
/// twice, finds it), no finding is asked inside the window, the window's last hop reads
/// ECR's findings, not the event's, and writes once.
#[tokio::test]
async fn control_a_scanned_image_soaks_on_one_chain_and_ships_at_the_end() {
    let (standins, queue) = soaking(
        "20m",
        &[("argocd-ecr-updater.io/app.scan-gate", "critical=0")],
    )
    .await;
    let (digest, push) = push_fresh(&standins);
    // The push starts the candidate's chain; the scan is judged when the window ends.
    let soaking = standins.report(&[], &push).await;
    expect_decision(only(&soaking), Action::Skipped, "re-decided in 900 s");
    assert_eq!(standins.aws.queue(&queue).len(), 1);
    let scans_at_push = ecr_calls(&standins, "DescribeImageScanFindings");
    assert_eq!(scans_at_push, 0, "no finding asked while it soaks");
    standins.aws.set_scan(REPO, &digest, "COMPLETE", &[]);
    // The event claims criticals; ECR's findings are clean: ECR's word counts.
    let scan = scan_event(FRESH, &digest, json!({"CRITICAL": 9}));
    for _ in 0..2 {
        let again = standins.report(&[], &scan).await;
        expect_decision(only(&again), Action::Skipped, "already follows");
    }
    assert_eq!(standins.aws.queue(&queue).len(), 1, "one chain");
    let reports = run_follow_ups(&standins, &queue, 5).await;
    assert_eq!(
        seed_tag(&standins).as_deref(),
        Some(FRESH),
        "{:#?}",
        reasons(&reports)
    );
    assert!(ecr_calls(&standins, "DescribeImageScanFindings") > scans_at_push);
    assert_eq!(standins.spec_writes(), 1);
}

/// CONTROL: a scan of the digest the tag pointed at before a re-push releases nothing: not
/// at the end of the re-pushed tag's window, nor delivered again after it.
#[tokio::test]
async fn control_a_stale_scan_after_the_tag_moved_never_releases_its_new_digest() {
    let (standins, queue) = soaking(
        "20m",
        &[("argocd-ecr-updater.io/app.scan-gate", "critical=0")],
    )
    .await;
    let (old_digest, _) = push_fresh(&standins);
    standins.aws.set_scan(REPO, &old_digest, "COMPLETE", &[]);
    // Re-pushed: `FRESH` now names the 7s, not scanned yet.
    let pushed = at(standins.test_clock().now());
    standins.aws.push(image(REPO, FRESH, '7', &pushed));
    let stale = scan_event(FRESH, &old_digest, json!({}));
    let report = standins.report(&[], &stale).await;
    // The tag's window counts from the re-push; the late scan of the 6s releases nothing.
    expect_decision(only(&report), Action::Skipped, "soaking");
    let reports = run_follow_ups(&standins, &queue, 5).await;
    assert!(
        reasons(&reports)
            .last()
            .is_some_and(|r| r.contains(&digest('7')) && r.contains("never scanned")),
        "{:#?}",
        reasons(&reports)
    );
    // Delivered again once the window is over: the scan of the 6s cannot release the 7s.
    let report = standins.report(&[], &stale).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "only releases the digest it scanned",
    );
    assert_eq!(seed_tag(&standins).as_deref(), Some(SEED_TAG));
}

/// CONTROL: signing + scan gate without a soak: push waits for the scan, the scan passes, the
/// signing hold re-decides a minute later (a sweep, which reads ECR's findings again) and
/// writes.
#[tokio::test]
async fn control_scan_then_signing_hold_then_write_without_a_soak() {
    let (standins, queue) = queued(&[SIGNING]).await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/app.scan-gate", "critical=0")],
    );
    let (digest, push) = push_fresh(&standins);
    standins
        .aws
        .set_signing(REPO, &digest, &[(PROFILE_ARN, "IN_PROGRESS")]);
    standins.aws.set_scan(REPO, &digest, "COMPLETE", &[]);
    let waiting = standins.report(&[], &push).await;
    expect_decision(only(&waiting), Action::Skipped, "waiting for the scan");
    let held = standins
        .report(&[], &scan_event(FRESH, &digest, json!({})))
        .await;
    expect_decision(
        only(&held),
        Action::Skipped,
        "in progress: held; re-decided in 60 s",
    );
    standins
        .aws
        .set_signing(REPO, &digest, &[(PROFILE_ARN, "COMPLETE")]);
    let reports = run_follow_ups(&standins, &queue, 3).await;
    assert_eq!(
        seed_tag(&standins).as_deref(),
        Some(FRESH),
        "{:#?}",
        reasons(&reports)
    );
}
