//! Helm charts in ECR: `argocd-ecr-updater.io/chart-list` and the `chart.*` settings of an
//! Application, into one typed value (pure).
//!
//! Image Updater updates images only; a chart pushed to ECR reaches no cluster until someone
//! edits the Application's `targetRevision`. The list names the charts the function keeps
//! current, in `image-list`'s own grammar (`[<alias>=]<registry>/<repository>[:<constraint>]`),
//! so the listing can tell from metadata alone whether a push concerns an Application.

use std::collections::BTreeMap;

use crate::appconfig::annotations::{
    self, AnnotationError, ImageRef, OWN_PREFIX, PREFIX, WriteBack,
};
use crate::policy::{AllowTags, IgnoreTags, Strategy, TagPolicy};

/// The charts an Application asks the function to keep current.
pub const CHART_LIST: &str = "argocd-ecr-updater.io/chart-list";

/// The settings every chart of the list shares: `argocd-ecr-updater.io/chart.<setting>`;
/// `argocd-ecr-updater.io/chart.<alias>.<setting>` for one aliased chart comes first.
const SETTINGS: &str = "chart.";

/// Where a chart's new version is written when the Application is written back by Git: the
/// file in the write-back repository that holds the Application's own manifest. Argo CD's
/// `.argocd-source` files cannot set it (its repo server restores `targetRevision`, `chart` and
/// `repoURL` after merging them).
pub const WRITE_BACK_TARGET: &str = "write-back-target";

/// One chart of the list, with the policy its versions are chosen by.
#[derive(Debug, Clone)]
pub struct ChartEntry {
    pub alias: Option<String>,
    /// The chart's registry host and repository (`charts/web`), as written in the list.
    pub chart: ImageRef,
    /// The policy, or why it could not be built (the user's to fix).
    pub policy: Result<TagPolicy, AnnotationError>,
    /// `chart.write-back-target`: the Application manifest's path in the Git repository.
    pub write_back_target: Option<String>,
}

/// How an Application's chart versions are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChartWriteBack {
    /// A guarded patch of the Application's `targetRevision` (`write-back-method: argocd`,
    /// the default).
    Patch,
    /// A commit to the file holding the Application's manifest (each chart's
    /// `chart.write-back-target`) in `git-repository`, on `git-branch` or the default branch.
    Git {
        /// `git`, `git:repocreds` or `git:secret:<namespace>/<name>`.
        credentials: String,
        repository: String,
        branch: Option<String>,
    },
}

/// The charts of one Application.
#[derive(Debug, Clone)]
pub struct ChartConfig {
    pub charts: Vec<ChartEntry>,
    /// The Application's write-back method as it applies to charts, or why it cannot.
    pub write_back: Result<ChartWriteBack, AnnotationError>,
}

impl ChartConfig {
    /// Reads the annotations of one Application; `None` without a `chart-list`.
    pub fn parse(annotations: &BTreeMap<String, String>) -> Option<Self> {
        let list = annotations.get(CHART_LIST)?;
        let charts = split_list(list)
            .map(|entry| {
                let (alias, chart, constraint) = annotations::split_entry(entry);
                let alias = alias.map(str::to_string).filter(|a| !a.is_empty());
                let settings = Settings {
                    annotations,
                    alias: alias.as_deref(),
                };
                ChartEntry {
                    policy: settings.policy(constraint),
                    write_back_target: settings.value(WRITE_BACK_TARGET).map(|(_, v)| v.clone()),
                    chart: ImageRef::parse(chart),
                    alias,
                }
            })
            .collect::<Vec<ChartEntry>>();
        let write_back = chart_write_back(annotations, &charts);
        Some(Self { charts, write_back })
    }

    /// The entries naming `registry`/`repository` (a push to that repository).
    pub fn naming<'c>(
        &'c self,
        registry: &'c str,
        repository: &'c str,
    ) -> impl Iterator<Item = &'c ChartEntry> + 'c {
        self.charts
            .iter()
            .filter(move |c| c.chart.is(registry, repository))
    }
}

