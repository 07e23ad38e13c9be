//! Host names by partition: the DNS suffix of a region (`amazonaws.com`, `amazonaws.com.cn`,
//! `amazonaws.eu`…) taken from the partition data the AWS SDK ships, so a region of a new
//! partition gets its hosts with an SDK update, not a change here.

use aws_sdk_ecr::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use futures_util::FutureExt;

/// The suffix most regions use, for a region the partition data does not know.
const COMMERCIAL: &str = "amazonaws.com";

/// The DNS suffix of `region`'s partition. ECR's endpoint rules name its API host
/// `api.ecr.<region>.<suffix>` in every partition, so the suffix is what follows the region.
pub fn dns_suffix(region: &str) -> String {
    let Ok(params) = Params::builder().region(region).build() else {
        return COMMERCIAL.to_string();
    };
    let resolved = DefaultResolver::new()
        .resolve_endpoint(&params)
        .now_or_never()
        .and_then(Result::ok);
    resolved
        .and_then(|endpoint| {
            endpoint
                .url()
                .strip_prefix(&format!("https://api.ecr.{region}."))
                .map(|suffix| suffix.trim_end_matches('/').to_string())
        })
        .filter(|suffix| !suffix.is_empty())
        .unwrap_or_else(|| COMMERCIAL.to_string())
}

/// `<account>.dkr.ecr.<region>.<suffix>`: the registry host image references name.
pub fn registry_host(account: &str, region: &str) -> String {
    format!("{account}.dkr.ecr.{region}.{}", dns_suffix(region))
}

/// The regional STS host, whose name the EKS token's presigned URL carries.
pub fn sts_host(region: &str) -> String {
    format!("sts.{region}.{}", dns_suffix(region))
}

/// CodeCommit's Git host in `region`.
pub fn codecommit_git_host(region: &str) -> String {
    format!("git-codecommit.{region}.{}", dns_suffix(region))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_gets_the_suffix_the_sdk_knows_for_it() {
        for (region, suffix) in [
            ("ap-northeast-2", "amazonaws.com"),
            ("us-gov-west-1", "amazonaws.com"),
            ("cn-north-1", "amazonaws.com.cn"),
            ("cn-northwest-1", "amazonaws.com.cn"),
            ("eusc-de-east-1", "amazonaws.eu"),
            ("us-iso-east-1", "c2s.ic.gov"),
            ("us-isob-east-1", "sc2s.sgov.gov"),
        ] {
            assert_eq!(dns_suffix(region), suffix, "{region}");
        }
    }

    #[test]
    fn a_region_the_partition_data_does_not_know_falls_back_to_the_commercial_suffix() {
        assert_eq!(dns_suffix("xx-nowhere-9"), "amazonaws.com");
        assert_eq!(dns_suffix(""), "amazonaws.com");
    }

    #[test]
    fn hosts_are_built_with_the_partition_suffix() {
        assert_eq!(
            registry_host("123456789012", "eusc-de-east-1"),
            "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu"
        );
        assert_eq!(sts_host("cn-north-1"), "sts.cn-north-1.amazonaws.com.cn");
        assert_eq!(
            codecommit_git_host("eusc-de-east-1"),
            "git-codecommit.eusc-de-east-1.amazonaws.eu"
        );
    }
}
