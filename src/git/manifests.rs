//! The branch a chart's new version is committed to, in the files that hold Application
//! manifests (an app-of-apps parent's Git): the branch the parent follows and its head, each
//! file read at that head, and one commit of the files edited, conditional on the head, so
//! that a branch moved since the read is a race to read and decide again, never a commit over
//! someone else's.

use crate::git::githost::{Commit, GitHost, HostError};

/// The branch as read before deciding.
pub struct ManifestBranch<'h> {
    host: &'h dyn GitHost,
    pub branch: String,
    pub head: String,
}

/// Why the branch cannot be written: a configuration to fix (permanent), or the host's
/// failure as it classifies it.
#[derive(Debug, thiserror::Error)]
pub enum BranchError {
    #[error(
        "branch `{branch}` of {repository} does not exist: set git-branch to the branch the parent Application follows"
    )]
    Missing { branch: String, repository: String },
    #[error(transparent)]
    Host(#[from] HostError),
}

impl BranchError {
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Missing { .. } => false,
            Self::Host(e) => e.is_retryable(),
        }
    }
}

/// How a commit ended when it did not land.
#[derive(Debug)]
pub enum CommitRefused {
    /// The branch moved since it was read: read and decide again.
    Raced(String),
    Failed(HostError),
}

impl<'h> ManifestBranch<'h> {
    /// `branch`, or the repository's default branch, and its head: 1 or 2 requests.
    pub async fn open(host: &'h dyn GitHost, branch: Option<&str>) -> Result<Self, BranchError> {
        let branch = match branch {
            Some(branch) => branch.to_string(),
            None => host.default_branch().await?,
        };
        match host.branch_head(&branch).await? {
            Some(head) => Ok(Self { host, branch, head }),
            None => Err(BranchError::Missing {
                branch,
                repository: host.name(),
            }),
        }
    }

    /// The repository, as the host names it in messages.
    pub fn host_name(&self) -> String {
        self.host.name()
    }

    /// A file's text at the head read; `None` if it does not exist there.
    pub async fn file(&self, path: &str) -> Result<Option<String>, HostError> {
        self.host.file(path, &self.head).await
    }

    /// Commits `changed` (path, new text) with `message`, only if the branch is still at the
    /// head read.
    pub async fn commit(
        &self,
        message: &str,
        changed: &[(String, String)],
    ) -> Result<Commit, CommitRefused> {
        match self
            .host
            .commit(&self.branch, &self.head, message, changed)
            .await
        {
            Ok(commit) => Ok(commit),
            Err(e @ HostError::HeadMoved { .. }) => Err(CommitRefused::Raced(e.to_string())),
            Err(e) => Err(CommitRefused::Failed(e)),
        }
    }
}
