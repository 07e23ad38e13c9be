//! A small Kubernetes client for `applications.argoproj.io`: list (metadata only), get and
//! patch, over TLS that trusts exactly the cluster's CA.
//!
//! Only what the function needs. Errors are parsed from the API server's `Status` bodies
//! into cases that say whether a retry can help and what the operator should do.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::{Method, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cluster::eks_auth::{TokenError, TokenSource};
use crate::config::{ClusterAccess, KubeTimeouts, NamespaceScope};

const GROUP_VERSION: &str = "argoproj.io/v1alpha1";
const METADATA_ONLY: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
pub const RBAC_HINT: &str = "grant it with the RBAC manifest in deploy/rbac.yaml (get, list and patch on applications.argoproj.io, get on applicationsets, list on imageupdaters and patch on imageupdaters/status, create on events; deploy/rbac-all-namespaces.yaml for ARGOCD_NAMESPACES=*) bound to the group of the function's EKS access entry";

/// A kind of custom resource, by API group, version and plural name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub group_version: &'static str,
    pub plural: &'static str,
}

impl Resource {
    /// The collection's path segments in `namespace`, or in every namespace for `""`.
    fn collection<'a>(&self, namespace: &'a str) -> Vec<&'a str> {
        let mut segments = vec!["apis"];
        segments.extend(self.group_version.split('/'));
        if !namespace.is_empty() {
            segments.extend(["namespaces", namespace]);
        }
        segments.push(self.plural);
        segments
    }
}

pub const APPLICATIONS: Resource = Resource {
    group_version: GROUP_VERSION,
    plural: "applications",
};

/// One page of a list, whatever the kind: the items as JSON and the continue token.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Vec<Value>,
}

/// A JSON merge patch (RFC 7386) or a JSON patch (RFC 6902).
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    Merge(Value),
    Json(Value),
}

impl Patch {
    fn content_type(&self) -> &'static str {
        match self {
            Self::Merge(_) => "application/merge-patch+json",
            Self::Json(_) => "application/json-patch+json",
        }
    }

    pub fn body(&self) -> &Value {
        match self {
            Self::Merge(v) | Self::Json(v) => v,
        }
    }
}

/// What a metadata-only listing tells us about one Application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppMeta {
    pub name: String,
    pub namespace: String,
    pub resource_version: String,
    /// Only those configuration is read from ([`crate::appconfig::annotations::is_configuring`]), so that
    /// a large `last-applied-configuration` does not ride along in memory for every
    /// Application.
    pub annotations: BTreeMap<String, String>,
    /// Labels, for label selectors (`ImageUpdater` refs): small, so kept whole.
    pub labels: BTreeMap<String, String>,
    pub owner_references: Vec<OwnerReference>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

/// How to list: which Applications, and how many per page.
#[derive(Debug, Clone, Copy)]
pub struct ListOptions<'a> {
    pub label_selector: Option<&'a str>,
    pub page_size: u32,
    /// Only Applications whose metadata may name this text are parsed and passed on; the
    /// others are scanned past (see [`may_name`]). `None` passes every Application.
    pub naming: Option<&'a str>,
}

#[derive(Deserialize)]
struct MetadataList<'a> {
    #[serde(default, borrow)]
    items: Vec<MetadataItem<'a>>,
}

/// A page whose items are kept as their JSON text, to be parsed only if they may matter.
#[derive(Deserialize)]
struct RawMetadataList<'a> {
    #[serde(default, borrow)]
    items: Vec<&'a serde_json::value::RawValue>,
}

/// Could an item, as the JSON text the API server wrote, name `text` in any of its strings?
/// A literal search, which is sound for a text of characters JSON writes as themselves (an
/// ECR repository name is `[a-z0-9._/-]`): one written as an escape (`\u002d`, `\/`) could
/// hide it, so an item with such an escape anywhere may name anything. kube-apiserver writes
/// none for those characters (Go's encoder escapes only `<`, `>`, `&` and control characters),
/// so in practice the search decides.
pub fn may_name(item: &str, text: &str) -> bool {
    may_hold(item.as_bytes(), &memchr::memmem::Finder::new(text))
}

/// [`may_name`] with the searcher built once, for every item of a page.
fn may_hold(item: &[u8], text: &memchr::memmem::Finder<'_>) -> bool {
    text.find(item).is_some()
        || memchr::memchr_iter(b'\\', item).any(|at| matches!(item.get(at + 1), Some(b'u' | b'/')))
}

#[derive(Deserialize)]
struct MetadataItem<'a> {
    #[serde(borrow)]
    metadata: ListedMeta<'a>,
}

/// An Application's metadata as listed, borrowed from its page: strings stay in the page
/// unless they hold escapes, and of the annotations only ours are kept (a
/// `last-applied-configuration` can be most of the page; it is scanned past). Most listed
/// Applications do not concern an event, and they cost next to no allocation;
/// [`Self::into_owned`] makes an [`AppMeta`] of those that might.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedMeta<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    namespace: Cow<'a, str>,
    #[serde(default, borrow)]
    resource_version: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "image_updater_annotations")]
    annotations: OurAnnotations<'a>,
    #[serde(default, deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "null_as_default")]
    owner_references: Vec<OwnerReference>,
}

impl ListedMeta<'_> {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `image-list` annotation (the last, if a key is repeated, as a map would keep).
    pub fn image_list(&self) -> Option<&str> {
        self.annotation(crate::appconfig::annotations::IMAGE_LIST)
    }

    /// One of the annotations configuration is read from (the last, if a key is repeated).
    pub fn annotation(&self, name: &str) -> Option<&str> {
        self.annotations
            .iter()
            .rfind(|(key, _)| key == name)
            .map(|(_, value)| value.as_ref())
    }

    pub fn into_owned(self) -> AppMeta {
        AppMeta {
            name: self.name.into_owned(),
            namespace: self.namespace.into_owned(),
            resource_version: self.resource_version.into_owned(),
            annotations: self
                .annotations
                .into_iter()
                .map(|(key, value)| (key.into_owned(), value.into_owned()))
                .collect(),
            labels: self.labels,
            owner_references: self.owner_references,
        }
    }
}

/// `null` as the type's default: the API server writes absent maps as absent, but a proxy
/// or an older server may write `null`.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Our annotations of one listed Application, keys and values borrowed from the page.
type OurAnnotations<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

