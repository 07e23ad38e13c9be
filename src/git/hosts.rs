//! The Git hosts of one warm container, and opening the repository an Application's change
//! goes to: where it is committed ([`gitwrite::locate`]), which host serves it (GitHub,
//! GitHub Enterprise, GitLab, CodeCommit), and the credentials scoped to it (GitHub's and
//! GitLab's from the configured secrets, CodeCommit's the function's own IAM role).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::appconfig::annotations::WriteBack;
use crate::application::app::Application;
use crate::aws::secrets::SecretReader;
use crate::cluster::kube::KubeClient;
use crate::config::Config;
use crate::git::codecommit::CodeCommit;
use crate::git::gitcreds::{Credentials, GitCredentials};
use crate::git::githost::GitHost;
use crate::git::github::{GitHub, GitHubRepository};
use crate::git::gitlab::GitLab;
use crate::git::gitwrite::{self, Location};
use crate::git::repourl::{HostKind, Repo};

/// Why an Application's repository cannot be written now: every image it concerns fails
/// with this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
    pub retryable: bool,
}

/// The hosts' clients, built once per warm container, and one lock per repository.
pub struct GitHosts {
    github: GitHub,
    gitlab: GitLab,
    codecommit: CodeCommit,
    credentials: GitCredentials,
    /// Applications of one invocation that commit to the same repository take turns,
    /// instead of racing each other's `expectedHeadOid`.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    argocd_namespace: String,
    enterprise_hosts: Vec<crate::config::EnterpriseHost>,
}

impl GitHosts {
    /// `sdk` carries the function's own credentials and region (CodeCommit's).
    pub fn new(
        config: &Config,
        sdk: &aws_config::SdkConfig,
        region: &str,
        secrets: Arc<SecretReader>,
    ) -> Self {
        let git = &config.git;
        Self {
            github: GitHub::new(
                git.ca_bundle.as_deref(),
                git.github_api_url.clone(),
                config.timeouts.request,
            ),
            gitlab: GitLab::new(
                git.ca_bundle.as_deref(),
                git.gitlab_api_url.clone(),
                config.timeouts.request,
            ),
            codecommit: CodeCommit::new(sdk.clone(), region.to_string()),
            credentials: GitCredentials::new(git.clone(), secrets),
            locks: Mutex::new(HashMap::new()),
            argocd_namespace: git.argocd_namespace.clone(),
            enterprise_hosts: git.enterprise_hosts.clone(),
        }
    }

    /// Where `app`'s change is committed under `method`, and that repository's host with
    /// the credentials `credentials` (`git`, `git:repocreds`, `git:secret:<ns>/<name>`)
    /// name for it. Secrets are read through `kube`.
    pub async fn open(
        &self,
        app: &Application<'_>,
        method: &WriteBack,
        credentials: &str,
        kube: &KubeClient,
    ) -> Result<(Location, Box<dyn GitHost + '_>), Unavailable> {
        let location =
            gitwrite::locate(app, method, &self.argocd_namespace, &self.enterprise_hosts).map_err(
                |reason| Unavailable {
                    reason: format!("git write-back: {reason}"),
                    retryable: false,
                },
            )?;
        let host = self
            .open_repository(app, &location.repo, &location.url, credentials, kube)
            .await?;
        Ok((location, host))
    }

