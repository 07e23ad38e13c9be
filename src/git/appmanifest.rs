//! The Application manifest kept in Git (an app-of-apps file) that a chart's new version is
//! committed to: read as Argo CD reads it, edited in place, and read back (pure).
//!
//! A chart's version is the source's `targetRevision`, which Argo CD's `.argocd-source` files
//! cannot set (its repo server restores `targetRevision`, `chart`, `repoURL` and `path` after
//! merging them), so Git write-back of a chart edits the manifest that declares the
//! Application. The editor changes the first document only, so the Application must be the
//! file's first document.

use serde_json::Value;

use crate::git::readback::{self, Edit, ReadBackError};
use crate::git::yamledit::{Document, Step, YamlEditError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("`{file}` is not readable YAML: {message}")]
    Unreadable { file: String, message: String },
    #[error(
        "`{file}` does not begin with the Application `{namespace}/{name}` ({found}): put its manifest first in the file, or name the file that holds it in chart.write-back-target"
    )]
    NotTheApplication {
        file: String,
        namespace: String,
        name: String,
        found: String,
    },
    #[error("`{file}`: {source}")]
    Edit {
        file: String,
        #[source]
        source: YamlEditError,
    },
    #[error(transparent)]
    ReadBack(#[from] ReadBackError),
}

/// The first document of `text` as JSON, if it is the Application `namespace`/`name`: read
/// with libyaml's rules (YAML 1.1), as Argo CD's Go YAML reader reads the manifest, and only
/// if what its aliases expand to is bounded ([`crate::yaml`]). A manifest that names another
/// namespace is another Application of the same name; one that names none is taken to be this
/// one (it lands in the namespace the Application that applies it deploys to, which is not
/// read here).
pub fn application(
    file: &str,
    text: &str,
    namespace: &str,
    name: &str,
) -> Result<Value, ManifestError> {
    let unreadable = |message: String| ManifestError::Unreadable {
        file: file.to_string(),
        message,
    };
    let manifest = crate::yaml::first_document::<Value>(text)
        .map_err(|e| unreadable(e.to_string()))?
        .ok_or_else(|| unreadable("the file is empty".into()))?;
    if manifest.is_null() {
        return Err(unreadable("the file is empty".into()));
    }
    let (kind, found_name, found_namespace) = (
        manifest["kind"].as_str(),
        manifest["metadata"]["name"].as_str(),
        manifest["metadata"]["namespace"].as_str(),
    );
    let same_namespace = found_namespace.is_none_or(|found| found == namespace);
    if kind != Some("Application") || found_name != Some(name) || !same_namespace {
        let found = match (kind, found_name, found_namespace) {
            (Some(kind), Some(found), Some(ns)) if !same_namespace => {
                format!("its first document is {kind} `{ns}/{found}`")
            }
            (Some(kind), Some(found), _) => format!("its first document is {kind} `{found}`"),
            (Some(kind), None, _) => format!("its first document is a {kind} without a name"),
            (None, _, _) => "its first document has no kind".to_string(),
        };
        return Err(ManifestError::NotTheApplication {
            file: file.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            found,
        });
    }
    Ok(manifest)
}

/// The path of a source's `targetRevision` from its JSON pointer (`/spec/sources/1`).
fn revision_path(pointer: &str) -> Vec<Step<'_>> {
    let mut steps: Vec<Step<'_>> = pointer
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|part| match part.parse::<usize>() {
            Ok(index) => Step::Index(index),
            Err(_) => Step::Key(part),
        })
        .collect();
    steps.push(Step::Key("targetRevision"));
    steps
}

