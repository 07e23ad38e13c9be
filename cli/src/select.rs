//! `argocd-ecr-updater-cli select`: the tag policy on a list of tags, offline, the way
//! `argocd-image-updater test` lets users try a configuration before they annotate.
//!
//! Input is one tag per line, optionally followed by a tab and an RFC 3339 push time, and
//! optionally by another tab and a digest. Output is one JSON object.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use serde::Serialize;

use argocd_ecr_updater::policy::{
    AllowTags, IgnoreTags, PolicyError, Strategy, TagInfo, TagPolicy,
};

/// What `select` prints.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct SelectOutput {
    pub selected: Option<String>,
    pub strategy: Strategy,
    pub considered: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error("{0}")]
    Strategy(#[from] argocd_ecr_updater::policy::UnknownStrategy),
    #[error("{0}")]
    Policy(#[from] PolicyError),
    #[error("line {line}: {problem}")]
    BadLine { line: usize, problem: String },
    #[error("cannot read the tags: {0}")]
    Read(String),
}

/// What `select` was asked, as plain strings: validation happens here, not in clap, so the
/// messages are the same ones annotations get.
pub struct SelectRequest<'a> {
    pub strategy: &'a str,
    pub constraint: Option<&'a str>,
    pub allow_tags: Option<&'a str>,
    pub ignore_tags: Option<&'a str>,
}

/// Selects from one tag per line of `tags`, read as a stream.
pub fn run(
    request: &SelectRequest<'_>,
    tags: impl std::io::BufRead,
) -> Result<SelectOutput, SelectError> {
    let strategy: Strategy = request.strategy.parse()?;
    let allow = request.allow_tags.map(AllowTags::parse).transpose()?;
    let ignore = request.ignore_tags.map(IgnoreTags::parse).transpose()?;
    let policy = TagPolicy::new(
        strategy,
        request.constraint,
        allow.unwrap_or(AllowTags::Any),
        ignore.unwrap_or_default(),
    )?;
    let (selected, considered) = policy.select_streaming(read_tags(tags))?;
    Ok(SelectOutput {
        selected: selected.map(|t| t.to_string()),
        strategy,
        considered,
    })
}

/// The tags of a stream, one a line; blank lines are skipped, a bad one is an error that
/// names its line number.
fn read_tags(tags: impl std::io::BufRead) -> impl Iterator<Item = Result<TagInfo, SelectError>> {
    tags.lines().enumerate().filter_map(|(i, line)| match line {
        Ok(line) if line.trim().is_empty() => None,
        Ok(line) => Some(parse_line(i + 1, &line)),
        Err(e) => Some(Err(SelectError::Read(e.to_string()))),
    })
}

fn parse_line(line: usize, text: &str) -> Result<TagInfo, SelectError> {
    let bad = |problem: String| SelectError::BadLine { line, problem };
    let mut fields = text.trim_end_matches('\r').split('\t');
    let name = fields.next().unwrap_or_default().trim();
    if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad(format!(
            "`{}` is not a tag: tags have no spaces or control characters",
            name.escape_debug()
        )));
    }
    let pushed_at = fields
        .next()
        .filter(|f| !f.is_empty())
        .map(|f| {
            OffsetDateTime::parse(f, &Rfc3339).map_err(|e| {
                bad(format!(
                    "push time `{f}` is not RFC 3339 ({e}), e.g. 2025-08-25T15:30:12Z"
                ))
            })
        })
        .transpose()?;
    let digest = fields
        .next()
        .filter(|f| !f.is_empty())
        .map(|f| {
            if is_digest(f) {
                Ok(f.to_string())
            } else {
                Err(bad(format!(
                    "`{f}` is not a digest like sha256:<64 hex digits>"
                )))
            }
        })
        .transpose()?;
    if let Some(extra) = fields.next() {
        return Err(bad(format!(
            "unexpected fourth field `{extra}`: expected tag[<TAB>push time[<TAB>digest]]"
        )));
    }
    Ok(TagInfo {
        name: name.to_string(),
        pushed_at,
        digest,
        archived: false,
    })
}

