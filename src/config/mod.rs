//! Configuration, read once at cold start from environment variables.
//!
//! A missing or invalid variable stops the function before its first invocation, with a
//! message that names the variable, rather than failing every event later. [`label_selector`] reads
//! `APPLICATION_LABEL_SELECTOR` as the API server does.

pub mod label_selector;
pub mod managed;

use std::time::Duration;

use base64::Engine;

use base64::engine::general_purpose::STANDARD;

use crate::failure::Refused;

/// Which namespaces hold the Applications to consider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceScope {
    All,
    Only(Vec<String>),
}

impl NamespaceScope {
    /// Whether Applications in `namespace` are the function's to consider.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(namespaces) => namespaces.iter().any(|n| n == namespace),
        }
    }
}

/// Timeouts for the API server connection; they must fit inside the Lambda timeout.
#[derive(Debug, Clone, Copy)]
pub struct KubeTimeouts {
    pub connect: Duration,
    pub request: Duration,
}

/// How to reach the API server: its URL and the CA bundle (PEM) that signs its certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    pub endpoint: String,
    pub ca_pem: Vec<u8>,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("endpoint", &self.endpoint)
            .field("ca_pem_bytes", &self.ca_pem.len())
            .finish()
    }
}

/// Decodes `certificateAuthority.data`: base64 of a PEM bundle.
pub fn decode_ca(data: &str) -> Result<Vec<u8>, Refused> {
    let pem = STANDARD.decode(data.trim()).map_err(|e| e.to_string())?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(Refused::from(
            "no `-----BEGIN CERTIFICATE-----` block after decoding",
        ));
    }
    Ok(pem)
}

/// One cluster the function writes to: from `CLUSTER_NAME` (and `KUBE_API_ENDPOINT`), or one
/// entry of `CLUSTERS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    pub name: String,
    pub namespaces: NamespaceScope,
    /// The cluster's region, when not the function's: DescribeCluster is asked there.
    pub region: Option<String>,
    /// The endpoint and CA, given instead of asked of DescribeCluster (for a cluster in
    /// another account without `role_arn`: EKS has no cross-account DescribeCluster).
    pub access: Option<ClusterAccess>,
    /// A role to assume for this cluster (usually in the cluster's account): DescribeCluster
    /// and the bearer token use its credentials, so its access entry is the one that counts.
    pub role_arn: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Every cluster an event is decided against, `CLUSTER_NAME`'s first. The three fields
    /// below are the first cluster's, which is the only one unless `CLUSTERS` is set.
    pub clusters: Vec<ClusterSpec>,
    pub cluster_name: String,
    pub namespaces: NamespaceScope,
    pub label_selector: Option<String>,
    /// `label_selector` parsed: what an Application read later is held to.
    pub selects: crate::config::label_selector::Selector,
    pub dry_run: bool,
    /// Read Image Updater v1.x `ImageUpdater` objects (they win over annotations for the
    /// Applications they match). Off: annotations only, and no RBAC on imageupdaters needed.
    pub read_image_updaters: bool,
    /// An SNS topic receiving the report of every invocation that updated or failed
    /// something.
    pub notification_topic_arn: Option<String>,
    pub log_level: String,
    pub timeouts: KubeTimeouts,
    /// Set when the endpoint and CA are configured instead of asked of DescribeCluster.
    pub cluster_override: Option<ClusterAccess>,
    pub page_size: u32,
    /// How many times one Application is re-read and re-decided after a conflict.
    pub conflict_retries: u32,
    pub git: GitSettings,
    /// The function's own account (`FUNCTION_ACCOUNT_ID`, set by the template), to tell another
    /// account's registry refusing us (permanent) from our own role lacking a grant.
    pub own_account: Option<String>,
    /// How a scheduled sweep of a large fleet fans out over the sweep queue.
    pub sweep: SweepSettings,
    /// Following writes until they are live (`CONFIRM_ROLLOUTS`, `ROLLOUT_METRIC_APPLICATIONS`).
    pub rollouts: RolloutSettings,
    /// `NOTATION_TRUST_ROOTS`: base64 of the PEM root certificates (the AWS Signer root) a
    /// managed signature's chain must lead to; set, a `signing-profile` gate also verifies
    /// the Notation signature itself.
    pub notation_trust_roots: Option<Vec<u8>>,
    /// `NOTATION_TRUST_ROOTS_SECRET_ARN`: a Secrets Manager secret holding the roots instead
    /// (PEM, or base64 of it), for roots that do not fit Lambda's 4 KB of environment beside
    /// the rest of the configuration. `Handler::start` reads it once at cold start into
    /// `notation_trust_roots`.
    pub notation_trust_roots_secret_arn: Option<String>,
    /// `ARGOCD_EKS_CAPABILITY`: Argo CD runs as the EKS capability, which reconciles one
    /// namespace; Applications elsewhere are skipped.
    pub eks_capability: Option<managed::Capability>,
    /// `NOTIFICATION_FORMAT`: the SNS report as JSON, or as a chat notification.
    pub notification_format: managed::NotificationFormat,
}

/// The most `NOTATION_TRUST_ROOTS` may hold, decoded: a few root certificates.
pub const MAX_TRUST_ROOTS: usize = 32 << 10;

/// The roots a `NOTATION_TRUST_ROOTS_SECRET_ARN` secret holds: the PEM text itself, or base64
/// of it, at most [`MAX_TRUST_ROOTS`] bytes once decoded.
pub fn trust_roots_from_secret_text(text: &str) -> Result<Vec<u8>, Refused> {
    let pem = if text.contains("-----BEGIN CERTIFICATE-----") {
        text.as_bytes().to_vec()
    } else {
        decode_ca(text).map_err(|Refused(problem)| {
            Refused(format!(
                "{problem}: store the PEM root certificates as the secret's text (--secret-string file://root.pem)"
            ))
        })?
    };
    if pem.len() > MAX_TRUST_ROOTS {
        return Err(Refused(format!(
            "holds {} bytes, over {MAX_TRUST_ROOTS}: keep the root certificates only",
            pem.len()
        )));
    }
    Ok(pem)
}

/// `NOTATION_TRUST_ROOTS_SECRET_ARN`: one whole secret ARN, and not beside
/// `NOTATION_TRUST_ROOTS` (which of the two would be trusted would be a guess).
fn notation_trust_roots_secret_arn(env: &Env<'_>) -> Result<Option<String>, ConfigError> {
    const VAR: &str = "NOTATION_TRUST_ROOTS_SECRET_ARN";
    let Some(arn) = env.get(VAR) else {
        return Ok(None);
    };
    if !is_whole_secret_arn(&arn) {
        return Err(error(
            VAR,
            format!(
                "`{arn}` is not one whole Secrets Manager secret ARN (arn:aws:secretsmanager:region:account:secret:name, no `*` or `?`)"
            ),
        ));
    }
    if env.get("NOTATION_TRUST_ROOTS").is_some() {
        return Err(error(
            VAR,
            "is set beside NOTATION_TRUST_ROOTS: keep one (the secret, when the roots do not fit Lambda's 4 KB of environment)",
        ));
    }
    Ok(Some(arn))
}

