//! The report as a custom notification of Amazon Q Developer in chat applications (formerly
//! AWS Chatbot), which renders it in Slack, Microsoft Teams or Chime from the SNS topic it is
//! subscribed to, with no function in between (`NOTIFICATION_FORMAT=chat`).
//!
//! The shape is the documented event schema ("Custom notifications using Amazon Q Developer
//! in chat applications", docs.aws.amazon.com/chatbot/latest/adminguide/custom-notifs.html):
//! `version` "1.0", `source` "custom", `content` {`textType` "client-markdown", `title`,
//! `description`, `nextSteps`, `keywords`}, `metadata` {`threadId`, `summary`, `eventType`,
//! `relatedResources`, `additionalContext`}. An update and the outcome of its rollout share
//! a thread: both name the image and value written.

use serde_json::{Value, json};

use crate::report::{Action, Entry, Report, RolloutReport};

/// Lines of the description at most; the rest are counted.
const MAX_LINES: usize = 15;
/// Characters of one line (or next step) at most.
const MAX_LINE: usize = 400;

/// The custom notification of `report`, when it is worth one (as the SNS subject says).
pub fn custom_notification(report: &Report) -> Option<Value> {
    let title = report.notification_subject()?;
    let changed: Vec<&Entry> = report
        .entries
        .iter()
        .filter(|e| matches!(e.action, Action::Updated | Action::Failed))
        .collect();
    let outcomes: Vec<&RolloutReport> = report.rollouts.iter().filter(|r| r.is_outcome()).collect();
    let mut lines: Vec<String> = changed.iter().map(|e| entry_line(e)).collect();
    lines.extend(outcomes.iter().map(|r| rollout_line(r)));
    let next_steps: Vec<String> = changed
        .iter()
        .filter(|e| e.action == Action::Failed)
        .map(|e| {
            clipped(&format!(
                "{}/{}: {}",
                inert(&e.namespace),
                inert(&e.name),
                inert(&e.reason)
            ))
        })
        .chain(
            outcomes
                .iter()
                .filter(|r| r.state != "confirmed")
                .map(|r| format!("argocd app get {}/{}", inert(&r.namespace), inert(&r.name))),
        )
        .take(MAX_LINES)
        .collect();
    let resources: Vec<String> = changed
        .iter()
        .map(|e| format!("{}/{}", e.namespace, e.name))
        .chain(
            outcomes
                .iter()
                .map(|r| format!("{}/{}", r.namespace, r.name)),
        )
        .fold(Vec::new(), |mut all, r| {
            // As many as the description shows: a sweep's thousands would outgrow SNS's
            // 256 KB and the message would be lost whole.
            if all.len() < MAX_LINES && !all.contains(&r) {
                all.push(r);
            }
            all
        });
    let mut keywords = vec![
        "argocd-ecr-updater".to_string(),
        report.mode.as_str().to_string(),
    ];
    for outcome in &outcomes {
        let keyword = format!("rollout-{}", outcome.state);
        if !keywords.contains(&keyword) {
            keywords.push(keyword);
        }
    }
    let mut notification = json!({
        "version": "1.0",
        "source": "custom",
        "content": {
            "textType": "client-markdown",
            "title": title,
            "description": description(lines),
            "keywords": keywords,
        },
        "metadata": {
            "summary": title,
            "eventType": event_type(&changed, &outcomes),
            "relatedResources": resources,
            "additionalContext": {"mode": report.mode.as_str()},
        },
    });
    // The id is optional, and an event without one (an SQS batch) has none to give.
    if !report.event_id.is_empty() {
        notification["id"] = json!(report.event_id);
        notification["metadata"]["additionalContext"]["eventId"] = json!(report.event_id);
    }
    if !next_steps.is_empty() {
        notification["content"]["nextSteps"] = json!(next_steps);
    }
    if let Some(thread) = thread_id(report, &outcomes) {
        notification["metadata"]["threadId"] = json!(thread);
    }
    Some(notification)
}

