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

use std::collections::BTreeMap;

use argocd_ecr_updater_standins::fixtures::{
    bench_application, image_updater, image_with_digest, large_status, numbered_digest, push_event,
    reconcile_event,
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

/// What a series of warm invocations of one path measured.
struct Series {
    latencies: Vec<Duration>,
    standin_time: Vec<Duration>,
    /// Per event, the time in which at least one stand-in was handling a request.
    standin_busy: Vec<Duration>,
    /// The function process's CPU time (all threads) over the series, per event.
    cpu_per_event: Duration,
    /// The bench process's: the stand-ins (and the bench's own bookkeeping), per event.
    standin_cpu_per_event: Duration,
    /// The stand-ins' handling of each request, by kind, over the series.
    handling_by_kind: BTreeMap<&'static str, Vec<u64>>,
    /// Requests of the first measured event, by kind.
    requests: BTreeMap<&'static str, usize>,
    /// Response bytes of the first measured event, by kind.
    bytes_by_kind: BTreeMap<&'static str, usize>,
    /// Applications the first measured event updated.
    updated: usize,
    rss_kb: u64,
    /// The event of median latency, request by request: where a warm event's time goes.
    median_timeline: Vec<String>,
    /// The event at p99, the same way: what the tail's events do that the median's do not.
    p99_timeline: Vec<String>,
    /// CPU time per event of everything else on the machine, and stolen by the hypervisor
    /// (from `/proc/stat`, over the series).
    others_per_event: Duration,
    stolen_per_event: Duration,
    /// TLS handshakes the stand-ins completed per event: a warm process that
    /// reuses its connections makes none, so an event that makes one pays for it.
    handshakes: Vec<u64>,
}

impl Series {
    fn requests(&self, kind: &str) -> usize {
        self.requests.get(kind).copied().unwrap_or(0)
    }
}

/// What a logged request was, for the per-kind figures of every path.
fn kind_of(r: &argocd_ecr_updater_standins::LoggedRequest) -> &'static str {
    match (r.service, r.method.as_str()) {
        (Service::Kube, _) if r.path.contains("/imageupdaters") => "ImageUpdater",
        (Service::Kube, "POST") if r.path.ends_with("/events") => "Event",
        (Service::Kube, "GET") if r.path.ends_with("/applications") => "list page",
        (Service::Kube, "GET") => "GET",
        (Service::Kube, "PATCH") => "PATCH",
        (Service::Kube, _) => "other Kubernetes",
        (Service::GitHub, "GET") if r.path.contains("/git/ref/") => "GitHub ref",
        (Service::GitHub, "GET") => "GitHub contents",
        (Service::GitHub, _) => "GitHub commit",
        (Service::SecretsManager, _) => "Secrets Manager",
        (Service::Ecr, _) => "ECR",
        (Service::Eks, _) => "EKS",
        (Service::Sqs, _) => "SQS",
        _ => "other",
    }
}

