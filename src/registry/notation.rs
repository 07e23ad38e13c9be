//! Notation signatures made by ECR managed signing (AWS Signer), verified in Rust: the COSE
//! envelope's signature by its leaf certificate, the chain up to a root the operator trusts
//! at the signature's authentic signing time (RFC 5280 path validation by webpki, under
//! Notation's algorithm policy), the signed payload naming exactly the image's digest, and the
//! signing profile in the envelope's critical attributes (pure).
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
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm, TrustAnchor, UnixTime};
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
    /// One or more PEM certificates. Each must be a CA certificate with a key Notation accepts.
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
            // A root's key is held to Notation's policy here: path validation would only say
            // that some signature does not verify.
            key_within_policy(&cert).map_err(|e| match e {
                NotationError::Untrusted(why) => NotationError::TrustStore(why),
                other => other,
            })?;
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

/// Notation's algorithm policy for the signatures in a certificate chain (the signature
/// specification's algorithm selection and certificate requirements): ECDSA on P-256, P-384
/// and P-521 with SHA-256, SHA-384 or SHA-512; RSA PKCS#1 v1.5 and RSASSA-PSS with SHA-256,
/// SHA-384 or SHA-512 by keys of 2048 bits or more. Nothing with SHA-1, no Ed25519.
static CHAIN_ALGORITHMS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::aws_lc_rs::ECDSA_P256_SHA256,
    webpki::aws_lc_rs::ECDSA_P256_SHA384,
    webpki::aws_lc_rs::ECDSA_P256_SHA512,
    webpki::aws_lc_rs::ECDSA_P384_SHA256,
    webpki::aws_lc_rs::ECDSA_P384_SHA384,
    webpki::aws_lc_rs::ECDSA_P384_SHA512,
    webpki::aws_lc_rs::ECDSA_P521_SHA256,
    webpki::aws_lc_rs::ECDSA_P521_SHA384,
    webpki::aws_lc_rs::ECDSA_P521_SHA512,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA384,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA512,
    // The same signatures, their AlgorithmIdentifier written without its NULL parameters.
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
    webpki::aws_lc_rs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
];
/// The certificate signature algorithms of the policy, by OID, so a certificate outside it is
/// named before path building (which would only say that some signature is unsupported):
/// sha256/384/512WithRSAEncryption, RSASSA-PSS (its hash is held to the policy by webpki),
/// ecdsa-with-SHA256/384/512.
const SIGNATURE_OIDS: [&str; 7] = [
    "1.2.840.113549.1.1.11",
    "1.2.840.113549.1.1.12",
    "1.2.840.113549.1.1.13",
    "1.2.840.113549.1.1.10",
    "1.2.840.10045.4.3.2",
    "1.2.840.10045.4.3.3",
    "1.2.840.10045.4.3.4",
];
/// Signature algorithms hashing with SHA-1: sha1WithRSAEncryption (PKCS#1 and OIW),
/// ecdsa-with-SHA1, dsa-with-sha1.
const SHA1_SIGNATURE_OIDS: [&str; 4] = [
    "1.2.840.113549.1.1.5",
    "1.3.14.3.2.29",
    "1.2.840.10045.4.1",
    "1.2.840.10040.4.3",
];
/// `id-kp-codeSigning`, DER contents of the OID, for webpki's extended key usage check.
const CODE_SIGNING_DER: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];
/// Notation's least RSA key.
const MIN_RSA_BITS: usize = 2048;