/// The Application's `write-back-method` as it applies to its charts.
fn chart_write_back(
    annotations: &BTreeMap<String, String>,
    charts: &[ChartEntry],
) -> Result<ChartWriteBack, AnnotationError> {
    let setting = |name: &str| format!("{PREFIX}{name}");
    let refuse = |annotation: String, value: &str, problem: &str| AnnotationError {
        annotation,
        value: value.to_string(),
        problem: problem.to_string(),
    };
    match annotations::write_back_of(annotations)? {
        WriteBack::Argocd => match charts.iter().find_map(|c| c.write_back_target.as_deref()) {
            Some(target) => Err(refuse(
                format!("{OWN_PREFIX}{SETTINGS}{WRITE_BACK_TARGET}"),
                target,
                "the Application is written back by patch (write-back-method argocd, the default): set write-back-method to git to commit chart versions to this file, or remove the setting",
            )),
            None => Ok(ChartWriteBack::Patch),
        },
        WriteBack::Git {
            credentials,
            branch,
            repository,
            pull_request,
            ..
        } => {
            if pull_request.is_some() {
                return Err(refuse(
                    format!("{OWN_PREFIX}git-pull-request"),
                    "",
                    "chart versions are committed to the branch; pull requests for them are not supported, and committing directly instead would bypass the review you asked for",
                ));
            }
            if let Some(branch) = branch.as_deref().filter(|b| b.contains(':')) {
                return Err(refuse(
                    setting("git-branch"),
                    branch,
                    "chart versions are committed to the branch the parent Application follows: name that one branch, without `<base>:<target>`",
                ));
            }
            let Some(repository) = repository.filter(|r| !r.trim().is_empty()) else {
                return Err(refuse(
                    setting("git-repository"),
                    "",
                    "a chart source is not a Git repository: set git-repository to the repository holding this Application's manifest",
                ));
            };
            Ok(ChartWriteBack::Git {
                credentials,
                repository,
                branch,
            })
        }
    }
}

/// Does a `chart-list` value name `registry`/`repository`? Asked of metadata still borrowed
/// from a list page.
pub fn list_names(list: &str, registry: &str, repository: &str) -> bool {
    split_list(list).any(|entry| {
        let (_, chart, _) = annotations::split_entry(entry);
        ImageRef::names(chart, registry, repository)
    })
}

fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// The `chart.*` settings of one entry.
struct Settings<'a> {
    annotations: &'a BTreeMap<String, String>,
    alias: Option<&'a str>,
}

