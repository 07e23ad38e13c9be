//! End to end: the scan gate. A gated image's push waits for its scan; the scan-completed
//! event (ECR basic scanning, or Amazon Inspector) rolls it out within the limits ECR's own
//! findings meet (the event's counts are never read); reconcile reads the findings of what
//! it would move to. Against the ECR and Kubernetes stand-ins.

use crate::common::{Scenario, event, expect_decision, helm_parameter, only, scan_event};
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP, SEED_TAG};
use serde_json::{Value, json};

const SEED_DIGEST: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
const OLDER_DIGEST: &str =
    "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// The seed with `annotations` added to its Application.
async fn seeded(annotations: &[(&str, &str)]) -> Scenario {
    let scenario = Scenario::seeded().await;
    scenario.annotate("argocd", SEED_APP, annotations);
    scenario
}

const GATE: (&str, &str) = ("argocd-ecr-updater.io/app.scan-gate", "critical=0,high=3");

fn tag(standins: &Scenario) -> String {
    helm_parameter(standins, "argocd", SEED_APP, "image.tag").unwrap()
}

/// What ECR says of `digest`'s scan: the findings the gate reads.
fn ecr_scanned(standins: &Scenario, digest: &str, counts: &[(&str, u64)]) {
    standins
        .aws
        .set_scan("barun-dev-ecr", digest, "COMPLETE", counts);
}

#[tokio::test]
async fn a_gated_push_waits_for_its_scan_and_the_passing_scan_rolls_it_out() {
    let standins = seeded(&[GATE]).await;
    let pushed = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&pushed),
        Action::Skipped,
        &format!("waiting for the scan of {SEED_DIGEST} (scan-gate `critical=0,high=3`)"),
    );
    assert_eq!(tag(&standins), SEED_TAG, "nothing written before the scan");

    // events/scan.json: the pushed image, medium 2 (ECR omits the severities it found none of).
    ecr_scanned(&standins, SEED_DIGEST, &[("MEDIUM", 2)]);
    let scanned = standins.settled(&[], &event("scan.json")).await;
    assert_eq!(
        scanned.mode,
        argocd_ecr_updater::report::InvocationKind::Scan
    );
    let entry = only(&scanned);
    expect_decision(
        entry,
        Action::Updated,
        "passed scan-gate `critical=0,high=3` (medium 2)",
    );
    assert_eq!(tag(&standins), PUSHED_TAG);
}

/// Inspector's `INACTIVE` (outside its rescan window, findings closed) and basic scanning's
/// `FINDINGS_UNAVAILABLE` carry no findings: "no longer scanned", never "clean".
#[tokio::test]
async fn an_image_no_longer_scanned_is_not_clean_for_the_gate() {
    for (status, says) in [
        ("INACTIVE", "no longer scans this image"),
        ("SCAN_ELIGIBILITY_EXPIRED", "no longer scans this image"),
        (
            "FINDINGS_UNAVAILABLE",
            "no longer has this image's findings",
        ),
    ] {
        let standins = seeded(&[GATE]).await;
        standins
            .aws
            .set_scan("barun-dev-ecr", SEED_DIGEST, status, &[]);
        let report = standins
            .settled(&[], &scan_event(PUSHED_TAG, SEED_DIGEST, json!({})))
            .await;
        expect_decision(only(&report), Action::Skipped, says);
        assert_eq!(tag(&standins), SEED_TAG, "{status}: nothing written");
    }
}

#[tokio::test]
async fn a_scan_over_the_limits_holds_the_image_back_with_the_counts() {
    let standins = seeded(&[GATE]).await;
    ecr_scanned(&standins, SEED_DIGEST, &[("CRITICAL", 1), ("HIGH", 5)]);
    let report = standins
        .settled(
            &[],
            &scan_event(PUSHED_TAG, SEED_DIGEST, json!({"CRITICAL": 1, "HIGH": 5})),
        )
        .await;
    let entry = only(&report);
    expect_decision(entry, Action::Skipped, "critical 1 > 0, high 5 > 3");
    assert!(!entry.retryable);
    assert_eq!(tag(&standins), SEED_TAG);
}

/// A scan event is a claim anyone who may invoke the function (or send to a queue it reads)
/// can write: only ECR's findings for the digest count.
#[tokio::test]
async fn a_scan_event_claiming_no_findings_never_releases_what_ecr_found() {
    let standins = seeded(&[GATE]).await;
    ecr_scanned(&standins, SEED_DIGEST, &[("CRITICAL", 7)]);
    let forged = scan_event(PUSHED_TAG, SEED_DIGEST, json!({}));
    let report = standins.settled(&[], &forged).await;
    expect_decision(only(&report), Action::Skipped, "critical 7 > 0");
    // Nor what ECR has not finished scanning, or never scanned.
    standins
        .aws
        .set_scan("barun-dev-ecr", SEED_DIGEST, "IN_PROGRESS", &[]);
    let report = standins.settled(&[], &forged).await;
    expect_decision(only(&report), Action::Skipped, "but ECR says: scan of");
    assert_eq!(tag(&standins), SEED_TAG);
    let unscanned = seeded(&[GATE]).await;
    let report = unscanned.settled(&[], &forged).await;
    expect_decision(only(&report), Action::Skipped, "was never scanned");
    assert_eq!(tag(&unscanned), SEED_TAG);
}