/// `sha256:` and 64 lowercase hex digits: the only digests ECR produces.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn parse_tags(text: &str) -> Result<Vec<TagInfo>, SelectError> {
        read_tags(text.as_bytes()).collect()
    }

    fn request<'a>(strategy: &'a str, constraint: Option<&'a str>) -> SelectRequest<'a> {
        SelectRequest {
            strategy,
            constraint,
            allow_tags: None,
            ignore_tags: None,
        }
    }

    const DIGEST_A: &str =
        "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn lines_carry_a_tag_and_optionally_a_push_time_and_a_digest() {
        let text = format!("1.0\n\n2.0\t2025-08-25T15:30:12Z\nlatest\t\t{DIGEST_A}\r\n");
        let tags = parse_tags(&text).unwrap();
        assert_eq!(tags.len(), 3);
        assert!(tags[1].pushed_at.is_some());
        assert_eq!(tags[2].digest.as_deref(), Some(DIGEST_A));
    }

    #[test]
    fn select_uses_the_old_strategy_names_too() {
        let text = "20250825-120000\t2025-08-25T12:00:00Z\n20250825-153012\t2025-08-25T15:30:12Z\n";
        let out = run(&request("latest", None), text.as_bytes()).unwrap();
        assert_eq!(out.selected.as_deref(), Some("20250825-153012"));
        assert_eq!(out.strategy, Strategy::NewestBuild);
        assert_eq!(out.considered, 2);
    }

    #[test]
    fn digest_selection_prints_tag_at_digest() {
        let text = format!("latest\t2025-08-25T12:00:00Z\t{DIGEST_A}\n");
        let out = run(&request("digest", Some("latest")), text.as_bytes()).unwrap();
        assert_eq!(out.selected, Some(format!("latest@{DIGEST_A}")));
    }

    #[test]
    fn invalid_inputs_name_what_is_wrong() {
        let table: &[(SelectRequest<'_>, &str, &str)] = &[
            (
                request("fastest", None),
                "1.0",
                "unknown update strategy `fastest`",
            ),
            (
                request("semver", Some("~>>1")),
                "1.0",
                "invalid semver constraint",
            ),
            (
                SelectRequest {
                    allow_tags: Some("regexp:["),
                    ..request("semver", None)
                },
                "1.0",
                "does not compile",
            ),
            (
                request("semver", None),
                "1.0\tyesterday",
                "line 1: push time `yesterday` is not RFC 3339",
            ),
            (
                request("semver", None),
                "ok\n1.0\t\tmd5:00",
                "line 2: `md5:00` is not a digest",
            ),
            (request("semver", None), "a b", "is not a tag"),
            (
                request("semver", None),
                "a\t\t\textra",
                "unexpected fourth field",
            ),
        ];
        for (req, text, expected) in table {
            let message = run(req, text.as_bytes()).unwrap_err().to_string();
            assert!(message.contains(expected), "{message}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::tests::parse_tags;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn select_input_lines_are_read_or_refused_with_their_line_number(
            lines in prop::collection::vec(prop_oneof!["\\PC{0,30}", "[a-z0-9._-]{1,12}(\t2025-08-25T15:30:1[0-9]Z)?"], 0..8),
        ) {
            let text = lines.join("\n");
            match parse_tags(&text) {
                Err(SelectError::BadLine { line, .. }) => {
                    // The line it names is one that is not blank, and every line before it reads.
                    let named = lines.get(line - 1).ok_or_else(|| TestCaseError::fail("line out of range"))?;
                    prop_assert!(!named.trim().is_empty());
                    let before = lines[..line - 1].join("\n");
                    prop_assert!(parse_tags(&before).is_ok());
                }
                Ok(tags) => prop_assert_eq!(tags.len(), lines.iter().filter(|l| !l.trim().is_empty()).count()),
                Err(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}
