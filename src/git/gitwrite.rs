//! Git write-back, decided without I/O: which repository, branch and file an Application's
//! updates are committed to, what that file says about the images now, and its new text.
//!
//! The decision code stays the `argocd` method's: the file is laid over the Application the
//! way Argo CD lays it over the source when rendering ([`effective_app`]), the usual decision
//! runs on that, and its patch is turned back into the file's new text ([`render`]). So the
//! tag compared against is the one Git holds, and every rule (never-downgrade, allow-tags,
//! platforms) applies unchanged. Formats are Image Updater's, byte for byte where it writes
//! the whole file (`.argocd-source-<app>.yaml`), and a splice that keeps every other byte
//! where people maintain the file (`helmvalues`, `kustomization`).

use serde_json::{Map, Value, json};

use super::readback;
use crate::appconfig::annotations::{HelmTarget, ImageConfig, WriteBack};
use crate::application::app::Application;
use crate::application::identity::Identity;
use crate::application::sources::{self, SourceKind};
use crate::config::EnterpriseHost;
use crate::failure::Refused;
use crate::git::repourl::Repo;
use crate::git::yamledit::{self, Document, Step};

/// Which kind of file the updates go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `.argocd-source-<app>.yaml`: an ApplicationSource fragment Argo CD merges in.
    Override,
    /// `helmvalues[:<path>]`: the image keys of a Helm values file.
    HelmValues,
    /// `kustomization[:<path>]`: the `images:` of a kustomization file in that directory.
    Kustomization,
}

/// Where one Application's updates are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The repository URL as configured (`git-repository`, else the source's `repoURL`).
    pub url: String,
    pub repo: Repo,
    /// The branch read (and, without a separate write branch, committed to); `None` for
    /// the repository's default branch (`targetRevision` empty or `HEAD`).
    pub branch: Option<String>,
    /// `<base>:<target>`: the branch committed to, created from `branch` when absent. May
    /// hold the template fields Image Updater offers (`{{.SHA256}}`, `{{.AppName}}`...).
    pub write_branch: Option<String>,
    /// The file (for [`FileKind::Kustomization`], the directory) inside the repository.
    pub path: String,
    /// The path `{{.TargetKey}}` hashes, as Image Updater's `WriteBackTargetKey` does.
    pub key_path: String,
    pub kind: FileKind,
    /// The source the updates are written to, as an index into [`sources::sources`].
    pub source: usize,
}

impl Location {
    /// The files to try, in order: a kustomization directory has three possible names.
    pub fn candidates(&self) -> Vec<String> {
        match self.kind {
            FileKind::Kustomization => ["kustomization.yaml", "kustomization.yml", "Kustomization"]
                .iter()
                .map(|file| join(&[&self.path, file]).unwrap_or_default())
                .collect(),
            _ => vec![self.path.clone()],
        }
    }

    /// What the report and the audit call this target.
    pub fn describe(&self, branch: &str, file: &str) -> String {
        format!("{}@{branch}:{file}", self.repo.full_name())
    }
}

/// A 40-character hex string: a commit, which cannot be committed to.
fn is_commit_sha(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Joins repository paths like Go's `filepath.Join`, refusing to leave the repository.
fn join(parts: &[&str]) -> Result<String, String> {
    let mut out: Vec<&str> = Vec::new();
    for part in parts {
        for segment in part.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    if out.pop().is_none() {
                        return Err(format!("`{}` leaves the repository", parts.join("/")));
                    }
                }
                s => out.push(s),
            }
        }
    }
    Ok(out.join("/"))
}

/// Works out where an Application configured for `git` write-back commits, or says why it
/// cannot (a configuration error the user fixes).
pub fn locate(
    app: &Application<'_>,
    write_back: &WriteBack,
    argocd_namespace: &str,
    enterprise: &[EnterpriseHost],
) -> Result<Location, Refused> {
    let WriteBack::Git {
        target,
        branch,
        repository,
        ..
    } = write_back
    else {
        return Err(Refused::from(
            "the Application is not configured for git write-back",
        ));
    };
    let sources = app.view.sources();
    let writable = |s: &sources::Source<'_>| {
        matches!(
            s.kind,
            SourceKind::Helm | SourceKind::Kustomize | SourceKind::Plugin
        )
    };
    let chosen = repository
        .as_deref()
        .filter(|_| sources.len() > 1)
        .and_then(|repo| {
            sources
                .iter()
                .position(|s| s.value["repoURL"].as_str() == Some(repo))
        })
        .or_else(|| sources.iter().position(writable))
        .ok_or("the Application has no Helm, Kustomize or plugin source to write to")?;
    let source = sources[chosen].value;
    let url = repository
        .as_deref()
        .or_else(|| source["repoURL"].as_str())
        .ok_or("the source has no repoURL; set git-repository")?;
    if source.get("chart").is_some() && repository.is_none() {
        return Err(Refused::from(format!(
            "the source is the Helm chart `{}` from a chart repository, which cannot be committed to; set git-repository (and write-back-target) to the Git repository holding its values",
            source["chart"].as_str().unwrap_or_default()
        )));
    }
    let repo = Repo::parse(url, enterprise)?;

    let (base, write_branch) = branches(branch.as_deref(), source)?;
    let (kind, path, key_path) = target_file(
        app,
        source,
        sources[chosen].kind,
        target.as_deref(),
        argocd_namespace,
    )?;
    Ok(Location {
        url: url.to_string(),
        repo,
        branch: base,
        write_branch: write_branch.map(str::to_string),
        path,
        key_path,
        kind,
        source: chosen,
    })
}

/// `git-branch` (`<branch>`, `<base>:<target>` or `:<target>`) over the source's
/// `targetRevision`: the branch to read (`None`: the default branch) and the one to write,
/// when it differs.
fn branches<'a>(
    setting: Option<&'a str>,
    source: &Value,
) -> Result<(Option<String>, Option<&'a str>), Refused> {
    let (base, write_branch) = match setting.map(str::trim) {
        None | Some("") => (None, None),
        Some(setting) => {
            let mut parts = setting.split(':');
            let base = parts.next().unwrap_or_default();
            let target = parts.next();
            if parts.next().is_some() {
                return Err(Refused::from(format!(
                    "git-branch `{setting}`: expected `<branch>`, `<base>:<target>` or `:<target>`"
                )));
            }
            (
                Some(base).filter(|b| !b.is_empty()),
                target.filter(|t| !t.is_empty()),
            )
        }
    };
    let revision = source["targetRevision"].as_str().unwrap_or_default();
    let base = match base {
        Some(b) => Some(b.to_string()),
        None if revision.is_empty() || revision == "HEAD" => None,
        None if is_commit_sha(revision) => {
            return Err(Refused::from(format!(
                "the source's targetRevision `{revision}` is a commit, not a branch: set git-branch to the branch to commit to"
            )));
        }
        None => Some(revision.to_string()),
    };
    if let Some(b) = &base
        && is_commit_sha(b)
    {
        return Err(Refused::from(format!(
            "git-branch `{b}` is a commit, not a branch: name the branch to commit to"
        )));
    }
    if let Some(b) = &base {
        check_branch(b)?;
    }
    if let Some(t) = write_branch {
        check_template(t)?;
        check_branch(&fill_placeholders(t))?;
    }
    Ok((base, write_branch))
}

/// The file a change goes to, its kind, and the path Image Updater's `TargetKey` hashes.
fn target_file(
    app: &Application<'_>,
    source: &Value,
    source_kind: SourceKind,
    target: Option<&str>,
    argocd_namespace: &str,
) -> Result<(FileKind, String, String), Refused> {
    let source_path = source["path"].as_str().unwrap_or_default();
    let Identity { namespace, name } = app.identity();
    let relative = |rest: &str, default: &str| -> Result<String, String> {
        match rest.strip_prefix('/') {
            Some(absolute) => join(&[absolute]),
            None if rest.is_empty() => join(&[source_path, default]),
            None => join(&[source_path, rest]),
        }
    };
    // Image Updater's names: the namespace joins in for Applications outside Argo CD's own
    // namespace (apps in any namespace).
    let default_file = if namespace.is_empty() || namespace == argocd_namespace {
        format!(".argocd-source-{name}.yaml")
    } else {
        format!(".argocd-source-{namespace}_{name}.yaml")
    };
    let default_path = join(&[source_path, &default_file])?;
    let (kind, path) = match target.map(str::trim) {
        None | Some("") => (FileKind::Override, default_path.clone()),
        Some("helmvalues") => (FileKind::HelmValues, relative("", "values.yaml")?),
        Some(t) if t.starts_with("helmvalues:") => (
            FileKind::HelmValues,
            relative(&t["helmvalues:".len()..], "values.yaml")?,
        ),
        Some("kustomization") => (FileKind::Kustomization, relative("", ".")?),
        Some(t) if t.starts_with("kustomization:") => (
            FileKind::Kustomization,
            relative(&t["kustomization:".len()..], ".")?,
        ),
        Some(plain) => plain_target(plain, source_kind)?,
    };
    // `WriteBackTargetKey` hashes Image Updater's `Target`: for a kustomization target that
    // stays the default override path, for a bare path it is the path as written.
    let key_path = match (kind, target.map(str::trim)) {
        (FileKind::Kustomization, _) => default_path,
        (_, Some(plain)) if !plain.starts_with("helmvalues") && !plain.is_empty() => {
            plain.to_string()
        }
        _ => path.clone(),
    };
    Ok((kind, path, key_path))
}