/// The annotations under our prefix, each value a string, borrowed where the page allows;
/// the rest skipped unbuilt.
fn image_updater_annotations<'de: 'a, 'a, D>(
    deserializer: D,
) -> Result<OurAnnotations<'a>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Ours;
    impl<'de> serde::de::Visitor<'de> for Ours {
        type Value = OurAnnotations<'de>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut kept = Vec::new();
            while let Some(Text(key)) = map.next_key()? {
                if crate::appconfig::annotations::is_configuring(&key) {
                    let Text(value) = map.next_value()?;
                    kept.push((key, value));
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }
    deserializer.deserialize_option(Ours)
}

/// A JSON string borrowed from the page when it has no escapes, so that one not kept costs
/// no allocation.
struct Text<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> serde::de::Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// Parses one page of a metadata-only list, passing each Application that may name `naming`
/// (every one, for `None`) to `each`. Returns how many the page held.
fn parse_metadata_page(
    page: &[u8],
    naming: Option<&str>,
    mut each: impl FnMut(ListedMeta<'_>),
) -> Result<usize, serde_json::Error> {
    match naming {
        None => {
            let list: MetadataList = serde_json::from_slice(page)?;
            let seen = list.items.len();
            list.items.into_iter().for_each(|item| each(item.metadata));
            Ok(seen)
        }
        // Skipping an item's text costs a fraction of parsing it into fields, and most items
        // of a page do not name what the caller looks for. A skipped item is checked to be
        // JSON, not to be an Application's metadata: it could not have concerned the caller.
        Some(text) => {
            let list: RawMetadataList = serde_json::from_slice(page)?;
            let text = memchr::memmem::Finder::new(text);
            for raw in list
                .items
                .iter()
                .filter(|raw| may_hold(raw.get().as_bytes(), &text))
            {
                let item: MetadataItem = serde_json::from_str(raw.get())?;
                each(item.metadata);
            }
            Ok(list.items.len())
        }
    }
}

/// What the first bytes of a list page say about its `continue` token.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// The list's `metadata` came first and is whole: this is the page's token.
    Token(Option<String>),
    /// More bytes are needed before the head can say.
    Incomplete,
    /// The items come first: only the whole page can say.
    ItemsFirst,
}

/// Reads a list page's `continue` token off its first bytes, which may be all of it or any
/// prefix. The API server writes a list's `metadata` before its `items` (Go's encoder keeps
/// the struct's field order), so the token is in the first few hundred bytes and the next
/// page can be asked for while the rest of this one is still arriving. A prefix never gives
/// another answer than the whole page: `metadata` counts only once its object has closed,
/// and an error is one no further bytes could mend (not an object, not JSON).
fn read_head(prefix: &[u8]) -> Result<Head, serde_json::Error> {
    enum Seen {
        Token(Option<String>),
        ItemsFirst,
    }
    struct HeadVisitor<'h>(&'h mut Option<Seen>);
    impl<'de> serde::de::Visitor<'de> for HeadVisitor<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(Text(key)) = map.next_key()? {
                match key.as_ref() {
                    "metadata" => {
                        let meta: ListMeta = map.next_value()?;
                        *self.0 = Some(Seen::Token(meta.continue_token));
                        return Ok(());
                    }
                    "items" => {
                        *self.0 = Some(Seen::ItemsFirst);
                        return Ok(());
                    }
                    _ => {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut seen = None;
    let mut deserializer = serde_json::Deserializer::from_slice(prefix);
    // Stopping inside the object makes the deserializer report the rest as unread; what was
    // read before that is all that is wanted, and the items' own parse checks the rest.
    let stopped = serde::Deserializer::deserialize_map(&mut deserializer, HeadVisitor(&mut seen));
    match (seen, stopped) {
        (Some(Seen::Token(token)), _) => Ok(Head::Token(token)),
        (Some(Seen::ItemsFirst), _) => Ok(Head::ItemsFirst),
        (None, Ok(())) => Ok(Head::Token(None)),
        (None, Err(e)) if e.is_eof() => Ok(Head::Incomplete),
        (None, Err(e)) => Err(e),
    }
}

/// A whole page's `continue` token: off its head when the head says, else from the page.
fn continue_token(page: &[u8]) -> Result<Option<String>, serde_json::Error> {
    // A whole page that is still incomplete ends too early for the parse below as well.
    if let Head::Token(token) = read_head(page)? {
        return Ok(token);
    }
    #[derive(Deserialize)]
    struct Whole {
        #[serde(default)]
        metadata: ListMeta,
    }
    Ok(serde_json::from_slice::<Whole>(page)?
        .metadata
        .continue_token)
}

/// A head longer than this is not looked for any further: the page is read whole. The API
/// server's head is a few hundred bytes; this only bounds the re-reads of a strange one.
const HEAD_LIMIT: usize = 64 * 1024;

/// The most one answer may hold, as read (after gzip is undone): a page of Applications or
/// one object. Far above a page of 500 ordinary Applications (tens of MB); a larger answer
/// would exhaust a small function's memory, so it fails with what to change instead.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

fn too_large() -> KubeError {
    KubeError::BadResponse(format!(
        "an answer larger than {} MiB: lower LIST_PAGE_SIZE (the stack's ListPageSize) so that each page of Applications is smaller",
        MAX_ANSWER_BYTES >> 20
    ))
}

/// A whole answer, read as it arrives and refused once it passes [`MAX_ANSWER_BYTES`]:
/// neither a `Content-Length` nor a compressed body can make the function hold more.
async fn read_bounded(mut response: reqwest::Response) -> Result<Bytes, KubeError> {
    let claimed = response.content_length().unwrap_or(0);
    if claimed > MAX_ANSWER_BYTES as u64 {
        return Err(too_large());
    }
    let mut received = Vec::with_capacity(claimed as usize);
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        if received.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(too_large());
        }
        received.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(received))
}

/// A list page as it arrives: its `continue` token known, its items perhaps still on the way.
pub struct ListPage {
    received: Vec<u8>,
    rest: Option<reqwest::Response>,
    token: Option<String>,
}

impl ListPage {
    /// Reads a page until its token is known: usually the first chunk, the whole page when
    /// the items come first.
    async fn start(mut response: reqwest::Response) -> Result<Self, KubeError> {
        // The API server says how long a page is; a claim is trusted only so far, so that a
        // wrong header cannot reserve memory the page never fills.
        let expected = response.content_length().unwrap_or(0).min(16 << 20) as usize;
        let mut received = Vec::with_capacity(expected.max(16 * 1024));
        let mut rest = None;
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if received.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            received.extend_from_slice(&chunk);
            match read_head(&received) {
                Ok(Head::Token(token)) => {
                    return Ok(Self {
                        received,
                        rest: Some(response),
                        token,
                    });
                }
                Ok(Head::Incomplete) if received.len() < HEAD_LIMIT => {}
                // The whole page's parse says what is wrong with it, if anything.
                Ok(Head::Incomplete | Head::ItemsFirst) | Err(_) => {
                    rest = Some(response);
                    break;
                }
            }
        }
        let mut page = Self {
            received,
            rest,
            token: None,
        };
        page.read_rest().await?;
        page.token = continue_token(&page.received).map_err(bad_metadata_list)?;
        Ok(page)
    }

    async fn read_rest(&mut self) -> Result<(), KubeError> {
        if let Some(mut response) = self.rest.take() {
            while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
                if self.received.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(too_large());
                }
                self.received.extend_from_slice(&chunk);
            }
        }
        Ok(())
    }

    /// The whole page, once the rest of it has arrived.
    async fn finish(mut self) -> Result<Vec<u8>, KubeError> {
        self.read_rest().await?;
        Ok(self.received)
    }
}

fn bad_metadata_list(e: serde_json::Error) -> KubeError {
    KubeError::BadResponse(format!("metadata list: {e}"))
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// An Application as read for a decision: everything but `status`, and of `status` only the
/// fields something here reads. The rest of `status` (the resource tree, the last operation's
/// results, the sync comparison) is often most of the object, tens of kilobytes; it is skipped
/// while parsing rather than built into a `Value` and dropped.
///
/// Kept, with their readers: `sourceType` and `sourceTypes` (which parameters a source takes,
/// `patch::source_kinds`), `summary.images` (the images Argo CD deployed, `patch`), and
/// `history` (when the current tag was deployed, `decide`); `sync`, `health`, `reconciledAt`
/// and of `operationState` all but the synced resources (whether a write is live, `rollout`).
/// A new reader of `status` adds its field to `StatusRead`.
pub struct ApplicationRead(pub Value);

/// The fields of an Application's `status` that [`ApplicationRead`] keeps.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusRead {
    source_type: Option<Value>,
    source_types: Option<Value>,
    summary: Option<SummaryRead>,
    history: Option<Value>,
    sync: Option<SyncRead>,
    health: Option<Value>,
    reconciled_at: Option<Value>,
    operation_state: Option<OperationStateRead>,
}

/// The sync status without the comparison's copy of the sources.
#[derive(Deserialize)]
struct SyncRead {
    status: Option<Value>,
    revision: Option<Value>,
    revisions: Option<Value>,
}

#[derive(Deserialize)]
struct SummaryRead {
    images: Option<Value>,
}

/// The last operation, without the per-resource results of its sync (one entry per synced
/// object: most of it, on a large Application).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OperationStateRead {
    phase: Option<Value>,
    message: Option<Value>,
    started_at: Option<Value>,
    finished_at: Option<Value>,
    operation: Option<Value>,
    sync_result: Option<SyncResultRead>,
}

#[derive(Deserialize)]
struct SyncResultRead {
    revision: Option<Value>,
    revisions: Option<Value>,
    source: Option<Value>,
    sources: Option<Value>,
}

/// The `Some` fields, by name, as a JSON object.
fn object_of(fields: impl IntoIterator<Item = (&'static str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(key, value)| Some((key.to_string(), value?)))
            .collect(),
    )
}

