//! Every rule of shared reference `eks-token.md`, each with a case that breaks it: the
//! stand-in must refuse exactly what aws-iam-authenticator and STS refuse, or the end-to-end
//! tests would prove nothing about authentication.

use std::time::{Duration, SystemTime};

use argocd_ecr_updater::cluster::eks_auth::presign_token;
use argocd_ecr_updater_standins::token::verify;
use argocd_ecr_updater_standins::{Grant, function_identity};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const CLUSTER: &str = "barun-dev";
const REGION: &str = "ap-northeast-2";

fn valid_token(at: SystemTime) -> String {
    presign_token(CLUSTER, REGION, &crate::common::function_credentials(), at).unwrap()
}

fn url_of(token: &str) -> String {
    String::from_utf8(
        URL_SAFE_NO_PAD
            .decode(&token["k8s-aws-v1.".len()..])
            .unwrap(),
    )
    .unwrap()
}

fn token_of(url: &str) -> String {
    format!("k8s-aws-v1.{}", URL_SAFE_NO_PAD.encode(url))
}

fn check(token: &str, now: SystemTime) -> Result<(), String> {
    let identities = vec![function_identity(vec![Grant::new(&["get"], "argocd")])];
    verify(token, CLUSTER, &identities, now).map(|_| ())
}

#[test]
fn a_token_from_our_signer_is_accepted() {
    let now = SystemTime::now();
    check(&valid_token(now), now).unwrap();
}

#[test]
fn each_authenticator_rule_refuses_the_token_that_breaks_it() {
    let now = SystemTime::now();
    let good = valid_token(now);
    let url = url_of(&good);
    let replace = |from: &str, to: &str| {
        assert!(url.contains(from), "{from} not in {url}");
        token_of(&url.replacen(from, to, 1))
    };
    let cases: Vec<(&str, String, SystemTime, &str)> = vec![
        (
            "too long",
            format!("{good}{}", "A".repeat(4096)),
            now,
            "longer than 4096",
        ),
        (
            "no prefix",
            good["k8s-aws-v1.".len()..].to_string(),
            now,
            "prefix",
        ),
        ("not base64url", "k8s-aws-v1.!!!".to_string(), now, "base64"),
        ("http scheme", replace("https://", "http://"), now, "scheme"),
        ("other path", replace(".com/?", ".com/x?"), now, "path"),
        (
            "extra parameter",
            token_of(&format!("{url}&X-Amz-User-Agent=aws-sdk")),
            now,
            "non-allowlisted",
        ),
        (
            "duplicate parameter",
            token_of(&format!("{url}&action=GetCallerIdentity")),
            now,
            "duplicate",
        ),
        (
            "other action",
            replace("Action=GetCallerIdentity", "Action=GetSessionToken"),
            now,
            "action",
        ),
        (
            "cluster header unsigned",
            replace("host%3Bx-k8s-aws-id", "host"),
            now,
            "x-k8s-aws-id",
        ),
        (
            "expires not integer",
            replace("X-Amz-Expires=60", "X-Amz-Expires=sixty"),
            now,
            "integer",
        ),
        (
            "expires above 900",
            replace("X-Amz-Expires=60", "X-Amz-Expires=901"),
            now,
            "900",
        ),
        (
            "bad date",
            replace("X-Amz-Date=", "X-Amz-Date=x"),
            now,
            "YYYYMMDD",
        ),
        (
            "expired",
            good.clone(),
            now + Duration::from_secs(15 * 60 + 1),
            "expired",
        ),
        (
            "future",
            good.clone(),
            now - Duration::from_secs(6 * 60),
            "future",
        ),
        (
            "host and region differ",
            replace("sts.ap-northeast-2.", "sts.us-east-1."),
            now,
            "does not match signing region",
        ),
        (
            "tampered signature",
            replace("X-Amz-Signature=", "X-Amz-Signature=0"),
            now,
            "signature does not match",
        ),
        (
            "tampered session token",
            replace("X-Amz-Security-Token=", "X-Amz-Security-Token=x"),
            now,
            "session token",
        ),
    ];
    for (name, token, at, expected) in cases {
        let error = check(&token, at).expect_err(name);
        assert!(error.contains(expected), "{name}: {error}");
    }
}

#[test]
fn a_token_signed_for_another_cluster_or_with_another_secret_fails_the_signature() {
    let now = SystemTime::now();
    let other_cluster =
        presign_token("other", REGION, &crate::common::function_credentials(), now).unwrap();
    assert!(
        check(&other_cluster, now)
            .unwrap_err()
            .contains("signature")
    );
    let creds = crate::common::function_credentials();
    let wrong_secret = aws_credential_types::Credentials::new(
        creds.access_key_id(),
        "not-the-secret",
        creds.session_token().map(str::to_string),
        None,
        "t",
    );
    let token = presign_token(CLUSTER, REGION, &wrong_secret, now).unwrap();
    assert!(check(&token, now).unwrap_err().contains("signature"));
    let stranger = aws_credential_types::Credentials::new("AKIDUNKNOWN", "s", None, None, "t");
    let token = presign_token(CLUSTER, REGION, &stranger, now).unwrap();
    assert!(
        check(&token, now)
            .unwrap_err()
            .contains("unknown access key")
    );
}
