//! Editing a YAML file in place: change one scalar, add a missing key or list entry, drop a
//! key, and leave every other byte as it was (comments, key order, quoting, indentation,
//! anchors, further documents).
//!
//! Git write-back edits files people maintain by hand. Re-serialising them would drop their
//! comments and reorder their keys, so the edit is a splice into the original text at the
//! positions the parser reports. Only the first document is edited (Helm and Kustomize read
//! only that one); anything the splice cannot do safely (a block scalar, a value that is an
//! alias, a flow collection to add to) is refused with the path and the reason.

use std::borrow::Cow;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlEditError {
    #[error("not valid YAML: {0}")]
    Syntax(String),
    #[error("cannot edit `{path}`: {why}")]
    Unsupported { path: String, why: String },
    #[error(
        "the file nests deeper than {limit} levels, more than any Helm values or Kustomize file needs; it is not edited"
    )]
    TooDeep { limit: usize },
}

/// How deep a file's collections may nest before it is refused.
pub const MAX_DEPTH: usize = 100;

/// One step of a path: a mapping key or a sequence index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// One part of a Helm key as Image Updater splits it: `name` or `name[<index>]` (its
/// `^(.*)\[(.*)\]$`); the index as Go's `Atoi` reads it.
fn helm_part(part: &str) -> Result<(&str, Option<i64>), YamlEditError> {
    let Some(inner) = part.strip_suffix(']') else {
        return Ok((part, None));
    };
    // Greedy `(.*)` before `\[`: the last `[` opens the index.
    let Some((name, index)) = inner.rsplit_once('[') else {
        return Ok((part, None));
    };
    let digits = index.strip_prefix(['+', '-']).unwrap_or(index);
    let id = if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        None
    } else {
        index.parse::<i64>().ok()
    };
    match id {
        Some(id) => Ok((name, Some(id))),
        None => Err(YamlEditError::Unsupported {
            path: part.to_string(),
            why: format!("id \"{index}\" in a yaml array must be a number, as in `images[0].tag`"),
        }),
    }
}

#[derive(Debug, Clone)]
enum Node {
    Scalar {
        value: String,
        style: ScalarStyle,
        /// Byte range of the scalar's own text (quotes included, anchor and tag excluded).
        range: (usize, usize),
    },
    Map {
        entries: Vec<Entry>,
        flow: bool,
        /// Byte offset where the mapping's content ends (where new keys go).
        end: usize,
    },
    Seq {
        items: Vec<Node>,
        flow: bool,
        /// Column of the items' `-`, and where the sequence ends.
        column: usize,
        end: usize,
    },
    Alias,
}

#[derive(Debug, Clone)]
struct Entry {
    key: String,
    /// Byte offset of the key and its column.
    key_start: usize,
    column: usize,
    value: Node,
}

/// The first document of a YAML text, parsed with byte positions.
#[derive(Debug, Clone)]
pub struct Document<'a> {
    text: &'a str,
    root: Option<Node>,
}

struct Builder<'a> {
    text: &'a str,
    /// Byte offset of every character index the parser reports; `None` for an ASCII text,
    /// whose character indexes are its byte offsets (most files: no table of 8 bytes a
    /// character to hold).
    offsets: Option<Vec<usize>>,
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
}

impl<'a> Document<'a> {
    pub fn parse(text: &'a str) -> Result<Self, YamlEditError> {
        let offsets = (!text.is_ascii()).then(|| {
            let mut offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            offsets.push(text.len());
            offsets
        });
        let mut builder = Builder {
            text,
            offsets,
            parser: Parser::new_from_str(text),
        };
        let root = builder.first_document()?;
        Ok(Self { text, root })
    }

