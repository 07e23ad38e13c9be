//! Figures for a scheduled sweep of a large fleet, fanned out as Lambda runs it: the release
//! binary as `SWEEP_CONCURRENCY` function processes polling the Runtime API stand-in, the
//! coordinator's shards in the SQS stand-in, and the event source mapping stand-in handing
//! them out one per invocation, against ECR/EKS/Kubernetes stand-ins over loopback with TLS.
//!
//! For 2,000, 10,000 and 50,000 Applications in 1 and in 5 clusters, and 999 in one (a
//! sweep just under the fan-out threshold, run by the coordinator itself) (`BENCH_FLEETS`, say
//! `2000x1,10000x5`, picks some), each Application with a ~50 KB `status`, five Applications
//! per repository (one per cluster with 5 clusters), 1% of repositories with a newer image
//! so that every sweep writes something: `BENCH_RUNS` sweeps (3 unless set), each printing
//! the whole sweep's wall time, the coordinator's and the longest shard's time, requests per
//! Application, peak RSS per function process, and what the sweep costs in Lambda and SQS.
//! `BENCH_CPU_CGROUP` (a cgroup v1 `cpu` directory) holds each function process to a 128 MB
//! share of a CPU in a child cgroup of its own, as each Lambda sandbox has.
//!
//! Each Application is seeded as a real cluster holds one (`BENCH_MANAGED_FIELDS=1`, the
//! default): created by `kubectl apply` (its `last-applied-configuration` annotation and a
//! `kubectl-client-side-apply` entry), its Helm tag moved by the function (the audit
//! annotation and an `argocd-ecr-updater` entry), its status written by Argo CD's controller
//! after an automated sync (`operationState`, `history`, `sync.comparedTo`, … and an
//! `argocd-application-controller` entry). `BENCH_MANAGED_FIELDS=0` seeds the same objects
//! with `metadata.managedFields` stripped. Either way it prints the bytes of one listed item
//! split into managedFields (by manager) and the rest, and the list responses' bytes per
//! Application, uncompressed and on the wire. Writes are not followed until live
//! (`CONFIRM_ROLLOUTS=false`): no Argo CD controller runs here, and end_to_end measures that.
//! `cargo bench --bench fan_out`. Prints figures; asserts nothing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use argocd_ecr_updater::appconfig::annotations::AUDIT_ANNOTATION;
use argocd_ecr_updater_standins::fixtures::{
    Application, image_with_digest, large_status, numbered_digest, push_event, reconcile_event,
};
use argocd_ecr_updater_standins::managed_fields::{self, Writer};
use argocd_ecr_updater_standins::mapping::{self, Mapping};
use argocd_ecr_updater_standins::writes::{application_fields, created_by_kubectl_apply};
use argocd_ecr_updater_standins::{ExtraCluster, Options, Outcome, Service, StandIns};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater");
const REGISTRY: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com";
const RUNNING: &str = "20250101-000000";
/// The tag the owner's manifest holds: the function moved each Application from it to
/// [`RUNNING`].
const APPLIED: &str = "20241231-120000";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The template's defaults.
const CONCURRENCY: usize = 10;
const SHARD_SIZE: usize = 500;
const FAN_OUT_AT: usize = 1_000;
const TIMEOUT: Duration = Duration::from_secs(120);
/// Lambda's 128 MB share of a CPU: 128/1,769 of each 100 ms period.
const QUOTA_US: u32 = 7_236;

/// List prices (us-east-1): Lambda on arm64 per GB-second and per request, SQS standard
/// per request. A month of sweeps is 30 days at one sweep every 15 minutes.
const GB_SECOND: f64 = 0.000_013_333_4;
const PER_REQUEST: f64 = 0.000_000_2;
const SQS_PER_REQUEST: f64 = 0.000_000_4;
const MEMORY_GB: f64 = 0.125;
const SWEEPS_PER_MONTH: f64 = 30.0 * 24.0 * 4.0;

struct Sweep {
    wall: Duration,
    coordinator: Duration,
    longest_shard: Duration,
    shards: usize,
    failed_deliveries: usize,
    /// Billed milliseconds summed over every invocation of the sweep.
    billed_ms: u64,
    requests: BTreeMap<&'static str, usize>,
    /// Response bytes on the wire, by kind of request.
    bytes: BTreeMap<&'static str, usize>,
    /// Bytes the function processes wrote to stdout and stderr (CloudWatch Logs ingestion).
    logged: u64,
    updated: usize,
}

