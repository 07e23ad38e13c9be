//! A GitLab stand-in: the REST API v4 calls git write-back makes, over HTTPS with the run's
//! CA, on the same in-memory commit history as the GitHub stand-in (projects keyed by their
//! full path). As strict as GitLab where it matters: `PRIVATE-TOKEN` checked (401 unknown,
//! 404 a project the token cannot see, 403 a token that may not write), an `update` action
//! refused when the file changed since its `last_commit_id`, a `create` refused when the file
//! exists, protected branches refusing pushes, and `:id` as the URL-encoded project path.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::faults::lock;
use crate::github::{CommitData, GitHubState, PullRequest, blob_sha, now_secs};

pub fn router(state: Arc<GitHubState>) -> Router {
    Router::new()
        .route("/api/v4/projects/{id}", get(project))
        .route(
            "/api/v4/projects/{id}/repository/branches",
            post(create_branch),
        )
        .route(
            "/api/v4/projects/{id}/repository/branches/{branch}",
            get(branch),
        )
        .route("/api/v4/projects/{id}/repository/files/{path}", get(file))
        .route("/api/v4/projects/{id}/repository/commits", post(commit))
        .route("/api/v4/projects/{id}/statuses/{sha}", post(create_status))
        .route(
            "/api/v4/projects/{id}/merge_requests",
            get(list_merge_requests).post(create_merge_request),
        )
        .route(
            "/api/v4/projects/{id}/merge_requests/{iid}",
            axum::routing::put(update_merge_request),
        )
        .fallback(|| async { message(StatusCode::NOT_FOUND, "404 Not Found") })
        .with_state(state)
}

fn message(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({"message": text}))).into_response()
}

/// The token's access to `project`, as GitLab answers without it.
fn authorize(
    state: &GitHubState,
    headers: &HeaderMap,
    project: &str,
    write: bool,
) -> Result<(), Response> {
    let token = headers
        .get("private-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let tokens = lock(&state.tokens);
    let Some(grant) = tokens
        .get(token)
        .filter(|g| g.expires.is_none_or(|e| e > now_secs()))
    else {
        return Err(message(StatusCode::UNAUTHORIZED, "401 Unauthorized"));
    };
    if !grant.repositories.contains(project) {
        return Err(message(StatusCode::NOT_FOUND, "404 Project Not Found"));
    }
    if write && !grant.write {
        return Err(message(StatusCode::FORBIDDEN, "403 Forbidden"));
    }
    Ok(())
}

/// `POST /projects/:id/statuses/:sha`: as GitLab, a write grant (Developer), an existing
/// commit, GitLab's states, and a state machine per `name`: the state a status already has is
/// refused as a transition from itself (`Cannot transition status via :enqueue from
/// :pending`), and a finished status may start again.
async fn create_status(
    State(state): State<Arc<GitHubState>>,
    Path((id, sha)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, true) {
        return r;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return message(
            StatusCode::BAD_REQUEST,
            "400 Bad request - body is not JSON",
        );
    };
    let wanted = request["state"].as_str().unwrap_or_default();
    if !["pending", "running", "success", "failed", "canceled"].contains(&wanted) {
        return message(
            StatusCode::BAD_REQUEST,
            "400 Bad request - state does not have a valid value",
        );
    }
    let name = request["name"].as_str().unwrap_or("default").to_string();
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    if !repo.commits.contains_key(&sha) {
        return message(StatusCode::NOT_FOUND, "404 References for commit Not Found");
    }
    let current = repo
        .statuses
        .iter()
        .rev()
        .find(|s| s["sha"] == sha.as_str() && s["context"] == name.as_str())
        .and_then(|s| s["state"].as_str().map(str::to_string));
    if current.as_deref() == Some(wanted) && matches!(wanted, "pending" | "running") {
        let event = if wanted == "pending" {
            "enqueue"
        } else {
            "run"
        };
        return message(
            StatusCode::BAD_REQUEST,
            &format!("Cannot transition status via :{event} from :{wanted}"),
        );
    }
    let status = json!({"sha": sha, "state": wanted, "context": name,
        "description": request["description"].as_str().unwrap_or_default()});
    repo.statuses.push(status.clone());
    (StatusCode::CREATED, axum::Json(status)).into_response()
}

async fn project(
    State(state): State<Arc<GitHubState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, false) {
        return r;
    }
    match lock(&state.repositories).get(&id) {
        Some(repo) => {
            axum::Json(json!({"path_with_namespace": id, "default_branch": repo.default_branch}))
                .into_response()
        }
        None => message(StatusCode::NOT_FOUND, "404 Project Not Found"),
    }
}

