//! Helpers shared by the end-to-end tests: clients of the real code, pointed at stand-ins.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use argocd_ecr_updater::eks_auth::{ClusterAccess, IamTokenSource, SystemClock};
use argocd_ecr_updater::kube::{KubeClient, KubeTimeouts};
use argocd_ecr_updater_standins::{
    FUNCTION_ACCESS_KEY, FUNCTION_SECRET_KEY, FUNCTION_SESSION_TOKEN, StandIns,
};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;

pub fn function_credentials() -> Credentials {
    Credentials::new(
        FUNCTION_ACCESS_KEY,
        FUNCTION_SECRET_KEY,
        Some(FUNCTION_SESSION_TOKEN.to_string()),
        None,
        "tests",
    )
}

pub fn token_source(standins: &StandIns) -> Arc<IamTokenSource> {
    Arc::new(IamTokenSource::new(
        standins.options.cluster_name.clone(),
        standins.options.region.clone(),
        SharedCredentialsProvider::new(function_credentials()),
        Arc::new(SystemClock),
    ))
}

pub const TIMEOUTS: KubeTimeouts = KubeTimeouts {
    connect: Duration::from_secs(2),
    request: Duration::from_secs(3),
};

pub fn kube_client(standins: &StandIns) -> KubeClient {
    let access = ClusterAccess {
        endpoint: standins.kube_endpoint(),
        ca_pem: standins.ca_pem.clone().into_bytes(),
    };
    KubeClient::new(&access, token_source(standins), TIMEOUTS).unwrap()
}
