//! GitHub and GitHub Enterprise: the API calls git write-back makes, and their credentials.
//!
//! No clone and no git binary: a branch head and one file are read over REST, and the commit
//! is one GraphQL `createCommitOnBranch` with `expectedHeadOid`, a compare-and-swap on the
//! branch, so a commit that raced another one is refused rather than merged. Pull requests
//! and labels are REST. A GitHub App's installation token is minted from a signed JWT and
//! kept until five minutes before it expires.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use reqwest::{StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::git::gitcreds::Credentials;
use crate::git::githost::{
    Commit, CommitStatus, GITHUB_WRITE, GitHost, HostError, HostRefusal, PullRequest, RestCall,
};
use crate::git::repourl::Repo;

/// The GitHub client, built once per warm container.
pub struct GitHub {
    http: crate::http::LazyClient,
    /// Overrides `https://api.github.com` (tests, or an egress proxy).
    api_override: Option<String>,
    /// Installation tokens by what minted them and what they serve, with their expiry.
    app_tokens: Mutex<HashMap<TokenKey, (String, SystemTime)>>,
    requests: std::sync::atomic::AtomicUsize,
}

/// Installation tokens live an hour; one is renewed this long before it expires.
const TOKEN_MARGIN: Duration = Duration::from_secs(300);

/// What an installation token is cached by: the API it is for, the App and installation,
/// the private key that signed for it, and the one repository it was narrowed to. Secrets
/// from different teams can name the same installation; a secret whose key cannot sign for
/// that App never gets a token someone else's key minted, and no token serves a repository
/// other than the one it was minted for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TokenKey {
    api: String,
    app_id: String,
    installation_id: String,
    /// SHA-256 of the private key's PEM text.
    key_fingerprint: [u8; 32],
    repository: String,
}

impl TokenKey {
    fn of(api: String, repo: &Repo, credentials: &Credentials) -> Option<Self> {
        let Credentials::App {
            app_id,
            installation_id,
            private_key_pem,
        } = credentials
        else {
            return None;
        };
        let digest =
            aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, private_key_pem.as_bytes());
        let mut key_fingerprint = [0u8; 32];
        key_fingerprint.copy_from_slice(digest.as_ref());
        Some(Self {
            api,
            app_id: app_id.clone(),
            installation_id: installation_id.clone(),
            key_fingerprint,
            repository: repo.full_name(),
        })
    }
}