async fn branch(
    State(state): State<Arc<GitHubState>>,
    Path((id, branch)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, false) {
        return r;
    }
    let repos = lock(&state.repositories);
    match repos.get(&id).and_then(|r| r.branches.get(&branch).map(|c| (r, c))) {
        Some((repo, commit)) => axum::Json(json!({"name": branch, "protected": repo.protected.contains(&branch), "commit": {"id": commit}})).into_response(),
        None => message(StatusCode::NOT_FOUND, "404 Branch Not Found"),
    }
}

async fn create_branch(
    State(state): State<Arc<GitHubState>>,
    Path(id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, true) {
        return r;
    }
    let (Some(branch), Some(reference)) = (query.get("branch"), query.get("ref")) else {
        return message(StatusCode::BAD_REQUEST, "branch is missing, ref is missing");
    };
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    if repo.branches.contains_key(branch) {
        return message(StatusCode::BAD_REQUEST, "Branch already exists");
    }
    let commit = repo
        .branches
        .get(reference)
        .cloned()
        .unwrap_or_else(|| reference.clone());
    if !repo.commits.contains_key(&commit) {
        return message(StatusCode::BAD_REQUEST, "Invalid reference name");
    }
    repo.branches.insert(branch.clone(), commit.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({"name": branch, "commit": {"id": commit}})),
    )
        .into_response()
}

/// The newest commit reachable from `head` that set `path` to its current text.
fn last_commit_of(
    commits: &BTreeMap<String, CommitData>,
    head: &str,
    path: &str,
) -> Option<String> {
    let text = commits.get(head)?.files.get(path)?;
    let mut current = head.to_string();
    loop {
        let data = commits.get(&current)?;
        match &data.parent {
            Some(parent) if commits.get(parent).and_then(|p| p.files.get(path)) == Some(text) => {
                current = parent.clone();
            }
            _ => return Some(current),
        }
    }
}

async fn file(
    State(state): State<Arc<GitHubState>>,
    Path((id, path)): Path<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, false) {
        return r;
    }
    let repos = lock(&state.repositories);
    let Some(repo) = repos.get(&id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    let Some(reference) = query.get("ref") else {
        return message(StatusCode::BAD_REQUEST, "ref is missing");
    };
    let commit = repo
        .branches
        .get(reference)
        .cloned()
        .unwrap_or_else(|| reference.clone());
    let Some(text) = repo.commits.get(&commit).and_then(|c| c.files.get(&path)) else {
        return message(StatusCode::NOT_FOUND, "404 File Not Found");
    };
    axum::Json(json!({
        "file_name": path.rsplit('/').next(), "file_path": path, "size": text.len(),
        "encoding": "base64", "content": STANDARD.encode(text), "ref": reference,
        "blob_id": blob_sha(text), "commit_id": commit,
        "last_commit_id": last_commit_of(&repo.commits, &commit, &path),
    }))
    .into_response()
}