    /// The scalar at `path`, if there is one.
    pub fn get(&self, path: &[Step<'_>]) -> Option<&str> {
        match self.find(path)? {
            Node::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// How many items the sequence at `path` has (0 if it is absent or not a sequence).
    pub fn len(&self, path: &[Step<'_>]) -> usize {
        match self.find(path) {
            Some(Node::Seq { items, .. }) => items.len(),
            _ => 0,
        }
    }

    /// The value of a Helm key as Image Updater reads it: a nested path first (`a.b.c`,
    /// with list indexes `a[0].b`), then the literal key `a.b.c` at the root.
    pub fn helm_get(&self, key: &str) -> Result<Option<&str>, YamlEditError> {
        let mut path = Vec::new();
        for part in key.split('.') {
            let (name, index) = helm_part(part)?;
            path.push(Step::Key(name));
            if let Some(index) = index {
                match usize::try_from(index) {
                    Ok(index) => path.push(Step::Index(index)),
                    Err(_) => return Ok(self.get(&[Step::Key(key)])),
                }
            }
        }
        Ok(self.get(&path).or_else(|| self.get(&[Step::Key(key)])))
    }

    /// Where Image Updater sets a Helm key: a literal root key `a.b.c` if there is one; else
    /// the nested path, each `name[i]` indexing an existing list (a list needs an index, an
    /// index needs a list in range); from the first missing part on, each part's text is a
    /// key, brackets and all, as Image Updater adds them.
    pub fn helm_path<'k>(&self, key: &'k str) -> Result<Vec<Step<'k>>, YamlEditError> {
        if let Some(Node::Map { entries, .. }) = &self.root
            && entries.iter().any(|e| e.key == key)
        {
            return Ok(vec![Step::Key(key)]);
        }
        let parts: Vec<&str> = key.split('.').collect();
        let mut path = Vec::new();
        for (at, part) in parts.iter().enumerate() {
            let (name, index) = helm_part(part)?;
            let refuse = |why: String| YamlEditError::Unsupported {
                path: key.to_string(),
                why,
            };
            let mut probe = path.clone();
            probe.push(Step::Key(name));
            let Some(found) = self.find(&probe) else {
                // Image Updater adds the rest as keys, brackets and all.
                path.extend(parts[at..].iter().map(|p| Step::Key(p)));
                return Ok(path);
            };
            path = probe;
            match (found, index) {
                (Node::Seq { items, .. }, Some(index)) => {
                    let index = usize::try_from(index)
                        .ok()
                        .filter(|i| *i < items.len())
                        .ok_or_else(|| {
                            refuse(format!("id {index} is out of range [0, {})", items.len()))
                        })?;
                    path.push(Step::Index(index));
                }
                (Node::Seq { .. }, None) => {
                    return Err(refuse(format!(
                        "`{name}` is a list: name the item, as in `{name}[0]`"
                    )));
                }
                (_, Some(index)) => {
                    return Err(refuse(format!(
                        "id {index} given but `{name}` is not a list"
                    )));
                }
                _ => {}
            }
        }
        Ok(path)
    }

    fn find(&self, path: &[Step<'_>]) -> Option<&Node> {
        let mut node = self.root.as_ref()?;
        for step in path {
            node = child(node, *step)?;
        }
        Some(node)
    }

    /// The text with the scalar at `path` set to `value`, adding the keys that are missing.
    /// The value keeps the quoting style it had; a plain value that would not read back as
    /// the same string is double-quoted.
    pub fn set(&self, path: &[Step<'_>], value: &str) -> Result<String, YamlEditError> {
        let shown = shown(path);
        let unsupported = |why: &str| YamlEditError::Unsupported {
            path: shown.clone(),
            why: why.to_string(),
        };
        let Some(root) = &self.root else {
            // An empty file: the whole path becomes a new block.
            let keys = keys_only(path).ok_or_else(|| unsupported("the file is empty"))?;
            return Ok(format!("{}{}", self.text, block(&keys, value, 0)));
        };
        let mut node = root;
        for (depth, step) in path.iter().enumerate() {
            match child(node, *step) {
                Some(next) => node = next,
                None => {
                    let Node::Map {
                        entries,
                        flow: false,
                        end,
                    } = node
                    else {
                        return Err(unsupported(&format!(
                            "`{}` is not a block mapping a key can be added to",
                            shown_or_root(&path[..depth])
                        )));
                    };
                    let keys = keys_only(&path[depth..])
                        .ok_or_else(|| unsupported("a list index that does not exist"))?;
                    let column = entries.first().map_or(0, |e| e.column);
                    return Ok(self.insert_at(*end, &block(&keys, value, column)));
                }
            }
        }
        match node {
            Node::Scalar { style, range, .. } => {
                let rendered = match style {
                    ScalarStyle::Plain | ScalarStyle::DoubleQuoted | ScalarStyle::SingleQuoted => {
                        render(value, *style)
                    }
                    _ => return Err(unsupported("it is a block scalar (`|` or `>`)")),
                };
                let old = &self.text[range.0..range.1];
                if old.contains('\n') {
                    return Err(unsupported("it spans several lines"));
                }
                Ok(format!(
                    "{}{}{}",
                    &self.text[..range.0],
                    rendered,
                    &self.text[range.1..]
                ))
            }
            Node::Alias => Err(unsupported(
                "it is an alias (`*name`): changing it would change every use of the anchor; point the key at the value itself",
            )),
            _ => Err(unsupported("it is a mapping or a list, not a value")),
        }
    }

    /// The text with a block-style mapping of `fields` appended to the sequence at `path`,
    /// or to a new `key:` sequence when `path` (one key under the root) is absent.
    pub fn append_item(
        &self,
        path: &[Step<'_>],
        fields: &[(&str, &str)],
    ) -> Result<String, YamlEditError> {
        let shown = shown(path);
        let unsupported = |why: &str| YamlEditError::Unsupported {
            path: shown.clone(),
            why: why.to_string(),
        };
        let item = |column: usize| {
            let pad = " ".repeat(column);
            let mut text = String::new();
            for (i, (key, value)) in fields.iter().enumerate() {
                let lead = if i == 0 {
                    format!("{pad}- ")
                } else {
                    format!("{pad}  ")
                };
                text.push_str(&format!(
                    "{lead}{}: {}\n",
                    render(key, ScalarStyle::Plain),
                    render(value, ScalarStyle::Plain)
                ));
            }
            text
        };
        match self.find(path) {
            Some(Node::Seq {
                flow: false,
                column,
                end,
                ..
            }) => Ok(self.insert_at(*end, &item(*column))),
            Some(_) => Err(unsupported(
                "it is not a block list an entry can be added to",
            )),
            None => {
                let [Step::Key(key)] = path else {
                    return Err(unsupported("its parent does not exist"));
                };
                let (column, end) = match &self.root {
                    None => (0, self.text.len()),
                    Some(Node::Map {
                        entries,
                        flow: false,
                        end,
                    }) => (entries.first().map_or(0, |e| e.column), *end),
                    Some(_) => return Err(unsupported("the document is not a block mapping")),
                };
                let pad = " ".repeat(column);
                let key = render(key, ScalarStyle::Plain);
                Ok(self.insert_at(end, &format!("{pad}{key}:\n{}", item(column))))
            }
        }
    }

    /// The text without the key at `path` (a single-line scalar entry), if it is there.
    pub fn remove(&self, path: &[Step<'_>]) -> Result<String, YamlEditError> {
        let Some((Step::Key(last), parent)) = path.split_last() else {
            return Ok(self.text.to_string());
        };
        let Some(Node::Map { entries, .. }) = self.find(parent) else {
            return Ok(self.text.to_string());
        };
        let Some(entry) = entries.iter().find(|e| e.key == *last) else {
            return Ok(self.text.to_string());
        };
        let Node::Scalar { range, .. } = &entry.value else {
            return Err(YamlEditError::Unsupported {
                path: shown(path),
                why: "only a single-line value can be removed".into(),
            });
        };
        let line_start = self.text[..entry.key_start]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        if !self.text[line_start..entry.key_start].trim().is_empty()
            || self.text[entry.key_start..range.1].contains('\n')
        {
            return Err(YamlEditError::Unsupported {
                path: shown(path),
                why: "it does not stand on a line of its own".into(),
            });
        }
        let line_end = self.text[range.1..]
            .find('\n')
            .map_or(self.text.len(), |i| range.1 + i + 1);
        Ok(format!(
            "{}{}",
            &self.text[..line_start],
            &self.text[line_end..]
        ))
    }

    /// Inserts whole lines at `at`, which is the start of a line or the end of the text.
    fn insert_at(&self, at: usize, lines: &str) -> String {
        let at = if at == 0 || self.text.as_bytes().get(at - 1) == Some(&b'\n') {
            at
        } else {
            // The parser may end a collection mid-line (at a comment): go to the next line.
            self.text[at..]
                .find('\n')
                .map_or(self.text.len(), |i| at + i + 1)
        };
        let (head, tail) = self.text.split_at(at);
        let joint = if head.is_empty() || head.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        format!("{head}{joint}{lines}{tail}")
    }
}

fn child<'n>(node: &'n Node, step: Step<'_>) -> Option<&'n Node> {
    match (node, step) {
        (Node::Map { entries, .. }, Step::Key(key)) => {
            entries.iter().find(|e| e.key == key).map(|e| &e.value)
        }
        (Node::Seq { items, .. }, Step::Index(i)) => items.get(i),
        _ => None,
    }
}

fn keys_only<'p>(path: &[Step<'p>]) -> Option<Vec<&'p str>> {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => Some(*k),
            Step::Index(_) => None,
        })
        .collect()
}

/// Nested block mappings down to `value`, starting at `column`. Keys are written as YAML
/// keys, quoted where plain text would read as something else: a key name comes from an
/// annotation, and `a: {privileged: true} #` spliced as text would be YAML of its author's
/// choosing in the values file.
fn block(keys: &[&str], value: &str, column: usize) -> String {
    let mut text = String::new();
    for (depth, key) in keys.iter().enumerate() {
        let key = render(key, ScalarStyle::Plain);
        let pad = " ".repeat(column + 2 * depth);
        if depth + 1 == keys.len() {
            text.push_str(&format!(
                "{pad}{key}: {}\n",
                render(value, ScalarStyle::Plain)
            ));
        } else {
            text.push_str(&format!("{pad}{key}:\n"));
        }
    }
    text
}

fn shown(path: &[Step<'_>]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(k);
            }
            Step::Index(i) => text.push_str(&format!("[{i}]")),
        }
    }
    text
}

