//! The `select` subcommand, run as the compiled CLI a user runs.

use std::io::Write;
use std::process::{Command, Stdio};

fn select(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_argocd-ecr-updater-cli"))
        .arg("select")
        .args(args)
        .args(["--tags-file", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // With bad arguments the command exits before reading its input: the pipe may be closed
    // by then, which is not the failure under test.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => panic!("writing the tags: {e}"),
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn select_prints_the_best_tag_as_json_and_exits_zero() {
    let (code, stdout, _) = select(
        &["--strategy", "semver", "--constraint", "^1.0"],
        "0.9\n1.0.1\n1.1.2\n2.0.3\n",
    );
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["selected"], "1.1.2");
    assert_eq!(json["considered"], 4);
}

#[test]
fn select_prints_null_when_no_tag_is_eligible() {
    let (code, stdout, _) = select(
        &[
            "--strategy",
            "latest",
            "--allow-tags",
            "regexp:^[0-9]{8}-[0-9]{6}$",
        ],
        "latest\t2025-08-25T12:00:00Z\n",
    );
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(json["selected"].is_null());
}

#[test]
fn select_rejects_bad_input_on_stderr_with_exit_code_two() {
    for (args, stdin, expected) in [
        (
            vec!["--strategy", "fastest"],
            "1.0\n",
            "unknown update strategy",
        ),
        (
            vec!["--strategy", "semver", "--constraint", "latest"],
            "1.0\n",
            "invalid semver constraint",
        ),
        (
            vec!["--strategy", "semver", "--allow-tags", "regexp:("],
            "1.0\n",
            "does not compile",
        ),
        (vec!["--strategy", "semver"], "1.0\tnot-a-time\n", "line 1"),
    ] {
        let (code, stdout, stderr) = select(&args, stdin);
        assert_eq!(code, 2, "{args:?}");
        assert!(stdout.is_empty());
        assert!(stderr.contains(expected), "{stderr}");
    }
}
