//! Helpers for the installer tests: where things land in the temp HOME,
//! distinct builds of the binary, the systemctl and launchctl stand-ins, paused installs,
//! and the invariant check every fault test ends with.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use lapis_e2e::TestContext;
use lapis_release::Manifest;

pub const PRODUCT: &str = "lapis-ai-controller";

pub fn launcher(ctx: &TestContext) -> PathBuf {
    ctx.home().join(".local/bin").join(PRODUCT)
}

pub fn releases_root(ctx: &TestContext) -> PathBuf {
    ctx.home().join(".local/lib/lapis-ai-controller/releases")
}

pub fn config_path(ctx: &TestContext) -> PathBuf {
    ctx.home().join(".config/lapis-ai-controller/config.json")
}

pub fn unit_path(ctx: &TestContext, name: &str) -> PathBuf {
    ctx.home().join(".config/systemd/user").join(name)
}

/// A distinct build of the CLI: the built binary with `tag` appended. An ELF
/// ignores trailing bytes, so it runs and reports the same build identity,
/// but its content (and so its snapshot digest) differs.
pub fn variant(ctx: &TestContext, tag: &str) -> PathBuf {
    let dir = ctx.home().join("variants").join(tag);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(PRODUCT);
    // Written by a child process: a write descriptor held by this
    // multi-threaded test process could leak into a concurrent fork and make
    // exec fail with ETXTBSY.
    let status = std::process::Command::new("sh")
        .args(["-c", "cp \"$1\" \"$2\" && printf '\\n-- variant %s --\\n' \"$3\" >> \"$2\" && chmod 755 \"$2\""])
        .arg("sh")
        .arg(TestContext::bin())
        .arg(&path)
        .arg(tag)
        .status()
        .unwrap();
    assert!(status.success());
    path
}

/// Puts the recording systemctl stand-in first on PATH; returns its log.
pub fn use_systemctl_standin(ctx: &mut TestContext) -> PathBuf {
    use_standin(ctx, "systemctl")
}

/// Selects the launchd code path (the installer's documented test seam) and
/// puts the recording launchctl stand-in first on PATH; returns its log.
pub fn use_launchctl_standin(ctx: &mut TestContext) -> PathBuf {
    ctx.set_env(lapis_installer::paths::SERVICE_MANAGER_ENV, "launchd");
    use_standin(ctx, "launchctl")
}

fn use_standin(ctx: &mut TestContext, tool: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins");
    ctx.prepend_path(dir);
    let log = ctx.home().join(format!("{tool}.log"));
    ctx.set_env("LAPIS_STANDIN_LOG", log.display().to_string());
    log
}

/// The calls a recording stand-in logged, one per line.
pub fn log_lines(log: &Path) -> Vec<String> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Kills the service process a stand-in started, if still running.
pub fn stop_started(log: &Path) {
    let pid_file = log.with_extension("log.pid");
    if let Ok(pid) = fs::read_to_string(pid_file) {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.trim())
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs `program install --no-service --json` (plus `extra`) to success and
/// returns the JSON document.
pub fn install(ctx: &TestContext, program: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["install", "--no-service", "--json"];
    args.extend_from_slice(extra);
    let out = ctx.output(ctx.command_for(program, &args));
    out.success();
    out.json()
}

/// Starts `program install --no-service` paused at `point`. Returns the
/// child once it printed the pause marker, or `None` when it finished
/// without reaching that point (its exit status is then checked).
pub fn start_paused(ctx: &TestContext, program: &Path, point: &str) -> Option<Child> {
    let mut cmd = ctx.command_for(program, ["install", "--no-service"]);
    cmd.env("LAPIS_INSTALL_FAULT_PAUSE", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn install");
    let stderr = child.stderr.take().unwrap();
    let marker = format!("lapis-fault-pause: {point}");
    let mut seen = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if line == marker {
            return Some(child);
        }
        seen.push_str(&line);
        seen.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "install exited {status} before reaching {point}:\n{seen}"
    );
    None
}

/// SIGKILL and reap.
pub fn kill9(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Verifies `releases/<digest>`: its manifest names it and every file matches.
pub fn verify_snapshot(ctx: &TestContext, digest: &str) -> Result<Manifest, String> {
    let dir = releases_root(ctx).join(digest);
    let manifest = Manifest::read_from(&dir).map_err(|e| e.to_string())?;
    if manifest.digest() != digest {
        return Err(format!(
            "{digest}: manifest digest is {}",
            manifest.digest()
        ));
    }
    manifest.verify_tree(&dir).map_err(|e| e.to_string())?;
    Ok(manifest)
}

/// Snapshot directory names.
pub fn snapshots(ctx: &TestContext) -> Vec<String> {
    let Ok(rd) = fs::read_dir(releases_root(ctx)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    out.sort();
    out
}

/// Entries of the releases root whose names start with `prefix`.
pub fn leftovers(ctx: &TestContext, prefix: &str) -> Vec<String> {
    let Ok(rd) = fs::read_dir(releases_root(ctx)) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The launcher's snapshot digest (`None` when there is no launcher).
pub fn active(ctx: &TestContext) -> Option<String> {
    let target = fs::read_link(launcher(ctx)).ok()?;
    let rel = target.strip_prefix(releases_root(ctx)).unwrap_or_else(|_| {
        panic!(
            "launcher points outside the releases root: {}",
            target.display()
        )
    });
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        parts.len(),
        3,
        "launcher target shape: {}",
        target.display()
    );
    assert_eq!(parts[1], "bin");
    assert_eq!(parts[2], PRODUCT);
    Some(parts[0].clone())
}

/// The first token's secret in the config file.
pub fn token(ctx: &TestContext) -> String {
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(config_path(ctx)).unwrap()).unwrap();
    doc["tokens"][0]["secret"].as_str().unwrap().to_owned()
}

/// What must hold after any interrupted install: the launcher is absent or
/// points at a complete snapshot that verifies; every digest-named directory
/// verifies; the config is absent or complete (and equal to `config_before`
/// when one existed). Returns the active digest.
#[track_caller]
pub fn assert_consistent(ctx: &TestContext, config_before: Option<&[u8]>) -> Option<String> {
    for digest in snapshots(ctx) {
        if let Err(e) = verify_snapshot(ctx, &digest) {
            panic!("partial or corrupt snapshot {digest}: {e}");
        }
    }
    let active = active(ctx);
    if let Some(d) = &active {
        verify_snapshot(ctx, d).unwrap_or_else(|e| panic!("launcher target broken: {e}"));
        let out = ctx.output(ctx.command_for(&launcher(ctx), ["version", "--json"]));
        out.success();
        assert_eq!(out.json()["snapshot"], d.as_str());
    }
    match fs::read(config_path(ctx)) {
        Ok(bytes) => {
            if let Some(before) = config_before {
                assert_eq!(bytes, before, "config changed");
            }
            let doc: serde_json::Value =
                serde_json::from_slice(&bytes).expect("config is complete JSON");
            let secret = doc["tokens"][0]["secret"].as_str().expect("token");
            assert_eq!(secret.len(), "lapis_".len() + 64);
        }
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
            assert!(config_before.is_none(), "config disappeared");
        }
    }
    active
}
