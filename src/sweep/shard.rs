//! Shards of a sweep: which Applications go together, the message that carries them, and
//! that message read back, bounded, from an SQS record. A shard names Applications only;
//! whoever runs it reads each one again and decides from what it reads then, so a shard that
//! runs twice, late, or after a newer push changes nothing a fresh sweep would not.

use serde::{Deserialize, Serialize};

use crate::event::SHARD_ACTION;

/// What an SQS message may hold: SQS's own limit, which no shard comes near.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// A shard's body stays under this, so a shard of long names still fits in one message.
const SHARD_BYTES: usize = 192 * 1024;

/// The most Applications one shard may name: a message that names more was not made here.
pub const MAX_APPLICATIONS: usize = 5_000;

/// One Application a sweep found, with what it tracks (`key`): Applications of one
/// repository go to the same shard, so its tag list is asked once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRef {
    pub namespace: String,
    pub name: String,
}

/// One shard: the message body sent to the sweep queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub action: String,
    /// The scheduled event's id: the log lines of every shard of one sweep share it.
    pub sweep: String,
    pub cluster: String,
    /// 1-based, of `shards` in the sweep.
    pub shard: u32,
    pub shards: u32,
    pub applications: Vec<AppRef>,
    /// A soak's follow-up: the image and the candidate it was sent for. The run that finds
    /// that same candidate still soaking sends the next hop; any other leaves the chain to
    /// end ([`crate::decision::controls::soak_follow_up`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakHop>,
}

/// What a soak's follow-up was sent for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoakHop {
    /// `<registry id>/<repository>` of the image held.
    pub image: String,
    /// The tag held.
    pub candidate: String,
    /// The hop's number in its chain (1 for the first; 0 in a hop sent before hops were
    /// numbered).
    #[serde(default)]
    pub hop: u32,
}

/// The shards of one sweep, cluster by cluster in the order given: each cluster's
/// Applications sorted by what they track, then cut every `size` Applications (or sooner,
/// to keep a message small).
pub fn plan(sweep: &str, clusters: Vec<(String, Vec<Tracked>)>, size: usize) -> Vec<Shard> {
    let size = size.clamp(1, MAX_APPLICATIONS);
    let mut shards = Vec::new();
    for (cluster, mut apps) in clusters {
        apps.sort_by(|a, b| (&a.key, &a.namespace, &a.name).cmp(&(&b.key, &b.namespace, &b.name)));
        apps.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
        let mut current: Vec<AppRef> = Vec::new();
        let mut bytes = 0;
        for app in apps {
            // `{"namespace":"","name":""},` around the two names.
            let cost = app.namespace.len() + app.name.len() + 27;
            if !current.is_empty() && (current.len() >= size || bytes + cost > SHARD_BYTES) {
                shards.push(shard(sweep, &cluster, std::mem::take(&mut current)));
                bytes = 0;
            }
            bytes += cost;
            current.push(AppRef {
                namespace: app.namespace,
                name: app.name,
            });
        }
        if !current.is_empty() {
            shards.push(shard(sweep, &cluster, current));
        }
    }
    let count = shards.len() as u32;
    for (n, shard) in shards.iter_mut().enumerate() {
        shard.shard = n as u32 + 1;
        shard.shards = count;
    }
    shards
}

/// A shard of one Application, sent to re-decide it later (when its soak ends, or its
/// signing completes): the same message, bounds and trust as a sweep's shard, since it is
/// one; `soak` marks a soak's hop.
pub fn follow_up(
    id: &str,
    cluster: &str,
    namespace: &str,
    name: &str,
    soak: Option<SoakHop>,
) -> Shard {
    let mut one = shard(
        id,
        cluster,
        vec![AppRef {
            namespace: namespace.into(),
            name: name.into(),
        }],
    );
    (one.shard, one.shards) = (1, 1);
    one.soak = soak;
    one
}

fn shard(sweep: &str, cluster: &str, applications: Vec<AppRef>) -> Shard {
    Shard {
        action: SHARD_ACTION.into(),
        sweep: sweep.into(),
        cluster: cluster.into(),
        shard: 0,
        shards: 0,
        applications,
        soak: None,
    }
}

/// Why a message on the sweep queue is not a shard this function can run. Permanent: the
/// same message fails the same way on every delivery, and the queue's redrive policy parks
/// it. The sweep queue takes only the function's own messages, so each is read once, here,
/// bounded, and whatever else claims to be on it (a forged push, a reconcile request) is
/// refused as not a shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error(
        "Permanent.NotAShard: the message on the sweep queue is {0} bytes, over SQS's {MAX_MESSAGE_BYTES}: it was not sent by this function"
    )]
    TooLarge(usize),
    #[error(
        "Permanent.NotAShard: the message on the sweep queue is not a shard or a rollout check ({0}); only the function itself sends to that queue"
    )]
    Malformed(String),
    #[error(
        "Permanent.NotAShard: the shard names `{namespace}/{name}`, which is not a namespace and an object name"
    )]
    BadName { namespace: String, name: String },
}

