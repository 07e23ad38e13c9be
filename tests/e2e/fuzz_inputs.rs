//! Property-based fuzzing of everything that reads untrusted input: EventBridge events,
//! annotations, semver constraints and tags (`select` input lines are fuzzed next to their
//! parser, in the CLI package). No input may panic; each must end in a value or a specific
//! error. Case counts are bounded so CI stays quick;
//! `PROPTEST_CASES=1000000 cargo test --release --test e2e fuzz_inputs::` runs a long campaign.

use std::collections::BTreeMap;

use argocd_ecr_updater::appconfig::annotations::{AppConfig, PREFIX};
use argocd_ecr_updater::event::{self, Intake, Invocation};
use argocd_ecr_updater::policy::constraint::{Constraint, parse_lenient_version};
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

/// A push event's fields drawn from what ECR and EventBridge can send.
#[derive(Debug, Clone)]
struct ValidPush {
    account: String,
    region: String,
    repository: String,
    tag: String,
    digest: String,
    epoch: i64,
}

impl ValidPush {
    fn to_event(&self) -> Value {
        let time = time::OffsetDateTime::from_unix_timestamp(self.epoch)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        json!({"version": "0", "id": "id-1", "detail-type": "ECR Image Action", "source": "aws.ecr",
            "account": self.account, "time": time, "region": self.region, "resources": [],
            "detail": {"result": "SUCCESS", "repository-name": self.repository, "image-digest": self.digest,
                       "action-type": "PUSH", "image-tag": self.tag}})
    }
}

fn valid_push() -> impl Strategy<Value = ValidPush> {
    (
        "[0-9]{12}",
        prop::sample::select(vec![
            "ap-northeast-2",
            "us-east-1",
            "eu-central-1",
            "cn-north-1",
            "us-gov-west-1",
        ]),
        "[a-z0-9]{1,8}([._-][a-z0-9]{1,8}){0,2}(/[a-z0-9]{1,8}([._-][a-z0-9]{1,8}){0,1}){0,3}",
        "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}",
        "sha256:[0-9a-f]{64}",
        0i64..4_102_444_800,
    )
        .prop_map(
            |(account, region, repository, tag, digest, epoch)| ValidPush {
                account,
                region: region.to_owned(),
                repository,
                tag,
                digest,
                epoch,
            },
        )
}

/// One field of a push and a value for it that no real event carries. The oracle for
/// "not real" is the field's grammar written out here, apart from the parser's.
fn broken_field() -> impl Strategy<Value = (&'static str, Value)> {
    let tag_grammar = regex::Regex::new(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$").unwrap();
    let repository_grammar =
        regex::Regex::new(r"^([a-z0-9]+([._-][a-z0-9]+)*/)*[a-z0-9]+([._-][a-z0-9]+)*$").unwrap();
    let wrong_type = prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(true)),
        Just(json!(["a"])),
        Just(json!({"nested": true})),
    ];
    prop_oneof![
        "\\PC{1,40}"
            .prop_filter("not a tag", move |t| !tag_grammar.is_match(t))
            .prop_map(|t| ("detail.image-tag", json!(t))),
        "\\PC{1,40}"
            .prop_filter("not a repository", move |r| r.len() > 256
                || !repository_grammar.is_match(r))
            .prop_map(|r| ("detail.repository-name", json!(r))),
        "\\PC{1,40}"
            .prop_filter("not a digest", |d| !d.strip_prefix("sha256:").is_some_and(
                |h| !h.is_empty() && h.len() <= 64 && h.bytes().all(|b| b.is_ascii_hexdigit())
            ))
            .prop_map(|d| ("detail.image-digest", json!(d))),
        "\\PC{0,20}"
            .prop_filter("not 12 digits", |a| !(a.len() == 12
                && a.bytes().all(|b| b.is_ascii_digit())))
            .prop_map(|a| ("account", json!(a))),
        "\\PC{0,20}"
            .prop_filter("not a region", |r| !regex::Regex::new(
                r"^[a-z0-9]+(-[a-z0-9]+)*-[0-9]+$"
            )
            .unwrap()
            .is_match(r)
                || r.split('-').count() < 3)
            .prop_map(|r| ("region", json!(r))),
        "\\PC{0,30}"
            .prop_filter("not RFC 3339", |t| time::OffsetDateTime::parse(
                t,
                &time::format_description::well_known::Rfc3339
            )
            .is_err())
            .prop_map(|t| ("time", json!(t))),
        (
            prop::sample::select(vec![
                "detail.image-tag",
                "detail.repository-name",
                "detail.image-digest",
                "account",
                "region",
                "time"
            ]),
            wrong_type
        ),
    ]
}

