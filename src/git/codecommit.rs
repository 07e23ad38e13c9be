//! AWS CodeCommit as a Git host. The function's own IAM role signs every call (SigV4 through
//! the AWS SDK), so there is no secret at all; `CreateCommit` with `parentCommitId` is the
//! conditional commit (`ParentCommitIdOutdatedException` when the branch moved).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_codecommit::primitives::Blob;
use aws_sdk_codecommit::types::{PutFileEntry, Target};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::aws::aws_error::{self, Cause};
use crate::git::githost::{Commit, CommitStatus, GitHost, HostError, PullRequest};

/// What the role needs on a repository, said when CodeCommit refuses.
const CODECOMMIT_GRANT: &str = "grant the function's role codecommit:GetBranch, GetFile, GetRepository, CreateCommit, CreateBranch, CreatePullRequest, ListPullRequests and GetPullRequest on the repository: list it in the template's CodeCommitRepositories";

/// CodeCommit clients, one per region, built on first use from the function's SDK
/// configuration.
pub struct CodeCommit {
    sdk: aws_config::SdkConfig,
    region: String,
    clients: Mutex<HashMap<String, aws_sdk_codecommit::Client>>,
    requests: AtomicUsize,
}

impl CodeCommit {
    pub fn new(sdk: aws_config::SdkConfig, region: String) -> Self {
        Self {
            sdk,
            region,
            clients: Mutex::new(HashMap::new()),
            requests: AtomicUsize::new(0),
        }
    }

    /// The repository `name` in `region` (empty: the function's region).
    pub fn repository(&self, region: &str, name: &str) -> CodeCommitRepository<'_> {
        let region = if region.is_empty() {
            self.region.clone()
        } else {
            region.to_string()
        };
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let client = clients
            .entry(region.clone())
            .or_insert_with(|| {
                let config = aws_sdk_codecommit::config::Builder::from(&self.sdk)
                    .region(aws_config::Region::new(region.clone()))
                    .build();
                aws_sdk_codecommit::Client::from_conf(config)
            })
            .clone();
        CodeCommitRepository {
            client,
            region,
            name: name.to_string(),
            requests: &self.requests,
        }
    }
}

/// One CodeCommit repository: the [`GitHost`] git write-back uses.
pub struct CodeCommitRepository<'a> {
    client: aws_sdk_codecommit::Client,
    region: String,
    name: String,
    requests: &'a AtomicUsize,
}

impl CodeCommitRepository<'_> {
    fn pull_request_url(&self, id: &str) -> String {
        format!(
            "https://{0}.console.aws.amazon.com/codesuite/codecommit/repositories/{1}/pull-requests/{id}/details?region={0}",
            self.region, self.name
        )
    }

    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// An SDK error in the host-neutral classes.
    fn failure<E>(
        &self,
        error: &SdkError<E, HttpResponse>,
        what: &str,
        branch: Option<&str>,
    ) -> HostError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let described = aws_error::describe(error);
        let code = described.code.clone().unwrap_or_default();
        let message = described.text.clone();
        let (what, repo) = (what.to_string(), self.name.clone());
        match (code.as_str(), described.cause) {
            ("ParentCommitIdOutdatedException", _) => HostError::HeadMoved {
                repo,
                branch: branch.unwrap_or_default().to_string(),
                message,
            },
            (_, Cause::AccessDenied) if message.contains("explicit deny") && branch.is_some() => {
                HostError::Protected {
                    repo,
                    branch: branch.unwrap_or_default().to_string(),
                    message,
                }
            }
            (_, Cause::AccessDenied) => HostError::Forbidden {
                what,
                message,
                fix: CODECOMMIT_GRANT,
            },
            (_, Cause::ExpiredCredentials | Cause::NoCredentials) => HostError::BadCredentials {
                repo,
                message: described.to_string(),
            },
            (_, Cause::Throttling) => HostError::RateLimited {
                repo,
                reset: None,
                retry_after: None,
            },
            ("RepositoryDoesNotExistException" | "BranchDoesNotExistException", _) => {
                HostError::NotFound { what, message }
            }
            (_, Cause::Dns | Cause::Connect | Cause::Timeout) => HostError::Transport {
                what,
                message: described.to_string(),
            },
            _ if error
                .raw_response()
                .is_some_and(|r| r.status().is_server_error()) =>
            {
                HostError::Server {
                    status: error.raw_response().map_or(500, |r| r.status().as_u16()),
                    what,
                    message,
                }
            }
            _ => HostError::Invalid { what, message },
        }
    }
}

