//! Git write-back: the hosts behind one trait, their credentials, where a change is committed, and editing the YAML in place.

pub mod codecommit;
pub mod gitcreds;
pub mod githost;
pub mod github;
pub mod gitlab;
pub mod gitwrite;
pub mod repourl;
pub mod yamledit;
