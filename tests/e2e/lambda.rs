//! The compiled function binary under the Lambda Runtime API stand-in: configured by
//! environment variables only, as Lambda configures it, reaching ECR, EKS and the API server
//! stand-ins over the network.

use std::io::Read;
use std::time::Duration;

use crate::common::{Scenario, event, seed_tag, spawn_lambda};
use argocd_ecr_updater_standins::{Grant, Outcome, image_updater_grants};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

/// Invokes the function and returns its response; anything else fails the test.
async fn response(standins: &Scenario, event: serde_json::Value) -> serde_json::Value {
    match standins.runtime.invoke(event, DEADLINE).await.unwrap() {
        Outcome::Response(report) => report,
        other => panic!("expected a response, got {other:?}"),
    }
}

/// Invokes the function and returns the error it reported; anything else fails the test.
async fn error(standins: &Scenario, event: serde_json::Value) -> serde_json::Value {
    match standins.runtime.invoke(event, DEADLINE).await.unwrap() {
        Outcome::Error(error) => error,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Everything the function process wrote to stderr (its log), once it has exited or been killed.
fn stderr_of(function: &mut crate::common::LambdaProcess) -> String {
    let mut stderr = String::new();
    function
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}

#[tokio::test]
async fn the_binary_updates_the_seed_application_and_returns_the_report() {
    let standins = Scenario::seeded().await;
    let _function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    let report = response(&standins, event("push-date-tag.json")).await;
    assert_eq!(report["entries"][0]["action"], "updated", "{report:#}");
    assert_eq!(report["entries"][0]["to"], "20250825-153012");
    assert_eq!(seed_tag(&standins).as_deref(), Some("20250825-153012"));
    // A second, duplicate delivery on the warm process: no write.
    let again = response(&standins, event("push-date-tag.json")).await;
    assert_eq!(again["entries"][0]["action"], "unchanged");
    // The warm process asked EKS once for both invocations.
    assert_eq!(
        standins.shared.count(|r| r.path.starts_with("/clusters/")),
        1
    );
}

#[tokio::test]
async fn every_sample_event_gets_an_answer_from_the_binary() {
    let standins = Scenario::seeded().await;
    let _function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    for name in [
        "delete.json",
        "push-failure.json",
        "scan.json",
        "push-untagged-platform-manifest.json",
        "push-semver-tag.json",
    ] {
        let report = response(&standins, event(name)).await;
        assert!(
            report["entries"].as_array().unwrap().is_empty(),
            "{name}: {report}"
        );
    }
    let report = response(&standins, event("scheduled-reconcile.json")).await;
    assert_eq!(report["mode"], "reconcile");
    assert_eq!(report["entries"][0]["action"], "updated");
}

#[tokio::test]
async fn a_malformed_event_is_a_permanent_error_for_the_dead_letter_queue() {
    let standins = Scenario::seeded().await;
    let _function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    let error = error(&standins, json!({"detail-type": "ECR Image Action", "source": "aws.ecr", "detail": {"action-type": 7}})).await;
    assert_eq!(error["errorType"], "Permanent.MalformedEvent");
    assert!(
        error["errorMessage"]
            .as_str()
            .unwrap()
            .contains("must be a string"),
        "{error}"
    );
    // The process survives bad input and serves the next event.
    let answer = response(&standins, event("delete.json")).await;
    assert!(answer.to_string().contains("is not PUSH"), "{answer}");
}

/// The seed, with a role that may read Applications but not patch them.
async fn read_only_standins() -> Scenario {
    Scenario::seeded_with_grants(
        [
            vec![Grant::new(&["get", "list"], "argocd")],
            image_updater_grants("argocd"),
        ]
        .concat(),
    )
    .await
}

#[tokio::test]
async fn a_403_fails_the_invocation_with_a_retryable_error_naming_the_fix() {
    let standins = read_only_standins().await;
    let _function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    let error = error(&standins, event("push-date-tag.json")).await;
    assert_eq!(error["errorType"], "Retryable.TargetsFailed");
    assert!(
        error["errorMessage"]
            .as_str()
            .unwrap()
            .contains("deploy/rbac.yaml"),
        "{error}"
    );
}

/// The EMF lines the function printed on stdout, once it has exited or been killed.
fn metric_lines_of(function: &mut crate::common::LambdaProcess) -> Vec<serde_json::Value> {
    let mut stdout = String::new();
    function
        .child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|l: &serde_json::Value| l.get("_aws").is_some())
        .collect()
}

#[tokio::test]
async fn a_failing_sweep_is_reported_and_counted_not_retried_into_the_dead_letter_queue() {
    // The sweep finds the update and cannot write it.
    let standins = read_only_standins().await;
    let mut function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    let report = response(&standins, event("scheduled-reconcile.json")).await;
    assert_eq!(report["mode"], "reconcile");
    let failure = report["failure"].as_str().unwrap();
    assert!(failure.contains("deploy/rbac.yaml"), "{failure}");
    assert_eq!(report["entries"][0]["action"], "failed");
    // A push with the same cause still fails, for Lambda to retry and then park.
    let push = error(&standins, event("push-date-tag.json")).await;
    assert_eq!(push["errorType"], "Retryable.TargetsFailed");
    let _ = function.child.kill();
    let lines = metric_lines_of(&mut function);
    let sweep = lines.iter().find(|l| l["Mode"] == "reconcile").unwrap();
    assert_eq!(sweep["Outcome"], "failed");
    assert_eq!(sweep["InvocationsFailed"], 1);
    let push = lines.iter().find(|l| l["Mode"] == "push").unwrap();
    assert_eq!(push["InvocationsFailed"], 1);
}

#[tokio::test]
async fn an_unreachable_cluster_fails_the_sweep_with_its_reason_in_the_report() {
    let standins = Scenario::seeded().await;
    let env: Vec<(String, String)> = standins
        .lambda_env()
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "CLUSTER_NAME" => (k, "no-such-cluster".to_string()),
            _ => (k, v),
        })
        .collect();
    let _function = spawn_lambda(&crate::common::function_binary(), &env);
    let report = response(&standins, event("scheduled-reconcile.json")).await;
    let failure = report["failure"].as_str().unwrap();
    assert!(
        failure.starts_with("Permanent.ClusterConfiguration"),
        "{failure}"
    );
    assert!(failure.contains("no-such-cluster"), "{failure}");
    assert!(report["entries"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn a_missing_variable_stops_the_cold_start_naming_it() {
    let standins = Scenario::seeded().await;
    // (variables left out, what the message must name)
    let cases: &[(&[&str], &str)] = &[
        (&["CLUSTER_NAME"], "CLUSTER_NAME"),
        (&["AWS_REGION"], "AWS_REGION"),
        (
            &[
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
            ],
            "AWS_ACCESS_KEY_ID",
        ),
        (&["AWS_SECRET_ACCESS_KEY"], "AWS_SECRET_ACCESS_KEY"),
    ];
    for (left_out, named) in cases {
        let env: Vec<(String, String)> = standins
            .lambda_env()
            .into_iter()
            .filter(|(k, _)| !left_out.contains(&k.as_str()))
            .collect();
        let mut function = spawn_lambda(&crate::common::function_binary(), &env);
        let status = function.child.wait().unwrap();
        assert!(!status.success(), "started without {left_out:?}");
        let stderr = stderr_of(&mut function);
        assert!(stderr.contains(named), "without {left_out:?}: {stderr}");
    }
}

#[tokio::test]
async fn decisions_are_logged_as_one_json_line_each() {
    let standins = Scenario::seeded().await;
    let mut function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    standins
        .runtime
        .invoke(event("retag-existing-digest.json"), DEADLINE)
        .await
        .unwrap();
    let _ = function.child.kill();
    let stderr = stderr_of(&mut function);
    let decision = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == "decision")
        .unwrap_or_else(|| panic!("no decision line in {stderr}"));
    assert_eq!(decision["application"], "aws-pipeline-test");
    assert_eq!(decision["action"], "skipped");
    assert!(decision["reason"].as_str().unwrap().contains("allow-tags"));
    assert_eq!(decision["configured_by"], "annotations");
    // Once per cold start: what the function is and how it is configured.
    let starting = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == "starting")
        .unwrap_or_else(|| panic!("no starting line in {stderr}"));
    assert_eq!(starting["version"], argocd_ecr_updater::VERSION);
    assert!(starting["version"].as_str().unwrap().contains("(commit "));
    assert_eq!(starting["cluster"], "barun-dev");
    assert_eq!(starting["read_image_updaters"], true);
    assert!(
        !stderr.contains("BEGIN CERTIFICATE"),
        "secrets stay out of the log"
    );
}

