//! Masterminds/semver v3 version constraints, the dialect Argo CD Image Updater speaks.
//!
//! Versions, their parsing and their ordering come from the `semver` crate. What is ours is
//! the constraint grammar, because Cargo's `VersionReq` differs from Masterminds in exactly
//! the places users hit: `||`, hyphen ranges, `!=`, a `v` prefix, wildcards after an
//! operator, and the pre-release rule. The grammar and every comparison are Masterminds
//! v3.4.0's, branch for branch, checked against its own test table: a pre-release version
//! matches only an AND group in which some comparator names a pre-release (then every
//! comparator of that group may match it). Cargo instead lets a pre-release through only
//! when a comparator names the same `major.minor.patch`.

use std::cmp::Ordering;
use std::fmt;

use semver::{BuildMetadata, Prerelease, Version};

/// Why a constraint or a tag could not be read as a version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    #[error("the constraint is empty between `||`")]
    EmptyAlternative,
    #[error(
        "`{0}` is not a version comparator (expected e.g. `1.2.3`, `>=1.2`, `~1.2`, `^0.1`, `1.x`)"
    )]
    BadComparator(String),
    #[error("the hyphen range `{0}` needs a version on both sides of ` - `")]
    BadHyphenRange(String),
    #[error("the constraint grammar did not compile: {0}")]
    Grammar(String),
}

/// A tag read leniently as Masterminds does: `v1.2.3`, `1.2`, `1` and build metadata.
pub fn parse_lenient_version(tag: &str) -> Option<Version> {
    let rest = tag.strip_prefix('v').unwrap_or(tag);
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (rest, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let mut parts = core.split('.');
    let major = parse_number(parts.next()?)?;
    let minor = parts.next().map(parse_number).unwrap_or(Some(0))?;
    let patch = parts.next().map(parse_number).unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    let mut version = Version::new(major, minor, patch);
    if let Some(pre) = pre {
        version.pre = Prerelease::new(pre).ok().filter(|p| !p.is_empty())?;
    }
    if let Some(build) = build {
        version.build = BuildMetadata::new(build).ok().filter(|b| !b.is_empty())?;
    }
    Some(version)
}

fn parse_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A parsed constraint: alternatives (`||`) of conjunctions (`,` or spaces), each
/// conjunction remembering whether any of its comparators names a pre-release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    source: String,
    alternatives: Vec<Conjunction>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Conjunction {
    comparators: Vec<Comparator>,
    /// Masterminds: a comparator with a pre-release opens its whole AND group to
    /// pre-release versions.
    admits_pre_releases: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `=` or no operator: equal, or a tilde range where the version is partial.
    TildeOrEqual,
    NotEqual,
    Greater,
    Less,
    GreaterEq,
    LessEq,
    Tilde,
    Caret,
}

/// One comparator as Masterminds keeps it: the version with wildcards and missing parts
/// filled with zeros, and which parts were "dirty" (left out or a wildcard).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Version,
    dirty: bool,
    minor_dirty: bool,
    patch_dirty: bool,
}

/// Masterminds' grammar, with RE2's `\s` (`[\t\n\f\r ]`) spelled out. A version part is
/// `[0-9|x|X|\*]+`: the `|` inside the class is Masterminds' own.
const WS: &str = r"[\t\n\f\r ]";
const VERSION: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";

struct Grammar {
    one: regex::Regex,
    range: regex::Regex,
    find: regex::Regex,
    valid: regex::Regex,
}

fn grammar() -> Result<&'static Grammar, ConstraintError> {
    static GRAMMAR: std::sync::LazyLock<Result<Grammar, String>> = std::sync::LazyLock::new(|| {
        let build = |pattern: String| regex::Regex::new(&pattern).map_err(|e| e.to_string());
        Ok(Grammar {
            one: build(format!(r"^{WS}*({OPS}){WS}*({VERSION}){WS}*$"))?,
            range: build(format!(r"{WS}*({VERSION}){WS}+-{WS}+({VERSION}){WS}*"))?,
            find: build(format!(r"({OPS}){WS}*({VERSION})"))?,
            valid: build(format!(
                r"^({WS}*({OPS}){WS}*({VERSION}){WS}*)((?:{WS}+|,{WS}*)({OPS}){WS}*({VERSION}){WS}*)*$"
            ))?,
        })
    });
    GRAMMAR
        .as_ref()
        .map_err(|e| ConstraintError::Grammar(e.clone()))
}

