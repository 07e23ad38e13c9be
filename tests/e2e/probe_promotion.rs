//! Adversarial probes of issue 64's promotion chains (`<alias>.promote-from`,
//! `<alias>.promote-after`), off the happy path: stale, repeated, forged, concurrent and
//! rolled back. Same world as `promotion.rs`: dev (the seed) and staging in `barun-dev`
//! (staging promotes from dev after 30 minutes), prod in `prod` (from staging at once), every
//! controller on the test clock. Unlike `promotion.rs`'s `drain`, the queue here remembers
//! when each message became due across calls, so that a test may act between two drains
//! (re-push, edit, sweep) without delaying the messages already on their way.
//!
//! Found failing by the probe and fixed: a tag re-pushed between the upstream's write and its
//! verification (now checked against the push time the upstream's record holds); a
//! downstream's own min-age longer than promote-after (the promotion's push now starts the
//! soak chain); hops sent from a shard run named `promotion-` (now after the Application);
//! a dip of the upstream's health between two hops (promote-after now counts from the
//! health's last change, which the controller records); a hop finding the upstream not
//! Healthy ended the chain (it now looks again for up to an hour).

use std::collections::{BTreeMap, BTreeSet};

use crate::common::Scenario;
use crate::moving::{deliver, deliver_body, seeded, set_param};
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::argocd::{Controller, Script, Timeline, stamp};
use argocd_ecr_updater_standins::fixtures::{
    SEED_APP, SEED_REPOSITORY, SEED_TAG, image, push_event,
};
use argocd_ecr_updater_standins::kube::KubeState;
use argocd_ecr_updater_standins::{ExtraCluster, Options};
use serde_json::json;
use time::{Duration, OffsetDateTime};

const STAGING: &str = "web-staging";
const PROD: &str = "web-prod";
const FROM: &str = "argocd-ecr-updater.io/app.promote-from";
const AFTER: &str = "argocd-ecr-updater.io/app.promote-after";
const FREEZE: &str = "argocd-ecr-updater.io/freeze";
const T1: &str = "20250901-100000";
const T2: &str = "20250901-110000";

struct World {
    standins: Scenario,
    prod: ExtraCluster,
    queue: String,
    due: BTreeMap<String, OffsetDateTime>,
    delivered: BTreeSet<String>,
    /// Every delivery's report, with when it was decided.
    reports: Vec<(OffsetDateTime, Report)>,
}

async fn world(script: Script) -> World {
    world_with(|_| {}, script).await
}

/// As [`world`], `prepare` editing dev first (staging and prod are copies of it).
async fn world_with(prepare: impl FnOnce(&mut serde_json::Value), script: Script) -> World {
    let (standins, queue) = seeded(prepare, &[script]).await;
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
    copy_as(
        &standins.kube,
        &prod.kube,
        PROD,
        &[(FROM, "barun-dev/argocd/web-staging")],
    );
    let clock = standins.test_clock();
    prod.shared.follow_clock(clock.clone());
    prod.kube
        .run_controller(Controller::timed(script, Timeline::typical(), clock));
    let standins = standins.var("CLUSTERS", r#"[{"name":"barun-dev"},{"name":"prod"}]"#);
    World {
        standins,
        prod,
        queue,
        due: BTreeMap::new(),
        delivered: BTreeSet::new(),
        reports: Vec::new(),
    }
}

fn copy_as(from: &KubeState, into: &KubeState, name: &str, annotations: &[(&str, &str)]) {
    let mut app = from.get("argocd", SEED_APP).unwrap();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    app["metadata"]["name"] = json!(name);
    for (key, value) in annotations {
        app["metadata"]["annotations"][*key] = json!(value);
    }
    into.insert(app).unwrap();
}

fn tag_of(kube: &KubeState, name: &str) -> String {
    kube.helm_parameter("argocd", name, "image.tag").unwrap()
}

fn reason_of<'r>(report: &'r Report, name: &str) -> &'r str {
    report
        .entries
        .iter()
        .find(|e| e.name == name)
        .map_or("", |e| e.reason.as_str())
}

impl World {
    fn now(&self) -> OffsetDateTime {
        self.standins.test_clock().now()
    }

    fn pass_to(&self, until: OffsetDateTime) {
        self.standins.kube.step_to(until);
        self.prod.kube.step_to(until);
        if self.now() < until {
            self.standins.test_clock().set(until);
        }
    }

    fn pass(&mut self, by: Duration) {
        self.observe();
        let until = self.now() + by;
        self.pass_to(until);
    }

    /// Notes when each message on the queue not yet seen becomes due.
    fn observe(&mut self) {
        let now = self.now();
        for m in self.standins.aws.queue(&self.queue) {
            self.due
                .entry(m.id.clone())
                .or_insert(now + Duration::seconds(m.delay_seconds.into()));
        }
    }

