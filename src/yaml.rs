//! YAML read from outside (a Git file the write-back lays over a source, a chart's Application
//! manifest, the cluster's `aws-auth` map), bounded in what it *expands* to, not only in its
//! bytes and depth (pure).
//!
//! An alias is a few bytes of text that stands for a whole anchored node: nine anchors of ten
//! aliases each make a 100 KB file that a tree-building reader turns into a thousand million
//! nodes. `serde_yaml_ng` limits how many times it follows an alias, not how much the aliases
//! bring in, so a file under every byte limit still exhausts a 128 MB function. Before the
//! text is read into a tree, [`check`] walks its parse events once (libyaml's grammar, as
//! `serde_yaml_ng`, Helm's and Argo CD's readers use), adding up what each node will cost once
//! built, with every alias counted at the full size of the node it names, and refuses the text
//! past [`MAX_EXPANDED`] or [`MAX_DEPTH`]. Only then is it deserialized; the walk holds one
//! number per anchor and per open collection, whatever the text.
//!
//! JSON needs no such walk: it has no aliases, so what it expands to is what it weighs, and
//! `serde_json` stops at 128 levels.

use std::collections::HashMap;

use libyaml_safer::{EventData, Parser};
use serde::de::DeserializeOwned;

/// What one node costs once built, besides its text: a `serde_json::Value`, its place in the
/// collection that holds it, and a mapping entry's index.
const NODE_COST: u64 = 64;

/// The most a text may expand to, in the cost [`check`] counts (text plus [`NODE_COST`] a
/// node). What is read this way is held several times over once read (the tree, the
/// Application it is laid over, the text rendered from it), so the bound is set by what the
/// function's peak RSS reaches, measured in the release build (`cargo bench --bench
/// git_file`): a text at the bound keeps it under half of the function's 128 MB. Override
/// files and Application manifests are a few KiB; written the usual way (block mappings of
/// short keys and values, about 13 units of cost a byte) one is read up to about 300 KiB, and
/// the densest text without aliases (a flow list of one-digit numbers, two bytes a node) up
/// to about 120 KiB.
pub const MAX_EXPANDED: u64 = 4 << 20;

/// How deep a text may nest, counting what its aliases bring in (`serde_yaml_ng`'s own limit
/// is 128; Argo CD's and Helm's go-yaml readers stop near here too).
pub const MAX_DEPTH: usize = 128;

/// Why a text is not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    #[error("it is not valid YAML: {0}")]
    Syntax(String),
    #[error(
        "with its aliases followed it expands to more than {limit_mib} MiB of nodes (after {read} bytes of its text); write the repeated values out or split the file"
    )]
    Expands { limit_mib: u64, read: usize },
    #[error("it nests deeper than {MAX_DEPTH} levels, counting what its aliases bring in")]
    TooDeep,
    #[error(
        "the alias `*{0}` is inside the node anchored `&{0}`, which would hold itself without end; name an anchor defined before that node"
    )]
    HoldsItself(String),
    #[error("it is not the shape expected: {0}")]
    Shape(String),
}

/// `text`, a single YAML document, as `T`, if it expands to no more than [`MAX_EXPANDED`].
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    check(text, Documents::All)?;
    serde_yaml_ng::from_str(text).map_err(|e| YamlError::Shape(e.to_string()))
}

