//! Who the alarms page: the topic the stack's alarms notify exists and has a confirmed
//! subscription. An email subscription waits for its link to be clicked, and until then SNS
//! delivers nothing to it: alarms fire into a topic nobody hears.
//! Endpoints are never printed: an HTTPS endpoint (a paging service's) carries its key.

use argocd_ecr_updater::aws::aws_error::describe;

use super::{Checklist, Clients, Failure, failed_call};

const AREA: &str = "alarms";
const LINE: &str = "alarm topic";

pub(super) async fn alarm_topic(clients: &Clients, topic: Option<&str>, list: &mut Checklist) {
    let Some(topic) = topic else {
        list.skip(
            AREA,
            LINE,
            "no --alarm-topic given: whether anyone is paged is not checked".into(),
            "argocd-ecr-updater-cli doctor --alarm-topic <the stack's AlarmTopicArn> (an empty AlarmTopicArn pages nobody: the AlarmNotifications output says so)".into(),
        );
        return;
    };
    let mut subscriptions = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let page = clients
            .sns
            .list_subscriptions_by_topic()
            .topic_arn(topic)
            .set_next_token(next.take())
            .send()
            .await;
        match page {
            Ok(out) => {
                subscriptions.extend(out.subscriptions().iter().map(|s| {
                    (
                        s.protocol().unwrap_or("unknown").to_string(),
                        s.subscription_arn().unwrap_or_default() == "PendingConfirmation",
                    )
                }));
                match out.next_token() {
                    Some(token) if !token.is_empty() => next = Some(token.to_string()),
                    _ => break,
                }
            }
            Err(e) => {
                let described = describe(&e);
                let result = if described.code.as_deref() == Some("NotFound") {
                    Err((
                        format!("{topic} does not exist: every alarm's notification is lost"),
                        "create the topic and subscribe to it, or deploy with AlarmTopicArn naming one that exists".into(),
                    ))
                } else {
                    Err(failed_call(
                        "ListSubscriptionsByTopic",
                        "sns:ListSubscriptionsByTopic",
                        &described,
                    ))
                };
                list.add(AREA, LINE, result);
                return;
            }
        }
    }
    match verdict(topic, &subscriptions) {
        Verdict::Paged(detail) => list.add(AREA, LINE, Ok(detail)),
        Verdict::Unheard(failure) => list.add(AREA, LINE, Err(failure)),
        Verdict::Partly(risk, advice) => list.warn(AREA, LINE, risk, advice),
    }
}

enum Verdict {
    Paged(String),
    Unheard(Failure),
    Partly(String, String),
}

/// `subscriptions`: (protocol, awaiting confirmation).
fn verdict(topic: &str, subscriptions: &[(String, bool)]) -> Verdict {
    let protocols = |pending: bool| -> Vec<&str> {
        subscriptions
            .iter()
            .filter(|(_, p)| *p == pending)
            .map(|(protocol, _)| protocol.as_str())
            .collect()
    };
    let (confirmed, pending) = (protocols(false), protocols(true));
    let subscribe = format!(
        "aws sns subscribe --topic-arn {topic} --protocol email --notification-endpoint <address>, then click the link SNS mails; list them with aws sns list-subscriptions-by-topic --topic-arn {topic}"
    );
    match (confirmed.is_empty(), pending.is_empty()) {
        (true, true) => Verdict::Unheard((
            "no subscription: alarms fire and nobody is paged".into(),
            subscribe,
        )),
        (true, false) => Verdict::Unheard((
            format!(
                "{} subscription(s) ({}) still await confirmation, none is confirmed: SNS delivers nothing to them, so nobody is paged",
                pending.len(),
                pending.join(", ")
            ),
            format!(
                "confirm them (the link in the mail SNS sent; it expires after three days: subscribe again if it has), or {subscribe}"
            ),
        )),
        (false, false) => Verdict::Partly(
            format!(
                "{} confirmed ({}), {} awaiting confirmation ({}): those get nothing",
                confirmed.len(),
                confirmed.join(", "),
                pending.len(),
                pending.join(", ")
            ),
            "confirm them, or remove them: aws sns list-subscriptions-by-topic".into(),
        ),
        (false, true) => Verdict::Paged(format!(
            "{} confirmed subscription(s): {}",
            confirmed.len(),
            confirmed.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarms_page_someone_only_through_a_confirmed_subscription() {
        let sub = |protocol: &str, pending: bool| (protocol.to_string(), pending);
        // (subscriptions, paged, partly)
        let cases = [
            (vec![], false, false),
            (vec![sub("email", true)], false, false),
            (vec![sub("email", true), sub("email", true)], false, false),
            (vec![sub("email", false)], true, false),
            (vec![sub("https", false), sub("email", true)], true, true),
            (vec![sub("sqs", false), sub("lambda", false)], true, false),
        ];
        for (subscriptions, paged, partly) in cases {
            let verdict = verdict("arn:aws:sns:r:1:t", &subscriptions);
            let (is_paged, is_partly) = match &verdict {
                Verdict::Paged(_) => (true, false),
                Verdict::Partly(..) => (true, true),
                Verdict::Unheard(_) => (false, false),
            };
            assert_eq!((is_paged, is_partly), (paged, partly), "{subscriptions:?}");
        }
    }
}
