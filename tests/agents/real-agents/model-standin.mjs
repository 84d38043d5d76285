// A local stand-in for the model APIs the real coding agents call: the
// OpenAI chat completions API (qwen-code) and the Anthropic messages API
// (claude-agent-acp, through the Claude Code it bundles). It enforces what
// the real APIs enforce that the controller must get right — a function or
// tool name matching ^[a-zA-Z0-9_-]{1,64}$, else 400 — and records every
// request it is sent (one JSON line each) so a test can assert what the
// model received: the order of the blocks, the tool names it was offered.
//
//   node model-standin.mjs LOG    prints "listening PORT" once it listens
//
// What it answers, from the newest user text:
//   CALL_TOOL <suffix>   calls the offered tool whose name ends with <suffix>
//                        with {"title":"from the model"} (first loading it
//                        through the agent's tool search when the agent
//                        only lists its name), then answers "done"
//   WRITE_FILE <path>    calls the agent's own file-writing tool (qwen:
//                        write_file; claude: Write) for <path>, then "done"
//   anything else        "ok"
// Every answer reports usage: 100 prompt/input tokens, 7 completion/output.
import http from "node:http";
import fs from "node:fs";

const log = process.argv[2];
if (!log) {
  console.error("usage: node model-standin.mjs LOG");
  process.exit(2);
}

const NAME_RULE = /^[a-zA-Z0-9_-]{1,64}$/;

// Each answer's ids are new, as a real API's are (an agent may refuse a
// tool call whose id its history already holds).
let answers = 0;

function record(entry) {
  fs.appendFileSync(log, JSON.stringify(entry) + "\n");
}

// The text of a message's content: a string, or the text parts of a list.
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p) => (typeof p === "string" ? p : p.type === "text" ? p.text : ""))
    .join("");
}

// The newest user text (the instruction), and whether the last message
// is only a tool result. A user message may carry earlier tool results and
// the new instruction together (Anthropic merges consecutive user content,
// and Claude Code folds later tool calls and results into earlier messages).
function instruction(messages) {
  const last = messages[messages.length - 1] || {};
  const lastParts = Array.isArray(last.content) ? last.content : [];
  const afterTool =
    last.role === "tool" || (lastParts.some((p) => p.type === "tool_result") && !textOf(last.content));
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    const text = m.role === "user" ? textOf(m.content) : "";
    if (text) return { text, afterTool };
  }
  return { text: "", afterTool };
}

// The tools the stand-in called for each instruction, by its text: the
// order of a history is the agent's to rewrite, so what was done is kept
// here.
const done = new Map();

// Every text the request carries (system prompt included), for tool names
// an agent lists without their schemas (deferred behind a search tool).
function allText(body) {
  const parts = [textOf(body.system), ...(body.messages || []).map((m) => textOf(m.content))];
  return parts.join("\n");
}

// What to do: {text} or {tool: name, args}.
function decide(body, toolNames, writeTool, searchTool) {
  const { text, afterTool } = instruction(body.messages || []);
  if (!done.has(text)) done.set(text, []);
  const called = done.get(text);
  const act = (what) => {
    if (what.tool) called.push(what.tool);
    return what;
  };
  const call = /CALL_TOOL (\S+)/.exec(text);
  if (call) {
    const suffix = call[1];
    if (called.some((n) => n && n.endsWith(suffix))) return { text: "done" };
    const name = toolNames.find((n) => n.endsWith(suffix));
    if (name) return act({ tool: name, args: { title: "from the model" } });
    // Deferred: the agent names the tool in its prompt and loads its
    // schema through its search tool (qwen-code's tool_search).
    const listed = new RegExp(`[A-Za-z0-9_.-]*${suffix.replace(/[.]/g, "\\.")}`).exec(allText(body));
    if (listed && toolNames.includes(searchTool) && !called.includes(searchTool)) {
      return act({ tool: searchTool, args: { query: `select:${listed[0]}` } });
    }
    return { text: `no offered tool ends with ${suffix}` };
  }
  const write = /WRITE_FILE (\S+)/.exec(text);
  if (write && !called.includes(writeTool) && toolNames.includes(writeTool)) {
    return act({
      tool: writeTool,
      args: { file_path: write[1], content: "written by the model\n" },
    });
  }
  return { text: afterTool ? "done" : "ok" };
}

