//! argocd-ecr-updater: roll new ECR images out through Argo CD without anything in the
//! cluster. An ECR push arrives as an EventBridge event; the function reads Argo CD Image
//! Updater's annotations, decides, and patches the Application over the EKS API, or commits
//! to its Git repository.
//!
//! # Layout
//!
//! One folder per domain, listed from the top down: a module may use the ones below it and
//! never one above it, and every path names its folder (`crate::git::gitwrite`). The order is
//! held by a test (`tests/e2e/layout.rs`) that reads every `crate::` path in `src/` and this
//! list, so the list names every top-level module.
//!
//! - [`pipeline`]: one invocation: [`pipeline::handler`] builds the warm container's
//!   [`pipeline::context`] once and dispatches; [`pipeline::listing`] finds the Applications
//!   it concerns; each is resolved once (which ImageUpdater object or annotations configure
//!   it, and its write-back method), decided image by image with what [`pipeline::facts`]
//!   asks the registry once, and written back by patch or by commit, by functions over the
//!   context; [`pipeline::announce`] sends the Kubernetes Event and the SNS message that
//!   `report/` builds.
//! - [`sweep`]: a large fleet's sweep in shards: [`sweep::gather`], what the coordinator keeps
//!   of what it lists; [`sweep::shard`] plans the shards and reads a shard message back, once
//!   (pure); [`sweep::queue`] sends them; [`sweep::run`] runs the coordinator and a batch of
//!   shards and checks, asking the pipeline to process the Applications it names
//!   ([`sweep::applications`], the seam).
//! - [`rollout`]: following a write until it is live: [`rollout::message`], the check the
//!   sweep queue brings back after a delay; [`rollout::judge`], live, failed, superseded or
//!   out of time, from the Application alone (pure); [`rollout::follow`], the first check
//!   sent and each check run.
//! - [`gates`]: what stands between a decided update and its write, one file per gate behind
//!   [`gates::Gate`], run by [`gates::run`] on facts the pipeline asks for once
//!   ([`gates::not_rolled_back`], [`gates::scan`], [`gates::managed_signing`],
//!   [`gates::built_from`], [`gates::cosign`]), run after the soak; the soak,
//!   hold-on-failure and freeze, which decide when rather than whether, are
//!   [`decision::controls`].
//! - [`git`]: [`git::hosts`], opening the repository a change goes to on its host
//!   ([`git::githost`]: [`git::github`], [`git::gitlab`], [`git::codecommit`]) with the
//!   credentials [`git::gitcreds`] scopes to [`git::repourl`]'s parsed URLs;
//!   [`git::commit`], the read before deciding and the conditional commit, the `git` method's
//!   [`apply::writeback::Writer`]; [`git::gitwrite`], where a change is committed and the
//!   file's new text; [`git::yamledit`], editing YAML in place; [`git::readback`], reading it
//!   back as Helm does; [`git::appmanifest`], the Application manifest a chart's version is
//!   committed to (pure); [`git::manifests`], the branch it is committed on, the charts'
//!   [`apply::writeback::Writer`] in Git.
//! - [`apply`]: [`apply::writeback`], the [`apply::writeback::Writer`] seam every write-back
//!   method plugs into, and the `argocd` method's guarded Application patch.
//! - [`decision`]: [`decision::decide`], per image and source, update or keep and why;
//!   [`decision::patch`], the guarded JSON patch that carries an update out;
//!   [`decision::appset`], whether an ApplicationSet keeps a write; [`decision::chart`], a
//!   Helm chart pushed to ECR: its sources, its best version, its guarded patch;
//!   [`decision::controls`], freezes, hold-on-failure, the soak and its follow-ups;
//!   [`decision::rollback`], manual rollbacks, by whom, and what they hold back;
//!   [`decision::promotion`], promotion from an upstream; [`decision::standing`], where each
//!   image stands, for a person (pure).
//! - [`registry`]: [`registry::ecr`], tags, push times and manifests; [`registry::manifest`],
//!   what they say about scans and platforms (pure); [`registry::signatures`] and
//!   [`registry::cosign`], signatures found in ECR and checked in Rust;
//!   [`registry::provenance`], the commit an image's labels name.
//! - [`cluster`]: [`cluster::connect`], one way to reach a cluster; [`cluster::kube`], the
//!   Kubernetes client; [`cluster::objects`], ImageUpdater objects per warm container;
//!   [`cluster::eks_auth`], the IAM-signed token and DescribeCluster; [`cluster::retry`],
//!   retries within the deadline.
//! - [`application`]: the Application as everything above reads it: [`application::view`],
//!   one view of it as read; [`application::identity`], its namespace and name;
//!   [`application::sources`], where each image lives and what it runs;
//!   [`application::audit`], our audit record read back; [`application::failures`],
//!   [`application::rollbacks`] and [`application::rolled_back`], the failed rollouts, manual
//!   rollbacks and images auto-rollback took back it remembers per image
//!   ([`application::remembered`]) (pure).
//! - [`appconfig`]: [`appconfig::annotations`] and [`appconfig::imageupdater`], Image
//!   Updater's configuration into one typed value; [`appconfig::charts`], our `chart-list`
//!   of Helm charts; [`appconfig::cosign_key`], the key it names; [`appconfig::migration`],
//!   annotations into an equivalent object.
//! - [`policy`]: strategies, filters and ranking of tags, Masterminds constraints, Go globs,
//!   the scan gate's limits [`policy::scan_limits`] and managed signing's statuses
//!   [`policy::signing`] (pure).
//! - [`aws`]: [`aws::sdk_env`] and [`aws::aws_http`], the SDK configuration Lambda provides and
//!   the HTTP client; [`aws::aws_error`], errors by cause; [`aws::assume_role`];
//!   [`aws::secrets`], Secrets Manager texts read once; [`aws::iam`], the IAM action of every
//!   AWS SDK call, which the template must grant.
//! - At the bottom, using one another but nothing above: [`config`], the environment read
//!   once; [`event`], the invocation payload; [`failure`], a failed operation (retryable or
//!   not) and a refused input (permanent); [`http`], clients that carry a credential;
//!   [`config::label_selector`], `APPLICATION_LABEL_SELECTOR` read as the API server reads
//!   it; [`report`], what happened and why, and every way it is told: the entries
//!   ([`report::entries`]: why a whole Application was not decided), the Kubernetes Events
//!   about an Application ([`report::events`]), the SNS message ([`report::sns`],
//!   [`report::chat`]) and the CloudWatch metrics ([`report::metrics`]); [`partition`], AWS host names in every
//!   partition; [`redact`], what may leave in a message and how much may come in;
//!   [`telemetry`], how logs are written; [`yaml`], YAML from outside read only when what its
//!   aliases expand to is bounded.
//!
//! The laptop commands (`select`, `token`, `plan`, `migrate`, `redrive`, `doctor`) are the
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

// Every folder is a module of the crate root and every path names its folder
// (`crate::git::gitwrite`). Inside a folder, what the binaries, the CLI package, the tests and
// the benchmarks use is `pub`; the rest is `pub(crate)`, so the dead-code lint sees it.
pub mod appconfig;
pub mod application;
pub(crate) mod apply;
pub mod aws;
pub mod cluster;
pub mod decision;
pub mod gates;
pub mod git;
pub mod pipeline;
pub mod registry;
pub mod rollout;
pub mod sweep;

pub mod config;
pub mod event;
pub mod failure;
pub(crate) mod http;
pub mod partition;
pub mod policy;
pub mod redact;
pub mod report;
pub mod telemetry;
pub mod yaml;
