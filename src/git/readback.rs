//! Every file the Git write-back edits, read back the way its consumer reads it before it is
//! committed.
//!
//! The edit itself ([`super::yamledit`]) is made with a YAML 1.2 parser, but Helm and
//! kustomize read with YAML 1.1 readers (go-yaml, like libyaml) that, for one, break lines
//! at U+0085, U+2028 and U+2029 where a YAML 1.2 reader sees one line: a key that is one
//! scalar to the editor can be an injected block to Helm. So the old and the new text are
//! both read with libyaml (first document, aliases and merge keys resolved, as go-yaml does),
//! the intended edits are applied to the old file's tree, and the commit goes ahead only if
//! the new text reads as exactly that tree. Whatever the cause (a hostile key, a bug in the
//! splice, a reader difference nobody thought of), a file that Helm would read differently
//! from what was meant is never committed.
//!
//! A file is read event by event into a tree that keeps, per node, a hash of everything a
//! reader sees under it (keyed per process, so no one can aim at a collision), and mapping
//! keys' text for messages: a few dozen bytes a node, so the largest file the write-back reads
//! costs a few megabytes here. Two scalars read alike when they have the same text, the same
//! explicit tag, and both read as strings (quoted, block, or plain text that no YAML version
//! reads as anything else) or both do not. Pure, no I/O.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::rc::Rc;
use std::sync::OnceLock;

use libyaml_safer::{EventData, Parser, ScalarStyle};

/// One step of a path into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

impl From<super::yamledit::Step<'_>> for Step {
    fn from(step: super::yamledit::Step<'_>) -> Self {
        match step {
            super::yamledit::Step::Key(key) => Self::Key(key.to_string()),
            super::yamledit::Step::Index(index) => Self::Index(index),
        }
    }
}

/// A path as `a.b[0].c`, for messages.
fn shown(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key.escape_debug().to_string());
            }
            Step::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    if out.is_empty() {
        "the top level".into()
    } else {
        format!("`{out}`")
    }
}

/// What the write-back meant to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// The string at `path`, adding the mappings that are missing on the way.
    Set(Vec<Step>, String),
    /// The key at `path` removed.
    Remove(Vec<Step>),
    /// A mapping of string fields added at the end of the sequence at `path` (made if
    /// missing).
    Append(Vec<Step>, Vec<(String, String)>),
}

/// Why a file is not committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadBackError {
    #[error(
        "`{file}`: Helm's and kustomize's YAML reader (libyaml) cannot read the file as it is in Git ({message}); it is not edited"
    )]
    Unreadable { file: String, message: String },
    #[error(
        "`{file}`: the edited text does not read as YAML to Helm's and kustomize's reader (libyaml): {message}; not committed"
    )]
    Broken { file: String, message: String },
    #[error(
        "`{file}`: read as Helm and kustomize read it (libyaml), the edit would change {at} beyond what was meant ({why}); not committed. A key or value with a character that YAML 1.1 reads as a line break (U+0085, U+2028, U+2029) does this"
    )]
    Unintended {
        file: String,
        at: String,
        why: String,
    },
    #[error("`{file}`: cannot apply the intended edit at {at} to the file as read: {why}")]
    Inapplicable {
        file: String,
        at: String,
        why: String,
    },
}

/// How deep a file may nest (serde_yaml_ng's and go-yaml's readers stop near here too).
const MAX_DEPTH: usize = 128;

/// The most mapping entries merge keys (`<<`) may bring to a file, all together, whether they
/// are added or already present: a few merges of anchored mappings into each other would
/// otherwise multiply without end (an entry is a few dozen bytes: this bounds them to a few
/// megabytes), and one mapping merging the same large anchor thousands of times would cost a
/// lookup per entry per alias (quadratic in the file's size) while adding nothing.
const MAX_MERGED: usize = 100_000;

/// The process's hash keys: both trees of one comparison must hash alike.
fn hasher() -> &'static RandomState {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new)
}

