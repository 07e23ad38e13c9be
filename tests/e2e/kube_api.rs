//! The Kubernetes client against the API-server stand-in, over real TLS: what the function
//! relies on (metadata-only pagination, patch semantics, optimistic concurrency, schema
//! validation, typed errors) and the stand-in's fidelity on each point.

use std::time::Duration;

use crate::common::{Scenario, TIMEOUTS, event, kube_client, token_source};
use argocd_ecr_updater::cluster::kube::{KubeClient, KubeError, ListOptions, Patch};
use argocd_ecr_updater::config::ClusterAccess;
use argocd_ecr_updater_standins::fixtures::image_updater;
use argocd_ecr_updater_standins::{
    FaultAction, Grant, Options, Route, Service, function_identity, tls,
};
use serde_json::{Value, json};

fn app(namespace: &str, name: &str, labels: Value, image_list: Option<&str>) -> Value {
    let mut annotations =
        json!({"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(2000)});
    if let Some(list) = image_list {
        annotations["argocd-image-updater.argoproj.io/image-list"] = json!(list);
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"},
                 "source": {"repoURL": "https://example.com/repo.git", "path": "chart",
                            "helm": {"parameters": [{"name": "image.tag", "value": "1.0.0", "forceString": true}],
                                     "valuesObject": {}}}},
        "status": {"sourceType": "Helm", "summary": {"images": ["r.example.com/web:1.0.0"]}}
    })
}

fn list_options(label_selector: Option<&str>, page_size: u32) -> ListOptions<'_> {
    ListOptions {
        label_selector,
        page_size,
        naming: None,
    }
}

async fn standins_with(options: Options, apps: usize) -> Scenario {
    let standins = Scenario::start(options).await;
    for i in 0..apps {
        let labels = if i % 2 == 0 {
            json!({"team": "a"})
        } else {
            json!({"team": "b"})
        };
        let list = (i % 3 == 0).then_some("r.example.com/web");
        standins
            .kube
            .insert(app("argocd", &format!("app-{i:03}"), labels, list))
            .unwrap();
    }
    standins
}

#[tokio::test]
async fn metadata_only_lists_are_paginated_and_carry_only_our_annotations() {
    let standins = standins_with(Options::default(), 23).await;
    let client = kube_client(&standins);
    let (kept, stats) = client
        .list_application_metadata("argocd", list_options(None, 5), |m| {
            m.annotations
                .contains_key("argocd-image-updater.argoproj.io/image-list")
        })
        .await
        .unwrap();
    assert_eq!(stats.pages, 5);
    assert_eq!(stats.seen, 23);
    assert_eq!(kept.len(), 8);
    assert!(
        kept.iter()
            .all(|m| m.annotations.len() == 1 && !m.resource_version.is_empty())
    );
    let lists: Vec<_> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .collect();
    assert_eq!(lists.len(), 5);
    assert!(
        lists
            .iter()
            .all(|r| r.accept.contains("as=PartialObjectMetadataList")
                && r.query.contains("limit=5"))
    );
    assert!(lists[1..].iter().all(|r| r.query.contains("continue=")));
}

#[tokio::test]
async fn label_selectors_narrow_the_list() {
    let standins = standins_with(Options::default(), 10).await;
    let client = kube_client(&standins);
    let scope = "argocd";
    let (kept, _) = client
        .list_application_metadata(scope, list_options(Some("team=a"), 100), |_| true)
        .await
        .unwrap();
    assert_eq!(kept.len(), 5);
    let (kept, _) = client
        .list_application_metadata(scope, list_options(Some("team!=a,team"), 100), |_| true)
        .await
        .unwrap();
    assert_eq!(kept.len(), 5);
    assert!(kept.iter().all(|m| m.name.ends_with('1')
        || m.name.ends_with('3')
        || m.name.ends_with('5')
        || m.name.ends_with('7')
        || m.name.ends_with('9')));
}

#[tokio::test]
async fn listing_all_namespaces_needs_a_cluster_wide_grant() {
    let standins = standins_with(Options::default(), 2).await;
    let client = kube_client(&standins);
    let error = client
        .list_application_metadata("", list_options(None, 100), |_| true)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            KubeError::ForbiddenOther { .. } | KubeError::Forbidden { .. }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("deploy/rbac.yaml"), "{error}");

    let options = Options {
        identities: vec![function_identity(vec![Grant::new(
            &["get", "list", "patch"],
            "*",
        )])],
        ..Options::default()
    };
    let standins = standins_with(options, 2).await;
    standins
        .kube
        .insert(app("team-ns", "other", json!({}), None))
        .unwrap();
    let (kept, _) = kube_client(&standins)
        .list_application_metadata("", list_options(None, 100), |_| true)
        .await
        .unwrap();
    assert_eq!(kept.len(), 3);
}

