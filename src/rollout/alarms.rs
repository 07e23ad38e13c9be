//! Verification by CloudWatch alarms: after a write is live, its rollout is watched through
//! the alarms the Application names for a window, and fails when one of them was in `ALARM`
//! at any moment of that window. Pure: the alarms' states and their history are read by
//! [`crate::rollout::watched`]; this module only reads the settings and judges what was seen.
//!
//! An alarm is judged over the whole window, not only at the checks: its state when the
//! rollout went live (from the history since the write), every transition since, and its
//! state now. So a flap to `ALARM` and back between two checks still fails the rollout.
//! `INSUFFICIENT_DATA` is not a failure (a quiet service has no data); an alarm that does
//! not exist is, since a rollout verified by nothing must not read as verified.

use std::time::Duration;

use time::OffsetDateTime;

use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::{format_duration, parse_duration};

/// The alarms to watch: names or ARNs, comma-separated (a name may hold spaces).
pub const ALARMS_ANNOTATION: &str = "argocd-ecr-updater.io/verify-alarms";
/// How long after the rollout is live the alarms are watched.
pub const WINDOW_ANNOTATION: &str = "argocd-ecr-updater.io/verify-for";
/// The window when only the alarms are named.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(15 * 60);
/// At most this many alarms per Application: each is one history read per check.
pub const MAX_ALARMS: usize = 10;
/// At most this long a window: the check chain must stay within a day.
pub const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// What the Application asks to be watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// Alarm names, as `DescribeAlarms` takes them.
    pub alarms: Vec<String>,
    pub window: Duration,
}

/// Where the function reads alarms: its region, and its account when known (an ARN of
/// another account names an alarm it cannot read as that one).
#[derive(Debug, Clone, Copy)]
pub struct Home<'a> {
    pub region: &'a str,
    pub account: Option<&'a str>,
}

/// Reads the two annotations: `Ok(None)` when no alarms are named; an error names the
/// annotation and what to write instead. A comma always separates two alarms, so a name
/// holding a comma cannot be watched.
pub fn settings(
    alarms: Option<&str>,
    window: Option<&str>,
    home: Home<'_>,
) -> Result<Option<Watch>, String> {
    let Some(alarms) = alarms else {
        return match window {
            Some(_) => Err(format!(
                "`{WINDOW_ANNOTATION}` is set without `{ALARMS_ANNOTATION}`: name the alarms to watch, or remove it"
            )),
            None => Ok(None),
        };
    };
    let mut names = Vec::new();
    for item in alarms.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let name = alarm_name(item, home)
            .map_err(|problem| format!("`{ALARMS_ANNOTATION}`: {problem}"))?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(format!(
            "`{ALARMS_ANNOTATION}` names no alarm: write alarm names or ARNs, separated by commas"
        ));
    }
    if names.len() > MAX_ALARMS {
        return Err(format!(
            "`{ALARMS_ANNOTATION}` names {} alarms; at most {MAX_ALARMS} are watched (a composite alarm can stand for more)",
            names.len()
        ));
    }
    let window = match window {
        None => DEFAULT_WINDOW,
        Some(text) => {
            let window = parse_duration(text)
                .map_err(|problem| format!("`{WINDOW_ANNOTATION}`: {problem}"))?;
            if window.is_zero() || window > MAX_WINDOW {
                return Err(format!(
                    "`{WINDOW_ANNOTATION}`: {text} is outside 1s..24h; write e.g. 15m"
                ));
            }
            window
        }
    };
    Ok(Some(Watch {
        alarms: names,
        window,
    }))
}

/// An alarm's name from a name or an ARN of this region (`DescribeAlarms` reads one region).
fn alarm_name(item: &str, home: Home<'_>) -> Result<String, String> {
    let region = home.region;
    let name = match item.strip_prefix("arn:") {
        None => item,
        Some(rest) => {
            let parts: Vec<&str> = rest.splitn(6, ':').collect();
            let [_partition, service, arn_region, account, kind, name] = parts[..] else {
                return Err(format!("{item} is not an alarm ARN"));
            };
            if service != "cloudwatch" || kind != "alarm" {
                return Err(format!("{item} is not a CloudWatch alarm ARN"));
            }
            if arn_region != region {
                return Err(format!(
                    "{item} is in {arn_region}; the function reads alarms of its own region {region}"
                ));
            }
            if let Some(own) = home.account.filter(|own| *own != account) {
                return Err(format!(
                    "{item} is an alarm of account {account}; the function reads alarms of its own account {own}"
                ));
            }
            name
        }
    };
    if name.is_empty() || name.len() > 255 || name.chars().any(char::is_control) {
        return Err(format!(
            "{name:?} is not an alarm name (1 to 255 printable characters)"
        ));
    }
    Ok(name.to_string())
}