/// `text` with the `targetRevision` of the source at `pointer` set to `to`, every other byte
/// as it was; refused unless it reads back, as Argo CD reads it, as exactly that change.
pub fn set_target_revision(
    file: &str,
    text: &str,
    pointer: &str,
    to: &str,
) -> Result<String, ManifestError> {
    let path = revision_path(pointer);
    let document = Document::parse(text).map_err(|source| ManifestError::Edit {
        file: file.to_string(),
        source,
    })?;
    let edited = document
        .set(&path, to)
        .map_err(|source| ManifestError::Edit {
            file: file.to_string(),
            source,
        })?;
    let intended = Edit::Set(path.into_iter().map(Into::into).collect(), to.to_string());
    readback::check(file, Some(text), &edited, &[intended])?;
    Ok(edited)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "\
# The web service, deployed from its chart in ECR.
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web   # keep in sync with the team's dashboard
  namespace: argocd
spec:
  project: default
  sources:
    - repoURL: https://github.com/org/values.git
      targetRevision: main
      ref: values
    - repoURL: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/charts
      chart: web
      targetRevision: '1.2.0'   # bumped by argocd-ecr-updater
      helm:
        valueFiles: [$values/web/prod.yaml]
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: db
";

    #[test]
    fn the_first_document_is_read_only_if_it_is_the_application_named() {
        let app = application("apps/web.yaml", MANIFEST, "argocd", "web").unwrap();
        assert_eq!(app["spec"]["sources"][1]["targetRevision"], "1.2.0");
        let without_namespace = MANIFEST.replace("  namespace: argocd\n", "");
        let cases = [
            (
                "another name is refused",
                MANIFEST.to_string(),
                "argocd",
                "db",
                Some("its first document is Application `web`"),
            ),
            (
                "the same name in another namespace is refused",
                MANIFEST.to_string(),
                "team-b",
                "web",
                Some("its first document is Application `argocd/web`"),
            ),
            (
                "a manifest naming no namespace is taken as the Application's",
                without_namespace.clone(),
                "team-b",
                "web",
                None,
            ),
            (
                "a manifest naming no namespace still needs the name",
                without_namespace,
                "team-b",
                "api",
                Some("its first document is Application `web`"),
            ),
            (
                "an alias bomb is refused before it is read",
                format!(
                    "kind: Application\nmetadata: {{name: web}}\n{}",
                    crate::yaml::alias_bomb(100, 1, 20_000)
                ),
                "argocd",
                "web",
                Some("expands to more than"),
            ),
            (
                "broken YAML is unreadable",
                "kind: [".into(),
                "argocd",
                "web",
                Some("not readable YAML"),
            ),
            (
                "an empty file is unreadable",
                String::new(),
                "argocd",
                "web",
                Some("the file is empty"),
            ),
        ];
        for (case, text, namespace, name, expected) in cases {
            match (
                application("apps/web.yaml", &text, namespace, name),
                expected,
            ) {
                (Ok(_), None) => {}
                (Err(error), Some(words)) => {
                    assert!(error.to_string().contains(words), "{case}: {error}")
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_version_is_set_in_place_keeping_comments_quotes_and_other_documents() {
        let edited =
            set_target_revision("apps/web.yaml", MANIFEST, "/spec/sources/1", "1.3.0").unwrap();
        assert_eq!(
            edited,
            MANIFEST.replace("targetRevision: '1.2.0'", "targetRevision: '1.3.0'")
        );
        let single = "kind: Application\nmetadata: {name: web}\nspec:\n  source:\n    chart: web\n    targetRevision: 1.2.0\n";
        let edited = set_target_revision("a.yaml", single, "/spec/source", "1.10").unwrap();
        // A plain `1.10` would read back as a number: the editor quotes it, and the read-back
        // confirms Argo CD sees the string.
        assert!(edited.contains("targetRevision: \"1.10\""), "{edited}");
    }

    #[test]
    fn a_version_behind_an_alias_is_refused_not_rewritten_elsewhere() {
        let aliased = "kind: Application\nmetadata: {name: web}\nx: &v 1.2.0\nspec:\n  source:\n    chart: web\n    targetRevision: *v\n";
        let error = set_target_revision("a.yaml", aliased, "/spec/source", "1.3.0").unwrap_err();
        assert!(matches!(error, ManifestError::Edit { .. }), "{error}");
    }
}
