//! Applying a decision: the write-back seam and the guarded Application patch.

pub mod patch;
pub mod writeback;
