//! The limits the house holds, checked on every run rather than by a reviewer's count: no
//! function over 120 lines outside tests, no `too_many_arguments` allowance, at most 12 files
//! flat in `src/`, the README under 10 KB and docs/development.md under 15 KB, and no
//! Application passed around as raw JSON outside `application/` and the patch builder. The source is
//! read as `cargo fmt` leaves it: a function ends at the first line that is its own
//! indentation followed by `}`.

use std::path::{Path, PathBuf};

const LONGEST_FUNCTION: usize = 120;

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Each function of `text` before its `#[cfg(test)]` module, longer than the limit: its
/// first line's number, its length and its signature.
fn long_functions(text: &str) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut long = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = ["fn ", "pub fn ", "async fn ", "pub async fn ", "const fn "]
            .iter()
            .any(|p| trimmed.starts_with(p))
            || (trimmed.starts_with("pub(") && trimmed.contains(" fn "));
        // A declaration (a trait's method without a body) ends with `;` before any `{`.
        let opening = lines[i..end]
            .iter()
            .find(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
        if !signature || opening.is_none_or(|l| l.trim_end().ends_with(';')) {
            continue;
        }
        let closing = format!("{indent}}}");
        if let Some(length) = lines[i..end].iter().position(|l| *l == closing)
            && length + 1 > LONGEST_FUNCTION
        {
            long.push((i + 1, length + 1, trimmed.to_string()));
        }
    }
    long
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_function_outside_tests_is_longer_than_120_lines() {
    let mut found = Vec::new();
    for dir in ["src", "cli/src"] {
        for file in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, length, signature) in long_functions(&text) {
                found.push(format!(
                    "{}:{line}: {length} lines: {signature}",
                    file.display()
                ));
            }
        }
    }
    assert!(found.is_empty(), "split these:\n{}", found.join("\n"));
}

#[test]
fn the_length_check_finds_a_long_function_and_skips_the_tests() {
    let body = "    let x = 1;\n".repeat(LONGEST_FUNCTION);
    let text = format!(
        "pub(crate) async fn long() {{\n{body}}}\n\nfn short() {{\n    1\n}}\ntrait T {{\n    fn declared(\n        &self,\n    ) -> u8;\n}}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n"
    );
    let found = long_functions(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].0, found[0].1), (1, LONGEST_FUNCTION + 2));
}

