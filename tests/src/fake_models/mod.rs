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
//!
//! Here: the script, the recorded requests and the server handle. The HTTP
//! side is in `server`, each API's wire format in `wire`, the CLIs' homes
//! in `homes`, and the trust of Codex hooks in `codex_hooks`.

mod codex_hooks;
mod homes;
mod server;
mod sha256;
mod wire;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

pub use codex_hooks::codex_trust_hooks;
pub use homes::{FAKE_API_KEY, Installed, agents_dir, claude_home, codex_home, installed};

use server::serve_connection;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
