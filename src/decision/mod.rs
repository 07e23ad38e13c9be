//! Pure decisions: per image and source, update or keep and why; whether an ApplicationSet keeps a write.

pub mod appset;
pub mod decide;
