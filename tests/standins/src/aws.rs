//! ECR and EKS, speaking the wire protocols the AWS SDK sends once pointed at an endpoint
//! URL: JSON 1.1 with `X-Amz-Target` for ECR, REST-JSON for EKS.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::faults::lock;

/// One image in a repository. Several tags on one digest are several `Image`s.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    pub repository: String,
    /// `None` for an untagged manifest (a platform image of a multi-arch push).
    #[serde(default)]
    pub tag: Option<String>,
    pub digest: String,
    #[serde(with = "time::serde::rfc3339")]
    pub pushed_at: OffsetDateTime,
    #[serde(default = "default_media_type")]
    pub media_type: String,
    /// For an image index: the platforms it holds, as `os/arch[/variant]`.
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub size: i64,
    /// A manifest served as is (a cosign signature manifest), instead of one made up.
    #[serde(default)]
    pub manifest: Option<String>,
    /// ECR's `imageStatus`: `ACTIVE` (the default), or `ARCHIVED`/`ACTIVATING` for an image in
    /// the archive storage class.
    #[serde(default = "active")]
    pub status: String,
    /// ECR's `artifactMediaType`, the manifest's config media type: a Helm chart's
    /// (`application/vnd.cncf.helm.config.v1+json`). `None` for an image: ECR then answers
    /// an image config's type for a manifest and nothing for an index.
    #[serde(default)]
    pub artifact_media_type: Option<String>,
}

fn active() -> String {
    "ACTIVE".into()
}

impl Image {
    /// An image whose manifest is `manifest`, pushed now; untagged with `tag` empty.
    pub fn with_manifest(repository: &str, tag: &str, digest: &str, manifest: String) -> Self {
        Self {
            repository: repository.to_string(),
            tag: Some(tag.to_string()).filter(|t| !t.is_empty()),
            digest: digest.to_string(),
            pushed_at: OffsetDateTime::now_utc(),
            media_type: default_media_type(),
            platforms: Vec::new(),
            size: 0,
            manifest: Some(manifest),
            status: active(),
            artifact_media_type: None,
        }
    }
}

fn default_media_type() -> String {
    "application/vnd.oci.image.manifest.v1+json".into()
}

pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

pub struct AwsState {
    pub account: String,
    pub region: String,
    pub cluster_name: String,
    /// Filled in once the Kubernetes stand-in is listening.
    pub kube_endpoint: Mutex<String>,
    pub ca_pem: String,
    /// Images by repository name.
    images: Mutex<BTreeMap<String, Repository>>,
    repositories: Mutex<Vec<String>>,
    /// SNS messages published: `{TopicArn, Subject, Message}`.
    published: Mutex<Vec<Value>>,
    pub(crate) invocations: Mutex<Vec<(String, String, Value)>>,
    /// SQS queues by URL, and each one's messages.
    queues: Mutex<BTreeMap<String, Vec<QueueMessage>>>,
    /// Redrive policies by queue URL: the dead-letter queue and the receive limit.
    redrives: Mutex<BTreeMap<String, (String, u32)>>,
    /// How many further short-poll receives answer empty although messages are visible: SQS
    /// samples a subset of its servers on a short poll and documents that it may do so.
    short_poll_misses: std::sync::atomic::AtomicUsize,
    /// Secrets Manager secrets by ARN: their text, and whether the function may read them.
    secrets: Mutex<BTreeMap<String, (String, bool)>>,
    /// CodeCommit repositories, as an in-memory commit history keyed by repository name.
    pub codecommit: crate::github::GitHubState,
    /// Layer blobs by (repository, digest), served at the URL `GetDownloadUrlForLayer` gives.
    blobs: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    /// ECR managed signing's statuses by (repository, digest): `{signingProfileArn, status,
    /// failureCode?, failureReason?}` per profile.
    signing: Mutex<BTreeMap<(String, String), Vec<Value>>>,
    /// Filled in once the AWS stand-in is listening: the base of blob URLs.
    pub endpoint: Mutex<String>,
    /// The stack as `doctor` reads it: function, rules, access entries, repositories.
    pub(crate) deployment: Mutex<crate::deployment::Deployment>,
    /// Scan results by (repository, digest): status and findings per severity.
    scans: Mutex<BTreeMap<(String, String), (String, BTreeMap<String, u64>)>>,
    /// Other accounts' registries served from the same images: whether their repository
    /// policy lets the function's role read (cross-account ECR).
    registries: Mutex<BTreeMap<String, bool>>,
    /// Further EKS clusters by name: their region, endpoint and CA (several clusters).
    clusters: Mutex<BTreeMap<String, (String, String, String)>>,
    /// Clusters of another account: only this access key (a role of that account) may
    /// describe them, as EKS has no cross-account DescribeCluster.
    cluster_owners: Mutex<BTreeMap<String, String>>,
    /// Roles the function may assume, by ARN: the credentials AssumeRole hands out (`None`:
    /// the role's trust policy refuses the function).
    roles: Mutex<BTreeMap<String, Option<crate::Identity>>>,
    /// CodeCommit repositories the function's role may not use.
    pub codecommit_denied: Mutex<std::collections::BTreeSet<String>>,
    /// The IAM identities whose signatures AWS would take (besides the roles' assumed ones).
    identities: Mutex<Vec<crate::Identity>>,
    /// Access keys whose session AWS would call expired.
    expired_keys: Mutex<Vec<String>>,
    /// How far tests moved the queues' clock ahead of real time.
    queue_clock: Mutex<std::time::Duration>,
    /// CloudWatch alarms a rollout may be verified by.
    pub cloudwatch: crate::cloudwatch::CloudWatch,
}

/// A message in an SQS queue.
#[derive(Debug, Clone)]
pub struct QueueMessage {
    pub id: String,
    pub body: String,
    /// When it was sent, in Unix milliseconds (SQS's `SentTimestamp`).
    pub sent_ms: i64,
    /// Set while received and not deleted: hidden from further receives until the
    /// visibility timeout passes or is changed.
    receipt: Option<(String, std::time::Instant)>,
    /// How many times it was received (SQS's `ApproximateReceiveCount`).
    pub receives: u32,
    /// `DelaySeconds` it was sent with: hidden from receives until then (the queues' clock).
    pub delay_seconds: u32,
    hidden_until: Option<std::time::Instant>,
}

/// A message as one receive handed it out.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub receipt: String,
    pub body: String,
    /// How many times it was received, this time included.
    pub receives: u32,
    pub sent_ms: i64,
}

impl QueueMessage {
    /// Whether a receive at `now` (the queue's clock, [`AwsState::queue_now`]) may hand it out.
    fn visible(&self, now: std::time::Instant) -> bool {
        self.hidden_until.is_none_or(|until| until <= now)
            && self.receipt.as_ref().is_none_or(|(_, until)| *until <= now)
    }
}

impl AwsState {
    /// The queues' clock: real time plus what tests advanced it by. A visibility timeout runs
    /// out on this clock, so a test can make received messages visible again when it chooses,
    /// instead of waiting (and racing a slow machine).
    pub fn queue_now(&self) -> std::time::Instant {
        std::time::Instant::now() + *lock(&self.queue_clock)
    }

    /// Moves the queues' clock on by `by`: every visibility timeout within it runs out.
    pub fn advance_queue_clock(&self, by: std::time::Duration) {
        *lock(&self.queue_clock) += by;
    }

    /// Takes signatures of `identity` too (an operator's, another account's).
    pub fn add_identity(&self, identity: crate::Identity) {
        lock(&self.identities).push(identity);
    }

    /// AWS answers `ExpiredTokenException` to this access key from now on.
    pub fn expire(&self, access_key_id: &str) {
        lock(&self.expired_keys).push(access_key_id.to_string());
    }

    /// Every identity whose signature is taken: the known ones and the roles' assumed ones.
    fn signers(&self) -> Vec<crate::Identity> {
        let mut all = lock(&self.identities).clone();
        all.extend(lock(&self.roles).values().flatten().cloned());
        all
    }

