//! What ECR's answers say about an image, as plain values: where its scan stands, and the
//! platforms its manifest offers. Pure, so the decisions use them without the ECR client.

use serde::Deserialize;

use crate::appconfig::annotations::Platform;
use crate::failure::Refused;

/// Where an image's scan stands, as `DescribeImageScanFindings` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanState {
    Complete(crate::policy::scan_limits::ScanCounts),
    /// `IN_PROGRESS`, `PENDING`, … : not decided yet.
    NotYet(String),
    /// `FAILED`, `UNSUPPORTED_IMAGE`, …, or no scan at all: it will not pass by waiting.
    Failed(String),
}

/// A scan's state from ECR's `imageScanStatus` (basic scanning or Amazon Inspector) and the
/// findings' severity counts. Only a completed scan of an image still being scanned counts:
/// Inspector marks an image outside its rescan window `INACTIVE` (or
/// `SCAN_ELIGIBILITY_EXPIRED`) and closes its findings, and basic scanning answers
/// `FINDINGS_UNAVAILABLE` once its findings are gone, so their "no findings" means "no
/// longer scanned", never "clean".
pub fn scan_state(
    status: &str,
    description: &str,
    digest: &str,
    counts: crate::policy::scan_limits::ScanCounts,
) -> ScanState {
    match status {
        "COMPLETE" | "ACTIVE" => ScanState::Complete(counts),
        "IN_PROGRESS" | "PENDING" => ScanState::NotYet(format!("scan of {digest} is {status}")),
        "INACTIVE" | "SCAN_ELIGIBILITY_EXPIRED" => ScanState::Failed(format!(
            "scan of {digest}: {status}: Amazon Inspector no longer scans this image (outside its rescan duration) and has closed its findings, so they cannot show it clean; push it again, or lengthen Inspector's ECR rescan duration"
        )),
        "FINDINGS_UNAVAILABLE" => ScanState::Failed(format!(
            "scan of {digest}: FINDINGS_UNAVAILABLE: ECR no longer has this image's findings, so they cannot show it clean; scan it again (`aws ecr start-image-scan`)"
        )),
        other => ScanState::Failed(format!("scan of {digest}: {other} {description}")),
    }
}

/// What a manifest says about platforms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Platforms {
    /// An image index: the platforms it holds.
    Index(Vec<Platform>),
    /// One image manifest: its platform lives in the config blob, which the ECR API does not
    /// serve, so it cannot be checked without pulling.
    Single,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    manifests: Option<Vec<IndexEntry>>,
}

#[derive(Deserialize)]
struct IndexEntry {
    #[serde(default)]
    platform: Option<ManifestPlatform>,
}

#[derive(Deserialize)]
struct ManifestPlatform {
    os: String,
    architecture: String,
    #[serde(default)]
    variant: Option<String>,
}

/// Reads an image index or manifest. Pure, so it is tested without ECR.
pub fn parse_platforms(manifest: &str) -> Result<Platforms, Refused> {
    let parsed: Manifest = serde_json::from_str(manifest).map_err(|e| e.to_string())?;
    Ok(match parsed.manifests {
        Some(entries) => Platforms::Index(
            entries
                .into_iter()
                .filter_map(|e| e.platform)
                // Attestation manifests of buildx say `unknown/unknown`.
                .filter(|p| p.os != "unknown")
                .map(|p| Platform {
                    os: p.os,
                    arch: p.architecture,
                    variant: p.variant,
                })
                .collect(),
        ),
        None => Platforms::Single,
    })
}

/// Does an image index offer a platform the annotation allows? Image Updater's
/// `WantsPlatform` over the index's entries: an entry matches an allowed platform exactly,
/// or, where the entry names a variant, an allowed platform of the same OS and architecture
/// without one. Any one match is enough; Kubernetes picks the image for each node.
pub fn offers_any(offered: &[Platform], allowed: &[Platform]) -> bool {
    offered.iter().any(|o| {
        allowed.iter().any(|w| {
            o.os == w.os
                && o.arch == w.arch
                && (w.variant == o.variant || (o.variant.is_some() && w.variant.is_none()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn platform(os: &str, arch: &str, variant: Option<&str>) -> Platform {
        Platform {
            os: os.into(),
            arch: arch.into(),
            variant: variant.map(str::to_string),
        }
    }

    #[test]
    fn only_a_completed_scan_of_an_image_still_scanned_can_show_it_clean() {
        let clean = || crate::policy::scan_limits::ScanCounts::default();
        let cases: &[(&str, &str)] = &[
            ("COMPLETE", "complete"),
            ("ACTIVE", "complete"),
            ("IN_PROGRESS", "not yet"),
            ("PENDING", "not yet"),
            ("INACTIVE", "no longer scans this image"),
            ("SCAN_ELIGIBILITY_EXPIRED", "no longer scans this image"),
            (
                "FINDINGS_UNAVAILABLE",
                "no longer has this image's findings",
            ),
            ("FAILED", "scan of sha256:d: FAILED"),
            ("UNSUPPORTED_IMAGE", "UNSUPPORTED_IMAGE"),
        ];
        for (status, expected) in cases {
            let got = match scan_state(status, "why", "sha256:d", clean()) {
                ScanState::Complete(_) => "complete".to_string(),
                ScanState::NotYet(_) => "not yet".to_string(),
                ScanState::Failed(reason) => reason,
            };
            assert!(got.contains(expected), "{status}: {got}");
        }
    }

    #[test]
    fn an_index_lists_its_platforms_without_attestations() {
        let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
            {"digest":"sha256:a","platform":{"os":"linux","architecture":"amd64"}},
            {"digest":"sha256:b","platform":{"os":"linux","architecture":"arm64","variant":"v8"}},
            {"digest":"sha256:c","platform":{"os":"unknown","architecture":"unknown"}}]}"#;
        assert_eq!(
            parse_platforms(index).unwrap(),
            Platforms::Index(vec![
                platform("linux", "amd64", None),
                platform("linux", "arm64", Some("v8"))
            ])
        );
        assert_eq!(
            parse_platforms(r#"{"schemaVersion":2,"layers":[]}"#).unwrap(),
            Platforms::Single
        );
        assert!(parse_platforms("not json").is_err());
    }

    #[test]
    fn an_index_passes_when_any_entry_is_a_platform_the_annotation_allows() {
        let offered = [
            platform("linux", "amd64", None),
            platform("linux", "arm64", Some("v8")),
        ];
        let table: &[(&[Platform], bool)] = &[
            // a variant entry matches the allowed platform named without a variant
            (&[platform("linux", "arm64", None)], true),
            (&[platform("linux", "arm64", Some("v8"))], true),
            // one allowed platform offered is enough, as in Image Updater
            (
                &[
                    platform("linux", "amd64", None),
                    platform("linux", "arm", Some("v7")),
                ],
                true,
            ),
            (&[platform("linux", "arm", Some("v7"))], false),
            (&[platform("linux", "arm64", Some("v9"))], false),
            (&[platform("windows", "amd64", None)], false),
        ];
        for (allowed, expected) in table {
            assert_eq!(offers_any(&offered, allowed), *expected, "{allowed:?}");
        }
        // An entry without a variant does not match an allowed platform that names one.
        assert!(!offers_any(
            &[platform("linux", "arm64", None)],
            &[platform("linux", "arm64", Some("v8"))]
        ));
    }
}
