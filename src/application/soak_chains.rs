//! The soak follow-up chain each image's held candidate has, remembered on the Application
//! (`argocd-ecr-updater.io/soak-chains`: image → candidate, the number of the hop on its way,
//! when it is due), so that one chain follows a candidate however often its push, a hop or
//! a sweep is delivered: SQS and EventBridge deliver at least once, and each delivery of a
//! link would otherwise start or continue a chain of its own (pure).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::application::remembered;

pub const SOAK_CHAINS_ANNOTATION: &str = "argocd-ecr-updater.io/soak-chains";

/// How long past its due time a hop may still come (SQS's delay is a lower bound; a
/// throttled or retried invocation comes later): until then its chain is taken as alive.
pub const LATE_HOP_SECONDS: i64 = 15 * 60;

/// One image's chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    pub candidate: String,
    /// The number of the hop on its way (1 for the first).
    pub sent: u32,
    /// When it is due, RFC 3339.
    pub due: String,
}

/// Who asks to send a hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// A push or a sweep: starts a chain unless one follows the candidate.
    Start,
    /// Hop number `n` of the candidate's chain, delivered: sends hop `n + 1`.
    Hop(u32),
}

/// The chains `app` remembers.
pub fn of(app: &Value) -> BTreeMap<String, Chain> {
    remembered::read(app, SOAK_CHAINS_ANNOTATION)
}

/// The chains after sending the next hop of `image`'s `candidate`, due at `due`, and that
/// hop's number; `Err`: why no hop is sent (another delivery's chain follows it).
pub fn claim(
    chains: &BTreeMap<String, Chain>,
    image: &str,
    candidate: &str,
    link: Link,
    now: OffsetDateTime,
    due: OffsetDateTime,
) -> Result<(BTreeMap<String, Chain>, u32), String> {
    let same = chains.get(image).filter(|c| c.candidate == candidate);
    let due_at = |c: &Chain| OffsetDateTime::parse(&c.due, &Rfc3339).ok();
    let alive =
        same.filter(|c| due_at(c).is_some_and(|at| (now - at).whole_seconds() < LATE_HOP_SECONDS));
    let number = match (link, same, alive) {
        // Its hop lands no later than this one would: it re-decides in time.
        (Link::Start, _, Some(chain)) if due_at(chain).is_some_and(|at| at <= due) => {
            return Err(format!(
                "its follow-up chain already follows {candidate} (hop {} due at {})",
                chain.sent, chain.due
            ));
        }
        // A later hop than the chain's on its way (the window was shortened, or the chain is
        // lost): it takes the chain over, and the hop it replaces ends on arrival.
        (Link::Start, Some(chain), _) => chain.sent.saturating_add(1),
        (Link::Start, None, _) => 1,
        (Link::Hop(n), Some(chain), _) if chain.sent > n => {
            return Err(format!(
                "hop {n} was delivered again or replaced: hop {} of its chain is on its way",
                chain.sent
            ));
        }
        (Link::Hop(n), _, _) => n.saturating_add(1),
    };
    let mut next = chains.clone();
    next.insert(
        image.to_string(),
        Chain {
            candidate: candidate.to_string(),
            sent: number,
            due: due.format(&Rfc3339).unwrap_or_default(),
        },
    );
    remembered::bound(&mut next, |c| c.due.as_str());
    Ok((next, number))
}

