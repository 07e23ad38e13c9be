//! Where each image of one Application stands, for a person (`argocd-ecr-updater-cli
//! status`): what the spec asks for and whether it runs, our last write of it and how its
//! rollout stands, where its promotion stands against its upstream (judged exactly as the
//! function would, from the upstream as read), and what holds it back: a freeze,
//! hold-on-failure, images auto-rollback took back (pure).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::appconfig::annotations::{AppConfig, FAILED_ROLLOUTS_ANNOTATION, ImageConfig};
use crate::application::app::Application;
use crate::application::rolled_back::RolledBack;
use crate::decision::controls::{self, Hold};
use crate::decision::promotion::{self, Judged, Place};

/// One Application's images.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    /// `namespace/name`.
    pub application: String,
    pub health: Option<String>,
    pub images: Vec<ImageStanding>,
}

/// One image.
#[derive(Debug, Clone, Serialize)]
pub struct ImageStanding {
    pub alias: Option<String>,
    pub image: String,
    /// Why its configuration does not read, when it does not: the function fails every
    /// decision of it with this until it is fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The values the spec asks for (one per source that carries the image).
    pub asks_for: Vec<String>,
    /// Whether Argo CD sees a Pod running one of them (`status.summary.images`).
    pub running: bool,
    pub last_write: Option<WriteStanding>,
    pub promotion: Option<PromotionStanding>,
    /// What keeps the next write of it back now, each with how it is released.
    pub blocked_by: Vec<String>,
    /// The images auto-rollback took back, never written again until a person deletes them.
    pub rolled_back: Vec<RolledBack>,
}

/// Our last write of the image and its rollout.
#[derive(Debug, Clone, Serialize)]
pub struct WriteStanding {
    pub to: String,
    pub at: String,
    /// `followed` (not ended yet), `not followed (a pull request)`, or how it ended:
    /// `confirmed`, `failed`, `timed-out`, …
    pub rollout: String,
    /// When it was seen live and its alarm window began, while it is verified.
    pub live_since: Option<String>,
    pub commit: Option<String>,
}

/// Where the promotion from its upstream stands.
#[derive(Debug, Clone, Serialize)]
pub struct PromotionStanding {
    /// `cluster/namespace/application`.
    pub from: String,
    /// `ready`, `soaking`, `unhealthy`, `waiting`, `unread` (the upstream could not be read
    /// now) or `refused`.
    pub state: &'static str,
    /// What the upstream verified, and when.
    pub verified: Option<String>,
    pub verified_at: Option<String>,
    /// promote-after left, while soaking.
    pub soak_left: Option<String>,
    pub reason: String,
}

/// The standing of `app`'s images configured by `config`, with each upstream as read
/// (`Err`: why it could not be read), at `now`; `cluster` is where `app` lives.
pub fn standing(
    app: &Application<'_>,
    config: &AppConfig,
    cluster: &str,
    upstreams: &BTreeMap<Place, Result<Value, String>>,
    now: OffsetDateTime,
) -> Standing {
    let (namespace, name) = app.names();
    let images = config
        .images
        .iter()
        .map(|entry| match &entry.config {
            Ok(image) => image_standing(app, image, cluster, upstreams, now),
            Err(problem) => ImageStanding {
                alias: entry.alias.clone(),
                image: entry.image.to_string(),
                error: Some(format!("configuration error: {problem}")),
                asks_for: Vec::new(),
                running: false,
                last_write: None,
                promotion: None,
                blocked_by: Vec::new(),
                rolled_back: Vec::new(),
            },
        })
        .collect();
    Standing {
        application: format!("{namespace}/{name}"),
        health: app.status.health.status.clone(),
        images,
    }
}

/// The upstreams `config`'s images promote from, for the caller to read.
pub fn upstreams(config: &AppConfig, cluster: &str) -> Vec<Place> {
    let mut places: Vec<Place> = config
        .images
        .iter()
        .filter_map(|entry| entry.config.as_ref().ok())
        .filter_map(|image| promotion::settings(image).ok().flatten())
        .map(|settings| settings.from.from_cluster(cluster))
        .collect();
    places.sort_by_key(ToString::to_string);
    places.dedup();
    places
}

