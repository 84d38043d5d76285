//! [`TestContext`]: a temp HOME and the built CLI, run as a real process.
//!
//! Every command runs with `HOME`, the XDG directories and the controller-home
//! variable pointing inside the context's temp dir, so no test can touch the
//! real home. Everything a command prints is also kept, so a test can scan all
//! captured output for secrets at the end.
//!
//! Secret-leak check: when a context is dropped (and the test is not already
//! failing), every token secret in every config file under the temp HOME,
//! every value of the agent-secrets `env` file beside it, plus every secret
//! registered with [`TestContext::register_secret`] (session bearers), is
//! searched for in everything captured and in every file under HOME — logs,
//! the SQLite database and its WAL (journal rows), generated files — except
//! the config and env files themselves. Any hit fails the
//! test. The only exemptions: output of `token show` (the one command that
//! prints a secret, by design) and ELF executables (copies of the built
//! binary, which cannot contain a secret generated at run time).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// One finished command.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Captured stdout, lossily decoded.
    pub stdout: String,
    /// Captured stderr, lossily decoded.
    pub stderr: String,
}

impl Output {
    /// Parses stdout as one JSON document, panicking with the output on failure.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Panics unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Output {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics unless the command succeeded.
    #[track_caller]
    pub fn success(&self) -> &Output {
        self.expect_code(0)
    }
}

/// A temp HOME plus the path of the built binary.
#[derive(Debug)]
pub struct TestContext {
    /// Owns the temp directory; dropped (and removed) with the context.
    dir: tempfile::TempDir,
    /// Extra directories put in front of `PATH` (stand-ins such as `systemctl`).
    path_prefix: Vec<PathBuf>,
    /// Extra environment for every command.
    env: Vec<(String, String)>,
    /// Everything every command printed, for secret scans; `true` marks
    /// output of `token show`, which prints a secret by design.
    captured: Mutex<Vec<(String, bool)>>,
    /// Secrets not in a config file (bearers) that must never appear.
    secrets: Mutex<Vec<String>>,
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

impl TestContext {
    /// A fresh temp HOME with the XDG directories created.
    pub fn new() -> TestContext {
        let dir = tempfile::Builder::new()
            .prefix("lapis-e2e-")
            .tempdir()
            .expect("temp dir");
        for sub in [".config", ".local/share", ".local/state", ".cache", "run"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("create XDG dir");
        }
        TestContext {
            dir,
            path_prefix: Vec::new(),
            env: Vec::new(),
            captured: Mutex::new(Vec::new()),
            secrets: Mutex::new(Vec::new()),
        }
    }

    /// The temp HOME.
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// Puts `dir` in front of `PATH` for every later command.
    pub fn prepend_path(&mut self, dir: impl Into<PathBuf>) {
        self.path_prefix.push(dir.into());
    }

    /// Sets an environment variable for every later command.
    pub fn set_env(&mut self, key: &str, value: impl Into<String>) {
        self.env.push((key.to_owned(), value.into()));
    }

    /// Drops a variable [`set_env`](Self::set_env) set, for every later
    /// command.
    pub fn unset_env(&mut self, key: &str) {
        self.env.retain(|(k, _)| k != key);
    }

    /// The built `lapis-ai-controller` binary (`LAPIS_BIN` overrides).
    pub fn bin() -> PathBuf {
        if let Some(bin) = std::env::var_os("LAPIS_BIN") {
            return PathBuf::from(bin);
        }
        // The test executable lives in target/<profile>/deps/.
        let exe = std::env::current_exe().expect("current exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary is in target/<profile>/deps");
        let bin = profile_dir.join("lapis-ai-controller");
        assert!(
            bin.exists(),
            "{} is missing: run the suite with `cargo test --workspace` so the CLI is built",
            bin.display()
        );
        bin
    }

    /// A command for the built binary with the context's environment.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command_for(&Self::bin(), args)
    }

    /// A command for any program with the context's environment.
    pub fn command_for<I, S>(&self, program: &Path, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(program);
        cmd.args(args);
        let home = self.home();
        cmd.env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_RUNTIME_DIR", home.join("run"))
            .env_remove("LAPIS_AI_CONTROLLER_WORKSPACE")
            .env_remove("LAPIS_AI_CONTROLLER_HOME")
            .env_remove("GITHUB_TOKEN")
            .env_remove("GH_TOKEN")
            .env_remove("NOTIFY_SOCKET")
            .env("NO_COLOR", "1");
        let mut path: Vec<PathBuf> = self.path_prefix.clone();
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        cmd.env("PATH", std::env::join_paths(path).expect("PATH"));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs the built binary to completion and captures its output.
    pub fn run<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.output(self.command(args))
    }