function refuse(res, status, type, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ type: "error", error: { type, message } }));
}

function openai(req, res, body) {
  const tools = (body.tools || []).map((t) => (t.function || {}).name || "");
  const bad = tools.findIndex((n) => !NAME_RULE.test(n));
  if (bad >= 0) {
    return refuse(res, 400, "invalid_request_error",
      `Invalid 'tools[${bad}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.`);
  }
  const what = decide(body, tools, "write_file", "tool_search");
  const usage = { prompt_tokens: 100, completion_tokens: 7, total_tokens: 107 };
  const base = { id: "chatcmpl-standin", object: "chat.completion.chunk", created: 0, model: body.model || "standin" };
  const delta = what.tool
    ? { role: "assistant", tool_calls: [{ index: 0, id: `call_standin_${answers}`, type: "function", function: { name: what.tool, arguments: JSON.stringify(what.args) } }] }
    : { role: "assistant", content: what.text };
  const finish = what.tool ? "tool_calls" : "stop";
  if (!body.stream) {
    const message = what.tool
      ? { role: "assistant", content: null, tool_calls: delta.tool_calls.map(({ index, ...c }) => c) }
      : { role: "assistant", content: what.text };
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message, finish_reason: finish }], usage }));
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
  send({ ...base, choices: [{ index: 0, delta, finish_reason: null }] });
  send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
  send({ ...base, choices: [], usage });
  res.end("data: [DONE]\n\n");
}

function anthropic(req, res, body) {
  if (req.url.startsWith("/v1/messages/count_tokens")) {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ input_tokens: 100 }));
  }
  const tools = (body.tools || []).map((t) => t.name || "");
  const bad = tools.findIndex((n) => !NAME_RULE.test(n));
  if (bad >= 0) {
    return refuse(res, 400, "invalid_request_error",
      `tools.${bad}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`);
  }
  const what = decide(body, tools, "Write", "ToolSearch");
  const block = what.tool
    ? { type: "tool_use", id: `toolu_standin_${answers}`, name: what.tool, input: what.args }
    : { type: "text", text: what.text };
  const stop = what.tool ? "tool_use" : "end_turn";
  const message = { id: "msg_standin", type: "message", role: "assistant", model: body.model || "standin", stop_sequence: null };
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ ...message, content: [block], stop_reason: stop, usage: { input_tokens: 100, output_tokens: 7 } }));
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const send = (event, o) => res.write(`event: ${event}\ndata: ${JSON.stringify(o)}\n\n`);
  send("message_start", { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 100, output_tokens: 1 } } });
  if (what.tool) {
    send("content_block_start", { type: "content_block_start", index: 0, content_block: { ...block, input: {} } });
    send("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(what.args) } });
  } else {
    send("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    send("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: what.text } });
  }
  send("content_block_stop", { type: "content_block_stop", index: 0 });
  send("message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 7 } });
  send("message_stop", { type: "message_stop" });
  res.end();
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body = {};
    try {
      body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {};
    } catch {
      return refuse(res, 400, "invalid_request_error", "body is not JSON");
    }
    const api = req.url.includes("/chat/completions") ? "openai" : req.url.startsWith("/v1/messages") ? "anthropic" : "other";
    answers += 1;
    record({ api, method: req.method, path: req.url, body });
    if (api === "openai") return openai(req, res, body);
    if (api === "anthropic") return anthropic(req, res, body);
    if (req.url.startsWith("/v1/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ object: "list", data: [{ id: "standin", object: "model" }] }));
    }
    refuse(res, 404, "not_found_error", `the stand-in does not serve ${req.method} ${req.url}`);
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
