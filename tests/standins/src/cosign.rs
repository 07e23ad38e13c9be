//! Cosign signatures made in the tests themselves: a fresh P-256 key, the simple-signing
//! payload cosign signs, and the signature artifact (`sha256-<hex>.sig` manifest plus payload
//! blob) pushed into the ECR stand-in the way `cosign sign` stores it.

use base64::Engine;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::json;

use crate::aws::{AwsState, Image};

/// The key types cosign signs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    EcdsaP256,
    Ed25519,
    Rsa,
}

/// A fresh ECDSA P-256 key pair: (private key PKCS#8 PEM, public key PEM).
pub fn key_pair() -> Result<(String, String), String> {
    key_pair_of(KeyKind::EcdsaP256)
}

/// A fresh key pair of `kind`: (private key PKCS#8 PEM, public key SPKI PEM).
pub fn key_pair_of(kind: KeyKind) -> Result<(String, String), String> {
    let algorithm = match kind {
        KeyKind::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        KeyKind::Ed25519 => &rcgen::PKCS_ED25519,
        KeyKind::Rsa => &rcgen::PKCS_RSA_SHA256,
    };
    let pair = rcgen::KeyPair::generate_for(algorithm).map_err(|e| e.to_string())?;
    let private = pair.serialize_pem();
    let public = match kind {
        KeyKind::EcdsaP256 => SigningKey::from_pkcs8_pem(&private)
            .map_err(|e| e.to_string())?
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| e.to_string())?,
        KeyKind::Ed25519 | KeyKind::Rsa => pair.public_key_pem(),
    };
    Ok((private, public))
}

/// A signature over `payload` as cosign makes it with a key of `kind`: ASN.1 DER for ECDSA,
/// the raw 64 bytes for Ed25519, PKCS#1 v1.5 with SHA-256 for RSA.
pub fn sign(kind: KeyKind, private_pem: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
    let der = pem_body(private_pem)?;
    match kind {
        KeyKind::EcdsaP256 => {
            let key = SigningKey::from_pkcs8_pem(private_pem).map_err(|e| e.to_string())?;
            let signature: Signature = key.sign(payload);
            Ok(signature.to_der().as_bytes().to_vec())
        }
        KeyKind::Ed25519 => {
            let key = aws_lc_rs::signature::Ed25519KeyPair::from_pkcs8(&der)
                .map_err(|e| e.to_string())?;
            Ok(key.sign(payload).as_ref().to_vec())
        }
        KeyKind::Rsa => {
            let key = aws_lc_rs::rsa::KeyPair::from_pkcs8(&der).map_err(|e| e.to_string())?;
            let mut signature = vec![0; key.public_modulus_len()];
            key.sign(
                &aws_lc_rs::signature::RSA_PKCS1_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                payload,
                &mut signature,
            )
            .map_err(|e| e.to_string())?;
            Ok(signature)
        }
    }
}

fn pem_body(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| e.to_string())
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
    store_signature_of(
        aws,
        repository,
        digest,
        KeyKind::EcdsaP256,
        private_pem,
        payload,
    )
}

/// [`store_signature`] with a key of `kind`.
pub fn store_signature_of(
    aws: &AwsState,
    repository: &str,
    digest: &str,
    kind: KeyKind,
    private_pem: &str,
    payload: &[u8],
) -> Result<(), String> {
    let signature = sign(kind, private_pem, payload)?;
    let layer = sha256(payload);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 233,
                   "digest": format!("sha256:{}", "c".repeat(64))},
        "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                    "size": payload.len(), "digest": layer,
                    "annotations": {"dev.cosignproject.cosign/signature":
                        base64::engine::general_purpose::STANDARD.encode(&signature)}}],
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

/// `digest`'s cosign signature stored as cosign 2's `--registry-referrers-mode=oci-1-1`
/// stores it: an untagged manifest with `artifactType` and `subject`, found through the
/// registry's referrers API instead of a `.sig` tag.
pub fn store_referrer_signature(
    aws: &AwsState,
    repository: &str,
    digest: &str,
    kind: KeyKind,
    private_pem: &str,
    payload: &[u8],
) -> Result<(), String> {
    let signature = sign(kind, private_pem, payload)?;
    let layer = sha256(payload);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
                   "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
        "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                    "size": payload.len(), "digest": layer,
                    "annotations": {"dev.cosignproject.cosign/signature":
                        base64::engine::general_purpose::STANDARD.encode(&signature)}}],
        "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 1000},
    })
    .to_string();
    aws.put_blob(repository, &layer, payload.to_vec());
    let mut image = Image::with_manifest(repository, "", &sha256(manifest.as_bytes()), manifest);
    image.size = 600;
    aws.push(image);
    Ok(())
}