impl Constraint {
    pub fn parse(source: &str) -> Result<Self, ConstraintError> {
        let grammar = grammar()?;
        let rewritten = rewrite_ranges(grammar, source);
        let mut alternatives = Vec::new();
        for alternative in rewritten.split("||") {
            if alternative.trim().is_empty() {
                return Err(ConstraintError::EmptyAlternative);
            }
            if !grammar.valid.is_match(alternative) {
                let text = alternative.trim().to_string();
                return Err(if text.split_whitespace().any(|t| t == "-") {
                    ConstraintError::BadHyphenRange(text)
                } else {
                    ConstraintError::BadComparator(text)
                });
            }
            let comparators = grammar
                .find
                .find_iter(alternative)
                .map(|found| parse_comparator(grammar, found.as_str()))
                .collect::<Result<Vec<_>, _>>()?;
            let admits_pre_releases = comparators.iter().any(|c| !c.version.pre.is_empty());
            alternatives.push(Conjunction {
                comparators,
                admits_pre_releases,
            });
        }
        Ok(Self {
            source: source.trim().to_string(),
            alternatives,
        })
    }

    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|all| {
            all.comparators
                .iter()
                .all(|c| c.matches(version, all.admits_pre_releases))
        })
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// `a - b` becomes `>= a, <= b ` wherever it occurs, as Masterminds rewrites it before
/// anything else.
fn rewrite_ranges(grammar: &Grammar, source: &str) -> String {
    let mut out = source.to_string();
    for captures in grammar.range.captures_iter(source) {
        let (Some(whole), Some(low), Some(high)) =
            (captures.get(0), captures.get(1), captures.get(11))
        else {
            continue;
        };
        out = out.replacen(
            whole.as_str(),
            &format!(">= {}, <= {} ", low.as_str(), high.as_str()),
            1,
        );
    }
    out
}

fn parse_comparator(grammar: &Grammar, token: &str) -> Result<Comparator, ConstraintError> {
    let bad = || ConstraintError::BadComparator(token.trim().to_string());
    let captures = grammar.one.captures(token).ok_or_else(bad)?;
    let group = |i: usize| captures.get(i).map_or("", |m| m.as_str());
    let op = match group(1) {
        "" | "=" => Op::TildeOrEqual,
        "!=" => Op::NotEqual,
        ">" => Op::Greater,
        "<" => Op::Less,
        ">=" | "=>" => Op::GreaterEq,
        "<=" | "=<" => Op::LessEq,
        "~" | "~>" => Op::Tilde,
        _ => Op::Caret,
    };
    let is_x = |part: &str| matches!(part.trim_start_matches('.'), "x" | "X" | "*");
    let (major, minor, patch, pre) = (group(3), group(4), group(5), group(6));
    let (text, dirty, minor_dirty, patch_dirty) = if is_x(major) {
        (format!("0.0.0{pre}"), true, false, false)
    } else if is_x(minor) || minor.is_empty() {
        (format!("{major}.0.0{pre}"), true, true, false)
    } else if is_x(patch) || patch.is_empty() {
        (format!("{major}{minor}.0{pre}"), true, false, true)
    } else {
        (group(2).to_string(), false, false, false)
    };
    let version = parse_lenient_version(&text).ok_or_else(bad)?;
    Ok(Comparator {
        op,
        version,
        dirty,
        minor_dirty,
        patch_dirty,
    })
}

/// Masterminds' order: build metadata ignored, a release above its pre-releases.
fn compare(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| match (a.pre.is_empty(), b.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => a.pre.cmp(&b.pre),
        })
}

