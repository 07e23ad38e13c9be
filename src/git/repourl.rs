//! A Git repository URL parsed once into the parts credentials are scoped by: scheme, host,
//! port and path segments; and into the repository a host's API names ([`Repo`]).
//!
//! Which secret serves which repository, and which host an API call goes to, are both
//! decided on these parts, never on the URL's text: a string prefix of
//! `https://gitlab.com/acme/x@github.com/acme/y` is `https://gitlab.com/acme/`, while a
//! parser that takes the host after the last `@` sends the request to github.com. So a URL
//! with a password, an `@` in its path, a query or a fragment is refused outright, and a
//! scope matches only at path-segment boundaries.

use crate::config::EnterpriseHost;
use crate::failure::Refused;

/// A repository URL's parts, in the forms Argo CD accepts: `https://`, `http://`, `ssh://`,
/// `git://` and scp-like `[user@]host:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoUrl {
    /// `ssh` for the scp-like form.
    pub scheme: String,
    /// Lowercased.
    pub host: String,
    /// `None` for the scheme's default port.
    pub port: Option<u16>,
    /// The path's segments, without a trailing `.git`; hosts compare them case-insensitively.
    pub segments: Vec<String>,
}

impl RepoUrl {
    /// Parses `text`, refusing anything that could make the host or the path ambiguous.
    pub fn parse(text: &str) -> Result<Self, Refused> {
        let text = text.trim();
        let shown = crate::redact::url(text);
        let not_a_url = || format!("`{shown}` is not a Git repository URL");
        // The URL parser resolves `..` (and `%2e%2e`) away, so a path that would climb is
        // refused on its text, before it can name a repository it does not spell.
        let climbs = text.split(['/', ':']).any(|piece| {
            let piece = piece.to_ascii_lowercase().replace("%2e", ".");
            piece == "." || piece == ".."
        });
        if climbs {
            return Err(Refused::from(format!(
                "`{shown}` has a `.` or `..` path segment"
            )));
        }
        let (scheme, host, port, path) = if text.contains("://") {
            let url = url::Url::parse(text).map_err(|_| not_a_url())?;
            if url.password().is_some() {
                return Err(Refused::from(format!(
                    "`{shown}` carries a password in the URL: keep credentials in a secret, never in the repository URL"
                )));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(Refused::from(format!(
                    "`{shown}` has a query or fragment, which no repository URL has"
                )));
            }
            let host = url.host_str().ok_or_else(not_a_url)?.to_ascii_lowercase();
            (
                url.scheme().to_string(),
                host,
                url.port(),
                url.path().to_string(),
            )
        } else {
            // scp-like: `[user@]host:path`; the user part may not hide a path or a port.
            let (authority, path) = text.split_once(':').ok_or_else(not_a_url)?;
            let host = match authority.split_once('@') {
                Some((user, host)) if !user.is_empty() && !host.contains('@') => host,
                Some(_) => return Err(Refused::from(not_a_url())),
                None => authority,
            };
            if host.is_empty() || host.contains(['/', ' ']) {
                return Err(Refused::from(not_a_url()));
            }
            (
                "ssh".to_string(),
                host.to_ascii_lowercase(),
                None,
                path.to_string(),
            )
        };
        if path.contains('@') || path.to_ascii_lowercase().contains("%40") {
            return Err(Refused::from(format!(
                "`{shown}` has `@` in its path, which would make its host ambiguous: write the repository URL as `<scheme>://<host>/<owner>/<name>`"
            )));
        }
        let trimmed = path.trim_matches('/');
        let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
        let segments: Vec<String> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').map(str::to_string).collect()
        };
        if segments
            .iter()
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(Refused::from(format!(
                "`{shown}` has an empty, `.` or `..` path segment"
            )));
        }
        Ok(Self {
            scheme,
            host,
            port,
            segments,
        })
    }

    /// Whether a credential scoped to `scope` may serve this repository: same scheme, host
    /// and port, and `scope`'s path segments a leading run of this one's.
    pub fn within(&self, scope: &RepoUrl) -> bool {
        self.scheme == scope.scheme
            && self.host == scope.host
            && self.port == scope.port
            && scope.segments.len() <= self.segments.len()
            && scope
                .segments
                .iter()
                .zip(&self.segments)
                .all(|(a, b)| a.eq_ignore_ascii_case(b))
    }

    /// The same repository: [`RepoUrl::within`] each other.
    pub fn same_repository(&self, other: &RepoUrl) -> bool {
        self.segments.len() == other.segments.len() && self.within(other)
    }
}

