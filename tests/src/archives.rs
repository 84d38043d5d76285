//! Release archives for tests: well-formed ones (through `lapis_release`
//! itself) around a stand-in binary, hostile ones crafted with the `tar`
//! crate's raw header API, GitHub-shaped release JSON, and a fingerprint of an
//! installation to prove a refusal changed nothing.

use std::path::{Path, PathBuf};

use lapis_release::BuildIdentity;
use lapis_release::archive::{archive_bytes, archive_name, manifest_for_binary};

/// A POSIX shell "binary" that answers `version --json` like the real one
/// for `build` and hands `acp-echo` to the real binary, which is all the
/// installer's two-stage smoke test asks of it. Lets
/// tests publish other versions without compiling anything.
pub fn script_binary(build: &BuildIdentity) -> Vec<u8> {
    let doc = serde_json::json!({
        "name": "lapis-ai-controller",
        "version": build.version,
        "build": build,
        "snapshot": null,
    });
    // The install smoke test's second stage runs one ACP turn through the
    // built-in `echo` agent; the script hands that to the real binary.
    let real = crate::TestContext::bin();
    format!(
        "#!/bin/sh\nif [ \"$1\" = acp-echo ]; then exec '{}' acp-echo; fi\ncat <<'EOF'\n{doc}\nEOF\n",
        real.display()
    )
    .into_bytes()
}

/// `(file name, bytes)` of a well-formed release archive of `binary`.
pub fn release_archive(binary: &[u8], build: &BuildIdentity) -> (String, Vec<u8>) {
    let manifest = manifest_for_binary(binary, build.clone()).expect("manifest");
    let bytes = archive_bytes(binary, &manifest, 0).expect("archive");
    (archive_name(&build.version, &build.target), bytes)
}

/// The identity with another version.
pub fn with_version(build: &BuildIdentity, version: &str) -> BuildIdentity {
    BuildIdentity {
        version: version.to_owned(),
        ..build.clone()
    }
}

/// One raw tar entry: stored path bytes, type, mode, data, link name.
#[derive(Debug, Clone)]
pub struct RawEntry {
    /// Path exactly as stored in the header.
    pub(crate) path: Vec<u8>,
    /// Entry type.
    pub(crate) kind: tar::EntryType,
    /// Mode bits as stored.
    pub(crate) mode: u32,
    /// Contents.
    pub data: Vec<u8>,
    /// Link name (for link entries).
    pub(crate) link: Vec<u8>,
}

impl RawEntry {
    /// A regular file.
    pub fn file(path: &str, mode: u32, data: &[u8]) -> RawEntry {
        RawEntry {
            path: path.as_bytes().to_vec(),
            kind: tar::EntryType::Regular,
            mode,
            data: data.to_vec(),
            link: Vec::new(),
        }
    }

    /// A link or other special entry pointing at `link`.
    pub fn special(path: &str, kind: tar::EntryType, link: &str) -> RawEntry {
        RawEntry {
            path: path.as_bytes().to_vec(),
            kind,
            mode: 0o777,
            data: Vec::new(),
            link: link.as_bytes().to_vec(),
        }
    }
}

/// A `.tar.gz` with exactly these headers, bypassing every check the `tar`
/// crate's path setters would make.
pub fn craft(entries: &[RawEntry]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    for e in entries {
        let mut header = tar::Header::new_ustar();
        let ustar = header.as_ustar_mut().expect("ustar header");
        ustar.name[..e.path.len()].copy_from_slice(&e.path);
        ustar.linkname[..e.link.len()].copy_from_slice(&e.link);
        header.set_entry_type(e.kind);
        header.set_mode(e.mode);
        header.set_size(e.data.len() as u64);
        header.set_cksum();
        builder.append(&header, &e.data[..]).expect("append");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

/// The entries of a valid release of `binary` (binary first, then
/// `release.json`), to extend or tamper with before [`craft`].
pub fn valid_entries(binary: &[u8], build: &BuildIdentity) -> Vec<RawEntry> {
    let manifest = manifest_for_binary(binary, build.clone()).expect("manifest");
    vec![
        RawEntry::file("bin/lapis-ai-controller", 0o755, binary),
        RawEntry::file("release.json", 0o644, &manifest.to_json()),
    ]
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A GitHub `GET /repos/{o}/{r}/releases` element with assets served at
/// `{base}/assets/{tag}/{name}`.
pub fn github_release(base: &str, tag: &str, assets: &[&str]) -> serde_json::Value {
    let assets: Vec<_> = assets
        .iter()
        .enumerate()
        .map(|(i, name)| {
            serde_json::json!({
                "id": i,
                "name": name,
                "url": format!("{base}/assets/{tag}/{name}"),
                "browser_download_url": format!("{base}/download/{tag}/{name}"),
            })
        })
        .collect();
    serde_json::json!({
        "tag_name": tag,
        "name": tag,
        "created_at": "2026-01-01T00:00:00Z",
        "html_url": format!("{base}/releases/{tag}"),
        "body": "",
        "prerelease": false,
        "assets": assets,
    })
}

/// What a refusal must leave unchanged: where the launcher points, the
/// config's bytes, and the names in the releases root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The launcher's link target, if any.
    pub launcher: Option<PathBuf>,
    /// The config file's bytes, if any.
    pub config: Option<Vec<u8>>,
    /// Sorted names directly under the releases root.
    pub(crate) releases: Vec<String>,
}

impl Fingerprint {
    /// Reads the default instance's installation under `home`.
    pub fn of(home: &Path) -> Fingerprint {
        let launcher = std::fs::read_link(home.join(".local/bin/lapis-ai-controller")).ok();
        let config = std::fs::read(home.join(".config/lapis-ai-controller/config.json")).ok();
        let mut releases: Vec<String> =
            std::fs::read_dir(home.join(".local/lib/lapis-ai-controller/releases"))
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
        releases.sort();
        Fingerprint {
            launcher,
            config,
            releases,
        }
    }
}