impl Sweep {
    fn cost(&self) -> f64 {
        let invocations = 1 + self.shards + self.failed_deliveries;
        let sqs = self.sqs_requests();
        self.billed_ms as f64 / 1000.0 * MEMORY_GB * GB_SECOND
            + invocations as f64 * PER_REQUEST
            + sqs as f64 * SQS_PER_REQUEST
    }

    /// SendMessage by the coordinator; for each delivery one ReceiveMessage and, when it
    /// succeeded, one DeleteMessage (the mapping's pollers batch them when busy, so this is
    /// the most).
    fn sqs_requests(&self) -> usize {
        self.shards + (self.shards + self.failed_deliveries) + self.shards
    }
}

fn fleets() -> Vec<(usize, usize)> {
    // 999: just under the threshold, the sweep the coordinator runs itself, for comparison.
    let all = vec![
        (999, 1),
        (2_000, 1),
        (2_000, 5),
        (10_000, 1),
        (10_000, 5),
        (50_000, 1),
        (50_000, 5),
    ];
    let Ok(wanted) = std::env::var("BENCH_FLEETS") else {
        return all;
    };
    wanted
        .split(',')
        .filter_map(|f| {
            let (apps, clusters) = f.trim().split_once('x')?;
            Some((apps.parse().ok()?, clusters.parse().ok()?))
        })
        .collect()
}

/// Application `i` of a cluster: tracks `svc-<i % repositories>`, runs [`RUNNING`].
fn application(i: usize, repositories: usize) -> Value {
    let image = format!("{REGISTRY}/svc-{}", i % repositories);
    Application::tracking(&format!("app-{i:05}"), &image, RUNNING)
        .annotate("app.update-strategy", "latest")
        .annotate("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$")
        .annotate("app.helm.image-name", "image.repository")
        .annotate("app.helm.image-tag", "image.tag")
        .helm(&[("image.repository", &image), ("image.tag", RUNNING)])
        .with(|app| app["status"] = large_status(i, REGISTRY, &format!("svc-{}", i % repositories)))
        .build()
}

/// Whether the Applications keep their `metadata.managedFields` (`BENCH_MANAGED_FIELDS`,
/// `1` unless `0`).
fn with_managed_fields() -> bool {
    std::env::var("BENCH_MANAGED_FIELDS").map_or(true, |v| v.trim() != "0")
}

fn set_tag(app: &mut Value, tag: &str) {
    for parameter in app["spec"]["source"]["helm"]["parameters"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if parameter["name"] == "image.tag" {
            parameter["value"] = json!(tag);
        }
    }
}

/// What `kubectl apply` creates for Application `i`: no status, the owner's tag, and the
/// manifest itself (compact, as kubectl writes it) in `last-applied-configuration`.
fn applied_manifest(i: usize, repositories: usize) -> Value {
    let mut manifest = application(i, repositories);
    if let Some(object) = manifest.as_object_mut() {
        object.remove("status");
    }
    set_tag(&mut manifest, APPLIED);
    let text = format!("{manifest}\n");
    manifest["metadata"]["annotations"][LAST_APPLIED] = json!(text);
    manifest
}

/// Application `i`'s status as Argo CD's controller writes it after an automated sync of
/// [`RUNNING`]: [`large_status`] and what a sync adds to it.
fn synced_status(i: usize, repositories: usize, spec: &Value) -> Value {
    let mut status = large_status(i, REGISTRY, &format!("svc-{}", i % repositories));
    let revision = format!("{:040x}", 0x5eed_0000_u64 + i as u64);
    let source = spec["source"].clone();
    let mut applied_source = source.clone();
    for parameter in applied_source["helm"]["parameters"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if parameter["name"] == "image.tag" {
            parameter["value"] = json!(APPLIED);
        }
    }
    status["controllerNamespace"] = json!("argocd");
    status["reconciledAt"] = json!("2025-01-01T00:12:00Z");
    status["health"]["lastTransitionTime"] = json!("2025-01-01T00:06:00Z");
    status["sync"]["revision"] = json!(revision);
    status["sync"]["comparedTo"] = json!({"source": source, "destination": spec["destination"]});
    status["operationState"] = json!({
        "operation": {"sync": {"revision": revision, "prune": true, "syncOptions": ["CreateNamespace=true"]},
                      "initiatedBy": {"automated": true}, "retry": {"limit": 5}},
        "phase": "Succeeded", "message": "successfully synced (all tasks run)",
        "syncResult": {"revision": revision, "source": source},
        "startedAt": "2025-01-01T00:05:00Z", "finishedAt": "2025-01-01T00:05:40Z"});
    status["history"] = json!([
        {"id": 0, "revision": revision, "source": applied_source, "initiatedBy": {"automated": true},
         "deployStartedAt": "2024-12-31T12:05:00Z", "deployedAt": "2024-12-31T12:05:40Z"},
        {"id": 1, "revision": revision, "source": source, "initiatedBy": {"automated": true},
         "deployStartedAt": "2025-01-01T00:05:00Z", "deployedAt": "2025-01-01T00:05:40Z"}]);
    status
}

