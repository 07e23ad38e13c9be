//! Adversarial probes of issue 65 (AWS's managed Argo CD, the EKS capability for Argo CD),
//! off the happy path: the refresh after a commit against concurrent edits, the capability's
//! namespace against configurations that name others, and the chat notification against
//! hostile text. Each test states what should hold; those that fail name a finding.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{Scenario, event, expect_decision, only};
use argocd_ecr_updater::appconfig::annotations::AUDIT_ANNOTATION;
use argocd_ecr_updater::config::{Config, ConfigError};
use argocd_ecr_updater::report::{Action, Entry, InvocationKind, Report};
use argocd_ecr_updater_standins::argocd::{Controller, Script, Timeline};
use argocd_ecr_updater_standins::clock::SimClock;
use argocd_ecr_updater_standins::fixtures::{PUSHED_TAG, SEED_APP};
use argocd_ecr_updater_standins::shipped_grants;
use serde_json::{Value, json};

const REFRESH: &str = "argocd.argoproj.io/refresh";
const SWEEP_ARN: &str = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";
const TOPIC: &str = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-chat";

/// The hub with `git` write-back, the function holding only the namespaced Role, told of the
/// capability; no controller (nothing removes the refresh annotation behind the test).
async fn git_hub() -> Scenario {
    let scenario = Scenario::seeded_with_grants(shipped_grants("argocd")).await;
    crate::git::git_on(scenario, &[]).var("ARGOCD_EKS_CAPABILITY", "true")
}

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<&str, &str> = vars.iter().copied().collect();
    Config::from_lookup(|k| map.get(k).map(|v| v.to_string()))
}

/// Someone (`argocd app get --hard-refresh`, the UI's "Hard refresh") asked for a hard
/// refresh that the controller has not served yet when the function's commit lands. The
/// function's merge patch sets `normal` unconditionally, so the hard refresh (which also
/// drops the repo server's manifest cache) is silently downgraded to a normal one.
#[tokio::test]
async fn a_hard_refresh_asked_for_meanwhile_is_not_downgraded_by_the_commits_refresh() {
    let standins = git_hub().await;
    standins.kube.race_next_patch("argocd", SEED_APP, |app| {
        app["metadata"]["annotations"][REFRESH] = json!("hard");
    });
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    assert_eq!(
        app["metadata"]["annotations"][REFRESH], "hard",
        "the pending hard refresh was overwritten by the commit's refresh request"
    );
}

/// Another invocation (a push of another image of the same Application, committed to another
/// file, so no Git race) records its commit in the audit annotation between this
/// invocation's read of the Application and its refresh patch. The refresh's merge patch is
/// unguarded (no resourceVersion, no test of the record it replaces) and writes the audit
/// record built from the stale read: the other commit's record, which rollbacks and the
/// rollout check read, is lost.
#[tokio::test]
async fn the_commits_refresh_does_not_drop_an_audit_record_written_meanwhile() {
    let standins = git_hub().await;
    let other = json!({
        "time": "2025-08-25T15:30:00Z",
        "eventId": "concurrent-invocation",
        "images": [{"alias": "sidecar",
            "image": "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/sidecar",
            "from": "1.0.0", "to": "1.0.1", "pushed": null,
            "git": {"repository": "barun/invitation", "branch": "main", "commit": "0".repeat(40)}}]
    })
    .to_string();
    standins
        .kube
        .race_next_patch("argocd", SEED_APP, move |app| {
            app["metadata"]["annotations"][AUDIT_ANNOTATION] = json!(other);
        });
    let report = standins.report(&[], &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "committed");
    let app = standins.kube.get("argocd", SEED_APP).unwrap();
    let audit = app["metadata"]["annotations"][AUDIT_ANNOTATION]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        audit.contains("sidecar"),
        "the concurrent invocation's audit record was overwritten by the refresh patch: {audit}"
    );
}

/// With the capability on and `ARGOCD_NAMESPACES=team-a,team-b` (ARGOCD_NAMESPACE unset), the
/// capability's namespace defaults to `argocd`, which the function does not even list: every
/// Application it lists would be skipped, every push a no-op. Cold start accepts it.
#[tokio::test]
async fn a_capability_namespace_the_function_does_not_list_is_refused_at_cold_start() {
    let got = config(&[
        ("CLUSTER_NAME", "hub"),
        ("ARGOCD_EKS_CAPABILITY", "true"),
        ("ARGOCD_NAMESPACES", "team-a,team-b"),
    ]);
    match got {
        Err(e) => assert_eq!(e.variable, "ARGOCD_EKS_CAPABILITY", "{e:?}"),
        Ok(c) => panic!(
            "accepted: capability namespace {:?}, listing {:?}: every Application is skipped",
            c.eks_capability, c.namespaces
        ),
    }
}