/// A bare path, as Image Updater reads one: a file from the repository's root, written as
/// an override file (`kustomize.images` or `helm.parameters`) where its name starts with
/// `.argocd-source` or the source is not Helm, and as a Helm values file otherwise. A
/// kustomization file's name is refused: its content would be replaced.
fn plain_target(target: &str, source: SourceKind) -> Result<(FileKind, String), String> {
    let path = join(&[target.strip_prefix('/').unwrap_or(target)])?;
    let file = path.rsplit('/').next().unwrap_or_default();
    if matches!(
        file,
        "kustomization.yaml" | "kustomization.yml" | "Kustomization"
    ) {
        return Err(format!(
            "write-back-target `{target}` looks like a kustomization file; writing overrides to it would discard its content: use `kustomization:<directory>` to update its images in place, or name a dedicated override file"
        ));
    }
    let kind = if source == SourceKind::Helm && !file.starts_with(".argocd-source") {
        FileKind::HelmValues
    } else {
        FileKind::Override
    };
    Ok((kind, path))
}

/// A branch name as `git check-ref-format --branch` accepts it. Branch names go into Git
/// host API paths, where a `..` segment would resolve to another endpoint (`heads/../../user`
/// is `GET /user` with the token), so anything git itself would refuse is refused here.
fn check_branch(name: &str) -> Result<(), String> {
    let bad = name.is_empty()
        || name == "@"
        || name.contains("..")
        || name.contains("@{")
        || name.ends_with('.')
        || name.chars().any(|c| {
            c.is_control() || c == ' ' || matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\')
        })
        || name.split('/').any(|segment| {
            segment.is_empty() || segment.starts_with('.') || segment.ends_with(".lock")
        });
    if bad {
        return Err(format!(
            "`{}` is not a valid branch name (git check-ref-format: no `..`, empty or dot-led segments, spaces or `~^:?*[\\`)",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// A branch-name template in the part of Go's `text/template` Image Updater's documented
/// templates use: fields of the application (`{{.AppName}}`, `{{.AppNamespace}}`,
/// `{{.SHA256}}`, `{{.TargetKey}}`) and a `{{range .Images}}…{{end}}` over the changes, whose
/// body reads `{{.Name}}`, `{{.Alias}}`, `{{.OldTag}}` and `{{.NewTag}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Field(String),
    Images(Vec<Piece>),
}

const TEMPLATE_FIELDS: [&str; 4] = [".AppName", ".AppNamespace", ".SHA256", ".TargetKey"];
const IMAGE_FIELDS: [&str; 4] = [".Name", ".Alias", ".OldTag", ".NewTag"];

fn parse_template(name: &str) -> Result<Vec<Piece>, String> {
    fn pieces<'t>(
        name: &str,
        mut rest: &'t str,
        in_range: bool,
    ) -> Result<(Vec<Piece>, &'t str), String> {
        let mut out = Vec::new();
        loop {
            let Some(open) = rest.find("{{") else {
                if in_range {
                    return Err(format!(
                        "git-branch target `{name}`: `{{{{range}}}}` without `{{{{end}}}}`"
                    ));
                }
                if !rest.is_empty() {
                    out.push(Piece::Text(rest.to_string()));
                }
                return Ok((out, ""));
            };
            if open > 0 {
                out.push(Piece::Text(rest[..open].to_string()));
            }
            let Some(close) = rest[open..].find("}}") else {
                return Err(format!("git-branch target `{name}`: an unclosed `{{{{`"));
            };
            let action = rest[open + 2..open + close].trim();
            rest = &rest[open + close + 2..];
            match action {
                "end" if in_range => return Ok((out, rest)),
                "range .Images" if !in_range => {
                    let (body, after) = pieces(name, rest, true)?;
                    out.push(Piece::Images(body));
                    rest = after;
                }
                field
                    if (in_range && IMAGE_FIELDS.contains(&field))
                        || (!in_range && TEMPLATE_FIELDS.contains(&field)) =>
                {
                    out.push(Piece::Field(field.to_string()));
                }
                other => {
                    let offered = if in_range {
                        IMAGE_FIELDS.to_vec()
                    } else {
                        TEMPLATE_FIELDS.to_vec()
                    };
                    return Err(format!(
                        "git-branch target `{name}`: `{{{{{other}}}}}` is not supported in branch names; use {}{}",
                        offered
                            .iter()
                            .map(|f| format!("{{{{{f}}}}}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        if in_range {
                            " inside `{{range .Images}}`"
                        } else {
                            ", or `{{range .Images}}…{{end}}`"
                        }
                    ));
                }
            }
        }
    }
    pieces(name, name, false).map(|(out, _)| out)
}

fn check_template(name: &str) -> Result<(), String> {
    parse_template(name).map(|_| ())
}

/// The template filled with stand-in values, to check the name's shape before the fields
/// are known.
fn fill_placeholders(template: &str) -> String {
    let example = Change {
        image: "x".into(),
        alias: "x".into(),
        old_tag: "x".into(),
        new_tag: "x".into(),
    };
    parse_template(template)
        .map(|pieces| {
            fill(
                &pieces,
                &|_| "x".to_string(),
                std::slice::from_ref(&example),
            )
        })
        .unwrap_or_default()
}

fn fill(pieces: &[Piece], field: &dyn Fn(&str) -> String, changes: &[Change]) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Field(name) => out.push_str(&field(name)),
            Piece::Images(body) => {
                for change in changes {
                    let of_image = |name: &str| match name {
                        ".Name" => change.image.clone(),
                        ".Alias" => change.alias.clone(),
                        ".OldTag" => change.old_tag.clone(),
                        ".NewTag" => change.new_tag.clone(),
                        _ => String::new(),
                    };
                    out.push_str(&fill(body, &of_image, &[]));
                }
            }
        }
    }
    out
}

/// One image's change, as Image Updater's templates see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The image name without its registry, as Image Updater's `ImageName`.
    pub image: String,
    /// The image's alias in the configuration (`{{.Alias}}`).
    pub alias: String,
    pub old_tag: String,
    pub new_tag: String,
}

/// Image Updater's `TargetKey`: the first four bytes, in hex, of the SHA-256 of
/// `repoURL|branch setting|file` (the branch setting is the part before any `:`).
pub fn target_key(location: &Location, branch: Option<&str>) -> String {
    let branch = branch
        .unwrap_or_default()
        .split(':')
        .next()
        .unwrap_or_default();
    let keyed = format!("{}|{branch}|{}", location.url, location.key_path);
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, keyed.as_bytes());
    digest
        .as_ref()
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A branch template filled as Image Updater fills it: `{{.SHA256}}` is the SHA-256 of
/// `<image>-<old>-<new>,` over the changes. Cut to 255 characters, as there.
pub fn branch_name(
    template: &str,
    app: &Application<'_>,
    target_key: &str,
    changes: &[Change],
) -> String {
    let mut hashed = String::new();
    for c in changes {
        hashed.push_str(&format!("{}-{}-{},", c.image, c.old_tag, c.new_tag));
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, hashed.as_bytes());
    let sha: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let app_field = |name: &str| match name {
        ".AppName" => app.metadata.name.clone(),
        ".AppNamespace" => app.metadata.namespace.clone(),
        ".SHA256" => sha.clone(),
        ".TargetKey" => target_key.to_string(),
        _ => String::new(),
    };
    // A template that does not parse was refused when the Application was read; Image
    // Updater renders such a name empty too.
    let out = parse_template(template)
        .map(|pieces| fill(&pieces, &app_field, changes))
        .unwrap_or_default();
    out.chars().take(255).collect()
}

