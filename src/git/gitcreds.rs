//! Where git write-back's credentials come from, per Application's `write-back-method`:
//!
//! - `git`: the Secrets Manager secrets named in `GIT_CREDENTIALS_SECRET_ARNS` (the Lambda
//!   way: IAM decides who reads them, nothing is stored in the cluster). A secret is JSON
//!   with Argo CD's repository-secret keys, and an optional `url` scope it serves; the
//!   longest matching scope wins, a secret without `url` serves every repository.
//! - `git:secret:<namespace>/<name>`: that one Kubernetes Secret, as Image Updater reads it,
//!   in the Application's own namespace, Argo CD's, or one listed in `GIT_SECRET_NAMESPACES`.
//!
//! Scopes are matched on parsed URLs ([`RepoUrl::within`]): same scheme, host and port, and
//! whole path segments, so `https://gitlab.com/acme/` never serves `acme-evil`, nor a URL
//! that names another host after an `@`.
//! - `git:repocreds`: Argo CD's own repository credentials, only with `GIT_REPOCREDS=true`
//!   (it needs `list` on Secrets in Argo CD's namespace).
//!
//! Secrets Manager answers are kept for five minutes per warm container. No secret value
//! reaches a log line, a report or an error message.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use serde_json::Value;

use crate::aws::secrets::{SecretError, SecretReader};
use crate::cluster::kube::{KubeClient, KubeError};
use crate::config::GitSettings;
use crate::git::repourl::RepoUrl;

use crate::failure::{Failure, Refused};

fn permanent(message: String) -> Failure {
    Failure::permanent(message)
}

/// Credentials for one repository, in the shapes Argo CD's repository secrets use.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A personal access token, fine-grained token, or `password` of a `username`/`password`.
    Token(String),
    App {
        app_id: String,
        installation_id: String,
        private_key_pem: String,
    },
}

impl std::fmt::Debug for Credentials {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Token(_) => f.write_str("Credentials::Token(***)"),
            Self::App {
                app_id,
                installation_id,
                ..
            } => write!(
                f,
                "Credentials::App {{ app_id: {app_id}, installation_id: {installation_id}, private_key: *** }}"
            ),
        }
    }
}

impl Credentials {
    /// Reads the fields of a secret (Secrets Manager JSON, or a Kubernetes Secret's decoded
    /// data): `token`, `password`, or `githubAppID` + `githubAppInstallationID` +
    /// `githubAppPrivateKey`.
    pub fn from_fields(fields: &HashMap<String, String>, origin: &str) -> Result<Self, Refused> {
        let get = |k: &str| fields.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let (Some(app_id), Some(installation_id), Some(key)) = (
            get("githubAppID"),
            get("githubAppInstallationID"),
            get("githubAppPrivateKey"),
        ) {
            return Ok(Self::App {
                app_id: app_id.to_string(),
                installation_id: installation_id.to_string(),
                private_key_pem: key.to_string(),
            });
        }
        if let Some(token) = get("token").or_else(|| get("password")) {
            return Ok(Self::Token(token.to_string()));
        }
        Err(Refused::from(format!(
            "{origin} holds neither `token` (or `password`) nor `githubAppID`, `githubAppInstallationID` and `githubAppPrivateKey`"
        )))
    }
}

/// A secret's text read as the documented JSON: the credentials and their `url` scope.
fn stored_from_text(arn: &str, text: &str) -> Result<Stored, Failure> {
    let json: Value = serde_json::from_str(text).map_err(|_| {
        permanent(format!(
            "secret {arn} is not JSON: store {{\"token\": \"...\"}} or the GitHub App fields"
        ))
    })?;
    let fields: HashMap<String, String> = json
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default();
    let credentials =
        Credentials::from_fields(&fields, &format!("secret {arn}")).map_err(Failure::from)?;
    let url =
        match fields.get("url") {
            Some(url) => Some(RepoUrl::parse(url).map_err(|e| {
                permanent(format!("secret {arn}: its `url` scope is not usable: {e}"))
            })?),
            None => None,
        };
    Ok(Stored { url, credentials })
}

/// What a Git credentials secret holds, judged as the function judges it when it reads it:
/// `a token` or `a GitHub App`, or why the function cannot use it. Never the secret itself.
pub fn credentials_secret_kind(arn: &str, text: &str) -> Result<&'static str, String> {
    match stored_from_text(arn, text) {
        Ok(Stored {
            credentials: Credentials::Token(_),
            ..
        }) => Ok("a token"),
        Ok(Stored {
            credentials: Credentials::App { .. },
            ..
        }) => Ok("a GitHub App"),
        Err(failure) => Err(failure.message),
    }
}

