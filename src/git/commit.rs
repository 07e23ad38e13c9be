//! Git write-back's reads and writes: the branch and the file read before deciding
//! ([`GitSnapshot`]), the Application as Argo CD renders it with that file, and the
//! conditional commit of the rendered file ([`GitCommit`], the `git` method's
//! [`Writer`]), on its own branch and pull request where configured.

use async_trait::async_trait;
use serde_json::Value;

use crate::appconfig::annotations::ImageConfig;
use crate::application::app::Application;
use crate::apply::writeback::{WriteError, Writer};
use crate::decision::patch::WritePlan;
use crate::failure::Failure;
use crate::git::githost::{Commit, GitHost, HostError};
use crate::git::gitwrite::{self, Change, Location};
use crate::git::hosts::Unavailable;

/// What git write-back read before deciding: the branch head and the target file at it.
#[derive(Debug, Clone)]
pub struct GitSnapshot {
    pub location: Location,
    /// The branch the decision's base was read from (the default branch resolved).
    pub base: String,
    /// The branch committed to; it exists and `head` is its head, unless `create` is set.
    pub branch: String,
    pub head: String,
    /// The file read, or the one to create.
    pub file: String,
    /// The file's text at `head`; `None` if it does not exist yet.
    pub text: Option<String>,
    /// The branch to create from `head` at commit time (a template until the changes are
    /// known): `<base>:<target>` whose target does not exist yet, or pull-request mode.
    pub create: Option<String>,
}

impl GitSnapshot {
    /// Reads the branch head and the file: 2 requests (3 for a kustomization named
    /// `kustomization.yml`, 4 for `Kustomization`).
    pub async fn read(
        host: &dyn GitHost,
        location: Location,
        pull_request: bool,
    ) -> Result<Self, WriteError> {
        Self::read_from(host, location, pull_request)
            .await
            .map_err(git_failure)
    }

    async fn read_from(
        host: &dyn GitHost,
        location: Location,
        pull_request: bool,
    ) -> Result<Self, HostError> {
        let base = match &location.branch {
            Some(branch) => branch.clone(),
            None => host.default_branch().await?,
        };
        // A fixed `<base>:<target>` that exists already is where the state lives.
        let fixed_target = location
            .write_branch
            .as_ref()
            .filter(|t| !t.contains("{{") && !pull_request);
        let mut create = None;
        let mut branch = base.clone();
        let mut head = None;
        if let Some(target) = fixed_target {
            head = host.branch_head(target).await?;
            match head {
                Some(_) => branch = target.clone(),
                None => create = Some(target.clone()),
            }
        } else if pull_request {
            create = Some(PR_BRANCH_TEMPLATE.to_string());
        } else if let Some(template) = &location.write_branch {
            create = Some(template.clone());
        }
        let head = match head {
            Some(head) => head,
            None => host.branch_head(&base).await?.ok_or_else(|| HostError::NotFound {
                what: format!("branch `{base}` of {}", host.name()),
                message: "no such branch: a tag or a deleted branch cannot be committed to; set git-branch to the branch Argo CD should follow".into(),
            })?,
        };
        let candidates = location.candidates();
        let mut found = None;
        for path in &candidates {
            if let Some(text) = host.file(path, &head).await? {
                found = Some((path.clone(), text));
                break;
            }
        }
        let (file, text) = match found {
            Some((path, text)) => (path, Some(text)),
            None => (candidates.first().cloned().unwrap_or_default(), None),
        };
        Ok(Self {
            location,
            base,
            branch,
            head,
            file,
            text,
            create,
        })
    }
}

/// What one git write-back attempt read: the branch and file, and the Application as Argo
/// CD renders it with that file, which is what is decided on.
pub struct Read {
    pub snapshot: GitSnapshot,
    pub effective: Value,
}

impl Read {
    /// Reads the branch and the file, and renders `app` as Argo CD does with it.
    pub async fn of(
        host: &dyn GitHost,
        location: Location,
        pull_request: bool,
        app: &Application<'_>,
        images: &[&ImageConfig],
    ) -> Result<Self, Unavailable> {
        let snapshot = GitSnapshot::read(host, location, pull_request)
            .await
            .map_err(|e| {
                let (_, reason, retryable) = e.as_entry();
                Unavailable { reason, retryable }
            })?;
        let file = snapshot.text.as_deref();
        match gitwrite::effective_app(app, &snapshot.location, file, images) {
            Ok(effective) => Ok(Self {
                snapshot,
                effective,
            }),
            Err(reason) => Err(Unavailable {
                reason: format!("{reason}: fix the file on branch `{}`", snapshot.branch),
                retryable: false,
            }),
        }
    }
}

