//! `scan-gate`: an image goes out only once ECR (basic scanning, or Amazon Inspector) has
//! scanned it, and only with findings within the limits the Application sets.
//!
//! Setting: `argocd-ecr-updater.io/<alias>.scan-gate: critical=0,high=3` (or `none`), read
//! with the image's configuration ([`crate::policy::scan_limits::ScanGate`], so a bad value is the
//! image's configuration error whether or not anything moves). Fact: ECR's findings for the
//! candidate's digest (`ecr:DescribeImageScanFindings`), never an event's own counts: anyone
//! who may invoke the function or send to its queues can write any counts.
//!
//! What asked for the decision matters here, and only here:
//! - a push waits for its scan: the scan-completed event decides the image again;
//! - a scan-completed event releases only the digest it scanned, and only if the tag still
//!   points at it (a tag re-pushed since moves on its new digest's own scan);
//! - a sweep, a follow-up or a promotion reads ECR's findings for the candidate's digest.

use async_trait::async_trait;

use crate::gates::{Candidate, Facts, Gate, Trigger, Verdict};
use crate::policy::scan_limits::{ScanGate, describe};
use crate::registry::manifest::ScanState;

pub struct Scan;

#[async_trait]
impl Gate for Scan {
    async fn judge(&self, candidate: &Candidate<'_>, facts: &dyn Facts) -> Option<Verdict> {
        let gate = candidate.image.scan_gate.as_ref()?;
        Some(match candidate.trigger {
            Trigger::Push { digest } => Verdict::Refuse(format!(
                "waiting for the scan of {} (scan-gate `{gate}`)",
                digest.unwrap_or("the pushed image")
            )),
            Trigger::Scanned { digest } => released(gate, candidate, digest, facts).await,
            Trigger::Sweep => swept(gate, candidate, facts).await,
        })
    }
}

/// A scan-completed event (or a promotion, decided as its verified digest's scan): ECR's
/// findings for the digest scanned, when the tag still points at it.
async fn released(
    gate: &ScanGate,
    candidate: &Candidate<'_>,
    scanned: Option<&str>,
    facts: &dyn Facts,
) -> Verdict {
    let label = scanned.unwrap_or("the pushed image");
    let digest = match (scanned, candidate.digest) {
        (Some(scanned), Some(now)) if scanned == now => now,
        (Some(scanned), Some(now)) => {
            return Verdict::Refuse(format!(
                "the scan of {scanned} cannot release `{}`, which now points at {now}: a scan result only releases the digest it scanned, so {now} moves on its own scan (scan-gate `{gate}`)",
                candidate.tag
            ));
        }
        _ => {
            return Verdict::Refuse(format!(
                "ECR does not say which digest `{}` points at now, so the scan of {label} cannot release it (scan-gate `{gate}`)",
                candidate.tag
            ));
        }
    };
    judged(gate, candidate, digest, facts, true).await
}

/// A sweep's candidate: ECR's findings for its digest.
async fn swept(gate: &ScanGate, candidate: &Candidate<'_>, facts: &dyn Facts) -> Verdict {
    let Some(digest) = candidate.digest else {
        return Verdict::Refuse(format!(
            "scan-gate `{gate}`: ECR named no digest for the candidate"
        ));
    };
    judged(gate, candidate, digest, facts, false).await
}

