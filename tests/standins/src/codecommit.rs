//! A CodeCommit stand-in: the AWS JSON 1.1 operations git write-back calls
//! (`GetRepository`, `GetBranch`, `GetFile`, `CreateBranch`, `CreateCommit`,
//! `CreatePullRequest`) with the service's exception shapes, on the same in-memory commit
//! history as the GitHub stand-in. A repository can be denied to the function's role
//! (`AccessDeniedException`), and a protected branch answers as an IAM policy with an
//! explicit deny on `codecommit:References` does.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::aws::AwsState;
use crate::faults::lock;
use crate::github::{CommitData, PullRequest};

fn error(kind: &str, message: &str) -> Response {
    let mut response = (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"__type": kind, "message": message})),
    )
        .into_response();
    if let Ok(v) = kind.parse() {
        response.headers_mut().insert("x-amzn-errortype", v);
    }
    response
}

fn denied(state: &AwsState, action: &str, name: &str, explicit: bool) -> Response {
    let why = if explicit {
        "with an explicit deny in an identity-based policy".to_string()
    } else {
        format!("because no identity-based policy allows the codecommit:{action} action")
    };
    error(
        "AccessDeniedException",
        &format!(
            "User: arn:aws:sts::{0}:assumed-role/argocd-ecr-updater-role/argocd-ecr-updater is not authorized to perform: codecommit:{action} on resource: arn:aws:codecommit:{1}:{0}:{name} {why}",
            state.account, state.region
        ),
    )
}