#[tokio::test]
async fn a_sweep_logs_its_quiet_decisions_as_one_summary_line_at_info() {
    let standins = Scenario::seeded().await;
    let mut function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    // The first sweep updates the seed's Application; the second finds it unchanged.
    let mut reports = Vec::new();
    for _ in 0..2 {
        let outcome = standins
            .runtime
            .invoke(
                argocd_ecr_updater_standins::fixtures::reconcile_event(),
                DEADLINE,
            )
            .await
            .unwrap();
        let Outcome::Response(report) = outcome else {
            panic!("{outcome:?}");
        };
        reports.push(report);
    }
    let _ = function.child.kill();
    let quiet = |report: &serde_json::Value| {
        report["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["action"] == "unchanged" || e["action"] == "skipped")
            .count()
    };
    assert_eq!(quiet(&reports[0]), 0, "{:#}", reports[0]);
    assert_eq!(quiet(&reports[1]), 1, "{:#}", reports[1]);
    let lines: Vec<serde_json::Value> = stderr_of(&mut function)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let quiet_lines = lines
        .iter()
        .filter(|l| {
            l["message"] == "decision" && l["action"] != "updated" && l["action"] != "failed"
        })
        .count();
    assert_eq!(quiet_lines, 0, "{lines:#?}");
    let summary: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["message"] == "sweep decisions")
        .collect();
    assert_eq!(summary.len(), 2, "{lines:#?}");
    assert_eq!(summary[0]["updated"], 1, "{:#}", summary[0]);
    let counted =
        summary[1]["unchanged"].as_u64().unwrap() + summary[1]["skipped"].as_u64().unwrap();
    assert_eq!(counted, 1, "{:#}", summary[1]);
}

