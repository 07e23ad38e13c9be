//! Semver constraints and tags from arbitrary text: parse, then match, never panic.
#![no_main]

use argocd_ecr_updater::policy::constraint::{Constraint, parse_lenient_version};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (constraint, versions) = text.split_once('\n').unwrap_or((&text, "1.2.3"));
    if let Ok(c) = Constraint::parse(constraint) {
        for v in versions
            .split_whitespace()
            .filter_map(parse_lenient_version)
        {
            let _ = c.matches(&v);
        }
    }
});