/// Notation's algorithm policy over every certificate of the chain, and no critical
/// extension this verifier does not know. Keys first: a weak key is the cause of whatever it
/// signed.
fn chain_within_policy(chain: &[X509Certificate<'_>]) -> Result<(), NotationError> {
    for cert in chain {
        key_within_policy(cert)?;
    }
    for cert in chain {
        signature_within_policy(cert)?;
        if let Some(ext) = cert.extensions().iter().find(|e| {
            e.critical
                && matches!(
                    e.parsed_extension(),
                    x509_parser::extensions::ParsedExtension::UnsupportedExtension { .. }
                )
        }) {
            return Err(NotationError::Untrusted(format!(
                "`{}` has the critical extension {}, which this verifier does not know",
                cert.subject(),
                ext.oid
            )));
        }
    }
    Ok(())
}

/// The path from the leaf through the envelope's CAs to a root of `store`, validated at the
/// authentic signing time `at` by webpki (RFC 5280: signatures under Notation's algorithm
/// policy, validity, basicConstraints and pathLenConstraint, name constraints, the leaf's
/// extended key usage, unknown critical extensions), and what webpki leaves to its caller:
/// each key within the policy, each CA's keyUsage allowing keyCertSign, the root's own validity,
/// and the envelope's chain being that path in order. The root's subject.
fn verify_chain(
    chain: &[X509Certificate<'_>],
    store: &TrustStore,
    at: OffsetDateTime,
) -> Result<String, NotationError> {
    let untrusted = NotationError::Untrusted;
    let when = ASN1Time::from_timestamp(at.unix_timestamp())
        .map_err(|e| untrusted(format!("signing time out of range: {e}")))?;
    let (leaf, above) = chain
        .split_first()
        .ok_or_else(|| untrusted("no certificate".into()))?;
    chain_within_policy(chain)?;
    let roots = store
        .roots
        .iter()
        .map(|der| X509Certificate::from_der(der).map(|(_, cert)| cert))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| NotationError::TrustStore(format!("a certificate does not parse: {e}")))?;
    // A copy of a trusted root in the envelope is the root, not a CA to build through.
    let is_root = |cert: &X509Certificate<'_>| roots.iter().any(|root| same_entity(cert, root));
    let intermediates: Vec<CertificateDer<'_>> = above
        .iter()
        .filter(|cert| !is_root(cert))
        .map(|cert| CertificateDer::from(cert.as_ref()))
        .collect();
    let leaf_der = CertificateDer::from(leaf.as_ref());
    let end_entity = webpki::EndEntityCert::try_from(&leaf_der)
        .map_err(|e| untrusted(format!("`{}` is not usable: {e}", leaf.subject())))?;
    let root_ders: Vec<CertificateDer<'_>> = store
        .roots
        .iter()
        .map(|der| CertificateDer::from(der.as_slice()))
        .collect();
    let anchors = |valid: bool| -> Result<Vec<(usize, TrustAnchor<'_>)>, NotationError> {
        roots
            .iter()
            .zip(&root_ders)
            .enumerate()
            .filter(|(_, (root, _))| root.validity().is_valid_at(when) == valid)
            .map(|(index, (_, der))| {
                webpki::anchor_from_trusted_cert(der)
                    .map(|anchor| (index, anchor))
                    .map_err(|e| NotationError::TrustStore(format!("a root is not usable: {e}")))
            })
            .collect()
    };
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at.unix_timestamp())
            .map_err(|_| untrusted(format!("signing time {at} is before 1970")))?,
    ));
    // Notation: if the leaf has extended key usages, code signing is one of them.
    let usage = webpki::KeyUsage::required_if_present(CODE_SIGNING_DER);
    let build =
        |anchors: &[(usize, TrustAnchor<'_>)]| -> Result<(Option<usize>, Vec<Vec<u8>>), webpki::Error> {
            let trusted: Vec<TrustAnchor<'_>> = anchors.iter().map(|(_, a)| a.clone()).collect();
            let path = end_entity.verify_for_usage(
                CHAIN_ALGORITHMS,
                &trusted,
                &intermediates,
                time,
                usage,
                None,
                None,
            )?;
            // The anchor webpki returns is one of `trusted`: which root of the store it is.
            let anchor = trusted
                .iter()
                .position(|a| std::ptr::eq(a, path.anchor()))
                .and_then(|at| anchors.get(at))
                .map(|(index, _)| *index);
            let cas = path
                .intermediate_certificates()
                .map(|ca| ca.der().to_vec())
                .collect();
            Ok((anchor, cas))
        };
    let (root_index, path) = match build(&anchors(true)?) {
        Ok(found) => found,
        Err(webpki::Error::UnknownIssuer) => {
            // No root valid at the signing time anchors the chain: one that was not would?
            if let Ok((Some(index), _)) = build(&anchors(false)?)
                && let Some(root) = roots.get(index)
            {
                return Err(untrusted(format!(
                    "the trusted root `{}` was not valid at the signing time {at} (valid {} to {}): trust the root the image was signed under",
                    root.subject(),
                    root.validity().not_before,
                    root.validity().not_after
                )));
            }
            return Err(refused(webpki::Error::UnknownIssuer, chain, &is_root, at));
        }
        Err(e) => return Err(refused(e, chain, &is_root, at)),
    };
    let root = root_index
        .and_then(|index| roots.get(index))
        .ok_or_else(|| untrusted("the path ends at no root of the trust store".into()))?;
    // Notation: the envelope carries the path itself, leaf to root, nothing else.
    let given: Vec<&[u8]> = above
        .iter()
        .filter(|cert| !is_root(cert))
        .map(|cert| cert.as_ref())
        .collect();
    if given != path.iter().map(Vec::as_slice).collect::<Vec<_>>() {
        return Err(untrusted(
            "the envelope's certificates are not the path from the signing certificate to the root, in order: Notation requires exactly that path".into(),
        ));
    }
    // webpki leaves keyUsage to its caller; Notation requires keyCertSign of every CA.
    for ca in above.iter().chain(std::iter::once(root)) {
        let may_sign = matches!(ca.key_usage(), Ok(Some(ku)) if ku.value.key_cert_sign());
        if !may_sign {
            return Err(untrusted(format!(
                "`{}` is not a CA allowed to sign certificates: its keyUsage lacks keyCertSign",
                ca.subject()
            )));
        }
    }
    Ok(root.subject().to_string())
}

