//! Git write-back: the hosts behind one trait, their credentials, where a change is committed, editing the YAML in place, and reading it back as Helm does.

pub mod codecommit;
pub mod gitcreds;
pub mod githost;
pub mod github;
pub mod gitlab;
pub mod gitwrite;
pub mod readback;
pub mod repourl;
pub mod yamledit;
