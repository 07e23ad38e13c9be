//! The EKS API server: the Kubernetes client, ImageUpdater objects, the IAM-signed token, retries within the deadline.

pub mod connect;
pub mod eks_auth;
pub mod kube;
pub(crate) mod objects;
pub(crate) mod retry;
