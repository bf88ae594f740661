//! Fake model servers for driving the real Claude Code and Codex CLIs in
//! tests: a tiny hand-rolled HTTP/1.1 server on loopback that speaks the
//! Anthropic Messages API or the OpenAI Responses API (streaming SSE),
//! answers each main model request with the next reply of a script, and
//! records every request; plus the private-HOME recipes that start each CLI
//! ready for input (no onboarding, login, trust dialogs, update checks or
//! telemetry) and the lookup of the CLIs installed under `tests/agents`.
//!
//! What the CLIs send, show and report (screens, hooks, gotchas) is written
//! up in `real-agents.md` beside the task notes; in short:
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use portal_tests::fake_models::{Api, FakeModel, Reply, claude_home, installed};
//! let server = FakeModel::start(Api::Anthropic, [Reply::Shell("echo hi".into())]).await?;
//! let home = tempfile::tempdir()?;
//! let env = claude_home(home.path(), home.path(), &server.base_url())?;
//! let claude = installed().claude.expect("npm ci --prefix tests/agents");
//! // start `claude` on a PTY with `env`, type a prompt, then:
//! server.wait_main_requests(1, std::time::Duration::from_secs(30)).await?;
//! # let _ = (env, claude); Ok(()) }
//! ```
//!
//! A request is *main* when it is the agent loop's turn (it offers the shell
//! tool); side requests (titles, quota probes, command-prefix checks, token
//! counts) are recorded too but get a short canned answer and never consume
//! the script. Unknown endpoints get a JSON 404.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// Which API a [`FakeModel`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages (`POST /v1/messages`), for Claude Code.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`, `GET /v1/models`), for Codex.
    OpenAi,
}

/// One scripted answer to a main model request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A text answer that ends the turn.
    Text(String),
    /// A call of the agent's shell tool with this command line (Claude:
    /// `Bash {"command"}`; Codex: whichever shell tool the request offers,
    /// `exec_command {"cmd"}` in 0.171, asking to run outside the sandbox).
    /// In the default permission mode both then ask the user, except that
    /// Claude runs read-only commands (`echo`, `ls`, `sleep`) without
    /// asking: use one that writes (`touch f`, `echo x > f`) for a dialog.
    /// Once it ran, the agent sends its result back, which pops the next
    /// reply; a rejected call sends nothing (the script stays put).
    Shell(String),
    /// Starts the stream (so the agent shows a turn in progress), then waits
    /// for [`FakeModel::release`] before sending this reply.
    Held(Box<Reply>),
}

/// One recorded HTTP request.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path with its query string (`/v1/messages?beta=true`).
    pub path: String,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// Whether it was a main request (one that popped the script).
    pub main: bool,
}

/// The text answer when the script is empty.
pub const DEFAULT_TEXT: &str = "Nothing more is scripted.";

