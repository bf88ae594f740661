// Portal's shim through the official TypeScript MCP SDK, the client library
// Claude Code and MCP Inspector build on: list the tools and call every one
// of them once. The SDK validates each structured result against the tool's
// outputSchema (a mismatch throws) and warns on stderr about schema keywords
// or formats it does not know; the Rust test that runs this file fails on
// either.
//
// Usage: node every_tool.mjs /path/to/portal-shim   (PORTAL_SOCKET etc. in the environment)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const shim = process.argv[2];
const transport = new StdioClientTransport({
  command: shim,
  args: [],
  env: { ...process.env, PORTAL_LOG: "warn" },
  stderr: "pipe",
});
// The shim's own log goes to stdout, so stderr carries only what the SDK says.
transport.stderr?.on("data", (d) => process.stdout.write(`[shim] ${d}`));
const client = new Client({ name: "portal-every-tool", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const called = new Set();
async function call(name, args, { mayFail = false } = {}) {
  const r = await client.callTool({ name, arguments: args });
  called.add(name);
  const text = (r.content ?? []).map((c) => c.text ?? "").join("");
  if (r.isError && !mayFail) throw new Error(`${name} failed: ${text}`);
  if (!r.isError && r.structuredContent === undefined) throw new Error(`${name}: no structuredContent`);
  console.log(`${name}: ${r.isError ? "error (allowed)" : "ok"}: ${text.split("\n")[0].slice(0, 100)}`);
  return r.structuredContent ?? {};
}

await call("program_query", { program: "python3" });
await call("program_record", { program: "portal-sdk-probe", needs_pty: false, notes: "probe" });
await call("process_start", { command: "sh", args: ["-c", "read x; echo got $x; sleep 60"], name: "pipes", wait: "input", wait_timeout_ms: 10000 });
await call("process_write", { id: "pipes", content: "hi\n" });
await call("process_wait", { id: "pipes", pattern: "got hi", timeout_ms: 10000 });
await call("process_read", { id: "pipes", duration: 60, unit: "s" });
await call("process_read_new", { id: "pipes" });
const found = await call("process_search", { query: "got hi", source: "output" });
if (found.hits?.[0]?.line !== "got hi") throw new Error(`process_search: ${JSON.stringify(found)}`);
await call("process_list", {});
await call("process_inspect", { id: "pipes" });
await call("process_signal", { id: "pipes", signal: "TERM" });
await call("process_start", { command: "cat", pty: true, name: "tty", rows: 10, cols: 40 });
await call("process_run", { id: "tty", input: "hello", pattern: "hello", timeout_ms: 10000 });
await call("process_send_keys", { id: "tty", keys: ["x", "Enter"] });
await call("process_screen", { id: "tty" });
await call("agent_list", {});
await call("agent_watch", { timeout_ms: 10 });
await call("agent_wait", { ids: ["tty"], timeout_ms: 10 });
// Not an agent: a refusal is fine, a schema failure is not.
await call("agent_send", { ids: ["tty"], text: "x", wait_ready: false, timeout_ms: 10 }, { mayFail: true });
await call("agent_hooks", { action: "status" });
const spec = { member: [{ name: "ws-a", command: "sh", args: ["-c", "echo ready; sleep 60"], ready: "ready" },
                        { name: "ws-b", command: "sleep", args: ["60"], depends_on: ["ws-a"] }] };
const up = await call("workspace_up", { workspace: "sdk", spec });
if (up.members?.map((m) => m.status).join() !== "running,running") throw new Error(`workspace_up: ${JSON.stringify(up)}`);
await call("workspace_status", { workspace: "sdk", spec });
await call("workspace_down", { workspace: "sdk", spec });
await call("process_clear", { id: "tty" });
await call("process_kill", { id: "tty" });
await call("process_kill_all", {});
await call("process_cleanup", { id: "pipes" });

const missed = tools.map((t) => t.name).filter((n) => !called.has(n));
if (missed.length) throw new Error(`tools never called: ${missed.join(", ")}`);
console.log(`all ${tools.length} tools called`);
await client.close();
