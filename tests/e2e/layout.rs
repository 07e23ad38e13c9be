//! The repository's own layout, where a file is found by where it lies: proptest replays the
//! failing cases saved in `proptest-regressions/<path under src>.txt`, so a file left behind
//! when its module moves is silently never replayed again.

use std::path::{Path, PathBuf};

/// Every regressions file under `root/proptest-regressions`, with the source file it belongs
/// to (`root/src/<same path>.rs`).
fn regressions(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let base = root.join("proptest-regressions");
    let mut found = Vec::new();
    let mut pending = vec![base.clone()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "txt") {
                let relative = path.strip_prefix(&base).unwrap().with_extension("rs");
                found.push((path.clone(), root.join("src").join(relative)));
            }
        }
    }
    found
}

#[test]
fn every_saved_proptest_case_lies_where_its_module_replays_it() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for root in [workspace.to_path_buf(), workspace.join("cli")] {
        for (saved, module) in regressions(&root) {
            let source = std::fs::read_to_string(&module).unwrap_or_else(|_| {
                panic!(
                    "{} has no module at {}: move it where the module with its property tests now lies",
                    saved.display(),
                    module.display()
                )
            });
            assert!(
                source.contains("proptest!"),
                "{} belongs to {}, which has no property tests",
                saved.display(),
                module.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "the saved cases of kube and imageupdater");
}

#[test]
fn a_regressions_file_left_behind_by_a_move_is_found() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("proptest-regressions")).unwrap();
    std::fs::create_dir_all(root.path().join("src/cluster")).unwrap();
    std::fs::write(root.path().join("proptest-regressions/kube.txt"), "cc 00").unwrap();
    std::fs::write(root.path().join("src/cluster/kube.rs"), "proptest! {}").unwrap();
    let found = regressions(root.path());
    assert_eq!(found.len(), 1);
    assert!(
        !found[0].1.exists(),
        "src/kube.rs does not exist: the file is stale"
    );
}

/// The layers `src/lib.rs`'s "# Layout" list documents, from the top down: each bullet is one
/// layer, named by the links to a bare module in it (`[`git`]`); a link into a module
/// (`[`apply::writeback::Writer`]`) documents, it does not place.
fn documented_layers(lib_rs: &str) -> Vec<Vec<String>> {
    let link = regex::Regex::new(r"\[`([a-z_]+)`\]").unwrap();
    let mut layers: Vec<Vec<String>> = Vec::new();
    let mut in_layout = false;
    for line in lib_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim_start();
        if doc.starts_with('#') {
            in_layout = doc == "# Layout";
            continue;
        }
        if !in_layout {
            continue;
        }
        if doc.starts_with("- ") {
            layers.push(Vec::new());
        } else if doc.is_empty() || line.starts_with("//! ") && !line.starts_with("//!   ") {
            // A paragraph outside the list.
            if !doc.is_empty() && !layers.is_empty() {
                in_layout = false;
            }
            continue;
        }
        if let Some(layer) = layers.last_mut() {
            for name in link.captures_iter(doc).map(|c| c[1].to_string()) {
                if !layer.contains(&name) {
                    layer.push(name);
                }
            }
        }
    }
    layers
}

/// The crate root's modules as `lib.rs` declares them (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_modules(lib_rs: &str) -> Vec<String> {
    let declaration = regex::Regex::new(r"^(?:pub(?:\(crate\))? )?mod ([a-z_]+);").unwrap();
    lib_rs
        .lines()
        .filter_map(|l| declaration.captures(l).map(|c| c[1].to_string()))
        .collect()
}