    pub fn add_role(&self, role_arn: &str, assumed: Option<crate::Identity>) {
        lock(&self.roles).insert(role_arn.to_string(), assumed);
    }

    /// Only `access_key_id` may describe the cluster: it lives in another account.
    pub fn restrict_cluster(&self, name: &str, access_key_id: &str) {
        lock(&self.cluster_owners).insert(name.to_string(), access_key_id.to_string());
    }

    /// Makes DescribeCluster answer for another cluster, in `region`.
    /// Changes the deployed stack `doctor` reads (a test breaks one thing).
    pub fn deployment(&self, change: impl FnOnce(&mut crate::deployment::Deployment)) {
        change(&mut lock(&self.deployment));
    }

    /// The deployed stack as it is now.
    pub fn deployed(&self) -> crate::deployment::Deployment {
        lock(&self.deployment).clone()
    }

    pub fn add_cluster(&self, name: &str, region: &str, endpoint: &str, ca_pem: &str) {
        lock(&self.clusters).insert(
            name.to_string(),
            (region.to_string(), endpoint.to_string(), ca_pem.to_string()),
        );
    }

    pub fn new(
        account: &str,
        region: &str,
        cluster_name: &str,
        ca_pem: String,
        identities: Vec<crate::Identity>,
    ) -> Self {
        Self {
            identities: Mutex::new(identities),
            expired_keys: Mutex::new(Vec::new()),
            queue_clock: Mutex::new(std::time::Duration::ZERO),
            account: account.into(),
            region: region.into(),
            cluster_name: cluster_name.into(),
            kube_endpoint: Mutex::new(String::new()),
            ca_pem,
            images: Mutex::new(BTreeMap::new()),
            repositories: Mutex::new(Vec::new()),
            published: Mutex::new(Vec::new()),
            invocations: Mutex::new(Vec::new()),
            clusters: Mutex::new(BTreeMap::new()),
            cluster_owners: Mutex::new(BTreeMap::new()),
            roles: Mutex::new(BTreeMap::new()),
            queues: Mutex::new(BTreeMap::new()),
            redrives: Mutex::new(BTreeMap::new()),
            short_poll_misses: std::sync::atomic::AtomicUsize::new(0),
            secrets: Mutex::new(BTreeMap::new()),
            codecommit: crate::github::GitHubState::default(),
            scans: Mutex::new(BTreeMap::new()),
            registries: Mutex::new(BTreeMap::new()),
            blobs: Mutex::new(BTreeMap::new()),
            signing: Mutex::new(BTreeMap::new()),
            endpoint: Mutex::new(String::new()),
            deployment: Mutex::new(crate::deployment::Deployment::seed(
                account,
                region,
                crate::FUNCTION_IAM_ROLE_ARN,
            )),
            codecommit_denied: Mutex::new(std::collections::BTreeSet::new()),
            cloudwatch: crate::cloudwatch::CloudWatch::default(),
        }
    }

    /// Whether another account's registry admits the function's role (`add_registry`).
    pub fn registry_readable(&self, account: &str) -> bool {
        lock(&self.registries)
            .get(account)
            .copied()
            .unwrap_or(false)
    }

    /// Serves another account's registry (the same images): `readable` is whether its
    /// repository policy allows the function's role.
    pub fn add_registry(&self, account: &str, readable: bool) {
        lock(&self.registries).insert(account.to_string(), readable);
    }

