//! Where git write-back's credentials come from, per Application's `write-back-method`:
//!
//! - `git`: the Secrets Manager secrets named in `GIT_CREDENTIALS_SECRET_ARNS` (the Lambda
//!   way: IAM decides who reads them, nothing is stored in the cluster). A secret is JSON
//!   with Argo CD's repository-secret keys, and an optional `url` prefix it serves; the
//!   longest matching prefix wins, a secret without `url` serves every repository.
//! - `git:secret:<namespace>/<name>`: that one Kubernetes Secret, as Image Updater reads it.
//! - `git:repocreds`: Argo CD's own repository credentials, only with `GIT_REPOCREDS=true`
//!   (it needs `list` on Secrets in Argo CD's namespace).
//!
//! Secrets Manager answers are kept for five minutes per warm container. No secret value
//! reaches a log line, a report or an error message.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::GitSettings;
use crate::github::Credentials;
use crate::kube::{KubeClient, KubeError};

/// Why no credentials could be had, and whether a retry could help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CredentialsError {
    pub message: String,
    pub retryable: bool,
}

fn permanent(message: String) -> CredentialsError {
    CredentialsError {
        message,
        retryable: false,
    }
}

/// One secret's credentials and the repository prefix they serve.
#[derive(Debug, Clone)]
struct Stored {
    url: Option<String>,
    credentials: Credentials,
}

const CACHE_FOR: Duration = Duration::from_secs(300);

pub struct GitCredentials {
    settings: GitSettings,
    secrets: aws_sdk_secretsmanager::Client,
    cache: Mutex<Option<(Instant, Vec<Stored>)>>,
}

impl GitCredentials {
    pub fn new(settings: GitSettings, secrets: aws_sdk_secretsmanager::Client) -> Self {
        Self {
            settings,
            secrets,
            cache: Mutex::new(None),
        }
    }

    /// The credentials `method` names for the repository at `repo_url`.
    pub async fn for_repository(
        &self,
        method: &str,
        repo_url: &str,
        kube: &KubeClient,
    ) -> Result<Credentials, CredentialsError> {
        if let Some(reference) = method.strip_prefix("git:secret:") {
            let (namespace, name) = reference.split_once('/').unwrap_or(("", reference));
            let secret = kube.get_secret(namespace, name).await.map_err(|e| {
                kube_failure(
                    &e,
                    &format!("cannot read Secret {namespace}/{name} named by write-back-method"),
                    &format!(
                        "grant the function `get` on that Secret (RBAC `resourceNames: [{name}]` in {namespace})"
                    ),
                )
            })?;
            return Credentials::from_fields(
                &secret_fields(&secret),
                &format!("Secret {namespace}/{name}"),
            )
            .map_err(permanent);
        }
        if method == "git:repocreds" {
            return self.repocreds(repo_url, kube).await;
        }
        let stored = self.stored().await?;
        pick(&stored, repo_url).ok_or_else(|| {
            permanent(if self.settings.credential_secret_arns.is_empty() {
                "write-back-method `git` needs credentials: put a token or GitHub App key in a Secrets Manager secret and list its ARN in GIT_CREDENTIALS_SECRET_ARNS (the template's GitCredentialsSecretArns), or use git:secret:<namespace>/<name>".to_string()
            } else {
                format!(
                    "none of the secrets in GIT_CREDENTIALS_SECRET_ARNS serves `{repo_url}`: give one a matching `url` prefix, or none to serve every repository"
                )
            })
        })
    }

