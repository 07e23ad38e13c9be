//! The work of one invocation: the orchestration, the registry facts it asks once, which Applications it concerns, and what it announces.

pub mod announce;
pub mod facts;
pub mod handler;
pub mod listing;
