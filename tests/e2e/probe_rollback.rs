//! Adversarial probes of issue 64's auto-rollback (`<alias>.auto-rollback`) and its interplay
//! with a person, with its own rollout, and with promotion. Single-cluster probes use the
//! moving harness (`moving.rs`) like `auto_rollback.rs`; the promotion probe uses a dev →
//! staging world like `probe_promotion.rs` (dev is the seed, staging a copy that promotes
//! from it after 30 minutes).
//!
//! Found failing by the probe and fixed: a released image deployed by hand rolled back again
//! (a rollback now needs our last write of the image to be the failed one); the digest
//! remembered when the tag had moved (the write's own digest, kept in the audit record, or
//! ECR's only at the recorded push time); a fix re-pushed under the tag taken back never
//! promoted (told by digest); a far-future health time overflowing the judge; a rollback to
//! an image ECR no longer has (refused with the reason); a second rollback's Event; a fix
//! pushed before the wake-up (decided as a push).

use std::collections::{BTreeMap, BTreeSet};

use crate::auto_rollback::{app_entry, failed_by_an_alarm, followed_to_an_end, spec_tag, wakes};
use crate::common::Scenario;
use crate::moving::{deliver, events, pass, seeded, sweep};
use argocd_ecr_updater::report::{Action, Report};
use argocd_ecr_updater_standins::argocd::{Script, stamp};
use argocd_ecr_updater_standins::fixtures::{
    PUSHED_TAG, SEED_APP, SEED_IMAGE, SEED_REPOSITORY, SEED_TAG, image, push_event,
};
use argocd_ecr_updater_standins::kube::KubeState;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

const ROLLED_BACK: &str = "argocd-ecr-updater.io/rolled-back";
const FAILED_ROLLOUTS: &str = "argocd-ecr-updater.io/failed-rollouts";
const FREEZE: &str = "argocd-ecr-updater.io/freeze";

fn now(standins: &Scenario) -> OffsetDateTime {
    standins.test_clock().now()
}

/// After a failure and its rollback, a person decides the alarm was a false positive:
/// releases the image (deletes its `rolled-back` entry, as the docs say) and deploys it
/// again by hand. Nothing automatic may overrule that: no automatic path wrote the image,
/// and the person cleared what auto-rollback remembered. But the `failed-rollouts` entry of
/// the original failure outlives the release (the rollback's own rollout ends `taken-back`,
/// which clears nothing), so the next sweep "rolls back" the person's deploy again.
#[tokio::test]
async fn probe_a_person_who_releases_the_image_and_deploys_it_by_hand_is_not_rolled_back_again() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    let woken = wakes(&standins, &queue);
    assert_eq!(woken.len(), 1);
    deliver(&standins, &woken[0]).await;
    assert_eq!(spec_tag(&standins), SEED_TAG, "rolled back");
    assert_eq!(events(&standins, "RolledBack").len(), 1);

    standins
        .kube
        .edit_as("kubectl-edit", "argocd", SEED_APP, |app| {
            app["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove(ROLLED_BACK);
            for parameter in app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
            {
                if parameter["name"] == "image.tag" {
                    parameter["value"] = json!(PUSHED_TAG);
                }
            }
        })
        .unwrap();
    pass(&standins, 40);
    let states = followed_to_an_end(&standins, &queue).await;
    let failures = crate::moving::failed_rollouts(&standins);

    let swept = sweep(&standins).await;
    let entry = app_entry(&swept);
    assert_eq!(
        spec_tag(&standins),
        PUSHED_TAG,
        "the person's deploy of the released image was overruled: {:?} `{}`; the rollback's rollout ended {states:?}; {FAILED_ROLLOUTS} still holds {failures}",
        entry.action,
        entry.reason
    );
    assert_eq!(
        events(&standins, "RolledBack").len(),
        1,
        "a second RolledBack Event for an image a person released"
    );
}

/// The rollback's own rollout fails too (the alarm stays in ALARM: it was not the image).
/// No ping-pong: the image taken back is not written again, nothing further is rolled back,
/// and a sweep writes nothing.
#[tokio::test]
async fn probe_a_rollback_whose_own_rollout_fails_does_not_ping_pong() {
    let (standins, queue) = failed_by_an_alarm(true).await;
    let woken = wakes(&standins, &queue);
    deliver(&standins, &woken[0]).await;
    assert_eq!(spec_tag(&standins), SEED_TAG);
    pass(&standins, 40);
    let states = followed_to_an_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
    // The rollback's failure wakes the Application once more: it writes nothing.
    for wake in wakes(&standins, &queue).iter().skip(1) {
        let report = deliver(&standins, wake).await;
        assert_ne!(
            app_entry(&report).action,
            Action::Updated,
            "{:#?}",
            report.entries
        );
    }
    let swept = sweep(&standins).await;
    assert_ne!(
        app_entry(&swept).action,
        Action::Updated,
        "{:#?}",
        swept.entries
    );
    assert_eq!(spec_tag(&standins), SEED_TAG);
    assert_eq!(events(&standins, "RolledBack").len(), 1);
}