#[tokio::test]
async fn none_requires_a_scan_without_any_finding() {
    let standins = seeded(&[("argocd-ecr-updater.io/scan-gate", "none")]).await;
    ecr_scanned(&standins, SEED_DIGEST, &[("LOW", 1)]);
    let report = standins
        .settled(&[], &scan_event(PUSHED_TAG, SEED_DIGEST, json!({"LOW": 1})))
        .await;
    expect_decision(only(&report), Action::Skipped, "low 1");
    ecr_scanned(&standins, SEED_DIGEST, &[]);
    let clean = standins
        .settled(&[], &scan_event(PUSHED_TAG, SEED_DIGEST, json!({})))
        .await;
    expect_decision(only(&clean), Action::Updated, "no findings");
}

#[tokio::test]
async fn a_scan_finishing_late_for_an_older_image_moves_nothing() {
    let standins = seeded(&[GATE]).await;
    ecr_scanned(&standins, SEED_DIGEST, &[("MEDIUM", 2)]);
    ecr_scanned(&standins, OLDER_DIGEST, &[]);
    standins.settled(&[], &event("scan.json")).await;
    assert_eq!(tag(&standins), PUSHED_TAG);
    let late = standins
        .settled(&[], &scan_event("20250824-093000", OLDER_DIGEST, json!({})))
        .await;
    expect_decision(
        only(&late),
        Action::Skipped,
        "tag `20250824-093000` ranks below the current tag `20250825-153012`",
    );
    assert_eq!(tag(&standins), PUSHED_TAG);
}

#[tokio::test]
async fn a_scan_of_one_digest_never_releases_the_digest_its_tag_moved_to_since() {
    let standins = seeded(&[GATE]).await;
    // The tag is re-pushed: it now names an image with seven criticals, not yet scanned.
    const MOVED: &str = "sha256:7777777777777777777777777777777777777777777777777777777777777777";
    standins
        .aws
        .push(argocd_ecr_updater_standins::aws::Image::with_manifest(
            "barun-dev-ecr",
            PUSHED_TAG,
            MOVED,
            r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}"#.into(),
        ));
    // The late scan of the clean image the tag named before.
    let late = standins
        .settled(&[], &scan_event(PUSHED_TAG, SEED_DIGEST, json!({})))
        .await;
    let entry = only(&late);
    expect_decision(entry, Action::Skipped, &format!("now points at {MOVED}"));
    assert!(
        entry.reason.contains("only releases the digest it scanned"),
        "{}",
        entry.reason
    );
    assert_eq!(
        tag(&standins),
        SEED_TAG,
        "nothing written on another digest's scan"
    );
    // The new digest's own scan decides it.
    ecr_scanned(&standins, MOVED, &[("CRITICAL", 7)]);
    let own = standins
        .settled(&[], &scan_event(PUSHED_TAG, MOVED, json!({"CRITICAL": 7})))
        .await;
    expect_decision(only(&own), Action::Skipped, "critical 7 > 0");
    assert_eq!(tag(&standins), SEED_TAG);
}

#[tokio::test]
async fn an_image_without_a_gate_is_moved_by_its_push_never_by_its_scan() {
    let standins = seeded(&[]).await;
    let report = standins.settled(&[], &event("scan.json")).await;
    assert!(
        report.entries.is_empty(),
        "not the scan event's business: {:#?}",
        report.entries
    );
    assert_eq!(tag(&standins), SEED_TAG);
    standins.settled(&[], &event("push-date-tag.json")).await;
    assert_eq!(tag(&standins), PUSHED_TAG);
}

#[tokio::test]
async fn an_inspector_enhanced_scan_opens_the_gate_too() {
    let standins = seeded(&[GATE]).await;
    // Enhanced scanning answers DescribeImageScanFindings with Inspector's findings, `ACTIVE`.
    standins.aws.set_scan(
        "barun-dev-ecr",
        SEED_DIGEST,
        "ACTIVE",
        &[("HIGH", 2), ("MEDIUM", 7)],
    );
    let inspector = json!({"version": "0", "id": "i-1", "detail-type": "Inspector2 Scan",
        "source": "aws.inspector2", "account": "768157413559", "time": "2025-08-25T06:35:00Z",
        "region": "ap-northeast-2",
        "detail": {"scan-status": "INITIAL_SCAN_COMPLETE",
            "repository-name": "arn:aws:ecr:ap-northeast-2:768157413559:repository/barun-dev-ecr",
            "image-digest": SEED_DIGEST, "image-tags": [PUSHED_TAG],
            "finding-severity-counts": {"CRITICAL": 0, "HIGH": 2, "MEDIUM": 7, "TOTAL": 9}}});
    let report = standins.settled(&[], &inspector).await;
    expect_decision(only(&report), Action::Updated, "high 2, medium 7");
    assert_eq!(tag(&standins), PUSHED_TAG);
}

