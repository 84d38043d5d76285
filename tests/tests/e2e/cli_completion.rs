//! Completion of every argument that names something, in real bash, zsh
//! and fish: each shell sources the script `completions SHELL` prints and
//! runs its completion function (bash: the registered function with
//! `COMP_WORDS` set; zsh: the registered function with `words`/`CURRENT`
//! set and `_describe` reporting what it was given; fish: `complete
//! --do-complete`), which calls the built binary back. Names come from the
//! running service (workspaces, threads, turns, pending permission requests
//! and their options), the configuration (providers, instances), the
//! catalogue, and the releases directory (snapshots for `rollback --to`).

use std::path::Path;

use lapis_e2e::TestContext;
use serde_json::json;

use crate::cli_permissions::fixture;
use crate::cli_surface::bash_complete;
use crate::serve_support::Server;

/// The candidates zsh's completion function offers for `line` (the last
/// word is the one being completed): `_describe`, the completion system's
/// function that would show them, prints its values instead.
fn zsh_complete(ctx: &TestContext, line: &[&str]) -> Vec<String> {
    let bin = TestContext::bin();
    let words: Vec<String> = std::iter::once("lapis-ai-controller".to_owned())
        .chain(line.iter().map(|w| format!("'{w}'")))
        .collect();
    let script = format!(
        r#"compdef() {{ : }}
_describe() {{
  local name
  for name in "$@"; do
    [[ $name == (dirs|other) ]] && print -rl -- "${{(@P)name}}"
  done
  return 0
}}
source <('{bin}' completions zsh) || exit 90
words=({words})
CURRENT={current}
_clap_dynamic_completer_lapis_ai_controller
"#,
        bin = bin.display(),
        words = words.join(" "),
        current = line.len() + 1,
    );
    let out = ctx.output(ctx.command_for(Path::new("zsh"), ["-f", "-c", &script]));
    assert_eq!(out.code, Some(0), "zsh completion failed: {out:?}");
    // `value:description`, `:` in a value escaped as `\:`.
    out.stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut value = String::new();
            let mut chars = l.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    ':' => break,
                    c => value.push(c),
                }
            }
            value
        })
        .collect()
}

/// The candidates fish offers for `line` (`complete --do-complete`).
fn fish_complete(ctx: &TestContext, line: &[&str]) -> Vec<String> {
    let bin = TestContext::bin();
    let typed = std::iter::once("lapis-ai-controller")
        .chain(line.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "'{bin}' completions fish | source; or exit 90\ncomplete --do-complete '{typed}'\n",
        bin = bin.display(),
    );
    let out = ctx.output(ctx.command_for(Path::new("fish"), ["--no-config", "-c", &script]));
    assert_eq!(out.code, Some(0), "fish completion failed: {out:?}");
    out.stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
        .collect()
}

/// A shell's completion of a typed line.
type Completer = fn(&TestContext, &[&str]) -> Vec<String>;

fn have(shell: &str) -> bool {
    std::process::Command::new(shell)
        .args(["-c", "exit 0"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn every_argument_that_names_something_completes_in_bash_zsh_and_fish() {
    let server = Server::start_full(
        json!({}),
        json!({
            "custom": { "command": "/bin/true" },
            "asker": fixture(&["--permissions", "1", "--perm-kinds", "allow_once,reject_once", "--chunks", "1"]),
        }),
    );
    let ctx = &server.ctx;
    let thread = ctx
        .run(["threads", "create", "proj", "--provider", "asker"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let turn = ctx
        .run(["turns", "submit", &thread, "--prompt", "hi"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let request = lapis_e2e::wait::eventually("a pending permission request", || {
        let doc = ctx.run(["permissions", "list", "--json"]).json();
        doc["requests"][0]["id"].as_str().map(str::to_owned)
    });
    // An instance beside the default one, and an installed snapshot.
    let instance = ctx
        .home()
        .join(".config/lapis-ai-controller/instances/w1/config.json");
    std::fs::create_dir_all(instance.parent().unwrap()).unwrap();
    std::fs::write(&instance, "{}").unwrap();
    let digest = "ab".repeat(32);
    let snapshot = ctx
        .home()
        .join(".local/lib/lapis-ai-controller/releases")
        .join(&digest);
    std::fs::create_dir_all(&snapshot).unwrap();

    // (the line typed, a candidate it must offer, one it must not)
    let cases: Vec<(Vec<&str>, &str, Option<&str>)> = vec![
        (vec!["providers", "add", "cl"], "claude", Some("custom")),
        (vec!["providers", "remove", ""], "custom", Some("claude")),
        (vec!["providers", "check", ""], "claude", None),
        (vec!["providers", "check", "cu"], "custom", None),
        (vec!["ask", "--provider", ""], "custom", None),
        (
            vec!["threads", "create", "proj", "--provider", ""],
            "echo",
            None,
        ),
        (vec!["workspaces", "remove", ""], "proj", None),
        (vec!["threads", "show", ""], &thread, None),
        (vec!["turns", "show", ""], &turn, None),
        (vec!["permissions", "list", "--turn", ""], &turn, None),
        (vec!["permissions", "list", "--thread", ""], &thread, None),
        (vec!["permissions", "respond", ""], &turn, None),
        (vec!["permissions", "respond", &turn, ""], &request, None),
        (
            vec!["permissions", "respond", &turn, &request, ""],
            "opt-allow_once",
            Some("opt-reject_always"),
        ),
        (vec!["status", "--instance", ""], "w1", None),
        (vec!["rollback", "--to", ""], &digest, None),
    ];
    let mut shells: Vec<(&str, Completer)> = vec![("bash", bash_complete)];
    for (shell, f) in [("zsh", zsh_complete as Completer), ("fish", fish_complete)] {
        if have(shell) {
            shells.push((shell, f));
        } else {
            lapis_e2e::skip::skip(&format!(
                "{shell} is not installed; its completion was not checked"
            ));
        }
    }
    for (shell, complete) in shells {
        for (line, want, never) in &cases {
            let got = complete(ctx, line);
            assert!(
                got.iter().any(|c| c == want),
                "{shell}: {line:?} offers {got:?}, not {want}"
            );
            if let Some(never) = never {
                assert!(
                    !got.iter().any(|c| c == never),
                    "{shell}: {line:?} offers {never}: {got:?}"
                );
            }
        }
    }
    ctx.run(["permissions", "respond", &turn, &request, "--allow"])
        .success();
    server.finish(&[], &[]);
}
