//! Getting bytes from a path or a URL, bounded, into memory.
//!
//! Archives and checksum lists are read whole into memory so that the bytes
//! hashed are the bytes later parsed (no file can change in between). URLs
//! go through `self_update`'s HTTP client (ureq with rustls): `https://`
//! anywhere, plain `http://` only to the loopback address, which is what the
//! tests and a local mirror need and nothing else should use.
//!
//! What must stay true of a download: a response whose declared
//! `Content-Length` exceeds the caller's limit is refused on its headers,
//! before any of the body is read; the body is streamed into a buffer that
//! never grows past the smaller of the declared length and the limit (one
//! byte more is read only to notice an undeclared body that runs over); and
//! a body shorter than declared is a failed download, never a short file.

use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

/// Where to get bytes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A local file.
    Path(PathBuf),
    /// An `https://` or loopback `http://` URL.
    Url(String),
}

impl Location {
    /// Classifies `text`: anything with a scheme must be an allowed URL;
    /// everything else is a path.
    pub fn parse(text: &str) -> Result<Location, FetchError> {
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("https://") {
            return Ok(Location::Url(text.to_owned()));
        }
        if let Some(rest) = lower.strip_prefix("http://") {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            let bare = match host.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(""),
                None => host.split(':').next().unwrap_or(""),
            };
            if bare == "127.0.0.1" || bare == "::1" {
                return Ok(Location::Url(text.to_owned()));
            }
            return Err(FetchError::InsecureUrl {
                url: text.to_owned(),
            });
        }
        if lower.contains("://") {
            return Err(FetchError::InsecureUrl {
                url: text.to_owned(),
            });
        }
        Ok(Location::Path(PathBuf::from(text)))
    }

    /// The last path segment: the name looked up in `SHA256SUMS`.
    pub fn file_name(&self) -> Option<String> {
        match self {
            Location::Path(p) => p.file_name().and_then(|n| n.to_str()).map(str::to_owned),
            Location::Url(u) => {
                let path = u.split(['?', '#']).next().unwrap_or(u);
                let after_scheme = path.split_once("://").map_or(path, |(_, r)| r);
                let (_, path) = after_scheme.split_once('/')?;
                path.rsplit('/')
                    .next()
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
            }
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Path(p) => write!(f, "{}", p.display()),
            Location::Url(u) => f.write_str(u),
        }
    }
}

/// How to fetch a URL.
#[derive(Clone, Debug, Default)]
pub struct FetchOptions {
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// `Accept: application/octet-stream` (GitHub's asset API needs it).
    pub octet_stream: bool,
    /// `Authorization: token …` for the GitHub API; never logged.
    pub token: Option<String>,
}

/// Why bytes could not be fetched.
#[derive(Debug, Error)]
pub enum FetchError {
    /// A URL that is neither `https://` nor loopback `http://`.
    #[error(
        "refusing {url}: only https:// URLs (or http://127.0.0.1 for local testing) are allowed"
    )]
    InsecureUrl {
        /// The refused URL.
        url: String,
    },
    /// Reading a local file failed.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The download failed (connection, status, or dropped mid-transfer).
    #[error("download of {url} failed")]
    Download {
        /// The URL.
        url: String,
        /// The underlying error.
        #[source]
        source: self_update::errors::Error,
    },
    /// More bytes than allowed.
    #[error("{location} is larger than the {limit} byte limit")]
    TooLarge {
        /// What was being fetched.
        location: String,
        /// The limit.
        limit: u64,
    },
}

impl FetchError {
    /// Whether the server could not be reached at all (no connection, no
    /// name resolution, a timeout): the machine is offline or the server
    /// is down, as against a refusal or a bad answer.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            FetchError::Download {
                source: self_update::errors::Error::Transport(_),
                ..
            }
        )
    }
}

/// Whole-transfer timeout for one download.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// Read size while streaming a body.
const CHUNK: usize = 64 << 10;