    /// Stores a layer blob.
    /// Pushes `image` as a single-platform OCI image whose config carries `labels` (its
    /// `org.opencontainers.image.*` provenance, say): the config is a blob served at the URL
    /// `GetDownloadUrlForLayer` gives, under the digest the manifest names.
    pub fn push_labelled(&self, mut image: Image, labels: &Value) {
        let config = json!({"architecture": "amd64", "os": "linux", "config": {"Labels": labels},
            "rootfs": {"type": "layers", "diff_ids": []}})
        .to_string()
        .into_bytes();
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &config);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let config_digest = format!("sha256:{hex}");
        image.manifest = Some(
            json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
                "layers": []})
            .to_string(),
        );
        self.put_blob(&image.repository, &config_digest, config);
        self.push(image);
    }

    /// Sets what `DescribeImageSigningStatus` answers for `digest`: one `(profile ARN,
    /// IN_PROGRESS | COMPLETE | FAILED)` per signing profile, as ECR managed signing moves it.
    pub fn set_signing(&self, repository: &str, digest: &str, statuses: &[(&str, &str)]) {
        let statuses = statuses
            .iter()
            .map(|(profile, status)| {
                let mut s = json!({"signingProfileArn": profile, "status": status});
                if *status == "FAILED" {
                    s["failureCode"] = json!("SigningProfileRevoked");
                    s["failureReason"] = json!("The signing profile was revoked.");
                }
                s
            })
            .collect();
        lock(&self.signing).insert((repository.to_string(), digest.to_string()), statuses);
    }

    /// Attaches a Notation signature to `subject` as ECR managed signing does: an untagged
    /// OCI manifest of artifact type `application/vnd.cncf.notary.signature` whose one layer
    /// is the COSE `envelope` (a blob served at the URL `GetDownloadUrlForLayer` gives) and
    /// whose `subject` is the image. Returns the signature manifest's digest.
    pub fn attach_notation_signature(
        &self,
        repository: &str,
        subject: &str,
        envelope: Vec<u8>,
    ) -> String {
        let sha256 = |bytes: &[u8]| {
            let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
            let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
            format!("sha256:{hex}")
        };
        let layer = sha256(&envelope);
        let manifest = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": "application/vnd.cncf.notary.signature",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "size": 2},
            "layers": [{"mediaType": "application/cose", "digest": layer, "size": envelope.len()}],
            "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": subject, "size": 1000},
            "annotations": {"io.cncf.notary.x509chain.thumbprint#S256": "[]"}})
        .to_string();
        let digest = sha256(manifest.as_bytes());
        self.put_blob(repository, &layer, envelope);
        self.push(Image::with_manifest(repository, "", &digest, manifest));
        digest
    }

    pub fn put_blob(&self, repository: &str, digest: &str, bytes: Vec<u8>) {
        lock(&self.blobs).insert((repository.to_string(), digest.to_string()), bytes);
    }

    /// Records the scan of an image: `COMPLETE` with its findings, or `IN_PROGRESS`,
    /// `FAILED`, … as ECR reports them.
    pub fn set_scan(&self, repository: &str, digest: &str, status: &str, counts: &[(&str, u64)]) {
        lock(&self.scans).insert(
            (repository.to_string(), digest.to_string()),
            (
                status.to_string(),
                counts.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            ),
        );
    }

    /// Stores a Secrets Manager secret the function may (or, `readable: false`, may not) read.
    pub fn put_secret(&self, arn: &str, text: &str, readable: bool) {
        lock(&self.secrets).insert(arn.to_string(), (text.to_string(), readable));
    }

    /// What Lambda's `Invoke` was asked: the function named, the invocation type, the payload.
    pub fn invocations(&self) -> Vec<(String, String, Value)> {
        lock(&self.invocations).clone()
    }

    /// What was published to SNS.
    pub fn published(&self) -> Vec<Value> {
        lock(&self.published).clone()
    }

    /// Creates an SQS queue and returns its URL (as the AWS SDK sees it).
    pub fn create_queue(&self, name: &str) -> String {
        let url = format!(
            "https://sqs.{}.amazonaws.com/{}/{name}",
            self.region, self.account
        );
        lock(&self.queues).entry(url.clone()).or_default();
        url
    }

    /// Deletes a queue and what it holds, as `aws sqs delete-queue` does.
    pub fn delete_queue(&self, name: &str) {
        let url = format!(
            "https://sqs.{}.amazonaws.com/{}/{name}",
            self.region, self.account
        );
        lock(&self.queues).remove(&url);
    }

    /// Puts a message in a queue, as EventBridge or Lambda would park a failed event.
    pub fn send_message(&self, queue_url: &str, body: &str) -> String {
        let now_ms = (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
        self.send_message_at(queue_url, body, now_ms)
    }

    /// Puts a message in a queue as if it had been sent at `sent_ms` (Unix milliseconds).
    pub fn send_message_at(&self, queue_url: &str, body: &str, sent_ms: i64) -> String {
        self.send_delayed_at(queue_url, body, sent_ms, 0)
    }

    /// Puts a message in a queue, hidden from receives for `delay_seconds` on the queues'
    /// clock, as SQS's `DelaySeconds` does.
    pub fn send_delayed_at(
        &self,
        queue_url: &str,
        body: &str,
        sent_ms: i64,
        delay_seconds: u32,
    ) -> String {
        let hidden_until = (delay_seconds > 0)
            .then(|| self.queue_now() + std::time::Duration::from_secs(u64::from(delay_seconds)));
        let mut queues = lock(&self.queues);
        let messages = queues.entry(queue_url.to_string()).or_default();
        let n = MESSAGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let id = format!("00000000-0000-0000-2222-{n:012}");
        messages.push(QueueMessage {
            id: id.clone(),
            body: body.to_string(),
            sent_ms,
            receipt: None,
            receives: 0,
            delay_seconds,
            hidden_until,
        });
        id
    }

    /// A queue's redrive policy: a message received `max_receives` times and still there
    /// moves to `dead_letter_url` on its next receive, as SQS moves it.
    pub fn set_redrive(&self, queue_url: &str, dead_letter_url: &str, max_receives: u32) {
        lock(&self.redrives).insert(
            queue_url.to_string(),
            (dead_letter_url.to_string(), max_receives),
        );
    }

    /// Receives up to `max` visible messages for `visibility`, as `ReceiveMessage` does
    /// (redrive included), each with a new receipt handle.
    pub fn receive(
        &self,
        queue_url: &str,
        max: usize,
        visibility: std::time::Duration,
    ) -> Vec<Received> {
        let redrive = lock(&self.redrives).get(queue_url).cloned();
        let now = self.queue_now();
        let mut queues = lock(&self.queues);
        let mut moved = Vec::new();
        let mut out = Vec::new();
        if let Some(messages) = queues.get_mut(queue_url) {
            if let Some((_, max_receives)) = &redrive {
                let (dead, kept): (Vec<QueueMessage>, Vec<QueueMessage>) = std::mem::take(messages)
                    .into_iter()
                    .partition(|m| m.visible(now) && m.receives >= *max_receives);
                *messages = kept;
                moved = dead;
            }
            for message in messages.iter_mut().filter(|m| m.visible(now)).take(max) {
                let receipt = format!(
                    "receipt-{}-{}",
                    message.id,
                    RECEIPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                );
                message.receipt = Some((receipt.clone(), now + visibility));
                message.receives += 1;
                out.push(Received {
                    id: message.id.clone(),
                    receipt,
                    body: message.body.clone(),
                    receives: message.receives,
                    sent_ms: message.sent_ms,
                });
            }
        }
        if let Some((dead_letter_url, _)) = redrive {
            let parked = queues.entry(dead_letter_url).or_default();
            for mut message in moved {
                message.receipt = None;
                parked.push(message);
            }
        }
        out
    }

    /// Deletes a received message by its receipt handle; false if the handle is stale.
    pub fn delete(&self, queue_url: &str, receipt: &str) -> bool {
        let mut queues = lock(&self.queues);
        let Some(messages) = queues.get_mut(queue_url) else {
            return false;
        };
        let before = messages.len();
        messages.retain(|m| m.receipt.as_ref().is_none_or(|(r, _)| r != receipt));
        messages.len() < before
    }

    /// The next `count` short-poll receives answer empty whatever the queue holds.
    pub fn short_polls_miss(&self, count: usize) {
        self.short_poll_misses
            .store(count, std::sync::atomic::Ordering::SeqCst);
    }

    /// The messages still in a queue (received or not).
    pub fn queue(&self, queue_url: &str) -> Vec<QueueMessage> {
        lock(&self.queues)
            .get(queue_url)
            .cloned()
            .unwrap_or_default()
    }

    /// Adds (or re-tags) an image. A tag moves: ECR keeps one digest per tag.
    pub fn push(&self, image: Image) {
        let mut repos = lock(&self.repositories);
        if !repos.contains(&image.repository) {
            repos.push(image.repository.clone());
        }
        lock(&self.images)
            .entry(image.repository.clone())
            .or_default()
            .push(image);
    }

    /// Moves every image of `digest` to the archive storage class (`ARCHIVED`), as
    /// `aws ecr update-image-storage-class --target-storage-class ARCHIVE` does.
    pub fn archive(&self, repository: &str, digest: &str) {
        if let Some(images) = lock(&self.images).get_mut(repository) {
            images.set_status(digest, "ARCHIVED");
        }
    }

    /// Deletes a tag, as a lifecycle policy or `aws ecr batch-delete-image` would.
    pub fn remove(&self, repository: &str, tag: &str) {
        if let Some(images) = lock(&self.images).get_mut(repository) {
            images.remove_tag(tag);
        }
    }

    pub fn create_repository(&self, name: &str) {
        let mut repos = lock(&self.repositories);
        if !repos.iter().any(|r| r == name) {
            repos.push(name.to_string());
        }
    }

    /// Every image, repository by repository, each repository's in push order.
    pub fn images(&self) -> Vec<Image> {
        lock(&self.images)
            .values()
            .flat_map(|r| r.images.iter().cloned())
            .collect()
    }
}

/// One repository's images in push order, indexed by tag and by digest, so that a lookup
/// by `imageIds` costs what it returns, not the size of the repository (the bench's
/// repository grows by an image per event).
#[derive(Default)]
struct Repository {
    images: Vec<Image>,
    by_tag: std::collections::HashMap<String, usize>,
    /// Each digest's images (its tags, or the untagged manifest), in push order.
    by_digest: std::collections::HashMap<String, Vec<usize>>,
    /// Digests in the order of their first push: the order `DescribeImages` lists them in.
    digests: Vec<String>,
}

impl Repository {
    fn push(&mut self, image: Image) {
        if let Some(tag) = image.tag.as_deref()
            && self.by_tag.contains_key(tag)
        {
            // A moved tag leaves its old digest: rare, so rebuilt rather than patched.
            self.images.retain(|i| i.tag.as_deref() != Some(tag));
            self.images.push(image);
            self.reindex();
            return;
        }
        self.index(self.images.len(), &image);
        self.images.push(image);
    }

    fn set_status(&mut self, digest: &str, status: &str) {
        for image in self.images.iter_mut().filter(|i| i.digest == digest) {
            image.status = status.to_string();
        }
    }

    fn remove_tag(&mut self, tag: &str) {
        if self.by_tag.contains_key(tag) {
            self.images.retain(|i| i.tag.as_deref() != Some(tag));
            self.reindex();
        }
    }

    fn index(&mut self, position: usize, image: &Image) {
        if let Some(tag) = &image.tag {
            self.by_tag.insert(tag.clone(), position);
        }
        let group = self.by_digest.entry(image.digest.clone()).or_default();
        if group.is_empty() {
            self.digests.push(image.digest.clone());
        }
        group.push(position);
    }

    fn reindex(&mut self) {
        self.by_tag.clear();
        self.by_digest.clear();
        self.digests.clear();
        let images = std::mem::take(&mut self.images);
        for (position, image) in images.iter().enumerate() {
            self.index(position, image);
        }
        self.images = images;
    }

    fn tagged(&self, tag: &str) -> Option<&Image> {
        self.by_tag.get(tag).map(|&i| &self.images[i])
    }

    /// The images of one digest, in push order; empty for a digest not in the repository.
    fn group(&self, digest: &str) -> Vec<&Image> {
        self.by_digest
            .get(digest)
            .map(|positions| positions.iter().map(|&i| &self.images[i]).collect())
            .unwrap_or_default()
    }
}

/// The identity that signed a request, for the request log.
#[derive(Debug, Clone)]
pub struct Caller(pub String);