    /// Delivers every message due within `within`, as SQS hands them out (earliest first),
    /// then passes the clock to the end of `within`.
    async fn drain(&mut self, within: Duration) {
        let end = self.now() + within;
        loop {
            self.observe();
            let messages = self.standins.aws.queue(&self.queue);
            let next = messages
                .iter()
                .filter(|m| !self.delivered.contains(&m.id))
                .min_by_key(|m| (self.due[&m.id], m.id.clone()));
            let Some(next) = next else { break };
            let at = self.due[&next.id];
            if at > end {
                break;
            }
            self.delivered.insert(next.id.clone());
            let now = self.now();
            self.pass_to(at.max(now));
            let report = deliver(&self.standins, next).await;
            self.reports.push((self.now(), report));
        }
        self.pass_to(end);
    }

    /// Drains in five-minute steps until dev's rollout of its last write is confirmed;
    /// returns when.
    async fn until_dev_confirmed(&mut self) -> OffsetDateTime {
        for _ in 0..400 {
            self.drain(Duration::seconds(30)).await;
            if let Some(at) = self.ended(SEED_APP, "confirmed").first() {
                return *at;
            }
        }
        panic!("dev never verified: {}", self.story());
    }

    async fn push(&self, tag: &str, digest: char) -> Report {
        let now = stamp(self.now());
        self.standins
            .aws
            .push(image(SEED_REPOSITORY, tag, digest, &now));
        self.standins
            .report(&[], &push_event(SEED_REPOSITORY, tag, &now))
            .await
    }

    /// Re-points `tag` in ECR at another digest, with no push event delivered.
    fn repush_silently(&self, tag: &str, digest: char) {
        let now = stamp(self.now());
        self.standins
            .aws
            .push(image(SEED_REPOSITORY, tag, digest, &now));
    }

    async fn sweep(&mut self) -> Report {
        let report = self
            .standins
            .report(&[], &crate::common::event("scheduled-reconcile.json"))
            .await;
        self.reports.push((self.now(), report.clone()));
        report
    }

    fn writes(&self, name: &str) -> Vec<(OffsetDateTime, String)> {
        self.reports
            .iter()
            .flat_map(|(at, r)| r.entries.iter().map(move |e| (*at, e)))
            .filter(|(_, e)| e.name == name && e.action == Action::Updated)
            .map(|(at, e)| (at, e.to.clone().unwrap_or_default()))
            .collect()
    }

    fn ended(&self, name: &str, state: &str) -> Vec<OffsetDateTime> {
        self.reports
            .iter()
            .filter(|(_, r)| {
                r.rollouts
                    .iter()
                    .any(|o| o.name == name && o.state == state)
            })
            .map(|(at, _)| *at)
            .collect()
    }

    /// Every entry and rollout of every delivery, for a failing assertion's message.
    fn story(&self) -> String {
        let mut out = String::new();
        for (at, r) in &self.reports {
            out.push_str(&format!("\n@{}", stamp(*at)));
            for o in &r.rollouts {
                out.push_str(&format!("\n  rollout {} {}: {}", o.name, o.state, o.reason));
            }
            for e in &r.entries {
                out.push_str(&format!(
                    "\n  entry {} {:?} {:?}: {}",
                    e.name, e.action, e.to, e.reason
                ));
            }
        }
        out
    }

    /// The wake-up shards dev's verification sent for `name`.
    fn wakes_for(&self, name: &str) -> Vec<String> {
        self.standins
            .aws
            .queue(&self.queue)
            .into_iter()
            .filter(|m| {
                m.body.contains("\"promotion-")
                    && m.body.contains("\"hop\":0")
                    && m.body.contains(name)
            })
            .map(|m| m.body)
            .collect()
    }

    /// Every message naming `name` with a promotion hop.
    fn hops_for(&self, name: &str) -> Vec<String> {
        self.standins
            .aws
            .queue(&self.queue)
            .into_iter()
            .filter(|m| m.body.contains("promote:") && m.body.contains(name))
            .map(|m| m.body)
            .collect()
    }
}

/// ECR's tag moves to another digest while staging soaks on dev's verified write: what
/// staging would take is no longer what dev verified. Nothing may be promoted.
#[tokio::test]
async fn probe_a_tag_re_pushed_to_another_digest_after_verification_is_not_promoted() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.pass(Duration::minutes(2));
    w.repush_silently(T1, 'c');
    w.drain(Duration::hours(4)).await;
    assert!(
        w.writes(STAGING).is_empty(),
        "staging took a digest dev never ran: {}",
        w.story()
    );
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    // And a sweep does not either.
    let swept = w.sweep().await;
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG, "{swept:#?}");
}

