//! Where failed events end: the function's on-failure destination (a queue, topic, function
//! or event bus, each checked as what it is) and every dead-letter queue the rules and the
//! destination name, each looked up once: it exists, and how many events wait in it, and how
//! old the oldest is.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use argocd_ecr_updater::aws::aws_error::{Cause, Described, describe};

use super::{Checklist, Clients, Failure, Function, arn_part, failed_call};

/// What `GetQueueUrl` says of a queue ARN.
#[derive(Debug, Clone)]
pub(super) enum QueueState {
    Exists(String),
    Gone,
    Unreadable(Described),
}

/// Queues looked up so far, by ARN, and who names each.
#[derive(Default)]
pub(super) struct QueueLookup {
    states: BTreeMap<String, QueueState>,
    policies: BTreeMap<String, QueuePolicy>,
    named_by: BTreeMap<String, Vec<String>>,
}

/// A queue's resource policy.
#[derive(Clone)]
pub(super) enum QueuePolicy {
    Document(serde_json::Value),
    /// The queue has none: only principals of its own account with IAM grants may send.
    None,
    Unreadable(Described),
}

impl QueueLookup {
    /// The policy of the queue `arn` (which exists), read once per run.
    pub(super) async fn policy(&mut self, clients: &Clients, arn: &str) -> QueuePolicy {
        use aws_sdk_sqs::types::QueueAttributeName;
        if let Some(known) = self.policies.get(arn) {
            return known.clone();
        }
        let Some(QueueState::Exists(url)) = self.states.get(arn) else {
            return QueuePolicy::None;
        };
        let read = clients
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::Policy)
            .send()
            .await;
        let policy = match read {
            Ok(out) => match out
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::Policy))
            {
                Some(text) => QueuePolicy::Document(serde_json::from_str(text).unwrap_or_default()),
                None => QueuePolicy::None,
            },
            Err(e) => QueuePolicy::Unreadable(describe(&e)),
        };
        self.policies.insert(arn.to_string(), policy.clone());
        policy
    }

    /// The queue `arn` names, asked once per run; `by` is who names it.
    pub(super) async fn state(&mut self, clients: &Clients, arn: &str, by: &str) -> QueueState {
        self.named_by
            .entry(arn.to_string())
            .or_default()
            .push(by.to_string());
        if let Some(known) = self.states.get(arn) {
            return known.clone();
        }
        let found = clients
            .sqs
            .get_queue_url()
            .queue_name(arn_part(arn, 5))
            .queue_owner_aws_account_id(arn_part(arn, 4))
            .send()
            .await;
        let state = match found {
            Ok(out) => QueueState::Exists(out.queue_url().unwrap_or_default().to_string()),
            Err(e) => {
                let described = describe(&e);
                let missing = described.code.as_deref().is_some_and(|c| {
                    c.contains("NonExistentQueue") || c.contains("QueueDoesNotExist")
                });
                if missing {
                    QueueState::Gone
                } else {
                    QueueState::Unreadable(described)
                }
            }
        };
        self.states.insert(arn.to_string(), state.clone());
        state
    }
}

/// How to bring back a queue deleted outside the stack's tool.
fn recreate(queue: &str) -> String {
    format!(
        "recreate it under the same name, so everything that names it holds again: aws sqs create-queue --queue-name {queue} --attributes MessageRetentionPeriod=1209600,SqsManagedSseEnabled=true; then put back the stack's queue policy (the DeadLetterQueuePolicy document in `aws cloudformation get-template`) with aws sqs set-queue-attributes. An unchanged `sam deploy` does not recreate a resource deleted outside CloudFormation; with Terraform, `terraform apply` recreates both"
    )
}

/// SQS deletes a message after 14 days; the template alarms at 7.
const OLDEST_ALLOWED: Duration = Duration::from_secs(7 * 24 * 3600);

