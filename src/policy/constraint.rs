//! Masterminds/semver v3 version constraints, the dialect Argo CD Image Updater speaks.
//!
//! Versions, their parsing and their ordering come from the `semver` crate. What is ours is
//! the constraint grammar, because Cargo's `VersionReq` differs from Masterminds in exactly
//! the places users hit: `||`, hyphen ranges, `!=`, a `v` prefix, wildcards after an
//! operator, and the pre-release rule. Masterminds checks pre-releases per comparator: a
//! comparator that carries no pre-release never matches a pre-release version. Cargo instead
//! lets a pre-release through when any comparator names the same `major.minor.patch`.

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

/// A parsed constraint: alternatives (`||`) of conjunctions (`,` or spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    source: String,
    alternatives: Vec<Vec<Comparator>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exact,
    NotEqual,
    Greater,
    GreaterEq,
    Less,
    LessEq,
    Tilde,
    Caret,
}

/// One comparator. `minor`/`patch` are `None` where the user left them out or wrote a
/// wildcard; `major` is `None` only for a bare `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    major: Option<u64>,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Prerelease,
}

impl Constraint {
    pub fn parse(source: &str) -> Result<Self, ConstraintError> {
        let mut alternatives = Vec::new();
        for alternative in source.split("||") {
            let alternative = alternative.trim();
            if alternative.is_empty() {
                return Err(ConstraintError::EmptyAlternative);
            }
            alternatives.push(parse_conjunction(alternative)?);
        }
        Ok(Self {
            source: source.trim().to_string(),
            alternatives,
        })
    }

    pub fn matches(&self, version: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|all| all.iter().all(|c| c.matches(version)))
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn parse_conjunction(text: &str) -> Result<Vec<Comparator>, ConstraintError> {
    // Commas and spaces both mean AND, but an operator may be followed by a space
    // (`>= 1.2`) and ` - ` joins a hyphen range; gather tokens with that in mind.
    let tokens: Vec<&str> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    let mut comparators = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        if tokens.get(i + 1) == Some(&"-") {
            let upper = tokens
                .get(i + 2)
                .ok_or_else(|| ConstraintError::BadHyphenRange(text.to_string()))?;
            comparators.push(parse_comparator(&format!(">={token}"))?);
            comparators.push(parse_comparator(&format!("<={upper}"))?);
            i += 3;
        } else if token == "-" {
            return Err(ConstraintError::BadHyphenRange(text.to_string()));
        } else if token.chars().all(|c| "<>=!~^".contains(c)) {
            let version = tokens
                .get(i + 1)
                .ok_or_else(|| ConstraintError::BadComparator(token.to_string()))?;
            comparators.push(parse_comparator(&format!("{token}{version}"))?);
            i += 2;
        } else {
            comparators.push(parse_comparator(token)?);
            i += 1;
        }
    }
    Ok(comparators)
}

fn parse_comparator(token: &str) -> Result<Comparator, ConstraintError> {
    let bad = || ConstraintError::BadComparator(token.to_string());
    let (op, rest) = [
        (">=", Op::GreaterEq),
        ("=>", Op::GreaterEq),
        ("<=", Op::LessEq),
        ("=<", Op::LessEq),
        ("!=", Op::NotEqual),
        ("~>", Op::Tilde),
        (">", Op::Greater),
        ("<", Op::Less),
        ("=", Op::Exact),
        ("~", Op::Tilde),
        ("^", Op::Caret),
    ]
    .iter()
    .find_map(|(prefix, op)| token.strip_prefix(prefix).map(|rest| (*op, rest)))
    .unwrap_or((Op::Exact, token));
    let rest = rest.strip_prefix(['v', 'V']).unwrap_or(rest);
    let rest = rest.split_once('+').map_or(rest, |(r, _build)| r);
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Prerelease::new(p).map_err(|_| bad())?),
        None => (rest, Prerelease::EMPTY),
    };
    let mut numbers = [None; 3];
    let mut wildcard_seen = false;
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(bad());
    }
    for (slot, part) in numbers.iter_mut().zip(&parts) {
        if matches!(*part, "x" | "X" | "*") {
            wildcard_seen = true;
        } else if wildcard_seen {
            // `1.x.3` means nothing in any dialect.
            return Err(bad());
        } else {
            *slot = Some(parse_number(part).ok_or_else(bad)?);
        }
    }
    Ok(Comparator {
        op,
        major: numbers[0],
        minor: numbers[1],
        patch: numbers[2],
        pre,
    })
}

