//! The secret-leak check that every `TestContext` runs on drop can fail:
//! a config token in captured output, a registered bearer in a file under
//! HOME, a token in a journal-like database file, an env-file (agent
//! secret) value in output all fail it; `token show` output and the config
//! and env files themselves do not.

use std::panic::{AssertUnwindSafe, catch_unwind};

use lapis_e2e::TestContext;

const TOKEN: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000e9";

fn with_config() -> TestContext {
    let ctx = TestContext::new();
    let dir = ctx.home().join(".config/lapis-ai-controller");
    std::fs::create_dir_all(&dir).unwrap();
    let doc = serde_json::json!({
        "schema": 1,
        "tokens": [{ "name": "owner", "principal": "owner", "secret": TOKEN }],
    });
    std::fs::write(dir.join("config.json"), doc.to_string()).unwrap();
    ctx
}

/// Whether dropping `ctx` fails the leak check.
fn drop_fails(ctx: TestContext) -> bool {
    catch_unwind(AssertUnwindSafe(move || drop(ctx))).is_err()
}

#[test]
fn clean_context_passes_and_config_is_exempt() {
    let ctx = with_config();
    assert_eq!(ctx.issued_secrets(), vec![TOKEN.to_owned()]);
    ctx.capture("nothing secret here");
    assert!(ctx.secret_leaks().is_empty());
    assert!(!drop_fails(ctx));
}

#[test]
fn token_in_captured_output_fails() {
    let ctx = with_config();
    ctx.capture(&format!("log line with {TOKEN} inside"));
    assert_eq!(ctx.secret_leaks().len(), 1);
    assert!(drop_fails(ctx));
}

#[test]
fn token_in_database_file_fails() {
    let ctx = with_config();
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    let mut bytes = b"SQLite format 3\0\x01\x02".to_vec();
    bytes.extend_from_slice(TOKEN.as_bytes());
    std::fs::write(home.join("controller.db-wal"), bytes).unwrap();
    assert!(drop_fails(ctx));
}

#[test]
fn registered_bearer_in_a_file_fails() {
    let ctx = with_config();
    let bearer = "lapis_s_0123456789abcdef0123456789abcdef";
    ctx.register_secret(bearer);
    std::fs::write(ctx.home().join("serve.log"), format!("bearer={bearer}\n")).unwrap();
    assert!(drop_fails(ctx));
}

#[test]
fn token_show_output_is_exempt() {
    let ctx = with_config();
    // `token show` prints the secret by design; run it through `output`
    // with a stand-in program that echoes the token, as the real one does.
    let cmd = ctx.command_for(
        std::path::Path::new("/bin/sh"),
        ["-c", &format!("echo {TOKEN}"), "token", "show"],
    );
    let out = ctx.output(cmd);
    assert!(out.stdout.contains(TOKEN));
    assert!(!drop_fails(ctx));
}

#[test]
fn env_file_values_are_secrets_and_the_env_file_is_exempt() {
    let ctx = with_config();
    let env = ctx.home().join(".config/lapis-ai-controller/env");
    let value = "sk-agent-value-0123456789";
    std::fs::write(&env, format!("# comment\nAPI_KEY={value}\nSHORT=abc\n")).unwrap();
    assert!(ctx.issued_secrets().contains(&value.to_owned()));
    assert!(
        ctx.secret_leaks().is_empty(),
        "the env file itself is exempt"
    );
    ctx.capture(&format!("agent said {value}"));
    assert_eq!(ctx.secret_leaks().len(), 1);
    assert!(drop_fails(ctx));
}
