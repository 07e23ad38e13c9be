//! The Kubernetes stand-in driven by a real client: `kubectl`, where it is installed, runs the
//! documented commands (docs/deploy.md) against it unchanged. A stand-in that only our own client has talked to
//! could agree with our client's mistakes; kubectl's discovery, content negotiation, tables
//! and access reviews cannot.

use crate::common::Scenario;
use std::path::Path;
use std::process::{Command, Output};

use argocd_ecr_updater_standins::fixtures::seed_image_updater;
use argocd_ecr_updater_standins::{Grant, image_updater_grants};

/// The kubectl these tests drive: `$KUBECTL`, else `kubectl` on the PATH. `./scripts/test`
/// installs a pinned one into `.venv` and points `KUBECTL` at it. Without one the tests fail,
/// since passing without the only outside client's verdict would claim more than was checked;
/// `SKIP_KUBECTL=1` skips them knowingly on a laptop, and is ignored under `CI=true`.
fn kubectl_program() -> Option<String> {
    let program = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let runs = Command::new(&program)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if runs {
        return Some(program);
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let skip_asked = std::env::var("SKIP_KUBECTL").is_ok_and(|v| v == "1");
    if skip_asked && !in_ci {
        eprintln!("SKIPPED: SKIP_KUBECTL=1 and no kubectl at {program:?}");
        return None;
    }
    panic!(
        "kubectl is required and {program:?} does not run: run ./scripts/test (it installs a \
         pinned kubectl into .venv), or set KUBECTL=/path/to/kubectl, or SKIP_KUBECTL=1 to skip \
         these tests knowingly outside CI"
    );
}

/// kubectl with no kubeconfig and a private cache, so nothing on this machine leaks in.
fn kubectl(program: &str, home: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .env_clear()
        .env("HOME", home)
        .env("KUBECONFIG", home.join("absent-kubeconfig"))
        .env("KUBECACHEDIR", home.join("cache"))
        .args(args)
        .output()
        .expect("kubectl runs")
}

struct Cluster {
    program: String,
    standins: Scenario,
    home: tempfile::TempDir,
    server: String,
    ca_file: String,
    token: String,
}

impl Cluster {
    async fn start(program: String) -> Self {
        let standins = Scenario::seeded_with_grants(
            [
                vec![
                    Grant::new(&["get", "list", "patch"], "argocd"),
                    Grant::on("applicationsets", &["get"], "argocd"),
                    // The function records Events; an operator lists and describes them.
                    Grant::on("events", &["create", "list"], "argocd"),
                ],
                image_updater_grants("argocd"),
            ]
            .concat(),
        )
        .await;
        standins
            .kube
            .insert_image_updater(seed_image_updater())
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let ca_file = home.path().join("ca.pem");
        std::fs::write(&ca_file, &standins.ca_pem).unwrap();
        let (token, _) = crate::common::token_source(&standins)
            .fresh()
            .await
            .unwrap();
        Self {
            program,
            server: standins.kube_endpoint(),
            standins,
            ca_file: ca_file.to_string_lossy().into_owned(),
            home,
            token,
        }
    }

    /// kubectl as the documented access check runs it: server, CA file and bearer token.
    fn run(&self, args: &[&str]) -> Output {
        let mut all = vec![
            "--server",
            &self.server,
            "--certificate-authority",
            &self.ca_file,
            "--token",
            &self.token,
        ];
        all.extend_from_slice(args);
        kubectl(&self.program, self.home.path(), &all)
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_gets_and_checks_access_against_the_stand_in_unchanged() {
    let Some(program) = kubectl_program() else {
        return;
    };
    let cluster = Cluster::start(program).await;

    let version = cluster.run(&["version", "-o", "json"]);
    assert!(
        stdout(&version).contains("\"serverVersion\""),
        "{}",
        stderr(&version)
    );

    let names = cluster.run(&["get", "applications", "-n", "argocd", "-o", "name"]);
    assert!(names.status.success(), "{}", stderr(&names));
    assert_eq!(
        stdout(&names).trim(),
        "application.argoproj.io/aws-pipeline-test"
    );

    // The default table output needs discovery, negotiation and creationTimestamp (AGE).
    let table = cluster.run(&["get", "apps", "-n", "argocd"]);
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    assert!(text.contains("NAME") && text.contains("AGE"), "{text}");
    assert!(text.contains("aws-pipeline-test"), "{text}");
    assert!(!text.contains("<unknown>"), "{text}");

    let one = cluster.run(&[
        "get",
        "application",
        "aws-pipeline-test",
        "-n",
        "argocd",
        "-o",
        "jsonpath={.spec.source.helm.parameters[1].value}",
    ]);
    assert_eq!(stdout(&one), "20250825-120000", "{}", stderr(&one));

    let updaters = cluster.run(&["get", "imageupdaters", "-n", "argocd", "-o", "name"]);
    assert_eq!(
        stdout(&updaters).trim(),
        "imageupdater.argocd-image-updater.argoproj.io/invitation",
        "{}",
        stderr(&updaters)
    );

    let missing = cluster.run(&["get", "application", "nope", "-n", "argocd"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("\"nope\" not found"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_access_check_answers_yes_and_no_from_the_rbac_grants() {
    let Some(program) = kubectl_program() else {
        return;
    };
    let cluster = Cluster::start(program).await;
    let allowed = cluster.run(&[
        "auth",
        "can-i",
        "patch",
        "applications.argoproj.io",
        "-n",
        "argocd",
    ]);
    assert_eq!(stdout(&allowed).trim(), "yes", "{}", stderr(&allowed));
    assert!(allowed.status.success());
    let denied = cluster.run(&[
        "auth",
        "can-i",
        "patch",
        "applications.argoproj.io",
        "-n",
        "team-b",
    ]);
    assert_eq!(stdout(&denied).trim(), "no", "{}", stderr(&denied));
    assert!(!denied.status.success());
    let status = cluster.run(&[
        "auth",
        "can-i",
        "patch",
        "imageupdaters.argocd-image-updater.argoproj.io",
        "--subresource=status",
        "-n",
        "argocd",
    ]);
    assert_eq!(stdout(&status).trim(), "yes", "{}", stderr(&status));
    let appsets = cluster.run(&[
        "auth",
        "can-i",
        "get",
        "applicationsets.argoproj.io",
        "-n",
        "argocd",
    ]);
    assert_eq!(stdout(&appsets).trim(), "yes", "{}", stderr(&appsets));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_wrong_token_is_told_it_is_unauthorized() {
    let Some(program) = kubectl_program() else {
        return;
    };
    let mut cluster = Cluster::start(program).await;
    cluster.token = "k8s-aws-v1.not-a-token".into();
    let output = cluster.run(&["get", "applications", "-n", "argocd"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("Unauthorized"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_and_describes_the_events_the_function_records() {
    let Some(program) = kubectl_program() else {
        return;
    };
    let cluster = Cluster::start(program).await;
    cluster
        .standins
        .handler(&[])
        .handle(&crate::common::event("push-date-tag.json"), None)
        .await
        .unwrap();
    assert_eq!(cluster.standins.kube.events().len(), 1);

    // No server-side table for Events here: kubectl prints its fallback, NAME and AGE.
    let listed = cluster.run(&["get", "events", "-n", "argocd"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(text.contains("aws-pipeline-test."), "{text}");
    assert!(!text.contains("<unknown>"), "{text}");

    let selected = cluster.run(&[
        "get",
        "events",
        "-n",
        "argocd",
        "--field-selector",
        "involvedObject.name=aws-pipeline-test,type=Normal",
        "-o",
        "jsonpath={.items[*].reason}",
    ]);
    assert_eq!(stdout(&selected), "ImagesUpdated", "{}", stderr(&selected));
    let none = cluster.run(&[
        "get",
        "events",
        "-n",
        "argocd",
        "--field-selector",
        "involvedObject.name=someone-else",
        "-o",
        "name",
    ]);
    assert!(none.status.success(), "{}", stderr(&none));
    assert_eq!(stdout(&none).trim(), "");
    let unsupported = cluster.run(&[
        "get",
        "events",
        "-n",
        "argocd",
        "--field-selector",
        "color=red",
    ]);
    assert!(!unsupported.status.success());
    assert!(
        stderr(&unsupported).contains("field label not supported: color"),
        "{}",
        stderr(&unsupported)
    );

    let described = cluster.run(&[
        "describe",
        "application",
        "aws-pipeline-test",
        "-n",
        "argocd",
    ]);
    assert!(described.status.success(), "{}", stderr(&described));
    let text = stdout(&described);
    assert!(
        text.contains("Events:") && text.contains("ImagesUpdated"),
        "{text}"
    );

    // Listing is authorized like any list: not in a namespace the identity has no grant in.
    let denied = cluster.run(&["get", "events", "-n", "team-b"]);
    assert!(!denied.status.success());
    assert!(stderr(&denied).contains("forbidden"), "{}", stderr(&denied));
}

/// What the stand-ins binary prints for a person: the function's token may do only what
/// `deploy/rbac.yaml` grants (no reading Events), the operator's is a cluster admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_reads_events_the_functions_identity_may_not() {
    let Some(program) = kubectl_program() else {
        return;
    };
    let mut cluster = Cluster::start(program).await;
    let standins = Scenario::seeded().await;
    standins
        .handler(&[])
        .handle(&crate::common::event("push-date-tag.json"), None)
        .await
        .unwrap();
    std::fs::write(&cluster.ca_file, &standins.ca_pem).unwrap();
    cluster.server = standins.kube_endpoint();
    let token = |credentials: aws_credential_types::Credentials| {
        std::sync::Arc::new(argocd_ecr_updater::cluster::eks_auth::IamTokenSource::new(
            standins.options.cluster_name.clone(),
            standins.options.region.clone(),
            aws_credential_types::provider::SharedCredentialsProvider::new(credentials),
            std::sync::Arc::new(argocd_ecr_updater::cluster::eks_auth::SystemClock),
        ))
    };
    cluster.token = token(crate::common::function_credentials())
        .fresh()
        .await
        .unwrap()
        .0;
    let refused = cluster.run(&["get", "events", "-n", "argocd"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("Forbidden"),
        "{}",
        stderr(&refused)
    );
    let operator = aws_credential_types::Credentials::new(
        argocd_ecr_updater_standins::OPERATOR_ACCESS_KEY,
        argocd_ecr_updater_standins::OPERATOR_SECRET_KEY,
        None,
        None,
        "operator",
    );
    cluster.token = token(operator).fresh().await.unwrap().0;
    let listed = cluster.run(&["get", "events", "-n", "argocd", "-o", "name"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(
        stdout(&listed).contains("aws-pipeline-test."),
        "{}",
        stdout(&listed)
    );
    let described = cluster.run(&[
        "describe",
        "applications.argoproj.io",
        "aws-pipeline-test",
        "-n",
        "argocd",
    ]);
    assert!(described.status.success(), "{}", stderr(&described));
    assert!(
        stdout(&described).contains("ImagesUpdated"),
        "{}",
        stdout(&described)
    );
}