impl OperationStateRead {
    fn into_value(self) -> Value {
        let result = self.sync_result.map(|r| {
            object_of([
                ("revision", r.revision),
                ("revisions", r.revisions),
                ("source", r.source),
                ("sources", r.sources),
            ])
        });
        object_of([
            ("phase", self.phase),
            ("message", self.message),
            ("startedAt", self.started_at),
            ("finishedAt", self.finished_at),
            ("operation", self.operation),
            ("syncResult", result),
        ])
    }
}

impl StatusRead {
    fn into_value(self) -> Value {
        let mut status = serde_json::Map::new();
        let kept = [
            ("sourceType", self.source_type),
            ("sourceTypes", self.source_types),
            ("history", self.history),
            (
                "sync",
                self.sync.map(|s| {
                    object_of([
                        ("status", s.status),
                        ("revision", s.revision),
                        ("revisions", s.revisions),
                    ])
                }),
            ),
            ("health", self.health),
            ("reconciledAt", self.reconciled_at),
            (
                "operationState",
                self.operation_state.map(OperationStateRead::into_value),
            ),
        ];
        for (key, value) in kept {
            if let Some(value) = value {
                status.insert(key.to_string(), value);
            }
        }
        if let Some(summary) = self.summary {
            let mut kept = serde_json::Map::new();
            if let Some(images) = summary.images {
                kept.insert("images".to_string(), images);
            }
            status.insert("summary".to_string(), Value::Object(kept));
        }
        Value::Object(status)
    }
}

impl<'de> Deserialize<'de> for ApplicationRead {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = ApplicationRead;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an Application object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ApplicationRead, A::Error> {
                let mut object = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = if key == "status" {
                        match map.next_value::<Option<StatusRead>>()? {
                            Some(status) => status.into_value(),
                            None => Value::Null,
                        }
                    } else {
                        map.next_value::<Value>()?
                    };
                    object.insert(key, value);
                }
                Ok(ApplicationRead(Value::Object(object)))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// The counts behind one listing, for the report and the benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ListStats {
    pub pages: u32,
    pub seen: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error(
        "the API server rejected the bearer token (401: {message}). Map the function's role in the cluster with an EKS access entry (or aws-auth), and check the clock and CLUSTER_NAME"
    )]
    Unauthorized { message: String },
    #[error(
        "the function's role is authenticated as \"{user}\" but may not {verb} {resource} {scope}: {RBAC_HINT}"
    )]
    Forbidden {
        user: String,
        verb: String,
        resource: String,
        /// `in namespace "x"`, or `at the cluster scope` for `ARGOCD_NAMESPACES=*`.
        scope: String,
    },
    #[error("403 Forbidden: {message}: {RBAC_HINT}")]
    ForbiddenOther { message: String },
    #[error("not found: {message}")]
    NotFound { message: String },
    #[error("conflict (409): {message}")]
    Conflict { message: String },
    /// A 422 answer; `validation` is true when the server judged the content (a schema
    /// rule, with field causes) rather than a failed `test` of a JSON patch (a race).
    #[error("the API server refused the change as invalid (422): {message}")]
    Invalid { message: String, validation: bool },
    #[error("bad request ({code}): {message}")]
    BadRequest { code: u16, message: String },
    #[error("the list continuation expired (410): {message}")]
    Expired { message: String },
    #[error("the API server is throttling (429), retry after {retry_after:?}: {message}")]
    TooManyRequests {
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("the API server failed ({code}): {message}")]
    Server {
        code: u16,
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("the API server did not answer in time ({0})")]
    Timeout(String),
    #[error(
        "TLS with the API server failed: {0}. The server's certificate must be signed by the cluster CA; if KUBE_CA_DATA is set, check it"
    )]
    Tls(String),
    #[error("could not connect to the API server: {0}")]
    Connect(String),
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("unexpected answer from the API server: {0}")]
    BadResponse(String),
    #[error("the HTTP client could not be built: {0}")]
    Setup(String),
    #[error(
        "`{name}` is not a Kubernetes name (DNS-1123: lowercase letters, digits, `-` and `.`, at most 253 characters); fix the annotation, owner reference or object that names it"
    )]
    BadName { name: String },
}

/// A segment of an API path: lowercase letters, digits, `-` and `.` (API groups, versions,
/// resources and DNS-1123 names), not `.` or `..`.
fn is_path_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment.len() <= 253
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

impl KubeError {
    /// True where a retry, or an operator fixing access, can make the same request succeed.
    /// The handler fails the invocation for these so that AWS retries the event.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            Self::NotFound { .. }
                | Self::Invalid { .. }
                | Self::BadRequest { .. }
                | Self::Setup(_)
                | Self::BadName { .. }
        )
    }

    /// True where the same request, sent again in a moment, may succeed: retried inside
    /// the invocation before anything is reported.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::TooManyRequests { .. }
                | Self::Server { .. }
                | Self::Timeout(_)
                | Self::Connect(_)
                | Self::Expired { .. }
        )
    }

    /// How long the server asked us to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::TooManyRequests { retry_after, .. } | Self::Server { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }
}

impl crate::cluster::retry::Transient for KubeError {
    fn is_transient(&self) -> bool {
        KubeError::is_transient(self)
    }

    fn retry_after(&self) -> Option<Duration> {
        KubeError::retry_after(self)
    }
}

#[derive(Debug, Clone)]
pub struct KubeClient {
    http: reqwest::Client,
    base: url::Url,
    tokens: Arc<dyn TokenSource>,
}

