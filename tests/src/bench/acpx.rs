//! The peer: the npm `acpx` package (a headless ACP client), installed once
//! per run into a temp prefix with `npm install --prefix`. When node or npm
//! is missing, or the install fails (no registry), suites print a skip line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An installed `acpx` and the prefix that owns it.
#[derive(Debug)]
pub(crate) struct Acpx {
    /// Temp prefix (removed on drop) unless `ACPX` named an existing binary.
    _prefix: Option<tempfile::TempDir>,
    /// The `acpx` executable.
    pub(crate) bin: PathBuf,
    /// Its own HOME, so it never reads or writes the real one.
    pub(crate) home: tempfile::TempDir,
}

impl Acpx {
    /// Installs acpx (or uses `$ACPX`); `Err` is the reason for the skip line.
    pub(crate) fn install() -> Result<Acpx, String> {
        let home = tempfile::tempdir().map_err(|e| e.to_string())?;
        if let Some(bin) = std::env::var_os("ACPX") {
            return Ok(Acpx {
                _prefix: None,
                bin: bin.into(),
                home,
            });
        }
        for tool in ["node", "npm"] {
            let found = Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !found {
                return Err(format!("{tool} not found"));
            }
        }
        let prefix = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(prefix.path())
            .arg("acpx")
            .env("HOME", home.path())
            .output()
            .map_err(|e| e.to_string())?;
        let bin = prefix.path().join("node_modules/.bin/acpx");
        if !out.status.success() || !bin.exists() {
            return Err(format!(
                "npm install acpx failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
        }
        Ok(Acpx {
            _prefix: Some(prefix),
            bin,
            home,
        })
    }

    /// `acpx --agent "<lapis> acp-echo" <args…>` in `cwd`; panics on failure.
    pub(crate) fn run(&self, lapis: &Path, cwd: &Path, args: &[&str]) {
        let agent = format!("{} acp-echo", lapis.display());
        self.run_agent(&agent, &[], cwd, args);
    }

    /// `acpx --agent "<agent>" <args…>` in `cwd` with `env` added (the
    /// agent inherits it); panics on failure.
    pub(crate) fn run_agent(&self, agent: &str, env: &[(&str, &Path)], cwd: &Path, args: &[&str]) {
        let out = Command::new(&self.bin)
            .args(["--agent", agent, "--cwd"])
            .arg(cwd)
            .args(args)
            .current_dir(cwd)
            .envs(env.iter().copied())
            .env("HOME", self.home.path())
            .stdin(Stdio::null())
            .output()
            .expect("spawn acpx");
        assert!(
            out.status.success(),
            "acpx {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `acpx --version`.
    pub(crate) fn version(&self) -> String {
        Command::new(&self.bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }
}