/// What a scalar reads as, as far as a comparison cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// A string in every YAML version.
    String,
    /// A plain scalar some YAML version reads as a number, boolean, null or date.
    Other,
}

#[derive(Debug, Clone)]
struct Node {
    hash: u64,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Scalar(Reads),
    Seq(Rc<[Node]>),
    Map(Rc<[Entry]>),
}

#[derive(Debug, Clone)]
struct Entry {
    /// The key's text (a scalar's), for paths and messages.
    key: Rc<str>,
    key_hash: u64,
    value: Node,
}

fn scalar(tag: Option<&str>, reads: Reads, text: &str) -> Node {
    Node {
        hash: hasher().hash_one(("scalar", tag, reads == Reads::String, text)),
        kind: Kind::Scalar(reads),
    }
}

fn string(text: &str) -> Node {
    scalar(None, Reads::String, text)
}

fn sequence(items: Vec<Node>) -> Node {
    let mut h = hasher().build_hasher();
    "sequence".hash(&mut h);
    for item in &items {
        item.hash.hash(&mut h);
    }
    Node {
        hash: h.finish(),
        kind: Kind::Seq(items.into()),
    }
}

/// A mapping of `entries` (keys already unique): hashed without regard to order, as readers
/// see a mapping.
fn mapping(entries: Vec<Entry>) -> Node {
    let mut pairs: Vec<(u64, u64)> = entries.iter().map(|e| (e.key_hash, e.value.hash)).collect();
    pairs.sort_unstable();
    Node {
        hash: hasher().hash_one(("mapping", &pairs)),
        kind: Kind::Map(entries.into()),
    }
}

fn entry(key: &str, value: Node) -> Entry {
    Entry {
        key: Rc::from(key),
        key_hash: string(key).hash,
        value,
    }
}

/// A collection being read.
enum Open {
    Seq {
        anchor: Option<String>,
        items: Vec<Node>,
    },
    Map {
        anchor: Option<String>,
        /// Keys and values as read, alternately.
        read: Vec<(Node, Key)>,
    },
}

/// What a mapping keeps of a key besides its node.
enum Key {
    /// A value, or a key that is not a scalar.
    Other,
    /// A scalar key's text.
    Text(Rc<str>),
    /// The merge key: a plain `<<` without a tag, or tagged `!!merge`.
    Merge,
}

/// What a file is, read as libyaml reads it.
struct Reader {
    /// Each anchor's node; `None` while it is still open. An anchor is taken when its node
    /// starts, as go-yaml takes it, so an alias inside the node it names is that node holding
    /// itself, which go-yaml refuses ("anchor … value contains itself").
    anchors: HashMap<String, Option<Node>>,
    merged: usize,
}

