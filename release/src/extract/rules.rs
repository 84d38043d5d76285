//! The per-entry rules of safe extraction: which paths are acceptable, and
//! which entry types and repetitions are refused.

use std::collections::BTreeMap;

use super::ExtractError;

/// What a path in the archive has been seen as.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    File,
    /// A directory that has its own entry.
    Dir,
    /// A directory only implied by a deeper entry.
    ImpliedDir,
}

/// Checks an entry path and returns it in normal form (no trailing `/`).
pub(super) fn normalise(raw: &str, is_dir: bool) -> Result<String, ExtractError> {
    let unsafe_path = |reason| ExtractError::UnsafePath {
        path: raw.to_owned(),
        reason,
    };
    let trimmed = if is_dir {
        raw.strip_suffix('/').unwrap_or(raw)
    } else {
        raw
    };
    if trimmed.is_empty() {
        return Err(unsafe_path("empty path"));
    }
    if trimmed.starts_with('/') {
        return Err(unsafe_path("absolute path"));
    }
    if trimmed.chars().any(|c| c.is_control() || c == '\\') {
        return Err(unsafe_path("control character or backslash"));
    }
    for component in trimmed.split('/') {
        match component {
            ".." => return Err(unsafe_path("parent directory component")),
            "" | "." => return Err(unsafe_path("path is not in normal form")),
            _ => {}
        }
    }
    Ok(trimmed.to_owned())
}

/// Records `rel` (and the directories it implies), refusing duplicates and
/// file/directory clashes.
pub(super) fn record(
    seen: &mut BTreeMap<String, Seen>,
    rel: &str,
    is_dir: bool,
    raw: &str,
) -> Result<(), ExtractError> {
    let duplicate = || ExtractError::Duplicate {
        path: raw.to_owned(),
    };
    let mut prefix = String::new();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        match seen.get(&prefix) {
            Some(Seen::File) => return Err(duplicate()),
            Some(_) => {}
            None => {
                seen.insert(prefix.clone(), Seen::ImpliedDir);
            }
        }
    }
    match (seen.get(rel), is_dir) {
        (None, _) => {}
        (Some(Seen::ImpliedDir), true) => {}
        _ => return Err(duplicate()),
    }
    seen.insert(rel.to_owned(), if is_dir { Seen::Dir } else { Seen::File });
    Ok(())
}

pub(super) fn describe(kind: tar::EntryType) -> String {
    match kind {
        tar::EntryType::Symlink => "symbolic link".into(),
        tar::EntryType::Link => "hard link".into(),
        tar::EntryType::Char | tar::EntryType::Block => "device".into(),
        tar::EntryType::Fifo => "fifo".into(),
        tar::EntryType::GNULongName
        | tar::EntryType::GNULongLink
        | tar::EntryType::XHeader
        | tar::EntryType::XGlobalHeader => "extended header".into(),
        other => format!("entry of type {:?}", other.as_byte() as char),
    }
}
