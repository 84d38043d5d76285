//! Finding a published release for this target, and downloading it verified.
//!
//! The release list comes from `self_update`'s GitHub backend
//! (`backends::github::ReleaseList`), against a configurable API base so a
//! GitHub Enterprise host or a mirror works. `self_update`'s own `Update`
//! flow is deliberately not used: it picks assets by substring match and
//! replaces the running executable in place, while an update here must pick
//! the asset whose name is *exactly* this target's archive name and must end
//! as a new immutable snapshot installed by the installer.
//!
//! A release is a candidate only when it carries both that archive and a
//! `SHA256SUMS` asset; the archive is accepted only when `SHA256SUMS` lists
//! it and the downloaded bytes hash to the listed value.

use std::cmp::Ordering;

use thiserror::Error;

use crate::archive::archive_name;
use crate::checksums::{CHECKSUMS_FILE, ChecksumError, Sha256Hex, Sha256Sums, check_bytes};
use crate::fetch::{FetchError, FetchOptions, Location, fetch};

/// Environment variable overriding the GitHub API base URL.
pub const API_ENV: &str = "LAPIS_AI_CONTROLLER_UPDATE_API";
/// Environment variable overriding the `owner/name` repository.
pub const REPO_ENV: &str = "LAPIS_AI_CONTROLLER_UPDATE_REPO";
/// Default GitHub API base URL.
pub const DEFAULT_API: &str = "https://api.github.com";
/// Default repository the releases are published in.
pub const DEFAULT_REPO: &str = "lapis-ai/lapis-ai-controller";
/// Largest `SHA256SUMS` asset accepted.
const MAX_CHECKSUMS_BYTES: u64 = 1 << 20;

/// Where releases are looked up. The token is only ever sent as a header.
#[derive(Clone)]
pub struct UpdateSource {
    /// API base URL, e.g. `https://api.github.com` or `https://ghe/api/v3`.
    pub(crate) api_base: String,
    /// Repository owner.
    pub(crate) owner: String,
    /// Repository name.
    pub(crate) repo: String,
    /// Token for the API's rate limits (`GH_TOKEN`, else `GITHUB_TOKEN`).
    pub(crate) token: Option<String>,
}

impl std::fmt::Debug for UpdateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateSource")
            .field("api_base", &self.api_base)
            .field("owner", &self.owner)
            .field("repo", &self.repo)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl UpdateSource {
    /// The token, only for URLs under the API base: an asset URL pointing at
    /// another host (a mirror's listing can say anything) never gets it.
    pub(crate) fn token_for(&self, url: &str) -> Option<String> {
        let under_api = url
            .strip_prefix(self.api_base.as_str())
            .is_some_and(|rest| rest.starts_with('/'));
        self.token.clone().filter(|_| under_api)
    }

    /// The source configured by the environment: [`API_ENV`], [`REPO_ENV`],
    /// `GH_TOKEN`/`GITHUB_TOKEN`.
    pub fn from_env() -> Result<UpdateSource, UpdateError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let api_base = var(API_ENV).unwrap_or_else(|| DEFAULT_API.to_owned());
        let api_base = api_base.trim_end_matches('/').to_owned();
        // Same rule as any download: https, or loopback http for tests.
        Location::parse(&api_base).map_err(UpdateError::Fetch)?;
        let repo = var(REPO_ENV).unwrap_or_else(|| DEFAULT_REPO.to_owned());
        let (owner, name) = repo
            .split_once('/')
            .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
            .ok_or_else(|| UpdateError::BadRepo(repo.clone()))?;
        Ok(UpdateSource {
            api_base,
            owner: owner.to_owned(),
            repo: name.to_owned(),
            token: var("GH_TOKEN").or_else(|| var("GITHUB_TOKEN")),
        })
    }
}

/// A downloadable file of a release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asset {
    /// File name.
    pub name: String,
    /// API URL that serves the bytes with `Accept: application/octet-stream`.
    pub(crate) url: String,
}

/// A published release that has an archive for the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Version (tag without the leading `v`).
    pub version: String,
    /// This target's archive.
    pub archive: Asset,
    /// The release's `SHA256SUMS`.
    pub(crate) checksums: Asset,
}

