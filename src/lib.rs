//! argocd-ecr-updater: roll new ECR images out through Argo CD without anything in the
//! cluster. An ECR push arrives as an EventBridge event; the function reads Argo CD Image
//! Updater's annotations, decides, and patches the Application over the EKS API.

pub mod annotations;
pub mod appset;
pub mod config;
pub mod decide;
pub mod ecr;
pub mod eks_auth;
pub mod event;
pub mod handler;
pub mod kube;
pub mod patch;
pub mod policy;
pub mod report;
pub mod retry;
pub mod select_cli;
pub mod writeback;