impl KubeClient {
    /// Builds the client once per warm container: connections are pooled and reused.
    pub fn new(
        access: &ClusterAccess,
        tokens: Arc<dyn TokenSource>,
        timeouts: KubeTimeouts,
    ) -> Result<Self, KubeError> {
        let certificates = reqwest::Certificate::from_pem_bundle(&access.ca_pem)
            .map_err(|e| KubeError::Setup(format!("cluster CA is not a PEM bundle: {e}")))?;
        if certificates.is_empty() {
            return Err(KubeError::Setup(
                "cluster CA bundle holds no certificate".into(),
            ));
        }
        let base = url::Url::parse(&access.endpoint)
            .map_err(|e| KubeError::Setup(format!("endpoint `{}`: {e}", access.endpoint)))?;
        if base.scheme() != "https" {
            return Err(KubeError::Setup(format!(
                "endpoint `{}` must be https",
                access.endpoint
            )));
        }
        let http = reqwest::Client::builder()
            .tls_certs_only(certificates)
            .https_only(true)
            // Every request carries the cluster's bearer token.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeouts.connect)
            .timeout(timeouts.request)
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("argocd-ecr-updater/", env!("CARGO_PKG_VERSION")))
            // The API server gzips answers over 128 KiB for a client that asks: a page of
            // Applications crosses the network (a NAT gateway, billed by the byte) at a
            // fraction of its size. reqwest undoes it as the body arrives.
            .gzip(true)
            .build()
            .map_err(|e| KubeError::Setup(e.to_string()))?;
        Ok(Self { http, base, tokens })
    }

    /// `path` under the endpoint, keeping a path prefix the endpoint has (a proxy such as
    /// `https://rancher.example.com/k8s/clusters/c-1`); `Url::join` would drop it.
    ///
    /// Every one of `segments` must be a Kubernetes path segment (an API group, version,
    /// resource or DNS-1123 name): a name read from an annotation, an owner reference or an
    /// ImageUpdater object that says `..`, `%2F` or anything else is refused here, before it
    /// can reach a URL where it would address another object.
    fn url(&self, segments: &[&str]) -> Result<url::Url, KubeError> {
        if let Some(bad) = segments.iter().find(|s| !is_path_segment(s)) {
            return Err(KubeError::BadName {
                name: (*bad).to_string(),
            });
        }
        let mut url = self.base.clone();
        if let Ok(mut parts) = url.path_segments_mut() {
            parts.pop_if_empty().extend(segments);
        }
        Ok(url)
    }

    /// Sends a request with a bearer token and reads the whole answer; after a 401 it renews
    /// the token once.
    async fn send(
        &self,
        method: Method,
        url: url::Url,
        accept: &str,
        body: Option<(&'static str, Vec<u8>)>,
        namespace: &str,
    ) -> Result<Bytes, KubeError> {
        let response = self.respond(method, url, accept, body, namespace).await?;
        read_bounded(response).await
    }

    /// [`Self::send`] up to a successful answer's headers, its body left to the caller to
    /// read as it arrives. An error answer is read whole, to say what went wrong.
    async fn respond(
        &self,
        method: Method,
        url: url::Url,
        accept: &str,
        body: Option<(&'static str, Vec<u8>)>,
        namespace: &str,
    ) -> Result<reqwest::Response, KubeError> {
        for attempt in 0..2 {
            let token = self.tokens.token().await?;
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .bearer_auth(token)
                .header(header::ACCEPT, accept);
            if let Some((content_type, bytes)) = &body {
                request = request
                    .header(header::CONTENT_TYPE, *content_type)
                    .body(bytes.clone());
            }
            let response = request.send().await.map_err(transport_error)?;
            let status = response.status();
            // The server says what it dropped or deprecated (an unknown field pruned from
            // our write, say): worth a line in the log, never a failure.
            for warning in response.headers().get_all("warning") {
                tracing::warn!(warning = %String::from_utf8_lossy(warning.as_bytes()), %url, "API server warning");
            }
            let retry_after = response
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            if status.is_success() {
                return Ok(response);
            }
            if status == StatusCode::UNAUTHORIZED && attempt == 0 {
                self.tokens.invalidate().await;
                continue;
            }
            let bytes = read_bounded(response).await?;
            return Err(status_error(
                status,
                retry_after,
                &bytes,
                namespace,
                &method,
            ));
        }
        Err(KubeError::Unauthorized {
            message: "rejected twice".into(),
        })
    }

    /// The list paths of a scope, each with the namespace it covers (empty for all).
    pub fn list_scopes(scope: &NamespaceScope) -> Vec<String> {
        match scope {
            NamespaceScope::All => vec![String::new()],
            NamespaceScope::Only(namespaces) => namespaces.clone(),
        }
    }

    /// Lists one namespace's Applications (all namespaces for `""`) metadata-only, page by
    /// page, keeping those `keep` accepts.
    pub async fn list_application_metadata(
        &self,
        namespace: &str,
        options: ListOptions<'_>,
        mut keep: impl FnMut(&AppMeta) -> bool,
    ) -> Result<(Vec<AppMeta>, ListStats), KubeError> {
        let mut kept = Vec::new();
        let stats = self
            .list_application_metadata_from(namespace, options, None, |listed| {
                let meta = listed.into_owned();
                if keep(&meta) {
                    kept.push(meta);
                }
            })
            .await?;
        Ok((kept, stats))
    }

    /// The first page of [`Self::list_application_metadata`], asked for ahead, so that it
    /// can travel while something else (the ImageUpdater objects) is read.
    pub async fn first_application_page(
        &self,
        namespace: &str,
        options: ListOptions<'_>,
    ) -> Result<ListPage, KubeError> {
        self.start_page(namespace, options, None).await
    }

    /// Asks for a page and reads it as far as its `continue` token.
    async fn start_page(
        &self,
        namespace: &str,
        options: ListOptions<'_>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, KubeError> {
        let url = self.application_page_url(namespace, options, continue_token)?;
        let response = self
            .respond(Method::GET, url, METADATA_ONLY, None, namespace)
            .await?;
        ListPage::start(response).await
    }

    fn application_page_url(
        &self,
        namespace: &str,
        options: ListOptions<'_>,
        continue_token: Option<&str>,
    ) -> Result<url::Url, KubeError> {
        let mut url = self.url(&APPLICATIONS.collection(namespace))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("limit", &options.page_size.to_string());
            if let Some(selector) = options.label_selector {
                q.append_pair("labelSelector", selector);
            }
            if let Some(token) = continue_token {
                q.append_pair("continue", token);
            }
        }
        Ok(url)
    }

    /// Hands every listed Application to `each` as its page is parsed, starting from `first`
    /// when it was fetched ahead ([`Self::first_application_page`]; its error, if any, is
    /// this listing's).
    ///
    /// Pipelined: the next page is asked for as soon as this one's head has given its
    /// continue token (`read_head`), and this page's items arrive and are parsed while
    /// the server answers, so that neither the rest of a page nor its parse waits in line
    /// before the next page's round trip.
    pub async fn list_application_metadata_from(
        &self,
        namespace: &str,
        options: ListOptions<'_>,
        first: Option<Result<ListPage, KubeError>>,
        mut each: impl FnMut(ListedMeta<'_>),
    ) -> Result<ListStats, KubeError> {
        let mut stats = ListStats::default();
        let mut page = match first {
            Some(started) => started?,
            None => self.start_page(namespace, options, None).await?,
        };
        loop {
            let next_token = page.token.take().filter(|c| !c.is_empty());
            let next = async {
                match &next_token {
                    Some(token) => self
                        .start_page(namespace, options, Some(token))
                        .await
                        .map(Some),
                    None => Ok(None),
                }
            };
            // The request is polled first, so it is on its way before this page's rest is
            // read.
            let (next, parsed) = futures_util::future::join(next, async {
                let body = page.finish().await?;
                stats.seen += parse_metadata_page(&body, options.naming, &mut each)
                    .map_err(bad_metadata_list)?;
                stats.pages += 1;
                Ok::<(), KubeError>(())
            })
            .await;
            parsed?;
            match next? {
                Some(started) => page = started,
                None => break,
            }
        }
        Ok(stats)
    }

    /// The ApplicationSet that owns an Application, to read its `ignoreApplicationDifferences`.
    pub async fn get_application_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Value, KubeError> {
        let mut path = APPLICATIONS.collection(namespace);
        path.pop();
        path.extend(["applicationsets", name]);
        let url = self.url(&path)?;
        let bytes = self
            .send(Method::GET, url, "application/json", None, namespace)
            .await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| KubeError::BadResponse(format!("applicationset: {e}")))
    }

    /// One Application, with only the `status` fields decisions read (see [`ApplicationRead`]).
    pub async fn get_application(&self, namespace: &str, name: &str) -> Result<Value, KubeError> {
        let url = self.url(&app_path(namespace, name))?;
        let bytes = self
            .send(Method::GET, url, "application/json", None, namespace)
            .await?;
        serde_json::from_slice::<ApplicationRead>(&bytes)
            .map(|read| read.0)
            .map_err(|e| KubeError::BadResponse(format!("application: {e}")))
    }

    /// Patches one Application. The object the server answers with is checked to be JSON and
    /// then dropped: nothing reads it, and it is as large as the Application's `status`.
    pub async fn patch_application(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<(), KubeError> {
        let url = self.url(&app_path(namespace, name))?;
        let body = serde_json::to_vec(patch.body()).map_err(|e| KubeError::Setup(e.to_string()))?;
        let bytes = self
            .send(
                Method::PATCH,
                url,
                "application/json",
                Some((patch.content_type(), body)),
                namespace,
            )
            .await?;
        serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
            .map(|_| ())
            .map_err(|e| KubeError::BadResponse(format!("patched application: {e}")))
    }
}

impl KubeClient {
    /// Every object of `resource` in `namespace` (all for `""`), as JSON, following
    /// `continue`; metadata only (`PartialObjectMetadata`) when asked.
    pub async fn list_objects(
        &self,
        resource: Resource,
        namespace: &str,
        page_size: u32,
        metadata_only: bool,
    ) -> Result<Vec<Value>, KubeError> {
        let accept = if metadata_only {
            METADATA_ONLY
        } else {
            "application/json"
        };
        let mut items = Vec::new();
        let mut continue_token: Option<String> = None;
        loop {
            let mut url = self.url(&resource.collection(namespace))?;
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("limit", &page_size.to_string());
                if let Some(token) = &continue_token {
                    q.append_pair("continue", token);
                }
            }
            let bytes = self.send(Method::GET, url, accept, None, namespace).await?;
            let page: Page = serde_json::from_slice(&bytes)
                .map_err(|e| KubeError::BadResponse(format!("{} list: {e}", resource.plural)))?;
            items.extend(page.items);
            continue_token = page.metadata.continue_token.filter(|c| !c.is_empty());
            if continue_token.is_none() {
                return Ok(items);
            }
        }
    }

    /// One Secret (git write-back's `git:secret:<namespace>/<name>`).
    pub async fn get_secret(&self, namespace: &str, name: &str) -> Result<Value, KubeError> {
        let url = self.url(&["api", "v1", "namespaces", namespace, "secrets", name])?;
        let bytes = self
            .send(Method::GET, url, "application/json", None, namespace)
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| KubeError::BadResponse(format!("secret: {e}")))
    }

    /// The Secrets of a namespace matching a label selector (Argo CD's repository
    /// credentials for `git:repocreds`).
    pub async fn list_secrets(
        &self,
        namespace: &str,
        label_selector: &str,
    ) -> Result<Vec<Value>, KubeError> {
        let mut url = self.url(&["api", "v1", "namespaces", namespace, "secrets"])?;
        url.query_pairs_mut()
            .append_pair("labelSelector", label_selector);
        let bytes = self
            .send(Method::GET, url, "application/json", None, namespace)
            .await?;
        let page: Page = serde_json::from_slice(&bytes)
            .map_err(|e| KubeError::BadResponse(format!("secret list: {e}")))?;
        Ok(page.items)
    }

    /// Whether the API server allows `access` in `namespace` (every namespace when `None`):
    /// to the caller itself (`SelfSubjectAccessReview`, what `kubectl auth can-i` sends), or
    /// to `subject` (`SubjectAccessReview`, which the caller must be allowed to create).
    pub async fn review_access(
        &self,
        subject: Option<&ReviewSubject>,
        namespace: Option<&str>,
        access: &AccessNeed,
    ) -> Result<bool, KubeError> {
        let kind = match subject {
            Some(_) => "SubjectAccessReview",
            None => "SelfSubjectAccessReview",
        };
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let url = self.url(&["apis", "authorization.k8s.io", "v1", &plural])?;
        let mut attributes = json!({"group": access.group, "resource": access.resource,
            "verb": access.verb});
        if let Some(subresource) = access.subresource {
            attributes["subresource"] = json!(subresource);
        }
        if let Some(namespace) = namespace {
            attributes["namespace"] = json!(namespace);
        }
        let mut spec = json!({"resourceAttributes": attributes});
        if let Some(subject) = subject {
            spec["user"] = json!(subject.user);
            spec["groups"] = json!(subject.groups);
        }
        let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec});
        let body = serde_json::to_vec(&review).map_err(|e| KubeError::Setup(e.to_string()))?;
        let answer = self
            .send(
                Method::POST,
                url,
                "application/json",
                Some(("application/json", body)),
                namespace.unwrap_or(""),
            )
            .await?;
        let answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| KubeError::BadResponse(format!("access review: {e}")))?;
        Ok(answer["status"]["allowed"].as_bool() == Some(true))
    }

    /// A ConfigMap (`aws-auth`, which maps IAM roles to Kubernetes users and groups).
    pub async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Value, KubeError> {
        let url = self.url(&["api", "v1", "namespaces", namespace, "configmaps", name])?;
        let bytes = self
            .send(Method::GET, url, "application/json", None, namespace)
            .await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| KubeError::BadResponse(format!("config map: {e}")))
    }

    /// Records a core `Event` (`POST /api/v1/namespaces/{ns}/events`).
    pub async fn create_event(&self, namespace: &str, event: &Value) -> Result<(), KubeError> {
        let url = self.url(&["api", "v1", "namespaces", namespace, "events"])?;
        let body = serde_json::to_vec(event).map_err(|e| KubeError::Setup(e.to_string()))?;
        self.send(
            Method::POST,
            url,
            "application/json",
            Some(("application/json", body)),
            namespace,
        )
        .await
        .map(|_| ())
    }

    /// A JSON merge patch of an object's `status` subresource.
    pub async fn patch_status(
        &self,
        resource: Resource,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, KubeError> {
        let mut path = resource.collection(namespace);
        path.extend([name, "status"]);
        let url = self.url(&path)?;
        let body = serde_json::to_vec(patch).map_err(|e| KubeError::Setup(e.to_string()))?;
        let bytes = self
            .send(
                Method::PATCH,
                url,
                "application/json",
                Some(("application/merge-patch+json", body)),
                namespace,
            )
            .await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| KubeError::BadResponse(format!("patched {} status: {e}", resource.plural)))
    }
}

