//! The SDK's quickstart and managed-mode examples
//! (`service/protocol/examples/managed_app.rs`, compiled here as a module,
//! with the `quickstart.rs` it includes) against the real binary: what the SDK README shows
//! works as shown.

#[allow(dead_code, clippy::print_stderr, clippy::print_stdout)]
#[path = "../../../service/protocol/examples/managed_app.rs"]
mod managed_app;

use lapis_e2e::TestContext;
use managed_app::quickstart;
use serde_json::json;

use crate::policy::fixture;
use crate::serve_support::{OWNER, Server, write_config};

#[test]
fn the_quickstart_runs_a_turn_and_answers_its_permission_requests() {
    let server = Server::start_full(
        json!({}),
        json!({ "asks": fixture(&["--permissions", "2"]) }),
    );
    let echo = quickstart::run(
        &server.socket(),
        OWNER.to_owned(),
        &quickstart::Target {
            workspace: "proj".into(),
            provider: "echo".into(),
        },
        "say this back",
    )
    .unwrap();
    assert_eq!(echo, "say this back");
    // An agent that asks twice: the example answers, the turn completes.
    let reply = quickstart::run(
        &server.socket(),
        OWNER.to_owned(),
        &quickstart::Target {
            workspace: "proj".into(),
            provider: "asks".into(),
        },
        "go",
    )
    .unwrap();
    // The fixture agent replies with the option each request got.
    assert!(
        reply.contains("perm-0=opt-allow_once") && reply.contains("perm-1=opt-allow_once"),
        "{reply:?}"
    );
    let mut client = server.client("quickstart");
    let turns = client.turns_list(None).unwrap();
    assert_eq!(turns.len(), 2);
    assert!(
        turns.iter().all(|t| t.state.as_str() == "completed"),
        "{turns:?}"
    );
    assert!(client.permissions_list(None, None).unwrap().is_empty());
    server.finish(&[], &[]);
}

#[test]
fn the_managed_example_starts_runs_and_stops_its_own_controller() {
    let ctx = TestContext::new();
    let project = ctx.home().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let config = write_config(&ctx, json!({}), json!({ "proj": { "path": project } }));
    let home = ctx.home().join("app-controller");
    let bin = TestContext::bin();
    // The example's own options, with this test's HOME, never the real one.
    let options = managed_app::options(&home, &config, OWNER.to_owned())
        .executable(bin.to_str().unwrap())
        .env("HOME", ctx.home());
    let reply = managed_app::run(options, "hello from an app").unwrap();
    assert_eq!(reply, "hello from an app");
    // Its database is where it was told.
    assert!(home.join("controller.db").exists());
    ctx.assert_no_secret(OWNER, &[&config]);
}
