//! [`TestContext`]: a temp HOME and the built CLI, run as a real process.
//!
//! Every command runs with `HOME`, the XDG directories and the controller-home
//! variable pointing inside the context's temp dir, so no test can touch the
//! real home. Everything a command prints is also kept, so a test can scan all
//! captured output for secrets at the end.

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
    /// Everything every command printed, for secret scans.
    captured: Mutex<Vec<String>>,
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
            .env_remove("GITHUB_TOKEN")
            .env_remove("GH_TOKEN")
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
        let out = cmd.output().expect("spawn command");
        let out = Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        self.capture(&out.stdout);
        self.capture(&out.stderr);
        out
    }

    /// Keeps `text` for [`TestContext::assert_no_secret`].
    pub fn capture(&self, text: &str) {
        self.captured.lock().unwrap().push(text.to_owned());
    }

    /// Panics if any captured output, or any file under HOME other than the
    /// files allowed to hold it, contains `secret`.
    #[track_caller]
    pub fn assert_no_secret(&self, secret: &str, allowed_files: &[&Path]) {
        assert!(!secret.is_empty());
        for text in self.captured.lock().unwrap().iter() {
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