fn notation_trust_roots(env: &Env<'_>) -> Result<Option<Vec<u8>>, ConfigError> {
    let Some(value) = env.get("NOTATION_TRUST_ROOTS") else {
        return Ok(None);
    };
    let pem = decode_ca(&value).map_err(|Refused(problem)| {
        error(
            "NOTATION_TRUST_ROOTS",
            format!("{problem}: give base64 of the PEM root certificate (`base64 -w0 root.pem`)"),
        )
    })?;
    if pem.len() > MAX_TRUST_ROOTS {
        return Err(error(
            "NOTATION_TRUST_ROOTS",
            format!(
                "holds {} bytes, over {MAX_TRUST_ROOTS}: give the root certificates only",
                pem.len()
            ),
        ));
    }
    Ok(Some(pem))
}

/// Rollout confirmation: each write followed over the sweep queue until live, failed or out
/// of time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutSettings {
    /// `CONFIRM_ROLLOUTS` (default true): follow writes. Needs the sweep queue.
    pub confirm: bool,
    /// `ROLLOUT_METRIC_APPLICATIONS`: `namespace/name` of the Applications whose lead times
    /// also get a metric of their own (each is a custom metric, billed monthly).
    pub metric_applications: std::collections::BTreeSet<String>,
}

/// The most Applications with a lead-time metric of their own.
pub const MAX_METRIC_APPLICATIONS: usize = 50;

fn rollout_settings(env: &Env<'_>) -> Result<RolloutSettings, ConfigError> {
    let mut metric_applications = std::collections::BTreeSet::new();
    for item in env
        .get("ROLLOUT_METRIC_APPLICATIONS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        let named = item.split_once('/').is_some_and(|(namespace, name)| {
            is_namespace(namespace)
                && !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(is_namespace)
        });
        if !named {
            return Err(error(
                "ROLLOUT_METRIC_APPLICATIONS",
                format!("`{item}` is not namespace/name"),
            ));
        }
        metric_applications.insert(item.to_string());
    }
    if metric_applications.len() > MAX_METRIC_APPLICATIONS {
        return Err(error(
            "ROLLOUT_METRIC_APPLICATIONS",
            format!(
                "names {} Applications, over {MAX_METRIC_APPLICATIONS}: each is a custom metric; use the log line's application field in Logs Insights for the rest",
                metric_applications.len()
            ),
        ));
    }
    Ok(RolloutSettings {
        confirm: env.flag("CONFIRM_ROLLOUTS", true)?,
        metric_applications,
    })
}

/// The reconcile sweep's fan-out (`SWEEP_*`). Without a queue every sweep runs in one
/// invocation, as it does for fleets under `fan_out_at` Applications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSettings {
    /// `SWEEP_QUEUE_URL`: the queue shards are sent to, which the same function consumes.
    pub queue_url: Option<String>,
    /// `SWEEP_QUEUE_ARN`: the same queue by ARN, the only queue whose SQS records the
    /// function takes (as shards, nothing else). Set together with the URL.
    pub queue_arn: Option<String>,
    /// `SWEEP_FAN_OUT_AT`: a sweep of at least this many Applications (every cluster
    /// together) is sent out in shards; a smaller one runs in the invocation that listed it.
    pub fan_out_at: u32,
    /// `SWEEP_SHARD_SIZE`: Applications per shard, so that a shard at 128 MB finishes well
    /// inside its timeout.
    pub shard_size: u32,
    /// `SWEEP_CONCURRENCY`: how many shards run at once (the event source mapping's
    /// `MaximumConcurrency`, which the template sets from the same parameter).
    pub concurrency: u32,
    /// `SWEEP_CLUSTER_REQUESTS`: the most Kubernetes requests a fanned-out sweep has in flight
    /// against one cluster, all shards together.
    pub cluster_requests: u32,
}

impl Default for SweepSettings {
    fn default() -> Self {
        Self {
            queue_url: None,
            queue_arn: None,
            fan_out_at: 1_000,
            shard_size: 500,
            concurrency: 10,
            cluster_requests: 40,
        }
    }
}

impl SweepSettings {
    /// Applications one shard reads and writes at a time: the cluster's request budget
    /// shared by the shards that may run at once (all of them may be one cluster's).
    pub fn shard_concurrency(&self) -> usize {
        (self.cluster_requests / self.concurrency.max(1)).clamp(1, 8) as usize
    }
}

/// An SQS queue URL: `https://<host>/<account>/<name>`, nothing else (no credentials, no
/// query), since the URL is logged.
fn queue_url(name: &'static str, url: &str) -> Result<String, ConfigError> {
    let parsed = url::Url::parse(url).map_err(|e| error(name, format!("not a URL: {e}")))?;
    let segments: Vec<&str> = parsed.path_segments().map_or(vec![], |s| s.collect());
    let account = segments.first().copied().unwrap_or_default();
    let well_formed = matches!(parsed.scheme(), "https" | "http")
        && parsed.host_str().is_some()
        && parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.query().is_none()
        && parsed.fragment().is_none()
        && segments.len() == 2
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && !segments[1].is_empty();
    if !well_formed {
        return Err(error(
            name,
            "must be an SQS queue URL, https://sqs.<region>.amazonaws.com/<account>/<queue> (the template's SweepQueueUrl output)",
        ));
    }
    Ok(url.to_string())
}

/// `arn:<partition>:sqs:<region>:<account>:<name>` naming the queue at `url` (its account
/// and name are the URL's path).
fn queue_arn(name: &'static str, arn: &str, url: &str) -> Result<String, ConfigError> {
    let parts: Vec<&str> = arn.split(':').collect();
    let path = url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.path_segments()
                .map(|s| s.map(str::to_string).collect::<Vec<_>>())
        })
        .unwrap_or_default();
    let well_formed = parts.len() == 6
        && parts[0] == "arn"
        && parts[1].starts_with("aws")
        && parts[2] == "sqs"
        && !parts[3].is_empty()
        && parts[4].len() == 12
        && parts[4].bytes().all(|b| b.is_ascii_digit())
        && !parts[5].is_empty();
    if !well_formed {
        return Err(error(
            name,
            format!(
                "`{}` is not an SQS queue ARN (arn:aws:sqs:<region>:<account>:<queue>)",
                arn.escape_debug()
            ),
        ));
    }
    if path.len() != 2 || path[0] != parts[4] || path[1] != parts[5] {
        return Err(error(
            name,
            "names another queue than SWEEP_QUEUE_URL: set both from the same queue (the template sets them from SweepQueue)",
        ));
    }
    Ok(arn.to_string())
}