/// One warm process, `runs` events from number `first` (`event(n)`, after `before(n)`
/// has set the stage for it).
async fn measure_series(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    runs: usize,
    deadline: Duration,
    event: impl Fn(usize) -> Value,
    before: impl Fn(usize),
) -> Series {
    let mut function = spawn_warmed(standins, env, first, deadline).await;
    let cpu_before = function.cpu_time();
    let standin_cpu_before = cpu_time("self");
    let machine_before = machine_time();
    let mut latencies = Vec::new();
    let mut standin_time = Vec::new();
    let mut standin_busy = Vec::new();
    let mut handling_by_kind: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    let mut first_event = None;
    let mut timelines = Vec::new();
    for n in first + 1..first + 1 + runs {
        before(n);
        standins.shared.clear_log();
        let handshakes_before = standins.shared.tls_handshakes();
        let usage_before = Usage::now(&function);
        let started = Instant::now();
        let outcome = function.invoke(standins, event(n), deadline).await;
        let latency = started.elapsed();
        let usage = Usage::now(&function).since(&usage_before);
        latencies.push(latency);
        let log = standins.shared.requests();
        let handshakes = standins.shared.tls_handshakes() - handshakes_before;
        let mut lines = timeline(started, latency, &log);
        lines.push(format!("{handshakes} TLS handshakes during the event"));
        lines.extend(usage.lines());
        timelines.push((latency, handshakes, lines));
        standin_time.push(Duration::from_micros(
            log.iter().map(|r| r.handling_us).sum(),
        ));
        standin_busy.push(argocd_ecr_updater_standins::busy_time(&log));
        for r in &log {
            handling_by_kind
                .entry(kind_of(r))
                .or_default()
                .push(r.handling_us);
        }
        let Outcome::Response(report) = outcome else {
            panic!("{outcome:?}")
        };
        if first_event.is_none() {
            let mut requests = BTreeMap::new();
            let mut bytes = BTreeMap::new();
            for r in &log {
                *requests.entry(kind_of(r)).or_insert(0) += 1;
                *bytes.entry(kind_of(r)).or_insert(0) += r.response_bytes;
            }
            first_event = Some((requests, bytes, updated_in(&report)));
        }
    }
    let cpu_per_event = function.cpu_time().saturating_sub(cpu_before) / runs as u32;
    let standin_cpu_per_event = cpu_time("self").saturating_sub(standin_cpu_before) / runs as u32;
    let machine_after = machine_time();
    // What the rest of the machine (other processes, the kernel's own threads) ran, and what
    // the hypervisor took, beside the two processes measured.
    let others_per_event = machine_after
        .0
        .saturating_sub(machine_before.0)
        .saturating_sub((cpu_per_event + standin_cpu_per_event) * runs as u32)
        / runs as u32;
    let stolen_per_event = machine_after.1.saturating_sub(machine_before.1) / runs as u32;
    let rss_kb = function.stop();
    latencies.sort();
    standin_time.sort();
    standin_busy.sort();
    timelines.sort_by_key(|(latency, _, _)| *latency);
    let handshakes: Vec<u64> = timelines.iter().map(|(_, count, _)| *count).collect();
    let p99_timeline = timelines[percentile_index(timelines.len(), 0.99)].2.clone();
    let median_timeline = timelines.swap_remove(timelines.len() / 2).2;
    let (requests, bytes_by_kind, updated) = first_event.unwrap();
    Series {
        latencies,
        standin_time,
        standin_busy,
        cpu_per_event,
        standin_cpu_per_event,
        handling_by_kind,
        requests,
        bytes_by_kind,
        updated,
        rss_kb,
        median_timeline,
        p99_timeline,
        handshakes,
        others_per_event,
        stolen_per_event,
    }
}

/// `WARM_RUNS` pushes of new tags: every invocation moves all the matching Applications.
async fn measure_push(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> Series {
    measure_series(standins, env, first, WARM_RUNS, deadline, push, |_| {}).await
}

/// One line per path, the same for every path: what an event of it costs each side.
fn print_budget(path: &str, series: &Series) {
    let list = |map: &BTreeMap<&'static str, usize>, unit: &dyn Fn(usize) -> String| {
        map.iter()
            .map(|(kind, n)| format!("{} {kind}", unit(*n)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lower =
        percentile(&series.latencies, 0.50).saturating_sub(percentile(&series.standin_time, 0.50));
    let upper =
        percentile(&series.latencies, 0.50).saturating_sub(percentile(&series.standin_busy, 0.50));
    println!(
        "budget, {path}: p50 {:.1} ms, p99 {:.1} ms over {} events, {} Applications updated per event; \
         requests per event: {}; bytes answered: {}; stand-ins' handling p50 {:.1} ms summed, {:.1} ms busy; \
         function's own side {:.1} to {:.1} ms; CPU per event: function {:.1} ms, stand-ins {:.1} ms, \
         the rest of the machine {:.1} ms, stolen {:.1} ms; peak RSS {:.1} MB; \
         TLS handshakes: {} in the series, {} events with any",
        ms(percentile(&series.latencies, 0.50)),
        ms(percentile(&series.latencies, 0.99)),
        series.latencies.len(),
        series.updated,
        list(&series.requests, &|n| n.to_string()),
        list(&series.bytes_by_kind, &|b| format!(
            "{:.1} KB",
            b as f64 / 1024.0
        )),
        ms(percentile(&series.standin_time, 0.50)),
        ms(percentile(&series.standin_busy, 0.50)),
        ms(lower),
        ms(upper),
        ms(series.cpu_per_event),
        ms(series.standin_cpu_per_event),
        ms(series.others_per_event),
        ms(series.stolen_per_event),
        series.rss_kb as f64 / 1024.0,
        series.handshakes.iter().sum::<u64>(),
        series.handshakes.iter().filter(|n| **n > 0).count(),
    );
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
) -> Series {
    let secret = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:bench-github-Ab12Cd";
    let token = "ghp_bench_token";
    standins
        .aws
        .put_secret(secret, &json!({"token": token}).to_string(), true);
    let mut repositories = Vec::new();
    let mut originals = Vec::new();
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
        let mut original = app.clone();
        argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut original);
        originals.push(original);
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
    let series = measure_series(standins, &env, first, GIT_RUNS, deadline, push, |_| {}).await;
    let commits: usize = repositories
        .iter()
        .map(|r| standins.github.history(r, "main").len() - 1)
        .sum();
    println!(
        "git write-back: {commits} commits over {} repositories after {} events",
        repositories.len(),
        GIT_RUNS + 1
    );
    for app in originals {
        standins.kube.insert(app).unwrap();
    }
    series
}

const CHART_RUNS: usize = 50;
const CHART_REPOSITORY: &str = "charts/web";

/// A chart pushed to ECR: three Applications (among the 2,000) deploy `charts/web` and name it
/// in their `chart-list`; each event pushes a new version, which moves all three
/// `targetRevision`s by patch. Afterwards their `chart-list` is removed, so the paths after
/// this one are measured as before.
async fn measure_charts(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> Series {
    let chart = |version: &str, digest: usize| {
        let mut image = image_with_digest(
            CHART_REPOSITORY,
            Some(version),
            &numbered_digest(digest),
            "2025-01-01T00:00:00Z",
        );
        image.artifact_media_type = Some("application/vnd.cncf.helm.config.v1+json".into());
        image
    };
    standins.aws.push(chart("1.0.0", 900_000));
    let names: Vec<String> = (0..MATCHING).map(|k| format!("chart-app-{k}")).collect();
    for name in &names {
        let app = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd", "annotations": {
                "argocd-ecr-updater.io/chart-list": format!("web={REGISTRY}/{CHART_REPOSITORY}")}},
            "spec": {"project": "default",
                "source": {"repoURL": format!("{REGISTRY}/charts"), "chart": "web", "targetRevision": "1.0.0"},
                "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"}}});
        standins.kube.insert(app).unwrap();
    }
    let event = |n: usize| {
        let time = format!("2025-01-03T00:{:02}:{:02}Z", (n / 60) % 60, n % 60);
        push_event(CHART_REPOSITORY, &format!("1.0.{n}"), &time)
    };
    let before = |n: usize| standins.aws.push(chart(&format!("1.0.{n}"), 900_000 + n));
    let series = measure_series(standins, env, first, CHART_RUNS, deadline, event, before).await;
    for name in &names {
        standins
            .kube
            .edit("argocd", name, |app| {
                if let Some(map) = app["metadata"]["annotations"].as_object_mut() {
                    map.remove("argocd-ecr-updater.io/chart-list");
                }
            })
            .unwrap();
    }
    series
}

