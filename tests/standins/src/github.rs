//! A GitHub stand-in (and the in-memory commit history the CodeCommit stand-in shares): the REST calls and the GraphQL mutation git write-back uses, over
//! HTTPS with the run's CA, on an in-memory history of commits.
//!
//! As strict as GitHub where the function could get it wrong: tokens are checked (a token
//! that cannot see a repository gets 404, one that cannot write gets 403 or a `FORBIDDEN`
//! GraphQL error), `createCommitOnBranch` refuses a stale `expectedHeadOid`, unknown input
//! fields and invalid base64, protected branches refuse direct commits, and GitHub App
//! JWTs are verified (RS256, `iss`, at most ten minutes) before an installation token is
//! handed out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::faults::lock;

/// One commit: its parent, the whole tree (path -> text) and its message.
#[derive(Debug, Clone)]
pub struct CommitData {
    pub parent: Option<String>,
    pub files: BTreeMap<String, String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Repository {
    pub(crate) default_branch: String,
    pub(crate) branches: BTreeMap<String, String>,
    pub(crate) commits: BTreeMap<String, CommitData>,
    pub(crate) protected: BTreeSet<String>,
    pub(crate) pulls: Vec<PullRequest>,
    /// Someone else's commit, landed just before the next commit request arrives.
    pub(crate) race_next: Option<(String, String)>,
    /// Labels the repository refuses (to test that a labelling failure is only a note).
    refuse_labels: bool,
    /// Commit statuses set, oldest first: `{sha, state, context, description}`.
    pub(crate) statuses: Vec<Value>,
}

/// What a token may do.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) repositories: BTreeSet<String>,
    pub(crate) write: bool,
    /// Seconds since the epoch after which GitHub answers 401.
    pub(crate) expires: Option<u64>,
}

/// A registered GitHub App installation.
#[derive(Debug, Clone)]
struct App {
    app_id: String,
    installation_id: String,
    public_key_pem: String,
    repositories: BTreeSet<String>,
}

#[derive(Default)]
pub struct GitHubState {
    pub(crate) repositories: Mutex<BTreeMap<String, Repository>>,
    pub(crate) tokens: Mutex<BTreeMap<String, Grant>>,
    apps: Mutex<Vec<App>>,
    sequence: AtomicU64,
    /// Installation tokens handed out.
    pub tokens_minted: AtomicU64,
    /// The repositories each installation token was minted for, in order.
    token_requests: Mutex<Vec<Vec<String>>>,
}

pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn sha1_hex(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Git's blob id of a text: what GitHub's contents API returns as `sha`.
pub(crate) fn blob_sha(text: &str) -> String {
    let mut bytes = format!("blob {}\0", text.len()).into_bytes();
    bytes.extend_from_slice(text.as_bytes());
    sha1_hex(&bytes)
}

impl GitHubState {
    /// A repository with one commit holding `files` on `default_branch`.
    pub fn create_repository(&self, full_name: &str, default_branch: &str, files: &[(&str, &str)]) {
        let mut repo = Repository {
            default_branch: default_branch.to_string(),
            ..Repository::default()
        };
        let tree = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        let oid = self.new_oid("initial");
        repo.commits.insert(
            oid.clone(),
            CommitData {
                parent: None,
                files: tree,
                message: "initial commit".into(),
            },
        );
        repo.branches.insert(default_branch.to_string(), oid);
        lock(&self.repositories).insert(full_name.to_string(), repo);
    }

    pub(crate) fn new_oid(&self, salt: &str) -> String {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        sha1_hex(format!("{salt}-{n}").as_bytes())
    }

    /// A token with read (and, if `write`, contents write) access to `repositories`.
    pub fn grant_token(&self, token: &str, repositories: &[&str], write: bool) {
        lock(&self.tokens).insert(
            token.to_string(),
            Grant {
                repositories: repositories.iter().map(|r| r.to_string()).collect(),
                write,
                expires: None,
            },
        );
    }

    /// Revokes every installation token minted so far (they answer 401 from now on).
    pub fn expire_installation_tokens(&self) {
        for grant in lock(&self.tokens).values_mut() {
            if grant.expires.is_some() {
                grant.expires = Some(0);
            }
        }
    }

    /// The repositories each installation token was minted for, in order.
    pub fn minted_for(&self) -> Vec<Vec<String>> {
        lock(&self.token_requests).clone()
    }

    /// Registers a GitHub App installation whose JWTs verify with `public_key_pem`.
    pub fn register_app(
        &self,
        app_id: &str,
        installation_id: &str,
        public_key_pem: &str,
        repositories: &[&str],
    ) {
        lock(&self.apps).push(App {
            app_id: app_id.to_string(),
            installation_id: installation_id.to_string(),
            public_key_pem: public_key_pem.to_string(),
            repositories: repositories.iter().map(|r| r.to_string()).collect(),
        });
    }

    pub fn protect(&self, full_name: &str, branch: &str) {
        if let Some(repo) = lock(&self.repositories).get_mut(full_name) {
            repo.protected.insert(branch.to_string());
        }
    }

    pub fn refuse_labels(&self, full_name: &str) {
        if let Some(repo) = lock(&self.repositories).get_mut(full_name) {
            repo.refuse_labels = true;
        }
    }

    /// The next `createCommitOnBranch` finds that someone pushed `text` to `path` first.
    pub fn race_next_commit(&self, full_name: &str, path: &str, text: &str) {
        if let Some(repo) = lock(&self.repositories).get_mut(full_name) {
            repo.race_next = Some((path.to_string(), text.to_string()));
        }
    }

    /// Someone else's commit of `text` to `path` on `branch`.
    pub fn push(
        &self,
        full_name: &str,
        branch: &str,
        path: &str,
        text: &str,
        message: &str,
    ) -> Option<String> {
        let oid = self.new_oid(message);
        let mut repos = lock(&self.repositories);
        let repo = repos.get_mut(full_name)?;
        let head = repo.branches.get(branch)?.clone();
        let mut files = repo.commits.get(&head)?.files.clone();
        files.insert(path.to_string(), text.to_string());
        repo.commits.insert(
            oid.clone(),
            CommitData {
                parent: Some(head),
                files,
                message: message.to_string(),
            },
        );
        repo.branches.insert(branch.to_string(), oid.clone());
        Some(oid)
    }

    pub fn head(&self, full_name: &str, branch: &str) -> Option<String> {
        lock(&self.repositories)
            .get(full_name)?
            .branches
            .get(branch)
            .cloned()
    }

    /// A file's text at the head of `branch`.
    pub fn file(&self, full_name: &str, branch: &str, path: &str) -> Option<String> {
        let repos = lock(&self.repositories);
        let repo = repos.get(full_name)?;
        let head = repo.branches.get(branch)?;
        repo.commits.get(head)?.files.get(path).cloned()
    }

    /// The commits of `branch`, newest first.
    pub fn history(&self, full_name: &str, branch: &str) -> Vec<(String, CommitData)> {
        let repos = lock(&self.repositories);
        let Some(repo) = repos.get(full_name) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut next = repo.branches.get(branch).cloned();
        while let Some(oid) = next {
            let Some(commit) = repo.commits.get(&oid) else {
                break;
            };
            next = commit.parent.clone();
            out.push((oid, commit.clone()));
        }
        out
    }

    pub fn branches(&self, full_name: &str) -> Vec<String> {
        lock(&self.repositories)
            .get(full_name)
            .map(|r| r.branches.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The commit statuses set on the repository, oldest first (GitHub's and GitLab's
    /// alike: `state` in the host's own words, `context` GitLab's `name`).
    pub fn statuses(&self, full_name: &str) -> Vec<Value> {
        lock(&self.repositories)
            .get(full_name)
            .map(|r| r.statuses.clone())
            .unwrap_or_default()
    }

    pub fn pull_requests(&self, full_name: &str) -> Vec<PullRequest> {
        lock(&self.repositories)
            .get(full_name)
            .map(|r| r.pulls.clone())
            .unwrap_or_default()
    }
}

pub fn router(state: Arc<GitHubState>) -> Router {
    Router::new()
        .route("/repos/{owner}/{name}", get(repository))
        .route("/repos/{owner}/{name}/git/ref/{*reference}", get(get_ref))
        .route("/repos/{owner}/{name}/git/refs", post(create_ref))
        .route("/repos/{owner}/{name}/contents/{*path}", get(contents))
        .route(
            "/repos/{owner}/{name}/pulls",
            get(list_pulls).post(create_pull),
        )
        .route(
            "/repos/{owner}/{name}/issues/{number}/labels",
            post(add_labels),
        )
        .route("/repos/{owner}/{name}/statuses/{sha}", post(create_status))
        .route("/graphql", post(graphql))
        .route("/app/installations/{id}/access_tokens", post(access_token))
        .fallback(|| async { message(StatusCode::NOT_FOUND, "Not Found") })
        .with_state(state)
}

fn message(status: StatusCode, text: &str) -> Response {
    (
        status,
        axum::Json(json!({"message": text, "documentation_url": "https://docs.github.com/rest", "status": status.as_u16().to_string()})),
    )
        .into_response()
}

enum Access {
    Read,
    Write,
}

/// `POST /repos/{owner}/{repo}/statuses/{sha}`: as GitHub, a write grant on the repository,
/// an existing commit, one of GitHub's four states, and a description of at most 140
/// characters.
async fn create_status(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Write) {
        return r;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return message(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let state_name = request["state"].as_str().unwrap_or_default();
    if !["error", "failure", "pending", "success"].contains(&state_name) {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed: state is not included in the list",
        );
    }
    let description = request["description"].as_str().unwrap_or_default();
    if description.chars().count() > 140 {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed: description is too long (maximum is 140 characters)",
        );
    }
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&full) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    if !repo.commits.contains_key(&sha) {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No commit found for SHA: {sha}"),
        );
    }
    let status = json!({"sha": sha, "state": state_name, "context": request["context"].as_str().unwrap_or("default"),
        "description": description});
    repo.statuses.push(status.clone());
    (StatusCode::CREATED, axum::Json(status)).into_response()
}

/// The bearer's grant on `repository`, or GitHub's answer: 401 for an unknown or expired
/// token, 404 for a repository it cannot see, 403 for a write it may not make.
fn authorize(
    state: &GitHubState,
    headers: &HeaderMap,
    repository: &str,
    access: Access,
) -> Result<(), Response> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("token "))
        })
        .unwrap_or_default();
    let tokens = lock(&state.tokens);
    let Some(grant) = tokens.get(token) else {
        return Err(message(StatusCode::UNAUTHORIZED, "Bad credentials"));
    };
    if grant.expires.is_some_and(|e| e <= now_secs()) {
        return Err(message(StatusCode::UNAUTHORIZED, "Bad credentials"));
    }
    if !grant.repositories.contains(repository) {
        return Err(message(StatusCode::NOT_FOUND, "Not Found"));
    }
    if matches!(access, Access::Write) && !grant.write {
        return Err(message(
            StatusCode::FORBIDDEN,
            "Resource not accessible by personal access token",
        ));
    }
    Ok(())
}

