//! Go's `path/filepath.Match` on Unix, which Image Updater applies to `ignore-tags`.
//!
//! Written by hand because no crate matches Go's rules: `[^…]` negates a class (`!` is a
//! literal), `\` escapes the next character, `*` and `?` never match `/`, a class needs at
//! least one range and refuses a bare `-`. The `glob` crate differs on all of these. Unlike
//! Go, which notices some malformed patterns only while matching (and Image Updater then
//! silently ignores nothing), a pattern is checked whole when it is parsed, so a typo is a
//! configuration error that names the pattern.

use std::fmt;

/// Why a pattern is malformed, in the words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPattern(pub &'static str);

impl fmt::Display for BadPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "syntax error in pattern ({})", self.0)
    }
}

/// A validated `filepath.Match` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoGlob {
    pattern: String,
    shape: Shape,
}

/// The common pattern forms, recognised once so matching a long tag list skips the general
/// algorithm. Each answers exactly as `filepath.Match` does: a star never spans a `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// No special characters: the name must equal it.
    Literal,
    /// `*` then a literal (`*-rc`): the name ends with it and the rest holds no `/`.
    StarThen(String),
    /// A literal then `*` (`dev-*`): the name starts with it and the rest holds no `/`.
    ThenStar(String),
    /// Anything else (classes, `?`, escapes, several stars).
    General,
}

impl Shape {
    fn of(pattern: &str) -> Self {
        let is_plain = |s: &str| !s.contains(['*', '?', '[', '\\']);
        if is_plain(pattern) {
            return Shape::Literal;
        }
        if let Some(rest) = pattern.strip_prefix('*')
            && is_plain(rest)
        {
            return Shape::StarThen(rest.to_string());
        }
        if let Some(rest) = pattern.strip_suffix('*')
            && is_plain(rest)
        {
            return Shape::ThenStar(rest.to_string());
        }
        Shape::General
    }
}

impl GoGlob {
    pub fn parse(pattern: &str) -> Result<Self, BadPattern> {
        let mut rest = pattern;
        while !rest.is_empty() {
            let (_, chunk, after) = scan_chunk(rest);
            match_chunk(chunk, "")?;
            rest = after;
        }
        Ok(Self {
            pattern: pattern.to_string(),
            shape: Shape::of(pattern),
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        match &self.shape {
            Shape::Literal => name == self.pattern,
            Shape::StarThen(suffix) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| !head.contains('/')),
            Shape::ThenStar(prefix) => name
                .strip_prefix(prefix.as_str())
                .is_some_and(|tail| !tail.contains('/')),
            Shape::General => matches(&self.pattern, name).unwrap_or(false),
        }
    }
}

/// What every name `pattern` matches starts with: the pattern up to its first special
/// character (`*`, `?`, `[` or the escaping `\`), each of the characters before it matching
/// only itself.
pub fn literal_prefix(pattern: &str) -> &str {
    let end = pattern.find(['*', '?', '[', '\\']).unwrap_or(pattern.len());
    &pattern[..end]
}

/// `filepath.Match(pattern, name)`, with Go's error for a malformed pattern.
pub fn matches(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let mut pattern = pattern;
    let mut name = name;
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing `*` matches the rest of the name unless it holds a `/`.
            return Ok(!name.contains('/'));
        }
        let (tail, ok) = match_chunk(chunk, name)?;
        // The last chunk must use up the name, or a later star could still match it.
        if ok && (tail.is_empty() || !pattern.is_empty()) {
            name = tail;
            continue;
        }
        if star {
            // The star takes one more byte each round, but never a `/`.
            for (i, byte) in name.bytes().enumerate() {
                if byte == b'/' {
                    break;
                }
                let Some(shorter) = name.get(i + 1..) else {
                    continue;
                };
                let (tail, ok) = match_chunk(chunk, shorter)?;
                if ok {
                    if pattern.is_empty() && !tail.is_empty() {
                        continue;
                    }
                    name = tail;
                    continue 'pattern;
                }
            }
        }
        // Go checks the rest of the pattern before answering "no match".
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            match_chunk(chunk, "")?;
            pattern = rest;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Splits off the leading stars and the run up to the next star outside a class.
fn scan_chunk(pattern: &str) -> (bool, &str, &str) {
    let trimmed = pattern.trim_start_matches('*');
    let star = trimmed.len() != pattern.len();
    let bytes = trimmed.as_bytes();
    let mut in_range = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if i + 1 < bytes.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (star, &trimmed[..i], &trimmed[i..])
}

/// Matches one star-free chunk at the start of `s`: the rest of `s` and whether it matched.
/// After a mismatch the chunk is still read to the end, so a malformed one is always noticed.
fn match_chunk<'a>(chunk: &str, s: &'a str) -> Result<(&'a str, bool), BadPattern> {
    let mut chunk = chunk;
    let mut s = s;
    let mut failed = false;
    while let Some(first) = chunk.chars().next() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match first {
            '[' => {
                let mut wanted = None;
                if !failed && let Some(c) = s.chars().next() {
                    wanted = Some(c);
                    s = &s[c.len_utf8()..];
                }
                chunk = &chunk[1..];
                let negated = chunk.starts_with('^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if ranges > 0 && chunk.starts_with(']') {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = class_char(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if let Some(rest) = chunk.strip_prefix('-') {
                        (hi, chunk) = class_char(rest)?;
                    }
                    if wanted.is_some_and(|c| lo <= c && c <= hi) {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            '?' => {
                if !failed {
                    match s.chars().next() {
                        Some('/') | None => failed = true,
                        Some(c) => s = &s[c.len_utf8()..],
                    }
                }
                chunk = &chunk[1..];
            }
            _ => {
                let literal = if first == '\\' {
                    chunk = &chunk[1..];
                    chunk
                        .chars()
                        .next()
                        .ok_or(BadPattern("a trailing `\\` escapes nothing"))?
                } else {
                    first
                };
                if !failed {
                    // Go compares bytes here; comparing whole characters agrees on valid UTF-8.
                    match s.chars().next() {
                        Some(c) if c == literal => s = &s[c.len_utf8()..],
                        _ => failed = true,
                    }
                }
                chunk = &chunk[literal.len_utf8()..];
            }
        }
    }
    Ok(if failed { ("", false) } else { (s, true) })
}

