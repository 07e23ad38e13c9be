//! Notation signatures made by ECR managed signing (AWS Signer), verified in Rust: the COSE
//! envelope's signature by its leaf certificate, the chain up to a root the operator trusts
//! at the signature's authentic signing time, the signed payload naming exactly the image's
//! digest, and the signing profile in the envelope's critical attributes (pure).
//!
//! The envelope is Notation's COSE_Sign1 (`application/cose`, the Notary Project's
//! signature envelope specification): protected headers `alg`, `crit`, content type
//! `application/vnd.cncf.notary.payload.v1+json`, `io.cncf.notary.signingScheme`
//! (`notary.x509.signingAuthority` for AWS Signer), `io.cncf.notary.authenticSigningTime`,
//! optional `io.cncf.notary.expiry` and AWS Signer's `com.amazonaws.signer.signingProfileVersion`
//! and `…signingJob`; the certificate chain, leaf first, in the unprotected `x5chain` (33).
//! The trusted identity is matched as AWS Signer's Notation plugin matches it: a profile ARN
//! matches every version of that profile, a profile version ARN that version alone.

use ciborium::value::Value as Cbor;
use coset::{
    CborSerializable, CoseSign1, Label, RegisteredLabel, RegisteredLabelWithPrivate,
    TaggedCborSerializable, iana,
};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::time::ASN1Time;

/// The artifact type of a Notation signature in a registry.
pub const SIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.cncf.notary.signature";
/// The media type of a COSE signature envelope (the signature manifest's layer).
pub const COSE_MEDIA_TYPE: &str = "application/cose";
/// The most an envelope may weigh: a chain of a few certificates and a short payload are a
/// few kilobytes.
pub const MAX_ENVELOPE: usize = 64 << 10;
/// The most certificates a chain may hold.
const MAX_CHAIN: usize = 5;

const PAYLOAD_TYPE: &str = "application/vnd.cncf.notary.payload.v1+json";
const SIGNING_SCHEME: &str = "io.cncf.notary.signingScheme";
const AUTHENTIC_SIGNING_TIME: &str = "io.cncf.notary.authenticSigningTime";
const SIGNING_TIME: &str = "io.cncf.notary.signingTime";
const EXPIRY: &str = "io.cncf.notary.expiry";
const PROFILE_VERSION: &str = "com.amazonaws.signer.signingProfileVersion";
const SIGNING_JOB: &str = "com.amazonaws.signer.signingJob";
/// The signing scheme AWS Signer signs with: a signing authority, whose authentic signing
/// time the certificates are checked at.
const SIGNING_AUTHORITY: &str = "notary.x509.signingAuthority";
/// The critical attributes this verifier understands; any other makes the envelope
/// unverifiable, as Notation requires.
const UNDERSTOOD: [&str; 6] = [
    SIGNING_SCHEME,
    AUTHENTIC_SIGNING_TIME,
    SIGNING_TIME,
    EXPIRY,
    PROFILE_VERSION,
    SIGNING_JOB,
];
/// `id-kp-codeSigning`.
const CODE_SIGNING: &str = "1.3.6.1.5.5.7.3.3";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotationError {
    #[error("the trust store is not usable: {0}")]
    TrustStore(String),
    #[error("the signature envelope is malformed: {0}")]
    Malformed(String),
    #[error("the signature envelope is {0}, which this verifier does not support")]
    Unsupported(String),
    #[error("the signature does not verify with its signing certificate")]
    BadSignature,
    #[error("the certificate chain is not trusted: {0}")]
    Untrusted(String),
    #[error("the signature is for {signed}, not {expected}")]
    OtherDigest { signed: String, expected: String },
    #[error("the signature was made by `{signed}`, not by signing profile `{trusted}`")]
    OtherProfile { signed: String, trusted: String },
    #[error("the signature expired at {0}")]
    Expired(String),
}

/// The roots the operator trusts: the AWS Signer root certificate, as Notation's trust
/// store `signingAuthority:aws-signer-ts` holds it.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    roots: Vec<Vec<u8>>,
}

