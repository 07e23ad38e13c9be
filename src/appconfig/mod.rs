//! Image Updater configuration: annotations, ImageUpdater objects, and the migration between them.

pub mod annotations;
pub(crate) mod cosign_key;
pub(crate) mod imageupdater;
pub mod migration;