#[test]
fn no_allowance_for_too_many_arguments() {
    let found: Vec<String> = ["src", "cli/src", "benches", "examples"]
        .iter()
        .flat_map(|dir| rust_files(&root().join(dir)))
        .filter(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .contains("clippy::too_many_arguments")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(found.is_empty(), "pass a struct instead: {found:?}");
}

#[test]
fn at_most_twelve_files_lie_flat_in_src() {
    let flat: Vec<String> = std::fs::read_dir(root().join("src"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(flat.len() <= 12, "{} files: {flat:?}", flat.len());
}

#[test]
fn the_readme_and_the_development_guide_stay_short() {
    for (file, limit) in [("README.md", 10_000), ("docs/development.md", 15_000)] {
        let size = std::fs::metadata(root().join(file)).unwrap().len();
        assert!(
            size < limit,
            "{file} is {size} bytes, over {limit}: link out to docs/"
        );
    }
}

/// The sibling modules each module of `folder` names (`super::x`, `crate::<folder>::x`), in
/// its code before its tests.
fn sibling_edges(folder: &Path, name: &str) -> Vec<(String, String)> {
    let mut edges = Vec::new();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return edges;
    };
    let modules: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            (path.extension().is_some_and(|x| x == "rs"))
                .then(|| path.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .filter(|m| m != "mod")
        .collect();
    for module in &modules {
        let text = std::fs::read_to_string(folder.join(format!("{module}.rs"))).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for other in modules.iter().filter(|m| *m != module) {
            let named = [
                format!("super::{other}::"),
                format!("super::{other};"),
                format!("super::{{{other}"),
                format!("crate::{name}::{other}::"),
                format!("crate::{name}::{other};"),
                format!("crate::{name}::{other},"),
            ];
            if named.iter().any(|n| code.contains(n.as_str())) {
                edges.push((module.clone(), other.clone()));
            }
        }
    }
    edges
}

/// A loop among `edges`, if any, as the modules along it.
fn a_loop(edges: &[(String, String)]) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        edges: &[(String, String)],
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == at) {
            let mut found = path[start..].to_vec();
            found.push(at.to_string());
            return Some(found);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.to_string());
        for (_, to) in edges.iter().filter(|(from, _)| from == at) {
            if let Some(found) = visit(to, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(at.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    edges
        .iter()
        .find_map(|(from, _)| visit(from, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_modules_of_a_folder_import_one_another_without_a_loop() {
    let mut loops = Vec::new();
    for entry in std::fs::read_dir(root().join("src")).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(found) = a_loop(&sibling_edges(&path, &name)) {
                loops.push(format!("{name}: {}", found.join(" -> ")));
            }
        }
    }
    assert!(loops.is_empty(), "{loops:?}");
}

#[test]
fn a_loop_among_siblings_is_found() {
    let edge = |a: &str, b: &str| (a.to_string(), b.to_string());
    let found = a_loop(&[
        edge("handler", "listing"),
        edge("listing", "application"),
        edge("application", "handler"),
    ]);
    assert_eq!(found.unwrap().len(), 4);
    assert!(a_loop(&[edge("a", "b"), edge("b", "c"), edge("a", "c")]).is_none());
}

#[test]
fn the_pipeline_imports_one_way_and_nothing_imports_its_handler() {
    let edges = sibling_edges(&root().join("src/pipeline"), "pipeline");
    // The check reads the imports it is meant to: the pipeline's modules do use one another.
    assert!(edges.len() >= 10, "{edges:?}");
    assert_eq!(a_loop(&edges), None, "{edges:?}");
    let into_handler: Vec<_> = edges.iter().filter(|(_, to)| to == "handler").collect();
    assert!(
        into_handler.is_empty(),
        "the handler only dispatches; move what {into_handler:?} use below it"
    );
}

/// The files of `dir` whose code (before their tests) implements `type_name` itself.
fn files_implementing(dir: &Path, type_name: &str) -> Vec<String> {
    let opening = format!("impl {type_name} {{");
    rust_files(dir)
        .into_iter()
        .filter(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            code.lines().any(|l| l.trim_start().starts_with(&opening))
        })
        .map(|file| file.display().to_string())
        .collect()
}

#[test]
fn the_handler_is_implemented_in_at_most_two_files() {
    let found = files_implementing(&root().join("src"), "Handler");
    assert!(
        !found.is_empty() && found.len() <= 2,
        "`impl Handler` in {} files (build the context once, dispatch; the work is functions over it): {found:?}",
        found.len()
    );
}

/// The parameters of `text`, before its `#[cfg(test)]` module, that take an Application as
/// raw JSON (`app: &Value`, `application: &serde_json::Value`, over several lines too): the
/// line of each.
fn untyped_applications(text: &str) -> Vec<usize> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let parameter = regex::Regex::new(
        r"\b_?(app|application|object|effective|declared)\s*:\s*&('\w+\s+)?(serde_json::)?Value\b",
    )
    .unwrap();
    parameter
        .find_iter(code)
        .map(|m| code[..m.start()].lines().count().max(1))
        .collect()
}

/// Where the raw Application may still be a parameter: `application/` reads it into the
/// typed one, and the patch builder's guards test the JSON it read.
const RAW_APPLICATION_ALLOWED: [&str; 2] = ["src/application/", "src/decision/patch.rs"];

#[test]
fn the_application_is_passed_typed_outside_application_and_the_patch_builder() {
    let mut found = Vec::new();
    for file in rust_files(&root().join("src")) {
        let relative = file
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if RAW_APPLICATION_ALLOWED
            .iter()
            .any(|allowed| relative.starts_with(allowed))
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for line in untyped_applications(&text) {
            found.push(format!("{relative}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "take `&Application` (application::app) instead of the JSON:\n{}",
        found.join("\n")
    );
}

#[test]
fn an_impl_block_is_found_in_code_and_not_in_tests() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.rs"), "impl Handler {\n}\n").unwrap();
    std::fs::write(
        dir.path().join("b.rs"),
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    impl Handler {\n    }\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("c.rs"), "impl HandlerError {\n}\n").unwrap();
    let found = files_implementing(dir.path(), "Handler");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("a.rs"));
}

#[test]
fn the_raw_application_check_finds_a_parameter_over_lines_and_skips_the_tests() {
    let text = "fn typed(app: &Application<'_>) {}\nfn raw(\n    app: &Value,\n) {}\nfn raw2(x: u8, application: &'a serde_json::Value) {}\n#[cfg(test)]\nmod tests {\n    fn fixture(app: &Value) {}\n}\n";
    assert_eq!(untyped_applications(text), [3, 5]);
}