impl Reader {
    /// The first document of `text` (`None`: no document at all).
    fn read(text: &str) -> Result<Option<Node>, String> {
        let mut bytes = text.as_bytes();
        let mut parser = Parser::new();
        parser.set_input_string(&mut bytes);
        let mut reader = Reader {
            anchors: HashMap::new(),
            merged: 0,
        };
        let mut stack: Vec<Open> = Vec::new();
        loop {
            let event = parser.parse().map_err(|e| e.to_string())?;
            let done = match event.data {
                EventData::StreamEnd => return Ok(None),
                EventData::StreamStart { .. }
                | EventData::DocumentStart { .. }
                | EventData::DocumentEnd { .. } => None,
                EventData::Alias { anchor } => match reader.anchors.get(&anchor) {
                    Some(Some(node)) => Some(node.clone()),
                    Some(None) => {
                        return Err(format!(
                            "the alias `*{anchor}` is inside the node anchored `&{anchor}`, which would hold itself"
                        ));
                    }
                    None => return Err(format!("the alias `*{anchor}` names no anchor before it")),
                },
                EventData::Scalar {
                    anchor,
                    tag,
                    value,
                    style,
                    ..
                } => {
                    let reads = match style {
                        ScalarStyle::Plain | ScalarStyle::Any
                            if !super::yamledit::is_safe_plain(&value) =>
                        {
                            Reads::Other
                        }
                        _ => Reads::String,
                    };
                    let merge = value == "<<"
                        && style == ScalarStyle::Plain
                        && tag
                            .as_deref()
                            .is_none_or(|t| t == "tag:yaml.org,2002:merge");
                    let node = scalar(tag.as_deref(), reads, &value);
                    reader.anchor(anchor, &node);
                    match stack.last_mut() {
                        // A mapping keeps a scalar key's text, for paths and messages.
                        Some(Open::Map { read, .. }) if read.len() % 2 == 0 => {
                            let key = if merge {
                                Key::Merge
                            } else {
                                Key::Text(Rc::from(value.as_str()))
                            };
                            read.push((node, key));
                            continue;
                        }
                        _ => Some(node),
                    }
                }
                EventData::SequenceStart { anchor, .. } => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
                    }
                    reader.open(&anchor);
                    stack.push(Open::Seq {
                        anchor,
                        items: Vec::new(),
                    });
                    None
                }
                EventData::MappingStart { anchor, .. } => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
                    }
                    reader.open(&anchor);
                    stack.push(Open::Map {
                        anchor,
                        read: Vec::new(),
                    });
                    None
                }
                EventData::SequenceEnd => match stack.pop() {
                    Some(Open::Seq { anchor, items }) => {
                        let node = sequence(items);
                        reader.anchor(anchor, &node);
                        Some(node)
                    }
                    _ => return Err("a sequence ends where none is open".into()),
                },
                EventData::MappingEnd => match stack.pop() {
                    Some(Open::Map { anchor, read }) => {
                        let node = reader.close_mapping(read)?;
                        reader.anchor(anchor, &node);
                        Some(node)
                    }
                    _ => return Err("a mapping ends where none is open".into()),
                },
            };
            let Some(node) = done else { continue };
            match stack.last_mut() {
                None => return Ok(Some(node)),
                Some(Open::Seq { items, .. }) => items.push(node),
                Some(Open::Map { read, .. }) => read.push((node, Key::Other)),
            }
        }
    }

    fn open(&mut self, anchor: &Option<String>) {
        if let Some(anchor) = anchor {
            self.anchors.insert(anchor.clone(), None);
        }
    }

    fn anchor(&mut self, anchor: Option<String>, node: &Node) {
        if let Some(anchor) = anchor {
            self.anchors.insert(anchor, Some(node.clone()));
        }
    }

    /// A mapping from its keys and values as read: merge keys (`<<`) resolved as go-yaml
    /// resolves them (the mapping's own keys win, then earlier merged mappings over later
    /// ones), a key read twice refused (readers disagree on which one wins).
    fn close_mapping(&mut self, read: Vec<(Node, Key)>) -> Result<Node, String> {
        let mut own: Vec<Entry> = Vec::with_capacity(read.len() / 2);
        let mut merges: Vec<Node> = Vec::new();
        let mut pairs = read.into_iter();
        while let (Some((key, text)), Some((value, _))) = (pairs.next(), pairs.next()) {
            let text = match text {
                Key::Merge => {
                    merges.push(value);
                    continue;
                }
                Key::Text(text) => text,
                Key::Other => Rc::from(format!("<key #{:016x}>", key.hash)),
            };
            own.push(Entry {
                key: text,
                key_hash: key.hash,
                value,
            });
        }
        let mut seen: HashMap<u64, ()> = HashMap::with_capacity(own.len());
        for e in &own {
            if seen.insert(e.key_hash, ()).is_some() {
                return Err(format!(
                    "the key `{}` appears twice in one mapping",
                    e.key.escape_debug()
                ));
            }
        }
        let mut sources = Vec::new();
        for merge in &merges {
            match &merge.kind {
                Kind::Map(entries) => sources.push(entries.clone()),
                Kind::Seq(items) => {
                    for item in items.iter() {
                        match &item.kind {
                            Kind::Map(entries) => sources.push(entries.clone()),
                            _ => return Err("a merge key `<<` names a list holding something other than mappings".into()),
                        }
                    }
                }
                Kind::Scalar(_) => {
                    return Err("a merge key `<<` whose value is not a mapping".into());
                }
            }
        }
        for source in sources {
            for merged in source.iter() {
                self.merged += 1;
                if self.merged > MAX_MERGED {
                    return Err(format!(
                        "merge keys (`<<`) bring more than {MAX_MERGED} entries into it; write the merged values out"
                    ));
                }
                if seen.insert(merged.key_hash, ()).is_none() {
                    own.push(merged.clone());
                }
            }
        }
        Ok(mapping(own))
    }
}