/// What the sweep queue carries: shards of a sweep, and checks of a rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueMessage {
    Shard(Shard),
    Check(crate::rollout::message::Confirmation),
}

/// A message read back from its body, bounded in size before it is parsed, once.
pub fn read(body: &str) -> Result<QueueMessage, ShardError> {
    if body.len() > MAX_MESSAGE_BYTES {
        return Err(ShardError::TooLarge(body.len()));
    }
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| ShardError::Malformed(e.to_string()))?;
    if value["action"] == crate::event::CONFIRM_ACTION {
        let check = serde_json::from_value(value)
            .map_err(|e| ShardError::Malformed(format!("a rollout check that reads wrong: {e}")))?;
        return crate::rollout::message::validate(check)
            .map(QueueMessage::Check)
            .map_err(
                |crate::rollout::message::ConfirmationError::Malformed(why)| {
                    ShardError::Malformed(format!("a rollout check that reads wrong: {why}"))
                },
            );
    }
    let shard: Shard =
        serde_json::from_value(value).map_err(|e| ShardError::Malformed(e.to_string()))?;
    validate(shard).map(QueueMessage::Shard)
}

/// A shard read back from its message body: a message that is a rollout check is not one.
pub fn parse(body: &str) -> Result<Shard, ShardError> {
    match read(body)? {
        QueueMessage::Shard(shard) => Ok(shard),
        QueueMessage::Check(_) => Err(ShardError::Malformed("it is a rollout check".into())),
    }
}

