#!/usr/bin/env node
// An ACP v1 agent written on the official TypeScript SDK
// (`@agentclientprotocol/sdk`), for the controller's end-to-end tests.
//
// Why it exists: the Rust fixture agent speaks JSON-RPC written by us, so a
// shared misunderstanding of ACP would pass both sides. This agent lets the
// SDK own the wire (framing, validation of every request against the ACP
// schemas, error responses), so a test that passes against it passes against
// an independent implementation.
//
// What it does (all of it deterministic, no model behind it):
// - `initialize` answers protocolVersion 1, `loadSession: true`
//   (`false` when TS_AGENT_NO_LOAD=1) and
//   `promptCapabilities.embeddedContext: true` (`false` when
//   TS_AGENT_NO_EMBEDDED=1).
// - `session/new` makes a session whose history goes to
//   `$TS_AGENT_STATE_DIR/<sessionId>.jsonl` (default `<tmp>/lapis-ts-agent`),
//   so a new process can `session/load` it: a header line
//   `{"sessionId","cwd"}`, then one `{"role":"user"|"agent","text"}` line per
//   prompt (written before it is answered) and per reply. A prompt's line
//   also carries `blocks`, the prompt's content blocks as received (their
//   `type`, and `text`, or a resource's `uri`, `mimeType` and `text`), so a
//   test can see the order and form of what the client sent; its `text` is
//   the prompt's text blocks joined by newlines.
// - `session/resume` (advertised as `sessionCapabilities.resume` when
//   TS_AGENT_RESUME=1) restores the stored history without replaying any
//   of it; `session/close` (advertised when TS_AGENT_CLOSE=1) forgets the
//   live session (its history stays on disk). Each is logged to stderr as
//   `session S resumed` / `session S closed`.
// - `session/load` replays the stored history as `session/update`
//   notifications (user_message_chunk for prompts, agent_message_chunk for
//   replies) and answers only after the whole history is out, as the ACP
//   session-setup page requires.
// - `session/prompt` streams a reply that proves memory:
//   `turn N of session S; you said before: "<previous prompt>"`
//   (`turn 1 of session S; nothing said before` on a first turn), then
//   answers `end_turn`. Markers in the prompt text switch on more:
//   `[tool]` a tool_call + tool_call_update before the reply;
//   `[permission]` a `session/request_permission` with allow_once/reject_once
//   options, the choice reported as `permission: <kind>; `;
//   `[slow]` waits for `session/cancel` and answers `cancelled`;
//   `[usage]` sends a `usage_update` before the reply with the session's
//   context (`used` 1000 × N, `size` 200000) and its *cumulative* cost
//   (0.25 USD × N on turn N), and answers with this turn's tokens in the
//   response's `usage` (*per turn*: 100 input, 50 output, 10 thought, 20
//   cache read, 180 total) — the two semantics the controller handles.
//   `[elicit]` sends an empty-form `elicitation/create` (an approval) and
//   `[elicit-fields]` one with a field, reporting `elicit: <action>; ` or
//   `elicit: error <code>; ` before the reply.
//   A prompt naming `lapis-policy-probe.txt` (the controller's policy
//   probe) asks permission to write that file (its path in `locations`)
//   and writes it only when allowed.
//   Lines `list` and `call NAME JSON` (as the Rust fixture agent's
//   `--mcp-tools`) use the session's `lapis-tools` MCP server from
//   `session/new`/`session/load` `mcpServers`, through the official
//   TypeScript MCP SDK (`@modelcontextprotocol/sdk`, its stdio client):
//   `list` replies `tools: a, b`, a call `tool NAME: TEXT` (or
//   `tool NAME error: TEXT`), each on its own line, before the rest of the
//   reply. The MCP client is started at the first such line and kept for
//   the session.
//
// What must stay true: nothing but ACP frames on stdout (diagnostics go to
// stderr); the history file is only appended to (a turn costs the same on
// the thousandth turn as on the first), and a torn last line left by a
// killed process is dropped on load, never replayed; a session id never
// names a path outside the state dir.

