//! How an invocation fails ([`HandlerError`]), with the class Lambda's `errorType` carries,
//! and a cluster's failure as the report of a multi-cluster event names it.

use crate::cluster::connect::ConnectError;
use crate::cluster::eks_auth::ClusterError;
use crate::cluster::kube::KubeError;
use crate::event::EventError;
use crate::report::{ClusterFailure, Report};

#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Event(#[from] EventError),
    #[error("cannot reach the cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("cannot list Applications: {0}")]
    List(KubeError),
    #[error("{summary}")]
    Targets {
        summary: String,
        report: Box<Report>,
    },
}

impl From<ConnectError> for HandlerError {
    fn from(error: ConnectError) -> Self {
        match error {
            ConnectError::Cluster(e) => Self::Cluster(e),
            ConnectError::Client(e) => Self::List(e),
        }
    }
}

impl HandlerError {
    /// Lambda's `errorType`: says at a glance in the dead-letter queue whether a retry helps.
    pub fn error_type(&self) -> &'static str {
        match self {
            Self::Event(_) => "Permanent.MalformedEvent",
            Self::Cluster(e) if !e.is_retryable() => "Permanent.ClusterConfiguration",
            Self::Cluster(_) => "Retryable.Cluster",
            Self::List(e) if !e.is_retryable() => "Permanent.ListApplications",
            Self::List(_) => "Retryable.ListApplications",
            Self::Targets { .. } => "Retryable.TargetsFailed",
        }
    }
}

/// A cluster that could not be listed at all, for the report of a multi-cluster event. The
/// invocation fails retryably either way (the other clusters are written, and a retry finds
/// them unchanged); the class says whether waiting can fix it or an operator must.
pub(super) fn cluster_failure(cluster: &str, error: &HandlerError) -> ClusterFailure {
    // Access (an entry, RBAC, a name, a CA) is an operator's to fix; the rest may pass.
    let needs_operator = match error {
        HandlerError::Cluster(e) => !matches!(e, ClusterError::Transient { .. }),
        HandlerError::List(e) => matches!(
            e,
            KubeError::Unauthorized { .. }
                | KubeError::Forbidden { .. }
                | KubeError::ForbiddenOther { .. }
                | KubeError::NotFound { .. }
                | KubeError::Tls(_)
                | KubeError::BadRequest { .. }
        ),
        HandlerError::Event(_) | HandlerError::Targets { .. } => false,
    };
    ClusterFailure {
        message: format!("cluster `{cluster}`: {error}"),
        error_type: error.error_type(),
        needs_operator,
    }
}