/// An alarm's state value as CloudWatch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Ok,
    Alarm,
    InsufficientData,
}

impl State {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "OK" => Some(Self::Ok),
            "ALARM" => Some(Self::Alarm),
            "INSUFFICIENT_DATA" => Some(Self::InsufficientData),
            _ => None,
        }
    }
}

/// One alarm as `DescribeAlarms` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub name: String,
    pub state: State,
    pub reason: String,
    pub updated: Option<OffsetDateTime>,
}

/// One state change from `DescribeAlarmHistory` (`StateUpdate` items).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub alarm: String,
    pub at: OffsetDateTime,
    pub from: Option<State>,
    pub to: State,
    /// The new state's reason, else the item's summary.
    pub reason: String,
}

/// What one check read: the alarms that exist, and their transitions since the write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    pub alarms: Vec<Seen>,
    pub transitions: Vec<Transition>,
}

/// The verification's verdict at one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// An alarm was in `ALARM` in the window (or does not exist): the rollout failed.
    Failed(String),
    /// Nothing failed yet; the window ends in `left`.
    Watching { left: Duration },
    /// The window passed without an alarm: what to say about it.
    Verified(String),
}

/// Judges the window `[live, live + watch.window]` at `now` from what was read.
pub fn judge(
    watch: &Watch,
    live: OffsetDateTime,
    now: OffsetDateTime,
    observed: &Observed,
) -> Verification {
    let end = live + watch.window;
    let seen_until = now.min(end);
    for name in &watch.alarms {
        let Some(seen) = observed.alarms.iter().find(|a| &a.name == name) else {
            return Verification::Failed(format!(
                "alarm {name} does not exist or is not readable (check its name and the function's cloudwatch:DescribeAlarms permission)"
            ));
        };
        if let Some(why) = in_alarm(seen, &observed.transitions, live, seen_until) {
            return Verification::Failed(why);
        }
    }
    if now < end {
        return Verification::Watching {
            left: (end - now).try_into().unwrap_or_default(),
        };
    }
    // An alarm whose state changed inside the window with that change not yet in its
    // history (CloudWatch writes history after the state): the window is not known to be
    // quiet until the history shows it, for at most a grace period.
    if let Some(seen) = watch
        .alarms
        .iter()
        .filter_map(|name| observed.alarms.iter().find(|a| &a.name == name))
        .find(|seen| history_lags(seen, &observed.transitions, live, seen_until))
    {
        if now >= end + HISTORY_GRACE {
            return Verification::Failed(format!(
                "alarm {} changed state inside the window and its history has not shown the change for {}: not verified",
                seen.name,
                format_duration(HISTORY_GRACE)
            ));
        }
        return Verification::Watching {
            left: Duration::from_secs(60),
        };
    }
    Verification::Verified(format!(
        "verified: {} not in ALARM for {} after it was live",
        watch.alarms.join(", "),
        format_duration(watch.window)
    ))
}

/// How long past the window's end a check waits for a lagging history.
pub const HISTORY_GRACE: Duration = Duration::from_secs(15 * 60);

/// Whether `seen` last changed inside `[from, until]` with no change read from then on.
fn history_lags(
    seen: &Seen,
    transitions: &[Transition],
    from: OffsetDateTime,
    until: OffsetDateTime,
) -> bool {
    let Some(updated) = seen.updated.filter(|u| *u > from && *u <= until) else {
        return false;
    };
    !transitions
        .iter()
        .any(|t| t.alarm == seen.name && t.at >= updated - time::Duration::seconds(1))
}