    /// The repository `url` (parsed as `repo`) with the credentials `credentials` name for
    /// `app`: its own method's Secret, Argo CD's repository credentials, or for CodeCommit
    /// the function's role.
    pub async fn open_repository(
        &self,
        app: &Application<'_>,
        repo: &Repo,
        url: &str,
        credentials: &str,
        kube: &KubeClient,
    ) -> Result<Box<dyn GitHost + '_>, Unavailable> {
        if let HostKind::CodeCommit { region } = &repo.kind {
            return Ok(Box::new(self.codecommit.repository(region, &repo.name)));
        }
        let namespace = app.identity().namespace;
        // Argo CD's AppProject: a project-scoped repository credential serves only its own.
        let project = app.spec.project.as_deref().unwrap_or("default");
        let scoped = self
            .credentials
            .for_repository(credentials, url, namespace, project, kube)
            .await
            .map_err(|e| Unavailable {
                reason: e.message,
                retryable: e.retryable,
            })?;
        self.host(repo, scoped)
    }

    /// A Git repository URL parsed as the hosts this function knows read it.
    pub fn parse_repository(&self, url: &str) -> Result<Repo, Unavailable> {
        Repo::parse(url, &self.enterprise_hosts).map_err(|e| Unavailable {
            reason: format!("git write-back: {}", e.0),
            retryable: false,
        })
    }

    /// The repository an image names as its source (`url`), on GitHub or GitLab, with the
    /// credentials `GIT_CREDENTIALS_SECRET_ARNS` scopes to it by `url`: a commit status is
    /// written only where a credential is granted for that repository.
    pub async fn open_source(&self, url: &str) -> Result<Box<dyn GitHost + '_>, Unavailable> {
        let refused = |reason: String| Unavailable {
            reason,
            retryable: false,
        };
        let repo = Repo::parse(url, &self.enterprise_hosts).map_err(|e| refused(e.0))?;
        if matches!(repo.kind, HostKind::CodeCommit { .. }) {
            return Err(refused(format!(
                "{} is on CodeCommit, which has no commit statuses",
                repo.full_name()
            )));
        }
        let scoped = self
            .credentials
            .scoped_to(url)
            .await
            .map_err(|e| Unavailable {
                reason: e.message,
                retryable: e.retryable,
            })?;
        self.host(&repo, scoped)
    }

    /// A GitHub or GitLab repository with its credentials.
    fn host(&self, repo: &Repo, scoped: Credentials) -> Result<Box<dyn GitHost + '_>, Unavailable> {
        Ok(match (&repo.kind, scoped) {
            (HostKind::GitLab, Credentials::Token(token)) => {
                Box::new(self.gitlab.project(repo.clone(), token))
            }
            (HostKind::GitLab, Credentials::App { .. }) => {
                return Err(Unavailable {
                    reason: format!(
                        "{} is on GitLab, which takes a project or group access token, not GitHub App credentials",
                        repo.full_name()
                    ),
                    retryable: false,
                });
            }
            (HostKind::GitHub, scoped) => Box::new(GitHubRepository {
                client: &self.github,
                repo: repo.clone(),
                credentials: scoped,
            }),
            // Opened through the function's role, never with a Git credential: a CodeCommit
            // repository reaching here would be a caller's mistake, refused rather than sent
            // to another host's client.
            (HostKind::CodeCommit { .. }, _) => {
                return Err(Unavailable {
                    reason: format!(
                        "{} is on CodeCommit, which is written through the function's role, not a Git credential",
                        repo.full_name()
                    ),
                    retryable: false,
                });
            }
        })
    }

    /// The lock Applications committing to `repository` take turns on.
    pub fn lock(&self, repository: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.entry(repository.to_string()).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> GitHosts {
        let config =
            Config::from_lookup(|k| (k == "CLUSTER_NAME").then(|| "c".to_string())).unwrap();
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .build();
        let secrets = SecretReader::new(aws_sdk_secretsmanager::Client::new(&sdk));
        GitHosts::new(&config, &sdk, "us-east-1", Arc::new(secrets))
    }

    #[test]
    fn each_host_kind_goes_to_its_own_client_and_a_codecommit_repository_to_no_git_one() {
        let hosts = hosts();
        let token = || Credentials::Token("t".into());
        let app = || Credentials::App {
            app_id: "1".into(),
            installation_id: "2".into(),
            private_key_pem: String::new(),
        };
        let cases = [
            ("https://github.com/acme/deploy.git", token(), Ok(())),
            ("https://github.com/acme/deploy.git", app(), Ok(())),
            ("https://gitlab.com/acme/deploy.git", token(), Ok(())),
            (
                "https://gitlab.com/acme/deploy.git",
                app(),
                Err("not GitHub App credentials"),
            ),
            (
                "https://git-codecommit.us-east-1.amazonaws.com/v1/repos/deploy",
                token(),
                Err("written through the function's role"),
            ),
        ];
        for (url, credentials, expected) in cases {
            let repo = hosts.parse_repository(url).unwrap();
            let got = hosts
                .host(&repo, credentials)
                .map(|_| ())
                .map_err(|e| e.reason);
            match (got, expected) {
                (Ok(()), Ok(())) => {}
                (Err(reason), Err(wanted)) => assert!(reason.contains(wanted), "{url}: {reason}"),
                (got, expected) => panic!("{url}: {got:?}, expected {expected:?}"),
            }
        }
    }
}