/// One use of another top-level module: `from` (the folder or file it is written in) names
/// `to` through a `crate::` path at `file:line`.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// Every `crate::<module>` path in the code under `src` (comments left out), by the
/// top-level module it is written in. `lib.rs` and the binary are not modules of a folder.
fn edges(src: &Path) -> Vec<Edge> {
    let path = regex::Regex::new(r"\bcrate::([a-z_]+)").unwrap();
    let mut found = Vec::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let file = entry.path();
            if file.is_dir() {
                pending.push(file);
                continue;
            }
            if file.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = file.strip_prefix(src).unwrap();
            let mut parts = relative.components();
            let first = parts
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .to_string();
            let from = match parts.next() {
                Some(_) => first,
                None => first.trim_end_matches(".rs").to_string(),
            };
            if from == "lib" || from == "main" || from == "bin" {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for to in path.captures_iter(line).map(|c| c[1].to_string()) {
                    if to != from {
                        found.push(Edge {
                            from: from.clone(),
                            to,
                            at: format!("src/{}:{}", relative.display(), number + 1),
                        });
                    }
                }
            }
        }
    }
    found.sort_by(|a, b| a.at.cmp(&b.at));
    found
}

/// What breaks the documented order: a module the map does not list (or lists but the crate
/// lacks), an edge up the list, and a cycle among modules of one layer.
fn order_violations(layers: &[Vec<String>], declared: &[String], edges: &[Edge]) -> Vec<String> {
    let mut violations = Vec::new();
    let rank = |name: &str| layers.iter().position(|l| l.iter().any(|n| n == name));
    for module in declared {
        if rank(module).is_none() {
            violations.push(format!(
                "`{module}` is declared in src/lib.rs but missing from its # Layout list: add it where its uses place it"
            ));
        }
    }
    for name in layers.iter().flatten() {
        if !declared.contains(name) {
            violations.push(format!(
                "the # Layout list names `{name}`, which src/lib.rs does not declare"
            ));
        }
    }
    let mut same_layer: Vec<(&str, &str)> = Vec::new();
    for edge in edges {
        let (Some(from), Some(to)) = (rank(&edge.from), rank(&edge.to)) else {
            continue;
        };
        if to < from {
            violations.push(format!(
                "{}: `{}` uses `{}`, which the # Layout list in src/lib.rs puts above it; move what both need down instead",
                edge.at, edge.from, edge.to
            ));
        } else if to == from {
            same_layer.push((&edge.from, &edge.to));
        }
    }
    // A cycle among modules of one layer: depth-first search from each module.
    let mut modules: Vec<&str> = same_layer.iter().map(|(from, _)| *from).collect();
    modules.sort_unstable();
    modules.dedup();
    for start in modules {
        let mut stack = vec![(start, vec![start])];
        let mut seen = std::collections::BTreeSet::new();
        while let Some((at, route)) = stack.pop() {
            for (_, next) in same_layer.iter().filter(|(from, _)| *from == at) {
                if *next == start {
                    let cycle = format!("{} -> {start}", route.join(" -> "));
                    if !violations.iter().any(|v| v.ends_with(&cycle)) {
                        violations.push(format!("a cycle between modules of one layer: {cycle}"));
                    }
                } else if seen.insert(*next) {
                    let mut longer = route.clone();
                    longer.push(next);
                    stack.push((next, longer));
                }
            }
        }
    }
    violations
}

fn crate_order_violations(root: &Path) -> (Vec<String>, usize) {
    let lib_rs = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let found = edges(&root.join("src"));
    let violations = order_violations(
        &documented_layers(&lib_rs),
        &declared_modules(&lib_rs),
        &found,
    );
    (violations, found.len())
}

