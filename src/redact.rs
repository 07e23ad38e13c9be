//! What may leave the function in a message, and how much may come into it from outside.
//!
//! A URL is written into a report, a log line, an invocation error (which lands in the
//! dead-letter queue) or a notification only as scheme, host, port and path: the query of an
//! ECR presigned layer URL carries a session token and a signature, and the userinfo of a
//! repoURL carries a password. [`scrub`] is applied at every edge where text leaves, so a
//! message built anywhere below cannot carry one out.
//!
//! Answers from Git hosts and registries are read through [`read_capped`]: `Content-Length`
//! is checked first, then the body is streamed and cut at the cap, so a hostile or broken
//! server cannot make the function hold more than the cap in memory.

/// A URL as it may appear in a message: no userinfo, no query, no fragment.
pub fn url(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) if parsed.has_host() => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        // Not parseable as a URL: cut what could be a query, then what could be userinfo.
        _ => {
            let cut = text.split(['?', '#']).next().unwrap_or_default();
            let host =
                |authority: &'_ str| authority.rsplit('@').next().unwrap_or_default().to_string();
            match cut.split_once("://") {
                Some((scheme, rest)) => match rest.split_once('/') {
                    Some((authority, path)) => format!("{scheme}://{}/{path}", host(authority)),
                    None => format!("{scheme}://{}", host(rest)),
                },
                None => scp_without_userinfo(cut).unwrap_or_else(|| cut.to_string()),
            }
        }
    }
}

/// Git's scp-like form `user@host:path` without its userinfo (`host:path`); `None` when
/// `word` is not of that form. The user part can be a token (`ghp_…@github.com:o/r`).
fn scp_without_userinfo(word: &str) -> Option<String> {
    let (user, rest) = word.rsplit_once('@')?;
    let (host, path) = rest.split_once(':')?;
    // A user has no `/` (`owner/repo@branch:file`, as messages name a commit's place, is not
    // a URL), and a host has a dot.
    let host_ok = host.contains('.')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'));
    (!user.contains('/') && host_ok && !path.is_empty() && !path.starts_with(char::is_whitespace))
        .then(|| rest.to_string())
}

/// Where a word of free text starts: after white space, an opening bracket or a quote.
fn word_start(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | '[' | '<' | '"' | '\'' | '`' | '{' | '=' | ',')
}

