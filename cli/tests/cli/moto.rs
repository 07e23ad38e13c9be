//! `doctor` against moto, the AWS mock server from PyPI, whose answers follow botocore's
//! service models rather than our own stand-ins'. The deployment the template makes (the
//! stand-ins' `Deployment`, built from the transformed template) is created in moto with
//! boto3 (`scripts/moto_deployment.py`), then broken one way per case; each case asserts the
//! verdict and the fix.
//!
//! Where moto lacks what AWS has, the case stays on the stand-ins (`doctor.rs`) and the gap is
//! asserted here, so a moto that closes it shows up: EKS access entries are not implemented
//! (DescribeAccessEntry answers 404 "Not yet implemented"); DescribeCluster drops
//! `accessConfig` and hands out random text as the CA; a function's `State` is always
//! `Active`; ECR ignores paging; SQS stores a queue's `RedriveAllowPolicy` but refuses to
//! return it (`InvalidAttributeName`); no call can be refused to the caller.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use argocd_ecr_updater_standins::cloudformation::{TRANSFORMED_TEMPLATE, generated_name};
use argocd_ecr_updater_standins::deployment::Deployment;
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_argocd-ecr-updater-cli");
/// moto's default account, which every resource made without credentials of another lands in.
const ACCOUNT: &str = "123456789012";
const REGION: &str = "ap-northeast-2";

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// moto's server on a free loopback port, stopped when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts `.venv-moto/bin/moto_server`, which `./scripts/test` installs. Without it the test
    /// fails under `CI=true` or when the test script asked for it (`REQUIRE_MOTO`); elsewhere it
    /// says loudly that it checked nothing.
    fn start() -> Option<Self> {
        let server = root().join(".venv-moto/bin/moto_server");
        if !server.exists() {
            let required = std::env::var_os("REQUIRE_MOTO").is_some()
                || std::env::var("CI").is_ok_and(|ci| ci == "true");
            assert!(
                !required,
                "{} is missing: ./scripts/test installs moto[server] there",
                server.display()
            );
            eprintln!(
                "SKIPPED, NOTHING CHECKED: no .venv-moto with moto[server]; run ./scripts/test once to install it (CI=true makes this a failure)"
            );
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let moto = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        // Ready when it answers; a server that never does fails the test, not hangs it.
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "moto_server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(moto)
    }

    /// Makes `case` (the deployment and what else the case needs) with boto3, in a server
    /// that first forgets what the previous case made.
    fn create(&self, mut case: Value) -> Value {
        case["endpoint"] = json!(self.endpoint);
        let python = root().join(".venv-moto/bin/python");
        let mut child = Command::new(python)
            .arg(root().join("scripts/moto_deployment.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(case.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// `doctor --output json` against moto, as an operator with keys would run it. Downloads
    /// leave through a proxy nothing listens on, so the package check never depends on the
    /// machine's network.
    fn doctor(&self, function: &str) -> Vec<Value> {
        let closed = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
        drop(closed);
        let output = Command::new(BINARY)
            .env_clear()
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", REGION)
            .env("AWS_CONFIG_FILE", "/nonexistent/config")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("HTTPS_PROXY", &proxy)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .args(["doctor", "--output", "json", "--function", function])
            .args([
                "--alarm-topic",
                &format!("arn:aws:sns:{REGION}:{ACCOUNT}:argocd-ecr-updater-alarms"),
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&output.stderr)))
    }
}

/// The deployment the template makes, in moto's account.
fn deployment() -> Deployment {
    let template: Value = serde_json::from_str(TRANSFORMED_TEMPLATE).unwrap();
    Deployment::from_template(
        &template,
        ACCOUNT,
        REGION,
        &format!("arn:aws:iam::{ACCOUNT}:role/argocd-ecr-updater-role"),
        &[],
    )
}

fn rule(logical_id: &str) -> String {
    generated_name("argocd-ecr-updater", logical_id)
}

/// The failed checks, by name, with their detail and fix.
fn failures(checks: &[Value]) -> Vec<(String, String, String)> {
    let mut failed: Vec<(String, String, String)> = checks
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or_default().to_string();
            (generic(&text("name")), text("detail"), text("fix"))
        })
        .collect();
    failed.sort();
    failed
}

/// A check's name with what moto makes up anew each time (a subnet's ID) as a placeholder.
fn generic(name: &str) -> String {
    match name.split_once(' ') {
        Some((subnet, rest)) if subnet.starts_with("subnet-") => format!("<subnet> {rest}"),
        _ => name.to_string(),
    }
}

fn named<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    checks
        .iter()
        .find(|c| generic(c["name"].as_str().unwrap_or_default()) == name)
        .unwrap_or_else(|| panic!("no check {name}: {checks:#?}"))
}

/// Where moto differs from AWS, the checks that fail on moto's healthy deployment: its CA
/// data is random text, and it does not return the sweep queue's redrive allow policy.
const MOTO_GAPS: [&str; 2] = ["barun-dev endpoint and CA", "sweep queue redrive"];

