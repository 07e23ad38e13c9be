//! Cosign signatures made in the tests themselves: a fresh P-256 key, the simple-signing
//! payload cosign signs, and the signature artifact (`sha256-<hex>.sig` manifest plus payload
//! blob) pushed into the ECR stand-in the way `cosign sign` stores it.

use base64::Engine;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::json;

use crate::aws::{AwsState, Image};

/// A fresh ECDSA P-256 key pair: (private key PKCS#8 PEM, public key PEM).
pub fn key_pair() -> Result<(String, String), String> {
    let pair =
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let private = pair.serialize_pem();
    let signing = SigningKey::from_pkcs8_pem(&private).map_err(|e| e.to_string())?;
    let public = signing
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| e.to_string())?;
    Ok((private, public))
}

/// The payload `cosign sign` signs for `image@digest`.
pub fn payload(image: &str, digest: &str) -> Vec<u8> {
    json!({"critical": {"identity": {"docker-reference": image},
                        "image": {"docker-manifest-digest": digest},
                        "type": "cosign container image signature"},
           "optional": null})
    .to_string()
    .into_bytes()
}

fn sha256(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Signs `payload` with `private_pem` and stores it as `digest`'s cosign signature in
/// `repository`: the blob, and the manifest tagged `sha256-<hex>.sig`.
pub fn store_signature(
    aws: &AwsState,
    repository: &str,
    digest: &str,
    private_pem: &str,
    payload: &[u8],
) -> Result<(), String> {
    let key = SigningKey::from_pkcs8_pem(private_pem).map_err(|e| e.to_string())?;
    let signature: Signature = key.sign(payload);
    let layer = sha256(payload);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 233,
                   "digest": format!("sha256:{}", "c".repeat(64))},
        "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                    "size": payload.len(), "digest": layer,
                    "annotations": {"dev.cosignproject.cosign/signature":
                        base64::engine::general_purpose::STANDARD.encode(signature.to_der())}}],
    })
    .to_string();
    aws.put_blob(repository, &layer, payload.to_vec());
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or("not a sha256 digest")?;
    let mut image = Image::with_manifest(
        repository,
        &format!("sha256-{hex}.sig"),
        &sha256(manifest.as_bytes()),
        manifest,
    );
    image.size = 512;
    aws.push(image);
    Ok(())
}
