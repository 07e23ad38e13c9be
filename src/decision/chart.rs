//! Helm charts in ECR: which sources of an Application are the pushed chart, whether the best
//! version ECR holds replaces what each asks for, and the guarded patch that writes it (pure).
//!
//! Argo CD names an ECR chart two ways: `repoURL: <registry>[/<path>]` with `chart: <name>`
//! (Helm's OCI support; `oci://` optional), or since Argo CD 3.1 an OCI source
//! `repoURL: oci://<registry>/<repository>` with no `chart`. Either way the chart's version is
//! the source's `targetRevision`, which this module moves, and nothing else.

use serde_json::{Value, json};

use crate::application::app::Application;
use crate::decision::patch::{WritePlan, escape_pointer};
use crate::policy::constraint::{Constraint, parse_lenient_version};
use crate::policy::{Decision, TagInfo, TagPolicy};
use crate::registry::ecr::ArtifactTag;

/// The config media type of a Helm chart pushed as an OCI artifact, which ECR reports as the
/// image's `artifactMediaType`.
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";

/// One source of an Application that is the chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSource {
    /// The source's JSON pointer: `/spec/source` or `/spec/sources/<i>`.
    pub pointer: String,
    /// As the report names it: `spec.source`, `spec.sources[1]`.
    pub label: String,
    pub repo_url: String,
    pub chart: Option<String>,
    pub target_revision: String,
}

/// The sources of `app` that are `repository` in `registry`. Argo CD renders `spec.sources`
/// when it has any and `spec.source` otherwise; so does this.
pub fn sources_of(app: &Application<'_>, registry: &str, repository: &str) -> Vec<ChartSource> {
    app.view
        .sources()
        .iter()
        .filter_map(|found| {
            let (pointer, label, source) =
                (found.pointer.clone(), found.label.clone(), found.value);
            let repo_url = source["repoURL"].as_str()?;
            let chart = source["chart"].as_str().filter(|c| !c.is_empty());
            if !names_chart(repo_url, chart, registry, repository) {
                return None;
            }
            Some(ChartSource {
                pointer,
                label,
                repo_url: repo_url.to_string(),
                chart: chart.map(str::to_string),
                target_revision: source["targetRevision"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            })
        })
        .collect()
}

/// Is a source's `repoURL` (and `chart`) the chart `registry`/`repository`?
fn names_chart(repo_url: &str, chart: Option<&str>, registry: &str, repository: &str) -> bool {
    let (oci, rest) = match repo_url.get(..6) {
        Some(scheme) if scheme.eq_ignore_ascii_case("oci://") => (true, &repo_url[6..]),
        _ => (false, repo_url),
    };
    let rest = rest.trim_end_matches('/');
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !host.eq_ignore_ascii_case(registry) {
        return false;
    }
    match chart {
        Some(chart) => {
            let named = [path, chart]
                .iter()
                .map(|p| p.trim_matches('/'))
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            named == repository
        }
        // Argo CD's OCI source: the repository is the whole path, and only with the scheme.
        None => oci && path == repository,
    }
}

/// A chart's versions as ECR holds them: Helm stores version `1.2.3+build` under the OCI tag
/// `1.2.3_build` (a tag cannot hold `+`), so each tag is read back into the version Helm and
/// `targetRevision` use. Artifacts that are not Helm charts are set apart by tag.
pub struct Versions {
    pub charts: Vec<TagInfo>,
    pub not_charts: Vec<String>,
}

pub fn versions(tags: &[ArtifactTag]) -> Versions {
    let mut versions = Versions {
        charts: Vec::new(),
        not_charts: Vec::new(),
    };
    for tag in tags {
        if tag.artifact_media_type.as_deref() == Some(HELM_CONFIG_MEDIA_TYPE) {
            let mut info = tag.info.clone();
            info.name = info.name.replace('_', "+");
            versions.charts.push(info);
        } else {
            versions.not_charts.push(tag.info.name.clone());
        }
    }
    versions
}

/// What to do with one chart source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChartOutcome {
    Update { from: String, to: String },
    Keep(String),
}

