//! Install, serve and a client agree on the controller home, in every case
//! of the one precedence (`lapis_protocol::home::resolve_home`): the
//! `--home` flag, `LAPIS_AI_CONTROLLER_HOME` (or its deprecated old name
//! `LAPIS_AI_CONTROLLER_WORKSPACE`), the config's `controllerHome`, the
//! default.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lapis_e2e::TestContext;
use lapis_protocol::client::{Client, Credential};
use lapis_protocol::home::{HomeSource, resolve_home};

use crate::install_support::*;

/// How the home is named to every command of one case.
enum Given<'a> {
    Flag(&'a Path),
    Env(&'a Path),
    /// By the variable's deprecated old name.
    OldEnv(&'a Path),
    Nothing,
}

/// Runs `install`, then `serve`, then `status` and an SDK client, all with
/// `given`; returns the home install reported. Every one of them must use
/// `want`.
fn agree(ctx: &TestContext, given: &Given<'_>, want: &Path) {
    let flag: Vec<String> = match given {
        Given::Flag(p) => vec!["--home".into(), p.display().to_string()],
        _ => Vec::new(),
    };
    let env = |cmd: &mut std::process::Command| {
        cmd.env_remove("LAPIS_AI_CONTROLLER_HOME")
            .env_remove("LAPIS_AI_CONTROLLER_WORKSPACE");
        match given {
            Given::Env(p) => cmd.env("LAPIS_AI_CONTROLLER_HOME", p),
            Given::OldEnv(p) => cmd.env("LAPIS_AI_CONTROLLER_WORKSPACE", p),
            _ => cmd,
        };
    };

    let mut cmd = ctx.command(["install", "--no-service", "--json"]);
    cmd.args(&flag);
    env(&mut cmd);
    let out = ctx.output(cmd);
    assert_eq!(
        out.success().json()["paths"]["controllerHome"],
        want.display().to_string(),
        "install"
    );
    assert!(want.is_dir(), "install created {}", want.display());

    let mut cmd = ctx.command(["serve"]);
    cmd.args(&flag).stdout(Stdio::null()).stderr(Stdio::null());
    env(&mut cmd);
    let mut serve = cmd.spawn().expect("spawn serve");
    let socket = want.join(lapis_protocol::home::SOCKET_FILE);
    let deadline = Instant::now() + Duration::from_secs(30);
    while UnixStream::connect(&socket).is_err() {
        if let Some(status) = serve.try_wait().unwrap() {
            panic!("serve exited early ({status})");
        }
        assert!(
            Instant::now() < deadline,
            "serve did not listen in {}",
            want.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The CLI as a client (client commands have no flag: flag and config
    // cases reach the home through the config, the env case through the
    // environment).
    if !matches!(given, Given::Flag(_)) {
        let mut cmd = ctx.command(["status", "--json"]);
        env(&mut cmd);
        ctx.output(cmd).success();
    }

    // The SDK, resolving with the same rule.
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config_path(ctx)).unwrap()).unwrap();
    let config_home = PathBuf::from(config["controllerHome"].as_str().unwrap());
    let (flag_home, env_home) = match given {
        Given::Flag(p) => (Some(*p), None),
        Given::Env(p) | Given::OldEnv(p) => (None, Some(*p)),
        Given::Nothing => (None, None),
    };
    let default = ctx.home().join(".lapis/ai-controller");
    let home = resolve_home(flag_home, env_home, Some(&config_home), &default);
    assert_eq!(home.path, want);
    let secret = config["tokens"][0]["secret"].as_str().unwrap().to_owned();
    let client = Client::open(
        &home.socket(),
        Credential::Token {
            token: secret,
            application: "home-test".into(),
        },
    )
    .expect("SDK client reaches the service");
    drop(client);

    let _ = std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    serve.wait().unwrap();
}

#[test]
fn default_home_when_nothing_names_one() {
    let ctx = TestContext::new();
    let default = ctx.home().join(".lapis/ai-controller");
    agree(&ctx, &Given::Nothing, &default);
    let r = resolve_home(None, None, None, &default);
    assert_eq!(r.source, HomeSource::Default);
}

#[test]
fn config_home_when_no_flag_or_environment() {
    let ctx = TestContext::new();
    let configured = ctx.home().join("configured");
    // The first install writes the flag into the new config...
    install(
        &ctx,
        &TestContext::bin(),
        &["--home", configured.to_str().unwrap()],
    );
    // ...and from then on the config names the home.
    agree(&ctx, &Given::Nothing, &configured);
}

#[test]
fn flag_beats_the_config() {
    let ctx = TestContext::new();
    install(&ctx, &TestContext::bin(), &[]);
    let flagged = ctx.home().join("flagged");
    agree(&ctx, &Given::Flag(&flagged), &flagged);
}

#[test]
fn environment_beats_the_config() {
    let ctx = TestContext::new();
    install(&ctx, &TestContext::bin(), &[]);
    let from_env = ctx.home().join("from-env");
    agree(&ctx, &Given::Env(&from_env), &from_env);
}

#[test]
fn the_old_environment_name_still_beats_the_config() {
    let ctx = TestContext::new();
    install(&ctx, &TestContext::bin(), &[]);
    let from_env = ctx.home().join("from-old-env");
    agree(&ctx, &Given::OldEnv(&from_env), &from_env);
}

/// `LAPIS_AI_CONTROLLER_WORKSPACE` is read only while
/// `LAPIS_AI_CONTROLLER_HOME` is unset, and says once on stderr that it is
/// the old name; the new name alone says nothing.
#[test]
fn the_old_environment_name_warns_once_and_yields_to_the_new_one() {
    let ctx = TestContext::new();
    install(&ctx, &TestContext::bin(), &[]);
    let (old, new) = (ctx.home().join("old"), ctx.home().join("new"));
    let home_of = |vars: &[(&str, &Path)]| {
        let mut cmd = ctx.command(["install", "--no-service", "--json"]);
        for (name, value) in vars {
            cmd.env(name, value);
        }
        let out = ctx.output(cmd);
        let home = out.success().json()["paths"]["controllerHome"]
            .as_str()
            .unwrap()
            .to_owned();
        (PathBuf::from(home), out.stderr.matches("warning: ").count())
    };
    let warning = "warning: `LAPIS_AI_CONTROLLER_WORKSPACE` is now `LAPIS_AI_CONTROLLER_HOME`";
    let mut cmd = ctx.command(["install", "--no-service", "--json"]);
    cmd.env("LAPIS_AI_CONTROLLER_WORKSPACE", &old);
    let out = ctx.output(cmd);
    out.success();
    assert_eq!(out.stderr.matches(warning).count(), 1, "{}", out.stderr);
    assert_eq!(
        out.json()["paths"]["controllerHome"],
        old.display().to_string()
    );
    assert_eq!(
        home_of(&[("LAPIS_AI_CONTROLLER_HOME", &new)]),
        (new.clone(), 0)
    );
    assert_eq!(
        home_of(&[
            ("LAPIS_AI_CONTROLLER_WORKSPACE", &old),
            ("LAPIS_AI_CONTROLLER_HOME", &new)
        ]),
        (new, 0)
    );
}

/// `serve --workspace ~/project` on a project that has an `agents/`
/// folder: refused with `not_controller_home` before anything in it is
/// created, swept or chmodded.
#[test]
fn serve_refuses_a_project_directory_and_leaves_it_untouched() {
    use std::os::unix::fs::PermissionsExt;
    let ctx = TestContext::new();
    ctx.run(["install", "--no-service", "--json"]).success();
    let project = ctx.home().join("project");
    std::fs::create_dir_all(project.join("agents")).unwrap();
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o755)).unwrap();
    let files = [
        ("README.md", "mine"),
        ("agents/planner.md", "mine"),
        ("agents/4242", "12345"),
    ];
    for (name, text) in files {
        std::fs::write(project.join(name), text).unwrap();
    }
    // By the flag's old name, still taken for one release with a warning.
    let out = ctx.run(["serve", "--workspace", project.to_str().unwrap()]);
    out.expect_code(2);
    assert!(
        out.stderr
            .starts_with("warning: `--workspace DIR` is now `--home DIR`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("not a controller home"),
        "{}",
        out.stderr
    );
    for (name, text) in files {
        assert_eq!(std::fs::read_to_string(project.join(name)).unwrap(), text);
    }
    let mode = std::fs::metadata(&project).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    let mut names: Vec<_> = std::fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["README.md", "agents"]);
}
