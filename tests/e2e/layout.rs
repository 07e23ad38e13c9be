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