/// Image Updater's pull-request branch (`PRBranchTemplate`): one branch per distinct change.
pub const PR_BRANCH_TEMPLATE: &str = "image-updater-{{.TargetKey}}-{{.SHA256}}";

/// What a git write-back did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitOutcome {
    Committed(Committed),
    /// The file already says this (a duplicate or late event): no commit.
    Unchanged {
        branch: String,
        file: String,
    },
}

/// A change that landed in Git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub commit: Commit,
    pub branch: String,
    pub file: String,
    /// The pull request's address, in pull-request mode.
    pub pull_request: Option<String>,
    /// Things that did not work but do not undo the commit (a label refused).
    pub notes: Vec<String>,
}

/// Image Updater's `git` method: one conditional commit of the rendered file.
pub struct GitCommit<'a> {
    pub host: &'a dyn GitHost,
    pub snapshot: &'a GitSnapshot,
    pub images: Vec<&'a ImageConfig>,
    /// Labels of the pull request to open, in pull-request mode.
    pub pull_request: Option<Vec<String>>,
    /// Image Updater's `TargetKey` of the write ([`gitwrite::target_key`]).
    pub target_key: String,
}

/// The changes of a plan, as a commit message and a change branch name them.
fn changes_of(plan: &WritePlan) -> Vec<Change> {
    plan.changes
        .iter()
        .map(|c| Change {
            image: c.image.repository.clone(),
            alias: c.alias.clone().unwrap_or_default(),
            old_tag: c.from.clone().unwrap_or_default(),
            new_tag: c.to.clone().unwrap_or_default(),
        })
        .collect()
}

/// A host's failure as a write's: a head moved since the read is a race (read and decide
/// again), anything else fails as the host classifies it.
pub(crate) fn git_failure(error: HostError) -> WriteError {
    match error {
        HostError::HeadMoved { .. } => WriteError::Race(error.to_string()),
        e => WriteError::Failed(Failure::new(e.to_string(), e.is_retryable())),
    }
}

#[async_trait]
impl Writer for GitCommit<'_> {
    type Plan = WritePlan;
    type Outcome = GitOutcome;

    /// Nothing on the Application is rewritten, so an ApplicationSet has nothing to revert.
    async fn check(&self, _app: &Application<'_>, _plan: &WritePlan) -> Result<(), WriteError> {
        Ok(())
    }

    /// `app` is the effective Application the decision was taken on
    /// ([`gitwrite::effective_app`]).
    async fn write(
        &self,
        app: &Application<'_>,
        plan: &WritePlan,
    ) -> Result<GitOutcome, WriteError> {
        let snapshot = self.snapshot;
        let host = self.host;
        // The plan's guards test the effective Application's JSON exactly.
        let mut patched = app.raw.clone();
        let operations: json_patch::Patch = serde_json::from_value(plan.patch.clone())
            .map_err(|e| WriteError::Refused(format!("the computed change is malformed: {e}")))?;
        json_patch::patch(&mut patched, &operations).map_err(|e| {
            WriteError::Refused(format!(
                "the computed change does not apply to what was read from Git: {e}"
            ))
        })?;
        let rendered = gitwrite::render(
            &snapshot.location,
            snapshot.text.as_deref(),
            &patched,
            &self.images,
        )
        .map_err(|refused| WriteError::Failed(refused.into()))?;
        let Some(text) = rendered else {
            return Ok(GitOutcome::Unchanged {
                branch: snapshot.branch.clone(),
                file: snapshot.file.clone(),
            });
        };
        let changes = changes_of(plan);
        let app_name = app.identity().name;
        let message = gitwrite::commit_message(app_name, &changes);
        let (branch, head, text) = match &snapshot.create {
            None => (snapshot.branch.clone(), snapshot.head.clone(), text),
            Some(template) => {
                let name = gitwrite::branch_name(template, app, &self.target_key, &changes);
                let created = host
                    .create_branch(&name, &snapshot.head)
                    .await
                    .map_err(git_failure)?;
                if created {
                    (name, snapshot.head.clone(), text)
                } else if template.contains("{{") {
                    // Named after this very change, so an earlier attempt made it; whether
                    // that attempt finished is judged by what the branch holds, never by the
                    // branch being there.
                    match self.resume(&name, &patched).await? {
                        Resume::Commit { head, text } => (name, head, text),
                        Resume::Holds { head } => {
                            return self.finish_pull_request(&name, &message, None, head).await;
                        }
                    }
                } else {
                    return Err(WriteError::Race(format!(
                        "branch `{name}` of {} was created meanwhile",
                        host.name()
                    )));
                }
            }
        };
        let commit = host
            .commit(&branch, &head, &message, &[(snapshot.file.clone(), text)])
            .await
            .map_err(git_failure)?;
        self.finish_pull_request(&branch, &message, Some(commit), head)
            .await
    }
}

