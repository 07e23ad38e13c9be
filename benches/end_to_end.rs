//! Figures for the whole function, as Lambda runs it: the release binary under the Runtime
//! API stand-in, against the ECR/EKS/Kubernetes stand-ins over loopback with TLS.
//!
//! One push event, 2,000 Applications in the namespace, 3 of which track the pushed
//! repository, each with a ~50 KB `status`. Prints warm-invocation latency (p50, p99), HTTP
//! requests per event by kind, peak RSS of the function process, cold start, and the binary
//! size; then the same with the 3 Applications on `write-back-method: git` (a GitHub stand-in
//! repository each): the git path's latency and requests per update. Also prints the warm
//! event of median latency request by request, and the bytes each kind of request answered,
//! and what an event costs each side: the stand-ins' handling (summed, and as the time any was
//! busy) and the CPU time of the function process and of the stand-ins' process.
//! `cargo bench --bench end_to_end`. Prints figures; asserts nothing.

use std::time::{Duration, Instant};

use argocd_ecr_updater_standins::fixtures::{
    bench_application, image_updater, image_with_digest, large_status, numbered_digest, push_event,
};
use argocd_ecr_updater_standins::{
    ExtraCluster, FaultAction, Image, Options, Outcome, Service, StandIns,
};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater");
const APPLICATIONS: usize = 2_000;
const MATCHING: usize = 3;
const WARM_RUNS: usize = 200;
const COLD_RUNS: usize = 7;
const REGISTRY: &str = "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com";
const REPOSITORY: &str = "bench-svc";
const IMAGE_UPDATERS: usize = 50;

/// What a series of warm invocations measured.
struct Warm {
    latencies: Vec<Duration>,
    standin_time: Vec<Duration>,
    /// Per event, the time in which at least one stand-in was handling a request.
    standin_busy: Vec<Duration>,
    /// The function process's CPU time (all threads) over the series, per event.
    cpu_per_event: Duration,
    /// The bench process's: the stand-ins (and the bench's own bookkeeping), per event.
    standin_cpu_per_event: Duration,
    by_kind: std::collections::BTreeMap<&'static str, Vec<u64>>,
    /// Updated, list pages, GETs, PATCHes, ECR, EKS, ImageUpdater requests, Events: of one
    /// event.
    counted: (usize, usize, usize, usize, usize, usize, usize, usize),
    rss_kb: u64,
    /// Response bytes per event by kind, from the first event.
    bytes_by_kind: std::collections::BTreeMap<&'static str, usize>,
    /// The event of median latency, request by request: where a warm event's time goes.
    median_timeline: Vec<String>,
}

