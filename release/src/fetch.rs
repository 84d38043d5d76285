//! Getting bytes from a path or a URL, bounded, into memory.
//!
//! Archives and checksum lists are read whole into memory so that the bytes
//! hashed are the bytes later parsed (no file can change in between). URLs
//! go through `self_update`'s downloader (ureq with rustls): `https://`
//! anywhere, plain `http://` only to the loopback address, which is what the
//! tests and a local mirror need and nothing else should use.

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

/// Whole-transfer timeout for one download.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

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
        Location::Url(url) => {
            let mut download = self_update::Download::from_url(url.as_str());
            download
                .show_download_progress(opts.progress)
                .timeout(DOWNLOAD_TIMEOUT)
                .max_download_size(limit);
            if opts.octet_stream {
                download.request_header("Accept", "application/octet-stream");
            }
            if let Some(token) = &opts.token {
                download.request_header("Authorization", format!("token {token}"));
            }
            let mut bytes = Vec::new();
            download
                .download_to(&mut bytes)
                .map_err(|source| FetchError::Download {
                    url: url.clone(),
                    source,
                })?;
            if bytes.len() as u64 > limit {
                return Err(too_large());
            }
            Ok(bytes)
        }
    }
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