const SIGNING_RUNS: usize = 50;

/// The managed-signing gate on the three Applications the pushes move: first as ECR's
/// signing status alone, then with `NOTATION_TRUST_ROOTS`, each Notation signature listed,
/// downloaded and verified. Every pushed digest is signed (status `COMPLETE` and an envelope
/// of an AWS-Signer-shaped P-384 chain); the gate is removed afterwards.
async fn measure_signing(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> (Series, Series) {
    use argocd_ecr_updater_standins::notary::{Envelope, Signer};
    use base64::Engine;
    const PROFILE: &str =
        "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod";
    const VERSION: &str =
        "arn:aws:signer:ap-northeast-2:768157413559:/signing-profiles/release_prod/2oCN6RHYVI";
    let signer = Signer::new(|_| {}).unwrap();
    for n in first..=first + 2 * (SIGNING_RUNS + 1) {
        let digest = numbered_digest(n);
        standins
            .aws
            .set_signing(REPOSITORY, &digest, &[(PROFILE, "COMPLETE")]);
        let envelope = signer.envelope(&Envelope::of(&digest, VERSION));
        standins
            .aws
            .attach_notation_signature(REPOSITORY, &digest, envelope);
    }
    let gated = gated_applications(standins);
    for name in &gated {
        standins
            .kube
            .edit("argocd", name, |app| {
                app["metadata"]["annotations"]["argocd-ecr-updater.io/signing-profile"] =
                    json!("release_prod");
            })
            .unwrap();
    }
    let status_only =
        measure_series(standins, env, first, SIGNING_RUNS, deadline, push, |_| {}).await;
    let mut env = env.to_vec();
    env.push((
        "NOTATION_TRUST_ROOTS".to_string(),
        base64::engine::general_purpose::STANDARD.encode(&signer.root_pem),
    ));
    let next = first + SIGNING_RUNS + 1;
    let verified = measure_series(standins, &env, next, SIGNING_RUNS, deadline, push, |_| {}).await;
    for name in &gated {
        standins
            .kube
            .edit("argocd", name, |app| {
                if let Some(map) = app["metadata"]["annotations"].as_object_mut() {
                    map.remove("argocd-ecr-updater.io/signing-profile");
                }
            })
            .unwrap();
    }
    (status_only, verified)
}

/// The Applications whose `image-list` names the bench's pushed repository.
fn gated_applications(standins: &StandIns) -> Vec<String> {
    (0..APPLICATIONS)
        .map(|i| format!("app-{i:05}"))
        .filter(|name| {
            standins.kube.get("argocd", name).is_some_and(|app| {
                app["metadata"]["annotations"]["argocd-image-updater.argoproj.io/image-list"]
                    .as_str()
                    .unwrap_or_default()
                    .ends_with(REPOSITORY)
            })
        })
        .collect()
}

const RECONCILE_RUNS: usize = 5;
/// Tags in each repository of an Application that does not track the bench's.
const RECONCILE_TAGS: usize = 5;

/// Gives every other Application's repository (`svc-<i>`) its images in ECR, the newest
/// being the tag the Application runs: a scheduled reconcile then reads 2,000 tag lists and
/// keeps 1,997 Applications where they are.
fn seed_reconcile_repositories(standins: &StandIns) {
    for i in 0..APPLICATIONS {
        let repository = format!("svc-{i}");
        for k in 0..RECONCILE_TAGS {
            let (tag, pushed_at) = if k + 1 == RECONCILE_TAGS {
                (
                    "20250101-000000".to_string(),
                    "2025-01-01T00:00:00Z".to_string(),
                )
            } else {
                (
                    format!("20241231-{k:06}"),
                    format!("2024-12-31T00:00:{k:02}Z"),
                )
            };
            standins.aws.push(image_with_digest(
                &repository,
                Some(&tag),
                &numbered_digest(1_000_000 + i * RECONCILE_TAGS + k),
                &pushed_at,
            ));
        }
    }
}

/// `RECONCILE_RUNS` scheduled reconciles, a newer image of the bench's repository pushed
/// before each (so every one moves the 3 Applications that track it), each Kubernetes and
/// ECR request delayed by `round_trip`.
async fn measure_reconcile(
    standins: &StandIns,
    env: &[(String, String)],
    round_trip: Option<Duration>,
    first: usize,
    deadline: Duration,
) -> Series {
    for service in [Service::Kube, Service::Ecr] {
        let route = argocd_ecr_updater_standins::Route {
            service: Some(service),
            ..Default::default()
        };
        if let Some(delay) = round_trip {
            standins
                .shared
                .inject(route, u32::MAX, FaultAction::Delay(delay));
        }
    }
    let series = measure_series(
        standins,
        env,
        first,
        RECONCILE_RUNS,
        deadline,
        |_| reconcile_event(),
        |n| {
            standins.aws.push(image_with_digest(
                REPOSITORY,
                Some(&format!("20250103-{n:06}")),
                &numbered_digest(2_000_000 + n),
                &format!("2025-01-03T{:02}:{:02}:00Z", (n / 60) % 24, n % 60),
            ))
        },
    )
    .await;
    standins.shared.clear_faults();
    series
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
    let mut timelines = Vec::new();
    for n in first + 1..first + 1 + CLUSTER_RUNS {
        for s in &shared {
            s.clear_log();
        }
        let started = Instant::now();
        let outcome = function.invoke(standins, push(n), deadline).await;
        let latency = started.elapsed();
        latencies.push(latency);
        timelines.push((
            latency,
            timeline(started, latency, &standins.shared.requests()),
        ));
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
    timelines.sort_by_key(|(latency, _)| *latency);
    let median_timeline = timelines.swap_remove(timelines.len() / 2).1;
    ClusterRun {
        latencies,
        standin_time,
        requests,
        rss_kb,
        median_timeline,
    }
}

struct ClusterRun {
    /// The first cluster's requests in the event of median latency.
    median_timeline: Vec<String>,
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

const ROLLOUT_RUNS: usize = 20;

/// What following writes costs: per push (three Applications written), the check invocation
/// that finds them live (one SQS batch of their three checks), and one that finds them not
/// yet synced; each on a warm process, its requests counted per write.
struct RolloutRun {
    /// The push invocations, each writing three Applications and sending their checks.
    pushes: Vec<Duration>,
    confirming: Vec<Duration>,
    pending: Vec<Duration>,
    confirming_requests: BTreeMap<&'static str, usize>,
    pending_requests: BTreeMap<&'static str, usize>,
    writes_per_push: usize,
    confirmed: usize,
}

async fn measure_rollout(
    standins: &StandIns,
    env: &[(String, String)],
    first: usize,
    deadline: Duration,
) -> RolloutRun {
    use argocd_ecr_updater_standins::argocd::{Controller, Script};
    let queue = standins.aws.create_queue("sweep");
    let arn = "arn:aws:sqs:ap-northeast-2:768157413559:sweep";
    let mut env = env.to_vec();
    env.extend([
        ("SWEEP_QUEUE_URL".to_string(), queue.clone()),
        ("SWEEP_QUEUE_ARN".to_string(), arn.to_string()),
    ]);
    // The Applications that track the pushed repository sync on their own, as most do.
    for i in (0..APPLICATIONS).filter(|i| i % (APPLICATIONS / MATCHING) == 7) {
        standins
            .kube
            .edit("argocd", &format!("app-{i:05}"), |app| {
                app["spec"]["syncPolicy"]["automated"] = json!({"prune": true});
            })
            .unwrap();
    }
    let synced = Controller::new(Script::Healthy, Duration::from_millis(100));
    let never = Controller::new(Script::NeverSynced, Duration::from_millis(100));
    standins.kube.run_controller(synced.clone());
    let mut function = spawn_warmed(standins, &env, first, deadline).await;
    let mut seen: std::collections::BTreeSet<String> = standins
        .aws
        .queue(&queue)
        .into_iter()
        .map(|m| m.id)
        .collect();
    let mut new_checks = |standins: &StandIns| {
        let fresh: Vec<Value> = standins
            .aws
            .queue(&queue)
            .into_iter()
            .filter(|m| m.body.contains("confirm-rollout") && seen.insert(m.id.clone()))
            .map(|m| json!({"messageId": m.id, "eventSource": "aws:sqs", "eventSourceARN": arn, "body": m.body}))
            .collect();
        fresh
    };
    let mut run = RolloutRun {
        pushes: Vec::new(),
        confirming: Vec::new(),
        pending: Vec::new(),
        confirming_requests: BTreeMap::new(),
        pending_requests: BTreeMap::new(),
        writes_per_push: 0,
        confirmed: 0,
    };
    for n in first + 1..first + 1 + 2 * ROLLOUT_RUNS {
        let confirming = n % 2 == 0;
        standins.kube.run_controller(if confirming {
            synced.clone()
        } else {
            never.clone()
        });
        let pushed = Instant::now();
        let Outcome::Response(report) = function.invoke(standins, push(n), deadline).await else {
            panic!("push {n} failed")
        };
        run.pushes.push(pushed.elapsed());
        run.writes_per_push = updated_in(&report);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let records = new_checks(standins);
        assert_eq!(records.len(), run.writes_per_push, "one check per write");
        standins.shared.clear_log();
        let started = Instant::now();
        let outcome = function
            .invoke(standins, json!({"Records": records}), deadline)
            .await;
        let latency = started.elapsed();
        let Outcome::Response(_) = outcome else {
            panic!("{outcome:?}")
        };
        let requests = if confirming {
            run.confirming.push(latency);
            &mut run.confirming_requests
        } else {
            run.pending.push(latency);
            &mut run.pending_requests
        };
        if requests.is_empty() {
            for r in standins.shared.requests() {
                *requests.entry(kind_of(&r)).or_insert(0) += 1;
            }
        }
        if confirming {
            run.confirmed += standins
                .kube
                .events()
                .iter()
                .filter(|e| e["reason"] == "RolloutConfirmed")
                .count()
                .saturating_sub(run.confirmed);
        }
        // The next push's checks only: what this one left pending is not delivered again.
        new_checks(standins);
    }
    function.stop();
    run.pushes.sort();
    run.confirming.sort();
    run.pending.sort();
    run
}

/// The checks a write takes at the default backoff when it is live `after` its write, and
/// what 1,000 writes a day cost a month with them, at `check_ms` per check invocation.
fn print_rollout(run: &RolloutRun) {
    let per_write = |map: &BTreeMap<&'static str, usize>| {
        map.iter()
            .map(|(kind, n)| format!("{:.1} {kind}", *n as f64 / run.writes_per_push as f64))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let spread = |v: &[Duration]| {
        format!(
            "p50 {:.1} ms ({:.1} to {:.1})",
            ms(percentile(v, 0.5)),
            ms(v[0]),
            ms(v[v.len() - 1])
        )
    };
    println!(
        "rollout, the push that writes and sends the checks: {} over {} pushes",
        spread(&run.pushes),
        run.pushes.len()
    );
    println!(
        concat!(
            "rollout checks, {} pushes of {} writes each, one SQS batch of their checks per invocation: ",
            "confirming {}, requests per write: {}; pending {}, requests per write: {}; {} writes confirmed"
        ),
        ROLLOUT_RUNS,
        run.writes_per_push,
        spread(&run.confirming),
        per_write(&run.confirming_requests),
        spread(&run.pending),
        per_write(&run.pending_requests),
        run.confirmed,
    );
    // When each check comes, after the write, at the default backoff.
    let mut at = 0;
    let schedule: Vec<u32> = (1..=40)
        .map(|check| {
            at += argocd_ecr_updater::rollout::message::wait_before(check);
            at
        })
        .collect();
    let checks_by = |seconds: u32| schedule.iter().take_while(|t| **t < seconds).count() + 1;
    let check_ms = ms(percentile(&run.confirming, 0.5)) / run.writes_per_push as f64;
    for (what, live_after) in [
        ("live 10 s after the write (the argocd method)", 10),
        ("live 60 s after (a commit, Argo CD refreshed)", 60),
        ("live 4 min after (Argo CD's Git poll)", 240),
        ("timed out at 15 min", 900),
    ] {
        let checks = checks_by(live_after).min(checks_by(900));
        // Per check: one invocation (128 MB, arm64), SQS send + receive + delete.
        let writes_a_month = 1_000.0 * 30.0;
        let invocations = writes_a_month * checks as f64;
        let lambda = invocations * 0.20 / 1e6
            + invocations * (check_ms.max(1.0) / 1000.0) * 0.125 * 0.000_013_333_4;
        let sqs = invocations * 3.0 * 0.40 / 1e6;
        println!(
            "rollout cost, {what}: {checks} check(s) a write; at 1,000 writes a day: {:.0} invocations a month, ${:.4} Lambda + ${:.4} SQS a month (check {:.1} ms each, billed at least 1 ms)",
            invocations, lambda, sqs, check_ms
        );
    }
    println!(
        "rollout cost, metrics: Rollouts by 3 outcomes + LeadTimeSeconds + WriteToLiveSeconds = 5 custom metrics, $1.50 a month whatever the volume (each ROLLOUT_METRIC_APPLICATIONS entry adds up to 5 more)"
    );
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
        // `BENCH_CPU_CGROUP`: a cgroup the function processes run in, to measure them with a
        // Lambda-sized share of a CPU (see docs/development.md); its threads follow it there.
        if let Some(cgroup) = std::env::var_os("BENCH_CPU_CGROUP") {
            let procs = std::path::Path::new(&cgroup).join("cgroup.procs");
            std::fs::write(&procs, child.id().to_string())
                .unwrap_or_else(|e| panic!("BENCH_CPU_CGROUP: {}: {e}", procs.display()));
        }
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
    scheduled(pid).0
}

/// A process's threads' time so far, from their `schedstat`: run on a core, and waited
/// runnable for one (the second field), summed over threads.
fn scheduled(pid: &str) -> (Duration, Duration) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    let (run, wait) = tasks
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|line| {
            let mut fields = line.split_whitespace().map(|f| f.parse::<u64>().ok());
            Some((fields.next()??, fields.next()??))
        })
        .fold((0, 0), |(run, wait), (r, w)| (run + r, wait + w));
    (Duration::from_nanos(run), Duration::from_nanos(wait))
}

/// What the function process and the bench's own (the stand-ins') had used so far: threads'
/// run and runnable-waiting time, and page faults (minor, major). Taken around an event, it
/// says where a slow event's time went: its own work, waiting for a core, or faulting memory.
struct Usage {
    function: (Duration, Duration),
    standins: (Duration, Duration),
    function_faults: (u64, u64),
    standin_faults: (u64, u64),
}

impl Usage {
    fn now(function: &Function) -> Self {
        let pid = function.child.id().to_string();
        Self {
            function: scheduled(&pid),
            standins: scheduled("self"),
            function_faults: page_faults(&pid),
            standin_faults: page_faults("self"),
        }
    }

    fn since(&self, before: &Self) -> Self {
        let time = |now: (Duration, Duration), then: (Duration, Duration)| {
            (now.0.saturating_sub(then.0), now.1.saturating_sub(then.1))
        };
        let count = |now: (u64, u64), then: (u64, u64)| {
            (now.0.saturating_sub(then.0), now.1.saturating_sub(then.1))
        };
        Self {
            function: time(self.function, before.function),
            standins: time(self.standins, before.standins),
            function_faults: count(self.function_faults, before.function_faults),
            standin_faults: count(self.standin_faults, before.standin_faults),
        }
    }

    fn lines(&self) -> [String; 2] {
        [
            format!(
                "function: ran {:.1} ms, waited runnable for a core {:.1} ms (all threads); \
                 stand-ins: ran {:.1} ms, waited {:.1} ms",
                ms(self.function.0),
                ms(self.function.1),
                ms(self.standins.0),
                ms(self.standins.1),
            ),
            format!(
                "page faults: function {} minor, {} major; stand-ins {} minor, {} major",
                self.function_faults.0,
                self.function_faults.1,
                self.standin_faults.0,
                self.standin_faults.1,
            ),
        ]
    }
}

/// A process's page faults so far, minor and major (`/proc/<pid>/stat` fields 10 and 12):
/// the memory a slow event may have had to fault in.
fn page_faults(pid: &str) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; the fields after it are counted from its `)`.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    (at(7), at(9))
}

