//! The fake model server's HTTP/1.1: reading requests off a keep-alive
//! connection (length or chunked bodies), telling main requests from side
//! ones, popping the script, and sending JSON or SSE answers.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::wire::{anthropic_message, anthropic_sse, openai_sse};
use super::{Api, DEFAULT_TEXT, Reply, Request, State, lock};

pub(super) async fn serve_connection(mut conn: TcpStream, state: Arc<State>) {
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