#[tokio::test]
async fn a_403_names_the_role_the_verb_and_the_namespace() {
    let options = Options {
        identities: vec![function_identity(vec![Grant::new(
            &["get", "list"],
            "argocd",
        )])],
        ..Options::default()
    };
    let standins = standins_with(options, 1).await;
    let error = kube_client(&standins)
        .patch_application(
            "argocd",
            "app-000",
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap_err();
    assert!(error.is_retryable());
    let message = error.to_string();
    assert!(
        message.contains(argocd_ecr_updater_standins::FUNCTION_ROLE_ARN),
        "{message}"
    );
    assert!(
        message.contains("may not patch applications in namespace \"argocd\""),
        "{message}"
    );
}

#[tokio::test]
async fn merge_patch_with_a_stale_resource_version_is_a_conflict() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let before = client.get_application("argocd", "app-000").await.unwrap();
    let rv = before["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    standins
        .kube
        .edit("argocd", "app-000", |a| {
            a["metadata"]["labels"]["edited"] = json!("yes")
        })
        .unwrap();
    let stale =
        Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "spec": {"project": "other"}}));
    let error = client
        .patch_application("argocd", "app-000", &stale)
        .await
        .unwrap_err();
    assert!(matches!(error, KubeError::Conflict { .. }), "{error}");
    assert_eq!(
        standins.kube.get("argocd", "app-000").unwrap()["spec"]["project"],
        "default"
    );
}

/// Patches and reads the Application back: the client drops the server's answer to a PATCH.
async fn patched(client: &KubeClient, namespace: &str, name: &str, patch: &Patch) -> Value {
    client
        .patch_application(namespace, name, patch)
        .await
        .unwrap();
    client.get_application(namespace, name).await.unwrap()
}

#[tokio::test]
async fn writes_bump_resource_version_and_generation_only_when_spec_changes() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let before = client.get_application("argocd", "app-000").await.unwrap();
    let after_labels = patched(
        &client,
        "argocd",
        "app-000",
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await;
    assert_ne!(
        after_labels["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(
        after_labels["metadata"]["generation"],
        before["metadata"]["generation"]
    );
    let after_spec = patched(
        &client,
        "argocd",
        "app-000",
        &Patch::Merge(json!({"spec": {"project": "p2"}})),
    )
    .await;
    assert_eq!(after_spec["metadata"]["generation"], json!(2));
}

#[tokio::test]
async fn a_failed_json_patch_test_is_422_and_changes_nothing() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let patch = Patch::Json(json!([
        {"op": "replace", "path": "/spec/project", "value": "changed"},
        {"op": "test", "path": "/spec/source/helm/parameters/0/value", "value": "0.9.0"}
    ]));
    let error = client
        .patch_application("argocd", "app-000", &patch)
        .await
        .unwrap_err();
    assert!(matches!(error, KubeError::Invalid { .. }), "{error}");
    assert_eq!(
        standins.kube.get("argocd", "app-000").unwrap()["spec"]["project"],
        "default"
    );
    let missing = Patch::Json(json!([{"op": "replace", "path": "/spec/nope/deeper", "value": 1}]));
    assert!(matches!(
        client
            .patch_application("argocd", "app-000", &missing)
            .await
            .unwrap_err(),
        KubeError::Invalid { .. }
    ));
    let malformed = Patch::Json(json!([{"op": "frobnicate", "path": "/spec"}]));
    assert!(matches!(
        client
            .patch_application("argocd", "app-000", &malformed)
            .await
            .unwrap_err(),
        KubeError::BadRequest { code: 400, .. }
    ));
}