/// The tag moves in ECR after dev's write (dev's Pods already run the first digest) but
/// before dev's rollout check confirms it. Dev verified digest `b`; ECR now says `c`. The
/// write-back is tag-only, so the digest check has nothing to compare but push times: the
/// audit record knows when the image dev was written was pushed (`pushed`), and ECR's push
/// time of the tag now differs from it.
#[tokio::test]
async fn probe_a_tag_re_pushed_between_the_upstream_write_and_its_verification_is_not_promoted() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    // Until dev runs T1 (Healthy, its Pods on the new image), but before its check confirms.
    let mut repushed = false;
    for _ in 0..600 {
        // The controller moves; the rollout check waits (delivered late, by the drain below).
        w.pass(Duration::seconds(1));
        let dev = w.standins.kube.get("argocd", SEED_APP).unwrap();
        // Only T1's Pods left (the old ones terminated), Synced and Healthy: the Pods pulled
        // digest b, the only one T1 named until now.
        let runs = dev["status"]["summary"]["images"]
            .as_array()
            .is_some_and(|i| {
                !i.is_empty() && i.iter().all(|i| i.as_str().unwrap_or("").ends_with(T1))
            });
        if runs
            && dev["status"]["health"]["status"] == "Healthy"
            && dev["status"]["sync"]["status"] == "Synced"
            && dev["status"]["operationState"]["phase"] == "Succeeded"
        {
            w.repush_silently(T1, 'c');
            repushed = true;
            break;
        }
    }
    assert!(
        repushed,
        "dev never ran T1 before it was confirmed: {}",
        w.story()
    );
    w.drain(Duration::hours(4)).await;
    assert_eq!(w.ended(SEED_APP, "confirmed").len(), 1, "{}", w.story());
    assert!(
        w.writes(STAGING).is_empty(),
        "staging took `{T1}` at digest c, which ECR re-pointed after dev's write; dev verified digest b: {}",
        w.story()
    );
}

/// The wake-up shard delivered twice (SQS delivers at least once), once right away and once
/// late: one write of staging, one hop chain.
#[tokio::test]
async fn probe_a_wake_shard_delivered_twice_promotes_once_with_one_chain() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    let wakes = w.wakes_for(STAGING);
    assert_eq!(wakes.len(), 1, "one wake-up for staging: {wakes:#?}");
    let hops_before = w.hops_for(STAGING).len();
    let again = deliver_body(&w.standins, "wake-again-1", &wakes[0]).await;
    w.reports.push((w.now(), again.clone()));
    assert!(
        reason_of(&again, STAGING).contains("delivered again"),
        "the second delivery said: {}",
        reason_of(&again, STAGING)
    );
    assert_eq!(
        w.hops_for(STAGING).len(),
        hops_before,
        "the second delivery of the wake-up sent a hop of its own"
    );
    w.drain(Duration::minutes(20)).await;
    // Once more, late, in the middle of the chain.
    let late = deliver_body(&w.standins, "wake-again-2", &wakes[0]).await;
    w.reports.push((w.now(), late));
    w.drain(Duration::hours(4)).await;
    let writes = w.writes(STAGING);
    assert_eq!(writes.len(), 1, "{}", w.story());
    assert!(writes[0].0 - confirmed >= Duration::minutes(30));
    // Staging's decisions: the wake-up, its chain's hops, the repeats; not a second chain.
    let staging_runs = w
        .reports
        .iter()
        .filter(|(_, r)| r.entries.iter().any(|e| e.name == STAGING))
        .count();
    assert!(
        staging_runs <= 8,
        "{staging_runs} runs of staging: {}",
        w.story()
    );
}

/// A forged (or stale) wake-up for staging while dev's write is not verified: nothing moves,
/// no chain is started, and the real promotion still comes on time.
#[tokio::test]
async fn probe_a_forged_wake_shard_before_verification_promotes_nothing() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let hop = argocd_ecr_updater::sweep::shard::SoakHop {
        image: argocd_ecr_updater_standins::fixtures::SEED_IMAGE.to_string(),
        candidate: format!("promote:{T1}"),
        hop: 0,
    };
    let forged = argocd_ecr_updater::sweep::shard::follow_up(
        "promotion-aws-pipeline-test-1",
        "barun-dev",
        "argocd",
        STAGING,
        Some(hop.clone()),
    );
    let body = serde_json::to_string(&forged).unwrap();
    let report = deliver_body(&w.standins, "forged-1", &body).await;
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    let reason = reason_of(&report, STAGING);
    assert!(
        reason.contains("not verified yet") || reason.contains("has had no write"),
        "{reason}"
    );
    assert!(
        w.hops_for(STAGING).is_empty(),
        "a forged wake-up started a chain"
    );
    // A forged far-along hop too.
    let forged = argocd_ecr_updater::sweep::shard::follow_up(
        "promotion-x-2",
        "barun-dev",
        "argocd",
        STAGING,
        Some(argocd_ecr_updater::sweep::shard::SoakHop { hop: 7, ..hop }),
    );
    deliver_body(
        &w.standins,
        "forged-2",
        &serde_json::to_string(&forged).unwrap(),
    )
    .await;
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    let confirmed = w.until_dev_confirmed().await;
    w.drain(Duration::hours(4)).await;
    let writes = w.writes(STAGING);
    assert_eq!(writes.len(), 1, "{}", w.story());
    assert!(
        writes[0].0 - confirmed >= Duration::minutes(30),
        "written {} after dev was verified",
        writes[0].0 - confirmed
    );
}

/// Sweeps every few minutes while staging soaks: none promotes early; exactly one write,
/// at the end of promote-after.
#[tokio::test]
async fn probe_sweeps_during_promote_after_do_not_promote_early() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    for _ in 0..5 {
        w.drain(Duration::minutes(5)).await;
        let swept = w.sweep().await;
        if w.now() - confirmed < Duration::minutes(30) {
            assert_eq!(
                tag_of(&w.standins.kube, STAGING),
                SEED_TAG,
                "promoted {} after verification: {}",
                w.now() - confirmed,
                reason_of(&swept, STAGING)
            );
        }
    }
    w.drain(Duration::hours(3)).await;
    w.sweep().await;
    let writes = w.writes(STAGING);
    assert_eq!(writes.len(), 1, "{}", w.story());
    assert!(writes[0].0 - confirmed >= Duration::minutes(30));
    assert_eq!(tag_of(&w.standins.kube, STAGING), T1);
}