/// One (possibly escaped) character of a class, which must be followed by more pattern.
fn class_char(chunk: &str) -> Result<(char, &str), BadPattern> {
    let unclosed = BadPattern("a `[` class is not closed with `]`");
    let mut rest = chunk;
    match rest.chars().next() {
        None => return Err(unclosed),
        Some('-') => {
            return Err(BadPattern(
                "a `-` in a class must be escaped or between two characters",
            ));
        }
        Some(']') => {
            return Err(BadPattern(
                "a class needs a character before `]`; escape a literal `]` as `\\]`",
            ));
        }
        Some('\\') => rest = &rest[1..],
        Some(_) => {}
    }
    let c = rest
        .chars()
        .next()
        .ok_or(BadPattern("a trailing `\\` escapes nothing"))?;
    let rest = &rest[c.len_utf8()..];
    if rest.is_empty() {
        return Err(unclosed);
    }
    Ok((c, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's own `filepath.Match` table (`path/filepath/match_test.go`, Unix rows): pattern,
    /// name, whether it matches, whether Go reports the pattern as malformed.
    const GO_MATCH_TESTS: &[(&str, &str, bool, bool)] = &[
        ("abc", "abc", true, false),
        ("*", "abc", true, false),
        ("*c", "abc", true, false),
        ("a*", "a", true, false),
        ("a*", "abc", true, false),
        ("a*", "ab/c", false, false),
        ("a*/b", "abc/b", true, false),
        ("a*/b", "a/c/b", false, false),
        ("a*b*c*d*e*/f", "axbxcxdxe/f", true, false),
        ("a*b*c*d*e*/f", "axbxcxdxexxx/f", true, false),
        ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false, false),
        ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", false, false),
        ("a*b?c*x", "abxbbxdbxebxczzx", true, false),
        ("a*b?c*x", "abxbbxdbxebxczzy", false, false),
        ("ab[c]", "abc", true, false),
        ("ab[b-d]", "abc", true, false),
        ("ab[e-g]", "abc", false, false),
        ("ab[^c]", "abc", false, false),
        ("ab[^b-d]", "abc", false, false),
        ("ab[^e-g]", "abc", true, false),
        ("a\\*b", "a*b", true, false),
        ("a\\*b", "ab", false, false),
        ("a?b", "a☺b", true, false),
        ("a[^a]b", "a☺b", true, false),
        ("a???b", "a☺b", false, false),
        ("a[^a][^a][^a]b", "a☺b", false, false),
        ("[a-ζ]*", "α", true, false),
        ("*[a-ζ]", "A", false, false),
        ("a?b", "a/b", false, false),
        ("a*b", "a/b", false, false),
        ("[\\]a]", "]", true, false),
        ("[\\-]", "-", true, false),
        ("[x\\-]", "x", true, false),
        ("[x\\-]", "-", true, false),
        ("[x\\-]", "z", false, false),
        ("[\\-x]", "x", true, false),
        ("[\\-x]", "-", true, false),
        ("[\\-x]", "a", false, false),
        ("[]a]", "]", false, true),
        ("[-]", "-", false, true),
        ("[x-]", "x", false, true),
        ("[x-]", "-", false, true),
        ("[x-]", "z", false, true),
        ("[-x]", "x", false, true),
        ("[-x]", "-", false, true),
        ("[-x]", "a", false, true),
        ("\\", "a", false, true),
        ("[a-b-c]", "a", false, true),
        ("[", "a", false, true),
        ("[^", "a", false, true),
        ("[^bc", "a", false, true),
        ("a[", "a", false, true),
        ("a[", "ab", false, true),
        ("a[", "x", false, true),
        ("a/b[", "x", false, true),
        ("*x", "xxx", true, false),
    ];

    #[test]
    fn every_row_of_gos_own_match_table_gives_gos_answer() {
        for (pattern, name, matched, malformed) in GO_MATCH_TESTS {
            let got = matches(pattern, name);
            if *malformed {
                assert!(
                    got.is_err(),
                    "{pattern} ~ {name}: expected a bad pattern, got {got:?}"
                );
                assert!(GoGlob::parse(pattern).is_err(), "{pattern} parses");
            } else {
                assert_eq!(got, Ok(*matched), "{pattern} ~ {name}");
                let glob = GoGlob::parse(pattern).expect("Go accepts this pattern");
                assert_eq!(glob.matches(name), *matched, "{pattern} ~ {name} (parsed)");
            }
        }
    }

    #[test]
    fn a_caret_negates_a_class_and_a_bang_is_a_literal() {
        let table: &[(&str, &str, bool)] = &[
            ("v[^0-9]*", "va1", true),
            ("v[^0-9]*", "v1", false),
            ("v[!0-9]*", "v!", true),
            ("v[!0-9]*", "v1", true),
            ("v[!0-9]*", "va", false),
            ("!dev", "!dev", true),
            ("!dev", "prod", false),
        ];
        for (pattern, name, expected) in table {
            assert_eq!(
                GoGlob::parse(pattern).unwrap().matches(name),
                *expected,
                "{pattern} ~ {name}"
            );
        }
    }

    #[test]
    fn a_backslash_escapes_the_next_character() {
        let escaped = GoGlob::parse("1.0\\*").unwrap();
        assert!(escaped.matches("1.0*"));
        assert!(!escaped.matches("1.0.1"));
        assert!(GoGlob::parse("\\?").unwrap().matches("?"));
        assert!(!GoGlob::parse("\\?").unwrap().matches("a"));
    }

    #[test]
    fn matching_is_case_sensitive_as_in_go() {
        assert!(!GoGlob::parse("dev-*").unwrap().matches("DEV-1"));
    }

    #[test]
    fn the_short_cut_shapes_answer_exactly_as_the_general_algorithm() {
        let patterns = ["abc", "*-rc", "*", "dev-*", "a/b*", "*/x", "", "*c", "a*"];
        let names = [
            "abc", "1.0-rc", "-rc", "a/-rc", "dev-", "dev-1", "dev-a/b", "a/b", "a/bc", "a/b/c",
            "q/x", "/x", "", "c", "abc/", "a", "ab/c", "DEV-1",
        ];
        for pattern in patterns {
            let glob = GoGlob::parse(pattern).unwrap();
            assert_ne!(
                glob.shape,
                Shape::General,
                "{pattern} takes the general path"
            );
            for name in names {
                assert_eq!(
                    glob.matches(name),
                    matches(pattern, name).unwrap(),
                    "{pattern} ~ {name}"
                );
            }
        }
        assert_eq!(GoGlob::parse("a*b").unwrap().shape, Shape::General);
        assert_eq!(GoGlob::parse("**x").unwrap().shape, Shape::General);
        assert_eq!(GoGlob::parse("1.0\\*").unwrap().shape, Shape::General);
    }

    #[test]
    fn a_malformed_chunk_after_a_star_is_refused_at_parse_time() {
        // Go would only notice this while matching a name that reaches the chunk.
        assert_eq!(
            GoGlob::parse("*-[").unwrap_err(),
            BadPattern("a `[` class is not closed with `]`")
        );
        assert!(GoGlob::parse("release-*-[a-").is_err());
    }
}