/// Image Updater's default commit message (`DefaultGitCommitMessage`), rendered.
pub fn commit_message(app_name: &str, changes: &[Change]) -> String {
    let mut message = format!("build: automatic update of {app_name}\n\n");
    for c in changes {
        message.push_str(&format!(
            "updates image {} tag '{}' to '{}'\n",
            c.image, c.old_tag, c.new_tag
        ));
    }
    message
}

/// The Application as Argo CD renders it with `file` (the target's text, `None` if it does
/// not exist yet) laid over the source the updates go to: only that source, under
/// `spec.source`, so the decision reads the tag Git holds.
pub fn effective_app(
    app: &Application<'_>,
    location: &Location,
    file: Option<&str>,
    images: &[&ImageConfig],
) -> Result<Value, Refused> {
    let sources = app.view.sources();
    let chosen = sources
        .get(location.source)
        .ok_or("the Application's sources changed")?;
    let kind = chosen.kind;
    let mut source = chosen.value.clone();
    if let Some(text) = file {
        match location.kind {
            FileKind::Override => {
                let overlay: Value = crate::yaml::from_str(text)
                    .map_err(|e| format!("`{}` is not read: {e}", location.path))?;
                match overlay {
                    Value::Null => {}
                    Value::Object(_) => json_patch::merge(&mut source, &overlay),
                    _ => {
                        return Err(Refused::from(format!(
                            "`{}` is not a mapping of source fields",
                            location.path
                        )));
                    }
                }
            }
            FileKind::HelmValues => helm_values_over(&mut source, location, text, images)?,
            FileKind::Kustomization => kustomization_over(&mut source, location, text)?,
        }
    }
    // The object as read, with the source replaced: what the decision reads next.
    let mut effective = app.raw.clone();
    effective["spec"]["source"] = source;
    if let Some(spec) = effective["spec"].as_object_mut() {
        spec.remove("sources");
    }
    if let Some(status) = effective["status"].as_object_mut() {
        status.remove("sourceTypes");
        status.insert("sourceType".into(), json!(kind_name(kind)));
    }
    Ok(effective)
}

/// The Helm parameters a values file sets for the images, under the source's own (an
/// explicit parameter wins over the file, as in Argo CD).
fn helm_values_over(
    source: &mut Value,
    location: &Location,
    text: &str,
    images: &[&ImageConfig],
) -> Result<(), Refused> {
    let doc = Document::parse(text).map_err(|e| format!("`{}`: {e}", location.path))?;
    let mut list = take_list(source, "helm", "parameters");
    for image in images {
        for key in helm_keys(image) {
            let absent = !list.iter().any(|p| p["name"] == key.as_str());
            let value = doc
                .helm_get(&key)
                .map_err(|e| format!("`{}`: {e}", location.path))?;
            if let (true, Some(value)) = (absent, value) {
                list.push(json!({"name": key, "value": value}));
            }
        }
    }
    put_list(source, "helm", "parameters", list);
    Ok(())
}

/// A kustomization's `images`, as Kustomize applies them, under the source's own entries.
fn kustomization_over(source: &mut Value, location: &Location, text: &str) -> Result<(), Refused> {
    let doc = Document::parse(text).map_err(|e| format!("`{}`: {e}", location.path))?;
    let mut list = take_list(source, "kustomize", "images");
    for i in 0..doc.len(&[Step::Key("images")]) {
        let field = |f: &'static str| doc.get(&[Step::Key("images"), Step::Index(i), Step::Key(f)]);
        let Some(name) = field("name") else { continue };
        let present = list
            .iter()
            .filter_map(Value::as_str)
            .any(|e| sources::kustomize_entry_name(e) == name);
        if !present {
            let mut entry = match field("newName") {
                Some(new_name) => format!("{name}={new_name}"),
                None => name.to_string(),
            };
            if let Some(tag) = field("newTag") {
                entry.push_str(&format!(":{tag}"));
            }
            if let Some(digest) = field("digest") {
                entry.push_str(&format!("@{digest}"));
            }
            list.push(json!(entry));
        }
    }
    put_list(source, "kustomize", "images", list);
    Ok(())
}

fn kind_name(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::Helm => "Helm",
        SourceKind::Kustomize => "Kustomize",
        SourceKind::Plugin => "Plugin",
        SourceKind::Directory => "Directory",
    }
}

/// The list at `value.<block>.<field>`, empty if absent.
fn take_list(value: &Value, block: &str, field: &str) -> Vec<Value> {
    value[block][field].as_array().cloned().unwrap_or_default()
}

/// Stores `list` at `value.<block>.<field>`, making the block if it is not a mapping.
fn put_list(value: &mut Value, block: &str, field: &str, list: Vec<Value>) {
    if !value.is_object() {
        *value = json!({});
    }
    if !value[block].is_object() {
        value[block] = json!({});
    }
    value[block][field] = Value::Array(list);
}

/// The Helm parameter names an image is written under.
fn helm_keys(image: &ImageConfig) -> Vec<String> {
    match &image.helm {
        HelmTarget::NameAndTag { name, tag } => vec![name.clone(), tag.clone()],
        HelmTarget::Spec { param } => vec![param.clone()],
    }
}

fn plugin_keys(image: &ImageConfig) -> Vec<String> {
    image
        .plugin
        .as_ref()
        .map_or_else(Vec::new, |p| match &p.spec {
            Some(spec) => vec![spec.clone()],
            None => p.name.iter().chain(p.tag.iter()).cloned().collect(),
        })
}

/// The file's new text after the decision's patch, or `None` when it would not change: a
/// duplicate or late event commits nothing.
///
/// `patched` is the effective Application with the write plan applied.
pub fn render(
    location: &Location,
    existing: Option<&str>,
    patched: &Value,
    images: &[&ImageConfig],
) -> Result<Option<String>, Refused> {
    let source = &patched["spec"]["source"];
    let kind = sources::sources(patched)
        .first()
        .map_or(SourceKind::Directory, |s| s.kind);
    let (text, meant) = match location.kind {
        FileKind::Override => render_override(existing, source, kind, images)?,
        FileKind::HelmValues => render_values(location, existing, source, images)?,
        FileKind::Kustomization => render_kustomization(location, existing, source, images)?,
    };
    if Some(text.as_str()) == existing {
        return Ok(None);
    }
    // A file past the cap could not be read again, by this function or by a host that
    // stops at it: a file that grows there (an override file whose aliases are written out)
    // is refused, not committed.
    if text.len() > crate::git::githost::MAX_FILE {
        return Err(Refused::from(format!(
            "`{}` would be {} bytes written out, over the {} bytes (512 KiB) the Git write-back reads: keep the file small (an override file's aliases are written out in full)",
            location.path,
            text.len(),
            crate::git::githost::MAX_FILE
        )));
    }
    // Read back as Helm and kustomize will read it: nothing but what was meant may change.
    let file = location.path.as_str();
    match meant {
        Meant::Edits(edits) => readback::check(file, existing, &text, &edits),
        Meant::Whole(value) => readback::check_whole(file, &text, &value),
    }
    .map_err(|e| Refused::from(e.to_string()))?;
    Ok(Some(text))
}

/// What a rendered file is meant to hold, for the read-back.
enum Meant {
    /// The old file with these edits.
    Edits(Vec<readback::Edit>),
    /// Exactly this (a file written whole).
    Whole(Value),
}