fn shown_or_root(path: &[Step<'_>]) -> String {
    if path.is_empty() {
        "the document".into()
    } else {
        shown(path)
    }
}

/// A string as a YAML scalar in `style`: plain only when it reads back as the same string.
pub fn render(value: &str, style: ScalarStyle) -> String {
    match style {
        ScalarStyle::SingleQuoted if !value.contains('\n') => {
            format!("'{}'", value.replace('\'', "''"))
        }
        ScalarStyle::Plain if is_safe_plain(value) => value.to_string(),
        // JSON's string syntax is a subset of YAML's double-quoted style.
        _ => serde_json::to_string(value).unwrap_or_else(|_| format!("\"{value}\"")),
    }
}

/// Can `value` be written unquoted and read back as the same string, by YAML 1.2 and by the
/// YAML 1.1 readers Helm uses? The same conservative rule as Image Updater's
/// `isSafePlainScalar`: `1.20`, `true`, `yes`, `null`, `0x1F` or `2025-08-25` stay quoted.
pub fn is_safe_plain(value: &str) -> bool {
    let Some(first) = value.chars().next() else {
        return false;
    };
    if value.contains(['\n', '\t', '\r'])
        || value.contains(": ")
        || value.contains(" #")
        || value.starts_with(' ')
        || value.ends_with(' ')
        || value.ends_with(':')
        || "!&*?|>%@`\"'#,[]{}-".contains(first)
    {
        return false;
    }
    let lower = value.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false" | "null" | "~"
    ) || lower.starts_with(".inf")
        || lower.starts_with(".nan")
    {
        return false;
    }
    !(looks_numeric(value) || looks_like_date(value))
}

