//! Figures for the pure core: `select` over 100,000 tags per strategy, and annotation parsing
//! over 5,000 Applications. `cargo bench --bench policy`. Prints figures; asserts nothing.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use argocd_ecr_updater::appconfig::annotations::{AppConfig, PREFIX};
use argocd_ecr_updater::policy::{AllowTags, IgnoreTags, Strategy, TagInfo, TagPolicy};
use argocd_ecr_updater_standins::fixtures::MEASURE_CHILD;
use time::OffsetDateTime;

/// Median and worst of `runs` timings of `f`.
fn measure(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    (times[runs / 2], times[runs - 1])
}

fn tags(count: usize) -> Vec<TagInfo> {
    let base = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
    (0..count)
        .map(|i| {
            // A realistic mix: versions, date tags, pre-releases and junk.
            let name = match i % 4 {
                0 => format!("{}.{}.{}", i % 7, (i / 7) % 50, i % 97),
                1 => format!(
                    "2025{:02}{:02}-{:06}",
                    1 + i % 12,
                    1 + i % 28,
                    i % 1_000_000
                ),
                2 => format!("v{}.{}.{}-rc.{}", i % 5, i % 11, i % 13, i % 3),
                _ => format!("feature-{i}"),
            };
            TagInfo {
                name,
                pushed_at: Some(base + time::Duration::seconds((i * 7919 % count) as i64)),
                digest: Some(format!("sha256:{i:064x}")),
                archived: false,
            }
        })
        .collect()
}

fn main() {
    let list = tags(100_000);
    println!(
        "select over {} tags (median / worst of 21 runs):",
        list.len()
    );
    let cases: [(&str, Strategy, Option<&str>, &str); 5] = [
        ("semver, no constraint", Strategy::Semver, None, "any"),
        (
            "semver, `^3.0 || ~5.1`",
            Strategy::Semver,
            Some("^3.0 || ~5.1"),
            "any",
        ),
        (
            "newest-build, allow-tags date regexp",
            Strategy::NewestBuild,
            None,
            "regexp:^[0-9]{8}-[0-9]{6}$",
        ),
        ("alphabetical", Strategy::Alphabetical, None, "any"),
        ("digest", Strategy::Digest, Some("feature-99999"), "any"),
    ];
    for (label, strategy, constraint, allow) in cases {
        let policy = TagPolicy::new(
            strategy,
            constraint,
            AllowTags::parse(allow).unwrap(),
            IgnoreTags::parse("*-rc.2").unwrap(),
        )
        .unwrap();
        let mut selected = None;
        let (median, worst) = measure(21, || selected = black_box(policy.select(black_box(&list))));
        println!(
            "  {label:<40} {:>8.2} ms / {:>8.2} ms  -> {}",
            ms(median),
            ms(worst),
            selected.map(|t| t.to_string()).unwrap_or_default()
        );
    }

    let apps: Vec<BTreeMap<String, String>> = (0..5_000)
        .map(|i| {
            let mut a = BTreeMap::new();
            let mut put = |k: &str, v: String| a.insert(format!("{PREFIX}{k}"), v);
            put("image-list", format!("app=768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/svc-{i}, side=r.example.com/side:^1.{}", i % 9));
            put("app.update-strategy", "latest".into());
            put("app.allow-tags", "regexp:^[0-9]{8}-[0-9]{6}$".into());
            put("app.helm.image-name", "image.repository".into());
            put("app.helm.image-tag", "image.tag".into());
            put("side.ignore-tags", "*-dev, *-test".into());
            put("write-back-method", "argocd".into());
            a
        })
        .collect();
    let (median, worst) = measure(11, || {
        for a in &apps {
            black_box(AppConfig::parse(black_box(a)));
        }
    });
    println!(
        "annotation parsing, {} Applications x 2 images: {:.2} ms / {:.2} ms (median / worst of 11), {:.1} us per Application",
        apps.len(),
        ms(median),
        ms(worst),
        median.as_secs_f64() * 1e6 / apps.len() as f64
    );
    select_cli_beside_python(&list);
}

/// The `select` command a user runs, over a 100,000-line tags file, beside the Python
/// one-liner that does the same (newest push among the date tags): wall time and peak RSS of
/// each process, reading the file included. Both stream the file.
fn select_cli_beside_python(list: &[TagInfo]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tags.tsv");
    let text: String = list
        .iter()
        .map(|t| {
            let at = t
                .pushed_at
                .unwrap()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap();
            format!("{}\t{at}\n", t.name)
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    let python = r#"import re,sys
p=re.compile(r'^[0-9]{8}-[0-9]{6}$'); best=None
for line in open(sys.argv[1]):
    f=line.rstrip('\n').split('\t')
    if p.match(f[0]) and (best is None or (f[1],f[0])>best): best=(f[1],f[0])
print(best)"#;
    let ours: [&str; 7] = [
        env!("CARGO_BIN_EXE_argocd-ecr-updater-cli"),
        "select",
        "--strategy",
        "newest-build",
        "--allow-tags",
        "regexp:^[0-9]{8}-[0-9]{6}$",
        "--tags-file",
    ];
    let mut rows = Vec::new();
    for (label, command) in [
        (
            "argocd-ecr-updater-cli select",
            ours.iter()
                .map(|s| s.to_string())
                .chain([path.to_string()])
                .collect::<Vec<_>>(),
        ),
        (
            "python3 one-liner",
            vec!["python3".into(), "-c".into(), python.into(), path.into()],
        ),
    ] {
        let mut walls = Vec::new();
        let mut peaks = Vec::new();
        for _ in 0..5 {
            let measured = std::process::Command::new("python3")
                .args(["-c", MEASURE_CHILD])
                .args(&command)
                .output()
                .expect("python3 runs");
            let report: serde_json::Value = serde_json::from_slice(&measured.stdout).unwrap();
            assert_eq!(report["code"], 0, "{label}");
            walls.push(report["wall_s"].as_f64().unwrap() * 1e3);
            peaks.push(report["peak_rss_kb"].as_u64().unwrap());
        }
        walls.sort_by(f64::total_cmp);
        peaks.sort();
        rows.push(format!(
            "{label}: {:.1} ms ({:.1} to {:.1}), peak RSS {:.1} MiB (median of 5)",
            walls[2],
            walls[0],
            walls[4],
            peaks[2] as f64 / 1024.0
        ));
    }
    println!("select over a {}-line tags file, as a process:", list.len());
    for row in rows {
        println!("  {row}");
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