fn sweep_settings(env: &Env<'_>) -> Result<SweepSettings, ConfigError> {
    let defaults = SweepSettings::default();
    let (queue_url, queue_arn) = match (env.get("SWEEP_QUEUE_URL"), env.get("SWEEP_QUEUE_ARN")) {
        (Some(url), Some(arn)) => {
            let url = queue_url("SWEEP_QUEUE_URL", &url)?;
            let arn = queue_arn("SWEEP_QUEUE_ARN", &arn, &url)?;
            (Some(url), Some(arn))
        }
        (None, None) => (None, None),
        (Some(_), None) => {
            return Err(error(
                "SWEEP_QUEUE_ARN",
                "is unset while SWEEP_QUEUE_URL is set: the function takes SQS records only from the queue this ARN names, so set both (the template and the Terraform module do)",
            ));
        }
        (None, Some(_)) => {
            return Err(error(
                "SWEEP_QUEUE_URL",
                "is unset while SWEEP_QUEUE_ARN is set: set both, from the same queue",
            ));
        }
    };
    Ok(SweepSettings {
        queue_url,
        queue_arn,
        fan_out_at: env.number("SWEEP_FAN_OUT_AT", defaults.fan_out_at, 1..=1_000_000)?,
        shard_size: env.number("SWEEP_SHARD_SIZE", defaults.shard_size, 1..=5_000)?,
        concurrency: env.number("SWEEP_CONCURRENCY", defaults.concurrency, 2..=1_000)?,
        cluster_requests: env.number(
            "SWEEP_CLUSTER_REQUESTS",
            defaults.cluster_requests,
            1..=400,
        )?,
    })
}

/// A GitHub Enterprise host (`GITHUB_ENTERPRISE_HOSTS`) or a self-managed GitLab
/// (`GITLAB_HOSTS`), and its API base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnterpriseHost {
    pub host: String,
    pub api: String,
    pub gitlab: bool,
}

/// Git write-back's settings (see [`crate::git::gitwrite`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitSettings {
    /// Argo CD's own namespace: decides the default file name, and where `git:repocreds`
    /// reads repository credentials.
    pub argocd_namespace: String,
    /// Secrets Manager secrets holding Git credentials (`GIT_CREDENTIALS_SECRET_ARNS`).
    pub credential_secret_arns: Vec<String>,
    /// `git:repocreds` may list Argo CD's repository Secrets (`GIT_REPOCREDS`).
    pub repocreds: bool,
    /// Namespaces besides the Application's own and Argo CD's whose Secrets a
    /// `git:secret:<namespace>/<name>` may name (`GIT_SECRET_NAMESPACES`).
    pub secret_namespaces: Vec<String>,
    /// GitHub Enterprise (`GITHUB_ENTERPRISE_HOSTS`) and self-managed GitLab (`GITLAB_HOSTS`).
    pub enterprise_hosts: Vec<EnterpriseHost>,
    /// Replaces `https://api.github.com` (`GITHUB_API_URL`).
    pub github_api_url: Option<String>,
    /// Replaces `https://gitlab.com/api/v4` (`GITLAB_API_URL`).
    pub gitlab_api_url: Option<String>,
    /// Extra CA certificates (PEM) for GitHub Enterprise servers (`GIT_CA_BUNDLE`).
    pub ca_bundle: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration: {variable}: {problem}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub problem: String,
}

fn error(variable: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        variable,
        problem: problem.into(),
    }
}

/// A DNS-1123 label (lowercase alphanumerics and `-`, at most 63 characters): what a
/// namespace name, and each dot-separated part of an object's name, must be.
pub fn is_namespace(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A DNS-1123 subdomain: what an Application's name must be.
pub fn is_object_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_namespace)
}

fn cluster_name_checked(variable: &'static str, name: &str) -> Result<String, ConfigError> {
    if name.is_empty()
        || name.len() > 100
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(error(
            variable,
            format!("`{name}` is not an EKS cluster name"),
        ));
    }
    Ok(name.to_string())
}

/// `argocd,team-a`, or `*` for all namespaces.
fn namespace_scope(variable: &'static str, list: &str) -> Result<NamespaceScope, ConfigError> {
    if list.trim() == "*" {
        return Ok(NamespaceScope::All);
    }
    let names: Vec<String> = list
        .split(',')
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Err(error(
            variable,
            "names no namespace; use a comma-separated list, or `*` for all",
        ));
    }
    if let Some(bad) = names.iter().find(|n| !is_namespace(n)) {
        return Err(error(
            variable,
            format!("`{bad}` is not a namespace name; use a comma-separated list, or `*` for all"),
        ));
    }
    Ok(NamespaceScope::Only(names))
}

fn cluster_access(
    variable: &'static str,
    endpoint: String,
    ca: &str,
) -> Result<ClusterAccess, ConfigError> {
    let parsed = url::Url::parse(&endpoint).map_err(|e| {
        // Built without a Unicode IDNA back end (binary size): say how to write such a host.
        let hint = if matches!(e, url::ParseError::IdnaError) {
            "; write an internationalised host name in its ASCII `xn--` form"
        } else {
            ""
        };
        error(variable, format!("`{endpoint}` is not a URL: {e}{hint}"))
    })?;
    if parsed.scheme() != "https" {
        return Err(error(
            variable,
            format!("`{endpoint}` must be an https:// URL"),
        ));
    }
    let ca_pem = decode_ca(ca).map_err(|e| {
        error(
            variable,
            format!("the cluster CA is not base64 of a PEM bundle: {e}"),
        )
    })?;
    Ok(ClusterAccess { endpoint, ca_pem })
}

/// `arn:<partition>:iam::<12 digits>:role/<path/name>`.
fn is_role_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "iam", "", account, resource]
        if partition.starts_with("aws")
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && resource.strip_prefix("role/").is_some_and(|name| !name.is_empty()))
}

/// One `CLUSTERS` entry in its JSON form.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClusterEntry {
    name: String,
    #[serde(default)]
    namespaces: Option<NamespacesField>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    ca_data: Option<String>,
    #[serde(default)]
    role_arn: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum NamespacesField {
    Text(String),
    List(Vec<String>),
}

const CLUSTERS_FORMS: &str = "use a comma-separated list of cluster names, or a JSON array of \
    {\"name\", \"namespaces\", \"region\", \"endpoint\", \"caData\", \"roleArn\"}";