/// `cert`'s key within Notation's algorithm policy.
fn key_within_policy(cert: &X509Certificate<'_>) -> Result<(), NotationError> {
    use x509_parser::public_key::PublicKey;
    let untrusted = NotationError::Untrusted;
    let subject = cert.subject();
    let spki = cert.public_key();
    match spki.parsed() {
        Ok(PublicKey::RSA(rsa)) if rsa.key_size() >= MIN_RSA_BITS => {}
        Ok(PublicKey::RSA(rsa)) => {
            return Err(untrusted(format!(
                "`{subject}` has a {}-bit RSA key, and Notation requires {MIN_RSA_BITS} bits or more: its CA must issue it a stronger key",
                rsa.key_size()
            )));
        }
        Ok(PublicKey::EC(_)) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|oid| oid.to_id_string())
                .unwrap_or_default();
            // P-256, P-384, P-521.
            if !["1.2.840.10045.3.1.7", "1.3.132.0.34", "1.3.132.0.35"].contains(&curve.as_str()) {
                return Err(untrusted(format!(
                    "`{subject}` has an EC key on curve {curve}, and Notation accepts P-256, P-384 and P-521 only"
                )));
            }
        }
        _ => {
            return Err(untrusted(format!(
                "`{subject}` has a {} key, and Notation accepts RSA and ECDSA keys only",
                name_of(&spki.algorithm.algorithm)
            )));
        }
    }
    Ok(())
}

