//! `argocd-ecr-updater-cli token`: an EKS bearer token as an `ExecCredential`, like `aws eks
//! get-token`, for checking what a role may do with kubectl.

use std::process::ExitCode;
use std::sync::Arc;

use aws_credential_types::provider::ProvideCredentials;

use crate::common::{print_json, sdk_config, usage_error};
use argocd_ecr_updater::aws::aws_error::NO_CREDENTIALS;
use argocd_ecr_updater::cluster::eks_auth::{IamTokenSource, SystemClock, exec_credential};

pub async fn run(cluster: String, region: Option<String>) -> ExitCode {
    let sdk = sdk_config(region).await;
    let Some(region) = sdk.region().map(|r| r.to_string()) else {
        return usage_error("no AWS region: pass --region or set AWS_REGION".into());
    };
    let Some(credentials) = sdk.credentials_provider() else {
        return usage_error(NO_CREDENTIALS.into());
    };
    if let Err(e) = credentials.provide_credentials().await {
        return usage_error(format!("{NO_CREDENTIALS} (the SDK said: {e})"));
    }
    let source = IamTokenSource::new(cluster, region, credentials, Arc::new(SystemClock));
    match source.fresh().await {
        Ok((token, signed_at)) => {
            let credential = exec_credential(token, signed_at);
            match print_json(&credential, false) {
                Ok(()) => ExitCode::SUCCESS,
                Err(code) => code,
            }
        }
        Err(e) => usage_error(e.to_string()),
    }
}