import { randomUUID } from "node:crypto";
import { appendFileSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The file the controller's policy probe asks for. */
const PROBE_FILE = "lapis-policy-probe.txt";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const STATE_DIR = process.env.TS_AGENT_STATE_DIR || join(tmpdir(), "lapis-ts-agent");
const LOAD_SESSION = process.env.TS_AGENT_NO_LOAD !== "1";
const RESUME_SESSION = process.env.TS_AGENT_RESUME === "1";
const CLOSE_SESSION = process.env.TS_AGENT_CLOSE === "1";
const EMBEDDED_CONTEXT = process.env.TS_AGENT_NO_EMBEDDED !== "1";
/** Session ids this agent makes, and the only ones it will read from disk. */
const SESSION_ID = /^ts-[0-9a-f-]{36}$/;

/** Sessions known to this process: id -> { id, cwd, history, pending }. */
const sessions = new Map();

function log(message) {
  process.stderr.write(`ts-agent: ${message}\n`);
}

function stateFile(sessionId) {
  return join(STATE_DIR, `${sessionId}.jsonl`);
}

/** Starts the history file of a new session with its header line. */
function create(session) {
  mkdirSync(STATE_DIR, { recursive: true });
  const header = { sessionId: session.id, cwd: session.cwd };
  writeFileSync(stateFile(session.id), `${JSON.stringify(header)}\n`, { flag: "wx" });
}

/** Appends one history entry, in memory and on disk. */
function record(session, role, text, blocks) {
  const entry = blocks ? { role, text, blocks } : { role, text };
  session.history.push(entry);
  appendFileSync(stateFile(session.id), `${JSON.stringify(entry)}\n`);
}

/** Reads a stored session, or null when this state dir never saw it. */
function restore(sessionId) {
  if (!SESSION_ID.test(sessionId)) {
    return null;
  }
  let text;
  try {
    text = readFileSync(stateFile(sessionId), "utf8");
  } catch (error) {
    if (error.code === "ENOENT") {
      return null;
    }
    throw error;
  }
  // Complete lines end in "\n": whatever follows the last one is a write
  // cut short by a kill. It is cut off the file too, so the next append
  // starts a line of its own.
  const complete = text.slice(0, text.lastIndexOf("\n") + 1);
  if (complete.length < text.length) {
    truncateSync(stateFile(sessionId), Buffer.byteLength(complete));
    log(`session ${sessionId}: dropped a torn history line`);
  }
  const lines = complete.split("\n");
  lines.pop();
  const header = JSON.parse(lines[0]);
  const history = lines.slice(1).map((line) => JSON.parse(line));
  return { id: sessionId, cwd: header.cwd, history, pending: null, mcpServers: [], mcp: null };
}

/** The prompt's text blocks, one per line (context blocks sent as text
 * come before the user's text and must not run into its lines). */
function textOf(prompt) {
  return prompt
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("\n");
}

/** What the history keeps of each prompt block: its form and its text. */
function blocksOf(prompt) {
  return prompt.map((block) => {
    if (block.type === "text") {
      return { type: "text", text: block.text };
    }
    if (block.type === "resource") {
      const { uri, mimeType, text } = block.resource;
      return { type: "resource", uri, mimeType, text };
    }
    return { type: block.type };
  });
}

function say(client, sessionId, sessionUpdate, text) {
  return client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate, content: { type: "text", text } },
  });
}

/** Resolves when `signal` aborts (a `session/cancel` for this turn). */
function cancelled(signal) {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
    } else {
      signal.addEventListener("abort", () => resolve(), { once: true });
    }
  });
}

async function toolCall(client, sessionId, turn) {
  const toolCallId = `tool-${turn}`;
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call",
      toolCallId,
      title: "Read notes",
      kind: "read",
      status: "pending",
      rawInput: { path: "notes.txt" },
    },
  });
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: "notes read" } }],
    },
  });
}

/** The prompt's `list` and `call NAME JSON` lines, in order. */
function toolLines(text) {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line === "list" || line.startsWith("call "));
}

/** The session's MCP client of the controller's bridge, started once. */
function mcpClient(session) {
  if (!session.mcp) {
    session.mcp = (async () => {
      const bridge = (session.mcpServers || []).find((s) => s.name === "lapis-tools");
      if (!bridge) {
        throw new Error("the session has no lapis-tools server");
      }
      const env = Object.fromEntries((bridge.env || []).map((e) => [e.name, e.value]));
      const transport = new StdioClientTransport({
        command: bridge.command,
        args: bridge.args || [],
        env,
        stderr: "inherit",
      });
      const client = new McpClient({ name: "lapis-ts-agent", version: "0.0.0" });
      await client.connect(transport);
      return client;
    })();
    // A failed start is reported once per line and tried again next turn.
    session.mcp.catch(() => {
      session.mcp = null;
    });
  }
  return session.mcp;
}