impl GitHub {
    pub fn new(
        extra_ca_pem: Option<&str>,
        api_override: Option<String>,
        timeout: Duration,
    ) -> Self {
        Self {
            http: crate::http::LazyClient::new(extra_ca_pem, timeout, true),
            api_override: api_override.map(|a| a.trim_end_matches('/').to_string()),
            app_tokens: Mutex::new(HashMap::new()),
            requests: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Requests sent so far (for the report's budget).
    pub fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn api(&self, repo: &Repo) -> String {
        match &self.api_override {
            Some(api) if repo.api == "https://api.github.com" => api.clone(),
            _ => repo.api.clone(),
        }
    }

    /// `https://api.github.com/graphql`, or an Enterprise server's `/api/graphql`.
    fn graphql_url(&self, repo: &Repo) -> String {
        let api = self.api(repo);
        match api.strip_suffix("/api/v3") {
            Some(host) => format!("{host}/api/graphql"),
            None => format!("{api}/graphql"),
        }
    }

    /// The bearer token for `credentials`: the token itself, or an App installation token
    /// narrowed to `repo` alone.
    pub async fn token(&self, repo: &Repo, credentials: &Credentials) -> Result<String, HostError> {
        let (app_id, installation_id, key) = match credentials {
            Credentials::Token(token) => return Ok(token.clone()),
            Credentials::App {
                app_id,
                installation_id,
                private_key_pem,
            } => (app_id, installation_id, private_key_pem),
        };
        let Some(cache_key) = TokenKey::of(self.api(repo), repo, credentials) else {
            return Err(HostError::Invalid {
                what: format!("an installation token for GitHub App {app_id}"),
                message: "not GitHub App credentials".into(),
            });
        };
        let mut cache = self.app_tokens.lock().await;
        if let Some((token, expires)) = cache.get(&cache_key)
            && SystemTime::now() + TOKEN_MARGIN < *expires
        {
            return Ok(token.clone());
        }
        let jwt = app_jwt(app_id, key, SystemTime::now())?;
        let url = format!(
            "{}/app/installations/{installation_id}/access_tokens",
            self.api(repo)
        );
        let what = format!(
            "an installation token for GitHub App {app_id} narrowed to {}",
            repo.full_name()
        );
        // Narrowed to the one repository written: a token that leaked (or a bug) reaches no
        // other repository the installation covers.
        let narrowed = serde_json::json!({"repositories": [repo.name]});
        let body = self
            .send(RestCall::post(&url, &what, Some(narrowed)), &jwt, repo)
            .await?;
        let token = body["token"].as_str().ok_or_else(|| HostError::Invalid {
            what: what.clone(),
            message: "the answer holds no token".into(),
        })?;
        let expires = body["expires_at"]
            .as_str()
            .and_then(|t| {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
            })
            .map(SystemTime::from)
            .unwrap_or_else(|| SystemTime::now() + Duration::from_secs(3600));
        cache.insert(cache_key, (token.to_string(), expires));
        Ok(token.to_string())
    }

    /// Forgets a cached installation token GitHub refused.
    pub async fn forget(&self, repo: &Repo, credentials: &Credentials) {
        if let Some(key) = TokenKey::of(self.api(repo), repo, credentials) {
            self.app_tokens.lock().await.remove(&key);
        }
    }

    /// The repository's default branch (for `targetRevision: HEAD`).
    pub async fn default_branch(&self, repo: &Repo, token: &str) -> Result<String, HostError> {
        let url = format!("{}/repos/{}", self.api(repo), repo.full_name());
        let what = format!("repository {}", repo.full_name());
        let body = self.send(RestCall::get(&url, &what), token, repo).await?;
        body["default_branch"]
            .as_str()
            .map(str::to_string)
            .ok_or(HostError::Invalid {
                what,
                message: "no default_branch in the answer".into(),
            })
    }

    /// The commit a branch points at, or `None` if there is no such branch.
    pub async fn branch_head(
        &self,
        repo: &Repo,
        token: &str,
        branch: &str,
    ) -> Result<Option<String>, HostError> {
        let url = format!(
            "{}/repos/{}/git/ref/heads/{}",
            self.api(repo),
            repo.full_name(),
            encode_path(branch)
        );
        let what = format!("branch `{branch}` of {}", repo.full_name());
        match self.send(RestCall::get(&url, &what), token, repo).await {
            Ok(body) => Ok(body["object"]["sha"].as_str().map(str::to_string)),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A file's text at a commit, or `None` if it does not exist there.
    pub async fn file(
        &self,
        repo: &Repo,
        token: &str,
        path: &str,
        commit: &str,
    ) -> Result<Option<String>, HostError> {
        let url = format!(
            "{}/repos/{}/contents/{}?ref={commit}",
            self.api(repo),
            repo.full_name(),
            encode_path(path)
        );
        let what = format!("`{path}` in {}", repo.full_name());
        let call = RestCall::get(&url, &what).for_file();
        let body = match self.send(call, token, repo).await {
            Ok(body) => body,
            Err(HostError::NotFound { .. }) => return Ok(None),
            Err(HostError::Invalid { message, .. }) if message.contains("larger than") => {
                return Err(HostError::TooLarge { what, size: None });
            }
            Err(e) => return Err(e),
        };
        if body["type"] != "file" {
            return Err(HostError::Invalid {
                what,
                message: "it is a directory, not a file".into(),
            });
        }
        let size = body["size"].as_u64().map_or(0, |s| s as usize);
        crate::git::githost::within_file_cap(size, &what)?;
        if body["encoding"] != "base64" {
            // The contents API leaves a file over 1 MB out (`encoding: none`); the size check
            // above refuses those already.
            return Err(HostError::Invalid {
                what,
                message: format!(
                    "the contents API left the content out (encoding `{}`)",
                    body["encoding"].as_str().unwrap_or("none")
                ),
            });
        }
        let text =
            crate::git::githost::decode_file(body["content"].as_str().unwrap_or_default(), &what)?;
        crate::git::githost::within_file_cap(text.len(), &what)?;
        Ok(Some(text))
    }

    /// Creates `branch` at `commit`; `false` if it exists already.
    pub async fn create_branch(
        &self,
        repo: &Repo,
        token: &str,
        branch: &str,
        commit: &str,
    ) -> Result<bool, HostError> {
        let url = format!("{}/repos/{}/git/refs", self.api(repo), repo.full_name());
        let what = format!("creating branch `{branch}` of {}", repo.full_name());
        let body = json!({"ref": format!("refs/heads/{branch}"), "sha": commit});
        match self
            .send(
                RestCall::post(&url, &what, Some(body)).on_branch(branch),
                token,
                repo,
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(HostError::Invalid { message, .. }) if message.contains("already exists") => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Commits `files` (path, new text) on `branch` if its head is still `expected_head`.
    pub async fn commit(
        &self,
        repo: &Repo,
        token: &str,
        branch: &str,
        expected_head: &str,
        message: &str,
        files: &[(String, String)],
    ) -> Result<Commit, HostError> {
        let (headline, body) = match message.split_once('\n') {
            Some((h, b)) => (h, b.trim()),
            None => (message, ""),
        };
        let additions: Vec<Value> = files
            .iter()
            .map(|(path, text)| {
                json!({"path": path, "contents": base64::engine::general_purpose::STANDARD.encode(text)})
            })
            .collect();
        let request = json!({
            "query": COMMIT_MUTATION,
            "variables": {"input": {
                "branch": {"repositoryNameWithOwner": repo.full_name(), "branchName": branch},
                "message": {"headline": headline, "body": body},
                "fileChanges": {"additions": additions},
                "expectedHeadOid": expected_head,
            }},
        });
        let what = format!("the commit to `{branch}` of {}", repo.full_name());
        let answer = self
            .send(
                RestCall::post(&self.graphql_url(repo), &what, Some(request)).on_branch(branch),
                token,
                repo,
            )
            .await?;
        if let Some(errors) = answer["errors"].as_array().filter(|e| !e.is_empty()) {
            return Err(graphql_error(errors, repo, branch, &what));
        }
        let commit = &answer["data"]["createCommitOnBranch"]["commit"];
        match (commit["oid"].as_str(), commit["url"].as_str()) {
            (Some(oid), url) => Ok(Commit {
                oid: oid.to_string(),
                url: url.unwrap_or_default().to_string(),
            }),
            _ => Err(HostError::Invalid {
                what,
                message: "the answer names no commit".into(),
            }),
        }
    }

    /// The open pull request from `head` into `base`, if there is one.
    pub async fn find_pull_request(
        &self,
        repo: &Repo,
        token: &str,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, HostError> {
        let name = repo.full_name();
        let list_url = format!(
            "{}/repos/{name}/pulls?state=open&head={}:{}&base={}",
            self.api(repo),
            repo.owner,
            encode_query(head),
            encode_query(base)
        );
        let what = format!("pull requests of {name}");
        let open = self
            .send(RestCall::get(&list_url, &what), token, repo)
            .await?;
        Ok(open
            .as_array()
            .and_then(|l| l.first())
            .and_then(|pr| pull_request_of(pr, false)))
    }

    /// Opens a pull request (`POST /repos/{owner}/{repo}/pulls`).
    pub async fn open_pull_request(
        &self,
        repo: &Repo,
        token: &str,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, HostError> {
        let name = repo.full_name();
        let url = format!("{}/repos/{name}/pulls", self.api(repo));
        let opening = format!("opening a pull request on {name}");
        let request = json!({"title": title, "head": head, "base": base, "body": body});
        let created = self
            .send(RestCall::post(&url, &opening, Some(request)), token, repo)
            .await?;
        pull_request_of(&created, true).ok_or(HostError::Invalid {
            what: opening,
            message: "the answer names no pull request".into(),
        })
    }

    /// Adds labels to an issue or pull request.
    pub async fn add_labels(
        &self,
        repo: &Repo,
        token: &str,
        number: u64,
        labels: &[String],
    ) -> Result<(), HostError> {
        let url = format!(
            "{}/repos/{}/issues/{number}/labels",
            self.api(repo),
            repo.full_name()
        );
        let what = format!("labelling pull request #{number}");
        let body = json!({"labels": labels});
        self.send(RestCall::post(&url, &what, Some(body)), token, repo)
            .await
            .map(|_| ())
    }

    /// Sets a commit status (`POST /repos/{owner}/{repo}/statuses/{sha}`).
    pub async fn set_status(
        &self,
        repo: &Repo,
        token: &str,
        sha: &str,
        status: &CommitStatus,
    ) -> Result<(), HostError> {
        let url = format!(
            "{}/repos/{}/statuses/{sha}",
            self.api(repo),
            repo.full_name()
        );
        let state = status.state.as_str();
        let what = format!(
            "setting the commit status of {}",
            sha.get(..12).unwrap_or(sha)
        );
        let body =
            json!({"state": state, "context": status.context, "description": status.description});
        self.send(RestCall::post(&url, &what, Some(body)), token, repo)
            .await
            .map(|_| ())
    }

    async fn send(&self, call: RestCall<'_>, token: &str, repo: &Repo) -> Result<Value, HostError> {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (what, branch) = (call.what, call.branch);
        let authorize = |request: reqwest::RequestBuilder| {
            request
                .bearer_auth(token)
                .header(header::ACCEPT, "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28")
        };
        let class = |refusal: HostRefusal| refusal_class(refusal, what, repo, branch);
        crate::git::githost::send_rest(&self.http, call, authorize, class).await
    }
}

/// How GitHub refused: rate limits (a 403 too, when the limit headers say so), branch
/// protection, or the classes every host shares.
fn refusal_class(refusal: HostRefusal, what: &str, repo: &Repo, branch: Option<&str>) -> HostError {
    let message = refusal.body["message"]
        .as_str()
        .map_or_else(|| refusal.text.clone(), str::to_string);
    let exhausted = refusal.header("x-ratelimit-remaining").as_deref() == Some("0");
    let retry_after = refusal
        .header("retry-after")
        .and_then(|v| v.trim().parse().ok());
    let rate_limited = || HostError::RateLimited {
        repo: repo.full_name(),
        reset: refusal.header("x-ratelimit-reset").map(|r| reset_time(&r)),
        retry_after,
    };
    match refusal.status {
        StatusCode::TOO_MANY_REQUESTS => rate_limited(),
        StatusCode::FORBIDDEN
            if exhausted || retry_after.is_some() || message.contains("rate limit") =>
        {
            rate_limited()
        }
        StatusCode::CONFLICT | StatusCode::UNPROCESSABLE_ENTITY
            if branch.is_some() && is_protection(&message) =>
        {
            HostError::Protected {
                repo: repo.full_name(),
                branch: branch.unwrap_or_default().to_string(),
                message,
            }
        }
        status => HostError::of_status(
            status,
            repo.full_name(),
            what.to_string(),
            message,
            GITHUB_WRITE,
        ),
    }
}

/// One GitHub repository with its credentials: the [`GitHost`] git write-back uses. A GitHub
/// App token GitHub revoked before its expiry is dropped and minted again, once per call.
pub struct GitHubRepository<'a> {
    pub client: &'a GitHub,
    pub repo: Repo,
    pub credentials: Credentials,
}

impl GitHubRepository<'_> {
    /// Runs `call` with a token; after a 401 on an App token, once more with a fresh one.
    async fn with_token<T, F, Fut>(&self, call: F) -> Result<T, HostError>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<T, HostError>>,
    {
        let token = self.client.token(&self.repo, &self.credentials).await?;
        match call(token).await {
            Err(HostError::BadCredentials { .. })
                if matches!(self.credentials, Credentials::App { .. }) =>
            {
                self.client.forget(&self.repo, &self.credentials).await;
                let token = self.client.token(&self.repo, &self.credentials).await?;
                call(token).await
            }
            other => other,
        }
    }
}

#[async_trait::async_trait]
impl GitHost for GitHubRepository<'_> {
    fn name(&self) -> String {
        self.repo.full_name()
    }

    async fn default_branch(&self) -> Result<String, HostError> {
        self.with_token(|t| async move { self.client.default_branch(&self.repo, &t).await })
            .await
    }

    async fn branch_head(&self, branch: &str) -> Result<Option<String>, HostError> {
        self.with_token(|t| async move { self.client.branch_head(&self.repo, &t, branch).await })
            .await
    }

    async fn file(&self, path: &str, commit: &str) -> Result<Option<String>, HostError> {
        self.with_token(|t| async move { self.client.file(&self.repo, &t, path, commit).await })
            .await
    }

    async fn create_branch(&self, branch: &str, commit: &str) -> Result<bool, HostError> {
        self.with_token(|t| async move {
            self.client
                .create_branch(&self.repo, &t, branch, commit)
                .await
        })
        .await
    }

    async fn commit(
        &self,
        branch: &str,
        expected_head: &str,
        message: &str,
        files: &[(String, String)],
    ) -> Result<Commit, HostError> {
        self.with_token(|t| async move {
            self.client
                .commit(&self.repo, &t, branch, expected_head, message, files)
                .await
        })
        .await
    }

    async fn find_pull_request(
        &self,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, HostError> {
        self.with_token(|t| async move {
            self.client
                .find_pull_request(&self.repo, &t, head, base)
                .await
        })
        .await
    }

    async fn open_pull_request(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, HostError> {
        self.with_token(|t| async move {
            self.client
                .open_pull_request(&self.repo, &t, head, base, title, body)
                .await
        })
        .await
    }

    async fn add_labels(&self, number: u64, labels: &[String]) -> Result<(), HostError> {
        self.with_token(
            |t| async move { self.client.add_labels(&self.repo, &t, number, labels).await },
        )
        .await
    }

    async fn commit_status(&self, sha: &str, status: &CommitStatus) -> Result<(), HostError> {
        self.with_token(
            |t| async move { self.client.set_status(&self.repo, &t, sha, status).await },
        )
        .await
    }

    fn requests(&self) -> usize {
        self.client.requests()
    }
}

const COMMIT_MUTATION: &str = "mutation ($input: CreateCommitOnBranchInput!) { createCommitOnBranch(input: $input) { commit { oid url } } }";

fn is_protection(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("protected branch")
        || lower.contains("repository rule")
        || lower.contains("rule violation")
}

/// A GraphQL error list into our classes: a stale head, a protected branch, or refusal.
fn graphql_error(errors: &[Value], repo: &Repo, branch: &str, what: &str) -> HostError {
    let message = errors
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let kind = errors
        .iter()
        .find_map(|e| e["type"].as_str())
        .unwrap_or_default();
    let (repo, branch) = (repo.full_name(), branch.to_string());
    if kind == "STALE_DATA" || message.contains("Expected branch to point to") {
        HostError::HeadMoved {
            repo,
            branch,
            message,
        }
    } else if is_protection(&message) || (kind == "FORBIDDEN" && message.contains("branch")) {
        HostError::Protected {
            repo,
            branch,
            message,
        }
    } else if kind == "FORBIDDEN" {
        HostError::Forbidden {
            what: what.to_string(),
            message,
            fix: GITHUB_WRITE,
        }
    } else if kind == "NOT_FOUND" {
        HostError::NotFound {
            what: what.to_string(),
            message,
        }
    } else {
        HostError::Invalid {
            what: what.to_string(),
            message,
        }
    }
}

/// `x-ratelimit-reset` (epoch seconds) as RFC 3339.
fn reset_time(epoch: &str) -> String {
    epoch
        .trim()
        .parse::<i64>()
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| epoch.to_string())
}

/// Percent-encodes each segment of a repository path (or branch name), keeping `/`.
fn encode_path(path: &str) -> String {
    path.split('/')
        .map(encode_query)
        .collect::<Vec<_>>()
        .join("/")
}

fn encode_query(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// The JWT a GitHub App authenticates with: RS256, issued a minute in the past against
/// clock drift, valid nine minutes (GitHub's limit is ten).
pub fn app_jwt(app_id: &str, private_key_pem: &str, now: SystemTime) -> Result<String, HostError> {
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(private_key_pem.as_bytes()).map_err(|e| {
        HostError::Credentials(format!(
            "githubAppPrivateKey is not an RSA private key in PEM form: {e}"
        ))
    })?;
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let claims = json!({"iat": now.saturating_sub(60), "exp": now + 540, "iss": app_id});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
        &claims,
        &key,
    )
    .map_err(|e| HostError::Credentials(format!("cannot sign the GitHub App JWT: {e}")))
}

/// A pull request as GitHub's REST API answers it.
fn pull_request_of(pr: &Value, opened: bool) -> Option<PullRequest> {
    Some(PullRequest {
        number: pr["number"].as_u64()?,
        url: pr["html_url"].as_str()?.to_string(),
        opened,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_read_in_argo_cds_secret_shapes_and_never_printed() {
        let fields = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let token = Credentials::from_fields(&fields(&[("token", "ghp_secret")]), "s").unwrap();
        assert_eq!(token, Credentials::Token("ghp_secret".into()));
        let basic =
            Credentials::from_fields(&fields(&[("username", "x"), ("password", "ghp_p")]), "s")
                .unwrap();
        assert_eq!(basic, Credentials::Token("ghp_p".into()));
        let app = Credentials::from_fields(
            &fields(&[
                ("githubAppID", "12"),
                ("githubAppInstallationID", "34"),
                ("githubAppPrivateKey", "PEM"),
            ]),
            "s",
        )
        .unwrap();
        assert!(matches!(app, Credentials::App { ref app_id, .. } if app_id == "12"));
        assert!(
            !format!("{token:?}{app:?}").contains("ghp_secret")
                && !format!("{app:?}").contains("PEM")
        );
        let none =
            Credentials::from_fields(&fields(&[("url", "https://github.com/a")]), "secret `x`")
                .unwrap_err();
        assert!(none.contains("secret `x` holds neither"), "{none}");
    }

    #[test]
    fn graphql_errors_are_told_apart() {
        let repo = Repo::parse("https://github.com/a/b", &[]).unwrap();
        let stale = graphql_error(
            &[
                json!({"type": "STALE_DATA", "message": "Expected branch to point to \"abc\" but it did not. Pull and try again."}),
            ],
            &repo,
            "main",
            "w",
        );
        assert!(matches!(stale, HostError::HeadMoved { .. }));
        let rule = graphql_error(
            &[
                json!({"type": "UNPROCESSABLE", "message": "Repository rule violations found\n\nChanges must be made through a pull request."}),
            ],
            &repo,
            "main",
            "w",
        );
        assert!(matches!(rule, HostError::Protected { .. }), "{rule:?}");
        assert!(
            rule.to_string()
                .contains("git-branch to `<base>:<new branch>`")
        );
        let other = graphql_error(&[json!({"message": "Something else"})], &repo, "main", "w");
        assert!(matches!(other, HostError::Invalid { .. }) && !other.is_retryable());
    }

    #[test]
    fn paths_and_branches_are_percent_encoded_per_segment() {
        assert_eq!(
            encode_path("argocd/.argocd-source-app.yaml"),
            "argocd/.argocd-source-app.yaml"
        );
        assert_eq!(encode_path("feature/a b#c"), "feature/a%20b%23c");
    }

    #[test]
    fn a_key_that_is_not_rsa_pem_is_a_credentials_error() {
        let error = app_jwt("1", "not a key", SystemTime::now()).unwrap_err();
        assert!(
            matches!(error, HostError::Credentials(ref m) if m.contains("githubAppPrivateKey"))
        );
    }
}
