//! Git hosts behind one trait: what git write-back asks of any of them (a branch head, a file
//! at a commit, a new branch, one commit conditional on the head read, a pull request and its
//! labels), and how their failures are classed. Adding a host is an implementation of
//! [`GitHost`]; neither the decision code nor the write-back changes.

use async_trait::async_trait;

use crate::http::LazyClient;

/// The most a Git host's answer may hold: a file at [`MAX_FILE`] is about 1.4 MB in base64
/// and JSON; a pull request list of 30 is well under that.
pub const MAX_ANSWER: usize = 8 << 20;

/// The largest file the Git write-back reads, from any host (GitHub's contents API stops at
/// 1 MB; GitLab and CodeCommit serve more). Reading, editing and reading back a file costs
/// memory in proportion to it: at this size the worst case (a flow list of one-character
/// items, the most nodes a byte can make) keeps the function under half of its default
/// 128 MB (`cargo bench --bench git_file`; benches/results/). Values files and
/// kustomizations are rarely a tenth of it.
pub const MAX_FILE: usize = 512 << 10;

/// The most a host's answer holding one file may be: the file in base64 (with GitHub's line
/// breaks) and the JSON around it.
pub const MAX_FILE_ANSWER: usize = MAX_FILE / 3 * 4 * 61 / 60 + (64 << 10);

/// Refuses a file over [`MAX_FILE`], by its size as the host states it or as read.
pub fn within_file_cap(size: usize, what: &str) -> Result<(), HostError> {
    if size <= MAX_FILE {
        return Ok(());
    }
    Err(HostError::TooLarge {
        what: what.to_string(),
        size: Some(size),
    })
}

/// A Git host's answer body, bounded by `limit`.
pub async fn read_answer(
    response: reqwest::Response,
    what: &str,
    limit: usize,
) -> Result<Vec<u8>, HostError> {
    crate::redact::read_capped(response, limit)
        .await
        .map_err(|e| match e {
            crate::redact::ReadError::TooLarge { .. } => HostError::Invalid {
                what: what.to_string(),
                message: e.to_string(),
            },
            crate::redact::ReadError::Transport(message) => HostError::Transport {
                what: what.to_string(),
                message,
            },
        })
}

/// One REST request to a Git host.
pub struct RestCall<'a> {
    pub method: reqwest::Method,
    pub url: &'a str,
    pub body: Option<serde_json::Value>,
    /// What is asked, for messages: "repository owner/name".
    pub what: &'a str,
    /// The branch a write goes to: a refusal may then be a protection or a moved head.
    pub branch: Option<&'a str>,
    /// The most the answer may be ([`MAX_ANSWER`] unless a call sets less).
    pub limit: usize,
}

impl<'a> RestCall<'a> {
    pub fn get(url: &'a str, what: &'a str) -> Self {
        Self {
            method: reqwest::Method::GET,
            url,
            body: None,
            what,
            branch: None,
            limit: MAX_ANSWER,
        }
    }

    pub fn post(url: &'a str, what: &'a str, body: Option<serde_json::Value>) -> Self {
        Self {
            method: reqwest::Method::POST,
            body,
            ..Self::get(url, what)
        }
    }

    pub fn on_branch(self, branch: &'a str) -> Self {
        Self {
            branch: Some(branch),
            ..self
        }
    }

    /// An answer that holds one file: read no more than [`MAX_FILE_ANSWER`].
    pub fn for_file(self) -> Self {
        Self {
            limit: MAX_FILE_ANSWER,
            ..self
        }
    }
}

/// A Git host's answer that is not a success, for the host to class.
pub struct HostRefusal {
    pub status: reqwest::StatusCode,
    pub headers: reqwest::header::HeaderMap,
    /// The answer as JSON; `Null` when it is not.
    pub body: serde_json::Value,
    /// The start of the answer, for one without a message.
    pub text: String,
}