/// Why `seen` was in `ALARM` at some moment of `[from, until]`, if it was.
fn in_alarm(
    seen: &Seen,
    transitions: &[Transition],
    from: OffsetDateTime,
    until: OffsetDateTime,
) -> Option<String> {
    let mut own: Vec<&Transition> = transitions
        .iter()
        .filter(|t| t.alarm == seen.name)
        .collect();
    own.sort_by_key(|t| t.at);
    // A change to ALARM inside the window, however short it stayed.
    if let Some(t) = own
        .iter()
        .find(|t| t.to == State::Alarm && t.at >= from && t.at <= until)
    {
        return Some(format!(
            "alarm {} went to ALARM at {}: {}",
            seen.name,
            t.at.format(&Rfc3339).unwrap_or_default(),
            t.reason
        ));
    }
    // In ALARM when the window opened: the last change before it went there, or, with no
    // change read before it, the state the first change after it left (else the state now,
    // when it has not changed since the opening).
    let at_open = match own.iter().rev().find(|t| t.at < from) {
        Some(before) => Some((before.to, before.reason.as_str())),
        None => match own.iter().find(|t| t.at >= from) {
            Some(after) => after.from.map(|state| (state, "")),
            // Its state now held at the opening if it last changed before it.
            None if seen.updated.is_some_and(|at| at <= from) => {
                Some((seen.state, seen.reason.as_str()))
            }
            None => None,
        },
    };
    if let Some((State::Alarm, reason)) = at_open {
        let reason = if reason.is_empty() {
            seen.reason.as_str()
        } else {
            reason
        };
        return Some(format!(
            "alarm {} was in ALARM when the rollout went live: {reason}",
            seen.name
        ));
    }
    // In ALARM now, with its change not in the history read (history lags the state).
    if seen.state == State::Alarm && seen.updated.is_none_or(|at| at <= until) {
        return Some(format!("alarm {} is in ALARM: {}", seen.name, seen.reason));
    }
    None
}