/// The bad image's tag is mutable: between the failed write and the rollback, the team
/// re-points it in ECR at another image (no push event reaches us, or it comes later). The
/// rollback asks ECR for the tag's digest *now* and remembers the new image's digest, not the
/// one that failed: the failed digest, pushed again under a new tag, is not recognised and is
/// deployed again, contrary to "the bad digest is never re-deployed".
#[tokio::test]
async fn probe_the_failed_digest_is_remembered_even_when_its_tag_moved_before_the_rollback() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    const PUSHED_DIGEST: char = '3';
    let at = stamp(now(&standins));
    standins
        .aws
        .push(image(SEED_REPOSITORY, PUSHED_TAG, '8', &at));
    let woken = wakes(&standins, &queue);
    deliver(&standins, &woken[0]).await;
    assert_eq!(spec_tag(&standins), SEED_TAG, "rolled back");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let remembered = app["metadata"]["annotations"][ROLLED_BACK]
        .as_str()
        .unwrap_or("")
        .to_string();
    pass(&standins, 40);
    followed_to_an_end(&standins, &queue).await;

    // The image that failed (digest 3), pushed again under a newer tag.
    let repushed =
        crate::moving::push_now(&standins, SEED_REPOSITORY, "20251206-120000", PUSHED_DIGEST).await;
    let entry = app_entry(&repushed);
    assert_ne!(
        entry.action,
        Action::Updated,
        "the digest whose rollout failed was deployed again under a new tag ({}); remembered: {remembered}",
        entry.reason
    );
    assert_eq!(spec_tag(&standins), SEED_TAG);
}

/// What the failed write replaced is gone from ECR by the time the rollback runs (a lifecycle
/// policy expires old tags). Writing it back points the Application at an image no node can
/// pull: the rollback cannot restore anything, and the Pods still on the failed image are
/// the only ones that run. Nothing gates a rollback; the image to go back to is not even
/// looked up. Expected: refused with the reason (and the failure left for a person).
#[tokio::test]
async fn probe_a_rollback_to_an_image_ecr_no_longer_has_is_not_written() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    standins.aws.remove(SEED_REPOSITORY, SEED_TAG);
    let woken = wakes(&standins, &queue);
    let report = deliver(&standins, &woken[0]).await;
    let entry = app_entry(&report);
    assert_ne!(
        (entry.action, spec_tag(&standins)),
        (Action::Updated, SEED_TAG.to_string()),
        "rolled back to `{SEED_TAG}`, which ECR no longer has: {}",
        entry.reason
    );
}

/// A freeze holds the rollback like any write (the docs say so), the RolledBack Event is not
/// sent for a rollback not written, and the first decision after the freeze rolls back.
#[tokio::test]
async fn probe_a_freeze_holds_the_rollback_and_the_first_sweep_after_it_rolls_back() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    standins.annotate("argocd", SEED_APP, &[(FREEZE, "true")]);
    let woken = wakes(&standins, &queue);
    let report = deliver(&standins, &woken[0]).await;
    let entry = app_entry(&report);
    assert_eq!(entry.action, Action::Skipped, "{entry:#?}");
    assert!(entry.reason.contains("frozen"), "{}", entry.reason);
    assert_eq!(spec_tag(&standins), PUSHED_TAG);
    assert!(events(&standins, "RolledBack").is_empty());
    standins.annotate("argocd", SEED_APP, &[(FREEZE, "false")]);
    let swept = sweep(&standins).await;
    let entry = app_entry(&swept);
    assert_eq!(entry.action, Action::Updated, "{entry:#?}");
    assert!(
        entry.reason.starts_with("auto-rollback"),
        "{}",
        entry.reason
    );
    assert_eq!(spec_tag(&standins), SEED_TAG);
    assert_eq!(events(&standins, "RolledBack").len(), 1);
}

/// The team pushes a fix (a new image, a new tag) right after the failure, before the
/// wake-up is delivered. "An image pushed after it goes out as usual": the push's own
/// decision should write the fix; the rollback is moot once something newer than the failed
/// image is written.
#[tokio::test]
async fn probe_a_fix_pushed_before_the_wake_up_goes_out_with_its_push() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    let fixed = crate::moving::push_now(&standins, SEED_REPOSITORY, "20251206-130000", '9').await;
    let entry = app_entry(&fixed);
    let pushed = (entry.action, spec_tag(&standins), entry.reason.clone());
    let woken = wakes(&standins, &queue);
    deliver(&standins, &woken[0]).await;
    assert_eq!(
        spec_tag(&standins),
        "20251206-130000",
        "the fix is not out after the wake-up either"
    );
    assert_eq!(
        (pushed.0, pushed.1.as_str()),
        (Action::Updated, "20251206-130000"),
        "the fix's push wrote something else: {}",
        pushed.2
    );
}

