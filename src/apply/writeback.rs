//! Write-back: turning a decision's write plan into the API calls that make it durable.
//!
//! One trait, [`Writer`], so that a method plugs in without touching how decisions are taken:
//! [`ApplicationPatch`] patches the Application (Image Updater's `argocd` method); Git's
//! `GitCommit` (in `git::commit`, above this module) commits the file `git::gitwrite` renders
//! (its `git` method), and `ManifestBranch` (in `git::manifests`) commits a chart's new
//! version to the files holding Application manifests.

use std::time::Instant;

use async_trait::async_trait;

use crate::application::app::Application;
use crate::application::identity::Identity;
use crate::cluster::kube::{KubeClient, KubeError, Patch};
use crate::cluster::retry::retry_transient;
use crate::decision::appset;
use crate::decision::patch::WritePlan;
use crate::failure::Failure;
use crate::report::Action;

/// Why a write did not happen, in the three classes the caller acts on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// A guard refused the write: what the decision was based on changed meanwhile, so read
    /// again and decide again. Refused twice with the same content on a fresh read, it is
    /// the content the target refuses, not a race.
    #[error("{0}")]
    Race(String),
    /// The target was busy with a concurrent write (409): read again and decide again.
    #[error("{0}")]
    Conflict(String),
    /// The target refused the content itself; the same write will never succeed.
    #[error("{0}")]
    Refused(String),
    /// Anything else, with whether a retry (or an operator) can fix it.
    #[error(transparent)]
    Failed(Failure),
    /// This method may not write this target (an ApplicationSet would revert the patch):
    /// the updates are reported with `action` and `reason`.
    #[error("{reason}")]
    Declined {
        action: Action,
        reason: String,
        retryable: bool,
    },
}

impl WriteError {
    /// How the updates of a write that did not happen are reported.
    pub fn as_entry(&self) -> (Action, String, bool) {
        match self {
            Self::Declined {
                action,
                reason,
                retryable,
            } => (*action, reason.clone(), *retryable),
            Self::Refused(reason) | Self::Race(reason) | Self::Conflict(reason) => {
                (Action::Failed, reason.clone(), false)
            }
            Self::Failed(failure) => (Action::Failed, failure.message.clone(), failure.retryable),
        }
    }
}

/// Carries out a plan for the Application it was computed from, and says what it did.
///
/// The plan is a [`WritePlan`] (a guarded JSON patch of the Application) for the images and
/// for a chart's patch; a chart's commit edits several manifest files in Git, whose
/// Applications are not the one read, so each method names the plan it carries out.
///
/// The contract every implementation keeps:
/// - **guarded**: the write is refused, not merged, if anything the decision read has
///   changed since (answered as [`WriteError::Race`]);
/// - **idempotent**: writing the same plan again, or a plan computed from the state it
///   produced, changes nothing and never lowers a tag;
/// - **narrow**: nothing outside the managed entries and our audit record is touched.
#[async_trait]
pub trait Writer: Send + Sync {
    /// What the decision hands over to be written.
    type Plan: Sync;
    /// What a write that happened did, for the report.
    type Outcome;
    /// Whether this method may write this target at all; called before a dry run reports
    /// and before [`Writer::write`]. Only [`WriteError::Declined`] and
    /// [`WriteError::Failed`] come back from here.
    async fn check(&self, app: &Application<'_>, plan: &Self::Plan) -> Result<(), WriteError>;
    async fn write(
        &self,
        app: &Application<'_>,
        plan: &Self::Plan,
    ) -> Result<Self::Outcome, WriteError>;
}

/// Image Updater's `argocd` method: one guarded JSON patch of the Application.
pub struct ApplicationPatch<'a> {
    pub kube: &'a KubeClient,
    pub deadline: Option<Instant>,
}

#[async_trait]
impl Writer for ApplicationPatch<'_> {
    type Plan = WritePlan;
    type Outcome = ();

    /// An Application an ApplicationSet generates is patched only if the ApplicationSet's
    /// `ignoreApplicationDifferences` keeps what the patch writes: its controller would revert
    /// it within minutes otherwise.
    async fn check(&self, app: &Application<'_>, plan: &WritePlan) -> Result<(), WriteError> {
        let Some(owner) = appset::owner(app) else {
            return Ok(());
        };
        let Identity { namespace, name } = app.identity();
        let fetched = retry_transient(self.deadline, || {
            self.kube.get_application_set(namespace, owner)
        })
        .await;
        let lookup = match &fetched {
            Ok(set) => appset::Lookup::Found(set),
            Err(KubeError::NotFound { .. }) => appset::Lookup::Missing,
            Err(e) => appset::Lookup::Unreadable(Failure::new(e.to_string(), e.is_retryable())),
        };
        appset::verdict(owner, lookup, name, &plan.written_paths()).map_err(|refusal| {
            WriteError::Declined {
                action: refusal.action,
                reason: refusal.reason,
                retryable: refusal.retryable,
            }
        })
    }

    async fn write(&self, app: &Application<'_>, plan: &WritePlan) -> Result<(), WriteError> {
        let Identity { namespace, name } = app.identity();
        let patch = Patch::Json(plan.patch.clone());
        match retry_transient(self.deadline, || {
            self.kube.patch_application(namespace, name, &patch)
        })
        .await
        {
            Ok(_) => Ok(()),
            // A schema refusal of our content will not change on retry.
            Err(
                e @ KubeError::Invalid {
                    validation: true, ..
                },
            ) => Err(WriteError::Refused(e.to_string())),
            // A failed `test` (422): someone wrote first.
            Err(e @ KubeError::Invalid { .. }) => Err(WriteError::Race(e.to_string())),
            Err(e @ KubeError::Conflict { .. }) => Err(WriteError::Conflict(e.to_string())),
            Err(e) => Err(WriteError::Failed(Failure::new(
                e.to_string(),
                e.is_retryable(),
            ))),
        }
    }
}
