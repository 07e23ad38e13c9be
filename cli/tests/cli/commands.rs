//! The `token`, `plan` and `migrate` subcommands, run as the compiled CLI a user runs.

use std::process::Command;

use argocd_ecr_updater_standins::token::verify;
use argocd_ecr_updater_standins::{Grant, StandIns, function_identity};

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");

/// Runs the binary with `args`, asserts it succeeded, and parses its JSON output.
fn json_output(env: &[(String, String)], args: &[&str]) -> serde_json::Value {
    let output = command(env).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The environment of a laptop whose credentials are a session of the function's role (a
/// profile of it), as `plan --function` runs: Lambda and STS at the stand-ins too.
fn as_function(standins: &StandIns) -> (Vec<(String, String)>, String) {
    let mut env = standins.function_env();
    env.push(("AWS_ENDPOINT_URL_LAMBDA".into(), standins.aws_endpoint()));
    env.push(("AWS_ENDPOINT_URL_STS".into(), standins.aws_endpoint()));
    (env, standins.aws.deployed().function_name)
}

fn command(env: &[(String, String)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .env_clear()
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_prints_an_exec_credential_the_cluster_accepts() {
    let standins = StandIns::start_seeded().await.unwrap();
    let credential = json_output(
        &standins.function_env(),
        &[
            "token",
            "--cluster",
            "barun-dev",
            "--region",
            "ap-northeast-2",
        ],
    );
    assert_eq!(
        credential["apiVersion"],
        "client.authentication.k8s.io/v1beta1"
    );
    assert_eq!(credential["kind"], "ExecCredential");
    assert!(
        credential["status"]["expirationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let token = credential["status"]["token"].as_str().unwrap();
    let identities = vec![function_identity(vec![Grant::new(&["get"], "argocd")])];
    verify(
        token,
        "barun-dev",
        &identities,
        std::time::SystemTime::now(),
    )
    .unwrap();
    // And it works as a bearer token against the API server.
    let client = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(standins.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let status = client
        .get(format!(
            "{}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/aws-pipeline-test",
            standins.kube_endpoint()
        ))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 200);
}

#[test]
fn token_without_credentials_says_how_to_provide_them() {
    let output = command(&[])
        .args(["token", "--cluster", "c", "--region", "us-east-1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // What was tried and what to do, as `aws` says it.
    for part in [
        "no AWS credentials found",
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "aws sso login",
        "aws configure",
    ] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
}

#[test]
fn version_names_the_commit_the_binary_was_built_from() {
    let output = command(&[]).arg("--version").output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        // Built from this checkout (maybe with uncommitted changes: `-dirty`).
        Some(commit) => assert!(stdout.contains(&format!("(commit {commit}")), "{stdout}"),
        None => assert!(stdout.contains("(commit unknown)"), "{stdout}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_written_to_a_pipe_carry_no_colour_and_json_is_one_object_per_line() {
    let standins = StandIns::start_seeded().await.unwrap();
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");
    let (mut env, function) = as_function(&standins);
    env.push(("LOG_LEVEL".into(), "info".into()));
    let text = command(&env)
        .args(["plan", "--event", event, "--function", &function])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(stderr.contains("decision"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "escape codes in a pipe: {stderr:?}"
    );
    let json = command(&env)
        .args([
            "--log-format",
            "json",
            "plan",
            "--event",
            event,
            "--function",
            &function,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&json.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(parsed["message"].is_string(), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_is_a_dry_run_unless_asked_to_apply() {
    let standins = StandIns::start_seeded().await.unwrap();
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");
    let (env, function) = as_function(&standins);
    let report = json_output(&env, &["plan", "--event", event, "--function", &function]);
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["entries"][0]["to"], "20250825-153012");
    assert_eq!(report["entries"][0]["configured_by"], "annotations");
    assert!(report["entries"][0]["patch"].is_array());
    assert_eq!(standins.kube.seed_tag().as_deref(), Some("20250825-120000"));

    let report = json_output(
        &env,
        &["plan", "--reconcile", "--apply", "--function", &function],
    );
    assert_eq!(report["mode"], "reconcile");
    assert_eq!(standins.kube.seed_tag().as_deref(), Some("20250825-153012"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_shows_every_cluster_and_cluster_picks_one_with_its_listed_settings() {
    let standins = StandIns::start_seeded().await.unwrap();
    let staging = standins.add_seeded_cluster("staging").await.unwrap();
    let (mut env, function) = as_function(&standins);
    env.push(("CLUSTERS".into(), "staging".into()));
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");

    let report = json_output(&env, &["plan", "--event", event, "--function", &function]);
    let clusters: Vec<&str> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["barun-dev", "staging"]);

    let report = json_output(
        &env,
        &[
            "plan",
            "--event",
            event,
            "--cluster",
            "staging",
            "--function",
            &function,
        ],
    );
    let entries = report["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{report:#}");
    assert_eq!(entries[0]["to"], "20250825-153012");
    assert!(
        report.get("clusters").is_none(),
        "one cluster reports as before"
    );
    assert!(staging.shared.requests().iter().any(|r| r.method == "GET"));
}

#[test]
fn plan_rejects_an_event_that_is_not_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{not json").unwrap();
    let output = command(&[("CLUSTER_NAME".into(), "c".into())])
        .args(["plan", "--event", path.to_str().unwrap(), "--function", "f"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not JSON"));
}

#[test]
fn plan_exits_2_for_an_event_that_is_json_but_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("malformed.json");
    std::fs::write(
        &path,
        r#"{"version":"0","id":"e","detail-type":"ECR Image Action","source":"aws.ecr","account":"768157413559","time":"2025-08-25T06:30:14Z","region":"ap-northeast-2","detail":{"action-type":"PUSH","result":"SUCCESS"}}"#,
    )
    .unwrap();
    let output = command(&[
        ("CLUSTER_NAME".into(), "c".into()),
        ("AWS_REGION".into(), "ap-northeast-2".into()),
    ])
    .args([
        "plan",
        "--event",
        path.to_str().unwrap(),
        "--operator-credentials",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("repository-name"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_prints_an_imageupdater_object_that_decides_like_the_annotations() {
    let standins = StandIns::start_seeded().await.unwrap();
    let object = json_output(
        &standins.function_env(),
        &["migrate", "--namespace", "argocd", "--name", "invitation"],
    );
    assert_eq!(object["kind"], "ImageUpdater");
    assert_eq!(
        object["spec"]["applicationRefs"][0]["namePattern"],
        "aws-pipeline-test"
    );
    // The API server accepts it (the vendored CRD validates it), and with the annotations
    // gone it moves the seed exactly as they did.
    standins.kube.insert_image_updater(object).unwrap();
    standins
        .kube
        .edit("argocd", "aws-pipeline-test", |app| {
            if let Some(map) = app["metadata"]["annotations"].as_object_mut() {
                map.retain(|k, _| !k.starts_with("argocd-image-updater.argoproj.io/"));
            }
        })
        .unwrap();
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/push-date-tag.json");
    let (env, function) = as_function(&standins);
    let report = json_output(
        &env,
        &["plan", "--event", event, "--apply", "--function", &function],
    );
    assert_eq!(report["entries"][0]["action"], "updated");
    assert_eq!(
        report["entries"][0]["configured_by"],
        "ImageUpdater argocd/invitation, ref \"aws-pipeline-test\""
    );
    assert_eq!(standins.kube.seed_tag().as_deref(), Some("20250825-153012"));
}

/// Every command line the project tells an operator to run (README, docs, the template's
/// alarm texts, the Terraform module, `doctor`'s fixes in the code) names a subcommand and
/// flags the CLI accepts: an alarm that says `--queue-url` where the flag is `--queue` sends
/// someone at 3 a.m. to an error.
#[test]
fn every_command_the_project_prints_or_documents_uses_flags_the_cli_accepts() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md"), root.join("template.yaml")];
    for dir in [
        "docs",
        "deploy/terraform",
        "cli/src",
        "cli/src/doctor",
        "src",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let kind = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            if matches!(kind, "md" | "tf" | "rs" | "yaml") {
                files.push(path);
            }
        }
    }
    let mut help = std::collections::BTreeMap::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("argocd-ecr-updater-cli ") {
            // The command runs to the end of its line, code span or string.
            let rest = &text[at + "argocd-ecr-updater-cli ".len()..];
            let end = rest.find(['\n', '`', '"', ')']).unwrap_or(rest.len());
            let words: Vec<&str> = rest[..end].split_whitespace().collect();
            let Some(subcommand) = words
                .first()
                .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()))
            else {
                continue;
            };
            let accepted = help.entry(subcommand.to_string()).or_insert_with(|| {
                let output = Command::new(BINARY)
                    .args([*subcommand, "--help"])
                    .output()
                    .unwrap();
                assert!(
                    output.status.success(),
                    "{}: `argocd-ecr-updater-cli {subcommand}` is not a subcommand",
                    file.display()
                );
                String::from_utf8_lossy(&output.stdout).to_string()
            });
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                let flag = flag
                    .split('=')
                    .next()
                    .unwrap()
                    .trim_end_matches([',', '.', ';']);
                assert!(
                    accepted.contains(&format!("{flag} "))
                        || accepted.contains(&format!("{flag}\n")),
                    "{}: `argocd-ecr-updater-cli {subcommand}` has no {flag}",
                    file.display()
                );
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 10,
        "only {seen} flags found: is the search still looking where commands are?"
    );
}

/// `status` on a promoted Application (staging, promoting the seed's image from the seed
/// Application after 2h) shows, as the function would judge it: what it asks for and runs,
/// the upstream's verified write and the soak left, the alarms it is verified by, and what
/// holds it back (a freeze, an image auto-rollback took back) with how each is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_where_each_image_stands_in_its_chain_and_what_holds_it() {
    use argocd_ecr_updater_standins::fixtures::{Application, SEED_APP, SEED_IMAGE, SEED_TAG};
    use serde_json::json;
    let standins = StandIns::start_seeded().await.unwrap();
    let verified_at = time::OffsetDateTime::now_utc() - time::Duration::minutes(30);
    let stamp = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    // The seed verified `PUSHED` half an hour ago.
    let pushed = "20250825-153012";
    let record = json!({"time": stamp(verified_at - time::Duration::minutes(5)), "eventId": "e",
        "images": [{"alias": "app", "image": SEED_IMAGE, "from": SEED_TAG, "to": pushed}],
        "rollout": {"outcome": "confirmed", "at": stamp(verified_at)}});
    standins
        .kube
        .edit("argocd", SEED_APP, |app| {
            app["metadata"]["annotations"]["argocd-ecr-updater.io/last-update"] =
                json!(record.to_string());
            for parameter in app["spec"]["source"]["helm"]["parameters"]
                .as_array_mut()
                .unwrap()
            {
                if parameter["name"] == "image.tag" {
                    parameter["value"] = json!(pushed);
                }
            }
            app["status"]["health"] = json!({"status": "Healthy"});
            app["status"]["summary"]["images"] = json!([format!("{SEED_IMAGE}:{pushed}")]);
        })
        .unwrap();
    let taken = json!({SEED_IMAGE: [{"to": "20250801-000000", "from": SEED_TAG,
        "at": "2026-12-01T10:00:00Z", "reason": "alarm web-5xx went to ALARM"}]});
    let staging = Application::tracking("web-staging", SEED_IMAGE, SEED_TAG)
        .annotation(
            "argocd-ecr-updater.io/app.promote-from",
            &format!("argocd/{SEED_APP}"),
        )
        .annotation("argocd-ecr-updater.io/app.promote-after", "2h")
        .annotation("argocd-ecr-updater.io/verify-alarms", "web-5xx")
        .annotation("argocd-ecr-updater.io/freeze", "true")
        .annotation("argocd-ecr-updater.io/rolled-back", &taken.to_string())
        .build();
    standins.kube.insert(staging).unwrap();
    let status = json_output(&standins.function_env(), &["status", "argocd/web-staging"]);
    let image = &status["images"][0];
    assert_eq!(status["application"], "argocd/web-staging");
    assert_eq!(image["asks_for"], json!([SEED_TAG]));
    assert_eq!(image["running"], true);
    let promotion = &image["promotion"];
    assert_eq!(promotion["from"], format!("barun-dev/argocd/{SEED_APP}"));
    assert_eq!(promotion["state"], "soaking", "{status:#}");
    assert_eq!(promotion["verified"], pushed);
    let left = promotion["soak_left"].as_str().unwrap();
    // The CLI reads the wall clock: some seconds pass between the record and the run.
    assert!(
        left.starts_with("1h2") || left.starts_with("1h30m"),
        "{left}"
    );
    assert_eq!(status["verification"]["alarms"], json!(["web-5xx"]));
    let blocked = image["blocked_by"].to_string();
    assert!(blocked.contains("freeze"), "{blocked}");
    assert!(
        blocked.contains("`20250801-000000` was rolled back") && blocked.contains("deletes it"),
        "{blocked}"
    );

    // An Application that does not exist is a failure naming it.
    let output = command(&standins.function_env())
        .args(["status", "argocd/nothing-here"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("nothing-here"));
}
