//! The SDK in one screen: connect, `hello`, create a thread, submit a turn,
//! follow its typed journal, answer the agent's permission requests, and
//! print the reply.
//!
//! ```text
//! cargo run -p lapis-protocol --example quickstart -- SOCKET TOKEN WORKSPACE "your prompt"
//! ```
//!
//! `SOCKET` is `<controller home>/controller.sock` (default
//! `~/.lapis/ai-controller/controller.sock`); `TOKEN` a bootstrap token
//! (`lapis-ai-controller token show`); `WORKSPACE` a registered workspace
//! id (`lapis-ai-controller workspaces list`; the README's quickstart
//! registers `demo`). The provider is the built-in, keyless `echo` unless
//! `LAPIS_EXAMPLE_PROVIDER` names another. Permission requests are answered
//! with the first option that allows once (a real application asks its
//! user). A failure prints its message and stable code and exits 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use lapis_protocol::client::{Client, ClientError, Credential, JournalFollower};
use lapis_protocol::{ApprovalPolicy, Payload};

/// Where the turn runs.
#[derive(Debug)]
pub struct Target {
    /// Workspace id.
    pub workspace: String,
    /// Provider name.
    pub provider: String,
}

/// Runs one turn and returns its reply.
pub fn run(
    socket: &Path,
    token: String,
    target: &Target,
    prompt: &str,
) -> Result<String, ClientError> {
    let credential = Credential::Token {
        token,
        application: "quickstart".into(),
    };
    let mut client = Client::open(socket, credential)?;
    let thread = client.threads_create(
        &target.workspace,
        &target.provider,
        ApprovalPolicy::Ask,
        None,
    )?;
    follow_one_turn(&mut client, &thread.id, prompt)
}

/// Submits `prompt` on `thread` and follows the thread's journal until the
/// turn settles: the reply streams as `message_chunk` events, permission
/// requests are answered as they arrive.
pub fn follow_one_turn(
    client: &mut Client,
    thread: &str,
    prompt: &str,
) -> Result<String, ClientError> {
    // Subscribe first (from the thread's start), so no event is missed
    // between the submit and the first read.
    let mut follower = JournalFollower::start(client, Some(thread), Some(0))?;
    // A command id makes the submit idempotent: resending it after a lost
    // connection returns the same turn instead of running it twice (one
    // turn per thread here, so the thread names it).
    let command = format!("quickstart-{thread}");
    let turn = follower.client().turns_submit(thread, &command, prompt)?;
    let mut reply = String::new();
    loop {
        let Some(event) = follower.next(Some(Duration::from_secs(300)))? else {
            return Err(ClientError::Protocol("no event for 5 minutes".into()));
        };
        if event.turn_id.as_deref() != Some(turn.id.as_str()) {
            continue;
        }
        match event.body() {
            Some(Payload::MessageChunk(chunk)) => reply.push_str(chunk.plain_text().unwrap_or("")),
            Some(Payload::PermissionRequested(request)) => {
                let allow = request.options.iter().find(|o| o.kind == "allow_once");
                if let Some(option) = allow.or(request.options.first()) {
                    follower.client().permissions_respond(
                        &turn.id,
                        &request.request_id,
                        &option.id,
                    )?;
                }
            }
            // Finished, or fenced (its outcome unknown: `turns resolve`).
            Some(Payload::TurnState(change))
                if change.to.is_terminal() || change.to.is_fenced() =>
            {
                return Ok(reply);
            }
            _ => {}
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [socket, token, workspace, prompt] = <[String; 4]>::try_from(args).unwrap_or_else(|_| {
        eprintln!("usage: quickstart SOCKET TOKEN WORKSPACE PROMPT");
        std::process::exit(2);
    });
    let target = Target {
        workspace,
        provider: std::env::var("LAPIS_EXAMPLE_PROVIDER").unwrap_or_else(|_| "echo".into()),
    };
    match run(&PathBuf::from(socket), token, &target, &prompt) {
        Ok(reply) => {
            println!("{reply}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("quickstart: {}", explain(&e, &target));
            ExitCode::FAILURE
        }
    }
}

/// The error as a person reads it: the message with its stable code, and
/// what to do for the mistakes a first run makes.
pub fn explain(e: &ClientError, target: &Target) -> String {
    let hint = match e.code() {
        "not_found" => format!(
            "; is `{}` a workspace? `lapis-ai-controller workspaces list` shows them",
            target.workspace
        ),
        "unavailable" => "; is the controller running? `lapis-ai-controller status` says".into(),
        "unauthenticated" => "; `lapis-ai-controller token show` prints the token".into(),
        _ => String::new(),
    };
    format!("{e}{hint}")
}