#[tokio::test]
async fn reconcile_reads_the_findings_of_the_candidate_it_would_move_to() {
    let standins = seeded(&[GATE]).await;
    let reconcile = event("scheduled-reconcile.json");
    // Never scanned: caught by reconcile, said so.
    let report = standins.settled(&[], &reconcile).await;
    expect_decision(only(&report), Action::Skipped, "was never scanned");
    // Still scanning.
    standins
        .aws
        .set_scan("barun-dev-ecr", SEED_DIGEST, "IN_PROGRESS", &[]);
    expect_decision(
        only(&standins.settled(&[], &reconcile).await),
        Action::Skipped,
        "IN_PROGRESS",
    );
    // Over the limits.
    standins
        .aws
        .set_scan("barun-dev-ecr", SEED_DIGEST, "COMPLETE", &[("CRITICAL", 2)]);
    expect_decision(
        only(&standins.settled(&[], &reconcile).await),
        Action::Skipped,
        "critical 2 > 0",
    );
    assert_eq!(tag(&standins), SEED_TAG);
    // Within them: moves.
    standins
        .aws
        .set_scan("barun-dev-ecr", SEED_DIGEST, "COMPLETE", &[("HIGH", 1)]);
    let report = standins.settled(&[], &reconcile).await;
    expect_decision(only(&report), Action::Updated, "its scan passed");
    assert_eq!(tag(&standins), PUSHED_TAG);
}

#[tokio::test]
async fn a_bad_gate_is_a_configuration_error_naming_the_annotation() {
    let standins = seeded(&[("argocd-ecr-updater.io/app.scan-gate", "severe=1")]).await;
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    let entry = only(&report);
    expect_decision(entry, Action::Failed, "argocd-ecr-updater.io/app.scan-gate");
    assert!(entry.reason.contains("not a severity"), "{}", entry.reason);
    assert!(!entry.retryable);
}

#[tokio::test]
async fn an_imageupdater_object_carries_its_gate_in_its_annotations() {
    let standins = seeded(&[]).await;
    let mut object = argocd_ecr_updater_standins::fixtures::seed_image_updater();
    object["metadata"]["annotations"] =
        json!({"argocd-ecr-updater.io/app.scan-gate": "critical=0"});
    standins.kube.insert_image_updater(object).unwrap();
    let pushed = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&pushed), Action::Skipped, "waiting for the scan");
    ecr_scanned(&standins, SEED_DIGEST, &[("MEDIUM", 2)]);
    let scanned = standins.settled(&[], &event("scan.json")).await;
    expect_decision(
        only(&scanned),
        Action::Updated,
        "passed scan-gate `critical=0`",
    );
}

// ---- The signature gate: cosign key-based verification, in Rust, against ECR ----

use argocd_ecr_updater_standins::cosign;

const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";

/// The seed with a cosign key pair: the public one configured on the Application by
/// `key_annotation` (given the PEM), the private one returned for signing.
async fn signed_setup(
    key_annotation: impl Fn(&str) -> (String, String),
) -> (Scenario, String, String) {
    let (private, public) = cosign::key_pair().unwrap();
    let (key, value) = key_annotation(&public);
    let standins = seeded(&[(key.as_str(), value.as_str())]).await;
    (standins, private, public)
}

fn inline(public: &str) -> (String, String) {
    ("argocd-ecr-updater.io/app.cosign-key".into(), public.into())
}

/// Stores a cosign signature of the seed image's digest made with `private`, over the
/// payload cosign writes for `signed_digest` (the seed's own, unless a test wants another).
fn sign_seed(aws: &argocd_ecr_updater_standins::AwsState, private: &str, signed_digest: &str) {
    let payload = cosign::payload(IMAGE, signed_digest);
    cosign::store_signature(aws, "barun-dev-ecr", SEED_DIGEST, private, &payload).unwrap();
}

#[tokio::test]
async fn an_image_signed_with_the_key_is_rolled_out() {
    let (standins, private, _) = signed_setup(inline).await;
    sign_seed(&standins.aws, &private, SEED_DIGEST);
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Updated,
        &format!("{SEED_DIGEST} is signed with the cosign key"),
    );
    assert_eq!(tag(&standins), PUSHED_TAG);
}

/// Puts a (bad) signature in place, given the stand-ins and the configured key's private half.
type Arrange = dyn Fn(&Scenario, &str);

#[tokio::test]
async fn missing_wrong_key_other_digest_and_tampered_signatures_are_never_written() {
    let other_digest = "sha256:4444444444444444444444444444444444444444444444444444444444444444";
    let cases: Vec<(&str, Box<Arrange>)> = vec![
        ("is not signed: no `sha256-", Box::new(|_, _| {})),
        (
            "does not verify with the configured cosign key",
            Box::new(move |s: &Scenario, _: &str| {
                let (other_private, _) = cosign::key_pair().unwrap();
                sign_seed(&s.aws, &other_private, SEED_DIGEST);
            }),
        ),
        (
            "the signature is for sha256:4444",
            Box::new(move |s: &Scenario, private: &str| {
                sign_seed(&s.aws, private, other_digest);
            }),
        ),
        (
            "tampered",
            Box::new(|s: &Scenario, private: &str| {
                let payload = cosign::payload(IMAGE, SEED_DIGEST);
                cosign::store_signature(&s.aws, "barun-dev-ecr", SEED_DIGEST, private, &payload)
                    .unwrap();
                let layer = {
                    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &payload);
                    format!(
                        "sha256:{}",
                        d.as_ref()
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<String>()
                    )
                };
                let mut changed = payload.clone();
                changed[20] ^= 1;
                s.aws.put_blob("barun-dev-ecr", &layer, changed);
            }),
        ),
    ];
    for (words, arrange) in cases {
        let (standins, private, _) = signed_setup(inline).await;
        arrange(&standins, &private);
        let report = standins.settled(&[], &event("push-date-tag.json")).await;
        let entry = only(&report);
        expect_decision(entry, Action::Skipped, words);
        assert!(
            entry.reason.starts_with("signature check failed")
                || entry.reason.contains("signature check failed"),
            "{}",
            entry.reason
        );
        assert_eq!(tag(&standins), SEED_TAG, "{words}");
    }
}

