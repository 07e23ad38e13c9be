//! The function itself: found (by name, or by the tags its stack put on it), in a state
//! Lambda runs, with an environment its cold start accepts, and a `bootstrap` built for the
//! architecture Lambda runs it on.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use argocd_ecr_updater::aws::aws_error::describe;
use argocd_ecr_updater::config::Config;

use super::{Checklist, Clients, Function, arn_part, failed_call};

/// The function CloudFormation made for `stack`: the one tagged with the stack's name and the
/// template's logical ID.
pub(super) async fn stack_function(
    clients: &Clients,
    stack: &str,
    list: &mut Checklist,
) -> Option<String> {
    use aws_sdk_resourcegroupstagging::types::TagFilter;
    let found = clients
        .tagging
        .get_resources()
        .tag_filters(
            TagFilter::builder()
                .key("aws:cloudformation:stack-name")
                .values(stack)
                .build(),
        )
        .tag_filters(
            TagFilter::builder()
                .key("aws:cloudformation:logical-id")
                .values("Function")
                .build(),
        )
        .resource_type_filters("lambda:function")
        .send()
        .await;
    let arns: Vec<String> = match found {
        Ok(out) => out
            .resource_tag_mapping_list()
            .iter()
            .filter_map(|m| m.resource_arn())
            .map(str::to_string)
            .collect(),
        Err(e) => {
            let (detail, fix) = failed_call("GetResources", "tag:GetResources", &describe(&e));
            list.add(
                "function",
                format!("stack {stack}"),
                Err((
                    detail,
                    format!("{fix}; or pass --function with the stack's FunctionName output"),
                )),
            );
            return None;
        }
    };
    match arns.as_slice() {
        [arn] => Some(arn.clone()),
        [] => {
            list.add("function", format!("stack {stack}"), Err(("no function of this stack in this region".into(),
                "check the stack name and --region, or pass --function with the stack's FunctionName output".into())));
            None
        }
        _ => {
            list.add(
                "function",
                format!("stack {stack}"),
                Err((
                    format!("{} functions match", arns.len()),
                    "pass --function with the stack's FunctionName output".into(),
                )),
            );
            None
        }
    }
}

pub(super) async fn function(
    clients: &Clients,
    name: &str,
    list: &mut Checklist,
) -> Option<Function> {
    let found = clients
        .lambda
        .get_function_configuration()
        .function_name(name)
        .send()
        .await;
    let configuration = match found {
        Ok(c) => c,
        Err(e) => {
            list.add("function", name, Err((
                format!("cannot read it: {}", describe(&e)),
                "pass the stack's FunctionName output as --function, in the stack's region (--region); you need lambda:GetFunctionConfiguration".into(),
            )));
            return None;
        }
    };
    let arn = configuration.function_arn().unwrap_or_default().to_string();
    let found = if arn == name {
        "found".to_string()
    } else {
        format!("found {arn}")
    };
    list.add("function", name, Ok(found));
    list.add(
        "function",
        "state",
        state(
            configuration.state().map(|s| s.as_str()),
            configuration.state_reason(),
            configuration.last_update_status().map(|s| s.as_str()),
            configuration.last_update_status_reason(),
        ),
    );
    let variables: BTreeMap<String, String> = configuration
        .environment()
        .and_then(|e| e.variables())
        .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let region = arn_part(&arn, 3);
    let parsed = Config::from_lookup(|name| match name {
        "AWS_REGION" => Some(region.clone()),
        other => variables.get(other).cloned(),
    });
    let config = match parsed {
        Ok(config) => {
            list.add(
                "function",
                "environment",
                Ok(format!(
                    "the function's configuration reader accepts it ({} cluster(s))",
                    config.clusters.len()
                )),
            );
            Some(config)
        }
        Err(e) => {
            list.add(
                "function",
                "environment",
                Err((
                    format!("the function would stop at its cold start: {e}"),
                    "fix the named variable in the stack's parameters and redeploy".into(),
                )),
            );
            None
        }
    };
    let architecture = configuration
        .architectures()
        .first()
        .map_or("x86_64", |a| a.as_str())
        .to_string();
    binary(clients, name, &architecture, list).await;
    Some(Function {
        account: arn_part(&arn, 4),
        name: configuration.function_name().unwrap_or(name).to_string(),
        role: configuration.role().unwrap_or_default().to_string(),
        vpc: configuration
            .vpc_config()
            .and_then(|v| v.vpc_id())
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        subnets: configuration
            .vpc_config()
            .map(|v| v.subnet_ids().to_vec())
            .unwrap_or_default(),
        security_groups: configuration
            .vpc_config()
            .map(|v| v.security_group_ids().to_vec())
            .unwrap_or_default(),
        arn,
        region,
        config,
    })
}

