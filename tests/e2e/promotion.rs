//! Promotion from push to prod, on the Argo CD controller stand-in moving through time, over
//! two clusters: a push reaches dev only; dev's rollout is followed until verified; its check
//! wakes staging (same cluster), which soaks for its promote-after, then takes exactly the
//! image dev runs; staging's own rollout, verified, wakes prod (another cluster). A failed
//! upstream stops the chain there; a newer push mid-chain supersedes the pending promotion; a
//! cycle and a missing upstream are refused with their reason. Every queue message (rollout
//! checks, wake-ups, promote-after hops) is delivered as SQS hands it out, after its delay.

use std::collections::BTreeMap;

use crate::common::Scenario;
use crate::moving::{deliver, events, seeded};
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::argocd::{Controller, Script, Timeline, stamp};
use argocd_ecr_updater_standins::fixtures::{
    SEED_APP, SEED_REPOSITORY, SEED_TAG, image, push_event,
};
use argocd_ecr_updater_standins::kube::KubeState;
use argocd_ecr_updater_standins::{ExtraCluster, Options};
use serde_json::json;

const STAGING: &str = "web-staging";
const PROD: &str = "web-prod";
const FROM: &str = "argocd-ecr-updater.io/app.promote-from";
const AFTER: &str = "argocd-ecr-updater.io/app.promote-after";

/// dev (the seed) and staging in `barun-dev`, prod in `prod`; staging promotes from dev after
/// 30 minutes, prod from staging at once. Every Application's controller runs `script`.
async fn chain(script: Script) -> (Scenario, ExtraCluster, String) {
    chain_to(script, &[]).await
}

/// [`chain`], with `prod` also annotated with `annotations`.
async fn chain_to(
    script: Script,
    prod_annotations: &[(&str, &str)],
) -> (Scenario, ExtraCluster, String) {
    let (standins, queue) = seeded(|_| {}, &[script]).await;
    copy_as(
        &standins.kube,
        &standins.kube,
        STAGING,
        &[(FROM, "argocd/aws-pipeline-test"), (AFTER, "30m")],
    );
    let prod = standins
        .add_cluster("prod", "ap-northeast-2", Options::default().identities)
        .await
        .unwrap();
    let mut annotations = vec![(FROM, "barun-dev/argocd/web-staging")];
    annotations.extend_from_slice(prod_annotations);
    copy_as(&standins.kube, &prod.kube, PROD, &annotations);
    let clock = standins.test_clock();
    // Its API server checks tokens against the test's clock, as the seed cluster's does.
    prod.shared.follow_clock(clock.clone());
    prod.kube
        .run_controller(Controller::timed(script, Timeline::typical(), clock));
    let standins = standins.var("CLUSTERS", r#"[{"name":"barun-dev"},{"name":"prod"}]"#);
    (standins, prod, queue)
}

/// The seed Application copied into `into` as `name`, with `annotations` added.
fn copy_as(from: &KubeState, into: &KubeState, name: &str, annotations: &[(&str, &str)]) {
    let mut app = from.get("argocd", SEED_APP).unwrap();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    app["metadata"]["name"] = json!(name);
    for (key, value) in annotations {
        app["metadata"]["annotations"][*key] = json!(value);
    }
    into.insert(app).unwrap();
}

/// Time passed on every cluster's controller.
fn pass_to(standins: &Scenario, prod: &ExtraCluster, until: time::OffsetDateTime) {
    standins.kube.step_to(until);
    prod.kube.step_to(until);
    if standins.test_clock().now() < until {
        standins.test_clock().set(until);
    }
}

fn tag_of(kube: &KubeState, name: &str) -> String {
    kube.helm_parameter("argocd", name, "image.tag").unwrap()
}

/// What the queue delivered: each message's report, in the order handed out.
struct Delivered {
    reports: Vec<(String, Report)>,
}

impl Delivered {
    /// The entries of `name` in every report, with when they were decided.
    fn entries(&self, name: &str) -> Vec<(&str, &argocd_ecr_updater::report::Entry)> {
        self.reports
            .iter()
            .flat_map(|(at, r)| r.entries.iter().map(move |e| (at.as_str(), e)))
            .filter(|(_, e)| e.name == name)
            .collect()
    }

    /// When `name` was written, and to what.
    fn writes(&self, name: &str) -> Vec<(String, String)> {
        self.entries(name)
            .into_iter()
            .filter(|(_, e)| e.action == Action::Updated)
            .map(|(at, e)| (at.to_string(), e.to.clone().unwrap_or_default()))
            .collect()
    }

    /// When `name`'s rollout ended `state`.
    fn ended(&self, name: &str, state: &str) -> Vec<String> {
        self.reports
            .iter()
            .filter(|(_, r)| {
                r.rollouts
                    .iter()
                    .any(|o| o.name == name && o.state == state)
            })
            .map(|(at, _)| at.clone())
            .collect()
    }
}

/// Delivers every message on the queue as SQS hands it out (the earliest due first, each
/// after its delay) until none is left or `within` has passed.
async fn drain(
    standins: &Scenario,
    prod: &ExtraCluster,
    queue: &str,
    within: time::Duration,
) -> Delivered {
    let end = standins.test_clock().now() + within;
    let mut due: BTreeMap<String, time::OffsetDateTime> = BTreeMap::new();
    let mut delivered = std::collections::BTreeSet::new();
    let mut reports = Vec::new();
    loop {
        let now = standins.test_clock().now();
        let messages = standins.aws.queue(queue);
        for m in &messages {
            due.entry(m.id.clone())
                .or_insert(now + time::Duration::seconds(m.delay_seconds.into()));
        }
        let next = messages
            .iter()
            .filter(|m| !delivered.contains(&m.id))
            .min_by_key(|m| (due[&m.id], m.id.clone()));
        let Some(next) = next else { break };
        let at = due[&next.id];
        if at > end {
            break;
        }
        delivered.insert(next.id.clone());
        pass_to(standins, prod, at.max(now));
        let report = deliver(standins, next).await;
        reports.push((stamp(standins.test_clock().now()), report));
    }
    Delivered { reports }
}

async fn push(standins: &Scenario, tag: &str, digest: char) -> Report {
    let now = stamp(standins.test_clock().now());
    standins.aws.push(image(SEED_REPOSITORY, tag, digest, &now));
    standins
        .report(&[], &push_event(SEED_REPOSITORY, tag, &now))
        .await
}

fn reason_of<'r>(report: &'r Report, name: &str) -> &'r str {
    report
        .entries
        .iter()
        .find(|e| e.name == name)
        .map_or("", |e| e.reason.as_str())
}

