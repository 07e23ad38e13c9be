//! The Git credentials secrets the function reads: readable as the function's role, and
//! holding a shape the function accepts. A secret it cannot read is told by the error AWS
//! answers (gone, being deleted, refused, its KMS key), each with its own fix; the secret's
//! text is never printed.

use argocd_ecr_updater::aws::aws_error::{Cause, Described, describe};
use argocd_ecr_updater::config::Config;

use super::{Checklist, Clients, Failure, Function, failed_call};

const SHAPE: &str = "store {\"token\": \"...\"} or githubAppID, githubAppInstallationID and githubAppPrivateKey, optionally with \"url\" (docs/git-write-back.md)";

pub(super) async fn git_secrets(
    clients: &Clients,
    config: &Config,
    function: &Function,
    role: Option<&aws_credential_types::Credentials>,
    list: &mut Checklist,
) {
    let secrets = match role {
        Some(role) => aws_sdk_secretsmanager::Client::from_conf(
            aws_sdk_secretsmanager::config::Builder::from(&clients.sdk)
                .credentials_provider(role.clone())
                .build(),
        ),
        None => clients.secrets.clone(),
    };
    for arn in &config.git.credential_secret_arns {
        let read = secrets.get_secret_value().secret_id(arn).send().await;
        let result = match read {
            Ok(out) => match out.secret_string() {
                Some(text) => argocd_ecr_updater::git::gitcreds::credentials_secret_kind(arn, text)
                    .map_err(|why| (why, SHAPE.to_string())),
                None => Err((
                    "it has no SecretString".into(),
                    "store the credentials as JSON text".into(),
                )),
            },
            Err(e) => Err(unreadable(arn, &function.role, &describe(&e))),
        };
        match (result, role) {
            (Ok(kind), Some(_)) => list.add(
                "git credentials",
                arn,
                Ok(format!("readable by the function's role; holds {kind}")),
            ),
            // Read with the operator's credentials: the shape is checked, the function's
            // access is not.
            (Ok(kind), None) => {
                let mut why = format!(
                    "holds {kind}, read with your credentials: whether the function's role may read it is not checked"
                );
                let mut by_hand = format!(
                    "aws iam simulate-principal-policy --policy-source-arn {} --action-names secretsmanager:GetSecretValue --resource-arns {arn}",
                    function.role
                );
                match customer_key(clients, arn).await {
                    Ok(Some(key)) => {
                        why.push_str(&format!("; it is encrypted with the customer managed key {key}, whose key policy (or a grant) must also let the role kms:Decrypt"));
                        by_hand.push_str(&format!(
                            "; aws kms get-key-policy --key-id {key} --policy-name default"
                        ));
                    }
                    Ok(None) => {}
                    Err(described) => why.push_str(&format!(
                        "; its KMS key is not known (DescribeSecret failed: {described})"
                    )),
                }
                list.skip("git credentials", arn, why, by_hand);
            }
            (Err(failure), _) => list.add("git credentials", arn, Err(failure)),
        }
    }
}

/// The customer managed key that encrypts the secret, if one does: the role needs
/// `kms:Decrypt` on it besides `secretsmanager:GetSecretValue`. Secrets Manager's own key
/// (`aws/secretsmanager`, or no `KmsKeyId` at all) needs nothing more.
async fn customer_key(clients: &Clients, arn: &str) -> Result<Option<String>, Described> {
    let out = clients
        .secrets
        .describe_secret()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| describe(&e))?;
    Ok(out
        .kms_key_id()
        .filter(|key| !key.is_empty() && *key != "alias/aws/secretsmanager")
        .map(str::to_string))
}

/// Why the secret cannot be read, by the error code Secrets Manager answers, and its fix.
fn unreadable(arn: &str, role: &str, described: &Described) -> Failure {
    let text = described.text.to_ascii_lowercase();
    let kms = text.contains("kms");
    match (described.code.as_deref(), described.cause) {
        (Some("ResourceNotFoundException"), _) => (
            format!("it does not exist: {described}"),
            format!("create it (aws secretsmanager create-secret --name <name> --secret-string file://credentials.json) and put its ARN in GitCredentialsSecretArns, or take {arn} out of GitCredentialsSecretArns"),
        ),
        (Some("InvalidRequestException"), _) if text.contains("deletion") || text.contains("deleted") => (
            format!("it is scheduled for deletion: {described}"),
            format!("aws secretsmanager restore-secret --secret-id {arn}"),
        ),
        (Some("DecryptionFailure"), _) => (
            format!("Secrets Manager cannot decrypt it with its KMS key: {described}"),
            format!("let {role} use the key: kms:Decrypt in the key policy of the secret's KmsKeyId (aws secretsmanager describe-secret --secret-id {arn} --query KmsKeyId), and check the key is enabled (aws kms describe-key)"),
        ),
        (_, Cause::AccessDenied) if kms => (
            format!("the secret's KMS key refuses the reader: {described}"),
            format!("allow {role} kms:Decrypt in the key policy of the secret's KmsKeyId (aws secretsmanager describe-secret --secret-id {arn} --query KmsKeyId)"),
        ),
        (_, Cause::AccessDenied) => (
            format!("the reader may not read it: {described}"),
            "list it in GitCredentialsSecretArns (the template grants exactly those), and check its resource policy denies nothing to the role".into(),
        ),
        _ => failed_call("GetSecretValue", "secretsmanager:GetSecretValue", described),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_secret_gets_the_fix_its_error_code_calls_for() {
        let arn = "arn:aws:secretsmanager:ap-northeast-2:123456789012:secret:git-AbCdEf";
        let role = "arn:aws:iam::123456789012:role/fn";
        // (code, cause, AWS's message, what the detail says, what the fix says)
        let cases = [
            (
                "ResourceNotFoundException",
                Cause::Service,
                "Secrets Manager can't find the specified secret.",
                "does not exist",
                "create-secret",
            ),
            (
                "InvalidRequestException",
                Cause::Service,
                "You can't perform this operation on the secret because it was marked for deletion.",
                "scheduled for deletion",
                "restore-secret --secret-id",
            ),
            (
                "DecryptionFailure",
                Cause::Service,
                "Secrets Manager can't decrypt the protected secret text using the provided KMS key.",
                "cannot decrypt",
                "kms:Decrypt",
            ),
            (
                "AccessDeniedException",
                Cause::AccessDenied,
                "Access to KMS is not allowed",
                "KMS key refuses",
                "kms:Decrypt",
            ),
            (
                "AccessDeniedException",
                Cause::AccessDenied,
                "User: x is not authorized to perform: secretsmanager:GetSecretValue",
                "may not read it",
                "GitCredentialsSecretArns",
            ),
            (
                "ThrottlingException",
                Cause::Throttling,
                "Rate exceeded",
                "GetSecretValue failed",
                "run doctor again",
            ),
        ];
        for (code, cause, message, says, fixes) in cases {
            let described = Described {
                cause,
                code: Some(code.into()),
                text: message.into(),
            };
            let (detail, fix) = unreadable(arn, role, &described);
            assert!(detail.contains(says), "{code}: {detail}");
            assert!(fix.contains(fixes), "{code}: {fix}");
        }
    }
}
