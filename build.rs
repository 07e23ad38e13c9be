//! Records the git commit the binary is built from, for `--version` and the cold-start log
//! line, so a deployed function says what it is. Outside a git checkout it says `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    // `git status` otherwise refreshes and rewrites the index it reads, which is one of the
    // files this script reruns on: the next cargo command would run it, and rebuild the
    // crate and everything on top of it, for nothing.
    let output = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|status| !status.is_empty());
    let suffix = if dirty { "-dirty" } else { "" };
    println!("cargo:rustc-env=GIT_COMMIT={commit}{suffix}");
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{reference}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
