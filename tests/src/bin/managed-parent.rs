//! An application that embeds the controller, for the end-to-end test that
//! kills it: starts a [`ManagedController`], runs one turn through the
//! `echo` agent (so the controller has an agent process to reap), prints
//! the controller's pid on stdout, then waits to be killed.
//!
//! ```text
//! managed-parent CONTROLLER HOME CONFIG CHILD_HOME   (the token on stdin)
//! ```
//!
//! With `MANAGED_PARENT_NO_TURN` set it runs no turn (for a stand-in
//! controller that only answers the handshake).

use std::io::{BufRead, Write};
use std::time::Duration;

use lapis_protocol::ApprovalPolicy;
use lapis_protocol::client::{Credential, ManagedController, ManagedOptions};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [exe, home, config, child_home] = args.as_slice() else {
        anyhow::bail!("usage: managed-parent CONTROLLER HOME CONFIG CHILD_HOME");
    };
    let mut token = String::new();
    std::io::stdin().lock().read_line(&mut token)?;
    let credential = Credential::Token {
        token: token.trim().to_owned(),
        application: "embedder".to_owned(),
    };
    let mut managed = ManagedController::start(
        ManagedOptions::new(home, credential)
            .executable(exe.as_str())
            .config(config)
            .inherit("PATH")
            .env("HOME", child_home),
    )?;
    if std::env::var_os("MANAGED_PARENT_NO_TURN").is_some() {
        // A stand-in controller (only the handshake): just report it.
        return report_and_wait(&managed);
    }
    let client = managed.client();
    let thread = client.threads_create("proj", "echo", ApprovalPolicy::Ask, None)?;
    let turn = client.turns_submit(&thread.id, "c-1", "hello")?;
    loop {
        let t = client.turns_get(&turn.id)?;
        if t.state.as_str() == "completed" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    report_and_wait(&managed)
}

/// Prints the controller's pid, then waits to be killed.
fn report_and_wait(managed: &ManagedController) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", managed.pid())?;
    out.flush()?;
    drop(out);
    loop {
        std::thread::park();
    }
}