/// One secret's credentials and the repositories they serve (`None`: every one).
#[derive(Debug, Clone)]
struct Stored {
    url: Option<RepoUrl>,
    credentials: Credentials,
}

pub struct GitCredentials {
    settings: GitSettings,
    secrets: Arc<SecretReader>,
}

impl GitCredentials {
    pub fn new(settings: GitSettings, secrets: Arc<SecretReader>) -> Self {
        Self { settings, secrets }
    }

    /// The credentials `method` names for the repository at `repo_url`, for an Application
    /// in `app_namespace` of the AppProject `project`.
    pub async fn for_repository(
        &self,
        method: &str,
        repo_url: &str,
        app_namespace: &str,
        project: &str,
        kube: &KubeClient,
    ) -> Result<Credentials, Failure> {
        let repository = RepoUrl::parse(repo_url).map_err(Failure::from)?;
        if let Some(reference) = method.strip_prefix("git:secret:") {
            let (namespace, name) =
                secret_reference(reference, app_namespace, &self.settings).map_err(permanent)?;
            let secret = kube.get_secret(namespace, name).await.map_err(|e| {
                kube_failure(
                    &e,
                    &format!("cannot read Secret {namespace}/{name} named by write-back-method"),
                    &format!(
                        "grant the function `get` on that Secret (RBAC `resourceNames: [{name}]` in {namespace})"
                    ),
                )
            })?;
            let fields = secret_fields(&secret);
            let label = format!("Secret {namespace}/{name}");
            if let Some(refusal) =
                secret_scope_refusal(&secret, &fields, (&repository, repo_url), project)
            {
                return Err(permanent(format!(
                    "{label} named by write-back-method {refusal}"
                )));
            }
            return Credentials::from_fields(&fields, &label).map_err(Failure::from);
        }
        if method == "git:repocreds" {
            return self.repocreds(&repository, repo_url, project, kube).await;
        }
        let stored = self.stored().await?;
        pick(&stored, &repository).ok_or_else(|| {
            permanent(if self.settings.credential_secret_arns.is_empty() {
                "write-back-method `git` needs credentials: put a token or GitHub App key in a Secrets Manager secret and list its ARN in GIT_CREDENTIALS_SECRET_ARNS (the template's GitCredentialsSecretArns), or use git:secret:<namespace>/<name>".to_string()
            } else {
                format!(
                    "none of the secrets in GIT_CREDENTIALS_SECRET_ARNS serves `{}`: give one a `url` with the same scheme, host and leading path segments (a token without `url` serves every repository; a GitHub App key without `url` serves github.com only)",
                    crate::redact::url(repo_url)
                )
            })
        })
    }

    /// The credentials of `GIT_CREDENTIALS_SECRET_ARNS` whose `url` scope covers `repo_url`
    /// (the narrowest): for a write to a repository an image's label names, which whoever
    /// builds the image chooses, a secret without a scope serves nothing.
    pub async fn scoped_to(&self, repo_url: &str) -> Result<Credentials, Failure> {
        let repository = RepoUrl::parse(repo_url).map_err(Failure::from)?;
        let stored = self.stored().await?;
        stored
            .iter()
            .filter_map(|s| Some((s.url.as_ref()?, &s.credentials)))
            .filter(|(scope, _)| repository.within(scope))
            .max_by_key(|(scope, _)| scope.segments.len())
            .map(|(_, credentials)| credentials.clone())
            .ok_or_else(|| {
                permanent(format!(
                    "no secret in GIT_CREDENTIALS_SECRET_ARNS has a `url` scope covering `{}`; a commit status is written only with a credential scoped to its repository",
                    crate::redact::url(repo_url)
                ))
            })
    }

    /// The secrets of `GIT_CREDENTIALS_SECRET_ARNS`, in their order.
    async fn stored(&self) -> Result<Vec<Stored>, Failure> {
        let mut stored = Vec::new();
        for arn in &self.settings.credential_secret_arns {
            let text = self.secrets.text(arn).await.map_err(|e| match e {
                SecretError::NotText => permanent(format!(
                    "secret {arn} has no SecretString: store the credentials as JSON text"
                )),
                e => Failure::new(
                    format!(
                        "cannot read git credentials secret {arn}: {e}{}",
                        if e.is_denied() {
                            "; the function's role needs secretsmanager:GetSecretValue on it (the template grants it for GitCredentialsSecretArns)"
                        } else {
                            ""
                        }
                    ),
                    !e.is_missing() && (e.is_denied() || e.is_transient()),
                ),
            })?;
            stored.push(stored_from_text(arn, &text)?);
        }
        Ok(stored)
    }

