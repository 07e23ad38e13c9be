//! A blob of an ECR repository (an image config, a signature envelope), downloaded by digest
//! from the URL `GetDownloadUrlForLayer` hands out: bounded before it is read, and its bytes
//! checked against the digest before anyone parses them.

use crate::failure::Failure;
use crate::registry::ecr::Ecr;

/// The bytes of blob `digest`, at most `limit` of them: `Ok(Err)` says why there are none to
/// use (missing, too large, not those bytes), `Err` is a fetch a retry may fix. `what` names
/// the blob in messages.
pub async fn download(
    ecr: &Ecr,
    http: &crate::http::LazyClient,
    (registry, repository): (&str, &str),
    digest: &str,
    limit: usize,
    what: &str,
) -> Result<Result<Vec<u8>, String>, Failure> {
    let failed = |message: String| Failure {
        message,
        retryable: true,
    };
    let Some(url) = ecr
        .layer_url(registry, repository, digest)
        .await
        .map_err(|e| failed(e.to_string()))?
    else {
        return Ok(Err(format!("the {what} {digest} is missing")));
    };
    let client = http.get().map_err(Failure::from)?;
    let response = client
        .get(&url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| {
            failed(format!(
                "cannot download the {what}: {}",
                crate::redact::http_error(&e)
            ))
        })?;
    let bytes = match crate::redact::read_capped(response, limit).await {
        Ok(bytes) => bytes,
        Err(crate::redact::ReadError::TooLarge { .. }) => {
            return Ok(Err(format!("the {what} is larger than {limit} bytes")));
        }
        Err(e) => return Err(failed(format!("cannot download the {what}: {e}"))),
    };
    let actual = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &bytes);
    let hex: String = actual.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if digest != format!("sha256:{hex}") {
        return Ok(Err(format!("the {what}'s bytes do not match {digest}")));
    }
    Ok(Ok(bytes))
}
