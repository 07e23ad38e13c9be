//! The reconcile sweep of a large fleet, fanned out: [`gather`], what the coordinator keeps
//! of what it lists and whether it decides the sweep itself (pure); [`shard`] groups the
//! Applications into shards and reads a shard message back, once, bounded (pure); [`queue`]
//! sends them; [`run`] runs a sweep over these parts (the coordinator, and a batch of shards
//! and rollout checks), asking the pipeline, behind [`applications::Applications`], to process
//! the Applications it names.

pub(crate) mod applications;
pub(crate) mod gather;
pub mod queue;
pub(crate) mod run;
pub mod shard;
