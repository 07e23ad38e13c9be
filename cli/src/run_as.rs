//! Whose credentials `plan` and `redrive --local` run the pipeline with.
//!
//! The pipeline follows references an Application's editor chooses: the Kubernetes Secrets of
//! `git:secret:` and of a cosign `secret:` key, Argo CD's repository Secrets (`git:repocreds`),
//! a cosign `secretsmanager:` key, the CodeCommit repository written back to and the ECR
//! repositories read. In Lambda, the function's role (IAM) and the group its access entry maps
//! it to (RBAC, `resourceNames`) bound what those reach. Run with an operator's credentials,
//! which reach far more, the same annotations would read what the function never could and
//! send it where the Application says.
//!
//! So a local run acts as the deployed function's role: every AWS client of the pipeline and
//! every cluster token it signs is made with the role's credentials, and the authorities
//! themselves (IAM with the resource and key policies, the API server with RBAC) decide,
//! exactly as they do for the function. Nothing is re-implemented here that could drift from
//! them. Only the commands' own calls (reading the function, the dead-letter queue) use the
//! operator's credentials.
//!
//! `--operator-credentials` runs with the operator's own instead, for when the role cannot
//! be assumed: it says loudly, on every run, what it gives up.

use aws_config::SdkConfig;
use aws_credential_types::provider::SharedCredentialsProvider;

use argocd_ecr_updater::aws::aws_error::{Described, describe};

/// The session name a local run's assumed role carries: CloudTrail shows it, with the
/// operator who assumed it.
const SESSION_NAME: &str = "argocd-ecr-updater-cli";

/// Whose credentials the pipeline runs with.
pub enum RunAs {
    /// The role of this deployed function (its name or ARN).
    FunctionRole(String),
    /// The operator's own (`--operator-credentials`).
    Operator,
}

/// Why the function's role cannot be used; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RunAsError {
    #[error(
        "cannot read the function `{function}` to find its role: {described}; pass the stack's FunctionName output as --function, in the stack's region (AWS_REGION); you need lambda:GetFunctionConfiguration"
    )]
    Function {
        function: String,
        described: Described,
    },
    #[error("the function `{0}` names no execution role; pass the stack's FunctionName output")]
    NoRole(String),
    #[error(
        "cannot tell who your AWS credentials are (sts:GetCallerIdentity): {0}; check them with `aws sts get-caller-identity`"
    )]
    Caller(Described),
    #[error(
        "cannot assume the function's role {role}: {described}. A local run acts as the function's role, so that an Application's references (git:secret:, git:repocreds, cosign secret: and secretsmanager: keys, CodeCommit and ECR repositories) reach no more than the function's IAM and RBAC let it. Let your role assume it (the template parameter OperatorRoleArns, Terraform's operator_role_arns), or run from a profile of that role; or pass --operator-credentials instead of --function to run with your own credentials, accepting that those references are then limited by your access, not the function's"
    )]
    Assume { role: String, described: Described },
}

/// The SDK configuration the pipeline runs with: `operator`'s, as the function's role, unless
/// the operator chose their own credentials.
pub async fn pipeline_sdk(operator: &SdkConfig, run_as: &RunAs) -> Result<SdkConfig, RunAsError> {
    let function = match run_as {
        RunAs::Operator => {
            eprintln!(
                "argocd-ecr-updater: WARNING: --operator-credentials: the pipeline runs with YOUR AWS credentials and YOUR Kubernetes access, not the function's role: the Applications' git:secret:, git:repocreds, cosign secret: and secretsmanager: references and the CodeCommit and ECR repositories they name reach whatever you may reach, which the function's IAM and RBAC would refuse. Run with --function <FunctionName> to act as the function's role."
            );
            return Ok(operator.clone());
        }
        RunAs::FunctionRole(function) => function,
    };
    let role = function_role(operator, function).await?;
    let sts = aws_sdk_sts::Client::new(operator);
    let caller = sts
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| RunAsError::Caller(describe(&e)))?;
    if caller.arn().is_some_and(|arn| is_session_of(arn, &role)) {
        // Already the role (a profile of it): a role may not assume itself unless its trust
        // policy names it, and there is nothing to gain.
        tracing::info!(%role, "running as the function's role (your credentials are a session of it)");
        return Ok(operator.clone());
    }
    // Asked once here, so that a refusal is said now, with its fix, rather than as the first
    // cluster's or registry's failure; the provider then renews the session as it expires.
    sts.assume_role()
        .role_arn(&role)
        .role_session_name(SESSION_NAME)
        .send()
        .await
        .map_err(|e| RunAsError::Assume {
            role: role.clone(),
            described: describe(&e),
        })?;
    let provider = aws_config::sts::AssumeRoleProvider::builder(&role)
        .session_name(SESSION_NAME)
        .configure(operator)
        .build()
        .await;
    tracing::info!(%role, "running as the function's role (assumed)");
    Ok(operator
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(provider))
        .build())
}

