//! argocd-ecr-updater beside the baseline a team writes without it
//! (`benches/baseline/baseline.py`: boto3 and the Kubernetes Python client), on the same
//! stand-ins and seed: 200, 2,000 and 10,000 Applications in `argocd`, 3 of them tracking the
//! pushed repository, each with a ~50 KB `status`. Each tool handles one push event as one
//! process (ours: `argocd-ecr-updater plan --apply`), both moving the same 3 Applications.
//! Prints wall time, peak RSS and bytes listed, medians and ranges of `RUNS` runs, and the
//! ratios. Run it with `./scripts/compare-baseline`, which installs the baseline's Python
//! dependencies first. Prints figures; asserts only that both tools did the work.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use argocd_ecr_updater::cluster::eks_auth::{IamTokenSource, SystemClock};
use argocd_ecr_updater_standins::fixtures::{
    MEASURE_CHILD, bench_application, image_with_digest, numbered_digest, push_event,
};
use argocd_ecr_updater_standins::{
    FUNCTION_ACCESS_KEY, FUNCTION_SECRET_KEY, FUNCTION_SESSION_TOKEN, Options, Service, StandIns,
};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");
const SIZES: [usize; 3] = [200, 2_000, 10_000];
const RUNS: usize = 5;
const MATCHING: usize = 3;
const REGISTRY: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com";
const REPOSITORY: &str = "bench-svc";

struct Measured {
    wall: Duration,
    peak_rss_kb: u64,
    bytes_listed: usize,
    stdout: String,
}

fn tag(n: usize) -> String {
    format!("20250102-{n:06}")
}

