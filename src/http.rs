//! HTTP clients that carry a credential to a server we do not run (a Git host, a registry's
//! blob store): built on first use, never following a redirect.

use std::time::Duration;

use crate::failure::Refused;

/// An HTTP client built on first use, then kept for the warm container. Building one loads
/// the system's root certificates, a cost every cold start would pay for clients most
/// invocations (no git write-back, no signature gate) never use.
pub struct LazyClient {
    extra_ca_pem: Option<String>,
    timeout: Duration,
    https_only: bool,
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
}

impl LazyClient {
    pub fn new(extra_ca_pem: Option<&str>, timeout: Duration, https_only: bool) -> Self {
        Self {
            extra_ca_pem: extra_ca_pem.map(str::to_string),
            timeout,
            https_only,
            client: std::sync::OnceLock::new(),
        }
    }

    /// The client, or why it cannot be built (a `GIT_CA_BUNDLE` that is not PEM).
    pub fn get(&self) -> Result<&reqwest::Client, Refused> {
        self.client
            .get_or_init(|| {
                http_client(self.extra_ca_pem.as_deref(), self.timeout, self.https_only)
            })
            .as_ref()
            .map_err(|reason| Refused(reason.clone()))
    }
}

/// An HTTP client for the Git hosts' APIs (`https_only`) or blob downloads: the system's
/// roots plus `GIT_CA_BUNDLE` for self-hosted servers.
fn http_client(
    extra_ca_pem: Option<&str>,
    timeout: Duration,
    https_only: bool,
) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .https_only(https_only)
        // Every request of these clients carries a credential (a token header, or a presigned
        // URL); a redirect would carry it to whatever host the answer names.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(timeout)
        .user_agent(concat!("argocd-ecr-updater/", env!("CARGO_PKG_VERSION")))
        // Bodies here are read to a byte limit and some are checked against a digest: both
        // are meant for the bytes as the server sent them.
        .no_gzip();
    if let Some(pem) = extra_ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .map_err(|e| format!("GIT_CA_BUNDLE is not a PEM bundle: {e}"))?;
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|e| e.to_string())
}