/// The verdict on ECR's findings for `digest`; `by_event` words it for a scan event, whose
/// claim of a completed scan ECR may contradict.
async fn judged(
    gate: &ScanGate,
    candidate: &Candidate<'_>,
    digest: &str,
    facts: &dyn Facts,
    by_event: bool,
) -> Verdict {
    let findings = match facts
        .scan_findings(candidate.registry, candidate.repository, digest)
        .await
    {
        Ok(findings) => findings,
        Err(failure) => return Verdict::Failed(failure),
    };
    match findings {
        ScanState::Complete(counts) => match (gate.verdict(&counts), by_event) {
            (Ok(()), true) => Verdict::Pass(format!(
                "ECR's findings for {digest} passed scan-gate `{gate}` ({})",
                describe(&counts)
            )),
            (Ok(()), false) => Verdict::Pass(format!(
                "its scan passed scan-gate `{gate}` ({})",
                describe(&counts)
            )),
            (Err(refused), true) => Verdict::Refuse(format!("{} ({digest})", refused.0)),
            (Err(refused), false) => Verdict::Refuse(refused.0),
        },
        ScanState::NotYet(why) | ScanState::Failed(why) if by_event => Verdict::Refuse(format!(
            "scan-gate `{gate}`: the event says the scan completed, but ECR says: {why}"
        )),
        ScanState::NotYet(why) | ScanState::Failed(why) => {
            Verdict::Refuse(format!("scan-gate `{gate}`: {why}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;
    use crate::gates::answers::{Answers, candidate, said};

    const SCANNED: &str = "sha256:aaaa";
    const MOVED: &str = "sha256:bbbb";

    fn configured(gate: Option<&str>) -> crate::appconfig::annotations::AppConfig {
        let mut annotations = std::collections::BTreeMap::from([(
            "argocd-image-updater.argoproj.io/image-list".to_string(),
            "app=1.dkr.ecr.r.amazonaws.com/web".to_string(),
        )]);
        if let Some(gate) = gate {
            annotations.insert("argocd-ecr-updater.io/app.scan-gate".into(), gate.into());
        }
        crate::appconfig::annotations::AppConfig::parse(&annotations).unwrap()
    }

    fn clean() -> Result<ScanState, Failure> {
        Ok(ScanState::Complete(Default::default()))
    }

    fn critical() -> Result<ScanState, Failure> {
        Ok(ScanState::Complete([("CRITICAL".to_string(), 7)].into()))
    }

    fn scanning() -> Result<ScanState, Failure> {
        Ok(ScanState::NotYet(
            "scan of sha256:aaaa is IN_PROGRESS".into(),
        ))
    }

    #[tokio::test]
    async fn the_scan_gate_releases_an_image_only_on_ecrs_findings_for_the_digest_it_scanned() {
        // (case, gate, what asked, where the tag points now, ECR's findings, verdict part,
        // whether ECR's findings were asked for)
        #[allow(clippy::type_complexity)]
        let table: &[(
            &str,
            Option<&str>,
            Trigger<'_>,
            Option<&str>,
            Result<ScanState, Failure>,
            &str,
            bool,
        )] = &[
            (
                "an ungated image is not the gate's business",
                None,
                Trigger::Scanned {
                    digest: Some(SCANNED),
                },
                Some(SCANNED),
                clean(),
                "not asked",
                false,
            ),
            (
                "a gated push waits for its scan",
                Some("critical=0"),
                Trigger::Push {
                    digest: Some(SCANNED),
                },
                Some(SCANNED),
                clean(),
                "refuse: waiting for the scan of sha256:aaaa (scan-gate `critical=0`)",
                false,
            ),
            (
                "a clean scan releases",
                Some("critical=0"),
                Trigger::Scanned {
                    digest: Some(SCANNED),
                },
                Some(SCANNED),
                clean(),
                "pass: ECR's findings for sha256:aaaa passed scan-gate `critical=0` (no findings)",
                true,
            ),
            (
                "ECR's criticals hold it, whatever the event counted",
                Some("critical=0"),
                Trigger::Scanned {
                    digest: Some(SCANNED),
                },
                Some(SCANNED),
                critical(),
                "refuse: the scan found more than scan-gate `critical=0` allows: critical 7 > 0 (sha256:aaaa)",
                true,
            ),
            (
                "a scan ECR has not finished holds it",
                Some("critical=0"),
                Trigger::Scanned {
                    digest: Some(SCANNED),
                },
                Some(SCANNED),
                scanning(),
                "refuse: scan-gate `critical=0`: the event says the scan completed, but ECR says: scan of sha256:aaaa is IN_PROGRESS",
                true,
            ),
            (
                "a tag moved since the scan is held",
                Some("critical=0"),
                Trigger::Scanned {
                    digest: Some(SCANNED),
                },
                Some(MOVED),
                clean(),
                "only releases the digest it scanned, so sha256:bbbb moves on its own scan",
                false,
            ),
            (
                "a tag ECR names no digest for is held",
                Some("critical=0"),
                Trigger::Scanned {
                    digest: Some(SCANNED),
                },
                None,
                clean(),
                "refuse: ECR does not say which digest `1.4.0` points at now, so the scan of sha256:aaaa cannot release it",
                false,
            ),
            (
                "a sweep's candidate passes on ECR's findings",
                Some("critical=0"),
                Trigger::Sweep,
                Some(SCANNED),
                clean(),
                "pass: its scan passed scan-gate `critical=0` (no findings)",
                true,
            ),
            (
                "a sweep's candidate over the limits is refused",
                Some("critical=0"),
                Trigger::Sweep,
                Some(SCANNED),
                critical(),
                "refuse: the scan found more than scan-gate `critical=0` allows: critical 7 > 0",
                true,
            ),
            (
                "a sweep's candidate not scanned yet is refused",
                Some("critical=0"),
                Trigger::Sweep,
                Some(SCANNED),
                scanning(),
                "refuse: scan-gate `critical=0`: scan of sha256:aaaa is IN_PROGRESS",
                true,
            ),
            (
                "a sweep's candidate without a digest is refused",
                Some("critical=0"),
                Trigger::Sweep,
                None,
                clean(),
                "refuse: scan-gate `critical=0`: ECR named no digest for the candidate",
                false,
            ),
            (
                "ECR unreadable fails the decision, retryably",
                Some("critical=0"),
                Trigger::Sweep,
                Some(SCANNED),
                Err(Failure::new("ECR throttled", true)),
                "failed: ECR throttled (retryable true)",
                true,
            ),
        ];
        for (case_name, gate, trigger, now, findings, expected, asked) in table {
            let config = configured(*gate);
            let image = config.images[0].config.as_ref().unwrap();
            let mut candidate = candidate(image, *now);
            candidate.trigger = *trigger;
            let answers = Answers {
                scan: findings.clone(),
                ..Answers::default()
            };
            let verdict = said(Scan.judge(&candidate, &answers).await);
            assert!(
                verdict.contains(expected),
                "{case_name}: `{verdict}` lacks `{expected}`"
            );
            assert_eq!(answers.scans_asked(), usize::from(*asked), "{case_name}");
        }
    }
}