/// What `update` should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing newer is published (or the requested version is running).
    UpToDate {
        /// The newest published version for this target, if any.
        latest: Option<String>,
    },
    /// Install `candidate`; `downgrade` when it is older than the running one.
    Install {
        /// The release to install.
        candidate: Candidate,
        /// Whether it is older than the running version.
        downgrade: bool,
    },
}

/// Why an update could not be planned or fetched.
#[derive(Debug, Error)]
pub enum UpdateError {
    /// `LAPIS_AI_CONTROLLER_UPDATE_REPO` is not `owner/name`.
    #[error("update repository {0:?} is not owner/name")]
    BadRepo(String),
    /// Listing releases failed.
    #[error("cannot list releases from {api}")]
    List {
        /// API base URL.
        api: String,
        /// The underlying error.
        #[source]
        source: self_update::errors::Error,
    },
    /// No published release carries an archive for this target.
    #[error("no published release has an archive and SHA256SUMS for target {target}")]
    NoRelease {
        /// This target.
        target: String,
    },
    /// The requested version is not published for this target.
    #[error(
        "version {version} is not published with an archive and SHA256SUMS for target {target}"
    )]
    VersionNotFound {
        /// The version asked for.
        version: String,
        /// This target.
        target: String,
    },
    /// A version string is not semver.
    #[error("version {0:?} is not a semantic version")]
    BadVersion(String),
    /// Fetching an asset failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The checksum list is unusable, lacks the archive, or disagrees with it.
    #[error(transparent)]
    Checksum(#[from] ChecksumError),
}

impl UpdateError {
    /// Whether the release server could not be reached at all (offline,
    /// no name resolution, a timeout), as against a refusal or a bad answer.
    pub fn is_unreachable(&self) -> bool {
        match self {
            UpdateError::List { source, .. } => {
                matches!(source, self_update::errors::Error::Transport(_))
            }
            UpdateError::Fetch(f) => f.is_unreachable(),
            _ => false,
        }
    }
}

/// Lists the releases that have this target's archive and a `SHA256SUMS`,
/// newest first.
pub fn candidates(source: &UpdateSource, target: &str) -> Result<Vec<Candidate>, UpdateError> {
    let mut builder = self_update::backends::github::ReleaseList::configure();
    builder
        .repo_owner(source.owner.as_str())
        .repo_name(source.repo.as_str())
        .api_base_url(source.api_base.as_str());
    if let Some(token) = &source.token {
        builder.auth_token(token.as_str());
    }
    let releases = builder
        .build()
        .and_then(|list| list.fetch())
        .map_err(|e| UpdateError::List {
            api: source.api_base.clone(),
            source: e,
        })?
        .into_vec();
    let mut out = Vec::new();
    for release in releases {
        let version = release.version().to_owned();
        let wanted = archive_name(&version, target);
        let find = |name: &str| {
            release
                .assets()
                .iter()
                .find(|a| a.name() == name)
                .map(|a| Asset {
                    name: a.name().to_owned(),
                    url: a.download_url().to_owned(),
                })
        };
        if let (Some(archive), Some(checksums)) = (find(&wanted), find(CHECKSUMS_FILE))
            && is_semver(&version)
        {
            out.push(Candidate {
                version,
                archive,
                checksums,
            });
        }
    }
    out.sort_by(|a, b| compare(&b.version, &a.version));
    Ok(out)
}

/// Decides what to install. Without `requested`, the newest non-prerelease
/// version newer than `current`; with it, exactly that version (older is a
/// downgrade, which only an explicit request may do).
pub fn plan(
    candidates: &[Candidate],
    current: &str,
    requested: Option<&str>,
    target: &str,
) -> Result<Plan, UpdateError> {
    if !is_semver(current) {
        return Err(UpdateError::BadVersion(current.to_owned()));
    }
    match requested {
        Some(requested) => {
            let requested = requested.strip_prefix('v').unwrap_or(requested);
            if !is_semver(requested) {
                return Err(UpdateError::BadVersion(requested.to_owned()));
            }
            let candidate = candidates
                .iter()
                .find(|c| compare(&c.version, requested) == Ordering::Equal)
                .ok_or_else(|| UpdateError::VersionNotFound {
                    version: requested.to_owned(),
                    target: target.to_owned(),
                })?;
            Ok(match compare(&candidate.version, current) {
                Ordering::Equal => Plan::UpToDate {
                    latest: Some(candidate.version.clone()),
                },
                order => Plan::Install {
                    candidate: candidate.clone(),
                    downgrade: order == Ordering::Less,
                },
            })
        }
        None => {
            let latest = candidates.iter().find(|c| !c.version.contains('-'));
            match latest {
                None if candidates.is_empty() => Err(UpdateError::NoRelease {
                    target: target.to_owned(),
                }),
                Some(c) if compare(&c.version, current) == Ordering::Greater => Ok(Plan::Install {
                    candidate: c.clone(),
                    downgrade: false,
                }),
                other => Ok(Plan::UpToDate {
                    latest: other.map(|c| c.version.clone()),
                }),
            }
        }
    }
}