/// Someone puts dev back on the old tag (kubectl edit) after its write was verified, while
/// staging soaks: dev no longer runs what it verified; nothing is promoted.
#[tokio::test]
async fn probe_an_upstream_changed_back_after_verification_does_not_promote() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(5)).await;
    set_param(&w.standins, "kubectl-edit", "image.tag", SEED_TAG);
    w.drain(Duration::hours(4)).await;
    w.sweep().await;
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    assert_eq!(tag_of(&w.prod.kube, PROD), SEED_TAG);
}

/// `argocd app rollback` of dev after verification (auto-sync off): the spec still names T1
/// but dev runs the old image again. Nothing is promoted.
#[tokio::test]
async fn probe_an_upstream_rolled_back_by_argocd_after_verification_does_not_promote() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(3)).await;
    w.standins
        .kube
        .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
            app["spec"]["syncPolicy"]
                .as_object_mut()
                .unwrap()
                .remove("automated");
        })
        .unwrap();
    w.standins
        .kube
        .rollback("argocd", SEED_APP, 0, "admin")
        .unwrap();
    w.drain(Duration::hours(4)).await;
    w.sweep().await;
    let dev = w.standins.kube.get("argocd", SEED_APP).unwrap();
    assert!(
        !dev["status"]["summary"]["images"].to_string().contains(T1),
        "the stand-in did not roll dev back: {}",
        dev["status"]
    );
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
}

/// Dev's health changed, as the controller persists a change: the status, and when it
/// changed (`persistAppStatus` moves lastTransitionTime only on a change).
fn set_dev_health(w: &World, status: &str) {
    let at = argocd_ecr_updater_standins::argocd::stamp(w.now());
    w.standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["health"]["status"] = json!(status);
            app["status"]["health"]["lastTransitionTime"] = json!(at);
        })
        .unwrap();
}

/// Dev goes Degraded two minutes into staging's 30-minute promote-after and recovers ten
/// minutes later. promote-after is "the time the upstream must stay live and Healthy after
/// its rollout was verified": it did not, so staging may not be promoted at minute 30, only
/// 30 minutes after dev was Healthy again (or not until dev verifies again).
#[tokio::test]
async fn probe_an_upstream_degraded_during_promote_after_does_not_promote_at_its_end() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    // Between the chain's hops (at about 0, 15 and 30 minutes): no hop sees it.
    w.drain(confirmed + Duration::minutes(2) - w.now()).await;
    set_dev_health(&w, "Degraded");
    w.drain(Duration::minutes(10)).await;
    set_dev_health(&w, "Healthy");
    let recovered = w.now();
    w.drain(Duration::hours(3)).await;
    for (at, to) in w.writes(STAGING) {
        assert!(
            at - recovered >= Duration::minutes(30),
            "staging took {to} {} after dev recovered from Degraded ({} after it was verified): {}",
            at - recovered,
            at - confirmed,
            w.story()
        );
    }
}

/// Staging already runs a newer image than dev verifies: no downgrade.
#[tokio::test]
async fn probe_a_downstream_on_a_newer_image_is_not_downgraded() {
    let mut w = world(Script::Healthy).await;
    let newer = "20250902-090000";
    w.push(T1, 'b').await;
    // A newer build, pushed after T1 and put on staging by hand (a hotfix).
    w.pass(Duration::seconds(5));
    w.repush_silently(newer, 'd');
    w.standins
        .kube
        .edit("argocd", STAGING, |app| {
            for p in app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
            {
                if p["name"] == "image.tag" {
                    p["value"] = json!(newer);
                }
            }
        })
        .unwrap();
    w.until_dev_confirmed().await;
    w.drain(Duration::hours(3)).await;
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.standins.kube, STAGING), newer);
}

/// Staging's own allow-tags refuses dev's tag: not promoted, and staging's entry says why.
#[tokio::test]
async fn probe_a_downstream_filter_refusing_the_tag_is_respected() {
    let mut w = world(Script::Healthy).await;
    w.standins.annotate(
        "argocd",
        STAGING,
        &[("app.allow-tags", "regexp:^release-[0-9]+$")],
    );
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::hours(3)).await;
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    let last = w
        .reports
        .iter()
        .rev()
        .flat_map(|(_, r)| r.entries.iter())
        .find(|e| e.name == STAGING)
        .expect("staging was decided");
    assert!(
        last.reason.contains("allow-tags") || last.reason.contains("filter"),
        "why staging did not move: {}",
        last.reason
    );
}