    /// Argo CD's `repository` Secret for exactly this repository, else the `repo-creds`
    /// Secret with the longest matching URL scope, as Argo CD itself chooses (but matched on
    /// whole path segments of the parsed URL, not on a string prefix). A Secret with a
    /// `project` serves only Applications of that AppProject, and is preferred there over one
    /// without, as Argo CD's project-scoped repositories are.
    async fn repocreds(
        &self,
        repository: &RepoUrl,
        repo_url: &str,
        project: &str,
        kube: &KubeClient,
    ) -> Result<Credentials, Failure> {
        let namespace = &self.settings.argocd_namespace;
        if !self.settings.repocreds {
            return Err(permanent(format!(
                "write-back-method `git:repocreds` reads Argo CD's repository Secrets, which needs `list` on Secrets in {namespace}: set GIT_REPOCREDS=true (template parameter GitRepoCreds) and grant it (deploy/rbac-repocreds.yaml), or use `git` with a Secrets Manager secret"
            )));
        }
        let secrets = kube
            .list_secrets(
                namespace,
                "argocd.argoproj.io/secret-type in (repository,repo-creds)",
            )
            .await
            .map_err(|e| {
                kube_failure(
                    &e,
                    &format!("cannot list Argo CD's repository Secrets in {namespace}"),
                    "apply deploy/rbac-repocreds.yaml",
                )
            })?;
        let mut best: Option<(usize, Credentials)> = None;
        for secret in &secrets {
            let fields = secret_fields(secret);
            let Some(scope) = fields.get("url").and_then(|u| RepoUrl::parse(u).ok()) else {
                continue;
            };
            let scoped_to = fields
                .get("project")
                .map(|p| p.trim())
                .filter(|p| !p.is_empty());
            if scoped_to.is_some_and(|p| p != project) {
                continue;
            }
            let exact =
                secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "repository";
            let matches = if exact {
                repository.same_repository(&scope)
            } else {
                repository.within(&scope)
            };
            if !matches {
                continue;
            }
            let name = secret["metadata"]["name"].as_str().unwrap_or_default();
            let Ok(credentials) =
                Credentials::from_fields(&fields, &format!("Secret {namespace}/{name}"))
            else {
                continue;
            };
            let rank = (usize::from(exact) * 1_000_000)
                + (usize::from(scoped_to.is_some()) * 1_000)
                + scope.segments.len();
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((rank, credentials));
            }
        }
        best.map(|(_, c)| c).ok_or_else(|| {
            permanent(format!(
                "no Argo CD repository Secret in {namespace} with a token or GitHub App key serves `{}` for AppProject `{project}` (a Secret with a `project` field serves that project's Applications only)",
                crate::redact::url(repo_url)
            ))
        })
    }
}

/// The secret with the longest scope that serves `repository`. A token without `url` serves
/// every repository; a GitHub App's key without `url` serves github.com alone, so its JWT is
/// never sent to another host (a GitHub Enterprise server is given an App key by a `url`
/// scope on that host).
fn pick(stored: &[Stored], repository: &RepoUrl) -> Option<Credentials> {
    stored
        .iter()
        .filter(|s| match (&s.url, &s.credentials) {
            (Some(scope), _) => repository.within(scope),
            (None, Credentials::App { .. }) => repository.host == "github.com",
            (None, Credentials::Token(_)) => true,
        })
        .max_by_key(|s| s.url.as_ref().map_or(0, |scope| scope.segments.len() + 1))
        .map(|s| s.credentials.clone())
}

