//! Notation signatures as ECR managed signing (AWS Signer) makes them, for tests: a
//! certificate chain shaped like AWS Signer's (a root, an issuing CA, a code-signing leaf, all
//! P-384) made on the spot, and COSE_Sign1 envelopes signed with the leaf's key, per the Notary
//! Project's COSE envelope specification. Each field of [`Envelope`] can be set wrong, so
//! every refusal of a verifier can be shown.

/// The certificate parameters [`Signer::new`] adjusts, for tests to name.
pub use rcgen;

use ciborium::value::Value as Cbor;
use coset::{CoseSign1Builder, HeaderBuilder, RegisteredLabel, TaggedCborSerializable, iana};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P384_SHA384,
};
use time::OffsetDateTime;
use time::macros::datetime;

pub const PAYLOAD_TYPE: &str = "application/vnd.cncf.notary.payload.v1+json";
pub const SIGNING_SCHEME: &str = "io.cncf.notary.signingScheme";
pub const AUTHENTIC_SIGNING_TIME: &str = "io.cncf.notary.authenticSigningTime";
pub const EXPIRY: &str = "io.cncf.notary.expiry";
pub const PROFILE_VERSION: &str = "com.amazonaws.signer.signingProfileVersion";
pub const SIGNING_JOB: &str = "com.amazonaws.signer.signingJob";
pub const SIGNING_AUTHORITY: &str = "notary.x509.signingAuthority";

/// A signing authority: its root (the trust store's certificate) and the chain and key it
/// signs with.
pub struct Signer {
    pub root_pem: String,
    /// Leaf first, as `x5chain` carries it.
    pub chain: Vec<Vec<u8>>,
    leaf_key: KeyPair,
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap_or_default();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = datetime!(2025-01-01 0:00 UTC);
    params.not_after = datetime!(2035-01-01 0:00 UTC);
    params
}

impl Signer {
    /// A new authority whose leaf is a code-signing certificate valid from 2026-11-30 to
    /// 2026-12-02, as `leaf` adjusts it.
    pub fn new(leaf: impl FnOnce(&mut CertificateParams)) -> Result<Self, rcgen::Error> {
        let key = || KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384);
        let root = CertifiedIssuer::self_signed(ca_params("Test Signer Root"), key()?)?;
        let issuing =
            CertifiedIssuer::signed_by(ca_params("Test Signer Issuing CA"), key()?, &root)?;
        let leaf_key = key()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "Test Signer signing profile");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.not_before = datetime!(2026-11-30 0:00 UTC);
        params.not_after = datetime!(2026-12-02 0:00 UTC);
        leaf(&mut params);
        let leaf_cert = params.signed_by(&leaf_key, &issuing)?;
        Ok(Self {
            root_pem: root.pem(),
            chain: vec![leaf_cert.der().to_vec(), issuing.der().to_vec()],
            leaf_key,
        })
    }

    /// The envelope `spec` describes, signed with the leaf's key (ES384).
    pub fn envelope(&self, spec: &Envelope<'_>) -> Vec<u8> {
        let time =
            |at: OffsetDateTime| Cbor::Tag(1, Box::new(Cbor::Integer(at.unix_timestamp().into())));
        let mut protected = HeaderBuilder::new()
            .algorithm(iana::Algorithm::ES384)
            .content_type(spec.content_type.to_string())
            .text_value(SIGNING_SCHEME.into(), Cbor::Text(spec.scheme.into()))
            .text_value(AUTHENTIC_SIGNING_TIME.into(), time(spec.signed_at))
            .text_value(
                PROFILE_VERSION.into(),
                Cbor::Text(spec.profile_version.into()),
            )
            .text_value(
                SIGNING_JOB.into(),
                Cbor::Text("arn:aws:signer:eu-west-1:123456789012:/signing-jobs/1".into()),
            );
        let mut critical = vec![
            SIGNING_SCHEME,
            AUTHENTIC_SIGNING_TIME,
            PROFILE_VERSION,
            SIGNING_JOB,
        ];
        if let Some(expiry) = spec.expiry {
            protected = protected.text_value(EXPIRY.into(), time(expiry));
            critical.push(EXPIRY);
        }
        if let Some(extra) = spec.extra_critical {
            protected = protected.text_value(extra.into(), Cbor::Text("x".into()));
            critical.push(extra);
        }
        for label in critical {
            protected = protected.add_critical_label(RegisteredLabel::Text(label.into()));
        }
        let chain = Cbor::Array(self.chain.iter().cloned().map(Cbor::Bytes).collect());
        let unprotected = HeaderBuilder::new()
            .value(iana::HeaderParameter::X5Chain as i64, chain)
            .text_value(
                "io.cncf.notary.signingAgent".into(),
                Cbor::Text("AWS Signer".into()),
            )
            .build();
        let payload = serde_json::json!({"targetArtifact": {
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": spec.digest, "size": 1234}});
        let pkcs8 = self.leaf_key.serialize_der();
        let signer = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
            &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED_SIGNING,
            &pkcs8,
        );
        let rng = aws_lc_rs::rand::SystemRandom::new();
        CoseSign1Builder::new()
            .protected(protected.build())
            .unprotected(unprotected)
            .payload(serde_json::to_vec(&payload).unwrap_or_default())
            .create_signature(b"", |tbs| match &signer {
                Ok(key) => key
                    .sign(&rng, tbs)
                    .map(|s| s.as_ref().to_vec())
                    .unwrap_or_default(),
                Err(_) => Vec::new(),
            })
            .build()
            .to_tagged_vec()
            .unwrap_or_default()
    }
}

/// What an envelope says; each field may be set to what a verifier must refuse.
pub struct Envelope<'a> {
    pub digest: &'a str,
    pub scheme: &'a str,
    pub profile_version: &'a str,
    pub signed_at: OffsetDateTime,
    pub expiry: Option<OffsetDateTime>,
    pub extra_critical: Option<&'a str>,
    pub content_type: &'a str,
}

impl<'a> Envelope<'a> {
    /// The envelope AWS Signer makes for `digest` with `profile_version`, signed on
    /// 2026-12-01 at 10:00 UTC.
    pub fn of(digest: &'a str, profile_version: &'a str) -> Self {
        Self {
            digest,
            scheme: SIGNING_AUTHORITY,
            profile_version,
            signed_at: datetime!(2026-12-01 10:00 UTC),
            expiry: None,
            extra_critical: None,
            content_type: PAYLOAD_TYPE,
        }
    }
}