#[tokio::test]
async fn a_push_reaches_dev_then_staging_after_its_soak_then_prod_in_another_cluster_with_the_same_image()
 {
    let (standins, prod, queue) = chain(Script::Healthy).await;
    let pushed = push(&standins, "20250901-100000", 'b').await;
    // The push moves dev only; staging and prod say why not.
    assert_eq!(tag_of(&standins.kube, SEED_APP), "20250901-100000");
    assert_eq!(tag_of(&standins.kube, STAGING), SEED_TAG);
    assert_eq!(tag_of(&prod.kube, PROD), SEED_TAG);
    let staging = reason_of(&pushed, STAGING);
    assert!(
        // Decided with dev, before or after its write: neither is verified.
        staging.contains("promoted from barun-dev/argocd/aws-pipeline-test: the upstream")
            && (staging.contains("is not verified yet") || staging.contains("has had no write")),
        "{staging}"
    );
    let delivered = drain(&standins, &prod, &queue, time::Duration::hours(6)).await;
    let dev_confirmed = delivered.ended(SEED_APP, "confirmed");
    let staging_writes = delivered.writes(STAGING);
    let staging_confirmed = delivered.ended(STAGING, "confirmed");
    let prod_writes = delivered.writes(PROD);
    assert_eq!(
        dev_confirmed.len(),
        1,
        "{:#?}",
        delivered
            .reports
            .iter()
            .map(|(at, r)| (at, &r.rollouts, &r.entries, &r.skipped))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        staging_writes.len(),
        1,
        "{:#?}",
        delivered
            .reports
            .iter()
            .map(|(at, r)| (
                at,
                r.rollouts
                    .iter()
                    .map(|o| (&o.name, &o.state, &o.reason))
                    .collect::<Vec<_>>(),
                r.entries
                    .iter()
                    .map(|e| (&e.name, &e.reason))
                    .collect::<Vec<_>>(),
                &r.skipped
            ))
            .collect::<Vec<_>>()
    );
    assert_eq!(staging_writes[0].1, "20250901-100000");
    // Staging waited its 30 minutes after dev was verified, and prod for staging's rollout.
    let at = |s: &str| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).unwrap()
    };
    let soaked = at(&staging_writes[0].0) - at(&dev_confirmed[0]);
    assert!(
        soaked >= time::Duration::minutes(30) && soaked < time::Duration::minutes(32),
        "staging written {soaked} after dev was verified"
    );
    assert_eq!(
        prod_writes.len(),
        1,
        "{:#?}",
        delivered
            .reports
            .iter()
            .map(|(at, r)| (
                at,
                r.rollouts
                    .iter()
                    .map(|o| (&o.name, &o.state, &o.reason))
                    .collect::<Vec<_>>(),
                r.entries
                    .iter()
                    .map(|e| (&e.name, &e.reason))
                    .collect::<Vec<_>>(),
                &r.skipped
            ))
            .collect::<Vec<_>>()
    );
    assert!(at(&prod_writes[0].0) >= at(&staging_confirmed[0]));
    assert_eq!(tag_of(&prod.kube, PROD), "20250901-100000");
    // The reason says where it came from.
    let written = delivered
        .entries(PROD)
        .into_iter()
        .find(|(_, e)| e.action == Action::Updated)
        .unwrap()
        .1;
    assert!(
        written
            .reason
            .contains("promoted from barun-dev/argocd/web-staging, verified there at"),
        "{}",
        written.reason
    );
    // What one promotion costs: the invocations the queue brought, by kind.
    let kinds = delivered.reports.len();
    println!(
        "promotion dev → staging (30m) → prod: {kinds} queue invocations, {} kube GETs on barun-dev, {} on prod",
        standins.kube_requests("GET"),
        prod.shared
            .requests()
            .iter()
            .filter(|r| r.method == "GET")
            .count()
    );
}

