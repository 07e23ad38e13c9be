//! Image Updater configuration: annotations, ImageUpdater objects, and the migration between them;
//! our `chart-list` of Helm charts ([`charts`]).

pub mod annotations;
pub mod charts;
pub(crate) mod cosign_key;
pub(crate) mod imageupdater;
pub mod migration;
