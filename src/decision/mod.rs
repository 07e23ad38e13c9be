//! Pure decisions: per image and source, update or keep and why ([`decide`]); the guarded
//! JSON patch that carries an update out ([`patch`]); whether an ApplicationSet keeps a write
//! ([`appset`]); a Helm chart's sources, version and patch ([`chart`]); the release controls
//! (freeze, hold after a failure, who sends a soak's follow-up: [`controls`]); manual
//! rollbacks, by whom, and what they hold back ([`rollback`]); promotion from an upstream
//! Application ([`promotion`]); where each image of an Application stands, for a person
//! ([`standing`]).

pub(crate) mod appset;
pub(crate) mod chart;
pub mod controls;
pub(crate) mod decide;
pub(crate) mod patch;
pub mod promotion;
pub(crate) mod rollback;
pub mod standing;