#[tokio::test]
async fn the_key_can_live_in_secrets_manager() {
    let arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:cosign-pub-Ab12Cd";
    let (standins, private, public) = signed_setup(|_| {
        (
            "argocd-ecr-updater.io/cosign-key".into(),
            format!("secretsmanager:{arn}"),
        )
    })
    .await;
    standins.aws.put_secret(arn, &public, true);
    sign_seed(&standins.aws, &private, SEED_DIGEST);
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "is signed");
}

#[tokio::test]
async fn an_imageupdater_objects_images_verification_reads_the_key_from_its_secret() {
    let standins = Scenario::seeded_with_grants(vec![
        argocd_ecr_updater_standins::Grant::new(&["get", "list", "patch"], "argocd"),
        argocd_ecr_updater_standins::Grant::on("events", &["create"], "argocd"),
        argocd_ecr_updater_standins::Grant::on("imageupdaters", &["list"], "argocd"),
        argocd_ecr_updater_standins::Grant::on("imageupdaters/status", &["patch"], "argocd"),
        argocd_ecr_updater_standins::Grant::named("secrets", &["get"], "argocd", &["cosign"]),
    ])
    .await;
    let (private, public) = cosign::key_pair().unwrap();
    standins
        .kube
        .insert_secret("argocd", "cosign", json!({}), &[("cosign.pub", &public)]);
    let mut object = argocd_ecr_updater_standins::fixtures::seed_image_updater();
    object["spec"]["imagesVerification"] =
        json!({"cosignKey": {"secretName": "cosign", "key": "cosign.pub"}});
    standins.kube.insert_image_updater(object.clone()).unwrap();
    let unsigned = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&unsigned), Action::Skipped, "is not signed");
    sign_seed(&standins.aws, &private, SEED_DIGEST);
    let signed = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&signed),
        Action::Updated,
        "secret:argocd/cosign:cosign.pub",
    );

    // `enabled: false` at the image level switches it off for that image.
    object["spec"]["applicationRefs"][0]["images"][0]["imagesVerification"] =
        json!({"enabled": false});
    standins.kube.insert_image_updater(object).unwrap();
    let pushed = argocd_ecr_updater_standins::fixtures::push_event(
        "barun-dev-ecr",
        "20250826-000000",
        "2025-08-26T00:00:00Z",
    );
    standins
        .aws
        .push(argocd_ecr_updater_standins::fixtures::image(
            "barun-dev-ecr",
            "20250826-000000",
            '6',
            "2025-08-26T00:00:00Z",
        ));
    let report = standins.settled(&[], &pushed).await;
    assert_eq!(only(&report).action, Action::Updated, "{:?}", only(&report));
    assert!(!only(&report).reason.contains("signed"));
}

#[tokio::test]
async fn ed25519_and_rsa_keys_work_end_to_end_as_cosign_uses_them() {
    use argocd_ecr_updater_standins::cosign::{KeyKind, key_pair_of, store_signature_of};
    for kind in [KeyKind::Ed25519, KeyKind::Rsa] {
        let (private, public) = key_pair_of(kind).unwrap();
        let standins = seeded(&[("argocd-ecr-updater.io/app.cosign-key", public.as_str())]).await;
        store_signature_of(
            &standins.aws,
            "barun-dev-ecr",
            SEED_DIGEST,
            kind,
            &private,
            &cosign::payload(IMAGE, SEED_DIGEST),
        )
        .unwrap();
        let report = standins.settled(&[], &event("push-date-tag.json")).await;
        expect_decision(
            only(&report),
            Action::Updated,
            "is signed with the cosign key",
        );
    }
}

#[tokio::test]
async fn a_signature_stored_as_an_oci_referrer_is_found_through_the_referrers_api() {
    use argocd_ecr_updater_standins::cosign::{KeyKind, key_pair_of, store_referrer_signature};
    let (private, public) = key_pair_of(KeyKind::EcdsaP256).unwrap();
    let standins = seeded(&[("argocd-ecr-updater.io/app.cosign-key", public.as_str())]).await;
    // A referrer of another digest does not count.
    let other = "sha256:4444444444444444444444444444444444444444444444444444444444444444";
    store_referrer_signature(
        &standins.aws,
        "barun-dev-ecr",
        other,
        KeyKind::EcdsaP256,
        &private,
        &cosign::payload(IMAGE, other),
    )
    .unwrap();
    let unsigned = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&unsigned),
        Action::Skipped,
        "no cosign signature among its OCI referrers",
    );
    store_referrer_signature(
        &standins.aws,
        "barun-dev-ecr",
        SEED_DIGEST,
        KeyKind::EcdsaP256,
        &private,
        &cosign::payload(IMAGE, SEED_DIGEST),
    )
    .unwrap();
    let signed = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&signed),
        Action::Updated,
        "is signed with the cosign key",
    );
    // The referrers API was asked with the registry credentials ECR handed out.
    assert!(
        standins
            .shared
            .count(|r| r.operation == "GetAuthorizationToken")
            >= 1
    );
    assert!(standins.shared.count(|r| r.path.contains("/referrers/")) >= 1);
}

