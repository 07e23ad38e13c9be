//! Release controls an operator sets on an Application (or on the ImageUpdater object that
//! configures it), decided without I/O: when an update may go out, where the gates
//! (`gates/`) decide whether the image may. The soak (`min-age`) holds an image until it has
//! been in ECR long enough; hold-on-failure holds one whose rollout failed. A freeze: `argocd-ecr-updater.io/freeze: "true"`
//! holds every write until the annotation goes, `"until=<RFC 3339 time>"` until that time.
//! The decision is still taken and reported in full; only the write is held, so `plan` and
//! the log say what would roll out, and the first event or sweep after the freeze rolls out
//! the newest allowed image.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::ImageConfig;
use crate::application::app::Application;
use crate::decision::decide::ImageOutcome;
use crate::report::{Action, Entry};

/// The annotation, on an Application or in an ImageUpdater object's `metadata.annotations`.
pub const FREEZE: &str = "argocd-ecr-updater.io/freeze";

/// A freeze as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freeze {
    /// Until the annotation is removed or set to `"false"`.
    Indefinite,
    /// Until this time; from it on, nothing is held.
    Until(OffsetDateTime),
}

/// Reads a freeze annotation's value: `"true"`, `"false"` (no freeze), or
/// `"until=<RFC 3339 time>"`.
pub fn parse_freeze(value: &str) -> Result<Option<Freeze>, String> {
    let value = value.trim();
    match value {
        "true" => return Ok(Some(Freeze::Indefinite)),
        "false" | "" => return Ok(None),
        _ => {}
    }
    let Some(time) = value.strip_prefix("until=") else {
        return Err(format!(
            "`{FREEZE}: {}` is not \"true\", \"false\" or \"until=<RFC 3339 time>\"",
            crate::redact::scrub(value)
        ));
    };
    OffsetDateTime::parse(time.trim(), &Rfc3339)
        .map(|t| Some(Freeze::Until(t)))
        .map_err(|e| {
            format!(
                "`{FREEZE}: until={}` is not an RFC 3339 time ({e}); write it as 2026-12-24T18:00:00Z",
                crate::redact::scrub(time)
            )
        })
}

/// Whether writes are held now, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    Open,
    /// Frozen: the reason says by what and until when.
    Frozen(String),
    /// A freeze annotation that cannot be read: nothing is written until it is fixed, since
    /// whoever wrote it meant to hold something.
    Unreadable(String),
}

/// The hold that `settings` (each `(where it is set, its value)`) put on a write at `now`:
/// frozen if any of them freezes now; an unreadable one wins over every other.
pub fn hold(settings: &[(String, &str)], now: OffsetDateTime) -> Hold {
    let mut frozen = None;
    for (origin, value) in settings {
        match parse_freeze(value) {
            Err(problem) => return Hold::Unreadable(format!("{problem} (on {origin})")),
            Ok(None) => {}
            Ok(Some(Freeze::Until(until))) if until <= now => {}
            Ok(Some(freeze)) => {
                frozen.get_or_insert_with(|| match freeze {
                    Freeze::Indefinite => format!("frozen by `{FREEZE}` on {origin}"),
                    Freeze::Until(until) => format!(
                        "frozen by `{FREEZE}` on {origin} until {}",
                        until.format(&Rfc3339).unwrap_or_default()
                    ),
                });
            }
        }
    }
    frozen.map_or(Hold::Open, Hold::Frozen)
}

/// The entries of a decision held by `hold` (not [`Hold::Open`]): each update becomes a
/// skip (frozen) or a permanent failure (unreadable) that says what it would have written.
pub fn held(entries: Vec<Entry>, hold: &Hold) -> Vec<Entry> {
    let (action, why) = match hold {
        Hold::Open => return entries,
        Hold::Frozen(reason) => (Action::Skipped, reason.clone()),
        Hold::Unreadable(problem) => (
            Action::Failed,
            format!("configuration error: {problem}; nothing is written until it is fixed"),
        ),
    };
    entries
        .into_iter()
        .map(|mut entry| {
            if entry.action == Action::Updated {
                let to = entry.to.take().unwrap_or_default();
                let from = entry.from.clone().unwrap_or_else(|| "none".into());
                entry.reason = format!("{why}: would update `{from}` to `{to}` ({})", entry.reason);
                entry.action = action;
                entry.retryable = false;
            }
            entry
        })
        .collect()
}