/// Which kind of host a repository is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKind {
    GitHub,
    /// GitLab (gitlab.com or self-managed); `owner` is the namespace, subgroups included.
    GitLab,
    /// AWS CodeCommit in `region` (empty: the function's own region).
    CodeCommit {
        region: String,
    },
}

/// A repository on a host we can commit to through its API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub kind: HostKind,
    /// `https://api.github.com` or an Enterprise `https://ghe.example.com/api/v3`; empty for
    /// CodeCommit, which the AWS SDK reaches.
    pub api: String,
    pub host: String,
    /// Empty for CodeCommit, whose repositories have a name only.
    pub owner: String,
    pub name: String,
}

impl Repo {
    /// `owner/name`, as GitHub's GraphQL `repositoryNameWithOwner` wants it; a CodeCommit
    /// repository's name.
    pub fn full_name(&self) -> String {
        if self.owner.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.owner, self.name)
        }
    }

    /// Parses the HTTPS (`https://github.com/o/r.git`), scp (`git@github.com:o/r.git`) and
    /// `ssh://` forms; the host decides the API. CodeCommit's
    /// `https://git-codecommit.<region>.amazonaws.com/v1/repos/<name>` and
    /// `codecommit::<region>://<name>` (git-remote-codecommit) forms are CodeCommit.
    pub fn parse(url: &str, enterprise: &[EnterpriseHost]) -> Result<Self, Refused> {
        let url = url.trim();
        if let Some(repo) = codecommit(url)? {
            return Ok(repo);
        }
        let parsed = RepoUrl::parse(url)?;
        let host = parsed.host;
        let known = enterprise
            .iter()
            .find(|e| e.host.eq_ignore_ascii_case(&host));
        let (kind, api) = if host == "github.com" || host == "www.github.com" {
            (HostKind::GitHub, "https://api.github.com".to_string())
        } else if host == "gitlab.com" {
            (HostKind::GitLab, "https://gitlab.com/api/v4".to_string())
        } else if let Some(e) = known {
            let kind = if e.gitlab {
                HostKind::GitLab
            } else {
                HostKind::GitHub
            };
            (kind, e.api.trim_end_matches('/').to_string())
        } else {
            return Err(Refused::from(format!(
                "repository host `{host}` is not supported for git write-back: GitHub (github.com) and the GitHub Enterprise hosts in GITHUB_ENTERPRISE_HOSTS, GitLab (gitlab.com) and the hosts in GITLAB_HOSTS, and AWS CodeCommit are"
            )));
        };
        // GitLab namespaces nest (`group/subgroup/project`); GitHub's are one level.
        let segments: Vec<&str> = parsed.segments.iter().map(String::as_str).collect();
        let nested = kind == HostKind::GitLab && segments.len() > 2;
        if let Some(bad) = segments.iter().enumerate().find_map(|(i, segment)| {
            let owner = i + 1 < segments.len();
            (!is_repository_segment(&kind, owner, segment)).then_some(*segment)
        }) {
            return Err(Refused::from(format!(
                "`{bad}` in `{}` is not a valid owner, group or repository name (letters, digits, `-`, `_` and `.`; a GitHub owner: letters, digits and `-`)",
                crate::redact::url(url)
            )));
        }
        match segments.as_slice() {
            [owner @ .., name]
                if (owner.len() == 1 || nested)
                    && owner.iter().all(|s| !s.is_empty())
                    && !name.is_empty() =>
            {
                Ok(Self {
                    kind,
                    api,
                    host,
                    owner: owner.join("/"),
                    name: name.to_string(),
                })
            }
            _ => Err(Refused::from(format!(
                "`{}` does not name a repository as `<host>/<owner>/<name>`",
                crate::redact::url(url)
            ))),
        }
    }
}

/// A segment the host's REST paths can carry as it is: GitHub owners are letters, digits and
/// single hyphens (at most 39); repository names and GitLab groups letters, digits, `-`, `_`
/// and `.`, never `.` or `..` alone.
fn is_repository_segment(kind: &HostKind, owner: bool, segment: &str) -> bool {
    let name_chars = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if segment.is_empty() || segment == "." || segment == ".." || segment.len() > 100 {
        return false;
    }
    match kind {
        HostKind::GitHub if owner => {
            segment.len() <= 39
                && !segment.starts_with('-')
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        }
        _ => name_chars(segment) && !segment.starts_with('-'),
    }
}

