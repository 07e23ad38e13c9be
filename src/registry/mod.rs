//! ECR: tags, push times, manifests and platforms; cosign signatures and their keys.

pub(crate) mod cosign;
pub mod ecr;
pub mod manifest;
pub(crate) mod provenance;
pub(crate) mod signatures;