/// A late or redriven push names the digest that was signed; the tag was re-pushed since to an
/// unsigned image. A strategy that ranks by name (here alphabetical) must check the digest
/// the tag points at now, never the event's.
#[tokio::test]
async fn a_late_push_of_a_signed_digest_never_rolls_out_the_unsigned_image_its_tag_names_now() {
    let (standins, private, _) = signed_setup(inline).await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[(
            "argocd-image-updater.argoproj.io/app.update-strategy",
            "alphabetical",
        )],
    );
    sign_seed(&standins.aws, &private, SEED_DIGEST);
    const UNSIGNED: &str =
        "sha256:8888888888888888888888888888888888888888888888888888888888888888";
    standins
        .aws
        .push(argocd_ecr_updater_standins::aws::Image::with_manifest(
            "barun-dev-ecr",
            PUSHED_TAG,
            UNSIGNED,
            r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}"#.into(),
        ));
    // events/push-date-tag.json names the signed digest.
    let late = event("push-date-tag.json");
    assert_eq!(late["detail"]["image-digest"], SEED_DIGEST);
    let report = standins.settled(&[], &late).await;
    let entry = only(&report);
    expect_decision(entry, Action::Skipped, "signature check failed");
    assert!(entry.reason.contains(UNSIGNED), "{}", entry.reason);
    assert_eq!(tag(&standins), SEED_TAG);
}

/// A signature payload over 1 MiB is refused by its size (`Content-Length` first), never read
/// whole: no real simple-signing payload is a thousandth of that.
#[tokio::test]
async fn a_signature_payload_over_its_cap_is_refused_unread() {
    let (standins, private, _) = signed_setup(inline).await;
    // A valid signature of an oversized payload: the size decides, not the verification.
    let mut payload = cosign::payload(IMAGE, SEED_DIGEST);
    payload.resize((1 << 20) + 1, b' ');
    cosign::store_signature(
        &standins.aws,
        "barun-dev-ecr",
        SEED_DIGEST,
        &private,
        &payload,
    )
    .unwrap();
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "is larger than 1048576 bytes, too large to be one",
    );
    assert_eq!(tag(&standins), SEED_TAG);
}

/// A referrers index over 4 MiB (a registry answering with more than any image has) is an
/// error that names the cap, read no further.
#[tokio::test]
async fn a_referrers_index_over_its_cap_is_refused_unread() {
    use argocd_ecr_updater_standins::cosign::{KeyKind, key_pair_of};
    let (_, public) = key_pair_of(KeyKind::EcdsaP256).unwrap();
    let standins = seeded(&[("argocd-ecr-updater.io/app.cosign-key", public.as_str())]).await;
    // About 20,000 referrers of the image: each is a ~230-byte descriptor in the index.
    for n in 0..20_000u32 {
        let manifest = json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
            "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": SEED_DIGEST, "size": 1000}, "layers": []})
        .to_string();
        standins
            .aws
            .push(argocd_ecr_updater_standins::aws::Image::with_manifest(
                "barun-dev-ecr",
                "",
                &format!("sha256:{n:064x}"),
                manifest,
            ));
    }
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    let entry = only(&report);
    assert_eq!(entry.action, Action::Failed, "{}", entry.reason);
    assert!(
        entry.reason.contains("cannot list the referrers") && entry.reason.contains("4194304"),
        "{}",
        entry.reason
    );
    assert_eq!(tag(&standins), SEED_TAG);
}

// ECR managed signing: AWS Signer signs a pushed image after the push.

const PROFILE_ARN: &str =
    "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod";
const SIGNING: (&str, &str) = ("argocd-ecr-updater.io/app.signing-profile", "release_prod");

#[tokio::test]
async fn a_digest_signed_by_the_profile_rolls_out_and_one_refused_says_why() {
    let other = "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/nightly";
    let cases: [(&[(&str, &str)], Action, &str); 4] = [
        (
            &[(PROFILE_ARN, "COMPLETE")],
            Action::Updated,
            "is signed by `arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod` (ECR managed signing)",
        ),
        (
            &[(PROFILE_ARN, "FAILED")],
            Action::Skipped,
            "failed (SigningProfileRevoked: The signing profile was revoked.)",
        ),
        (
            &[(other, "COMPLETE")],
            Action::Skipped,
            "has no managed signature by signing profile `release_prod` (ECR lists arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/nightly)",
        ),
        (
            &[],
            Action::Skipped,
            "(ECR lists no profile): add the profile to the registry's signing rules",
        ),
    ];
    for (statuses, action, says) in cases {
        let standins = seeded(&[SIGNING]).await;
        standins
            .aws
            .set_signing("barun-dev-ecr", SEED_DIGEST, statuses);
        let report = standins.report(&[], &event("push-date-tag.json")).await;
        expect_decision(only(&report), action, says);
        let written = tag(&standins) == PUSHED_TAG;
        assert_eq!(written, action == Action::Updated, "{statuses:?}");
    }
}