/// A frozen staging is held (not written while frozen), and promoted once unfrozen.
#[tokio::test]
async fn probe_a_frozen_downstream_is_held_then_promoted_once_unfrozen() {
    let mut w = world(Script::Healthy).await;
    w.standins.annotate("argocd", STAGING, &[(FREEZE, "true")]);
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::hours(2)).await;
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    let last = w
        .reports
        .iter()
        .rev()
        .flat_map(|(_, r)| r.entries.iter())
        .find(|e| e.name == STAGING)
        .expect("staging was decided");
    assert!(last.reason.contains("frozen"), "{}", last.reason);
    let mut app = w.standins.kube.get("argocd", STAGING).unwrap();
    app["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(FREEZE);
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    w.standins.kube.insert(app).unwrap();
    let swept = w.sweep().await;
    assert_eq!(
        tag_of(&w.standins.kube, STAGING),
        T1,
        "unfrozen, the next sweep promotes: {}",
        reason_of(&swept, STAGING)
    );
}

/// promote-from naming an Application in a namespace the function does not watch, or in a
/// cluster not in CLUSTERS: a failed entry with the reason, never a silent skip, and never a
/// write from a push.
#[tokio::test]
async fn probe_an_upstream_outside_the_watched_namespaces_or_clusters_is_refused() {
    let w = world(Script::Healthy).await;
    for (from, says) in [
        ("kube-system/aws-pipeline-test", "ARGOCD_NAMESPACES"),
        ("staging-eu/argocd/aws-pipeline-test", "CLUSTERS"),
    ] {
        w.standins.annotate("argocd", STAGING, &[(FROM, from)]);
        let report = w.push(T1, 'b').await;
        let staging = report
            .entries
            .iter()
            .find(|e| e.name == STAGING)
            .unwrap_or_else(|| panic!("no entry for staging: {report:#?}"));
        assert_eq!(staging.action, Action::Failed, "{from}: {staging:?}");
        assert!(staging.reason.contains(says), "{from}: {}", staging.reason);
        assert!(!staging.retryable, "{from}");
        assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    }
}

/// promote-after lengthened (30m → 2h) while staging's hop chain is on its way: the chain's
/// hop at minute 30 must not promote.
#[tokio::test]
async fn probe_promote_after_lengthened_while_pending_is_honoured() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    w.drain(Duration::minutes(2)).await;
    w.standins.annotate("argocd", STAGING, &[(AFTER, "2h")]);
    w.drain(Duration::hours(4)).await;
    let writes = w.writes(STAGING);
    assert_eq!(writes.len(), 1, "{}", w.story());
    assert!(
        writes[0].0 - confirmed >= Duration::hours(2),
        "written {} after dev was verified",
        writes[0].0 - confirmed
    );
    assert!(
        writes[0].0 - confirmed < Duration::hours(2) + Duration::minutes(16),
        "written {} after dev was verified: the chain was lost",
        writes[0].0 - confirmed
    );
}

/// promote-after shortened (30m → 5m) while pending: promoted no later than the chain's next
/// hop (15 min), never before 5 minutes.
#[tokio::test]
async fn probe_promote_after_shortened_while_pending_promotes_by_the_next_hop() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    w.drain(Duration::minutes(1)).await;
    w.standins.annotate("argocd", STAGING, &[(AFTER, "5m")]);
    w.drain(Duration::hours(2)).await;
    let writes = w.writes(STAGING);
    assert_eq!(writes.len(), 1, "{}", w.story());
    let after = writes[0].0 - confirmed;
    assert!(
        after >= Duration::minutes(5) && after <= Duration::minutes(17),
        "written {after} after dev was verified"
    );
}

/// Fan-out: two downstreams of dev (staging after 30m, qa at once) each take T1 once.
#[tokio::test]
async fn probe_fan_out_to_two_downstreams() {
    let mut w = world(Script::Healthy).await;
    copy_as(
        &w.standins.kube,
        &w.standins.kube,
        "web-qa",
        &[(FROM, "argocd/aws-pipeline-test"), (AFTER, "0s")],
    );
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    w.drain(Duration::hours(3)).await;
    let qa = w.writes("web-qa");
    let staging = w.writes(STAGING);
    assert_eq!(qa.len(), 1, "{}", w.story());
    assert_eq!(staging.len(), 1, "{}", w.story());
    assert!(qa[0].0 - confirmed < Duration::minutes(2));
    assert!(staging[0].0 - confirmed >= Duration::minutes(30));
    assert_eq!(tag_of(&w.standins.kube, "web-qa"), T1);
    assert_eq!(tag_of(&w.standins.kube, STAGING), T1);
}

/// Dev verifies T1, staging soaks; a newer T2 reaches dev and fails there. A failed upstream
/// never promotes: staging takes neither T2 nor (since dev's newer write superseded it and
/// dev is Degraded) T1 on T1's old chain.
#[tokio::test]
async fn probe_a_newer_failed_upstream_write_mid_soak_promotes_nothing() {
    let (standins, queue) = seeded(|_| {}, &[Script::Healthy, Script::DegradedAfterSync]).await;
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
    prod.shared.follow_clock(standins.test_clock());
    let standins = standins.var("CLUSTERS", r#"[{"name":"barun-dev"},{"name":"prod"}]"#);
    let mut w = World {
        standins,
        prod,
        queue,
        due: BTreeMap::new(),
        delivered: BTreeSet::new(),
        reports: Vec::new(),
    };
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(5)).await;
    w.push(T2, 'c').await;
    w.drain(Duration::hours(4)).await;
    w.sweep().await;
    assert_eq!(w.ended(SEED_APP, "failed").len(), 1, "{}", w.story());
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
}

