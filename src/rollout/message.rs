//! The rollout check: the message that brings a write back to be judged, on the sweep queue
//! with SQS's `DelaySeconds`, and when the next one is due. It names an Application and the
//! time of the write it follows, nothing more: what was written, pushed when, to which
//! commit, and the deadline are read from the Application's audit record, which only the
//! Application's writers can set, so a message forged by anyone who may send to the queue
//! can at most ask for a real write's real state to be reported.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::event::CONFIRM_ACTION;

/// The first check comes this long after the write; each later one waits twice as long as
/// the one before, up to [`LONGEST_WAIT`]: a sync takes seconds, a rollout minutes.
pub const FIRST_WAIT_SECONDS: u32 = 15;
pub const LONGEST_WAIT: u32 = 120;

/// A check numbered above this was not sent by this function (a 7-day deadline at the
/// longest wait is about 5,000 checks).
const MAX_CHECK: u32 = 10_000;

/// One check of one write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirmation {
    pub action: String,
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    /// The write followed: its time exactly as the audit record writes it.
    pub write: String,
    /// 1 for the first check of the write.
    pub check: u32,
}

impl Confirmation {
    pub fn first(cluster: &str, namespace: &str, name: &str, write: &str) -> Self {
        Self {
            action: CONFIRM_ACTION.into(),
            cluster: cluster.into(),
            namespace: namespace.into(),
            name: name.into(),
            write: write.into(),
            check: 1,
        }
    }

    /// The check after this one.
    pub fn next(&self) -> Self {
        Self {
            check: self.check.saturating_add(1),
            ..self.clone()
        }
    }

    /// The write's time.
    pub fn written_at(&self) -> Option<OffsetDateTime> {
        OffsetDateTime::parse(&self.write, &Rfc3339).ok()
    }
}

/// How long before check number `check` (1-based): 15 s, 15 s, 30 s, 60 s, then 120 s.
pub fn wait_before(check: u32) -> u32 {
    match check {
        0 | 1 => FIRST_WAIT_SECONDS,
        n => FIRST_WAIT_SECONDS
            .saturating_mul(1 << (n - 2).min(4))
            .min(LONGEST_WAIT),
    }
}

/// The wait before the next check, never past the deadline by more than a second: the last
/// check lands on it.
pub fn wait_until_next(check: u32, now: OffsetDateTime, deadline: OffsetDateTime) -> u32 {
    let left = (deadline - now).whole_seconds().max(0) as u64 + 1;
    (wait_before(check) as u64).min(left) as u32
}

/// Why a rollout check message cannot be taken; permanent, like a shard that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfirmationError {
    #[error(
        "Permanent.NotACheck: the rollout check is not one this function sends ({0}); only the function itself sends to the sweep queue"
    )]
    Malformed(String),
}

/// Validates a check read from its message (already bounded in size and parsed as JSON).
pub fn validate(check: Confirmation) -> Result<Confirmation, ConfirmationError> {
    let bad = |why: String| Err(ConfirmationError::Malformed(why));
    if check.action != CONFIRM_ACTION {
        return bad(format!("its action is not `{CONFIRM_ACTION}`"));
    }
    if check.cluster.is_empty() {
        return bad("it names no cluster".into());
    }
    if !crate::config::is_namespace(&check.namespace) || !crate::config::is_object_name(&check.name)
    {
        return bad(format!(
            "`{}/{}` is not a namespace and an object name",
            crate::redact::scrub(&check.namespace),
            crate::redact::scrub(&check.name)
        ));
    }
    if check.written_at().is_none() {
        return bad(format!(
            "its write time `{}` is not RFC 3339",
            crate::redact::scrub(&check.write)
        ));
    }
    if check.check == 0 || check.check > MAX_CHECK {
        return bad(format!("check number {} is out of range", check.check));
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn checks_wait_longer_each_time_up_to_two_minutes() {
        let waits: Vec<u32> = (1..=8).map(wait_before).collect();
        assert_eq!(waits, [15, 15, 30, 60, 120, 120, 120, 120]);
        assert_eq!(wait_before(u32::MAX), LONGEST_WAIT);
    }

    #[test]
    fn the_last_check_lands_on_the_deadline() {
        let deadline = datetime!(2026-12-03 10:15 UTC);
        assert_eq!(
            wait_until_next(6, datetime!(2026-12-03 10:00 UTC), deadline),
            120
        );
        assert_eq!(
            wait_until_next(6, datetime!(2026-12-03 10:14:30 UTC), deadline),
            31
        );
        assert_eq!(
            wait_until_next(6, datetime!(2026-12-03 10:20 UTC), deadline),
            1
        );
    }

    #[test]
    fn a_check_reads_back_as_sent_and_what_is_not_one_says_why() {
        let first = Confirmation::first("dev", "argocd", "web", "2026-12-03T10:00:00.5Z");
        assert_eq!(validate(first.clone()), Ok(first.clone()));
        assert_eq!(first.next().check, 2);
        let cases: Vec<(Confirmation, &str)> = vec![
            (
                Confirmation {
                    cluster: String::new(),
                    ..first.clone()
                },
                "names no cluster",
            ),
            (
                Confirmation {
                    namespace: "Bad_NS".into(),
                    ..first.clone()
                },
                "`Bad_NS/web`",
            ),
            (
                Confirmation {
                    name: "../x".into(),
                    ..first.clone()
                },
                "not a namespace and an object name",
            ),
            (
                Confirmation {
                    write: "yesterday".into(),
                    ..first.clone()
                },
                "not RFC 3339",
            ),
            (
                Confirmation {
                    check: 0,
                    ..first.clone()
                },
                "out of range",
            ),
            (
                Confirmation {
                    check: MAX_CHECK + 1,
                    ..first.clone()
                },
                "out of range",
            ),
            (
                Confirmation {
                    action: "reconcile-shard".into(),
                    ..first
                },
                "action is not",
            ),
        ];
        for (check, says) in cases {
            let error = validate(check).unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
            assert!(error.starts_with("Permanent.NotACheck: "), "{error}");
        }
    }
}