fn image_standing(
    app: &Application<'_>,
    image: &ImageConfig,
    cluster: &str,
    upstreams: &BTreeMap<Place, Result<Value, String>>,
    now: OffsetDateTime,
) -> ImageStanding {
    let name = image.image.to_string();
    let asks_for: Vec<String> = app
        .view
        .targets(image)
        .targets
        .iter()
        .filter_map(|t| t.current.as_ref().map(ToString::to_string))
        .collect();
    let running = app.status.summary.images.iter().any(|live| {
        asks_for.iter().any(|value| {
            live.strip_prefix(&name)
                .is_some_and(|rest| same_value(rest, value))
        })
    });
    let rolled_back = app.rolled_back().remove(&name).unwrap_or_default();
    ImageStanding {
        alias: image.alias.clone(),
        image: name.clone(),
        error: None,
        running,
        last_write: last_write(app, &name),
        promotion: promotion_standing(image, cluster, upstreams, now),
        blocked_by: blocked_by(app, image, &asks_for, &rolled_back, now),
        asks_for,
        rolled_back,
    }
}

/// Whether `rest` (what follows the image's name in a running image) is `value`: `:tag`,
/// `@digest` or `:tag@digest`.
fn same_value(rest: &str, value: &str) -> bool {
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    rest == value
        || value
            .split_once('@')
            .is_some_and(|(tag, digest)| rest == tag || rest.ends_with(digest))
}