    async fn stored(&self) -> Result<Vec<Stored>, CredentialsError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, stored)) = cache.as_ref()
            && at.elapsed() < CACHE_FOR
        {
            return Ok(stored.clone());
        }
        let mut stored = Vec::new();
        for arn in &self.settings.credential_secret_arns {
            let answer = self
                .secrets
                .get_secret_value()
                .secret_id(arn)
                .send()
                .await
                .map_err(|e| {
                    let described = crate::aws_error::describe(&e);
                    let denied = described.cause == crate::aws_error::Cause::AccessDenied;
                    let missing = described.code.as_deref() == Some("ResourceNotFoundException");
                    let text = described.to_string();
                    CredentialsError {
                        message: format!(
                            "cannot read git credentials secret {arn}: {text}{}",
                            if denied {
                                "; the function's role needs secretsmanager:GetSecretValue on it (the template grants it for GitCredentialsSecretArns)"
                            } else {
                                ""
                            }
                        ),
                        retryable: !missing && (denied || described.cause.is_retryable()),
                    }
                })?;
            let text = answer.secret_string().ok_or_else(|| {
                permanent(format!(
                    "secret {arn} has no SecretString: store the credentials as JSON text"
                ))
            })?;
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
                Credentials::from_fields(&fields, &format!("secret {arn}")).map_err(permanent)?;
            stored.push(Stored {
                url: fields.get("url").cloned(),
                credentials,
            });
        }
        *cache = Some((Instant::now(), stored.clone()));
        Ok(stored)
    }

    /// Argo CD's `repository` Secret for exactly this URL, else the `repo-creds` Secret with
    /// the longest matching URL prefix, as Argo CD itself chooses.
    async fn repocreds(
        &self,
        repo_url: &str,
        kube: &KubeClient,
    ) -> Result<Credentials, CredentialsError> {
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
        let wanted = normalise(repo_url);
        let mut best: Option<(usize, bool, Credentials)> = None;
        for secret in &secrets {
            let fields = secret_fields(secret);
            let Some(url) = fields.get("url") else {
                continue;
            };
            let exact =
                secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "repository";
            let matches = if exact {
                normalise(url) == wanted
            } else {
                repo_url.starts_with(url.as_str())
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
            let rank = (usize::from(exact) * 1_000_000) + url.len();
            if best.as_ref().is_none_or(|(r, _, _)| rank > *r) {
                best = Some((rank, exact, credentials));
            }
        }
        best.map(|(_, _, c)| c).ok_or_else(|| {
            permanent(format!(
                "no Argo CD repository Secret in {namespace} with a token or GitHub App key serves `{repo_url}`"
            ))
        })
    }
}

/// The secret with the longest `url` prefix of `repo_url`; one without `url` serves all.
fn pick(stored: &[Stored], repo_url: &str) -> Option<Credentials> {
    stored
        .iter()
        .filter(|s| s.url.as_deref().is_none_or(|u| repo_url.starts_with(u)))
        .max_by_key(|s| s.url.as_deref().map_or(0, |u| u.len() + 1))
        .map(|s| s.credentials.clone())
}

/// `https://github.com/a/b.git/` and `https://github.com/a/b` are the same repository.
fn normalise(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    url.strip_suffix(".git").unwrap_or(url).to_ascii_lowercase()
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

fn kube_failure(error: &KubeError, what: &str, fix: &str) -> CredentialsError {
    let fix = match error {
        KubeError::Forbidden { .. } | KubeError::NotFound { .. } => format!(": {fix}"),
        _ => String::new(),
    };
    CredentialsError {
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
            url: url.map(str::to_string),
            credentials: Credentials::Token(token.into()),
        }
    }

    #[test]
    fn the_longest_matching_url_prefix_wins_and_a_secret_without_url_serves_the_rest() {
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
                pick(&all, url),
                Some(Credentials::Token(token.into())),
                "{url}"
            );
        }
        assert_eq!(pick(&all[1..], "https://github.com/x/y"), None);
    }

    #[test]
    fn secret_data_is_base64_decoded() {
        let secret = json!({"data": {"password": "Z2hwX3g=", "username": "Z2l0", "broken": "%%"}});
        let fields = secret_fields(&secret);
        assert_eq!(fields.get("password").map(String::as_str), Some("ghp_x"));
        assert!(!fields.contains_key("broken"));
    }

    #[test]
    fn urls_are_compared_without_dot_git_trailing_slash_or_case() {
        assert_eq!(
            normalise("https://GitHub.com/a/b.git/"),
            normalise("https://github.com/a/b")
        );
    }
}
