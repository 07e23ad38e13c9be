//! Reading the watched alarms from CloudWatch for [`crate::rollout::alarms`]: their states
//! (`DescribeAlarms`, metric and composite alarms, one call) and each one's state changes
//! since the write (`DescribeAlarmHistory`, oldest first, bounded pages), into the
//! [`Observed`] the verdict is judged on.

use aws_sdk_cloudwatch::types::{AlarmType, HistoryItemType, ScanBy, StateValue};
use aws_smithy_types::DateTime;
use serde::Deserialize;
use time::OffsetDateTime;

use crate::aws::aws_error;
use crate::failure::Failure;
use crate::rollout::alarms::{Observed, Seen, State, Transition};

/// At most this many pages of one alarm's history per check (100 changes each): an alarm
/// that changed state more often within one window has long shown what it is.
const MAX_HISTORY_PAGES: usize = 5;
/// A reason longer than this is cut: it goes into Events, commit statuses and the report.
const MAX_REASON: usize = 300;

/// Why the alarms could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unreadable {
    /// The role may not read an alarm: the rollout cannot be verified until an operator
    /// grants it, which no retry of the check does.
    #[error("{0}; add the alarm to VerifyAlarmNames (Terraform verify_alarm_names)")]
    Denied(String),
    /// Anything else, retryable or not as the failure says.
    #[error(transparent)]
    Failed(Failure),
}

/// CloudWatch, as the rollout check reads it.
#[derive(Debug, Clone)]
pub struct Alarms {
    client: aws_sdk_cloudwatch::Client,
}

impl Alarms {
    pub fn new(client: aws_sdk_cloudwatch::Client) -> Self {
        Self { client }
    }