impl Comparator {
    /// Masterminds v3.4.0's `constraint*` functions, branch for branch.
    fn matches(&self, v: &Version, include_pre: bool) -> bool {
        if !v.pre.is_empty() && !include_pre {
            return false;
        }
        let c = &self.version;
        match self.op {
            Op::NotEqual => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    } else if self.minor_dirty {
                        return false;
                    } else if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    } else if self.patch_dirty {
                        if !v.pre.is_empty() || !c.pre.is_empty() {
                            return v.pre != c.pre;
                        }
                        return false;
                    }
                }
                compare(v, c) != Ordering::Equal
            }
            Op::Greater => {
                if !self.dirty {
                    return compare(v, c) == Ordering::Greater;
                }
                if v.major > c.major {
                    true
                } else if v.major < c.major || self.minor_dirty {
                    false
                } else if self.patch_dirty {
                    v.minor > c.minor
                } else {
                    compare(v, c) == Ordering::Greater
                }
            }
            Op::Less => compare(v, c) == Ordering::Less,
            Op::GreaterEq => compare(v, c) != Ordering::Less,
            Op::LessEq => {
                if !self.dirty {
                    return compare(v, c) != Ordering::Greater;
                }
                !(v.major > c.major
                    || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            Op::Tilde => self.tilde(v),
            Op::TildeOrEqual if self.dirty => self.tilde(v),
            Op::TildeOrEqual => compare(v, c) == Ordering::Equal,
            Op::Caret => {
                if compare(v, c) == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
        }
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.version;
        if compare(v, c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        v.major == c.major && (v.minor == c.minor || self.minor_dirty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(constraint: &str, version: &str) -> bool {
        let c = Constraint::parse(constraint).unwrap();
        let v = parse_lenient_version(version).unwrap();
        c.matches(&v)
    }

    /// Masterminds' own table, all 244 rows, as Image Updater's semver strategy sees them.
    #[test]
    fn masterminds_own_constraint_table_matches_row_for_row() {
        let table = include_str!("masterminds-constraints-v3.4.0.tsv");
        let mut rows = 0;
        let mut wrong = Vec::new();
        for line in table
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let mut fields = line.split('\t');
            let (Some(constraint), Some(version), Some(expected)) =
                (fields.next(), fields.next(), fields.next())
            else {
                panic!("malformed row {line:?}");
            };
            rows += 1;
            // The rows with no constraint come from Masterminds' single-comparator test;
            // Image Updater asks for `*` when no constraint is set, which reads the same.
            let constraint = if constraint.is_empty() {
                "*"
            } else {
                constraint
            };
            let got = check(constraint, version);
            if got != (expected == "true") {
                wrong.push(format!(
                    "{constraint} against {version}: {got}, expected {expected}"
                ));
            }
        }
        assert_eq!(rows, 244);
        assert!(
            wrong.is_empty(),
            "{} rows differ:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn constraint_forms_match_as_masterminds_documents_them() {
        let table: &[(&str, &str, bool)] = &[
            // exact, with partial versions widening to a prefix
            ("1.2.3", "1.2.3", true),
            ("=1.2.3", "1.2.4", false),
            ("1.2", "1.2.9", true),
            ("1.2", "1.3.0", false),
            ("v1.2.3", "1.2.3", true),
            ("!=1.2.3", "1.2.4", true),
            ("!=1.2", "1.2.7", false),
            // comparisons
            (">1.2.3", "1.2.4", true),
            (">1.2", "1.2.9", false),
            (">1.2", "1.3.0", true),
            (">=1.2", "1.2.0", true),
            ("=>1.2", "1.1.9", false),
            ("<1.2", "1.1.99", true),
            ("<1.2", "1.2.0", false),
            ("<=1.2", "1.2.99", true),
            ("<=1.2.3", "1.2.4", false),
            (">= 1.2, < 3.0.0", "2.9.9", true),
            (">= 1.2 < 3.0.0", "3.0.0", false),
            // tilde
            ("~1.2.3", "1.2.9", true),
            ("~1.2.3", "1.3.0", false),
            ("~1.2", "1.2.0", true),
            ("~1", "1.9.0", true),
            ("~1", "2.0.0", false),
            ("~1.x", "1.5.0", true),
            // caret
            ("^1.2.3", "1.9.0", true),
            ("^1.2.3", "2.0.0", false),
            ("^0.2.3", "0.2.9", true),
            ("^0.2.3", "0.3.0", false),
            ("^0.1", "0.1.7", true),
            ("^0.1", "0.2.0", false),
            ("^0.0.3", "0.0.3", true),
            ("^0.0.3", "0.0.4", false),
            ("^0.0", "0.0.9", true),
            ("^0", "0.9.0", true),
            ("^0", "1.0.0", false),
            // wildcards
            ("1.x", "1.9.9", true),
            ("1.x", "2.0.0", false),
            ("1.2.*", "1.2.5", true),
            ("1.2.X", "1.3.0", false),
            (">=1.2.x", "1.2.0", true),
            ("<=2.x", "2.9.0", true),
            ("<=2.x", "3.0.0", false),
            ("*", "9.9.9", true),
            ("x", "0.0.1", true),
            // hyphen ranges and alternatives
            ("1.2 - 1.4.5", "1.2.0", true),
            ("1.2 - 1.4.5", "1.4.5", true),
            ("1.2 - 1.4.5", "1.4.6", false),
            ("2.3.4 - 4.5", "4.5.9", true),
            ("2.3.4 - 4.5", "4.6.0", false),
            ("^1.0 || ^3.0", "3.1.0", true),
            ("^1.0 || ^3.0", "2.1.0", false),
            // lenient tags
            ("^1.2", "v1.3", true),
            ("1", "1", true),
            ("^1.0", "1.2.3+build.5", true),
        ];
        for (constraint, version, expected) in table {
            assert_eq!(
                check(constraint, version),
                *expected,
                "{constraint} against {version}"
            );
        }
    }

    #[test]
    fn pre_releases_are_excluded_unless_a_comparator_of_their_and_group_carries_one() {
        let table: &[(&str, &str, bool)] = &[
            ("*", "2.3.0-rc.0", false),
            (">=1.0", "2.3.0-rc.0", false),
            ("2.x-0", "2.3.0-rc.0", true),
            (">=2.3.0-0", "2.3.0-rc.0", true),
            ("~1.2.0-0", "1.2.5-beta", true),
            ("~1.2.0-0", "1.3.0-alpha", false),
            (">=1.2.3-beta.1", "1.2.3-beta.2", true),
            (">=1.2.3-beta.1", "1.2.3-alpha", false),
            // One comparator with a pre-release opens its whole AND group to them...
            (">=1.0.0-0, <2.0.0", "1.5.0-beta", true),
            // ...but not the other alternatives.
            ("<2.0.0 || >=3.0.0-0", "1.5.0-beta", false),
            ("<2.0.0 || >=3.0.0-0", "3.1.0-beta", true),
        ];
        for (constraint, version, expected) in table {
            assert_eq!(
                check(constraint, version),
                *expected,
                "{constraint} against {version}"
            );
        }
    }

    /// Where Cargo's `VersionReq` (the nearest crate) answers differently, we answer as
    /// Masterminds does. Each row shows both answers, so a change in either is caught.
    #[test]
    fn differences_from_cargos_version_req_are_deliberate_and_masterminds_wins() {
        let table: &[(&str, &str, Option<bool>, bool)] = &[
            // A comparator carrying a pre-release admits any pre-release above it in
            // Masterminds; Cargo only those of the same major.minor.patch.
            (">=1.2.3-beta.1", "1.2.4-beta", Some(false), true),
            // Syntax Cargo does not have at all.
            ("^1.0 || ^3.0", "3.1.0", None, true),
            ("1.2 - 1.4.5", "1.3.0", None, true),
            ("v1.2.3", "1.2.3", None, true),
            ("!=1.2.3", "1.2.4", None, true),
        ];
        for (constraint, version, cargo, ours) in table {
            let v = semver::Version::parse(version).unwrap();
            let cargo_answer = semver::VersionReq::parse(constraint)
                .ok()
                .map(|r| r.matches(&v));
            assert_eq!(cargo_answer, *cargo, "cargo on {constraint} / {version}");
            assert_eq!(
                check(constraint, version),
                *ours,
                "ours on {constraint} / {version}"
            );
        }
    }

    #[test]
    fn tags_are_read_leniently_but_not_loosely() {
        assert_eq!(parse_lenient_version("v1.2"), Some(Version::new(1, 2, 0)));
        assert_eq!(parse_lenient_version("7"), Some(Version::new(7, 0, 0)));
        let date = parse_lenient_version("20250825-153012").unwrap();
        assert_eq!(date.major, 20250825);
        assert_eq!(date.pre.as_str(), "153012");
        for not_a_version in [
            "latest", "", "v", "1.2.3.4", "1..2", "1.2.3-", "1.2.3+", "-1.2", "1.2.3-ü",
        ] {
            assert_eq!(
                parse_lenient_version(not_a_version),
                None,
                "{not_a_version}"
            );
        }
    }

    /// Masterminds' quirks, kept because Image Updater users get them there.
    #[test]
    fn masterminds_quirks_are_kept() {
        let table: &[(&str, &str, bool)] = &[
            // A tilde on 0.0.0 admits every release.
            ("~0.0.0", "4.1.0", true),
            // A wildcard after a wildcard part is still that wildcard.
            ("1.x.3", "1.9.0", true),
            // `>*` is "above 0.0.0".
            (">*", "0.0.1", true),
            (">*", "0.0.0", false),
            // `<=1.2` with the patch left out ignores the patch.
            ("<=1.2", "1.2.99", true),
        ];
        for (constraint, version, expected) in table {
            assert_eq!(
                check(constraint, version),
                *expected,
                "{constraint} against {version}"
            );
        }
    }

    #[test]
    fn invalid_constraints_are_errors_that_name_the_bad_part() {
        let table: &[(&str, ConstraintError)] = &[
            ("latest", ConstraintError::BadComparator("latest".into())),
            ("^1.0 ||", ConstraintError::EmptyAlternative),
            (">=", ConstraintError::BadComparator(">=".into())),
            ("1.0 -", ConstraintError::BadHyphenRange("1.0 -".into())),
            ("1.2.3.4", ConstraintError::BadComparator("1.2.3.4".into())),
        ];
        for (constraint, expected) in table {
            assert_eq!(
                Constraint::parse(constraint).as_ref(),
                Err(expected),
                "{constraint}"
            );
        }
    }
}