/// Busy and stolen time of all cores so far, from `/proc/stat` (in 10 ms ticks: meaningful
/// over a series, not per event).
fn machine_time() -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    // user, nice, system, irq, softirq; then steal.
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    (
        Duration::from_millis(busy * 10),
        Duration::from_millis(at(7) * 10),
    )
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
    sorted[percentile_index(sorted.len(), p)]
}

/// Where percentile `p` falls in `len` sorted values.
fn percentile_index(len: usize, p: f64) -> usize {
    ((len as f64 - 1.0) * p).round() as usize
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
    for n in 1..=2 * WARM_RUNS
        + COLD_RUNS
        + GIT_RUNS
        + 4 * (CLUSTER_RUNS + 1)
        + 2 * (RECONCILE_RUNS + 1)
        + 2 * ROLLOUT_RUNS
        + CHART_RUNS
        + 2 * (SIGNING_RUNS + 1)
        + 9
    {
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
    // The template's default Timeout: a reconcile at a Lambda-sized CPU share needs room.
    let deadline = Duration::from_secs(120);

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
    let warm = measure_push(&standins, &env, COLD_RUNS + 1, deadline).await;
    // `BENCH_PATHS=push,reconcile` (say) measures only those paths after the push path, for
    // an A/B or a profile of one path: imageupdaters, clusters, git, rollout, reconcile; all by default.
    let paths = std::env::var("BENCH_PATHS").ok();
    let wants = |path: &str| {
        paths
            .as_deref()
            .is_none_or(|p| p.split(',').any(|p| p.trim() == path))
    };
    // The same with 50 ImageUpdater objects in the namespace (none matching the pushed
    // repository's Applications): what reading v1.x configuration costs an event.
    let mut with_objects = None;
    if wants("imageupdaters") {
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
        with_objects =
            Some(measure_push(&standins, &env, COLD_RUNS + WARM_RUNS + 2, deadline).await);
    }
    // Three clusters from one function: the seed cluster (with its 50 objects) and two more
    // of 2,000 Applications each, all patching; against one cluster alone, on loopback and
    // with a network round trip added to every Kubernetes request.
    let mut next = COLD_RUNS + 2 * WARM_RUNS + 3;
    let mut cluster_figures = Vec::new();
    if wants("clusters") {
        let extra = more_clusters(&standins).await;
        for round_trip in [None, Some(ROUND_TRIP)] {
            for clusters in [&extra[..0], &extra[..]] {
                let measured =
                    measure_clusters(&standins, &env, clusters, round_trip, next, deadline).await;
                cluster_figures.push((clusters.len() + 1, round_trip, measured));
                next += CLUSTER_RUNS + 1;
            }
        }
    }
    next = COLD_RUNS + 2 * WARM_RUNS + 3 + 4 * (CLUSTER_RUNS + 1);
    // Git write-back: the matching Applications commit to a repository each instead, and
    // are put back as they were afterwards.
    let mut git = None;
    if wants("git") {
        git = Some(measure_git(&standins, &env, next, deadline).await);
    }
    next += GIT_RUNS + 1;
    // Rollout checks: a push's writes followed to live, and to not yet.
    let mut rollout = None;
    if wants("rollout") {
        rollout = Some(measure_rollout(&standins, &env, next, deadline).await);
    }
    next += 2 * ROLLOUT_RUNS + 1;
    // A chart pushed to ECR, moving three Applications' targetRevision.
    let mut charts = None;
    if wants("charts") {
        charts = Some(measure_charts(&standins, &env, next, deadline).await);
    }
    next += CHART_RUNS + 1;
    // The managed-signing gate: ECR's status alone, then the Notation signature verified.
    let mut signing = None;
    if wants("signing") {
        signing = Some(measure_signing(&standins, &env, next, deadline).await);
    }
    next += 2 * (SIGNING_RUNS + 1) + 1;
    // Scheduled reconcile: every Application's repository's tag list, every Application
    // read; last, since it moves the bench's Applications to tags newer than any push's.
    let mut reconciles = Vec::new();
    if wants("reconcile") {
        seed_reconcile_repositories(&standins);
        for round_trip in [None, Some(ROUND_TRIP)] {
            let measured = measure_reconcile(&standins, &env, round_trip, next, deadline).await;
            next += RECONCILE_RUNS + 1;
            reconciles.push((round_trip, measured));
        }
    }
    let size = std::fs::metadata(BINARY).map(|m| m.len()).unwrap_or(0);
    for line in &warm.median_timeline {
        println!("warm timeline (the event of median latency): {line}");
    }
    for line in &warm.p99_timeline {
        println!("warm timeline (the event at p99): {line}");
    }
    print_budget("push", &warm);
    if let Some(with_objects) = &with_objects {
        print_budget(
            &format!("push with {IMAGE_UPDATERS} ImageUpdater objects in the namespace"),
            with_objects,
        );
    }
    if let Some(git) = &git {
        print_budget("push, git write-back (a commit per Application)", git);
    }
    if let Some(rollout) = &rollout {
        print_rollout(rollout);
    }
    if let Some(charts) = &charts {
        print_budget(
            "push of a chart (a targetRevision patch per Application)",
            charts,
        );
    }
    if let Some((status_only, verified)) = &signing {
        print_budget("push, signing-profile gate on ECR's status", status_only);
        print_budget(
            "push, signing-profile gate with each Notation signature verified",
            verified,
        );
    }
    for (round_trip, series) in &reconciles {
        print_budget(
            &format!(
                "scheduled reconcile, {APPLICATIONS} Applications over {} repositories, {}",
                APPLICATIONS - MATCHING + 1,
                round_trip.map_or("loopback".to_string(), |d| format!(
                    "{} ms added per Kubernetes and ECR request",
                    d.as_millis()
                ))
            ),
            series,
        );
    }
    for (kind, times) in &warm.handling_by_kind {
        let mut times = times.clone();
        times.sort();
        println!(
            "stand-in handling per {kind} (push): p50 {:.2} ms",
            times[times.len() / 2] as f64 / 1e3
        );
    }
    for (count, round_trip, run) in &cluster_figures {
        let ClusterRun {
            latencies,
            standin_time,
            requests,
            rss_kb,
            median_timeline,
        } = run;
        // With round trips, a single cluster's event shows which requests wait on which.
        if *count == 1 && round_trip.is_some() {
            for line in median_timeline {
                println!(
                    "timeline, 1 cluster with round trips (the event of median latency): {line}"
                );
            }
        }
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
    let Series {
        latencies: warm_latencies,
        standin_time,
        standin_busy,
        cpu_per_event,
        standin_cpu_per_event,
        rss_kb,
        ..
    } = &warm;
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!(
        "| warm invocation latency, p50 | {:.1} ms | under 15 ms |",
        ms(percentile(warm_latencies, 0.50))
    );
    println!(
        "| warm invocation latency, p99 | {:.1} ms | under 30 ms |",
        ms(percentile(warm_latencies, 0.99))
    );
    println!(
        "| of which the stand-ins' own handling (sum over requests, some concurrent), p50 | {:.1} ms | |",
        ms(percentile(standin_time, 0.50))
    );
    println!(
        "| of which at least one stand-in was handling a request (union of handling intervals), p50 | {:.1} ms | |",
        ms(percentile(standin_busy, 0.50))
    );
    // The function's own share lies between two subtractions: the summed handling counts
    // overlapping requests twice (a lower bound), while the time no stand-in was handling
    // anything also holds TLS and loopback transfer on both sides (an upper bound).
    println!(
        "| of which the function's own side, between (p50 total minus p50 summed handling) and (p50 total minus p50 union) | {:.1} to {:.1} ms | |",
        ms(percentile(warm_latencies, 0.50).saturating_sub(percentile(standin_time, 0.50))),
        ms(percentile(warm_latencies, 0.50).saturating_sub(percentile(standin_busy, 0.50)))
    );
    println!(
        "| the function process's CPU time per event, all threads (from /proc/<pid>/task/*/schedstat) | {:.1} ms | |",
        ms(*cpu_per_event)
    );
    println!(
        "| the stand-ins' CPU time per event, all threads of the bench process (the same way) | {:.1} ms | |",
        ms(*standin_cpu_per_event)
    );
    println!(
        "| HTTP requests per event | {} list pages, {} GETs, {} PATCHes, {} Events, {} ImageUpdater list, {} ECR, {} EKS ({} Applications updated) | {} list pages + {MATCHING} GET + {MATCHING} PATCH + {MATCHING} Events + 1 ImageUpdater list + at most 1 ECR |",
        warm.requests("list page"),
        warm.requests("GET"),
        warm.requests("PATCH"),
        warm.requests("Event"),
        warm.requests("ImageUpdater"),
        warm.requests("ECR"),
        warm.requests("EKS"),
        warm.updated,
        APPLICATIONS.div_ceil(500)
    );
    println!(
        "| peak RSS of the function process | {:.1} MB | under 20 MiB |",
        *rss_kb as f64 / 1024.0
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