fn app_path<'a>(namespace: &'a str, name: &'a str) -> Vec<&'a str> {
    let mut path = APPLICATIONS.collection(namespace);
    path.push(name);
    path
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<StatusDetails>,
}

#[derive(Deserialize, Default)]
struct StatusDetails {
    #[serde(default)]
    causes: Vec<Value>,
}

fn status_error(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
    namespace: &str,
    method: &Method,
) -> KubeError {
    let parsed: Status = serde_json::from_slice(body).unwrap_or_default();
    // kube-apiserver answers a failed JSON-patch `test` with a bare 422 ("the server
    // rejected our request due to an error in our request"); a schema refusal names the
    // object ("X is invalid: ...") and lists field causes.
    let validation = parsed
        .details
        .as_ref()
        .is_some_and(|d| !d.causes.is_empty())
        || parsed.message.contains(" is invalid: ");
    let message = if parsed.message.is_empty() {
        String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()
    } else {
        parsed.message
    };
    let code = status.as_u16();
    match code {
        401 => KubeError::Unauthorized { message },
        403 => forbidden(message, namespace, method),
        404 => KubeError::NotFound { message },
        409 => KubeError::Conflict { message },
        410 => KubeError::Expired { message },
        422 => KubeError::Invalid {
            message,
            validation,
        },
        429 => KubeError::TooManyRequests {
            retry_after,
            message,
        },
        300..=399 => KubeError::BadRequest {
            code,
            message: format!(
                "a redirect, which is not followed: the bearer token goes to the cluster's endpoint only; set KUBE_API_ENDPOINT to the address the API server answers at ({message})"
            ),
        },
        504 => KubeError::Timeout(message),
        500..=599 => KubeError::Server {
            code,
            retry_after,
            message,
        },
        _ => KubeError::BadRequest { code, message },
    }
}

/// The API server says `User "X" cannot patch resource "applications" in API group
/// "argoproj.io" in the namespace "argocd"`; we turn that into what to do.
fn forbidden(message: String, namespace: &str, method: &Method) -> KubeError {
    let between = |start: &str| {
        message
            .split_once(start)
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(value, _)| value.to_string())
    };
    let Some(user) = between("User \"") else {
        return KubeError::ForbiddenOther { message };
    };
    let verb = message
        .split_once("\" cannot ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(str::to_string)
        .unwrap_or_else(|| match *method {
            Method::PATCH => "patch".into(),
            _ => "get".into(),
        });
    let resource = between("resource \"").unwrap_or_else(|| "applications".into());
    let scope = match between("in the namespace \"") {
        Some(ns) => format!("in namespace \"{ns}\""),
        None if message.contains("at the cluster scope") || namespace.is_empty() => {
            "at the cluster scope (ARGOCD_NAMESPACES=*)".to_string()
        }
        None => format!("in namespace \"{namespace}\""),
    };
    KubeError::Forbidden {
        user,
        verb,
        resource,
        scope,
    }
}

fn transport_error(error: reqwest::Error) -> KubeError {
    if error.is_timeout() {
        return KubeError::Timeout(error.to_string());
    }
    let chain = error_chain(&error);
    if is_tls_failure(&error) {
        return KubeError::Tls(chain);
    }
    // Our client reads bodies as bytes and parses them itself, so a decode error from
    // reqwest is a body that stopped arriving (the connection closed mid-answer): a transport
    // failure a retry can mend, like one met while reading chunk by chunk (`is_body`).
    if error.is_connect() || error.is_request() || error.is_body() || error.is_decode() {
        return KubeError::Connect(chain);
    }
    KubeError::BadResponse(chain)
}

fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn is_tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        // io::Error::source skips the error it wraps, so look inside it by hand.
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            && (inner.downcast_ref::<rustls::Error>().is_some() || is_tls_failure(inner))
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// Whom a `SubjectAccessReview` asks about: the user and groups an IAM role maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewSubject {
    pub user: String,
    pub groups: Vec<String>,
}

