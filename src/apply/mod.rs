//! Applying a decision: the write-back seam ([`writeback::Writer`]) that carries a plan out by
//! a guarded Application patch or by a conditional commit.

pub(crate) mod writeback;
