//! The sweep's fan-out: the sweep queue admits redrives from no queue (its messages are
//! trusted as the function's own), an event source mapping reads it into the function,
//! enabled, processing without a problem, and with room to run: `MaximumConcurrency` below
//! the function's reserved concurrency (else pushes wait behind shards), or within the
//! account's unreserved concurrency.

use argocd_ecr_updater::aws::aws_error::describe;
use argocd_ecr_updater::config::Config;

use super::{Checklist, Clients, Failure, Function, failed_call};

const AREA: &str = "sweep";

pub(super) async fn sweep(
    clients: &Clients,
    function: &Function,
    config: &Config,
    list: &mut Checklist,
) {
    let Some(queue) = &config.sweep.queue_arn else {
        list.add(
            AREA,
            "event source mapping",
            Ok("no sweep queue (SWEEP_QUEUE_ARN): every sweep runs in the invocation that lists it".into()),
        );
        return;
    };
    if let Some(url) = &config.sweep.queue_url {
        redrive_allowed(clients, url, list).await;
    }
    // By name: AWS takes a name or an ARN here, and moto only a name.
    let mappings = clients
        .lambda
        .list_event_source_mappings()
        .function_name(&function.name)
        .send()
        .await;
    let mappings = match mappings {
        Ok(out) => out.event_source_mappings().to_vec(),
        Err(e) => {
            list.add(
                AREA,
                "event source mapping",
                Err(failed_call(
                    "ListEventSourceMappings",
                    "lambda:ListEventSourceMappings",
                    &describe(&e),
                )),
            );
            return;
        }
    };
    let Some(mapping) = mappings
        .iter()
        .find(|m| m.event_source_arn() == Some(queue.as_str()))
    else {
        list.add(AREA, "event source mapping", Err((
            format!("nothing reads {queue} into the function: a sweep of SWEEP_FAN_OUT_AT ({}) Applications or more sends shards that never run", config.sweep.fan_out_at),
            format!(
                "aws lambda create-event-source-mapping --function-name {} --event-source-arn {queue} --batch-size 1 --function-response-types ReportBatchItemFailures --scaling-config MaximumConcurrency={} (an unchanged sam deploy does not restore one deleted outside CloudFormation; terraform apply does)",
                function.name, config.sweep.concurrency
            ),
        )));
        return;
    };
    let uuid = mapping.uuid().unwrap_or_default();
    list.add(
        AREA,
        "event source mapping",
        state(
            mapping.state(),
            mapping.state_transition_reason(),
            mapping.last_processing_result(),
            uuid,
        ),
    );
    let maximum = mapping
        .scaling_config()
        .and_then(|s| s.maximum_concurrency())
        .unwrap_or(1000);
    let reserved = clients
        .lambda
        .get_function_concurrency()
        .function_name(&function.name)
        .send()
        .await;
    let reserved = match reserved {
        Ok(out) => out.reserved_concurrent_executions(),
        Err(e) => {
            list.skip(
                AREA,
                "concurrency",
                format!(
                    "cannot read the function's reserved concurrency: {}",
                    describe(&e)
                ),
                format!(
                    "aws lambda get-function-concurrency --function-name {}",
                    function.name
                ),
            );
            return;
        }
    };
    if reserved.is_some() {
        list.add(AREA, "concurrency", concurrency(maximum, reserved, None));
        return;
    }
    match clients.lambda.get_account_settings().send().await {
        Ok(out) => {
            let unreserved = out
                .account_limit()
                .and_then(|l| l.unreserved_concurrent_executions());
            list.add(AREA, "concurrency", concurrency(maximum, None, unreserved));
        }
        Err(e) => list.skip(
            AREA,
            "concurrency",
            format!(
                "cannot read the account's unreserved concurrency: {}",
                describe(&e)
            ),
            "aws lambda get-account-settings --query AccountLimit.UnreservedConcurrentExecutions"
                .into(),
        ),
    }
}