/// `CLUSTERS`: `dev,staging,prod`, or a JSON array for per-cluster namespaces, regions and
/// endpoints. Clusters without their own namespaces use `ARGOCD_NAMESPACES`'.
fn clusters_list(
    value: &str,
    default_namespaces: &NamespaceScope,
) -> Result<Vec<ClusterSpec>, ConfigError> {
    const VAR: &str = "CLUSTERS";
    let entries: Vec<ClusterEntry> = if value.trim_start().starts_with('[') {
        serde_json::from_str(value).map_err(|e| {
            error(
                VAR,
                format!("is not a valid JSON array of clusters: {e}; {CLUSTERS_FORMS}"),
            )
        })?
    } else {
        value
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|name| ClusterEntry {
                name: name.to_string(),
                namespaces: None,
                region: None,
                endpoint: None,
                ca_data: None,
                role_arn: None,
            })
            .collect()
    };
    if entries.is_empty() {
        return Err(error(VAR, format!("names no cluster; {CLUSTERS_FORMS}")));
    }
    let mut clusters: Vec<ClusterSpec> = Vec::with_capacity(entries.len());
    for entry in entries {
        let spec = cluster_spec(entry, default_namespaces)?;
        if clusters.iter().any(|c| c.name == spec.name) {
            let name = &spec.name;
            return Err(error(VAR, format!("`{name}` is listed twice")));
        }
        clusters.push(spec);
    }
    Ok(clusters)
}

/// One entry of `CLUSTERS`, checked: its name, namespaces, region, endpoint and role.
fn cluster_spec(
    entry: ClusterEntry,
    default_namespaces: &NamespaceScope,
) -> Result<ClusterSpec, ConfigError> {
    const VAR: &str = "CLUSTERS";
    let name = cluster_name_checked(VAR, entry.name.trim())?;
    let namespaces = match entry.namespaces {
        None => default_namespaces.clone(),
        Some(NamespacesField::Text(list)) => namespace_scope(VAR, &list)?,
        Some(NamespacesField::List(list)) => namespace_scope(VAR, &list.join(","))?,
    };
    if let Some(region) = &entry.region
        && !(region.len() <= 30
            && region.split('-').count() >= 3
            && region
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    {
        return Err(error(
            VAR,
            format!("`{region}` (cluster `{name}`) is not an AWS region"),
        ));
    }
    let access = match (entry.endpoint, entry.ca_data) {
        (None, None) => None,
        (Some(endpoint), Some(ca)) => Some(cluster_access(VAR, endpoint, &ca)?),
        _ => {
            return Err(error(
                VAR,
                format!("cluster `{name}`: `endpoint` and `caData` go together"),
            ));
        }
    };
    if let Some(role) = &entry.role_arn
        && !is_role_arn(role)
    {
        return Err(error(
            VAR,
            format!(
                "`{role}` (cluster `{name}`) is not an IAM role ARN (arn:aws:iam::123456789012:role/name)"
            ),
        ));
    }
    Ok(ClusterSpec {
        name,
        namespaces,
        region: entry.region,
        access,
        role_arn: entry.role_arn,
    })
}

/// `arn:<partition>:secretsmanager:<region>:<12 digits>:secret:<name>` with no wildcard.
fn is_whole_secret_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(7, ':').collect();
    match parts.as_slice() {
        [
            "arn",
            partition,
            "secretsmanager",
            region,
            account,
            "secret",
            name,
        ] => {
            partition.starts_with("aws")
                && !region.is_empty()
                && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit())
                && !name.is_empty()
                && !arn.contains(['*', '?'])
        }
        _ => false,
    }
}

fn git_settings(env: &Env<'_>, namespaces: &NamespaceScope) -> Result<GitSettings, ConfigError> {
    let argocd_namespace = match (env.get("ARGOCD_NAMESPACE"), namespaces) {
        (Some(ns), _) if is_namespace(&ns) => ns,
        (Some(ns), _) => {
            return Err(error(
                "ARGOCD_NAMESPACE",
                format!("`{ns}` is not a namespace name"),
            ));
        }
        (None, NamespaceScope::Only(list)) if list.len() == 1 => list[0].clone(),
        (None, _) => "argocd".into(),
    };
    let credential_secret_arns = env.list("GIT_CREDENTIALS_SECRET_ARNS");
    if let Some(bad) = credential_secret_arns
        .iter()
        .find(|a| !is_whole_secret_arn(a))
    {
        return Err(error(
            "GIT_CREDENTIALS_SECRET_ARNS",
            format!(
                "`{bad}` is not one whole Secrets Manager secret ARN (arn:aws:secretsmanager:region:account:secret:name, no `*` or `?`: a wildcard would let the function read every secret it matches)"
            ),
        ));
    }
    let secret_namespaces = env.list("GIT_SECRET_NAMESPACES");
    if let Some(bad) = secret_namespaces.iter().find(|ns| !is_namespace(ns)) {
        return Err(error(
            "GIT_SECRET_NAMESPACES",
            format!("`{bad}` is not a namespace name"),
        ));
    }
    Ok(GitSettings {
        gitlab_api_url: env.https_url("GITLAB_API_URL")?,
        argocd_namespace,
        credential_secret_arns,
        repocreds: env.flag("GIT_REPOCREDS", false)?,
        secret_namespaces,
        enterprise_hosts: enterprise_hosts(env)?,
        github_api_url: env.https_url("GITHUB_API_URL")?,
        ca_bundle: git_ca_bundle(env)?,
    })
}

/// `GITHUB_ENTERPRISE_HOSTS` and `GITLAB_HOSTS`: `<host>=<API base URL>` pairs.
fn enterprise_hosts(env: &Env<'_>) -> Result<Vec<EnterpriseHost>, ConfigError> {
    let mut hosts = Vec::new();
    for (variable, gitlab, example) in [
        (
            "GITHUB_ENTERPRISE_HOSTS",
            false,
            "ghe.example.com=https://ghe.example.com/api/v3",
        ),
        (
            "GITLAB_HOSTS",
            true,
            "gitlab.example.com=https://gitlab.example.com/api/v4",
        ),
    ] {
        for pair in env.list(variable) {
            let Some((host, api)) = pair.split_once('=') else {
                return Err(error(
                    variable,
                    format!("`{pair}`: expected `<host>=<API base URL>`, e.g. `{example}`"),
                ));
            };
            if !api.starts_with("https://") {
                return Err(error(variable, format!("`{api}` must be an https:// URL")));
            }
            hosts.push(EnterpriseHost {
                host: host.trim().to_ascii_lowercase(),
                api: api.trim().trim_end_matches('/').to_string(),
                gitlab,
            });
        }
    }
    Ok(hosts)
}

/// `GIT_CA_BUNDLE`: a PEM bundle, as it is or in base64.
fn git_ca_bundle(env: &Env<'_>) -> Result<Option<String>, ConfigError> {
    match env.get("GIT_CA_BUNDLE") {
        None => Ok(None),
        Some(text) if text.contains("-----BEGIN") => Ok(Some(text)),
        Some(encoded) => decode_ca(&encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Some)
            .ok_or_else(|| error("GIT_CA_BUNDLE", "is neither a PEM bundle nor base64 of one")),
    }
}

