//! A running `serve` in a temp HOME, and a raw line-oriented socket client.
//!
//! Everything the server writes to stderr and every frame a raw client
//! reads is captured in the context, so a test can end with
//! `assert_no_secret` over all of it.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lapis_e2e::TestContext;
use serde_json::{Value, json};

/// The owner token (full scopes).
pub const OWNER: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000a1";
/// A second principal's token.
pub const GUEST: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000b2";
/// A token with only `status:read`.
pub const READER: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000c3";
/// The owner's token for an application that may drive, answer and resolve
/// its own turns but lacks `turns:resolve-any` and `permissions:respond-any`.
pub const NARROW: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000e5";

/// A server process plus its temp HOME.
pub struct Server {
    /// The temp HOME, config and captured output.
    pub ctx: TestContext,
    /// The `serve` process (None once stopped).
    child: Option<Child>,
    /// Controller home.
    pub home: PathBuf,
    /// Config file.
    pub config: PathBuf,
    /// A project directory registered as workspace `proj`.
    pub project: PathBuf,
    /// Where the server's stderr goes.
    log: PathBuf,
}

/// Writes the config; `server` is the `server` member, `workspaces` extra.
pub fn write_config(ctx: &TestContext, server: Value, workspaces: Value) -> PathBuf {
    write_config_with(ctx, server, workspaces, json!({}))
}

/// [`write_config`] with `providers`.
pub fn write_config_with(
    ctx: &TestContext,
    server: Value,
    workspaces: Value,
    providers: Value,
) -> PathBuf {
    let dir = ctx.home().join(".config/lapis-ai-controller");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    let doc = json!({
        "schema": 1,
        "instance": "default",
        "controllerHome": ctx.home().join(".lapis/ai-controller"),
        "tokens": [
            { "name": "owner", "principal": "owner", "secret": OWNER },
            { "name": "guest", "principal": "guest", "secret": GUEST },
            { "name": "reader", "principal": "owner", "secret": READER, "scopes": ["status:read"] },
            { "name": "narrow", "principal": "owner", "secret": NARROW,
              "applications": ["bot", "other-app", "intruder", "other"],
              "scopes": ["status:read", "threads:read", "threads:write", "turns:write", "turns:resolve",
                          "permissions:respond"] },
        ],
        "providers": providers,
        "workspaces": workspaces,
        "server": server,
    });
    std::fs::write(&config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    config
}

impl Server {
    /// Creates a thread on workspace `proj` for `provider` through the CLI
    /// (`threads create`), returning its id.
    pub fn cli_thread(&self, provider: &str) -> String {
        self.ctx
            .run(["threads", "create", "proj", "--provider", provider])
            .success()
            .stdout
            .trim()
            .to_owned()
    }

    /// Starts `serve` with a 4 KiB frame bound and waits until it answers.
    pub fn start() -> Server {
        Server::start_with(json!({ "maxFrameBytes": 4096 }))
    }

    /// Starts `serve` with the given `server` limits.
    pub fn start_with(limits: Value) -> Server {
        Server::start_full(limits, json!({}))
    }

    /// Starts `serve` with the given limits and providers.
    pub fn start_full(limits: Value, providers: Value) -> Server {
        Server::start_workspaces(limits, providers, &[])
    }

    /// Like [`Server::start_full`], with more workspaces (`<home>/<id>`)
    /// beside `proj`.
    pub fn start_workspaces(limits: Value, providers: Value, more: &[&str]) -> Server {
        Server::start_in_with(TestContext::new(), limits, providers, more)
    }

    /// [`Server::start_full`] in a context the caller prepared (a file
    /// system mounted under its HOME, for example).
    pub fn start_in(ctx: TestContext, limits: Value, providers: Value) -> Server {
        Server::start_in_with(ctx, limits, providers, &[])
    }

    /// [`Server::start_in`] with more workspaces, as
    /// [`Server::start_workspaces`] makes them.
    pub fn start_in_with(
        ctx: TestContext,
        limits: Value,
        providers: Value,
        more: &[&str],
    ) -> Server {
        let project = ctx.home().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let mut workspaces = json!({ "proj": { "path": project } });
        for id in more {
            let dir = ctx.home().join(id);
            std::fs::create_dir_all(&dir).unwrap();
            workspaces[*id] = json!({ "path": dir });
        }
        let config = write_config_with(&ctx, limits, workspaces, providers);
        let mut server = Server {
            home: ctx.home().join(".lapis/ai-controller"),
            ctx,
            child: None,
            config,
            project,
            log: PathBuf::new(),
        };
        server.log = server.ctx.home().join("serve.log");
        server.spawn();
        server
    }

    /// Spawns `serve` and waits for its socket.
    pub fn spawn(&mut self) {
        self.spawn_with_env(&[]);
    }

    /// [`Server::spawn`] with extra environment (test hooks).
    pub fn spawn_with_env(&mut self, env: &[(&str, &str)]) {
        let log = std::fs::File::create(&self.log).unwrap();
        let mut cmd = self.ctx.command(["serve"]);
        cmd.envs(env.iter().copied());
        cmd.stdout(Stdio::null()).stderr(log);
        self.child = Some(cmd.spawn().expect("spawn serve"));
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if UnixStream::connect(self.socket()).is_ok() {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("serve exited early ({status}):\n{}", self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "serve did not come up:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The socket path.
    pub fn socket(&self) -> PathBuf {
        self.home.join("controller.sock")
    }

    /// An SDK client connected as the owner under `application`, past
    /// `hello` (the CLI's own application is `lapis-cli`).
    pub fn client(&self, application: &str) -> lapis_protocol::client::Client {
        lapis_protocol::client::Client::open(
            &self.socket(),
            lapis_protocol::client::Credential::Token {
                token: OWNER.to_owned(),
                application: application.to_owned(),
            },
        )
        .unwrap()
    }

    /// Rewrites the server's config file with `edit` applied to its JSON
    /// (the server sees it at its next reload).
    pub fn edit_config(&self, edit: impl FnOnce(&mut Value)) {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&self.config).unwrap()).unwrap();
        edit(&mut doc);
        std::fs::write(&self.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    }

    /// [`Server::edit_config`], then `config reload`, which must succeed.
    pub fn reconfigure(&self, edit: impl FnOnce(&mut Value)) {
        self.edit_config(edit);
        self.ctx.run(["config", "reload"]).success();
    }

    /// The server's stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// A raw connection.
    pub fn raw(&self) -> Raw {
        Raw::connect(&self.socket())
    }

    /// A raw connection after a successful token `hello` as `app`.
    pub fn hello(&self, token: &str, app: &str) -> (Raw, Value) {
        let mut raw = self.raw();
        let r = raw.call(
            "hello",
            json!({ "protocol": "lapis-ai-controller/1", "token": token, "application": app }),
        );
        assert!(r.get("result").is_some(), "hello failed: {r}");
        (raw, r)
    }

    /// Kills the server with SIGKILL (no cleanup at all) and waits.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
            self.ctx.capture(&self.log_text());
        }
    }

    /// Sends SIGTERM and waits; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        self.stop_with("-TERM")
    }

    /// Sends `signal` (`-TERM`, `-INT`) and waits; returns the exit code.
    pub fn stop_with(&mut self, signal: &str) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status();
        let status = child.wait().unwrap();
        let log = self.log_text();
        self.ctx.capture(&log);
        status.code()
    }

    /// Stops the server and asserts that no bearer appears in the log, any
    /// command output or any file, and that no token appears there or in
    /// any frame the raw clients read (bearers legitimately appear in the
    /// one `hello` response that issues them).
    pub fn finish(mut self, raws: &[&Raw], bearers: &[String]) {
        self.stop();
        let config = self.config.clone();
        for b in bearers {
            self.ctx.assert_no_secret(b, &[]);
        }
        for raw in raws {
            for frame in &raw.seen {
                self.ctx.capture(frame);
            }
        }
        for secret in [OWNER, GUEST, READER, NARROW] {
            self.ctx.assert_no_secret(secret, &[&config]);
        }
    }
}

