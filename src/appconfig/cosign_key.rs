//! Where a cosign key comes from (Image Updater's `cosignKey`, our `cosign-key` annotation),
//! and a PEM key read the way cosign reads it: configuration refuses a key that could never
//! verify anything, before any signature is fetched.

use base64::Engine;
use spki::SubjectPublicKeyInfoRef;

use crate::failure::Refused;

/// Where a cosign key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRef {
    /// A Secrets Manager secret whose value is the PEM public key.
    SecretsManager(String),
    /// A key of a Kubernetes Secret's data (Image Updater's `cosignKey`).
    KubeSecret {
        namespace: String,
        name: String,
        key: String,
    },
    /// The PEM itself, in the annotation.
    Pem(String),
}

impl KeyRef {
    /// `secretsmanager:<arn>`, `secret:<namespace>/<name>[:<key>]` (key `cosign.pub` by
    /// default), or a PEM public key.
    pub fn parse(text: &str) -> Result<Self, Refused> {
        let text = text.trim();
        if let Some(arn) = text.strip_prefix("secretsmanager:") {
            if !(arn.starts_with("arn:") && arn.contains(":secretsmanager:")) {
                return Err(Refused::from(format!(
                    "`{arn}` is not a Secrets Manager secret ARN"
                )));
            }
            return Ok(Self::SecretsManager(arn.to_string()));
        }
        if let Some(reference) = text.strip_prefix("secret:") {
            let (path, key) = reference
                .split_once(':')
                .unwrap_or((reference, "cosign.pub"));
            return match path.split_once('/') {
                Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                    Ok(Self::KubeSecret {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        key: key.to_string(),
                    })
                }
                _ => Err(Refused::from(
                    "expected `secret:<namespace>/<name>[:<key>]`",
                )),
            };
        }
        if text.starts_with("-----BEGIN PUBLIC KEY-----") {
            public_key(text)?;
            return Ok(Self::Pem(text.to_string()));
        }
        Err(Refused::from(
            "expected `secretsmanager:<arn>`, `secret:<namespace>/<name>[:<key>]` or a PEM public key",
        ))
    }
}

impl std::fmt::Display for KeyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SecretsManager(arn) => write!(f, "secretsmanager:{arn}"),
            Self::KubeSecret {
                namespace,
                name,
                key,
            } => write!(f, "secret:{namespace}/{name}:{key}"),
            Self::Pem(_) => f.write_str("an inline PEM key"),
        }
    }
}

/// A cosign public key, by its SPKI algorithm.
pub(crate) enum PublicKey {
    /// The curve point, as the SPKI carries it.
    EcdsaP256(Vec<u8>),
    Ed25519(Vec<u8>),
    /// The PKCS#1 `RSAPublicKey` DER inside the SPKI.
    Rsa(Vec<u8>),
}

const ID_EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";
const P256: &str = "1.2.840.10045.3.1.7";
const ID_ED25519: &str = "1.3.101.112";
const RSA_ENCRYPTION: &str = "1.2.840.113549.1.1.1";

pub(crate) fn public_key(pem: &str) -> Result<PublicKey, String> {
    let bad = |e: String| format!("the cosign key is not a PEM public key: {e}");
    let body: String = pem
        .trim()
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map_err(|e| bad(e.to_string()))?;
    let info = SubjectPublicKeyInfoRef::try_from(der.as_slice()).map_err(|e| bad(e.to_string()))?;
    let key = info.subject_public_key.raw_bytes().to_vec();
    match info.algorithm.oid.to_string().as_str() {
        ID_EC_PUBLIC_KEY => {
            let curve = info
                .algorithm
                .parameters_oid()
                .map_err(|e| format!("the cosign key is an EC key without a named curve: {e}"))?;
            if curve.to_string() != P256 {
                return Err(format!(
                    "the cosign key is an EC key on curve {curve}, not P-256"
                ));
            }
            Ok(PublicKey::EcdsaP256(key))
        }
        ID_ED25519 => Ok(PublicKey::Ed25519(key)),
        RSA_ENCRYPTION => Ok(PublicKey::Rsa(key)),
        other => Err(format!(
            "the cosign key's algorithm {other} is not one cosign signs with (ECDSA P-256, Ed25519, RSA)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 public key in PEM, as `cosign generate-key-pair` writes it.
    fn p256_public_pem() -> String {
        use p256::pkcs8::EncodePublicKey;
        let secret = p256::SecretKey::from_slice(&[7u8; 32]).unwrap();
        secret
            .public_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap()
    }

    #[test]
    fn key_references_are_parsed_and_bad_ones_refused() {
        assert_eq!(
            KeyRef::parse("secret:argocd/cosign").unwrap(),
            KeyRef::KubeSecret {
                namespace: "argocd".into(),
                name: "cosign".into(),
                key: "cosign.pub".into()
            }
        );
        assert!(matches!(
            KeyRef::parse(
                "secretsmanager:arn:aws:secretsmanager:ap-northeast-2:768157413559:secret:cosign-Ab12"
            ),
            Ok(KeyRef::SecretsManager(_))
        ));
        assert!(matches!(
            KeyRef::parse(&p256_public_pem()),
            Ok(KeyRef::Pem(_))
        ));
        for bad in [
            "secret:nope",
            "secretsmanager:not-an-arn",
            "cosign.pub",
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
        ] {
            assert!(KeyRef::parse(bad).is_err(), "{bad}");
        }
    }
}