/// Whether Lambda runs the function: `State` (a VPC function whose network interfaces could
/// not be made is `Failed`, one unused for weeks `Inactive`) and the last update's status.
fn state(
    state: Option<&str>,
    reason: Option<&str>,
    update: Option<&str>,
    update_reason: Option<&str>,
) -> Result<String, super::Failure> {
    let reason = reason.unwrap_or("no reason given");
    match (state.unwrap_or("Active"), update.unwrap_or("Successful")) {
        ("Active", "Successful") => Ok("Active; the last update succeeded".into()),
        ("Active", "InProgress") | ("Pending", _) => Ok(format!(
            "{}: Lambda is still applying a change; run doctor again in a minute",
            state.unwrap_or("Active")
        )),
        ("Inactive", _) => Ok(format!(
            "Inactive ({reason}): Lambda reclaimed its resources after weeks unused; the next event wakes it, taking a few seconds longer"
        )),
        ("Active", failed) => Err((
            format!(
                "the last update {failed}: {}",
                update_reason.unwrap_or("no reason given")
            ),
            "fix what the reason names (a subnet without free addresses, a security group that is gone, a role Lambda may not assume) and redeploy".into(),
        )),
        (other, _) => Err((
            format!("{other}: {reason}; Lambda does not run it"),
            "fix what the reason names (for a VPC function: subnets with free addresses, security groups that exist, the role's ec2:CreateNetworkInterface) and redeploy".into(),
        )),
    }
}

/// Most a deployment package may be; Lambda's own limit for an unzipped function is 250 MB.
const PACKAGE_LIMIT: u64 = 256 * 1024 * 1024;

/// The ELF machine of `bootstrap` in the package against the architecture Lambda runs it on.
async fn binary(clients: &Clients, function: &str, architecture: &str, list: &mut Checklist) {
    let name = format!("binary for {architecture}");
    let location = match clients
        .lambda
        .get_function()
        .function_name(function)
        .send()
        .await
    {
        Ok(f) => f.code().and_then(|c| c.location()).map(str::to_string),
        Err(e) => {
            list.skip("function", name, format!("cannot read the package location: {}", describe(&e)),
                "aws lambda get-function --function-name <name> --query Code.Location, then `file bootstrap` in the zip".into());
            return;
        }
    };
    let Some(location) = location else {
        list.skip(
            "function",
            name,
            "the function is not a zip package".into(),
            "check the image's platform".into(),
        );
        return;
    };
    match bootstrap_architecture(&location).await {
        Ok(built) => {
            let result = if built == architecture {
                Ok(format!("bootstrap is built for {built}"))
            } else {
                Err((
                    format!("bootstrap is built for {built} but Lambda runs it on {architecture}: every invocation fails with Runtime.InvalidEntrypoint"),
                    format!("build for {architecture} (template.yaml's Architectures, then sam build && sam deploy; or cargo lambda build --release --{}) ", if architecture == "arm64" { "arm64" } else { "x86-64" }),
                ))
            };
            list.add("function", name, result);
        }
        // The presigned URL carries credentials in its query: it is never printed.
        Err(why) => list.skip("function", name, format!("cannot read the package: {why}"),
            "aws lambda get-function --function-name <name> --query Code.Location, then `file bootstrap` in the zip".into()),
    }
}