/// `text` with the userinfo of every scp-like Git URL in it removed.
fn scrub_scp(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let start = rest[..at].rfind(word_start).map_or(0, |i| {
            i + rest[i..].chars().next().map_or(1, char::len_utf8)
        });
        let end = rest[at..].find(url_end).map_or(rest.len(), |i| at + i);
        let word = &rest[start..end];
        match scp_without_userinfo(word) {
            Some(bare) if !word.contains("://") => {
                out.push_str(&rest[..start]);
                out.push_str(&bare);
                rest = &rest[end..];
            }
            _ => {
                out.push_str(&rest[..=at]);
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where a URL written in free text ends: at white space, or at a closing bracket or quote
/// (reqwest writes `for url (https://…)`; reports quote with backticks).
fn url_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, ')' | ']' | '>' | '"' | '\'' | '`' | '}')
}

/// `text` with every URL in it reduced by [`url()`], scp-like Git URLs (`user@host:path`)
/// included.
pub fn scrub(text: &str) -> String {
    let reduced = scrub_schemes(text);
    if reduced.contains('@') {
        scrub_scp(&reduced)
    } else {
        reduced
    }
}

/// `text` with every `scheme://` URL in it reduced by [`url()`].
fn scrub_schemes(text: &str) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters, digits and `+.-` just before `://`.
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
            .map_or(0, |i| i + 1);
        let end = rest[at..].find(url_end).map_or(rest.len(), |i| at + i);
        if scheme_start == at {
            // `://` with no scheme before it: not a URL.
            out.push_str(&rest[..at + 3]);
            rest = &rest[at + 3..];
            continue;
        }
        out.push_str(&rest[..scheme_start]);
        out.push_str(&url(&rest[scheme_start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Why a body was not read whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("the answer is larger than {limit} bytes ({size}); not read")]
    TooLarge { limit: usize, size: String },
    #[error("the answer stopped arriving: {0}")]
    Transport(String),
}

/// The body of `response`, at most `limit` bytes: a declared `Content-Length` over the
/// limit is refused before a byte is read, and a body that runs past it is cut off there.
pub async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    if let Some(declared) = response.content_length()
        && declared > limit as u64
    {
        return Err(ReadError::TooLarge {
            limit,
            size: format!("{declared} bytes declared"),
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ReadError::Transport(http_error(&e)))?
    {
        if body.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge {
                limit,
                size: "more sent than that".into(),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A reqwest error as a message: reqwest writes the URL it was for, query and all.
pub fn http_error(error: &reqwest::Error) -> String {
    scrub(&error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presigned_url_loses_its_query_and_keeps_host_and_path() {
        assert_eq!(
            url(
                "https://prod-region-starport-layer-bucket.s3.amazonaws.com/ab/cd?X-Amz-Security-Token=SECRET&X-Amz-Signature=SIG"
            ),
            "https://prod-region-starport-layer-bucket.s3.amazonaws.com/ab/cd"
        );
    }

    #[test]
    fn userinfo_is_removed_from_a_repository_url() {
        assert_eq!(
            url("https://deploy:hunter2@github.com/acme/deploy.git"),
            "https://github.com/acme/deploy.git"
        );
        assert_eq!(
            url("ssh://git:pw@example.com:2222/acme/x"),
            "ssh://example.com:2222/acme/x"
        );
    }

    #[test]
    fn an_unparseable_url_still_loses_query_and_userinfo() {
        assert_eq!(url("https://user:pw@[bad/x?token=1"), "https://[bad/x");
        assert_eq!(url("https://u:p@host"), "https://host/");
    }

    #[test]
    fn every_url_in_free_text_is_scrubbed_and_the_rest_kept() {
        for (text, expected) in [
            (
                "error sending request for url (https://h/p?X-Amz-Security-Token=S&a=b,c)",
                "error sending request for url (https://h/p)",
            ),
            (
                "`https://u:secret@github.com/a/b` and `http://x/y?sig=1`: failed",
                "`https://github.com/a/b` and `http://x/y`: failed",
            ),
            ("no url here: a://", "no url here: a://"),
            ("odd :// alone", "odd :// alone"),
            ("nothing", "nothing"),
        ] {
            assert_eq!(scrub(text), expected, "{text}");
        }
    }

    #[test]
    fn scrubbing_never_leaves_a_planted_secret_in_any_position() {
        let secret = "PLANTEDSECRET";
        for text in [
            format!("https://h/p?X-Amz-Security-Token={secret}"),
            format!("(https://u:{secret}@h/p)"),
            format!("x https://h/p#{secret} y"),
            format!("git+https://a:{secret}@h/x.git"),
            format!("\"https://h/?q={secret}\""),
            format!("{secret}@github.com:a/b"),
            format!("repoURL `ghp_{secret}@github.com:acme/deploy.git` is not served"),
            format!("(x:{secret}@gitlab.example.com:group/p.git)"),
            format!("url={secret}@git.example.com:p, other"),
        ] {
            assert!(!scrub(&text).contains(secret), "{text} -> {}", scrub(&text));
        }
    }

    #[test]
    fn an_scp_like_url_loses_its_userinfo_and_keeps_host_and_path() {
        for (text, expected) in [
            ("ghp_X@github.com:a/b", "github.com:a/b"),
            (
                "git@github.com:acme/deploy.git",
                "github.com:acme/deploy.git",
            ),
            (
                "cannot read `ghp_X@github.com:a/b`: denied",
                "cannot read `github.com:a/b`: denied",
            ),
            // Not scp-like: an address, a time, a scheme URL's own userinfo is url()'s.
            ("mail ops@example.com: now", "mail ops@example.com: now"),
            ("at 12:30 @ noon", "at 12:30 @ noon"),
            (
                "would commit to barun/invitation@main:argocd/values.yaml",
                "would commit to barun/invitation@main:argocd/values.yaml",
            ),
            ("`https://u:p@h/x`", "`https://h/x`"),
        ] {
            assert_eq!(scrub(text), expected, "{text}");
        }
        assert_eq!(url("ghp_X@github.com:a/b"), "github.com:a/b");
    }

    /// Serves one raw HTTP answer on loopback and returns its URL.
    async fn serve_once(head: &'static str, body_chunks: usize) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(head.as_bytes()).await;
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..body_chunks {
                let framed = format!("{:x}\r\n", chunk.len());
                if socket.write_all(framed.as_bytes()).await.is_err()
                    || socket.write_all(&chunk).await.is_err()
                    || socket.write_all(b"\r\n").await.is_err()
                {
                    return;
                }
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
        });
        format!("http://{address}/layer")
    }

    #[tokio::test]
    async fn a_declared_length_over_the_cap_is_refused_before_the_body_is_read() {
        let url = serve_once("HTTP/1.1 200 OK\r\ncontent-length: 419430400\r\n\r\n", 0).await;
        let response = reqwest::get(&url).await.unwrap();
        let error = read_capped(response, 1 << 20).await.unwrap_err();
        assert!(
            matches!(&error, ReadError::TooLarge { size, .. } if size.contains("419430400")),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_body_without_a_length_is_cut_off_at_the_cap() {
        // 6,400 KiB sent in chunks, against a 1 MiB cap.
        let url = serve_once("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", 100).await;
        let response = reqwest::get(&url).await.unwrap();
        let error = read_capped(response, 1 << 20).await.unwrap_err();
        assert!(matches!(error, ReadError::TooLarge { .. }), "{error:?}");
        let small = serve_once("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", 2).await;
        let body = read_capped(reqwest::get(&small).await.unwrap(), 1 << 20)
            .await
            .unwrap();
        assert_eq!(body.len(), 2 * 64 * 1024);
    }
}
