//! Workspace roots with the real binary (issue 24 item 8b, seed 000: roots
//! are granted from configuration): without `workspaceRoots` a session may
//! register directories under the controller's HOME only; a directory
//! outside, or a link under HOME leading outside, is refused
//! `workspace_outside_roots` for the owner's CLI too (`workspaces add` and
//! `ask`), and registers nothing; adding a root to the file and
//! `config reload` is the one way to widen it.

use serde_json::{Value, json};

use crate::serve_support::Server;

fn workspace_ids(server: &Server) -> Vec<String> {
    server
        .ctx
        .run(["workspaces", "list", "--json"])
        .success()
        .json()["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_directory_outside_the_roots_is_refused_until_the_config_grants_it() {
    let server = Server::start();
    let ctx = &server.ctx;
    // Under HOME (the default root): registered as before.
    let inside = ctx.home().join("src/inside");
    std::fs::create_dir_all(&inside).unwrap();
    ctx.run(["workspaces", "add", "inside", inside.to_str().unwrap()])
        .success();

    // Outside HOME: the test's HOME is a temp dir, so another temp dir is
    // outside it.
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    let out = outside_path.to_str().unwrap();
    let refused = ctx.run(["workspaces", "add", "outside", out]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("workspace_outside_roots")
            && refused.stderr.contains("workspaceRoots")
            && refused.stderr.contains("config reload"),
        "{}",
        refused.stderr
    );
    // A link under HOME to the outside directory is judged by its target.
    let link = ctx.home().join("src/link");
    std::os::unix::fs::symlink(&outside_path, &link).unwrap();
    let through_link = ctx.run(["workspaces", "add", "link", link.to_str().unwrap()]);
    through_link.expect_code(2);
    assert!(
        through_link.stderr.contains("workspace_outside_roots"),
        "{}",
        through_link.stderr
    );
    // `ask` in the outside directory registers it through the same method.
    let asked = ctx.run(["ask", "hello", "--dir", out]);
    asked.expect_code(2);
    assert!(
        asked.stderr.contains("workspace_outside_roots"),
        "{}",
        asked.stderr
    );
    let ids = workspace_ids(&server);
    assert!(
        ids.contains(&"inside".to_owned()) && !ids.iter().any(|i| i == "outside" || i == "link"),
        "nothing outside was registered: {ids:?}"
    );

    // The owner grants the directory in the file; a reload applies it.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    doc["workspaceRoots"] = json!(["~", out]);
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    ctx.run(["config", "reload"]).success();
    ctx.run(["workspaces", "add", "outside", out]).success();
    assert!(workspace_ids(&server).contains(&"outside".to_owned()));

    // An empty list grants nothing more at run time (declared ones stay).
    doc["workspaceRoots"] = json!([]);
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    ctx.run(["config", "reload"]).success();
    let another = ctx.home().join("src/another");
    std::fs::create_dir_all(&another).unwrap();
    let none = ctx.run(["workspaces", "add", "another", another.to_str().unwrap()]);
    none.expect_code(2);
    assert!(
        none.stderr.contains("workspace_outside_roots"),
        "{}",
        none.stderr
    );
    // Adding what is registered already registers nothing: a repeat answers
    // as before, whatever the roots (the declared `proj` included).
    let again = ctx
        .run([
            "workspaces",
            "add",
            "inside",
            inside.to_str().unwrap(),
            "--json",
        ])
        .success()
        .json();
    assert_eq!(again["workspace"]["id"], "inside", "{again}");
    let project = server.project.canonicalize().unwrap();
    ctx.run(["workspaces", "add", "proj", project.to_str().unwrap()])
        .success();
    // A root that is not a directory refuses the reload and changes nothing.
    doc["workspaceRoots"] = json!(["~/no-such-root"]);
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let bad = ctx.run(["config", "reload"]);
    assert!(
        bad.code != Some(0)
            && format!("{}{}", bad.stdout, bad.stderr).contains("workspaceRoots[0]"),
        "{bad:?}"
    );
    let still = ctx.run(["workspaces", "add", "another", another.to_str().unwrap()]);
    assert!(
        still.stderr.contains("workspace_outside_roots"),
        "the empty list stays in effect: {still:?}"
    );
}
