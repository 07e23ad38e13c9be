//! The reconcile sweep of a large fleet, fanned out: [`gather`], what the coordinator keeps
//! of what it lists and whether it decides the sweep itself (pure); [`shard`] groups the
//! Applications into shards and reads a shard message back, once, bounded (pure); [`queue`]
//! sends them. Running a sweep (listing every cluster, deciding each Application) is the
//! pipeline's work, in `pipeline::sweep`, over these parts.

pub(crate) mod gather;
pub mod queue;
pub mod shard;