/// `cert`'s signature algorithm within Notation's algorithm policy.
fn signature_within_policy(cert: &X509Certificate<'_>) -> Result<(), NotationError> {
    let untrusted = NotationError::Untrusted;
    let subject = cert.subject();
    let algorithm = &cert.signature_algorithm.algorithm;
    let id = algorithm.to_id_string();
    if SHA1_SIGNATURE_OIDS.contains(&id.as_str()) {
        return Err(untrusted(format!(
            "`{subject}` is signed with SHA-1 ({}), which Notation refuses: its CA must re-issue it with SHA-256 or stronger",
            name_of(algorithm)
        )));
    }
    if !SIGNATURE_OIDS.contains(&id.as_str()) {
        return Err(untrusted(format!(
            "`{subject}` is signed with {}, outside Notation's algorithm policy (ECDSA or RSA with SHA-256, SHA-384 or SHA-512)",
            name_of(algorithm)
        )));
    }
    Ok(())
}

/// An OID's short name where x509-parser knows it, else the OID.
fn name_of(oid: &x509_parser::der_parser::oid::Oid<'_>) -> String {
    x509_parser::objects::oid2sn(oid, x509_parser::objects::oid_registry())
        .map(str::to_string)
        .unwrap_or_else(|_| oid.to_id_string())
}

/// The same subject with the same key: a root and its copy in an envelope.
fn same_entity(a: &X509Certificate<'_>, b: &X509Certificate<'_>) -> bool {
    a.subject().as_raw() == b.subject().as_raw() && a.public_key().raw == b.public_key().raw
}

