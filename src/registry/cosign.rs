//! Cosign signatures, checked without I/O and without the cosign binary: where a signature
//! lives in the registry, what its manifest says, and whether it signs exactly the digest
//! being rolled out with the configured key.
//!
//! Cosign stores the signature of `sha256:<hex>` as the image tagged `sha256-<hex>.sig` in the
//! same repository. Its manifest has one layer per signature: the layer blob is the signed
//! payload (a "simple signing" JSON whose `critical.image.docker-manifest-digest` names the
//! image) and the layer's `dev.cosignproject.cosign/signature` annotation is the base64 of an
//! ASN.1 ECDSA P-256 SHA-256 signature over those bytes (for imported keys cosign also signs
//! with Ed25519, a raw 64-byte signature, and RSA, PKCS#1 v1.5 over SHA-256).

use base64::Engine;
use serde_json::Value;

use crate::appconfig::cosign_key::{PublicKey, public_key};
use crate::failure::Refused;

/// The tag cosign stores `digest`'s signature under.
pub fn signature_tag(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    Some(format!("sha256-{hex}.sig"))
}

/// The `artifactType` of a cosign signature stored as an OCI 1.1 referrer.
pub const SIGNATURE_ARTIFACT: &str = "application/vnd.dev.cosign.artifact.sig.v1+json";

