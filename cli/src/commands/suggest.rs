//! "Did you mean": the closest known name to a mistyped one (provider,
//! workspace), by strsim's Jaro-Winkler similarity as clap does for
//! subcommands and flags (clap suggests command names itself).
//!
//! What must stay true: a suggestion is only ever a name that exists, and
//! only one close enough to be the likely intent; nothing is ever chosen
//! for the user, only said.

use lapis_protocol::config::ECHO_PROVIDER;

use crate::args::GlobalArgs;
use crate::exit::CliError;

/// How similar a name must be to be suggested (clap uses 0.7 with plain
/// Jaro; Jaro-Winkler weighs a shared beginning, so a little higher).
const CLOSE: f64 = 0.8;

/// The known name closest to `given`, when one is close enough and it is
/// not `given` itself.
pub(super) fn closest<'a>(
    given: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    known
        .into_iter()
        .filter(|k| *k != given)
        .map(|k| (strsim::jaro_winkler(given, k), k))
        .filter(|(score, _)| *score >= CLOSE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// ` (did you mean `NAME`?)` for the closest known name, or nothing.
pub(super) fn hint<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(given, known)
        .map(|k| format!(" (did you mean `{}`?)", crate::terminal::safe(k)))
        .unwrap_or_default()
}

/// The service's `not_found` for a provider name (`threads create
/// --provider`, `threads configure --provider`), with the closest provider
/// the configuration names. Any other error is returned as it was.
pub(super) fn provider_not_found(global: &GlobalArgs, given: &str, mut err: CliError) -> CliError {
    if err.code != "not_found" || !format!("{:#}", err.error).contains("provider") {
        return err;
    }
    let Ok(target) = super::connect::target(global, None) else {
        return err;
    };
    let known = target
        .config
        .providers
        .keys()
        .map(String::as_str)
        .chain([ECHO_PROVIDER]);
    let hint = hint(given, known);
    if !hint.is_empty() {
        err.error = anyhow::anyhow!("{:#}{hint}", err.error);
    }
    err
}

#[cfg(test)]
mod tests {
    use super::{closest, hint};

    #[test]
    fn a_close_name_is_suggested_and_a_far_one_is_not() {
        let known = ["claude", "codex", "gemini", "echo"];
        assert_eq!(closest("cladue", known), Some("claude"));
        assert_eq!(closest("codx", known), Some("codex"));
        assert_eq!(closest("gemni", known), Some("gemini"));
        assert_eq!(closest("zzzzzz", known), None);
        assert_eq!(closest("claude", ["claude"]), None);
        assert_eq!(hint("prj", ["proj", "other"]), " (did you mean `proj`?)");
        assert_eq!(hint("xyz", ["proj"]), "");
    }
}