#[tokio::test]
async fn the_crd_schema_rejects_force_string_as_a_string() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let patch = Patch::Json(json!([
        {"op": "replace", "path": "/spec/source/helm/parameters/0/forceString", "value": "true"}
    ]));
    let error = client
        .patch_application("argocd", "app-000", &patch)
        .await
        .unwrap_err();
    match &error {
        KubeError::Invalid {
            message,
            validation,
        } => {
            assert!(
                message.contains("spec.source.helm.parameters[0].forceString"),
                "{message}"
            );
            assert!(
                validation,
                "a schema refusal is told apart from a failed test"
            );
        }
        other => panic!("expected 422, got {other}"),
    }
    let no_destination = Patch::Merge(json!({"spec": {"destination": null}}));
    assert!(matches!(
        client
            .patch_application("argocd", "app-000", &no_destination)
            .await
            .unwrap_err(),
        KubeError::Invalid { .. }
    ));
}

/// RFC 7386 section 3's example, applied under `valuesObject`, which the CRD leaves free-form.
#[tokio::test]
async fn merge_patch_follows_the_rfc_7386_example() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let target = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
                        "tags": ["example", "sample"], "content": "This will be unchanged"});
    let rfc_patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890",
                           "author": {"familyName": null}, "tags": ["example"]});
    let expected = json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
                          "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"});
    client
        .patch_application(
            "argocd",
            "app-000",
            &Patch::Merge(json!({"spec": {"source": {"helm": {"valuesObject": target}}}})),
        )
        .await
        .unwrap();
    let after = patched(
        &client,
        "argocd",
        "app-000",
        &Patch::Merge(json!({"spec": {"source": {"helm": {"valuesObject": rfc_patch}}}})),
    )
    .await;
    assert_eq!(after["spec"]["source"]["helm"]["valuesObject"], expected);
    // Lists are replaced whole: the parameters list is gone but for what the patch sends.
    let replaced = patched(
        &client,
        "argocd",
        "app-000",
        &Patch::Merge(json!({"spec": {"source": {"helm": {"parameters": [{"name": "only"}]}}}})),
    )
    .await;
    assert_eq!(
        replaced["spec"]["source"]["helm"]["parameters"],
        json!([{"name": "only"}])
    );
}

/// RFC 6902 appendix A's examples (A.1 add, A.4 remove, A.8 test, A.10 add nested, A.16 array
/// element), applied under `valuesObject`.
#[tokio::test]
async fn json_patch_follows_the_rfc_6902_examples() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let base = "/spec/source/helm/valuesObject";
    let cases: Vec<(Value, Value, Value)> = vec![
        (
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/baz", "value": "qux"}]),
            json!({"baz": "qux", "foo": "bar"}),
        ),
        (
            json!({"baz": "qux", "foo": "bar"}),
            json!([{"op": "remove", "path": "/baz"}]),
            json!({"foo": "bar"}),
        ),
        (
            json!({"baz": "qux", "foo": ["a", 2, "c"]}),
            json!([{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}]),
            json!({"baz": "qux", "foo": ["a", 2, "c"]}),
        ),
        (
            json!({"foo": "bar"}),
            json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}]),
            json!({"foo": "bar", "child": {"grandchild": {}}}),
        ),
        (
            json!({"foo": ["bar"]}),
            json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]),
            json!({"foo": ["bar", ["abc", "def"]]}),
        ),
    ];
    for (document, ops, expected) in cases {
        client
            .patch_application(
                "argocd",
                "app-000",
                &Patch::Json(json!([{"op": "replace", "path": base, "value": document}])),
            )
            .await
            .unwrap();
        let prefixed: Vec<Value> = ops
            .as_array()
            .unwrap()
            .iter()
            .map(|op| {
                let mut op = op.clone();
                op["path"] = json!(format!("{base}{}", op["path"].as_str().unwrap()));
                op
            })
            .collect();
        let after = patched(&client, "argocd", "app-000", &Patch::Json(json!(prefixed))).await;
        assert_eq!(
            after["spec"]["source"]["helm"]["valuesObject"], expected,
            "{ops}"
        );
    }
    // A.9: a failed test.
    let failing =
        Patch::Json(json!([{"op": "test", "path": format!("{base}/foo/0"), "value": "nope"}]));
    assert!(matches!(
        client
            .patch_application("argocd", "app-000", &failing)
            .await
            .unwrap_err(),
        KubeError::Invalid { .. }
    ));
}