/// Dev verifies T1 twice (the same tag re-verified after a resync, e.g. pushed again with
/// the same digest): staging is written once.
#[tokio::test]
async fn probe_the_same_image_pushed_again_promotes_once() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(3)).await;
    // The same event delivered again by EventBridge.
    let now = stamp(w.now());
    w.standins
        .report(&[], &push_event(SEED_REPOSITORY, T1, &now))
        .await;
    w.drain(Duration::hours(3)).await;
    assert_eq!(w.writes(STAGING).len(), 1, "{}", w.story());
    assert_eq!(w.writes(PROD).len(), 1, "{}", w.story());
}

/// Dev is Degraded when staging's hop comes (10 to 20 minutes into promote-after), then
/// Healthy again for good. Staging should still be promoted (30 minutes after dev is Healthy
/// again at the latest an hour later) without waiting for someone to run a sweep: the chain
/// must not end on a transient Degraded.
#[tokio::test]
async fn probe_an_upstream_degraded_at_a_hop_then_recovered_is_still_promoted_without_a_sweep() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    w.drain(confirmed + Duration::minutes(10) - w.now()).await;
    set_dev_health(&w, "Degraded");
    w.drain(Duration::minutes(10)).await;
    set_dev_health(&w, "Healthy");
    w.drain(Duration::hours(4)).await;
    let writes = w.writes(STAGING);
    assert_eq!(
        writes.len(),
        1,
        "staging never promoted after dev recovered: {}",
        w.story()
    );
}

fn verified_by_alarms(app: &mut serde_json::Value) {
    crate::moving::annotate(app, "argocd-ecr-updater.io/verify-alarms", "web-5xx");
    crate::moving::annotate(app, "argocd-ecr-updater.io/verify-for", "15m");
}

/// Dev verified by a CloudWatch alarm over a 15-minute window: staging is promoted only
/// once the window ended quiet (dev `confirmed`) and promote-after passed after that.
#[tokio::test]
async fn probe_an_upstream_verified_by_alarms_promotes_only_after_its_window_and_promote_after() {
    let mut w = world_with(verified_by_alarms, Script::Healthy).await;
    let created = w.now() - Duration::hours(1);
    w.standins.aws.cloudwatch.create_alarm("web-5xx", created);
    let pushed = w.now();
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    assert!(confirmed - pushed >= Duration::minutes(15), "{}", w.story());
    w.drain(Duration::hours(3)).await;
    let writes = w.writes(STAGING);
    assert_eq!(writes.len(), 1, "{}", w.story());
    assert!(
        writes[0].0 - confirmed >= Duration::minutes(30),
        "{}",
        w.story()
    );
}

/// The alarm fires inside dev's window: dev's rollout fails, staging is never promoted
/// (not by the chain, not by a sweep).
#[tokio::test]
async fn probe_an_upstream_whose_alarm_fires_in_its_window_never_promotes() {
    let mut w = world_with(verified_by_alarms, Script::Healthy).await;
    let created = w.now() - Duration::hours(1);
    w.standins.aws.cloudwatch.create_alarm("web-5xx", created);
    w.push(T1, 'b').await;
    w.drain(Duration::minutes(8)).await;
    let at = w.now();
    w.standins
        .aws
        .cloudwatch
        .set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", at);
    w.drain(Duration::hours(3)).await;
    w.sweep().await;
    assert!(w.ended(SEED_APP, "confirmed").is_empty(), "{}", w.story());
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
}

/// Staging tracks two images, `app` promoted from dev and `worker` taking its own pushes:
/// a worker push moves staging's worker at once (and dev's); dev's verified app is promoted
/// to staging's app only, and staging's worker stays what its own push wrote.
#[tokio::test]
async fn probe_two_images_only_the_promoted_one_waits_for_the_upstream() {
    let mut w = world_with(crate::moving::with_worker, Script::Healthy).await;
    w.standins
        .aws
        .push(image("worker", "v1", 'a', "2025-08-20T00:00:00Z"));
    let worker = crate::moving::push_now(&w.standins, "worker", "v2", 'c').await;
    assert_eq!(
        w.standins
            .kube
            .helm_parameter("argocd", STAGING, "worker.image.tag")
            .as_deref(),
        Some("v2"),
        "staging's worker takes its own pushes: {}",
        reason_of(&worker, STAGING)
    );
    w.push(T1, 'b').await;
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    let confirmed = w.until_dev_confirmed().await;
    w.drain(Duration::hours(3)).await;
    let writes = w.writes(STAGING);
    assert_eq!(
        writes.iter().filter(|(_, to)| to == T1).count(),
        1,
        "{}",
        w.story()
    );
    let app_write = writes.iter().find(|(_, to)| to == T1).unwrap();
    assert!(
        app_write.0 - confirmed >= Duration::minutes(30),
        "{}",
        w.story()
    );
    assert_eq!(tag_of(&w.standins.kube, STAGING), T1);
    assert_eq!(
        w.standins
            .kube
            .helm_parameter("argocd", STAGING, "worker.image.tag")
            .as_deref(),
        Some("v2")
    );
}

