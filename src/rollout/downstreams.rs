//! After a rollout is verified: the Applications promoted from it (`<alias>.promote-from`
//! naming it, in any cluster the function watches) found by a metadata-only listing, and the
//! one-Application shard per image that wakes each on the sweep queue, which starts the chain
//! of follow-ups that promotes each when its promote-after ends. The
//! shard only names the downstream: its run reads the downstream and the upstream again and
//! decides from what it reads then, so a shard delivered twice, late, or forged by another
//! writer of the queue promotes nothing that is not verified.

use crate::appconfig::annotations::OWN_PREFIX;
use crate::application::audit::AuditRecord;
use crate::cluster::connect::Connection;
use crate::cluster::kube::{KubeClient, ListOptions};
use crate::decision::promotion::{self, Place, Upstream};

/// The Applications listed per page while looking for downstreams.
const PAGE_SIZE: u32 = 500;

/// Whether annotations (`here`: the cluster they were read in) promote an image from
/// `upstream`.
pub fn promotes_from(
    annotations: &std::collections::BTreeMap<String, String>,
    here: &str,
    upstream: &Place,
) -> bool {
    annotations.iter().any(|(key, value)| {
        key.strip_prefix(OWN_PREFIX).is_some_and(|setting| {
            setting == promotion::PROMOTE_FROM
                || setting.ends_with(&format!(".{}", promotion::PROMOTE_FROM))
        }) && Upstream::parse(value).is_ok_and(|u| u.from_cluster(here) == *upstream)
    })
}

/// One Application to decide again now: the sweep queue sends it as a one-Application
/// shard (holding a promotion's candidate, which starts its chain of follow-ups).
pub struct Wake {
    /// Names the wake-up after what caused it, so deliveries can be told apart.
    pub id: String,
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    /// The image a downstream is woken to promote, if that is why.
    pub promoting: Option<Promoting>,
    /// Why it is woken, for the log.
    pub what: String,
}

/// A downstream woken to promote one image.
pub struct Promoting {
    /// `<registry id>/<repository>` of the image promoted.
    pub image: String,
    /// The candidate the downstream's chain holds: `promote:<tag or digest>`.
    pub candidate: String,
}

/// The shards that wake every downstream of `upstream`, one per image `record` verified,
/// and a note per cluster where none could be looked for. Never fails the check: a
/// downstream not woken is promoted by the next sweep.
pub async fn find(
    clusters: &[Connection],
    upstream: &Place,
    record: &AuditRecord,
) -> (Vec<Wake>, Vec<String>) {
    let mut wakes = Vec::new();
    let mut notes = Vec::new();
    let id = format!(
        "promotion-{}-{}",
        upstream.name,
        record.time.unix_timestamp()
    );
    for cluster in clusters {
        let found = match cluster.client().await {
            Ok(kube) => downstreams(kube, cluster, upstream)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                notes.push(format!(
                    "downstreams in {} not looked for: {e}",
                    cluster.name()
                ));
                continue;
            }
        };
        for (namespace, name) in found {
            for image in &record.images {
                wakes.push(Wake {
                    id: id.clone(),
                    cluster: cluster.name().to_string(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    promoting: Some(Promoting {
                        image: image.image.clone(),
                        candidate: format!("{}{}", promotion::CANDIDATE_PREFIX, image.to),
                    }),
                    what: format!(
                        "promotion of {}:{} to {}/{namespace}/{name}",
                        image.image,
                        image.to,
                        cluster.name()
                    ),
                });
            }
        }
    }
    (wakes, notes)
}

/// The Applications of one cluster, in the namespaces the function watches there, that
/// promote an image from `upstream`.
async fn downstreams(
    kube: &KubeClient,
    cluster: &Connection,
    upstream: &Place,
) -> Result<Vec<(String, String)>, crate::cluster::kube::KubeError> {
    let mut found = Vec::new();
    for namespace in KubeClient::list_scopes(&cluster.config().namespaces) {
        let options = ListOptions {
            label_selector: None,
            page_size: PAGE_SIZE,
            naming: Some(&upstream.name),
        };
        let (kept, _) = kube
            .list_application_metadata(&namespace, options, |meta| {
                promotes_from(&meta.annotations, cluster.name(), upstream)
            })
            .await?;
        found.extend(kept.into_iter().map(|m| (m.namespace, m.name)));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downstream_is_found_by_any_alias_or_app_wide_setting_naming_the_upstream_where_it_is() {
        let upstream = Place {
            cluster: "dev".into(),
            namespace: "argocd".into(),
            name: "web-dev".into(),
        };
        let with = |key: &str, value: &str| {
            [(format!("{OWN_PREFIX}{key}"), value.to_string())]
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let cases = [
            (
                "an alias's setting naming it with its cluster",
                with("web.promote-from", "dev/argocd/web-dev"),
                "prod",
                true,
            ),
            (
                "an app-wide setting naming it in the same cluster",
                with("promote-from", "argocd/web-dev"),
                "dev",
                true,
            ),
            (
                "a setting without cluster read in another cluster",
                with("web.promote-from", "argocd/web-dev"),
                "prod",
                false,
            ),
            (
                "another upstream",
                with("web.promote-from", "dev/argocd/api-dev"),
                "prod",
                false,
            ),
            (
                "a setting that only ends like it",
                with("web.not-promote-from", "dev/argocd/web-dev"),
                "prod",
                false,
            ),
            (
                "a setting that does not read",
                with("web.promote-from", "web-dev"),
                "dev",
                false,
            ),
        ];
        for (case, annotations, here, want) in cases {
            assert_eq!(promotes_from(&annotations, here, &upstream), want, "{case}");
        }
    }
}
