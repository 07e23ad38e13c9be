//! Peak memory of the function writing back to a large values file: the release binary under
//! the Runtime API stand-in, the seed Application on `write-back-target: helmvalues`, its
//! `values.yaml` in the GitLab stand-in (which serves files of any size, as GitLab and
//! CodeCommit do) grown to a size with the shapes that cost the parsers most per byte: a
//! block list of one-character items (`- a`, 4 bytes an item) and a flow list (`[a, a, …]`,
//! 3 bytes an item). One fresh process per run (its `VmHWM` is its own peak), 3 runs per
//! size, each printed as median (range); with the process's peak after a push to a small file
//! beside them, and what happens past the cap.
//!
//! Then the same for YAML that expands: the Application on the default write-back target, its
//! `.argocd-source-<app>.yaml` an alias bomb that the bound refuses, and the texts that expand
//! the most while staying under it (`yaml::MAX_EXPANDED`): many aliases of a list of
//! one-letter strings, of a mapping, and of a long string.
//!
//! `cargo bench --bench git_file`. Prints figures; asserts nothing.

use std::time::Duration;

use argocd_ecr_updater_standins::fixtures::SEED_APP;
use argocd_ecr_updater_standins::{Outcome, StandIns};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater");
const RUNS: usize = 3;
const PROJECT: &str = "barun/invitation";
const TOKEN: &str = "glpat-bench-token";
const SECRET: &str =
    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:bench-gitlab-Ab12Cd";
const HEAD: &str = "image:\n  repository: 768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/barun-dev-ecr\n  tag: \"20250825-120000\"\n";

/// A values file of exactly `bytes` bytes: the image block, then `shape`'s list, then a
/// comment that pads it to the size.
fn values(shape: &str, bytes: usize) -> String {
    let room = bytes.saturating_sub(HEAD.len() + 24);
    let mut text = String::with_capacity(bytes);
    text.push_str(HEAD);
    match shape {
        "block list" => {
            text.push_str("items:\n");
            while text.len() + 4 <= room {
                text.push_str("- a\n");
            }
        }
        _ => {
            text.push_str("items: [a");
            while text.len() + 3 <= room {
                text.push_str(", a");
            }
            text.push_str("]\n");
        }
    }
    text.push('#');
    while text.len() + 1 < bytes {
        text.push('x');
    }
    text.push('\n');
    text
}

/// One push against a fresh function process; its peak RSS (KiB) and what it did.
async fn run(standins: &StandIns, env: &[(String, String)], file: &str) -> (u64, String) {
    run_with(standins, env, "argocd/values.yaml", file).await
}

