//! The Argo CD Application as the rest of the crate reads it: typed once (`app`), who it is
//! and where each image lives in it. Below the decision, the patch and the Git write-back,
//! which all read it the same way; it reads only the configuration (`appconfig`) and the tag
//! model (`policy`).

pub mod app;
pub mod audit;
pub(crate) mod failures;
pub(crate) mod identity;
pub(crate) mod remembered;
pub(crate) mod rollbacks;
pub mod rolled_back;
pub(crate) mod soak_chains;
pub(crate) mod sources;
pub(crate) mod view;
