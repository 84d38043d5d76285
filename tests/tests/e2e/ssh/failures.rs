//! What goes wrong over ssh, each with its stable code and the fix: a
//! changed host key (`ssh_host_key`, refused by ssh's own checking), no
//! sshd there (`ssh_unreachable`), no remote binary
//! (`remote_binary_missing`), no controller there (`remote_unavailable`),
//! no local ssh client (`ssh_missing`) and a remote binary of another
//! version (`version_mismatch`).

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

/// No `ssh` on this side's `PATH`: refused before anything is dialled,
/// with the fix (install OpenSSH, or name a client). Needs no sshd.
#[test]
fn no_ssh_client_is_refused_as_ssh_missing_with_the_fix() {
    let mut local = lapis_e2e::TestContext::new();
    let empty = local.home().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    local.set_env("PATH", empty.to_string_lossy().into_owned());
    local.set_env("LAPIS_AI_CONTROLLER_HOST", "ssh://127.0.0.1:1");
    for args in [&["status", "--json"][..], &["turns", "list", "--json"][..]] {
        let out = local.run(args);
        out.expect_code(2);
        let e = out.json()["error"].clone();
        assert_eq!(e["code"], "ssh_missing", "{e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("install an OpenSSH client")
                && message.contains("LAPIS_AI_CONTROLLER_SSH"),
            "{e}"
        );
    }
}

/// A stand-in for the remote binary, `#!/bin/sh` + `body`.
fn stand_in(dir: &std::path::Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

/// A remote binary of another version, both ways the client tells: an
/// older release without `dial-stdio` (clap's `unrecognized subcommand`,
/// exit 2) and one that relays but whose controller refuses this client's
/// protocol in `hello` (`protocol_unsupported`). Each is `version_mismatch`
/// (exit 2) naming the fix: the same release on both hosts.
#[test]
fn a_remote_binary_of_another_version_is_refused_as_version_mismatch() {
    let Some(mut remote) = Remote::start(json!({})) else {
        return;
    };
    remote.local.run(["status", "--json"]).success();
    let dir = remote.sshd.dir.path().to_owned();
    let older = stand_in(
        &dir,
        "lapis-ai-controller-old",
        "echo \"error: unrecognized subcommand '$1'\" >&2\necho >&2\necho 'Usage: lapis-ai-controller <COMMAND>' >&2\nexit 2\n",
    );
    let newer = stand_in(
        &dir,
        "lapis-ai-controller-new",
        "read -r hello\nprintf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,\"message\":\"protocol lapis-ai-controller/1 is not supported (this controller speaks lapis-ai-controller/2)\",\"data\":{\"code\":\"protocol_unsupported\"}}}'\ncat >/dev/null\n",
    );
    for (bin, names) in [
        (
            &older,
            &["no `dial-stdio`", "lapis-ai-controller-old version"][..],
        ),
        (&newer, &["lapis-ai-controller/2", "does not speak"][..]),
    ] {
        remote
            .local
            .set_env("LAPIS_AI_CONTROLLER_REMOTE_BIN", bin.clone());
        for args in [&["status", "--json"][..], &["turns", "list", "--json"][..]] {
            let out = remote.local.run(args);
            out.expect_code(2);
            let e = out.json()["error"].clone();
            assert_eq!(e["code"], "version_mismatch", "{bin}: {e}");
            let message = e["message"].as_str().unwrap();
            assert!(
                message.contains("install the same release on both hosts"),
                "{e}"
            );
            for name in names {
                assert!(message.contains(name), "{name}: {e}");
            }
        }
    }
    // The right binary again: it works.
    remote.local.set_env(
        "LAPIS_AI_CONTROLLER_REMOTE_BIN",
        lapis_e2e::TestContext::bin().to_string_lossy().into_owned(),
    );
    remote.local.run(["status", "--json"]).success();
}