impl TrustStore {
    /// One or more PEM certificates. Each must be a CA certificate.
    pub fn from_pem(text: &str) -> Result<Self, NotationError> {
        let mut roots = Vec::new();
        for pem in x509_parser::pem::Pem::iter_from_buffer(text.as_bytes()) {
            let pem = pem.map_err(|e| NotationError::TrustStore(format!("not PEM: {e}")))?;
            if pem.label != "CERTIFICATE" {
                return Err(NotationError::TrustStore(format!(
                    "a `{}` block where a CERTIFICATE belongs",
                    pem.label
                )));
            }
            let (_, cert) = X509Certificate::from_der(&pem.contents).map_err(|e| {
                NotationError::TrustStore(format!("a certificate does not parse: {e}"))
            })?;
            if !is_ca(&cert) {
                return Err(NotationError::TrustStore(format!(
                    "`{}` is not a CA certificate",
                    cert.subject()
                )));
            }
            roots.push(pem.contents);
        }
        if roots.is_empty() {
            return Err(NotationError::TrustStore(
                "no certificate in it: give the AWS Signer root certificate in PEM".into(),
            ));
        }
        Ok(Self { roots })
    }
}

/// What a verified signature says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The signing profile version ARN that signed.
    pub profile_version: String,
    pub signed_at: OffsetDateTime,
    /// The trusted root's subject.
    pub root: String,
}