/// The first document of `text`; an empty mapping's place for a file with none.
fn read(text: &str) -> Result<Node, String> {
    Ok(Reader::read(text)?.unwrap_or_else(|| scalar(None, Reads::Other, "")))
}

/// Refuses `new` unless it reads as `old` with `edits` applied.
pub fn check(
    file: &str,
    old: Option<&str>,
    new: &str,
    edits: &[Edit],
) -> Result<(), ReadBackError> {
    let mut expected = match old {
        Some(old) => read(old).map_err(|message| ReadBackError::Unreadable {
            file: file.to_string(),
            message,
        })?,
        None => read("").unwrap_or_else(|_| string("")),
    };
    for edit in edits {
        expected = apply(&expected, edit).map_err(|(at, why)| ReadBackError::Inapplicable {
            file: file.to_string(),
            at,
            why,
        })?;
    }
    compare(file, new, &expected)
}

/// Refuses `new` unless it reads as exactly `expected` (a file written whole).
pub fn check_whole(
    file: &str,
    new: &str,
    expected: &serde_json::Value,
) -> Result<(), ReadBackError> {
    compare(file, new, &from_json(expected))
}

fn compare(file: &str, new: &str, expected: &Node) -> Result<(), ReadBackError> {
    let got = read(new).map_err(|message| ReadBackError::Broken {
        file: file.to_string(),
        message,
    })?;
    match difference(expected, &got, &mut Vec::new()) {
        None => Ok(()),
        Some((at, why)) => Err(ReadBackError::Unintended {
            file: file.to_string(),
            at,
            why,
        }),
    }
}

/// A JSON value (what the write-back builds whole) as the tree it should read as: strings
/// as strings, `true`/`false`/`null` and numbers as the plain scalars the writer emits.
fn from_json(value: &serde_json::Value) -> Node {
    match value {
        serde_json::Value::Null => scalar(None, Reads::Other, "null"),
        serde_json::Value::Bool(b) => scalar(None, Reads::Other, if *b { "true" } else { "false" }),
        serde_json::Value::Number(n) => scalar(None, Reads::Other, &n.to_string()),
        serde_json::Value::String(s) => string(s),
        serde_json::Value::Array(items) => sequence(items.iter().map(from_json).collect()),
        serde_json::Value::Object(map) => {
            mapping(map.iter().map(|(k, v)| entry(k, from_json(v))).collect())
        }
    }
}

/// `node` with `edit` applied; the error names where and why it cannot be.
fn apply(node: &Node, edit: &Edit) -> Result<Node, (String, String)> {
    let (Edit::Set(path, _) | Edit::Remove(path) | Edit::Append(path, _)) = edit;
    let whole = shown(path);
    apply_at(node, path, edit).map_err(|why| (whole, why))
}

/// Whether `node` is what a missing or empty value reads as: a mapping may be made there.
fn is_empty(node: &Node) -> bool {
    match &node.kind {
        Kind::Map(entries) => entries.is_empty(),
        Kind::Scalar(Reads::Other) => {
            node.hash == scalar(None, Reads::Other, "").hash
                || node.hash == scalar(None, Reads::Other, "null").hash
                || node.hash == scalar(None, Reads::Other, "~").hash
        }
        _ => false,
    }
}