/// Middleware: SigV4 as AWS checks it ([`crate::sigv4`]), before any API is answered; the
/// caller's ARN goes on the response for the request log.
async fn signed(
    State(state): State<Arc<AwsState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, crate::faults::MAX_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let query = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    let protocol = if query {
        crate::sigv4::Protocol::Query
    } else {
        crate::sigv4::Protocol::Json
    };
    let signers = state.signers();
    let expired = lock(&state.expired_keys).clone();
    let request = crate::sigv4::Request {
        method: &parts.method,
        uri: &parts.uri,
        headers: &parts.headers,
        body: &bytes,
    };
    let keys = crate::sigv4::Keys {
        identities: &signers,
        expired: &expired,
    };
    let verified = crate::sigv4::verify(&request, &keys, protocol, std::time::SystemTime::now());
    let caller = match verified {
        Ok(identity) => identity.arn.clone(),
        Err(refusal) if query => {
            return query_error(refusal.status, refusal.code, &refusal.message);
        }
        Err(refusal) if parts.headers.contains_key("smithy-protocol") => {
            return crate::cloudwatch::refusal(refusal.status, refusal.code, &refusal.message);
        }
        Err(refusal) => return aws_error(refusal.status, refusal.code, &refusal.message),
    };
    // The API answering may need to know who asks (GetCallerIdentity).
    let mut parts = parts;
    parts.extensions.insert(Caller(caller.clone()));
    let mut response = next
        .run(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(bytes),
        ))
        .await;
    response.extensions_mut().insert(Caller(caller));
    response
}

/// An error in the query protocol's shape (STS, SNS): XML with the code and message.
fn query_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = format!(
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>standin</RequestId></ErrorResponse>"
    );
    (status, [("content-type", "text/xml")], body).into_response()
}

pub fn router(state: Arc<AwsState>) -> Router {
    // Presigned downloads (a package, a layer) and the registry API (its own token) are not
    // SigV4 requests; every API call is.
    let unsigned = Router::new()
        .route("/packages/{file}", get(crate::deployment::package))
        .route("/blobs/{digest}/{*repository}", get(blob))
        .route("/v2/{*path}", get(registry_api));
    Router::new()
        .route("/", post(ecr))
        .route(
            "/service/{service}/operation/{operation}",
            post(crate::cloudwatch::handle),
        )
        .route("/clusters/{name}", get(describe_cluster))
        .route(
            "/clusters/{name}/access-entries",
            get(crate::deployment::list_access_entries),
        )
        .route(
            "/clusters/{name}/access-entries/{principal}",
            get(crate::deployment::describe_access_entry),
        )
        .route(
            "/clusters/{name}/capabilities",
            get(crate::capabilities::list_capabilities),
        )
        .route(
            "/clusters/{name}/capabilities/{capability}",
            get(crate::capabilities::describe_capability),
        )
        .route(
            "/2015-03-31/functions/{name}/configuration",
            get(crate::deployment::get_function_configuration),
        )
        .route(
            "/2015-03-31/functions/{name}",
            get(crate::deployment::get_function),
        )
        .route(
            "/2015-03-31/event-source-mappings/",
            get(crate::deployment::list_event_source_mappings),
        )
        .route(
            "/2015-03-31/event-source-mappings",
            get(crate::deployment::list_event_source_mappings),
        )
        .route(
            "/2019-09-30/functions/{name}/concurrency",
            get(crate::deployment::get_function_concurrency),
        )
        .route(
            "/2016-08-19/account-settings/",
            get(crate::deployment::get_account_settings),
        )
        .route(
            "/2016-08-19/account-settings",
            get(crate::deployment::get_account_settings),
        )
        .route(
            "/2015-03-31/functions/{name}/invocations",
            post(crate::deployment::invoke),
        )
        .route(
            "/2015-03-31/functions/{name}/policy",
            get(crate::deployment::get_policy),
        )
        .route(
            "/2019-09-25/functions/{name}/event-invoke-config",
            get(crate::deployment::get_event_invoke_config),
        )
        .layer(axum::middleware::from_fn_with_state(state.clone(), signed))
        .merge(unsigned)
        .with_state(state)
}

pub(crate) fn aws_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let mut response = (
        status,
        axum::Json(json!({"__type": kind, "message": message})),
    )
        .into_response();
    if let Ok(v) = kind.parse() {
        response.headers_mut().insert("x-amzn-errortype", v);
    }
    response
}

async fn describe_cluster(
    State(state): State<Arc<AwsState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    // EKS is regional: the region the request is signed for is where the cluster is looked up.
    let scope: Vec<String> = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .map(|scope| scope.split('/').map(str::to_string).collect())
        .unwrap_or_default();
    let asked_region = scope.get(2).cloned().unwrap_or_default();
    if let Some(owner) = lock(&state.cluster_owners).get(&name)
        && scope.first() != Some(owner)
    {
        return aws_error(
            StatusCode::FORBIDDEN,
            "AccessDeniedException",
            &format!(
                "User is not authorized to perform: eks:DescribeCluster on resource: cluster/{name}"
            ),
        );
    }
    let found = if name == state.cluster_name {
        Some((
            state.region.clone(),
            lock(&state.kube_endpoint).clone(),
            state.ca_pem.clone(),
        ))
    } else {
        lock(&state.clusters).get(&name).cloned()
    };
    let Some((region, endpoint, ca_pem)) = found.filter(|(region, ..)| *region == asked_region)
    else {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("No cluster found for name: {name}."),
        );
    };
    let mut fields = crate::deployment::cluster_fields(&state);
    let (mut listed, mut ca_data) = (true, STANDARD.encode(&ca_pem));
    if name == state.cluster_name {
        let deployment = lock(&state.deployment);
        listed = deployment.cluster_endpoint_listed;
        if let Some(data) = &deployment.cluster_ca_data {
            ca_data.clone_from(data);
        }
    } else {
        fields = json!({"accessConfig": {"authenticationMode": "API"},
            "resourcesVpcConfig": {"endpointPublicAccess": true, "publicAccessCidrs": ["0.0.0.0/0"]}});
    }
    let mut cluster = json!({
        "resourcesVpcConfig": fields["resourcesVpcConfig"],
        "name": name,
        "arn": format!("arn:aws:eks:{region}:{}:cluster/{name}", state.account),
        "status": if listed { "ACTIVE" } else { "CREATING" },
        "version": "1.33",
    });
    if fields.get("accessConfig").is_some() {
        cluster["accessConfig"] = fields["accessConfig"].clone();
    }
    // A cluster being created has neither its endpoint nor its CA yet.
    if listed {
        cluster["endpoint"] = json!(endpoint);
        cluster["certificateAuthority"] = json!({"data": ca_data});
    }
    axum::Json(json!({ "cluster": cluster })).into_response()
}