fn comparison() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["=", "!=", ">", "<", ">=", "<="])
}

fn release() -> impl Strategy<Value = semver::Version> {
    (0u64..4, 0u64..4, 0u64..4)
        .prop_map(|(major, minor, patch)| semver::Version::new(major, minor, patch))
}

/// The oracle: plain release ordering, as `semver` defines it.
fn compare(op: &str, version: &semver::Version, bound: &semver::Version) -> bool {
    match op {
        "=" => version == bound,
        "!=" => version != bound,
        ">" => version > bound,
        "<" => version < bound,
        ">=" => version >= bound,
        _ => version <= bound,
    }
}

include!("../../fuzz/annotation_map.rs");

/// A function without a sweep queue: what EventBridge and direct invocations send.
const EVENTBRIDGE: Intake<'static> = Intake {
    sweep_queue_arn: None,
};

proptest! {
    #![proptest_config(cases(3_000))]

    #[test]
    fn any_json_is_parsed_or_refused_as_an_event(value in arbitrary_json()) {
        match event::parse(&value, &EVENTBRIDGE) {
            Ok(Invocation::Push(push)) => {
                // Only an ECR push names a tag; the one it names is the event's own (or the
                // parked original's, for a failure record).
                let original = value.get("requestPayload").unwrap_or(&value);
                prop_assert_eq!(original["source"].as_str(), Some("aws.ecr"));
                prop_assert_eq!(original["detail"]["image-tag"].as_str(), Some(push.tag.as_str()));
            }
            Ok(Invocation::Skip { reason, .. }) => prop_assert!(!reason.is_empty()),
            Ok(_) => {}
            Err(event::EventError::Malformed(problem)) => prop_assert!(!problem.is_empty()),
        }
    }

    /// Whatever an SQS record's body says, a function takes it only as a shard of its own
    /// sweep queue: never as a push, a scan or a reconcile.
    #[test]
    fn an_sqs_record_is_a_shard_of_the_sweep_queue_or_refused(
        body in arbitrary_json(),
        from_sweep_queue in any::<bool>(),
    ) {
        let queue = "arn:aws:sqs:ap-northeast-2:768157413559:argocd-ecr-updater-sweep";
        let source = if from_sweep_queue { queue } else { "arn:aws:sqs:ap-northeast-2:768157413559:other" };
        let batch = json!({"Records": [{"messageId": "m", "eventSource": "aws:sqs",
            "eventSourceARN": source, "body": body.to_string()}]});
        for intake in [EVENTBRIDGE, Intake { sweep_queue_arn: Some(queue) }] {
            match event::parse(&batch, &intake) {
                Ok(Invocation::Shards(records)) => {
                    prop_assert_eq!(records.len(), 1);
                    let own_queue = from_sweep_queue && intake.sweep_queue_arn.is_some();
                    prop_assert_eq!(records[0].body.is_ok(), own_queue);
                    // Taken from the sweep queue, the body is read once, by the sweep: as a
                    // shard only if it says it is one, refused as not one otherwise.
                    if let Ok(taken) = &records[0].body {
                        let claims = body.get("action").and_then(Value::as_str) == Some("reconcile-shard");
                        match argocd_ecr_updater::sweep::shard::parse(taken) {
                            Ok(_) => prop_assert!(claims, "{} was run as a shard", taken),
                            Err(refused) => prop_assert!(
                                refused.to_string().starts_with("Permanent.NotAShard: "),
                                "{}", refused
                            ),
                        }
                    }
                }
                other => prop_assert!(false, "an SQS batch was read as {:?}", other),
            }
        }
    }

    #[test]
    fn a_valid_push_event_is_parsed_into_exactly_its_fields(push in valid_push()) {
        let parsed = event::parse(&push.to_event(), &EVENTBRIDGE);
        let Ok(Invocation::Push(parsed)) = parsed else {
            return Err(TestCaseError::fail(format!("a valid push was not parsed as one: {parsed:?}")));
        };
        prop_assert_eq!(&parsed.account, &push.account);
        prop_assert_eq!(&parsed.region, &push.region);
        prop_assert_eq!(&parsed.repository, &push.repository);
        prop_assert_eq!(&parsed.tag, &push.tag);
        prop_assert_eq!(parsed.digest.as_deref(), Some(push.digest.as_str()));
        prop_assert_eq!(parsed.time.unix_timestamp(), push.epoch);
    }

    #[test]
    fn a_valid_push_with_one_field_broken_is_refused_naming_that_field(
        push in valid_push(), (field, broken) in broken_field(),
    ) {
        let mut event = push.to_event();
        let path: Vec<&str> = field.split('.').collect();
        match path.as_slice() {
            [top] => event[*top] = broken.clone(),
            [outer, inner] => event[*outer][*inner] = broken.clone(),
            _ => unreachable!("fields are one or two levels deep"),
        }
        match event::parse(&event, &EVENTBRIDGE) {
            Err(event::EventError::Malformed(problem)) => prop_assert!(
                problem.contains(&format!("`{field}`")),
                "the refusal of {} = {:?} does not name the field: {}", field, broken, problem
            ),
            other => prop_assert!(false, "{} = {:?} was not refused: {:?}", field, broken, other),
        }
    }

    #[test]
    fn a_push_that_is_not_a_successful_push_is_skipped_with_the_value_in_the_reason(
        push in valid_push(),
        (field, value) in prop_oneof![
            "[A-Z_]{1,12}".prop_filter("not PUSH", |v| v != "PUSH").prop_map(|v| ("action-type", v)),
            "[A-Z_]{1,12}".prop_filter("not SUCCESS", |v| v != "SUCCESS").prop_map(|v| ("result", v)),
        ],
    ) {
        let mut event = push.to_event();
        event["detail"][field] = json!(value);
        match event::parse(&event, &EVENTBRIDGE) {
            Ok(Invocation::Skip { reason, .. }) => prop_assert!(reason.contains(&format!("`{value}`")), "{}", reason),
            other => prop_assert!(false, "{} = {} was not skipped: {:?}", field, value, other),
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
    fn a_constraint_of_comparators_matches_what_the_comparisons_say(
        groups in prop::collection::vec(prop::collection::vec((comparison(), release()), 1..3), 1..3),
        version in release(),
    ) {
        let text = groups
            .iter()
            .map(|group| group.iter().map(|(op, v)| format!("{op}{v}")).collect::<Vec<_>>().join(", "))
            .collect::<Vec<_>>()
            .join(" || ");
        let expected = groups.iter().any(|group| {
            group.iter().all(|(op, bound)| compare(op, &version, bound))
        });
        let constraint = Constraint::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let parsed = parse_lenient_version(&version.to_string()).ok_or_else(|| TestCaseError::fail("a release parses"))?;
        prop_assert_eq!(constraint.matches(&parsed), expected, "{} against {}", text, version);
    }

}

#[test]
fn a_huge_event_is_refused_or_skipped_without_trouble() {
    let mut huge = json!({"source": "aws.ecr", "detail-type": "ECR Image Action", "detail": {"action-type": "PUSH", "result": "SUCCESS",
        "repository-name": "r", "image-tag": "a".repeat(6 * 1024 * 1024)}});
    assert!(event::parse(&huge, &EVENTBRIDGE).is_err());
    huge["detail"]["image-tag"] = json!("ok");
    huge["detail"]["padding"] = json!("x".repeat(6 * 1024 * 1024));
    huge["account"] = json!("768157413559");
    huge["region"] = json!("ap-northeast-2");
    huge["time"] = json!("2025-08-25T06:30:14Z");
    assert!(matches!(
        event::parse(&huge, &EVENTBRIDGE),
        Ok(Invocation::Push(_))
    ));
}

/// The committed seed corpus (`fuzz/seeds/<target>/`) starts `cargo fuzz` from inputs that get
/// past each parser; a seed that stopped doing so would leave the fuzzer at the front door.
#[test]
fn the_fuzz_seed_corpus_holds_inputs_that_get_past_each_parser() {
    let seeds = |target: &str| -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/seeds")
            .join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                (
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                )
            })
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds in {}", dir.display());
        files
    };
    for (path, text) in seeds("event") {
        let value: Value = serde_json::from_str(&text).unwrap();
        assert!(
            event::parse(&value, &EVENTBRIDGE).is_ok(),
            "{path} is refused"
        );
    }
    for (path, text) in seeds("annotations") {
        let annotations = fuzz_annotation_map(&text);
        let config =
            AppConfig::parse(&annotations).unwrap_or_else(|| panic!("{path}: no image list"));
        let problems: Vec<_> = config
            .images
            .iter()
            .filter_map(|image| image.config.as_ref().err())
            .collect();
        assert!(
            problems.len() < config.images.len(),
            "{path}: no image configures: {problems:?}"
        );
    }
    for (path, text) in seeds("constraint") {
        let (constraint, versions) = text.split_once('\n').unwrap();
        let constraint = Constraint::parse(constraint).unwrap_or_else(|e| panic!("{path}: {e}"));
        let parsed: Vec<_> = versions
            .split_whitespace()
            .filter_map(parse_lenient_version)
            .collect();
        assert!(
            parsed.iter().any(|v| constraint.matches(v)),
            "{path}: nothing matches"
        );
    }
}