#[tokio::test]
async fn a_failed_upstream_stops_the_chain_there_and_a_sweep_does_not_promote_it() {
    let (standins, prod, queue) = chain(Script::DegradedAfterSync).await;
    push(&standins, "20250901-100000", 'b').await;
    let delivered = drain(&standins, &prod, &queue, time::Duration::hours(3)).await;
    assert_eq!(delivered.ended(SEED_APP, "failed").len(), 1);
    assert!(delivered.writes(STAGING).is_empty());
    let swept = standins
        .report(&[], &crate::common::event("scheduled-reconcile.json"))
        .await;
    let reason = reason_of(&swept, STAGING);
    assert!(
        reason.contains("a failed upstream never promotes"),
        "{reason}"
    );
    assert_eq!(tag_of(&standins.kube, STAGING), SEED_TAG);
    assert_eq!(tag_of(&prod.kube, PROD), SEED_TAG);
}

#[tokio::test]
async fn a_newer_push_mid_chain_supersedes_the_pending_promotion() {
    let (standins, prod, queue) = chain(Script::Healthy).await;
    push(&standins, "20250901-100000", 'b').await;
    // Until dev is verified and staging soaks.
    let mut confirmed = false;
    for _ in 0..20 {
        let d = drain(&standins, &prod, &queue, time::Duration::minutes(5)).await;
        if !d.ended(SEED_APP, "confirmed").is_empty() {
            confirmed = true;
            break;
        }
    }
    assert!(confirmed, "dev never verified");
    // A newer image reaches dev while staging soaks on the first.
    push(&standins, "20250901-110000", 'c').await;
    let delivered = drain(&standins, &prod, &queue, time::Duration::hours(6)).await;
    let writes = delivered.writes(STAGING);
    assert_eq!(
        writes.iter().map(|(_, to)| to.as_str()).collect::<Vec<_>>(),
        ["20250901-110000"],
        "staging took only the newer image once verified: {writes:?}"
    );
    assert_eq!(tag_of(&prod.kube, PROD), "20250901-110000");
}

#[tokio::test]
async fn a_cycle_and_a_missing_upstream_are_refused_with_their_reason_and_an_event() {
    let (standins, _prod, _queue) = chain(Script::Healthy).await;
    // dev promotes from staging, which promotes from dev: nothing would ever take a push.
    standins.annotate("argocd", SEED_APP, &[(FROM, "argocd/web-staging")]);
    let report = push(&standins, "20250901-100000", 'b').await;
    let dev = report.entries.iter().find(|e| e.name == SEED_APP).unwrap();
    assert_eq!(dev.action, Action::Failed, "{dev:?}");
    assert!(
        dev.reason.contains("promote-from makes a cycle (barun-dev/argocd/aws-pipeline-test → barun-dev/argocd/web-staging → barun-dev/argocd/aws-pipeline-test)"),
        "{}",
        dev.reason
    );
    assert!(!dev.retryable);
    assert_eq!(tag_of(&standins.kube, SEED_APP), SEED_TAG);
    standins.annotate("argocd", SEED_APP, &[(FROM, "argocd/web-qa")]);
    let report = push(&standins, "20250901-110000", 'c').await;
    let dev = report.entries.iter().find(|e| e.name == SEED_APP).unwrap();
    assert_eq!(dev.action, Action::Failed);
    assert!(
        dev.reason.contains("there is no such Application"),
        "{}",
        dev.reason
    );
    // Staging is in the cycle too, and is told so on its own.
    let on = |name: &str| {
        events(&standins, "PromotionRefused")
            .into_iter()
            .filter(|e| e["involvedObject"]["name"] == name)
            .count()
    };
    assert_eq!((on(SEED_APP), on(STAGING)), (2, 1), "one Event per refusal");
    let refused = events(&standins, "PromotionRefused");
    assert!(refused.iter().all(|e| e["type"] == "Warning"));
    // The same refusal decided again is recorded once.
    push(&standins, "20250901-110000", 'c').await;
    assert_eq!(on(SEED_APP), 2);
}