/// The cold-start refusal of a cluster-wide listing looks at the first cluster only: a second
/// `CLUSTERS` entry with `"namespaces": "*"` is accepted with the capability on, so the
/// function lists every namespace there (and needs a ClusterRole for it), which issue 65's
/// "nothing cluster-wide" and the docs' "`*` is refused … at cold start" rule out.
#[tokio::test]
async fn a_cluster_wide_listing_in_any_clusters_entry_is_refused_with_the_capability() {
    let got = config(&[
        ("CLUSTER_NAME", "hub"),
        ("ARGOCD_EKS_CAPABILITY", "true"),
        (
            "CLUSTERS",
            r#"[{"name":"hub"},{"name":"spoke","namespaces":"*"}]"#,
        ),
    ]);
    match got {
        Err(e) => assert_eq!(e.variable, "ARGOCD_EKS_CAPABILITY", "{e:?}"),
        Ok(c) => panic!(
            "accepted: {:?}",
            c.clusters
                .iter()
                .map(|s| (&s.name, &s.namespaces))
                .collect::<Vec<_>>()
        ),
    }
}

/// Failure reasons carry text the function does not control (Git hosts' and registries'
/// error messages, annotation values quoted back). In the chat notification they go into
/// `client-markdown` verbatim: a Slack broadcast mention or a disguised link renders as such
/// in the channel.
#[tokio::test]
async fn hostile_text_in_a_reason_cannot_mention_the_channel_or_disguise_a_link() {
    let mut report = Report::new(InvocationKind::Push, "ev-hostile", false);
    report.image = Some("768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web".into());
    report.tag = Some(PUSHED_TAG.into());
    report
        .entries
        .push(Entry::new("argocd", SEED_APP, None, "web").with(
            Action::Failed,
            "<!channel> <!here> @here <https://evil.example/login|Argo CD sign-in> `x` *y*",
        ));
    let n = argocd_ecr_updater::report::chat::custom_notification(&report).unwrap();
    let text = format!(
        "{}\n{}",
        n["content"]["description"], n["content"]["nextSteps"]
    );
    for hostile in [
        "<!channel>",
        "<!here>",
        "@here",
        "<https://evil.example/login|",
    ] {
        assert!(
            !text.contains(hostile),
            "`{hostile}` reaches the chat channel verbatim: {text}"
        );
    }
}

/// The hub of `tests/e2e/managed.rs`: the seed deploying to a spoke, the namespaced Role, a
/// sweep queue, the capability's controller on the test's clock.
async fn hub_following() -> (Scenario, String) {
    let clock = Arc::new(SimClock::scripted());
    let scenario = Scenario::seeded_with_grants(shipped_grants("argocd")).await;
    let standins = scenario.on_clock(clock.clone());
    let queue = standins.aws.create_queue("sweep");
    let standins = standins
        .var("SWEEP_QUEUE_URL", &queue)
        .var("SWEEP_QUEUE_ARN", SWEEP_ARN)
        .var("ARGOCD_EKS_CAPABILITY", "true");
    let controller = Controller::timed(Script::Healthy, Timeline::eks_capability(), clock);
    standins.kube.run_controller(controller.hub("argocd"));
    (standins, queue)
}

/// docs/deploy.md: "An update and its rollout's outcome share a thread". With digest pinning
/// (`pin-digest`) the update's thread is the pushed `image:tag`, the rollout's the audit
/// record's `image:<value written>`, the digest: two threads.
#[tokio::test]
async fn a_pinned_update_and_its_rollout_outcome_share_one_chat_thread() {
    let (standins, queue) = hub_following().await;
    standins.annotate(
        "argocd",
        SEED_APP,
        &[("argocd-ecr-updater.io/pin-digest", "true")],
    );
    let vars = [
        ("NOTIFICATION_TOPIC_ARN", TOPIC),
        ("NOTIFICATION_FORMAT", "chat"),
    ];
    let report = standins.report(&vars, &event("push-date-tag.json")).await;
    expect_decision(only(&report), Action::Updated, "");
    let until = standins.test_clock().now() + Duration::from_secs(60);
    standins.kube.step_to(until);
    let check = standins
        .aws
        .queue(&queue)
        .into_iter()
        .find(|m| m.body.contains("confirm-rollout"))
        .expect("a rollout check");
    let batch = json!({"Records": [{"messageId": check.id, "eventSource": "aws:sqs",
        "eventSourceARN": SWEEP_ARN, "body": check.body}]});
    let checked = standins.report(&vars, &batch).await;
    assert_eq!(checked.rollouts[0].state, "confirmed", "{checked:#?}");
    let threads: Vec<Value> = standins
        .aws
        .published()
        .iter()
        .map(|m| {
            let n: Value = serde_json::from_str(m["Message"].as_str().unwrap()).unwrap();
            n["metadata"]["threadId"].clone()
        })
        .collect();
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert_eq!(
        threads[0], threads[1],
        "the update and its rollout outcome land in two threads"
    );
}