fn apply_at(node: &Node, path: &[Step], edit: &Edit) -> Result<Node, String> {
    let Some((step, rest)) = path.split_first() else {
        return Err("an empty path".into());
    };
    match step {
        Step::Index(index) => {
            let Kind::Seq(items) = &node.kind else {
                return Err(format!("no list to take item {index} of"));
            };
            let mut items = items.to_vec();
            let count = items.len();
            let item = items
                .get_mut(*index)
                .ok_or_else(|| format!("no item {index} in a list of {count}"))?;
            *item = match (rest.is_empty(), edit) {
                (true, Edit::Set(_, value)) => string(value),
                (true, _) => return Err("a list item cannot be removed or added to".into()),
                (false, _) => apply_at(item, rest, edit)?,
            };
            Ok(sequence(items))
        }
        Step::Key(key) => {
            let mut entries = match &node.kind {
                Kind::Map(entries) => entries.to_vec(),
                _ if is_empty(node) && !matches!(edit, Edit::Remove(_)) => Vec::new(),
                _ if matches!(edit, Edit::Remove(_)) => return Ok(node.clone()),
                _ => {
                    return Err(format!(
                        "`{}`'s parent is not a mapping",
                        key.escape_debug()
                    ));
                }
            };
            let at = entries.iter().position(|e| &*e.key == key.as_str());
            match (rest.is_empty(), edit) {
                (true, Edit::Set(_, value)) => {
                    let value = string(value);
                    match at {
                        Some(i) => entries[i].value = value,
                        None => entries.push(entry(key, value)),
                    }
                }
                (true, Edit::Remove(_)) => {
                    if let Some(i) = at {
                        entries.remove(i);
                    }
                }
                (true, Edit::Append(_, fields)) => {
                    let item = mapping(fields.iter().map(|(k, v)| entry(k, string(v))).collect());
                    match at {
                        Some(i) => match &entries[i].value.kind {
                            Kind::Seq(items) => {
                                let mut items = items.to_vec();
                                items.push(item);
                                entries[i].value = sequence(items);
                            }
                            _ if is_empty(&entries[i].value) => {
                                entries[i].value = sequence(vec![item]);
                            }
                            _ => return Err(format!("`{}` is not a list", key.escape_debug())),
                        },
                        None => entries.push(entry(key, sequence(vec![item]))),
                    }
                }
                (false, _) => match at {
                    Some(i) => entries[i].value = apply_at(&entries[i].value, rest, edit)?,
                    None if matches!(edit, Edit::Remove(_)) => return Ok(node.clone()),
                    None => {
                        let made = apply_at(&mapping(Vec::new()), rest, edit)?;
                        entries.push(entry(key, made));
                    }
                },
            }
            Ok(mapping(entries))
        }
    }
}

/// What a node is, for a message (never a value from the file).
fn kind_of(node: &Node) -> &'static str {
    match node.kind {
        Kind::Scalar(Reads::String) => "a string",
        Kind::Scalar(Reads::Other) => "a value YAML reads as a number, boolean, null or date",
        Kind::Seq(_) => "a list",
        Kind::Map(_) => "a mapping",
    }
}