fn measure(
    standins: &StandIns,
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
) -> Measured {
    standins.shared.clear_log();
    let output = Command::new("python3")
        .args(["-c", MEASURE_CHILD, program.to_str().unwrap_or_default()])
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("python3 runs");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_eq!(
        report["code"],
        0,
        "{program:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes_listed = standins
        .shared
        .requests()
        .iter()
        .filter(|r| {
            r.service == Service::Kube && r.method == "GET" && r.path.ends_with("/applications")
        })
        .map(|r| r.response_bytes)
        .sum();
    Measured {
        wall: Duration::from_secs_f64(report["wall_s"].as_f64().unwrap_or_default()),
        peak_rss_kb: report["peak_rss_kb"].as_u64().unwrap_or_default(),
        bytes_listed,
        stdout: report["stdout"].as_str().unwrap_or_default().to_string(),
    }
}

fn median_and_range<T: Copy + PartialOrd>(values: &mut [T]) -> (T, T, T) {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    (
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The repository's root: this bench lives in the CLI package (`cli/`), one below it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent");
    let python = root.join("benches/baseline/.venv/bin/python");
    if !python.exists() {
        eprintln!(
            "benches/baseline/.venv is missing: run ./scripts/compare-baseline, which installs it"
        );
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().unwrap();
    println!(
        "| Applications | tool | wall time, median (range) of {RUNS} | peak RSS, median | bytes listed |"
    );
    println!("|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for n in SIZES {
        let standins = StandIns::start(Options::default()).await.unwrap();
        for i in 0..n {
            standins
                .kube
                .insert(bench_application(i, n, MATCHING, REGISTRY, REPOSITORY))
                .unwrap();
        }
        standins.aws.push(image_with_digest(
            REPOSITORY,
            Some("20250101-000000"),
            &numbered_digest(0),
            "2025-01-01T00:00:00Z",
        ));
        for k in 1..=2 * RUNS {
            let at = format!("2025-01-02T00:{:02}:{:02}Z", k / 60, k % 60);
            standins.aws.push(image_with_digest(
                REPOSITORY,
                Some(&tag(k)),
                &numbered_digest(k),
                &at,
            ));
        }
        let ca_file = dir.path().join(format!("ca-{n}.pem"));
        std::fs::write(&ca_file, &standins.ca_pem).unwrap();
        let credentials = Credentials::new(
            FUNCTION_ACCESS_KEY,
            FUNCTION_SECRET_KEY,
            Some(FUNCTION_SESSION_TOKEN.into()),
            None,
            "bench",
        );
        let tokens = IamTokenSource::new(
            standins.options.cluster_name.clone(),
            standins.options.region.clone(),
            SharedCredentialsProvider::new(credentials),
            std::sync::Arc::new(SystemClock),
        );
        let (token, _) = tokens.fresh().await.unwrap();
        let mut env = standins.function_env();
        env.extend([
            ("LOG_LEVEL".to_string(), "warn".to_string()),
            ("KUBE_API_ENDPOINT".to_string(), standins.kube_endpoint()),
            ("KUBE_CA_FILE".to_string(), ca_file.display().to_string()),
            ("KUBE_TOKEN".to_string(), token),
            ("AWS_CONFIG_FILE".to_string(), "/nonexistent".to_string()),
            (
                "AWS_SHARED_CREDENTIALS_FILE".to_string(),
                "/nonexistent".to_string(),
            ),
            ("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string()),
            // boto3 reads its region from here, not from AWS_REGION.
            (
                "AWS_DEFAULT_REGION".to_string(),
                standins.options.region.clone(),
            ),
        ]);
        // KUBE_API_ENDPOINT is for the baseline; ours finds the cluster through DescribeCluster.
        let ours_env: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| k != "KUBE_API_ENDPOINT")
            .cloned()
            .collect();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for run in 0..RUNS {
            // Each tool gets its own newer tag, so both move the same 3 Applications.
            for (k, tool) in [(2 * run + 1, "ours"), (2 * run + 2, "baseline")] {
                let event_file = dir.path().join(format!("event-{n}-{k}.json"));
                let at = format!("2025-01-02T00:{:02}:{:02}Z", k / 60, k % 60);
                std::fs::write(
                    &event_file,
                    push_event(REPOSITORY, &tag(k), &at).to_string(),
                )
                .unwrap();
                let event = event_file.to_str().unwrap();
                let measured = if tool == "ours" {
                    measure(
                        &standins,
                        Path::new(BINARY),
                        &["plan", "--event", event, "--apply"],
                        &ours_env,
                    )
                } else {
                    let script = root.join("benches/baseline/baseline.py");
                    measure(&standins, &python, &[script.to_str().unwrap(), event], &env)
                };
                let updated = if tool == "ours" {
                    serde_json::from_str::<serde_json::Value>(&measured.stdout)
                        .ok()
                        .map_or(0, |r| {
                            r["entries"].as_array().map_or(0, |e| {
                                e.iter().filter(|e| e["action"] == "updated").count()
                            })
                        })
                } else {
                    serde_json::from_str::<serde_json::Value>(measured.stdout.trim())
                        .ok()
                        .map_or(0, |r| r["updated"].as_array().map_or(0, Vec::len))
                };
                assert_eq!(
                    updated, MATCHING,
                    "{tool} at {n} did not update all {MATCHING}: {}",
                    measured.stdout
                );
                if tool == "ours" {
                    ours.push(measured)
                } else {
                    theirs.push(measured)
                }
            }
        }
        let row = |tool: &str, measured: &[Measured]| {
            let mut walls: Vec<f64> = measured
                .iter()
                .map(|m| m.wall.as_secs_f64() * 1e3)
                .collect();
            let mut rss: Vec<u64> = measured.iter().map(|m| m.peak_rss_kb).collect();
            let (wall, low, high) = median_and_range(&mut walls);
            let (rss, _, _) = median_and_range(&mut rss);
            let bytes = measured[0].bytes_listed;
            println!(
                "| {n} | {tool} | {wall:.0} ms ({low:.0} to {high:.0}) | {:.1} MiB | {:.1} MiB |",
                rss as f64 / 1024.0,
                bytes as f64 / 1_048_576.0
            );
            (wall, rss as f64, bytes as f64)
        };
        let o = row("argocd-ecr-updater", &ours);
        let b = row("baseline (Python)", &theirs);
        ratios.push((n, b.0 / o.0, b.1 / o.1, b.2 / o.2.max(1.0)));
    }
    println!();
    println!("| Applications | baseline / ours: wall time | peak RSS | bytes listed |");
    println!("|---|---|---|---|");
    for (n, wall, rss, bytes) in ratios {
        println!("| {n} | {wall:.1}x | {rss:.1}x | {bytes:.0}x |");
    }
}