/// One line per update or failure.
fn entry_line(e: &Entry) -> String {
    let from = code(e.from.as_deref().unwrap_or("-"));
    let to = code(e.to.as_deref().unwrap_or("-"));
    let (app, image) = (code(&format!("{}/{}", e.namespace, e.name)), code(&e.image));
    let reason = inert(&e.reason);
    let line = match e.action {
        Action::Failed => format!(":x: *failed* {app} {image}: {reason}"),
        _ => format!(":arrow_up: *updated* {app} {image} {from} → {to}: {reason}"),
    };
    clipped(&line)
}

/// One line per rollout outcome.
fn rollout_line(r: &RolloutReport) -> String {
    let mark = match r.state.as_str() {
        "confirmed" => ":white_check_mark:",
        "failed" => ":x:",
        _ => ":hourglass:",
    };
    let live = r
        .write_to_live_seconds
        .map(|s| format!(" (live {s:.0} s after the write)"))
        .unwrap_or_default();
    let images: Vec<String> = r.images.iter().map(|i| inert(i)).collect();
    clipped(&format!(
        "{mark} *rollout {}* {} {}{live}: {}",
        inert(&r.state),
        code(&format!("{}/{}", r.namespace, r.name)),
        images.join(", "),
        inert(&r.reason)
    ))
}

/// Text from outside the function (a reason quoting a Git host's or registry's error, an
/// annotation's value) made inert for Slack and Teams: no `<!channel>`, `<!here>` or
/// `<url|label>` (the `<`, `>` and `&` Slack reads as markup, escaped as it asks), no `@here`
/// or `@channel` (a zero-width space after `@`), no Markdown link (`](`).
fn inert(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('@', "@\u{200B}")
        .replace("](", "]\u{200B}(")
}

/// `text` as a code span: inert, and with no backtick to end the span early.
fn code(text: &str) -> String {
    format!("`{}`", inert(text).replace('`', "'"))
}

fn description(lines: Vec<String>) -> String {
    let more = lines.len().saturating_sub(MAX_LINES);
    let mut shown: Vec<String> = lines.into_iter().take(MAX_LINES).collect();
    if more > 0 {
        shown.push(format!(
            "…and {more} more: the function's log has every entry"
        ));
    }
    shown.join("\n")
}

fn event_type(changed: &[&Entry], outcomes: &[&RolloutReport]) -> &'static str {
    if changed.iter().any(|e| e.action == Action::Failed) {
        return "UpdateFailed";
    }
    if !changed.is_empty() {
        return "ImagesUpdated";
    }
    match outcomes.first().map(|r| r.state.as_str()) {
        Some("confirmed") => "RolloutConfirmed",
        Some("failed") => "RolloutFailed",
        _ => "RolloutTimedOut",
    }
}

/// The image and tag written: a push's own, or the first of a rollout's, without the digest
/// a pinned or digest write adds (`image:tag@sha256:…`), so an update and its rollout's
/// outcome share one thread.
fn thread_id(report: &Report, outcomes: &[&RolloutReport]) -> Option<String> {
    match (&report.image, &report.tag) {
        (Some(image), Some(tag)) => Some(format!("{image}:{tag}")),
        _ => outcomes
            .first()
            .and_then(|r| r.images.first())
            .map(|written| match written.split_once('@') {
                Some((tag, _)) => tag.to_string(),
                None => written.clone(),
            }),
    }
}