#[tokio::test]
async fn prod_written_back_by_pull_request_gets_one_pull_request_with_the_image_staging_verified() {
    let (standins, prod, queue) = chain_to(
        Script::Healthy,
        &[
            ("argocd-image-updater.argoproj.io/write-back-method", "git"),
            ("argocd-ecr-updater.io/git-pull-request", "github"),
        ],
    )
    .await;
    crate::git::with_repository(&standins);
    let standins = crate::git::with_git_vars(standins);
    push(&standins, "20250901-100000", 'b').await;
    let delivered = drain(&standins, &prod, &queue, time::Duration::hours(6)).await;
    assert_eq!(delivered.ended(STAGING, "confirmed").len(), 1);
    let opened: Vec<_> = delivered
        .entries(PROD)
        .into_iter()
        .filter(|(_, e)| e.action == Action::Updated)
        .collect();
    assert_eq!(opened.len(), 1, "{opened:#?}");
    assert!(
        opened[0]
            .1
            .reason
            .contains("pull request https://github.com/barun/invitation/pull/1"),
        "{}",
        opened[0].1.reason
    );
    let pulls = standins.github.pull_requests("barun/invitation");
    assert_eq!(
        pulls.len(),
        1,
        "one pull request, however often prod is re-decided"
    );
    let file = standins
        .github
        .file(
            "barun/invitation",
            &pulls[0].head,
            "argocd/.argocd-source-web-prod.yaml",
        )
        .expect("the override file on the pull request's branch");
    assert!(file.contains("20250901-100000"), "{file}");
    // The spec in prod is left to the merge: nothing patched.
    assert_eq!(tag_of(&prod.kube, PROD), SEED_TAG);
    // A sweep after it opens no second pull request.
    standins
        .report(&[], &crate::common::event("scheduled-reconcile.json"))
        .await;
    assert_eq!(standins.github.pull_requests("barun/invitation").len(), 1);
}

