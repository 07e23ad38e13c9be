//! Which Applications an invocation concerns: per watched namespace, its ImageUpdater
//! objects, then its Applications metadata-only, each resolved to the configuration that
//! applies to it. A namespace that cannot be listed is set aside for the report, never fatal
//! to the others.

use std::time::Instant;

use crate::config::Config;
use crate::decide::{self, Mode};
use crate::imageupdater::{self, Source};
use crate::kube::{AppMeta, KubeClient, KubeError, ListOptions};
use crate::objects::{ObjectCache, Objects, Tally};
use crate::report::Stats;
use crate::retry::retry_transient;

/// What was listed.
pub struct Listed {
    /// The Applications to read, with the ImageUpdater objects of their namespace.
    pub matched: Vec<(AppMeta, Objects)>,
    /// Namespaces (`""` for all) that could not be listed, with what and why.
    pub unlisted: Vec<(String, decide::app::Listing, KubeError)>,
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
) -> Listed {
    let options = ListOptions {
        label_selector: config.label_selector.as_deref(),
        page_size: config.page_size,
    };
    let tally = Tally::default();
    let concern = decide::Concern::of(mode);
    let scopes = KubeClient::list_scopes(&config.namespaces);
    let mut matched = Vec::new();
    let mut unlisted = Vec::new();
    for namespace in &scopes {
        // The objects decide which Applications concern us, so they are needed before the
        // first page is parsed, not before it is asked for: both requests travel together.
        let (objects, mut first_page) = if config.read_image_updaters {
            let (objects, first) = futures_util::future::join(
                cache.load(kube, namespace, &mut stats.image_updater_requests),
                kube.first_application_page(namespace, options),
            )
            .await;
            match objects {
                Ok(objects) => (objects, Some(first)),
                Err(e) => {
                    unlisted.push((namespace.clone(), decide::app::Listing::ImageUpdaters, e));
                    continue;
                }
            }
        } else {
            (Objects::default(), None)
        };
        if let Mode::Reconcile = mode {
            objects.iter().for_each(|o| tally.involve(o));
        }
        let concerns = |meta: &AppMeta| {
            let source = imageupdater::resolve(&objects, &meta.namespace, &meta.name, &meta.labels);
            tally.count(&source, meta);
            let concerned = concern.concerns(&source, &meta.annotations);
            if let (true, Source::Object { object, .. }) = (concerned, &source) {
                tally.involve(object);
            }
            concerned
        };
        // A retry asks for the first page again; only the first attempt has it fetched ahead.
        let listed = retry_transient(deadline, || {
            let first = first_page.take();
            kube.list_application_metadata_from(namespace, options, first, &concerns)
        })
        .await;
        match listed {
            Ok((kept, listed)) => {
                stats.list_pages += listed.pages;
                stats.applications_listed += listed.seen;
                matched.extend(kept.into_iter().map(|meta| (meta, objects.clone())));
            }
            Err(e) => unlisted.push((namespace.clone(), decide::app::Listing::Applications, e)),
        }
    }
    Listed {
        matched,
        unlisted,
        tally,
        scopes: scopes.len(),
    }
}