/// Handles one `CodeCommit_20150413.<operation>` request.
pub fn handle(state: &AwsState, operation: &str, request: &Value) -> Response {
    if operation == "GetPullRequest" {
        return get_pull_request(state, request);
    }
    let Some(name) = request["repositoryName"]
        .as_str()
        .or_else(|| request["targets"][0]["repositoryName"].as_str())
        .map(str::to_string)
    else {
        return error(
            "RepositoryNameRequiredException",
            "A repository name is required, but was not specified.",
        );
    };
    if lock(&state.codecommit_denied).contains(&name) {
        return denied(state, operation, &name, false);
    }
    let store = &state.codecommit;
    let mut repos = lock(&store.repositories);
    // Pull request ids are unique across the account's repositories, as CodeCommit's are.
    let next_pull_id = repos.values().map(|r| r.pulls.len() as u64).sum::<u64>() + 1;
    let Some(repo) = repos.get_mut(&name) else {
        return error(
            "RepositoryDoesNotExistException",
            &format!("{name} does not exist"),
        );
    };
    match operation {
        "GetRepository" => axum::Json(json!({"repositoryMetadata": {
            "repositoryName": name, "defaultBranch": repo.default_branch,
            "accountId": state.account, "repositoryId": format!("{:x}", name.len()),
            "Arn": format!("arn:aws:codecommit:{}:{}:{name}", state.region, state.account)}}))
        .into_response(),
        "GetBranch" => {
            let branch = request["branchName"].as_str().unwrap_or_default();
            match repo.branches.get(branch) {
                Some(commit) => {
                    axum::Json(json!({"branch": {"branchName": branch, "commitId": commit}}))
                        .into_response()
                }
                None => error(
                    "BranchDoesNotExistException",
                    &format!("Could not find branch {branch}"),
                ),
            }
        }
        "GetFile" => {
            let specifier = request["commitSpecifier"].as_str().unwrap_or_default();
            let path = request["filePath"].as_str().unwrap_or_default();
            let commit = repo
                .branches
                .get(specifier)
                .cloned()
                .unwrap_or_else(|| specifier.to_string());
            let Some(data) = repo.commits.get(&commit) else {
                return error(
                    "CommitDoesNotExistException",
                    &format!("Could not find commit {specifier}"),
                );
            };
            match data.files.get(path) {
                Some(text) => axum::Json(json!({
                    "commitId": commit, "blobId": crate::github::blob_sha(text), "filePath": path,
                    "fileMode": "NORMAL", "fileSize": text.len(), "fileContent": STANDARD.encode(text)}))
                .into_response(),
                None => error("FileDoesNotExistException", &format!("The file {path} does not exist in the specified commit")),
            }
        }
        "CreateBranch" => {
            let branch = request["branchName"].as_str().unwrap_or_default();
            let commit = request["commitId"].as_str().unwrap_or_default();
            if repo.branches.contains_key(branch) {
                return error(
                    "BranchNameExistsException",
                    &format!("Branch name {branch} already exists"),
                );
            }
            if !repo.commits.contains_key(commit) {
                return error(
                    "CommitDoesNotExistException",
                    &format!("Could not find commit {commit}"),
                );
            }
            repo.branches.insert(branch.to_string(), commit.to_string());
            axum::Json(json!({})).into_response()
        }
        "CreateCommit" => {
            let branch = request["branchName"].as_str().unwrap_or_default();
            if repo.protected.contains(branch) {
                return denied(state, "GitPush", &name, true);
            }
            let Some(mut head) = repo.branches.get(branch).cloned() else {
                return error(
                    "BranchDoesNotExistException",
                    &format!("Could not find branch {branch}"),
                );
            };
            if let Some((path, text)) = repo.race_next.take() {
                let Some(mut files) = repo.commits.get(&head).map(|c| c.files.clone()) else {
                    return error("CommitDoesNotExistException", "missing head commit");
                };
                files.insert(path, text);
                let oid = store.new_oid("someone else");
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
            let Some(parent) = request["parentCommitId"].as_str() else {
                return error(
                    "ParentCommitIdRequiredException",
                    "A parent commit ID is required.",
                );
            };
            if parent != head {
                return error(
                    "ParentCommitIdOutdatedException",
                    &format!(
                        "The parent commit ID {parent} is not the same as the tip of the branch {branch}"
                    ),
                );
            }
            let Some(mut files) = repo.commits.get(&head).map(|c| c.files.clone()) else {
                return error("CommitDoesNotExistException", "missing head commit");
            };
            let mut changed = false;
            let mut updated = Vec::new();
            for entry in request["putFiles"].as_array().cloned().unwrap_or_default() {
                let (Some(path), Some(content)) =
                    (entry["filePath"].as_str(), entry["fileContent"].as_str())
                else {
                    return error(
                        "FileContentAndSourceFileSpecifiedException",
                        "putFiles needs filePath and fileContent",
                    );
                };
                let Ok(bytes) = STANDARD.decode(content) else {
                    return error("SerializationException", "fileContent is not base64");
                };
                let text = String::from_utf8_lossy(&bytes).into_owned();
                if files.get(path) != Some(&text) {
                    changed = true;
                }
                updated.push(json!({"absolutePath": path, "blobId": crate::github::blob_sha(&text), "fileMode": "NORMAL"}));
                files.insert(path.to_string(), text);
            }
            if !changed {
                return error(
                    "NoChangeException",
                    "The commit cannot be created because no changes will be made to the repository as a result of this commit.",
                );
            }
            let message = request["commitMessage"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let oid = store.new_oid(&message);
            repo.commits.insert(
                oid.clone(),
                CommitData {
                    parent: Some(head),
                    files,
                    message,
                },
            );
            repo.branches.insert(branch.to_string(), oid.clone());
            axum::Json(json!({"commitId": oid, "treeId": crate::github::blob_sha(&oid), "filesAdded": [], "filesUpdated": updated, "filesDeleted": []})).into_response()
        }
        "CreatePullRequest" => {
            let target = &request["targets"][0];
            let (Some(title), Some(head), Some(base)) = (
                request["title"].as_str(),
                target["sourceReference"].as_str(),
                target["destinationReference"].as_str(),
            ) else {
                return error(
                    "InvalidTargetsException",
                    "title, sourceReference and destinationReference are required",
                );
            };
            if !repo.branches.contains_key(head) {
                return error(
                    "ReferenceDoesNotExistException",
                    &format!("The reference {head} does not exist"),
                );
            }
            let number = next_pull_id;
            repo.pulls.push(PullRequest {
                number,
                head: head.to_string(),
                base: base.to_string(),
                title: title.to_string(),
                body: request["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                labels: Vec::new(),
            });
            axum::Json(
                json!({"pullRequest": {"pullRequestId": number.to_string(), "title": title,
                "pullRequestStatus": "OPEN", "pullRequestTargets": [{"repositoryName": name,
                "sourceReference": head, "destinationReference": base}]}}),
            )
            .into_response()
        }
        "ListPullRequests" => {
            // Every pull request the stand-in holds is open: none is ever merged or closed.
            if request["pullRequestStatus"]
                .as_str()
                .is_some_and(|s| s != "OPEN")
            {
                return axum::Json(json!({"pullRequestIds": []})).into_response();
            }
            let ids: Vec<String> = repo.pulls.iter().map(|p| p.number.to_string()).collect();
            axum::Json(json!({"pullRequestIds": ids})).into_response()
        }
        other => error(
            "UnknownOperationException",
            &format!("operation {other} is not supported by the stand-in"),
        ),
    }
}

/// `GetPullRequest` names no repository: ids are unique across them.
fn get_pull_request(state: &AwsState, request: &Value) -> Response {
    let Some(id) = request["pullRequestId"].as_str() else {
        return error(
            "PullRequestIdRequiredException",
            "A pull request ID is required, but none was provided.",
        );
    };
    let repos = lock(&state.codecommit.repositories);
    for (name, repo) in repos.iter() {
        if let Some(pull) = repo.pulls.iter().find(|p| p.number.to_string() == id) {
            return axum::Json(
                json!({"pullRequest": {"pullRequestId": id, "title": pull.title,
                "pullRequestStatus": "OPEN", "pullRequestTargets": [{"repositoryName": name,
                "sourceReference": pull.head, "destinationReference": pull.base}]}}),
            )
            .into_response();
        }
    }
    error(
        "PullRequestDoesNotExistException",
        &format!("The pull request ID {id} does not exist"),
    )
}