/// Fetches at most `limit` bytes from `location`.
pub fn fetch(location: &Location, limit: u64, opts: &FetchOptions) -> Result<Vec<u8>, FetchError> {
    let too_large = || FetchError::TooLarge {
        location: location.to_string(),
        limit,
    };
    match location {
        Location::Path(path) => {
            let err = |source| FetchError::Read {
                path: path.clone(),
                source,
            };
            let mut bytes = Vec::new();
            fs::File::open(path)
                .map_err(err)?
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .map_err(err)?;
            if bytes.len() as u64 > limit {
                return Err(too_large());
            }
            Ok(bytes)
        }
        Location::Url(url) => download(url, limit, opts),
    }
}

/// GETs `url`, bounded as the module docs say.
fn download(url: &str, limit: u64, opts: &FetchOptions) -> Result<Vec<u8>, FetchError> {
    use self_update::http_client::{HttpClient, UreqClient, header};
    let failed = |source: self_update::errors::Error| FetchError::Download {
        url: url.to_owned(),
        source,
    };
    let too_large = || FetchError::TooLarge {
        location: url.to_owned(),
        limit,
    };
    let mut headers = header::HeaderMap::new();
    headers.insert(
        header::USER_AGENT,
        header::HeaderValue::from_static(concat!(
            "lapis-ai-controller/",
            env!("CARGO_PKG_VERSION")
        )),
    );
    if opts.octet_stream {
        headers.insert(
            header::ACCEPT,
            header::HeaderValue::from_static("application/octet-stream"),
        );
    }
    if let Some(token) = &opts.token {
        let mut value = header::HeaderValue::from_str(&format!("token {token}")).map_err(|_| {
            failed(io::Error::other("the token is not a valid header value").into())
        })?;
        value.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, value);
    }
    let response = UreqClient::default()
        .get(url, &headers, Some(DOWNLOAD_TIMEOUT))
        .map_err(failed)?;
    // A transfer encoding (gzip) makes the declared length that of the
    // encoded body; only the limit bounds the decoded one then.
    let encoded = response
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    let declared = match response.headers().get(header::CONTENT_LENGTH) {
        Some(value) if !encoded => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| failed(io::Error::other("malformed Content-Length").into()))?,
        ),
        _ => None,
    };
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let bound = declared.unwrap_or(limit);
    let progress = (opts.progress && declared.is_some()).then(|| progress_bar(bound));
    let mut body = response.body().take(bound + 1);
    let mut bytes: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match body.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed(e.into())),
        };
        if (bytes.len() + n) as u64 > bound {
            // Only reachable without a declared length (ureq stops at it).
            return Err(too_large());
        }
        // Grow by doubling, but never past the bound.
        if bytes.len() + n > bytes.capacity() {
            let want = (bytes.capacity() * 2).max(bytes.len() + n).max(CHUNK);
            let want = want.min(usize::try_from(bound).unwrap_or(usize::MAX));
            bytes.reserve_exact(want - bytes.len());
        }
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(bar) = &progress {
            bar.set_position(bytes.len() as u64);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if let Some(n) = declared
        && bytes.len() as u64 != n
    {
        return Err(failed(
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} of {n} declared bytes received", bytes.len()),
            )
            .into(),
        ));
    }
    Ok(bytes)
}