    /// The named alarms now, and their state changes in `[since, until]`.
    pub async fn observe(
        &self,
        names: &[String],
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<Observed, Unreadable> {
        let alarms = self.states(names).await?;
        let mut transitions = Vec::new();
        for seen in &alarms {
            transitions.extend(self.history(&seen.name, since, until).await?);
        }
        Ok(Observed {
            alarms,
            transitions,
        })
    }

    async fn states(&self, names: &[String]) -> Result<Vec<Seen>, Unreadable> {
        let answer = self
            .client
            .describe_alarms()
            .set_alarm_names(Some(names.to_vec()))
            .alarm_types(AlarmType::MetricAlarm)
            .alarm_types(AlarmType::CompositeAlarm)
            .max_records(100)
            .send()
            .await
            .map_err(|e| failure("cloudwatch:DescribeAlarms", aws_error::describe(&e)))?;
        let metric = answer.metric_alarms().iter().map(|a| {
            (
                a.alarm_name(),
                a.state_value(),
                a.state_reason(),
                a.state_updated_timestamp(),
            )
        });
        let composite = answer.composite_alarms().iter().map(|a| {
            (
                a.alarm_name(),
                a.state_value(),
                a.state_reason(),
                a.state_updated_timestamp(),
            )
        });
        Ok(metric
            .chain(composite)
            .filter_map(|(name, state, reason, updated)| {
                Some(Seen {
                    name: name?.to_string(),
                    state: state_of(state?)?,
                    reason: cut(reason.unwrap_or_default()),
                    updated: updated.and_then(time_of),
                })
            })
            .filter(|seen| names.contains(&seen.name))
            .collect())
    }

    async fn history(
        &self,
        name: &str,
        since: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<Vec<Transition>, Unreadable> {
        let mut transitions = Vec::new();
        let mut token: Option<String> = None;
        for page_number in 0..MAX_HISTORY_PAGES {
            let page = self
                .client
                .describe_alarm_history()
                .alarm_name(name)
                // Without the types, CloudWatch answers a composite alarm's history with none.
                .alarm_types(AlarmType::MetricAlarm)
                .alarm_types(AlarmType::CompositeAlarm)
                .history_item_type(HistoryItemType::StateUpdate)
                .start_date(DateTime::from_secs(since.unix_timestamp()))
                .end_date(DateTime::from_secs(until.unix_timestamp() + 1))
                .scan_by(ScanBy::TimestampAscending)
                .max_records(100)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| failure("cloudwatch:DescribeAlarmHistory", aws_error::describe(&e)))?;
            transitions.extend(page.alarm_history_items().iter().filter_map(|item| {
                let at = item.timestamp().and_then(time_of)?;
                let (from, to, reason) = change_of(item.history_data(), item.history_summary())?;
                Some(Transition {
                    alarm: item.alarm_name().unwrap_or(name).to_string(),
                    at,
                    from,
                    to,
                    reason,
                })
            }));
            match page.next_token() {
                // More than the pages read: judging on part of the history could call a
                // window quiet that was not; an alarm this restless is not a verification.
                Some(next) if !next.is_empty() && page_number + 1 == MAX_HISTORY_PAGES => {
                    return Err(Unreadable::Failed(Failure::permanent(format!(
                        "alarm {name} changed state more than {} times since the write: too restless to verify a rollout by",
                        MAX_HISTORY_PAGES * 100
                    ))));
                }
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        Ok(transitions)
    }
}

fn failure(action: &str, described: aws_error::Described) -> Unreadable {
    let text = format!("cannot read the watched alarms ({action}): {described}");
    // CloudWatch's own server errors pass once it recovers: the check comes back.
    let server_side = matches!(
        described.code.as_deref(),
        Some(
            "ServiceUnavailable"
                | "InternalServiceError"
                | "InternalServiceFault"
                | "InternalFailure"
        )
    );
    match described.cause {
        aws_error::Cause::AccessDenied => Unreadable::Denied(text),
        cause => Unreadable::Failed(Failure::new(text, server_side || cause.is_retryable())),
    }
}

fn state_of(value: &StateValue) -> Option<State> {
    State::parse(value.as_str())
}

fn time_of(at: &DateTime) -> Option<OffsetDateTime> {
    let nanos = i128::from(at.secs()) * 1_000_000_000 + i128::from(at.subsec_nanos());
    OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()
}

fn cut(text: &str) -> String {
    let text = crate::redact::scrub(text);
    match text.char_indices().nth(MAX_REASON) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// `HistoryData` of a `StateUpdate` item, as CloudWatch writes it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HistoryData {
    old_state: Option<StateData>,
    new_state: StateData,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateData {
    state_value: String,
    #[serde(default)]
    state_reason: String,
}

/// The change a history item records: from its data, else from its summary (`Alarm updated
/// from OK to ALARM`). `None` when neither says.
fn change_of(data: Option<&str>, summary: Option<&str>) -> Option<(Option<State>, State, String)> {
    let parsed = data
        .filter(|d| d.len() <= 64 * 1024)
        .and_then(|d| serde_json::from_str::<HistoryData>(d).ok());
    if let Some(data) = parsed {
        let to = State::parse(&data.new_state.state_value)?;
        let from = data
            .old_state
            .and_then(|old| State::parse(&old.state_value));
        let reason = if data.new_state.state_reason.is_empty() {
            summary.unwrap_or_default()
        } else {
            &data.new_state.state_reason
        };
        return Some((from, to, cut(reason)));
    }
    let summary = summary?;
    let (from, to) = summary.rsplit_once(" from ")?.1.split_once(" to ")?;
    Some((State::parse(from), State::parse(to.trim())?, cut(summary)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_update_is_read_from_its_data_with_the_new_states_reason() {
        let data = r#"{"version":"1.0","oldState":{"stateValue":"OK","stateReason":"fine"},"newState":{"stateValue":"ALARM","stateReason":"Threshold Crossed: 1 datapoint [7.0] was greater than 5.0"}}"#;
        assert_eq!(
            change_of(Some(data), Some("Alarm updated from OK to ALARM")),
            Some((
                Some(State::Ok),
                State::Alarm,
                "Threshold Crossed: 1 datapoint [7.0] was greater than 5.0".into()
            ))
        );
    }

    #[test]
    fn without_readable_data_the_summary_says_the_change() {
        assert_eq!(
            change_of(Some("not json"), Some("Alarm updated from ALARM to OK")),
            Some((
                Some(State::Alarm),
                State::Ok,
                "Alarm updated from ALARM to OK".into()
            ))
        );
        assert_eq!(change_of(None, Some("Alarm created")), None);
        assert_eq!(change_of(None, None), None);
    }

    #[test]
    fn long_reasons_are_cut() {
        let long = "x".repeat(1000);
        assert_eq!(cut(&long).chars().count(), MAX_REASON + 1);
    }

    #[test]
    fn sdk_times_keep_their_fraction() {
        let at = DateTime::from_fractional_secs(1_765_000_000, 0.5);
        assert_eq!(
            time_of(&at).map(|t| t.unix_timestamp_nanos()),
            Some(1_765_000_000_500_000_000)
        );
    }
}