impl HostRefusal {
    /// A header's value, when it is text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// Sends `call` with the host's own headers (`authorize`), reads the answer within
/// [`MAX_ANSWER`], and hands an answer that is not a success to the host's `class`.
pub async fn send_rest(
    http: &LazyClient,
    call: RestCall<'_>,
    authorize: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    class: impl FnOnce(HostRefusal) -> HostError,
) -> Result<serde_json::Value, HostError> {
    let (what, limit) = (call.what, call.limit);
    let transport = |message: String| HostError::Transport {
        what: what.to_string(),
        message,
    };
    let mut request = authorize(
        http.get()
            .map_err(|refused| transport(refused.0))?
            .request(call.method, call.url),
    );
    if let Some(body) = call.body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .map_err(|e| transport(crate::redact::http_error(&e)))?;
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = read_answer(response, what, limit).await?;
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if status.is_success() {
        return Ok(body);
    }
    Err(class(HostRefusal {
        status,
        headers,
        body,
        text: String::from_utf8_lossy(&bytes).chars().take(200).collect(),
    }))
}

/// A file's text from a host's base64 `content` field (line-wrapped or not).
pub fn decode_file(content: &str, what: &str) -> Result<String, HostError> {
    use base64::Engine;
    let content: String = content.split_whitespace().collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content)
        .map_err(|e| HostError::Invalid {
            what: what.to_string(),
            message: format!("content is not base64: {e}"),
        })?;
    String::from_utf8(bytes).map_err(|_| HostError::Invalid {
        what: what.to_string(),
        message: "not UTF-8 text".into(),
    })
}

/// How a request to a Git host failed, in the classes the write-back acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error(
        "rate limit reached for {repo}{}: the event is retried; give the credentials more quota (on GitHub, a GitHub App has more than a token)",
        reset.as_ref().map(|r| format!(" (resets at {r})")).unwrap_or_default()
    )]
    RateLimited {
        repo: String,
        reset: Option<String>,
        retry_after: Option<u64>,
    },
    #[error("the Git host answered {status} for {what}: {message}; retried")]
    Server {
        status: u16,
        what: String,
        message: String,
    },
    #[error("cannot reach the Git host for {what}: {message}")]
    Transport { what: String, message: String },
    #[error(
        "the Git host refused the credentials for {repo} ({message}): renew the token or the GitHub App key in the configured secret"
    )]
    BadCredentials { repo: String, message: String },
    #[error("the credentials may not {what} ({message}): {fix}")]
    Forbidden {
        what: String,
        message: String,
        /// What to grant, in the host's terms.
        fix: &'static str,
    },
    #[error(
        "{what}: not found ({message}); check the repository, branch and path, and that the credentials can see the repository"
    )]
    NotFound { what: String, message: String },
    #[error(
        "branch `{branch}` of {repo} refused the commit ({message}): allow the function's identity to push there, or set git-branch to `<base>:<new branch>` and merge through a pull request"
    )]
    Protected {
        repo: String,
        branch: String,
        message: String,
    },
    #[error("branch `{branch}` of {repo} moved since it was read ({message})")]
    HeadMoved {
        repo: String,
        branch: String,
        message: String,
    },
    #[error("the Git host refused {what}: {message}")]
    Invalid { what: String, message: String },
    #[error("git credentials: {0}")]
    Credentials(String),
    #[error(
        "{what} is {}, over the {} bytes (512 KiB) the Git write-back reads from any host: put the image's values in a smaller file (write-back-target helmvalues:<file>), or write the default .argocd-source-<app>.yaml; not retried",
        size.map_or_else(|| "larger".to_string(), |s| format!("{s} bytes")),
        MAX_FILE
    )]
    TooLarge {
        what: String,
        /// As the host stated it; `None` when the answer was cut off before it said.
        size: Option<usize>,
    },
}

