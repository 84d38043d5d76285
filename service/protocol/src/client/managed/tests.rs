//! Managed-mode client behaviour against stand-in children (shell
//! scripts); the real controller is driven by the end-to-end tests.

use std::os::unix::fs::PermissionsExt;

use super::*;

const SECRET: &str = "lapis_0000000000000000000000000000000000000000000000000000000000000042";

fn credential() -> Credential {
    Credential::Token {
        token: SECRET.to_owned(),
        application: "app".to_owned(),
    }
}

/// A stand-in controller: a shell script in a temp dir.
fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("fake-controller");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn options(dir: &Path, exe: &Path) -> ManagedOptions {
    ManagedOptions::new(dir.join("home"), credential())
        .executable(exe.to_str().unwrap())
        .inherit("PATH")
        .stderr(Stdio::null())
        .stop_grace(Duration::from_secs(5))
}

const READY_FRAME: &str = r#"{"jsonrpc":"2.0","method":"ready","params":{"server":{"protocol":"lapis-ai-controller/1","version":"9.9.9","build":{"version":"9.9.9","commit":"abc"}},"session":{"id":"s-1","principal":"owner","application":"app","scopes":["status:read"]}}}"#;

#[test]
fn the_startup_line_is_the_only_place_the_credential_goes() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    // Records argv, environment and the first stdin line, then is ready.
    let exe = script(
        dir.path(),
        &format!(
            "echo \"$@\" > {s}.argv; env > {s}.env; read line; echo \"$line\" > {s}.line; echo '{READY_FRAME}'; sleep 30",
            s = seen.display()
        ),
    );
    let mut managed =
        ManagedController::start(options(dir.path(), &exe).env("EXTRA", "1")).unwrap();
    assert_eq!(managed.ready().server.version, "9.9.9");
    assert_eq!(managed.client().session().unwrap().id, "s-1");
    let argv = std::fs::read_to_string(seen.with_extension("argv")).unwrap();
    let home = std::path::absolute(dir.path().join("home")).unwrap();
    assert_eq!(
        argv.trim(),
        format!("serve --stdio --home {}", home.display())
    );
    let env = std::fs::read_to_string(seen.with_extension("env")).unwrap();
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    assert!(
        names.contains(&"EXTRA") && names.contains(&"PATH"),
        "{names:?}"
    );
    // sh adds PWD, SHLVL and `_` itself; nothing else was inherited.
    for name in &names {
        assert!(
            ["EXTRA", "PATH", "PWD", "SHLVL", "_", "OLDPWD"].contains(name),
            "{name} leaked into the child's environment"
        );
    }
    assert!(!env.contains(SECRET) && !argv.contains(SECRET));
    let line: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(seen.with_extension("line")).unwrap())
            .unwrap();
    assert_eq!(line["token"], SECRET);
    assert_eq!(line["application"], "app");
    assert_eq!(line["protocol"], PROTOCOL_NAME);
    assert!(!format!("{managed:?}").contains(SECRET));
    let status = managed.stop().unwrap();
    // `sh` dies of the SIGTERM.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15));
}

const PROTOCOL_NAME: &str = crate::PROTOCOL;

#[test]
fn a_startup_failure_is_reported_with_its_cause_but_never_the_credential() {
    let dir = tempfile::tempdir().unwrap();
    // A (misbehaving) controller that quotes the credential back.
    let exe = script(
        dir.path(),
        r#"read line; echo "{\"jsonrpc\":\"2.0\",\"method\":\"startupFailed\",\"params\":{\"code\":\"unauthenticated\",\"message\":\"bad token $(echo "$line" | sed 's/.*"token":"\([^"]*\)".*/\1/')\"}}"; exit 2"#,
    );
    let err = ManagedController::start(options(dir.path(), &exe)).unwrap_err();
    assert_eq!(err.code(), "unauthenticated", "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(text.contains("bad token <redacted>"), "{text}");
    assert!(!text.contains(SECRET), "{text}");
}

#[test]
fn a_failure_frame_sent_before_the_startup_line_was_read_is_still_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    // As `serve --stdio` with a broken configuration: it answers and exits
    // without reading stdin, so the startup line may find it gone.
    let exe = script(
        dir.path(),
        r#"echo '{"jsonrpc":"2.0","method":"startupFailed","params":{"code":"invalid_config","message":"config.json: expected a value"}}'; exit 2"#,
    );
    for _ in 0..20 {
        let err = ManagedController::start(options(dir.path(), &exe)).unwrap_err();
        assert_eq!(err.code(), "invalid_config", "{err:?}");
    }
}

#[test]
fn a_child_that_exits_without_a_frame_reports_how_it_exited() {
    let dir = tempfile::tempdir().unwrap();
    let exe = script(dir.path(), "exit 3");
    let err = ManagedController::start(options(dir.path(), &exe)).unwrap_err();
    match err {
        ManagedError::Exited { status } => assert_eq!(status.code(), Some(3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_child_that_is_never_ready_is_stopped_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let exe = script(
        dir.path(),
        &format!("echo $$ > {}; read line; exec sleep 60", pid_file.display()),
    );
    let err = ManagedController::start(
        options(dir.path(), &exe).ready_timeout(Duration::from_millis(300)),
    )
    .unwrap_err();
    assert!(matches!(err, ManagedError::NotReady { .. }), "{err:?}");
    // The child was stopped and reaped before the error came back.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive =
        rustix::process::test_kill_process(rustix::process::Pid::from_raw(pid).unwrap()).is_ok();
    assert!(!alive, "the child {pid} outlived the failed start");
}

#[test]
fn a_build_identity_mismatch_stops_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let exe = script(
        dir.path(),
        &format!("read line; echo '{READY_FRAME}'; exec sleep 60"),
    );
    let err = ManagedController::start(options(dir.path(), &exe).expect_build("commit", "def"))
        .unwrap_err();
    match &err {
        ManagedError::BuildMismatch {
            field,
            expected,
            found,
        } => {
            assert_eq!(
                (field.as_str(), expected.as_str(), found.as_str()),
                ("commit", "\"def\"", "\"abc\"")
            );
        }
        other => panic!("{other:?}"),
    }
    let ok = ManagedController::start(
        options(dir.path(), &exe)
            .expect_build("commit", "abc")
            .expect_build("version", "9.9.9"),
    )
    .unwrap();
    assert_eq!(ok.ready().server.build["commit"], "abc");
}

#[test]
fn bare_names_use_the_provider_lookup_and_relative_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = script(
        &bin,
        &format!("read line; echo '{READY_FRAME}'; exec sleep 60"),
    );
    let lookup = CommandLookup {
        path: Some(OsString::from("/nonexistent")),
        home: Some(dir.path().to_owned()),
        secrets: Default::default(),
    };
    let managed = ManagedController::start(
        options(dir.path(), &exe)
            .executable("fake-controller")
            .lookup(lookup.clone()),
    )
    .unwrap();
    drop(managed);
    let missing = ManagedController::start(
        options(dir.path(), &exe)
            .executable("no-such-controller")
            .lookup(lookup),
    )
    .unwrap_err();
    assert_eq!(missing.code(), "not_found");
    assert!(
        missing.to_string().contains("no-such-controller"),
        "{missing}"
    );
    let relative =
        ManagedController::start(options(dir.path(), &exe).executable("bin/lapis")).unwrap_err();
    assert!(matches!(relative, ManagedError::Name(_)), "{relative:?}");
}
