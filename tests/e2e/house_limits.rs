//! The limits the house holds, checked on every run rather than by a reviewer's count: no
//! function over 120 lines outside tests, no `too_many_arguments` allowance, at most 12 files
//! flat in `src/`, the README under 10 KB and docs/development.md under 15 KB. The source is
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
        if !signature || trimmed.ends_with(';') {
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
        "pub(crate) async fn long() {{\n{body}}}\n\nfn short() {{\n    1\n}}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n"
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
    for (file, limit) in [("README.md", 10 * 1024), ("docs/development.md", 15 * 1024)] {
        let size = std::fs::metadata(root().join(file)).unwrap().len();
        assert!(
            size < limit,
            "{file} is {size} bytes, over {limit}: link out to docs/"
        );
    }
}
