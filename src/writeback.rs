//! Write-back: turning a decision's write plan into the API calls that make it durable.
//!
//! One trait, so that a new method (committing to Git) plugs in without touching how
//! decisions are taken. Today's implementation patches the Application (Image Updater's
//! `argocd` method).

use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;

use crate::kube::{KubeClient, KubeError, Patch};
use crate::patch::WritePlan;
use crate::retry::retry_transient;

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
    #[error("{message}")]
    Failed { message: String, retryable: bool },
}

/// Carries out a [`WritePlan`] for the Application it was computed from.
///
/// The contract every implementation keeps:
/// - **guarded**: the write is refused, not merged, if anything the decision read has
///   changed since (answered as [`WriteError::Race`]);
/// - **idempotent**: writing the same plan again, or a plan computed from the state it
///   produced, changes nothing and never lowers a tag;
/// - **narrow**: nothing outside the managed entries and our audit record is touched.
#[async_trait]
pub trait WriteBack: Send + Sync {
    async fn write(&self, app: &Value, plan: &WritePlan) -> Result<(), WriteError>;
}

/// Image Updater's `argocd` method: one guarded JSON patch of the Application.
pub struct ApplicationPatch<'a> {
    pub kube: &'a KubeClient,
    pub deadline: Option<Instant>,
}

#[async_trait]
impl WriteBack for ApplicationPatch<'_> {
    async fn write(&self, app: &Value, plan: &WritePlan) -> Result<(), WriteError> {
        let namespace = app["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = app["metadata"]["name"].as_str().unwrap_or_default();
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
            Err(e) => Err(WriteError::Failed {
                message: e.to_string(),
                retryable: e.is_retryable(),
            }),
        }
    }
}
