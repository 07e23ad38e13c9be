//! Signature checks over the network: the cosign key (inline, from Secrets Manager, or from a
//! Kubernetes Secret), the signature artifact in the image's own ECR repository, its payload
//! blob, then [`crate::registry::cosign::verify`]. Keys are kept for five minutes per warm container.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use tokio::sync::Mutex;

use crate::appconfig::cosign_key::KeyRef;
use crate::aws::secrets::{SecretError, SecretReader};
use crate::cluster::kube::KubeClient;
use crate::failure::Failure;
use crate::failure::Refused;
use crate::registry::cosign;
use crate::registry::ecr::Ecr;

const KEYS_FOR: Duration = Duration::from_secs(300);
/// A signature payload is a few hundred bytes; anything larger is not one.
const MAX_PAYLOAD: usize = 1 << 20;
/// A referrers index lists a digest's attached artifacts: a few kilobytes in practice.
const MAX_INDEX: usize = 4 << 20;

pub struct Signatures {
    http: crate::http::LazyClient,
    /// Registry API credentials per registry (ECR's last 12 hours; kept for one).
    registry_auth: Mutex<HashMap<String, (Instant, (String, String))>>,
    secrets: Arc<SecretReader>,
    /// Keys read from Kubernetes Secrets (Secrets Manager's are kept by `secrets`).
    keys: Mutex<HashMap<String, (Instant, String)>>,
}

fn failure(message: String, retryable: bool) -> Failure {
    Failure { message, retryable }
}

impl Signatures {
    pub fn new(secrets: Arc<SecretReader>, timeout: Duration) -> Self {
        Self {
            // ECR's presigned layer URLs are HTTPS; the stand-in's are plain HTTP.
            http: crate::http::LazyClient::new(None, timeout, false),
            secrets,
            keys: Mutex::new(HashMap::new()),
            registry_auth: Mutex::new(HashMap::new()),
        }
    }

