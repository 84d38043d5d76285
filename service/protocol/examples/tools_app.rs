//! A runnable application that serves one tool endpoint to an agent for
//! one turn: register, bind, submit, serve until the turn ends.
//!
//! ```text
//! cargo run -p lapis-protocol --example tools_app -- SOCKET TOKEN WORKSPACE PROVIDER PROMPT_LINE...
//! ```
//!
//! It says `hello` as application `tools-example`, registers endpoint
//! `notes` (a read tool `list` and a mutating tool `add`, with a capture
//! port), creates a thread on `WORKSPACE` with `PROVIDER` that binds it,
//! submits the prompt (each further argument is one line), and serves the
//! controller's tool callbacks with
//! [`Client::serve_tools_until_settled`] until that turn settles; then it
//! prints the agent's reply and exits 0 when the turn completed, 1
//! otherwise. `add` records each idempotency key and answers a repeated one
//! from what it recorded, so its effect happens once per key even if the
//! application itself were asked twice.
//!
//! An agent that calls tools without a model or an API key: the test
//! suite's fixture agent, `cargo build -p lapis-e2e --bin fixture-agent`,
//! added as a provider with `--arg --mcp-tools`. Each prompt line
//! `call notes__add {"text":"buy milk"}` makes it call that tool through the
//! controller's MCP bridge and reply `tool notes__add: TEXT`; a line `list`
//! replies with the tools it sees (the SDK README shows every step).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use lapis_protocol::client::{CallbackError, Client, ClientError, Credential, ToolHandler};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::tools::{CaptureNotice, ToolInvoke, ToolOutput, ToolSpec, ToolsRegister};
use lapis_protocol::{Payload, Turn, TurnState};
use serde_json::json;

/// The endpoint's state: notes, and what each idempotency key produced.
#[derive(Default)]
struct Notes {
    notes: Vec<String>,
    done: BTreeMap<String, ToolOutput>,
}

impl ToolHandler for Notes {
    fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
        match call.tool.as_str() {
            "list" => Ok(ToolOutput {
                text: self.notes.join("\n"),
                ..Default::default()
            }),
            "add" => {
                if let Some(earlier) = self.done.get(&call.idempotency_key) {
                    return Ok(earlier.clone());
                }
                let text = call.arguments["text"]
                    .as_str()
                    .ok_or_else(|| CallbackError("`text` is required".into()))?;
                self.notes.push(text.to_owned());
                let out = ToolOutput {
                    text: format!("added note {}", self.notes.len()),
                    ..Default::default()
                };
                self.done.insert(call.idempotency_key.clone(), out.clone());
                Ok(out)
            }
            other => Err(CallbackError(format!("no tool {other}"))),
        }
    }

    fn capture_begin(&mut self, notice: &CaptureNotice) -> Result<(), CallbackError> {
        eprintln!("capture begin {} {}", notice.tool, notice.idempotency_key);
        Ok(())
    }

    fn capture_finish(&mut self, notice: &CaptureNotice) -> Result<(), CallbackError> {
        eprintln!("capture finish {} {}", notice.tool, notice.idempotency_key);
        Ok(())
    }
}

/// Where the example's thread goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The workspace id.
    pub workspace: String,
    /// The provider.
    pub provider: String,
}

/// How long the example serves one turn before it gives up.
const TURN_WITHIN: Duration = Duration::from_secs(300);

/// The endpoint: a read tool `list` and a mutating tool `add`, with a
/// capture port.
fn notes_endpoint() -> ToolsRegister {
    ToolsRegister {
        endpoint: "notes".into(),
        capture: true,
        tools: vec![
            ToolSpec {
                name: "list".into(),
                description: "List the notes".into(),
                input_schema: json!({"type": "object"}),
                mutating: false,
            },
            ToolSpec {
                name: "add".into(),
                description: "Add a note".into(),
                input_schema: json!({"type": "object",
                    "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                mutating: true,
            },
        ],
    }
}

/// Says `hello`, registers `notes`, creates a thread of `target` binding it,
/// submits `prompt` and serves the tool calls until the turn settles.
/// Returns the settled turn and the agent's reply. (The end-to-end suite
/// runs this against a real `serve`: `tests/tests/e2e/tools_example.rs`,
/// and the SDK README's commands: `tests/tests/e2e/sdk_readme.rs`.)
pub fn run(
    socket: &Path,
    token: String,
    target: Target,
    prompt: &str,
) -> Result<(Turn, String), ClientError> {
    let credential = Credential::Token {
        token,
        application: "tools-example".into(),
    };
    let mut client = Client::open(socket, credential)?;
    let registered = client.tools_register(notes_endpoint())?;
    eprintln!("registered {}", registered.endpoint.identity);
    let thread = client
        .threads_create_with(
            &ThreadsCreate::new(target.workspace, target.provider).tools(["notes"]),
        )?
        .thread;
    eprintln!("thread {}", thread.id);
    // The agent calls the tools while the turn runs, on this connection:
    // submit, then serve until the turn has settled.
    let command = format!("tools-example-{}", thread.id);
    let turn = client.turns_submit(&thread.id, &command, prompt)?;
    let mut notes = Notes::default();
    let turn = client.serve_tools_until_settled(&mut notes, &turn.id, Some(TURN_WITHIN))?;
    let reply = reply_of(&mut client, &turn)?;
    Ok((turn, reply))
}

/// The turn's reply: its message chunks, in order, from the journal.
fn reply_of(client: &mut Client, turn: &Turn) -> Result<String, ClientError> {
    let mut reply = String::new();
    let mut after = 0;
    loop {
        let page = client.journal_replay(Some(&turn.thread_id), after, None)?;
        for event in &page.events {
            if event.turn_id.as_deref() != Some(turn.id.as_str()) {
                continue;
            }
            if let Some(Payload::MessageChunk(chunk)) = event.body() {
                reply.push_str(chunk.plain_text().unwrap_or(""));
            }
        }
        if !page.more {
            return Ok(reply);
        }
        after = page.next_after;
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: tools_app SOCKET TOKEN WORKSPACE PROVIDER PROMPT_LINE...");
        return ExitCode::from(2);
    }
    let target = Target {
        workspace: args[2].clone(),
        provider: args[3].clone(),
    };
    let prompt = args[4..].join("\n");
    match run(&PathBuf::from(&args[0]), args[1].clone(), target, &prompt) {
        Ok((turn, reply)) => {
            print!("{reply}");
            eprintln!("turn {} {}", turn.id, turn.state);
            if turn.state == TurnState::Completed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("tools_app: {e}");
            ExitCode::FAILURE
        }
    }
}
