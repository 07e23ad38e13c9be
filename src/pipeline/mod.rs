//! The work of one invocation: the orchestration ([`handler`]), which Applications it
//! concerns ([`listing`]), each Application resolved once, decided and written back (its
//! Helm charts too, [`chart`]), the
//! registry facts asked once ([`facts`]), what it announces ([`announce`]), each write
//! followed until it is live ([`confirm`]), and a large fleet's sweep sent out in shards and
//! run shard by shard ([`sweep`]).

pub(crate) mod announce;
mod application;
mod chart;
mod confirm;
pub(crate) mod facts;
mod git_attempt;
pub mod handler;
mod image;
pub(crate) mod listing;
mod sweep;