/// dev's confirming rollout check delivered a second time (SQS at least once): dev's
/// verification is announced once; staging is woken once and written once.
#[tokio::test]
async fn probe_the_upstream_confirming_check_delivered_twice_wakes_once() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    let checks = crate::moving::checks(&w.standins, &w.queue);
    let confirming = checks.last().expect("dev's checks").clone();
    let again = deliver_body(&w.standins, "check-again", &confirming.body).await;
    w.reports.push((w.now(), again));
    assert_eq!(
        w.wakes_for(STAGING).len(),
        1,
        "woken again by a repeated check: {:#?}",
        w.wakes_for(STAGING)
    );
    w.drain(Duration::hours(3)).await;
    assert_eq!(w.writes(STAGING).len(), 1, "{}", w.story());
    assert_eq!(w.writes(PROD).len(), 1, "{}", w.story());
}

/// A cycle across clusters, spelled with and without the cluster of the same place: dev
/// promotes from prod, prod from staging (`barun-dev/…`), staging from dev (`argocd/…`,
/// its own cluster). Every member is refused with the cycle, and a push moves none.
#[tokio::test]
async fn probe_a_cycle_across_clusters_with_mixed_spellings_is_refused() {
    let w = world(Script::Healthy).await;
    w.standins
        .annotate("argocd", SEED_APP, &[(FROM, "prod/argocd/web-prod")]);
    let report = w.push(T1, 'b').await;
    for name in [SEED_APP, STAGING] {
        let entry = report
            .entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no entry for {name}: {:#?}", report.entries));
        assert_eq!(entry.action, Action::Failed, "{name}: {entry:?}");
        assert!(
            entry.reason.contains("makes a cycle"),
            "{name}: {}",
            entry.reason
        );
    }
    let prod = report.entries.iter().find(|e| e.name == PROD);
    assert!(
        prod.is_some_and(|e| e.action == Action::Failed && e.reason.contains("makes a cycle")),
        "prod is in the cycle too: {prod:?}"
    );
    assert_eq!(tag_of(&w.standins.kube, SEED_APP), SEED_TAG);
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    assert_eq!(tag_of(&w.prod.kube, PROD), SEED_TAG);
}

/// Staging has its own soak (`app.min-age: 1h`), longer than its promote-after (30m): at
/// the end of promote-after the promotion is held by the soak; staging must still be
/// promoted when the image is an hour old, by a follow-up, without a sweep.
#[tokio::test]
async fn probe_a_downstream_soak_longer_than_promote_after_still_promotes_without_a_sweep() {
    let mut w = world(Script::Healthy).await;
    w.standins.annotate(
        "argocd",
        STAGING,
        &[("argocd-ecr-updater.io/app.min-age", "1h")],
    );
    let pushed = w.now();
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::hours(4)).await;
    let writes = w.writes(STAGING);
    assert_eq!(
        writes.len(),
        1,
        "staging never promoted once its own soak ended: {}",
        w.story()
    );
    assert!(writes[0].0 - pushed >= Duration::hours(1), "{}", w.story());
    assert!(
        writes[0].0 - pushed < Duration::hours(1) + Duration::minutes(16),
        "{}",
        w.story()
    );
}

/// The verified tag deleted from ECR (a lifecycle policy) while staging soaks: nothing is
/// promoted, and staging says why.
#[tokio::test]
async fn probe_the_verified_tag_deleted_from_ecr_mid_soak_promotes_nothing() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(5)).await;
    w.standins.aws.remove(SEED_REPOSITORY, T1);
    w.drain(Duration::hours(2)).await;
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    let last = w
        .reports
        .iter()
        .rev()
        .flat_map(|(_, r)| r.entries.iter())
        .find(|e| e.name == STAGING)
        .expect("staging was decided");
    assert!(
        last.reason.contains(T1) && last.reason.contains("not"),
        "{}",
        last.reason
    );
}

/// Dev's rollout is verified, staging's (of the promoted image) fails: prod, in the other
/// cluster, is never promoted — not by the chain, not by a sweep.
#[tokio::test]
async fn probe_a_failed_middle_of_the_chain_never_promotes_prod() {
    let (standins, queue) = seeded(|_| {}, &[Script::Healthy, Script::DegradedAfterSync]).await;
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
    copy_as(
        &standins.kube,
        &prod.kube,
        PROD,
        &[(FROM, "barun-dev/argocd/web-staging")],
    );
    let clock = standins.test_clock();
    prod.shared.follow_clock(clock.clone());
    prod.kube.run_controller(Controller::timed(
        Script::Healthy,
        Timeline::typical(),
        clock,
    ));
    let standins = standins.var("CLUSTERS", r#"[{"name":"barun-dev"},{"name":"prod"}]"#);
    let mut w = World {
        standins,
        prod,
        queue,
        due: BTreeMap::new(),
        delivered: BTreeSet::new(),
        reports: Vec::new(),
    };
    // Staging's first sync (the controller's script is per Application) is a hand edit of
    // another value, Healthy; its second, the promotion, goes Degraded.
    w.standins
        .kube
        .edit_as("kubectl-edit", "argocd", STAGING, |app| {
            app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "replicas", "value": "3"}));
        })
        .unwrap();
    w.pass(Duration::minutes(10));
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::hours(4)).await;
    let swept = w.sweep().await;
    assert_eq!(w.writes(STAGING).len(), 1, "{}", w.story());
    assert_eq!(w.ended(STAGING, "failed").len(), 1, "{}", w.story());
    assert!(w.writes(PROD).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.prod.kube, PROD), SEED_TAG);
    assert!(
        reason_of(&swept, PROD).contains("a failed upstream never promotes"),
        "{}",
        reason_of(&swept, PROD)
    );
}

