//! Image Updater configuration: annotations, ImageUpdater objects, and the migration between them.

pub mod annotations;
pub mod imageupdater;
pub mod migration;
