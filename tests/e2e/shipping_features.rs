//! What ships is what the tests test: a feature of a crate whose behaviour the output
//! depends on may not be turned on only by a dev-dependency. Cargo unifies features across
//! the graph it builds, so a feature that only a dev-dependency enables is on under
//! `cargo test` and off in `cargo build --release -p argocd-ecr-updater`: serde_json's
//! `preserve_order` once made test builds write `.argocd-source-<app>.yaml` keys in Image
//! Updater's order and the released function write them sorted.

use std::collections::BTreeSet;
use std::process::Command;

/// The features `crate_name` is built with for `package`, following `edges`.
fn features(package: &str, crate_name: &str, edges: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "--prefix",
            "none",
            "-p",
            package,
            "-e",
            edges,
            "-i",
            crate_name,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let marker = format!("{crate_name} feature \"");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix(&marker))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_shipped_function_and_cli_build_the_output_crates_with_every_feature_the_tests_see() {
    for package in ["argocd-ecr-updater", "argocd-ecr-updater-cli"] {
        for crate_name in ["serde_json", "serde_yaml_ng", "saphyr-parser"] {
            let shipped = features(package, crate_name, "normal,build,features");
            let tested = features(package, crate_name, "normal,build,dev,features");
            let dev_only: Vec<&String> = tested.difference(&shipped).collect();
            assert!(
                dev_only.is_empty(),
                "{package}: {crate_name} features {dev_only:?} are on only under cargo test; name them in the package's [dependencies]"
            );
        }
    }
    // The one that mattered, named.
    assert!(
        features("argocd-ecr-updater", "serde_json", "normal,build,features")
            .contains("preserve_order")
    );
}

/// Every crate's features in `package`'s graph (`edges`), by crate name and version.
fn graph_features(
    package: &str,
    edges: &str,
) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "--prefix",
            "none",
            "-p",
            package,
            "-e",
            edges,
            "-f",
            "{p}|{f}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut out: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some((package, features)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        let name: Vec<&str> = package.split(' ').take(2).collect();
        out.entry(name.join(" ")).or_default().extend(
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string),
        );
    }
    out
}

/// Crates whose features differ between the function as it ships and as `cargo test` builds
/// it, and why that cannot make the tests see another function than the one that ships.
const DIFFERING: &[(&str, &str)] = &[
    (
        "aws-config",
        "the tests' SDK clients (mocks, the stand-ins' sdk_config); the function builds its own (sdk_env)",
    ),
    (
        "aws-sdk-ecr",
        "test-util and the default client for the unit tests' mocks; the function sends through its own reqwest client",
    ),
    ("aws-sdk-eks", "as aws-sdk-ecr"),
    ("aws-sdk-secretsmanager", "as aws-sdk-ecr"),
    ("aws-sdk-sts", "as aws-sdk-ecr"),
    ("aws-smithy-runtime", "as aws-sdk-ecr"),
    (
        "bitflags",
        "std for the stand-ins' dependencies; no behaviour of the function's",
    ),
    (
        "crc32fast",
        "std, through the stand-ins' zip; the checksum the function's gzip decoding checks is computed the same either way",
    ),
    ("either", "std, as bitflags"),
    (
        "hashbrown",
        "default hasher and allocator features; no output depends on a hash map's order",
    ),
    ("hyper", "the stand-ins' servers (http2, server)"),
    (
        "hyper-rustls",
        "the SDK's default client, which the function does not use",
    ),
    ("hyper-util", "the stand-ins' servers"),
    (
        "indexmap",
        "serde for the stand-ins; serde_json's preserve_order is on in both (checked above)",
    ),
    ("log", "std, for the stand-ins' logging"),
    (
        "regex",
        "Unicode tables the function leaves out: it builds tag patterns with unicode(false) and its constraint grammar from ASCII classes; the Lambda tests run the shipped build's patterns (lambda.rs)",
    ),
    ("regex-automata", "as regex"),
    ("regex-syntax", "as regex"),
    (
        "rustls",
        "post-quantum key exchange preferred by the stand-ins' TLS; the function's handshakes against the stand-ins run as shipped (the Lambda tests)",
    ),
    (
        "serde_core",
        "its default (std) through the stand-ins; serde's std is on in both",
    ),
    ("signature", "the cosign test keys' signing"),
    ("slab", "its default, for the stand-ins"),
    ("subtle", "i128, for the test keys' crypto"),
    (
        "tokio",
        "process, signal and the rest of full: the stand-ins and tests; the function's runtime uses none of them",
    ),
    ("tokio-rustls", "the stand-ins' TLS"),
    ("tokio-util", "codec, for the stand-ins"),
    ("tower", "the stand-ins' servers"),
    (
        "tracing-subscriber",
        "its default formatter for the tests' logs; the function sets its own (telemetry.rs), the Lambda tests read its lines as shipped",
    ),
];

#[test]
fn every_crate_whose_features_differ_under_cargo_test_is_named_with_why_it_is_harmless() {
    let shipped = graph_features("argocd-ecr-updater", "normal,build");
    let tested = graph_features("argocd-ecr-updater", "normal,build,dev");
    let mut differing = Vec::new();
    for (package, features) in &shipped {
        let Some(test_features) = tested.get(package) else {
            continue;
        };
        if features != test_features {
            differing.push(package.split(' ').next().unwrap_or_default().to_string());
        }
    }
    let named: BTreeSet<&str> = DIFFERING.iter().map(|(name, _)| *name).collect();
    let unexplained: Vec<&String> = differing
        .iter()
        .filter(|d| !named.contains(d.as_str()))
        .collect();
    assert!(
        unexplained.is_empty(),
        "features differ under cargo test for {unexplained:?}: name the feature in the package's [dependencies] if the function's behaviour depends on it, or add the crate to DIFFERING with why it does not"
    );
    let stale: Vec<&&str> = named
        .iter()
        .filter(|n| !differing.iter().any(|d| d == *n))
        .collect();
    assert!(
        stale.is_empty(),
        "DIFFERING names crates that no longer differ: {stale:?}"
    );
}