impl Comparator {
    fn matches(&self, v: &Version) -> bool {
        if !v.pre.is_empty() && self.pre.is_empty() {
            return false;
        }
        let Some(major) = self.major else {
            // `*`, `x`: anything, bar the pre-release rule above. `<*` and `>*` match nothing
            // in Masterminds either.
            return matches!(
                self.op,
                Op::Exact | Op::GreaterEq | Op::LessEq | Op::Tilde | Op::Caret
            );
        };
        let minor = self.minor.unwrap_or(0);
        let patch = self.patch.unwrap_or(0);
        let mut low = Version::new(major, minor, patch);
        low.pre = self.pre.clone();
        let v = &strip_build(v);
        let complete = self.minor.is_some() && self.patch.is_some();
        // The first version past the prefix the user wrote, `1.2` -> `1.3.0-0`: `-0` is the
        // lowest version there is with that core, so pre-releases of 1.3.0 fall outside too.
        let past_prefix = || match (self.minor, self.patch) {
            (None, _) => upper(major + 1, 0, 0),
            (Some(m), None) => upper(major, m + 1, 0),
            (Some(m), Some(p)) => upper(major, m, p + 1),
        };
        match self.op {
            Op::Exact if complete => *v == low,
            Op::Exact => *v >= low && *v < past_prefix(),
            Op::NotEqual if complete => *v != low,
            Op::NotEqual => !(*v >= low && *v < past_prefix()),
            Op::Greater if complete => *v > low,
            Op::Greater => *v >= past_prefix(),
            Op::GreaterEq => *v >= low,
            Op::Less => *v < low,
            Op::LessEq if complete => *v <= low,
            Op::LessEq => *v < past_prefix(),
            Op::Tilde => {
                let end = match self.minor {
                    None => upper(major + 1, 0, 0),
                    Some(m) => upper(major, m + 1, 0),
                };
                *v >= low && *v < end
            }
            Op::Caret => {
                let end = if major > 0 || self.minor.is_none() {
                    upper(major + 1, 0, 0)
                } else if minor > 0 || self.patch.is_none() {
                    upper(0, minor + 1, 0)
                } else {
                    upper(0, 0, patch + 1)
                };
                *v >= low && *v < end
            }
        }
    }
}

fn upper(major: u64, minor: u64, patch: u64) -> Version {
    let mut v = Version::new(major, minor, patch);
    // Lowest possible pre-release: an exclusive bound here also keeps out 1.3.0-alpha.
    v.pre = Prerelease::new("0").unwrap_or(Prerelease::EMPTY);
    v
}

fn strip_build(v: &Version) -> Version {
    // Masterminds ignores build metadata when comparing; `semver` would order by it.
    let mut v = v.clone();
    v.build = BuildMetadata::EMPTY;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(constraint: &str, version: &str) -> bool {
        let c = Constraint::parse(constraint).unwrap();
        let v = parse_lenient_version(version).unwrap();
        c.matches(&v)
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
    fn pre_releases_are_excluded_unless_the_comparator_carries_one() {
        let table: &[(&str, &str, bool)] = &[
            ("*", "2.3.0-rc.0", false),
            (">=1.0", "2.3.0-rc.0", false),
            ("2.x-0", "2.3.0-rc.0", true),
            (">=2.3.0-0", "2.3.0-rc.0", true),
            ("~1.2.0-0", "1.2.5-beta", true),
            ("~1.2.0-0", "1.3.0-alpha", false),
            (">=1.2.3-beta.1", "1.2.3-beta.2", true),
            (">=1.2.3-beta.1", "1.2.3-alpha", false),
            // Masterminds checks each comparator on its own: the upper bound has no
            // pre-release, so it refuses one. Cargo's VersionReq would accept this.
            (">=1.0.0-0, <2.0.0", "1.5.0-beta", false),
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

    #[test]
    fn invalid_constraints_are_errors_that_name_the_bad_part() {
        let table: &[(&str, ConstraintError)] = &[
            ("latest", ConstraintError::BadComparator("latest".into())),
            ("1.x.3", ConstraintError::BadComparator("1.x.3".into())),
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
