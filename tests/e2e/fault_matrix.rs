//! Every fault the stand-ins can inject, against the seed push. Each must end in one of two
//! outcomes: retried and updated, or the invocation failed with a clear message. Never a
//! partial or wrong write: the Application is either exactly as before or exactly updated.

use std::time::Duration;

use crate::common::{Scenario, event};
use argocd_ecr_updater::pipeline::error::HandlerError;
use argocd_ecr_updater::report::Action;
use argocd_ecr_updater_standins::{FaultAction, Route, tls};
use serde_json::Value;

#[derive(Debug)]
enum Expect {
    /// Absorbed by retries: the tag moved.
    Updated,
    /// The invocation failed, and its message contains this.
    Fails(&'static str),
}

struct Case {
    name: &'static str,
    route: Route,
    count: u32,
    action: FaultAction,
    expect: Expect,
}

fn status(code: u16, retry_after: Option<u64>) -> FaultAction {
    FaultAction::Status { code, retry_after }
}

fn cases() -> Vec<Case> {
    let patch = || Route::kube("PATCH", "aws-pipeline-test");
    let get = || Route::kube("GET", "/applications/aws-pipeline-test");
    let list = || Route::kube("GET", "/namespaces/argocd/applications");
    vec![
        Case {
            name: "409 once on PATCH",
            route: patch(),
            count: 1,
            action: status(409, None),
            expect: Expect::Updated,
        },
        Case {
            name: "409 storm on PATCH",
            route: patch(),
            count: 100,
            action: status(409, None),
            expect: Expect::Fails("conflicts in a row"),
        },
        Case {
            name: "429 with Retry-After on GET",
            route: get(),
            count: 1,
            action: status(429, Some(1)),
            expect: Expect::Updated,
        },
        Case {
            name: "429 on every LIST",
            route: list(),
            count: 100,
            action: status(429, Some(0)),
            expect: Expect::Fails("throttling (429)"),
        },
        Case {
            name: "500 twice on PATCH",
            route: patch(),
            count: 2,
            action: status(500, None),
            expect: Expect::Updated,
        },
        Case {
            name: "503 on every PATCH",
            route: patch(),
            count: 100,
            action: status(503, None),
            expect: Expect::Fails("failed (503)"),
        },
        Case {
            name: "dropped connection on GET",
            route: get(),
            count: 1,
            action: FaultAction::Drop,
            expect: Expect::Updated,
        },
        Case {
            name: "dropped connection on every PATCH",
            route: patch(),
            count: 100,
            action: FaultAction::Drop,
            expect: Expect::Fails("connect"),
        },
        Case {
            name: "delay past the request timeout on PATCH",
            route: patch(),
            count: 100,
            action: FaultAction::Delay(Duration::from_secs(3)),
            expect: Expect::Fails("did not answer in time"),
        },
        Case {
            name: "delay within the timeout on LIST",
            route: list(),
            count: 1,
            action: FaultAction::Delay(Duration::from_millis(300)),
            expect: Expect::Updated,
        },
        Case {
            name: "ECR throttling once",
            route: Route::ecr("DescribeImages"),
            count: 1,
            action: status(400, None),
            expect: Expect::Updated,
        },
        Case {
            name: "ECR throttling throughout",
            route: Route::ecr("DescribeImages"),
            count: 100,
            action: status(400, None),
            expect: Expect::Fails("ThrottlingException"),
        },
        Case {
            name: "EKS DescribeCluster failing",
            route: Route::eks(),
            count: 100,
            action: status(500, None),
            expect: Expect::Fails("eks:DescribeCluster"),
        },
    ]
}

fn unchanged_or_exactly_updated(before: &Value, after: &Value) {
    let tag = |app: &Value| {
        app["spec"]["source"]["helm"]["parameters"][1]["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut normalised = after.clone();
    if tag(after) == "20250825-153012" {
        // Exactly the update: our two entries and our annotation, nothing else.
        normalised["spec"]["source"]["helm"]["parameters"] =
            before["spec"]["source"]["helm"]["parameters"].clone();
        normalised["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("argocd-ecr-updater.io/last-update");
        // The write's own traces: a new version, and our entry in the managed fields.
        for key in ["resourceVersion", "generation", "managedFields"] {
            normalised["metadata"][key] = before["metadata"][key].clone();
        }
    } else {
        assert_eq!(tag(after), "20250825-120000");
    }
    assert_eq!(&normalised, before);
}

#[tokio::test]
async fn every_fault_is_absorbed_or_fails_the_invocation_clearly_and_never_writes_wrong() {
    for case in cases() {
        let standins = Scenario::seeded().await;
        let before = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
        standins.shared.inject(case.route, case.count, case.action);
        let h = standins.handler(&[
            ("KUBE_REQUEST_TIMEOUT_MS", "1000"),
            ("CONFLICT_RETRIES", "3"),
        ]);
        let outcome = h.handle(&event("push-date-tag.json"), None).await;
        let after = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
        unchanged_or_exactly_updated(&before, &after);
        match (&case.expect, outcome) {
            (Expect::Updated, Ok(report)) => {
                assert_eq!(
                    report.entries[0].action,
                    Action::Updated,
                    "{}: {:?}",
                    case.name,
                    report.entries
                );
            }
            (Expect::Fails(text), Err(error)) => {
                let message = error.to_string();
                assert!(message.contains(text), "{}: {message}", case.name);
                assert!(
                    error.error_type().starts_with("Retryable."),
                    "{}: {}",
                    case.name,
                    error.error_type()
                );
                if let HandlerError::Targets { report, .. } = &error {
                    assert!(
                        report
                            .entries
                            .iter()
                            .all(|e| e.action == Action::Failed && e.retryable),
                        "{}",
                        case.name
                    );
                }
            }
            (expect, outcome) => panic!("{}: expected {expect:?}, got {outcome:?}", case.name),
        }
    }
}

#[tokio::test]
async fn expired_and_rejected_tokens_fail_the_invocation_with_the_access_fix() {
    for (name, setup) in [
        (
            "every token rejected",
            Box::new(|s: &Scenario| s.shared.reject_next_tokens(100)) as Box<dyn Fn(&Scenario)>,
        ),
        (
            "server clock 20 minutes ahead",
            Box::new(|s: &Scenario| s.shared.skew_clock(20 * 60)),
        ),
    ] {
        let standins = Scenario::seeded().await;
        setup(&standins);
        let error = standins
            .handler(&[])
            .handle(&event("push-date-tag.json"), None)
            .await
            .unwrap_err();
        assert_eq!(error.error_type(), "Retryable.ListApplications", "{name}");
        assert!(
            error.to_string().contains("access entry"),
            "{name}: {error}"
        );
    }
    // One rejected token is renewed and the push goes through.
    let standins = Scenario::seeded().await;
    standins.shared.reject_next_tokens(1);
    let report = standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    assert_eq!(report.entries[0].action, Action::Updated);
}

#[tokio::test]
async fn a_wrong_ca_or_an_unresolvable_endpoint_fails_the_invocation_naming_the_setting() {
    let standins = Scenario::seeded().await;
    let other_ca = argocd_ecr_updater_standins::fixtures::kube_ca_data(
        &tls::cluster_tls(&["127.0.0.1"]).unwrap().ca_pem,
    );
    let endpoint = standins.kube_endpoint();
    let h = standins.handler(&[
        ("KUBE_API_ENDPOINT", &endpoint),
        ("KUBE_CA_DATA", &other_ca),
    ]);
    let error = h
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("TLS with the API server failed"),
        "{error}"
    );
    assert!(error.to_string().contains("KUBE_CA_DATA"), "{error}");

    let right_ca = argocd_ecr_updater_standins::fixtures::kube_ca_data(&standins.ca_pem);
    let h = standins.handler(&[
        (
            "KUBE_API_ENDPOINT",
            "https://cluster.does-not-exist.invalid",
        ),
        ("KUBE_CA_DATA", &right_ca),
    ]);
    let error = h
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    assert_eq!(error.error_type(), "Retryable.ListApplications");
    assert!(error.to_string().contains("could not connect"), "{error}");
    assert_eq!(
        standins.kube.get("argocd", "aws-pipeline-test").unwrap()["metadata"]["resourceVersion"],
        "1"
    );
}

#[tokio::test]
async fn a_redirect_is_never_followed_so_no_credential_leaves_for_the_address_it_names() {
    // The Kubernetes API: every request carries the cluster's bearer token.
    let standins = Scenario::seeded().await;
    let before = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    let trap = format!("{}/captured", standins.kube_endpoint());
    standins.shared.inject(
        Route::kube("GET", "/applications"),
        100,
        FaultAction::Redirect { location: trap },
    );
    let error = standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("redirect"), "{error}");
    assert!(error.to_string().contains("KUBE_API_ENDPOINT"), "{error}");
    assert!(standins.shared.count(|r| r.status == 307) > 0);
    assert_eq!(
        standins.shared.count(|r| r.path.contains("/captured")),
        0,
        "the redirect was followed"
    );
    let after = standins.kube.get("argocd", "aws-pipeline-test").unwrap();
    unchanged_or_exactly_updated(&before, &after);

    // AWS: a signed request carries the session token.
    let standins = Scenario::seeded().await;
    let trap = format!("{}/captured", standins.aws_endpoint());
    standins.shared.inject(
        Route::ecr("DescribeImages"),
        100,
        FaultAction::Redirect { location: trap },
    );
    let outcome = standins
        .handler(&[])
        .handle(&event("push-date-tag.json"), None)
        .await;
    // Not followed, the redirect is a failed ECR call: retried by AWS, never an update.
    let Err(HandlerError::Targets { summary, .. }) = outcome else {
        panic!("expected the invocation to fail retryably, got {outcome:?}");
    };
    assert!(
        summary.contains("ECR DescribeImages") && summary.contains("may succeed on retry"),
        "{summary}"
    );
    assert!(
        standins.shared.count(|r| r.status == 307) > 0,
        "the redirect was never answered, so nothing was tested"
    );
    assert_eq!(
        standins.shared.count(|r| r.path.contains("/captured")),
        0,
        "the AWS client followed the redirect"
    );
}