#[async_trait::async_trait]
impl GitHost for CodeCommitRepository<'_> {
    fn name(&self) -> String {
        self.name.clone()
    }

    async fn default_branch(&self) -> Result<String, HostError> {
        self.count();
        let what = format!("CodeCommit repository {}", self.name);
        let answer = self
            .client
            .get_repository()
            .repository_name(&self.name)
            .send()
            .await
            .map_err(|e| self.failure(&e, &what, None))?;
        answer
            .repository_metadata()
            .and_then(|m| m.default_branch())
            .map(str::to_string)
            .ok_or(HostError::NotFound {
                what,
                message: "the repository has no default branch yet".into(),
            })
    }

    async fn branch_head(&self, branch: &str) -> Result<Option<String>, HostError> {
        self.count();
        let answer = self
            .client
            .get_branch()
            .repository_name(&self.name)
            .branch_name(branch)
            .send()
            .await;
        match answer {
            Ok(answer) => Ok(answer
                .branch()
                .and_then(|b| b.commit_id())
                .map(str::to_string)),
            Err(e) if e.code() == Some("BranchDoesNotExistException") => Ok(None),
            Err(e) => Err(self.failure(&e, &format!("branch `{branch}` of {}", self.name), None)),
        }
    }

    async fn file(&self, path: &str, commit: &str) -> Result<Option<String>, HostError> {
        self.count();
        let what = format!("`{path}` in {}", self.name);
        let answer = self
            .client
            .get_file()
            .repository_name(&self.name)
            .commit_specifier(commit)
            .file_path(path)
            .send()
            .await;
        match answer {
            Ok(answer) => {
                // CodeCommit answers with the whole file (up to 6 MB): refused above the
                // one cap before it is copied, decoded or parsed.
                let bytes = answer.file_content().as_ref();
                crate::git::githost::within_file_cap(bytes.len(), &what)?;
                String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|_| HostError::Invalid {
                        what,
                        message: "not UTF-8 text".into(),
                    })
            }
            Err(e) if e.code() == Some("FileDoesNotExistException") => Ok(None),
            Err(e) => Err(self.failure(&e, &what, None)),
        }
    }

    async fn create_branch(&self, branch: &str, commit: &str) -> Result<bool, HostError> {
        self.count();
        let answer = self
            .client
            .create_branch()
            .repository_name(&self.name)
            .branch_name(branch)
            .commit_id(commit)
            .send()
            .await;
        match answer {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some("BranchNameExistsException") => Ok(false),
            Err(e) => Err(self.failure(
                &e,
                &format!("creating branch `{branch}` of {}", self.name),
                Some(branch),
            )),
        }
    }

    async fn commit(
        &self,
        branch: &str,
        expected_head: &str,
        message: &str,
        files: &[(String, String)],
    ) -> Result<Commit, HostError> {
        self.count();
        let mut request = self
            .client
            .create_commit()
            .repository_name(&self.name)
            .branch_name(branch)
            .parent_commit_id(expected_head)
            .commit_message(message)
            .author_name("argocd-ecr-updater");
        for (path, text) in files {
            let entry = PutFileEntry::builder()
                .file_path(path)
                .file_content(Blob::new(text.as_bytes()))
                .build()
                .map_err(|e| HostError::Invalid {
                    what: format!("`{path}`"),
                    message: e.to_string(),
                })?;
            request = request.put_files(entry);
        }
        let what = format!("the commit to `{branch}` of {}", self.name);
        let answer = request
            .send()
            .await
            .map_err(|e| self.failure(&e, &what, Some(branch)))?;
        let oid = answer.commit_id().unwrap_or_default().to_string();
        Ok(Commit {
            url: format!(
                "https://{0}.console.aws.amazon.com/codesuite/codecommit/repositories/{1}/commit/{oid}?region={0}",
                self.region, self.name
            ),
            oid,
        })
    }

    /// The open pull request from the change branch: the open ones are looked through
    /// (`ListPullRequests`, then `GetPullRequest` for their targets: CodeCommit filters by
    /// neither branch).
    async fn find_pull_request(
        &self,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, HostError> {
        let what = format!("the open pull requests of {}", self.name);
        self.count();
        let open = self
            .client
            .list_pull_requests()
            .repository_name(&self.name)
            .pull_request_status(aws_sdk_codecommit::types::PullRequestStatusEnum::Open)
            .send()
            .await
            .map_err(|e| self.failure(&e, &what, None))?;
        let is_branch = |reference: Option<&str>, branch: &str| {
            reference.is_some_and(|r| r.strip_prefix("refs/heads/").unwrap_or(r) == branch)
        };
        for id in open.pull_request_ids() {
            self.count();
            let found = self
                .client
                .get_pull_request()
                .pull_request_id(id)
                .send()
                .await
                .map_err(|e| self.failure(&e, &what, None))?;
            let matches = found.pull_request().is_some_and(|p| {
                p.pull_request_targets().iter().any(|t| {
                    t.repository_name() == Some(self.name.as_str())
                        && is_branch(t.source_reference(), head)
                        && is_branch(t.destination_reference(), base)
                })
            });
            if matches {
                return Ok(Some(PullRequest {
                    number: id.parse().unwrap_or_default(),
                    url: self.pull_request_url(id),
                    opened: false,
                }));
            }
        }
        Ok(None)
    }

    async fn open_pull_request(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, HostError> {
        self.count();
        let target = Target::builder()
            .repository_name(&self.name)
            .source_reference(head)
            .destination_reference(base)
            .build()
            .map_err(|e| HostError::Invalid {
                what: "the pull request".into(),
                message: e.to_string(),
            })?;
        let what = format!("opening a pull request on {}", self.name);
        let answer = self
            .client
            .create_pull_request()
            .title(title)
            .description(body)
            .targets(target)
            .send()
            .await
            .map_err(|e| self.failure(&e, &what, None))?;
        let id = answer
            .pull_request()
            .and_then(|p| p.pull_request_id())
            .unwrap_or_default()
            .to_string();
        Ok(PullRequest {
            number: id.parse().unwrap_or_default(),
            url: self.pull_request_url(&id),
            opened: true,
        })
    }

    async fn add_labels(&self, _number: u64, _labels: &[String]) -> Result<(), HostError> {
        Err(HostError::Invalid {
            what: "labels".into(),
            message: "CodeCommit pull requests have no labels".into(),
        })
    }

    async fn commit_status(&self, _sha: &str, _status: &CommitStatus) -> Result<(), HostError> {
        Err(HostError::Invalid {
            what: "a commit status".into(),
            message: "CodeCommit has no commit statuses".into(),
        })
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}