/// An error and every source below it (`error sending request` alone says nothing; the DNS,
/// TLS or connection cause under it does). The URL is stripped before: it is presigned.
fn cause_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

async fn bootstrap_architecture(location: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| cause_chain(&e))?;
    let response = client
        .get(location)
        .send()
        .await
        .map_err(|e| format!("the download failed: {}", cause_chain(&e.without_url())))?;
    if !response.status().is_success() {
        return Err(format!("the download answered {}", response.status()));
    }
    if response.content_length().is_some_and(|n| n > PACKAGE_LIMIT) {
        return Err("the package is larger than any Lambda package".into());
    }
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("the download broke off: {}", cause_chain(&e.without_url())))?;
    if bytes.len() as u64 > PACKAGE_LIMIT {
        return Err("the package is larger than any Lambda package".into());
    }
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| format!("not a zip: {e}"))?;
    let entry = archive
        .by_name("bootstrap")
        .map_err(|_| "the zip holds no bootstrap".to_string())?;
    let mut header = [0u8; 20];
    entry
        .take(20)
        .read_exact(&mut header)
        .map_err(|_| "bootstrap is shorter than an ELF header".to_string())?;
    elf_architecture(&header).map(str::to_string)
}

/// The Lambda architecture an ELF header's `e_machine` is built for.
fn elf_architecture(header: &[u8; 20]) -> Result<&'static str, String> {
    if &header[..4] != b"\x7fELF" {
        return Err("bootstrap is not an ELF executable".into());
    }
    // e_machine, little-endian as both Lambda architectures are.
    match u16::from_le_bytes([header[18], header[19]]) {
        183 => Ok("arm64"),
        62 => Ok("x86_64"),
        other => Ok(if other == 0 {
            "no machine"
        } else {
            "an unknown machine"
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elf_header_names_the_architecture_it_was_built_for() {
        let header = |machine: u16| {
            let mut h = [0u8; 20];
            h[..4].copy_from_slice(b"\x7fELF");
            h[18..20].copy_from_slice(&machine.to_le_bytes());
            h
        };
        assert_eq!(elf_architecture(&header(183)), Ok("arm64"));
        assert_eq!(elf_architecture(&header(62)), Ok("x86_64"));
        assert_eq!(elf_architecture(&header(40)), Ok("an unknown machine"));
        let mut script = header(62);
        script[..4].copy_from_slice(b"#!/b");
        assert!(elf_architecture(&script).is_err());
    }

    #[test]
    fn the_functions_state_passes_only_when_lambda_runs_it() {
        // (State, LastUpdateStatus, passes, what the detail says)
        let cases = [
            (None, None, true, "Active"),
            (Some("Active"), Some("Successful"), true, "Active"),
            (Some("Pending"), None, true, "still applying"),
            (Some("Inactive"), None, true, "next event wakes it"),
            (Some("Failed"), None, false, "Lambda does not run it"),
            (
                Some("Active"),
                Some("Failed"),
                false,
                "the last update Failed",
            ),
        ];
        for (current, update, passes, says) in cases {
            let result = state(current, Some("the reason"), update, Some("why"));
            assert_eq!(result.is_ok(), passes, "{current:?} {update:?}: {result:?}");
            let text = match &result {
                Ok(detail) => detail,
                Err((detail, _)) => detail,
            };
            assert!(text.contains(says), "{current:?} {update:?}: {text}");
        }
    }

    #[test]
    fn a_download_error_keeps_every_cause_below_it() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|l| l as _)
            }
        }
        let error = Layer(
            "error sending request",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer("dns error: failed to lookup address", None))),
            ))),
        );
        assert_eq!(
            cause_chain(&error),
            "error sending request: client error (Connect): dns error: failed to lookup address"
        );
    }
}
