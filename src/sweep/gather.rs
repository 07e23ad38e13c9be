//! What a sweep's coordinator keeps of the Applications it lists in one cluster: each
//! whole (its metadata and the ImageUpdater objects it was listed with) while the sweep may
//! still be decided in the coordinator's own invocation, only its name and what it tracks
//! once the cluster alone reaches the fan-out threshold, so a fleet of any size is kept in
//! little memory on its way into shards.

use crate::appconfig::annotations::IMAGE_LIST;
use crate::cluster::kube::AppMeta;
use crate::sweep::shard::Tracked;

/// One cluster's Applications as the coordinator keeps them.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept<T> {
    Whole(Vec<T>),
    Named(Vec<Tracked>),
}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self::Whole(Vec::new())
    }
}

impl<T> Kept<T> {
    /// `arrived` added: still whole while there are fewer than `fan_out_at`, by name from
    /// the Application that reaches it on. `tracked` says what an Application tracks.
    pub fn keep(self, arrived: T, fan_out_at: usize, tracked: impl Fn(T) -> Tracked) -> Self {
        match self {
            Self::Whole(mut whole) if whole.len() + 1 < fan_out_at => {
                whole.push(arrived);
                Self::Whole(whole)
            }
            Self::Whole(whole) => {
                let mut named: Vec<Tracked> = whole.into_iter().map(&tracked).collect();
                named.push(tracked(arrived));
                Self::Named(named)
            }
            Self::Named(mut named) => {
                named.push(tracked(arrived));
                Self::Named(named)
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::Whole(found) => found.len(),
            Self::Named(named) => named.len(),
        }
    }

    pub fn is_whole(&self) -> bool {
        matches!(self, Self::Whole(_))
    }

    /// The names, for shards.
    pub fn into_named(self, tracked: impl Fn(T) -> Tracked) -> Vec<Tracked> {
        match self {
            Self::Whole(found) => found.into_iter().map(tracked).collect(),
            Self::Named(named) => named,
        }
    }
}

/// What a listed Application tracks: its `image-list`, so that Applications of one
/// repository go to one shard and its tag list is asked once.
pub fn tracked(meta: AppMeta) -> Tracked {
    let key = meta
        .annotations
        .get(IMAGE_LIST)
        .cloned()
        .unwrap_or_default();
    Tracked {
        namespace: meta.namespace,
        name: meta.name,
        key,
    }
}

/// Whether the coordinator decides the sweep itself: every cluster kept whole and the
/// fleet, all clusters together, under the threshold. Otherwise it goes out in shards.
pub fn decided_here<T>(clusters: &[&Kept<T>], fan_out_at: usize) -> bool {
    let total: usize = clusters.iter().map(|k| k.len()).sum();
    total < fan_out_at && clusters.iter().all(|k| k.is_whole())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: usize) -> Tracked {
        Tracked {
            namespace: "argocd".into(),
            name: format!("app-{n}"),
            key: "r".into(),
        }
    }

    fn kept(count: usize, fan_out_at: usize) -> Kept<usize> {
        (0..count).fold(Kept::default(), |k, n| k.keep(n, fan_out_at, named))
    }

    #[test]
    fn applications_are_kept_whole_until_the_threshold_and_by_name_from_it_on() {
        // (listed, threshold, kept whole)
        let cases = [
            (0, 3, true),
            (2, 3, true),
            (3, 3, false),
            (10, 3, false),
            (1, 1, false),
        ];
        for (count, fan_out_at, whole) in cases {
            let k = kept(count, fan_out_at);
            assert_eq!(k.is_whole(), whole, "{count} at {fan_out_at}");
            assert_eq!(k.len(), count, "nothing is lost switching to names");
        }
        let names: Vec<String> = kept(4, 3)
            .into_named(named)
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(
            names,
            ["app-0", "app-1", "app-2", "app-3"],
            "in listing order"
        );
    }

    #[test]
    fn the_sweep_is_decided_here_only_when_the_whole_fleet_is_small_and_kept_whole() {
        let (small, also_small, large) = (kept(1, 5), kept(2, 5), kept(5, 5));
        assert!(decided_here(&[&small, &also_small], 5));
        assert!(
            !decided_here(&[&small, &also_small, &kept(2, 5)], 5),
            "5 in all"
        );
        assert!(!decided_here(&[&large], 5));
        assert!(
            decided_here::<usize>(&[], 5),
            "nothing found: nothing to send"
        );
    }

    #[test]
    fn an_application_tracks_its_image_list() {
        let mut meta = AppMeta {
            name: "web".into(),
            namespace: "argocd".into(),
            resource_version: "1".into(),
            annotations: Default::default(),
            labels: Default::default(),
            owner_references: Vec::new(),
        };
        assert_eq!(tracked(meta.clone()).key, "");
        meta.annotations
            .insert(IMAGE_LIST.into(), "web=r/web".into());
        assert_eq!(tracked(meta).key, "web=r/web");
    }
}
