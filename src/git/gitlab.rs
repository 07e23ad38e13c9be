//! GitLab (gitlab.com and self-managed) as a Git host, through its REST API v4.
//!
//! GitLab's commits API has no branch-head precondition; it has a per-file one: an `update`
//! action carries the `last_commit_id` of the file as read, and GitLab refuses the commit if
//! the file changed since (a `create` is refused if the file appeared meanwhile). That is the
//! compare-and-swap here: what our decision read is the file, so that is what is guarded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::git::githost::{
    Commit, CommitStatus, GitHost, HostError, HostRefusal, PullRequest, RestCall, StatusState,
};
use crate::git::repourl::Repo;

const GITLAB_WRITE: &str = "give the token the Developer role (Maintainer for protected branches) and the api scope on the project";

/// The GitLab client, built once per warm container.
pub struct GitLab {
    http: crate::http::LazyClient,
    /// Overrides `https://gitlab.com/api/v4` (tests, or an egress proxy).
    api_override: Option<String>,
    requests: AtomicUsize,
}

impl GitLab {
    pub fn new(
        extra_ca_pem: Option<&str>,
        api_override: Option<String>,
        timeout: Duration,
    ) -> Self {
        Self {
            http: crate::http::LazyClient::new(extra_ca_pem, timeout, true),
            api_override: api_override.map(|a| a.trim_end_matches('/').to_string()),
            requests: AtomicUsize::new(0),
        }
    }

    /// One project, with its token.
    pub fn project(&self, repo: Repo, token: String) -> GitLabProject<'_> {
        let api = match &self.api_override {
            Some(api) if repo.api == "https://gitlab.com/api/v4" => api.clone(),
            _ => repo.api.clone(),
        };
        GitLabProject {
            client: self,
            id: encode(&repo.full_name()),
            api,
            repo,
            token,
            last_commits: Mutex::new(HashMap::new()),
        }
    }
}

/// One GitLab project: the [`GitHost`] git write-back uses.
pub struct GitLabProject<'a> {
    client: &'a GitLab,
    repo: Repo,
    api: String,
    /// The project path, URL-encoded, as GitLab's `:id`.
    id: String,
    token: String,
    /// Each file's `last_commit_id` as read: the commit's precondition.
    last_commits: Mutex<HashMap<String, String>>,
}

fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

impl GitLabProject<'_> {
    /// `path` is under the project (`/repository/files/…`).
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
        branch: Option<&str>,
    ) -> Result<Value, HostError> {
        self.send_limited(
            method,
            path,
            body,
            what,
            branch,
            crate::git::githost::MAX_ANSWER,
        )
        .await
    }

    /// [`Self::send`], reading no more than `limit` of the answer.
    async fn send_limited(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
        branch: Option<&str>,
        limit: usize,
    ) -> Result<Value, HostError> {
        self.client.requests.fetch_add(1, Ordering::Relaxed);
        let url = format!("{}/projects/{}{path}", self.api, self.id);
        let call = RestCall {
            method,
            url: &url,
            body,
            what,
            branch,
            limit,
        };
        let authorize =
            |request: reqwest::RequestBuilder| request.header("PRIVATE-TOKEN", &self.token);
        let class = |refusal: HostRefusal| refusal_class(refusal, what, &self.repo, branch);
        crate::git::githost::send_rest(&self.client.http, call, authorize, class).await
    }
}

/// How GitLab refused: rate limits, a protected branch, the file or branch changed under
/// the commit (its precondition), or the classes every host shares.
fn refusal_class(refusal: HostRefusal, what: &str, repo: &Repo, branch: Option<&str>) -> HostError {
    let body = &refusal.body;
    let message = match (&body["message"], &body["error"]) {
        (Value::String(m), _) | (_, Value::String(m)) => m.clone(),
        (Value::Object(_), _) => body["message"].to_string(),
        _ => refusal.text.clone(),
    };
    let (what, repo) = (what.to_string(), repo.full_name());
    let lower = message.to_ascii_lowercase();
    match refusal.status {
        StatusCode::TOO_MANY_REQUESTS => HostError::RateLimited {
            repo,
            reset: refusal.header("ratelimit-resettime"),
            retry_after: refusal
                .header("retry-after")
                .and_then(|v| v.trim().parse().ok()),
        },
        StatusCode::FORBIDDEN if branch.is_some() && lower.contains("not allowed to push") => {
            HostError::Protected {
                repo,
                branch: branch.unwrap_or_default().to_string(),
                message,
            }
        }
        StatusCode::BAD_REQUEST
            if branch.is_some()
                && (lower.contains("has changed since")
                    || lower.contains("already exists")
                    || lower.contains("doesn't exist")) =>
        {
            HostError::HeadMoved {
                repo,
                branch: branch.unwrap_or_default().to_string(),
                message,
            }
        }
        status => HostError::of_status(status, repo, what, message, GITLAB_WRITE),
    }
}

