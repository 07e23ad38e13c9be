//! Notation signatures as ECR managed signing (AWS Signer) makes them, for tests: a
//! certificate chain shaped like AWS Signer's (a root, an issuing CA, a code-signing leaf, all
//! P-384) made on the spot, and COSE_Sign1 envelopes signed with the leaf's key, per the Notary
//! Project's COSE envelope specification. Each field of [`Envelope`] can be set wrong, and the
//! chain above the leaf can be shaped as a verifier must refuse ([`Authority`]: more CAs, each
//! CA's extensions and validity, a leaf signed with SHA-1 by a weak RSA key), so every refusal
//! of a verifier can be shown.

/// The certificate parameters [`Signer::new`] adjusts, for tests to name.
pub use rcgen;

use ciborium::value::Value as Cbor;
use coset::{CoseSign1Builder, HeaderBuilder, RegisteredLabel, TaggedCborSerializable, iana};
use num_bigint::BigUint;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P384_SHA384, PKCS_RSA_SHA256, PublicKeyData,
    SignatureAlgorithm, SigningKey,
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

/// The certificate authority above the leaf, as [`Signer::with`] makes it.
pub struct Authority {
    /// Adjusts the root's parameters (the trust store's certificate).
    pub root: fn(&mut CertificateParams),
    /// The CAs between the root and the leaf, from the root down, each as it adjusts its
    /// parameters; the last issues the leaf. AWS Signer's chain has one.
    pub cas: Vec<fn(&mut CertificateParams)>,
    /// The key of the leaf's issuer (the last CA, or the root when there is none) and what it
    /// signs the leaf with.
    pub leaf_issuer: IssuerKey,
}

impl Default for Authority {
    /// AWS Signer's shape: a root, one issuing CA, both P-384.
    fn default() -> Self {
        Self {
            root: |_| {},
            cas: vec![|_| {}],
            leaf_issuer: IssuerKey::P384,
        }
    }
}

/// The key of the CA that issues the leaf, and what it signs the leaf with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IssuerKey {
    /// P-384, ECDSA with SHA-384, as AWS Signer's CAs sign.
    #[default]
    P384,
    /// A 2048-bit RSA key signing with `sha1WithRSAEncryption`.
    Rsa2048Sha1,
    /// A 1024-bit RSA key signing with `sha1WithRSAEncryption` (SHA-1 because an RSA
    /// verifier taking 1024-bit keys at all does so for SHA-1 alone).
    Rsa1024Sha1,
}

impl Signer {
    /// A new authority whose leaf is a code-signing certificate valid from 2026-11-30 to
    /// 2026-12-02, as `leaf` adjusts it.
    pub fn new(leaf: impl FnOnce(&mut CertificateParams)) -> Result<Self, rcgen::Error> {
        Self::with(Authority::default(), leaf)
    }

