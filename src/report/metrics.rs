//! Metrics as CloudWatch Embedded Metric Format: one JSON line per invocation on stdout,
//! which Lambda ships to CloudWatch Logs and CloudWatch turns into metrics. No API call, no
//! extra permission. Dimensions stay low-cardinality: the function, the mode, the outcome.
//!
//! Each metric a line declares is a custom metric per combination of dimension values, billed
//! monthly, so a line declares only what a mode has to say: every mode its failure and
//! duration; modes that decide images their image counts; a sweep its shards. The request
//! counts ride on the same line as plain fields, for Logs Insights, at no metric cost.

use std::time::Duration;

use serde_json::{Value, json};

use crate::report::{Action, InvocationKind, Report, RolloutReport};

pub const NAMESPACE: &str = "ArgocdEcrUpdater";

/// The EMF line for one invocation. `report` is `None` when the invocation failed before
/// deciding anything (a malformed event, an unreachable cluster); `timestamp_ms` is Unix
/// milliseconds.
pub fn emf(
    function: &str,
    // `None`: the invocation failed before it knew what it was (a malformed event).
    kind: Option<InvocationKind>,
    failed: bool,
    report: Option<&Report>,
    duration: Duration,
    timestamp_ms: i128,
) -> Value {
    let count = |action: Action| {
        report.map_or(0, |r| {
            r.entries.iter().filter(|e| e.action == action).count()
        })
    };
    let stats = report.map(|r| r.stats.clone()).unwrap_or_default();
    let kube_requests =
        stats.list_pages + stats.gets + stats.patches + stats.image_updater_requests + stats.events;
    // Several clusters: how many could not be worked on at all (the log names them). Cluster
    // names stay out of the dimensions: a count to alarm on is enough.
    let clusters_failed = report.map_or(0, |r| {
        r.clusters.iter().filter(|c| c.failure.is_some()).count()
    });
    let sweep = report.and_then(|r| r.sweep.clone()).unwrap_or_default();
    let decides_images = kind.is_some_and(InvocationKind::decides_images);
    let several_clusters = report.is_some_and(|r| r.clusters.len() > 1);
    // (name, unit, value, declared as a metric)
    let fields: [(&str, &str, Value, bool); 15] = [
        ("InvocationsFailed", "Count", json!(u8::from(failed)), true),
        (
            "ImagesUpdated",
            "Count",
            json!(count(Action::Updated)),
            decides_images,
        ),
        (
            "ImagesUnchanged",
            "Count",
            json!(count(Action::Unchanged)),
            false,
        ),
        (
            "ImagesSkipped",
            "Count",
            json!(count(Action::Skipped)),
            decides_images,
        ),
        (
            "ImagesFailed",
            "Count",
            json!(count(Action::Failed)),
            decides_images,
        ),
        ("Conflicts", "Count", json!(stats.conflicts), false),
        ("KubernetesRequests", "Count", json!(kube_requests), false),
        ("EcrRequests", "Count", json!(stats.ecr_calls), false),
        ("GitRequests", "Count", json!(stats.git_requests), false),
        (
            "ClustersFailed",
            "Count",
            json!(clusters_failed),
            several_clusters,
        ),
        // A fanned-out sweep: what the coordinator sent (Mode=reconcile), what the shard
        // invocations ran and how many failed back to the queue (Mode=shard).
        (
            "SweepApplications",
            "Count",
            json!(sweep.applications),
            kind.is_some_and(InvocationKind::is_sweep),
        ),
        (
            "SweepShards",
            "Count",
            json!(sweep.shards),
            kind == Some(InvocationKind::Reconcile),
        ),
        (
            "ShardsFailed",
            "Count",
            json!(sweep.shards_failed),
            kind == Some(InvocationKind::Shard),
        ),
        ("ApplicationsRead", "Count", json!(stats.gets), false),
        (
            "DurationMs",
            "Milliseconds",
            json!(duration.as_secs_f64() * 1000.0),
            true,
        ),
    ];
    let mut line = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["FunctionName", "Mode", "Outcome"]],
                "Metrics": fields.iter().filter(|f| f.3).map(|(name, unit, _, _)| json!({"Name": name, "Unit": unit})).collect::<Vec<_>>(),
            }],
        },
        "FunctionName": function,
        "Mode": kind.map_or("none", InvocationKind::as_str),
        "Outcome": if failed { "failed" } else { "ok" },
    });
    for (name, _, value, _) in fields {
        line[name] = value;
    }
    line
}

