//! Config parsing: `Config::parse` never panics, and a refusal never
//! repeats a token secret from the input (refusals name fields, not values).

use std::path::Path;

use lapis_protocol::config::Config;

/// Parses `data` as a config file.
pub fn config(data: &[u8]) {
    let Err(e) = Config::parse(data, Path::new("/fuzz/config.json")) else {
        return;
    };
    let text = e.to_string();
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for token in doc["tokens"].as_array().into_iter().flatten() {
        if let Some(secret) = token["secret"].as_str()
            && secret.len() >= 12
        {
            assert!(!text.contains(secret), "a refusal repeated a token secret");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeds_do_not_panic() {
        for seed in [
            &b"{}"[..],
            b"\xff",
            br#"{"schema":1,"instance":"default","controllerHome":"/h","tokens":[{"name":"o","principal":"o","secret":"lapis_short_secret_value"}],"providers":{},"workspaces":{},"server":{}}"#,
            br#"{"schema":2,"tokens":[{"secret":"lapis_0000000000000000000000"}]}"#,
        ] {
            super::config(seed);
        }
    }
}
