//! The seam between a sweep and the pipeline: "process these Applications", which the
//! pipeline implements for one invocation; [`crate::sweep::run`] says which Applications and
//! where, the implementation how each is listed, read, decided and written.

use std::time::Instant;

use crate::cluster::connect::Connection;
use crate::report::{ClusterFailure, Report};
use crate::sweep::gather::Kept;
use crate::sweep::shard::{Shard, Tracked};

/// "Process these Applications": what a sweep asks of the pipeline, which implements it for
/// one invocation (the registry facts it asks once are shared by every cluster and shard).
pub(crate) trait Applications {
    /// An Application as a listing found it, kept whole while the sweep may be decided here.
    type Found;
    /// What a cluster's listing learnt besides its Applications: what it could not list, and
    /// what each ImageUpdater object matched, for its status.
    type Listed;
    /// Why a cluster could not be listed, or its outcome not finished.
    type Error;

    /// The report's line for a cluster that failed, when there are several.
    fn cluster_failure(&self, cluster: &str, error: &Self::Error) -> ClusterFailure;

    /// What a shard carries of an Application found.
    fn tracked(found: Self::Found) -> Tracked;

    /// Lists `cluster` as a sweep does, keeping what it finds: whole while the cluster alone
    /// is under `fan_out_at`, by name from there on.
    async fn list(
        &self,
        cluster: &Connection,
        part: &mut Report,
        deadline: Option<Instant>,
        fan_out_at: usize,
    ) -> Result<(Self::Listed, Kept<Self::Found>), Self::Error>;

    /// Reads, decides and writes `found` in `cluster`, then finishes what `listed` says
    /// (what could not be listed, the ImageUpdater objects' status) into `part`.
    async fn decide(
        &self,
        cluster: &Connection,
        part: &mut Report,
        listed: Self::Listed,
        found: Vec<Self::Found>,
        deadline: Option<Instant>,
    ) -> Result<(), Self::Error>;

    /// Reads again, decides and writes the Applications `shard` names in `cluster`, into
    /// `part`. `Err`: the cluster could not be reached, and why.
    async fn decide_named(
        &self,
        cluster: &Connection,
        part: &mut Report,
        shard: &Shard,
        deadline: Option<Instant>,
    ) -> Result<(), String>;
}