fn looks_numeric(value: &str) -> bool {
    let body = value.strip_prefix(['+', '-']).unwrap_or(value);
    let lower = body.to_ascii_lowercase();
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(digits) = lower.strip_prefix(prefix) {
            return !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix) || c == '_');
        }
    }
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let digits = mantissa.replace('_', "");
    let mantissa_ok = !digits.is_empty()
        && digits != "."
        && digits.matches('.').count() <= 1
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.');
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// `2025-08-25` and `2025-8-5 ...`: YAML timestamps, which Go's YAML reads as times.
fn looks_like_date(value: &str) -> bool {
    let mut parts = value.splitn(3, '-');
    let (Some(y), Some(m), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let day: String = rest.chars().take_while(char::is_ascii_digit).collect();
    y.len() == 4
        && y.chars().all(|c| c.is_ascii_digit())
        && (1..=2).contains(&m.len())
        && m.chars().all(|c| c.is_ascii_digit())
        && (1..=2).contains(&day.len())
}

impl<'a> Builder<'a> {
    fn byte(&self, span_index: usize) -> usize {
        match &self.offsets {
            None => span_index.min(self.text.len()),
            Some(offsets) => offsets.get(span_index).copied().unwrap_or(self.text.len()),
        }
    }

    fn next(&mut self) -> Result<(Event<'a>, Span), YamlEditError> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(e)) => Err(YamlEditError::Syntax(e.to_string())),
            None => Err(YamlEditError::Syntax("the text ended early".into())),
        }
    }

    fn first_document(&mut self) -> Result<Option<Node>, YamlEditError> {
        loop {
            match self.next()? {
                (Event::StreamEnd, _) => return Ok(None),
                (Event::DocumentStart(_), _) => break,
                _ => {}
            }
        }
        let (event, span) = self.next()?;
        if matches!(event, Event::DocumentEnd) {
            return Ok(None);
        }
        let root = self.node(event, span)?;
        // Parse the rest so that a broken file is refused, not half-edited.
        loop {
            if let (Event::StreamEnd, _) = self.next()? {
                return Ok(Some(root));
            }
        }
    }

    fn node(&mut self, event: Event<'a>, span: Span) -> Result<Node, YamlEditError> {
        self.node_at(event, span, 0)
    }

    /// A node `depth` collections deep. The depth is bounded: a file from Git nested
    /// thousands deep would otherwise overflow the stack and abort the process, and with it
    /// every Application after it in the invocation.
    fn node_at(
        &mut self,
        event: Event<'a>,
        span: Span,
        depth: usize,
    ) -> Result<Node, YamlEditError> {
        if depth > MAX_DEPTH {
            return Err(YamlEditError::TooDeep { limit: MAX_DEPTH });
        }
        let start = self.byte(span.start.index());
        match event {
            Event::Scalar(value, style, _, _) => {
                let from = skip_properties(self.text, start);
                let to = match style {
                    ScalarStyle::SingleQuoted => closing_single(self.text, from),
                    ScalarStyle::DoubleQuoted => closing_double(self.text, from),
                    _ => self.byte(span.end.index()),
                };
                Ok(Node::Scalar {
                    value: value.into_owned(),
                    style,
                    range: (from, to.max(from)),
                })
            }
            Event::Alias(_) => Ok(Node::Alias),
            Event::MappingStart(..) => {
                let flow = self.text[skip_properties(self.text, start)..].starts_with('{');
                let mut entries = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    let key_start = self.byte(span.start.index());
                    let key = match event {
                        Event::MappingEnd => {
                            return Ok(Node::Map {
                                entries,
                                flow,
                                end: self.byte(span.start.index()),
                            });
                        }
                        Event::Scalar(ref key, ..) => Cow::Owned(key.to_string()),
                        // A complex key: kept as a node we never address.
                        other => {
                            self.node_at(other, span, depth + 1)?;
                            Cow::Borrowed("")
                        }
                    };
                    let (event, span) = self.next()?;
                    let value = self.node_at(event, span, depth + 1)?;
                    entries.push(Entry {
                        key: key.into_owned(),
                        key_start,
                        column: span_column(self.text, key_start),
                        value,
                    });
                }
            }
            Event::SequenceStart(..) => {
                let flow = self.text[skip_properties(self.text, start)..].starts_with('[');
                let column = span_column(self.text, start);
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if let Event::SequenceEnd = event {
                        return Ok(Node::Seq {
                            items,
                            flow,
                            column,
                            end: self.byte(span.start.index()),
                        });
                    }
                    items.push(self.node_at(event, span, depth + 1)?);
                }
            }
            other => Err(YamlEditError::Syntax(format!(
                "unexpected {other:?} inside the document"
            ))),
        }
    }
}

