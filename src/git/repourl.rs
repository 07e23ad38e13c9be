//! A Git repository URL parsed once into the parts credentials are scoped by: scheme, host,
//! port and path segments.
//!
//! Which secret serves which repository, and which host an API call goes to, are both
//! decided on these parts, never on the URL's text: a string prefix of
//! `https://gitlab.com/acme/x@github.com/acme/y` is `https://gitlab.com/acme/`, while a
//! parser that takes the host after the last `@` sends the request to github.com. So a URL
//! with a password, an `@` in its path, a query or a fragment is refused outright, and a
//! scope matches only at path-segment boundaries.

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