/// One push with `path` holding `file`, against a fresh function process.
async fn run_with(
    standins: &StandIns,
    env: &[(String, String)],
    path: &str,
    file: &str,
) -> (u64, String) {
    let files = [
        (path, file),
        ("argocd/Chart.yaml", "name: invitation\n"),
        ("argocd/values.yaml", HEAD),
    ];
    let files = if path == "argocd/values.yaml" {
        &files[..2]
    } else {
        &files[..]
    };
    standins.gitlab.create_repository(PROJECT, "main", files);
    standins.gitlab.grant_token(TOKEN, &[PROJECT], true);
    // The Application back on the old tag, so the push moves it.
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let mut child = std::process::Command::new(BINARY)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the release binary starts");
    let event: Value = serde_json::from_str(include_str!("../events/push-date-tag.json")).unwrap();
    let outcome = standins
        .runtime
        .invoke(event, Duration::from_secs(120))
        .await
        .expect("the function answers");
    let peak = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    standins.runtime.retire_pollers();
    let said = match outcome {
        Outcome::Response(report) => {
            let entry = &report["entries"][0];
            let reason: String = entry["reason"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(240)
                .collect();
            format!("{}: {reason}", entry["action"].as_str().unwrap_or("?"))
        }
        Outcome::Error(error) => {
            let message: String = error["errorMessage"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(240)
                .collect();
            format!("error: {message}")
        }
    };
    (peak, said)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let standins = StandIns::start_seeded().await.unwrap();
    standins
        .aws
        .put_secret(SECRET, &json!({"token": TOKEN}).to_string(), true);
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    let annotations = &mut app["metadata"]["annotations"];
    annotations["argocd-image-updater.argoproj.io/write-back-method"] = json!("git");
    annotations["argocd-image-updater.argoproj.io/write-back-target"] = json!("helmvalues");
    annotations["argocd-image-updater.argoproj.io/git-repository"] =
        json!(format!("https://gitlab.com/{PROJECT}.git"));
    annotations["argocd-image-updater.argoproj.io/git-branch"] = json!("main");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let mut env = standins.lambda_env();
    env.extend([
        (
            "GIT_CREDENTIALS_SECRET_ARNS".to_string(),
            SECRET.to_string(),
        ),
        ("GITLAB_API_URL".to_string(), standins.gitlab_api()),
        ("GIT_CA_BUNDLE".to_string(), standins.ca_pem.clone()),
        ("READ_IMAGEUPDATERS".to_string(), "false".to_string()),
    ]);
    println!("shape | file | peak RSS, median (range) of {RUNS} | outcome");
    println!("---|---|---|---");
    // Up to the cap (512 KiB, githost::MAX_FILE), then just past it and well past it.
    let sizes = [
        4 << 10,
        128 << 10,
        256 << 10,
        512 << 10,
        (512 << 10) + 1,
        3 << 20,
    ];
    for shape in ["block list", "flow list"] {
        for size in sizes {
            let file = values(shape, size);
            let mut peaks = Vec::new();
            let mut said = String::new();
            for _ in 0..RUNS {
                let (peak, outcome) = run(&standins, &env, &file).await;
                peaks.push(peak);
                said = outcome;
            }
            peaks.sort_unstable();
            println!(
                "{shape} | {} bytes | {:.1} MiB ({:.1}–{:.1}) | {said}",
                file.len(),
                mib(peaks[RUNS / 2]),
                mib(peaks[0]),
                mib(peaks[RUNS - 1]),
            );
        }
    }
    expanding(&standins, &env).await;
}

/// Override files that expand: refused past the bound, read under it.
async fn expanding(standins: &StandIns, env: &[(String, String)]) {
    use argocd_ecr_updater::yaml::alias_bomb;
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    if let Some(annotations) = app["metadata"]["annotations"].as_object_mut() {
        annotations.remove("argocd-image-updater.argoproj.io/write-back-target");
    }
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let path = format!("argocd/.argocd-source-{SEED_APP}.yaml");
    let mapping_fan = |entries: usize, aliases: usize| {
        let keys: Vec<String> = (0..entries).map(|i| format!("k{i}: x")).collect();
        format!(
            "m: &m {{{}}}\nl: [{}]\n",
            keys.join(", "),
            vec!["*m"; aliases].join(",")
        )
    };
    let string_fan = |bytes: usize, aliases: usize| {
        format!(
            "s: &s \"{}\"\nl: [{}]\n",
            "x".repeat(bytes),
            vec!["*s"; aliases].join(",")
        )
    };
    // Each fan as large as the walk accepts: the most aliases of its anchor under the bound.
    let largest = |shape: &dyn Fn(usize) -> String| {
        let accepted = |n: usize| {
            argocd_ecr_updater::yaml::check(&shape(n), argocd_ecr_updater::yaml::Documents::All)
                .is_ok()
        };
        let (mut low, mut high) = (1, 1);
        while accepted(high) {
            (low, high) = (high, high * 2);
        }
        while high - low > 1 {
            let mid = (low + high) / 2;
            if accepted(mid) { low = mid } else { high = mid }
        }
        (low, shape(low))
    };
    let (lists, list_fan) = largest(&|n| alias_bomb(1_000, 1, n));
    let (mappings, mapping_fan) = largest(&|n| mapping_fan(1_000, n));
    let (strings, string_fan) = largest(&|n| string_fan(4 << 10, n));
    let cases = [
        (
            "alias bomb, 2 million nodes (refused)".to_string(),
            alias_bomb(100, 1, 20_000),
        ),
        ("billion laughs (refused)".to_string(), alias_bomb(1, 9, 10)),
        (
            "anchor redefined on a list of 100,000 that aliases it (refused)".to_string(),
            format!("a: &x 0\nb: &x [{}*x]\n", "0,".repeat(100_000)),
        ),
        (
            format!("list of 1,000 aliased {lists} times (the most under the bound)"),
            list_fan,
        ),
        (
            format!("mapping of 1,000 aliased {mappings} times (the most under the bound)"),
            mapping_fan,
        ),
        (
            format!("4 KiB string aliased {strings} times (the most under the bound)"),
            string_fan,
        ),
    ];
    println!();
    println!("override file | text | peak RSS, median (range) of {RUNS} | outcome");
    println!("---|---|---|---");
    for (shape, file) in cases {
        let mut peaks = Vec::new();
        let mut said = String::new();
        for _ in 0..RUNS {
            let (peak, outcome) = run_with(standins, env, &path, &file).await;
            peaks.push(peak);
            said = outcome;
        }
        peaks.sort_unstable();
        println!(
            "{shape} | {} bytes | {:.1} MiB ({:.1}–{:.1}) | {said}",
            file.len(),
            mib(peaks[RUNS / 2]),
            mib(peaks[0]),
            mib(peaks[RUNS - 1]),
        );
    }
}