/// Verifies one COSE envelope for the image `digest`, made by `trusted_profile` (a profile
/// ARN or a profile version ARN), chaining to a root of `store`, not expired at `now`.
pub fn verify(
    envelope: &[u8],
    digest: &str,
    trusted_profile: &str,
    store: &TrustStore,
    now: OffsetDateTime,
) -> Result<Verified, NotationError> {
    let malformed = |what: &str| NotationError::Malformed(what.to_string());
    if envelope.len() > MAX_ENVELOPE {
        return Err(malformed("over 64 KiB"));
    }
    let sign1 = CoseSign1::from_tagged_slice(envelope)
        .or_else(|_| CoseSign1::from_slice(envelope))
        .map_err(|e| NotationError::Malformed(format!("not a COSE_Sign1: {e:?}")))?;
    let protected = &sign1.protected.header;
    let algorithm = match &protected.alg {
        Some(RegisteredLabelWithPrivate::Assigned(alg)) => *alg,
        Some(other) => return Err(NotationError::Unsupported(format!("signed with {other:?}"))),
        None => return Err(malformed("no algorithm")),
    };
    match &protected.content_type {
        Some(RegisteredLabel::Text(t)) if t == PAYLOAD_TYPE => {}
        _ => return Err(malformed("its content type is not Notation's payload")),
    }
    for label in &protected.crit {
        let known = match label {
            RegisteredLabel::Text(name) => UNDERSTOOD.contains(&name.as_str()),
            RegisteredLabel::Assigned(_) => true,
        };
        if !known {
            return Err(NotationError::Unsupported(format!(
                "marked with the critical attribute {label:?}"
            )));
        }
    }
    let text = |name: &str| {
        protected
            .rest
            .iter()
            .find_map(|(label, value)| match label {
                Label::Text(l) if l == name => Some(value),
                _ => None,
            })
    };
    let scheme = text(SIGNING_SCHEME)
        .and_then(Cbor::as_text)
        .unwrap_or_default();
    if scheme != SIGNING_AUTHORITY {
        return Err(NotationError::Unsupported(format!(
            "signed under scheme `{scheme}` (ECR managed signing uses `{SIGNING_AUTHORITY}`)"
        )));
    }
    let signed_at = text(AUTHENTIC_SIGNING_TIME)
        .and_then(epoch)
        .ok_or_else(|| malformed("no authentic signing time"))?;
    if let Some(expiry) = text(EXPIRY) {
        let expiry = epoch(expiry).ok_or_else(|| malformed("an unreadable expiry"))?;
        if expiry <= now {
            return Err(NotationError::Expired(expiry.to_string()));
        }
    }
    let profile_version = text(PROFILE_VERSION)
        .and_then(Cbor::as_text)
        .ok_or_else(|| malformed("no signing profile version"))?
        .to_string();
    let chain = x5chain(&sign1)?;
    let certificates = chain
        .iter()
        .map(|der| {
            X509Certificate::from_der(der)
                .map(|(_, c)| c)
                .map_err(|e| NotationError::Malformed(format!("a certificate does not parse: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let leaf = certificates
        .first()
        .ok_or_else(|| malformed("no certificate"))?;
    let payload = sign1
        .payload
        .as_deref()
        .ok_or_else(|| malformed("no payload"))?;
    let to_be_signed = sign1.tbs_data(b"");
    verify_cose_signature(algorithm, leaf, &to_be_signed, &sign1.signature)?;
    let root = verify_chain(&certificates, store, signed_at)?;
    let signed_digest = payload_digest(payload)?;
    if signed_digest != digest {
        return Err(NotationError::OtherDigest {
            signed: signed_digest,
            expected: digest.to_string(),
        });
    }
    if !identity_matches(&profile_version, trusted_profile) {
        return Err(NotationError::OtherProfile {
            signed: profile_version,
            trusted: trusted_profile.to_string(),
        });
    }
    Ok(Verified {
        profile_version,
        signed_at,
        root,
    })
}

/// A CBOR epoch time (tag 1, or a bare integer).
fn epoch(value: &Cbor) -> Option<OffsetDateTime> {
    let seconds = match value {
        Cbor::Tag(1, inner) => inner.as_integer()?,
        other => other.as_integer()?,
    };
    OffsetDateTime::from_unix_timestamp(i64::try_from(seconds).ok()?).ok()
}

/// The DER certificates of the unprotected `x5chain`, leaf first.
fn x5chain(sign1: &CoseSign1) -> Result<Vec<Vec<u8>>, NotationError> {
    let label = Label::Int(iana::HeaderParameter::X5Chain as i64);
    let value = sign1
        .unprotected
        .rest
        .iter()
        .find_map(|(l, v)| (*l == label).then_some(v))
        .ok_or_else(|| NotationError::Malformed("no certificate chain (x5chain)".into()))?;
    let chain: Vec<Vec<u8>> = match value {
        Cbor::Bytes(one) => vec![one.clone()],
        Cbor::Array(items) => items
            .iter()
            .map(|item| item.as_bytes().cloned())
            .collect::<Option<_>>()
            .ok_or_else(|| NotationError::Malformed("x5chain holds a non-certificate".into()))?,
        _ => {
            return Err(NotationError::Malformed(
                "x5chain is not a certificate list".into(),
            ));
        }
    };
    if chain.is_empty() || chain.len() > MAX_CHAIN {
        return Err(NotationError::Malformed(format!(
            "x5chain holds {} certificates (1 to {MAX_CHAIN})",
            chain.len()
        )));
    }
    Ok(chain)
}

/// The envelope's signature over `to_be_signed`, by the leaf's key, with the COSE algorithm
/// the envelope names; the leaf must be a code-signing certificate.
fn verify_cose_signature(
    algorithm: iana::Algorithm,
    leaf: &X509Certificate<'_>,
    to_be_signed: &[u8],
    signature: &[u8],
) -> Result<(), NotationError> {
    use aws_lc_rs::signature as sig;
    let verifier: &dyn sig::VerificationAlgorithm = match algorithm {
        iana::Algorithm::ES256 => &sig::ECDSA_P256_SHA256_FIXED,
        iana::Algorithm::ES384 => &sig::ECDSA_P384_SHA384_FIXED,
        iana::Algorithm::ES512 => &sig::ECDSA_P521_SHA512_FIXED,
        iana::Algorithm::PS256 => &sig::RSA_PSS_2048_8192_SHA256,
        iana::Algorithm::PS384 => &sig::RSA_PSS_2048_8192_SHA384,
        iana::Algorithm::PS512 => &sig::RSA_PSS_2048_8192_SHA512,
        other => return Err(NotationError::Unsupported(format!("signed with {other:?}"))),
    };
    if is_ca(leaf) {
        return Err(NotationError::Untrusted(
            "the signing certificate is a CA certificate".into(),
        ));
    }
    let usage = leaf.key_usage().map_err(bad_extension)?;
    if !usage.is_some_and(|u| u.value.digital_signature()) {
        return Err(NotationError::Untrusted(
            "the signing certificate's key usage lacks digitalSignature".into(),
        ));
    }
    if let Some(eku) = leaf.extended_key_usage().map_err(bad_extension)?
        && !eku.value.code_signing
        && !eku
            .value
            .other
            .iter()
            .any(|oid| oid.to_id_string() == CODE_SIGNING)
    {
        return Err(NotationError::Untrusted(
            "the signing certificate is not for code signing".into(),
        ));
    }
    let key = leaf.public_key().subject_public_key.data.as_ref();
    sig::UnparsedPublicKey::new(verifier, key)
        .verify(to_be_signed, signature)
        .map_err(|_| NotationError::BadSignature)
}

fn bad_extension(e: x509_parser::error::X509Error) -> NotationError {
    NotationError::Malformed(format!("a certificate extension does not parse: {e}"))
}

fn is_ca(cert: &X509Certificate<'_>) -> bool {
    matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca)
}

/// Each certificate issued by the next and valid at `at`, the last issued by (or being) a
/// root of `store`; no critical extension this verifier does not know. The root's subject.
fn verify_chain(
    chain: &[X509Certificate<'_>],
    store: &TrustStore,
    at: OffsetDateTime,
) -> Result<String, NotationError> {
    let untrusted = |why: String| NotationError::Untrusted(why);
    let when = ASN1Time::from_timestamp(at.unix_timestamp())
        .map_err(|e| untrusted(format!("signing time out of range: {e}")))?;
    for cert in chain {
        if !cert.validity().is_valid_at(when) {
            return Err(untrusted(format!(
                "`{}` was not valid at the signing time {at}",
                cert.subject()
            )));
        }
        if let Some(ext) = cert.extensions().iter().find(|e| {
            e.critical
                && matches!(
                    e.parsed_extension(),
                    x509_parser::extensions::ParsedExtension::UnsupportedExtension { .. }
                )
        }) {
            return Err(untrusted(format!(
                "`{}` has the unknown critical extension {}",
                cert.subject(),
                ext.oid
            )));
        }
    }
    for pair in chain.windows(2) {
        let (child, issuer) = (&pair[0], &pair[1]);
        issued_by(child, issuer)?;
    }
    let last = chain
        .last()
        .ok_or_else(|| untrusted("no certificate".into()))?;
    for root in &store.roots {
        let Ok((_, root_cert)) = X509Certificate::from_der(root) else {
            continue;
        };
        if last.as_ref() == root.as_slice() || issued_by(last, &root_cert).is_ok() {
            return Ok(root_cert.subject().to_string());
        }
    }
    Err(untrusted(format!(
        "`{}` was issued by `{}`, which is not in the trust store",
        last.subject(),
        last.issuer()
    )))
}

/// `child` names `issuer` as its issuer, `issuer` is a CA allowed to sign certificates, and
/// `child`'s signature verifies with `issuer`'s key.
fn issued_by(
    child: &X509Certificate<'_>,
    issuer: &X509Certificate<'_>,
) -> Result<(), NotationError> {
    let untrusted = |why: String| NotationError::Untrusted(why);
    if child.issuer().as_raw() != issuer.subject().as_raw() {
        return Err(untrusted(format!(
            "`{}` is issued by `{}`, not `{}`",
            child.subject(),
            child.issuer(),
            issuer.subject()
        )));
    }
    let may_sign =
        is_ca(issuer) && matches!(issuer.key_usage(), Ok(Some(ku)) if ku.value.key_cert_sign());
    if !may_sign {
        return Err(untrusted(format!(
            "`{}` is not a CA allowed to sign certificates",
            issuer.subject()
        )));
    }
    child
        .verify_signature(Some(issuer.public_key()))
        .map_err(|e| {
            untrusted(format!(
                "`{}`'s signature by `{}` does not verify: {e}",
                child.subject(),
                issuer.subject()
            ))
        })
}

/// The digest the payload's `targetArtifact` names.
fn payload_digest(payload: &[u8]) -> Result<String, NotationError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Payload {
        target_artifact: Target,
    }
    #[derive(serde::Deserialize)]
    struct Target {
        digest: String,
    }
    serde_json::from_slice::<Payload>(payload)
        .map(|p| p.target_artifact.digest)
        .map_err(|e| NotationError::Malformed(format!("the payload is not Notation's: {e}")))
}

/// AWS Signer's rule: a profile ARN (`…:/signing-profiles/<name>`) matches every version of
/// it, a profile version ARN (`…/<name>/<version>`) exactly; letters' case aside.
fn identity_matches(signed_version: &str, trusted: &str) -> bool {
    let segments = trusted
        .to_ascii_lowercase()
        .split_once(":/signing-profiles/")
        .map(|(_, rest)| rest.split('/').count());
    match segments {
        Some(1) => signed_version
            .rsplit_once('/')
            .is_some_and(|(profile, _)| profile.eq_ignore_ascii_case(trusted)),
        Some(2) => signed_version.eq_ignore_ascii_case(trusted),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argocd_ecr_updater_standins::notary::rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose,
    };
    use argocd_ecr_updater_standins::notary::{Envelope, Signer};
    use time::macros::datetime;

    const DIGEST: &str = "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945";
    const PROFILE: &str = "arn:aws:signer:eu-west-1:123456789012:/signing-profiles/release_prod";
    const VERSION: &str =
        "arn:aws:signer:eu-west-1:123456789012:/signing-profiles/release_prod/2oCN6RHYVI";
    const NOW: OffsetDateTime = datetime!(2026-12-03 10:00 UTC);

    fn signer() -> Signer {
        Signer::new(|_| {}).unwrap()
    }

    fn spec() -> Envelope<'static> {
        Envelope::of(DIGEST, VERSION)
    }

    fn store(signer: &Signer) -> TrustStore {
        TrustStore::from_pem(&signer.root_pem).unwrap()
    }

    #[test]
    fn a_signature_by_the_profile_chaining_to_the_trusted_root_verifies() {
        let signer = signer();
        let envelope = signer.envelope(&spec());
        let verified = verify(&envelope, DIGEST, PROFILE, &store(&signer), NOW).unwrap();
        assert_eq!(verified.profile_version, VERSION);
        assert_eq!(verified.signed_at, datetime!(2026-12-01 10:00 UTC));
        assert_eq!(verified.root, "CN=Test Signer Root");
        // The profile version ARN is a trusted identity too, matched whatever the case.
        let upper = VERSION.to_ascii_uppercase();
        assert!(verify(&envelope, DIGEST, &upper, &store(&signer), NOW).is_ok());
    }

    #[test]
    fn each_way_an_envelope_can_be_wrong_is_refused_with_its_reason() {
        let signer = signer();
        let stranger = self::signer();
        let good = signer.envelope(&spec());
        let mut tampered = good.clone();
        let at = tampered.len() - 10;
        tampered[at] ^= 1;
        let zeros = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let with = |change: fn(&mut Envelope<'static>)| {
            let mut spec = spec();
            change(&mut spec);
            signer.envelope(&spec)
        };
        let same_account = "arn:aws:signer:eu-west-1:123456789012:/signing-profiles/release";
        let other_account = "arn:aws:signer:eu-west-1:210987654321:/signing-profiles/release_prod";
        let other_version =
            "arn:aws:signer:eu-west-1:123456789012:/signing-profiles/release_prod/AAAAAAAAAA";
        let cases: Vec<(&str, Vec<u8>, &str, &Signer, &str)> = vec![
            (
                "a flipped signature bit",
                tampered,
                PROFILE,
                &signer,
                "does not verify with its signing certificate",
            ),
            (
                "a signature for another digest",
                with(|s| {
                    s.digest =
                        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
                }),
                PROFILE,
                &signer,
                zeros,
            ),
            (
                "another profile of the same account",
                good.clone(),
                same_account,
                &signer,
                "not by signing profile",
            ),
            (
                "the same profile name in another account",
                good.clone(),
                other_account,
                &signer,
                "not by signing profile",
            ),
            (
                "another version of the profile",
                good.clone(),
                other_version,
                &signer,
                "not by signing profile",
            ),
            (
                "a chain to a root not trusted",
                good.clone(),
                PROFILE,
                &stranger,
                "not in the trust store",
            ),
            (
                "a signing time outside the leaf's validity",
                with(|s| s.signed_at = datetime!(2026-12-05 0:00 UTC)),
                PROFILE,
                &signer,
                "was not valid at the signing time",
            ),
            (
                "an expired signature",
                with(|s| s.expiry = Some(datetime!(2026-12-02 0:00 UTC))),
                PROFILE,
                &signer,
                "expired",
            ),
            (
                "a scheme whose signing time is not authentic",
                with(|s| s.scheme = "notary.x509"),
                PROFILE,
                &signer,
                "scheme `notary.x509`",
            ),
            (
                "a critical attribute not understood",
                with(|s| s.extra_critical = Some("com.example.policy")),
                PROFILE,
                &signer,
                "critical attribute",
            ),
            (
                "a payload of another type",
                with(|s| s.content_type = "application/json"),
                PROFILE,
                &signer,
                "content type",
            ),
            (
                "not COSE at all",
                b"{\"payload\":\"x\"}".to_vec(),
                PROFILE,
                &signer,
                "not a COSE_Sign1",
            ),
            (
                "too large to be an envelope",
                vec![0u8; MAX_ENVELOPE + 1],
                PROFILE,
                &signer,
                "over 64 KiB",
            ),
        ];
        for (case, bytes, trusted, root, expected) in cases {
            let error = verify(&bytes, DIGEST, trusted, &store(root), NOW).unwrap_err();
            assert!(error.to_string().contains(expected), "{case}: {error}");
        }
    }

    #[test]
    fn the_leaf_must_be_a_code_signing_certificate() {
        let cases: [(&str, fn(&mut CertificateParams), &str); 3] = [
            (
                "no digitalSignature",
                |p| p.key_usages = vec![KeyUsagePurpose::KeyEncipherment],
                "digitalSignature",
            ),
            (
                "a server certificate",
                |p| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth],
                "code signing",
            ),
            (
                "a CA as signer",
                |p| p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained),
                "CA certificate",
            ),
        ];
        for (case, tweak, expected) in cases {
            let signer = Signer::new(tweak).unwrap();
            let envelope = signer.envelope(&spec());
            let error = verify(&envelope, DIGEST, PROFILE, &store(&signer), NOW).unwrap_err();
            assert!(error.to_string().contains(expected), "{case}: {error}");
        }
    }

    #[test]
    fn a_trust_store_holds_ca_certificates_only() {
        let signer = signer();
        assert_eq!(store(&signer).roots.len(), 1);
        let leaf_pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &signer.chain[0])
        );
        let cases = [
            ("", "no certificate"),
            (leaf_pem.as_str(), "is not a CA certificate"),
            (
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "PRIVATE KEY",
            ),
        ];
        for (text, expected) in cases {
            let error = TrustStore::from_pem(text).unwrap_err();
            assert!(error.to_string().contains(expected), "{expected}: {error}");
        }
    }
}
