//! The Notation signatures ECR managed signing attached to a digest, verified: listed as its
//! referrers (`ListImageReferrers`), each signature manifest read (`BatchGetImage`), its COSE
//! envelope downloaded bounded and checked against its digest, then verified in Rust by
//! [`crate::registry::notation`] against the operator's trust store.

use time::OffsetDateTime;

use crate::failure::Failure;
use crate::registry::blob::download;
use crate::registry::ecr::Ecr;
use crate::registry::notation::{self, COSE_MEDIA_TYPE, MAX_ENVELOPE, TrustStore, Verified};

/// What to verify: the image, and whose signature counts.
pub struct Expected<'a> {
    pub registry: &'a str,
    pub repository: &'a str,
    pub digest: &'a str,
    /// The signing profile's ARN (or a profile version's).
    pub profile: &'a str,
}

/// The first of the digest's signatures that verifies; `Ok(Err)` says why none does (each
/// signature's reason), `Err` is a read a retry may fix.
pub async fn verify(
    ecr: &Ecr,
    http: &crate::http::LazyClient,
    expected: &Expected<'_>,
    store: &TrustStore,
    now: OffsetDateTime,
) -> Result<Result<Verified, String>, Failure> {
    let Expected {
        registry,
        repository,
        digest,
        profile,
    } = *expected;
    let listed = ecr
        .signature_referrers(registry, repository, digest)
        .await
        .map_err(Failure::from)?;
    if listed.digests.is_empty() {
        return Ok(Err(format!(
            "ECR lists no Notation signature of {digest} to verify"
        )));
    }
    // Every signature listed is a candidate, in the order ECR lists them: a pusher who adds
    // signatures cannot push the genuine one out of reach, only make the search longer, and
    // the search is bounded by the envelope bytes it downloads and by time.
    let started = std::time::Instant::now();
    let mut examined_bytes = 0;
    let mut reasons = Vec::new();
    for (examined, referrer) in listed.digests.iter().enumerate() {
        if examined_bytes >= MAX_EXAMINED_BYTES || started.elapsed() >= MAX_EXAMINING {
            return Ok(Err(format!(
                "none of the first {examined} of {} Notation signatures of {digest} verifies, and the rest were not examined ({} MiB of envelopes or {} s is the bound): remove the signatures that are not the signing profile's from the repository",
                listed.digests.len(),
                MAX_EXAMINED_BYTES >> 20,
                MAX_EXAMINING.as_secs()
            )));
        }
        let manifest = ecr
            .manifest_by_digest(registry, repository, referrer)
            .await
            .map_err(Failure::from)?;
        let envelope = match manifest.as_deref().map(|m| envelope_of(m, digest)) {
            None => Err(format!("signature {referrer} is missing")),
            Some(Err(reason)) => Err(format!("signature {referrer}: {reason}")),
            Some(Ok(layer)) => download(
                ecr,
                http,
                (registry, repository),
                &layer,
                MAX_ENVELOPE,
                "signature envelope",
            )
            .await?
            .map_err(|reason| format!("signature {referrer}: {reason}")),
        };
        if let Ok(bytes) = &envelope {
            examined_bytes += bytes.len();
        }
        let verified = envelope.and_then(|bytes| {
            notation::verify(&bytes, digest, profile, store, now)
                .map_err(|e| format!("signature {referrer}: {e}"))
        });
        match verified {
            Ok(verified) => return Ok(Ok(verified)),
            Err(reason) => reasons.push(reason),
        }
    }
    if !listed.complete {
        reasons.push(format!(
            "ECR lists more Notation signatures of {digest} than are read ({} MiB of digests); the rest were not examined",
            crate::registry::ecr::MAX_REFERRER_LIST_BYTES >> 20
        ));
    }
    // One reason a signature is enough to say why: thousands would fill the report.
    if reasons.len() > MAX_REASONS {
        let more = reasons.len() - MAX_REASONS;
        reasons.truncate(MAX_REASONS);
        reasons.push(format!("and {more} more"));
    }
    Ok(Err(reasons.join("; ")))
}

/// The most envelope bytes downloaded to find the signature that verifies: 128 envelopes of
/// the largest size, thousands of the usual few kilobytes.
const MAX_EXAMINED_BYTES: usize = 8 << 20;
/// The longest the search for a verifying signature may take.
const MAX_EXAMINING: std::time::Duration = std::time::Duration::from_secs(20);
/// The most per-signature reasons a refusal names.
const MAX_REASONS: usize = 5;

/// The digest of a signature manifest's COSE envelope, if the manifest is a Notation
/// signature of `subject` (pure).
fn envelope_of(manifest: &str, subject: &str) -> Result<String, String> {
    let manifest: serde_json::Value =
        serde_json::from_str(manifest).map_err(|e| format!("its manifest is not JSON: {e}"))?;
    if manifest["subject"]["digest"] != subject {
        return Err(format!("its manifest's subject is not {subject}"));
    }
    let layers = manifest["layers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    match layers.iter().find(|l| l["mediaType"] == COSE_MEDIA_TYPE) {
        Some(layer) => layer["digest"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "its envelope layer has no digest".into()),
        None => Err(format!(
            "its envelope is not COSE ({}); ECR managed signing writes COSE",
            layers
                .first()
                .and_then(|l| l["mediaType"].as_str())
                .unwrap_or("no layer")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SUBJECT: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    #[test]
    fn a_signature_manifest_names_its_cose_envelope_for_its_subject_only() {
        let manifest = |subject: &str, media: &str| {
            json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "artifactType": "application/vnd.cncf.notary.signature",
                "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "size": 2},
                "layers": [{"mediaType": media, "digest": "sha256:abc", "size": 2000}],
                "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": subject, "size": 1000}})
            .to_string()
        };
        let cases = [
            (
                "a COSE signature of the image",
                manifest(SUBJECT, COSE_MEDIA_TYPE),
                Ok("sha256:abc".to_string()),
            ),
            (
                "a signature of another image",
                manifest("sha256:2222", COSE_MEDIA_TYPE),
                Err("subject is not"),
            ),
            (
                "a JWS envelope",
                manifest(SUBJECT, "application/jose+json"),
                Err("not COSE (application/jose+json)"),
            ),
            ("not JSON", "{".to_string(), Err("not JSON")),
        ];
        for (case, text, expected) in cases {
            match (envelope_of(&text, SUBJECT), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{case}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{case}: {got}"),
                (got, want) => panic!("{case}: {got:?}, expected {want:?}"),
            }
        }
    }
}
