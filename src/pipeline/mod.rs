//! The work of one invocation: the orchestration ([`handler`]) over the warm container's
//! [`context`]; each cluster's Applications ([`run`]): which ones it concerns ([`listing`]),
//! each resolved once ([`resolved`]), decided ([`decided`], image by image: [`image`], a
//! failed one taken back by [`auto_rollback`]) and
//! written back by patch ([`application`]) or commit ([`git_attempt`]), its Helm charts too
//! ([`chart`]), each of the two a [`change::Change`] run from read to guarded write by one
//! loop ([`change`]); the registry facts asked once ([`facts`]), and what it announces
//! ([`announce`]). The sweep's and the rollout check's run loops are at home in
//! [`crate::sweep::run`] and [`crate::rollout::follow`]; [`run::Invocation`] processes the
//! Applications a sweep names.

pub(crate) mod announce;
mod application;
mod auto_rollback;
mod change;
mod chart;
pub(crate) mod context;
mod decided;
pub mod error;
pub(crate) mod facts;
mod git_attempt;
pub mod handler;
mod image;
pub(crate) mod listing;
mod promoted;
mod pushed;
mod resolved;
mod run;