impl Settings<'_> {
    /// The aliased key first, then the one for every chart: the key found and its value.
    fn value(&self, name: &str) -> Option<(String, &String)> {
        let aliased = self
            .alias
            .map(|alias| format!("{OWN_PREFIX}{SETTINGS}{alias}.{name}"));
        aliased
            .into_iter()
            .chain(std::iter::once(format!("{OWN_PREFIX}{SETTINGS}{name}")))
            .find_map(|key| self.annotations.get(&key).map(|value| (key, value)))
    }

    fn policy(&self, constraint: Option<&str>) -> Result<TagPolicy, AnnotationError> {
        let error = |key: String, value: &str, problem: String| AnnotationError {
            annotation: key,
            value: value.to_string(),
            problem,
        };
        let strategy = match self.value("update-strategy") {
            None => Strategy::Semver,
            Some((key, value)) => match value.parse::<Strategy>() {
                // A chart version is what Helm resolves by name: no digest to track.
                Ok(Strategy::Digest) => {
                    return Err(error(
                        key,
                        value,
                        "a chart's targetRevision is a version, not a digest: use semver, newest-build or alphabetical".into(),
                    ));
                }
                Ok(strategy) => strategy,
                Err(e) => return Err(error(key, value, e.to_string())),
            },
        };
        let allow = match self.value("allow-tags") {
            None => AllowTags::Any,
            Some((key, value)) => {
                AllowTags::parse(value).map_err(|e| error(key, value, e.to_string()))?
            }
        };
        let ignore = match self.value("ignore-tags") {
            None => IgnoreTags::default(),
            Some((key, value)) => {
                IgnoreTags::parse(value).map_err(|e| error(key, value, e.to_string()))?
            }
        };
        TagPolicy::new(strategy, constraint, allow, ignore).map_err(|e| {
            error(
                CHART_LIST.to_string(),
                constraint.unwrap_or_default(),
                e.to_string(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGISTRY: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_application_without_a_chart_list_has_no_chart_configuration() {
        let none = annotations(&[("argocd-ecr-updater.io/chart.update-strategy", "semver")]);
        assert!(ChartConfig::parse(&none).is_none());
    }

    #[test]
    fn each_entry_is_read_in_image_lists_grammar_with_semver_by_default() {
        let list = format!("web={REGISTRY}/charts/web:~1.2, {REGISTRY}/charts/db");
        let config = ChartConfig::parse(&annotations(&[(CHART_LIST, &list)])).unwrap();
        assert_eq!(config.charts.len(), 2);
        let web = &config.charts[0];
        assert_eq!(web.alias.as_deref(), Some("web"));
        assert!(web.chart.is(REGISTRY, "charts/web"));
        let policy = web.policy.as_ref().unwrap();
        assert_eq!(policy.strategy, Strategy::Semver);
        assert!(policy.is_eligible(&crate::policy::TagInfo::named("1.2.9")));
        assert!(!policy.is_eligible(&crate::policy::TagInfo::named("1.3.0")));
        assert_eq!(config.charts[1].alias, None);
        assert_eq!(config.naming(REGISTRY, "charts/db").count(), 1);
        assert_eq!(config.naming(REGISTRY, "charts/api").count(), 0);
    }

    #[test]
    fn an_aliased_setting_overrides_the_one_for_every_chart() {
        let list = format!("web={REGISTRY}/charts/web,db={REGISTRY}/charts/db");
        let config = ChartConfig::parse(&annotations(&[
            (CHART_LIST, &list),
            (
                "argocd-ecr-updater.io/chart.update-strategy",
                "newest-build",
            ),
            (
                "argocd-ecr-updater.io/chart.db.update-strategy",
                "alphabetical",
            ),
            (
                "argocd-ecr-updater.io/chart.write-back-target",
                "apps/web.yaml",
            ),
        ]))
        .unwrap();
        let strategies: Vec<Strategy> = config
            .charts
            .iter()
            .map(|c| c.policy.as_ref().unwrap().strategy)
            .collect();
        assert_eq!(strategies, [Strategy::NewestBuild, Strategy::Alphabetical]);
        assert_eq!(
            config.charts[1].write_back_target.as_deref(),
            Some("apps/web.yaml")
        );
    }

    #[test]
    fn settings_a_chart_cannot_have_are_errors_naming_the_annotation() {
        let cases = [
            (
                "argocd-ecr-updater.io/chart.update-strategy",
                "digest",
                "not a digest",
            ),
            (
                "argocd-ecr-updater.io/chart.update-strategy",
                "fastest",
                "unknown update strategy",
            ),
            (
                "argocd-ecr-updater.io/chart.allow-tags",
                "glob:*",
                "regexp:",
            ),
            (
                "argocd-ecr-updater.io/chart.ignore-tags",
                "[",
                "filepath.Match",
            ),
        ];
        let list = format!("{REGISTRY}/charts/web");
        for (key, value, expected) in cases {
            let config = ChartConfig::parse(&annotations(&[(CHART_LIST, &list), (key, value)]));
            let error = config.unwrap().charts[0].policy.clone().unwrap_err();
            assert_eq!(error.annotation, key, "{key}");
            assert!(error.to_string().contains(expected), "{key}: {error}");
        }
        let bad = format!("{REGISTRY}/charts/web:>>1");
        let config = ChartConfig::parse(&annotations(&[(CHART_LIST, &bad)])).unwrap();
        assert_eq!(
            config.charts[0].policy.as_ref().unwrap_err().annotation,
            CHART_LIST
        );
    }

    #[test]
    fn charts_are_patched_by_default_and_committed_only_where_git_can_hold_them() {
        let list = format!("{REGISTRY}/charts/web");
        let git = [
            (
                "argocd-image-updater.argoproj.io/write-back-method",
                "git:secret:argocd/git",
            ),
            (
                "argocd-image-updater.argoproj.io/git-repository",
                "https://github.com/org/apps",
            ),
            ("argocd-image-updater.argoproj.io/git-branch", "main"),
            (
                "argocd-ecr-updater.io/chart.write-back-target",
                "apps/web.yaml",
            ),
        ];
        let with = |extra: &[(&str, &str)], without: &[&str]| {
            let mut pairs: Vec<(&str, &str)> = vec![(CHART_LIST, list.as_str())];
            pairs.extend(git.iter().filter(|(k, _)| !without.contains(k)));
            pairs.extend_from_slice(extra);
            ChartConfig::parse(&annotations(&pairs)).unwrap().write_back
        };
        let cases: [(&str, Result<ChartWriteBack, &str>); 6] = [
            (
                "no write-back-method patches",
                ChartConfig::parse(&annotations(&[(CHART_LIST, &list)]))
                    .unwrap()
                    .write_back
                    .map_err(|_| ""),
            ),
            (
                "git with a repository and a file commits",
                with(&[], &[]).map_err(|_| ""),
            ),
            (
                "a file without git is refused",
                with(&[], &["argocd-image-updater.argoproj.io/write-back-method"]).map_err(|e| {
                    if e.problem.contains("set write-back-method to git") {
                        "patched"
                    } else {
                        "other"
                    }
                }),
            ),
            (
                "git without a repository is refused",
                with(&[], &["argocd-image-updater.argoproj.io/git-repository"]).map_err(|e| {
                    if e.annotation.ends_with("git-repository") {
                        "repository"
                    } else {
                        "other"
                    }
                }),
            ),
            (
                "a base:target branch is refused",
                with(
                    &[("argocd-image-updater.argoproj.io/git-branch", "main:charts")],
                    &[],
                )
                .map_err(|e| {
                    if e.annotation.ends_with("git-branch") {
                        "branch"
                    } else {
                        "other"
                    }
                }),
            ),
            (
                "a pull request is refused, never bypassed",
                with(&[("argocd-ecr-updater.io/git-pull-request", "true")], &[]).map_err(|e| {
                    if e.problem.contains("bypass the review") {
                        "review"
                    } else {
                        "other"
                    }
                }),
            ),
        ];
        let expected: [Result<ChartWriteBack, &str>; 6] = [
            Ok(ChartWriteBack::Patch),
            Ok(ChartWriteBack::Git {
                credentials: "git:secret:argocd/git".into(),
                repository: "https://github.com/org/apps".into(),
                branch: Some("main".into()),
            }),
            Err("patched"),
            Err("repository"),
            Err("branch"),
            Err("review"),
        ];
        for ((case, got), want) in cases.into_iter().zip(expected) {
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn the_listing_test_names_a_chart_only_by_registry_and_repository() {
        let list = format!("web={REGISTRY}/charts/web:^1");
        assert!(list_names(&list, REGISTRY, "charts/web"));
        assert!(!list_names(&list, REGISTRY, "charts/we"));
        assert!(!list_names(
            &list,
            "210987654321.dkr.ecr.eu-west-1.amazonaws.com",
            "charts/web"
        ));
    }
}