/// Should the best version in `versions` replace what `source` asks for? Never a downgrade:
/// the candidate must rank above the current version under the policy.
pub fn decide(source: &ChartSource, policy: &TagPolicy, versions: &Versions) -> ChartOutcome {
    let current = source.target_revision.trim();
    if current.is_empty() {
        return ChartOutcome::Keep(format!(
            "{} has no targetRevision: Argo CD takes the newest chart itself on each refresh; set a version to have pushes written",
            source.label
        ));
    }
    if semver::Version::parse(current.trim_start_matches(['v', 'V'])).is_err() {
        let what = if parse_lenient_version(current).is_none() && Constraint::parse(current).is_ok()
        {
            "a version range, which Argo CD resolves itself on each refresh"
        } else {
            "not a chart version"
        };
        return ChartOutcome::Keep(format!(
            "{} targetRevision `{current}` is {what}; write an exact version to have pushes written",
            source.label
        ));
    }
    let Some(best) = policy.ranked(&versions.charts).into_iter().next() else {
        let mut reason =
            crate::policy::KeepReason::NoEligibleTag(versions.charts.len()).to_string();
        if !versions.not_charts.is_empty() {
            reason.push_str(&format!(
                " ({} tags are not Helm charts, e.g. `{}`)",
                versions.not_charts.len(),
                versions.not_charts[0]
            ));
        }
        return ChartOutcome::Keep(reason);
    };
    let running = versions
        .charts
        .iter()
        .find(|v| v.name == current)
        .cloned()
        .unwrap_or_else(|| TagInfo::named(current));
    match policy.decide(Some(&running), best) {
        Decision::Update { to } => ChartOutcome::Update {
            from: current.to_string(),
            to: to.tag,
        },
        Decision::Keep(reason) => ChartOutcome::Keep(reason.to_string()),
    }
}