/// After `kubectl apply` created Application `i`: the function moves its tag to [`RUNNING`]
/// (a JSON patch of the Helm parameters and the audit annotation), then Argo CD's controller
/// syncs it and writes its status, each write recorded in `managedFields` as kube-apiserver
/// records it. Without `keep_managed_fields` the entries are then dropped.
fn written_after_apply(app: &mut Value, i: usize, repositories: usize, keep_managed_fields: bool) {
    let (fields, _) = application_fields();
    let before = app.clone();
    set_tag(app, RUNNING);
    let audit = json!({"time": "2025-01-01T00:00:05Z", "eventId": format!("00000000-0000-4000-8000-{i:012}"),
        "images": [{"alias": "app", "image": format!("{REGISTRY}/svc-{}", i % repositories),
                    "from": APPLIED, "to": RUNNING, "pushed": "2025-01-01T00:00:00Z"}]});
    app["metadata"]["annotations"][AUDIT_ANNOTATION] = json!(audit.to_string());
    let ours = Writer {
        manager: "argocd-ecr-updater",
        operation: "Update",
        part: None,
    };
    managed_fields::record(fields, Some(&before), app, &ours);
    let before = app.clone();
    app["status"] = synced_status(i, repositories, &app["spec"]);
    let controller = Writer {
        manager: "argocd-application-controller",
        operation: "Update",
        part: None,
    };
    managed_fields::record(fields, Some(&before), app, &controller);
    if !keep_managed_fields && let Some(meta) = app["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
}

/// Compact JSON bytes of `value`.
fn json_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(0, |v| v.len())
}

/// Bytes of an Application with `metadata` as a metadata-only list holds it: a
/// `PartialObjectMetadata`, as the stand-in and kube-apiserver write it, uncompressed.
fn listed_len(metadata: &Value) -> usize {
    json_len(
        &json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}),
    )
}

