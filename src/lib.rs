//! argocd-ecr-updater: roll new ECR images out through Argo CD without anything in the
//! cluster. An ECR push arrives as an EventBridge event; the function reads Argo CD Image
//! Updater's annotations, decides, and patches the Application over the EKS API, or commits
//! to its Git repository.
//!
//! # Layout, in the order data flows through it
//!
//! - [`event`]: the invocation payload into a push, a reconcile or a skip.
//! - [`config`]: the environment, read once per cold start.
//! - [`kube`], [`objects`], [`listing`]: lists Applications metadata-only, reads one, reads
//!   its ApplicationSet, patches; `ImageUpdater` objects cached per warm container; which
//!   Applications an invocation concerns.
//! - [`annotations`], [`imageupdater`]: Image Updater's annotations, or the `ImageUpdater`
//!   object that matches an Application, into one typed configuration; [`migration`]:
//!   annotations into an equivalent `ImageUpdater` object.
//! - [`policy`]: strategies, filters and ranking of tags (pure).
//! - [`ecr`], [`facts`]: the registry facts a strategy asks for, each asked once.
//! - [`decide`]: per image and source, update or keep, and why (pure).
//! - [`patch`], [`appset`]: where an image lives and the guarded patch; whether an
//!   ApplicationSet keeps it (pure).
//! - [`writeback`]: turns a write plan into API calls, behind one trait: the Application
//!   patch, or (git) the snapshot read and the conditional commit.
//! - [`gitwrite`], [`yamledit`]: where a git write-back commits, the file laid over the
//!   Application, the file's new text (pure).
//! - [`githost`], [`github`], [`gitlab`], [`codecommit`], [`gitcreds`]: the Git hosts
//!   behind one trait (GitHub's API and App tokens, GitLab's REST API, CodeCommit through
//!   the SDK); Git credentials, scoped by [`repourl`]'s parsed repository URLs.
//! - [`redact`]: what may leave in a message (URLs without query or userinfo) and how much
//!   may come in from outside (bounded reads).
//! - [`retry`]: transient-error retries within the Lambda deadline.
//! - [`handler`]: the orchestration of the above for one invocation.
//! - [`report`], [`metrics`], [`announce`]: what happened and why, as the return value, the
//!   log lines, embedded metrics, the Kubernetes Event and the optional SNS notification.
//! - [`eks_auth`]: the IAM-signed bearer token and DescribeCluster; [`assume_role`]: a
//!   cluster's role in another account.
//! - [`aws_error`]: AWS SDK errors told by their whole cause chain; [`iam`]: the IAM
//!   action of every AWS SDK call made here, which the template must grant.
//! - [`sdk_env`], [`aws_http`]: the function's AWS SDK configuration from the variables
//!   Lambda sets, and the HTTP client (reqwest) its AWS calls go through.
//! - [`cli`]: the laptop commands `select`, `token`, `plan`, `migrate` and `redrive`, run by
//!   the `argocd-ecr-updater-cli` binary (`cli/`).

/// The version and the git commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("GIT_COMMIT"),
    ")"
);

pub mod annotations;
pub mod announce;
pub mod appset;
pub mod assume_role;
pub mod aws_error;
pub mod aws_http;
pub mod cli;
pub mod codecommit;
pub mod config;
pub mod cosign;
pub mod decide;
pub mod ecr;
pub mod eks_auth;
pub mod event;
pub mod facts;
pub mod gates;
pub mod gitcreds;
pub mod githost;
pub mod github;
pub mod gitlab;
pub mod gitwrite;
pub mod handler;
pub mod iam;
pub mod imageupdater;
pub mod kube;
pub mod listing;
pub mod metrics;
pub mod migration;
pub mod objects;
pub mod patch;
pub mod policy;
pub mod redact;
pub mod report;
pub mod repourl;
pub mod retry;
pub mod sdk_env;
pub mod signatures;
pub mod writeback;
pub mod yamledit;