#[tokio::test]
async fn each_invocation_writes_its_metrics_as_one_embedded_metric_format_line() {
    let standins = Scenario::seeded().await;
    let mut function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    standins
        .runtime
        .invoke(event("push-date-tag.json"), DEADLINE)
        .await
        .unwrap();
    let _ = function.child.kill();
    let lines = metric_lines_of(&mut function);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let line = &lines[0];
    // The EMF specification: a Timestamp, and every metric declared is a top-level member,
    // as is every dimension.
    assert!(line["_aws"]["Timestamp"].as_i64().unwrap() > 1_600_000_000_000);
    let directive = &line["_aws"]["CloudWatchMetrics"][0];
    for dimension in directive["Dimensions"][0].as_array().unwrap() {
        assert!(line[dimension.as_str().unwrap()].is_string(), "{dimension}");
    }
    for metric in directive["Metrics"].as_array().unwrap() {
        assert!(
            line[metric["Name"].as_str().unwrap()].is_number(),
            "{metric}"
        );
    }
    assert_eq!(line["FunctionName"], "argocd-ecr-updater");
    assert_eq!(line["Mode"], "push");
    assert_eq!(line["Outcome"], "ok");
    assert_eq!(line["ImagesUpdated"], 1);
    assert_eq!(line["EcrRequests"], 1);
}

