//! `ImageUpdater` objects over the network: listed once per warm container, revalidated per
//! invocation with one metadata-only list, and their status written back.
//!
//! A push must not cost a full list of every object: the parsed objects are kept, keyed by
//! each object's `uid` and `metadata.generation` (which only a spec change bumps, not our own
//! status writes), and our own annotations on it (which bump nothing). A cluster without the CRD answers 404; that is remembered for a few
//! minutes, so v0.x users pay nothing either.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex as AsyncMutex;

use crate::appconfig::imageupdater::{
    self, ConfigSource, ImageUpdaterObject, Observed, RecentUpdate,
};
use crate::cluster::kube::{AppMeta, KubeClient, KubeError, Resource};
use crate::report::{Action, Entry};

pub const IMAGE_UPDATERS: Resource = Resource {
    group_version: "argocd-image-updater.argoproj.io/v1alpha1",
    plural: imageupdater::PLURAL,
};

/// How long "the CRD is not installed" is believed before asking again.
const ABSENT_FOR: Duration = Duration::from_secs(300);
const PAGE_SIZE: u32 = 500;

pub type Objects = Arc<Vec<ImageUpdaterObject>>;

#[derive(Default)]
struct Cached {
    fingerprint: Vec<(String, i64, String)>,
    objects: Objects,
    absent_since: Option<Instant>,
}

/// The objects of each listed scope, for the warm container's life.
#[derive(Default)]
pub struct ObjectCache {
    scopes: AsyncMutex<HashMap<String, Cached>>,
}

impl ObjectCache {
    /// The objects in `namespace` (`""` for all); `requests` counts what it cost.
    pub async fn load(
        &self,
        kube: &KubeClient,
        namespace: &str,
        requests: &mut u32,
    ) -> Result<Objects, KubeError> {
        let mut scopes = self.scopes.lock().await;
        let cached = scopes.entry(namespace.to_string()).or_default();
        if cached
            .absent_since
            .is_some_and(|since| since.elapsed() < ABSENT_FOR)
        {
            return Ok(Objects::default());
        }
        *requests += 1;
        let metadata = match kube
            .list_objects(IMAGE_UPDATERS, namespace, PAGE_SIZE, true)
            .await
        {
            Ok(items) => items,
            Err(KubeError::NotFound { .. }) => {
                cached.absent_since = Some(Instant::now());
                cached.objects = Objects::default();
                cached.fingerprint.clear();
                return Ok(Objects::default());
            }
            Err(e) => return Err(e),
        };
        cached.absent_since = None;
        let fingerprint = fingerprint(&metadata);
        if fingerprint == cached.fingerprint {
            return Ok(cached.objects.clone());
        }
        *requests += 1;
        let items = kube
            .list_objects(IMAGE_UPDATERS, namespace, PAGE_SIZE, false)
            .await?;
        let objects: Vec<ImageUpdaterObject> = items
            .into_iter()
            .filter_map(
                |item| match serde_json::from_value::<ImageUpdaterObject>(item) {
                    Ok(object) => Some(object.prepared()),
                    Err(e) => {
                        // The API server validated it against the CRD; a field we cannot read
                        // means a newer CRD, which must not stop the other objects.
                        tracing::warn!(error = %e, "ImageUpdater object not understood, ignored");
                        None
                    }
                },
            )
            .collect();
        cached.fingerprint = fingerprint;
        cached.objects = Arc::new(objects);
        Ok(cached.objects.clone())
    }

    /// Keeps an object's status as we wrote it, for the next patch's history.
    async fn remember_status(&self, namespace: &str, name: &str, status: Value) {
        let mut scopes = self.scopes.lock().await;
        for cached in scopes.values_mut() {
            if let Some(object) = Arc::make_mut(&mut cached.objects)
                .iter_mut()
                .find(|o| o.metadata.namespace == namespace && o.metadata.name == name)
            {
                object.status = status.clone();
            }
        }
    }
}

