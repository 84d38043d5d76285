//! Id prefixes: wherever a command takes a thread, turn, permission request
//! or workspace id, any unambiguous prefix of one will do, as with git's
//! commit ids.
//!
//! Resolved here, in the CLI, through the list calls, not by the server:
//! a prefix is a convenience for a person typing; applications hold whole
//! ids, and an exact id on the wire can never turn ambiguous later when a
//! new id is made that shares its beginning. The wire stays exact.
//!
//! What must stay true:
//! - an id that is known exactly wins, even when it begins another one;
//! - two or more matches are an error (`ambiguous_id`, exit 2) listing them
//!   in `error.details.candidates`, never a guess;
//! - no match sends the text as given, so the server answers as it always
//!   did (`not_found`, with its own wording), except a workspace id close
//!   to a registered one, refused here as `not_found` with a "did you
//!   mean";
//! - a whole generated id (`thr_`/`turn_` and 32 hex digits) is sent
//!   without a lookup, so scripts pay nothing for this.
//!
//! Bound: the lists are the server's pages (the newest `page_max` turns);
//! an older turn is still found by its whole id.

use lapis_protocol::client::Client;
use serde_json::json;

use crate::exit::CliError;

use super::connect::client_error;

/// What kind of id is meant (for the error's wording).
#[derive(Debug, Clone, Copy)]
pub(super) enum Noun {
    Workspace,
    Thread,
    Turn,
    Request,
}

impl Noun {
    fn name(self) -> &'static str {
        match self {
            Noun::Workspace => "workspace",
            Noun::Thread => "thread",
            Noun::Turn => "turn",
            Noun::Request => "permission request",
        }
    }
}

/// How many candidates an ambiguity error lists.
const SHOWN: usize = 10;

/// The one id `given` names among `known`, or `given` itself when none
/// begins with it.
pub(super) fn pick(
    noun: Noun,
    given: &str,
    known: impl IntoIterator<Item = String>,
) -> Result<String, CliError> {
    let mut matches: Vec<String> = Vec::new();
    for id in known {
        if id == given {
            return Ok(id);
        }
        if !given.is_empty() && id.starts_with(given) && !matches.contains(&id) {
            matches.push(id);
        }
    }
    match matches.len() {
        0 => Ok(given.to_owned()),
        1 => Ok(matches.remove(0)),
        n => {
            matches.sort();
            let shown = matches[..n.min(SHOWN)].join(", ");
            let more = if n > SHOWN {
                format!(" and {} more", n - SHOWN)
            } else {
                String::new()
            };
            Err(CliError::failure(
                "ambiguous_id",
                anyhow::anyhow!(
                    "`{given}` begins {n} {} ids: {shown}{more}; type more of the one you mean",
                    noun.name()
                ),
            )
            .with_details(json!({ "candidates": matches })))
        }
    }
}

/// Whether `given` is a whole generated id with this prefix.
fn whole(given: &str, prefix: &str) -> bool {
    given
        .strip_prefix(prefix)
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A thread id from a prefix.
pub(super) fn thread(client: &mut Client, given: &str) -> Result<String, CliError> {
    if whole(given, "thr_") {
        return Ok(given.to_owned());
    }
    let known = client.threads_list().map_err(client_error)?;
    pick(Noun::Thread, given, known.into_iter().map(|t| t.id))
}

/// A turn id from a prefix: among the session's turns and, when none
/// matches, the fences `status` names (another application's fenced turn
/// is not in this session's list, yet the owner's CLI resolves it).
pub(super) fn turn(client: &mut Client, given: &str) -> Result<String, CliError> {
    if whole(given, "turn_") {
        return Ok(given.to_owned());
    }
    let known: Vec<String> = client
        .turns_list(None)
        .map_err(client_error)?
        .into_iter()
        .map(|t| t.id)
        .collect();
    if known.iter().any(|id| id.starts_with(given)) {
        return pick(Noun::Turn, given, known);
    }
    let fences = client.status().map(|s| s.fences).unwrap_or_default();
    pick(Noun::Turn, given, fences.into_iter().map(|f| f.turn))
}

/// A workspace id from a prefix; an id that names none but is close to
/// one is refused here with that one as a suggestion (`not_found`, as the
/// service would answer).
pub(super) fn workspace(client: &mut Client, given: &str) -> Result<String, CliError> {
    let known: Vec<String> = client
        .workspaces_list()
        .map_err(client_error)?
        .into_iter()
        .map(|w| w.id)
        .collect();
    let picked = pick(Noun::Workspace, given, known.iter().cloned())?;
    if picked == given && !known.iter().any(|k| k == given) {
        let hint = super::suggest::hint(given, known.iter().map(String::as_str));
        if !hint.is_empty() {
            return Err(CliError::failure(
                "not_found",
                anyhow::anyhow!(
                    "workspace `{}` is not registered{hint}; see `lapis-ai-controller workspaces list`",
                    crate::terminal::safe(given)
                ),
            ));
        }
    }
    Ok(picked)
}

/// A pending permission request of `turn` from a prefix.
pub(super) fn request(client: &mut Client, turn: &str, given: &str) -> Result<String, CliError> {
    let known = client
        .permissions_list(None, Some(turn))
        .map_err(client_error)?;
    pick(Noun::Request, given, known.into_iter().map(|r| r.id))
}

/// Either resolver over an optional id.
pub(super) fn optional(
    client: &mut Client,
    given: Option<String>,
    resolve: fn(&mut Client, &str) -> Result<String, CliError>,
) -> Result<Option<String>, CliError> {
    given.map(|g| resolve(client, &g)).transpose()
}

#[cfg(test)]
mod tests {
    use super::{Noun, pick, whole};

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_unique_prefix_names_its_id_and_an_exact_id_wins() {
        let known = ids(&["thr_ab12", "thr_cd34", "proj", "proj-2"]);
        assert_eq!(
            pick(Noun::Thread, "thr_a", known.clone()).unwrap(),
            "thr_ab12"
        );
        assert_eq!(
            pick(Noun::Workspace, "proj", known.clone()).unwrap(),
            "proj"
        );
        assert_eq!(pick(Noun::Thread, "zzz", known.clone()).unwrap(), "zzz");
        assert_eq!(pick(Noun::Thread, "", known).unwrap(), "");
    }

    #[test]
    fn an_ambiguous_prefix_is_an_error_listing_the_candidates() {
        let err = pick(Noun::Turn, "turn_", ids(&["turn_b", "turn_a", "x"])).unwrap_err();
        assert_eq!(err.code, "ambiguous_id");
        assert_eq!(
            err.details.unwrap()["candidates"],
            serde_json::json!(["turn_a", "turn_b"])
        );
        assert!(
            err.error.to_string().contains("turn_a, turn_b"),
            "{}",
            err.error
        );
    }

    #[test]
    fn only_whole_generated_ids_skip_the_lookup() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert!(whole(&format!("thr_{hex}"), "thr_"));
        assert!(!whole(&format!("thr_{}", &hex[1..]), "thr_"));
        assert!(!whole(&format!("turn_{hex}"), "thr_"));
        assert!(!whole("thr_0123456789abcdef0123456789abcdeg", "thr_"));
    }
}