/// The last hop of staging's promote-after delivered twice at once (two invocations racing
/// on one message): one write of staging, one rollout followed, one promotion of prod.
#[tokio::test]
async fn probe_the_ripe_hop_delivered_twice_concurrently_writes_once() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    let confirmed = w.until_dev_confirmed().await;
    w.drain(confirmed + Duration::minutes(29) - w.now()).await;
    w.observe();
    let ripe = w
        .standins
        .aws
        .queue(&w.queue)
        .into_iter()
        .filter(|m| {
            m.body.contains("promote:") && m.body.contains(STAGING) && !w.delivered.contains(&m.id)
        })
        .max_by_key(|m| w.due[&m.id])
        .expect("the last hop on its way");
    w.delivered.insert(ripe.id.clone());
    let due = w.due[&ripe.id];
    w.pass_to(due);
    let (a, b) = tokio::join!(deliver(&w.standins, &ripe), deliver(&w.standins, &ripe));
    let now = w.now();
    w.reports.push((now, a));
    w.reports.push((now, b));
    w.drain(Duration::hours(2)).await;
    assert_eq!(w.writes(STAGING).len(), 1, "{}", w.story());
    assert_eq!(w.ended(STAGING, "confirmed").len(), 1, "{}", w.story());
    assert_eq!(w.writes(PROD).len(), 1, "{}", w.story());
}

/// The follow-ups a promotion sends carry an id to correlate their log lines with: the
/// hop's `sweep` names where it comes from, not an empty event id (`"promotion-"`).
#[tokio::test]
async fn probe_promotion_hops_carry_a_non_empty_id() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(20)).await;
    let hops = w.hops_for(STAGING);
    assert!(hops.len() >= 2, "{hops:#?}");
    for hop in hops {
        assert!(!hop.contains(r#""sweep":"promotion-""#), "{hop}");
    }
}

/// Dev deleted while staging soaks on its verified write: staging is not promoted, and says
/// clearly that its upstream is gone (a failed entry and a PromotionRefused Event), not a
/// silent skip.
#[tokio::test]
async fn probe_an_upstream_deleted_mid_chain_is_refused_and_promotes_nothing() {
    let mut w = world(Script::Healthy).await;
    w.push(T1, 'b').await;
    w.until_dev_confirmed().await;
    w.drain(Duration::minutes(5)).await;
    w.standins.kube.delete("argocd", SEED_APP);
    w.drain(Duration::hours(2)).await;
    let swept = w.sweep().await;
    assert!(w.writes(STAGING).is_empty(), "{}", w.story());
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    let staging = swept
        .entries
        .iter()
        .find(|e| e.name == STAGING)
        .unwrap_or_else(|| panic!("no entry for staging: {swept:#?}"));
    assert_eq!(staging.action, Action::Failed, "{staging:?}");
    assert!(
        staging.reason.contains("there is no such Application"),
        "{}",
        staging.reason
    );
    let refused = crate::moving::events(&w.standins, "PromotionRefused");
    assert!(
        refused
            .iter()
            .any(|e| e["involvedObject"]["name"] == STAGING),
        "{refused:#?}"
    );
}

/// staging names an upstream that deploys another image (its image list names `worker`
/// only): a failed entry saying so and an Event, on the push and on a sweep, never a skip.
#[tokio::test]
async fn probe_an_upstream_not_tracking_the_image_is_refused_clearly() {
    let mut w = world(Script::Healthy).await;
    copy_as(&w.standins.kube, &w.standins.kube, "worker-dev", &[]);
    w.standins
        .kube
        .edit("argocd", "worker-dev", |app| {
            app["metadata"]["annotations"]["argocd-image-updater.argoproj.io/image-list"] =
                json!(format!("app={}", crate::moving::WORKER));
        })
        .unwrap();
    w.standins
        .annotate("argocd", STAGING, &[(FROM, "argocd/worker-dev")]);
    let pushed = w.push(T1, 'b').await;
    let swept = w.sweep().await;
    for report in [&pushed, &swept] {
        let staging = report
            .entries
            .iter()
            .find(|e| e.name == STAGING)
            .unwrap_or_else(|| panic!("no entry for staging: {report:#?}"));
        assert_eq!(staging.action, Action::Failed, "{staging:?}");
        assert!(
            staging.reason.contains("does not track"),
            "{}",
            staging.reason
        );
    }
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);
    let refused = crate::moving::events(&w.standins, "PromotionRefused");
    assert!(
        refused
            .iter()
            .any(|e| e["involvedObject"]["name"] == STAGING),
        "{refused:#?}"
    );
}