/// The digests of the cosign signature manifests in a referrers index.
pub fn signature_referrers(index: &Value) -> Vec<String> {
    index["manifests"]
        .as_array()
        .map(|manifests| {
            manifests
                .iter()
                .filter(|m| m["artifactType"] == SIGNATURE_ARTIFACT)
                .filter_map(|m| m["digest"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One signature layer of a signature manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLayer {
    pub digest: String,
    pub signature: String,
}

/// The signature layers of a cosign signature manifest.
pub fn signature_layers(manifest: &str) -> Result<Vec<SignatureLayer>, Refused> {
    let manifest: Value = serde_json::from_str(manifest)
        .map_err(|e| format!("the signature manifest is not JSON: {e}"))?;
    let layers: Vec<SignatureLayer> = manifest["layers"]
        .as_array()
        .map(|layers| {
            layers
                .iter()
                .filter_map(|layer| {
                    Some(SignatureLayer {
                        digest: layer["digest"].as_str()?.to_string(),
                        signature: layer["annotations"]["dev.cosignproject.cosign/signature"]
                            .as_str()?
                            .to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if layers.is_empty() {
        return Err(Refused::from(
            "the signature manifest has no layer with a cosign signature",
        ));
    }
    Ok(layers)
}

/// Whether `payload` (the layer blob, whose sha256 is `layer_digest`) carries a valid
/// signature by `key_pem` over exactly `digest`.
pub fn verify(
    key_pem: &str,
    layer: &SignatureLayer,
    payload: &[u8],
    digest: &str,
) -> Result<(), Refused> {
    let actual = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, payload);
    let actual: String = actual.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if layer.digest != format!("sha256:{actual}") {
        return Err(Refused::from(format!(
            "the signature payload does not match its layer digest {} (tampered?)",
            layer.digest
        )));
    }
    let key = public_key(key_pem)?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(layer.signature.trim())
        .map_err(|e| format!("the signature is not base64: {e}"))?;
    let refused = || "the signature does not verify with the configured cosign key".to_string();
    match key {
        PublicKey::EcdsaP256(key) => aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
            key,
        )
        .verify(payload, &raw)
        .map_err(|_| refused())?,
        PublicKey::Ed25519(key) => {
            aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ED25519, key)
                .verify(payload, &raw)
                .map_err(|_| refused())?
        }
        PublicKey::Rsa(key) => aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
            key,
        )
        .verify(payload, &raw)
        .map_err(|_| refused())?,
    }
    let payload: Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the signed payload is not JSON: {e}"))?;
    if payload["critical"]["type"] != "cosign container image signature" {
        return Err(Refused::from(
            "the signed payload is not a cosign container image signature",
        ));
    }
    match payload["critical"]["image"]["docker-manifest-digest"].as_str() {
        Some(signed) if signed == digest => Ok(()),
        Some(signed) => Err(Refused::from(format!(
            "the signature is for {signed}, not {digest}"
        ))),
        None => Err(Refused::from(
            "the signed payload names no docker-manifest-digest",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Signer;
    use p256::ecdsa::{Signature, SigningKey};
    use p256::pkcs8::{DecodePrivateKey, EncodePublicKey};

    const DIGEST: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

    fn keys() -> (SigningKey, String) {
        let pair = rcgen_pair();
        let signing = SigningKey::from_pkcs8_pem(&pair).unwrap();
        let public = signing
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap();
        (signing, public)
    }

    fn rcgen_pair() -> String {
        argocd_ecr_updater_standins::cosign::key_pair().unwrap().0
    }

    fn signed(key: &SigningKey, digest: &str) -> (SignatureLayer, Vec<u8>) {
        let payload = argocd_ecr_updater_standins::cosign::payload("r.example.com/app", digest);
        let signature: Signature = key.sign(&payload);
        let layer_digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &payload);
        let hex: String = layer_digest
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        (
            SignatureLayer {
                digest: format!("sha256:{hex}"),
                signature: base64::engine::general_purpose::STANDARD.encode(signature.to_der()),
            },
            payload,
        )
    }

    #[test]
    fn a_signature_by_the_key_over_the_digest_verifies() {
        let (key, public) = keys();
        let (layer, payload) = signed(&key, DIGEST);
        assert_eq!(verify(&public, &layer, &payload, DIGEST), Ok(()));
    }

    #[test]
    fn another_key_another_digest_or_a_tampered_payload_is_refused_with_the_reason() {
        let (key, public) = keys();
        let (_, other_public) = keys();
        let (layer, payload) = signed(&key, DIGEST);
        let wrong_key = verify(&other_public, &layer, &payload, DIGEST).unwrap_err();
        assert!(wrong_key.contains("does not verify"), "{wrong_key}");
        let other = "sha256:4444444444444444444444444444444444444444444444444444444444444444";
        let (layer_other, payload_other) = signed(&key, other);
        let for_other = verify(&public, &layer_other, &payload_other, DIGEST).unwrap_err();
        assert!(
            for_other.contains(&format!("is for {other}")),
            "{for_other}"
        );
        let mut tampered = payload.clone();
        tampered[10] ^= 1;
        let changed = verify(&public, &layer, &tampered, DIGEST).unwrap_err();
        assert!(changed.contains("tampered"), "{changed}");
        let resigned = SignatureLayer {
            digest: {
                let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &tampered);
                format!(
                    "sha256:{}",
                    d.as_ref()
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                )
            },
            ..layer
        };
        let forged = verify(&public, &resigned, &tampered, DIGEST).unwrap_err();
        assert!(
            forged.contains("does not verify") || forged.contains("not JSON"),
            "{forged}"
        );
    }

    #[test]
    fn ed25519_and_rsa_keys_verify_as_cosign_signs_with_them() {
        use argocd_ecr_updater_standins::cosign::{KeyKind, key_pair_of, sign};
        for kind in [KeyKind::Ed25519, KeyKind::Rsa, KeyKind::EcdsaP256] {
            let (private, public) = key_pair_of(kind).unwrap();
            let (_, stranger) = key_pair_of(kind).unwrap();
            let payload = argocd_ecr_updater_standins::cosign::payload("r.example.com/app", DIGEST);
            let signature = sign(kind, &private, &payload).unwrap();
            let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &payload);
            let layer = SignatureLayer {
                digest: format!(
                    "sha256:{}",
                    d.as_ref()
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                ),
                signature: base64::engine::general_purpose::STANDARD.encode(&signature),
            };
            assert_eq!(
                verify(&public, &layer, &payload, DIGEST),
                Ok(()),
                "{kind:?}"
            );
            let refused = verify(&stranger, &layer, &payload, DIGEST).unwrap_err();
            assert!(refused.contains("does not verify"), "{kind:?}: {refused}");
        }
    }

    #[test]
    fn a_signature_is_tagged_after_the_digest_it_signs() {
        assert_eq!(
            signature_tag(DIGEST).unwrap(),
            format!("sha256-{}.sig", &DIGEST[7..])
        );
    }
}