/// Why a Secret named by `git:secret:` may not serve `repository` for an Application of the
/// AppProject `project`, as Argo CD scopes its own repository Secrets: a `project` field serves
/// that project's Applications only; a `url` field serves that repository (a `repository`
/// Secret) or the repositories under it (any other), on whole path segments of the parsed URL.
/// A Secret with neither serves every repository, as Image Updater's `git:secret:` does.
fn secret_scope_refusal(
    secret: &Value,
    fields: &HashMap<String, String>,
    (repository, repo_url): (&RepoUrl, &str),
    project: &str,
) -> Option<String> {
    if let Some(scoped_to) = fields
        .get("project")
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        && scoped_to != project
    {
        return Some(format!(
            "is scoped to AppProject `{scoped_to}` (its `project` field) and the Application is in `{project}`: name a Secret of the Application's own project, or one without `project`"
        ));
    }
    let url = fields
        .get("url")
        .map(|u| u.trim())
        .filter(|u| !u.is_empty())?;
    let Ok(scope) = RepoUrl::parse(url) else {
        return Some(
            "has a `url` field that is not a repository URL this function can match: fix the Secret's `url`".into(),
        );
    };
    let exact = secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "repository";
    let serves = if exact {
        repository.same_repository(&scope)
    } else {
        repository.within(&scope)
    };
    (!serves).then(|| {
        format!(
            "serves `{}` (its `url` field){}, not `{}`: name a Secret whose `url` covers the repository, or remove the Secret's `url`",
            crate::redact::url(url),
            if exact { " alone" } else { " and the repositories under it" },
            crate::redact::url(repo_url),
        )
    })
}

/// The Secret `git:secret:<namespace>/<name>` names, if the function may read it for an
/// Application in `app_namespace`: the Application's own namespace, Argo CD's, or one the
/// operator listed. Without the limit, anyone who may edit an Application's annotations could
/// have the function send any Secret it can read to a Git host of their choosing.
fn secret_reference<'a>(
    reference: &'a str,
    app_namespace: &'a str,
    settings: &GitSettings,
) -> Result<(&'a str, &'a str), String> {
    // Image Updater requires both parts too ("namespace/name").
    let (namespace, name) = reference.split_once('/').unwrap_or(("", reference));
    let subdomain = |s: &str| s.len() <= 253 && s.split('.').all(crate::config::is_namespace);
    if !crate::config::is_namespace(namespace) || !subdomain(name) {
        return Err(format!(
            "write-back-method `git:secret:{reference}` does not name a Secret as `<namespace>/<name>` (lowercase DNS-1123 names)"
        ));
    }
    let allowed = namespace == app_namespace
        || namespace == settings.argocd_namespace
        || settings.secret_namespaces.iter().any(|n| n == namespace);
    if !allowed {
        return Err(format!(
            "write-back-method `git:secret:{namespace}/{name}` names a Secret in {namespace}, outside the Application's namespace ({app_namespace}) and Argo CD's ({}): move the Secret there, or list {namespace} in GIT_SECRET_NAMESPACES (template parameter GitSecretNamespaces) and grant `get` on it",
            settings.argocd_namespace
        ));
    }
    Ok((namespace, name))
}

/// A Secret's `data` decoded (and `stringData`, which a stand-in or a fresh object may hold).
fn secret_fields(secret: &Value) -> HashMap<String, String> {
    let mut fields = HashMap::new();
    if let Some(data) = secret["data"].as_object() {
        for (key, value) in data {
            if let Some(text) = value
                .as_str()
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
                .and_then(|bytes| String::from_utf8(bytes).ok())
            {
                fields.insert(key.clone(), text);
            }
        }
    }
    fields
}

