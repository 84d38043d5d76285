//! A runnable application that serves one tool endpoint to its agents.
//!
//! ```text
//! cargo run -p lapis-protocol --example tools_app -- SOCKET TOKEN
//! ```
//!
//! It says `hello` as application `tools-example`, registers endpoint
//! `notes` (a read tool `list` and a mutating tool `add`, with a capture
//! port), prints the id of a thread that binds it (on workspace `proj` with
//! the `echo` provider unless `LAPIS_EXAMPLE_WORKSPACE` /
//! `LAPIS_EXAMPLE_PROVIDER` say otherwise), then serves the controller's
//! callbacks until the connection closes. `add` records each idempotency
//! key and answers a repeated one from what it recorded, so its effect
//! happens once per key even if the application itself were asked twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lapis_protocol::client::{CallbackError, Client, Credential, ToolHandler};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::tools::{CaptureNotice, ToolInvoke, ToolOutput, ToolSpec, ToolsRegister};
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

/// Says `hello`, registers `notes`, creates a thread of `target` binding it
/// (its id goes to `on_thread`), then serves the callbacks until the
/// connection closes. (The end-to-end suite runs this against a real
/// `serve`: `tests/tests/e2e/tools_example.rs`.)
pub fn run(
    socket: &Path,
    token: String,
    target: Target,
    on_thread: impl FnOnce(&str),
) -> Result<(), Box<dyn std::error::Error>> {
    let credential = Credential::Token {
        token,
        application: "tools-example".into(),
    };
    let mut client = Client::open(socket, credential)?;
    let object = json!({"type": "object"});
    let endpoint = ToolsRegister {
        endpoint: "notes".into(),
        capture: true,
        tools: vec![
            ToolSpec {
                name: "list".into(),
                description: "List the notes".into(),
                input_schema: object.clone(),
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
    };
    let registered = client.tools_register(endpoint)?;
    eprintln!("registered {}", registered.endpoint.identity);
    let thread = client.threads_create_with(
        &ThreadsCreate::new(target.workspace, target.provider).tools(["notes"]),
    )?;
    on_thread(&thread.thread.id);
    let mut notes = Notes::default();
    loop {
        client.serve_tools(&mut notes, Some(Duration::from_secs(60)))?;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(socket), Some(token)) = (args.next(), args.next()) else {
        eprintln!("usage: tools_app SOCKET TOKEN");
        std::process::exit(2);
    };
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
    let target = Target {
        workspace: env("LAPIS_EXAMPLE_WORKSPACE", "proj"),
        provider: env("LAPIS_EXAMPLE_PROVIDER", "echo"),
    };
    run(&PathBuf::from(socket), token, target, |id| println!("{id}"))
}