/// One broken deployment: what it changes, and the checks that must fail beyond moto's gaps.
struct Case {
    name: &'static str,
    case: Value,
    fails: Vec<String>,
    /// (check, text its detail or fix holds)
    says: Vec<(String, &'static str)>,
}

#[test]
fn doctor_against_moto_finds_each_break_of_the_deployment_the_template_makes() {
    let Some(moto) = Moto::start() else { return };
    let healthy = deployment();
    let push = rule("FunctionEcrPush");
    let queue = generated_name("argocd-ecr-updater", "DeadLetterQueue");
    let with = |change: &dyn Fn(&mut Deployment)| {
        let mut d = healthy.clone();
        change(&mut d);
        json!({ "deployment": d })
    };
    let topic = format!("arn:aws:sns:{REGION}:{ACCOUNT}:argocd-ecr-updater-failures");
    let gone_secret =
        format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:git-deleted-AbCdEf");
    let rules: Vec<String> = healthy.rules.keys().cloned().collect();
    let cases = vec![
        Case {
            name: "the push rule's target removed",
            case: with(&|d| d.rule_mut("FunctionEcrPush").targets.clear()),
            fails: vec!["ECR push rule".into()],
            says: vec![("ECR push rule".into(), "no rule sends ECR pushes")],
        },
        Case {
            name: "the push rule disabled",
            case: with(&|d| d.rule_mut("FunctionEcrPush").enabled = false),
            fails: vec![push.clone()],
            says: vec![(push.clone(), "aws events enable-rule --name")],
        },
        Case {
            name: "the tracked repository deleted",
            case: with(&|d| d.repositories.clear()),
            fails: vec!["barun-dev-ecr".into()],
            says: vec![("barun-dev-ecr".into(), "aws ecr create-repository")],
        },
        Case {
            name: "events parked in the dead-letter queue",
            case: {
                let mut case = with(&|_| {});
                case["parked"] = json!(3);
                case
            },
            fails: vec![queue.clone()],
            says: vec![
                (queue.clone(), "3 event(s) parked"),
                (queue.clone(), "redrive --queue"),
            ],
        },
        Case {
            name: "the cluster deleted",
            case: {
                let mut case = with(&|_| {});
                case["cluster"] = json!(false);
                case
            },
            // Nothing of the cluster can be read, so only its own line fails.
            fails: vec!["barun-dev".into()],
            says: vec![("barun-dev".into(), "no such cluster")],
        },
        Case {
            name: "EventBridge's permissions to invoke the function removed",
            case: with(&|d| d.permissions.clear()),
            fails: rules
                .iter()
                .map(|r| format!("{r} invoke permission"))
                .collect(),
            says: vec![(
                format!("{push} invoke permission"),
                "aws lambda add-permission",
            )],
        },
        Case {
            name: "an SNS topic as the on-failure destination",
            case: with(&|d| d.on_failure = Some(topic.clone())),
            fails: vec![],
            says: vec![(
                "on-failure destination".into(),
                "publishes failed events to the SNS topic",
            )],
        },
        Case {
            name: "an SNS on-failure destination that is gone",
            case: {
                let mut case = with(&|d| d.on_failure = Some(topic.clone()));
                case["topic"] = json!(false);
                case
            },
            fails: vec!["on-failure destination".into()],
            says: vec![("on-failure destination".into(), "which is gone")],
        },
        Case {
            name: "the dead-letter queue's policy removed",
            case: with(&|d| d.queue_policies.clear()),
            fails: rules
                .iter()
                .map(|r| format!("{r} dead-letter queue"))
                .collect(),
            says: vec![(
                format!("{push} dead-letter queue"),
                "which has no queue policy",
            )],
        },
        // moto confirms every subscription as it is made, so a subscription awaiting
        // confirmation is tested against the stand-ins only (doctor.rs).
        // moto's Lambda answers VpcId vpc-123abc whatever its subnets: doctor takes the VPC
        // from the subnets (DescribeSubnets), as their interfaces are where the subnets are.
        Case {
            name: "a VPC function whose subnet goes out through a NAT gateway",
            case: {
                let mut case = with(&|_| {});
                case["vpc"] = json!("nat");
                case
            },
            fails: vec![],
            says: vec![
                ("security groups".into(), "HTTPS out to anywhere"),
                ("<subnet> way out".into(), "out through nat-"),
                (
                    "barun-dev network path".into(),
                    "public, through each subnet's way out",
                ),
            ],
        },
        Case {
            name: "a VPC function whose subnet routes to the internet gateway",
            case: {
                let mut case = with(&|_| {});
                case["vpc"] = json!("igw");
                case
            },
            fails: vec!["<subnet> way out".into(), "barun-dev network path".into()],
            says: vec![(
                "<subnet> way out".into(),
                "which a Lambda function cannot use",
            )],
        },
        Case {
            name: "the alarm topic deleted",
            case: {
                let mut case = with(&|_| {});
                case["alarm_topic"] = json!(false);
                case
            },
            fails: vec!["alarm topic".into()],
            says: vec![("alarm topic".into(), "does not exist")],
        },
        Case {
            name: "the sweep queue's mapping disabled",
            case: with(&|d| d.event_source_mappings[0].state = "Disabled".into()),
            fails: vec!["event source mapping".into()],
            says: vec![(
                "event source mapping".into(),
                "aws lambda update-event-source-mapping --uuid",
            )],
        },
        Case {
            name: "reserved concurrency no higher than the shards' maximum",
            case: with(&|d| d.reserved_concurrency = Some(2)),
            fails: vec!["concurrency".into()],
            says: vec![("concurrency".into(), "pushes wait behind shards")],
        },
        Case {
            name: "a deleted Git credentials secret",
            case: with(&|d| {
                d.environment
                    .insert("GIT_CREDENTIALS_SECRET_ARNS".into(), gone_secret.clone());
            }),
            fails: vec![gone_secret.clone()],
            says: vec![
                (gone_secret.clone(), "it does not exist"),
                (gone_secret.clone(), "create-secret"),
            ],
        },
        Case {
            name: "the dead-letter queue deleted",
            case: with(&|d| d.queues.retain(|q| !q.ends_with(&queue))),
            fails: rules
                .iter()
                .map(|r| format!("{r} dead-letter queue"))
                .chain([queue.clone(), "on-failure destination".into()])
                .collect(),
            says: vec![(queue.clone(), "aws sqs create-queue --queue-name")],
        },
    ];

    // The healthy deployment: only moto's gaps fail, each saying what moto left out.
    let made = moto.create(json!({ "deployment": healthy }));
    let function = made["function_arn"].as_str().unwrap().to_string();
    let checks = moto.doctor(&function);
    let failed: Vec<String> = failures(&checks).into_iter().map(|f| f.0).collect();
    assert_eq!(failed, MOTO_GAPS, "{checks:#?}");
    let mode = named(&checks, "barun-dev authentication mode");
    assert!(
        mode["detail"].as_str().unwrap().contains("no accessConfig"),
        "{mode:#}"
    );
    // moto's CA is random text: the case of a CA that does not decode, which must fail
    // rather than leave RBAC silently unchecked.
    let ca = named(&checks, "barun-dev endpoint and CA");
    assert!(
        ca["detail"].as_str().unwrap().contains("does not decode"),
        "{ca:#}"
    );
    // moto refuses to return RedriveAllowPolicy: the check says so as the call failing, not
    // as the policy missing.
    let redrive = named(&checks, "sweep queue redrive");
    assert!(
        redrive["detail"]
            .as_str()
            .unwrap()
            .contains("Unknown Attribute RedriveAllowPolicy"),
        "{redrive:#}"
    );
    for rule in &rules {
        for line in [
            rule.clone(),
            format!("{rule} dead-letter queue"),
            format!("{rule} invoke permission"),
        ] {
            assert_eq!(named(&checks, &line)["status"], "ok", "{line}: {checks:#?}");
        }
    }
    // The package lives on S3; its download fails through the closed proxy, and the check
    // says why without the presigned URL.
    let binary = named(&checks, "binary for arm64");
    assert_eq!(binary["status"], "skipped");
    let why = binary["detail"].as_str().unwrap();
    assert!(
        why.contains("error sending request")
            && why.len()
                > "cannot read the package: the download failed: error sending request".len(),
        "{why}"
    );
    assert!(!why.contains("amazonaws.com"), "{why}");

    // The cases in two halves, each on a server of its own at once: every case resets its
    // server first, so halves do not see each other's deployments.
    let second = Moto::start().expect("a second moto server, as the first started");
    let half = cases.len() / 2;
    let (first_half, second_half) = cases.split_at(half);
    std::thread::scope(|scope| {
        scope.spawn(|| run_cases(&moto, first_half));
        scope.spawn(|| run_cases(&second, second_half));
    });
}

/// Makes each case in `moto` and checks what doctor says of it.
fn run_cases(moto: &Moto, cases: &[Case]) {
    for case in cases {
        let made = moto.create(case.case.clone());
        let checks = moto.doctor(made["function_arn"].as_str().unwrap());
        let mut expected: Vec<String> = case
            .fails
            .iter()
            .cloned()
            .chain(MOTO_GAPS.iter().map(|g| g.to_string()))
            .collect();
        if case.name == "the cluster deleted" {
            expected.retain(|n| !n.starts_with("barun-dev "));
        }
        expected.sort();
        let failed: Vec<String> = failures(&checks).into_iter().map(|f| f.0).collect();
        assert_eq!(failed, expected, "{}: {checks:#?}", case.name);
        for (name, text) in &case.says {
            let check = named(&checks, name);
            let said = format!("{} {}", check["detail"], check["fix"]);
            assert!(
                said.contains(text),
                "{}: {name} should say {text}: {check:#}",
                case.name
            );
        }
    }
}