/// webpki's refusal of `chain` at `at`, said as what is wrong and what to do.
fn refused(
    error: webpki::Error,
    chain: &[X509Certificate<'_>],
    is_root: &dyn Fn(&X509Certificate<'_>) -> bool,
    at: OffsetDateTime,
) -> NotationError {
    use webpki::Error as E;
    let when = ASN1Time::from_timestamp(at.unix_timestamp()).ok();
    let why = match error {
        E::CertExpired { .. } | E::CertNotValidYet { .. } | E::InvalidCertValidity => {
            match chain
                .iter()
                .find(|cert| when.is_none_or(|when| !cert.validity().is_valid_at(when)))
            {
                Some(cert) => format!(
                    "`{}` was not valid at the signing time {at} (valid {} to {}): the image must be signed again",
                    cert.subject(),
                    cert.validity().not_before,
                    cert.validity().not_after
                ),
                None => format!("a certificate was not valid at the signing time {at}"),
            }
        }
        E::UnknownIssuer => match chain.iter().rev().find(|cert| !is_root(cert)) {
            Some(last) => format!(
                "`{}` was issued by `{}`, which is not in the trust store: add that root to NOTATION_TRUST_ROOTS if it is the signer's",
                last.subject(),
                last.issuer()
            ),
            None => "no certificate chains to the trust store".into(),
        },
        E::PathLenConstraintViolated => "a CA's pathLenConstraint allows fewer CAs below it than the chain holds: the chain was issued against its CA's constraints".into(),
        E::NameConstraintViolation => "a CA's name constraints exclude a certificate below it (directoryName constraints are not evaluated and so never satisfied): the chain was issued against its CA's constraints".into(),
        E::EndEntityUsedAsCa => "a certificate that issues another is not a CA certificate (basicConstraints)".into(),
        E::CaUsedAsEndEntity => "the signing certificate is a CA certificate".into(),
        E::RequiredEkuNotFoundContext(_) | E::EmptyEkuExtension => {
            "the signing certificate is not for code signing".into()
        }
        E::UnsupportedSignatureAlgorithmContext(_)
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext(_) => "a certificate's signature is outside Notation's algorithm policy (ECDSA or RSA of 2048 bits or more, with SHA-256, SHA-384 or SHA-512)".into(),
        E::InvalidSignatureForPublicKey => match chain.iter().rev().find(|cert| !is_root(cert)) {
            Some(last) => format!(
                "`{}` is issued by `{}` by name, yet a signature in the chain does not verify: the chain comes from another root of that name, which is not in the trust store, or a certificate was altered",
                last.subject(),
                last.issuer()
            ),
            None => "a certificate's signature by its issuer does not verify".into(),
        },
        E::UnsupportedCriticalExtension => {
            "a certificate has a critical extension this verifier does not know".into()
        }
        other => format!("path validation failed: {other}"),
    };
    NotationError::Untrusted(why)
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
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        GeneralSubtree, IsCa, KeyUsagePurpose, NameConstraints,
    };
    use argocd_ecr_updater_standins::notary::{Authority, Envelope, IssuerKey, Signer};
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
        let weak = Signer::with(
            Authority {
                cas: vec![],
                leaf_issuer: IssuerKey::Rsa1024Sha1,
                ..Authority::default()
            },
            |_| {},
        )
        .unwrap();
        let cases = [
            ("", "no certificate"),
            (leaf_pem.as_str(), "is not a CA certificate"),
            (weak.root_pem.as_str(), "has a 1024-bit RSA key"),
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

    /// A distinguished name of one common name.
    fn named(name: &str) -> DistinguishedName {
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn
    }

    /// `signer`'s envelope, verified against its own root.
    fn verified(signer: &Signer) -> Result<Verified, NotationError> {
        verify(
            &signer.envelope(&spec()),
            DIGEST,
            PROFILE,
            &store(signer),
            NOW,
        )
    }

    #[test]
    fn a_chain_that_breaks_rfc_5280_or_notations_algorithm_policy_is_refused_with_its_reason() {
        let cases: Vec<(&str, Authority, &str)> = vec![
            (
                "a sub-CA under a CA that allows none below it (pathLen=0)",
                Authority {
                    cas: vec![
                        |p| p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0)),
                        |_| {},
                    ],
                    ..Authority::default()
                },
                "pathLenConstraint",
            ),
            (
                "a CA whose name constraints exclude the leaf's subject",
                Authority {
                    cas: vec![|p| {
                        p.name_constraints = Some(NameConstraints {
                            permitted_subtrees: vec![],
                            excluded_subtrees: vec![GeneralSubtree::DirectoryName(named(
                                "Test Signer signing profile",
                            ))],
                        })
                    }],
                    ..Authority::default()
                },
                "name constraints",
            ),
            (
                "a CA whose name constraints permit only another subject",
                Authority {
                    cas: vec![|p| {
                        p.name_constraints = Some(NameConstraints {
                            permitted_subtrees: vec![GeneralSubtree::DirectoryName(named(
                                "Someone else",
                            ))],
                            excluded_subtrees: vec![],
                        })
                    }],
                    ..Authority::default()
                },
                "name constraints",
            ),
            (
                "a root whose name constraints exclude the leaf's subject",
                Authority {
                    root: |p| {
                        p.name_constraints = Some(NameConstraints {
                            permitted_subtrees: vec![],
                            excluded_subtrees: vec![GeneralSubtree::DirectoryName(named(
                                "Test Signer signing profile",
                            ))],
                        })
                    },
                    ..Authority::default()
                },
                "name constraints",
            ),
            (
                "a leaf signed with SHA-1",
                Authority {
                    leaf_issuer: IssuerKey::Rsa2048Sha1,
                    ..Authority::default()
                },
                "`CN=Test Signer signing profile` is signed with SHA-1 (sha1WithRSAEncryption)",
            ),
            (
                "a CA with a 1024-bit RSA key",
                Authority {
                    leaf_issuer: IssuerKey::Rsa1024Sha1,
                    ..Authority::default()
                },
                "`CN=Test Signer Issuing CA` has a 1024-bit RSA key",
            ),
            (
                "a root that expired before the signing time",
                Authority {
                    root: |p| p.not_after = datetime!(2026-06-01 0:00 UTC),
                    ..Authority::default()
                },
                "the trusted root `CN=Test Signer Root` was not valid at the signing time",
            ),
            (
                "a root not yet valid at the signing time",
                Authority {
                    root: |p| p.not_before = datetime!(2026-12-01 11:00 UTC),
                    ..Authority::default()
                },
                "the trusted root `CN=Test Signer Root` was not valid at the signing time",
            ),
        ];
        // Every case is tried and every wrong outcome named, not only the first.
        let mut wrong = Vec::new();
        for (case, authority, expected) in cases {
            let signer = Signer::with(authority, |_| {}).unwrap();
            match verified(&signer) {
                Err(error @ NotationError::Untrusted(_))
                    if error.to_string().contains(expected) => {}
                outcome => wrong.push(format!("{case}: {outcome:?}")),
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_chain_verifies_whatever_its_depth_with_or_without_the_root_in_the_envelope() {
        let deep = || Authority {
            cas: vec![|_| {}, |_| {}, |_| {}],
            ..Authority::default()
        };
        let mut with_root = Signer::with(deep(), |_| {}).unwrap();
        let root = x509_parser::pem::Pem::iter_from_buffer(with_root.root_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        with_root.chain.push(root.contents);
        // A name constraint of a form the leaf carries no name of does not concern it (RFC 5280
        // 4.2.1.10): a code-signing leaf has no DNS names.
        let dns_constrained = Authority {
            cas: vec![|p| {
                p.name_constraints = Some(NameConstraints {
                    permitted_subtrees: vec![GeneralSubtree::DnsName("example.com".into())],
                    excluded_subtrees: vec![],
                })
            }],
            ..Authority::default()
        };
        let cases = [
            (
                "three CAs below the root",
                Signer::with(deep(), |_| {}).unwrap(),
            ),
            ("the root's copy last in the envelope", with_root),
            (
                "a DNS name constraint",
                Signer::with(dns_constrained, |_| {}).unwrap(),
            ),
        ];
        for (case, signer) in cases {
            let verified = verified(&signer).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(verified.root, "CN=Test Signer Root", "{case}");
        }
    }

    #[test]
    fn a_directory_name_constraint_is_refused_even_when_the_leaf_satisfies_it() {
        // webpki evaluates no directoryName constraint and so fails closed on every one; AWS
        // Signer's chain carries none, and a chain that does is refused rather than trusted
        // unexamined.
        let authority = Authority {
            cas: vec![|p| {
                p.name_constraints = Some(NameConstraints {
                    permitted_subtrees: vec![GeneralSubtree::DirectoryName(named(
                        "Test Signer signing profile",
                    ))],
                    excluded_subtrees: vec![],
                })
            }],
            ..Authority::default()
        };
        let error = verified(&Signer::with(authority, |_| {}).unwrap()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("directoryName constraints are not evaluated"),
            "{error}"
        );
    }

    #[test]
    fn the_envelope_carries_the_path_in_order_through_cas_allowed_to_sign_certificates() {
        let mut reversed = Signer::with(
            Authority {
                cas: vec![|_| {}, |_| {}],
                ..Authority::default()
            },
            |_| {},
        )
        .unwrap();
        reversed.chain[1..].reverse();
        let mut stray = Signer::with(Authority::default(), |_| {}).unwrap();
        stray.chain.push(self::signer().chain[1].clone());
        let no_cert_sign = Signer::with(
            Authority {
                cas: vec![|p| p.key_usages = vec![KeyUsagePurpose::CrlSign]],
                ..Authority::default()
            },
            |_| {},
        )
        .unwrap();
        let cases = [
            ("the CAs out of order", reversed, "in order"),
            ("a CA off the path", stray, "in order"),
            (
                "an issuing CA without keyCertSign",
                no_cert_sign,
                "`CN=Test Signer Issuing CA` is not a CA allowed to sign certificates",
            ),
        ];
        for (case, signer, expected) in cases {
            let error = verified(&signer).unwrap_err();
            assert!(error.to_string().contains(expected), "{case}: {error}");
        }
    }
}