/// The EMF line of a rollout outcome, `None` for a check that reported none. Dimensions stay
/// cheap at any fleet size: the function and the outcome (`confirmed`, `failed`,
/// `timed-out`); an Application named in `ROLLOUT_METRIC_APPLICATIONS` also under its own
/// `Application` dimension. The line carries the Application as a plain field for Logs
/// Insights. `LeadTimeSeconds` (ECR push to live observed, one value per image) and
/// `WriteToLiveSeconds` are on confirmed rollouts only.
pub fn rollout_emf(function: &str, rollout: &RolloutReport, timestamp_ms: i128) -> Option<Value> {
    if !rollout.is_outcome() {
        return None;
    }
    let application = format!("{}/{}", rollout.namespace, rollout.name);
    let mut dimensions = vec![json!(["FunctionName", "Outcome"])];
    if rollout.own_metric {
        dimensions.push(json!(["FunctionName", "Outcome", "Application"]));
    }
    let mut metrics = vec![json!({"Name": "Rollouts", "Unit": "Count"})];
    let mut line = json!({
        "FunctionName": function,
        "Outcome": rollout.state,
        "Rollouts": 1,
        "application": application,
        "images": rollout.images,
    });
    if rollout.own_metric {
        line["Application"] = json!(application);
    }
    if !rollout.lead_seconds.is_empty() {
        metrics.push(json!({"Name": "LeadTimeSeconds", "Unit": "Seconds"}));
        line["LeadTimeSeconds"] = json!(rollout.lead_seconds);
    }
    if let Some(seconds) = rollout.write_to_live_seconds {
        metrics.push(json!({"Name": "WriteToLiveSeconds", "Unit": "Seconds"}));
        line["WriteToLiveSeconds"] = json!(seconds);
    }
    line["_aws"] = json!({
        "Timestamp": timestamp_ms,
        "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics}],
    });
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Entry;

    fn rollout(state: &str, own_metric: bool) -> RolloutReport {
        RolloutReport {
            cluster: None,
            namespace: "argocd".into(),
            name: "web".into(),
            images: vec!["r/web:1.1".into()],
            written_at: "2026-12-03T10:00:00Z".into(),
            check: 3,
            state: state.into(),
            reason: "running and Healthy".into(),
            lead_seconds: if state == "confirmed" {
                vec![70.5]
            } else {
                vec![]
            },
            write_to_live_seconds: (state == "confirmed").then_some(60.0),
            own_metric,
        }
    }

    #[test]
    fn a_confirmed_rollout_carries_its_lead_times_under_the_outcome_only() {
        let line = rollout_emf("fn", &rollout("confirmed", false), 1).unwrap();
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(
            directive["Dimensions"],
            json!([["FunctionName", "Outcome"]])
        );
        let names: Vec<&str> = directive["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Rollouts", "LeadTimeSeconds", "WriteToLiveSeconds"]);
        assert_eq!(line["LeadTimeSeconds"], json!([70.5]));
        assert_eq!(line["WriteToLiveSeconds"], 60.0);
        assert_eq!(line["application"], "argocd/web");
        assert!(
            line.get("Application").is_none(),
            "no per-Application dimension by default"
        );
    }

    #[test]
    fn an_application_opted_in_gets_its_own_dimension_and_pending_checks_no_line() {
        let line = rollout_emf("fn", &rollout("failed", true), 1).unwrap();
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(
            directive["Dimensions"],
            json!([
                ["FunctionName", "Outcome"],
                ["FunctionName", "Outcome", "Application"]
            ])
        );
        assert_eq!(line["Application"], "argocd/web");
        assert_eq!(line["Outcome"], "failed");
        assert!(line.get("LeadTimeSeconds").is_none());
        for state in ["pending", "superseded", "already-reported", "unfollowed"] {
            assert_eq!(rollout_emf("fn", &rollout(state, true), 1), None, "{state}");
        }
    }

    #[test]
    fn the_line_declares_every_metric_it_carries_under_low_cardinality_dimensions() {
        let mut report = Report::new(InvocationKind::Push, "e", false);
        report
            .entries
            .push(Entry::new("argocd", "a", None, "r/x").with(Action::Updated, "up"));
        report
            .entries
            .push(Entry::new("argocd", "b", None, "r/x").with(Action::Skipped, "no"));
        report.stats.gets = 2;
        report.stats.patches = 1;
        report.stats.list_pages = 1;
        report.stats.ecr_calls = 1;
        let line = emf(
            "fn",
            Some(InvocationKind::Push),
            false,
            Some(&report),
            Duration::from_millis(12),
            1_700_000_000_000,
        );
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], NAMESPACE);
        assert_eq!(
            directive["Dimensions"],
            json!([["FunctionName", "Mode", "Outcome"]])
        );
        for metric in directive["Metrics"].as_array().unwrap() {
            let name = metric["Name"].as_str().unwrap();
            assert!(line[name].is_number(), "{name} is declared but missing");
        }
        assert_eq!(line["ImagesUpdated"], 1);
        assert_eq!(line["ImagesSkipped"], 1);
        assert_eq!(line["KubernetesRequests"], 4);
        assert_eq!(line["Outcome"], "ok");
        assert_eq!(line["DurationMs"], 12.0);
        assert_eq!(line["ClustersFailed"], 0);
        assert_eq!(line["SweepShards"], 0);
        assert_eq!(line["ApplicationsRead"], 2);
        let mut shard = Report::new(InvocationKind::Shard, "e", false);
        shard.sweep = Some(crate::report::SweepSummary {
            applications: 500,
            shards: 1,
            shards_failed: 1,
        });
        let line = emf(
            "fn",
            Some(InvocationKind::Shard),
            true,
            Some(&shard),
            Duration::ZERO,
            0,
        );
        assert_eq!(
            (
                &line["SweepApplications"],
                &line["SweepShards"],
                &line["ShardsFailed"]
            ),
            (&json!(500), &json!(1), &json!(1))
        );
        assert_eq!(line["Outcome"], "failed");
        let failure = crate::report::ClusterFailure {
            message: "cluster `prod`: down".into(),
            error_type: "Retryable.ListApplications",
            needs_operator: false,
        };
        report.add_cluster(
            "prod",
            Report::new(InvocationKind::Push, "e", false),
            Some(failure),
        );
        let line = emf(
            "fn",
            Some(InvocationKind::Push),
            true,
            Some(&report),
            Duration::ZERO,
            0,
        );
        assert_eq!(line["ClustersFailed"], 1);
        let failed = emf(
            "fn",
            Some(InvocationKind::Push),
            true,
            None,
            Duration::ZERO,
            0,
        );
        assert_eq!(failed["Outcome"], "failed");
        assert_eq!(failed["ImagesUpdated"], 0);
    }

    fn declared(line: &Value) -> Vec<&str> {
        line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn each_mode_declares_only_the_metrics_it_has_something_to_say_in() {
        let images = ["ImagesUpdated", "ImagesSkipped", "ImagesFailed"];
        // (kind, metrics declared besides InvocationsFailed and DurationMs); `None`: failed
        // before the event was read.
        let cases: [(Option<InvocationKind>, Vec<&str>); 6] = [
            (Some(InvocationKind::Push), images.to_vec()),
            (Some(InvocationKind::Scan), images.to_vec()),
            (
                Some(InvocationKind::Reconcile),
                [&images[..], &["SweepApplications", "SweepShards"]].concat(),
            ),
            (
                Some(InvocationKind::Shard),
                [&images[..], &["SweepApplications", "ShardsFailed"]].concat(),
            ),
            (Some(InvocationKind::Skip), vec![]),
            (None, vec![]),
        ];
        for (kind, extra) in cases {
            let report = kind.map(|kind| Report::new(kind, "e", false));
            let line = emf("fn", kind, false, report.as_ref(), Duration::ZERO, 0);
            let mode = kind.map_or("none", InvocationKind::as_str);
            assert_eq!(line["Mode"], mode);
            let mut expected = vec!["InvocationsFailed"];
            expected.extend(&extra);
            expected.push("DurationMs");
            assert_eq!(declared(&line), expected, "{mode}");
            // The request counts stay on the line, undeclared.
            for field in [
                "KubernetesRequests",
                "EcrRequests",
                "GitRequests",
                "ApplicationsRead",
                "Conflicts",
                "ImagesUnchanged",
            ] {
                assert!(line[field].is_number(), "{mode}: {field}");
            }
        }
    }

    /// The metric line of a push that went through, with `report`.
    fn push_line(report: &Report) -> Value {
        emf(
            "fn",
            Some(InvocationKind::Push),
            false,
            Some(report),
            Duration::ZERO,
            0,
        )
    }

    #[test]
    fn clusters_failed_is_a_metric_only_where_there_are_several_clusters() {
        let mut report = Report::new(InvocationKind::Push, "e", false);
        report.add_cluster("dev", Report::new(InvocationKind::Push, "e", false), None);
        let line = push_line(&report);
        assert!(!declared(&line).contains(&"ClustersFailed"));
        report.add_cluster("prod", Report::new(InvocationKind::Push, "e", false), None);
        let line = push_line(&report);
        assert!(declared(&line).contains(&"ClustersFailed"));
    }
}