pub(super) async fn dead_letters(
    clients: &Clients,
    function: &Function,
    queues: &mut QueueLookup,
    list: &mut Checklist,
) {
    destination(clients, function, queues, list).await;
    let named: Vec<(String, Vec<String>)> = queues
        .named_by
        .iter()
        .map(|(arn, by)| (arn.clone(), by.clone()))
        .collect();
    for (arn, by) in named {
        let name = arn_part(&arn, 5);
        match queues.states.get(&arn).cloned() {
            Some(QueueState::Exists(url)) => depth(clients, function, &name, &url, list).await,
            Some(QueueState::Gone) => list.add(
                "dead-letter queue",
                &name,
                Err((
                    format!(
                        "gone, while {} name(s) it: what they would park is lost",
                        by.len()
                    ),
                    recreate(&name),
                )),
            ),
            Some(QueueState::Unreadable(described)) => list.add(
                "dead-letter queue",
                &name,
                Err(failed_call("GetQueueUrl", "sqs:GetQueueUrl", &described)),
            ),
            None => {}
        }
    }
}

/// The on-failure destination of asynchronous invocations, checked as the kind of thing its
/// ARN names.
async fn destination(
    clients: &Clients,
    function: &Function,
    queues: &mut QueueLookup,
    list: &mut Checklist,
) {
    let name = "on-failure destination";
    let put_back = format!(
        "aws lambda put-function-event-invoke-config --function-name {} --destination-config 'OnFailure={{Destination=<the stack's DeadLetterQueue ARN>}}' (an unchanged sam deploy does not restore a setting changed outside CloudFormation; terraform apply does)",
        function.name
    );
    let config = clients
        .lambda
        .get_function_event_invoke_config()
        .function_name(&function.arn)
        .send()
        .await;
    let destination = match config {
        Ok(c) => c
            .destination_config()
            .and_then(|d| d.on_failure())
            .and_then(|f| f.destination())
            .map(str::to_string),
        Err(e) => {
            let described = describe(&e);
            let absent = described.code.as_deref() == Some("ResourceNotFoundException")
                && described.cause != Cause::AccessDenied;
            if !absent {
                list.add(
                    "dead-letter queue",
                    name,
                    Err(failed_call(
                        "GetFunctionEventInvokeConfig",
                        "lambda:GetFunctionEventInvokeConfig",
                        &described,
                    )),
                );
                return;
            }
            None
        }
    };
    let Some(arn) = destination else {
        list.add(
            "dead-letter queue",
            name,
            Err((
                "the function has no on-failure destination: an event that fails its three tries is dropped".into(),
                put_back,
            )),
        );
        return;
    };
    let result = destination_state(clients, queues, &arn, put_back).await;
    list.add("dead-letter queue", name, result);
}

/// What the on-failure destination `arn` is and whether it is there: a queue that parks
/// failed events, or what else it sends them to.
async fn destination_state(
    clients: &Clients,
    queues: &mut QueueLookup,
    arn: &str,
    put_back: String,
) -> Result<String, Failure> {
    let target = arn_part(arn, 6)
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    match arn_part(arn, 2).as_str() {
        "sqs" => {
            let queue = arn_part(arn, 5);
            match queues
                .state(clients, arn, "the on-failure destination")
                .await
            {
                QueueState::Exists(_) => Ok(format!("parks failed events in the queue {queue}")),
                QueueState::Gone => Err((
                    format!(
                        "names the queue {queue}, which is gone: events that fail their three tries are dropped"
                    ),
                    recreate(&queue),
                )),
                QueueState::Unreadable(described) => {
                    Err(failed_call("GetQueueUrl", "sqs:GetQueueUrl", &described))
                }
            }
        }
        "sns" => {
            let topic = arn_part(arn, 5);
            let found = clients
                .sns
                .get_topic_attributes()
                .topic_arn(arn)
                .send()
                .await;
            not_a_queue(
                found.map(drop).map_err(|e| describe(&e)),
                &Destination {
                    what: format!("the SNS topic {topic}"),
                    sends: ("publishes failed events to", ""),
                    missing: "NotFound",
                    call: ("GetTopicAttributes", "sns:GetTopicAttributes"),
                },
                put_back,
            )
        }
        "lambda" => {
            let found = clients
                .lambda
                .get_function_configuration()
                .function_name(arn)
                .send()
                .await;
            not_a_queue(
                found.map(drop).map_err(|e| describe(&e)),
                &Destination {
                    what: format!("the function {target}"),
                    sends: ("invokes", " with failed events"),
                    missing: "ResourceNotFoundException",
                    call: (
                        "GetFunctionConfiguration",
                        "lambda:GetFunctionConfiguration",
                    ),
                },
                put_back,
            )
        }
        "events" => {
            let found = clients.events.describe_event_bus().name(arn).send().await;
            not_a_queue(
                found.map(drop).map_err(|e| describe(&e)),
                &Destination {
                    what: format!("the event bus {target}"),
                    sends: ("sends failed events to", ""),
                    missing: "ResourceNotFoundException",
                    call: ("DescribeEventBus", "events:DescribeEventBus"),
                },
                put_back,
            )
        }
        other => Err((
            format!("names {arn}, a {other} resource Lambda cannot send failed events to"),
            put_back,
        )),
    }
}

