//! Which Applications an invocation concerns: per watched namespace, its ImageUpdater
//! objects, then its Applications metadata-only, each resolved to the configuration that
//! applies to it. A namespace that cannot be listed is set aside for the report, never fatal
//! to the others.
//!
//! An Application that concerns the invocation is sent on as soon as its page is parsed, so
//! that reading, deciding and writing it overlap the listing of the pages after it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

use crate::appconfig::imageupdater::{self, ConfigSource, Resolution};
use crate::cluster::kube::{AppMeta, KubeClient, KubeError, ListOptions, ListPage, ListedMeta};
use crate::cluster::objects::{ObjectCache, Objects, Tally};
use crate::cluster::retry::retry_transient;
use crate::config::Config;
use crate::decision::decide::{self, Mode};
use crate::report::Stats;
use crate::report::entries;

/// An Application an invocation concerns, and how it is known before it is read.
pub(super) enum Concerned {
    /// As the listing saw it: its configuration is resolved from the labels and annotations
    /// listed, before the read (a sweep asks for its tag lists while it reads), with the
    /// listing's own resolution.
    Listed {
        meta: AppMeta,
        resolution: Option<Resolution>,
        /// What the listing found it concerned by: its images, its charts, or both.
        concerns: Concerns,
    },
    /// By name only (a shard names Applications it did not list now): resolved from the read.
    Named { namespace: String, name: String },
}

/// What of an Application an invocation concerns.
#[derive(Debug, Clone, Copy)]
pub(super) struct Concerns {
    /// Its `image-list` or ImageUpdater object.
    pub images: bool,
    /// Its `chart-list`.
    pub charts: bool,
}

impl Concerned {
    /// What the invocation concerns of it; by name only, both (the read tells).
    pub(super) fn concerns(&self) -> Concerns {
        match self {
            Self::Listed { concerns, .. } => *concerns,
            Self::Named { .. } => Concerns {
                images: true,
                charts: true,
            },
        }
    }

    pub(super) fn names(&self) -> (&str, &str) {
        match self {
            Self::Listed { meta, .. } => (&meta.namespace, &meta.name),
            Self::Named { namespace, name } => (namespace, name),
        }
    }
}

/// An Application to read, with the ImageUpdater objects of its namespace.
/// An Application the listing found concerned, with the ImageUpdater objects of its
/// namespace and which of them (or its own annotations) configures it, as resolved here.
pub struct Found {
    pub meta: AppMeta,
    pub objects: Objects,
    /// Handed on so that the read resolves nothing again while the labels and annotations
    /// it was resolved from are unchanged; `None` only if it could not be (never, in practice).
    pub resolution: Option<Resolution>,
    /// Whether its images (`image-list`, an ImageUpdater object) concern the invocation.
    pub images: bool,
    /// Whether its `chart-list` does.
    pub charts: bool,
}

impl Found {
    /// What the Application pipeline takes: the Application as listed, and its objects.
    pub(super) fn concerned(self) -> (Concerned, Objects) {
        let concerned = Concerned::Listed {
            meta: self.meta,
            resolution: self.resolution,
            concerns: Concerns {
                images: self.images,
                charts: self.charts,
            },
        };
        (concerned, self.objects)
    }
}

/// What was listed, besides the Applications sent on.
pub struct Listed {
    /// How many Applications were sent on.
    pub matched: usize,
    /// Namespaces (`""` for all) that could not be listed, with what and why.
    pub unlisted: Vec<(String, entries::Listing, KubeError)>,
    /// What each ImageUpdater object matched, for its status.
    pub tally: Tally,
    /// How many scopes were listed.
    pub scopes: usize,
}