#[test]
fn every_module_uses_only_the_ones_below_it_in_the_documented_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_rs = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let layers = documented_layers(&lib_rs);
    assert!(
        layers.len() >= 10 && layers.last().is_some_and(|bottom| bottom.len() >= 8),
        "the # Layout list was not read: {layers:?}"
    );
    let (violations, edge_count) = crate_order_violations(root);
    assert!(
        edge_count > 100,
        "only {edge_count} crate:: paths were read"
    );
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn an_edge_planted_up_the_order_in_a_copy_of_the_crate_is_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let copy = tempfile::tempdir().unwrap();
    let mut pending = vec![PathBuf::from("src")];
    while let Some(dir) = pending.pop() {
        std::fs::create_dir_all(copy.path().join(&dir)).unwrap();
        for entry in std::fs::read_dir(root.join(&dir)).unwrap().flatten() {
            let relative = dir.join(entry.file_name());
            if entry.path().is_dir() {
                pending.push(relative);
            } else {
                std::fs::copy(entry.path(), copy.path().join(&relative)).unwrap();
            }
        }
    }
    let kube = copy.path().join("src/cluster/kube.rs");
    let mut text = std::fs::read_to_string(&kube).unwrap();
    text.push_str("\n#[allow(unused_imports)]\nuse crate::pipeline::handler::Handler;\n");
    std::fs::write(&kube, text).unwrap();
    let (violations, _) = crate_order_violations(copy.path());
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0].starts_with("src/cluster/kube.rs:")
            && violations[0].contains("`cluster` uses `pipeline`"),
        "{}",
        violations[0]
    );
}

fn layers(names: &[&[&str]]) -> Vec<Vec<String>> {
    names
        .iter()
        .map(|layer| layer.iter().map(|n| n.to_string()).collect())
        .collect()
}

fn edge(from: &str, to: &str) -> Edge {
    Edge {
        from: from.into(),
        to: to.into(),
        at: format!("src/{from}/x.rs:1"),
    }
}

#[test]
fn the_order_check_reads_each_case_as_the_map_says() {
    let order = layers(&[&["top"], &["middle"], &["config", "failure", "report"]]);
    let declared: Vec<String> = ["top", "middle", "config", "failure", "report"]
        .map(String::from)
        .to_vec();
    let cases: &[(&str, Vec<Edge>, Option<&str>)] = &[
        (
            "an edge down the list is allowed",
            vec![edge("top", "middle"), edge("middle", "failure")],
            None,
        ),
        (
            "an edge up the list is refused",
            vec![edge("middle", "top")],
            Some("`middle` uses `top`"),
        ),
        (
            "modules of the bottom layer may use one another",
            vec![edge("config", "failure"), edge("report", "failure")],
            None,
        ),
        (
            "a cycle at the bottom is refused",
            vec![edge("config", "report"), edge("report", "config")],
            Some("a cycle between modules of one layer"),
        ),
        (
            "a longer cycle at the bottom is refused",
            vec![
                edge("config", "report"),
                edge("report", "failure"),
                edge("failure", "config"),
            ],
            Some("a cycle"),
        ),
    ];
    for (case, edges, expected) in cases {
        let violations = order_violations(&order, &declared, edges);
        match expected {
            None => assert!(violations.is_empty(), "{case}: {violations:?}"),
            Some(text) => assert!(
                violations.iter().any(|v| v.contains(text)),
                "{case}: {violations:?}"
            ),
        }
    }
    let undocumented = order_violations(
        &order,
        &[declared.clone(), vec!["sweep".into()]].concat(),
        &[],
    );
    assert!(
        undocumented
            .iter()
            .any(|v| v.contains("`sweep` is declared")),
        "a module missing from the map: {undocumented:?}"
    );
}

#[test]
fn the_layout_list_is_read_bullet_by_bullet() {
    let lib_rs = "//! intro\n//!\n//! # Layout\n//!\n//! One paragraph [`ignored`].\n//!\n//! - [`top`]: runs [`top::a`];\n//!   and [`top::b`] through [`config::Seam`].\n//! - At the bottom: [`config`], [`failure`].\n//!\n//! After the list, [`elsewhere`].\n\npub mod top;\nmod config;\npub(crate) mod failure;\n";
    assert_eq!(
        documented_layers(lib_rs),
        layers(&[&["top"], &["config", "failure"]])
    );
    assert_eq!(declared_modules(lib_rs), ["top", "config", "failure"]);
}