async fn ecr(
    State(state): State<Arc<AwsState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    if form {
        if body.starts_with(b"Action=AssumeRole&") {
            return assume_role(&state, &body);
        }
        let action = url::form_urlencoded::parse(&body)
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v.into_owned());
        if action.as_deref() == Some("GetCallerIdentity") {
            let arn = caller.map(|c| c.0.0).unwrap_or_default();
            return caller_identity(&state, &arn);
        }
        let fields: BTreeMap<String, String> =
            url::form_urlencoded::parse(&body).into_owned().collect();
        if fields.get("Version").map(String::as_str) == Some("2016-11-15") {
            return crate::deployment::ec2(&state, &fields);
        }
        return sns(&state, &body);
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "SerializationException",
            "body is not JSON",
        );
    };
    match target.rsplit('.').next().unwrap_or_default() {
        operation if target.starts_with("CodeCommit_20150413.") => {
            crate::codecommit::handle(&state, operation, &request)
        }
        "GetSecretValue" if target.starts_with("secretsmanager") => {
            get_secret_value(&state, &request)
        }
        "DescribeSecret" if target.starts_with("secretsmanager") => {
            describe_secret(&state, &request)
        }
        "DescribeImageScanFindings" => describe_image_scan_findings(&state, &request),
        "DescribeImageSigningStatus" => describe_image_signing_status(&state, &request),
        "ListImageReferrers" => list_image_referrers(&state, &request),
        "GetDownloadUrlForLayer" => download_url(&state, &request),
        "GetAuthorizationToken" => authorization_token(&state),
        "DescribeImages" => describe_images(&state, &request),
        "BatchGetImage" => batch_get_image(&state, &request),
        operation if target.starts_with("AWSEvents.") => {
            crate::deployment::events(&state, operation, &request)
        }
        "DescribeRepositories" => crate::deployment::describe_repositories(&state, &request),
        "GetResources" if target.starts_with("ResourceGroupsTaggingAPI") => {
            crate::deployment::tagged_resources(&state, &request)
        }
        "GetQueueUrl" if target.starts_with("AmazonSQS") => queue_url(&state, &request),
        "SendMessage" if target.starts_with("AmazonSQS") => send_message_call(&state, &request),
        "ReceiveMessage" if target.starts_with("AmazonSQS") => {
            receive_message(&state, &request).await
        }
        "GetQueueAttributes" if target.starts_with("AmazonSQS") => {
            queue_attributes(&state, &request)
        }
        "DeleteMessage" if target.starts_with("AmazonSQS") => delete_message(&state, &request),
        "ChangeMessageVisibility" if target.starts_with("AmazonSQS") => {
            change_message_visibility(&state, &request)
        }
        other => aws_error(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            &format!("operation {other} is not supported by the stand-in"),
        ),
    }
}

/// The registry API password `GetAuthorizationToken` hands out (user `AWS`).
pub const REGISTRY_PASSWORD: &str = "standin-registry-password";

/// What the stand-in's presigned layer URLs carry in their query, for tests that look for it
/// where it must never be.
pub const PRESIGNED_SECRET: &str = "PresignedSessionTokenPlanted0123";

/// ECR's `GetAuthorizationToken`: basic credentials for the registry API, at this stand-in.
fn authorization_token(state: &AwsState) -> Response {
    let token = STANDARD.encode(format!("AWS:{REGISTRY_PASSWORD}"));
    let endpoint = lock(&state.endpoint).clone();
    axum::Json(json!({"authorizationData": [{"authorizationToken": token,
        "expiresAt": (OffsetDateTime::now_utc().unix_timestamp() + 43_200) as f64,
        "proxyEndpoint": endpoint}]}))
    .into_response()
}

/// The registry API's OCI 1.1 referrers endpoint (`/v2/<repository>/referrers/<digest>`),
/// behind the basic credentials `GetAuthorizationToken` gives: the manifests whose
/// `subject` is the digest, filtered by `artifactType` when asked.
async fn registry_api(
    State(state): State<Arc<AwsState>>,
    Path(path): Path<String>,
    axum::extract::Query(query): axum::extract::Query<BTreeMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!("AWS:{REGISTRY_PASSWORD}"))
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"errors": [{"code": "DENIED", "message": "Not Authorized"}]})),
        )
            .into_response();
    }
    let Some((repository, digest)) = path.rsplit_once("/referrers/") else {
        return (
            StatusCode::NOT_FOUND,
            "the stand-in serves only the referrers API",
        )
            .into_response();
    };
    let wanted = query.get("artifactType");
    let images = lock(&state.images);
    let manifests: Vec<Value> = images
        .get(repository)
        .map(|r| r.images.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|i| {
            let manifest: Value = serde_json::from_str(i.manifest.as_deref()?).ok()?;
            (manifest["subject"]["digest"] == digest).then(|| {
                json!({"mediaType": manifest["mediaType"], "digest": i.digest, "size": i.size,
                       "artifactType": manifest["artifactType"]})
            })
        })
        .filter(|d| wanted.is_none_or(|w| d["artifactType"] == w.as_str()))
        .collect();
    axum::Json(json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests}))
        .into_response()
}

/// ECR's `GetDownloadUrlForLayer`: a URL on this stand-in that serves the blob.
fn download_url(state: &AwsState, request: &Value) -> Response {
    let repository = request["repositoryName"].as_str().unwrap_or_default();
    let digest = request["layerDigest"].as_str().unwrap_or_default();
    if !lock(&state.blobs).contains_key(&(repository.to_string(), digest.to_string())) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "LayersNotFoundException",
            &format!(
                "The layer with digest '{digest}' does not exist in the repository with name '{repository}'"
            ),
        );
    }
    let base = lock(&state.endpoint).clone();
    // Presigned as ECR's are: the query carries a session token and a signature, which no
    // message of the function may repeat.
    let query = format!(
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Security-Token={PRESIGNED_SECRET}&X-Amz-Signature=5f1e{PRESIGNED_SECRET}"
    );
    axum::Json(json!({"layerDigest": digest, "downloadUrl": format!("{base}/blobs/{digest}/{repository}?{query}")}))
        .into_response()
}

async fn blob(
    State(state): State<Arc<AwsState>>,
    Path((digest, repository)): Path<(String, String)>,
) -> Response {
    match lock(&state.blobs).get(&(repository, digest)) {
        Some(bytes) => bytes.clone().into_response(),
        None => (StatusCode::NOT_FOUND, "no such blob").into_response(),
    }
}

/// ECR's `ListImageReferrers`: the manifests whose `subject` is the digest, filtered by
/// artifact type, with their annotations; the subject must exist (`ImageNotFoundException`)
/// and `maxResults` is 1 to 50, as ECR documents. Pages of `maxResults` (50 when not given)
/// follow each other by `nextToken`, as every paginated ECR list does.
fn list_image_referrers(state: &AwsState, request: &Value) -> Response {
    let repository = match repository_checked(state, request) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some(subject) = request["subjectId"]["imageDigest"].as_str() else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterException",
            "subjectId.imageDigest is required",
        );
    };
    if let Some(max) = request["maxResults"].as_i64()
        && !(1..=50).contains(&max)
    {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterException",
            "maxResults must be between 1 and 50",
        );
    }
    let wanted: Vec<&str> = request["filter"]["artifactTypes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let store = lock(&state.images);
    let empty = Repository::default();
    let images = store.get(&repository).unwrap_or(&empty);
    if !images.by_digest.contains_key(subject) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ImageNotFoundException",
            &format!(
                "The subject image {subject} does not exist within the repository with name '{repository}'"
            ),
        );
    }
    let referrers: Vec<Value> = images
        .images
        .iter()
        .filter_map(|image| {
            let manifest: Value = serde_json::from_str(image.manifest.as_deref()?).ok()?;
            let artifact = manifest["artifactType"].as_str()?.to_string();
            (manifest["subject"]["digest"] == subject
                && (wanted.is_empty() || wanted.contains(&artifact.as_str())))
            .then(|| {
                let mut referrer = json!({"digest": image.digest, "mediaType": image.media_type,
                "artifactType": artifact, "size": image.manifest.as_ref().map_or(0, String::len),
                "artifactStatus": "ACTIVE"});
                if manifest["annotations"].is_object() {
                    referrer["annotations"] = manifest["annotations"].clone();
                }
                referrer
            })
        })
        .collect();
    let page = request["maxResults"].as_u64().unwrap_or(50) as usize;
    let start = match request["nextToken"].as_str() {
        None => 0,
        Some(token) => match token
            .strip_prefix("referrers-")
            .and_then(|n| n.parse().ok())
        {
            Some(start) if start < referrers.len() => start,
            _ => {
                return aws_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidParameterException",
                    "Invalid parameter at 'nextToken' failed to satisfy constraint: 'Invalid NextToken'",
                );
            }
        },
    };
    let end = (start + page).min(referrers.len());
    let mut answer = json!({"referrers": referrers[start..end]});
    if end < referrers.len() {
        answer["nextToken"] = json!(format!("referrers-{end}"));
    }
    axum::Json(answer).into_response()
}

