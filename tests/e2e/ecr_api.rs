//! The ECR client through the real AWS SDK against the ECR stand-in: pagination, lookups of
//! one tag, manifests, and ECR's own error shapes.

use crate::common::Scenario;
use argocd_ecr_updater::registry::ecr::{Ecr, EcrError};
use argocd_ecr_updater::registry::manifest::Platforms;
use argocd_ecr_updater_standins::fixtures::{image_with_digest, numbered_digest};
use argocd_ecr_updater_standins::{Image, Options, Service, seed};
use serde_json::json;

const ACCOUNT: &str = "768157413559";

fn image(repository: &str, tag: Option<String>, n: usize) -> Image {
    let pushed_at = format!("2025-01-01T00:00:{:02}Z", n % 60);
    image_with_digest(repository, tag.as_deref(), &numbered_digest(n), &pushed_at)
}

#[tokio::test]
async fn list_tags_follows_next_token_across_pages_and_skips_untagged_images() {
    let standins = Scenario::start(Options::default()).await;
    for n in 0..2_500 {
        standins
            .aws
            .push(image("many", Some(format!("t{n:04}")), n));
    }
    standins.aws.push(image("many", None, 9_999));
    let ecr = Ecr::new(aws_sdk_ecr::Client::new(&standins.sdk_config()));
    let tags = ecr.list_tags(ACCOUNT, "many").await.unwrap();
    assert_eq!(tags.len(), 2_500);
    assert!(
        tags.iter()
            .all(|t| t.pushed_at.is_some() && t.digest.is_some())
    );
    assert_eq!(ecr.calls(), 3, "1,000 per page");
    let bodies: Vec<String> = standins
        .shared
        .requests()
        .into_iter()
        .filter(|r| r.service == Service::Ecr)
        .map(|r| r.body)
        .collect();
    assert!(
        bodies
            .iter()
            .all(|b| b.contains("\"tagStatus\":\"TAGGED\""))
    );
    assert!(bodies[1].contains("nextToken"));
}

#[tokio::test]
async fn one_tag_is_described_or_reported_missing() {
    let standins = Scenario::seeded().await;
    let ecr = Ecr::new(aws_sdk_ecr::Client::new(&standins.sdk_config()));
    let described = |tag: &str| vec![tag.to_string()];
    let latest = ecr
        .describe_tags(ACCOUNT, "barun-dev-ecr", &described("latest"))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(
        latest.digest.as_deref(),
        Some(format!("sha256:{}", "3".repeat(64)).as_str())
    );
    assert_eq!(
        latest.pushed_at,
        Some(time::macros::datetime!(2025-08-25 06:30:14 UTC)),
        "the digest's newest push"
    );
    assert_eq!(
        ecr.describe_tags(ACCOUNT, "barun-dev-ecr", &described("nope"))
            .await
            .unwrap(),
        vec![]
    );
    let missing = ecr
        .describe_tags(ACCOUNT, "no-such-repo", &described("1"))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, EcrError::RepositoryNotFound { .. }),
        "{missing}"
    );
    assert!(!missing.is_retryable());
}

#[tokio::test]
async fn a_moved_or_deleted_tag_is_described_where_it_is_now() {
    let standins = Scenario::start(Options::default()).await;
    let pushes = [("a", 1), ("b", 1), ("c", 2), ("a", 3), ("d", 3)];
    for (n, (tag, digest)) in pushes.into_iter().enumerate() {
        let pushed_at = format!("2025-01-01T00:00:{n:02}Z");
        let digest = numbered_digest(digest);
        standins
            .aws
            .push(image_with_digest("moving", Some(tag), &digest, &pushed_at));
    }
    standins.aws.remove("moving", "b");
    standins.aws.push(image("other", Some("a".into()), 9));
    let ecr = Ecr::new(aws_sdk_ecr::Client::new(&standins.sdk_config()));
    let wanted: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let described = ecr.describe_tags(ACCOUNT, "moving", &wanted).await.unwrap();
    let found: Vec<(&str, Option<&str>)> = described
        .iter()
        .map(|t| (t.name.as_str(), t.digest.as_deref()))
        .collect();
    let (one, two, three) = (numbered_digest(1), numbered_digest(2), numbered_digest(3));
    assert_eq!(
        found,
        [
            ("a", Some(three.as_str())),
            ("c", Some(two.as_str())),
            ("d", Some(three.as_str())),
        ],
        "a moved to digest 3, b deleted: digest 1 has no tag left"
    );
    let mut listed: Vec<(String, Option<String>)> = ecr
        .list_tags(ACCOUNT, "moving")
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.digest))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("a".to_string(), Some(three.clone())),
            ("c".to_string(), Some(two)),
            ("d".to_string(), Some(three)),
        ]
    );
    assert!(
        !listed
            .iter()
            .any(|(_, d)| d.as_deref() == Some(one.as_str()))
    );
}

#[tokio::test]
async fn manifests_tell_index_platforms_from_single_images() {
    let standins = Scenario::seeded().await;
    let index: Image = serde_json::from_value(
        json!({"repository": "multi", "tag": "1.0", "digest": format!("sha256:{}", "a".repeat(64)),
        "pushedAt": "2025-01-01T00:00:00Z", "mediaType": "application/vnd.oci.image.index.v1+json",
        "platforms": ["linux/amd64", "linux/arm64/v8"]}),
    )
    .unwrap();
    standins.aws.push(index);
    let ecr = Ecr::new(aws_sdk_ecr::Client::new(&standins.sdk_config()));
    let Some(Platforms::Index(platforms)) = ecr.platforms(ACCOUNT, "multi", "1.0").await.unwrap()
    else {
        panic!("index expected")
    };
    assert_eq!(platforms.len(), 2);
    assert_eq!(platforms[1].variant.as_deref(), Some("v8"));
    assert_eq!(
        ecr.platforms(ACCOUNT, "barun-dev-ecr", "latest")
            .await
            .unwrap(),
        Some(Platforms::Single)
    );
    assert_eq!(
        ecr.platforms(ACCOUNT, "barun-dev-ecr", "gone")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn the_stand_ins_load_a_seed_folder_of_yaml_and_json() {
    let standins = Scenario::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("applications")).unwrap();
    let app = include_str!("../standins/seed/applications/aws-pipeline-test.yaml");
    std::fs::write(
        dir.path().join("applications/a.yaml"),
        format!(
            "{app}\n---\n{}",
            app.replace("name: aws-pipeline-test", "name: second")
        ),
    )
    .unwrap();
    let as_json: serde_json::Value =
        serde_yaml_ng::from_str(&app.replace("name: aws-pipeline-test", "name: third")).unwrap();
    std::fs::write(dir.path().join("applications/b.json"), as_json.to_string()).unwrap();
    std::fs::write(dir.path().join("images.json"), json!([{"repository": "r", "tag": "1", "digest": format!("sha256:{}", "1".repeat(64)), "pushedAt": "2025-01-01T00:00:00Z"}]).to_string()).unwrap();
    seed::load_dir(&standins, dir.path()).unwrap();
    assert_eq!(standins.kube.len(), 3);
    assert_eq!(standins.aws.images().len(), 1);
    std::fs::write(
        dir.path().join("applications/c.yaml"),
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: bad}\nspec: {}\n",
    )
    .unwrap();
    let error = seed::load_dir(&standins, dir.path()).unwrap_err();
    assert!(error.contains("c.yaml"), "{error}");
}