async fn repository(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Read) {
        return r;
    }
    let repos = lock(&state.repositories);
    match repos.get(&full) {
        Some(repo) => axum::Json(
            json!({"full_name": full, "default_branch": repo.default_branch, "private": true}),
        )
        .into_response(),
        None => message(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn get_ref(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name, reference)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Read) {
        return r;
    }
    let repos = lock(&state.repositories);
    let branch = reference.strip_prefix("heads/");
    match (repos.get(&full), branch) {
        (Some(repo), Some(branch)) => match repo.branches.get(branch) {
            Some(oid) => axum::Json(json!({
                "ref": format!("refs/heads/{branch}"),
                "object": {"sha": oid, "type": "commit"},
            }))
            .into_response(),
            None => message(StatusCode::NOT_FOUND, "Not Found"),
        },
        _ => message(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn create_ref(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Write) {
        return r;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return message(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let (Some(reference), Some(sha)) = (request["ref"].as_str(), request["sha"].as_str()) else {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid request.\n\n\"ref\", \"sha\" weren't supplied.",
        );
    };
    let Some(branch) = reference
        .strip_prefix("refs/heads/")
        .filter(|b| !b.is_empty())
    else {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Reference name must start with 'refs/' and have at least two slashes.",
        );
    };
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&full) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    if !repo.commits.contains_key(sha) {
        return message(StatusCode::UNPROCESSABLE_ENTITY, "Object does not exist");
    }
    if repo.branches.contains_key(branch) {
        return message(StatusCode::UNPROCESSABLE_ENTITY, "Reference already exists");
    }
    repo.branches.insert(branch.to_string(), sha.to_string());
    (
        StatusCode::CREATED,
        axum::Json(json!({"ref": reference, "object": {"sha": sha, "type": "commit"}})),
    )
        .into_response()
}

async fn contents(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name, path)): Path<(String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Read) {
        return r;
    }
    let repos = lock(&state.repositories);
    let Some(repo) = repos.get(&full) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    let reference = query
        .get("ref")
        .cloned()
        .unwrap_or_else(|| repo.default_branch.clone());
    let commit = repo
        .branches
        .get(&reference)
        .cloned()
        .unwrap_or(reference.clone());
    let Some(data) = repo.commits.get(&commit) else {
        return message(
            StatusCode::NOT_FOUND,
            &format!("No commit found for the ref {reference}"),
        );
    };
    if let Some(text) = data.files.get(&path) {
        // GitHub wraps the base64 at 60 characters.
        let encoded = STANDARD.encode(text);
        let wrapped: Vec<String> = encoded
            .as_bytes()
            .chunks(60)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        let file_name = path.rsplit('/').next().unwrap_or(&path);
        // GitHub's contents API serves a file's content up to 1 MB; a larger one comes with
        // `encoding: none` and no content (its object media type does the same).
        if text.len() > 1 << 20 {
            return axum::Json(json!({
                "type": "file", "encoding": "none", "size": text.len(),
                "name": file_name, "path": path, "sha": blob_sha(text), "content": "",
            }))
            .into_response();
        }
        return axum::Json(json!({
            "type": "file", "encoding": "base64", "size": text.len(),
            "name": file_name, "path": path, "sha": blob_sha(text),
            "content": wrapped.join("\n") + "\n",
        }))
        .into_response();
    }
    let prefix = format!("{path}/");
    let listing: Vec<Value> = data
        .files
        .keys()
        .filter(|p| p.starts_with(&prefix))
        .map(|p| json!({"type": "file", "path": p}))
        .collect();
    if listing.is_empty() {
        message(StatusCode::NOT_FOUND, "Not Found")
    } else {
        axum::Json(Value::Array(listing)).into_response()
    }
}