/// The column (in bytes from the line start) of `at`.
fn span_column(text: &str, at: usize) -> usize {
    at - text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// Skips an anchor (`&name`) and a tag (`!!str`) before a node's own text.
fn skip_properties(text: &str, mut at: usize) -> usize {
    loop {
        let rest = &text[at..];
        if rest.starts_with('&') || rest.starts_with('!') {
            let word = rest.find(char::is_whitespace).unwrap_or(rest.len());
            at += word;
            at += text[at..].len() - text[at..].trim_start_matches([' ', '\t']).len();
        } else {
            return at;
        }
    }
}

fn closing_single(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = from + 1;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    text.len()
}

fn closing_double(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = from + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps of a dotted key with no list indexes (`image.tag`).
    fn dotted(key: &str) -> Vec<Step<'_>> {
        key.split('.').map(Step::Key).collect()
    }

    fn set(text: &str, key: &str, value: &str) -> String {
        Document::parse(text)
            .and_then(|d| d.set(&dotted(key), value))
            .unwrap_or_else(|e| panic!("{key}: {e}"))
    }

    fn helm_set(text: &str, key: &str, value: &str) -> Result<String, YamlEditError> {
        let doc = Document::parse(text).unwrap();
        doc.set(&doc.helm_path(key)?, value)
    }

    /// Image Updater's own cases (`pkg/argocd/update_test.go`, `Test_SetHelmValue` and
    /// `Test_GetHelmValue`), in our splice editor.
    #[test]
    fn helm_keys_resolve_as_image_updater_resolves_them() {
        let table: &[(&str, &str, &str, &str)] = &[
            // a nested key
            (
                "image:\n  tag: v1.0.0\n",
                "image.tag",
                "v2.0.0",
                "image:\n  tag: v2.0.0\n",
            ),
            // a literal dotted key at the root is set in place, never nested
            (
                "image.tag: v1.0.0\n",
                "image.tag",
                "v2.0.0",
                "image.tag: v2.0.0\n",
            ),
            // list indexes
            (
                "images:\n- name: a\n  tag: v1\n- name: b\n  tag: v1\n",
                "images[1].tag",
                "v2",
                "images:\n- name: a\n  tag: v1\n- name: b\n  tag: v2\n",
            ),
            (
                "foo:\n- image: a:1\n- image: b:1\n",
                "foo[1].image",
                "b:2",
                "foo:\n- image: a:1\n- image: b:2\n",
            ),
            (
                "a:\n  b:\n  - c:\n      d: x\n",
                "a.b[0].c.d",
                "z",
                "a:\n  b:\n  - c:\n      d: z\n",
            ),
            // missing keys are added under the deepest one that exists
            (
                "image:\n  repository: r\n",
                "image.tag",
                "v2",
                "image:\n  repository: r\n  tag: v2\n",
            ),
        ];
        for (text, key, value, expected) in table {
            assert_eq!(
                helm_set(text, key, value).unwrap(),
                *expected,
                "{key} in {text:?}"
            );
            let written = Document::parse(expected).unwrap();
            assert_eq!(
                written.helm_get(key).unwrap(),
                Some(*value),
                "{key} read back"
            );
        }
        // Both a literal `image.tag` and a nested one: Image Updater writes the literal key
        // and reads the nested one first, and so do we.
        let both = "image.tag: v1\nimage:\n  tag: v0\n";
        let written = helm_set(both, "image.tag", "v2").unwrap();
        assert_eq!(written, "image.tag: v2\nimage:\n  tag: v0\n");
        assert_eq!(
            Document::parse(&written)
                .unwrap()
                .helm_get("image.tag")
                .unwrap(),
            Some("v0")
        );
    }

    #[test]
    fn helm_keys_image_updater_refuses_are_refused_with_the_reason() {
        let table: &[(&str, &str, &str)] = &[
            (
                "images:\n- tag: v1\n",
                "images.tag",
                "is a list: name the item",
            ),
            (
                "images:\n- tag: v1\n",
                "images[1].tag",
                "out of range [0, 1)",
            ),
            ("images:\n  tag: v1\n", "images[0].tag", "is not a list"),
            ("images:\n- tag: v1\n", "images[x].tag", "must be a number"),
        ];
        for (text, key, why) in table {
            let error = helm_set(text, key, "v2").unwrap_err().to_string();
            assert!(error.contains(why), "{key}: {error}");
        }
    }

    #[test]
    fn a_plain_value_is_replaced_and_its_comment_kept() {
        let text = "image:\n  repository: repo # the app\n  tag: v1 # bumped by CI\n";
        assert_eq!(
            set(text, "image.tag", "v2"),
            "image:\n  repository: repo # the app\n  tag: v2 # bumped by CI\n"
        );
    }

    #[test]
    fn quoting_style_is_kept() {
        for (text, want) in [
            ("tag: 'v1'\n", "tag: 'v2'\n"),
            ("tag: \"v1\"\n", "tag: \"v2\"\n"),
            ("tag: v1\n", "tag: v2\n"),
        ] {
            assert_eq!(set(text, "tag", "v2"), want, "{text}");
        }
    }

    #[test]
    fn a_plain_value_that_would_read_as_a_number_or_bool_is_double_quoted() {
        for value in [
            "1.20",
            "123",
            "true",
            "yes",
            "null",
            "0x1F",
            "2025-08-25",
            "1e3",
        ] {
            assert_eq!(
                set("tag: v1\n", "tag", value),
                format!("tag: \"{value}\"\n")
            );
        }
        for value in ["20250825-153012", "v1.2.3", "1.2.3", "sha-abc123", "latest"] {
            assert_eq!(set("tag: v1\n", "tag", value), format!("tag: {value}\n"));
        }
    }

    #[test]
    fn an_anchored_value_keeps_its_anchor_and_an_alias_is_refused() {
        let text = "base:\n  tag: &tag v1\nother:\n  tag: *tag\n";
        assert_eq!(
            set(text, "base.tag", "v2"),
            "base:\n  tag: &tag v2\nother:\n  tag: *tag\n"
        );
        let refused = Document::parse(text).and_then(|d| d.set(&dotted("other.tag"), "v2"));
        assert!(
            matches!(refused, Err(YamlEditError::Unsupported { ref why, .. }) if why.contains("alias"))
        );
    }

    #[test]
    fn a_missing_key_is_added_at_the_end_of_its_mapping_with_its_indentation() {
        let text = "image:\n    repository: repo\nreplicas: 2\n";
        assert_eq!(
            set(text, "image.tag", "v2"),
            "image:\n    repository: repo\n    tag: v2\nreplicas: 2\n"
        );
        assert_eq!(
            set("replicas: 2\n", "image.tag", "v2"),
            "replicas: 2\nimage:\n  tag: v2\n"
        );
        assert_eq!(
            set("replicas: 2", "image.tag", "v2"),
            "replicas: 2\nimage:\n  tag: v2\n"
        );
        assert_eq!(set("", "image.tag", "v2"), "image:\n  tag: v2\n");
    }

    #[test]
    fn only_the_first_document_is_edited() {
        let text = "---\nimage:\n  tag: v1\n---\nimage:\n  tag: v1\n";
        assert_eq!(
            set(text, "image.tag", "v2"),
            "---\nimage:\n  tag: v2\n---\nimage:\n  tag: v1\n"
        );
        assert_eq!(
            set("---\nreplicas: 1\n---\nother: 1\n", "image.tag", "v2"),
            "---\nreplicas: 1\nimage:\n  tag: v2\n---\nother: 1\n"
        );
    }

    #[test]
    fn block_scalars_flow_mappings_and_broken_yaml_are_refused_with_the_path() {
        for (text, key, why) in [
            ("tag: |\n  v1\n", "tag", "block scalar"),
            ("image: {repository: r}\n", "image.tag", "block mapping"),
            ("image: [a]\n", "image.tag", "block mapping"),
            ("image: x\n", "image.tag", "block mapping"),
        ] {
            let error = Document::parse(text)
                .and_then(|d| d.set(&dotted(key), "v2"))
                .expect_err(text);
            assert!(
                error.to_string().contains(key) && error.to_string().contains(why),
                "{error}"
            );
        }
        assert!(matches!(
            Document::parse("a: [b\n"),
            Err(YamlEditError::Syntax(_))
        ));
    }

    #[test]
    fn non_ascii_text_before_the_value_does_not_shift_the_edit() {
        let text = "# 이미지 설정\nimage:\n  name: 'été'\n  tag: v1\n";
        assert_eq!(
            set(text, "image.tag", "v2"),
            "# 이미지 설정\nimage:\n  name: 'été'\n  tag: v2\n"
        );
    }

    #[test]
    fn list_entries_are_appended_and_keys_removed_on_their_own_lines() {
        let text = "images:\n  - name: a\n    newTag: v1\n    digest: sha256:1\nresources: []\n";
        let doc = Document::parse(text).unwrap();
        assert_eq!(doc.len(&[Step::Key("images")]), 1);
        assert_eq!(
            doc.append_item(&[Step::Key("images")], &[("name", "b"), ("newTag", "1.0")])
                .unwrap(),
            "images:\n  - name: a\n    newTag: v1\n    digest: sha256:1\n  - name: b\n    newTag: \"1.0\"\nresources: []\n"
        );
        assert_eq!(
            doc.remove(&[Step::Key("images"), Step::Index(0), Step::Key("digest")])
                .unwrap(),
            "images:\n  - name: a\n    newTag: v1\nresources: []\n"
        );
        let bare = Document::parse("resources:\n- a.yaml\n").unwrap();
        assert_eq!(
            bare.append_item(&[Step::Key("images")], &[("name", "b")])
                .unwrap(),
            "resources:\n- a.yaml\nimages:\n- name: b\n"
        );
    }

    #[test]
    fn a_file_nested_thousands_deep_is_refused_not_a_stack_overflow() {
        for deep in [
            format!("{}1{}", "[".repeat(20_000), "]".repeat(20_000)),
            format!("{}1{}", "{a: ".repeat(20_000), "}".repeat(20_000)),
            (0..5_000)
                .map(|i| format!("{}k:\n", " ".repeat(i)))
                .collect::<String>(),
            format!("{}1\n", "- ".repeat(20_000)),
            format!("{}1\n", "? ".repeat(20_000)),
        ] {
            match Document::parse(&deep) {
                Err(YamlEditError::TooDeep { limit }) => assert_eq!(limit, MAX_DEPTH),
                Err(YamlEditError::Syntax(_)) => {}
                other => panic!("a {}-byte file nested deep: {other:?}", deep.len()),
            }
        }
        let fine = format!("{}1{}", "[".repeat(50), "]".repeat(50));
        assert!(Document::parse(&fine).is_ok());
    }

    #[test]
    fn a_key_name_from_an_annotation_is_written_as_one_key_never_as_yaml() {
        let hostile = "securityContext: {privileged: true, runAsUser: 0} #";
        let text = "image:\n  tag: v1\n";
        for path in [
            vec![Step::Key(hostile)],
            vec![Step::Key("image"), Step::Key(hostile)],
        ] {
            let edited = Document::parse(text).unwrap().set(&path, "v2").unwrap();
            let parsed: serde_json::Value = serde_yaml_ng::from_str(&edited).unwrap();
            assert!(parsed.get("securityContext").is_none(), "{edited}");
            let written = match path.as_slice() {
                [_] => &parsed[hostile],
                _ => &parsed["image"][hostile],
            };
            assert_eq!(written, "v2", "{edited}");
            assert_eq!(parsed["image"]["tag"], "v1", "{edited}");
        }
        let appended = Document::parse("a: 1\n")
            .unwrap()
            .append_item(&[Step::Key("x: {y: 1} #")], &[("name", "n")])
            .unwrap();
        let parsed: serde_json::Value = serde_yaml_ng::from_str(&appended).unwrap();
        assert_eq!(parsed["x: {y: 1} #"][0]["name"], "n", "{appended}");
    }
}
