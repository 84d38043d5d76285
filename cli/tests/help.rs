//! The binary's own integration test. Besides checking the help text, its
//! presence makes `cargo test --workspace` build the real
//! `target/<profile>/lapis-ai-controller`, which the end-to-end suite in
//! `tests/` drives.

use std::process::Command;

#[test]
fn help_lists_every_top_level_command() {
    let out = Command::new(env!("CARGO_BIN_EXE_lapis-ai-controller"))
        .arg("--help")
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("run binary");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for command in [
        "install",
        "uninstall",
        "releases",
        "rollback",
        "update",
        "version",
        "token",
        "completions",
        "serve",
        "status",
        "workspaces",
        "threads",
        "turns",
        "journal",
    ] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "{command} missing from --help:\n{help}"
        );
    }
    assert!(
        !help.contains("acp-echo"),
        "the built-in agent stays hidden"
    );
}