/// The first document of `text` as `T` (`None`: the text holds no document), if that document
/// expands to no more than [`MAX_EXPANDED`]. Later documents are not read into anything.
pub fn first_document<T: DeserializeOwned>(text: &str) -> Result<Option<T>, YamlError> {
    if !check(text, Documents::First)? {
        return Ok(None);
    }
    match serde_yaml_ng::Deserializer::from_str(text).next() {
        None => Ok(None),
        Some(document) => T::deserialize(document)
            .map(Some)
            .map_err(|e| YamlError::Shape(e.to_string())),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Documents {
    /// Every document of the stream (a reader that wants one refuses more itself).
    All,
    /// The first document only: the walk stops at its end.
    First,
}

/// What an anchored node expands to, and how many levels it adds below where it is used.
#[derive(Debug, Clone, Copy)]
struct Size {
    cost: u64,
    height: usize,
}

/// One collection still open during the walk.
struct Open {
    anchor: Option<String>,
    size: Size,
}

/// Walks `text`'s parse events and refuses it if, with every alias expanded, it costs more
/// than [`MAX_EXPANDED`] or nests deeper than [`MAX_DEPTH`]. `Ok(false)`: the text holds no
/// document at all (empty, or comments only).
pub fn check(text: &str, documents: Documents) -> Result<bool, YamlError> {
    walk(text, documents).map(|(documents_seen, _)| documents_seen)
}

/// [`check`]'s walk, also giving the cost it counted.
///
/// An anchor is taken when its node *starts*, as libyaml's loader, go-yaml and
/// `serde_yaml_ng` take it: from there on, an alias of that name is this node, not an earlier
/// node of the same name. An alias inside the node it names would be the node holding itself;
/// `serde_yaml_ng` follows it down to its recursion limit, rebuilding the node at every level,
/// so it is refused here rather than priced as the earlier node.
fn walk(text: &str, documents: Documents) -> Result<(bool, u64), YamlError> {
    let mut bytes = text.as_bytes();
    let mut parser = Parser::new();
    parser.set_input_string(&mut bytes);
    // `None`: the anchor's node is still open.
    let mut anchors: HashMap<String, Option<Size>> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut total: u64 = 0;
    let mut documents_seen = false;
    loop {
        let event = parser
            .parse()
            .map_err(|e| YamlError::Syntax(e.to_string()))?;
        let offset = event.start_mark.index as usize;
        // A node complete at this event: a scalar, an alias, or a collection just closed.
        let done = match event.data {
            EventData::StreamEnd => return Ok((documents_seen, total)),
            EventData::DocumentEnd { .. } if documents == Documents::First => {
                return Ok((true, total));
            }
            EventData::StreamStart { .. }
            | EventData::DocumentStart { .. }
            | EventData::DocumentEnd { .. } => {
                documents_seen |= matches!(event.data, EventData::DocumentStart { .. });
                // Anchors belong to their document.
                anchors.clear();
                continue;
            }
            EventData::Scalar { anchor, value, .. } => {
                let size = Size {
                    cost: NODE_COST + value.len() as u64,
                    height: 0,
                };
                total = add(total, size.cost, offset)?;
                if let Some(anchor) = anchor {
                    anchors.insert(anchor, Some(size));
                }
                size
            }
            EventData::Alias { anchor } => {
                let size = match anchors.get(&anchor) {
                    Some(Some(size)) => *size,
                    Some(None) => return Err(YamlError::HoldsItself(anchor)),
                    None => {
                        return Err(YamlError::Syntax(format!(
                            "the alias `*{anchor}` names no anchor before it"
                        )));
                    }
                };
                if stack.len() + size.height > MAX_DEPTH {
                    return Err(YamlError::TooDeep);
                }
                total = add(total, size.cost, offset)?;
                size
            }
            EventData::SequenceStart { anchor, .. } | EventData::MappingStart { anchor, .. } => {
                if stack.len() >= MAX_DEPTH {
                    return Err(YamlError::TooDeep);
                }
                total = add(total, NODE_COST, offset)?;
                if let Some(anchor) = &anchor {
                    anchors.insert(anchor.clone(), None);
                }
                stack.push(Open {
                    anchor,
                    size: Size {
                        cost: NODE_COST,
                        height: 1,
                    },
                });
                continue;
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                let Some(open) = stack.pop() else {
                    return Err(YamlError::Syntax(
                        "a collection ends that never began".into(),
                    ));
                };
                if let Some(anchor) = open.anchor {
                    anchors.insert(anchor, Some(open.size));
                }
                open.size
            }
        };
        if let Some(parent) = stack.last_mut() {
            parent.size.cost = parent.size.cost.saturating_add(done.cost);
            parent.size.height = parent.size.height.max(done.height + 1);
        }
    }
}

fn add(total: u64, cost: u64, offset: usize) -> Result<u64, YamlError> {
    let total = total.saturating_add(cost);
    if total > MAX_EXPANDED {
        return Err(YamlError::Expands {
            limit_mib: MAX_EXPANDED >> 20,
            read: offset,
        });
    }
    Ok(total)
}

/// A YAML alias bomb: `a0`, a flow sequence of `items` one-letter strings, then `levels`
/// anchors, each a sequence of `fan_out` aliases of the one before, so that the last expands
/// to `items * fan_out ^ levels` strings. `(1, 9, 10)` is the "billion laughs";
/// `(100, 1, 20_000)`, 80 KB that `serde_yaml_ng` reads (its alias limit counts jumps, a
/// hundred per event) into two million nodes. For tests and benchmarks.
pub fn alias_bomb(items: usize, levels: usize, fan_out: usize) -> String {
    let mut text = format!("a0: &a0 [{}]\n", vec!["x"; items].join(","));
    for level in 1..=levels {
        let aliases = vec![format!("*a{}", level - 1); fan_out].join(",");
        text.push_str(&format!("a{level}: &a{level} [{aliases}]\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// An alias-free flow sequence of one-digit numbers as long as `bytes`: the most nodes a
    /// text of that size can hold.
    fn densest(bytes: usize) -> String {
        let mut text = String::with_capacity(bytes + 2);
        text.push('[');
        while text.len() + 2 < bytes {
            text.push_str("0,");
        }
        text.push_str("0]");
        text
    }

    /// A file as override files and manifests are written, as long as `bytes`: block
    /// mappings of short keys and values.
    fn block_mappings(bytes: usize) -> String {
        let mut text = String::with_capacity(bytes + 64);
        let mut i = 0;
        while text.len() < bytes {
            text.push_str(&format!("p{i}:\n  name: a.b\n  value: \"1\"\n"));
            i += 1;
        }
        text
    }

    #[test]
    fn each_hostile_text_is_refused_or_read_within_its_bound() {
        let deep_aliases = {
            // 100 levels by nesting, then an alias of a 100-level node inside it.
            let inner = format!("{}1{}", "[".repeat(100), "]".repeat(100));
            format!(
                "a: &deep {inner}\nb: {}*deep{}\n",
                "[".repeat(60),
                "]".repeat(60)
            )
        };
        let long_string_fan = {
            let long = "x".repeat(64 << 10);
            let aliases = vec!["*s"; 400].join(", ");
            format!("s: &s \"{long}\"\nl: [{aliases}]\n")
        };
        let table: [(&str, String, Result<(), &str>); 12] = [
            (
                "a billion laughs (9 levels of 10 aliases) is refused",
                alias_bomb(1, 9, 10),
                Err("expands"),
            ),
            (
                "80 KB that serde_yaml_ng expands to two million nodes is refused",
                alias_bomb(100, 1, 20_000),
                Err("expands"),
            ),
            (
                "a 64 KiB string aliased 400 times (25 MiB) is refused",
                long_string_fan,
                Err("expands"),
            ),
            (
                "a few aliases of a small anchor are read",
                alias_bomb(10, 3, 4),
                Ok(()),
            ),
            (
                "the densest alias-free 120 KiB file is read",
                densest(120 << 10),
                Ok(()),
            ),
            (
                "a 256 KiB file of block mappings is read",
                block_mappings(256 << 10),
                Ok(()),
            ),
            (
                "an alias that carries a node past 128 levels is refused",
                deep_aliases,
                Err("deeper"),
            ),
            (
                "plain nesting past 128 levels is refused",
                format!("{}1{}", "[".repeat(129), "]".repeat(129)),
                Err("deeper"),
            ),
            (
                "an anchor redefined on a collection that aliases it is refused",
                format!("a: &x 0\nb: &x [{}*x]\n", "0,".repeat(20_000)),
                Err("would hold itself"),
            ),
            (
                "an alias after an inner node of the same anchor names that inner node",
                "a: &x [&x [1, 2], *x]\n".into(),
                Ok(()),
            ),
            (
                "an alias naming no anchor is refused",
                "a: *nothing\n".into(),
                Err("names no anchor"),
            ),
            (
                "broken syntax is refused with libyaml's reason",
                "a: [1, 2\n".into(),
                Err("not valid YAML"),
            ),
        ];
        for (case, text, expected) in table {
            match (check(&text, Documents::All).map(|_| ()), expected) {
                (Ok(()), Ok(())) => {}
                (Err(error), Err(words)) => {
                    assert!(error.to_string().contains(words), "{case}: {error}")
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    thread_local! {
        static VISITED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Counts every node `serde_yaml_ng` hands a reader, keeping none of them.
    struct Counted;

    impl<'de> serde::Deserialize<'de> for Counted {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(CountedVisitor)
        }
    }

    struct CountedVisitor;

    impl CountedVisitor {
        fn one<E>(self) -> Result<Counted, E> {
            VISITED.with(|n| n.set(n.get() + 1));
            Ok(Counted)
        }
    }

    impl<'de> serde::de::Visitor<'de> for CountedVisitor {
        type Value = Counted;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any node")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Counted, E> {
            self.one()
        }
        fn visit_i64<E>(self, _: i64) -> Result<Counted, E> {
            self.one()
        }
        fn visit_u64<E>(self, _: u64) -> Result<Counted, E> {
            self.one()
        }
        fn visit_f64<E>(self, _: f64) -> Result<Counted, E> {
            self.one()
        }
        fn visit_str<E>(self, _: &str) -> Result<Counted, E> {
            self.one()
        }
        fn visit_unit<E>(self) -> Result<Counted, E> {
            self.one()
        }
        fn visit_none<E>(self) -> Result<Counted, E> {
            self.one()
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Counted, A::Error> {
            while seq.next_element::<Counted>()?.is_some() {}
            self.one()
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Counted, A::Error> {
            while map.next_entry::<Counted, Counted>()?.is_some() {}
            self.one()
        }
    }

    /// The walk's promise, held against the reader it guards: whatever the walk accepts,
    /// `serde_yaml_ng` hands over no more nodes than the walk priced.
    #[test]
    fn serde_yaml_ng_builds_no_more_nodes_than_the_walk_counted() {
        let texts = [
            alias_bomb(10, 3, 4),
            alias_bomb(100, 1, 500),
            "a: &x [&x [1, 2], *x, *x]\nb: [*x, *x]\n".into(),
            "a: &x 0\nb: &x [1, 2]\nc: [*x, *x, *x]\n".into(),
            "base: &b {image: web, tag: v1}\nother: *b\nlist: [*b, *b, {<<: *b}]\n".into(),
            densest(64 << 10),
        ];
        for text in texts {
            let (_, cost) = walk(&text, Documents::All).unwrap();
            VISITED.with(|n| n.set(0));
            serde_yaml_ng::from_str::<Counted>(&text).unwrap();
            let visited = VISITED.with(std::cell::Cell::get);
            assert!(
                visited <= cost / NODE_COST,
                "{visited} nodes built, {} priced: {}",
                cost / NODE_COST,
                &text[..text.len().min(80)]
            );
        }
    }

    #[test]
    fn a_refused_text_is_never_deserialized() {
        let error = from_str::<Value>(&alias_bomb(1, 9, 10)).unwrap_err();
        assert!(
            matches!(error, YamlError::Expands { limit_mib: 4, .. }),
            "{error}"
        );
    }

    #[test]
    fn an_anchor_in_one_document_is_unknown_in_the_next() {
        let text = "a: &x 1\n---\nb: *x\n";
        assert!(check(text, Documents::All).is_err());
        // The first document alone is fine, and the second is never read.
        assert!(check(text, Documents::First).is_ok());
        let first: Option<Value> = first_document(text).unwrap();
        assert_eq!(first, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn only_the_first_document_is_bounded_when_only_it_is_read() {
        let text = format!("kind: Application\n---\n{}", alias_bomb(1, 9, 10));
        let first: Option<Value> = first_document(&text).unwrap();
        assert_eq!(first, Some(serde_json::json!({"kind": "Application"})));
        assert!(from_str::<Value>(&text).is_err());
    }

    #[test]
    fn aliases_within_the_bound_read_as_serde_yaml_ng_reads_them() {
        let text = "base: &b {image: web, tag: v1}\nother: *b\nlist: [*b, *b]\n";
        let read: Value = from_str(text).unwrap();
        let direct: Value = serde_yaml_ng::from_str(text).unwrap();
        assert_eq!(read, direct);
        assert_eq!(read["list"][1]["tag"], "v1");
    }

    #[test]
    fn an_empty_text_has_no_first_document() {
        assert_eq!(first_document::<Value>("").unwrap(), None);
        assert_eq!(first_document::<Value>("# only a comment\n").unwrap(), None);
        assert_eq!(first_document::<Value>("---\n").unwrap(), Some(Value::Null));
    }
}