/// ECR's `DescribeImageSigningStatus`: the image must exist (`ImageNotFoundException`); an
/// image no signing rule covers has no statuses.
fn describe_image_signing_status(state: &AwsState, request: &Value) -> Response {
    let repository = match repository_checked(state, request) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some(digest) = request["imageId"]["imageDigest"].as_str() else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterException",
            "imageId.imageDigest is required by the stand-in",
        );
    };
    let exists = lock(&state.images)
        .get(&repository)
        .is_some_and(|images| images.by_digest.contains_key(digest));
    if !exists {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ImageNotFoundException",
            &format!(
                "The image with imageId {{imageDigest:'{digest}'}} does not exist within the repository with name '{repository}' in the registry with id '{}'",
                state.account
            ),
        );
    }
    let statuses = lock(&state.signing)
        .get(&(repository.clone(), digest.to_string()))
        .cloned()
        .unwrap_or_default();
    axum::Json(
        json!({"registryId": state.account, "repositoryName": repository,
        "imageId": {"imageDigest": digest}, "signingStatuses": statuses}),
    )
    .into_response()
}

fn describe_image_scan_findings(state: &AwsState, request: &Value) -> Response {
    let repository = request["repositoryName"].as_str().unwrap_or_default();
    let Some(digest) = request["imageId"]["imageDigest"].as_str() else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterException",
            "imageId.imageDigest is required by the stand-in",
        );
    };
    if !lock(&state.repositories).iter().any(|r| r == repository) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "RepositoryNotFoundException",
            &format!(
                "The repository with name '{repository}' does not exist in the registry with id '{}'",
                state.account
            ),
        );
    }
    match lock(&state.scans).get(&(repository.to_string(), digest.to_string())) {
        Some((status, counts)) => axum::Json(json!({
            "registryId": state.account, "repositoryName": repository,
            "imageId": {"imageDigest": digest},
            "imageScanStatus": {"status": status, "description": format!("The scan was {}.", status.to_ascii_lowercase())},
            "imageScanFindings": {"findingSeverityCounts": counts, "findings": []},
        }))
        .into_response(),
        None => aws_error(
            StatusCode::BAD_REQUEST,
            "ScanNotFoundException",
            &format!("Image scan does not exist for the image with '{{imageDigest:'{digest}'}}' in the repository with name '{repository}' in the registry with id '{}'", state.account),
        ),
    }
}

/// Secrets Manager's `GetSecretValue`, by ARN or name, with its error shapes.
fn get_secret_value(state: &AwsState, request: &Value) -> Response {
    let Some(id) = request["SecretId"].as_str() else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterException",
            "SecretId is required",
        );
    };
    let secrets = lock(&state.secrets);
    let found = secrets
        .iter()
        .find(|(arn, _)| arn.as_str() == id || arn.rsplit(':').next() == Some(id));
    match found {
        Some((arn, (_, false))) => aws_error(
            StatusCode::BAD_REQUEST,
            "AccessDeniedException",
            &format!(
                "User: arn:aws:sts::{}:assumed-role/argocd-ecr-updater-role/argocd-ecr-updater is not authorized to perform: secretsmanager:GetSecretValue on resource: {arn} because no identity-based policy allows the secretsmanager:GetSecretValue action",
                state.account
            ),
        ),
        Some((arn, (text, true))) => axum::Json(json!({
            "ARN": arn,
            "Name": arn.rsplit(':').next(),
            "SecretString": text,
            "VersionId": "00000000-0000-0000-0000-000000000001",
            "VersionStages": ["AWSCURRENT"],
        }))
        .into_response(),
        None => aws_error(
            StatusCode::BAD_REQUEST,
            "ResourceNotFoundException",
            "Secrets Manager can't find the specified secret.",
        ),
    }
}

/// Secrets Manager's `DescribeSecret`: the secret's metadata, with `KmsKeyId` when a
/// customer managed key encrypts it (the deployment's `secret_kms_keys`).
fn describe_secret(state: &AwsState, request: &Value) -> Response {
    let id = request["SecretId"].as_str().unwrap_or_default();
    let secrets = lock(&state.secrets);
    let Some((arn, _)) = secrets
        .iter()
        .find(|(arn, _)| arn.as_str() == id || arn.rsplit(':').next() == Some(id))
    else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ResourceNotFoundException",
            "Secrets Manager can't find the specified secret.",
        );
    };
    let mut answer = json!({"ARN": arn, "Name": arn.rsplit(':').next()});
    if let Some(key) = lock(&state.deployment).secret_kms_keys.get(arn) {
        answer["KmsKeyId"] = json!(key);
    }
    axum::Json(answer).into_response()
}

/// SNS speaks the AWS query protocol: a form in, XML out. Only `Publish`.
/// STS GetCallerIdentity (query protocol, XML answer): who signed the request.
fn caller_identity(state: &AwsState, arn: &str) -> Response {
    (
        StatusCode::OK,
        [("content-type", "text/xml")],
        format!(
            "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetCallerIdentityResult>\
             <Arn>{arn}</Arn><UserId>AROASTANDIN:caller</UserId><Account>{}</Account>\
             </GetCallerIdentityResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></GetCallerIdentityResponse>",
            state.account
        ),
    )
        .into_response()
}

/// STS AssumeRole (query protocol, XML answer): the role's credentials, or AccessDenied.
fn assume_role(state: &AwsState, body: &[u8]) -> Response {
    let form: BTreeMap<String, String> = url::form_urlencoded::parse(body).into_owned().collect();
    let xml = |status: StatusCode, text: String| {
        (status, [("content-type", "text/xml")], text).into_response()
    };
    let role = form.get("RoleArn").cloned().unwrap_or_default();
    let session = form.get("RoleSessionName").cloned().unwrap_or_default();
    match lock(&state.roles).get(&role) {
        Some(Some(identity)) => xml(
            StatusCode::OK,
            format!(
                "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleResult>\
                 <Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey>\
                 <SessionToken>{}</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>\
                 <AssumedRoleUser><AssumedRoleId>AROASTANDIN:{session}</AssumedRoleId><Arn>{}</Arn></AssumedRoleUser>\
                 </AssumeRoleResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></AssumeRoleResponse>",
                identity.access_key_id,
                identity.secret_access_key,
                identity.session_token.clone().unwrap_or_default(),
                identity.arn
            ),
        ),
        _ => xml(
            StatusCode::FORBIDDEN,
            format!(
                "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User: {} is not authorized to perform: sts:AssumeRole on resource: {role}</Message></Error><RequestId>r-1</RequestId></ErrorResponse>",
                crate::FUNCTION_ROLE_ARN
            ),
        ),
    }
}

fn sns(state: &AwsState, body: &[u8]) -> Response {
    let form: BTreeMap<String, String> = url::form_urlencoded::parse(body).into_owned().collect();
    let xml = |status: StatusCode, text: String| {
        (status, [("content-type", "text/xml")], text).into_response()
    };
    if form.get("Action").map(String::as_str) == Some("ListSubscriptionsByTopic") {
        let topic = form.get("TopicArn").cloned().unwrap_or_default();
        return crate::deployment::list_subscriptions_by_topic(state, &topic);
    }
    if form.get("Action").map(String::as_str) != Some("Publish") {
        return xml(
            StatusCode::BAD_REQUEST,
            "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction</Code><Message>only Publish and ListSubscriptionsByTopic are served</Message></Error><RequestId>r</RequestId></ErrorResponse>".into(),
        );
    }
    let (Some(topic), Some(message)) = (form.get("TopicArn"), form.get("Message")) else {
        return xml(
            StatusCode::BAD_REQUEST,
            "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidParameter</Code><Message>TopicArn and Message are required</Message></Error><RequestId>r</RequestId></ErrorResponse>".into(),
        );
    };
    let mut published = lock(&state.published);
    published.push(json!({"TopicArn": topic, "Subject": form.get("Subject"), "Message": message}));
    let id = format!("00000000-0000-0000-3333-{:012}", published.len());
    xml(
        StatusCode::OK,
        format!(
            "<PublishResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><PublishResult><MessageId>{id}</MessageId></PublishResult><ResponseMetadata><RequestId>r-{id}</RequestId></ResponseMetadata></PublishResponse>"
        ),
    )
}

static RECEIPTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static MESSAGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// SQS's `SendMessage`, as strict as SQS about what it takes: a queue that exists, a body of
/// 1 byte to 256 KiB in the characters SQS allows.
fn send_message_call(state: &AwsState, request: &Value) -> Response {
    let url = request["QueueUrl"].as_str().unwrap_or_default();
    let body = request["MessageBody"].as_str().unwrap_or_default();
    if !lock(&state.queues).contains_key(url) {
        return no_queue(url);
    }
    let allowed = |c: char| matches!(c, '\u{9}' | '\u{a}' | '\u{d}' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}');
    if body.is_empty() || body.len() > 256 * 1024 || !body.chars().all(allowed) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "com.amazonaws.sqs#InvalidParameterValue",
            "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes and use only allowed characters.",
        );
    }
    // SQS takes 0 to 900 seconds, as a number; anything else is refused with its message.
    let delay = match &request["DelaySeconds"] {
        Value::Null => 0,
        Value::Number(n) if n.as_u64().is_some_and(|d| d <= 900) => n.as_u64().unwrap_or(0) as u32,
        other => {
            return aws_error(
                StatusCode::BAD_REQUEST,
                "com.amazonaws.sqs#InvalidParameterValue",
                &format!(
                    "Value {other} for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided."
                ),
            );
        }
    };
    let now_ms = (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    let id = state.send_delayed_at(url, body, now_ms, delay);
    axum::Json(json!({"MessageId": id})).into_response()
}

fn no_queue(url: &str) -> Response {
    aws_error(
        StatusCode::BAD_REQUEST,
        "com.amazonaws.sqs#QueueDoesNotExist",
        &format!("The specified queue does not exist: {url}"),
    )
}