/// Where an earlier attempt left a change branch.
enum Resume {
    /// The branch's file does not say the change yet: commit `text` on top of `head`.
    Commit { head: String, text: String },
    /// The branch's file says it already, at `head`.
    Holds { head: String },
}

impl GitCommit<'_> {
    /// Reads the change branch an earlier attempt created and decides what is left to do.
    async fn resume(&self, branch: &str, patched: &Value) -> Result<Resume, WriteError> {
        let host = self.host;
        let snapshot = self.snapshot;
        let head = host
            .branch_head(branch)
            .await
            .map_err(git_failure)?
            .ok_or_else(|| {
                WriteError::Race(format!(
                    "branch `{branch}` of {} was deleted meanwhile",
                    host.name()
                ))
            })?;
        let there = host
            .file(&snapshot.file, &head)
            .await
            .map_err(git_failure)?;
        let rendered =
            gitwrite::render(&snapshot.location, there.as_deref(), patched, &self.images)
                .map_err(|refused| WriteError::Failed(refused.into()))?;
        Ok(match rendered {
            Some(text) => Resume::Commit { head, text },
            None => Resume::Holds { head },
        })
    }

    /// After the branch holds the change: in pull-request mode, the open pull request (found,
    /// or opened now) and its labels; the outcome either way. `commit` is `None` when an
    /// earlier attempt made it and the branch's head `head` holds it.
    async fn finish_pull_request(
        &self,
        branch: &str,
        message: &str,
        commit: Option<Commit>,
        head: String,
    ) -> Result<GitOutcome, WriteError> {
        let host = self.host;
        let snapshot = self.snapshot;
        let Some(labels) = &self.pull_request else {
            return Ok(match commit {
                Some(commit) => GitOutcome::Committed(Committed {
                    commit,
                    branch: branch.to_string(),
                    file: snapshot.file.clone(),
                    pull_request: None,
                    notes: Vec::new(),
                }),
                None => GitOutcome::Unchanged {
                    branch: branch.to_string(),
                    file: snapshot.file.clone(),
                },
            });
        };
        let (title, body) = message.split_once('\n').unwrap_or((message, ""));
        let opened = host
            .pull_request(branch, &snapshot.base, title, body.trim())
            .await
            .map_err(|e| {
                let made = short(commit.as_ref().map_or(head.as_str(), |c| c.oid.as_str()));
                WriteError::Failed(Failure::new(
                    format!(
                        "`{branch}` holds the change (commit {made}), but opening the pull request failed: {e}"
                    ),
                    e.is_retryable(),
                ))
            })?;
        if commit.is_none() && !opened.opened {
            // The commit and its open pull request are both there: a duplicate event.
            return Ok(GitOutcome::Unchanged {
                branch: branch.to_string(),
                file: snapshot.file.clone(),
            });
        }
        let mut notes = Vec::new();
        if commit.is_none() {
            notes.push(format!(
                "the commit {} was made by an earlier attempt, whose pull request this one opened",
                short(&head)
            ));
        }
        if !labels.is_empty()
            && let Err(e) = host.add_labels(opened.number, labels).await
        {
            notes.push(format!("labels not applied: {e}"));
        }
        Ok(GitOutcome::Committed(Committed {
            commit: commit.unwrap_or(Commit {
                oid: head,
                url: String::new(),
            }),
            branch: branch.to_string(),
            file: snapshot.file.clone(),
            pull_request: Some(opened.url),
            notes,
        }))
    }
}

/// A commit's short SHA.
pub fn short(oid: &str) -> &str {
    oid.get(..7).unwrap_or(oid)
}
