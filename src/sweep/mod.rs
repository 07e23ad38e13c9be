//! The reconcile sweep of a large fleet, fanned out: [`shard`] groups the Applications a
//! sweep found into shards and reads them back from the queue (pure); [`queue`] sends them.

pub(crate) mod queue;
pub mod shard;