/// A CodeCommit repository URL, or `None` for another host.
fn codecommit(url: &str) -> Result<Option<Repo>, String> {
    let invalid = || format!("`{url}` is not a CodeCommit repository URL");
    let (region, name) = if let Some(rest) = url.strip_prefix("codecommit:") {
        // codecommit://name, codecommit::region://name, codecommit::region://profile@name
        let (region, name) = match rest.strip_prefix("//") {
            Some(name) => ("", name),
            None => rest
                .strip_prefix(':')
                .and_then(|r| r.split_once("://"))
                .ok_or_else(invalid)?,
        };
        let name = name.rsplit_once('@').map_or(name, |(_, n)| n);
        (region.to_string(), name.to_string())
    } else {
        let without_scheme = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("ssh://"))
            .unwrap_or(url);
        let without_user = without_scheme
            .split_once('@')
            .filter(|(user, _)| !user.contains('/'))
            .map_or(without_scheme, |(_, rest)| rest);
        let Some((host, path)) = without_user.split_once('/') else {
            return Ok(None);
        };
        let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
        // The region's own partition suffix, and nothing after it.
        let Some(region) = host
            .strip_prefix("git-codecommit.")
            .and_then(|h| h.split_once('.'))
            .map(|(region, _)| region.to_string())
            .filter(|region| host == crate::partition::codecommit_git_host(region))
        else {
            return Ok(None);
        };
        let name = path.strip_prefix("v1/repos/").ok_or_else(invalid)?;
        (region, name.trim_end_matches('/').to_string())
    };
    if name.is_empty() || name.contains('/') {
        return Err(invalid());
    }
    let host = if region.is_empty() {
        "git-codecommit".to_string()
    } else {
        crate::partition::codecommit_git_host(&region)
    };
    Ok(Some(Repo {
        kind: HostKind::CodeCommit { region },
        api: String::new(),
        host,
        owner: String::new(),
        name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> RepoUrl {
        RepoUrl::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn a_scope_matches_only_at_segment_boundaries_on_the_same_host() {
        let scope = parsed("https://gitlab.com/acme/");
        for (repository, served) in [
            ("https://gitlab.com/acme/deploy.git", true),
            ("https://GitLab.com/ACME/deploy", true),
            ("https://gitlab.com/acme/group/deploy", true),
            ("https://gitlab.com/acme-evil/deploy", false),
            ("https://gitlab.com/acm/deploy", false),
            ("http://gitlab.com/acme/deploy", false),
            ("https://gitlab.com:8443/acme/deploy", false),
            ("https://github.com/acme/deploy", false),
            ("https://gitlab.com.evil.io/acme/deploy", false),
        ] {
            assert_eq!(parsed(repository).within(&scope), served, "{repository}");
        }
        assert!(parsed("https://gitlab.com/x/y").within(&parsed("https://gitlab.com")));
    }

    #[test]
    fn a_url_that_could_name_two_hosts_or_carries_a_password_is_refused() {
        for hostile in [
            "https://gitlab.com/acme/x@github.com/acme/y",
            "https://gitlab.com/acme/x%40github.com/acme/y",
            "https://user:hunter2@github.com/acme/y",
            "https://github.com/acme/y?ref=main",
            "https://github.com/acme/y#frag",
            "https://github.com/acme/../other/y",
            "git@gitlab.com:acme/x@github.com:acme/y",
            "a@b@github.com:acme/y",
            "not a url",
        ] {
            let error = RepoUrl::parse(hostile).expect_err(hostile);
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn every_usual_form_names_its_host_and_path() {
        for (text, scheme, host, port, segments) in [
            (
                "https://github.com/a/b.git",
                "https",
                "github.com",
                None,
                vec!["a", "b"],
            ),
            (
                "https://x-access-token@github.com/a/b",
                "https",
                "github.com",
                None,
                vec!["a", "b"],
            ),
            (
                "git@github.com:a/b.git",
                "ssh",
                "github.com",
                None,
                vec!["a", "b"],
            ),
            (
                "ssh://git@ghe.io:2222/a/b",
                "ssh",
                "ghe.io",
                Some(2222),
                vec!["a", "b"],
            ),
        ] {
            let url = parsed(text);
            assert_eq!(
                (url.scheme.as_str(), url.host.as_str(), url.port),
                (scheme, host, port),
                "{text}"
            );
            assert_eq!(url.segments, segments, "{text}");
        }
        assert!(
            parsed("https://github.com/a/b.git/")
                .same_repository(&parsed("https://github.com/A/B"))
        );
        assert!(
            !parsed("https://github.com/a/b/c").same_repository(&parsed("https://github.com/a/b"))
        );
    }
}