/// A path of the editor's as the read-back's.
fn owned(path: &[Step<'_>]) -> Vec<readback::Step> {
    path.iter().copied().map(readback::Step::from).collect()
}

fn render_values(
    location: &Location,
    existing: Option<&str>,
    source: &Value,
    images: &[&ImageConfig],
) -> Result<(String, Meant), String> {
    let mut text = existing.unwrap_or_default().to_string();
    let mut edits = Vec::new();
    let param = |name: &str| {
        source["helm"]["parameters"]
            .as_array()
            .and_then(|l| l.iter().find(|p| p["name"] == name))
            .and_then(|p| p["value"].as_str())
            .map(str::to_string)
    };
    for image in images {
        // Image Updater's `helmvalues` writes: the image's name key (or its image-spec key)
        // and its tag key, each with the Application's parameter as the decision set it; a
        // name the file writes without a registry gets the parameter's short form.
        let (name_key, keys) = match &image.helm {
            HelmTarget::NameAndTag { name, tag } => (name, vec![name.clone(), tag.clone()]),
            HelmTarget::Spec { param } => (param, vec![param.clone()]),
        };
        for key in keys {
            let Some(value) = param(&key) else { continue };
            let doc = Document::parse(&text).map_err(|e| format!("`{}`: {e}", location.path))?;
            let current = doc
                .helm_get(&key)
                .map_err(|e| format!("`{}`: {e}", location.path))?;
            let value = match current {
                Some(in_file) if &key == name_key && !has_registry_prefix(in_file) => {
                    short_form(&value).to_string()
                }
                _ => value,
            };
            if current == Some(value.as_str()) {
                continue;
            }
            let path = doc
                .helm_path(&key)
                .map_err(|e| format!("`{}`: {e}", location.path))?;
            text = doc
                .set(&path, &value)
                .map_err(|e| format!("`{}`: {e}", location.path))?;
            edits.push(readback::Edit::Set(owned(&path), value));
        }
    }
    Ok((text, Meant::Edits(edits)))
}

/// Whether an image name starts with a registry host, as Image Updater's `HasRegistryPrefix`
/// tells: a first path component holding a `.` (so `localhost:5000/x` has none).
fn has_registry_prefix(name: &str) -> bool {
    name.split_once('/')
        .is_some_and(|(first, _)| first.contains('.'))
}

/// The name without its registry host (Image Updater's `ExtractShortForm`): what a values
/// file that writes `web:1.0.0` for `<registry>/web` gets back.
fn short_form(name: &str) -> &str {
    match name.split_once('/') {
        Some((_, rest)) if has_registry_prefix(name) => rest,
        _ => name,
    }
}

/// A Kustomize `images` entry (`name=newName:newTag@digest`) split into its fields.
fn kustomize_fields(entry: &str) -> (String, Option<String>, Option<String>, Option<String>) {
    let (name, reference) = match entry.split_once('=') {
        Some((name, reference)) => (name.to_string(), Some(reference)),
        None => (sources::kustomize_entry_name(entry).to_string(), None),
    };
    let (new_name, tag, digest) = sources::split_reference(reference.unwrap_or(entry));
    let new_name = reference.map(|_| new_name.to_string());
    (
        name,
        new_name,
        tag.map(str::to_string),
        digest.map(str::to_string),
    )
}

fn render_kustomization(
    location: &Location,
    existing: Option<&str>,
    source: &Value,
    images: &[&ImageConfig],
) -> Result<(String, Meant), String> {
    let Some(existing) = existing else {
        return Err(format!(
            "no kustomization file in `{}` (looked for kustomization.yaml, kustomization.yml, Kustomization)",
            location.path
        ));
    };
    let fail = |e: yamledit::YamlEditError| format!("`{}`: {e}", location.path);
    let mut text = existing.to_string();
    let mut edits = Vec::new();
    for image in images {
        let wanted = sources::kustomize_name(image);
        let Some(entry) = source["kustomize"]["images"].as_array().and_then(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .find(|e| sources::kustomize_entry_name(e) == wanted)
        }) else {
            continue;
        };
        let (name, new_name, tag, digest) = kustomize_fields(entry);
        let doc = Document::parse(&text).map_err(fail)?;
        let images_path = [Step::Key("images")];
        let index = (0..doc.len(&images_path)).find(|&i| {
            doc.get(&[Step::Key("images"), Step::Index(i), Step::Key("name")])
                == Some(name.as_str())
        });
        let Some(i) = index else {
            let mut fields = vec![("name", name.as_str())];
            if let Some(n) = &new_name {
                fields.push(("newName", n));
            }
            if let Some(t) = &tag {
                fields.push(("newTag", t));
            }
            if let Some(d) = &digest {
                fields.push(("digest", d));
            }
            text = doc.append_item(&images_path, &fields).map_err(fail)?;
            let fields = fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            edits.push(readback::Edit::Append(owned(&images_path), fields));
            continue;
        };
        let at = |field: &'static str| [Step::Key("images"), Step::Index(i), Step::Key(field)];
        for (field, value) in [
            ("newName", &new_name),
            ("newTag", &tag),
            ("digest", &digest),
        ] {
            let doc = Document::parse(&text).map_err(fail)?;
            let current = doc.get(&at(field));
            text = match (value, current) {
                (Some(v), Some(c)) if v == c => continue,
                (Some(v), _) => {
                    edits.push(readback::Edit::Set(owned(&at(field)), v.clone()));
                    doc.set(&at(field), v).map_err(fail)?
                }
                // A digest left behind would pin the old image: Kustomize prefers it to
                // the tag.
                (None, Some(_)) if field == "digest" => {
                    edits.push(readback::Edit::Remove(owned(&at(field))));
                    doc.remove(&at(field)).map_err(fail)?
                }
                (None, _) => continue,
            };
        }
    }
    Ok((text, Meant::Edits(edits)))
}