/// One warm process, `WARM_RUNS` pushes of new tags from push number `first`.
async fn measure_warm(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> Warm {
    let mut function = spawn_warmed(standins, env, first, deadline).await;
    let cpu_before = function.cpu_time();
    let standin_cpu_before = cpu_time("self");
    let mut latencies = Vec::new();
    let mut standin_time = Vec::new();
    let mut standin_busy = Vec::new();
    let mut by_kind: std::collections::BTreeMap<&'static str, Vec<u64>> =
        std::collections::BTreeMap::new();
    let mut counted = None;
    let mut bytes_by_kind = std::collections::BTreeMap::new();
    let mut timelines = Vec::new();
    for n in first + 1..first + 1 + WARM_RUNS {
        standins.shared.clear_log();
        let started = Instant::now();
        let outcome = function.invoke(standins, push(n), deadline).await;
        let latency = started.elapsed();
        latencies.push(latency);
        let log = standins.shared.requests();
        timelines.push((latency, timeline(started, latency, &log)));
        standin_time.push(Duration::from_micros(
            log.iter().map(|r| r.handling_us).sum(),
        ));
        standin_busy.push(argocd_ecr_updater_standins::busy_time(&log));
        let kind_of =
            |r: &argocd_ecr_updater_standins::LoggedRequest| match (r.service, r.method.as_str()) {
                (Service::Kube, _) if r.path.contains("/imageupdaters") => "imageupdaters",
                (Service::Kube, "POST") if r.path.ends_with("/events") => "event",
                (Service::Kube, "GET") if r.path.ends_with("/applications") => "list page",
                (Service::Kube, "GET") => "get",
                (Service::Kube, _) => "patch",
                (Service::GitHub, "GET") if r.path.contains("/git/ref/") => "github ref",
                (Service::GitHub, "GET") => "github contents",
                (Service::GitHub, _) => "github commit",
                (Service::SecretsManager, _) => "secrets manager",
                _ => "ecr",
            };
        for r in &log {
            by_kind.entry(kind_of(r)).or_default().push(r.handling_us);
        }
        let Outcome::Response(report) = outcome else {
            panic!("{outcome:?}")
        };
        if counted.is_none() {
            for r in &log {
                *bytes_by_kind.entry(kind_of(r)).or_insert(0) += r.response_bytes;
            }
            let updated = updated_in(&report);
            let count = |kind: &str| log.iter().filter(|r| kind_of(r) == kind).count();
            let ecr = log.iter().filter(|r| r.service == Service::Ecr).count();
            let eks = log.iter().filter(|r| r.service == Service::Eks).count();
            counted = Some((
                updated,
                count("list page"),
                count("get"),
                count("patch"),
                ecr,
                eks,
                count("imageupdaters"),
                count("event"),
            ));
        }
    }
    let cpu_per_event = function.cpu_time().saturating_sub(cpu_before) / WARM_RUNS as u32;
    let standin_cpu_per_event =
        cpu_time("self").saturating_sub(standin_cpu_before) / WARM_RUNS as u32;
    let rss_kb = function.stop();
    latencies.sort();
    standin_time.sort();
    standin_busy.sort();
    timelines.sort_by_key(|(latency, _)| *latency);
    let median_timeline = timelines.swap_remove(timelines.len() / 2).1;
    Warm {
        latencies,
        standin_time,
        standin_busy,
        cpu_per_event,
        standin_cpu_per_event,
        by_kind,
        counted: counted.unwrap(),
        rss_kb,
        bytes_by_kind,
        median_timeline,
    }
}

/// One invocation's requests as lines: when each arrived at its stand-in (from the
/// invocation's start), what it was, how long the stand-in took, and how much it answered.
fn timeline(
    started: Instant,
    total: Duration,
    log: &[argocd_ecr_updater_standins::LoggedRequest],
) -> Vec<String> {
    let mut lines: Vec<String> = log
        .iter()
        .filter_map(|r| {
            let at = r.arrived?.saturating_duration_since(started);
            Some(format!(
                "{:6.1} ms {:?} {} {} {} (stand-in {:.1} ms, {} B)",
                ms(at),
                r.service,
                r.method,
                r.path,
                r.operation,
                r.handling_us as f64 / 1e3,
                r.response_bytes
            ))
        })
        .collect();
    lines.push(format!("{:6.1} ms response", ms(total)));
    lines
}

const GIT_RUNS: usize = 50;

/// Switches the matching Applications to git write-back (a GitHub stand-in repository each,
/// a token in Secrets Manager) and measures `GIT_RUNS` warm pushes in one process.
async fn measure_git(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> Warm {
    let secret = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:bench-github-Ab12Cd";
    let token = "ghp_bench_token";
    standins
        .aws
        .put_secret(secret, &json!({"token": token}).to_string(), true);
    let mut repositories = Vec::new();
    for i in 0..APPLICATIONS {
        let name = format!("app-{i:05}");
        let Some(mut app) = standins.kube.get("argocd", &name) else {
            continue;
        };
        if !app["metadata"]["annotations"]["argocd-image-updater.argoproj.io/image-list"]
            .as_str()
            .unwrap_or_default()
            .ends_with(REPOSITORY)
        {
            continue;
        }
        let repo = format!("bench/{name}");
        standins
            .github
            .create_repository(&repo, "main", &[("chart/Chart.yaml", "name: svc\n")]);
        repositories.push(repo.clone());
        let annotations = &mut app["metadata"]["annotations"];
        annotations["argocd-image-updater.argoproj.io/write-back-method"] = json!("git");
        annotations["argocd-image-updater.argoproj.io/git-repository"] =
            json!(format!("https://github.com/{repo}.git"));
        annotations["argocd-image-updater.argoproj.io/git-branch"] = json!("main");
        argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut app);
        standins.kube.insert(app).unwrap();
    }
    let names: Vec<&str> = repositories.iter().map(String::as_str).collect();
    standins.github.grant_token(token, &names, true);
    let mut env = env.to_vec();
    env.extend([
        (
            "GIT_CREDENTIALS_SECRET_ARNS".to_string(),
            secret.to_string(),
        ),
        ("GITHUB_API_URL".to_string(), standins.github_api()),
        ("GIT_CA_BUNDLE".to_string(), standins.ca_pem.clone()),
    ]);
    let mut function = spawn_warmed(standins, &env, first, deadline).await;
    let mut latencies = Vec::new();
    let mut by_kind: std::collections::BTreeMap<&'static str, Vec<u64>> =
        std::collections::BTreeMap::new();
    for n in first + 1..first + 1 + GIT_RUNS {
        standins.shared.clear_log();
        let started = Instant::now();
        let outcome = function.invoke(standins, push(n), deadline).await;
        latencies.push(started.elapsed());
        assert!(matches!(outcome, Outcome::Response(_)), "{outcome:?}");
        for r in standins.shared.requests() {
            let kind = match (r.service, r.method.as_str()) {
                (Service::GitHub, "GET") if r.path.contains("/git/ref/") => "GitHub ref reads",
                (Service::GitHub, "GET") => "GitHub file reads",
                (Service::GitHub, _) => "GitHub commits",
                (Service::Kube, "PATCH") => "refresh patches",
                (Service::Kube, "GET") if r.path.ends_with("/applications") => "list pages",
                (Service::Kube, "GET") if r.path.contains("/imageupdaters") => "ImageUpdater lists",
                (Service::Kube, "GET") => "Application GETs",
                (Service::Kube, "POST") => "Events",
                (Service::Kube, _) => "other Kubernetes",
                (Service::SecretsManager, _) => "secret reads",
                _ => "ECR",
            };
            by_kind.entry(kind).or_default().push(r.handling_us);
        }
    }
    let rss_kb = function.stop();
    latencies.sort();
    let commits: usize = repositories
        .iter()
        .map(|r| standins.github.history(r, "main").len() - 1)
        .sum();
    println!(
        "git write-back: {commits} commits over {} repositories after {} events",
        repositories.len(),
        GIT_RUNS + 1
    );
    Warm {
        latencies,
        standin_time: Vec::new(),
        standin_busy: Vec::new(),
        cpu_per_event: Duration::ZERO,
        standin_cpu_per_event: Duration::ZERO,
        by_kind,
        counted: (0, 0, 0, 0, 0, 0, 0, 0),
        rss_kb,
        bytes_by_kind: Default::default(),
        median_timeline: Vec::new(),
    }
}

const CLUSTER_RUNS: usize = 50;
/// What a real network adds to each Kubernetes request (same-region round trip and TLS
/// record overhead); loopback has none, so without it the three clusters' stand-ins only
/// compete for the machine's two cores.
const ROUND_TRIP: Duration = Duration::from_millis(5);

/// Two more clusters, each its own API server with its own CA, token and 2,000
/// Applications, the seed cluster's RBAC.
async fn more_clusters(standins: &StandIns) -> Vec<ExtraCluster> {
    let mut extra = Vec::new();
    for name in ["bench-staging", "bench-prod"] {
        let cluster = standins
            .add_cluster(name, "ap-northeast-2", Options::default().identities)
            .await
            .unwrap();
        for i in 0..APPLICATIONS {
            let app = bench_application(i, APPLICATIONS, MATCHING, REGISTRY, REPOSITORY);
            cluster.kube.insert(app).unwrap();
        }
        extra.push(cluster);
    }
    extra
}

/// `CLUSTER_RUNS` pushes with `CLUSTERS` naming the seed cluster and `extra`, each Kubernetes
/// request delayed by `round_trip`: latencies, and the last event's requests per cluster.
async fn measure_clusters(
    standins: &StandIns,
    env: &[(String, String)],
    extra: &[ExtraCluster],
    round_trip: Option<Duration>,
    first: usize,
    deadline: Duration,
) -> ClusterRun {
    let mut env = env.to_vec();
    let mut names = vec![standins.options.cluster_name.clone()];
    names.extend(extra.iter().map(|c| c.name.clone()));
    env.push(("CLUSTERS".into(), names.join(",")));
    let shared: Vec<&argocd_ecr_updater_standins::Shared> = std::iter::once(&*standins.shared)
        .chain(extra.iter().map(|c| &*c.shared))
        .collect();
    let kube_route = argocd_ecr_updater_standins::Route {
        service: Some(Service::Kube),
        ..Default::default()
    };
    for s in &shared {
        s.clear_faults();
        if let Some(delay) = round_trip {
            s.inject(kube_route.clone(), u32::MAX, FaultAction::Delay(delay));
        }
    }
    let mut function = spawn_warmed(standins, &env, first, deadline).await;
    let mut latencies = Vec::new();
    let mut standin_time = Vec::new();
    for n in first + 1..first + 1 + CLUSTER_RUNS {
        for s in &shared {
            s.clear_log();
        }
        let started = Instant::now();
        let outcome = function.invoke(standins, push(n), deadline).await;
        latencies.push(started.elapsed());
        let Outcome::Response(report) = outcome else {
            panic!("{outcome:?}")
        };
        let updated = updated_in(&report);
        assert_eq!(updated, MATCHING * names.len(), "{report:#}");
        let handling: u64 = shared
            .iter()
            .flat_map(|s| s.requests())
            .map(|r| r.handling_us)
            .sum();
        standin_time.push(Duration::from_micros(handling));
    }
    let mut requests: Vec<(String, usize)> = names
        .iter()
        .zip(&shared)
        .map(|(name, s)| {
            let kube = s.requests();
            (
                name.clone(),
                kube.iter().filter(|r| r.service == Service::Kube).count(),
            )
        })
        .collect();
    requests.push((
        "ECR".into(),
        standins
            .shared
            .requests()
            .iter()
            .filter(|r| r.service == Service::Ecr)
            .count(),
    ));
    for s in &shared {
        s.clear_faults();
    }
    let rss_kb = function.stop();
    latencies.sort();
    standin_time.sort();
    ClusterRun {
        latencies,
        standin_time,
        requests,
        rss_kb,
    }
}

struct ClusterRun {
    latencies: Vec<Duration>,
    /// The stand-ins' own handling, summed over every cluster's requests of one event.
    standin_time: Vec<Duration>,
    requests: Vec<(String, usize)>,
    rss_kb: u64,
}

fn tag(n: usize) -> String {
    format!("20250102-{:06}", n)
}

fn push(n: usize) -> Value {
    let time = format!("2025-01-02T00:{:02}:{:02}Z", (n / 60) % 60, n % 60);
    push_event(REPOSITORY, &tag(n), &time)
}

fn image(tag: &str, digest: usize, pushed_at: &str) -> Image {
    image_with_digest(REPOSITORY, Some(tag), &numbered_digest(digest), pushed_at)
}

/// A function process that has already handled push number `first`: warm.
async fn spawn_warmed(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> Function {
    let mut function = Function::spawn(standins, env);
    function.invoke(standins, push(first), deadline).await;
    function
}

/// A function process. What it writes goes to a file, shown if it stops answering: its log
/// says why, which a bench run that ends in "no answer" would otherwise take with it.
struct Function {
    child: std::process::Child,
    log: std::path::PathBuf,
    runtime: std::sync::Arc<argocd_ecr_updater_standins::RuntimeApi>,
}

impl Function {
    fn spawn(standins: &StandIns, env: &[(String, String)]) -> Self {
        static SPAWNED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SPAWNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!(
            "argocd-ecr-updater-bench-{}-{n}.log",
            std::process::id()
        ));
        let file = std::fs::File::create(&log).expect("a log file for the function");
        let child = std::process::Command::new(BINARY)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(file.try_clone().expect("the log file, twice"))
            .stderr(file)
            .spawn()
            .expect("the release binary starts");
        Self {
            child,
            log,
            runtime: standins.runtime.clone(),
        }
    }

    /// Invokes it; a missing answer stops the bench with the process's state and last words.
    async fn invoke(&mut self, standins: &StandIns, event: Value, deadline: Duration) -> Outcome {
        match standins.runtime.invoke(event, deadline).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let state = match self.child.try_wait() {
                    Ok(Some(status)) => format!("exited: {status}"),
                    Ok(None) => "still running".to_string(),
                    Err(e) => format!("unknown: {e}"),
                };
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let last: Vec<&str> = log.lines().rev().take(30).collect();
                let last: Vec<&str> = last.into_iter().rev().collect();
                panic!(
                    "{e}; the function process is {state}; the end of its log ({}):\n{}",
                    self.log.display(),
                    last.join("\n")
                )
            }
        }
    }

    /// The CPU time its threads have run so far.
    fn cpu_time(&self) -> Duration {
        cpu_time(&self.child.id().to_string())
    }

    /// Stops it, returning its peak RSS in KiB.
    fn stop(mut self) -> u64 {
        let rss_kb = peak_rss_kb(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its last poll may still be open in the stand-in: the next process's event is not
        // for it.
        self.runtime.retire_pollers();
        let _ = std::fs::remove_file(&self.log);
        rss_kb
    }
}