    /// A new authority shaped as `authority` says, whose leaf `leaf` adjusts. The envelope's
    /// chain holds the leaf and the CAs, not the root.
    pub fn with(
        authority: Authority,
        leaf: impl FnOnce(&mut CertificateParams),
    ) -> Result<Self, rcgen::Error> {
        let mut root_params = ca_params("Test Signer Root");
        (authority.root)(&mut root_params);
        let root_key = match authority.cas.is_empty() {
            true => TestKey::new(authority.leaf_issuer)?,
            false => TestKey::new(IssuerKey::P384)?,
        };
        let root = CertifiedIssuer::self_signed(root_params, root_key)?;
        let root_pem = pem(&root.key().finish(root.der())?);
        let mut issuer = root;
        let mut cas = Vec::new();
        let count = authority.cas.len();
        for (at, adjust) in authority.cas.into_iter().enumerate() {
            let last = at + 1 == count;
            let name = match last {
                true => "Test Signer Issuing CA".to_string(),
                false => format!("Test Signer CA {}", at + 1),
            };
            let mut params = ca_params(&name);
            adjust(&mut params);
            let key = TestKey::new(match last {
                true => authority.leaf_issuer,
                false => IssuerKey::P384,
            })?;
            let ca = CertifiedIssuer::signed_by(params, key, &issuer)?;
            cas.push(issuer.key().finish(ca.der())?);
            issuer = ca;
        }
        let leaf_key = KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "Test Signer signing profile");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        params.not_before = datetime!(2026-11-30 0:00 UTC);
        params.not_after = datetime!(2026-12-02 0:00 UTC);
        leaf(&mut params);
        let leaf_cert = params.signed_by(&leaf_key, &issuer)?;
        let mut chain = vec![issuer.key().finish(leaf_cert.der())?];
        chain.extend(cas.into_iter().rev());
        Ok(Self {
            root_pem,
            chain,
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

/// `der` as a PEM certificate.
fn pem(der: &[u8]) -> String {
    let text = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(64)
        .filter_map(|line| std::str::from_utf8(line).ok())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// A CA's key: P-384 through rcgen, or RSA signing with SHA-1, which rcgen (rightly) does not
/// offer and aws-lc signs with for no one: PKCS#1 v1.5 done here on the key's numbers
/// (RFC 8017 8.2.1), for test certificates only.
enum TestKey {
    Ec(KeyPair),
    RsaSha1 {
        /// `RSAPublicKey`, as the certificate's subjectPublicKey holds it.
        public: Vec<u8>,
        modulus: BigUint,
        private_exponent: BigUint,
    },
}

/// A 1024-bit RSA key, fixed: aws-lc no longer makes keys this small. PKCS#1 `RSAPrivateKey`
/// DER, base64; for the test certificates a verifier must refuse, nothing else.
const RSA_1024: &str = "\
MIICXAIBAAKBgQDecuEsuNDO++lx4+1oBGxrJ7w5egnfLGO0MQLXBud99yBVjb4zwLBD7KIZE4mPSopxlO2nOrQPnjxqyDx7wMJF\
oXxWmicWVMGc6aqRRVYACUf3iaLbJd5038SMbHU/Gf+c2KgGbergvznE/PZSyTewJJMPQTehaT1pWaVLFDWfLwIDAQABAoGAWD1/\
3yqtAf5h2yDMEv/2Ngd8HdywP8wu/NKYSs3dVFWMiQOCGKtuAHPE1WevoJy0EFxAbZ7WwH9HfiBSBdEv/ouidlw6jPqkB3PxxVLE\
VSmhTIJvs/jqFNfPu4Luf++29WWe3F5wcGlNvPbVjbjtkgpwZBIz/G3ekBuSrSE2hxkCQQD22YFREJ0Qcv/qrBuP3xZzOUnx5xJi\
S5MhjG8C7+5XprEM2jTgT0swhgIHs8j0W0zWzmdnCP+RSYqWvkXM4/1NAkEA5rHSHiKBSlzzMxL4FOhnNVo3HNthUmsDNIdaVLGS\
C2pPb2T8Av/KrR520rDaJCiB/ONdRdyZGcCV8HVHCjXAawJAaDLH84AfzKG+hUDBIan5wAmevQ3dJMDiCndNJOBCq50hf1tclpLi\
Gkl28eliGkOv27ykyUlzF9EDPz5yGFrkwQJAIXY1hg13N3QYCpZ7yXyUS9bUG6luimffRSVE4vgGuQUolH3PWBgGK+o5TgI9AfWm\
NSo9gz6mLmgS15gLP93gFQJBAOV/v06zR+1d8sejWvMDu1WdiRGbu0OrChwYQfojV+9PW/9dL2QmYTSXKlHDyVnn+Q9FE/Oa3HIS\
3VF/aXSjLG8=";

/// `sha256WithRSAEncryption`, which rcgen writes for an RSA key, and `sha1WithRSAEncryption`,
/// which a SHA-1 signature is labelled with: OIDs of the same length, so one replaces the
/// other in place.
const SHA256_WITH_RSA: [u8; 11] = [
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b,
];
const SHA1_WITH_RSA: [u8; 11] = [
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05,
];
/// The DER `DigestInfo` prefix of a SHA-1 digest (RFC 8017 9.2, note 1).
const SHA1_DIGEST_INFO: [u8; 15] = [
    0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14,
];

impl TestKey {
    fn new(kind: IssuerKey) -> Result<Self, rcgen::Error> {
        let private_key = match kind {
            IssuerKey::P384 => {
                return Ok(Self::Ec(KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384)?));
            }
            IssuerKey::Rsa1024Sha1 => {
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, RSA_1024)
                    .map_err(|_| rcgen::Error::CouldNotParseKeyPair)?
            }
            IssuerKey::Rsa2048Sha1 => {
                use aws_lc_rs::encoding::AsDer;
                let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
                    .map_err(|_| rcgen::Error::KeyGenerationUnavailable)?;
                let pkcs8 = key.as_der().map_err(|_| rcgen::Error::RingUnspecified)?;
                // PrivateKeyInfo: version, algorithm, then the RSAPrivateKey in an OCTET STRING.
                let info = der_items(der_read(pkcs8.as_ref())?.1)?;
                info.get(2)
                    .ok_or(rcgen::Error::CouldNotParseKeyPair)?
                    .to_vec()
            }
        };
        // RSAPrivateKey: version, n, e, d, ...
        let fields = der_items(der_read(&private_key)?.1)?;
        let [_, n, e, d, ..] = fields.as_slice() else {
            return Err(rcgen::Error::CouldNotParseKeyPair);
        };
        let public = der(0x30, &[der(0x02, n), der(0x02, e)].concat());
        Ok(Self::RsaSha1 {
            public,
            modulus: BigUint::from_bytes_be(n),
            private_exponent: BigUint::from_bytes_be(d),
        })
    }
}

impl TestKey {
    /// The certificate this key signed, as it must read: an RSA SHA-1 signature relabelled in
    /// the TBSCertificate's signature field and the Certificate's signatureAlgorithm.
    fn finish(&self, der: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        match self {
            Self::Ec(_) => Ok(der.to_vec()),
            Self::RsaSha1 { .. } => relabel(der, 2),
        }
    }
}

impl PublicKeyData for TestKey {
    fn der_bytes(&self) -> &[u8] {
        match self {
            Self::Ec(key) => key.der_bytes(),
            Self::RsaSha1 { public, .. } => public,
        }
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        match self {
            Self::Ec(key) => key.algorithm(),
            // Names the key rsaEncryption; the signature's label is put right in `finish`.
            Self::RsaSha1 { .. } => &PKCS_RSA_SHA256,
        }
    }
}

impl SigningKey for TestKey {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let (modulus, private_exponent) = match self {
            Self::Ec(key) => return key.sign(msg),
            Self::RsaSha1 {
                modulus,
                private_exponent,
                ..
            } => (modulus, private_exponent),
        };
        // What is signed is the TBSCertificate as it will read once relabelled SHA-1.
        let relabelled = relabel(msg, 1)?;
        let digest =
            aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &relabelled);
        let size = modulus.bits().div_ceil(8) as usize;
        let info = [&SHA1_DIGEST_INFO[..], digest.as_ref()].concat();
        let padding = size
            .checked_sub(info.len() + 3)
            .ok_or(rcgen::Error::RingUnspecified)?;
        let encoded = [&[0x00, 0x01][..], &vec![0xff; padding], &[0x00], &info].concat();
        let signature = BigUint::from_bytes_be(&encoded)
            .modpow(private_exponent, modulus)
            .to_bytes_be();
        Ok([vec![0; size - signature.len()], signature].concat())
    }
}