async fn list_pulls(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Read) {
        return r;
    }
    let repos = lock(&state.repositories);
    let Some(repo) = repos.get(&full) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    // `head` is `owner:branch`, as GitHub requires for filtering.
    let head = query
        .get("head")
        .and_then(|h| h.split_once(':'))
        .map(|(_, b)| b.to_string());
    let list: Vec<Value> = repo
        .pulls
        .iter()
        .filter(|p| head.as_ref().is_none_or(|h| *h == p.head))
        .filter(|p| query.get("base").is_none_or(|b| *b == p.base))
        .map(|p| pull_json(&full, p))
        .collect();
    axum::Json(Value::Array(list)).into_response()
}

fn pull_json(full: &str, pull: &PullRequest) -> Value {
    json!({"number": pull.number, "state": "open", "title": pull.title,
           "html_url": format!("https://github.com/{full}/pull/{}", pull.number),
           "head": {"ref": pull.head}, "base": {"ref": pull.base},
           "labels": pull.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>()})
}

async fn create_pull(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Write) {
        return r;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return message(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let (Some(title), Some(head), Some(base)) = (
        request["title"].as_str(),
        request["head"].as_str(),
        request["base"].as_str(),
    ) else {
        return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    };
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&full) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    if !repo.branches.contains_key(head) || !repo.branches.contains_key(base) {
        return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    if repo.pulls.iter().any(|p| p.head == head && p.base == base) {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("A pull request already exists for {owner}:{head}."),
        );
    }
    let pull = PullRequest {
        number: repo.pulls.len() as u64 + 1,
        head: head.to_string(),
        base: base.to_string(),
        title: title.to_string(),
        body: request["body"].as_str().unwrap_or_default().to_string(),
        labels: Vec::new(),
    };
    let answer = pull_json(&full, &pull);
    repo.pulls.push(pull);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

async fn add_labels(
    State(state): State<Arc<GitHubState>>,
    Path((owner, name, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(r) = authorize(&state, &headers, &full, Access::Write) {
        return r;
    }
    let labels: Vec<String> = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["labels"].as_array().cloned())
        .map(|l| {
            l.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&full) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    if repo.refuse_labels {
        return message(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        );
    }
    let Some(pull) = repo.pulls.iter_mut().find(|p| p.number == number) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    pull.labels.extend(labels);
    axum::Json(
        pull.labels
            .iter()
            .map(|l| json!({"name": l}))
            .collect::<Vec<_>>(),
    )
    .into_response()
}

fn graphql_error(kind: &str, text: &str) -> Response {
    axum::Json(json!({
        "data": {"createCommitOnBranch": null},
        "errors": [{"type": kind, "path": ["createCommitOnBranch"], "locations": [{"line": 1, "column": 48}], "message": text}],
    }))
    .into_response()
}

/// The `createCommitOnBranch` mutation, checked field by field.
async fn graphql(
    State(state): State<Arc<GitHubState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return message(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let query = request["query"].as_str().unwrap_or_default();
    if !query.contains("createCommitOnBranch(input: $input)")
        || !query.contains("CreateCommitOnBranchInput!")
    {
        return axum::Json(json!({"errors": [{"message": "the stand-in serves only the createCommitOnBranch mutation with an $input variable"}]})).into_response();
    }
    let input = &request["variables"]["input"];
    if let Some(unknown) = input.as_object().and_then(|o| {
        o.keys().find(|k| {
            ![
                "branch",
                "message",
                "fileChanges",
                "expectedHeadOid",
                "clientMutationId",
            ]
            .contains(&k.as_str())
        })
    }) {
        return axum::Json(json!({"errors": [{"message": format!("Variable $input of type CreateCommitOnBranchInput! was provided invalid value for {unknown} (Field is not defined on CreateCommitOnBranchInput)")}]})).into_response();
    }
    let (Some(full), Some(branch), Some(expected), Some(headline)) = (
        input["branch"]["repositoryNameWithOwner"].as_str(),
        input["branch"]["branchName"].as_str(),
        input["expectedHeadOid"].as_str(),
        input["message"]["headline"].as_str(),
    ) else {
        return axum::Json(json!({"errors": [{"message": "Variable $input of type CreateCommitOnBranchInput! was provided invalid value (branch, expectedHeadOid and message.headline are required)"}]})).into_response();
    };
    let unauthorized = authorize(&state, &headers, full, Access::Write);
    if let Err(response) = unauthorized {
        return match response.status() {
            StatusCode::UNAUTHORIZED => response,
            StatusCode::NOT_FOUND => graphql_error(
                "NOT_FOUND",
                &format!("Could not resolve to a Repository with the name '{full}'."),
            ),
            _ => graphql_error(
                "FORBIDDEN",
                "Resource not accessible by personal access token",
            ),
        };
    }
    let mut additions = Vec::new();
    for addition in input["fileChanges"]["additions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let (Some(path), Some(contents)) =
            (addition["path"].as_str(), addition["contents"].as_str())
        else {
            return graphql_error("INVALID", "fileChanges.additions needs path and contents");
        };
        let Ok(bytes) = STANDARD.decode(contents) else {
            return graphql_error("INVALID", "contents is not valid base64");
        };
        additions.push((
            path.to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(full) else {
        return graphql_error(
            "NOT_FOUND",
            &format!("Could not resolve to a Repository with the name '{full}'."),
        );
    };
    let Some(mut head) = repo.branches.get(branch).cloned() else {
        return graphql_error(
            "NOT_FOUND",
            &format!("A ref named \"refs/heads/{branch}\" does not exist."),
        );
    };
    if let Some((path, text)) = repo.race_next.take() {
        let Some(mut files) = repo.commits.get(&head).map(|c| c.files.clone()) else {
            return graphql_error("INTERNAL", "missing head commit");
        };
        files.insert(path, text);
        let oid = sha1_hex(format!("race-{head}").as_bytes());
        repo.commits.insert(
            oid.clone(),
            CommitData {
                parent: Some(head.clone()),
                files,
                message: "someone else's commit".into(),
            },
        );
        repo.branches.insert(branch.to_string(), oid.clone());
        head = oid;
    }
    if repo.protected.contains(branch) {
        return graphql_error(
            "UNPROCESSABLE",
            "Repository rule violations found\n\nChanges must be made through a pull request.\n\n",
        );
    }
    if head != expected {
        return graphql_error(
            "STALE_DATA",
            &format!(
                "Expected branch to point to \"{expected}\" but it did not. Pull and try again."
            ),
        );
    }
    let Some(mut files) = repo.commits.get(&head).map(|c| c.files.clone()) else {
        return graphql_error("INTERNAL", "missing head commit");
    };
    for (path, text) in additions {
        files.insert(path, text);
    }
    let body = input["message"]["body"].as_str().unwrap_or_default();
    let message_text = if body.is_empty() {
        headline.to_string()
    } else {
        format!("{headline}\n\n{body}")
    };
    let oid = sha1_hex(
        format!(
            "{head}-{message_text}-{}",
            state.sequence.fetch_add(1, Ordering::Relaxed)
        )
        .as_bytes(),
    );
    repo.commits.insert(
        oid.clone(),
        CommitData {
            parent: Some(head),
            files,
            message: message_text,
        },
    );
    repo.branches.insert(branch.to_string(), oid.clone());
    axum::Json(json!({"data": {"createCommitOnBranch": {"commit": {
        "oid": oid, "url": format!("https://github.com/{full}/commit/{oid}")}}}}))
    .into_response()
}

/// `POST /app/installations/{id}/access_tokens` with an App JWT: verified, then a one-hour
/// token for the installation's repositories, or for the ones the body's `repositories`
/// names (by name, without the owner), each of which the installation must cover (422, as
/// GitHub answers, otherwise).
async fn access_token(
    State(state): State<Arc<GitHubState>>,
    Path(installation): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let jwt = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    let apps = lock(&state.apps).clone();
    let Some(app) = apps.iter().find(|a| a.installation_id == installation) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    let Ok(key) = jsonwebtoken::DecodingKey::from_rsa_pem(app.public_key_pem.as_bytes()) else {
        return message(
            StatusCode::INTERNAL_SERVER_ERROR,
            "stand-in: bad App public key",
        );
    };
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_issuer(&[app.app_id.as_str()]);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    let claims = match jsonwebtoken::decode::<Value>(&jwt, &key, &validation) {
        Ok(data) => data.claims,
        Err(_) => {
            return message(
                StatusCode::UNAUTHORIZED,
                "A JSON web token could not be decoded",
            );
        }
    };
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap_or(0),
        claims["exp"].as_u64().unwrap_or(0),
    );
    if exp.saturating_sub(iat) > 600 {
        return message(
            StatusCode::UNAUTHORIZED,
            "'Expiration time' claim ('exp') is too far in the future",
        );
    }
    let narrowed: Option<Vec<String>> = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(request) => request["repositories"].as_array().map(|names| {
                names
                    .iter()
                    .map(|n| n.as_str().unwrap_or_default().to_string())
                    .collect()
            }),
            Err(_) => return message(StatusCode::BAD_REQUEST, "Problems parsing JSON"),
        }
    };
    let repositories = match narrowed {
        None => app.repositories.clone(),
        Some(names) => {
            let covered: Option<BTreeSet<String>> = names
                .iter()
                .map(|name| {
                    app.repositories
                        .iter()
                        .find(|full| full.rsplit('/').next() == Some(name.as_str()))
                        .cloned()
                })
                .collect();
            match covered {
                Some(covered) if !covered.is_empty() => covered,
                _ => {
                    return message(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "There is at least one repository that does not exist or is not accessible to the parent installation.",
                    );
                }
            }
        }
    };
    lock(&state.token_requests).push(repositories.iter().cloned().collect());
    let token = format!(
        "ghs_{}",
        sha1_hex(
            format!(
                "{installation}-{}",
                state.sequence.fetch_add(1, Ordering::Relaxed)
            )
            .as_bytes()
        )
    );
    let expires = now_secs() + 3600;
    lock(&state.tokens).insert(
        token.clone(),
        Grant {
            repositories,
            write: true,
            expires: Some(expires),
        },
    );
    state.tokens_minted.fetch_add(1, Ordering::Relaxed);
    let expires_at = time::OffsetDateTime::from_unix_timestamp(expires as i64)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    (
        StatusCode::CREATED,
        axum::Json(json!({"token": token, "expires_at": expires_at, "permissions": {"contents": "write", "pull_requests": "write"}})),
    )
        .into_response()
}

/// A fresh RSA key pair for a test GitHub App: (private key PEM, public key PEM).
pub fn app_key_pair() -> Result<(String, String), rcgen::Error> {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256)?;
    Ok((pair.serialize_pem(), pair.public_key_pem()))
}
