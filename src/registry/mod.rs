//! ECR: tags, push times, manifests and platforms; cosign signatures and their keys.

pub mod cosign;
pub mod ecr;
pub mod manifest;
pub mod signatures;