/// The guarded JSON patch moving each `(source, to)`: every `targetRevision` written is
/// tested first, as are the `repoURL` and `chart` that made it this chart, so a source
/// edited or reordered since the read is never written.
pub fn plan(updates: &[(&ChartSource, &str)]) -> WritePlan {
    let mut ops = Vec::new();
    for (source, to) in updates {
        let at = |field: &str| format!("{}/{}", source.pointer, escape_pointer(field));
        ops.push(json!({"op": "test", "path": at("repoURL"), "value": source.repo_url}));
        if let Some(chart) = &source.chart {
            ops.push(json!({"op": "test", "path": at("chart"), "value": chart}));
        }
        if source.target_revision.is_empty() {
            // Not reached: an empty targetRevision is kept. Guarded all the same.
            continue;
        }
        ops.push(
            json!({"op": "test", "path": at("targetRevision"), "value": source.target_revision}),
        );
        ops.push(json!({"op": "replace", "path": at("targetRevision"), "value": to}));
    }
    WritePlan {
        patch: Value::Array(ops),
        audit: Value::Null,
        changes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{AllowTags, IgnoreTags, Strategy};
    use time::macros::datetime;

    /// [`super::sources_of`] of the Application the JSON fixture is, as read.
    fn sources_of(app: &Value, registry: &str, repository: &str) -> Vec<ChartSource> {
        super::sources_of(&Application::of(app), registry, repository)
    }

    const REGISTRY: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";

    fn source(repo_url: &str, chart: Option<&str>, revision: &str) -> Value {
        let mut s = json!({"repoURL": repo_url, "targetRevision": revision});
        if let Some(chart) = chart {
            s["chart"] = json!(chart);
        }
        s
    }

    #[test]
    fn a_source_is_the_chart_by_registry_path_and_chart_name() {
        let cases = [
            (
                "repoURL with path and chart",
                format!("{REGISTRY}/charts"),
                Some("web"),
                true,
            ),
            (
                "oci scheme with chart",
                format!("oci://{REGISTRY}/charts/"),
                Some("web"),
                true,
            ),
            (
                "host only with a nested chart name",
                REGISTRY.to_string(),
                Some("charts/web"),
                true,
            ),
            (
                "host in capitals",
                REGISTRY.to_ascii_uppercase() + "/charts",
                Some("web"),
                true,
            ),
            (
                "an Argo CD 3.1 OCI source",
                format!("oci://{REGISTRY}/charts/web"),
                None,
                true,
            ),
            (
                "the same path without the scheme is Git",
                format!("{REGISTRY}/charts/web"),
                None,
                false,
            ),
            (
                "another chart",
                format!("{REGISTRY}/charts"),
                Some("api"),
                false,
            ),
            (
                "another registry",
                "210987654321.dkr.ecr.eu-west-1.amazonaws.com/charts".to_string(),
                Some("web"),
                false,
            ),
            (
                "a Git repository",
                "https://github.com/org/charts".to_string(),
                Some("web"),
                false,
            ),
        ];
        for (case, repo_url, chart, expected) in cases {
            let app = json!({"spec": {"source": source(&repo_url, chart, "1.0.0")}});
            let found = sources_of(&app, REGISTRY, "charts/web");
            assert_eq!(found.len() == 1, expected, "{case}");
        }
    }

    #[test]
    fn in_a_multi_source_application_only_the_chart_source_is_named() {
        let app = json!({"spec": {
        "source": source(&format!("{REGISTRY}/charts"), Some("web"), "0.1.0"),
        "sources": [
            {"repoURL": "https://github.com/org/values", "ref": "values"},
            source(&format!("{REGISTRY}/charts"), Some("web"), "1.2.0"),
            source(&format!("{REGISTRY}/charts"), Some("db"), "3.0.0"),
        ]}});
        let found = sources_of(&app, REGISTRY, "charts/web");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/spec/sources/1");
        assert_eq!(found[0].label, "spec.sources[1]");
        assert_eq!(found[0].target_revision, "1.2.0");
    }

    fn tag(name: &str, media: &str, minute: u8) -> ArtifactTag {
        ArtifactTag {
            info: TagInfo {
                name: name.into(),
                pushed_at: Some(
                    datetime!(2026-12-01 10:00 UTC)
                        .replace_minute(minute)
                        .unwrap(),
                ),
                digest: Some(format!("sha256:{minute:064}")),
                archived: false,
            },
            artifact_media_type: Some(media.into()),
        }
    }

    fn policy(strategy: Strategy, constraint: Option<&str>) -> TagPolicy {
        TagPolicy::new(strategy, constraint, AllowTags::Any, IgnoreTags::default()).unwrap()
    }

    fn chart_at(revision: &str) -> ChartSource {
        sources_of(
            &json!({"spec": {"source": source(&format!("{REGISTRY}/charts"), Some("web"), revision)}}),
            REGISTRY,
            "charts/web",
        )
        .remove(0)
    }

    #[test]
    fn a_chart_version_is_decided_like_a_tag_and_never_downgraded() {
        let image = "application/vnd.oci.image.config.v1+json";
        let tags = [
            tag("1.2.0", HELM_CONFIG_MEDIA_TYPE, 1),
            tag("1.3.0", HELM_CONFIG_MEDIA_TYPE, 2),
            tag("1.3.1_build.7", HELM_CONFIG_MEDIA_TYPE, 3),
            tag("2.0.0", image, 4),
            tag("1.2.5", HELM_CONFIG_MEDIA_TYPE, 5),
        ];
        let versions = versions(&tags);
        let update = |from: &str, to: &str| ChartOutcome::Update {
            from: from.into(),
            to: to.into(),
        };
        let cases: [(&str, &str, TagPolicy, ChartOutcome); 7] = [
            (
                "semver moves to the highest chart version, read back with its plus",
                "1.2.0",
                policy(Strategy::Semver, None),
                update("1.2.0", "1.3.1+build.7"),
            ),
            (
                "a constraint holds the version inside its range",
                "1.2.0",
                policy(Strategy::Semver, Some("~1.2")),
                update("1.2.0", "1.2.5"),
            ),
            (
                "a higher current version is never downgraded",
                "1.4.0",
                policy(Strategy::Semver, None),
                ChartOutcome::Keep(
                    "tag `1.3.1+build.7` ranks below the current tag `1.4.0` under semver".into(),
                ),
            ),
            (
                "the newest build is the last chart pushed, not the image",
                "1.3.0",
                policy(Strategy::NewestBuild, None),
                update("1.3.0", "1.2.5"),
            ),
            (
                "the newest build already running is kept",
                "1.2.5",
                policy(Strategy::NewestBuild, None),
                ChartOutcome::Keep("tag `1.2.5` is already the current tag".into()),
            ),
            (
                "a range is Argo CD's to resolve",
                "1.*",
                policy(Strategy::Semver, None),
                ChartOutcome::Keep("spec.source targetRevision `1.*` is a version range, which Argo CD resolves itself on each refresh; write an exact version to have pushes written".into()),
            ),
            (
                "no eligible chart names what else the repository holds",
                "1.0.0",
                policy(Strategy::Semver, Some(">=5")),
                ChartOutcome::Keep("none of the 4 tags in the registry satisfies the policy (1 tags are not Helm charts, e.g. `2.0.0`)".into()),
            ),
        ];
        for (case, current, policy, expected) in cases {
            assert_eq!(
                decide(&chart_at(current), &policy, &versions),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn the_patch_tests_the_source_it_moves_and_writes_only_its_target_revision() {
        let source = ChartSource {
            pointer: "/spec/sources/1".into(),
            label: "spec.sources[1]".into(),
            repo_url: format!("{REGISTRY}/charts"),
            chart: Some("web".into()),
            target_revision: "1.2.0".into(),
        };
        let plan = plan(&[(&source, "1.3.0")]);
        assert_eq!(
            plan.patch,
            json!([
                {"op": "test", "path": "/spec/sources/1/repoURL", "value": format!("{REGISTRY}/charts")},
                {"op": "test", "path": "/spec/sources/1/chart", "value": "web"},
                {"op": "test", "path": "/spec/sources/1/targetRevision", "value": "1.2.0"},
                {"op": "replace", "path": "/spec/sources/1/targetRevision", "value": "1.3.0"},
            ])
        );
        assert_eq!(plan.written_paths(), ["/spec/sources/1/targetRevision"]);
    }
}