fn validate(shard: Shard) -> Result<Shard, ShardError> {
    if shard.action != SHARD_ACTION {
        return Err(ShardError::Malformed(format!(
            "its action is `{}`, not `{SHARD_ACTION}`",
            shard.action
        )));
    }
    if shard.cluster.is_empty() {
        return Err(ShardError::Malformed("it names no cluster".into()));
    }
    if shard.applications.len() > MAX_APPLICATIONS {
        return Err(ShardError::Malformed(format!(
            "it names {} Applications, over {MAX_APPLICATIONS}",
            shard.applications.len()
        )));
    }
    if let Some(bad) = shard.applications.iter().find(|a| {
        !crate::config::is_namespace(&a.namespace) || !crate::config::is_object_name(&a.name)
    }) {
        return Err(ShardError::BadName {
            namespace: crate::redact::scrub(&bad.namespace),
            name: crate::redact::scrub(&bad.name),
        });
    }
    Ok(shard)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(namespace: &str, name: &str, key: &str) -> Tracked {
        Tracked {
            namespace: namespace.into(),
            name: name.into(),
            key: key.into(),
        }
    }

    fn names(shard: &Shard) -> Vec<&str> {
        shard.applications.iter().map(|a| a.name.as_str()).collect()
    }

    #[test]
    fn applications_of_one_repository_share_a_shard() {
        let apps = vec![
            tracked("argocd", "a1", "repo-a"),
            tracked("argocd", "b1", "repo-b"),
            tracked("argocd", "a2", "repo-a"),
            tracked("argocd", "b2", "repo-b"),
        ];
        let shards = plan("sweep-1", vec![("dev".into(), apps)], 2);
        assert_eq!(shards.len(), 2);
        assert_eq!(names(&shards[0]), ["a1", "a2"]);
        assert_eq!(names(&shards[1]), ["b1", "b2"]);
        assert!(shards.iter().all(|s| s.shards == 2 && s.sweep == "sweep-1"));
        assert_eq!((shards[0].shard, shards[1].shard), (1, 2));
    }

    #[test]
    fn shards_never_mix_clusters_and_are_numbered_across_the_sweep() {
        let shards = plan(
            "s",
            vec![
                ("dev".into(), vec![tracked("argocd", "a", "r")]),
                (
                    "prod".into(),
                    vec![tracked("argocd", "a", "r"), tracked("argocd", "b", "r")],
                ),
            ],
            10,
        );
        let summary: Vec<(&str, u32, u32, usize)> = shards
            .iter()
            .map(|s| (s.cluster.as_str(), s.shard, s.shards, s.applications.len()))
            .collect();
        assert_eq!(summary, [("dev", 1, 2, 1), ("prod", 2, 2, 2)]);
    }

    #[test]
    fn a_shard_holds_at_most_its_size_and_every_application_once() {
        let apps: Vec<Tracked> = (0..1_003)
            .map(|n| tracked("argocd", &format!("app-{n}"), &format!("repo-{}", n % 7)))
            .chain([tracked("argocd", "app-5", "repo-5")])
            .collect();
        let shards = plan("s", vec![("dev".into(), apps)], 250);
        assert_eq!(shards.len(), 5);
        assert!(shards.iter().all(|s| s.applications.len() <= 250));
        let mut all: Vec<&str> = shards.iter().flat_map(names).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 1_003);
    }

    #[test]
    fn long_names_cut_a_shard_before_its_message_outgrows_sqs() {
        // 248 characters and a number: four DNS labels, the longest names Kubernetes allows.
        let long = format!("{}.", "n".repeat(61)).repeat(4);
        let apps: Vec<Tracked> = (0..2_000)
            .map(|n| tracked("argocd", &format!("{long}{n:03}"), "r"))
            .collect();
        let shards = plan("s", vec![("dev".into(), apps)], 5_000);
        assert!(shards.len() > 1);
        for shard in &shards {
            let body = serde_json::to_string(shard).unwrap();
            assert!(body.len() < MAX_MESSAGE_BYTES, "{}", body.len());
            assert_eq!(parse(&body).unwrap(), *shard);
        }
    }

    #[test]
    fn a_shard_reads_back_as_it_was_sent() {
        let shards = plan(
            "s",
            vec![("dev".into(), vec![tracked("team-a", "web", "r")])],
            5,
        );
        let body = serde_json::to_string(&shards[0]).unwrap();
        assert_eq!(parse(&body).unwrap(), shards[0]);
    }

    #[test]
    fn what_is_not_a_shard_says_why() {
        let ok = r#""sweep":"s","cluster":"dev","shard":1,"shards":1"#;
        let forged_push = r#"{"version":"0","id":"e","detail-type":"ECR Image Action","source":"aws.ecr","detail":{"action-type":"PUSH","result":"SUCCESS","repository-name":"r","image-tag":"99"}}"#;
        let destination = r#"{"requestContext":{},"requestPayload":{"action":"reconcile-shard"}}"#;
        for (body, says) in [
            ("not json", "not a shard"),
            (r#"{"action":"reconcile"}"#, "not a shard"),
            (forged_push, "unknown field `version`"),
            (destination, "unknown field `requestContext`"),
            (
                &format!(r#"{{"action":"other",{ok},"applications":[]}}"#) as &str,
                "not `reconcile-shard`",
            ),
            (
                r#"{"action":"reconcile-shard","sweep":"s","cluster":"","shard":1,"shards":1,"applications":[]}"#,
                "names no cluster",
            ),
            (
                &format!(
                    r#"{{"action":"reconcile-shard",{ok},"applications":[{{"namespace":"Bad_NS","name":"a"}}]}}"#
                ),
                "`Bad_NS/a`",
            ),
            (
                &format!(
                    r#"{{"action":"reconcile-shard",{ok},"applications":[{{"namespace":"argocd","name":"../x"}}]}}"#
                ),
                "not a namespace and an object name",
            ),
            (
                &format!(r#"{{"action":"reconcile-shard",{ok},"applications":[],"extra":1}}"#),
                "unknown field",
            ),
        ] {
            let error = parse(body).unwrap_err().to_string();
            assert!(error.contains(says), "{body}: {error}");
            assert!(error.starts_with("Permanent.NotAShard: "), "{error}");
        }
        let huge = format!(
            r#"{{"action":"reconcile-shard","pad":"{}"}}"#,
            "x".repeat(MAX_MESSAGE_BYTES)
        );
        assert!(matches!(parse(&huge), Err(ShardError::TooLarge(_))));
        // Within the byte cap, but naming more Applications than a shard ever holds.
        let many: Vec<String> = (0..=MAX_APPLICATIONS)
            .map(|n| format!(r#"{{"namespace":"a","name":"n{n}"}}"#))
            .collect();
        let crowded = format!(
            r#"{{"action":"reconcile-shard","sweep":"s","cluster":"c","shard":1,"shards":1,"applications":[{}]}}"#,
            many.join(",")
        );
        assert!(crowded.len() <= MAX_MESSAGE_BYTES, "{}", crowded.len());
        let error = parse(&crowded).unwrap_err().to_string();
        assert!(error.contains("5001 Applications, over 5000"), "{error}");
        // At the bound exactly, it is a shard.
        let at_bound = crowded.replacen(
            &format!(r#",{{"namespace":"a","name":"n{MAX_APPLICATIONS}"}}"#),
            "",
            1,
        );
        assert_eq!(
            parse(&at_bound).unwrap().applications.len(),
            MAX_APPLICATIONS
        );
    }

    #[test]
    fn a_follow_up_is_a_shard_of_one_that_reads_back_as_one() {
        let one = follow_up("soak-e", "dev", "argocd", "web", None);
        let body = serde_json::to_string(&one).unwrap();
        let read = parse(&body).unwrap();
        assert_eq!(
            (read.shard, read.shards, read.cluster.as_str()),
            (1, 1, "dev")
        );
        assert_eq!(
            read.applications,
            vec![AppRef {
                namespace: "argocd".into(),
                name: "web".into()
            }]
        );
    }

    #[test]
    fn a_soak_hop_rides_in_the_follow_up_and_a_sweeps_shard_carries_none() {
        let hop = SoakHop {
            image: "r.example/web".into(),
            candidate: "1.4.0".into(),
            hop: 2,
        };
        let one = follow_up("soak-e", "dev", "argocd", "web", Some(hop.clone()));
        let body = serde_json::to_string(&one).unwrap();
        assert_eq!(parse(&body).unwrap().soak, Some(hop));
        let plain = serde_json::to_string(&follow_up("e", "dev", "argocd", "web", None)).unwrap();
        assert!(!plain.contains("soak"), "{plain}");
        assert_eq!(parse(&plain).unwrap().soak, None);
    }
}