/// When to look again while watching: a third of the window, between one and fifteen
/// minutes, and never past its end (the history covers the time between checks).
pub fn next_check_in(watch: &Watch, left: Duration) -> Duration {
    let step = (watch.window / 3).clamp(Duration::from_secs(60), Duration::from_secs(15 * 60));
    step.min(left).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const HOME_EU: Home<'static> = Home {
        region: "eu-west-1",
        account: None,
    };
    const HOME_R: Home<'static> = Home {
        region: "r",
        account: None,
    };

    const LIVE: OffsetDateTime = datetime!(2026-12-06 10:00 UTC);

    fn watch(names: &[&str]) -> Watch {
        Watch {
            alarms: names.iter().map(|n| n.to_string()).collect(),
            window: Duration::from_secs(15 * 60),
        }
    }

    fn seen(name: &str, state: State, updated: OffsetDateTime) -> Seen {
        Seen {
            name: name.into(),
            state,
            reason: format!("{name} reason"),
            updated: Some(updated),
        }
    }

    fn change(name: &str, at: OffsetDateTime, from: State, to: State) -> Transition {
        Transition {
            alarm: name.into(),
            at,
            from: Some(from),
            to,
            reason: format!("Threshold Crossed at {at}"),
        }
    }

    fn minutes(m: i64) -> time::Duration {
        time::Duration::minutes(m)
    }

    #[test]
    fn settings_read_names_and_arns_of_the_region_and_a_window() {
        let got = settings(
            Some("errors, arn:aws:cloudwatch:eu-west-1:123456789012:alarm:p99 latency,errors"),
            Some("30m"),
            HOME_EU,
        )
        .unwrap()
        .unwrap();
        assert_eq!(got.alarms, vec!["errors", "p99 latency"]);
        assert_eq!(got.window, Duration::from_secs(1800));
    }

    #[test]
    fn settings_without_alarms_ask_for_nothing_and_a_window_alone_is_an_error() {
        assert_eq!(settings(None, None, HOME_R), Ok(None));
        assert!(
            settings(None, Some("10m"), HOME_R)
                .unwrap_err()
                .contains(ALARMS_ANNOTATION)
        );
    }

    #[test]
    fn settings_refuse_other_regions_other_services_too_many_alarms_and_odd_windows() {
        let refused = |alarms: &str, window: Option<&str>| {
            settings(Some(alarms), window, HOME_EU).unwrap_err()
        };
        assert!(refused("arn:aws:cloudwatch:us-east-1:1:alarm:a", None).contains("us-east-1"));
        assert!(refused("arn:aws:sns:eu-west-1:1:alarm:a", None).contains("not a CloudWatch"));
        assert!(refused("arn:aws:cloudwatch", None).contains("not an alarm ARN"));
        let many: Vec<String> = (0..11).map(|i| format!("a{i}")).collect();
        assert!(refused(&many.join(","), None).contains("at most 10"));
        assert!(refused(" , ", None).contains("names no alarm"));
        assert!(refused("a", Some("0s")).contains(WINDOW_ANNOTATION));
        assert!(refused("a", Some("25h")).contains("outside"));
        assert!(refused("a", Some("soon")).contains(WINDOW_ANNOTATION));
        assert_eq!(
            settings(Some("a"), None, HOME_R).unwrap().unwrap().window,
            DEFAULT_WINDOW
        );
    }

    #[test]
    fn quiet_alarms_are_watched_until_the_window_ends_then_verified() {
        let observed = Observed {
            alarms: vec![seen("errors", State::Ok, LIVE - minutes(60))],
            transitions: vec![],
        };
        assert_eq!(
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(5), &observed),
            Verification::Watching {
                left: Duration::from_secs(600)
            }
        );
        let Verification::Verified(note) =
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(15), &observed)
        else {
            panic!("expected verified")
        };
        assert!(note.contains("errors") && note.contains("15m"), "{note}");
    }

    #[test]
    fn a_flap_to_alarm_and_back_between_two_checks_fails_the_rollout() {
        let observed = Observed {
            alarms: vec![seen("errors", State::Ok, LIVE + minutes(7))],
            transitions: vec![
                change("errors", LIVE + minutes(4), State::Ok, State::Alarm),
                change("errors", LIVE + minutes(7), State::Alarm, State::Ok),
            ],
        };
        let Verification::Failed(why) =
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(10), &observed)
        else {
            panic!("expected failed")
        };
        assert!(
            why.contains("went to ALARM at 2026-12-06T10:04:00Z"),
            "{why}"
        );
    }

    #[test]
    fn an_alarm_already_firing_when_the_rollout_went_live_fails_it() {
        // From the history: it went to ALARM before the window and stayed there.
        let observed = Observed {
            alarms: vec![seen("errors", State::Alarm, LIVE - minutes(3))],
            transitions: vec![change("errors", LIVE - minutes(3), State::Ok, State::Alarm)],
        };
        let Verification::Failed(why) =
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(1), &observed)
        else {
            panic!("expected failed")
        };
        assert!(why.contains("when the rollout went live"), "{why}");
        // From the first change after the window opened: it left ALARM only then.
        let observed = Observed {
            alarms: vec![seen("errors", State::Ok, LIVE + minutes(2))],
            transitions: vec![change("errors", LIVE + minutes(2), State::Alarm, State::Ok)],
        };
        assert!(matches!(
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(5), &observed),
            Verification::Failed(_)
        ));
    }

    #[test]
    fn an_alarm_that_fired_and_recovered_before_the_window_does_not_count() {
        let observed = Observed {
            alarms: vec![seen("errors", State::Ok, LIVE - minutes(2))],
            transitions: vec![
                change("errors", LIVE - minutes(6), State::Ok, State::Alarm),
                change("errors", LIVE - minutes(2), State::Alarm, State::Ok),
            ],
        };
        assert!(matches!(
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(5), &observed),
            Verification::Watching { .. }
        ));
    }

    #[test]
    fn an_alarm_in_alarm_now_fails_even_before_its_history_shows_the_change() {
        let observed = Observed {
            alarms: vec![seen("errors", State::Alarm, LIVE + minutes(4))],
            transitions: vec![],
        };
        let Verification::Failed(why) =
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(5), &observed)
        else {
            panic!("expected failed")
        };
        assert!(why.contains("is in ALARM: errors reason"), "{why}");
    }

    #[test]
    fn a_change_to_alarm_after_the_window_ended_does_not_fail_a_late_check() {
        let observed = Observed {
            alarms: vec![seen("errors", State::Alarm, LIVE + minutes(20))],
            transitions: vec![change(
                "errors",
                LIVE + minutes(20),
                State::Ok,
                State::Alarm,
            )],
        };
        assert!(matches!(
            judge(&watch(&["errors"]), LIVE, LIVE + minutes(25), &observed),
            Verification::Verified(_)
        ));
    }

    #[test]
    fn insufficient_data_is_not_a_failure_but_a_missing_alarm_is() {
        let observed = Observed {
            alarms: vec![seen("quiet", State::InsufficientData, LIVE)],
            transitions: vec![],
        };
        assert!(matches!(
            judge(&watch(&["quiet"]), LIVE, LIVE + minutes(15), &observed),
            Verification::Verified(_)
        ));
        let Verification::Failed(why) = judge(
            &watch(&["quiet", "gone"]),
            LIVE,
            LIVE + minutes(1),
            &observed,
        ) else {
            panic!("expected failed")
        };
        assert!(why.contains("gone does not exist"), "{why}");
    }

    #[test]
    fn checks_come_every_third_of_the_window_within_one_and_fifteen_minutes() {
        let w = |secs| Watch {
            alarms: vec!["a".into()],
            window: Duration::from_secs(secs),
        };
        let long = Duration::from_secs(99_999);
        assert_eq!(next_check_in(&w(900), long), Duration::from_secs(300));
        assert_eq!(next_check_in(&w(60), long), Duration::from_secs(60));
        assert_eq!(next_check_in(&w(7200), long), Duration::from_secs(900));
        assert_eq!(
            next_check_in(&w(900), Duration::from_secs(20)),
            Duration::from_secs(20)
        );
    }
}