async fn commit(
    State(state): State<Arc<GitHubState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, true) {
        return r;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return message(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let (Some(branch), Some(commit_message), Some(actions)) = (
        request["branch"].as_str(),
        request["commit_message"].as_str(),
        request["actions"].as_array(),
    ) else {
        return message(
            StatusCode::BAD_REQUEST,
            "branch is missing, commit_message is missing, actions is missing",
        );
    };
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    if repo.protected.contains(branch) {
        return message(
            StatusCode::FORBIDDEN,
            "403 Forbidden - You are not allowed to push into this branch",
        );
    }
    let Some(mut head) = repo.branches.get(branch).cloned() else {
        return message(
            StatusCode::BAD_REQUEST,
            "You can only create or edit files when you are on a branch",
        );
    };
    if let Some((path, text)) = repo.race_next.take() {
        let mut files = repo
            .commits
            .get(&head)
            .map(|c| c.files.clone())
            .unwrap_or_default();
        files.insert(path, text);
        let oid = state.new_oid("someone else");
        repo.commits.insert(
            oid.clone(),
            CommitData {
                parent: Some(head),
                files,
                message: "someone else's commit".into(),
            },
        );
        repo.branches.insert(branch.to_string(), oid.clone());
        head = oid;
    }
    let mut files = repo
        .commits
        .get(&head)
        .map(|c| c.files.clone())
        .unwrap_or_default();
    for action in actions {
        let (Some(kind), Some(path), Some(content)) = (
            action["action"].as_str(),
            action["file_path"].as_str(),
            action["content"].as_str(),
        ) else {
            return message(
                StatusCode::BAD_REQUEST,
                "actions[action], actions[file_path] and actions[content] are required",
            );
        };
        let content = if action["encoding"] == "base64" {
            match STANDARD.decode(content) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) => return message(StatusCode::BAD_REQUEST, "content is not base64"),
            }
        } else {
            content.to_string()
        };
        match kind {
            "create" if files.contains_key(path) => {
                return message(
                    StatusCode::BAD_REQUEST,
                    "A file with this name already exists",
                );
            }
            "update" => {
                if !files.contains_key(path) {
                    return message(
                        StatusCode::BAD_REQUEST,
                        "A file with this name doesn't exist",
                    );
                }
                if let Some(last) = action["last_commit_id"].as_str()
                    && last_commit_of(&repo.commits, &head, path).as_deref() != Some(last)
                {
                    return message(
                        StatusCode::BAD_REQUEST,
                        "You are attempting to update a file that has changed since you started editing it.",
                    );
                }
            }
            "create" => {}
            other => {
                return message(
                    StatusCode::BAD_REQUEST,
                    &format!("action {other} is not supported by the stand-in"),
                );
            }
        }
        files.insert(path.to_string(), content);
    }
    let oid = state.new_oid(commit_message);
    repo.commits.insert(
        oid.clone(),
        CommitData {
            parent: Some(head),
            files,
            message: commit_message.to_string(),
        },
    );
    repo.branches.insert(branch.to_string(), oid.clone());
    (
        StatusCode::CREATED,
        axum::Json(
            json!({"id": oid, "short_id": &oid[..8], "title": commit_message.lines().next(),
        "web_url": format!("https://gitlab.com/{id}/-/commit/{oid}")}),
        ),
    )
        .into_response()
}

fn merge_request_json(id: &str, pull: &PullRequest) -> Value {
    json!({"iid": pull.number, "state": "opened", "title": pull.title, "source_branch": pull.head,
           "target_branch": pull.base, "labels": pull.labels,
           "web_url": format!("https://gitlab.com/{id}/-/merge_requests/{}", pull.number)})
}

async fn list_merge_requests(
    State(state): State<Arc<GitHubState>>,
    Path(id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, false) {
        return r;
    }
    let repos = lock(&state.repositories);
    let list: Vec<Value> = repos
        .get(&id)
        .map(|r| {
            r.pulls
                .iter()
                .filter(|p| query.get("source_branch").is_none_or(|b| *b == p.head))
                .filter(|p| query.get("target_branch").is_none_or(|b| *b == p.base))
                .map(|p| merge_request_json(&id, p))
                .collect()
        })
        .unwrap_or_default();
    axum::Json(Value::Array(list)).into_response()
}

async fn create_merge_request(
    State(state): State<Arc<GitHubState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, true) {
        return r;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let (Some(head), Some(base), Some(title)) = (
        request["source_branch"].as_str(),
        request["target_branch"].as_str(),
        request["title"].as_str(),
    ) else {
        return message(
            StatusCode::BAD_REQUEST,
            "source_branch is missing, target_branch is missing, title is missing",
        );
    };
    let mut repos = lock(&state.repositories);
    let Some(repo) = repos.get_mut(&id) else {
        return message(StatusCode::NOT_FOUND, "404 Project Not Found");
    };
    if repo.pulls.iter().any(|p| p.head == head && p.base == base) {
        return message(
            StatusCode::CONFLICT,
            "Another open merge request already exists for this source branch",
        );
    }
    let pull = PullRequest {
        number: repo.pulls.len() as u64 + 1,
        head: head.to_string(),
        base: base.to_string(),
        title: title.to_string(),
        body: request["description"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        labels: Vec::new(),
    };
    let answer = merge_request_json(&id, &pull);
    repo.pulls.push(pull);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

async fn update_merge_request(
    State(state): State<Arc<GitHubState>>,
    Path((id, iid)): Path<(String, u64)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = authorize(&state, &headers, &id, true) {
        return r;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut repos = lock(&state.repositories);
    let Some(pull) = repos
        .get_mut(&id)
        .and_then(|r| r.pulls.iter_mut().find(|p| p.number == iid))
    else {
        return message(StatusCode::NOT_FOUND, "404 Not found");
    };
    if let Some(labels) = request["add_labels"].as_str() {
        pull.labels.extend(
            labels
                .split(',')
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    axum::Json(merge_request_json(&id, pull)).into_response()
}