#[async_trait::async_trait]
impl GitHost for GitLabProject<'_> {
    fn name(&self) -> String {
        self.repo.full_name()
    }

    async fn default_branch(&self) -> Result<String, HostError> {
        let what = format!("project {}", self.repo.full_name());
        let body = self.send(Method::GET, "", None, &what, None).await?;
        body["default_branch"]
            .as_str()
            .map(str::to_string)
            .ok_or(HostError::NotFound {
                what,
                message: "the project has no default branch yet".into(),
            })
    }

    async fn branch_head(&self, branch: &str) -> Result<Option<String>, HostError> {
        let path = format!("/repository/branches/{}", encode(branch));
        let what = format!("branch `{branch}` of {}", self.repo.full_name());
        match self.send(Method::GET, &path, None, &what, None).await {
            Ok(body) => Ok(body["commit"]["id"].as_str().map(str::to_string)),
            Err(HostError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn file(&self, path: &str, commit: &str) -> Result<Option<String>, HostError> {
        let url = format!("/repository/files/{}?ref={commit}", encode(path));
        let what = format!("`{path}` in {}", self.repo.full_name());
        let limit = crate::git::githost::MAX_FILE_ANSWER;
        let answer = self.send_limited(Method::GET, &url, None, &what, None, limit);
        let body = match answer.await {
            Ok(body) => body,
            Err(HostError::NotFound { .. }) => return Ok(None),
            Err(HostError::Invalid { message, .. }) if message.contains("larger than") => {
                return Err(HostError::TooLarge { what, size: None });
            }
            Err(e) => return Err(e),
        };
        let size = body["size"].as_u64().map_or(0, |s| s as usize);
        crate::git::githost::within_file_cap(size, &what)?;
        let text =
            crate::git::githost::decode_file(body["content"].as_str().unwrap_or_default(), &what)?;
        crate::git::githost::within_file_cap(text.len(), &what)?;
        if let Some(last) = body["last_commit_id"].as_str()
            && let Ok(mut known) = self.last_commits.lock()
        {
            known.insert(path.to_string(), last.to_string());
        }
        Ok(Some(text))
    }

    async fn create_branch(&self, branch: &str, commit: &str) -> Result<bool, HostError> {
        let path = format!(
            "/repository/branches?branch={}&ref={commit}",
            encode(branch)
        );
        let what = format!("creating branch `{branch}` of {}", self.repo.full_name());
        match self.send(Method::POST, &path, None, &what, None).await {
            Ok(_) => Ok(true),
            Err(HostError::Invalid { message, .. }) if message.contains("already exists") => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// `expected_head` is not GitLab's precondition: each file's `last_commit_id` is.
    async fn commit(
        &self,
        branch: &str,
        _expected_head: &str,
        message: &str,
        files: &[(String, String)],
    ) -> Result<Commit, HostError> {
        let known = self
            .last_commits
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        let actions: Vec<Value> = files
            .iter()
            .map(|(path, text)| match known.get(path) {
                Some(last) => json!({"action": "update", "file_path": path, "content": text, "last_commit_id": last}),
                None => json!({"action": "create", "file_path": path, "content": text}),
            })
            .collect();
        let what = format!("the commit to `{branch}` of {}", self.repo.full_name());
        let body = json!({"branch": branch, "commit_message": message, "actions": actions});
        let answer = self
            .send(
                Method::POST,
                "/repository/commits",
                Some(body),
                &what,
                Some(branch),
            )
            .await?;
        match answer["id"].as_str() {
            Some(oid) => Ok(Commit {
                oid: oid.to_string(),
                url: answer["web_url"].as_str().unwrap_or_default().to_string(),
            }),
            None => Err(HostError::Invalid {
                what,
                message: "the answer names no commit".into(),
            }),
        }
    }

    async fn find_pull_request(
        &self,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, HostError> {
        let what = format!("merge requests of {}", self.repo.full_name());
        let list = format!(
            "/merge_requests?state=opened&source_branch={}&target_branch={}",
            encode(head),
            encode(base)
        );
        let open = self.send(Method::GET, &list, None, &what, None).await?;
        Ok(open
            .as_array()
            .and_then(|l| l.first())
            .and_then(|mr| merge_request_of(mr, false)))
    }

    async fn open_pull_request(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, HostError> {
        let opening = format!("opening a merge request on {}", self.repo.full_name());
        let created = self
            .send(
                Method::POST,
                "/merge_requests",
                Some(json!({"source_branch": head, "target_branch": base, "title": title, "description": body})),
                &opening,
                None,
            )
            .await?;
        merge_request_of(&created, true).ok_or(HostError::Invalid {
            what: opening,
            message: "the answer names no merge request".into(),
        })
    }

    async fn add_labels(&self, number: u64, labels: &[String]) -> Result<(), HostError> {
        let path = format!("/merge_requests/{number}");
        let what = format!("labelling merge request !{number}");
        self.send(
            Method::PUT,
            &path,
            Some(json!({"add_labels": labels.join(",")})),
            &what,
            None,
        )
        .await
        .map(|_| ())
    }

    /// GitLab's commit status (`POST /projects/:id/statuses/:sha`). Setting the state a
    /// status already has is refused as a transition from itself: that is done already.
    async fn commit_status(&self, sha: &str, status: &CommitStatus) -> Result<(), HostError> {
        let state = match status.state {
            StatusState::Failure => "failed",
            StatusState::Unknown => "canceled",
            other => other.as_str(),
        };
        let what = format!("setting the commit status of {}", short_sha(sha));
        let body =
            json!({"state": state, "name": status.context, "description": status.description});
        match self
            .send(
                Method::POST,
                &format!("/statuses/{sha}"),
                Some(body),
                &what,
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(HostError::Invalid { message, .. })
                if message.contains("Cannot transition status") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn requests(&self) -> usize {
        self.client.requests.load(Ordering::Relaxed)
    }
}

fn short_sha(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// A merge request as GitLab's REST API answers it (`iid`: its number in the project).
fn merge_request_of(mr: &Value, opened: bool) -> Option<PullRequest> {
    Some(PullRequest {
        number: mr["iid"].as_u64()?,
        url: mr["web_url"].as_str()?.to_string(),
        opened,
    })
}
