//! The name rules: what a name chosen by an owner or an application may
//! look like (config names, workspace ids, application names, environment
//! variable names).
//!
//! What must stay true: this file imports nothing of the crate. Config,
//! MCP servers and the server's handlers all check names here, so a rule
//! exists once and no two of those modules need each other for it.

/// The workspace id rule, for messages.
pub const WORKSPACE_ID_RULE: &str =
    "1-64 characters of [A-Za-z0-9._-], starting with a letter or digit";

/// Whether `id` is a valid workspace id.
pub fn valid_workspace_id(id: &str) -> bool {
    valid_name(id, 64)
}

/// Application names (in `hello` and a token's `applications`): 1-64 of
/// `[A-Za-z0-9._-]`.
pub fn valid_application(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The rule for names in the config (tokens, principals, providers,
/// workspace ids, MCP servers): `max` bytes at most of `[A-Za-z0-9._-]`,
/// starting alphanumeric.
pub(crate) fn valid_name(s: &str, max: usize) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric())
        && s.len() <= max
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// POSIX portable names: `[A-Za-z_][A-Za-z0-9_]*` (environment files,
/// provider `env`, MCP server `env`).
pub(crate) fn valid_env_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}
