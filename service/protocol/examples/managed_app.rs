//! An application with a private controller of its own: starts
//! `lapis-ai-controller serve --stdio` through `ManagedController`, runs
//! one turn on it and stops it.
//!
//! ```text
//! cargo run -p lapis-protocol --example managed_app -- CONTROLLER_HOME CONFIG TOKEN "your prompt"
//! ```
//!
//! `CONTROLLER_HOME` is where the controller keeps its database (give the
//! same directory every time: the journal lives there); `CONFIG` a
//! configuration file with `TOKEN` among its tokens and a workspace `proj`.
//! The executable is `lapis-ai-controller` from `PATH` or `~/.local/bin`
//! unless `LAPIS_EXAMPLE_CONTROLLER` names one.

/// The quickstart's turn loop, shared rather than repeated.
#[path = "quickstart.rs"]
#[allow(dead_code)]
pub mod quickstart;

use std::path::Path;

use lapis_protocol::ApprovalPolicy;
use lapis_protocol::client::{Credential, ManagedController, ManagedOptions};

/// The options this application starts its controller with.
pub fn options(home: &Path, config: &Path, token: String) -> ManagedOptions {
    let credential = Credential::Token {
        token,
        application: "managed-example".into(),
    };
    ManagedOptions::new(home, credential)
        .config(config)
        // The controller's environment is only what is allowed here: PATH
        // and HOME let it find agents and their allowlisted variables.
        .inherit("PATH")
        .inherit("HOME")
        // Refuse a controller of another version than this SDK's.
        .expect_build("version", env!("CARGO_PKG_VERSION"))
}

/// Starts the controller, runs `prompt` on a new `echo` thread of
/// workspace `proj`, stops the controller; returns the reply.
pub fn run(options: ManagedOptions, prompt: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut managed = ManagedController::start(options)?;
    eprintln!(
        "controller {} ready (pid {})",
        managed.ready().server.version,
        managed.pid()
    );
    let client = managed.client();
    let thread = client.threads_create("proj", "echo", ApprovalPolicy::Ask, None)?;
    let reply = quickstart::follow_one_turn(client, &thread.id, prompt)?;
    // SIGTERM, then the controller settles its turns and stops its agents.
    managed.stop()?;
    Ok(reply)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(home), Some(config), Some(token), Some(prompt)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        eprintln!("usage: managed_app CONTROLLER_HOME CONFIG TOKEN PROMPT");
        std::process::exit(2);
    };
    let mut options = options(Path::new(&home), Path::new(&config), token);
    if let Ok(exe) = std::env::var("LAPIS_EXAMPLE_CONTROLLER") {
        options = options.executable(exe);
    }
    let reply = run(options, &prompt)?;
    println!("{reply}");
    Ok(())
}
