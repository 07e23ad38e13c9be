//! An Application as read from the API server, viewed once: who it is, its sources with
//! their types, and where each image lives, so that the decision, the patch and their gates
//! read one view instead of each walking the JSON again.

use serde_json::Value;

use crate::appconfig::annotations::ImageConfig;
use crate::application::identity::Identity;
use crate::application::sources::{self, Source, Targets};

/// The view of one Application as read. `object` stays at hand for what reads the JSON as
/// such: the guards of a patch test the lists exactly as read, and the history and audit
/// record are read from it.
#[derive(Debug, Clone)]
pub struct AppView<'a> {
    pub object: &'a Value,
    pub identity: Identity<'a>,
    sources: Vec<Source<'a>>,
}

impl<'a> AppView<'a> {
    pub fn of(object: &'a Value) -> Self {
        Self {
            object,
            identity: Identity::of(object),
            sources: sources::sources(object),
        }
    }

    /// Its sources (`spec.source`, or each of `spec.sources`), typed as Argo CD reports them.
    pub fn sources(&self) -> &[Source<'a>] {
        &self.sources
    }

    /// Where `image` is written in it, and the value each of those sources holds now.
    pub fn targets(&self, image: &ImageConfig) -> Targets<'a> {
        sources::targets_among(self.object, &self.sources, image)
    }

    /// Whether Argo CD reports it running `image` (any tag).
    pub fn runs_image(&self, image: &ImageConfig) -> bool {
        sources::runs_image(self.object, image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::{AppConfig, PREFIX};
    use argocd_ecr_updater_standins::fixtures::{Application, SEED_IMAGE};
    use std::collections::BTreeMap;

    #[test]
    fn the_view_reads_the_application_once_as_each_reader_would() {
        let app = Application::seed().build();
        let view = AppView::of(&app);
        assert_eq!(view.identity, Identity::of(&app));
        assert_eq!(view.sources().len(), sources::sources(&app).len());
        let map: BTreeMap<String, String> = [
            ("image-list", format!("app={SEED_IMAGE}")),
            ("app.helm.image-name", "image.repository".into()),
            ("app.helm.image-tag", "image.tag".into()),
        ]
        .into_iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), v))
        .collect();
        let config = AppConfig::parse(&map).unwrap();
        let image = config.images[0].config.as_ref().unwrap();
        let (viewed, direct) = (
            view.targets(image),
            sources::targets_among(&app, &sources::sources(&app), image),
        );
        assert_eq!(viewed.fallback, direct.fallback);
        let currents = |t: &Targets<'_>| -> Vec<_> {
            t.targets
                .iter()
                .map(|t| (t.index, t.current.clone()))
                .collect()
        };
        assert_eq!(currents(&viewed), currents(&direct));
        assert!(!currents(&viewed).is_empty());
        assert_eq!(view.runs_image(image), sources::runs_image(&app, image));
    }
}