fn stamp(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn last_write(app: &Application<'_>, image: &str) -> Option<WriteStanding> {
    let write = app.audit.as_ref()?.last_write_of(image)?;
    Some(WriteStanding {
        to: write.image.to.clone(),
        at: stamp(write.time),
        rollout: match (&write.rollout, write.pull_request) {
            (Some(ended), _) => ended.outcome.clone(),
            // Live only once merged, under another revision: no check follows it, so no
            // alarm verifies it and nothing rolls it back.
            (None, true) => "not followed (a pull request)".to_string(),
            (None, false) => "followed".to_string(),
        },
        live_since: write.verifying_since.map(stamp),
        commit: write.commit.clone(),
    })
}

fn promotion_standing(
    image: &ImageConfig,
    cluster: &str,
    upstreams: &BTreeMap<Place, Result<Value, String>>,
    now: OffsetDateTime,
) -> Option<PromotionStanding> {
    let settings = match promotion::settings(image) {
        Ok(settings) => settings?,
        Err(problem) => {
            return Some(PromotionStanding {
                from: String::new(),
                state: "refused",
                verified: None,
                verified_at: None,
                soak_left: None,
                reason: problem,
            });
        }
    };
    let place = settings.from.from_cluster(cluster);
    let mut standing = PromotionStanding {
        from: place.to_string(),
        state: "refused",
        verified: None,
        verified_at: None,
        soak_left: None,
        reason: String::new(),
    };
    let upstream = match upstreams.get(&place) {
        Some(Ok(upstream)) => upstream,
        Some(Err(why)) => {
            standing.state = "unread";
            standing.reason = why.clone();
            return Some(standing);
        }
        None => {
            standing.state = "unread";
            standing.reason = format!("{place} was not read");
            return Some(standing);
        }
    };
    let name = image.image.to_string();
    let judged = promotion::judge(
        &Application::of(upstream),
        &place,
        &name,
        settings.after,
        now,
    );
    let mut verified = |v: &promotion::Verified| {
        standing.verified = Some(v.value.clone());
        standing.verified_at = Some(stamp(v.at));
    };
    match judged {
        Judged::Ready(v) => {
            verified(&v);
            standing.state = "ready";
            standing.reason = format!(
                "verified there at {}: promoted by the next decision (a push, a sweep, a follow-up)",
                stamp(v.at)
            );
        }
        Judged::Soaking { verified: v, ripe } => {
            verified(&v);
            standing.state = "soaking";
            standing.soak_left = Some(promotion::left(now, ripe));
            standing.reason = format!("in promote-after until {}", stamp(ripe));
        }
        Judged::Unhealthy { verified: v, why } => {
            verified(&v);
            standing.state = "unhealthy";
            standing.reason = why;
        }
        Judged::Waiting(why) => {
            standing.state = "waiting";
            standing.reason = why;
        }
        Judged::Refused(why) => standing.reason = why,
    }
    Some(standing)
}

fn blocked_by(
    app: &Application<'_>,
    image: &ImageConfig,
    asks_for: &[String],
    rolled_back: &[RolledBack],
    now: OffsetDateTime,
) -> Vec<String> {
    let mut blocked = Vec::new();
    if let Some(value) = app.metadata.annotations.get(controls::FREEZE) {
        match controls::hold(&[("the Application".to_string(), value.as_str())], now) {
            Hold::Open => {}
            Hold::Frozen(reason) => blocked.push(reason),
            Hold::Unreadable(problem) => blocked.push(format!("every write held: {problem}")),
        }
    }
    let name = image.image.to_string();
    if image.hold_on_failure
        && let Some(failed) = app.failed_rollouts().get(&name)
    {
        blocked.push(format!(
            "hold-on-failure: the {} rollout of `{}` at {}; an image pushed after it, or deleting `{name}` from {FAILED_ROLLOUTS_ANNOTATION}, releases it",
            failed.outcome, failed.to, failed.at
        ));
    }
    if let Some(problem) = app.rolled_back_unreadable() {
        blocked.push(problem);
    }
    for entry in rolled_back {
        let runs = asks_for.iter().any(|value| entry.is(value, None));
        blocked.push(format!(
            "{}{}",
            entry.refusal(&name),
            if runs {
                " (the spec asks for it again)"
            } else {
                ""
            }
        ));
    }
    blocked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::{AUDIT_ANNOTATION, PREFIX, ROLLED_BACK_ANNOTATION};
    use serde_json::json;
    use time::macros::datetime;

    const IMAGE: &str = "1.dkr.ecr.ap-northeast-2.amazonaws.com/web";
    const NOW: OffsetDateTime = datetime!(2026-12-06 12:00 UTC);

    /// An Application running `web` at `tag`, with `annotations` besides its image list and
    /// our record of writing `tag` at 10:00, its rollout `outcome` at 10:30.
    fn app(name: &str, tag: &str, outcome: Option<&str>, annotations: &[(&str, &str)]) -> Value {
        let mut record = json!({"time": "2026-12-06T10:00:00Z", "eventId": "e",
            "images": [{"alias": "web", "image": IMAGE, "from": "1", "to": tag,
                "at": [{"list": "/spec/source/helm/parameters", "name": "image.tag", "value": tag}]}]});
        if let Some(outcome) = outcome {
            record["rollout"] = json!({"outcome": outcome, "at": "2026-12-06T10:30:00Z"});
        }
        let mut all = json!({format!("{PREFIX}image-list"): format!("web={IMAGE}"),
            format!("{PREFIX}web.helm.image-tag"): "image.tag",
            AUDIT_ANNOTATION: record.to_string()});
        for (key, value) in annotations {
            all[*key] = json!(value);
        }
        json!({"metadata": {"name": name, "namespace": "argocd", "annotations": all},
            "spec": {"source": {"helm": {"parameters": [{"name": "image.tag", "value": tag}]}}},
            "status": {"health": {"status": "Healthy"},
                "summary": {"images": [format!("{IMAGE}:{tag}")]}}})
    }

    fn stands(app: &Value, upstreams: &BTreeMap<Place, Result<Value, String>>) -> Standing {
        let read = Application::of(app);
        let config = AppConfig::parse(&read.metadata.annotations).unwrap();
        standing(&read, &config, "dev", upstreams, NOW)
    }

    #[test]
    fn an_image_shows_what_the_spec_asks_what_runs_and_how_our_last_write_went() {
        let standing = stands(
            &app("web-dev", "2", Some("confirmed"), &[]),
            &BTreeMap::new(),
        );
        let image = &standing.images[0];
        assert_eq!(image.asks_for, ["2"]);
        assert!(image.running);
        let write = image.last_write.as_ref().unwrap();
        assert_eq!(
            (write.to.as_str(), write.rollout.as_str()),
            ("2", "confirmed")
        );
        assert!(image.promotion.is_none());
        assert!(image.blocked_by.is_empty());
    }

    #[test]
    fn a_promoted_image_shows_its_upstreams_verification_and_the_soak_left() {
        let upstream = app("web-dev", "2", Some("confirmed"), &[]);
        let place = Place {
            cluster: "dev".into(),
            namespace: "argocd".into(),
            name: "web-dev".into(),
        };
        let promoted = [
            ("argocd-ecr-updater.io/web.promote-from", "argocd/web-dev"),
            ("argocd-ecr-updater.io/web.promote-after", "2h"),
        ];
        let downstream = app("web-staging", "1", None, &promoted);
        let read = Application::of(&downstream);
        let config = AppConfig::parse(&read.metadata.annotations).unwrap();
        assert_eq!(upstreams(&config, "dev"), std::slice::from_ref(&place));
        // (case, the upstream as read, state, reason part)
        let cases = [
            (
                "soaking",
                Ok(upstream.clone()),
                "soaking",
                "in promote-after until 2026-12-06T12:30:00Z",
            ),
            (
                "not readable",
                Err("forbidden".to_string()),
                "unread",
                "forbidden",
            ),
        ];
        for (case, read, state, part) in cases {
            let standing = stands(&downstream, &BTreeMap::from([(place.clone(), read)]));
            let promotion = standing.images[0].promotion.clone().unwrap();
            assert_eq!(promotion.state, state, "{case}: {promotion:?}");
            assert!(
                promotion.reason.contains(part),
                "{case}: {}",
                promotion.reason
            );
            if state == "soaking" {
                assert_eq!(promotion.soak_left.as_deref(), Some("30m"), "{case}");
                assert_eq!(promotion.verified.as_deref(), Some("2"), "{case}");
            }
        }
    }

    /// Probe (issue 64): "`status` with a bad annotation — does it lie?" An image whose own
    /// settings do not read (here `web.auto-rollback: sometimes`) is one the function refuses
    /// to write, with a configuration error on every decision. `status` drops it from the
    /// list without a word: the person asking where `web` stands is told the Application has
    /// no images.
    #[test]
    fn probe_an_image_whose_settings_do_not_read_is_listed_with_why_not_dropped() {
        let bad = app(
            "web-dev",
            "2",
            Some("confirmed"),
            &[("argocd-ecr-updater.io/web.auto-rollback", "sometimes")],
        );
        let read = Application::of(&bad);
        let config = AppConfig::parse(&read.metadata.annotations).unwrap();
        assert!(
            config.images[0].config.is_err(),
            "the setting does not read"
        );
        let standing = stands(&bad, &BTreeMap::new());
        assert_eq!(
            standing.images.len(),
            1,
            "the image the function refuses for a configuration error is missing from status: {standing:?}"
        );
    }

    /// Probe (issue 64): our last write went to a pull request. Such a write is never
    /// followed (no check is sent; it is live only once merged, under another revision), so
    /// its rollout never ends in the record. `status` calls it `followed`, as if a rollout
    /// check were on its way: a person waits for a confirmation (and a promotion, and an
    /// auto-rollback) that never comes.
    #[test]
    fn probe_a_write_that_went_to_a_pull_request_is_not_shown_as_followed() {
        let mut opened = app("web-prod", "2", None, &[]);
        let key = AUDIT_ANNOTATION;
        let mut record: Value =
            serde_json::from_str(opened["metadata"]["annotations"][key].as_str().unwrap()).unwrap();
        record["git"] = json!({"repository": "barun/invitation", "branch": "main",
            "commit": "0123456789abcdef0123456789abcdef01234567",
            "pullRequest": "https://github.com/barun/invitation/pull/1"});
        opened["metadata"]["annotations"][key] = json!(record.to_string());
        let standing = stands(&opened, &BTreeMap::new());
        let write = standing.images[0].last_write.clone().unwrap();
        assert_ne!(
            write.rollout, "followed",
            "a pull request's write is shown as followed: {write:?}"
        );
    }

    #[test]
    fn what_holds_an_image_back_is_listed_with_how_it_is_released() {
        let taken = json!({IMAGE: [{"to": "3", "from": "2", "at": "2026-12-06T11:00:00Z", "reason": "alarm web-5xx"}]}).to_string();
        let held = app(
            "web-dev",
            "2",
            Some("confirmed"),
            &[
                ("argocd-ecr-updater.io/freeze", "true"),
                (ROLLED_BACK_ANNOTATION, &taken),
            ],
        );
        let standing = stands(&held, &BTreeMap::new());
        let blocked = &standing.images[0].blocked_by;
        assert_eq!(blocked.len(), 2, "{blocked:?}");
        assert!(blocked[0].contains("freeze"), "{blocked:?}");
        assert!(
            blocked[1].contains("`3` was rolled back at 2026-12-06T11:00:00Z"),
            "{blocked:?}"
        );
        assert_eq!(standing.images[0].rolled_back.len(), 1);
    }
}