struct State {
    api: Api,
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Request>>,
    mains: watch::Sender<usize>,
    released: Semaphore,
    ids: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fake model server on `127.0.0.1`; dropping it stops it.
pub struct FakeModel {
    addr: std::net::SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModel {
    /// Starts a server for `api` on a free loopback port with a script of
    /// replies. Set `PORTAL_FAKE_MODELS_LOG=<file>` to append every request
    /// to that file as a JSON line (handy when a CLI changes what it sends).
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start(api: Api, script: impl IntoIterator<Item = Reply>) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            api,
            script: Mutex::new(script.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            mains: watch::Sender::new(0),
            released: Semaphore::new(0),
            ids: AtomicU64::new(1),
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            // Owned here, so aborting this task ends every connection too.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((conn, _)) = listener.accept().await {
                while connections.try_join_next().is_some() {}
                connections.spawn(serve_connection(conn, shared.clone()));
            }
        });
        Ok(Self { addr, state, task })
    }

    /// `http://127.0.0.1:<port>`: Claude's `ANTHROPIC_BASE_URL`. Codex's
    /// provider `base_url` is this plus `/v1` (see [`codex_home`]).
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.state.script).extend(replies);
    }

    /// Lets one [`Reply::Held`] reply (waiting or to come) finish.
    pub fn release(&self) {
        self.state.released.add_permits(1);
    }

    /// Every request so far, in arrival order.
    #[must_use]
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.state.requests).clone()
    }

    /// The main requests so far, in arrival order.
    #[must_use]
    pub fn main_requests(&self) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.main).collect()
    }

    /// Waits until at least `n` main requests arrived, at most `within`;
    /// returns the main requests.
    ///
    /// # Errors
    /// `TimedOut` naming how many arrived, and the paths of all requests.
    pub async fn wait_main_requests(&self, n: usize, within: Duration) -> io::Result<Vec<Request>> {
        let mut rx = self.state.mains.subscribe();
        if tokio::time::timeout(within, rx.wait_for(|&c| c >= n)).await.is_err() {
            let paths: Vec<_> = self.requests().into_iter().map(|r| r.path).collect();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} of {n} main model requests arrived within {within:?}; all requests: {paths:?}",
                    *rx.borrow()
                ),
            ));
        }
        Ok(self.main_requests())
    }

    /// The texts the user typed, in the conversation of the newest main
    /// request (tool results, system reminders and context blocks left out):
    /// a prompt typed once appears once, however many turns followed.
    #[must_use]
    pub fn user_prompts(&self) -> Vec<String> {
        self.main_requests()
            .last()
            .map(|r| user_prompts(self.state.api, &r.body))
            .unwrap_or_default()
    }

    /// The tool results the agent sent back, in the conversation of the
    /// newest main request (Claude: `tool_result` blocks; Codex:
    /// `function_call_output` items), oldest first.
    #[must_use]
    pub fn tool_results(&self) -> Vec<String> {
        let Some(last) = self.main_requests().pop() else { return Vec::new() };
        let body = &last.body;
        let mut out = Vec::new();
        match self.state.api {
            Api::Anthropic => {
                let blocks = body["messages"].as_array().into_iter().flatten();
                let blocks = blocks.filter_map(|m| m["content"].as_array()).flatten();
                for b in blocks.filter(|b| b["type"] == "tool_result") {
                    out.push(match &b["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => {
                            parts.iter().filter_map(|p| p["text"].as_str()).collect()
                        }
                        _ => String::new(),
                    });
                }
            }
            Api::OpenAi => {
                let items = body["input"].as_array().into_iter().flatten();
                for i in items.filter(|i| i["type"] == "function_call_output") {
                    out.push(i["output"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        out
    }
}

/// The user-typed texts of a main request body.
#[must_use]
pub fn user_prompts(api: Api, body: &Value) -> Vec<String> {
    let list = match api {
        Api::Anthropic => &body["messages"],
        Api::OpenAi => &body["input"],
    };
    let mut out = Vec::new();
    for msg in list.as_array().into_iter().flatten() {
        if msg["role"] != "user" {
            continue;
        }
        let texts: Vec<&str> = match &msg["content"] {
            Value::String(s) => vec![s.as_str()],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text" || b["type"] == "input_text")
                .filter_map(|b| b["text"].as_str())
                .collect(),
            _ => Vec::new(),
        };
        for t in texts {
            let t = t.trim();
            // Context the CLIs add as user messages: Claude's reminders,
            // Codex's environment, AGENTS.md and permission instructions.
            if !t.starts_with('<') && !t.starts_with("# AGENTS.md") {
                out.push(t.to_owned());
            }
        }
    }
    out
}

async fn serve_connection(mut conn: TcpStream, state: Arc<State>) {
    let mut buf = Vec::new();
    // Keep-alive: one request after another until the client closes.
    while let Ok(Some(req)) = read_request(&mut conn, &mut buf).await {
        if answer(&mut conn, &state, req).await.is_err() {
            return;
        }
    }
}

/// A parsed request before classification.
struct Raw {
    method: String,
    path: String,
    body: Vec<u8>,
}

/// Reads one request; `Ok(None)` at a clean end of the connection. `buf`
/// carries bytes already read past the previous request.
async fn read_request(conn: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Raw>> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 1 << 20 {
            return Err(io::Error::other("request head too large"));
        }
        if !fill(conn, buf).await? {
            return Ok(None);
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end);
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let (mut length, mut chunked) = (0usize, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse().map_err(io::Error::other)?;
        } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body =
        if chunked { read_chunked(conn, buf).await? } else { take(conn, buf, length).await? };
    Ok(Some(Raw { method, path, body }))
}

async fn read_chunked(conn: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            if !fill(conn, buf).await? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(io::Error::other)?;
        buf.drain(..line_end + 2);
        // The chunk and its CRLF (for the last chunk: the empty trailer line).
        let chunk = take(conn, buf, size + 2).await?;
        body.extend_from_slice(&chunk[..size]);
        if size == 0 {
            return Ok(body);
        }
    }
}

async fn take(conn: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> io::Result<Vec<u8>> {
    while buf.len() < n {
        if !fill(conn, buf).await? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(buf.drain(..n).collect())
}

/// Reads more bytes into `buf`; false at end of stream.
async fn fill(conn: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.reserve(16 * 1024);
    Ok(conn.read_buf(buf).await? > 0)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The shell tool a main request offers, by API.
fn shell_tool(api: Api, body: &Value) -> Option<String> {
    let names: Vec<&str> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().or_else(|| t["type"].as_str()))
        .collect();
    let wanted: &[&str] = match api {
        Api::Anthropic => &["Bash"],
        Api::OpenAi => &["shell_command", "exec_command", "shell", "local_shell"],
    };
    wanted.iter().find(|w| names.contains(w)).map(|w| (*w).to_owned())
}

async fn answer(conn: &mut TcpStream, state: &State, raw: Raw) -> io::Result<()> {
    let body: Value = serde_json::from_slice(&raw.body).unwrap_or(Value::Null);
    let route = raw.path.split('?').next().unwrap_or_default().to_owned();
    let tool = shell_tool(state.api, &body);
    let main = raw.method == "POST"
        && tool.is_some()
        && matches!(
            (state.api, route.as_str()),
            (Api::Anthropic, "/v1/messages") | (Api::OpenAi, "/v1/responses")
        );
    let request = Request { method: raw.method.clone(), path: raw.path.clone(), body, main };
    log_request(&request);
    let reply = if main {
        lock(&state.script).pop_front().unwrap_or_else(|| Reply::Text(DEFAULT_TEXT.into()))
    } else {
        Reply::Text(side_answer(&request.body))
    };
    let stream = request.body["stream"] == true;
    let body = request.body.clone();
    lock(&state.requests).push(request);
    if main {
        state.mains.send_modify(|n| *n += 1);
    }
    let tool = tool.unwrap_or_default();
    let id = state.ids.fetch_add(1, Ordering::Relaxed);
    match (state.api, raw.method.as_str(), route.as_str()) {
        (Api::Anthropic, "POST", "/v1/messages") if stream => {
            let (start, rest) = anthropic_sse(&reply, &body, id);
            send_sse(conn, state, &reply, start, rest).await
        }
        (Api::Anthropic, "POST", "/v1/messages") => {
            send(conn, "200 OK", "application/json", anthropic_message(&reply, &body, id)).await
        }
        (Api::Anthropic, "POST", "/v1/messages/count_tokens") => {
            send(conn, "200 OK", "application/json", json!({"input_tokens": 100}).to_string()).await
        }
        (Api::OpenAi, "POST", "/v1/responses") => {
            let (start, rest) = openai_sse(&reply, &tool, id);
            send_sse(conn, state, &reply, start, rest).await
        }
        (Api::OpenAi, "GET", "/v1/models") => {
            send(conn, "200 OK", "application/json", json!({"data": [], "models": []}).to_string())
                .await
        }
        _ => {
            let err = json!({"type": "error", "error": {"type": "not_found_error",
                "message": format!("the fake model server has no {}", raw.path)}});
            send(conn, "404 Not Found", "application/json", err.to_string()).await
        }
    }
}

/// The answer to a side request: JSON when it asks for structured output
/// (Codex's thread title: `{"title": …}`), else a short text.
fn side_answer(body: &Value) -> String {
    let schema = &body["text"]["format"]["schema"];
    let Some(props) = schema["properties"].as_object() else { return "OK".into() };
    let fields: serde_json::Map<String, Value> =
        props.keys().map(|k| (k.clone(), json!(format!("Fake {k}")))).collect();
    Value::Object(fields).to_string()
}

fn log_request(r: &Request) {
    let Some(file) = std::env::var_os("PORTAL_FAKE_MODELS_LOG") else { return };
    let line = json!({"method": r.method, "path": r.path, "main": r.main, "body": r.body});
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
        use std::io::Write as _;
        let _ = writeln!(f, "{line}");
    }
}

async fn send(conn: &mut TcpStream, status: &str, kind: &str, body: String) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body.as_bytes()).await?;
    conn.flush().await
}

/// Sends an SSE response: `start` at once, then (after a release for a held
/// reply) `rest`. The length is known up front, so no chunking is needed.
async fn send_sse(
    conn: &mut TcpStream,
    state: &State,
    reply: &Reply,
    start: String,
    rest: String,
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ncontent-length: {}\r\n\r\n",
        start.len() + rest.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(start.as_bytes()).await?;
    conn.flush().await?;
    if matches!(reply, Reply::Held(_)) {
        state.released.acquire().await.map_err(io::Error::other)?.forget();
    }
    conn.write_all(rest.as_bytes()).await?;
    conn.flush().await
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The reply under any [`Reply::Held`] wrappers.
fn inner(reply: &Reply) -> &Reply {
    match reply {
        Reply::Held(r) => inner(r),
        r => r,
    }
}

/// Splits a text into a few deltas, as a model streams it.
fn deltas(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    words.chunks(3).map(|c| c.concat()).collect()
}

fn usage_anthropic() -> Value {
    json!({"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0})
}

/// The content block of an Anthropic reply, and its stop reason.
fn anthropic_block(reply: &Reply, id: u64) -> (Value, &'static str) {
    match inner(reply) {
        Reply::Shell(cmd) => (
            json!({"type": "tool_use", "id": format!("toolu_fake{id}"), "name": "Bash",
                   "input": {"command": cmd, "description": format!("Run {cmd}")}}),
            "tool_use",
        ),
        Reply::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Reply::Held(_) => (json!({"type": "text", "text": ""}), "end_turn"),
    }
}

fn model_of(body: &Value) -> Value {
    body.get("model").cloned().unwrap_or_else(|| json!("fake-model"))
}

fn anthropic_message(reply: &Reply, body: &Value, id: u64) -> String {
    let (block, stop) = anthropic_block(reply, id);
    json!({"id": format!("msg_fake{id}"), "type": "message", "role": "assistant",
           "model": model_of(body), "content": [block], "stop_reason": stop,
           "stop_sequence": null, "usage": usage_anthropic()})
    .to_string()
}

/// The SSE of an Anthropic streaming reply: (sent at once, sent after a release).
fn anthropic_sse(reply: &Reply, body: &Value, id: u64) -> (String, String) {
    let start = event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": format!("msg_fake{id}"),
            "type": "message", "role": "assistant", "model": model_of(body), "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage_anthropic()}}),
    );
    let (block, stop) = anthropic_block(reply, id);
    let mut rest = String::new();
    let mut opened = block.clone();
    let pieces: Vec<Value> = if block["type"] == "tool_use" {
        opened["input"] = json!({});
        let input = block["input"].to_string();
        vec![json!({"type": "input_json_delta", "partial_json": input})]
    } else {
        opened["text"] = json!("");
        let text = block["text"].as_str().unwrap_or_default();
        deltas(text).into_iter().map(|d| json!({"type": "text_delta", "text": d})).collect()
    };
    rest += &event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": opened}),
    );
    for delta in pieces {
        rest += &event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        );
    }
    rest += &event("content_block_stop", &json!({"type": "content_block_stop", "index": 0}));
    rest += &event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 10}}),
    );
    rest += &event("message_stop", &json!({"type": "message_stop"}));
    (start, rest)
}