/// A byte progress bar on stderr (indicatif hides it when stderr is not a
/// terminal).
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::default_bar()
        .template("[{elapsed_precise}] [{bar:40}] {bytes}/{total_bytes} ({eta})")
    {
        bar.set_style(style.progress_chars("=>-"));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_locations() {
        assert_eq!(
            Location::parse("./a.tar.gz").unwrap(),
            Location::Path("./a.tar.gz".into())
        );
        for ok in [
            "https://example.com/x.tar.gz",
            "http://127.0.0.1:8080/x.tar.gz",
            "http://[::1]:80/x",
        ] {
            assert!(matches!(Location::parse(ok), Ok(Location::Url(_))), "{ok}");
        }
        for bad in [
            "http://example.com/x",
            "http://127.0.0.1.evil.com/x",
            "http://user@evil.com/127.0.0.1",
            "ftp://127.0.0.1/x",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(Location::parse(bad), Err(FetchError::InsecureUrl { .. })),
                "{bad}"
            );
        }
        let url = Location::parse("https://h/releases/download/v1/a.tar.gz?x=1").unwrap();
        assert_eq!(url.file_name().as_deref(), Some("a.tar.gz"));
        assert_eq!(Location::parse("https://h").unwrap().file_name(), None);
    }

    /// A one-connection HTTP server on 127.0.0.1 that answers with `head`
    /// and then streams up to `body` zero bytes (or until the client hangs
    /// up). Returns the URL and a handle yielding how many body bytes it got
    /// to write.
    fn serve_once(head: String, body: u64) -> (String, std::thread::JoinHandle<u64>) {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/a.tar.gz", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = io::BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
            }
            stream.write_all(head.as_bytes()).unwrap();
            let chunk = vec![0u8; 64 << 10];
            let mut sent = 0u64;
            while sent < body {
                let n = chunk.len().min((body - sent) as usize);
                if stream.write_all(&chunk[..n]).is_err() {
                    break;
                }
                sent += n as u64;
            }
            let _ = stream.shutdown(std::net::Shutdown::Both);
            sent
        });
        (url, handle)
    }

    const LIMIT: u64 = 1 << 20;

    fn get(url: &str) -> Result<Vec<u8>, FetchError> {
        fetch(
            &Location::parse(url).unwrap(),
            LIMIT,
            &FetchOptions::default(),
        )
    }

    /// Issue 15: a response declaring 100 GB is refused on its headers, not
    /// after buffering up to the limit.
    #[test]
    fn a_declared_length_over_the_limit_is_refused_at_once() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 107374182400\r\n\r\n".to_owned();
        let (url, server) = serve_once(head, 8 * LIMIT);
        let err = get(&url).unwrap_err();
        assert!(
            matches!(err, FetchError::TooLarge { limit: LIMIT, .. }),
            "{err:?}"
        );
        // The client hung up instead of reading the body to the limit.
        assert!(server.join().unwrap() < 8 * LIMIT);
    }

    /// Without a declared length the limit still stops the transfer.
    #[test]
    fn an_undeclared_length_is_bounded_by_the_limit() {
        let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_owned();
        let (url, server) = serve_once(head, 8 * LIMIT);
        let err = get(&url).unwrap_err();
        assert!(
            matches!(err, FetchError::TooLarge { limit: LIMIT, .. }),
            "{err:?}"
        );
        server.join().unwrap();

        let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_owned();
        let (url, server) = serve_once(head, LIMIT);
        assert_eq!(get(&url).unwrap().len() as u64, LIMIT);
        server.join().unwrap();
    }

    /// A body shorter than declared is a failed download, never a short file.
    #[test]
    fn a_body_shorter_than_declared_fails() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_owned();
        let (url, server) = serve_once(head, 500);
        let err = get(&url).unwrap_err();
        assert!(matches!(err, FetchError::Download { .. }), "{err:?}");
        server.join().unwrap();

        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_owned();
        let (url, server) = serve_once(head, 1000);
        assert_eq!(get(&url).unwrap(), vec![0u8; 1000]);
        server.join().unwrap();
    }

    #[test]
    fn local_reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"12345").unwrap();
        let loc = Location::Path(file);
        assert_eq!(fetch(&loc, 5, &FetchOptions::default()).unwrap(), b"12345");
        assert!(matches!(
            fetch(&loc, 4, &FetchOptions::default()),
            Err(FetchError::TooLarge { .. })
        ));
    }
}