fn kube_failure(error: &KubeError, what: &str, fix: &str) -> Failure {
    let fix = match error {
        KubeError::Forbidden { .. } | KubeError::NotFound { .. } => format!(": {fix}"),
        _ => String::new(),
    };
    Failure {
        message: format!("{what}: {error}{fix}"),
        retryable: error.is_retryable(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(url: Option<&str>, token: &str) -> Stored {
        Stored {
            url: url.map(|u| RepoUrl::parse(u).unwrap()),
            credentials: Credentials::Token(token.into()),
        }
    }

    #[test]
    fn a_secret_named_by_git_secret_serves_only_its_project_and_its_url() {
        let repo = "https://github.com/acme/deploy.git";
        let secret = |kind: Option<&str>| match kind {
            Some(kind) => json!({"metadata": {"labels": {"argocd.argoproj.io/secret-type": kind}}}),
            None => json!({"metadata": {}}),
        };
        let table: [(&str, Option<&str>, &[(&str, &str)], Option<&str>); 10] = [
            (
                "a secret with neither project nor url serves any repository",
                None,
                &[],
                None,
            ),
            (
                "a secret of the application's project serves it",
                None,
                &[("project", "default")],
                None,
            ),
            (
                "a blank project is no scope",
                None,
                &[("project", "  ")],
                None,
            ),
            (
                "a secret of another project is refused",
                None,
                &[("project", "team-b")],
                Some("scoped to AppProject `team-b`"),
            ),
            (
                "a url above the repository serves it",
                None,
                &[("url", "https://github.com/acme")],
                None,
            ),
            (
                "a url of another owner is refused",
                None,
                &[("url", "https://github.com/acme-evil")],
                Some("serves `https://github.com/acme-evil`"),
            ),
            (
                "a url on another host is refused",
                None,
                &[("url", "https://gitlab.com/acme")],
                Some("and the repositories under it, not"),
            ),
            (
                "a repository secret serves exactly its repository",
                Some("repository"),
                &[("url", "https://github.com/acme/deploy")],
                None,
            ),
            (
                "a repository secret does not serve the repositories under its url",
                Some("repository"),
                &[("url", "https://github.com/acme")],
                Some("alone, not"),
            ),
            (
                "an unparsable url is refused",
                None,
                &[("url", "::nonsense::")],
                Some("not a repository URL"),
            ),
        ];
        for (case, kind, fields, refused) in table {
            let fields: HashMap<String, String> = fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let parsed = RepoUrl::parse(repo).unwrap();
            let got = secret_scope_refusal(&secret(kind), &fields, (&parsed, repo), "default");
            match (got, refused) {
                (None, None) => {}
                (Some(reason), Some(words)) => assert!(reason.contains(words), "{case}: {reason}"),
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn debug_output_never_shows_a_token_or_a_private_key() {
        let token = Credentials::Token("ghp_secret123".into());
        let app = Credentials::App {
            app_id: "42".into(),
            installation_id: "7".into(),
            private_key_pem: "-----BEGIN RSA PRIVATE KEY-----\nsecretkey\n".into(),
        };
        let printed = format!("{token:?} {app:?} {:?}", stored(None, "ghp_other456"));
        for secret in ["ghp_secret123", "secretkey", "PRIVATE KEY", "ghp_other456"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(printed.contains("app_id: 42"), "{printed}");
    }

    #[test]
    fn the_longest_matching_url_scope_wins_and_a_secret_without_url_serves_the_rest() {
        let all = vec![
            stored(None, "default"),
            stored(Some("https://github.com/acme/"), "acme"),
            stored(Some("https://github.com/acme/deploy"), "deploy"),
        ];
        for (url, token) in [
            ("https://github.com/acme/deploy.git", "deploy"),
            ("https://github.com/acme/other.git", "acme"),
            ("https://github.com/someone/else.git", "default"),
        ] {
            assert_eq!(
                pick(&all, &RepoUrl::parse(url).unwrap()),
                Some(Credentials::Token(token.into())),
                "{url}"
            );
        }
        let github = |u: &str| RepoUrl::parse(u).unwrap();
        assert_eq!(pick(&all[1..], &github("https://github.com/x/y")), None);
    }

    #[test]
    fn a_github_app_key_without_a_scope_serves_github_com_alone() {
        let app = Stored {
            url: None,
            credentials: Credentials::App {
                app_id: "1".into(),
                installation_id: "2".into(),
                private_key_pem: "key".into(),
            },
        };
        let all = vec![app.clone()];
        for (url, served) in [
            ("https://github.com/acme/deploy.git", true),
            ("git@github.com:acme/deploy.git", true),
            ("https://ghe.acme.internal/acme/deploy.git", false),
            ("https://gitlab.com/acme/deploy.git", false),
            ("https://github.com.evil.io/acme/deploy.git", false),
        ] {
            let picked = pick(&all, &RepoUrl::parse(url).unwrap());
            assert_eq!(picked.is_some(), served, "{url}");
        }
        // Scoped to the Enterprise host, it serves it.
        let scoped = vec![Stored {
            url: Some(RepoUrl::parse("https://ghe.acme.internal/acme/").unwrap()),
            ..app
        }];
        let ghe = RepoUrl::parse("https://ghe.acme.internal/acme/deploy.git").unwrap();
        assert!(pick(&scoped, &ghe).is_some());
    }

    #[test]
    fn a_scoped_secret_never_serves_another_host_or_a_longer_owner_name() {
        let gitlab = vec![stored(Some("https://gitlab.com/acme/"), "gitlab-token")];
        for url in [
            "https://gitlab.com/acme-evil/x",
            "https://github.com/acme/x",
            "https://gitlab.com.evil.io/acme/x",
            "http://gitlab.com/acme/x",
        ] {
            assert_eq!(pick(&gitlab, &RepoUrl::parse(url).unwrap()), None, "{url}");
        }
        // The URL that named github.com after an `@` does not even parse.
        assert!(RepoUrl::parse("https://gitlab.com/acme/x@github.com/acme/y").is_err());
    }

    /// The Secrets channel: what a secret's author could write, each read as the function
    /// reads it. Nothing unusable is used, and no message repeats a secret's value.
    #[test]
    fn hostile_secrets_are_refused_with_a_reason_that_holds_no_secret() {
        let arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-Ab12Cd";
        for (text, words) in [
            ("ghp_plain_token_not_json", "is not JSON"),
            ("[\"ghp_in_a_list\"]", "holds neither"),
            ("{\"tokn\": \"ghp_misspelt\"}", "holds neither"),
            ("{\"token\": \"\"}", "holds neither"),
            (
                "{\"token\": \"ghp_x\", \"url\": \"https://u:pw@github.com/acme/\"}",
                "scope is not usable",
            ),
            (
                "{\"token\": \"ghp_x\", \"url\": \"https://github.com/acme/../other\"}",
                "scope is not usable",
            ),
            (
                "{\"githubAppID\": \"1\", \"githubAppInstallationID\": \"2\"}",
                "holds neither",
            ),
        ] {
            let error = stored_from_text(arn, text).unwrap_err();
            assert!(error.message.contains(words), "{text}: {}", error.message);
            assert!(!error.retryable, "{text}");
            for secret in [
                "ghp_plain_token_not_json",
                "ghp_in_a_list",
                "ghp_misspelt",
                "pw@",
            ] {
                assert!(!error.message.contains(secret), "{text}: {}", error.message);
            }
        }
        // Usable, but scoped: a token for one owner serves no other; an App key without a
        // scope serves github.com alone.
        let scoped = stored_from_text(
            arn,
            "{\"token\": \"ghp_x\", \"url\": \"https://github.com/acme/\"}",
        )
        .unwrap();
        let other = RepoUrl::parse("https://github.com/acme-evil/x").unwrap();
        assert_eq!(pick(&[scoped], &other), None);
        let app = stored_from_text(
            arn,
            "{\"githubAppID\": \"1\", \"githubAppInstallationID\": \"2\", \"githubAppPrivateKey\": \"k\"}",
        )
        .unwrap();
        let enterprise = RepoUrl::parse("https://ghe.acme.internal/acme/x").unwrap();
        assert_eq!(pick(&[app], &enterprise), None);
    }

    fn settings(extra: &[&str]) -> GitSettings {
        GitSettings {
            argocd_namespace: "argocd".into(),
            credential_secret_arns: Vec::new(),
            repocreds: false,
            secret_namespaces: extra.iter().map(|s| s.to_string()).collect(),
            enterprise_hosts: Vec::new(),
            github_api_url: None,
            gitlab_api_url: None,
            ca_bundle: None,
        }
    }

    #[test]
    fn git_secret_reads_only_the_application_s_argo_cd_s_or_a_listed_namespace() {
        let none = settings(&[]);
        let listed = settings(&["platform-secrets"]);
        for (reference, config, allowed) in [
            ("team-a/git-creds", &none, Some(("team-a", "git-creds"))),
            ("argocd/git-creds", &none, Some(("argocd", "git-creds"))),
            ("git-creds", &none, None),
            ("kube-system/aws-creds", &none, None),
            ("platform-secrets/git", &none, None),
            (
                "platform-secrets/git",
                &listed,
                Some(("platform-secrets", "git")),
            ),
            ("team-a/../kube-system/x", &none, None),
            ("team-a/x/y", &none, None),
            ("team-a/..", &none, None),
            ("Team-A/x", &none, None),
            ("team-a/", &none, None),
        ] {
            assert_eq!(
                secret_reference(reference, "team-a", config).ok(),
                allowed,
                "git:secret:{reference}"
            );
        }
        let refused = secret_reference("kube-system/aws", "team-a", &none).unwrap_err();
        assert!(refused.contains("GIT_SECRET_NAMESPACES"), "{refused}");
    }

    #[test]
    fn secret_data_is_base64_decoded() {
        let secret = json!({"data": {"password": "Z2hwX3g=", "username": "Z2l0", "broken": "%%"}});
        let fields = secret_fields(&secret);
        assert_eq!(fields.get("password").map(String::as_str), Some("ghp_x"));
        assert!(!fields.contains_key("broken"));
    }
}