/// The output item of a Responses reply for the offered shell `tool`.
fn openai_item(reply: &Reply, tool: &str, id: u64) -> Value {
    match inner(reply) {
        Reply::Shell(cmd) if tool == "local_shell" => json!({"type": "local_shell_call",
            "id": format!("lsh_fake{id}"), "call_id": format!("call_fake{id}"),
            "status": "completed", "action": {"type": "exec",
                "command": ["bash", "-lc", cmd]}}),
        Reply::Shell(cmd) => {
            // Asking for escalation (to run outside the sandbox) is what
            // makes Codex ask the user in its default mode; a plain command
            // inside the workspace runs sandboxed without asking.
            let why = format!("Run {cmd}?");
            let args = match tool {
                "shell" => json!({"command": ["bash", "-lc", cmd],
                    "with_escalated_permissions": true, "justification": why}),
                "exec_command" => json!({"cmd": cmd,
                    "sandbox_permissions": "require_escalated", "justification": why}),
                _ => json!({"command": cmd,
                    "sandbox_permissions": "require_escalated", "justification": why}),
            };
            json!({"type": "function_call", "id": format!("fc_fake{id}"),
                   "call_id": format!("call_fake{id}"), "name": tool,
                   "arguments": args.to_string(), "status": "completed"})
        }
        Reply::Text(t) => json!({"type": "message", "id": format!("msg_fake{id}"),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Reply::Held(_) => json!({"type": "message", "id": format!("msg_fake{id}"),
            "role": "assistant", "status": "completed", "content": []}),
    }
}

/// The SSE of a Responses reply: (sent at once, sent after a release).
fn openai_sse(reply: &Reply, tool: &str, id: u64) -> (String, String) {
    let resp_id = format!("resp_fake{id}");
    let start = event(
        "response.created",
        &json!({"type": "response.created", "response": {"id": resp_id, "status": "in_progress"}}),
    );
    let item = openai_item(reply, tool, id);
    let mut rest = String::new();
    if item["type"] == "message" {
        let mut opened = item.clone();
        opened["content"] = json!([]);
        opened["status"] = json!("in_progress");
        rest += &event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0, "item": opened}),
        );
        let text = item["content"][0]["text"].as_str().unwrap_or_default();
        for d in deltas(text) {
            rest += &event(
                "response.output_text.delta",
                &json!({"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": 0, "content_index": 0, "delta": d}),
            );
        }
    } else {
        rest += &event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        );
    }
    rest += &event(
        "response.output_item.done",
        &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    rest += &event(
        "response.completed",
        &json!({"type": "response.completed", "response": {"id": resp_id, "status": "completed",
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 110}}}),
    );
    (start, rest)
}

