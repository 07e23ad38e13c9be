//! Kubernetes label selectors in their text form (`APPLICATION_LABEL_SELECTOR`), read as the
//! API server reads them (`labels.Parse` in k8s.io/apimachinery), so the function can hold an
//! Application it read to the same selector the listing sent: a sweep shard or a re-read may
//! meet an Application the selector no longer (or never) selected.
//!
//! Grammar: requirements separated by `,`; each is `key`, `!key`, `key=value`, `key==value`,
//! `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`, `key>N` or `key<N`. Pure, no I/O.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    DoesNotExist(String),
    /// `=`, `==` and `in`: the label is present with one of the values.
    In(String, Vec<String>),
    /// `!=` and `notin`: the label is absent, or has none of the values.
    NotIn(String, Vec<String>),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed selector: every requirement must hold. The empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{selector}` is not a label selector: {why}")]
pub struct SelectorError {
    selector: String,
    why: String,
}

/// A token of the selector's text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    Comma,
    Open,
    Close,
}

/// White space as the API server's lexer knows it: any other character is part of a word,
/// which a key or value then refuses.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let token = match c {
            c if is_space(c) => continue,
            ',' => Token::Comma,
            '(' => Token::Open,
            ')' => Token::Close,
            '>' => Token::Greater,
            '<' => Token::Less,
            '=' if chars.peek() == Some(&'=') => {
                chars.next();
                Token::DoubleEquals
            }
            '=' => Token::Equals,
            '!' if chars.peek() == Some(&'=') => {
                chars.next();
                Token::NotEquals
            }
            '!' => Token::Not,
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if is_space(next) || ",()<>=!".contains(next) {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                Token::Word(word)
            }
        };
        out.push(token);
    }
    out
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// characters, alphanumeric at both ends, `-_.` inside.
fn is_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    prefix_ok && !name.is_empty() && is_value(name)
}

/// A label value: empty, or at most 63 characters, alphanumeric at both ends, `-_.` inside.
fn is_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_none_or(u8::is_ascii_alphanumeric)
        && bytes.last().is_none_or(u8::is_ascii_alphanumeric)
}

impl Selector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let fail = |why: String| SelectorError {
            selector: text.escape_debug().to_string(),
            why,
        };
        let tokens = tokens(text);
        let mut requirements = Vec::new();
        let mut at = 0;
        let key_at = |at: usize| -> Result<String, String> {
            match tokens.get(at) {
                Some(Token::Word(key)) if is_key(key) => Ok(key.clone()),
                Some(Token::Word(key)) => Err(format!("`{key}` is not a label key")),
                other => Err(format!("expected a label key, found {other:?}")),
            }
        };
        let value_at = |at: usize| -> Result<(String, usize), String> {
            match tokens.get(at) {
                Some(Token::Word(value)) if is_value(value) => Ok((value.clone(), at + 1)),
                Some(Token::Word(value)) => Err(format!("`{value}` is not a label value")),
                // `key=` selects the empty value.
                None | Some(Token::Comma) => Ok((String::new(), at)),
                other => Err(format!("expected a label value, found {other:?}")),
            }
        };
        while at < tokens.len() {
            let requirement = if tokens[at] == Token::Not {
                let key = key_at(at + 1).map_err(fail)?;
                at += 2;
                Requirement::DoesNotExist(key)
            } else {
                let key = key_at(at).map_err(fail)?;
                at += 1;
                match tokens.get(at) {
                    None | Some(Token::Comma) => Requirement::Exists(key),
                    Some(Token::Equals | Token::DoubleEquals) => {
                        let (value, next) = value_at(at + 1).map_err(fail)?;
                        at = next;
                        Requirement::In(key, vec![value])
                    }
                    Some(Token::NotEquals) => {
                        let (value, next) = value_at(at + 1).map_err(fail)?;
                        at = next;
                        Requirement::NotIn(key, vec![value])
                    }
                    Some(Token::Greater | Token::Less) => {
                        let greater = tokens[at] == Token::Greater;
                        let number = match tokens.get(at + 1) {
                            Some(Token::Word(n)) => n.parse::<i64>().map_err(|_| {
                                fail(format!("`{n}` after `>` or `<` is not an integer"))
                            })?,
                            other => {
                                return Err(fail(format!("expected an integer, found {other:?}")));
                            }
                        };
                        at += 2;
                        if greater {
                            Requirement::GreaterThan(key, number)
                        } else {
                            Requirement::LessThan(key, number)
                        }
                    }
                    Some(Token::Word(operator)) if operator == "in" || operator == "notin" => {
                        let set = operator == "in";
                        if tokens.get(at + 1) != Some(&Token::Open) {
                            return Err(fail(format!("`{operator}` needs a `(`")));
                        }
                        let (values, next) = value_set(&tokens, at + 2, operator).map_err(fail)?;
                        at = next;
                        if set {
                            Requirement::In(key, values)
                        } else {
                            Requirement::NotIn(key, values)
                        }
                    }
                    Some(other) => {
                        return Err(fail(format!(
                            "expected an operator after `{key}`, found {other:?}"
                        )));
                    }
                }
            };
            requirements.push(requirement);
            match tokens.get(at) {
                None => {}
                Some(Token::Comma) if at + 1 < tokens.len() => at += 1,
                Some(Token::Comma) => return Err(fail("it ends with `,`".into())),
                Some(other) => return Err(fail(format!("expected `,`, found {other:?}"))),
            }
        }
        Ok(Self(requirements))
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|requirement| match requirement {
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::GreaterThan(key, n) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::LessThan(key, n) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }
}

/// The values of `in (…)` or `notin (…)` from `tokens[at]`, just after the `(`, and where
/// the tokens go on after the `)`.
fn value_set(
    tokens: &[Token],
    mut at: usize,
    operator: &str,
) -> Result<(Vec<String>, usize), String> {
    let mut values = Vec::new();
    loop {
        match tokens.get(at) {
            Some(Token::Close) if values.is_empty() => {
                return Err(format!("`{operator} ()` needs at least one value"));
            }
            Some(Token::Close) => return Ok((values, at + 1)),
            Some(Token::Word(value)) if is_value(value) => {
                values.push(value.clone());
                at += 1;
                match tokens.get(at) {
                    Some(Token::Comma) => at += 1,
                    Some(Token::Close) => {}
                    other => return Err(format!("expected `,` or `)`, found {other:?}")),
                }
            }
            other => {
                return Err(format!(
                    "expected a label value in `{operator} (…)`, found {other:?}"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_form_of_requirement_selects_as_the_api_server_does() {
        let team_a = labels(&[("team", "a"), ("tier", "web"), ("replicas", "3")]);
        let unlabelled = labels(&[]);
        for (selector, selects_team_a, selects_unlabelled) in [
            ("", true, true),
            ("team", true, false),
            ("!team", false, true),
            ("team=a", true, false),
            ("team==a", true, false),
            ("team = a", true, false),
            ("team=b", false, false),
            ("team!=b", true, true),
            ("team!=a", false, true),
            ("team in (a, b)", true, false),
            ("team in (b)", false, false),
            ("team notin (b,c)", true, true),
            ("team notin (a)", false, true),
            ("team=a,tier=web", true, false),
            ("team=a,tier=db", false, false),
            ("replicas>2", true, false),
            ("replicas<3", false, false),
            ("example.com/owner", false, false),
            ("team=", false, false),
        ] {
            let parsed = Selector::parse(selector).unwrap_or_else(|e| panic!("{selector}: {e}"));
            assert_eq!(
                parsed.matches(&team_a),
                selects_team_a,
                "{selector} on team a"
            );
            assert_eq!(
                parsed.matches(&unlabelled),
                selects_unlabelled,
                "{selector} on no labels"
            );
        }
    }

    #[test]
    fn a_selector_the_api_server_would_refuse_is_refused_with_the_reason() {
        for (selector, words) in [
            ("team=a,", "ends with `,`"),
            ("team in ()", "at least one value"),
            ("team in (a", "expected"),
            ("team in a", "needs a `(`"),
            ("=a", "expected a label key"),
            ("team=a=b", "expected `,`"),
            ("team>x", "not an integer"),
            ("Team_/x=a", "not a label key"),
            ("team=a b", "expected `,`"),
            ("team=\u{2028}a", "not a label value"),
            ("team\u{85}=a", "not a label key"),
            ("team=-a", "not a label value"),
        ] {
            let error = Selector::parse(selector).unwrap_err().to_string();
            assert!(error.contains(words), "{selector}: {error}");
        }
    }
}
