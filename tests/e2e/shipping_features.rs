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