/// The CLIs installed by `npm ci --prefix tests/agents`.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// Claude Code's native binary.
    pub claude: Option<PathBuf>,
    /// Codex's launcher (`node_modules/.bin/codex`, a node script: on Node
    /// 20 it stays the parent of the native binary, in the same process
    /// group, forwarding SIGINT/SIGTERM/SIGHUP; on Node ≥ 22.15 it execs it).
    pub codex: Option<PathBuf>,
    /// Codex's native binary, to run without the node launcher.
    pub codex_native: Option<PathBuf>,
    /// Why something is missing, for a skip message; empty when all are there.
    pub missing: String,
}

/// The `tests/agents` directory.
#[must_use]
pub fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents")
}

/// Finds the installed CLIs under `tests/agents/node_modules`; what is
/// missing is `None`, with the reason and the fix in `missing`.
#[must_use]
pub fn installed() -> Installed {
    let modules = agents_dir().join("node_modules");
    let first = |candidates: &[PathBuf]| candidates.iter().find(|p| p.is_file()).cloned();
    let claude = first(&[
        // The platform package's binary is there even when npm ran no
        // install scripts; the postinstall copies it over bin/claude.exe.
        modules.join("@anthropic-ai/claude-code-linux-x64/claude"),
        modules.join("@anthropic-ai/claude-code-linux-arm64/claude"),
        modules.join("@anthropic-ai/claude-code/bin/claude.exe"),
    ]);
    let codex = first(&[modules.join(".bin/codex")]);
    let codex_native = first(&[
        modules.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
        modules.join("@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex"),
    ]);
    let mut missing = Vec::new();
    if claude.is_none() {
        missing.push("Claude Code");
    }
    if codex.is_none() || codex_native.is_none() {
        missing.push("Codex");
    }
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "{} not installed under {}: run `npm ci --prefix tests/agents`",
            missing.join(" and "),
            modules.display()
        )
    };
    Installed { claude, codex, codex_native, missing }
}