/// Hold-on-failure (`<alias>.hold-on-failure: "true"`): after a rollout of this image failed
/// (failed sync, Degraded or Missing after it, or timed out; remembered per image in
/// `argocd-ecr-updater.io/failed-rollouts`, which other images' writes leave alone), a further
/// update is decided and reported but not written, until one of: a candidate pushed after the
/// failure (a fix, by ECR's push time), the annotation removed, or a person deleting the
/// image's failure (or the whole `failed-rollouts` annotation). Health does not release it:
/// a failed sync leaves the Application Healthy on the old image.
pub fn hold_after_failure(
    outcome: ImageOutcome,
    config: &ImageConfig,
    app: &Application<'_>,
) -> ImageOutcome {
    if !config.hold_on_failure {
        return outcome;
    }
    let Some(update) = &outcome.update else {
        return outcome;
    };
    if update.rolls_back {
        return outcome;
    }
    let failures = app.failed_rollouts();
    let Some(failure) = failures.get(&config.image.to_string()) else {
        return outcome;
    };
    let fixed = match (update.pushed_at, failure.time()) {
        (Some(pushed), Some(failed)) => pushed > failed,
        _ => false,
    };
    if fixed {
        return outcome;
    }
    let reason = format!(
        "held after the {} rollout of `{}` at {} (hold-on-failure): a push after it, removing hold-on-failure, or deleting `{}` from the {} annotation releases it",
        failure.outcome,
        failure.to,
        failure.at,
        config.image,
        crate::appconfig::annotations::FAILED_ROLLOUTS_ANNOTATION
    );
    held_outcome(outcome, &reason)
}

/// An update turned into a skip that says what it would have written.
fn held_outcome(outcome: ImageOutcome, why: &str) -> ImageOutcome {
    ImageOutcome {
        entries: held(outcome.entries, &Hold::Frozen(why.to_string())),
        update: None,
    }
}

/// What a held soak does about the re-decision at its window's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowUp {
    /// Send a follow-up hop, delayed this many seconds.
    Send(u32),
    /// Send none: says what re-decides the Application instead.
    Leave(&'static str),
}

/// Who is deciding a soaking candidate, for [`soak_follow_up`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// The push of the candidate itself.
    ItsPush,
    /// A follow-up hop sent for this same image and candidate.
    ItsChain,
    /// Anything else: a sweep, a push of another image or tag, a hop for another candidate.
    Other,
}

/// One chain of follow-ups per Application, image and candidate, however many pushes and
/// sweeps see it soak (SQS delays a message by `max_delay` at most, so a long soak is a chain
/// of hops, each sending the next). The candidate's push starts the chain and each of its
/// hops continues it; a hop for a candidate since superseded ends. Anything else sends a
/// follow-up only for the window's last hop (`remaining` within `max_delay`): the sweep that
/// runs then lands on the window's end even when the chain was never started (the soak was
/// set after the push, or the push's follow-up could not be sent), and at most a few such
/// last hops exist, where a chain per sweep made a soak of days cost the square of its
/// sweeps.
pub fn soak_follow_up(decider: Decider, remaining_seconds: i64, max_delay: u32) -> FollowUp {
    // A second past the window: the re-decision finds the image old enough.
    let wait = u64::try_from(remaining_seconds.max(0)).unwrap_or(0) + 1;
    let delay = u32::try_from(wait).unwrap_or(u32::MAX).min(max_delay);
    let last_hop = wait <= u64::from(max_delay);
    match decider {
        Decider::ItsPush | Decider::ItsChain => FollowUp::Send(delay),
        Decider::Other if last_hop => FollowUp::Send(delay),
        Decider::Other => FollowUp::Leave(
            "the chain its push started re-decides it, or the sweep in the window's last 15 minutes",
        ),
    }
}