/// What decides whether a cached object is still current: its `uid`, its `generation`, and
/// our own annotations on it (a scan gate), which change no generation.
fn fingerprint(metadata_items: &[Value]) -> Vec<(String, i64, String)> {
    let mut print: Vec<(String, i64, String)> = metadata_items
        .iter()
        .map(|i| {
            let ours: BTreeMap<&String, &Value> = i["metadata"]["annotations"]
                .as_object()
                .map(|a| {
                    a.iter()
                        .filter(|(k, _)| k.starts_with(crate::appconfig::annotations::OWN_PREFIX))
                        .collect()
                })
                .unwrap_or_default();
            (
                i["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                i["metadata"]["generation"].as_i64().unwrap_or_default(),
                serde_json::to_string(&ours).unwrap_or_default(),
            )
        })
        .collect();
    print.sort();
    print
}

type Key = (String, String);

fn key_of(object: &ImageUpdaterObject) -> Key {
    (
        object.metadata.namespace.clone(),
        object.metadata.name.clone(),
    )
}

/// What one invocation saw of each object: which Applications it matched (from the
/// metadata of every listed Application), and afterwards what was decided for them.
#[derive(Default)]
pub struct Tally {
    observed: std::sync::Mutex<BTreeMap<Key, Observed>>,
    /// Objects this invocation worked for: they get a status write.
    involved: std::sync::Mutex<BTreeMap<Key, Arc<ImageUpdaterObject>>>,
}

impl Tally {
    /// Counts a listed Application for the object that configures it.
    pub fn count(&self, source: &ConfigSource<'_>, meta: &AppMeta) {
        let ConfigSource::Object { object, reference } = source else {
            return;
        };
        let images = match object.spec.application_refs.get(*reference) {
            Some(r) if r.use_annotations == Some(true) => meta
                .annotations
                .get(crate::appconfig::annotations::IMAGE_LIST)
                .map_or(0, |l| l.split(',').filter(|e| !e.trim().is_empty()).count()),
            Some(r) => r.images.len(),
            None => 0,
        };
        let mut observed = lock(&self.observed);
        let entry = observed.entry(key_of(object)).or_default();
        entry.applications_matched += 1;
        entry.images_managed += images;
    }

    /// Marks an object as one this invocation works for.
    pub fn involve(&self, object: &ImageUpdaterObject) {
        lock(&self.involved)
            .entry(key_of(object))
            .or_insert_with(|| Arc::new(object.clone()));
    }

    /// Writes the status of every involved object from the invocation's entries. A status
    /// that cannot be written is logged: it informs, it decides nothing.
    pub async fn write_statuses(
        &self,
        kube: &KubeClient,
        cache: &ObjectCache,
        entries: &[Entry],
        now: &str,
        requests: &mut u32,
    ) {
        let involved: Vec<_> = lock(&self.involved).values().cloned().collect();
        for object in involved {
            let key = key_of(&object);
            let mut observed = lock(&self.observed).get(&key).cloned().unwrap_or_default();
            let mine = entries
                .iter()
                .filter(|e| e.configuring_object.as_ref() == Some(&key));
            let mut updates: BTreeMap<(String, String, String), (usize, String)> = BTreeMap::new();
            for entry in mine {
                match entry.action {
                    Action::Updated => {
                        let update_key = (
                            entry.alias.clone().unwrap_or_default(),
                            entry.image.clone(),
                            entry.to.clone().unwrap_or_default(),
                        );
                        let slot = updates
                            .entry(update_key)
                            .or_insert((0, entry.reason.clone()));
                        slot.0 += 1;
                    }
                    Action::Failed if observed.error.is_none() => {
                        observed.error = Some(format!(
                            "{}/{}: {}",
                            entry.namespace, entry.name, entry.reason
                        ));
                    }
                    _ => {}
                }
            }
            if let Some(problem) = imageupdater::invalid_patterns(&object) {
                observed.error = Some(problem);
            }
            observed.updates = updates
                .into_iter()
                .map(
                    |((alias, image, new_version), (count, message))| RecentUpdate {
                        alias,
                        image,
                        new_version,
                        applications_updated: count,
                        message,
                    },
                )
                .collect();
            let patch = imageupdater::status_patch(&object, &observed, now);
            *requests += 1;
            match kube
                .patch_status(IMAGE_UPDATERS, &key.0, &key.1, &patch)
                .await
            {
                Ok(written) => {
                    cache
                        .remember_status(&key.0, &key.1, written["status"].clone())
                        .await;
                }
                Err(e) => {
                    tracing::warn!(object = %format!("{}/{}", key.0, key.1), error = %e, "cannot write the ImageUpdater status")
                }
            }
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
