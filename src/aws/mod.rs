//! AWS plumbing: the SDK configuration Lambda provides, the HTTP client, errors by cause, assumed roles, Secrets Manager texts read once, and the IAM action of every call.

pub(crate) mod assume_role;
pub mod aws_error;
pub(crate) mod aws_http;
pub mod iam;
pub mod sdk_env;
pub(crate) mod secrets;