/** Runs one `list` or `call` line through the bridge; returns the reply line. */
async function toolLine(session, line) {
  let client;
  try {
    client = await mcpClient(session);
  } catch (error) {
    return `mcp error: ${error.message}`;
  }
  if (line === "list") {
    try {
      const listed = await client.listTools();
      return `tools: ${listed.tools.map((t) => t.name).join(", ")}`;
    } catch (error) {
      return `list error: ${error.message}`;
    }
  }
  const rest = line.slice("call ".length);
  const space = rest.indexOf(" ");
  const name = space < 0 ? rest : rest.slice(0, space);
  let args = {};
  try {
    args = space < 0 ? {} : JSON.parse(rest.slice(space + 1));
  } catch {
    return `tool ${name} error: arguments are not JSON`;
  }
  try {
    const result = await client.callTool({ name, arguments: args });
    const text = result.content?.[0]?.text ?? "";
    return result.isError ? `tool ${name} error: ${text}` : `tool ${name}: ${text}`;
  } catch (error) {
    return `tool ${name} failed: ${error.message}`;
  }
}

/** Asks for permission; returns the chosen option's kind or "cancelled". */
async function askPermission(client, sessionId, turn, path) {
  const toolCallId = `guarded-${turn}`;
  const toolCall = path
    ? { toolCallId, title: `Write ${PROBE_FILE}`, kind: "edit", status: "pending", locations: [{ path }] }
    : { toolCallId, title: "Write notes", kind: "edit", status: "pending" };
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "tool_call", ...toolCall },
  });
  const options = [
    { optionId: "allow", name: "Allow once", kind: "allow_once" },
    { optionId: "reject", name: "Reject once", kind: "reject_once" },
  ];
  const response = await client.request(acp.methods.client.session.requestPermission, {
    sessionId,
    toolCall,
    options,
  });
  const outcome = response.outcome;
  const chosen =
    outcome.outcome === "selected" ? options.find((o) => o.optionId === outcome.optionId) : undefined;
  const kind = chosen ? chosen.kind : "cancelled";
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: {
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: kind === "allow_once" ? "completed" : "failed",
    },
  });
  return kind;
}

