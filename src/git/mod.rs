//! Git write-back: the hosts behind one trait, their credentials, where a change is committed, editing the YAML in place, and reading it back as Helm does.

pub(crate) mod codecommit;
pub mod gitcreds;
pub(crate) mod githost;
pub(crate) mod github;
pub(crate) mod gitlab;
pub(crate) mod gitwrite;
pub(crate) mod readback;
pub(crate) mod repourl;
pub(crate) mod yamledit;
