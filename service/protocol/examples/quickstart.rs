//! The SDK in one screen: connect, `hello`, create a thread, submit a turn,
//! follow its typed journal, answer the agent's permission requests, and
//! print the reply.
//!
//! ```text
//! cargo run -p lapis-protocol --example quickstart -- SOCKET TOKEN "your prompt"
//! ```
//!
//! `SOCKET` is `<controller home>/controller.sock` (default
//! `~/.lapis/ai-controller/controller.sock`); `TOKEN` a bootstrap token
//! (`lapis-ai-controller token show`). The thread is on workspace `proj`
//! with the `echo` provider unless `LAPIS_EXAMPLE_WORKSPACE` /
//! `LAPIS_EXAMPLE_PROVIDER` say otherwise. Permission requests are answered
//! with the first option that allows once (a real application asks its
//! user).

use std::path::{Path, PathBuf};
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
            Some(Payload::TurnState(change)) if change.to.is_terminal() => return Ok(reply),
            _ => {}
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(socket), Some(token), Some(prompt)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: quickstart SOCKET TOKEN PROMPT");
        std::process::exit(2);
    };
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
    let target = Target {
        workspace: env("LAPIS_EXAMPLE_WORKSPACE", "proj"),
        provider: env("LAPIS_EXAMPLE_PROVIDER", "echo"),
    };
    let reply = run(&PathBuf::from(socket), token, &target, &prompt)?;
    println!("{reply}");
    Ok(())
}