fn render_override(
    existing: Option<&str>,
    source: &Value,
    kind: SourceKind,
    images: &[&ImageConfig],
) -> Result<(String, Meant), String> {
    // What the file held; unreadable as YAML, it is replaced, as Image Updater does. A file
    // that reads but would expand past the bound is refused instead: replacing it would drop
    // whatever else it says, and reading it would exhaust the function.
    let read = match existing.map(crate::yaml::from_str::<Value>) {
        Some(Err(
            refused @ (crate::yaml::YamlError::Expands { .. } | crate::yaml::YamlError::TooDeep),
        )) => {
            return Err(format!("the override file is not read: {refused}"));
        }
        Some(read) => read.ok(),
        None => None,
    };
    let mut file: Value = read
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Map::new()));
    let plugin_images: Vec<&&ImageConfig> = images.iter().filter(|i| i.plugin.is_some()).collect();
    if !plugin_images.is_empty() {
        let managed: Vec<String> = plugin_images.iter().flat_map(|i| plugin_keys(i)).collect();
        let env = source["plugin"]["env"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut list = take_list(&file, "plugin", "env");
        for entry in env.iter().filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| managed.iter().any(|m| m == n))
        }) {
            let fresh = json!({"name": entry["name"], "value": entry["value"]});
            match list.iter_mut().find(|e| e["name"] == entry["name"]) {
                Some(existing) => *existing = fresh,
                None => list.push(fresh),
            }
        }
        put_list(&mut file, "plugin", "env", list);
    } else if kind == SourceKind::Kustomize {
        let current = source["kustomize"]["images"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut list = take_list(&file, "kustomize", "images");
        for entry in current.iter().filter_map(Value::as_str) {
            let name = sources::kustomize_entry_name(entry);
            match list.iter_mut().find(|e| {
                e.as_str()
                    .is_some_and(|s| sources::kustomize_entry_name(s) == name)
            }) {
                Some(existing) => *existing = json!(entry),
                None => list.push(json!(entry)),
            }
        }
        put_list(&mut file, "kustomize", "images", list);
    } else {
        let managed: Vec<String> = images.iter().flat_map(|i| helm_keys(i)).collect();
        let params = source["helm"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut list = take_list(&file, "helm", "parameters");
        for param in params.iter().filter(|p| {
            p["name"]
                .as_str()
                .is_some_and(|n| managed.iter().any(|m| m == n))
        }) {
            let fresh =
                json!({"name": param["name"], "value": param["value"], "forcestring": true});
            match list.iter_mut().find(|p| p["name"] == param["name"]) {
                Some(existing) => *existing = fresh,
                None => list.push(fresh),
            }
        }
        list.sort_by(|a, b| {
            a["name"]
                .as_str()
                .unwrap_or_default()
                .cmp(b["name"].as_str().unwrap_or_default())
        });
        put_list(&mut file, "helm", "parameters", list);
    }
    Ok((emit(&file, 0, false), Meant::Whole(file)))
}

/// YAML as Go's yaml.v3 writes it with indent 2 and compact sequences, which is what Image
/// Updater's `marshalWithIndent` produces: keys in the order held, `- ` at the parent key's
/// column, strings plain unless they would read back as something else.
fn emit(value: &Value, column: usize, in_item: bool) -> String {
    let pad = " ".repeat(column);
    let mut out = String::new();
    match value {
        Value::Object(map) => {
            for (i, (key, v)) in map.iter().enumerate() {
                let lead = if in_item && i == 0 { "" } else { pad.as_str() };
                let key = yamledit::render(key, saphyr_parser::ScalarStyle::Plain);
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        out.push_str(&format!("{lead}{key}:\n{}", emit(v, column + 2, false)));
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{lead}{key}:\n{}", emit(v, column, false)));
                    }
                    scalar => out.push_str(&format!("{lead}{key}: {}\n", scalar_text(scalar))),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                // An item that is itself a list starts on its parent's dash (`- - a`).
                let lead = if in_item && i == 0 { "" } else { pad.as_str() };
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        out.push_str(&format!("{lead}- {}", emit(item, column + 2, true)));
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{lead}- {}", emit(item, column + 2, true)));
                    }
                    scalar => out.push_str(&format!("{lead}- {}\n", scalar_text(scalar))),
                }
            }
        }
        scalar => out.push_str(&format!("{pad}{}\n", scalar_text(scalar))),
    }
    out
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => yamledit::render(s, saphyr_parser::ScalarStyle::Plain),
        Value::Null => "null".into(),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::appconfig::annotations::AppConfig;
    use crate::application::app::Application as Read;
    use crate::git::repourl::HostKind;
    use argocd_ecr_updater_standins::fixtures::{Application, SEED_IMAGE as IMAGE};
    use std::collections::BTreeMap;

    // The functions on the Application each JSON fixture is, as read.

    fn locate(
        app: &Value,
        write_back: &WriteBack,
        argocd_namespace: &str,
        enterprise: &[EnterpriseHost],
    ) -> Result<Location, Refused> {
        super::locate(&Read::of(app), write_back, argocd_namespace, enterprise)
    }

    fn branch_name(template: &str, app: &Value, target_key: &str, changes: &[Change]) -> String {
        super::branch_name(template, &Read::of(app), target_key, changes)
    }

    fn effective_app(
        app: &Value,
        location: &Location,
        file: Option<&str>,
        images: &[&ImageConfig],
    ) -> Result<Value, Refused> {
        super::effective_app(&Read::of(app), location, file, images)
    }

    fn git(target: Option<&str>, branch: Option<&str>, repository: Option<&str>) -> WriteBack {
        WriteBack::Git {
            credentials: "git".into(),
            target: target.map(str::to_string),
            branch: branch.map(str::to_string),
            repository: repository.map(str::to_string),
            pull_request: None,
        }
    }

    fn ghe() -> Vec<EnterpriseHost> {
        vec![
            EnterpriseHost {
                host: "ghe.acme.internal".into(),
                api: "https://ghe.acme.internal/api/v3/".into(),
                gitlab: false,
            },
            EnterpriseHost {
                host: "gitlab.acme.internal".into(),
                api: "https://gitlab.acme.internal/api/v4".into(),
                gitlab: true,
            },
        ]
    }

    /// The configured images of `config` that parsed.
    fn images_of(config: &AppConfig) -> Vec<&ImageConfig> {
        config
            .images
            .iter()
            .filter_map(|i| i.config.as_ref().ok())
            .collect()
    }

    fn seed_config(extra: &[(&str, &str)]) -> AppConfig {
        let mut pairs = vec![
            ("image-list", format!("app={IMAGE}")),
            ("app.update-strategy", "latest".into()),
            ("app.helm.image-name", "image.repository".into()),
            ("app.helm.image-tag", "image.tag".into()),
            ("write-back-method", "git".into()),
        ];
        pairs.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        let map: BTreeMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (format!("{}{k}", crate::appconfig::annotations::PREFIX), v))
            .collect();
        AppConfig::parse(&map).unwrap()
    }

    /// Image Updater's own cases (`Test_HasRegistryPrefix`, `Test_ExtractShortForm`).
    #[test]
    fn a_registry_prefix_and_the_short_form_are_read_as_image_updater_reads_them() {
        let prefixed = [
            "docker.io/bitnami/nginx",
            "gcr.io/myproject/image",
            "registry.example.com/image",
            "quay.io/org/repo",
            "192.168.1.1:5000/image",
            "10.0.0.1/image",
            "my.registry.example.com/image",
            "registry.example.com:5000/image",
        ];
        let bare = [
            "bitnami/nginx",
            "library/test-image",
            "nginx",
            "",
            "org/repo",
            "/image",
            "localhost:5000/image",
        ];
        for name in prefixed {
            assert!(has_registry_prefix(name), "{name}");
        }
        for name in bare {
            assert!(!has_registry_prefix(name), "{name}");
            assert_eq!(short_form(name), name, "short already");
        }
        assert_eq!(short_form("docker.io/bitnami/nginx"), "bitnami/nginx");
        assert_eq!(short_form("quay.io/org/repo"), "org/repo");
        assert_eq!(
            short_form("768157413559.dkr.ecr.ap-northeast-2.amazonaws.com/web:1.1.0"),
            "web:1.1.0"
        );
    }

    #[test]
    fn repository_urls_in_every_form_name_the_same_github_repository() {
        for url in [
            "https://github.com/barun/invitation.git",
            "https://github.com/barun/invitation",
            "https://x-access-token@github.com/barun/invitation.git",
            "git@github.com:barun/invitation.git",
            "ssh://git@github.com/barun/invitation.git",
            "ssh://git@github.com:22/barun/invitation",
        ] {
            let repo = Repo::parse(url, &[]).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(
                (repo.api.as_str(), repo.full_name()),
                ("https://api.github.com", "barun/invitation".to_string()),
                "{url}"
            );
        }
        let enterprise = Repo::parse("git@ghe.acme.internal:platform/deploy.git", &ghe()).unwrap();
        assert_eq!(enterprise.api, "https://ghe.acme.internal/api/v3");
    }

    #[test]
    fn codecommit_urls_name_the_repository_and_its_region() {
        for (url, region, name) in [
            (
                "https://git-codecommit.ap-northeast-2.amazonaws.com/v1/repos/invitation",
                "ap-northeast-2",
                "invitation",
            ),
            (
                "ssh://APKAEXAMPLE@git-codecommit.eu-west-1.amazonaws.com/v1/repos/deploy",
                "eu-west-1",
                "deploy",
            ),
            ("codecommit::us-east-1://deploy", "us-east-1", "deploy"),
            (
                "codecommit::us-east-1://myprofile@deploy",
                "us-east-1",
                "deploy",
            ),
            ("codecommit://deploy", "", "deploy"),
            (
                "https://git-codecommit.cn-north-1.amazonaws.com.cn/v1/repos/deploy",
                "cn-north-1",
                "deploy",
            ),
            (
                "https://git-codecommit.eusc-de-east-1.amazonaws.eu/v1/repos/deploy",
                "eusc-de-east-1",
                "deploy",
            ),
        ] {
            let repo = Repo::parse(url, &[]).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(
                repo.kind,
                HostKind::CodeCommit {
                    region: region.into()
                },
                "{url}"
            );
            assert_eq!(repo.full_name(), name, "{url}");
        }
        assert!(
            Repo::parse(
                "https://git-codecommit.us-east-1.amazonaws.com/not-repos/x",
                &[]
            )
            .is_err()
        );
        // A host that only starts like CodeCommit's, or names another partition's suffix, is
        // not CodeCommit: no credential of the role goes to it.
        for url in [
            "https://git-codecommit.us-east-1.amazonaws.com.evil.example/v1/repos/x",
            "https://git-codecommit.cn-north-1.amazonaws.com/v1/repos/x",
        ] {
            let repo = Repo::parse(url, &[]);
            assert!(
                !matches!(repo, Ok(ref r) if matches!(r.kind, HostKind::CodeCommit { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn gitlab_urls_keep_nested_groups_in_the_namespace() {
        let nested = Repo::parse("https://gitlab.com/acme/platform/deploy.git", &[]).unwrap();
        assert_eq!(
            (nested.kind.clone(), nested.full_name(), nested.api.as_str()),
            (
                HostKind::GitLab,
                "acme/platform/deploy".to_string(),
                "https://gitlab.com/api/v4"
            )
        );
        let own = Repo::parse("git@gitlab.acme.internal:team/app.git", &ghe()).unwrap();
        assert_eq!(
            (own.kind, own.api.as_str()),
            (HostKind::GitLab, "https://gitlab.acme.internal/api/v4")
        );
        // GitHub has no nested namespaces.
        assert!(Repo::parse("https://github.com/a/b/c", &[]).is_err());
    }

    #[test]
    fn an_unsupported_host_or_a_url_without_owner_and_name_is_a_clear_error() {
        let bitbucket = Repo::parse("https://bitbucket.org/a/b.git", &ghe()).unwrap_err();
        assert!(
            bitbucket.contains("`bitbucket.org` is not supported"),
            "{bitbucket}"
        );
        assert!(bitbucket.contains("GITLAB_HOSTS"), "{bitbucket}");
        let short = Repo::parse("https://github.com/only-owner", &[]).unwrap_err();
        assert!(short.contains("<owner>/<name>"), "{short}");
        assert!(Repo::parse("not a url", &[]).is_err());
    }

    #[test]
    fn a_branch_name_git_would_refuse_never_reaches_a_host_api_path() {
        let app = Application::seed().build();
        for (setting, accepted) in [
            ("main", true),
            ("release/2025-08", true),
            ("main:image-updates-{{.SHA256}}", true),
            ("../../../../user", false),
            ("main:../../user", false),
            ("main:a/../../user-{{.SHA256}}", false),
            ("feature/.hidden", false),
            ("a b", false),
            ("refs/heads/x.lock", false),
            ("x@{1}", false),
            ("main:", true),
        ] {
            let located = locate(&app, &git(None, Some(setting), None), "argocd", &[]);
            assert_eq!(
                located.is_ok(),
                accepted,
                "git-branch `{setting}`: {located:?}"
            );
        }
    }

    #[test]
    fn a_repository_url_that_could_reach_another_api_path_or_host_is_refused() {
        for hostile in [
            "https://github.com/../user?",
            "https://github.com/../user",
            "https://github.com/acme/%2e%2e",
            "https://github.com/acme/x%2Fy",
            "https://github.com/ac_me/repo",
            "https://github.com/acme/re po",
            "https://gitlab.com/acme/x@github.com/acme/y",
            "https://deploy:hunter2@github.com/acme/y",
            "git@github.com:acme/x@evil.io:y",
        ] {
            let error = Repo::parse(hostile, &ghe()).expect_err(hostile);
            assert!(!error.contains("hunter2"), "{error}");
        }
        let ok = Repo::parse("https://github.com/acme-1/my.repo_x", &[]).unwrap();
        assert_eq!(ok.full_name(), "acme-1/my.repo_x");
    }

    #[test]
    fn the_default_target_is_the_source_path_override_file_named_as_image_updater_names_it() {
        let app = Application::seed().build();
        let here = locate(&app, &git(None, None, None), "argocd", &[]).unwrap();
        assert_eq!(here.path, "argocd/.argocd-source-aws-pipeline-test.yaml");
        assert_eq!(here.kind, FileKind::Override);
        assert_eq!(here.branch.as_deref(), Some("main"));
        let elsewhere = Application::seed().namespace("team-a").build();
        let there = locate(&elsewhere, &git(None, None, None), "argocd", &[]).unwrap();
        assert_eq!(
            there.path,
            "argocd/.argocd-source-team-a_aws-pipeline-test.yaml"
        );
    }

    #[test]
    fn write_back_targets_resolve_relative_to_the_source_path_or_the_repository_root() {
        let app = Application::seed().build();
        for (target, kind, path) in [
            ("helmvalues", FileKind::HelmValues, "argocd/values.yaml"),
            (
                "helmvalues:values-prod.yaml",
                FileKind::HelmValues,
                "argocd/values-prod.yaml",
            ),
            (
                "helmvalues:/env/prod/values.yaml",
                FileKind::HelmValues,
                "env/prod/values.yaml",
            ),
            ("kustomization", FileKind::Kustomization, "argocd"),
            ("kustomization:../base", FileKind::Kustomization, "base"),
            (
                "kustomization:/overlays/prod",
                FileKind::Kustomization,
                "overlays/prod",
            ),
        ] {
            let at = locate(&app, &git(Some(target), None, None), "argocd", &[]).unwrap();
            assert_eq!((at.kind, at.path.as_str()), (kind, path), "{target}");
        }
        let escape = locate(
            &app,
            &git(Some("helmvalues:../../x.yaml"), None, None),
            "argocd",
            &[],
        );
        assert!(escape.unwrap_err().contains("leaves the repository"));
        // A bare path is a file from the repository's root, as in Image Updater: a values
        // file for a Helm source, unless it is named as an override file.
        for (target, kind, path) in [
            (
                "config/values-prod.yaml",
                FileKind::HelmValues,
                "config/values-prod.yaml",
            ),
            (
                "/config/values-prod.yaml",
                FileKind::HelmValues,
                "config/values-prod.yaml",
            ),
            (
                "argocd/.argocd-source-web.yaml",
                FileKind::Override,
                "argocd/.argocd-source-web.yaml",
            ),
        ] {
            let at = locate(&app, &git(Some(target), None, None), "argocd", &[]).unwrap();
            assert_eq!((at.kind, at.path.as_str()), (kind, path), "{target}");
        }
        for file in ["kustomization.yaml", "kustomization.yml", "Kustomization"] {
            let refused = locate(
                &app,
                &git(Some(&format!("overlays/prod/{file}")), None, None),
                "argocd",
                &[],
            );
            assert!(
                refused
                    .unwrap_err()
                    .contains("looks like a kustomization file"),
                "{file}"
            );
        }
        // `{{.TargetKey}}` hashes what Image Updater's `Target` holds.
        for (target, key_path) in [
            (
                "kustomization:../base",
                "argocd/.argocd-source-aws-pipeline-test.yaml",
            ),
            ("helmvalues:env/values.yaml", "argocd/env/values.yaml"),
            ("/config/values-prod.yaml", "/config/values-prod.yaml"),
        ] {
            let at = locate(&app, &git(Some(target), None, None), "argocd", &[]).unwrap();
            assert_eq!(at.key_path, key_path, "{target}");
            // The key itself: the SHA-256 of `repoURL|branch setting|path`, its first four
            // bytes (computed apart, with Python's hashlib), the setting cut at its `:`.
            let expected = match target {
                "kustomization:../base" => "59a6d7bc",
                "helmvalues:env/values.yaml" => "fa840217",
                _ => "0d97432f",
            };
            assert_eq!(
                target_key(&at, Some("main:image-updater")),
                expected,
                "{target}: {}|main|{}",
                at.url,
                at.key_path
            );
            assert_eq!(target_key(&at, Some("main")), expected, "{target}");
        }
        let kustomize_app = Application::seed()
            .source(json!({"repoURL": "https://github.com/barun/invitation.git", "targetRevision": "main", "path": "overlays/dev", "kustomize": {}}), "Kustomize")
            .build();
        let at = locate(
            &kustomize_app,
            &git(Some("overlays/dev/images.yaml"), None, None),
            "argocd",
            &[],
        )
        .unwrap();
        assert_eq!(
            (at.kind, at.path.as_str()),
            (FileKind::Override, "overlays/dev/images.yaml")
        );
    }

    #[test]
    fn branches_come_from_git_branch_else_the_target_revision_and_a_commit_is_refused() {
        let app = Application::seed().build();
        for (setting, base, write) in [
            (None, Some("main"), None),
            (Some("release"), Some("release"), None),
            (
                Some("main:image-updates"),
                Some("main"),
                Some("image-updates"),
            ),
            (Some(":image-updates"), Some("main"), Some("image-updates")),
            (
                Some("main:updates-{{.SHA256}}"),
                Some("main"),
                Some("updates-{{.SHA256}}"),
            ),
        ] {
            let at = locate(&app, &git(None, setting, None), "argocd", &[]).unwrap();
            assert_eq!(
                (at.branch.as_deref(), at.write_branch.as_deref()),
                (base, write),
                "{setting:?}"
            );
        }
        let head = Application::seed()
            .with(|a| a["spec"]["source"]["targetRevision"] = json!("HEAD"))
            .build();
        assert_eq!(
            locate(&head, &git(None, None, None), "argocd", &[])
                .unwrap()
                .branch,
            None
        );
        let pinned = Application::seed()
            .with(|a| {
                a["spec"]["source"]["targetRevision"] =
                    json!("0123456789abcdef0123456789abcdef01234567")
            })
            .build();
        let error = locate(&pinned, &git(None, None, None), "argocd", &[]).unwrap_err();
        assert!(
            error.contains("is a commit, not a branch: set git-branch"),
            "{error}"
        );
        assert!(locate(&pinned, &git(None, Some("main"), None), "argocd", &[]).is_ok());
        for bad in ["a:b:c", "main:{{.Images}}"] {
            assert!(
                locate(&app, &git(None, Some(bad), None), "argocd", &[]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_chart_repository_source_needs_git_repository_and_multi_source_picks_the_named_repo() {
        let chart = Application::seed()
            .with(|a| {
                a["spec"]["source"] = json!({"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.0", "helm": {}})
            })
            .build();
        let error = locate(&chart, &git(None, None, None), "argocd", &[]).unwrap_err();
        assert!(error.contains("set git-repository"), "{error}");
        let multi = Application::seed()
            .sources(
                vec![
                    json!({"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.0", "helm": {"valueFiles": ["$values/web/values.yaml"]}}),
                    json!({"repoURL": "https://github.com/acme/values.git", "targetRevision": "main", "ref": "values"}),
                ],
                &["Helm", "Directory"],
            )
            .build();
        let at = locate(
            &multi,
            &git(
                Some("helmvalues:/web/values.yaml"),
                None,
                Some("https://github.com/acme/values.git"),
            ),
            "argocd",
            &[],
        )
        .unwrap();
        assert_eq!(
            (at.source, at.path.as_str(), at.branch.as_deref()),
            (1, "web/values.yaml", Some("main"))
        );
    }

    #[test]
    fn branch_templates_are_filled_as_image_updater_fills_them() {
        let app = Application::seed().build();
        let changes = vec![Change {
            image: "barun-dev-ecr".into(),
            alias: "app".into(),
            old_tag: "20250825-120000".into(),
            new_tag: "20250825-153012".into(),
        }];
        let name = branch_name(
            "image-updater-{{.AppName}}-{{ .SHA256 }}",
            &app,
            "",
            &changes,
        );
        // sha256("barun-dev-ecr-20250825-120000-20250825-153012,")
        let digest = aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA256,
            b"barun-dev-ecr-20250825-120000-20250825-153012,",
        );
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(name, format!("image-updater-aws-pipeline-test-{hex}"));
        assert_eq!(branch_name(&"x".repeat(300), &app, "", &changes).len(), 255);
        // Image Updater's documented `range` over the changed images.
        assert_eq!(
            branch_name(
                "image-updater{{range .Images}}-{{.Name}}-{{.NewTag}}{{end}}",
                &app,
                "",
                &changes
            ),
            "image-updater-barun-dev-ecr-20250825-153012"
        );
        assert_eq!(
            branch_name(
                "u/{{.TargetKey}}{{range .Images}}/{{.Alias}}{{end}}",
                &app,
                "1a2b3c4d",
                &changes
            ),
            "u/1a2b3c4d/app"
        );
    }

    #[test]
    fn a_branch_template_outside_the_supported_subset_is_refused_naming_what_is_offered() {
        for (template, expected) in [
            ("x-{{.Images}}", "`{{.Images}}` is not supported"),
            (
                "x{{range .Images}}{{.AppName}}{{end}}",
                "inside `{{range .Images}}`",
            ),
            ("x{{range .Images}}{{.Name}}", "without `{{end}}`"),
            ("x-{{.AppName", "an unclosed"),
            ("x-{{ printf \"%s\" .AppName }}", "is not supported"),
        ] {
            let error = check_template(template).unwrap_err();
            assert!(error.contains(expected), "{template}: {error}");
        }
        assert!(
            check_template("main-{{range .Images}}{{.Name}}-{{.OldTag}}{{end}}-{{.SHA256}}")
                .is_ok()
        );
    }

    #[test]
    fn the_commit_message_is_image_updaters_default_template() {
        let changes = vec![Change {
            image: "barun-dev-ecr".into(),
            alias: "app".into(),
            old_tag: "20250825-120000".into(),
            new_tag: "20250825-153012".into(),
        }];
        assert_eq!(
            commit_message("aws-pipeline-test", &changes),
            "build: automatic update of aws-pipeline-test\n\nupdates image barun-dev-ecr tag '20250825-120000' to '20250825-153012'\n"
        );
    }

    /// The decision's effect on the effective app, as `patch::plan` writes it: the image
    /// and tag parameters set.
    fn moved(effective: &Value, tag: &str) -> Value {
        let mut patched = effective.clone();
        let params = patched["spec"]["source"]["helm"]["parameters"]
            .as_array_mut()
            .unwrap();
        for (name, value) in [("image.repository", IMAGE), ("image.tag", tag)] {
            match params.iter_mut().find(|p| p["name"] == name) {
                Some(p) => p["value"] = json!(value),
                None => params.push(json!({"name": name, "value": value, "forceString": true})),
            }
        }
        patched
    }

    #[test]
    fn the_override_file_holds_the_managed_parameters_sorted_with_forcestring() {
        let app = Application::seed().build();
        let config = seed_config(&[]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let effective = effective_app(&app, &at, None, &images).unwrap();
        let text = render(&at, None, &moved(&effective, "20250825-153012"), &images)
            .unwrap()
            .unwrap();
        assert_eq!(
            text,
            format!(
                "helm:\n  parameters:\n  - name: image.repository\n    value: {IMAGE}\n    forcestring: true\n  - name: image.tag\n    value: 20250825-153012\n    forcestring: true\n"
            )
        );
        // Read back, the file is what the decision sees, and the same move changes nothing.
        let again = effective_app(&app, &at, Some(&text), &images).unwrap();
        let params = &again["spec"]["source"]["helm"]["parameters"];
        assert_eq!(params[1]["value"], "20250825-153012");
        assert_eq!(
            render(&at, Some(&text), &moved(&again, "20250825-153012"), &images).unwrap(),
            None
        );
    }

    #[test]
    fn entries_of_the_override_file_we_do_not_manage_are_kept() {
        let app = Application::seed().build();
        let config = seed_config(&[]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let existing = "helm:\n  parameters:\n  - name: replicaCount\n    value: \"3\"\n    forcestring: false\n  - name: image.tag\n    value: 20250825-120000\n    forcestring: true\n";
        let effective = effective_app(&app, &at, Some(existing), &images).unwrap();
        let text = render(
            &at,
            Some(existing),
            &moved(&effective, "20250825-153012"),
            &images,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            text,
            format!(
                "helm:\n  parameters:\n  - name: image.repository\n    value: {IMAGE}\n    forcestring: true\n  - name: image.tag\n    value: 20250825-153012\n    forcestring: true\n  - name: replicaCount\n    value: \"3\"\n    forcestring: false\n"
            )
        );
    }

    #[test]
    fn the_tag_in_git_wins_over_the_application_spec() {
        let app = Application::seed().build();
        let config = seed_config(&[]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let file = "helm:\n  parameters:\n  - name: image.tag\n    value: 20250901-000000\n    forcestring: true\n";
        let effective = effective_app(&app, &at, Some(file), &images).unwrap();
        let params = effective["spec"]["source"]["helm"]["parameters"]
            .as_array()
            .unwrap();
        // Argo CD's merge replaces the list: the file's parameters are what renders.
        assert_eq!(
            params,
            &vec![json!({"name": "image.tag", "value": "20250901-000000", "forcestring": true})]
        );
    }

    #[test]
    fn a_values_file_gets_its_tag_changed_and_nothing_else() {
        let app = Application::seed()
            .with(|a| a["spec"]["source"]["helm"] = json!({"valueFiles": ["values.yaml"]}))
            .build();
        let config = seed_config(&[("write-back-target", "helmvalues")]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let values = "# Default values for invitation.\nreplicaCount: 2\n\nimage:\n  repository: barun-dev-ecr   # short form, kept\n  # bumped by the updater\n  tag: \"20250825-120000\"\n  pullPolicy: IfNotPresent\n";
        let effective = effective_app(&app, &at, Some(values), &images).unwrap();
        assert_eq!(
            effective["spec"]["source"]["helm"]["parameters"][1]["value"],
            "20250825-120000"
        );
        let text = render(
            &at,
            Some(values),
            &moved(&effective, "20250825-153012"),
            &images,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            text,
            values.replace("\"20250825-120000\"", "\"20250825-153012\"")
        );
    }

    /// The Git files channel: keys and names from annotations (or ImageUpdater objects) that a
    /// YAML 1.2 editor writes as one scalar but Helm's and kustomize's YAML 1.1 reader would
    /// read as more. The annotation check refuses them first; here they reach the writer as
    /// if it had not, and the read-back must refuse every commit.
    #[test]
    fn hostile_keys_never_reach_a_commit_that_helm_or_kustomize_would_read_differently() {
        let app = Application::seed()
            .with(|a| a["spec"]["source"]["helm"] = json!({"valueFiles": ["values.yaml"]}))
            .build();
        let config = seed_config(&[("write-back-target", "helmvalues")]);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let values = "image:\n  repository: barun-dev-ecr\n  tag: \"20250825-120000\"\n";
        let injected = "securityContext: {privileged: true}";
        for separator in [
            "\u{2028}",
            "\u{2029}",
            "\u{85}",
            "\u{2028}\u{2028}",
            " \u{2028}",
        ] {
            for key in [
                format!("image.tag{separator}{injected}"),
                format!("tag{separator}{injected}"),
                format!("image.tag\"{separator}{injected}"),
            ] {
                let mut image = images_of(&config)[0].clone();
                image.helm = HelmTarget::NameAndTag {
                    name: "image.repository".into(),
                    tag: key.clone(),
                };
                let mut patched = app.clone();
                patched["spec"]["source"]["helm"]["parameters"] =
                    json!([{"name": key, "value": "20250825-153012"}]);
                let written = render(&at, Some(values), &patched, &[&image]);
                let error = written
                    .err()
                    .unwrap_or_else(|| panic!("{key:?} was committed"));
                assert!(
                    error.contains("not committed") || error.contains("cannot edit"),
                    "{key:?}: {error}"
                );
            }
        }
        // A kustomize image name that would add an `images` entry kustomize sees.
        let app = Application::seed()
            .source(json!({"repoURL": "https://github.com/barun/invitation.git", "targetRevision": "main", "path": "overlays/dev", "kustomize": {}}), "Kustomize")
            .build();
        let config = seed_config(&[("write-back-target", "kustomization")]);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let file = "images:\n  - name: invitation\n    newTag: \"1\"\n";
        for separator in ["\u{2028}", "\u{85}", "\u{2029}"] {
            let name = format!(
                "busybox{separator}  - name: busybox{separator}    newName: evil.example/backdoor"
            );
            let mut image = images_of(&config)[0].clone();
            image.kustomize_image_name = Some(name.clone());
            let mut patched = app.clone();
            patched["spec"]["source"]["kustomize"]["images"] =
                json!([format!("{name}=evil.example/backdoor:latest")]);
            if let Ok(Some(text)) = render(&at, Some(file), &patched, &[&image]) {
                panic!("{name:?} was committed: {text}");
            }
        }
    }

    #[test]
    fn a_kustomization_gets_its_images_entry_changed_and_the_rest_byte_identical() {
        let app = Application::seed()
            .source(json!({"repoURL": "https://github.com/barun/invitation.git", "targetRevision": "main", "path": "overlays/dev", "kustomize": {}}), "Kustomize")
            .build();
        let config = seed_config(&[
            ("write-back-target", "kustomization"),
            ("app.kustomize.image-name", "invitation"),
        ]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        assert_eq!(at.candidates()[0], "overlays/dev/kustomization.yaml");
        let file = format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base # shared\nimages:\n  - name: invitation\n    newName: {IMAGE}\n    newTag: \"20250825-120000\"\n    digest: sha256:aaaa\n"
        );
        let effective = effective_app(&app, &at, Some(&file), &images).unwrap();
        let entry = effective["spec"]["source"]["kustomize"]["images"][0]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            entry,
            format!("invitation={IMAGE}:20250825-120000@sha256:aaaa")
        );
        let mut patched = effective.clone();
        patched["spec"]["source"]["kustomize"]["images"][0] =
            json!(format!("invitation={IMAGE}:20250825-153012"));
        let text = render(&at, Some(&file), &patched, &images)
            .unwrap()
            .unwrap();
        assert_eq!(
            text,
            file.replace("\"20250825-120000\"", "\"20250825-153012\"")
                .replace("    digest: sha256:aaaa\n", "")
        );
        let missing = render(&at, None, &patched, &images).unwrap_err();
        assert!(
            missing.contains("no kustomization file in `overlays/dev`"),
            "{missing}"
        );
    }

    /// A deliberate difference from Image Updater (docs/compatibility.md): another image the
    /// Application's spec overrides is never written to a kustomization or override file.
    #[test]
    fn only_the_tracked_kustomize_image_is_written_never_the_specs_other_overrides() {
        let app = Application::seed()
            .source(json!({"repoURL": "https://github.com/barun/invitation.git", "targetRevision": "main", "path": "overlays/dev",
                           "kustomize": {"images": ["sidecar=r.example.com/sidecar:hand-set"]}}), "Kustomize")
            .build();
        for target in ["kustomization", ""] {
            let config = seed_config(&[
                ("write-back-target", target),
                ("app.kustomize.image-name", "invitation"),
            ]);
            let images = images_of(&config);
            let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
            let file = if target.is_empty() {
                format!(
                    "kustomize:\n  images:\n  - sidecar=r.example.com/sidecar:v1\n  - invitation={IMAGE}:20250825-120000\n"
                )
            } else {
                format!(
                    "images:\n  - name: sidecar\n    newTag: v1\n  - name: invitation\n    newName: {IMAGE}\n    newTag: \"20250825-120000\"\n"
                )
            };
            let effective = effective_app(&app, &at, Some(&file), &images).unwrap();
            let mut patched = effective.clone();
            let list = patched["spec"]["source"]["kustomize"]["images"]
                .as_array_mut()
                .unwrap();
            for entry in list.iter_mut() {
                if entry.as_str().is_some_and(|e| e.starts_with("invitation")) {
                    *entry = json!(format!("invitation={IMAGE}:20250825-153012"));
                }
            }
            let text = render(&at, Some(&file), &patched, &images)
                .unwrap()
                .unwrap();
            assert!(text.contains("20250825-153012"), "{target}: {text}");
            assert!(!text.contains("hand-set"), "{target}: {text}");
            assert!(
                text.contains("sidecar") && text.contains("v1"),
                "{target}: {text}"
            );
        }
    }

    /// A deliberate difference (docs/compatibility.md): Image Updater re-marshals the override
    /// file, adding `forcestring: false` to entries without it and dropping other keys.
    #[test]
    fn the_override_file_keeps_other_keys_and_entries_exactly_as_written() {
        let app = Application::seed().build();
        let config = seed_config(&[]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let existing = "helm:\n  parameters:\n  - name: replicaCount\n    value: \"3\"\n  valueFiles:\n  - values-prod.yaml\n";
        let effective = effective_app(&app, &at, Some(existing), &images).unwrap();
        let text = render(
            &at,
            Some(existing),
            &moved(&effective, "20250825-153012"),
            &images,
        )
        .unwrap()
        .unwrap();
        assert!(
            text.contains("  - name: replicaCount\n    value: \"3\"\n"),
            "{text}"
        );
        assert!(!text.contains("forcestring: false"), "{text}");
        assert!(text.contains("valueFiles:\n  - values-prod.yaml"), "{text}");
    }

    #[test]
    fn the_override_file_keeps_lists_of_lists_as_written() {
        let app = Application::seed().build();
        let config = seed_config(&[]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        let existing = "extra:\n  matrix:\n  - - a\n    - b\n  - []\n  - - - c\n    - d\n";
        let effective = effective_app(&app, &at, Some(existing), &images).unwrap();
        let text = render(
            &at,
            Some(existing),
            &moved(&effective, "20250825-153012"),
            &images,
        )
        .unwrap()
        .unwrap();
        let read: Value = crate::yaml::from_str(&text).unwrap();
        assert_eq!(
            read["extra"]["matrix"],
            json!([["a", "b"], [], [["c"], "d"]]),
            "{text}"
        );
    }

    #[test]
    fn an_override_file_that_would_grow_past_the_cap_written_out_is_refused() {
        let app = Application::seed().build();
        let config = seed_config(&[]);
        let images = images_of(&config);
        let at = locate(&app, &config.write_back.clone().unwrap(), "argocd", &[]).unwrap();
        // 700 KiB of string behind seven aliases of a 100 KiB anchor: small as written.
        let existing = format!(
            "s: &s \"{}\"\nl: [{}]\n",
            "x".repeat(100 << 10),
            ["*s"; 7].join(", ")
        );
        let effective = effective_app(&app, &at, Some(&existing), &images).unwrap();
        let refused = render(
            &at,
            Some(&existing),
            &moved(&effective, "20250825-153012"),
            &images,
        )
        .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("over the 524288 bytes (512 KiB)"),
            "{refused}"
        );
    }
}