/// The sweep queue's redrive allow policy, which must be `denyAll`: SQS's default lets any
/// queue of the account and region name it as a dead-letter queue, and what such a queue
/// redrives here is no `SendMessage` call (the queue policy's deny does not stop it) and comes
/// with the sweep queue's own ARN, which the function trusts as a shard or a rollout check.
async fn redrive_allowed(clients: &Clients, url: &str, list: &mut Checklist) {
    use aws_sdk_sqs::types::QueueAttributeName;
    let read = clients
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::RedriveAllowPolicy)
        .send()
        .await;
    match read {
        Ok(out) => {
            let policy = out
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::RedriveAllowPolicy))
                .map(String::as_str);
            match redrive_verdict(policy, url) {
                Ok(detail) => list.add(AREA, "sweep queue redrive", Ok(detail)),
                Err((risk, fix)) => list.warn(AREA, "sweep queue redrive", risk, fix),
            }
        }
        Err(e) => list.add(
            AREA,
            "sweep queue redrive",
            Err(failed_call(
                "GetQueueAttributes",
                "sqs:GetQueueAttributes",
                &describe(&e),
            )),
        ),
    }
}

/// `denyAll` passes; anything else (no policy is SQS's `allowAll`) is a risk, with the call
/// that removes it.
fn redrive_verdict(policy: Option<&str>, url: &str) -> Result<String, Failure> {
    let permission = policy
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|p| p["redrivePermission"].as_str().map(str::to_string));
    let fix = format!(
        "aws sqs set-queue-attributes --queue-url {url} --attributes '{{\"RedriveAllowPolicy\":\"{{\\\"redrivePermission\\\":\\\"denyAll\\\"}}\"}}' (the template and the Terraform module set it: a deploy of the current version puts it back)"
    );
    match permission.as_deref() {
        Some("denyAll") => Ok("no queue may redrive into it (denyAll)".into()),
        Some(other) => Err((
            format!(
                "its redrive allow policy is {other}: a queue it admits can redrive messages into it past the queue policy, and the function trusts them as shards and rollout checks"
            ),
            fix,
        )),
        None => Err((
            "it has no redrive allow policy, so SQS allows every queue of the account and region to redrive into it: such messages pass the queue policy, and the function trusts them as shards and rollout checks".into(),
            fix,
        )),
    }
}

/// Whether the mapping delivers shards: enabled (or becoming so), and no problem reported.
fn state(
    state: Option<&str>,
    reason: Option<&str>,
    last: Option<&str>,
    uuid: &str,
) -> Result<String, Failure> {
    let reason = reason.unwrap_or("no reason given");
    match state.unwrap_or("Enabled") {
        "Enabled" | "Creating" | "Enabling" | "Updating" => {}
        "Disabled" | "Disabling" => {
            return Err((
                format!(
                    "{}: shards wait in the sweep queue and none runs ({reason})",
                    state.unwrap_or_default()
                ),
                format!("aws lambda update-event-source-mapping --uuid {uuid} --enabled"),
            ));
        }
        other => {
            return Err((
                format!("{other}: {reason}"),
                "fix what the reason names, then redeploy".into(),
            ));
        }
    }
    match last {
        Some(result) if result.starts_with("PROBLEM") => Err((
            format!("enabled, but Lambda reports {result}"),
            "fix what it names (the role's sqs:ReceiveMessage, the queue's key), then watch LastProcessingResult: aws lambda get-event-source-mapping --uuid <uuid>".replace("<uuid>", uuid),
        )),
        Some(result) => Ok(format!("{}; last processing: {result}", state.unwrap_or("Enabled"))),
        None => Ok(state.unwrap_or("Enabled").to_string()),
    }
}

