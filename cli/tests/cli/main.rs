//! The laptop commands, run as the compiled CLI a user runs: one test binary (each links the
//! whole crate once), a module per command group. `cargo test -p argocd-ecr-updater-cli
//! --test cli redrive::` runs one.

mod commands;
mod doctor;
mod local_credentials;
mod managed;
mod moto;
mod probe_managed;
mod redrive;
mod select;
