//! The SNS message of a report: its subject and its body in the format the topic's readers
//! take (the report as JSON for e-mail and other subscribers, or Amazon Q Developer's custom
//! notification for a chat channel). Built here, with the other reports; sent by the
//! pipeline, whose failure to send is never the invocation's.

use crate::config::managed::NotificationFormat;
use crate::report::Report;

/// What is published for one report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub subject: String,
    pub body: String,
}

/// The message for `report`, or `None` when nothing moved, failed or rolled out (a report
/// not worth a notification has no subject); `Err` when the body cannot be serialised.
pub fn message(
    report: &Report,
    format: NotificationFormat,
) -> Option<Result<Message, serde_json::Error>> {
    let subject = report.notification_subject()?;
    let body = match format {
        NotificationFormat::Report => serde_json::to_string_pretty(report),
        NotificationFormat::Chat => {
            serde_json::to_string(&crate::report::chat::custom_notification(report))
        }
    };
    Some(body.map(|body| Message { subject, body }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Action, Entry, InvocationKind};

    fn report(action: Option<Action>) -> Report {
        let mut report = Report::new(InvocationKind::Push, "event-1", false);
        if let Some(action) = action {
            report.entries.push(
                Entry::new(
                    "argocd",
                    "web",
                    Some("app"),
                    "1.dkr.ecr.r.amazonaws.com/web",
                )
                .with(action, "why"),
            );
        }
        report
    }

    #[test]
    fn a_report_is_published_only_when_something_moved_or_failed_in_the_format_asked() {
        let table = [
            ("nothing happened", None, NotificationFormat::Report, None),
            (
                "an update, as the report",
                Some(Action::Updated),
                NotificationFormat::Report,
                Some("\"entries\""),
            ),
            (
                "a failure, as a chat notification",
                Some(Action::Failed),
                NotificationFormat::Chat,
                Some("\"source\":\"custom\""),
            ),
            (
                "a skip alone",
                Some(Action::Skipped),
                NotificationFormat::Chat,
                None,
            ),
        ];
        for (case, action, format, body_part) in table {
            let got = message(&report(action), format).map(|m| m.unwrap());
            match (got, body_part) {
                (None, None) => {}
                (Some(message), Some(part)) => {
                    assert!(
                        message.subject.starts_with("argocd-ecr-updater: "),
                        "{case}"
                    );
                    assert!(message.body.contains(part), "{case}: {}", message.body);
                }
                (got, want) => panic!("{case}: {got:?}, expected a body with {want:?}"),
            }
        }
    }
}
