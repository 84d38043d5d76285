//! What goes wrong over ssh, each with its stable code and the fix: a
//! changed host key (`ssh_host_key`, refused by ssh's own checking), no
//! sshd there (`ssh_unreachable`), no remote binary
//! (`remote_binary_missing`), no controller there (`remote_unavailable`).

use serde_json::json;

use super::Remote;

#[test]
fn ssh_failures_are_refused_with_stable_codes_and_the_fix() {
    let Some(mut remote) = Remote::start(json!({})) else {
        return;
    };
    remote.local.run(["status", "--json"]).success();
    let error = |out: &lapis_e2e::Output| out.json()["error"].clone();

    // The host key changed: ssh refuses, nothing is relayed.
    let known = remote.sshd.dir.path().join("known_hosts");
    let good = std::fs::read_to_string(&known).unwrap();
    let other = remote.sshd.dir.path().join("impostor");
    super::keygen(&other);
    let impostor = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    std::fs::write(
        &known,
        format!("[127.0.0.1]:{} {impostor}", remote.sshd.port),
    )
    .unwrap();
    let refused = remote.local.run(["status", "--json"]);
    refused.expect_code(2);
    let e = error(&refused);
    assert_eq!(e["code"], "ssh_host_key", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("ssh-keygen -R"),
        "{e}"
    );
    std::fs::write(&known, good).unwrap();

    // The remote binary is not there.
    remote.local.set_env(
        "LAPIS_AI_CONTROLLER_REMOTE_BIN",
        "/nonexistent/lapis-ai-controller",
    );
    let missing = remote.local.run(["turns", "list", "--json"]);
    missing.expect_code(2);
    let e = error(&missing);
    assert_eq!(e["code"], "remote_binary_missing", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("LAPIS_AI_CONTROLLER_REMOTE_BIN"),
        "{e}"
    );
    remote.local.set_env(
        "LAPIS_AI_CONTROLLER_REMOTE_BIN",
        lapis_e2e::TestContext::bin().to_string_lossy().into_owned(),
    );

    // No controller runs there: exit 3, and how to start it.
    remote.server.stop();
    let down = remote.local.run(["status", "--json"]);
    down.expect_code(3);
    let e = error(&down);
    assert_eq!(e["code"], "remote_unavailable", "{e}");
    assert!(e["message"].as_str().unwrap().contains("start it"), "{e}");

    // Nothing listens on the port: ssh itself fails.
    let port = super::free_port();
    let unreachable = remote.local.run([
        "--host",
        &format!("ssh://127.0.0.1:{port}"),
        "status",
        "--json",
    ]);
    unreachable.expect_code(3);
    let e = error(&unreachable);
    assert_eq!(e["code"], "ssh_unreachable", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("true` works"),
        "{e}"
    );

    // An address that is not ssh://.
    let bad = remote
        .local
        .run(["--host", "ftp://box", "status", "--json"]);
    bad.expect_code(2);
}