fn clipped(text: &str) -> String {
    match text.char_indices().nth(MAX_LINE) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::InvocationKind;

    fn push_report(actions: &[Action]) -> Report {
        let mut report = Report::new(InvocationKind::Push, "ev-1", false);
        report.image = Some("768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web".into());
        report.tag = Some("20250825-153012".into());
        for (i, action) in actions.iter().enumerate() {
            let mut entry =
                Entry::new("argocd", &format!("app-{i}"), None, "web").with(*action, "because");
            entry.from = Some("old".into());
            entry.to = Some("new".into());
            report.entries.push(entry);
        }
        report
    }

    fn rollout(state: &str) -> RolloutReport {
        RolloutReport {
            cluster: None,
            namespace: "argocd".into(),
            name: "app-0".into(),
            images: vec!["web:20250825-153012".into()],
            written_at: "2026-12-06T12:00:00Z".into(),
            check: 1,
            state: state.into(),
            reason: "Synced and Healthy".into(),
            lead_seconds: vec![],
            write_to_live_seconds: Some(28.0),
            own_metric: false,
        }
    }

    #[test]
    fn a_report_becomes_a_notification_only_when_something_moved_failed_or_rolled_out() {
        let rolled = {
            let mut r = Report::new(InvocationKind::Shard, "ev-2", false);
            r.rollouts.push(rollout("confirmed"));
            r
        };
        let pending = {
            let mut r = Report::new(InvocationKind::Shard, "ev-3", false);
            r.rollouts.push(rollout("pending"));
            r
        };
        let cases = [
            (push_report(&[Action::Unchanged]), None),
            (push_report(&[Action::Updated]), Some("ImagesUpdated")),
            (
                push_report(&[Action::Updated, Action::Failed]),
                Some("UpdateFailed"),
            ),
            (rolled, Some("RolloutConfirmed")),
            (pending, None),
        ];
        for (report, expected) in cases {
            let got = custom_notification(&report);
            assert_eq!(
                got.as_ref()
                    .and_then(|n| n["metadata"]["eventType"].as_str()),
                expected,
                "{got:#?}"
            );
            if let Some(n) = got {
                assert_eq!(
                    (n["version"].as_str(), n["source"].as_str()),
                    (Some("1.0"), Some("custom"))
                );
                assert_eq!(n["content"]["textType"], "client-markdown");
            }
        }
    }

    #[test]
    fn an_update_and_its_rollout_outcome_share_the_thread_of_the_image_written() {
        let update = custom_notification(&push_report(&[Action::Updated])).unwrap();
        let mut check = Report::new(InvocationKind::Shard, "ev-2", false);
        check.rollouts.push(rollout("confirmed"));
        let outcome = custom_notification(&check).unwrap();
        assert_eq!(
            update["metadata"]["threadId"],
            "768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web:20250825-153012"
        );
        assert_eq!(outcome["metadata"]["threadId"], "web:20250825-153012");
        assert!(
            outcome["content"]["description"]
                .as_str()
                .unwrap()
                .contains("live 28 s after the write")
        );
    }

    #[test]
    fn failures_become_next_steps_and_a_long_report_is_cut_with_a_count() {
        let mut actions = vec![Action::Updated; 20];
        actions[0] = Action::Failed;
        let n = custom_notification(&push_report(&actions)).unwrap();
        let steps = n["content"]["nextSteps"].as_array().unwrap();
        assert_eq!(steps.len(), 1);
        assert!(
            steps[0]
                .as_str()
                .unwrap()
                .starts_with("argocd/app-0: because")
        );
        let description = n["content"]["description"].as_str().unwrap();
        assert_eq!(description.lines().count(), MAX_LINES + 1);
        assert!(description.ends_with("…and 5 more: the function's log has every entry"));
        assert_eq!(
            clipped(&"x".repeat(MAX_LINE + 10)).chars().count(),
            MAX_LINE + 1
        );
    }

    /// A sweep that moved or failed thousands of Applications with the longest names and
    /// reasons still fits one SNS message (256 KB) many times over, and keeps to the schema's
    /// keys: nothing grows with the number of entries but the count of those left out.
    #[test]
    fn a_sweep_of_ten_thousand_long_entries_stays_a_few_kilobytes() {
        let mut report = Report::new(InvocationKind::Reconcile, "ev-4", false);
        let long = "n".repeat(253);
        for i in 0..10_000 {
            let action = if i % 2 == 0 {
                Action::Updated
            } else {
                Action::Failed
            };
            let name = format!("{long}{i}");
            let entry = Entry::new(&long, &name, None, &long).with(action, "r".repeat(5_000));
            report.entries.push(entry);
            let mut outcome = rollout(["confirmed", "failed", "timed-out"][i % 3]);
            outcome.name = name;
            report.rollouts.push(outcome);
        }
        let n = custom_notification(&report).unwrap();
        let size = serde_json::to_string(&n).unwrap().len();
        assert!(size < 32 * 1024, "{size} bytes");
        assert_eq!(
            n["metadata"]["relatedResources"].as_array().unwrap().len(),
            MAX_LINES
        );
        assert_eq!(
            n["content"]["nextSteps"].as_array().unwrap().len(),
            MAX_LINES
        );
        let keywords = n["content"]["keywords"].as_array().unwrap();
        assert_eq!(keywords.len(), 5, "{keywords:?}");
    }
}