// ---------------------------------------------------------------------------------------
// Promotion: dev (the seed) → staging (same cluster, promote-after 30m).

const STAGING: &str = "web-staging";
const FROM: &str = "argocd-ecr-updater.io/app.promote-from";
const AFTER: &str = "argocd-ecr-updater.io/app.promote-after";
const T1: &str = "20250901-100000";

struct World {
    standins: Scenario,
    queue: String,
    due: BTreeMap<String, OffsetDateTime>,
    delivered: BTreeSet<String>,
    reports: Vec<(OffsetDateTime, Report)>,
}

fn copy_as(kube: &KubeState, name: &str, annotations: &[(&str, &str)]) {
    let mut app = kube.get("argocd", SEED_APP).unwrap();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    app["metadata"]["name"] = json!(name);
    for (key, value) in annotations {
        app["metadata"]["annotations"][*key] = json!(value);
    }
    kube.insert(app).unwrap();
}

fn tag_of(kube: &KubeState, name: &str) -> String {
    kube.helm_parameter("argocd", name, "image.tag").unwrap()
}

impl World {
    /// Dev and staging; dev (only) verified by `web-5xx` and rolled back on failure.
    async fn new() -> Self {
        let (standins, queue) = seeded(|_| {}, &[Script::Healthy]).await;
        copy_as(
            &standins.kube,
            STAGING,
            &[(FROM, "argocd/aws-pipeline-test"), (AFTER, "30m")],
        );
        standins.annotate(
            "argocd",
            SEED_APP,
            &[
                ("argocd-ecr-updater.io/verify-alarms", "web-5xx"),
                ("argocd-ecr-updater.io/verify-for", "15m"),
                ("argocd-ecr-updater.io/app.auto-rollback", "true"),
            ],
        );
        let at = standins.test_clock().now() - Duration::minutes(60);
        standins.aws.cloudwatch.create_alarm("web-5xx", at);
        Self {
            standins,
            queue,
            due: BTreeMap::new(),
            delivered: BTreeSet::new(),
            reports: Vec::new(),
        }
    }

    fn now(&self) -> OffsetDateTime {
        self.standins.test_clock().now()
    }

    fn pass_to(&self, until: OffsetDateTime) {
        self.standins.kube.step_to(until);
        if self.now() < until {
            self.standins.test_clock().set(until);
        }
    }

    fn observe(&mut self) {
        let now = self.now();
        for m in self.standins.aws.queue(&self.queue) {
            self.due
                .entry(m.id.clone())
                .or_insert(now + Duration::seconds(m.delay_seconds.into()));
        }
    }

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

