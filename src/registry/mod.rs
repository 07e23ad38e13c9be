//! ECR: tags, push times, manifests and platforms; cosign signatures and their keys; Notation
//! signatures of ECR managed signing ([`notation`]).

pub(crate) mod blob;
pub(crate) mod cosign;
pub mod ecr;
pub(crate) mod managed_signing;
pub mod manifest;
pub(crate) mod notation;
pub(crate) mod provenance;
pub(crate) mod signatures;
