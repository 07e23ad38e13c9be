//! The branch a chart's new version is committed to, in the files that hold Application
//! manifests (an app-of-apps parent's Git): the branch the parent follows and its head, each
//! file read at that head, and one commit of the files edited, conditional on the head, so
//! that a branch moved since the read is a race to read and decide again, never a commit over
//! someone else's. The branch as read is the charts' [`Writer`] in Git: the head read is the
//! commit's guard.

use async_trait::async_trait;

use crate::application::app::Application;
use crate::apply::writeback::{WriteError, Writer};
use crate::git::commit::git_failure;
use crate::git::githost::{Commit, GitHost, HostError};

/// The branch as read before deciding, and the write of what was decided on it.
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

/// A chart's commit as decided: one commit of every manifest file edited, since the charts
/// of one Application may each name their own file (and Application manifests are not the
/// Application read, so no [`crate::decision::patch::WritePlan`] describes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEdit {
    pub message: String,
    /// Each file edited (path, new text), all read at the head read.
    pub files: Vec<(String, String)>,
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
}

#[async_trait]
impl Writer for ManifestBranch<'_> {
    type Plan = ManifestEdit;
    type Outcome = Commit;

    /// Nothing on the Application is rewritten, so an ApplicationSet has nothing to revert.
    async fn check(&self, _app: &Application<'_>, _edit: &ManifestEdit) -> Result<(), WriteError> {
        Ok(())
    }

    /// Commits the edit only if the branch is still at the head read; a branch moved since
    /// is a [`WriteError::Race`]. `app` is not read: the edit holds the manifests' new text.
    async fn write(
        &self,
        _app: &Application<'_>,
        edit: &ManifestEdit,
    ) -> Result<Commit, WriteError> {
        self.host
            .commit(&self.branch, &self.head, &edit.message, &edit.files)
            .await
            .map_err(git_failure)
    }
}