/// The CPU time a process's threads have run so far: the first field of each thread's
/// `/proc/<pid>/task/<tid>/schedstat`, in nanoseconds (a process's `stat` counts in 10 ms
/// ticks, too coarse for a few milliseconds per event). `pid` may be `self`.
fn cpu_time(pid: &str) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    let nanos: u64 = tasks
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// How many entries of a report say `updated`.
fn updated_in(report: &Value) -> usize {
    report["entries"].as_array().map_or(0, |entries| {
        entries.iter().filter(|e| e["action"] == "updated").count()
    })
}

fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let standins = StandIns::start(Options::default()).await.unwrap();
    let setup = Instant::now();
    for i in 0..APPLICATIONS {
        standins
            .kube
            .insert(bench_application(
                i,
                APPLICATIONS,
                MATCHING,
                REGISTRY,
                REPOSITORY,
            ))
            .unwrap();
    }
    let status_bytes = serde_json::to_vec(&large_status(0, REGISTRY, REPOSITORY))
        .unwrap()
        .len();
    standins
        .aws
        .push(image("20250101-000000", 0, "2025-01-01T00:00:00Z"));
    for n in 1..=2 * WARM_RUNS + COLD_RUNS + GIT_RUNS + 4 * (CLUSTER_RUNS + 1) + 6 {
        standins.aws.push(image(
            &tag(n),
            n,
            &format!("2025-01-02T00:{:02}:{:02}Z", (n / 60) % 60, n % 60),
        ));
    }
    println!(
        "setup: {APPLICATIONS} Applications ({MATCHING} matching), status {:.1} KB each, in {:.1} s",
        status_bytes as f64 / 1024.0,
        setup.elapsed().as_secs_f64()
    );
    let mut env = standins.lambda_env();
    env.push(("LOG_LEVEL".into(), "warn".into()));
    let deadline = Duration::from_secs(30);

    // Cold start: process start to the first invocation's response, on fresh processes;
    // split at the first Runtime API poll into the init (process start, configuration, the
    // SDK and clients) and the first invocation (DescribeCluster, token, TLS handshakes,
    // connection pools filling, then the work itself).
    let mut cold = Vec::new();
    let (mut init, mut first_invocation) = (Vec::new(), Vec::new());
    for n in 1..=COLD_RUNS {
        standins.runtime.reset_first_poll();
        let started = Instant::now();
        let mut function = Function::spawn(&standins, &env);
        let outcome = function.invoke(&standins, push(n), deadline).await;
        let total = started.elapsed();
        cold.push(total);
        if let Some(polled) = standins.runtime.first_poll() {
            let until_poll = polled.saturating_duration_since(started);
            init.push(until_poll);
            first_invocation.push(total.saturating_sub(until_poll));
        }
        assert!(matches!(outcome, Outcome::Response(_)), "{outcome:?}");
        function.stop();
    }
    cold.sort();
    init.sort();
    first_invocation.sort();
    println!(
        "cold start split, median of {COLD_RUNS}: init (process start to first poll) {:.1} ms, first invocation {:.1} ms",
        ms(percentile(&init, 0.5)),
        ms(percentile(&first_invocation, 0.5))
    );
    // One more cold process, with the stand-ins' request log as its timeline: where the
    // first invocation's time goes.
    standins.shared.clear_log();
    standins.runtime.reset_first_poll();
    let started = Instant::now();
    let mut function = Function::spawn(&standins, &env);
    function
        .invoke(&standins, push(COLD_RUNS + 1), deadline)
        .await;
    let total = started.elapsed();
    function.stop();
    if let Some(polled) = standins.runtime.first_poll() {
        println!(
            "cold timeline: {:6.1} ms first Runtime API poll",
            ms(polled.saturating_duration_since(started))
        );
    }
    for line in timeline(started, total, &standins.shared.requests()) {
        println!("cold timeline: {line}");
    }
    if std::env::var_os("BENCH_COLD_ONLY").is_some() {
        return;
    }

    // Warm: one process, a new tag each time, so every invocation patches all three.
    let warm = measure_warm(&standins, &env, COLD_RUNS + 1, deadline).await;
    // The same with 50 ImageUpdater objects in the namespace (none matching the pushed
    // repository's Applications): what reading v1.x configuration costs an event.
    for i in 0..IMAGE_UPDATERS {
        standins
            .kube
            .insert_image_updater(image_updater(
                &format!("team-{i:02}"),
                json!([{"namePattern": format!("team-{i:02}-*"), "images": [
                    {"alias": "svc", "imageName": format!("{REGISTRY}/team-{i:02}")}]}]),
            ))
            .unwrap();
    }
    let with_objects = measure_warm(&standins, &env, COLD_RUNS + WARM_RUNS + 2, deadline).await;
    // Git write-back: the matching Applications commit to a repository each instead.
    // Three clusters from one function: the seed cluster (with its 50 objects) and two more
    // of 2,000 Applications each, all patching; against one cluster alone, on loopback and
    // with a network round trip added to every Kubernetes request.
    let extra = more_clusters(&standins).await;
    let mut next = COLD_RUNS + 2 * WARM_RUNS + 3;
    let mut cluster_figures = Vec::new();
    for round_trip in [None, Some(ROUND_TRIP)] {
        for clusters in [&extra[..0], &extra[..]] {
            let measured =
                measure_clusters(&standins, &env, clusters, round_trip, next, deadline).await;
            next += CLUSTER_RUNS + 1;
            cluster_figures.push((clusters.len() + 1, round_trip, measured));
        }
    }
    drop(extra);
    let git = measure_git(&standins, &env, next, deadline).await;
    let size = std::fs::metadata(BINARY).map(|m| m.len()).unwrap_or(0);
    let Warm {
        latencies: warm,
        standin_time,
        standin_busy,
        cpu_per_event,
        standin_cpu_per_event,
        mut by_kind,
        counted,
        rss_kb,
        bytes_by_kind,
        median_timeline,
    } = warm;
    for line in &median_timeline {
        println!("warm timeline (the event of median latency): {line}");
    }
    let bytes: Vec<String> = bytes_by_kind
        .iter()
        .map(|(kind, bytes)| format!("{kind} {:.1} KB", *bytes as f64 / 1024.0))
        .collect();
    println!("bytes answered per event: {}", bytes.join(", "));
    let (updated, lists, gets, patches, ecr, eks, objects, events) = counted;
    println!(
        "with {IMAGE_UPDATERS} ImageUpdater objects: warm p50 {:.1} ms, p99 {:.1} ms; per event {} ImageUpdater requests (metadata-only revalidation), {} list pages, {} GETs, {} PATCHes",
        ms(percentile(&with_objects.latencies, 0.50)),
        ms(percentile(&with_objects.latencies, 0.99)),
        with_objects.counted.6,
        with_objects.counted.1,
        with_objects.counted.2,
        with_objects.counted.3,
    );
    println!(
        "without: {objects} ImageUpdater requests per event (a metadata-only list that finds none)"
    );

    for (kind, times) in &mut by_kind {
        times.sort();
        println!(
            "stand-in handling per {kind}: p50 {:.2} ms",
            times[times.len() / 2] as f64 / 1e3
        );
    }
    {
        let kinds: Vec<String> = git
            .by_kind
            .iter()
            .map(|(kind, times)| format!("{} {kind}", times.len() / GIT_RUNS))
            .collect();
        println!(
            "git write-back ({MATCHING} Applications, a commit each): warm p50 {:.1} ms, p99 {:.1} ms over {GIT_RUNS} events; per event: {}",
            ms(percentile(&git.latencies, 0.50)),
            ms(percentile(&git.latencies, 0.99)),
            kinds.join(", ")
        );
    }
    for (count, round_trip, run) in &cluster_figures {
        let ClusterRun {
            latencies,
            standin_time,
            requests,
            rss_kb,
        } = run;
        let per_cluster: Vec<String> = requests
            .iter()
            .map(|(name, count)| format!("{name} {count}"))
            .collect();
        println!(
            "{count} cluster(s), {}: warm p50 {:.1} ms, p99 {:.1} ms over {CLUSTER_RUNS} events; stand-ins' handling summed over clusters p50 {:.1} ms; requests per event: {}; peak RSS {:.1} MB",
            round_trip.map_or("loopback".to_string(), |d| format!(
                "{} ms added per Kubernetes request",
                d.as_millis()
            )),
            ms(percentile(latencies, 0.50)),
            ms(percentile(latencies, 0.99)),
            ms(percentile(standin_time, 0.50)),
            per_cluster.join(", "),
            *rss_kb as f64 / 1024.0
        );
    }
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!(
        "| warm invocation latency, p50 | {:.1} ms | under 15 ms |",
        ms(percentile(&warm, 0.50))
    );
    println!(
        "| warm invocation latency, p99 | {:.1} ms | under 30 ms |",
        ms(percentile(&warm, 0.99))
    );
    println!(
        "| of which the stand-ins' own handling (sum over requests, some concurrent), p50 | {:.1} ms | |",
        ms(percentile(&standin_time, 0.50))
    );
    println!(
        "| of which at least one stand-in was handling a request (union of handling intervals), p50 | {:.1} ms | |",
        ms(percentile(&standin_busy, 0.50))
    );
    // The function's own share lies between two subtractions: the summed handling counts
    // overlapping requests twice (a lower bound), while the time no stand-in was handling
    // anything also holds TLS and loopback transfer on both sides (an upper bound).
    println!(
        "| of which the function's own side, between (p50 total minus p50 summed handling) and (p50 total minus p50 union) | {:.1} to {:.1} ms | |",
        ms(percentile(&warm, 0.50).saturating_sub(percentile(&standin_time, 0.50))),
        ms(percentile(&warm, 0.50).saturating_sub(percentile(&standin_busy, 0.50)))
    );
    println!(
        "| the function process's CPU time per event, all threads (from /proc/<pid>/task/*/schedstat) | {:.1} ms | |",
        ms(cpu_per_event)
    );
    println!(
        "| the stand-ins' CPU time per event, all threads of the bench process (the same way) | {:.1} ms | |",
        ms(standin_cpu_per_event)
    );
    println!(
        "| HTTP requests per event | {lists} list pages, {gets} GETs, {patches} PATCHes, {events} Events, {objects} ImageUpdater list, {ecr} ECR, {eks} EKS ({updated} Applications updated) | {} list pages + {MATCHING} GET + {MATCHING} PATCH + {MATCHING} Events + 1 ImageUpdater list + at most 1 ECR |",
        APPLICATIONS.div_ceil(500)
    );
    println!(
        "| peak RSS of the function process | {:.1} MB | under 20 MiB |",
        rss_kb as f64 / 1024.0
    );
    println!(
        "| cold start (process start to first response), median of {COLD_RUNS} | {:.1} ms (min {:.1}, max {:.1}) | under 60 ms |",
        ms(percentile(&cold, 0.5)),
        ms(cold[0]),
        ms(cold[cold.len() - 1])
    );
    println!(
        "| binary size as built for this bench (stripped; dev-dependency features unified in, so above `cargo build --release -p argocd-ecr-updater`, which is the figure the target is for) | {:.2} MiB | under 8 MiB |",
        size as f64 / 1_048_576.0
    );
}