pub async fn concerned(
    kube: &KubeClient,
    config: &Config,
    cache: &ObjectCache,
    mode: Mode<'_>,
    deadline: Option<Instant>,
    stats: &mut Stats,
    found: UnboundedSender<Found>,
) -> Listed {
    let options = ListOptions {
        label_selector: config.label_selector.as_deref(),
        page_size: config.page_size,
        naming: None,
    };
    let tally = Tally::default();
    let concern = decide::Concern::of(mode);
    let scopes = KubeClient::list_scopes(&config.namespaces);
    let mut matched = 0;
    let mut unlisted = Vec::new();
    for namespace in &scopes {
        let (objects, mut first_page) =
            match objects_and_first_page(kube, config, cache, namespace, options, stats).await {
                Ok(both) => both,
                Err(e) => {
                    unlisted.push((namespace.clone(), entries::Listing::ImageUpdaters, e));
                    continue;
                }
            };
        if let Mode::Reconcile = mode {
            objects.iter().for_each(|o| tally.involve(o));
        }
        // A retried listing starts again from the first page; what was counted or sent
        // before is not again. Only those are remembered, a handful per event.
        let handled = RefCell::new(HashSet::new());
        let sent = std::cell::Cell::new(0);
        let prefixes = imageupdater::NamePrefixes::of(&objects);
        let each = |listed: ListedMeta<'_>| {
            // An Application no ImageUpdater object can select (every one, with no object at
            // hand) is configured by its annotations, and its `image-list` alone decides:
            // asked while it is borrowed, so the Applications that do not concern the event
            // are never copied out of their page nor resolved against every object.
            let charts = concern
                .concerns_chart_list(listed.annotation(crate::appconfig::charts::CHART_LIST));
            if !prefixes.may_select(listed.name())
                && !concern.concerns_image_list(listed.image_list())
                && !charts
            {
                return;
            }
            let meta = listed.into_owned();
            let source = imageupdater::resolve(
                &objects,
                &meta.namespace,
                &meta.name,
                &meta.labels,
                &meta.annotations,
            );
            let concerned = concern.concerns(&source, &meta.annotations);
            let counted = matches!(source, ConfigSource::Object { .. });
            if !(concerned || counted || charts)
                || !handled
                    .borrow_mut()
                    .insert((meta.namespace.clone(), meta.name.clone()))
            {
                return;
            }
            tally.count(&source, &meta);
            if !(concerned || charts) {
                return;
            }
            if concerned && let ConfigSource::Object { object, .. } = &source {
                tally.involve(object);
            }
            // The receiver is dropped only once the listing is over; a failed send cannot
            // happen while this runs.
            let resolution = source.resolution(&objects);
            let found_one = Found {
                meta,
                objects: objects.clone(),
                resolution,
                images: concerned,
                charts,
            };
            if found.send(found_one).is_ok() {
                sent.set(sent.get() + 1);
            }
        };
        // Configured by its annotations alone, an Application concerns a push only if its
        // `image-list` names the pushed repository: the others are not even parsed.
        let options = ListOptions {
            naming: concern.pushed_repository().filter(|_| objects.is_empty()),
            ..options
        };
        // A retry asks for the first page again; only the first attempt has it fetched ahead.
        let listed = retry_transient(deadline, || {
            let first = first_page.take();
            kube.list_application_metadata_from(namespace, options, first, &each)
        })
        .await;
        matched += sent.get();
        match listed {
            Ok(listed) => {
                stats.list_pages += listed.pages;
                stats.applications_listed += listed.seen;
            }
            Err(e) => unlisted.push((namespace.clone(), entries::Listing::Applications, e)),
        }
    }
    Listed {
        matched,
        unlisted,
        tally,
        scopes: scopes.len(),
    }
}

/// A namespace's ImageUpdater objects (none when they are not read) and, when they are, the
/// first page of its Applications, fetched alongside: the objects decide which Applications
/// concern us, so they are needed before the first page is parsed, not before it is asked
/// for. `Err`: the objects could not be listed.
async fn objects_and_first_page(
    kube: &KubeClient,
    config: &Config,
    cache: &ObjectCache,
    namespace: &str,
    options: ListOptions<'_>,
    stats: &mut Stats,
) -> Result<(Objects, Option<Result<ListPage, KubeError>>), KubeError> {
    if !config.read_image_updaters {
        return Ok((Objects::default(), None));
    }
    let (objects, first) = futures_util::future::join(
        cache.load(kube, namespace, &mut stats.image_updater_requests),
        kube.first_application_page(namespace, options),
    )
    .await;
    Ok((objects?, Some(first)))
}