/// An on-failure destination that is not a queue, as its describe call found it.
struct Destination {
    /// "the SNS topic …", "the function …", "the event bus …".
    what: String,
    /// What Lambda does with a failed event there, said before and after `what`.
    sends: (&'static str, &'static str),
    /// The error code that says it is gone.
    missing: &'static str,
    /// The call that read it, and its IAM action.
    call: (&'static str, &'static str),
}

/// It exists (failed events go there, and `redrive` cannot replay them), it is gone, or the
/// call that looked failed.
fn not_a_queue(
    found: Result<(), Described>,
    destination: &Destination,
    put_back: String,
) -> Result<String, Failure> {
    let Destination {
        what,
        sends: (before, after),
        missing,
        call: (call, action),
    } = destination;
    let unreplayable = "they are not parked in a queue, so `redrive` cannot replay them";
    match found {
        Ok(()) => Ok(format!("{before} {what}{after}: {unreplayable}")),
        Err(d) if d.code.as_deref() == Some(*missing) => Err((
            format!("names {what}, which is gone: events that fail their three tries are dropped"),
            put_back,
        )),
        Err(d) => Err(failed_call(call, action, &d)),
    }
}

/// How many events wait in a queue that exists, and how old the oldest is.
async fn depth(
    clients: &Clients,
    function: &Function,
    name: &str,
    url: &str,
    list: &mut Checklist,
) {
    use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
    let attributes = clients
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await;
    let depth = match attributes {
        Ok(out) => out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0),
        Err(e) => {
            list.add(
                "dead-letter queue",
                name,
                Err(failed_call(
                    "GetQueueAttributes",
                    "sqs:GetQueueAttributes",
                    &describe(&e),
                )),
            );
            return;
        }
    };
    if depth == 0 {
        list.add("dead-letter queue", name, Ok("empty".into()));
        return;
    }
    let redrive = format!(
        "argocd-ecr-updater-cli redrive --queue {url} --function {} (a dry run that lists them; add --apply once the cause is fixed to hand them to the function again)",
        function.name
    );
    // A look at up to ten messages (visibility 0: they stay where they are) for the oldest
    // one's age; SQS has no attribute for it.
    let sampled = clients
        .sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
        .send()
        .await;
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let oldest = sampled
        .ok()
        .and_then(|out| {
            out.messages()
                .iter()
                .filter_map(|m| {
                    m.attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                        .and_then(|t| t.parse::<u64>().ok())
                })
                .min()
        })
        .map(|sent| Duration::from_millis(now_ms.saturating_sub(sent)));
    let age = oldest.map_or(String::new(), |age| {
        format!(", the oldest seen {} day(s) old", age.as_secs() / 86_400)
    });
    let expiring = oldest.is_some_and(|age| age >= OLDEST_ALLOWED);
    let detail = format!(
        "{depth} event(s) parked{age}{}",
        if expiring {
            "; SQS deletes them at 14 days"
        } else {
            ""
        }
    );
    list.add("dead-letter queue", name, Err((detail, redrive)));
}