#[test]
fn the_function_binary_sends_a_laptop_command_to_the_cli_and_prints_its_version() {
    let plan = std::process::Command::new(crate::common::function_binary())
        .args(["plan", "--event", "events/push-date-tag.json"])
        .output()
        .unwrap();
    assert_eq!(plan.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&plan.stderr);
    assert!(
        stderr.contains("argocd-ecr-updater-cli") && stderr.contains("--path cli"),
        "{stderr}"
    );
    let version = std::process::Command::new(crate::common::function_binary())
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    let stdout = String::from_utf8_lossy(&version.stdout);
    assert!(
        stdout.starts_with(&format!("argocd-ecr-updater {}", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
}

/// The bench runs function processes one after another against one Runtime API stand-in. A
/// killed process's poll can still be open in the stand-in, its closed connection not yet
/// noticed, when the next event comes; it must not take that event, which would then reach no
/// process (one bench run in 43 ended "no answer within 30s" this way). Here the old poll's
/// connection stays open, so the stand-in cannot notice: only `retire_pollers` saves the event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_from_a_retired_process_never_takes_the_next_event() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let standins = Scenario::start(Default::default()).await;
    let base = format!(
        "http://{}/2018-06-01/runtime/invocation",
        standins.runtime_api()
    );
    for round in 0..3 {
        let mut retired = tokio::net::TcpStream::connect(standins.runtime_addr)
            .await
            .unwrap();
        retired
            .write_all(b"GET /2018-06-01/runtime/invocation/next HTTP/1.1\r\nhost: runtime\r\n\r\n")
            .await
            .unwrap();
        // Waiting in the stand-in before the harness moves on.
        standins.runtime.until_polls_waiting(1).await;
        standins.runtime.retire_pollers();
        let live = tokio::spawn({
            let base = base.clone();
            async move {
                let client = reqwest::Client::new();
                let next = client.get(format!("{base}/next")).send().await.unwrap();
                let id = next.headers()["lambda-runtime-aws-request-id"]
                    .to_str()
                    .unwrap()
                    .to_string();
                client
                    .post(format!("{base}/{id}/response"))
                    .body(r#"{"answered":true}"#)
                    .send()
                    .await
                    .unwrap();
            }
        });
        let outcome = standins
            .runtime
            .invoke(json!({"round": round}), Duration::from_secs(2))
            .await;
        assert_eq!(
            outcome,
            Ok(Outcome::Response(json!({"answered": true}))),
            "round {round}"
        );
        live.await.unwrap();
        let mut answer = [0u8; 12];
        retired.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 410", "round {round}");
    }
}

#[tokio::test]
async fn no_planted_secret_reaches_the_error_the_log_the_notification_or_an_event() {
    use argocd_ecr_updater_standins::aws::PRESIGNED_SECRET;
    use argocd_ecr_updater_standins::{
        FUNCTION_SECRET_KEY, FUNCTION_SESSION_TOKEN, FaultAction, Route, cosign,
    };
    const SEED_DIGEST: &str =
        "sha256:3333333333333333333333333333333333333333333333333333333333333333";
    const IMAGE: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr";
    let standins = Scenario::seeded().await;
    let (private, public) = cosign::key_pair().unwrap();
    let mut app = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    app["metadata"]["annotations"]["argocd-ecr-updater.io/app.cosign-key"] = json!(public);
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let payload = cosign::payload(IMAGE, SEED_DIGEST);
    cosign::store_signature(
        &standins.aws,
        "barun-dev-ecr",
        SEED_DIGEST,
        &private,
        &payload,
    )
    .unwrap();
    // The payload download fails: its error names the presigned URL it was for.
    standins.shared.inject(
        Route {
            path_contains: Some("/blobs/".into()),
            ..Route::default()
        },
        100,
        FaultAction::Status {
            code: 500,
            retry_after: None,
        },
    );
    let topic = "arn:aws:sns:ap-northeast-2:768157413559:argocd-ecr-updater-reports";
    let mut env = standins.lambda_env();
    env.extend([
        ("LOG_LEVEL".to_string(), "trace".to_string()),
        ("NOTIFICATION_TOPIC_ARN".to_string(), topic.to_string()),
    ]);
    let mut function = spawn_lambda(&crate::common::function_binary(), &env);
    // What Lambda puts in the dead-letter queue: the error type and message.
    let failed = error(&standins, event("push-date-tag.json")).await;
    assert_eq!(failed["errorType"], "Retryable.TargetsFailed", "{failed}");
    assert!(
        failed["errorMessage"]
            .as_str()
            .unwrap()
            .contains("cannot download the signature payload"),
        "{failed}"
    );
    assert!(
        standins
            .shared
            .count(|r| r.path.contains("/blobs/") && r.status == 500)
            > 0,
        "the download was never attempted, so nothing was tested"
    );
    let _ = function.child.kill();
    let log = stderr_of(&mut function);
    let published = serde_json::to_string(&standins.aws.published()).unwrap();
    assert!(
        !published.is_empty() && published != "[]",
        "nothing was published"
    );
    let events = serde_json::to_string(&standins.kube.events()).unwrap();
    for secret in [
        PRESIGNED_SECRET,
        FUNCTION_SESSION_TOKEN,
        FUNCTION_SECRET_KEY,
    ] {
        for (place, text) in [
            ("the invocation error", failed.to_string()),
            ("the log at trace", log.clone()),
            ("the SNS message", published.clone()),
            ("the Kubernetes Events", events.clone()),
        ] {
            assert!(
                !text.contains(secret),
                "{secret} leaked into {place}: {text}"
            );
        }
    }
    // The URL is still named, without its query, so the report says what failed.
    assert!(log.contains("/blobs/"), "{log}");
}

/// The function as it ships (built alone: no dev-dependency turns on a feature of `regex` or
/// of the YAML readers) decides with every pattern language the annotations have: a
/// Masterminds constraint, an `allow-tags` regexp with `\d`, an `ignore-tags` glob.
#[tokio::test]
async fn the_shipped_binary_applies_constraints_regexps_and_globs() {
    use argocd_ecr_updater_standins::fixtures::Application;
    let standins = Scenario::seeded().await;
    let api = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/api";
    let app = Application::tracking("api", api, "v1.2.0")
        .annotate("image-list", &format!("app={api}:^1.2"))
        .annotate("app.update-strategy", "semver")
        .annotate("app.allow-tags", r"regexp:^v\d+\.\d+\.\d+$")
        .annotate("app.ignore-tags", "v1.2.9*, v0.*")
        .build();
    standins.kube.insert(app).unwrap();
    let _function = spawn_lambda(&crate::common::function_binary(), &standins.lambda_env());
    // events/push-semver-tag.json: api v1.3.0, which the seed's ECR holds.
    let report = response(&standins, event("push-semver-tag.json")).await;
    let entry = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "api")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(entry["action"], "updated", "{entry:#}");
    assert_eq!(entry["to"], "v1.3.0");
}