/// The soak (`min-age`): an update stands only once the image it writes has been in ECR
/// for `min_age`, by ECR's push time (not the event's delivery). Held, it says when it is
/// written, which is when the caller re-decides (a newer push inside the window is chosen
/// then instead, and starts its own window).
pub fn soak(
    outcome: ImageOutcome,
    config: &ImageConfig,
    pushed_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> (ImageOutcome, Option<OffsetDateTime>) {
    let (Some(min_age), Some(update)) = (config.min_age, outcome.update.as_ref()) else {
        return (outcome, None);
    };
    let soak = humantime_of(min_age);
    let Some(pushed) = pushed_at else {
        let reason = format!(
            "min-age {soak}: ECR gave no push time for `{}`, so its age is unknown",
            update.to
        );
        return (outcome.refuse(Action::Skipped, &reason, false), None);
    };
    let ripe = pushed + min_age;
    if now >= ripe {
        let note = format!("soaked {soak} (pushed {})", rfc3339(pushed));
        return (outcome.noted(&note), None);
    }
    let reason = format!(
        "soaking: `{}` was pushed {}, min-age {soak}: written from {} on",
        update.to,
        rfc3339(pushed),
        rfc3339(ripe)
    );
    (outcome.refuse(Action::Skipped, &reason, false), Some(ripe))
}

fn rfc3339(time: OffsetDateTime) -> String {
    time.format(&Rfc3339).unwrap_or_default()
}

/// `1h30m`, `45s`: a duration as the annotation writes it.
fn humantime_of(duration: std::time::Duration) -> String {
    let total = duration.as_secs();
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    let mut text = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
        }
    }
    if text.is_empty() { "0s".into() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-12-03 12:00 UTC);
    const IMAGE: &str = "1.dkr.ecr.r.amazonaws.com/web";

    fn soak_config(min_age: Option<&str>) -> crate::appconfig::annotations::AppConfig {
        use crate::appconfig::annotations::{OWN_PREFIX, PREFIX};
        let mut map = std::collections::BTreeMap::from([(
            format!("{PREFIX}image-list"),
            format!("app={IMAGE}"),
        )]);
        if let Some(value) = min_age {
            map.insert(format!("{OWN_PREFIX}app.min-age"), value.into());
        }
        crate::appconfig::annotations::AppConfig::parse(&map).unwrap()
    }

    #[test]
    fn a_soak_holds_an_update_until_the_image_is_old_enough_by_ecrs_push_time() {
        let cfg = soak_config(Some("30m"));
        let image = cfg.images[0].config.as_ref().unwrap();
        use crate::decision::decide::Move;
        use crate::policy::TagRef;
        let pushed = datetime!(2026-12-03 12:00 UTC);
        let update = || ImageOutcome {
            entries: vec![
                Entry::new("argocd", "web", Some("app"), IMAGE).with(Action::Updated, "newer"),
            ],
            update: Some(Move {
                to: TagRef::tag("1.1.0"),
                sources: vec![0],
                check_platforms: None,
                pushed_at: None,
                digest: None,
                rolls_back: false,
            }),
        };
        // (case, pushed at, now, held, follow-up at)
        let cases: &[(
            &str,
            Option<OffsetDateTime>,
            OffsetDateTime,
            bool,
            Option<OffsetDateTime>,
        )] = &[
            (
                "just pushed",
                Some(pushed),
                pushed,
                true,
                Some(datetime!(2026-12-03 12:30 UTC)),
            ),
            (
                "a second before the window ends",
                Some(pushed),
                datetime!(2026-12-03 12:29:59 UTC),
                true,
                Some(datetime!(2026-12-03 12:30 UTC)),
            ),
            (
                "exactly when it ends",
                Some(pushed),
                datetime!(2026-12-03 12:30 UTC),
                false,
                None,
            ),
            (
                "long after",
                Some(pushed),
                datetime!(2026-12-04 00:00 UTC),
                false,
                None,
            ),
            ("no push time from ECR", None, pushed, true, None),
        ];
        for (case, at, now, held, follow_up) in cases {
            let (outcome, next) = soak(update(), image, *at, *now);
            assert_eq!(
                outcome.update.is_none(),
                *held,
                "{case}: {:?}",
                outcome.entries
            );
            assert_eq!(&next, follow_up, "{case}");
        }
        let (held, _) = soak(update(), image, Some(pushed), pushed);
        assert!(
            held.entries[0].reason.contains("soaking: `1.1.0` was pushed 2026-12-03T12:00:00Z, min-age 30m: written from 2026-12-03T12:30:00Z on"),
            "{}",
            held.entries[0].reason
        );
        let unset = soak_config(None);
        let (kept, next) = soak(
            update(),
            unset.images[0].config.as_ref().unwrap(),
            Some(pushed),
            pushed,
        );
        assert!(
            kept.update.is_some() && next.is_none(),
            "no min-age, no soak"
        );
        assert_eq!(humantime_of(std::time::Duration::from_secs(5400)), "1h30m");
    }

    #[test]
    fn a_failed_rollout_holds_the_image_until_a_newer_push_or_a_person_releases_it() {
        use crate::appconfig::annotations::{
            AUDIT_ANNOTATION, AppConfig, FAILED_ROLLOUTS_ANNOTATION, OWN_PREFIX, PREFIX,
        };
        use crate::decision::decide::Move;
        use crate::policy::TagRef;
        use serde_json::json;
        use time::macros::datetime;
        const IMAGE: &str = "1.dkr.ecr.r.amazonaws.com/web";
        let config = |hold: bool| {
            let mut map = std::collections::BTreeMap::new();
            map.insert(format!("{PREFIX}image-list"), format!("app={IMAGE}"));
            if hold {
                map.insert(format!("{OWN_PREFIX}app.hold-on-failure"), "true".into());
            }
            AppConfig::parse(&map).unwrap().images[0]
                .config
                .clone()
                .unwrap()
        };
        // The candidate `1.2`, pushed at `pushed` (ECR's time), if known.
        let update = |pushed: Option<OffsetDateTime>| {
            let mut entry =
                Entry::new("argocd", "web", Some("app"), IMAGE).with(Action::Updated, "newer");
            (entry.from, entry.to) = (Some("1.1".into()), Some("1.2".into()));
            ImageOutcome {
                entries: vec![entry],
                update: Some(Move {
                    to: TagRef::tag("1.2"),
                    sources: vec![0],
                    check_platforms: None,
                    pushed_at: pushed,
                    digest: None,
                    rolls_back: false,
                }),
            }
        };
        // `1.1` failed at 10:05 (or timed out); the audit record's last write moved `last`,
        // and the Application is `health`.
        let app = |failures: Option<&str>, last: &str, health: &str| {
            let record = json!({"time": "2026-12-03T11:00:00Z", "eventId": "e",
                "images": [{"image": last, "from": "2.0", "to": "2.1"}],
                "rollout": {"outcome": "confirmed", "at": "2026-12-03T11:02:00Z"}});
            let mut annotations = json!({AUDIT_ANNOTATION: record.to_string()});
            if let Some(failures) = failures {
                annotations[FAILED_ROLLOUTS_ANNOTATION] = json!(failures);
            }
            json!({"metadata": {"annotations": annotations}, "status": {"health": {"status": health}}})
        };
        let failed = |outcome: &str| {
            json!({IMAGE: {"to": "1.1", "outcome": outcome, "at": "2026-12-03T10:05:00Z", "reason": "Degraded"}})
                .to_string()
        };
        let before = Some(datetime!(2026-12-03 10:00 UTC));
        let after = Some(datetime!(2026-12-03 10:30 UTC));
        let api = "1.dkr.ecr.r.amazonaws.com/api";
        let cases = [
            ("held: a candidate pushed before the failure", true, app(Some(&failed("failed")), IMAGE, "Degraded"), before, true),
            ("held though the Application is Healthy again (a failed sync leaves it Healthy)", true, app(Some(&failed("failed")), IMAGE, "Healthy"), before, true),
            ("held after a timed-out rollout", true, app(Some(&failed("timed-out")), IMAGE, "Progressing"), before, true),
            ("held after another image's write and confirmed rollout", true, app(Some(&failed("failed")), api, "Healthy"), before, true),
            ("held when ECR gave no push time for the candidate", true, app(Some(&failed("failed")), IMAGE, "Healthy"), None, true),
            ("written: a candidate pushed after the failure", true, app(Some(&failed("failed")), IMAGE, "Degraded"), after, false),
            ("written: hold-on-failure is not set", false, app(Some(&failed("failed")), IMAGE, "Degraded"), before, false),
            ("written: a person deleted the failures", true, app(None, IMAGE, "Degraded"), before, false),
            ("written: a person edited the failures into something else", true, app(Some("released"), IMAGE, "Degraded"), before, false),
            (
                "written: only another image failed",
                true,
                app(Some(&json!({api: {"to": "2.1", "outcome": "failed", "at": "2026-12-03T10:05:00Z", "reason": "x"}}).to_string()), IMAGE, "Degraded"),
                before,
                false,
            ),
        ];
        for (case, hold, app, pushed, held) in cases {
            let outcome = hold_after_failure(update(pushed), &config(hold), &Application::of(&app));
            assert_eq!(outcome.update.is_none(), held, "{case}");
            if held {
                let entry = &outcome.entries[0];
                assert_eq!(entry.action, Action::Skipped, "{case}");
                assert!(
                    entry
                        .reason
                        .contains("rollout of `1.1` at 2026-12-03T10:05:00Z (hold-on-failure)"),
                    "{case}: {}",
                    entry.reason
                );
                assert!(
                    entry.reason.contains("would update `1.1` to `1.2`"),
                    "{case}: {}",
                    entry.reason
                );
            }
        }
    }

    #[test]
    fn freeze_values_read_as_written() {
        let cases: &[(&str, Result<Option<Freeze>, &str>)] = &[
            ("true", Ok(Some(Freeze::Indefinite))),
            (" true ", Ok(Some(Freeze::Indefinite))),
            ("false", Ok(None)),
            ("", Ok(None)),
            (
                "until=2026-12-24T18:00:00Z",
                Ok(Some(Freeze::Until(datetime!(2026-12-24 18:00 UTC)))),
            ),
            (
                "until=2026-12-24T18:00:00+09:00",
                Ok(Some(Freeze::Until(datetime!(2026-12-24 09:00 UTC)))),
            ),
            ("until=Christmas", Err("not an RFC 3339 time")),
            ("until=2026-12-24", Err("not an RFC 3339 time")),
            ("yes", Err("is not \"true\", \"false\"")),
            ("TRUE", Err("is not \"true\", \"false\"")),
        ];
        for (value, expected) in cases {
            match (parse_freeze(value), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{value}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{value}: {got}"),
                (got, want) => panic!("{value}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn a_freeze_holds_until_its_time_and_not_a_second_longer() {
        let app = || "the Application".to_string();
        let object = || "ImageUpdater argocd/team".to_string();
        let cases: &[(&str, Vec<(String, &str)>, &str)] = &[
            ("no freeze annotation anywhere", vec![], "open"),
            (
                "frozen indefinitely",
                vec![(app(), "true")],
                "frozen by `argocd-ecr-updater.io/freeze` on the Application",
            ),
            ("set to false", vec![(app(), "false")], "open"),
            (
                "until a later time",
                vec![(app(), "until=2026-12-03T12:00:01Z")],
                "until 2026-12-03T12:00:01Z",
            ),
            (
                "until exactly now",
                vec![(app(), "until=2026-12-03T12:00:00Z")],
                "open",
            ),
            (
                "until a time passed",
                vec![(app(), "until=2026-12-01T00:00:00Z")],
                "open",
            ),
            (
                "frozen by the object only",
                vec![(app(), "false"), (object(), "true")],
                "on ImageUpdater argocd/team",
            ),
            (
                "a past freeze beside a current one",
                vec![
                    (app(), "until=2026-12-01T00:00:00Z"),
                    (object(), "until=2027-01-01T00:00:00Z"),
                ],
                "until 2027-01-01T00:00:00Z",
            ),
            (
                "unreadable beside an open one",
                vec![(app(), "false"), (object(), "soon")],
                "unreadable: `argocd-ecr-updater.io/freeze: soon`",
            ),
        ];
        for (case, settings, expected) in cases {
            let verdict = match hold(settings, NOW) {
                Hold::Open => "open".to_string(),
                Hold::Frozen(reason) => reason,
                Hold::Unreadable(problem) => format!("unreadable: {problem}"),
            };
            assert!(verdict.contains(expected), "{case}: {verdict}");
        }
    }

    #[test]
    fn a_held_update_says_what_it_would_have_written_and_other_entries_stay() {
        let mut update = Entry::new("argocd", "web", Some("app"), "r/web").with(
            Action::Updated,
            "1.1.0 ranks above the current tag under semver",
        );
        update.from = Some("1.0.0".into());
        update.to = Some("1.1.0".into());
        let kept =
            Entry::new("argocd", "web", Some("db"), "r/db").with(Action::Unchanged, "already 2.0");
        let entries = vec![update, kept.clone()];
        assert_eq!(held(entries.clone(), &Hold::Open), entries);
        let frozen = held(entries.clone(), &Hold::Frozen("frozen by x".into()));
        assert_eq!(frozen[0].action, Action::Skipped);
        assert_eq!(frozen[0].to, None);
        assert!(
            frozen[0]
                .reason
                .starts_with("frozen by x: would update `1.0.0` to `1.1.0`"),
            "{}",
            frozen[0].reason
        );
        assert_eq!(frozen[1], kept);
        let unreadable = held(entries, &Hold::Unreadable("bad".into()));
        assert_eq!(unreadable[0].action, Action::Failed);
        assert!(
            !unreadable[0].retryable,
            "the user's to fix: a retry cannot help"
        );
        assert!(unreadable[0].reason.starts_with("configuration error: bad"));
    }

    #[test]
    fn one_chain_of_follow_ups_per_candidate_whoever_sees_it_soak() {
        let table = [
            (
                "its push starts the chain with a full hop",
                Decider::ItsPush,
                3_600,
                FollowUp::Send(900),
            ),
            (
                "its chain continues with the next hop",
                Decider::ItsChain,
                3_600,
                FollowUp::Send(900),
            ),
            (
                "its chain's last hop lands a second past the window",
                Decider::ItsChain,
                120,
                FollowUp::Send(121),
            ),
            (
                "a sweep early in a long window sends nothing",
                Decider::Other,
                7 * 24 * 3_600,
                FollowUp::Leave(
                    "the chain its push started re-decides it, or the sweep in the window's last 15 minutes",
                ),
            ),
            (
                "a sweep in the window's last hop sends it",
                Decider::Other,
                600,
                FollowUp::Send(601),
            ),
            (
                "a sweep a second before the last hop's reach sends it",
                Decider::Other,
                899,
                FollowUp::Send(900),
            ),
            (
                "a sweep a second too early for the last hop sends nothing",
                Decider::Other,
                900,
                FollowUp::Leave(
                    "the chain its push started re-decides it, or the sweep in the window's last 15 minutes",
                ),
            ),
            (
                "a window already over still waits a second",
                Decider::Other,
                -5,
                FollowUp::Send(1),
            ),
        ];
        for (case, decider, remaining, expected) in table {
            assert_eq!(soak_follow_up(decider, remaining, 900), expected, "{case}");
        }
    }
}
