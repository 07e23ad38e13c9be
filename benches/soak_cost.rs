//! What a soak costs in invocations: the follow-ups that re-decide one Application while one
//! candidate soaks, counted on a timeline of its push, the scheduled sweeps and the hops SQS
//! hands back, each hop's sender decided by the function's own rule
//! (`decision::controls::soak_follow_up`), beside the rule it replaced (every push, sweep and
//! hop that saw the candidate soaking sent a follow-up, each starting its own chain).
//!
//! Sweeps are counted apart: they run on their schedule whatever soaks. The figures are exact
//! counts of a deterministic timeline, not timings, so one run says all.
//!
//! `cargo bench --bench soak_cost`. Prints figures; asserts nothing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use argocd_ecr_updater::decision::controls::{Decider, FollowUp, soak_follow_up};
use argocd_ecr_updater::sweep::queue::MAX_DELAY_SECONDS;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// One chain per candidate.
    OneChain,
    /// Every decision that held sent a follow-up.
    EveryDecision,
}

/// Follow-up invocations until the window ends, for a soak of `soak` seconds, sweeps every
/// `sweep` seconds (starting `phase` seconds after the push; `None`: no sweeps).
fn follow_ups(rule: Rule, soak: i64, sweep: Option<i64>, phase: i64) -> u64 {
    // Pending hops by arrival time.
    let mut hops: BinaryHeap<Reverse<i64>> = BinaryHeap::new();
    let mut invocations = 0;
    let decide = |decider: Decider, now: i64, hops: &mut BinaryHeap<Reverse<i64>>| {
        let remaining = soak - now;
        // At the window's end the image has soaked: it is written, nothing more is sent.
        if remaining <= 0 {
            return;
        }
        let decider = match rule {
            Rule::OneChain => decider,
            Rule::EveryDecision => Decider::ItsChain,
        };
        if let FollowUp::Send(delay) = soak_follow_up(decider, remaining, MAX_DELAY_SECONDS) {
            hops.push(Reverse(now + i64::from(delay)));
        }
    };
    decide(Decider::ItsPush, 0, &mut hops);
    let mut next_sweep = sweep.map(|_| phase);
    loop {
        let next_hop = hops.peek().map(|Reverse(t)| *t);
        match (next_hop, next_sweep) {
            (Some(hop), Some(s)) if s < hop && s <= soak => {
                decide(Decider::Other, s, &mut hops);
                next_sweep = sweep.map(|every| s + every);
            }
            (None, Some(s)) if s <= soak => {
                decide(Decider::Other, s, &mut hops);
                next_sweep = sweep.map(|every| s + every);
            }
            (Some(hop), _) => {
                hops.pop();
                invocations += 1;
                decide(Decider::ItsChain, hop, &mut hops);
            }
            _ => break,
        }
    }
    invocations
}

fn main() {
    let soaks = [("30m", 30 * 60), ("2h", 2 * 3_600), ("7d", 7 * 24 * 3_600)];
    let sweeps = [
        ("rate(15 minutes), the default", Some(15 * 60)),
        ("rate(5 minutes)", Some(5 * 60)),
        ("no schedule", None),
    ];
    println!("soak | sweep schedule | follow-up invocations, one chain | the rule it replaced");
    println!("---|---|---|---");
    for (soak_name, soak) in soaks {
        for (sweep_name, sweep) in sweeps {
            // The first sweep 7 minutes after the push: neither aligned with the hops nor
            // with the window's end.
            let one = follow_ups(Rule::OneChain, soak, sweep, 7 * 60);
            let every = follow_ups(Rule::EveryDecision, soak, sweep, 7 * 60);
            println!("{soak_name} | {sweep_name} | {one} | {every}");
        }
    }
}