/// Whether shards at `maximum` at once leave room for pushes: below the function's reserved
/// concurrency, or within the account's unreserved concurrency.
fn concurrency(
    maximum: i32,
    reserved: Option<i32>,
    unreserved: Option<i32>,
) -> Result<String, Failure> {
    match (reserved, unreserved) {
        (Some(reserved), _) if reserved <= maximum => Err((
            format!(
                "reserved concurrency {reserved} is not above the mapping's MaximumConcurrency {maximum}: while a sweep runs, pushes wait behind shards (and are throttled)"
            ),
            format!(
                "raise ReservedConcurrency above SweepConcurrency ({maximum}), or lower SweepConcurrency"
            ),
        )),
        (Some(reserved), _) => Ok(format!(
            "shards take at most {maximum} of the function's {reserved}; pushes keep {}",
            reserved - maximum
        )),
        (None, Some(unreserved)) if unreserved < maximum => Err((
            format!(
                "the account's unreserved concurrency ({unreserved}) is below the mapping's MaximumConcurrency {maximum}: shards are throttled, and so is every other function"
            ),
            "raise the account's Lambda concurrency (Service Quotas), or lower SweepConcurrency"
                .into(),
        )),
        (None, Some(unreserved)) => Ok(format!(
            "no reserved concurrency; shards take at most {maximum} of the account's {unreserved} unreserved"
        )),
        (None, None) => Ok(format!(
            "no reserved concurrency; shards take at most {maximum}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_run_only_when_the_mapping_is_enabled_and_reports_no_problem() {
        // (State, LastProcessingResult, passes)
        let cases = [
            (Some("Enabled"), Some("OK"), true),
            (Some("Enabled"), Some("No records processed"), true),
            (Some("Creating"), None, true),
            (Some("Disabled"), None, false),
            (
                Some("Enabled"),
                Some("PROBLEM: Function call failed"),
                false,
            ),
            (Some("Failed"), None, false),
        ];
        for (current, last, passes) in cases {
            let result = state(current, Some("User action"), last, "u-1");
            assert_eq!(result.is_ok(), passes, "{current:?} {last:?}: {result:?}");
        }
        let (_, fix) = state(Some("Disabled"), None, None, "u-1").unwrap_err();
        assert_eq!(
            fix,
            "aws lambda update-event-source-mapping --uuid u-1 --enabled"
        );
    }

    #[test]
    fn only_a_sweep_queue_that_admits_no_redrive_passes() {
        let url = "https://sqs.ap-northeast-2.amazonaws.com/123456789012/q";
        assert!(redrive_verdict(Some(r#"{"redrivePermission":"denyAll"}"#), url).is_ok());
        for policy in [
            None,
            Some(r#"{"redrivePermission":"allowAll"}"#),
            Some(
                r#"{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:ap-northeast-2:123456789012:other"]}"#,
            ),
            Some("not json"),
        ] {
            let (_, fix) = redrive_verdict(policy, url).unwrap_err();
            assert!(
                fix.starts_with(&format!("aws sqs set-queue-attributes --queue-url {url} ")),
                "{fix}"
            );
            // The attribute value is JSON text inside JSON: what the shell hands the CLI parses.
            let attributes = fix.split('\'').nth(1).unwrap();
            let outer: serde_json::Value = serde_json::from_str(attributes).unwrap();
            let inner: serde_json::Value =
                serde_json::from_str(outer["RedriveAllowPolicy"].as_str().unwrap()).unwrap();
            assert_eq!(inner, serde_json::json!({"redrivePermission": "denyAll"}));
        }
    }

    #[test]
    fn shards_must_leave_room_for_pushes() {
        // (MaximumConcurrency, reserved, unreserved, passes)
        let cases = [
            (10, Some(20), None, true),
            (10, Some(10), None, false),
            (10, Some(5), None, false),
            (10, None, Some(990), true),
            (10, None, Some(5), false),
            (10, None, None, true),
        ];
        for (maximum, reserved, unreserved, passes) in cases {
            let result = concurrency(maximum, reserved, unreserved);
            assert_eq!(
                result.is_ok(),
                passes,
                "{maximum} {reserved:?} {unreserved:?}: {result:?}"
            );
        }
    }
}