/// The execution role of the deployed function `function`.
async fn function_role(operator: &SdkConfig, function: &str) -> Result<String, RunAsError> {
    let out = aws_sdk_lambda::Client::new(operator)
        .get_function_configuration()
        .function_name(function)
        .send()
        .await
        .map_err(|e| RunAsError::Function {
            function: function.to_string(),
            described: describe(&e),
        })?;
    out.role()
        .filter(|role| !role.is_empty())
        .map(str::to_string)
        .ok_or_else(|| RunAsError::NoRole(function.to_string()))
}

/// Whether `caller` (GetCallerIdentity's ARN) is a session of the IAM role `role`:
/// `arn:<p>:sts::<account>:assumed-role/<name>/<session>` for `arn:<p>:iam::<account>:role/[<path>/]<name>`.
fn is_session_of(caller: &str, role: &str) -> bool {
    let parts = |arn: &str| -> Option<(String, String, String, String)> {
        let mut fields = arn.splitn(6, ':');
        let (_, partition, service, _, account, resource) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        Some((
            partition.to_string(),
            service.to_string(),
            account.to_string(),
            resource.to_string(),
        ))
    };
    let (Some(caller), Some(role)) = (parts(caller), parts(role)) else {
        return false;
    };
    let Some(session_of) = caller
        .3
        .strip_prefix("assumed-role/")
        .and_then(|rest| rest.split_once('/'))
        .map(|(name, _session)| name)
    else {
        return false;
    };
    let Some(role_name) = role
        .3
        .strip_prefix("role/")
        .and_then(|path| path.rsplit('/').next())
    else {
        return false;
    };
    caller.0 == role.0
        && caller.1 == "sts"
        && role.1 == "iam"
        && caller.2 == role.2
        && !role_name.is_empty()
        && session_of == role_name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_of_the_role_is_told_by_partition_account_and_name() {
        let role = "arn:aws:iam::768157413559:role/argocd-ecr-updater-role";
        let session = "arn:aws:sts::768157413559:assumed-role/argocd-ecr-updater-role/x";
        assert!(is_session_of(session, role));
        assert!(is_session_of(
            session,
            "arn:aws:iam::768157413559:role/service/argocd-ecr-updater-role"
        ));
        for (caller, why) in [
            (
                "arn:aws:sts::111122223333:assumed-role/argocd-ecr-updater-role/x",
                "another account",
            ),
            (
                "arn:aws-cn:sts::768157413559:assumed-role/argocd-ecr-updater-role/x",
                "another partition",
            ),
            (
                "arn:aws:sts::768157413559:assumed-role/argocd-ecr-updater-role-admin/x",
                "another role whose name starts the same",
            ),
            (
                "arn:aws:iam::768157413559:user/argocd-ecr-updater-role",
                "a user of the same name",
            ),
            ("arn:aws:sts::768157413559:assumed-role/", "no role name"),
            ("not an arn", "not an ARN"),
        ] {
            assert!(!is_session_of(caller, role), "{why}");
        }
    }
}
