//! Commands that need no installation: version, completions, usage errors.

use lapis_e2e::TestContext;

#[test]
fn version_json_reports_build_identity() {
    let ctx = TestContext::new();
    let out = ctx.run(["version", "--json"]);
    out.success();
    let doc = out.json();
    assert_eq!(doc["name"], "lapis-ai-controller");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    for key in ["version", "commit", "date", "target"] {
        assert!(doc["build"][key].is_string(), "build.{key} missing: {doc}");
    }
}

#[test]
fn completions_generate_for_bash() {
    let ctx = TestContext::new();
    let out = ctx.run(["completions", "bash"]);
    out.success();
    // The script registers a function that calls the binary back; what it
    // offers is tested through a real bash in `cli_surface`.
    assert!(
        out.stdout
            .contains("-F _clap_complete_lapis_ai_controller lapis-ai-controller")
    );
    assert!(out.stdout.contains("LAPIS_AI_CONTROLLER_COMPLETE"));
}

#[test]
fn usage_error_exits_2() {
    let ctx = TestContext::new();
    let out = ctx.run(["no-such-command"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("unrecognized subcommand"),
        "{}",
        out.stderr
    );
}