/// Staging, verified by an alarm and rolling back on failure, takes dev's image after its
/// soak; the alarm fires in staging's window: staging's rollout fails, staging is written
/// back to what it ran, prod (promoted from staging) never gets the image, and neither a
/// sweep nor the same image pushed again under a newer tag brings it back to staging.
#[tokio::test]
async fn an_alarm_in_stagings_window_rolls_staging_back_and_prod_never_gets_the_image() {
    let (standins, prod, queue) = chain(Script::Healthy).await;
    standins
        .kube
        .edit("argocd", STAGING, |app| {
            let annotations = &mut app["metadata"]["annotations"];
            annotations["argocd-ecr-updater.io/verify-alarms"] = json!("web-5xx");
            annotations["argocd-ecr-updater.io/verify-for"] = json!("15m");
            annotations["argocd-ecr-updater.io/app.auto-rollback"] = json!("true");
        })
        .unwrap();
    let cloudwatch = &standins.aws.cloudwatch;
    let now = standins.test_clock().now();
    cloudwatch.create_alarm("web-5xx", now - time::Duration::hours(1));
    let bad = "20250901-100000";
    push(&standins, bad, 'b').await;
    // Until staging takes the image (dev verified, then 30 minutes of promote-after).
    let mut delivered = Delivered {
        reports: Vec::new(),
    };
    for _ in 0..120 {
        if !delivered.writes(STAGING).is_empty() {
            break;
        }
        let until = standins.test_clock().now() + time::Duration::minutes(1);
        let step = drain(&standins, &prod, &queue, time::Duration::minutes(1)).await;
        delivered.reports.extend(step.reports);
        pass_to(&standins, &prod, until);
    }
    assert_eq!(
        delivered.writes(STAGING).len(),
        1,
        "staging took dev's image"
    );
    assert_eq!(tag_of(&standins.kube, STAGING), bad);
    let fired = standins.test_clock().now() + time::Duration::minutes(2);
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", fired);
    cloudwatch.set_state(
        "web-5xx",
        "OK",
        "Threshold Crossed: 0 < 5",
        fired + time::Duration::minutes(1),
    );
    let later = drain(&standins, &prod, &queue, time::Duration::hours(3)).await;
    delivered.reports.extend(later.reports);
    assert_eq!(
        delivered.ended(STAGING, "failed").len(),
        1,
        "fired at {fired}: {:#?}",
        delivered
            .reports
            .iter()
            .map(|(at, r)| (
                at,
                r.rollouts
                    .iter()
                    .map(|o| format!("{} {} {}", o.name, o.state, o.reason))
                    .collect::<Vec<_>>(),
                r.entries
                    .iter()
                    .map(|e| format!("{} {:?} {}", e.name, e.action, e.reason))
                    .collect::<Vec<_>>()
            ))
            .collect::<Vec<_>>()
    );
    let rolled_back: Vec<_> = delivered
        .entries(STAGING)
        .into_iter()
        .filter(|(_, e)| e.action == Action::Updated && e.reason.starts_with("auto-rollback"))
        .collect();
    assert_eq!(rolled_back.len(), 1, "staging written back once");
    assert_eq!(tag_of(&standins.kube, STAGING), SEED_TAG);
    assert_eq!(
        tag_of(&standins.kube, SEED_APP),
        bad,
        "dev keeps its verified image"
    );
    assert!(delivered.writes(PROD).is_empty(), "prod never gets it");
    assert_eq!(tag_of(&prod.kube, PROD), SEED_TAG);
    assert_eq!(events(&standins, "RolledBack").len(), 1);

    let swept = standins
        .report(&[], &crate::common::event("scheduled-reconcile.json"))
        .await;
    assert!(
        reason_of(&swept, STAGING).contains("was rolled back at"),
        "{}",
        reason_of(&swept, STAGING)
    );
    let repushed = push(&standins, "20250902-100000", 'b').await;
    assert_eq!(tag_of(&standins.kube, SEED_APP), "20250902-100000");
    let _ = repushed;
    let after = drain(&standins, &prod, &queue, time::Duration::hours(3)).await;
    assert!(
        after.writes(STAGING).is_empty(),
        "the same image under a newer tag, verified on dev again, is refused on staging: {:?}",
        after
            .entries(STAGING)
            .iter()
            .map(|(at, e)| (at.to_string(), e.reason.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(tag_of(&standins.kube, STAGING), SEED_TAG);
    assert!(after.writes(PROD).is_empty());
}

/// A scan gate on a promoted Application judges the image verified upstream by ECR's
/// findings for the digest ECR names for its tag (the upstream wrote the tag alone): clean,
/// prod gets it; with a critical finding, prod never does.
#[tokio::test]
async fn a_scan_gate_on_prod_judges_the_promoted_image_by_ecrs_findings_for_its_digest() {
    for (counts, promoted) in [(vec![], true), (vec![("CRITICAL", 1)], false)] {
        let (standins, prod, queue) = chain_to(
            Script::Healthy,
            &[("argocd-ecr-updater.io/app.scan-gate", "critical=0")],
        )
        .await;
        standins.aws.set_scan(
            SEED_REPOSITORY,
            &argocd_ecr_updater_standins::fixtures::digest('b'),
            "COMPLETE",
            &counts,
        );
        push(&standins, "20250901-100000", 'b').await;
        let delivered = drain(&standins, &prod, &queue, time::Duration::hours(6)).await;
        assert_eq!(delivered.writes(STAGING).len(), 1, "staging is not gated");
        let prod_writes = delivered.writes(PROD);
        let said: Vec<String> = delivered
            .reports
            .iter()
            .map(|(_, r)| reason_of(r, PROD).to_string())
            .filter(|r| !r.is_empty())
            .collect();
        if promoted {
            assert_eq!(prod_writes.len(), 1, "{said:#?}");
            assert_eq!(tag_of(&prod.kube, PROD), "20250901-100000");
        } else {
            assert!(prod_writes.is_empty(), "{said:#?}");
            assert!(
                said.iter().any(|r| r.contains("critical 1 > 0")),
                "{said:#?}"
            );
            assert_eq!(tag_of(&prod.kube, PROD), SEED_TAG);
        }
    }
}