/// One thing the function does in a cluster, as RBAC names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessNeed {
    pub group: &'static str,
    pub resource: &'static str,
    pub subresource: Option<&'static str>,
    pub verb: &'static str,
}

impl std::fmt::Display for AccessNeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        match self.subresource {
            Some(sub) => write!(f, "{} {}{group}/{sub}", self.verb, self.resource),
            None => write!(f, "{} {}{group}", self.verb, self.resource),
        }
    }
}

/// Everything the function asks of the API server with this configuration: what
/// `deploy/rbac.yaml` (and `rbac-repocreds.yaml` for `GIT_REPOCREDS`) grants.
pub fn required_access(read_image_updaters: bool, repocreds: bool) -> Vec<AccessNeed> {
    let need = |group, resource, subresource, verb| AccessNeed {
        group,
        resource,
        subresource,
        verb,
    };
    let mut needs = vec![
        need("argoproj.io", "applications", None, "get"),
        need("argoproj.io", "applications", None, "list"),
        need("argoproj.io", "applications", None, "patch"),
        need("argoproj.io", "applicationsets", None, "get"),
        need("", "events", None, "create"),
    ];
    if read_image_updaters {
        let group = "argocd-image-updater.argoproj.io";
        needs.push(need(group, "imageupdaters", None, "list"));
        needs.push(need(group, "imageupdaters", Some("status"), "patch"));
    }
    if repocreds {
        needs.push(need("", "secrets", None, "list"));
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(body: Vec<u8>) -> reqwest::Response {
        reqwest::Response::from(http::Response::new(body))
    }

    #[tokio::test]
    async fn an_answer_is_read_up_to_the_bound_and_refused_past_it() {
        let whole = read_bounded(answer(vec![b'x'; 1024])).await.unwrap();
        assert_eq!(whole.len(), 1024);
        let at_bound = read_bounded(answer(vec![0; MAX_ANSWER_BYTES])).await;
        assert_eq!(at_bound.unwrap().len(), MAX_ANSWER_BYTES);
        let past = read_bounded(answer(vec![0; MAX_ANSWER_BYTES + 1])).await;
        let error = past.unwrap_err();
        assert!(matches!(error, KubeError::BadResponse(_)), "{error:?}");
        assert!(
            error.to_string().contains("lower LIST_PAGE_SIZE"),
            "{error}"
        );
    }

    #[test]
    fn the_rbac_hint_names_everything_the_code_asks_for() {
        for need in required_access(true, false) {
            let resource = match need.subresource {
                Some(sub) => format!("{}/{sub}", need.resource),
                None => need.resource.to_string(),
            };
            assert!(RBAC_HINT.contains(&resource), "{need}: {RBAC_HINT}");
            assert!(RBAC_HINT.contains(need.verb), "{need}: {RBAC_HINT}");
        }
    }

    fn error_for(code: u16, body: &str) -> KubeError {
        status_error(
            StatusCode::from_u16(code).unwrap(),
            Some(Duration::from_secs(3)),
            body.as_bytes(),
            "argocd",
            &Method::PATCH,
        )
    }

    #[test]
    fn status_bodies_become_typed_errors_with_retry_classes() {
        let table: &[(u16, bool, &str)] = &[
            (401, true, "EKS access entry"),
            (404, false, "not found"),
            (409, true, "conflict"),
            (410, true, "expired"),
            (422, false, "invalid"),
            (429, true, "throttling"),
            (500, true, "failed (500)"),
            (503, true, "failed (503)"),
            (504, true, "did not answer in time"),
            (400, false, "bad request"),
        ];
        for (code, retryable, text) in table {
            let body = format!(
                r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"m{code}","code":{code}}}"#
            );
            let error = error_for(*code, &body);
            assert_eq!(error.is_retryable(), *retryable, "{code}");
            let shown = error.to_string();
            assert!(shown.contains(text), "{code}: {shown}");
            assert!(shown.contains(&format!("m{code}")), "{code}: {shown}");
        }
        assert_eq!(
            error_for(429, "{}").retry_after(),
            Some(Duration::from_secs(3))
        );
    }

    #[test]
    fn a_403_names_the_identity_the_verb_the_namespace_and_the_fix() {
        let body = r#"{"kind":"Status","message":"applications.argoproj.io \"web\" is forbidden: User \"arn:aws:sts::123456789012:assumed-role/updater/fn\" cannot patch resource \"applications\" in API group \"argoproj.io\" in the namespace \"argocd\"","reason":"Forbidden","code":403}"#;
        let error = error_for(403, body);
        assert!(error.is_retryable());
        assert_eq!(
            error.to_string(),
            format!(
                "the function's role is authenticated as \"arn:aws:sts::123456789012:assumed-role/updater/fn\" but may not patch applications in namespace \"argocd\": {RBAC_HINT}"
            )
        );
        let other = error_for(403, "not json at all");
        assert!(other.to_string().contains("not json at all"));
        assert!(other.to_string().contains("deploy/rbac.yaml"));
    }

    #[test]
    fn a_422_with_field_causes_is_a_validation_and_a_bare_422_a_failed_test() {
        let schema = r#"{"kind":"Status","message":"Application.argoproj.io \"a\" is invalid: spec.x: Invalid value","reason":"Invalid","details":{"causes":[{"field":"spec.x"}]},"code":422}"#;
        let bare = r#"{"kind":"Status","message":"the server rejected our request due to an error in our request","reason":"Invalid","code":422}"#;
        assert!(matches!(
            error_for(422, schema),
            KubeError::Invalid {
                validation: true,
                ..
            }
        ));
        assert!(matches!(
            error_for(422, bare),
            KubeError::Invalid {
                validation: false,
                ..
            }
        ));
    }

    /// What a real kube-apiserver answered (tests/fixtures/kube-apiserver): a JSON patch that
    /// does not apply, whether its `test` failed or a path is missing, is the same bare 422,
    /// so a lost race is told from a refusal by what a refusal has (causes, " is invalid: ").
    #[test]
    fn the_422s_a_real_api_server_sent_are_told_apart_by_what_it_sends() {
        let recordings: Vec<Value> = serde_json::from_str(include_str!(
            "../../tests/fixtures/kube-apiserver/recordings.json"
        ))
        .unwrap();
        let cases = [
            ("patch-json-test-fails", false),
            ("patch-json-replace-missing-path", false),
            ("patch-merge-schema-invalid", true),
            ("patch-merge-unknown-field-strict", true),
        ];
        for (case, validation) in cases {
            let recorded = recordings.iter().find(|r| r["name"] == case).unwrap();
            assert_eq!(recorded["response"]["status"], 422, "{case}");
            let body = recorded["response"]["body"].to_string();
            assert!(
                matches!(error_for(422, &body), KubeError::Invalid { validation: v, .. } if v == validation),
                "{case}"
            );
        }
    }

    #[test]
    fn a_403_at_the_cluster_scope_says_so_and_names_the_all_namespaces_manifest() {
        let body = r#"{"kind":"Status","message":"applications.argoproj.io is forbidden: User \"arn:aws:sts::1:assumed-role/u/f\" cannot list resource \"applications\" in API group \"argoproj.io\" at the cluster scope","code":403}"#;
        let shown = status_error(
            StatusCode::FORBIDDEN,
            None,
            body.as_bytes(),
            "",
            &Method::GET,
        )
        .to_string();
        assert!(
            shown.contains("may not list applications at the cluster scope"),
            "{shown}"
        );
        assert!(shown.contains("rbac-all-namespaces.yaml"), "{shown}");
    }

    #[test]
    fn an_endpoint_with_a_path_prefix_keeps_it_and_a_name_that_is_not_dns_1123_never_reaches_a_url()
    {
        let tls = argocd_ecr_updater_standins::tls::cluster_tls(&["proxy.example.com"]).unwrap();
        let access = ClusterAccess {
            endpoint: "https://proxy.example.com/k8s/clusters/c-1/".into(),
            ca_pem: tls.ca_pem.into_bytes(),
        };
        #[derive(Debug)]
        struct NoTokens;
        #[async_trait::async_trait]
        impl TokenSource for NoTokens {
            async fn token(&self) -> Result<String, TokenError> {
                Ok(String::new())
            }
            async fn invalidate(&self) {}
        }
        let timeouts = KubeTimeouts {
            connect: Duration::from_secs(1),
            request: Duration::from_secs(1),
        };
        let client = KubeClient::new(&access, Arc::new(NoTokens), timeouts).unwrap();
        assert_eq!(
            client.url(&APPLICATIONS.collection("")).unwrap().as_str(),
            "https://proxy.example.com/k8s/clusters/c-1/apis/argoproj.io/v1alpha1/applications"
        );
        for hostile in ["..", ".", "", "a/b", "A", "x%2Fy", "name?x=1", "n#f", "é"] {
            let path = ["api", "v1", "namespaces", "argocd", "secrets", hostile];
            assert!(
                matches!(client.url(&path), Err(KubeError::BadName { .. })),
                "`{hostile}` must never reach a URL"
            );
        }
        assert!(
            client
                .url(&[
                    "api",
                    "v1",
                    "namespaces",
                    "argocd",
                    "secrets",
                    "git-creds.v2"
                ])
                .is_ok()
        );
    }

    #[test]
    fn an_application_read_keeps_spec_metadata_and_the_status_fields_decisions_read() {
        let json = r#"{"apiVersion":"argoproj.io/v1alpha1","kind":"Application",
            "metadata":{"name":"web","resourceVersion":"9","annotations":{"a":"b"}},
            "spec":{"source":{"repoURL":"r","helm":{"parameters":[{"name":"image.tag","value":"1"}]}}},
            "operation":{"sync":{}},
            "status":{"sourceType":"Helm","sourceTypes":["Helm"],
              "summary":{"images":["x/y:1"],"externalURLs":["https://e"]},
              "history":[{"id":1,"deployedAt":"2025-01-01T00:00:00Z","source":{"repoURL":"r"}}],
              "resources":[{"kind":"Deployment","name":"web","status":"Synced"}],
              "operationState":{"phase":"Succeeded","finishedAt":"2025-01-01T00:00:01Z",
                "syncResult":{"revision":"abc","resources":[{"kind":"Deployment"}]}},
              "sync":{"status":"Synced","revision":"abc","comparedTo":{"source":{"repoURL":"r"}}},
              "health":{"status":"Healthy"},"reconciledAt":"2025-01-01T00:00:02Z"}}"#;
        let read: ApplicationRead = serde_json::from_str(json).unwrap();
        let full: Value = serde_json::from_str(json).unwrap();
        for key in ["apiVersion", "kind", "metadata", "spec", "operation"] {
            assert_eq!(read.0[key], full[key], "{key}");
        }
        assert_eq!(
            read.0["status"],
            json!({"sourceType": "Helm", "sourceTypes": ["Helm"],
                "summary": {"images": ["x/y:1"]},
                "history": [{"id": 1, "deployedAt": "2025-01-01T00:00:00Z", "source": {"repoURL": "r"}}],
                "sync": {"status": "Synced", "revision": "abc"},
                "health": {"status": "Healthy"},
                "reconciledAt": "2025-01-01T00:00:02Z",
                "operationState": {"phase": "Succeeded", "finishedAt": "2025-01-01T00:00:01Z",
                    "syncResult": {"revision": "abc"}}})
        );
    }

    #[test]
    fn an_application_read_without_status_or_with_null_status_has_none_added() {
        let bare: ApplicationRead = serde_json::from_str(r#"{"metadata":{"name":"a"}}"#).unwrap();
        assert_eq!(bare.0, json!({"metadata": {"name": "a"}}));
        let null: ApplicationRead =
            serde_json::from_str(r#"{"metadata":{"name":"a"},"status":null}"#).unwrap();
        assert_eq!(null.0["status"], Value::Null);
        let empty: ApplicationRead = serde_json::from_str(r#"{"status":{}}"#).unwrap();
        assert_eq!(empty.0, json!({"status": {}}));
    }

    #[test]
    fn an_application_read_refuses_what_is_not_an_object() {
        for body in [
            r#"[]"#,
            r#""x""#,
            r#"{"status":{"history":"#,
            r#"{"status":[1]}"#,
        ] {
            assert!(
                serde_json::from_str::<ApplicationRead>(body).is_err(),
                "{body}"
            );
        }
    }

    #[test]
    fn metadata_items_keep_only_the_image_updater_annotations() {
        let json = r#"{"kind":"PartialObjectMetadataList","metadata":{"continue":"abc"},"items":[
            {"metadata":{"name":"a","namespace":"argocd","resourceVersion":"7",
              "annotations":{"argocd-image-updater.argoproj.io/image-list":"x/y","kubectl.kubernetes.io/last-applied-configuration":"{\"huge\":1}",
                "argocd-image-updater.argoproj.io\/app.update-strategy":"digest"},
              "ownerReferences":[{"apiVersion":"argoproj.io/v1alpha1","kind":"ApplicationSet","name":"set","uid":"u"}]}},
            {"metadata":{"name":"b","annotations":null,"labels":null,"ownerReferences":null}}]}"#;
        let list: MetadataList = serde_json::from_str(json).unwrap();
        let kept: Vec<AppMeta> = list
            .items
            .into_iter()
            .map(|i| i.metadata.into_owned())
            .collect();
        assert_eq!(
            kept[0].annotations,
            BTreeMap::from([
                (
                    "argocd-image-updater.argoproj.io/app.update-strategy".to_string(),
                    "digest".to_string()
                ),
                (
                    "argocd-image-updater.argoproj.io/image-list".to_string(),
                    "x/y".to_string()
                )
            ])
        );
        assert_eq!(kept[0].owner_references[0].kind, "ApplicationSet");
        assert!(kept[1].annotations.is_empty());
        assert!(kept[1].labels.is_empty());
        assert!(kept[1].owner_references.is_empty());
    }

    #[test]
    fn listed_metadata_borrows_from_its_page_unless_a_string_holds_an_escape() {
        let json = r#"{"items":[{"metadata":{"name":"a","namespace":"argo\u0063d","resourceVersion":"7",
            "annotations":{"argocd-image-updater.argoproj.io/image-list":"x/y",
              "argocd-image-updater.argoproj.io/image-list":"x/z"}}}]}"#;
        let list: MetadataList = serde_json::from_str(json).unwrap();
        let listed = &list.items[0].metadata;
        assert!(matches!(listed.name, Cow::Borrowed("a")));
        assert!(matches!(&listed.namespace, Cow::Owned(n) if n == "argocd"));
        assert!(matches!(listed.annotations[0].1, Cow::Borrowed("x/y")));
        assert_eq!(
            listed.image_list(),
            Some("x/z"),
            "the last of a repeated key, as a map keeps"
        );
        let owned = list.items.into_iter().next().unwrap().metadata.into_owned();
        assert_eq!(owned.annotations.len(), 1);
        assert_eq!(
            owned.annotations[crate::appconfig::annotations::IMAGE_LIST],
            "x/z"
        );
    }

    #[test]
    fn a_kept_annotation_that_is_not_a_string_is_a_bad_listing() {
        let json = r#"{"items":[{"metadata":{"name":"a",
            "annotations":{"argocd-image-updater.argoproj.io/image-list":7}}}]}"#;
        assert!(serde_json::from_str::<MetadataList>(json).is_err());
        let other = r#"{"items":[{"metadata":{"name":"a","annotations":{"other":7}}}]}"#;
        assert!(serde_json::from_str::<MetadataList>(other).is_ok());
    }

    #[test]
    fn the_continue_token_is_read_wherever_the_list_puts_its_metadata() {
        let cases: &[(&str, &[u8], Option<&str>)] = &[
            (
                "metadata before items, as the API server writes it",
                br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5","continue":"abc"},"items":[{"metadata":{"name":"a"}}]}"#,
                Some("abc"),
            ),
            (
                "items before metadata",
                br#"{"items":[{"metadata":{"name":"a","annotations":{"k":"}"}}}],"metadata":{"continue":"def"}}"#,
                Some("def"),
            ),
            ("no metadata at all", br#"{"kind":"List","items":[]}"#, None),
            ("an empty object", b"{}", None),
            (
                "an escaped key",
                br#"{"meta\u0064ata":{"continue":"ghi"},"items":[]}"#,
                Some("ghi"),
            ),
            (
                "the last page, no token",
                br#"{"metadata":{"resourceVersion":"5"},"items":[]}"#,
                None,
            ),
        ];
        for (case, page, token) in cases {
            assert_eq!(continue_token(page).unwrap().as_deref(), *token, "{case}");
        }
    }

    #[test]
    fn a_head_read_from_any_prefix_of_a_page_says_nothing_or_what_the_whole_page_says() {
        let pages: &[&[u8]] = &[
            br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5","continue":"abc","remainingItemCount":12},"items":[{"metadata":{"name":"a"}}]}"#,
            br#"{"items":[{"metadata":{"name":"a","annotations":{"k":"}"}}}],"metadata":{"continue":"def"}}"#,
            br#"{"meta\u0064ata":{"continue":"g\"hi"},"items":[]}"#,
            br#"{"metadata":{"resourceVersion":"5"},"items":[]}"#,
            br#"{"kind":"List","items":[]}"#,
            br#"{"metadata":{"continue":"abc"}"#,
            br#"[{"metadata":{"continue":"abc"}}]"#,
            br#"{"kind":"List""#,
        ];
        for page in pages {
            let whole = continue_token(page);
            for end in 0..=page.len() {
                let prefix = String::from_utf8_lossy(&page[..end]);
                match read_head(&page[..end]) {
                    Ok(Head::Token(token)) => {
                        assert_eq!(Some(&token), whole.as_ref().ok(), "{prefix}")
                    }
                    Ok(Head::Incomplete | Head::ItemsFirst) => {}
                    Err(_) => assert!(whole.is_err(), "{prefix}"),
                }
            }
        }
    }

    #[test]
    fn a_head_needs_more_bytes_until_the_metadata_object_closes() {
        let table: &[(&str, &[u8], Head)] = &[
            ("nothing yet", b"", Head::Incomplete),
            (
                "an object closed with neither",
                br#"{"kind":"List"}"#,
                Head::Token(None),
            ),
            (
                "the kind only",
                br#"{"kind":"PartialObjectMetadataList","#,
                Head::Incomplete,
            ),
            (
                "inside the token",
                br#"{"metadata":{"continue":"ab"#,
                Head::Incomplete,
            ),
            (
                "a number that may go on",
                br#"{"metadata":{"remainingItemCount":12"#,
                Head::Incomplete,
            ),
            (
                "the metadata closed",
                br#"{"metadata":{"continue":"abc"},"ite"#,
                Head::Token(Some("abc".into())),
            ),
            ("the items first", br#"{"items":[{"metad"#, Head::ItemsFirst),
        ];
        for (case, prefix, head) in table {
            assert_eq!(read_head(prefix).ok().as_ref(), Some(head), "{case}");
        }
        for not_a_list in [&b"["[..], b"<html>", b"{\"kind\" 1"] {
            assert!(
                read_head(not_a_list).is_err(),
                "{}",
                String::from_utf8_lossy(not_a_list)
            );
        }
    }

    #[test]
    fn a_page_that_is_not_a_list_object_has_no_token_to_read() {
        for page in [&b"[]"[..], b"", b"{\"metadata\":", b"{\"items\":[1,"] {
            assert!(
                continue_token(page).is_err(),
                "{}",
                String::from_utf8_lossy(page)
            );
        }
    }

    #[test]
    fn an_item_may_name_a_repository_only_if_its_text_holds_it_or_an_escape_that_could() {
        let table: &[(&str, &str, bool)] = &[
            (
                "the repository written plainly",
                r#"{"a":"r.example.com/web:1"}"#,
                true,
            ),
            ("no mention of it", r#"{"a":"r.example.com/api:1"}"#, false),
            (
                "a letter of it written as a unicode escape",
                r#"{"a":"r.example.com/we\u0062"}"#,
                true,
            ),
            (
                "a slash written escaped",
                r#"{"a":"r.example.com\/x"}"#,
                true,
            ),
            (
                "only quotes and newlines escaped",
                r#"{"a":"say \"hi\"\n"}"#,
                false,
            ),
            (
                "an escaped backslash before a u",
                r#"{"a":"C:\\users"}"#,
                true,
            ),
        ];
        for (case, item, expected) in table {
            assert_eq!(may_name(item, "web"), *expected, "{case}");
        }
    }

    mod naming {
        use super::*;
        use crate::appconfig::annotations::IMAGE_LIST;
        use proptest::prelude::*;

        const REGISTRY: &str = "1234.dkr.ecr.eu-west-1.amazonaws.com";
        const PUSHED: &str = "team/web-api";

        /// One character of a JSON string as the API server might write it, or as a hostile
        /// or unusual encoder would: plainly, as `\u00XX`, or (a slash) as `\/`.
        fn encode(c: char, how: u8) -> String {
            match (c, how % 4) {
                ('"', _) => "\\\"".into(),
                ('/', 1) => "\\/".into(),
                (c, 2) => format!("\\u{:04x}", c as u32),
                (c, _) => c.to_string(),
            }
        }

        fn image_list() -> impl Strategy<Value = String> {
            let registry = prop::sample::select(vec![REGISTRY, "other.example.com"]);
            let repository =
                prop::sample::select(vec![PUSHED, "team/web", "web-api", "team/web-api-2"]);
            let entry = (
                prop::option::of("[a-z]{1,4}"),
                registry,
                repository,
                prop::option::of("[0-9.~^x]{1,5}"),
            )
                .prop_map(|(alias, registry, repository, constraint)| {
                    let alias = alias.map(|a| format!("{a}=")).unwrap_or_default();
                    let constraint = constraint.map(|c| format!(":{c}")).unwrap_or_default();
                    format!("{alias}{registry}/{repository}{constraint}")
                });
            prop::collection::vec(entry, 0..3).prop_map(|entries| entries.join(", "))
        }

        proptest! {
            #[test]
            fn a_page_searched_for_the_pushed_repository_passes_on_every_application_whose_image_list_names_it(
                lists in prop::collection::vec((prop::option::of(image_list()), prop::collection::vec(any::<u8>(), 1..8)), 0..10),
            ) {
                let items: Vec<String> = lists
                    .iter()
                    .enumerate()
                    .map(|(i, (list, how))| {
                        let annotations = match list {
                            Some(list) => {
                                let value: String = list
                                    .chars()
                                    .zip(how.iter().cycle())
                                    .map(|(c, how)| encode(c, *how))
                                    .collect();
                                format!(r#","annotations":{{"{IMAGE_LIST}":"{value}","note":"web"}}"#)
                            }
                            None => String::new(),
                        };
                        format!(r#"{{"metadata":{{"name":"app-{i}","namespace":"argocd"{annotations}}}}}"#)
                    })
                    .collect();
                let page = format!(r#"{{"metadata":{{}},"items":[{}]}}"#, items.join(","));
                let concerned = |naming: Option<&str>| {
                    let mut names = Vec::new();
                    let seen = parse_metadata_page(page.as_bytes(), naming, |listed| {
                        if listed
                            .image_list()
                            .is_some_and(|list| crate::appconfig::annotations::list_names(list, REGISTRY, PUSHED))
                        {
                            names.push(listed.name.into_owned());
                        }
                    })
                    .unwrap();
                    (seen, names)
                };
                let every = concerned(None);
                prop_assert_eq!(every.0, lists.len());
                prop_assert_eq!(concerned(Some(PUSHED)), every);
            }
        }

        #[test]
        fn a_page_searched_for_a_repository_skips_the_applications_that_do_not_name_it() {
            let page = format!(
                r#"{{"items":[{{"metadata":{{"name":"a","annotations":{{"{IMAGE_LIST}":"{REGISTRY}/{PUSHED}"}}}}}},{{"metadata":{{"name":"b","annotations":{{"{IMAGE_LIST}":"{REGISTRY}/other"}}}}}}]}}"#
            );
            let mut passed = Vec::new();
            let seen = parse_metadata_page(page.as_bytes(), Some(PUSHED), |listed| {
                passed.push(listed.name.into_owned())
            })
            .unwrap();
            assert_eq!((seen, passed), (2, vec!["a".to_string()]));
        }
    }
}