    /// The PEM public key `key` names.
    async fn key(&self, key: &KeyRef, kube: &KubeClient) -> Result<String, Failure> {
        let cache_key = key.to_string();
        if let KeyRef::Pem(pem) = key {
            return Ok(pem.clone());
        }
        if let Some((at, pem)) = self.keys.lock().await.get(&cache_key)
            && at.elapsed() < KEYS_FOR
        {
            return Ok(pem.clone());
        }
        let pem = match key {
            KeyRef::Pem(pem) => pem.clone(),
            KeyRef::SecretsManager(arn) => self.secrets.text(arn).await.map_err(|e| match e {
                SecretError::NotText => Failure::permanent(format!(
                    "the cosign key {arn} has no SecretString: store the PEM public key as text"
                )),
                e => Failure::new(
                    format!("cannot read the cosign key {arn}: {e}"),
                    e.is_transient(),
                ),
            })?,
            KeyRef::KubeSecret {
                namespace,
                name,
                key: data_key,
            } => {
                let secret = kube.get_secret(namespace, name).await.map_err(|e| {
                    failure(
                        format!("cannot read the cosign key Secret {namespace}/{name}: {e}"),
                        e.is_retryable(),
                    )
                })?;
                let encoded = secret["data"][data_key.as_str()].as_str().ok_or_else(|| {
                    failure(
                        format!("Secret {namespace}/{name} has no `{data_key}`"),
                        false,
                    )
                })?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|_| {
                        failure(
                            format!("Secret {namespace}/{name} `{data_key}` is not base64"),
                            false,
                        )
                    })?;
                String::from_utf8(bytes).map_err(|_| {
                    failure(
                        format!("Secret {namespace}/{name} `{data_key}` is not text"),
                        false,
                    )
                })?
            }
        };
        self.keys
            .lock()
            .await
            .insert(cache_key, (Instant::now(), pem.clone()));
        Ok(pem)
    }

    /// The registry API's endpoint and credentials, kept for an hour (ECR's last 12); `None`
    /// when the role may not ask for them.
    async fn registry_auth(
        &self,
        ecr: &Ecr,
        registry: &str,
    ) -> Result<Option<(String, String)>, Failure> {
        let cached = self
            .registry_auth
            .lock()
            .await
            .get(registry)
            .filter(|(at, _)| at.elapsed() < Duration::from_secs(3600))
            .map(|(_, auth)| auth.clone());
        if let Some(auth) = cached {
            return Ok(Some(auth));
        }
        match ecr.registry_auth(registry).await {
            Ok(auth) => {
                self.registry_auth
                    .lock()
                    .await
                    .insert(registry.to_string(), (Instant::now(), auth.clone()));
                Ok(Some(auth))
            }
            // Without registry credentials only the `.sig` tag can be checked; the
            // image is then reported as not signed, which says where to look.
            Err(
                crate::registry::ecr::EcrError::AccessDenied { .. }
                | crate::registry::ecr::EcrError::ForeignDenied { .. },
            ) => {
                tracing::warn!(
                    registry,
                    "OCI referrers not checked: the role may not call ecr:GetAuthorizationToken (template parameter SignatureReferrers)"
                );
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The manifests of `digest`'s cosign signatures stored as OCI 1.1 referrers (cosign's
    /// `--registry-referrers-mode=oci-1-1`), through the registry's referrers API; none if
    /// the registry has no such API.
    async fn referrers(
        &self,
        ecr: &Ecr,
        registry: &str,
        repository: &str,
        digest: &str,
    ) -> Result<Vec<String>, Failure> {
        let Some((endpoint, authorization)) = self.registry_auth(ecr, registry).await? else {
            return Ok(Vec::new());
        };
        let http = self.http.get().map_err(Failure::from)?;
        let url = format!(
            "{endpoint}/v2/{repository}/referrers/{digest}?artifactType={}",
            url::form_urlencoded::byte_serialize(cosign::SIGNATURE_ARTIFACT.as_bytes())
                .collect::<String>()
        );
        let unlisted = |e: reqwest::Error| {
            failure(
                format!(
                    "cannot list the referrers of {digest}: {}",
                    crate::redact::http_error(&e)
                ),
                true,
            )
        };
        let response = http
            .get(&url)
            .header("Authorization", authorization)
            .header("Accept", "application/vnd.oci.image.index.v1+json")
            .send()
            .await
            .map_err(unlisted)?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(Vec::new());
        }
        let response = response.error_for_status().map_err(unlisted)?;
        let body = crate::redact::read_capped(response, MAX_INDEX)
            .await
            .map_err(|e| failure(format!("cannot list the referrers of {digest}: {e}"), true))?;
        let index: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| failure(format!("the referrers of {digest} are not JSON: {e}"), true))?;
        let mut manifests = Vec::new();
        for referrer in cosign::signature_referrers(&index) {
            if let Some(manifest) = ecr
                .manifest_by_digest(registry, repository, &referrer)
                .await?
            {
                manifests.push(manifest);
            }
        }
        Ok(manifests)
    }

    /// Whether `digest` in `repository` carries a valid cosign signature by `key`: `Ok(Err)`
    /// is the exact reason it does not (never a write), `Err` a fetch a retry may fix.
    pub async fn check(
        &self,
        ecr: &Ecr,
        kube: &KubeClient,
        registry: &str,
        repository: &str,
        digest: &str,
        key: &KeyRef,
    ) -> Result<Result<(), String>, Failure> {
        let Some(tag) = cosign::signature_tag(digest) else {
            return Ok(Err(format!("{digest} is not a sha256 digest")));
        };
        let pem = self.key(key, kube).await?;
        // cosign's tag convention first, then the OCI 1.1 referrers of the digest.
        let manifests = match ecr.manifest(registry, repository, &tag).await? {
            Some(manifest) => vec![manifest],
            None => self.referrers(ecr, registry, repository, digest).await?,
        };
        if manifests.is_empty() {
            return Ok(Err(format!(
                "{digest} is not signed: no `{tag}` in `{repository}` and no cosign signature among its OCI referrers (sign it with `cosign sign --key …`)"
            )));
        }
        let mut layers = Vec::new();
        for manifest in &manifests {
            match cosign::signature_layers(manifest) {
                Ok(found) => layers.extend(found),
                Err(Refused(reason)) => return Ok(Err(reason)),
            }
        }
        let mut reasons = Vec::new();
        for layer in &layers {
            let Some(url) = ecr.layer_url(registry, repository, &layer.digest).await? else {
                reasons.push(format!("the payload layer {} is missing", layer.digest));
                continue;
            };
            let http = self.http.get().map_err(Failure::from)?;
            let response = http
                .get(&url)
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .map_err(|e| {
                    failure(
                        format!(
                            "cannot download the signature payload {}: {}",
                            layer.digest,
                            crate::redact::http_error(&e)
                        ),
                        true,
                    )
                })?;
            let payload = match crate::redact::read_capped(response, MAX_PAYLOAD).await {
                Ok(payload) => payload,
                Err(crate::redact::ReadError::TooLarge { .. }) => {
                    reasons.push(format!(
                        "the signature payload {} is larger than {MAX_PAYLOAD} bytes, too large to be one",
                        layer.digest
                    ));
                    continue;
                }
                Err(e) => {
                    return Err(failure(
                        format!(
                            "cannot download the signature payload {}: {e}",
                            layer.digest
                        ),
                        true,
                    ));
                }
            };
            match cosign::verify(&pem, layer, &payload, digest) {
                Ok(()) => return Ok(Ok(())),
                Err(Refused(reason)) => reasons.push(reason),
            }
        }
        Ok(Err(reasons.join("; ")))
    }
}
