//! The scan gate's limits, read and compared without I/O: what `scan-gate` allows, and
//! whether a completed scan's findings stay within it. Read with the image's configuration,
//! so a bad value is reported whether or not anything moves; the gate itself, which asks ECR
//! for the findings and knows what a push, a scan event and a sweep may release, is
//! `gates/scan.rs`.
//!
//! Configured with `argocd-ecr-updater.io/<alias>.scan-gate` (or `…/scan-gate` for every
//! image of the Application): `critical=0,high=3` (at most that many findings of each named
//! severity; the others are not limited), or `none` (a completed scan with no finding at all).

use std::collections::BTreeMap;
use std::fmt;

use crate::failure::Refused;

/// Findings per severity, upper-case names as ECR reports them.
pub type ScanCounts = BTreeMap<String, u64>;

/// The severities ECR and Inspector report.
pub const SEVERITIES: [&str; 6] = [
    "CRITICAL",
    "HIGH",
    "MEDIUM",
    "LOW",
    "INFORMATIONAL",
    "UNDEFINED",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanGate {
    /// No finding of any severity.
    NoFindings,
    /// At most this many findings per named severity.
    AtMost(BTreeMap<String, u64>),
}

impl ScanGate {
    pub fn parse(text: &str) -> Result<Self, Refused> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") {
            return Ok(Self::NoFindings);
        }
        let mut limits = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((severity, count)) = part.split_once('=') else {
                return Err(Refused::from(format!(
                    "`{part}`: expected `<severity>=<count>` such as `critical=0,high=3`, or `none`"
                )));
            };
            let severity = severity.trim().to_ascii_uppercase();
            if !SEVERITIES.contains(&severity.as_str()) {
                return Err(Refused::from(format!(
                    "`{severity}` is not a severity: use {}",
                    SEVERITIES.map(str::to_ascii_lowercase).join(", ")
                )));
            }
            let count = count
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("`{part}`: the count is not a whole number"))?;
            limits.insert(severity, count);
        }
        if limits.is_empty() {
            return Err(Refused::from(
                "empty: set limits such as `critical=0,high=3`, or `none`",
            ));
        }
        Ok(Self::AtMost(limits))
    }

    /// Whether a completed scan's findings pass; the reason names what exceeded.
    pub fn verdict(&self, counts: &ScanCounts) -> Result<(), Refused> {
        let found = |severity: &str| counts.get(severity).copied().unwrap_or(0);
        let over: Vec<String> = match self {
            Self::NoFindings => counts
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(s, n)| format!("{} {n}", s.to_ascii_lowercase()))
                .collect(),
            Self::AtMost(limits) => limits
                .iter()
                .filter(|(severity, max)| found(severity) > **max)
                .map(|(severity, max)| {
                    format!(
                        "{} {} > {max}",
                        severity.to_ascii_lowercase(),
                        found(severity)
                    )
                })
                .collect(),
        };
        if over.is_empty() {
            Ok(())
        } else {
            Err(Refused::from(format!(
                "the scan found more than scan-gate `{self}` allows: {}",
                over.join(", ")
            )))
        }
    }
}

impl fmt::Display for ScanGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFindings => f.write_str("none"),
            Self::AtMost(limits) => {
                let parts: Vec<String> = limits
                    .iter()
                    .map(|(s, n)| format!("{}={n}", s.to_ascii_lowercase()))
                    .collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

/// Findings as the report shows them: `critical 0, medium 2`.
pub fn describe(counts: &ScanCounts) -> String {
    if counts.values().all(|n| *n == 0) {
        return "no findings".into();
    }
    counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| format!("{} {n}", s.to_ascii_lowercase()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> ScanCounts {
        pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    #[test]
    fn limits_are_read_case_insensitively_and_bad_ones_are_specific_errors() {
        let gate = ScanGate::parse("Critical=0, high=3").unwrap();
        assert_eq!(gate.to_string(), "critical=0,high=3");
        assert_eq!(ScanGate::parse("NONE").unwrap(), ScanGate::NoFindings);
        for (bad, words) in [
            ("critical", "expected `<severity>=<count>`"),
            ("severe=1", "not a severity"),
            ("high=-1", "not a whole number"),
            ("", "empty"),
        ] {
            let error = ScanGate::parse(bad).unwrap_err();
            assert!(error.contains(words), "{bad}: {error}");
        }
    }

    #[test]
    fn a_scan_within_the_limits_passes_and_one_over_names_what_exceeded() {
        let gate = ScanGate::parse("critical=0,high=3").unwrap();
        assert_eq!(
            gate.verdict(&counts(&[("HIGH", 3), ("MEDIUM", 40)])),
            Ok(())
        );
        let refused = gate
            .verdict(&counts(&[("CRITICAL", 1), ("HIGH", 4)]))
            .unwrap_err();
        assert!(
            refused.contains("critical 1 > 0") && refused.contains("high 4 > 3"),
            "{refused}"
        );
    }

    #[test]
    fn none_lets_only_a_scan_without_findings_through() {
        assert_eq!(
            ScanGate::NoFindings.verdict(&counts(&[("CRITICAL", 0)])),
            Ok(())
        );
        let refused = ScanGate::NoFindings
            .verdict(&counts(&[("LOW", 2)]))
            .unwrap_err();
        assert!(refused.contains("low 2"), "{refused}");
    }
}