impl HostError {
    /// The classes every REST host shares, for an answer its own rules (rate limits,
    /// protected branches, a moved head) did not claim. `write_fix` says, in the host's
    /// terms, what to grant after a 403.
    pub fn of_status(
        status: reqwest::StatusCode,
        repo: String,
        what: String,
        message: String,
        write_fix: &'static str,
    ) -> Self {
        use reqwest::StatusCode;
        match status {
            StatusCode::UNAUTHORIZED => Self::BadCredentials { repo, message },
            StatusCode::FORBIDDEN => Self::Forbidden {
                what,
                message,
                fix: write_fix,
            },
            StatusCode::NOT_FOUND => Self::NotFound { what, message },
            s if s.is_redirection() => Self::Invalid {
                what,
                message: format!(
                    "answered {s}, a redirect, which is not followed with credentials: configure the address the host answers at (its API base in GITHUB_ENTERPRISE_HOSTS or GITLAB_HOSTS, or the repository URL)"
                ),
            },
            s if s.is_server_error() => Self::Server {
                status: s.as_u16(),
                what,
                message,
            },
            _ => Self::Invalid { what, message },
        }
    }

    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Transport { .. }
        )
    }
}

/// GitHub's wording of the grant a write needs.
pub const GITHUB_WRITE: &str =
    "grant them contents:write (and pull_requests:write for pull requests) on the repository";

/// A commit made on a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub oid: String,
    pub url: String,
}

/// A pull (or merge) request: its number, its URL, and whether this call opened it or found
/// it open already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
    pub opened: bool,
}

/// A commit status: where a rollout of an image built from the commit stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    pub state: StatusState,
    /// `argocd-ecr-updater/<cluster>/<namespace>/<app>`: one status per Application.
    pub context: String,
    /// At most 140 characters (GitHub's limit).
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    Pending,
    Success,
    Failure,
    /// The outcome will not be known: the rollout is not followed (GitHub's `error`,
    /// GitLab's `canceled`), so no status is left `pending` for ever.
    Unknown,
}

impl StatusState {
    /// As GitHub names it, and reports say it (GitLab calls a failure `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Unknown => "error",
        }
    }
}

/// One repository on one host, with whatever credentials it needs already in hand.
#[async_trait]
pub trait GitHost: Send + Sync {
    /// How reports name the repository (`owner/name`, or a CodeCommit repository's name).
    fn name(&self) -> String;
    /// The branch `targetRevision: HEAD` means.
    async fn default_branch(&self) -> Result<String, HostError>;
    /// The commit a branch points at, or `None` if there is no such branch.
    async fn branch_head(&self, branch: &str) -> Result<Option<String>, HostError>;
    /// A file's text at a commit, or `None` if it does not exist there.
    async fn file(&self, path: &str, commit: &str) -> Result<Option<String>, HostError>;
    /// Creates `branch` at `commit`; `false` if it exists already.
    async fn create_branch(&self, branch: &str, commit: &str) -> Result<bool, HostError>;
    /// Commits `files` (path, new text) on `branch` only if its head is still
    /// `expected_head`; a moved head is [`HostError::HeadMoved`].
    async fn commit(
        &self,
        branch: &str,
        expected_head: &str,
        message: &str,
        files: &[(String, String)],
    ) -> Result<Commit, HostError>;
    /// The open pull request from `head` into `base`, if there is one.
    async fn find_pull_request(
        &self,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, HostError>;
    /// Opens a pull request from `head` into `base`.
    async fn open_pull_request(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, HostError>;
    /// The open pull request from `head` into `base`, or a new one: found first, since a
    /// retry of a write whose commit landed but whose pull request was not opened comes
    /// back with the branch in place, and one pull request per change is what a reviewer
    /// expects.
    async fn pull_request(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, HostError> {
        match self.find_pull_request(head, base).await? {
            Some(found) => Ok(found),
            None => self.open_pull_request(head, base, title, body).await,
        }
    }
    /// Adds labels to a pull request; hosts without labels say so in the error.
    async fn add_labels(&self, number: u64, labels: &[String]) -> Result<(), HostError>;
    /// Sets a commit status on `sha`; hosts without commit statuses say so in the error.
    async fn commit_status(&self, sha: &str, status: &CommitStatus) -> Result<(), HostError>;
    /// Requests sent so far through this host's client.
    fn requests(&self) -> usize;
}