#[tokio::test]
async fn strategic_merge_patch_is_unsupported_for_custom_resources() {
    let standins = standins_with(Options::default(), 1).await;
    let token = token_source(&standins).fresh().await.unwrap().0;
    let client = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(standins.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let response = client
        .patch(format!(
            "{}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/app-000",
            standins.kube_endpoint()
        ))
        .bearer_auth(token)
        .header("content-type", "application/strategic-merge-patch+json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 415);
}

#[tokio::test]
async fn a_rejected_token_is_renewed_once_and_the_request_succeeds() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    client.get_application("argocd", "app-000").await.unwrap();
    standins.shared.reject_next_tokens(1);
    client.get_application("argocd", "app-000").await.unwrap();
    standins.shared.reject_next_tokens(2);
    let error = client
        .get_application("argocd", "app-000")
        .await
        .unwrap_err();
    assert!(matches!(error, KubeError::Unauthorized { .. }), "{error}");
    assert!(error.to_string().contains("access entry"));
}

#[tokio::test]
async fn a_token_for_another_cluster_or_a_skewed_clock_is_refused() {
    let standins = standins_with(
        Options {
            cluster_name: "other".into(),
            ..Options::default()
        },
        1,
    )
    .await;
    let access = ClusterAccess {
        endpoint: standins.kube_endpoint(),
        ca_pem: standins.ca_pem.clone().into_bytes(),
    };
    // token_source signs for the stand-in's cluster name; sign for a different one instead.
    let wrong = std::sync::Arc::new(argocd_ecr_updater::cluster::eks_auth::IamTokenSource::new(
        "barun-dev",
        "ap-northeast-2",
        aws_credential_types::provider::SharedCredentialsProvider::new(
            crate::common::function_credentials(),
        ),
        std::sync::Arc::new(argocd_ecr_updater::cluster::eks_auth::SystemClock),
    ));
    let client = KubeClient::new(&access, wrong, TIMEOUTS).unwrap();
    assert!(matches!(
        client
            .get_application("argocd", "app-000")
            .await
            .unwrap_err(),
        KubeError::Unauthorized { .. }
    ));

    let standins = standins_with(Options::default(), 1).await;
    standins.shared.skew_clock(16 * 60);
    assert!(matches!(
        kube_client(&standins)
            .get_application("argocd", "app-000")
            .await
            .unwrap_err(),
        KubeError::Unauthorized { .. }
    ));
}

/// How reading an Application fails from a server at 127.0.0.1 that completes handshakes
/// with a certificate for `name` only, from a CA the client trusts.
async fn read_from_server_naming(standins: &Scenario, name: &str) -> KubeError {
    let (address, ca_pem) = tls::serve_handshakes(&[name]).await.unwrap();
    let access = ClusterAccess {
        endpoint: format!("https://{address}"),
        ca_pem: ca_pem.into_bytes(),
    };
    KubeClient::new(&access, token_source(standins), TIMEOUTS)
        .unwrap()
        .get_application("argocd", "app-000")
        .await
        .unwrap_err()
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_or_for_another_name_is_a_tls_error() {
    let standins = standins_with(Options::default(), 1).await;
    let other_ca = tls::cluster_tls(&["127.0.0.1"]).unwrap().ca_pem;
    let access = ClusterAccess {
        endpoint: standins.kube_endpoint(),
        ca_pem: other_ca.into_bytes(),
    };
    let client = KubeClient::new(&access, token_source(&standins), TIMEOUTS).unwrap();
    let error = client
        .get_application("argocd", "app-000")
        .await
        .unwrap_err();
    assert!(matches!(error, KubeError::Tls(_)), "{error:?}");
    assert!(error.is_retryable());
    // The host name is verified too: a server at 127.0.0.1 whose certificate, from the
    // trusted CA, names only another host fails the handshake.
    let error = read_from_server_naming(&standins, "kube.other.example").await;
    assert!(matches!(error, KubeError::Tls(_)), "{error:?}");
    // The same server and CA, but a certificate naming the address: the handshake passes,
    // so the failure above was the name and nothing else.
    let error = read_from_server_naming(&standins, "127.0.0.1").await;
    assert!(!matches!(error, KubeError::Tls(_)), "{error:?}");
}

#[tokio::test]
async fn a_page_that_fails_while_the_previous_one_is_parsed_fails_the_listing_and_a_retry_reads_it_all()
 {
    let standins = standins_with(Options::default(), 23).await;
    let client = kube_client(&standins);
    // The second page (the first request with `continue=`) is asked for while the first is
    // parsed; its failure must fail the listing, not end it early with what was parsed.
    let third = Route::kube("GET", "/applications").with_query("continue=");
    standins.shared.inject(third.clone(), 1, FaultAction::Drop);
    standins.shared.inject(
        third,
        1,
        FaultAction::Status {
            code: 503,
            retry_after: None,
        },
    );
    let dropped = client
        .list_application_metadata("argocd", list_options(None, 5), |_| true)
        .await
        .unwrap_err();
    assert!(dropped.is_retryable(), "{dropped:?}");
    let unavailable = client
        .list_application_metadata("argocd", list_options(None, 5), |_| true)
        .await
        .unwrap_err();
    assert!(
        matches!(unavailable, KubeError::Server { code: 503, .. }),
        "{unavailable:?}"
    );
    let (kept, stats) = client
        .list_application_metadata("argocd", list_options(None, 5), |_| true)
        .await
        .unwrap();
    assert_eq!((stats.pages, stats.seen, kept.len()), (5, 23, 23));
    let names: Vec<&str> = kept.iter().map(|m| m.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "pages are kept in the server's order");
}

#[tokio::test]
async fn the_next_page_is_asked_for_while_the_items_of_the_one_before_are_still_arriving() {
    let standins = standins_with(Options::default(), 9).await;
    let client = kube_client(&standins);
    // The first page's head (its `continue` token) arrives; its items come a second later.
    let pause = Duration::from_secs(1);
    standins.shared.inject(
        Route::kube("GET", "/applications").with_query("limit=3"),
        1,
        FaultAction::StallAfter {
            marker: "\"items\":[",
            pause,
        },
    );
    let (kept, stats) = client
        .list_application_metadata("argocd", list_options(None, 3), |_| true)
        .await
        .unwrap();
    assert_eq!((stats.pages, stats.seen, kept.len()), (3, 9, 9));
    let lists = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/applications"))
        .collect::<Vec<_>>();
    assert_eq!(lists.len(), 3);
    assert!(
        !lists[0].query.contains("continue="),
        "{:?}",
        lists[0].query
    );
    let items_released = *lists[0]
        .stall_ended
        .get()
        .expect("the first page's items were released");
    assert!(
        lists[1].arrived.unwrap() < items_released,
        "the second page was asked for only after the first one's items were sent"
    );
}

#[tokio::test]
async fn injected_faults_become_typed_errors() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let route = || Route::kube("GET", "/applications/app-000");
    standins.shared.inject(
        route(),
        1,
        FaultAction::Status {
            code: 429,
            retry_after: Some(7),
        },
    );
    let error = client
        .get_application("argocd", "app-000")
        .await
        .unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
    standins.shared.inject(
        route(),
        1,
        FaultAction::Status {
            code: 503,
            retry_after: None,
        },
    );
    assert!(matches!(
        client
            .get_application("argocd", "app-000")
            .await
            .unwrap_err(),
        KubeError::Server { code: 503, .. }
    ));
    standins.shared.inject(route(), 1, FaultAction::Drop);
    let dropped = client
        .get_application("argocd", "app-000")
        .await
        .unwrap_err();
    assert!(dropped.is_retryable(), "{dropped:?}");
    standins
        .shared
        .inject(route(), 1, FaultAction::Delay(Duration::from_secs(5)));
    assert!(matches!(
        client
            .get_application("argocd", "app-000")
            .await
            .unwrap_err(),
        KubeError::Timeout(_)
    ));
    // And the next request goes through: faults are counted.
    client.get_application("argocd", "app-000").await.unwrap();
    let statuses: Vec<u16> = standins
        .shared
        .requests()
        .iter()
        .filter(|r| r.service == Service::Kube)
        .map(|r| r.status)
        .collect();
    assert_eq!(&statuses[..3], &[429, 503, 0]);
    assert_eq!(statuses.last(), Some(&200));
}

/// A raw HTTPS client with the function's token, for what our client never sends.
async fn raw(standins: &Scenario) -> (reqwest::Client, String) {
    let token = token_source(standins).fresh().await.unwrap().0;
    let client = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(standins.ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    (client, token)
}

#[tokio::test]
async fn a_metadata_only_list_without_its_group_and_version_is_not_acceptable() {
    let standins = standins_with(Options::default(), 1).await;
    let (client, token) = raw(&standins).await;
    let url = format!(
        "{}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications",
        standins.kube_endpoint()
    );
    let table: &[(&str, u16, &str)] = &[
        (
            "application/json;as=PartialObjectMetadataList",
            406,
            "Status",
        ),
        (
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            200,
            "PartialObjectMetadataList",
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            200,
            "ApplicationList",
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            406,
            "Status",
        ),
        ("application/json", 200, "ApplicationList"),
    ];
    for (accept, code, kind) in table {
        let response = client
            .get(&url)
            .bearer_auth(&token)
            .header("accept", *accept)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), *code, "{accept}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["kind"], *kind, "{accept}");
    }
}

#[tokio::test]
async fn unknown_fields_in_a_write_are_pruned_and_named_in_a_warning_header() {
    let standins = standins_with(Options::default(), 1).await;
    let (client, token) = raw(&standins).await;
    let response = client
        .patch(format!(
            "{}/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/app-000",
            standins.kube_endpoint()
        ))
        .bearer_auth(token)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"spec":{"source":{"helm":{"imageTag":"2.0.0"}}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let warning = response
        .headers()
        .get("warning")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        warning,
        r#"299 - "unknown field \"spec.source.helm.imageTag\"""#
    );
    let stored = standins.kube.get("argocd", "app-000").unwrap();
    assert!(stored["spec"]["source"]["helm"].get("imageTag").is_none());
    // Declared but schemaless parts (valuesObject preserves unknown fields) are kept.
    assert_eq!(stored["spec"]["source"]["helm"]["valuesObject"], json!({}));
    assert_eq!(
        standins.kube.warnings(),
        vec![r#"unknown field "spec.source.helm.imageTag""#.to_string()]
    );
}

#[tokio::test]
async fn a_schema_refusal_carries_field_causes_and_a_failed_test_does_not() {
    let standins = standins_with(Options::default(), 1).await;
    let client = kube_client(&standins);
    let invalid = Patch::Json(
        json!([{"op": "replace", "path": "/spec/source/helm/parameters/0/forceString", "value": "yes"}]),
    );
    let failed_test = Patch::Json(
        json!([{"op": "test", "path": "/spec/source/helm/parameters/0/value", "value": "9.9.9"}]),
    );
    for (patch, validation) in [(invalid, true), (failed_test, false)] {
        match client.patch_application("argocd", "app-000", &patch).await {
            Err(KubeError::Invalid {
                validation: got,
                message,
            }) => assert_eq!(got, validation, "{message}"),
            other => panic!("expected 422, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn every_answer_of_the_stand_in_outside_its_routes_is_a_status_body() {
    let standins = standins_with(Options::default(), 1).await;
    let (client, token) = raw(&standins).await;
    for path in [
        "/apis/apps/v1/deployments",
        "/apis/argoproj.io/v1alpha1/namespaces/argocd/applicationsets/none",
    ] {
        let response = client
            .get(format!("{}{path}", standins.kube_endpoint()))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["kind"], "Status", "{path}");
        assert_eq!(body["code"], 404, "{path}");
    }
}

#[tokio::test]
async fn image_updater_lists_read_their_query_as_strictly_as_application_lists() {
    let standins = standins_with(Options::default(), 1).await;
    for (name, labels) in [("first", json!({"team": "a"})), ("second", json!({}))] {
        let mut object = image_updater(name, json!([{"namePattern": "*", "useAnnotations": true}]));
        object["metadata"]["labels"] = labels;
        standins.kube.insert_image_updater(object).unwrap();
    }
    let (client, token) = raw(&standins).await;
    let url = format!(
        "{}/apis/argocd-image-updater.argoproj.io/v1alpha1/namespaces/argocd/imageupdaters",
        standins.kube_endpoint()
    );
    let list = |query: String| {
        let request = client.get(format!("{url}?{query}")).bearer_auth(&token);
        async move {
            let response = request.send().await.unwrap();
            let code = response.status().as_u16();
            (code, response.json::<Value>().await.unwrap())
        }
    };
    let names = |body: &Value| -> Vec<String> {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };

    let (code, body) = list("labelSelector=team%3Da".into()).await;
    assert_eq!((code, names(&body)), (200, vec!["first".to_string()]));
    let (code, body) = list("limit=1".into()).await;
    assert_eq!((code, names(&body)), (200, vec!["first".to_string()]));
    let token_for_next = body["metadata"]["continue"].as_str().unwrap().to_string();
    let (code, body) = list(format!("limit=1&continue={token_for_next}")).await;
    assert_eq!((code, names(&body)), (200, vec!["second".to_string()]));
    // The last page of whole custom resources: an empty `continue`, as kube-apiserver says it.
    assert_eq!(body["metadata"]["continue"], "");
    for bad in [
        "limit=abc",
        "labelSelector=team%20in%20(a",
        "continue=not-a-key",
    ] {
        let (code, body) = list(bad.to_string()).await;
        assert_eq!(
            (code, body["kind"].as_str()),
            (400, Some("Status")),
            "{bad}"
        );
    }
}

/// What one Kubernetes request asks for, as RBAC names it: (API group, resource or
/// resource/subresource, verb).
fn rbac_of(method: &str, path: &str) -> Option<(String, String, String)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // /api/v1/namespaces/<ns>/<resource>[/<name>[/<sub>]] or
    // /apis/<group>/<version>/namespaces/<ns>/<resource>[/<name>[/<sub>]]
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] => rest,
        rest => rest,
    };
    let (resource, named) = match rest {
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub] => (format!("{resource}/{sub}"), true),
        _ => return None,
    };
    let verb = match (method, named) {
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("PATCH", _) => "patch",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    Some((group.to_string(), resource, verb.to_string()))
}

/// Every Kubernetes request the function makes, over a push (with its Event), a sweep that
/// writes an ImageUpdater object's status, and an Application an ApplicationSet owns, is one
/// `kube::required_access` lists; and every one it lists is made. So `deploy/rbac.yaml`,
/// which a test holds to that list, grants what the code calls and nothing else.
#[tokio::test]
async fn the_function_asks_the_api_server_for_exactly_what_required_access_lists() {
    use argocd_ecr_updater_standins::fixtures::seed_image_updater;
    let standins = Scenario::seeded().await;
    let mut owned = standins
        .kube
        .get("argocd", argocd_ecr_updater_standins::fixtures::SEED_APP)
        .unwrap();
    argocd_ecr_updater_standins::fixtures::strip_server_fields(&mut owned);
    owned["metadata"]["name"] = json!("owned");
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "argoproj.io/v1alpha1",
        "kind": "ApplicationSet", "name": "fleet", "uid": "u1"}]);
    standins.kube.insert(owned).unwrap();
    standins
        .kube
        .insert_application_set(json!({"metadata": {"name": "fleet", "namespace": "argocd"},
            "spec": {"template": {}, "ignoreApplicationDifferences": [
                {"jqPathExpressions": [".spec.source.helm.parameters"]}]}}))
        .unwrap();
    standins
        .kube
        .insert_image_updater(seed_image_updater())
        .unwrap();
    let function = standins.handler(&[]);
    function
        .handle(&event("push-date-tag.json"), None)
        .await
        .unwrap();
    function
        .handle(&event("scheduled-reconcile.json"), None)
        .await
        .unwrap();
    let made: std::collections::BTreeSet<(String, String, String)> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::Kube)
        .filter_map(|r| rbac_of(&r.method, &r.path))
        .collect();
    let listed: std::collections::BTreeSet<(String, String, String)> =
        argocd_ecr_updater::cluster::kube::required_access(true, false)
            .into_iter()
            .map(|need| {
                let resource = match need.subresource {
                    Some(sub) => format!("{}/{sub}", need.resource),
                    None => need.resource.to_string(),
                };
                (need.group.to_string(), resource, need.verb.to_string())
            })
            .collect();
    assert_eq!(
        made, listed,
        "left: what the code asked; right: required_access"
    );
}

#[tokio::test]
async fn a_page_over_128_kib_crosses_the_wire_gzipped_and_is_read_whole() {
    // 100 Applications of about 2 KB of annotations each: a 200 KB page, which the API
    // server gzips for a client that asks.
    let standins = standins_with(Options::default(), 100).await;
    let client = kube_client(&standins);
    let (kept, stats) = client
        .list_application_metadata("argocd", list_options(None, 100), |_| true)
        .await
        .unwrap();
    assert_eq!((stats.pages, stats.seen, kept.len()), (1, 100, 100));
    let page = standins
        .shared
        .requests()
        .into_iter()
        .find(|r| r.method == "GET")
        .unwrap();
    assert!(
        page.response_bytes < argocd_ecr_updater_standins::kube::GZIP_THRESHOLD_BYTES / 4,
        "{} bytes on the wire",
        page.response_bytes
    );
    // A small page is answered as it is, and read the same.
    let (kept, _) = client
        .list_application_metadata("argocd", list_options(None, 5), |_| true)
        .await
        .unwrap();
    assert_eq!(kept.len(), 100);
}