/// A push races its own signature: in progress, the push is held and a follow-up on the sweep
/// queue decides it again a minute later, when the signature is complete.
#[tokio::test]
async fn a_push_whose_signing_is_in_progress_is_held_and_rolled_out_once_signed() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    let standins = seeded(&[SIGNING]).await;
    let queue = standins.aws.create_queue("sweep");
    let arn = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", arn)
        .var("CONFIRM_ROLLOUTS", "false");
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let fresh = "20991231-000000";
    let digest = format!("sha256:{}", "9".repeat(64));
    standins.aws.push(image("barun-dev-ecr", fresh, '9', &now));
    standins
        .aws
        .set_signing("barun-dev-ecr", &digest, &[(PROFILE_ARN, "IN_PROGRESS")]);
    let push = push_event("barun-dev-ecr", fresh, &now);
    let held = standins.report(&[], &push).await;
    expect_decision(
        only(&held),
        Action::Skipped,
        "managed signing of sha256:9999",
    );
    expect_decision(
        only(&held),
        Action::Skipped,
        "is in progress: held; re-decided in 60 s",
    );
    let follow_ups = standins.aws.queue(&queue);
    assert_eq!(follow_ups.len(), 1);
    assert_eq!(follow_ups[0].delay_seconds, 60);
    assert_ne!(tag(&standins), fresh);
    standins
        .aws
        .set_signing("barun-dev-ecr", &digest, &[(PROFILE_ARN, "COMPLETE")]);
    let batch = json!({"Records": [{"messageId": follow_ups[0].id, "eventSource": "aws:sqs",
        "eventSourceARN": arn, "body": follow_ups[0].body}]});
    let written = standins.report(&[], &batch).await;
    expect_decision(only(&written), Action::Updated, "(ECR managed signing)");
    assert_eq!(tag(&standins), fresh);
}

/// An image pushed long ago whose signing is still in progress is not re-checked for ever:
/// the next push or sweep decides it.
#[tokio::test]
async fn a_signing_stalled_past_half_an_hour_is_left_to_the_next_push_or_sweep() {
    let standins = seeded(&[SIGNING]).await;
    standins.aws.set_signing(
        "barun-dev-ecr",
        SEED_DIGEST,
        &[(PROFILE_ARN, "IN_PROGRESS")],
    );
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Skipped,
        "held; the next push of the image or the next sweep decides it",
    );
}

#[tokio::test]
async fn a_sweep_rolls_out_only_a_candidate_signed_by_the_profile() {
    let standins = seeded(&[SIGNING]).await;
    standins.aws.set_signing(
        "barun-dev-ecr",
        SEED_DIGEST,
        &[(PROFILE_ARN, "IN_PROGRESS")],
    );
    let held = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(only(&held), Action::Skipped, "is in progress: held");
    standins
        .aws
        .set_signing("barun-dev-ecr", SEED_DIGEST, &[(PROFILE_ARN, "COMPLETE")]);
    let written = standins
        .report(&[], &event("scheduled-reconcile.json"))
        .await;
    expect_decision(only(&written), Action::Updated, "(ECR managed signing)");
}

#[tokio::test]
async fn a_signing_profile_that_is_neither_an_arn_nor_a_name_is_a_configuration_error() {
    let standins = seeded(&[("argocd-ecr-updater.io/app.signing-profile", "release-prod!")]).await;
    let report = standins.settled(&[], &event("push-date-tag.json")).await;
    expect_decision(
        only(&report),
        Action::Failed,
        "argocd-ecr-updater.io/app.signing-profile",
    );
    expect_decision(
        only(&report),
        Action::Failed,
        "neither a signing profile ARN nor a profile name",
    );
}

// Full verification of the managed signature: NOTATION_TRUST_ROOTS set.

mod notation {
    use super::*;
    use argocd_ecr_updater_standins::notary::{Envelope, Signer};
    use base64::Engine;

    const VERSION: &str =
        "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod/2oCN6RHYVI";

    /// The seed, signed COMPLETE by the profile in ECR's status, trusting `trusted`'s root.
    async fn verifying(trusted: &Signer) -> Scenario {
        let standins = seeded(&[SIGNING]).await;
        standins
            .aws
            .set_signing("barun-dev-ecr", SEED_DIGEST, &[(PROFILE_ARN, "COMPLETE")]);
        let roots = base64::engine::general_purpose::STANDARD.encode(&trusted.root_pem);
        standins.var("NOTATION_TRUST_ROOTS", &roots)
    }

