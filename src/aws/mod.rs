//! AWS plumbing: the SDK configuration Lambda provides, the HTTP client, errors by cause, assumed roles, Secrets Manager texts read once, and the IAM action of every call.

pub mod assume_role;
pub mod aws_error;
pub mod aws_http;
pub mod iam;
pub mod sdk_env;
pub mod secrets;