/// The variables, read through a lookup (the process environment, or a test's table), each
/// trimmed; an empty one is unset.
struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Env<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// A comma-separated list, its items trimmed, empty ones dropped.
    fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn flag(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.get(name).as_deref() {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(other) => Err(error(name, format!("`{other}` is not true or false"))),
        }
    }

    fn millis(&self, name: &'static str, default: u64, max: u64) -> Result<Duration, ConfigError> {
        match self.get(name) {
            None => Ok(Duration::from_millis(default)),
            Some(v) => match v.parse::<u64>() {
                Ok(ms) if (1..=max).contains(&ms) => Ok(Duration::from_millis(ms)),
                _ => Err(error(
                    name,
                    format!("`{v}` is not a number of milliseconds from 1 to {max}"),
                )),
            },
        }
    }

    fn number(
        &self,
        name: &'static str,
        default: u32,
        range: std::ops::RangeInclusive<u32>,
    ) -> Result<u32, ConfigError> {
        let Some(v) = self.get(name) else {
            return Ok(default);
        };
        v.parse::<u32>()
            .ok()
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                let (from, to) = (range.start(), range.end());
                error(
                    name,
                    format!("`{v}` is not a whole number from {from} to {to}"),
                )
            })
    }

    fn https_url(&self, name: &'static str) -> Result<Option<String>, ConfigError> {
        match self.get(name) {
            Some(url) if !url.starts_with("https://") => {
                Err(error(name, "must be an https:// URL"))
            }
            url => Ok(url),
        }
    }
}

/// Where the clusters are: `CLUSTER_NAME`, `ARGOCD_NAMESPACES`, `CLUSTERS` and the endpoint
/// override. The first cluster is `CLUSTER_NAME`'s.
fn cluster_specs(env: &Env<'_>) -> Result<Vec<ClusterSpec>, ConfigError> {
    let namespaces = match env.get("ARGOCD_NAMESPACES") {
        None => NamespaceScope::Only(vec!["argocd".into()]),
        Some(list) => namespace_scope("ARGOCD_NAMESPACES", &list)?,
    };
    let listed = match env.get("CLUSTERS") {
        None => None,
        Some(value) => Some(clusters_list(&value, &namespaces)?),
    };
    let cluster_name = match (env.get("CLUSTER_NAME"), &listed) {
        (Some(name), _) => cluster_name_checked("CLUSTER_NAME", &name)?,
        (None, Some(listed)) => listed[0].name.clone(),
        (None, None) => {
            return Err(error(
                "CLUSTER_NAME",
                "is required: the name of the EKS cluster that runs Argo CD (or CLUSTERS for several)",
            ));
        }
    };
    let cluster_override = endpoint_override(env)?;
    let primary = ClusterSpec {
        name: cluster_name.clone(),
        namespaces,
        region: None,
        access: cluster_override.clone(),
        role_arn: None,
    };
    // `CLUSTER_NAME` and its endpoint variables describe the first cluster; `CLUSTERS`
    // adds the others (and may list the first again, to give it its own settings).
    let Some(mut listed) = listed else {
        return Ok(vec![primary]);
    };
    match listed.iter().position(|c| c.name == cluster_name) {
        Some(at) => {
            let mut first = listed.remove(at);
            if first.access.is_none() {
                first.access = cluster_override;
            } else if cluster_override.is_some() {
                return Err(error(
                    "KUBE_API_ENDPOINT",
                    format!("cluster `{cluster_name}` has an endpoint in CLUSTERS too; keep one"),
                ));
            }
            listed.insert(0, first);
        }
        None => listed.insert(0, primary),
    }
    Ok(listed)
}

/// `KUBE_API_ENDPOINT` with `KUBE_CA_DATA`: the first cluster's API server, instead of the
/// one DescribeCluster names.
fn endpoint_override(env: &Env<'_>) -> Result<Option<ClusterAccess>, ConfigError> {
    match (env.get("KUBE_API_ENDPOINT"), env.get("KUBE_CA_DATA")) {
        (None, None) => Ok(None),
        (Some(endpoint), Some(ca)) => {
            let access = cluster_access("KUBE_API_ENDPOINT", endpoint, &ca).map_err(|e| {
                if e.problem.starts_with("the cluster CA") {
                    error("KUBE_CA_DATA", e.problem)
                } else {
                    e
                }
            })?;
            Ok(Some(access))
        }
        (Some(_), None) => Err(error(
            "KUBE_CA_DATA",
            "is required with KUBE_API_ENDPOINT (base64 of the cluster CA PEM)",
        )),
        (None, Some(_)) => Err(error("KUBE_API_ENDPOINT", "is required with KUBE_CA_DATA")),
    }
}

impl Config {
    /// This configuration as it applies to one of its clusters: that cluster's name,
    /// namespaces and endpoint in the fields the listing and the client read.
    pub fn for_cluster(&self, cluster: &ClusterSpec) -> Config {
        Config {
            clusters: vec![cluster.clone()],
            cluster_name: cluster.name.clone(),
            namespaces: cluster.namespaces.clone(),
            cluster_override: cluster.access.clone(),
            ..self.clone()
        }
    }

