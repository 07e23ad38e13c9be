//! Figures for the pure core: `select` over 100,000 tags per strategy, and annotation parsing
//! over 5,000 Applications. `cargo bench --bench policy`. Prints figures; asserts nothing.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use argocd_ecr_updater::annotations::{AppConfig, PREFIX};
use argocd_ecr_updater::policy::{AllowTags, IgnoreTags, Strategy, TagInfo, TagPolicy};
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
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