    #[tokio::test]
    async fn a_signature_that_verifies_against_the_trusted_root_rolls_out_naming_what_it_checked() {
        let signer = Signer::new(|_| {}).unwrap();
        let standins = verifying(&signer).await;
        let envelope = signer.envelope(&Envelope::of(SEED_DIGEST, VERSION));
        standins
            .aws
            .attach_notation_signature("barun-dev-ecr", SEED_DIGEST, envelope);
        // A second Application of the same image: one verification serves both.
        let mut twin = standins.kube.get("argocd", SEED_APP).unwrap();
        twin["metadata"]["name"] = json!("aws-pipeline-test-twin");
        argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut twin);
        standins.kube.insert(twin).unwrap();
        let report = standins.report(&[], &event("push-date-tag.json")).await;
        assert_eq!(report.entries.len(), 2, "{:#?}", report.entries);
        for entry in &report.entries {
            expect_decision(
                entry,
                Action::Updated,
                &format!(
                    "its Notation signature verifies: made by `{VERSION}` at 2026-12-01T10:00:00Z, chain to `CN=Test Signer Root`"
                ),
            );
        }
        assert_eq!(tag(&standins), PUSHED_TAG);
        let operations: Vec<String> = standins
            .shared
            .requests()
            .into_iter()
            .map(|r| r.operation)
            .filter(|o| {
                [
                    "ListImageReferrers",
                    "BatchGetImage",
                    "GetDownloadUrlForLayer",
                ]
                .contains(&o.as_str())
            })
            .collect();
        assert_eq!(
            operations,
            [
                "ListImageReferrers",
                "BatchGetImage",
                "GetDownloadUrlForLayer"
            ]
        );
        let statuses = standins
            .shared
            .requests()
            .into_iter()
            .filter(|r| r.operation == "DescribeImageSigningStatus")
            .count();
        assert_eq!(statuses, 1);
    }

    /// Anyone who may push to the repository can attach signatures: sixty of a stranger's,
    /// listed before the genuine one, neither hide it (every page of ECR's list is read) nor
    /// pass the gate themselves.
    #[tokio::test]
    async fn signatures_pushed_to_crowd_out_the_genuine_one_do_not_hide_it() {
        let trusted = Signer::new(|_| {}).unwrap();
        let stranger = Signer::new(|_| {}).unwrap();
        let standins = verifying(&trusted).await;
        for _ in 0..60 {
            standins.aws.attach_notation_signature(
                "barun-dev-ecr",
                SEED_DIGEST,
                stranger.envelope(&Envelope::of(SEED_DIGEST, VERSION)),
            );
        }
        standins.aws.attach_notation_signature(
            "barun-dev-ecr",
            SEED_DIGEST,
            trusted.envelope(&Envelope::of(SEED_DIGEST, VERSION)),
        );
        let report = standins.report(&[], &event("push-date-tag.json")).await;
        expect_decision(
            only(&report),
            Action::Updated,
            "its Notation signature verifies",
        );
        assert_eq!(tag(&standins), PUSHED_TAG);
        let pages = standins
            .shared
            .requests()
            .into_iter()
            .filter(|r| r.operation == "ListImageReferrers")
            .count();
        assert_eq!(pages, 2, "61 signatures are two pages of 50");
    }

    const ROOTS_SECRET: &str =
        "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:notation-roots-AbCdEf";

    /// Roots too large for Lambda's 4 KB of environment live in a secret, read once at cold
    /// start: the same verification as the variable's.
    #[tokio::test]
    async fn roots_kept_in_a_secret_are_read_at_cold_start_and_verify_as_the_variables_would() {
        let signer = Signer::new(|_| {}).unwrap();
        let standins = seeded(&[SIGNING]).await;
        standins
            .aws
            .set_signing("barun-dev-ecr", SEED_DIGEST, &[(PROFILE_ARN, "COMPLETE")]);
        standins
            .aws
            .put_secret(ROOTS_SECRET, &signer.root_pem, true);
        let envelope = signer.envelope(&Envelope::of(SEED_DIGEST, VERSION));
        standins
            .aws
            .attach_notation_signature("barun-dev-ecr", SEED_DIGEST, envelope);
        let handler = standins
            .started(&[("NOTATION_TRUST_ROOTS_SECRET_ARN", ROOTS_SECRET)])
            .await
            .unwrap();
        let report = handler
            .handle(&event("push-date-tag.json"), None)
            .await
            .unwrap();
        expect_decision(
            only(&report),
            Action::Updated,
            "its Notation signature verifies",
        );
        assert_eq!(tag(&standins), PUSHED_TAG);
        // Read once, at the cold start, not per invocation.
        let reads = || {
            standins
                .shared
                .requests()
                .into_iter()
                .filter(|r| r.operation == "GetSecretValue")
                .count()
        };
        assert_eq!(reads(), 1);
        handler
            .handle(&event("push-date-tag.json"), None)
            .await
            .unwrap();
        assert_eq!(reads(), 1);
    }

    #[tokio::test]
    async fn a_roots_secret_that_cannot_be_had_stops_the_cold_start_saying_what_to_do() {
        let signer = Signer::new(|_| {}).unwrap();
        let standins = seeded(&[SIGNING]).await;
        let root = signer.root_pem.clone();
        for (text, readable, says) in [
            (None, true, "no such secret"),
            (
                Some(root.as_str()),
                false,
                "needs secretsmanager:GetSecretValue on it",
            ),
            (
                Some("not a certificate"),
                true,
                "--secret-string file://root.pem",
            ),
        ] {
            if let Some(text) = text {
                standins.aws.put_secret(ROOTS_SECRET, text, readable);
            }
            let Err(e) = standins
                .started(&[("NOTATION_TRUST_ROOTS_SECRET_ARN", ROOTS_SECRET)])
                .await
            else {
                panic!("{says}: the cold start went on");
            };
            let message = e.to_string();
            assert!(
                message.starts_with(&format!(
                    "NOTATION_TRUST_ROOTS_SECRET_ARN `{ROOTS_SECRET}`: "
                )) && message.contains(says),
                "{message}"
            );
        }
        // The handler built without the cold start's read refuses, rather than gate on ECR's
        // status alone.
        standins.aws.put_secret(ROOTS_SECRET, &root, true);
        let mut map = std::collections::HashMap::new();
        map.insert("CLUSTER_NAME".to_string(), "barun-dev".to_string());
        map.insert(
            "NOTATION_TRUST_ROOTS_SECRET_ARN".to_string(),
            ROOTS_SECRET.to_string(),
        );
        let config =
            argocd_ecr_updater::config::Config::from_lookup(|k| map.get(k).cloned()).unwrap();
        let refused = argocd_ecr_updater::pipeline::handler::Handler::from_sdk(
            config,
            &standins.sdk_config(),
            std::sync::Arc::new(argocd_ecr_updater::cluster::eks_auth::SystemClock),
        );
        assert!(refused.is_err());
    }

    #[tokio::test]
    async fn ecrs_complete_status_alone_is_not_enough_once_roots_are_trusted() {
        let trusted = Signer::new(|_| {}).unwrap();
        let stranger = Signer::new(|_| {}).unwrap();
        let other_version =
            "arn:aws:signer:ap-northeast-2:210987654321:/signing-profiles/release_prod/2oCN6RHYVI";
        let cases: [(&str, Option<Vec<u8>>, &str); 4] = [
            (
                "no signature attached",
                None,
                "ECR lists no Notation signature of",
            ),
            (
                "a chain to a root not trusted",
                Some(stranger.envelope(&Envelope::of(SEED_DIGEST, VERSION))),
                "which is not in the trust store",
            ),
            (
                "the profile's name in another account",
                Some(trusted.envelope(&Envelope::of(SEED_DIGEST, other_version))),
                "not by signing profile",
            ),
            (
                "a signature of another image",
                Some(trusted.envelope(&Envelope::of(
                    "sha256:1111111111111111111111111111111111111111111111111111111111111111",
                    VERSION,
                ))),
                "the signature is for sha256:1111",
            ),
        ];
        for (case, envelope, says) in cases {
            let standins = verifying(&trusted).await;
            if let Some(envelope) = envelope {
                standins
                    .aws
                    .attach_notation_signature("barun-dev-ecr", SEED_DIGEST, envelope);
            }
            let report = standins.report(&[], &event("push-date-tag.json")).await;
            let entry = only(&report);
            assert_eq!(entry.action, Action::Skipped, "{case}: {}", entry.reason);
            assert!(
                entry
                    .reason
                    .contains("no Notation signature of it verifies against NOTATION_TRUST_ROOTS")
                    && entry.reason.contains(says),
                "{case}: {}",
                entry.reason
            );
            assert_eq!(tag(&standins), SEED_TAG, "{case}");
        }
    }
}