/// SQS's `ReceiveMessage`. A long poll (`WaitTimeSeconds` > 0) asks every server: it answers
/// as soon as a message is visible, else empty when the wait is over. A short poll may miss
/// (`short_polls_miss`).
async fn receive_message(state: &AwsState, request: &Value) -> Response {
    let wait = request["WaitTimeSeconds"].as_u64().unwrap_or(0);
    if wait > 20 {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "com.amazonaws.sqs#InvalidParameterValue",
            "Value for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20.",
        );
    }
    if wait == 0 {
        let missed = state.short_poll_misses.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |left| left.checked_sub(1),
        );
        if missed.is_ok() {
            return axum::Json(json!({})).into_response();
        }
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(wait);
    loop {
        let answer = receive_now(state, request);
        let empty = answer.as_ref().is_ok_and(Vec::is_empty);
        if !empty || std::time::Instant::now() >= until {
            return match answer {
                Ok(out) if out.is_empty() => axum::Json(json!({})).into_response(),
                Ok(out) => axum::Json(json!({"Messages": out})).into_response(),
                Err(refused) => refused,
            };
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The visible messages one receive hands out now.
fn receive_now(state: &AwsState, request: &Value) -> Result<Vec<Value>, Response> {
    let url = request["QueueUrl"].as_str().unwrap_or_default();
    let max = request["MaxNumberOfMessages"]
        .as_u64()
        .unwrap_or(1)
        .clamp(1, 10) as usize;
    if !lock(&state.queues).contains_key(url) {
        return Err(no_queue(url));
    }
    let visibility =
        std::time::Duration::from_secs(request["VisibilityTimeout"].as_u64().unwrap_or(30));
    Ok(state
        .receive(url, max, visibility)
        .into_iter()
        .map(|m| {
            json!({"MessageId": m.id, "ReceiptHandle": m.receipt, "Body": m.body,
            "Attributes": {"SentTimestamp": m.sent_ms.to_string()}})
        })
        .collect())
}

/// SQS's `GetQueueUrl`: the URL of a queue by name (and owner account).
fn queue_url(state: &AwsState, request: &Value) -> Response {
    let name = request["QueueName"].as_str().unwrap_or_default();
    let owner = request["QueueOwnerAWSAccountId"]
        .as_str()
        .unwrap_or(&state.account);
    let url = format!("https://sqs.{}.amazonaws.com/{owner}/{name}", state.region);
    if lock(&state.queues).contains_key(&url) {
        axum::Json(json!({"QueueUrl": url})).into_response()
    } else {
        no_queue(&url)
    }
}

/// SQS's `GetQueueAttributes`: the counts (visible, and received but not yet deleted), the
/// queue policy and the redrive allow policy.
fn queue_attributes(state: &AwsState, request: &Value) -> Response {
    let url = request["QueueUrl"].as_str().unwrap_or_default();
    let queues = lock(&state.queues);
    let Some(messages) = queues.get(url) else {
        return no_queue(url);
    };
    let now = state.queue_now();
    let visible = messages.iter().filter(|m| m.visible(now)).count();
    let name = url.rsplit('/').next().unwrap_or_default();
    let deployment = lock(&state.deployment);
    let of_this_queue = |policies: &BTreeMap<String, Value>| {
        policies
            .iter()
            .find(|(arn, _)| arn.ends_with(&format!(":{name}")))
            .map(|(_, policy)| policy.to_string())
    };
    let policy = of_this_queue(&deployment.queue_policies);
    let redrive_allow = of_this_queue(&deployment.redrive_allow_policies);
    drop(deployment);
    let mut attributes = json!({
        "ApproximateNumberOfMessages": visible.to_string(),
        "ApproximateNumberOfMessagesNotVisible": (messages.len() - visible).to_string(),
        "ApproximateNumberOfMessagesDelayed": "0",
        "MessageRetentionPeriod": "1209600",
    });
    if let Some(policy) = policy {
        attributes["Policy"] = Value::String(policy);
    }
    if let Some(policy) = redrive_allow {
        attributes["RedriveAllowPolicy"] = Value::String(policy);
    }
    let wanted: Vec<&str> = request["AttributeNames"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let picked: serde_json::Map<String, Value> = attributes
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| wanted.iter().any(|w| *w == "All" || w == name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    axum::Json(json!({"Attributes": picked})).into_response()
}

fn delete_message(state: &AwsState, request: &Value) -> Response {
    let url = request["QueueUrl"].as_str().unwrap_or_default();
    let receipt = request["ReceiptHandle"].as_str().unwrap_or_default();
    let mut queues = lock(&state.queues);
    let Some(messages) = queues.get_mut(url) else {
        return no_queue(url);
    };
    let before = messages.len();
    messages.retain(|m| m.receipt.as_ref().is_none_or(|(r, _)| r != receipt));
    if messages.len() == before {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "com.amazonaws.sqs#ReceiptHandleIsInvalid",
            &format!("The input receipt handle \"{receipt}\" is not a valid receipt handle."),
        );
    }
    axum::Json(json!({})).into_response()
}

fn change_message_visibility(state: &AwsState, request: &Value) -> Response {
    let url = request["QueueUrl"].as_str().unwrap_or_default();
    let receipt = request["ReceiptHandle"].as_str().unwrap_or_default();
    let seconds = request["VisibilityTimeout"].as_u64().unwrap_or(0);
    let mut queues = lock(&state.queues);
    let Some(messages) = queues.get_mut(url) else {
        return no_queue(url);
    };
    match messages
        .iter_mut()
        .find(|m| m.receipt.as_ref().is_some_and(|(r, _)| r == receipt))
    {
        Some(message) => {
            let until = state.queue_now() + std::time::Duration::from_secs(seconds);
            message.receipt = Some((receipt.to_string(), until));
            axum::Json(json!({})).into_response()
        }
        None => aws_error(
            StatusCode::BAD_REQUEST,
            "com.amazonaws.sqs#ReceiptHandleIsInvalid",
            &format!("The input receipt handle \"{receipt}\" is not a valid receipt handle."),
        ),
    }
}

fn repository_checked(state: &AwsState, request: &Value) -> Result<String, Response> {
    let repository = request["repositoryName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some(registry) = request["registryId"].as_str()
        && registry != state.account
    {
        match lock(&state.registries).get(registry) {
            Some(true) => {}
            Some(false) => {
                return Err(aws_error(
                    StatusCode::BAD_REQUEST,
                    "AccessDeniedException",
                    &format!(
                        "User: arn:aws:sts::{}:assumed-role/argocd-ecr-updater-role/argocd-ecr-updater is not authorized to perform: ecr:DescribeImages on resource: arn:aws:ecr:{}:{registry}:repository/{repository} because no resource-based policy allows the ecr:DescribeImages action",
                        state.account, state.region
                    ),
                ));
            }
            None => {
                return Err(aws_error(
                    StatusCode::BAD_REQUEST,
                    "RepositoryNotFoundException",
                    &format!(
                        "The repository with name '{repository}' does not exist in the registry with id '{registry}'"
                    ),
                ));
            }
        }
    }
    if !lock(&state.repositories).contains(&repository) {
        return Err(aws_error(
            StatusCode::BAD_REQUEST,
            "RepositoryNotFoundException",
            &format!(
                "The repository with name '{repository}' does not exist in the registry with id '{}'",
                state.account
            ),
        ));
    }
    Ok(repository)
}

fn image_id_text(id: &Value) -> String {
    format!(
        "{{imageDigest:'{}', imageTag:'{}'}}",
        id["imageDigest"].as_str().unwrap_or("null"),
        id["imageTag"].as_str().unwrap_or("null")
    )
}

fn describe_images(state: &AwsState, request: &Value) -> Response {
    let repository = match repository_checked(state, request) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let store = lock(&state.images);
    let empty = Repository::default();
    let images = store.get(&repository).unwrap_or(&empty);
    // ECR describes digests: all the tags of one digest in one imageDetails entry.
    let detail = |group: &[&Image]| {
        let first = group[0];
        let tags: Vec<&str> = group.iter().filter_map(|i| i.tag.as_deref()).collect();
        // ECR reports when the image (the digest) was first pushed; a later tag on the same
        // digest does not move it (aws/containers-roadmap#214).
        let pushed = group
            .iter()
            .map(|i| i.pushed_at)
            .min()
            .unwrap_or(first.pushed_at);
        let mut d = json!({
            "registryId": state.account,
            "repositoryName": repository,
            "imageDigest": first.digest,
            "imageSizeInBytes": first.size,
            "imagePushedAt": pushed.unix_timestamp() as f64 + f64::from(pushed.millisecond()) / 1000.0,
            "imageManifestMediaType": first.media_type,
            "imageStatus": first.status,
        });
        let artifact = match (&first.artifact_media_type, first.media_type.as_str()) {
            (Some(artifact), _) => Some(artifact.as_str()),
            (
                None,
                INDEX_MEDIA_TYPE | "application/vnd.docker.distribution.manifest.list.v2+json",
            ) => None,
            (None, "application/vnd.docker.distribution.manifest.v2+json") => {
                Some("application/vnd.docker.container.image.v1+json")
            }
            (None, _) => Some("application/vnd.oci.image.config.v1+json"),
        };
        if let Some(artifact) = artifact {
            d["artifactMediaType"] = json!(artifact);
        }
        if !tags.is_empty() {
            d["imageTags"] = json!(tags);
        }
        d
    };

    if let Some(ids) = request["imageIds"].as_array() {
        if request.get("maxResults").is_some() || request.get("nextToken").is_some() {
            return aws_error(
                StatusCode::BAD_REQUEST,
                "InvalidParameterException",
                "maxResults and nextToken cannot be used with imageIds",
            );
        }
        let mut details = Vec::new();
        for id in ids {
            let digest = match (id["imageTag"].as_str(), id["imageDigest"].as_str()) {
                (Some(tag), digest) => images
                    .tagged(tag)
                    .map(|i| i.digest.as_str())
                    .filter(|&found| digest.is_none_or(|d| d == found)),
                (None, digest) => digest,
            };
            let group = digest.map(|d| images.group(d)).unwrap_or_default();
            if group.is_empty() {
                return aws_error(
                    StatusCode::BAD_REQUEST,
                    "ImageNotFoundException",
                    &format!(
                        "The image with imageId {} does not exist within the repository with name '{repository}' in the registry with id '{}'",
                        image_id_text(id),
                        state.account
                    ),
                );
            }
            details.push(detail(&group));
        }
        return axum::Json(json!({"imageDetails": details})).into_response();
    }

    let tag_status = request["filter"]["tagStatus"].as_str().unwrap_or("ANY");
    let groups: Vec<Vec<&Image>> = images
        .digests
        .iter()
        .map(|d| images.group(d))
        .filter(|group| {
            let tagged = group.iter().any(|i| i.tag.is_some());
            match tag_status {
                "TAGGED" => tagged,
                "UNTAGGED" => !tagged,
                _ => true,
            }
        })
        .collect();
    let max = request["maxResults"].as_u64().unwrap_or(100).clamp(1, 1000) as usize;
    let start = match request["nextToken"].as_str() {
        None => 0,
        Some(token) => match token.parse::<usize>() {
            Ok(n) if n <= groups.len() => n,
            _ => {
                return aws_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidParameterException",
                    "Invalid parameter at 'nextToken'",
                );
            }
        },
    };
    let end = (start + max).min(groups.len());
    // Only the page is rendered: the cost follows what is returned.
    let page: Vec<Value> = groups[start..end]
        .iter()
        .map(|group| detail(group))
        .collect();
    let mut body = json!({"imageDetails": page});
    if end < groups.len() {
        body["nextToken"] = json!(end.to_string());
    }
    axum::Json(body).into_response()
}

fn manifest_for(image: &Image) -> String {
    if let Some(manifest) = &image.manifest {
        return manifest.clone();
    }
    if image.media_type == INDEX_MEDIA_TYPE {
        let manifests: Vec<Value> = image
            .platforms
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut parts = p.split('/');
                let mut platform = json!({"os": parts.next().unwrap_or_default(), "architecture": parts.next().unwrap_or_default()});
                if let Some(variant) = parts.next() {
                    platform["variant"] = json!(variant);
                }
                json!({"mediaType": default_media_type(), "digest": format!("sha256:{i:064x}"), "size": 1000, "platform": platform})
            })
            .collect();
        json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests})
            .to_string()
    } else {
        let config = image
            .artifact_media_type
            .as_deref()
            .unwrap_or("application/vnd.oci.image.config.v1+json");
        json!({"schemaVersion": 2, "mediaType": image.media_type,
               "config": {"mediaType": config, "digest": "sha256:".to_string() + &"0".repeat(64), "size": 100},
               "layers": []})
        .to_string()
    }
}

fn batch_get_image(state: &AwsState, request: &Value) -> Response {
    let repository = match repository_checked(state, request) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let store = lock(&state.images);
    let empty = Repository::default();
    let images = store.get(&repository).unwrap_or(&empty);
    let mut found = Vec::new();
    let mut failures = Vec::new();
    for id in request["imageIds"].as_array().cloned().unwrap_or_default() {
        let tag = id["imageTag"].as_str();
        let digest = id["imageDigest"].as_str();
        let by_tag = tag.and_then(|t| images.tagged(t));
        let image = match (by_tag, digest) {
            (Some(i), Some(d)) if i.digest != d => {
                failures.push(json!({"imageId": id, "failureCode": "ImageTagDoesNotMatchDigest", "failureReason": "Tag does not match digest"}));
                continue;
            }
            (Some(i), _) => Some(i),
            (None, Some(d)) if tag.is_none() => images.group(d).first().copied(),
            _ => None,
        };
        match image {
            Some(i) => found.push(json!({
                "registryId": state.account,
                "repositoryName": repository,
                "imageId": {"imageDigest": i.digest, "imageTag": i.tag},
                "imageManifest": manifest_for(i),
                "imageManifestMediaType": i.media_type,
            })),
            None => failures.push(json!({"imageId": id, "failureCode": "ImageNotFound", "failureReason": "Requested image not found"})),
        }
    }
    axum::Json(json!({"images": found, "failures": failures})).into_response()
}
