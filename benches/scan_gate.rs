//! The scan gate's rollout timeline on the stand-ins: a gated image's push (decided, held
//! back), then its scan-completed event (decided again, written). Prints the median and p99
//! of each step over 50 images, with the in-process handler against the ECR and Kubernetes
//! stand-ins over loopback (the API server over TLS). Prints figures; asserts nothing.
//!
//! `cargo bench --bench scan_gate`

use std::sync::Arc;
use std::time::{Duration, Instant};

use argocd_ecr_updater::cluster::eks_auth::SystemClock;
use argocd_ecr_updater::config::Config;
use argocd_ecr_updater::pipeline::handler::Handler;
use argocd_ecr_updater_standins::StandIns;
use argocd_ecr_updater_standins::fixtures::{
    SEED_APP, image_with_digest, numbered_digest, push_event,
};
use serde_json::json;

const ROUNDS: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let standins = StandIns::start_seeded().await.unwrap();
    let mut app = standins.kube.get("argocd", SEED_APP).unwrap();
    app["metadata"]["annotations"]["argocd-ecr-updater.io/app.scan-gate"] =
        json!("critical=0,high=3");
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
    standins.kube.insert(app).unwrap();
    let config = Config::from_lookup(|name| match name {
        "CLUSTER_NAME" => Some(standins.options.cluster_name.clone()),
        "LOG_LEVEL" => Some("warn".into()),
        _ => None,
    })
    .unwrap();
    let handler = Handler::from_sdk(config, &standins.sdk_config(), Arc::new(SystemClock)).unwrap();
    let (mut pushes, mut scans) = (Vec::new(), Vec::new());
    for n in 0..=ROUNDS {
        let tag = format!("20250901-{n:06}");
        let time = format!("2025-09-01T00:{:02}:{:02}Z", n / 60, n % 60);
        let digest = numbered_digest(1000 + n);
        standins.aws.push(image_with_digest(
            "barun-dev-ecr",
            Some(&tag),
            &digest,
            &time,
        ));
        let mut push = push_event("barun-dev-ecr", &tag, &time);
        push["detail"]["image-digest"] = json!(digest);
        let started = Instant::now();
        let held = handler.handle(&push, None).await.unwrap();
        let push_time = started.elapsed();
        assert!(
            held.entries[0].reason.contains("waiting for the scan"),
            "{:?}",
            held.entries
        );
        let scan = json!({"version": "0", "id": format!("scan-{n}"), "detail-type": "ECR Image Scan",
            "source": "aws.ecr", "account": "768157413559", "time": time, "region": "ap-northeast-2",
            "detail": {"scan-status": "COMPLETE", "repository-name": "barun-dev-ecr",
                "image-digest": digest, "image-tags": [tag], "finding-severity-counts": {"MEDIUM": 1}}});
        let started = Instant::now();
        let written = handler.handle(&scan, None).await.unwrap();
        let scan_time = started.elapsed();
        assert_eq!(
            written.entries[0].action,
            argocd_ecr_updater::report::Action::Updated
        );
        // The first round warms the container (DescribeCluster, token, connections).
        if n > 0 {
            pushes.push(push_time);
            scans.push(scan_time);
        }
    }
    pushes.sort();
    scans.sort();
    println!("scan gate, {ROUNDS} images (in-process handler, stand-ins over loopback):");
    println!(
        "  push decided and held back: p50 {:.1} ms, p99 {:.1} ms",
        percentile(&pushes, 0.5),
        percentile(&pushes, 0.99)
    );
    println!(
        "  scan event to Application patched: p50 {:.1} ms, p99 {:.1} ms",
        percentile(&scans, 0.5),
        percentile(&scans, 0.99)
    );
}