/// What one listed item is made of, in bytes.
fn item_split(app: &Value) -> String {
    let item = listed_len;
    let metadata = &app["metadata"];
    let whole = item(metadata);
    let mut rest = metadata.clone();
    if let Some(meta) = rest.as_object_mut() {
        meta.remove("managedFields");
    }
    let without = item(&rest);
    let managers: Vec<String> = metadata["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| format!("{} {}", e["manager"].as_str().unwrap_or("?"), json_len(e)))
        .collect();
    let last_applied = metadata["annotations"][LAST_APPLIED]
        .as_str()
        .map_or(0, |t| json_len(&json!(t)));
    let audit = metadata["annotations"][AUDIT_ANNOTATION]
        .as_str()
        .map_or(0, |t| json_len(&json!(t)));
    let mut bare = rest;
    if let Some(annotations) = bare["annotations"].as_object_mut() {
        annotations.remove(LAST_APPLIED);
        annotations.remove(AUDIT_ANNOTATION);
    }
    format!(
        "{whole} B; managedFields {} B ({}), the rest {without} B (last-applied-configuration value {last_applied} B, audit annotation value {audit} B, without those two annotations {} B)",
        whole - without,
        if managers.is_empty() {
            "none".to_string()
        } else {
            managers.join(", ")
        },
        item(&bare),
    )
}

/// Every repository's images, the newest being the running tag.
fn seed_repositories(standins: &StandIns, repositories: usize) {
    for r in 0..repositories {
        for (k, (tag, at)) in [
            ("20241231-000000", "2024-12-31T00:00:00Z"),
            ("20241231-120000", "2024-12-31T12:00:00Z"),
            (RUNNING, "2025-01-01T00:00:00Z"),
        ]
        .into_iter()
        .enumerate()
        {
            standins.aws.push(image_with_digest(
                &format!("svc-{r}"),
                Some(tag),
                &numbered_digest(10_000_000 + r * 10 + k),
                at,
            ));
        }
    }
}

/// A newer image in 1% of repositories: what this sweep catches up on.
fn push_newer(standins: &StandIns, repositories: usize, run: usize) {
    for r in (0..repositories).step_by(100) {
        standins.aws.push(image_with_digest(
            &format!("svc-{r}"),
            Some(&format!("20250102-{run:06}")),
            &numbered_digest(20_000_000 + r * 10 + run),
            &format!("2025-01-02T00:00:{run:02}Z"),
        ));
    }
}

/// What the function processes wrote, as Lambda ships it to CloudWatch Logs: every line of
/// stdout and stderr, counted, and the Embedded Metric Format lines kept for their series.
#[derive(Default)]
struct Output {
    bytes: std::sync::atomic::AtomicU64,
    emf_lines: std::sync::Mutex<Vec<Value>>,
    /// The last lines that were not metrics, to show when a process stops.
    tail: std::sync::Mutex<std::collections::VecDeque<String>>,
}

impl Output {
    fn read(self: &std::sync::Arc<Self>, from: impl std::io::Read + Send + 'static) {
        let output = self.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
                output
                    .bytes
                    .fetch_add(line.len() as u64 + 1, std::sync::atomic::Ordering::Relaxed);
                if line.starts_with("{\"_aws\"")
                    && let Ok(value) = serde_json::from_str(&line)
                {
                    output.emf_lines.lock().unwrap().push(value);
                } else {
                    let mut tail = output.tail.lock().unwrap();
                    if tail.len() == 20 {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
    }

    fn take_bytes(&self) -> u64 {
        self.bytes.swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    /// The metric series (namespace, name and dimension values) the lines so far declared:
    /// what CloudWatch bills as custom metrics.
    fn series(&self) -> std::collections::BTreeSet<String> {
        let mut series = std::collections::BTreeSet::new();
        for line in self.emf_lines.lock().unwrap().iter() {
            for directive in line["_aws"]["CloudWatchMetrics"]
                .as_array()
                .into_iter()
                .flatten()
            {
                for dimensions in directive["Dimensions"].as_array().into_iter().flatten() {
                    let values: Vec<String> = dimensions
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(|d| format!("{d}={}", line[d].as_str().unwrap_or_default()))
                        .collect();
                    for metric in directive["Metrics"].as_array().into_iter().flatten() {
                        series.insert(format!("{} {}", metric["Name"], values.join(",")));
                    }
                }
            }
        }
        series
    }
}

struct Function {
    child: std::process::Child,
}

impl Function {
    fn spawn(env: &[(String, String)], n: usize, output: &std::sync::Arc<Output>) -> Self {
        let mut child = std::process::Command::new(BINARY)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the release binary starts");
        output.read(child.stdout.take().expect("stdout"));
        output.read(child.stderr.take().expect("stderr"));
        if let Some(parent) = std::env::var_os("BENCH_CPU_CGROUP") {
            let own = std::path::Path::new(&parent).join(format!("fan-out-{n}"));
            std::fs::create_dir_all(&own).expect("a child cgroup under BENCH_CPU_CGROUP");
            std::fs::write(own.join("cpu.cfs_period_us"), "100000").expect("cpu.cfs_period_us");
            std::fs::write(own.join("cpu.cfs_quota_us"), QUOTA_US.to_string())
                .expect("cpu.cfs_quota_us");
            std::fs::write(own.join("cgroup.procs"), child.id().to_string()).expect("cgroup.procs");
        }
        Self { child }
    }

    fn peak_rss_kb(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kind_of(r: &argocd_ecr_updater_standins::LoggedRequest) -> &'static str {
    match (r.service, r.method.as_str()) {
        (Service::Kube, "GET") if r.path.ends_with("/applications") => "list page",
        (Service::Kube, "GET") if r.path.contains("/applications/") => "Application GET",
        (Service::Kube, "PATCH") => "PATCH",
        (Service::Kube, _) => "other Kubernetes",
        (Service::Ecr, _) => "ECR",
        (Service::Eks, _) => "EKS",
        _ if r.operation == "SendMessage" => "SQS SendMessage",
        _ => "other",
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn summary(label: &str, unit: &str, values: Vec<f64>) -> String {
    summary_to(label, unit, values, 2)
}

fn summary_to(label: &str, unit: &str, mut values: Vec<f64>, digits: usize) -> String {
    let (low, high) = (
        values.iter().copied().fold(f64::INFINITY, f64::min),
        values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let mid = median(&mut values);
    format!("  {label}: {mid:.digits$}{unit} (range {low:.digits$}–{high:.digits$})")
}

async fn fleet(apps: usize, clusters: usize, runs: usize) {
    let setup = Instant::now();
    let standins = StandIns::start(Options::default())
        .await
        .expect("the stand-ins start");
    let per_cluster = apps / clusters;
    let repositories = (apps / 5).max(1);
    let mut extra: Vec<ExtraCluster> = Vec::new();
    for c in 1..clusters {
        let cluster = standins
            .add_cluster(
                &format!("cluster-{}", c + 1),
                "ap-northeast-2",
                Options::default().identities,
            )
            .await
            .expect("a cluster stand-in");
        extra.push(cluster);
    }
    // With 5 clusters each holds one Application of every repository; with one, five
    // Applications share each.
    let kubes: Vec<&argocd_ecr_updater_standins::kube::KubeState> =
        std::iter::once(&*standins.kube)
            .chain(extra.iter().map(|c| &*c.kube))
            .collect();
    let keep_managed_fields = with_managed_fields();
    for kube in &kubes {
        for i in 0..per_cluster {
            kube.insert(applied_manifest(i, repositories))
                .expect("an Application");
            kube.edit("argocd", &format!("app-{i:05}"), |app| {
                written_after_apply(app, i, repositories, keep_managed_fields);
            })
            .expect("an Application written");
        }
    }
    seed_repositories(&standins, repositories);
    let queue = standins.aws.create_queue("sweep");
    let dead_letters = standins.aws.create_queue("dead-letters");
    standins.aws.set_redrive(&queue, &dead_letters, 3);
    let names: Vec<Value> = std::iter::once(standins.options.cluster_name.clone())
        .chain(extra.iter().map(|c| c.name.clone()))
        .map(|name| json!({"name": name}))
        .collect();
    let mut env = standins.lambda_env();
    env.extend(
        [
            ("SWEEP_QUEUE_URL", queue.clone()),
            // The function takes SQS records from this queue only.
            (
                "SWEEP_QUEUE_ARN",
                format!(
                    "arn:aws:sqs:{}:{}:sweep",
                    standins.aws.region, standins.aws.account
                ),
            ),
            ("SWEEP_FAN_OUT_AT", FAN_OUT_AT.to_string()),
            ("SWEEP_SHARD_SIZE", SHARD_SIZE.to_string()),
            ("SWEEP_CONCURRENCY", CONCURRENCY.to_string()),
            // The template's default: what a deployment logs.
            ("LOG_LEVEL", "info".to_string()),
            // The sweep alone: no Argo CD controller runs here, so a write followed until it
            // is live would be checked again until its checks ran out, and the drain would
            // measure those checks instead of the sweep (end_to_end measures following
            // writes).
            ("CONFIRM_ROLLOUTS", "false".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    if clusters > 1 {
        env.push(("CLUSTERS".into(), Value::Array(names).to_string()));
    }
    let output = std::sync::Arc::new(Output::default());
    let functions: Vec<Function> = (0..CONCURRENCY)
        .map(|n| Function::spawn(&env, n, &output))
        .collect();
    // A process that stops at its cold start (a configuration it refuses) never polls: say
    // so instead of waiting for it.
    tokio::select! {
        () = standins.runtime.until_polls_waiting(CONCURRENCY) => {}
        () = tokio::time::sleep(Duration::from_secs(60)) => {
            let tail: Vec<String> = output.tail.lock().unwrap().iter().cloned().collect();
            panic!("the function processes did not all poll within a minute; the last they wrote:\n{}", tail.join("\n"));
        }
    }
    println!(
        "{apps} Applications in {clusters} cluster(s), {repositories} repositories (set up in {:.1} s), managedFields {}",
        setup.elapsed().as_secs_f64(),
        if keep_managed_fields {
            "kept"
        } else {
            "stripped"
        }
    );
    let sample = standins.kube.get("argocd", "app-00000").expect("app-00000");
    println!("  one listed item (app-00000): {}", item_split(&sample));
    let mut created_only = application(0, repositories);
    created_by_kubectl_apply(&mut created_only);
    println!(
        "  for comparison, the managedFields of the bench's Application created with its status and no other writer: {} B",
        json_len(&created_only["metadata"]["managedFields"])
    );
    let shareds: Vec<&argocd_ecr_updater_standins::Shared> = std::iter::once(&*standins.shared)
        .chain(extra.iter().map(|c| &*c.shared))
        .collect();
    let mut sweeps = Vec::new();
    for run in 1..=runs {
        push_newer(&standins, repositories, run);
        for s in &shareds {
            s.clear_log();
        }
        output.take_bytes();
        let started = Instant::now();
        let coordinator = standins.runtime.invoke(reconcile_event(), TIMEOUT).await;
        let coordinator_took = started.elapsed();
        match &coordinator {
            Ok(Outcome::Response(report)) if report["failure"].is_null() => {}
            other => panic!("the coordinator failed: {other:?}"),
        }
        let deliveries = mapping::drain(
            &standins.aws,
            &standins.runtime,
            &Mapping {
                queue_url: queue.clone(),
                batch_size: 1,
                maximum_concurrency: CONCURRENCY,
                visibility: TIMEOUT,
                function_timeout: TIMEOUT,
            },
            Duration::from_secs(1_800),
        )
        .await;
        let wall = started.elapsed();
        let mut requests = BTreeMap::new();
        let mut bytes = BTreeMap::new();
        for s in &shareds {
            for r in s.requests() {
                *requests.entry(kind_of(&r)).or_insert(0) += 1;
                *bytes.entry(kind_of(&r)).or_insert(0) += r.response_bytes;
            }
        }
        // Lines still in the pipes: wait until the counts stop moving.
        let mut logged = output.take_bytes();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let more = output.take_bytes();
            if more == 0 {
                break;
            }
            logged += more;
        }
        let failed_deliveries = deliveries.iter().filter(|d| !d.failed().is_empty()).count();
        let billed_ms = deliveries
            .iter()
            .map(|d| d.took)
            .chain([coordinator_took])
            .map(|d| d.as_millis() as u64 + 1)
            .sum();
        let sweep = Sweep {
            wall,
            coordinator: coordinator_took,
            longest_shard: deliveries.iter().map(|d| d.took).max().unwrap_or_default(),
            shards: deliveries.len() - failed_deliveries,
            failed_deliveries,
            billed_ms,
            updated: requests.get("PATCH").copied().unwrap_or(0),
            requests,
            bytes,
            logged,
        };
        println!(
            "  run {run}: {:.1} s whole sweep (coordinator {:.1} s, {} shards, longest {:.1} s, {} failed deliveries), {} updated",
            sweep.wall.as_secs_f64(),
            sweep.coordinator.as_secs_f64(),
            sweep.shards,
            sweep.longest_shard.as_secs_f64(),
            sweep.failed_deliveries,
            sweep.updated,
        );
        sweeps.push(sweep);
    }
    // One push of a repository five Applications track (one per cluster with 5 clusters),
    // for what a push logs: its decisions, its Events' lines, the invocation's summary and
    // metrics.
    let digest = numbered_digest(30_000_000);
    standins.aws.push(image_with_digest(
        "svc-1",
        Some("20250103-000000"),
        &digest,
        "2025-01-03T00:00:00Z",
    ));
    output.take_bytes();
    let mut event = push_event("svc-1", "20250103-000000", "2025-01-03T00:00:00Z");
    event["detail"]["image-digest"] = json!(digest);
    let pushed = standins.runtime.invoke(event, TIMEOUT).await;
    let push_updated = match &pushed {
        Ok(Outcome::Response(report)) => report["entries"]
            .as_array()
            .map_or(0, |e| e.iter().filter(|e| e["action"] == "updated").count()),
        other => panic!("the push failed: {other:?}"),
    };
    let mut push_logged = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let more = output.take_bytes();
        if more == 0 && push_logged > 0 {
            break;
        }
        push_logged += more;
    }
    let rss: Vec<u64> = functions.iter().map(Function::peak_rss_kb).collect();
    let last = sweeps.last().expect("a sweep");
    let per_app: Vec<String> = last
        .requests
        .iter()
        .map(|(kind, n)| format!("{kind} {:.3}", *n as f64 / apps as f64))
        .collect();
    let total: usize = last.requests.values().sum();
    println!(
        "{}",
        summary(
            "whole sweep",
            " s",
            sweeps.iter().map(|s| s.wall.as_secs_f64()).collect()
        )
    );
    println!(
        "{}",
        summary(
            "coordinator",
            " s",
            sweeps.iter().map(|s| s.coordinator.as_secs_f64()).collect()
        )
    );
    println!(
        "{}",
        summary(
            "longest shard",
            " s",
            sweeps
                .iter()
                .map(|s| s.longest_shard.as_secs_f64())
                .collect()
        )
    );
    println!(
        "  requests per Application (last sweep): {:.3} in all; {}",
        total as f64 / apps as f64,
        per_app.join(", ")
    );
    let kube_bytes = |s: &Sweep| {
        ["list page", "Application GET", "PATCH", "other Kubernetes"]
            .iter()
            .map(|k| s.bytes.get(k).copied().unwrap_or(0))
            .sum::<usize>() as f64
            / apps as f64
    };
    println!(
        "{}",
        summary_to(
            "Kubernetes response bytes per Application",
            " B",
            sweeps.iter().map(kube_bytes).collect(),
            0
        )
    );
    let listed: usize = kubes
        .iter()
        .flat_map(|kube| {
            (0..per_cluster).map(|i| {
                kube.get("argocd", &format!("app-{i:05}"))
                    .map_or(0, |app| listed_len(&app["metadata"]))
            })
        })
        .sum();
    println!(
        "  listed item bytes per Application, uncompressed (mean, after the last sweep): {:.0} B",
        listed as f64 / apps as f64
    );
    println!(
        "{}",
        summary_to(
            "list response bytes per Application on the wire (metadata-only pages, gzip over 128 KiB)",
            " B",
            sweeps
                .iter()
                .map(|s| s.bytes.get("list page").copied().unwrap_or(0) as f64 / apps as f64)
                .collect(),
            0
        )
    );
    let by_kind: Vec<String> = last
        .bytes
        .iter()
        .map(|(kind, n)| format!("{kind} {:.0}", *n as f64 / apps as f64))
        .collect();
    println!(
        "  response bytes per Application by kind (last sweep): {}",
        by_kind.join(", ")
    );
    println!(
        "{}",
        summary_to(
            "log bytes per Application (stdout and stderr, LOG_LEVEL=info)",
            " B",
            sweeps
                .iter()
                .map(|s| s.logged as f64 / apps as f64)
                .collect(),
            1
        )
    );
    println!("  log bytes of one push that updated {push_updated} Application(s): {push_logged} B");
    let series = output.series();
    println!(
        "  EMF metric series declared over the runs: {} ({} metric names)",
        series.len(),
        series
            .iter()
            .map(|s| s.split(' ').next().unwrap_or_default())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    println!(
        "  peak RSS per function process: {} to {} KiB",
        rss.iter().min().unwrap_or(&0),
        rss.iter().max().unwrap_or(&0)
    );
    let costs: Vec<f64> = sweeps.iter().map(Sweep::cost).collect();
    println!(
        "{}",
        summary_to("Lambda + SQS cost per sweep", " USD", costs.clone(), 6)
    );
    println!(
        "{}",
        summary(
            "a month of 15-minute sweeps",
            " USD",
            costs.iter().map(|c| c * SWEEPS_PER_MONTH).collect()
        )
    );
    println!(
        "  GB-seconds per sweep (last): {:.2}; invocations {}; SQS requests {}",
        last.billed_ms as f64 / 1000.0 * MEMORY_GB,
        1 + last.shards + last.failed_deliveries,
        last.sqs_requests()
    );
    drop(functions);
    standins.runtime.retire_pollers();
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    println!(
        "fan-out: SWEEP_CONCURRENCY {CONCURRENCY}, SWEEP_SHARD_SIZE {SHARD_SIZE}, SWEEP_FAN_OUT_AT {FAN_OUT_AT}, CPU {}",
        std::env::var("BENCH_CPU_CGROUP")
            .map(|c| format!("a 128 MB share per process ({c})"))
            .unwrap_or_else(|_| "unlimited".into())
    );
    for (apps, clusters) in fleets() {
        fleet(apps, clusters, runs).await;
    }
}