impl Drop for Server {
    /// Kills the server and every agent it started. SIGKILL gives the server
    /// no chance to reap its agents, and each runs in its own process group,
    /// so a test that ends with a turn in flight would leave its agent
    /// running after the suite (a `--hang --ignore-cancel` one forever). The
    /// server is stopped first so it starts no agent while its children's
    /// groups are listed; the groups are killed once the server is gone.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let server = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGSTOP);
            let groups = own_groups_of_children(child.id());
            let _ = child.kill();
            let _ = child.wait();
            for group in groups {
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

/// The children of `parent` that lead a process group of their own (the
/// agents), as those groups; a child in its parent's group is never named,
/// so the test runner's own group is never signalled.
fn own_groups_of_children(parent: u32) -> Vec<nix::unistd::Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid pgrp …`; comm may hold spaces and ')'.
            let mut rest = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
            let ppid: u32 = rest.next()?.parse().ok()?;
            let pgrp: i32 = rest.next()?.parse().ok()?;
            (ppid == parent && pgrp == pid).then(|| nix::unistd::Pid::from_raw(pgrp))
        })
        .collect()
}

/// A raw line-oriented connection.
pub struct Raw {
    /// Write side.
    pub stream: UnixStream,
    /// Read side.
    reader: BufReader<UnixStream>,
    /// Next id for [`Raw::call`].
    next: i64,
    /// Every frame read, for secret scans.
    pub seen: Vec<String>,
}

impl Raw {
    /// Connects.
    pub fn connect(path: &Path) -> Raw {
        let stream = UnixStream::connect(path).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Raw {
            stream,
            reader,
            next: 1,
            seen: Vec::new(),
        }
    }

    /// Writes raw bytes.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads one frame; `None` at end of stream.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => {
                self.seen.push(line.clone());
                Some(
                    serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("bad frame {line:?}: {e}")),
                )
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("read failed: {e}"),
        }
    }

    /// Reads until a response (skipping notifications, which are kept).
    pub fn recv_response(&mut self) -> Value {
        loop {
            let v = self.recv().expect("connection closed before a response");
            if v.get("id").is_some() {
                return v;
            }
        }
    }

    /// Sends a request and returns its response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let mut line = serde_json::to_vec(
            &json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }),
        )
        .unwrap();
        line.push(b'\n');
        self.send_bytes(&line);
        let r = self.recv_response();
        assert_eq!(r["id"], json!(id), "response id mismatch: {r}");
        r
    }

    /// Whether the server closed the connection (reads EOF).
    pub fn closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        match self.reader.read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
        }
    }
}

/// The stable code of an error response.
pub fn code(r: &Value) -> &str {
    r["error"]["data"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error response: {r}"))
}

/// The result of a success response.
pub fn ok(r: &Value) -> &Value {
    assert!(r.get("error").is_none(), "unexpected error: {r}");
    &r["result"]
}