/// Where `got` first differs from `expected`, and how.
fn difference(expected: &Node, got: &Node, path: &mut Vec<Step>) -> Option<(String, String)> {
    if expected.hash == got.hash {
        return None;
    }
    match (&expected.kind, &got.kind) {
        (Kind::Map(want), Kind::Map(have)) => {
            let by_key: HashMap<u64, &Entry> = have.iter().map(|e| (e.key_hash, e)).collect();
            for e in want.iter() {
                path.push(Step::Key(e.key.to_string()));
                let found = match by_key.get(&e.key_hash) {
                    None => Some((shown(path), "it would be gone".into())),
                    Some(h) => difference(&e.value, &h.value, path),
                };
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            let wanted: HashMap<u64, ()> = want.iter().map(|e| (e.key_hash, ())).collect();
            have.iter()
                .find(|e| !wanted.contains_key(&e.key_hash))
                .map(|e| {
                    path.push(Step::Key(e.key.to_string()));
                    let at = shown(path);
                    path.pop();
                    (
                        at,
                        "a key that was not meant to be there would appear".into(),
                    )
                })
        }
        (Kind::Seq(want), Kind::Seq(have)) if want.len() != have.len() => Some((
            shown(path),
            format!("a list of {} items would have {}", want.len(), have.len()),
        )),
        (Kind::Seq(want), Kind::Seq(have)) => {
            let index = want
                .iter()
                .zip(have.iter())
                .position(|(w, h)| w.hash != h.hash)?;
            path.push(Step::Index(index));
            let found = difference(&want[index], &have[index], path);
            path.pop();
            found
        }
        (Kind::Scalar(_), Kind::Scalar(_)) if kind_of(expected) == kind_of(got) => {
            Some((shown(path), format!("{} with another value", kind_of(got))))
        }
        _ => Some((
            shown(path),
            format!("expected {}, read {}", kind_of(expected), kind_of(got)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &[&str], value: &str) -> Edit {
        Edit::Set(
            path.iter().map(|k| Step::Key(k.to_string())).collect(),
            value.into(),
        )
    }

    #[test]
    fn an_edit_that_changes_only_what_was_meant_passes() {
        let old = "# comment\nimage:\n  repository: web\n  tag: \"1.0\"\nreplicas: 2\n";
        let new = "# comment\nimage:\n  repository: web\n  tag: \"1.1\"\nreplicas: 2\n";
        let tag = [set(&["image", "tag"], "1.1")];
        assert_eq!(check("values.yaml", Some(old), new, &tag), Ok(()));
        // Key order is no reader's business; a single-quoted or plain string is a string.
        let reordered = "replicas: 2\nimage:\n  tag: '1.1'\n  repository: web\n";
        assert_eq!(check("values.yaml", Some(old), reordered, &tag), Ok(()));
        let plain = "image:\n  repository: web\n  tag: v1.1\nreplicas: 2\n";
        let to_v = [set(&["image", "tag"], "v1.1")];
        assert_eq!(check("values.yaml", Some(old), plain, &to_v), Ok(()));
        // Missing keys are added on the way; an empty file is an empty mapping.
        let added = "image:\n  tag: \"1.1\"\n";
        assert_eq!(check("values.yaml", None, added, &tag), Ok(()));
        assert_eq!(check("values.yaml", Some(""), added, &tag), Ok(()));
        assert_eq!(
            check("values.yaml", Some("# only a comment\n"), added, &tag),
            Ok(())
        );
        // Anchors, aliases and merge keys read as go-yaml reads them.
        let anchored = "base: &b {pull: Always}\nimage:\n  <<: *b\n  tag: \"1.0\"\nsidecar: *b\n";
        let moved = anchored.replace("\"1.0\"", "\"1.1\"");
        assert_eq!(check("values.yaml", Some(anchored), &moved, &tag), Ok(()));
    }

    /// Texts a YAML 1.2 editor could produce from hostile keys or values, each of which Helm's
    /// reader would see as more than the intended change.
    #[test]
    fn a_file_helm_would_read_differently_from_what_was_meant_is_refused() {
        let old = "image:\n  tag: \"1.0\"\n";
        for (case, new, words) in [
            (
                "a U+2028 in a plain key breaks it into two lines",
                "image:\n  tag: \"1.1\"\nx\u{2028}securityContext: {privileged: true}\n",
                "not committed",
            ),
            (
                "a U+0085 (NEL) breaks a plain key into a block",
                "image:\n  tag: \"1.1\"\nx\u{85}securityContext:\n  privileged: true\n",
                "not committed",
            ),
            (
                "a U+2029 in a plain value starts a new key",
                "image:\n  tag: v1.1\u{2029}privileged: true\n",
                "not committed",
            ),
            (
                "a U+2028 inside double quotes is folded to a space",
                "image:\n  tag: \"1.1\u{2028}x\"\n",
                "a string with another value",
            ),
            (
                "an extra key beside the intended one",
                "image:\n  tag: \"1.1\"\n  pullPolicy: Always\n",
                "`image.pullPolicy`",
            ),
            (
                "the intended key with another value",
                "image:\n  tag: \"1.2\"\n",
                "a string with another value",
            ),
            (
                "a tag read as a number",
                "image:\n  tag: 1.1\n",
                "expected a string, read a value YAML reads as a number",
            ),
            ("a key lost", "{}\n", "`image`"),
            (
                "two documents where the first lost the key",
                "other: 1\n---\nimage:\n  tag: \"1.1\"\n",
                "`image`",
            ),
            (
                "an injected merge key",
                "base: &b {privileged: true}\nimage:\n  tag: \"1.1\"\n  <<: *b\n",
                "not committed",
            ),
            (
                "a key written twice",
                "image:\n  tag: \"1.1\"\n  tag: \"1.0\"\n",
                "appears twice",
            ),
            (
                "not YAML to libyaml",
                "image:\n  tag: \"1.1\n",
                "does not read as YAML",
            ),
        ] {
            let result = check(
                "values.yaml",
                Some(old),
                new,
                &[set(&["image", "tag"], "1.1")],
            );
            let error = result.err().unwrap_or_else(|| panic!("{case}: accepted"));
            assert!(error.to_string().contains(words), "{case}: {error}");
            assert!(
                error.to_string().contains("not committed"),
                "{case}: {error}"
            );
        }
    }

    #[test]
    fn a_file_libyaml_cannot_read_is_not_edited() {
        for old in [
            "a: [1\n",
            "a: 1\na: 2\n",
            "a: *nowhere\n",
            "a: &x 1\nb:\n  <<: *x\n",
        ] {
            let error = check("values.yaml", Some(old), "a: 1\n", &[]).unwrap_err();
            assert!(
                matches!(error, ReadBackError::Unreadable { .. }),
                "{old:?}: {error}"
            );
        }
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let error = check("values.yaml", Some(&deep), "a: 1\n", &[]).unwrap_err();
        assert!(error.to_string().contains("deeper than 128"), "{error}");
    }

    #[test]
    fn merge_keys_that_multiply_are_stopped_at_a_bound() {
        // Each level merges the previous one four times under new keys: 4^12 entries.
        let mut text = String::from("l0: &l0 {a: 1, b: 2, c: 3, d: 4}\n");
        for level in 1..=12 {
            let p = level - 1;
            text.push_str(&format!(
                "l{level}: &l{level}\n  w: {{<<: *l{p}}}\n  x: {{<<: *l{p}}}\n  y: {{<<: *l{p}}}\n  z: {{<<: *l{p}}}\n"
            ));
        }
        // Aliases are shared, not copied: reading this costs what the text does.
        assert_eq!(check("values.yaml", Some(&text), &text, &[]), Ok(()));
        let mut wide = String::from("l0: &l0 {");
        wide.push_str(
            &(0..100)
                .map(|i| format!("k{i}: {i}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        wide.push_str("}\n");
        for i in 0..1100 {
            wide.push_str(&format!("m{i}: {{<<: *l0}}\n"));
        }
        let error = check("values.yaml", Some(&wide), &wide, &[]).unwrap_err();
        assert!(error.to_string().contains("merge keys"), "{error}");
    }

    #[test]
    fn merging_one_anchor_thousands_of_times_is_stopped_at_the_bound() {
        // 4 000 keys merged 20 000 times add nothing after the first, but each would be
        // looked up again: 80 million lookups for 400 KB.
        let mut text = String::from("base: &a {");
        for i in 0..4_000 {
            text.push_str(&format!("k{i}: 0, "));
        }
        text.push_str("}\nimage:\n  tag: \"1.0\"\n  <<: [");
        text.push_str(&"*a, ".repeat(20_000));
        text.push_str("]\n");
        let new = text.replace("\"1.0\"", "\"1.1\"");
        let error = check("values.yaml", Some(&text), &new, &[tag_edit()]).unwrap_err();
        assert!(
            error.to_string().contains("bring more than 100000 entries"),
            "{error}"
        );
    }

    #[test]
    fn an_alias_inside_the_node_it_names_is_refused_as_go_yaml_refuses_it() {
        let text = "a: &x 0\nb: &x [1, *x]\nimage: {tag: \"1.0\"}\n";
        let new = text.replace("\"1.0\"", "\"1.1\"");
        let error = check("values.yaml", Some(text), &new, &[tag_edit()]).unwrap_err();
        assert!(error.to_string().contains("would hold itself"), "{error}");
        // An alias after an inner node of the same name is that inner node.
        let text = "a: &x [&x [1], *x]\nimage: {tag: \"1.0\"}\n";
        let new = text.replace("\"1.0\"", "\"1.1\"");
        assert_eq!(
            check("values.yaml", Some(text), &new, &[tag_edit()]),
            Ok(())
        );
    }

    fn tag_edit() -> Edit {
        Edit::Set(
            vec![Step::Key("image".into()), Step::Key("tag".into())],
            "1.1".into(),
        )
    }

    #[test]
    fn kustomization_edits_set_remove_and_append_list_items() {
        let old = "images:\n- name: web\n  newTag: \"1.0\"\n  digest: sha256:aa\n";
        let new = "images:\n- name: web\n  newTag: \"1.1\"\n- name: api\n  newTag: \"2.0\"\n";
        let at = |i: usize, field: &str| {
            vec![
                Step::Key("images".into()),
                Step::Index(i),
                Step::Key(field.into()),
            ]
        };
        let edits = [
            Edit::Set(at(0, "newTag"), "1.1".into()),
            Edit::Remove(at(0, "digest")),
            Edit::Append(
                vec![Step::Key("images".into())],
                vec![
                    ("name".into(), "api".into()),
                    ("newTag".into(), "2.0".into()),
                ],
            ),
        ];
        assert_eq!(check("kustomization.yaml", Some(old), new, &edits), Ok(()));
        // The same edits, but a hostile image name turned one entry into two for kustomize.
        let injected = "images:\n- name: web\n  newTag: \"1.1\"\n- name: api\n  newTag: \"2.0\"\n- name: busybox\n  newName: evil.example/backdoor\n";
        let error = check("kustomization.yaml", Some(old), injected, &edits).unwrap_err();
        assert!(
            error.to_string().contains("a list of 2 items would have 3"),
            "{error}"
        );
    }

    #[test]
    fn a_file_written_whole_must_read_as_the_value_it_was_built_from() {
        let expected = serde_json::json!({"helm": {"parameters": [
            {"name": "image.tag", "value": "1.1", "forcestring": true}]}});
        let good = "helm:\n  parameters:\n  - name: image.tag\n    value: \"1.1\"\n    forcestring: true\n";
        assert_eq!(
            check_whole(".argocd-source-web.yaml", good, &expected),
            Ok(())
        );
        let bad =
            "helm:\n  parameters:\n  - name: image.tag\n    value: 1.1\n    forcestring: true\n";
        assert!(check_whole(".argocd-source-web.yaml", bad, &expected).is_err());
        let quoted_bool = "helm:\n  parameters:\n  - name: image.tag\n    value: \"1.1\"\n    forcestring: \"true\"\n";
        assert!(check_whole(".argocd-source-web.yaml", quoted_bool, &expected).is_err());
    }
}