    /// Only the named cluster (`--cluster` of the CLI): its `CLUSTERS` settings if it is
    /// listed there, the defaults otherwise.
    pub fn narrowed_to(&self, name: &str) -> Result<Config, ConfigError> {
        let spec = match self.clusters.iter().find(|c| c.name == name) {
            Some(spec) => spec.clone(),
            None => ClusterSpec {
                name: cluster_name_checked("--cluster", name)?,
                namespaces: self.namespaces.clone(),
                region: None,
                access: None,
                role_arn: None,
            },
        };
        Ok(self.for_cluster(&spec))
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup`, so tests need not touch the process env.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = Env { lookup: &lookup };
        let clusters = cluster_specs(&env)?;
        let first = &clusters[0];
        let (cluster_name, namespaces, cluster_override) = (
            first.name.clone(),
            first.namespaces.clone(),
            first.access.clone(),
        );
        let label_selector = env.get("APPLICATION_LABEL_SELECTOR");
        // Read as the API server reads it, so an Application read later (a shard, a re-read)
        // is held to the same selector the listing sent.
        let selects = match &label_selector {
            Some(text) => crate::config::label_selector::Selector::parse(text)
                .map_err(|e| error("APPLICATION_LABEL_SELECTOR", e.to_string()))?,
            None => crate::config::label_selector::Selector::default(),
        };
        let notification_topic_arn = env.get("NOTIFICATION_TOPIC_ARN");
        if let Some(arn) = &notification_topic_arn
            && !(arn.starts_with("arn:") && arn.contains(":sns:"))
        {
            return Err(error(
                "NOTIFICATION_TOPIC_ARN",
                format!("`{arn}` is not an SNS topic ARN (arn:aws:sns:region:account:name)"),
            ));
        }
        let log_level = env
            .get("LOG_LEVEL")
            .unwrap_or_else(|| "info".into())
            .to_ascii_lowercase();
        if !["error", "warn", "info", "debug", "trace"].contains(&log_level.as_str()) {
            return Err(error(
                "LOG_LEVEL",
                format!("`{log_level}` is not one of error, warn, info, debug, trace"),
            ));
        }
        let own_account = env.get("FUNCTION_ACCOUNT_ID");
        if let Some(account) = &own_account
            && !(account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(error(
                "FUNCTION_ACCOUNT_ID",
                format!("`{account}` is not 12 digits"),
            ));
        }
        let git = git_settings(&env, &namespaces)?;
        let scopes: Vec<(&str, &NamespaceScope)> = clusters
            .iter()
            .map(|c| (c.name.as_str(), &c.namespaces))
            .collect();
        let eks_capability = managed::capability(
            env.flag("ARGOCD_EKS_CAPABILITY", false)?,
            &scopes,
            &git.argocd_namespace,
        )
        .map_err(|Refused(problem)| error("ARGOCD_EKS_CAPABILITY", problem))?;
        let notification_format =
            managed::notification_format(env.get("NOTIFICATION_FORMAT").as_deref())
                .map_err(|Refused(problem)| error("NOTIFICATION_FORMAT", problem))?;
        Ok(Self {
            own_account,
            eks_capability,
            notification_format,
            sweep: sweep_settings(&env)?,
            rollouts: rollout_settings(&env)?,
            notation_trust_roots: notation_trust_roots(&env)?,
            notation_trust_roots_secret_arn: notation_trust_roots_secret_arn(&env)?,
            git,
            dry_run: env.flag("DRY_RUN", false)?,
            read_image_updaters: env.flag("READ_IMAGEUPDATERS", true)?,
            timeouts: KubeTimeouts {
                connect: env.millis("KUBE_CONNECT_TIMEOUT_MS", 3_000, 60_000)?,
                request: env.millis("KUBE_REQUEST_TIMEOUT_MS", 10_000, 300_000)?,
            },
            page_size: env.number("LIST_PAGE_SIZE", 500, 1..=5_000)?,
            conflict_retries: env.number("CONFLICT_RETRIES", 5, 0..=20)?,
            clusters,
            cluster_name,
            namespaces,
            label_selector,
            selects,
            notification_topic_arn,
            log_level,
            cluster_override,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_must_be_base64_of_a_pem_bundle() {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(decode_ca(&STANDARD.encode(pem)).unwrap(), pem.as_bytes());
        assert!(decode_ca("%%%").is_err());
        assert!(
            decode_ca(&STANDARD.encode("hello"))
                .unwrap_err()
                .contains("BEGIN CERTIFICATE")
        );
    }
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn trust_roots_come_from_one_whole_secret_arn_never_beside_the_variable() {
        let arn = "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:notation-roots-AbCdEf";
        let c = config(&[
            ("CLUSTER_NAME", "c"),
            ("NOTATION_TRUST_ROOTS_SECRET_ARN", arn),
        ])
        .unwrap();
        assert_eq!(c.notation_trust_roots_secret_arn.as_deref(), Some(arn));
        assert_eq!(c.notation_trust_roots, None);
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        for (vars, problem) in [
            (
                vec![
                    ("NOTATION_TRUST_ROOTS_SECRET_ARN", arn.to_string()),
                    ("NOTATION_TRUST_ROOTS", STANDARD.encode(pem)),
                ],
                "keep one",
            ),
            (
                vec![(
                    "NOTATION_TRUST_ROOTS_SECRET_ARN",
                    "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:notation-*".into(),
                )],
                "whole Secrets Manager secret ARN",
            ),
        ] {
            let mut all: Vec<(&str, &str)> = vec![("CLUSTER_NAME", "c")];
            all.extend(vars.iter().map(|(k, v)| (*k, v.as_str())));
            let e = config(&all).unwrap_err();
            assert_eq!(e.variable, "NOTATION_TRUST_ROOTS_SECRET_ARN");
            assert!(e.to_string().contains(problem), "{e}");
        }
    }

    #[test]
    fn a_trust_roots_secret_holds_pem_or_base64_of_it_within_the_bound() {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(trust_roots_from_secret_text(pem).unwrap(), pem.as_bytes());
        assert_eq!(
            trust_roots_from_secret_text(&STANDARD.encode(pem)).unwrap(),
            pem.as_bytes()
        );
        let e = trust_roots_from_secret_text("a password").unwrap_err();
        assert!(e.contains("--secret-string file://root.pem"), "{e}");
        let large = pem.repeat(MAX_TRUST_ROOTS / pem.len() + 1);
        assert!(
            trust_roots_from_secret_text(&large)
                .unwrap_err()
                .contains("keep the root certificates only")
        );
    }

    #[test]
    fn the_sweep_queue_must_be_a_queue_url_without_credentials_or_query() {
        for (url, accepted) in [
            (
                "https://sqs.ap-northeast-2.amazonaws.com/768157413559/stack-SweepQueue-1A2B",
                true,
            ),
            (
                "https://user:pw@sqs.ap-northeast-2.amazonaws.com/768157413559/q",
                false,
            ),
            (
                "https://sqs.ap-northeast-2.amazonaws.com/768157413559/q?x=1",
                false,
            ),
            ("https://sqs.ap-northeast-2.amazonaws.com/q", false),
            ("https://sqs.ap-northeast-2.amazonaws.com/7681574/q", false),
            ("arn:aws:sqs:ap-northeast-2:768157413559:q", false),
        ] {
            let arn = "arn:aws:sqs:ap-northeast-2:768157413559:stack-SweepQueue-1A2B";
            let result = config(&[
                ("CLUSTER_NAME", "c"),
                ("SWEEP_QUEUE_URL", url),
                ("SWEEP_QUEUE_ARN", arn),
            ]);
            if let Err(e) = &result {
                assert!(!e.to_string().contains("pw@"), "{e}");
            }
            assert_eq!(
                result.is_ok() || result.unwrap_err().variable == "SWEEP_QUEUE_ARN",
                accepted,
                "{url}"
            );
        }
    }

    #[test]
    fn the_sweep_queue_arn_comes_with_its_url_and_names_the_same_queue() {
        let url = "https://sqs.ap-northeast-2.amazonaws.com/768157413559/stack-SweepQueue-1A2B";
        for (set, refused_variable) in [
            (vec![("SWEEP_QUEUE_URL", url)], Some("SWEEP_QUEUE_ARN")),
            (
                vec![(
                    "SWEEP_QUEUE_ARN",
                    "arn:aws:sqs:ap-northeast-2:768157413559:stack-SweepQueue-1A2B",
                )],
                Some("SWEEP_QUEUE_URL"),
            ),
            (
                vec![
                    ("SWEEP_QUEUE_URL", url),
                    (
                        "SWEEP_QUEUE_ARN",
                        "arn:aws:sqs:ap-northeast-2:768157413559:another-queue",
                    ),
                ],
                Some("SWEEP_QUEUE_ARN"),
            ),
            (
                vec![
                    ("SWEEP_QUEUE_URL", url),
                    (
                        "SWEEP_QUEUE_ARN",
                        "arn:aws:sqs:ap-northeast-2:*:stack-SweepQueue-1A2B",
                    ),
                ],
                Some("SWEEP_QUEUE_ARN"),
            ),
            (
                vec![
                    ("SWEEP_QUEUE_URL", url),
                    (
                        "SWEEP_QUEUE_ARN",
                        "arn:aws:sqs:ap-northeast-2:768157413559:stack-SweepQueue-1A2B",
                    ),
                ],
                None,
            ),
            (vec![], None),
        ] {
            let mut pairs = vec![("CLUSTER_NAME", "c")];
            pairs.extend(set.iter().copied());
            let result = config(&pairs);
            assert_eq!(
                result.as_ref().err().map(|e| e.variable),
                refused_variable,
                "{set:?}: {result:?}"
            );
        }
    }

    #[test]
    fn each_shard_gets_its_share_of_the_cluster_request_budget() {
        for (requests, concurrency, share) in [
            ("40", "10", 4),
            ("2", "10", 1),
            ("400", "2", 8),
            ("20", "4", 5),
        ] {
            let config = config(&[
                ("CLUSTER_NAME", "c"),
                ("SWEEP_CLUSTER_REQUESTS", requests),
                ("SWEEP_CONCURRENCY", concurrency),
            ])
            .unwrap();
            assert_eq!(
                config.sweep.shard_concurrency(),
                share,
                "{requests}/{concurrency}"
            );
        }
        let refused = config(&[("CLUSTER_NAME", "c"), ("SWEEP_CONCURRENCY", "1")]);
        assert_eq!(refused.unwrap_err().variable, "SWEEP_CONCURRENCY");
    }

    #[test]
    fn a_wildcard_or_partial_git_secret_arn_stops_the_cold_start() {
        for (arns, accepted) in [
            (
                "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-Ab12Cd",
                true,
            ),
            (
                "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:*",
                false,
            ),
            ("arn:aws:secretsmanager:*:768157413559:secret:git", false),
            ("arn:aws:secretsmanager:ap-northeast-2:*:secret:git", false),
            (
                "arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:git-?",
                false,
            ),
            (
                "arn:aws:secretsmanager:ap-northeast-2:768157413559:git",
                false,
            ),
            ("git-credentials", false),
        ] {
            let outcome = config(&[
                ("CLUSTER_NAME", "dev"),
                ("GIT_CREDENTIALS_SECRET_ARNS", arns),
            ]);
            assert_eq!(outcome.is_ok(), accepted, "{arns}: {outcome:?}");
        }
    }

    #[test]
    fn git_secret_namespaces_must_be_namespace_names() {
        let c = config(&[
            ("CLUSTER_NAME", "dev"),
            ("GIT_SECRET_NAMESPACES", "platform, team-b"),
        ])
        .unwrap();
        assert_eq!(c.git.secret_namespaces, ["platform", "team-b"]);
        assert!(config(&[("CLUSTER_NAME", "dev"), ("GIT_SECRET_NAMESPACES", "*")]).is_err());
    }

    #[test]
    fn only_the_cluster_name_is_required_and_defaults_are_safe() {
        let c = config(&[("CLUSTER_NAME", "barun-dev")]).unwrap();
        assert_eq!(c.namespaces, NamespaceScope::Only(vec!["argocd".into()]));
        assert!(!c.dry_run);
        assert_eq!(c.log_level, "info");
        assert_eq!(c.page_size, 500);
        assert!(c.cluster_override.is_none());
    }

    #[test]
    fn one_cluster_name_makes_a_single_cluster_list() {
        let c = config(&[("CLUSTER_NAME", "barun-dev")]).unwrap();
        assert_eq!(c.clusters.len(), 1);
        assert_eq!(c.clusters[0].name, "barun-dev");
        assert_eq!(c.clusters[0].namespaces, c.namespaces);
    }

    #[test]
    fn a_comma_separated_clusters_list_adds_clusters_after_the_cluster_name() {
        let c = config(&[
            ("CLUSTER_NAME", "dev"),
            ("CLUSTERS", "staging, prod"),
            ("ARGOCD_NAMESPACES", "argocd,team-a"),
        ])
        .unwrap();
        let names: Vec<&str> = c.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["dev", "staging", "prod"]);
        assert!(c.clusters.iter().all(|k| k.namespaces == c.namespaces));
        assert_eq!(c.cluster_name, "dev");
    }

    #[test]
    fn clusters_alone_make_the_first_listed_the_primary_one() {
        let c = config(&[("CLUSTERS", "prod,dev")]).unwrap();
        assert_eq!(c.cluster_name, "prod");
        assert_eq!(c.clusters.len(), 2);
    }

    #[test]
    fn the_cluster_name_listed_again_in_clusters_is_moved_first_not_doubled() {
        let c = config(&[("CLUSTER_NAME", "dev"), ("CLUSTERS", "prod,dev")]).unwrap();
        let names: Vec<&str> = c.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["dev", "prod"]);
    }

    #[test]
    fn json_clusters_carry_their_own_namespaces_region_and_endpoint() {
        let pem =
            STANDARD.encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        let clusters = format!(
            r#"[{{"name":"dev"}},
                {{"name":"prod","namespaces":["argocd","payments"],"region":"eu-west-1",
                  "roleArn":"arn:aws:iam::111122223333:role/ops/argocd-ecr-updater"}},
                {{"name":"partner","namespaces":"*","endpoint":"https://k.example.com","caData":"{pem}"}}]"#
        );
        let c = config(&[("CLUSTERS", &clusters)]).unwrap();
        assert_eq!(
            c.clusters[0].namespaces,
            NamespaceScope::Only(vec!["argocd".into()])
        );
        assert_eq!(
            c.clusters[1].namespaces,
            NamespaceScope::Only(vec!["argocd".into(), "payments".into()])
        );
        assert_eq!(c.clusters[1].region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            c.clusters[1].role_arn.as_deref(),
            Some("arn:aws:iam::111122223333:role/ops/argocd-ecr-updater")
        );
        assert_eq!(c.clusters[0].role_arn, None);
        assert_eq!(c.clusters[2].namespaces, NamespaceScope::All);
        assert_eq!(
            c.clusters[2].access.as_ref().unwrap().endpoint,
            "https://k.example.com"
        );
    }

    #[test]
    fn a_bad_clusters_value_says_what_is_wrong_with_it() {
        for (value, expected) in [
            ("dev,dev", "listed twice"),
            ("dev,pr od", "not an EKS cluster name"),
            (
                "[{\"name\":\"dev\",\"nmespaces\":\"argocd\"}]",
                "unknown field `nmespaces`",
            ),
            (
                "[{\"name\":\"dev\",\"endpoint\":\"https://k\"}]",
                "go together",
            ),
            (
                "[{\"name\":\"dev\",\"region\":\"Europe\"}]",
                "is not an AWS region",
            ),
            (
                "[{\"name\":\"dev\",\"roleArn\":\"arn:aws:iam::1234:role/x\"}]",
                "not an IAM role ARN",
            ),
            (
                "[{\"name\":\"dev\",\"roleArn\":\"arn:aws:iam::111122223333:user/x\"}]",
                "not an IAM role ARN",
            ),
            (
                "[{\"name\":\"dev\",\"namespaces\":\"Team A\"}]",
                "not a namespace name",
            ),
            ("[]", "names no cluster"),
            (" , ", "names no cluster"),
        ] {
            let e = config(&[("CLUSTERS", value)]).unwrap_err();
            assert_eq!(e.variable, "CLUSTERS", "{value}");
            assert!(e.problem.contains(expected), "{value}: {}", e.problem);
        }
    }

    #[test]
    fn narrowing_to_one_cluster_keeps_its_listed_settings() {
        let c = config(&[(
            "CLUSTERS",
            r#"[{"name":"dev"},{"name":"prod","namespaces":"payments"}]"#,
        )])
        .unwrap();
        let prod = c.narrowed_to("prod").unwrap();
        assert_eq!(prod.cluster_name, "prod");
        assert_eq!(prod.clusters.len(), 1);
        assert_eq!(
            prod.namespaces,
            NamespaceScope::Only(vec!["payments".into()])
        );
        let other = c.narrowed_to("elsewhere").unwrap();
        assert_eq!(
            other.namespaces,
            NamespaceScope::Only(vec!["argocd".into()])
        );
        assert!(c.narrowed_to("not a name").is_err());
    }

    #[test]
    fn namespaces_are_a_list_or_all() {
        let c = config(&[
            ("CLUSTER_NAME", "c"),
            ("ARGOCD_NAMESPACES", "argocd, team-a"),
        ])
        .unwrap();
        assert_eq!(
            c.namespaces,
            NamespaceScope::Only(vec!["argocd".into(), "team-a".into()])
        );
        let c = config(&[("CLUSTER_NAME", "c"), ("ARGOCD_NAMESPACES", "*")]).unwrap();
        assert_eq!(c.namespaces, NamespaceScope::All);
    }

    #[test]
    fn the_endpoint_override_needs_both_variables_and_a_real_ca() {
        let pem =
            STANDARD.encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        let c = config(&[
            ("CLUSTER_NAME", "c"),
            ("KUBE_API_ENDPOINT", "https://k.example.com"),
            ("KUBE_CA_DATA", &pem),
        ])
        .unwrap();
        assert_eq!(
            c.cluster_override.unwrap().endpoint,
            "https://k.example.com"
        );
    }

    #[test]
    fn an_internationalised_endpoint_is_refused_naming_its_ascii_form() {
        let pem =
            STANDARD.encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        let refused = config(&[
            ("CLUSTER_NAME", "c"),
            ("KUBE_API_ENDPOINT", "https://k\u{fc}ster.example.com"),
            ("KUBE_CA_DATA", &pem),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            refused.contains("KUBE_API_ENDPOINT") && refused.contains("xn--"),
            "{refused}"
        );
        let ascii = config(&[
            ("CLUSTER_NAME", "c"),
            ("KUBE_API_ENDPOINT", "https://xn--kster-jva.example.com"),
            ("KUBE_CA_DATA", &pem),
        ]);
        assert!(ascii.is_ok());
    }

    #[test]
    fn every_bad_variable_is_named_in_the_error() {
        let pem = STANDARD.encode(b"-----BEGIN CERTIFICATE-----\n");
        let table: &[(&[(&str, &str)], &str)] = &[
            (&[], "CLUSTER_NAME"),
            (&[("CLUSTER_NAME", "bad name!")], "CLUSTER_NAME"),
            (
                &[("CLUSTER_NAME", "c"), ("ARGOCD_NAMESPACES", "Argo CD")],
                "ARGOCD_NAMESPACES",
            ),
            (&[("CLUSTER_NAME", "c"), ("DRY_RUN", "maybe")], "DRY_RUN"),
            (
                &[
                    ("CLUSTER_NAME", "c"),
                    ("ROLLOUT_METRIC_APPLICATIONS", "argocd/web,web"),
                ],
                "ROLLOUT_METRIC_APPLICATIONS",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("CONFIRM_ROLLOUTS", "sure")],
                "CONFIRM_ROLLOUTS",
            ),
            // Not base64, and base64 of something that is no PEM certificate.
            (
                &[
                    ("CLUSTER_NAME", "c"),
                    ("NOTATION_TRUST_ROOTS", "-----BEGIN"),
                ],
                "NOTATION_TRUST_ROOTS",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("NOTATION_TRUST_ROOTS", "aGVsbG8=")],
                "NOTATION_TRUST_ROOTS",
            ),
            (&[("CLUSTER_NAME", "c"), ("LOG_LEVEL", "loud")], "LOG_LEVEL"),
            (
                &[("CLUSTER_NAME", "c"), ("KUBE_REQUEST_TIMEOUT_MS", "0")],
                "KUBE_REQUEST_TIMEOUT_MS",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("KUBE_CONNECT_TIMEOUT_MS", "fast")],
                "KUBE_CONNECT_TIMEOUT_MS",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("KUBE_API_ENDPOINT", "https://k")],
                "KUBE_CA_DATA",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("KUBE_CA_DATA", &pem)],
                "KUBE_API_ENDPOINT",
            ),
            (
                &[
                    ("CLUSTER_NAME", "c"),
                    ("KUBE_API_ENDPOINT", "http://k"),
                    ("KUBE_CA_DATA", &pem),
                ],
                "KUBE_API_ENDPOINT",
            ),
            (
                &[
                    ("CLUSTER_NAME", "c"),
                    ("KUBE_API_ENDPOINT", "https://k"),
                    ("KUBE_CA_DATA", "bm90IGEgY2VydA=="),
                ],
                "KUBE_CA_DATA",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("LIST_PAGE_SIZE", "0")],
                "LIST_PAGE_SIZE",
            ),
            (
                &[("CLUSTER_NAME", "c"), ("CONFLICT_RETRIES", "100")],
                "CONFLICT_RETRIES",
            ),
        ];
        for (vars, variable) in table {
            let e = config(vars).unwrap_err();
            assert_eq!(e.variable, *variable, "{vars:?}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("configuration: {variable}: "))
            );
        }
    }
}
