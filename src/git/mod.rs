//! Git write-back: the hosts behind one trait ([`githost`]) and opening the repository a
//! change goes to ([`hosts`]), their credentials ([`gitcreds`]), where a change is committed
//! and the file's new text ([`gitwrite`]), the read before deciding and the conditional
//! commit ([`commit`]), editing the YAML in place ([`yamledit`]) and reading it back as Helm
//! does ([`readback`]); the Application manifest a chart's version is committed to
//! ([`appmanifest`]) and the branch it is committed on, the charts' write-back there
//! ([`manifests`]).

pub(crate) mod appmanifest;
pub(crate) mod codecommit;
pub(crate) mod commit;
pub mod gitcreds;
pub(crate) mod githost;
pub(crate) mod github;
pub(crate) mod gitlab;
pub(crate) mod gitwrite;
pub(crate) mod hosts;
pub(crate) mod manifests;
pub(crate) mod readback;
pub(crate) mod repourl;
pub(crate) mod yamledit;