/// The guarded JSON patch that records `next` on `app` as read: the annotation's text as
/// read, or, where it is absent, the Application's `resourceVersion` (JSON patch cannot test
/// for absence, and two deliveries must not both add it).
pub fn patch(app: &Value, next: &BTreeMap<String, Chain>) -> Value {
    let mut ops = Vec::new();
    if app["metadata"]["annotations"][SOAK_CHAINS_ANNOTATION].is_null() {
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": app["metadata"]["resourceVersion"]}));
        if !app["metadata"]["annotations"].is_object() {
            ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
        }
    }
    ops.extend(remembered::patch_ops(app, SOAK_CHAINS_ANNOTATION, next));
    Value::Array(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const IMAGE: &str = "1.dkr.ecr.r.amazonaws.com/web";
    const NOW: OffsetDateTime = datetime!(2026-12-03 10:00:00 UTC);
    const DUE: OffsetDateTime = datetime!(2026-12-03 10:15:00 UTC);

    fn chain(candidate: &str, sent: u32, due: &str) -> BTreeMap<String, Chain> {
        [(
            IMAGE.to_string(),
            Chain {
                candidate: candidate.into(),
                sent,
                due: due.into(),
            },
        )]
        .into()
    }

    #[test]
    fn one_chain_follows_a_candidate_however_often_its_links_are_delivered() {
        let none = BTreeMap::new();
        let cases: Vec<(&str, BTreeMap<String, Chain>, Link, Result<u32, &str>)> = vec![
            (
                "a push with no chain starts one",
                none.clone(),
                Link::Start,
                Ok(1),
            ),
            (
                "the same push delivered again finds the chain it started",
                chain("2", 1, "2026-12-03T10:15:00Z"),
                Link::Start,
                Err("its follow-up chain already follows 2"),
            ),
            (
                "a sweep in the window finds the chain alive",
                chain("2", 7, "2026-12-03T09:50:00Z"),
                Link::Start,
                Err("its follow-up chain already follows 2 (hop 7"),
            ),
            (
                "a chain whose hop is long overdue is taken as lost: a push takes it over",
                chain("2", 7, "2026-12-03T09:40:00Z"),
                Link::Start,
                Ok(8),
            ),
            (
                "a chain landing after the window's end (the window was shortened) is taken over",
                chain("2", 2, "2026-12-03T10:20:00Z"),
                Link::Start,
                Ok(3),
            ),
            (
                "a chain for an older candidate does not hold the new one's",
                chain("1", 3, "2026-12-03T10:15:00Z"),
                Link::Start,
                Ok(1),
            ),
            (
                "the hop on its way sends the next",
                chain("2", 3, "2026-12-03T10:00:00Z"),
                Link::Hop(3),
                Ok(4),
            ),
            (
                "a second delivery of a hop already continued sends nothing",
                chain("2", 4, "2026-12-03T10:15:00Z"),
                Link::Hop(3),
                Err("hop 3 was delivered again or replaced: hop 4"),
            ),
            (
                "a hop with no chain remembered (the annotation removed) continues",
                none,
                Link::Hop(5),
                Ok(6),
            ),
        ];
        for (case, chains, link, expected) in cases {
            let got = claim(&chains, IMAGE, "2", link, NOW, DUE);
            match (got, expected) {
                (Ok((next, n)), Ok(want)) => {
                    assert_eq!(n, want, "{case}");
                    assert_eq!(next[IMAGE].sent, want, "{case}");
                    assert_eq!(next[IMAGE].due, "2026-12-03T10:15:00Z", "{case}");
                }
                (Err(why), Err(want)) => assert!(why.starts_with(want), "{case}: {why}"),
                (got, want) => panic!("{case}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn the_first_claim_is_guarded_by_the_resource_version_and_later_ones_by_the_text() {
        let next = chain("2", 1, "2026-12-03T10:15:00Z");
        let bare = json!({"metadata": {"resourceVersion": "7", "annotations": {}}});
        let ops = patch(&bare, &next);
        assert_eq!(ops[0]["path"], "/metadata/resourceVersion");
        assert_eq!(ops[1]["op"], "add");
        let held = json!({"metadata": {"resourceVersion": "9", "annotations": {SOAK_CHAINS_ANNOTATION: "{}"}}});
        let ops = patch(&held, &next);
        assert_eq!(ops[0]["op"], "test");
        assert_eq!(ops[0]["value"], "{}");
        assert_eq!(ops.as_array().unwrap().len(), 2);
    }
}
