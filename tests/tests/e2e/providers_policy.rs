//! Approval acceptance (issue 29 item 5): `providers check NAME --policy`
//! runs a probe turn in a scratch workspace under the controller home,
//! rejects the agent's request to write a file, looks at the file system
//! itself and records honoured / ignored / inconclusive for the provider's
//! definition — apart from what the agent said — shown by `providers
//! list`, `doctor` and `status`.

use serde_json::json;

use crate::acp_sessions::fixture;
use crate::serve_support::Server;

/// One probe of `name` through the CLI (`--json`), and its `policy`.
fn probe(server: &Server, name: &str) -> serde_json::Value {
    let doc = server
        .ctx
        .run(["providers", "check", name, "--policy", "--json"])
        .success()
        .json();
    assert_eq!(doc["checkedBy"], "service", "{doc}");
    doc["report"]["policy"].clone()
}

#[test]
fn a_policy_probe_judges_by_the_file_system_and_is_recorded_per_definition() {
    let server = Server::start_full(
        json!({}),
        json!({
            "honours": fixture(&["--policy-probe", "honour"]),
            "ignores": fixture(&["--policy-probe", "ignore"]),
            "silent": fixture(&["--policy-probe", "silent"]),
            "unnamed": fixture(&["--policy-probe", "unnamed"]),
        }),
    );
    let honoured = probe(&server, "honours");
    assert_eq!(honoured["verdict"], "honoured", "{honoured}");
    assert_eq!(
        (
            &honoured["requests"],
            &honoured["named"],
            &honoured["fileWritten"]
        ),
        (&json!(1), &json!(true), &json!(false)),
        "{honoured}"
    );
    // What the agent said is kept, apart, and never decides.
    assert_eq!(honoured["agentSaid"], "end_turn", "{honoured}");
    let ignored = probe(&server, "ignores");
    assert_eq!(ignored["verdict"], "ignored", "{ignored}");
    assert_eq!(ignored["fileWritten"], true, "{ignored}");
    let silent = probe(&server, "silent");
    assert_eq!(silent["verdict"], "inconclusive", "{silent}");
    assert_eq!(silent["requests"], 0, "{silent}");
    let unnamed = probe(&server, "unnamed");
    assert_eq!(unnamed["verdict"], "inconclusive", "{unnamed}");
    assert_eq!(
        (&unnamed["requests"], &unnamed["named"]),
        (&json!(1), &json!(false))
    );
    // The scratch workspaces under the controller home are gone.
    let probes = server.home.join("probes");
    let left: Vec<_> = std::fs::read_dir(&probes).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // Recorded per definition: `status`, `providers list`, `doctor`.
    let status = server.ctx.run(["status", "--json"]).success().json();
    let records = status["policyProbes"].as_array().expect("policyProbes");
    assert_eq!(records.len(), 4, "{status}");
    assert!(records.iter().all(|r| r["current"] == true), "{status}");
    let list = server
        .ctx
        .run(["providers", "list", "--json"])
        .success()
        .json();
    let verdict_of = |name: &str| {
        list["configured"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["approval"]["verdict"].clone())
            .unwrap_or_default()
    };
    assert_eq!(verdict_of("honours"), "honoured", "{list}");
    assert_eq!(verdict_of("ignores"), "ignored", "{list}");
    let plain = server.ctx.run(["providers", "list"]);
    plain.success();
    assert!(plain.stdout.contains("honoured at"), "{}", plain.stdout);
    let doctor = server.ctx.run(["doctor"]);
    let text = format!("{}{}", doctor.stdout, doctor.stderr);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("approval:{name}")))
            .unwrap_or_else(|| panic!("no approval:{name} in {text}"))
            .to_owned()
    };
    assert!(line("honours").contains("honoured"), "{text}");
    assert!(line("ignores").contains("rejected"), "{text}");
    assert!(line("silent").contains("inconclusive"), "{text}");
    assert_eq!(doctor.code, Some(1), "an ignored rejection is unhealthy");

    // A changed definition is not shown the older definition's verdict.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    doc["providers"]["honours"]["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--chunks=1"));
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    server.ctx.run(["config", "reload"]).success();
    let list = server
        .ctx
        .run(["providers", "list", "--json"])
        .success()
        .json();
    let honours = list["configured"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "honours")
        .unwrap()
        .clone();
    assert_eq!(honours["approval"]["current"], false, "{list}");
    server.finish(&[], &[]);
}

/// Without a running controller nothing could record the verdict: the
/// probe is refused, exit 3, before any agent is started.
#[test]
fn a_policy_probe_needs_the_running_controller() {
    let ctx = lapis_e2e::TestContext::new();
    let out = ctx.run(["providers", "check", "echo", "--policy"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains("running controller"), "{}", out.stderr);
}
