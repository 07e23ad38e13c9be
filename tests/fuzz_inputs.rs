//! Property-based fuzzing of everything that reads untrusted input: EventBridge events,
//! annotations, semver constraints and tags, and `select` input lines. No input may panic;
//! each must end in a value or a specific error. Case counts are bounded so CI stays quick;
//! `PROPTEST_CASES=1000000 cargo test --release --test fuzz_inputs` runs a long campaign.

use std::collections::BTreeMap;

use argocd_ecr_updater::annotations::{AppConfig, PREFIX};
use argocd_ecr_updater::cli::select as select_cli;
use argocd_ecr_updater::event::{self, Invocation};
use argocd_ecr_updater::policy::{Constraint, parse_lenient_version};
use proptest::prelude::*;
use serde_json::{Value, json};

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Strings that look like what the field holds, with hostile characters mixed in.
fn field_text() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z0-9._/-]{0,30}".prop_map(Value::String),
        "\\PC{0,30}".prop_map(Value::String),
        "[\\x00-\\x1f\u{202e}é😀]{0,10}".prop_map(Value::String),
        any::<i64>().prop_map(|n| json!(n)),
        Just(Value::Null),
        Just(json!({"nested": true})),
    ]
}

proptest! {
    #![proptest_config(cases(3_000))]

    #[test]
    fn any_json_is_parsed_or_refused_as_an_event(value in arbitrary_json()) {
        let _ = event::parse(&value);
    }

    #[test]
    fn mutated_ecr_events_never_panic_and_pushes_carry_valid_names(
        tag in field_text(), repository in field_text(), action in field_text(),
        result in field_text(), account in field_text(), time in field_text(), digest in field_text(),
    ) {
        let event = json!({"version": "0", "id": "x", "detail-type": "ECR Image Action", "source": "aws.ecr",
            "account": account, "time": time, "region": "ap-northeast-2",
            "detail": {"result": result, "repository-name": repository, "image-digest": digest,
                       "action-type": action, "image-tag": tag}});
        if let Ok(Invocation::Push(push)) = event::parse(&event) {
            prop_assert!(event::is_tag(&push.tag));
            prop_assert!(push.repository.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/".contains(&b)));
        }
    }

    #[test]
    fn any_annotations_parse_into_configs_or_specific_errors(
        entries in prop::collection::vec(
            (prop::sample::select(vec![
                "image-list", "update-strategy", "allow-tags", "ignore-tags", "force-update", "tag-match",
                "a.update-strategy", "a.allow-tags", "a.ignore-tags", "a.platforms", "a.helm.image-spec",
                "a.helm.image-name", "a.helm.image-tag", "a.kustomize.image-name", "a.pull-secret",
                "a.force-update", "write-back-method", "write-back-target", "git-branch",
            ]), "\\PC{0,60}"),
            0..12,
        ),
        list in "(a=)?[a-z0-9.:/_~^*|<>= ,@-]{0,80}",
    ) {
        let mut annotations: BTreeMap<String, String> =
            entries.into_iter().map(|(k, v)| (format!("{PREFIX}{k}"), v)).collect();
        annotations.insert(format!("{PREFIX}image-list"), list);
        let config = AppConfig::parse(&annotations).unwrap();
        for image in config.images {
            if let Err(e) = image.config {
                prop_assert!(e.annotation.starts_with(PREFIX));
                prop_assert!(!e.problem.is_empty());
            }
        }
    }

    #[test]
    fn constraints_parse_or_fail_and_then_match_without_panicking(
        constraint in prop_oneof!["[0-9.xX*^~<>=!|, v-]{0,30}", "\\PC{0,20}"],
        versions in prop::collection::vec(prop_oneof!["v?[0-9]{1,3}(\\.[0-9]{1,3}){0,2}(-[a-z0-9.]{1,8})?", "\\PC{0,12}"], 1..8),
    ) {
        if let Ok(c) = Constraint::parse(&constraint) {
            for v in versions.iter().filter_map(|v| parse_lenient_version(v)) {
                let _ = c.matches(&v);
            }
        }
    }

    #[test]
    fn select_input_lines_are_read_or_refused_with_their_line_number(text in "\\PC{0,200}") {
        if let Err(select_cli::SelectError::BadLine { line, .. }) = select_cli::parse_tags(&text) {
            prop_assert!(line >= 1 && line <= text.lines().count());
        }
    }
}

#[test]
fn a_huge_event_is_refused_or_skipped_without_trouble() {
    let mut huge = json!({"source": "aws.ecr", "detail-type": "ECR Image Action", "detail": {"action-type": "PUSH", "result": "SUCCESS",
        "repository-name": "r", "image-tag": "a".repeat(6 * 1024 * 1024)}});
    assert!(event::parse(&huge).is_err());
    huge["detail"]["image-tag"] = json!("ok");
    huge["detail"]["padding"] = json!("x".repeat(6 * 1024 * 1024));
    huge["account"] = json!("768157413559");
    huge["region"] = json!("ap-northeast-2");
    huge["time"] = json!("2025-08-25T06:30:14Z");
    assert!(matches!(event::parse(&huge), Ok(Invocation::Push(_))));
}