/// `der` with its `count` sha256WithRSAEncryption labels made sha1WithRSAEncryption.
fn relabel(der: &[u8], count: usize) -> Result<Vec<u8>, rcgen::Error> {
    let mut out = der.to_vec();
    let at: Vec<usize> = out
        .windows(SHA256_WITH_RSA.len())
        .enumerate()
        .filter_map(|(at, w)| (w == SHA256_WITH_RSA).then_some(at))
        .collect();
    if at.len() != count {
        return Err(rcgen::Error::UnsupportedSignatureAlgorithm);
    }
    for at in at {
        out[at..at + SHA1_WITH_RSA.len()].copy_from_slice(&SHA1_WITH_RSA);
    }
    Ok(out)
}

/// One DER element: its tag, its contents, and what follows it.
fn der_read(input: &[u8]) -> Result<(u8, &[u8], &[u8]), rcgen::Error> {
    let bad = rcgen::Error::CouldNotParseKeyPair;
    let (&tag, rest) = input.split_first().ok_or(bad.clone())?;
    let (&first, rest) = rest.split_first().ok_or(bad.clone())?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let octets = usize::from(first & 0x7f);
            let (len, rest) = rest.split_at_checked(octets).ok_or(bad.clone())?;
            (len.iter().fold(0, |n, &b| (n << 8) | usize::from(b)), rest)
        }
        _ => return Err(bad),
    };
    let (contents, rest) = rest.split_at_checked(len).ok_or(bad)?;
    Ok((tag, contents, rest))
}

/// The contents of each element of a DER sequence's contents.
fn der_items(mut input: &[u8]) -> Result<Vec<&[u8]>, rcgen::Error> {
    let mut items = Vec::new();
    while !input.is_empty() {
        let (_, contents, rest) = der_read(input)?;
        items.push(contents);
        input = rest;
    }
    Ok(items)
}

/// A DER element of `tag` holding `contents` (an INTEGER's contents kept as read).
fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
    let len = contents.len();
    let mut out = vec![tag];
    match len {
        0..0x80 => out.push(len as u8),
        0x80..0x100 => out.extend([0x81, len as u8]),
        _ => out.extend([0x82, (len >> 8) as u8, len as u8]),
    }
    out.extend_from_slice(contents);
    out
}
