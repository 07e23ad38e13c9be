//! The end-to-end tests, in one binary: the real code against the local stand-ins for AWS,
//! the EKS API server, the Git hosts and the Lambda Runtime API, over real HTTP and TLS. One
//! module per area; one binary links the crate once instead of once per file.

mod alarms;
mod auto_rollback;
mod aws_errors;
mod charts;
mod clusters;
mod common;
mod configs;
mod controls;
mod ecr_api;
mod fault_matrix;
mod fuzz_inputs;
mod gates;
mod git;
mod git_hosts;
mod house_limits;
mod imageupdater;
mod kube_api;
mod kube_conformance;
mod kubectl;
mod lambda;
mod layout;
mod managed;
mod moving;
mod operations;
mod probe_house;
mod probe_managed;
mod probe_promotion;
mod probe_rollback;
mod probe_verification;
mod promotion;
mod push;
mod registries;
mod rollbacks;
mod rollout;
mod rollouts_followed;
mod rollouts_moving;
mod rollouts_verified;
mod shipping_features;
mod sweep;
mod template;
mod template_operations;
mod terraform;
mod token_rules;