    /// Runs any prepared command to completion and captures its output.
    pub fn output(&self, mut cmd: Command) -> Output {
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let prints_secret = args.windows(2).any(|w| w[0] == "token" && w[1] == "show");
        let out = cmd.output().expect("spawn command");
        let out = Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        let mut captured = self.captured.lock().unwrap();
        captured.push((out.stdout.clone(), prints_secret));
        captured.push((out.stderr.clone(), false));
        out
    }

    /// Keeps `text` for [`TestContext::assert_no_secret`] and the leak check
    /// at drop.
    pub fn capture(&self, text: &str) {
        self.captured.lock().unwrap().push((text.to_owned(), false));
    }

    /// Adds a secret (for example a session bearer) that the leak check at
    /// drop must not find in any captured output or file under HOME.
    pub fn register_secret(&self, secret: impl Into<String>) {
        let secret = secret.into();
        if !secret.is_empty() {
            self.secrets.lock().unwrap().push(secret);
        }
    }

    /// Every secret the leak check looks for: registered ones, the token
    /// secrets of every config file under HOME, and every value of the env
    /// files beside them (agent secrets).
    pub fn issued_secrets(&self) -> Vec<String> {
        let mut out = self.secrets.lock().unwrap().clone();
        for env in env_files(self.home()) {
            let Ok(text) = std::fs::read_to_string(&env) else {
                continue;
            };
            for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
                if let Some((_, value)) = line.split_once('=')
                    && value.len() >= 8
                {
                    out.push(value.to_owned());
                }
            }
        }
        for config in config_files(self.home()) {
            let Ok(bytes) = std::fs::read(&config) else {
                continue;
            };
            let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
                continue;
            };
            for token in doc["tokens"].as_array().into_iter().flatten() {
                if let Some(secret) = token["secret"].as_str()
                    && secret.len() >= 8
                {
                    out.push(secret.to_owned());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Where any issued secret appears outside the config files, as
    /// descriptions that never include the secret itself.
    pub fn secret_leaks(&self) -> Vec<String> {
        let secrets = self.issued_secrets();
        let mut leaks = Vec::new();
        if secrets.is_empty() {
            return leaks;
        }
        for (i, (text, exempt)) in self.captured.lock().unwrap().iter().enumerate() {
            if *exempt {
                continue;
            }
            for (k, secret) in secrets.iter().enumerate() {
                if text.contains(secret.as_str()) {
                    leaks.push(format!("secret #{k} in captured output #{i}"));
                }
            }
        }
        let mut configs = config_files(self.home());
        configs.extend(env_files(self.home()));
        for file in walkdir_files(self.home()) {
            if configs.contains(&file) {
                continue;
            }
            let Ok(bytes) = std::fs::read(&file) else {
                continue;
            };
            if bytes.starts_with(b"\x7fELF") {
                continue;
            }
            let hay = String::from_utf8_lossy(&bytes);
            for (k, secret) in secrets.iter().enumerate() {
                if hay.contains(secret.as_str()) {
                    leaks.push(format!("secret #{k} in {}", file.display()));
                }
            }
        }
        leaks
    }

    /// Panics if any captured output, or any file under HOME other than the
    /// files allowed to hold it, contains `secret`.
    #[track_caller]
    pub fn assert_no_secret(&self, secret: &str, allowed_files: &[&Path]) {
        assert!(!secret.is_empty());
        for (text, _) in self.captured.lock().unwrap().iter() {
            assert!(!text.contains(secret), "secret leaked into output:\n{text}");
        }
        for entry in walkdir_files(self.home()) {
            if allowed_files.iter().any(|a| *a == entry) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(&entry) {
                let hay = String::from_utf8_lossy(&bytes);
                assert!(
                    !hay.contains(secret),
                    "secret leaked into {}",
                    entry.display()
                );
            }
        }
    }
}

impl Drop for TestContext {
    /// The leak check; skipped when the test already failed, so the first
    /// failure is the one reported.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let leaks = self.secret_leaks();
        assert!(
            leaks.is_empty(),
            "secret leak check failed (secrets not shown):\n{}",
            leaks.join("\n")
        );
    }
}

/// Config files under `root`: every `config.json` inside a
/// `lapis-ai-controller` config directory (default and named instances).
fn config_files(root: &Path) -> Vec<PathBuf> {
    walkdir_files(root)
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| n == "config.json")
                && p.components()
                    .any(|c| c.as_os_str() == "lapis-ai-controller")
        })
        .collect()
}

/// Agent secrets files under `root`: every `env` beside a config file.
fn env_files(root: &Path) -> Vec<PathBuf> {
    config_files(root)
        .into_iter()
        .filter_map(|c| c.parent().map(|d| d.join("env")))
        .filter(|e| e.is_file())
        .collect()
}

fn walkdir_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                out.push(entry.path());
            }
        }
    }
    out
}
