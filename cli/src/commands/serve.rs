//! `serve [--stdio]`: config → validation → store (instance lock, row
//! validation, recovery) → listen. Logs go to stderr as structured lines;
//! stdout stays free for managed mode's protocol.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use lapis_service::{ServeOptions, ServerIdentity, serve};

use crate::args::{GlobalArgs, ServeArgs};
use crate::exit::{CliError, CliResult};
use crate::identity::build_identity;

use super::log_file::{self, SizeCappedLog};

pub(super) fn run(global: &GlobalArgs, args: ServeArgs) -> CliResult {
    init_logging(args.log_file.as_deref())?;
    // Managed mode answers every start failure with a frame.
    let startup_failed = |e: CliError| {
        if args.stdio {
            lapis_service::report_startup_failure(e.code, &format!("{:#}", e.error));
        }
        e
    };
    let target = super::connect::target(global, args.home.dir()).map_err(startup_failed)?;
    let config_path = target.paths.config.clone();
    let build = build_identity();
    let snapshot = std::env::current_exe()
        .ok()
        .and_then(|exe| lapis_installer::releases::snapshot_of_executable(&exe, &build));
    let identity = ServerIdentity::new(build, snapshot);
    let mut options = ServeOptions::new(target.config, target.home, identity, args.stdio);
    // Agent secrets: read at start (and by each reload); a bad env file
    // stops the start.
    options.secrets = super::config_files::load_env_file(&config_path)
        .map_err(startup_failed)?
        .1;
    // This binary is also the built-in `echo` agent (`acp-echo`).
    options.agent_exe = std::env::current_exe().ok();
    // Re-read by SIGHUP and `config reload`.
    options.config_path = Some(config_path);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = async_workers(std::env::var_os(WORKERS_ENV)) {
        runtime.worker_threads(n);
    }
    let runtime = runtime
        .enable_all()
        .build()
        .map_err(|e| CliError::failure("internal", e))?;
    let result = runtime.block_on(serve(options));
    // Managed mode's stdin reader may still be blocked in a read: do not
    // wait for it (the parent need not close stdin).
    runtime.shutdown_timeout(Duration::from_millis(200));
    result.map_err(|e| CliError::failure(e.code(), e))
}

/// Tokio's own variable for its worker count, honoured when set.
const WORKERS_ENV: &str = "TOKIO_WORKER_THREADS";

/// The async worker threads `serve` asks for: one, unless
/// `TOKIO_WORKER_THREADS` is set (then `None`: tokio's builder reads it).
/// The store's writer is a thread of its own and blocking work (snapshots,
/// file reads) has tokio's blocking pool, so the async side is I/O and
/// framing; with two workers on two cores a warm turn's tasks were woken
/// and stolen across threads, and serve spent 15% more CPU per warm turn
/// (0.45 → 0.38 ms with one) and ran 14% fewer turns/s over 8 workspaces
/// (1,835 → 2,135; docs/performance.md, session 11).
fn async_workers(env: Option<std::ffi::OsString>) -> Option<usize> {
    env.is_none().then_some(1)
}

/// Structured log lines on stderr, or in `log_file` (size-capped:
/// [`super::log_file`]). `LAPIS_LOG` (an env-filter directive) overrides
/// the default `info`. Log fields never carry secrets or payloads.
fn init_logging(log_file: Option<&Path>) -> CliResult {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAPIS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false);
    let _ = match log_file {
        Some(path) => {
            let log =
                SizeCappedLog::open(path, log_file::MAX_BYTES, log_file::KEEP).map_err(|e| {
                    CliError::failure(
                        "io_error",
                        anyhow::anyhow!("cannot open {}: {e}", path.display()),
                    )
                })?;
            builder.with_writer(Mutex::new(log)).try_init()
        }
        None => builder.with_writer(std::io::stderr).try_init(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_asks_for_one_async_worker_unless_tokio_worker_threads_is_set() {
        assert_eq!(async_workers(None), Some(1));
        assert_eq!(async_workers(Some("4".into())), None);
    }
}