fn write_file(path: &Path, text: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

/// The API key the fake servers are given (they accept any).
pub const FAKE_API_KEY: &str = "sk-ant-fake-portal-test-key-0123456789";

/// Prepares `home` (a private temp dir) for Claude Code working in `cwd`
/// against `base_url` ([`FakeModel::base_url`]) and returns the environment
/// to start it with (`HOME` included). Writes `home/.claude.json` (onboarding
/// done, the key approved, `cwd` trusted) and `home/.claude/settings.json`.
///
/// # Errors
/// When the files cannot be written.
pub fn claude_home(home: &Path, cwd: &Path, base_url: &str) -> io::Result<Vec<(String, String)>> {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    // Claude Code remembers an approved key by its last 20 characters.
    let key_tail = &FAKE_API_KEY[FAKE_API_KEY.len() - 20..];
    let state = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "hasSeenAutoDefaultNotice": true,
        "hasSeenAutoDefaultNudge": true,
        "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
        "projects": {cwd.display().to_string(): {
            "hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true,
            "allowedTools": [],
        }},
    });
    write_file(&home.join(".claude.json"), &format!("{state:#}\n"))?;
    // Auto mode (a model classifier decides) became the default in 2.1.x;
    // tests want the permission dialog of the classic default mode.
    let settings = json!({"permissions": {"defaultMode": "default"}});
    write_file(&home.join(".claude/settings.json"), &format!("{settings:#}\n"))?;
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let env = [
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", base_url.to_owned()),
        ("ANTHROPIC_API_KEY", FAKE_API_KEY.to_owned()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        // Else it tries to fetch the plugin marketplace from the network.
        ("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1".into()),
        // Else it keeps per-project state in /tmp/claude-<uid>, shared by tests.
        ("CLAUDE_CODE_TMPDIR", tmp.display().to_string()),
        ("TERM", "xterm-256color".into()),
    ];
    Ok(env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Prepares `home` for Codex working in `cwd` against `base_url`
/// ([`FakeModel::base_url`]) and returns the environment to start it with
/// (`HOME` and `CODEX_HOME` included). Writes `home/.codex/config.toml`: a
/// `fake` provider on the Responses API, `cwd` trusted, no update check.
///
/// # Errors
/// When the file cannot be written.
pub fn codex_home(home: &Path, cwd: &Path, base_url: &str) -> io::Result<Vec<(String, String)>> {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let codex_home = home.join(".codex");
    let config = format!(
        r#"model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects."{cwd}"]
trust_level = "trusted"

[features]
# Else the TUI starts `codex app-server` daemons in their own sessions that
# outlive it, make the model requests and run the hooks (with the
# environment of the first TUI that started them).
daemon_auto_start = false

[tui]
screen_reader_detection_done = true

# Past its limit the model announcement is not counted up again, so Codex
# does not rewrite this file at every start.
[tui.model_availability_nux]
"gpt-6.1-sol" = 100
"#,
        cwd = cwd.display()
    );
    write_file(&codex_home.join("config.toml"), &config)?;
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let env = [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("FAKE_OPENAI_API_KEY", "sk-fake-portal-test".to_owned()),
        // Else its sandbox and daemon leave directories in /tmp.
        ("TMPDIR", tmp.display().to_string()),
        ("TERM", "xterm-256color".into()),
    ];
    Ok(env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Marks every command hook in the Codex `config` file (its `config.toml`,
/// as `[[hooks.<Event>]]` / `[[hooks.<Event>.hooks]]` tables, the form
/// `portal-cli hooks install` writes) as trusted, by appending the
/// `[hooks.state."<config>:<event>:<group>:<handler>"] trusted_hash` records
/// Codex's `/hooks` review would write. Without them Codex opens a "Hooks
/// need review" dialog at start and runs none of them. Returns how many
/// hooks it trusted.
///
/// # Errors
/// When the file cannot be read or written.
pub fn codex_trust_hooks(config: &Path) -> io::Result<usize> {
    let text = std::fs::read_to_string(config)?;
    let mut records = String::new();
    let hooks = codex_hooks(&text);
    for h in &hooks {
        let _ = std::fmt::Write::write_fmt(
            &mut records,
            format_args!(
                "\n[hooks.state.\"{}:{}:{}:{}\"]\ntrusted_hash = \"{}\"\n",
                config.display(),
                h.event,
                h.group,
                h.handler,
                codex_hook_hash(h)
            ),
        );
    }
    let sep = if text.ends_with('\n') || text.is_empty() { "" } else { "\n" };
    std::fs::write(config, format!("{text}{sep}{records}"))?;
    Ok(hooks.len())
}

/// One command hook found in a Codex `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CodexHook {
    /// The event in snake case (`user_prompt_submit`), as trust keys name it.
    event: String,
    group: usize,
    handler: usize,
    matcher: Option<String>,
    command: String,
    timeout: Option<u64>,
}

/// The command hooks of a `config.toml` written in array-of-tables form.
fn codex_hooks(text: &str) -> Vec<CodexHook> {
    let mut hooks: Vec<CodexHook> = Vec::new();
    let mut groups: Vec<(String, usize)> = Vec::new();
    // (event, group, matcher) of the open group; whether a handler is open.
    let mut group: Option<(String, usize, Option<String>)> = None;
    let mut in_handler = false;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("[[hooks.").and_then(|l| l.strip_suffix("]]")) {
            if let Some(event) = name.strip_suffix(".hooks") {
                let Some((open, index, matcher)) = &group else { continue };
                if open != event {
                    continue;
                }
                let handler =
                    hooks.iter().filter(|h| h.event == snake(event) && h.group == *index).count();
                hooks.push(CodexHook {
                    event: snake(event),
                    group: *index,
                    handler,
                    matcher: matcher.clone(),
                    command: String::new(),
                    timeout: None,
                });
                in_handler = true;
            } else {
                let index = match groups.iter_mut().find(|(e, _)| e == name) {
                    Some((_, n)) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        groups.push((name.to_owned(), 0));
                        0
                    }
                };
                group = Some((name.to_owned(), index, None));
                in_handler = false;
            }
            continue;
        }
        if line.starts_with('[') {
            group = None;
            in_handler = false;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let (key, value) = (key.trim(), value.trim());
        match (key, in_handler, hooks.last_mut(), group.as_mut()) {
            ("command", true, Some(h), _) => h.command = toml_string(value).unwrap_or_default(),
            ("timeout", true, Some(h), _) => h.timeout = value.parse().ok(),
            ("matcher", false, _, Some(g)) => g.2 = toml_string(value),
            _ => {}
        }
    }
    hooks
}

/// `UserPromptSubmit` → `user_prompt_submit`.
fn snake(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A TOML basic string's value (`"a \"b\""` → `a "b"`).
fn toml_string(value: &str) -> Option<String> {
    let inner = value.strip_prefix('"')?.rsplit_once('"')?.0;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Codex's trust hash of a hook: SHA-256 of the compact, key-sorted JSON
/// `{"event_name","hooks":[{"async","command","timeout","type"}],"matcher"?}`
/// with Codex's default timeout filled in (1 s for `session_end` and
/// `interrupt`, else 600 s).
fn codex_hook_hash(h: &CodexHook) -> String {
    let default = if matches!(h.event.as_str(), "session_end" | "interrupt") { 1 } else { 600 };
    let mut identity = format!(
        r#"{{"event_name":{},"hooks":[{{"async":false,"command":{},"timeout":{},"type":"command"}}]"#,
        Value::from(h.event.as_str()),
        Value::from(h.command.as_str()),
        h.timeout.unwrap_or(default)
    );
    if let Some(m) = &h.matcher {
        identity += &format!(",\"matcher\":{}", Value::from(m.as_str()));
    }
    identity.push('}');
    let digest: String = sha256(identity.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{digest}")
}

/// SHA-256 (FIPS 180-4), small and slow: for a few trust hashes.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a_2f98,
        0x7137_4491,
        0xb5c0_fbcf,
        0xe9b5_dba5,
        0x3956_c25b,
        0x59f1_11f1,
        0x923f_82a4,
        0xab1c_5ed5,
        0xd807_aa98,
        0x1283_5b01,
        0x2431_85be,
        0x550c_7dc3,
        0x72be_5d74,
        0x80de_b1fe,
        0x9bdc_06a7,
        0xc19b_f174,
        0xe49b_69c1,
        0xefbe_4786,
        0x0fc1_9dc6,
        0x240c_a1cc,
        0x2de9_2c6f,
        0x4a74_84aa,
        0x5cb0_a9dc,
        0x76f9_88da,
        0x983e_5152,
        0xa831_c66d,
        0xb003_27c8,
        0xbf59_7fc7,
        0xc6e0_0bf3,
        0xd5a7_9147,
        0x06ca_6351,
        0x1429_2967,
        0x27b7_0a85,
        0x2e1b_2138,
        0x4d2c_6dfc,
        0x5338_0d13,
        0x650a_7354,
        0x766a_0abb,
        0x81c2_c92e,
        0x9272_2c85,
        0xa2bf_e8a1,
        0xa81a_664b,
        0xc24b_8b70,
        0xc76c_51a3,
        0xd192_e819,
        0xd699_0624,
        0xf40e_3585,
        0x106a_a070,
        0x19a4_c116,
        0x1e37_6c08,
        0x2748_774c,
        0x34b0_bcb5,
        0x391c_0cb3,
        0x4ed8_aa4a,
        0x5b9c_ca4f,
        0x682e_6ff3,
        0x748f_82ee,
        0x78a5_636f,
        0x84c8_7814,
        0x8cc7_0208,
        0x90be_fffa,
        0xa450_6ceb,
        0xbef9_a3f7,
        0xc671_78f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09_e667,
        0xbb67_ae85,
        0x3c6e_f372,
        0xa54f_f53a,
        0x510e_527f,
        0x9b05_688c,
        0x1f83_d9ab,
        0x5be0_cd19,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            (hh, g, f, e, d, c, b, a) = (g, f, e, d.wrapping_add(t1), c, b, a, t1.wrapping_add(t2));
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn sha256_matches_known_vectors() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(&[b'a'; 200])),
            "c2a908d98f5df987ade41b5fce213067efbcc21ef2240212a41e54b5e7c28ae5"
        );
    }

    #[test]
    fn codex_trust_hashes_match_what_codex_wrote() {
        // Hooks trusted through Codex 0.171's own `/hooks` dialog.
        let config = "[features]\nhooks = true\n\n[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"/tmp/hook.sh /tmp/x2/hooks.log PreToolUse\"\n[[hooks.SessionEnd]]\n[[hooks.SessionEnd.hooks]]\ntype = \"command\"\ncommand = \"/tmp/hook.sh /tmp/x2/hooks.log SessionEnd\"\n\n[tui]\nx = 1\n";
        let hooks = codex_hooks(config);
        assert_eq!(hooks.len(), 2);
        assert_eq!(
            (hooks[0].event.as_str(), hooks[0].group, hooks[0].handler),
            ("pre_tool_use", 0, 0)
        );
        assert_eq!(
            codex_hook_hash(&hooks[0]),
            "sha256:6e5665c1f963f42be95958332849deaaa8400ba3d00cc76ce93ca57ee4b78fb4"
        );
        assert_eq!(
            codex_hook_hash(&hooks[1]),
            "sha256:074ed4b39ec27457e157cc6f089001662a2efe182b8adac73abecc445f7ec824"
        );
    }

    #[test]
    fn user_prompts_skip_context_blocks() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                         {"type": "text", "text": "hello portal"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
        ]});
        assert_eq!(user_prompts(Api::Anthropic, &body), vec!["hello portal".to_owned()]);
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>…"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello portal"}]},
        ]});
        assert_eq!(user_prompts(Api::OpenAi, &body), vec!["hello portal".to_owned()]);
    }
}
