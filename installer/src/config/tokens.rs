//! The one edit of the config's `tokens`: appending a token (`tokens add`)
//! or removing one whole (`tokens revoke`), never rewriting one.

use std::path::Path;

use serde_json::Value;

use super::{ConfigError, rewrite};

/// Changes the config's `tokens` through `change` (`tokens add`, `tokens
/// revoke`), atomically as [`edit`] does, and nothing else of the file.
///
/// What must stay true: a token is never rewritten — after the change the
/// tokens that remain are exactly the ones before, byte for byte and in
/// their order, with new ones only appended — and the first token (the
/// owner's) stays; anything else aborts the edit and nothing is written.
pub fn edit_tokens<E>(
    path: &Path,
    change: impl FnOnce(&mut Vec<Value>) -> Result<(), E>,
) -> Result<Value, E>
where
    E: From<ConfigError>,
{
    rewrite(
        path,
        |doc: &mut Value| {
            let mut tokens = doc
                .get("tokens")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            change(&mut tokens)?;
            doc["tokens"] = Value::Array(tokens);
            Ok(())
        },
        |before, after| {
            let (Some(Value::Array(before)), Some(Value::Array(after))) = (before, after) else {
                return false;
            };
            let kept: Vec<&Value> = before.iter().filter(|t| after.contains(t)).collect();
            let appended = &after[kept.len().min(after.len())..];
            before
                .first()
                .is_some_and(|owner| after.first() == Some(owner))
                && after.iter().take(kept.len()).eq(kept.iter().copied())
                && appended.iter().all(|t| {
                    // New, not an old one rewritten under its name or secret.
                    ["name", "secret"]
                        .iter()
                        .all(|k| t.get(k).is_some() && before.iter().all(|b| b.get(k) != t.get(k)))
                })
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ConfigError, bootstrap, edit, edit_tokens, generate_token};
    use crate::paths::test_paths as paths;

    fn token(name: &str) -> serde_json::Value {
        json!({ "name": name, "principal": "owner", "secret": generate_token().unwrap(),
                "applications": [name] })
    }

    #[test]
    fn tokens_are_appended_or_removed_whole_never_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        bootstrap(&p, &|| {}).unwrap();
        let owner = std::fs::read_to_string(&p.config).unwrap();
        let owner: serde_json::Value = serde_json::from_str(&owner).unwrap();
        let owner = owner["tokens"][0].clone();
        edit_tokens(&p.config, |t: &mut Vec<_>| {
            t.push(token("editor"));
            Ok::<(), ConfigError>(())
        })
        .unwrap();
        let bot = token("bot");
        let doc = edit_tokens(&p.config, |t: &mut Vec<_>| {
            t.push(bot.clone());
            Ok::<(), ConfigError>(())
        })
        .unwrap();
        assert_eq!(doc["tokens"][0], owner);
        // Removing one whole keeps the rest as they were.
        let doc = edit_tokens(&p.config, |t: &mut Vec<serde_json::Value>| {
            t.retain(|t| t["name"] != "editor");
            Ok::<(), ConfigError>(())
        })
        .unwrap();
        assert_eq!(doc["tokens"], json!([owner, bot]));
        let before = std::fs::read(&p.config).unwrap();
        // Rewriting one, removing the owner's, or reordering: refused,
        // nothing written.
        type Change = Box<dyn FnOnce(&mut Vec<serde_json::Value>)>;
        let refused: [Change; 3] = [
            Box::new(|t| t[1]["scopes"] = json!(["status:read"])),
            Box::new(|t| {
                t.remove(0);
            }),
            Box::new(|t| t.swap(0, 1)),
        ];
        for change in refused {
            let e = edit_tokens(&p.config, |t: &mut Vec<_>| {
                change(t);
                Ok::<(), ConfigError>(())
            })
            .unwrap_err();
            assert!(e.to_string().contains("rewrite `tokens`"), "{e}");
            assert_eq!(std::fs::read(&p.config).unwrap(), before);
        }
        // `edit` still refuses any change to them.
        assert!(
            edit(&p.config, |d: &mut serde_json::Value| {
                d["tokens"] = json!([]);
                Ok::<(), ConfigError>(())
            })
            .is_err()
        );
    }
}
