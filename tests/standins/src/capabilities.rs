//! EKS capabilities (`ListCapabilities`, `DescribeCapability`) of the stand-in cluster, for
//! `doctor`'s check of AWS's managed Argo CD. Shapes as the EKS API reference gives them
//! (`/clusters/{name}/capabilities[/{capabilityName}]`, `capabilities[]` of summaries,
//! `capability.configuration.argoCd.namespace`), unknown clusters and capabilities answered
//! `ResourceNotFoundException`, and a refused call as IAM refuses it.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use crate::aws::{AwsState, aws_error};
use crate::deployment::refusal;

/// One capability created on the cluster.
#[derive(Debug, Clone, Serialize)]
pub struct Capability {
    pub name: String,
    /// `ARGOCD`, `ACK` or `KRO`.
    pub kind: String,
    /// `CREATING`, `ACTIVE`, `UPDATING`, `DELETING`, `CREATE_FAILED`, `DEGRADED`.
    pub status: String,
    /// `configuration.argoCd.namespace` (Argo CD only).
    pub namespace: Option<String>,
}

impl Capability {
    /// An active Argo CD capability whose Applications live in `namespace`.
    pub fn argocd(namespace: &str) -> Self {
        Self {
            name: "argocd".into(),
            kind: "ARGOCD".into(),
            status: "ACTIVE".into(),
            namespace: Some(namespace.into()),
        }
    }

    fn arn(&self, state: &AwsState) -> String {
        format!(
            "arn:aws:eks:{}:{}:capability/{}/{}/{}",
            state.region,
            state.account,
            state.cluster_name,
            self.kind.to_ascii_lowercase(),
            self.name
        )
    }
}

/// EKS's `ListCapabilities`.
pub async fn list_capabilities(
    State(state): State<Arc<AwsState>>,
    Path(cluster): Path<String>,
) -> Response {
    if let Some(refused) = refusal(&state, "ListCapabilities", "eks:ListCapabilities", true) {
        return refused;
    }
    if cluster != state.cluster_name {
        return not_found(&format!("No cluster found for name: {cluster}."));
    }
    let capabilities = crate::faults::lock(&state.deployment).capabilities.clone();
    let summaries: Vec<_> = capabilities
        .iter()
        .map(|c| {
            json!({"capabilityName": c.name, "arn": c.arn(&state), "type": c.kind,
                "status": c.status, "version": "v1"})
        })
        .collect();
    axum::Json(json!({"capabilities": summaries})).into_response()
}

/// EKS's `DescribeCapability`.
pub async fn describe_capability(
    State(state): State<Arc<AwsState>>,
    Path((cluster, name)): Path<(String, String)>,
) -> Response {
    if let Some(refused) = refusal(&state, "DescribeCapability", "eks:DescribeCapability", true) {
        return refused;
    }
    if cluster != state.cluster_name {
        return not_found(&format!("No cluster found for name: {cluster}."));
    }
    let capabilities = crate::faults::lock(&state.deployment).capabilities.clone();
    let Some(c) = capabilities.iter().find(|c| c.name == name) else {
        return not_found(&format!("No capability found for name: {name}."));
    };
    let mut capability = json!({"capabilityName": c.name, "arn": c.arn(&state),
        "clusterName": cluster, "type": c.kind, "status": c.status, "version": "v1",
        "roleArn": format!("arn:aws:iam::{}:role/eks-capability-{}", state.account, c.name)});
    if let Some(namespace) = &c.namespace {
        capability["configuration"] = json!({"argoCd": {"namespace": namespace,
            "serverUrl": format!("https://{}.eks-capabilities.{}.amazonaws.com", c.name, state.region)}});
    }
    axum::Json(json!({"capability": capability})).into_response()
}

fn not_found(message: &str) -> Response {
    aws_error(StatusCode::NOT_FOUND, "ResourceNotFoundException", message)
}