    async fn push(&mut self, tag: &str, digest: char) -> Report {
        let now = stamp(self.now());
        self.standins
            .aws
            .push(image(SEED_REPOSITORY, tag, digest, &now));
        let report = self
            .standins
            .report(&[], &push_event(SEED_REPOSITORY, tag, &now))
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

    fn ended(&self, name: &str, state: &str) -> usize {
        self.reports
            .iter()
            .flat_map(|(_, r)| r.rollouts.iter())
            .filter(|o| o.name == name && o.state == state)
            .count()
    }

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
}

/// Dev's write of `T1` (digest b) fails by an alarm and is rolled back; `T1` is remembered
/// with digest b. The team re-pushes a fixed image under the same mutable tag (digest c).
/// Dev's own gate compares digests and lets the fix through (b ≠ c), dev verifies it, and
/// staging soaks on it. But the promotion's check of the upstream's images taken back
/// compares without a digest (`find(.., &verified.value, None)`), so it matches the tag `T1`
/// alone and refuses the fix forever: staging never gets the image dev verified.
#[tokio::test]
async fn probe_a_fix_re_pushed_under_the_rolled_back_tag_is_promoted_once_dev_verifies_it() {
    let mut w = World::new().await;
    w.push(T1, 'b').await;
    let fired = w.now() + Duration::seconds(60);
    let cloudwatch = &w.standins.aws.cloudwatch;
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", fired);
    cloudwatch.set_state(
        "web-5xx",
        "OK",
        "Threshold Crossed: 0 < 5",
        fired + Duration::seconds(30),
    );
    w.drain(Duration::hours(1)).await;
    assert_eq!(w.ended(SEED_APP, "failed"), 1, "{}", w.story());
    assert_eq!(
        tag_of(&w.standins.kube, SEED_APP),
        SEED_TAG,
        "dev rolled back: {}",
        w.story()
    );
    let dev = w.standins.kube.get("argocd", SEED_APP).unwrap();
    let taken: Value = serde_json::from_str(
        dev["metadata"]["annotations"][ROLLED_BACK]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(taken[SEED_IMAGE][0]["to"], T1);
    assert_eq!(tag_of(&w.standins.kube, STAGING), SEED_TAG);

    // The fix, under the same tag.
    let fixed = w.push(T1, 'c').await;
    let dev_entry = fixed.entries.iter().find(|e| e.name == SEED_APP).unwrap();
    assert_eq!(
        dev_entry.action,
        Action::Updated,
        "dev's gate lets another digest under the tag through: {}",
        dev_entry.reason
    );
    w.drain(Duration::hours(4)).await;
    assert!(
        w.ended(SEED_APP, "confirmed") >= 2,
        "dev verified the fix: {}",
        w.story()
    );
    assert_eq!(tag_of(&w.standins.kube, SEED_APP), T1);
    assert_eq!(
        tag_of(&w.standins.kube, STAGING),
        T1,
        "staging never got the fix dev verified (staging writes {:?}): {}",
        w.writes(STAGING),
        w.story()
    );
}

/// The upstream's `status.health.lastTransitionTime` reads as a far-future time (a clock gone
/// wrong, or anyone who may patch the Application: Argo CD's CRD has no status subresource).
/// Staging's promotion is judged on every push of the repository, and `healthy_since +
/// promote-after` overflows: the whole invocation panics, so dev does not get the push
/// either. Expected: the push is decided for dev, staging is told why it waits.
#[tokio::test]
async fn probe_a_far_future_upstream_health_time_does_not_take_the_push_down() {
    let mut w = World::new().await;
    w.push(T1, 'b').await;
    w.drain(Duration::minutes(20)).await;
    assert!(w.ended(SEED_APP, "confirmed") >= 1, "{}", w.story());
    w.standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["status"]["health"]["lastTransitionTime"] = json!("9999-12-31T23:59:59Z");
        })
        .unwrap();
    // Panics inside the handler ("resulting value is out of range") if the judge overflows.
    let report = w.push("20250901-110000", 'c').await;
    let dev = report.entries.iter().find(|e| e.name == SEED_APP).unwrap();
    assert_eq!(dev.action, Action::Updated, "{dev:#?}");
    assert!(
        report.entries.iter().any(|e| e.name == STAGING),
        "{:#?}",
        report.entries
    );
}

/// A person releases the image (deleting its entry), a sweep deploys it again, and it fails
/// again within the hour: the second rollback is written, but its `RolledBack` Event is named
/// after the image and the value taken back only, the same name as the first one's, so the
/// API server refuses it as a conflict, which is ignored: the second rollback leaves no
/// Event (Events live an hour by default).
#[tokio::test]
async fn probe_a_second_rollback_of_a_released_image_sends_its_own_rolled_back_event() {
    let (standins, queue) = failed_by_an_alarm(false).await;
    let woken = wakes(&standins, &queue);
    deliver(&standins, &woken[0]).await;
    pass(&standins, 40);
    let states = followed_to_an_end(&standins, &queue).await;
    assert_eq!(states.last().map(String::as_str), Some("confirmed"));
    standins
        .kube
        .edit_as("kubectl-annotate", "argocd", SEED_APP, |app| {
            app["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove(ROLLED_BACK);
        })
        .unwrap();
    let swept = sweep(&standins).await;
    assert_eq!(app_entry(&swept).action, Action::Updated);
    assert_eq!(spec_tag(&standins), PUSHED_TAG);
    pass(&standins, 40);
    let fired = now(&standins) + Duration::seconds(5);
    let cloudwatch = &standins.aws.cloudwatch;
    cloudwatch.set_state("web-5xx", "ALARM", "Threshold Crossed: 9 > 5", fired);
    cloudwatch.set_state(
        "web-5xx",
        "OK",
        "Threshold Crossed: 0 < 5",
        fired + Duration::seconds(30),
    );
    let states = followed_to_an_end(&standins, &queue).await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
    let woken = wakes(&standins, &queue);
    assert_eq!(woken.len(), 2);
    let report = deliver(&standins, &woken[1]).await;
    assert_eq!(app_entry(&report).action, Action::Updated);
    assert_eq!(spec_tag(&standins), SEED_TAG, "rolled back a second time");
    assert_eq!(
        events(&standins, "RolledBack").len(),
        2,
        "the second rollback left no RolledBack Event"
    );
}