/// `built-from`: a push is written only if its image's OCI labels name an allowed source
/// repository at a full commit; a fork's image and one pushed without labels are skipped with
/// their reason, read from the image config through ECR as it serves it. A gate of the one
/// gate trait, run by the pipeline on every update.
#[tokio::test]
async fn only_an_image_built_from_the_named_repository_goes_out() {
    use argocd_ecr_updater_standins::fixtures::{image, push_event};
    let revision = "0123456789abcdef0123456789abcdef01234567";
    let cases: [(&str, Value, Action, &str); 3] = [
        (
            "20991201-000000",
            json!({"org.opencontainers.image.source": "https://github.com/mallory/web",
                "org.opencontainers.image.revision": revision}),
            Action::Skipped,
            "built-from: sha256:",
        ),
        (
            "20991202-000000",
            json!({"maintainer": "someone"}),
            Action::Skipped,
            "do not say where it was built",
        ),
        (
            "20991203-000000",
            json!({"org.opencontainers.image.source": "https://github.com/acme/web.git",
                "org.opencontainers.image.revision": revision}),
            Action::Updated,
            "built from https://github.com/acme/web at 0123456789ab (built-from)",
        ),
    ];
    let standins = seeded(&[(
        "argocd-ecr-updater.io/app.built-from",
        "https://github.com/acme/web",
    )])
    .await;
    for (n, (tag, labels, action, reason)) in cases.into_iter().enumerate() {
        let at = format!("2099-12-0{}T00:00:00Z", n + 1);
        let digest = char::from(b'a' + n as u8);
        standins
            .aws
            .push_labelled(image("barun-dev-ecr", tag, digest, &at), &labels);
        let report = standins
            .report(&[], &push_event("barun-dev-ecr", tag, &at))
            .await;
        expect_decision(only(&report), action, reason);
    }
    assert_eq!(
        helm_parameter(&standins, "argocd", SEED_APP, "image.tag").as_deref(),
        Some("20991203-000000")
    );
    // A setting that names no repository fails the image, saying so; nothing is written.
    let standins = seeded(&[(
        "argocd-ecr-updater.io/app.built-from",
        "github.com/acme/web",
    )])
    .await;
    let at = "2099-12-09T00:00:00Z";
    standins.aws.push_labelled(
        image("barun-dev-ecr", "20991209-000000", 'f', at),
        &json!({"org.opencontainers.image.source": "https://github.com/acme/web",
            "org.opencontainers.image.revision": revision}),
    );
    let report = standins
        .report(&[], &push_event("barun-dev-ecr", "20991209-000000", at))
        .await;
    expect_decision(
        only(&report),
        Action::Failed,
        "configuration error: `argocd-ecr-updater.io/app.built-from: github.com/acme/web`",
    );
    assert_eq!(tag(&standins), SEED_TAG);
}