const app = acp
  .agent({ name: "lapis-ts-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {
      loadSession: LOAD_SESSION,
      sessionCapabilities: {
        ...(RESUME_SESSION ? { resume: {} } : {}),
        ...(CLOSE_SESSION ? { close: {} } : {}),
      },
      promptCapabilities: { embeddedContext: EMBEDDED_CONTEXT },
    },
    agentInfo: { name: "lapis-ts-agent", version: "0.0.0" },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const session = {
      id: `ts-${randomUUID()}`,
      cwd: params.cwd,
      history: [],
      pending: null,
      mcpServers: params.mcpServers,
      mcp: null,
    };
    create(session);
    sessions.set(session.id, session);
    log(`session ${session.id} created`);
    return { sessionId: session.id };
  })
  .onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
    if (!LOAD_SESSION) {
      throw acp.RequestError.methodNotFound(acp.methods.agent.session.load);
    }
    const session = sessions.get(params.sessionId) ?? restore(params.sessionId);
    if (!session) {
      throw acp.RequestError.sessionNotFound(params.sessionId);
    }
    session.cwd = params.cwd;
    session.mcpServers = params.mcpServers;
    // A loaded session gets the servers of this load: the old client ends.
    session.mcp?.then((client) => client.close()).catch(() => {});
    session.mcp = null;
    sessions.set(session.id, session);
    for (const entry of session.history) {
      const kind = entry.role === "user" ? "user_message_chunk" : "agent_message_chunk";
      await say(client, session.id, kind, entry.text);
    }
    log(`session ${session.id} loaded (${session.history.length} entries replayed)`);
    return {};
  })
  .onRequest(acp.methods.agent.session.resume, ({ params }) => {
    if (!RESUME_SESSION) {
      throw acp.RequestError.methodNotFound(acp.methods.agent.session.resume);
    }
    const session = sessions.get(params.sessionId) ?? restore(params.sessionId);
    if (!session) {
      throw acp.RequestError.sessionNotFound(params.sessionId);
    }
    session.cwd = params.cwd;
    session.mcpServers = params.mcpServers;
    session.mcp?.then((client) => client.close()).catch(() => {});
    session.mcp = null;
    sessions.set(session.id, session);
    log(`session ${session.id} resumed`);
    return {};
  })
  .onRequest(acp.methods.agent.session.close, ({ params }) => {
    if (!CLOSE_SESSION) {
      throw acp.RequestError.methodNotFound(acp.methods.agent.session.close);
    }
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw acp.RequestError.sessionNotFound(params.sessionId);
    }
    session.pending?.abort();
    session.mcp?.then((client) => client.close()).catch(() => {});
    sessions.delete(session.id);
    log(`session ${session.id} closed`);
    return {};
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw acp.RequestError.sessionNotFound(params.sessionId);
    }
    const text = textOf(params.prompt);
    const before = session.history.filter((entry) => entry.role === "user");
    const turn = before.length + 1;
    const abort = new AbortController();
    session.pending = abort;
    // Kept before any answer, so a turn cut short by a killed process is
    // still in the history a later `session/load` replays.
    record(session, "user", text, blocksOf(params.prompt));
    let reply = "";
    const stream = async (chunk) => {
      reply += chunk;
      await say(client, session.id, "agent_message_chunk", chunk);
    };
    try {
      if (text.includes("[tool]")) {
        await toolCall(client, session.id, turn);
      }
      for (const line of toolLines(text)) {
        await stream(`${await toolLine(session, line)}\n`);
      }
      if (text.includes(PROBE_FILE)) {
        const path = join(session.cwd, PROBE_FILE);
        const kind = await askPermission(client, session.id, turn, path);
        if (kind === "allow_once") {
          writeFileSync(path, "probe\n");
        }
        await stream(`probe: ${kind}; `);
        return { stopReason: kind === "cancelled" ? "cancelled" : "end_turn" };
      }
      for (const [marker, schema] of [
        ["[elicit]", { type: "object", properties: {} }],
        [
          "[elicit-fields]",
          { type: "object", properties: { strategy: { type: "string", enum: ["a", "b"] } }, required: ["strategy"] },
        ],
      ]) {
        if (!text.includes(marker)) {
          continue;
        }
        try {
          const answer = await client.request(acp.methods.client.elicitation.create, {
            sessionId: session.id,
            mode: "form",
            message: "Apply the migration?",
            requestedSchema: schema,
          });
          await stream(`elicit: ${answer.action}; `);
        } catch (error) {
          await stream(`elicit: error ${error.code}; `);
        }
      }
      let usage;
      if (text.includes("[usage]")) {
        await client.notify(acp.methods.client.session.update, {
          sessionId: session.id,
          update: {
            sessionUpdate: "usage_update",
            used: 1000 * turn,
            size: 200000,
            cost: { amount: 0.25 * turn, currency: "USD" },
          },
        });
        usage = { totalTokens: 180, inputTokens: 100, outputTokens: 50, thoughtTokens: 10, cachedReadTokens: 20 };
      }
      if (text.includes("[permission]")) {
        const kind = await askPermission(client, session.id, turn);
        await stream(`permission: ${kind}; `);
        // ACP: a client answers `cancelled` only when it cancelled the turn,
        // whether or not its `session/cancel` has reached us yet.
        if (kind === "cancelled") {
          return { stopReason: "cancelled" };
        }
      }
      await stream(`turn ${turn} of session ${session.id}; `);
      if (text.includes("[slow]")) {
        await stream("waiting for cancel; ");
        await cancelled(abort.signal);
        return { stopReason: "cancelled" };
      }
      const previous = before.at(-1);
      if (previous) {
        await stream("you said before: ");
        await stream(JSON.stringify(previous.text));
      } else {
        await stream("nothing said before");
      }
      return {
        stopReason: abort.signal.aborted ? "cancelled" : "end_turn",
        ...(usage ? { usage } : {}),
      };
    } finally {
      session.pending = null;
      if (reply) {
        record(session, "agent", reply);
      }
    }
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.pending?.abort();
  });

const connection = app.connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
// The client closing our stdin ends the conversation: exit even when a
// `[slow]` turn is still waiting for a cancel that can no longer come.
connection.closed.then(
  () => process.exit(0),
  (error) => {
    log(`connection failed: ${error}`);
    process.exit(1);
  },
);