/// Downloads the candidate's `SHA256SUMS` and archive and checks the archive
/// against its entry. Returns the archive bytes and their checksum; a missing
/// entry or a mismatch is an error.
pub fn download_verified(
    source: &UpdateSource,
    candidate: &Candidate,
    limit: u64,
    progress: bool,
) -> Result<(Vec<u8>, Sha256Hex), UpdateError> {
    let opts = |url: &str, progress: bool| FetchOptions {
        progress,
        octet_stream: true,
        token: source.token_for(url),
    };
    let url = &candidate.checksums.url;
    let sums = fetch(
        &Location::parse(url)?,
        MAX_CHECKSUMS_BYTES,
        &opts(url, false),
    )?;
    let sums = Sha256Sums::parse(&sums)?;
    let expected = sums.get(&candidate.archive.name)?.clone();
    let url = &candidate.archive.url;
    let bytes = fetch(&Location::parse(url)?, limit, &opts(url, progress))?;
    check_bytes(&candidate.archive.name, &bytes, &expected)?;
    Ok((bytes, expected))
}

/// Whether `version` parses as semver (`self_update` re-exports no parser,
/// so a self-comparison stands in for one).
fn is_semver(version: &str) -> bool {
    self_update::version::cmp_versions(version, version).is_ok()
}

/// Semver order; versions that fail to parse (filtered out earlier) sort equal.
fn compare(a: &str, b: &str) -> Ordering {
    self_update::version::cmp_versions(a, b).unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(v: &str) -> Candidate {
        Candidate {
            version: v.into(),
            archive: Asset {
                name: archive_name(v, "t"),
                url: format!("https://x/{v}"),
            },
            checksums: Asset {
                name: CHECKSUMS_FILE.into(),
                url: format!("https://x/{v}/sums"),
            },
        }
    }

    #[test]
    fn plans_upgrades_and_refuses_silent_downgrades() {
        let list = vec![cand("2.0.0-rc.1"), cand("1.2.0"), cand("1.0.0")];
        match plan(&list, "1.1.0", None, "t").unwrap() {
            Plan::Install {
                candidate,
                downgrade,
            } => {
                assert_eq!(candidate.version, "1.2.0", "prereleases are not picked");
                assert!(!downgrade);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            plan(&list, "1.3.0", None, "t").unwrap(),
            Plan::UpToDate {
                latest: Some("1.2.0".into())
            }
        );
        match plan(&list, "1.1.0", Some("v1.0.0"), "t").unwrap() {
            Plan::Install { downgrade, .. } => assert!(downgrade),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            plan(&list, "1.1.0", Some("1.1.0"), "t"),
            Err(UpdateError::VersionNotFound { .. })
        ));
        assert!(matches!(
            plan(&list, "1.2.0", Some("1.2.0"), "t"),
            Ok(Plan::UpToDate { .. })
        ));
        assert!(matches!(
            plan(&[], "1.0.0", None, "t"),
            Err(UpdateError::NoRelease { .. })
        ));
        assert!(matches!(
            plan(&list, "1.0.0", Some("not-a-version"), "t"),
            Err(UpdateError::BadVersion(_))
        ));
    }

    #[test]
    fn debug_never_shows_the_token() {
        let source = UpdateSource {
            api_base: DEFAULT_API.into(),
            owner: "o".into(),
            repo: "r".into(),
            token: Some("ghp_secretvalue".into()),
        };
        assert!(!format!("{source:?}").contains("secretvalue"));
        assert!(
            source
                .token_for("https://api.github.com/repos/o/r/releases/assets/1")
                .is_some()
        );
        assert_eq!(
            source.token_for("https://api.github.com.evil.example/x"),
            None
        );
        assert_eq!(source.token_for("https://objects.example/x"), None);
    }
}
