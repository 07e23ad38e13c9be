//! argocd-ecr-updater: roll new ECR images out through Argo CD without anything in the
//! cluster. An ECR push arrives as an EventBridge event; the function reads Argo CD Image
//! Updater's annotations, decides, and patches the Application over the EKS API, or commits
//! to its Git repository.
//!
//! # Layout
//!
//! One private folder per domain; dependencies point down this list. Inside the crate each
//! module is reachable at the root (`crate::kube`, `crate::gitwrite`…); outside it, only what
//! the binaries, the CLI, the tests and the benchmarks use is re-exported.
//!
//! - [`pipeline`]: one invocation: [`handler`] orchestrates; [`listing`] finds the
//!   Applications it concerns; each is resolved once (which ImageUpdater object or annotations
//!   configure it, and its write-back method), decided image by image with what [`facts`]
//!   asks the registry once, and written back by patch or by commit; [`announce`] sends the
//!   Kubernetes Event and the SNS report.
//! - [`apply`]: [`writeback`], the [`writeback::Writer`] seam (the Application patch, or
//!   the git snapshot read and conditional commit); [`patch`], where an image lives and the guarded
//!   JSON patch (pure).
//! - [`git`]: [`githost`] and its hosts [`github`], [`gitlab`], [`codecommit`]; [`gitcreds`],
//!   credentials scoped by [`repourl`]'s parsed URLs; [`gitwrite`], where a change is committed
//!   and the file's new text; [`yamledit`], editing YAML in place (pure).
//! - [`decision`]: [`decide`], per image and source, update or keep and why; [`appset`],
//!   whether an ApplicationSet keeps a write (pure).
//! - [`registry`]: [`ecr`], tags, push times and manifests; `manifest`, what they say about
//!   scans and platforms (pure); [`signatures`] and [`cosign`], signatures found in ECR and
//!   checked in Rust.
//! - [`cluster`]: [`kube`], the Kubernetes client; [`objects`], ImageUpdater objects per warm
//!   container; [`eks_auth`], the IAM-signed token and DescribeCluster; [`retry`], retries
//!   within the deadline.
//! - [`appconfig`]: [`annotations`] and [`imageupdater`], Image Updater's configuration into
//!   one typed value; [`migration`], annotations into an equivalent object.
//! - [`policy`]: strategies, filters and ranking of tags, Masterminds constraints, Go globs,
//!   and the scan [`gates`] (pure).
//! - [`aws`]: [`sdk_env`] and [`aws_http`], the SDK configuration Lambda provides and the
//!   HTTP client; [`aws_error`], errors by cause; [`assume_role`]; [`secrets`], Secrets
//!   Manager texts read once; [`iam`], the IAM action of every AWS SDK call, which the
//!   template must grant.
//! - At the bottom: [`event`], the invocation payload; [`config`], the environment read once;
//!   [`failure`], a failed operation (retryable or not) and a refused input (permanent);
//!   [`report`] and [`metrics`], what happened and why; [`redact`], what may leave in a
//!   message and how much may come in; [`http`], clients that carry a credential;
//!   [`label_selector`], `APPLICATION_LABEL_SELECTOR` read as the API server reads it;
//!   [`partition`], AWS host names in every partition; [`telemetry`], how logs are written.
//!
//! The laptop commands (`select`, `token`, `plan`, `migrate`, `redrive`) are the
//! `argocd-ecr-updater-cli` package (`cli/`), built on this crate.

// The module map above is for contributors, who read it with `cargo doc
// --document-private-items`: its links to the private domain folders resolve there.
#![allow(rustdoc::private_intra_doc_links)]

/// The version and the git commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("GIT_COMMIT"),
    ")"
);

// Domain folders are private: what the binaries, the CLI package, the tests and the
// benchmarks use is re-exported below, and everything else is the crate's own, so the
// dead-code lint sees it.
mod appconfig;
mod apply;
mod aws;
mod cluster;
mod decision;
mod git;
mod pipeline;
mod registry;
mod sweep;

pub mod config;
pub mod event;
pub mod failure;
mod http;
pub mod label_selector;
pub mod metrics;
pub mod partition;
pub mod policy;
pub mod redact;
pub mod report;
pub mod telemetry;

pub use appconfig::{annotations, migration};
pub use aws::{aws_error, iam, sdk_env};
pub use cluster::{eks_auth, kube};
pub use git::gitcreds::credentials_secret_kind;
pub use pipeline::handler;
pub use registry::ecr;
pub use sweep::shard;

// The crate's own paths to the rest (`crate::gitwrite`…), one per module.
use appconfig::imageupdater;
use apply::{patch, writeback};
use aws::{assume_role, aws_http, secrets};
use cluster::{objects, retry};
use decision::{appset, decide};
use git::{codecommit, gitcreds, githost, github, gitlab, gitwrite, repourl, yamledit};
use pipeline::{announce, facts, listing};
use policy::gates;
use registry::{cosign, signatures};
