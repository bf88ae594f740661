//! The shim's stdio guard: every line a client sends gets an answer.
//!
//! MCP over stdio is one JSON-RPC message per line. A line that is not JSON
//! (truncated, not UTF-8, a lone surrogate, nested too deep), an empty line,
//! a line over [`MAX_LINE_BYTES`], or JSON that is not a JSON-RPC message is
//! answered here with a JSON-RPC error (-32700 parse error, -32600 invalid
//! request) carrying the message's id when it has one, and never reaches the
//! MCP server; everything else is passed through unchanged. Without this, a
//! client that sent something malformed would wait forever.
//!
//! Between stdin/stdout and the MCP server sit two in-memory pipes: one task
//! reads stdin and forwards good lines, another copies the server's output to
//! stdout, and both that output and the guard's own answers go through one
//! writer, a whole line at a time, so they never interleave.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// Longest line accepted: far above any real tool call (writes are capped
/// well below it), small enough that a runaway client cannot take the
/// shim's memory.
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// Bytes buffered in each in-memory pipe.
const PIPE_BYTES: usize = 1 << 20;

/// Lines queued for stdout.
const OUT_QUEUE: usize = 64;

/// JSON-RPC: the line is not JSON.
const PARSE_ERROR: i64 = -32700;

/// JSON-RPC: JSON, but not a valid message.
const INVALID_REQUEST: i64 = -32600;

/// What became of one line.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// A JSON-RPC message: pass it on.
    Forward,
    /// An error response to write back.
    Answer(Value),
}

fn error(id: Value, code: i64, message: String) -> Verdict {
    Verdict::Answer(
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

/// Judges one line (without its newline).
pub(crate) fn judge(line: &[u8]) -> Verdict {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return error(
            Value::Null,
            PARSE_ERROR,
            "Parse error: an empty line is not a JSON-RPC message".into(),
        );
    }
    // serde_json bounds nesting (128 levels) and rejects invalid UTF-8 and
    // lone surrogates, each as a parse error.
    let value: Value = match serde_json::from_slice(trimmed) {
        Ok(v) => v,
        Err(e) => return error(Value::Null, PARSE_ERROR, format!("Parse error: {e}")),
    };
    let Value::Object(msg) = &value else {
        let what = if value.is_array() { "a batch (not supported)" } else { "not an object" };
        return error(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: the message is {what}"),
        );
    };
    let id = match msg.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    if msg.get("jsonrpc") != Some(&json!("2.0")) {
        return error(id, INVALID_REQUEST, "Invalid Request: \"jsonrpc\" must be \"2.0\"".into());
    }
    if let Some(Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_)) = msg.get("id") {
        return error(
            id,
            INVALID_REQUEST,
            "Invalid Request: \"id\" must be a string or a number".into(),
        );
    }
    match msg.get("method") {
        Some(Value::String(_)) => Verdict::Forward,
        Some(_) => error(id, INVALID_REQUEST, "Invalid Request: \"method\" must be a string".into()),
        // A response to a request of the server's (progress pings, say).
        None if msg.contains_key("id")
            && (msg.contains_key("result") != msg.contains_key("error")) =>
        {
            Verdict::Forward
        }
        None => error(
            id,
            INVALID_REQUEST,
            "Invalid Request: neither a request (\"method\") nor a response (\"result\" or \"error\")"
                .into(),
        ),
    }
}

/// Reads one line of at most [`MAX_LINE_BYTES`]; a longer one is read to its
/// end and discarded. `None` at end of input; `Some(Err(len))` for a line
/// that was too long.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
    let mut line = Vec::new();
    let mut len = 0usize;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if len == 0 {
                return Ok(None);
            }
            return Ok(Some(if len > MAX_LINE_BYTES { Err(len) } else { Ok(line) }));
        }
        let (take, done) = match memchr_newline(buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        len += take;
        if len <= MAX_LINE_BYTES + 1 {
            line.extend_from_slice(&buf[..take]);
        } else {
            line = Vec::new();
        }
        reader.consume(take);
        if done {
            if len > MAX_LINE_BYTES + 1 {
                return Ok(Some(Err(len - 1)));
            }
            line.pop();
            return Ok(Some(Ok(line)));
        }
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|b| *b == b'\n')
}

/// The server's side of the guard, and the task that writes stdout (await
/// it after the session ends, so the last answers are not lost).
pub(crate) struct Guarded {
    /// What the server reads.
    pub(crate) input: tokio::io::DuplexStream,
    /// What the server writes.
    pub(crate) output: tokio::io::DuplexStream,
    /// The stdout writer; it ends once every answer is written.
    pub(crate) flushed: tokio::task::JoinHandle<()>,
}

/// Puts the guard between `stdin`/`stdout` and the MCP server.
pub(crate) fn guard<R, W>(stdin: R, stdout: W) -> Guarded
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (mut to_server, server_in) = tokio::io::duplex(PIPE_BYTES);
    let (server_out, from_server) = tokio::io::duplex(PIPE_BYTES);
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(OUT_QUEUE);
    // The one writer of stdout.
    let flushed = tokio::spawn(async move {
        let mut stdout = stdout;
        while let Some(line) = out_rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    // The server's output, a whole line at a time.
    let server_lines = out_tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(from_server);
        loop {
            let mut line = Vec::new();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if server_lines.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    // The client's input, judged line by line.
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdin);
        loop {
            let verdict = match read_line(&mut reader).await {
                Ok(None) | Err(_) => break,
                Ok(Some(Err(len))) => error(
                    Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "Invalid Request: a message of {len} bytes is over the limit of {MAX_LINE_BYTES}"
                    ),
                ),
                Ok(Some(Ok(line))) => match judge(&line) {
                    Verdict::Forward => {
                        let mut line = line.trim_ascii().to_vec();
                        line.push(b'\n');
                        if to_server.write_all(&line).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    answer @ Verdict::Answer(_) => answer,
                },
            };
            if let Verdict::Answer(v) = verdict {
                tracing::debug!(answer = %v, "malformed input answered");
                let mut bytes = v.to_string().into_bytes();
                bytes.push(b'\n');
                if out_tx.send(bytes).await.is_err() {
                    break;
                }
            }
        }
        // End of input: the server sees it too and ends the session.
        let _ = to_server.shutdown().await;
    });
    Guarded { input: server_in, output: server_out, flushed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(v: &Verdict) -> Option<(i64, Value)> {
        match v {
            Verdict::Answer(a) => Some((a["error"]["code"].as_i64()?, a["id"].clone())),
            Verdict::Forward => None,
        }
    }

    #[test]
    fn every_malformed_line_gets_the_right_error() {
        assert_eq!(code(&judge(b"not json")), Some((PARSE_ERROR, Value::Null)));
        assert_eq!(
            code(&judge(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/li")),
            Some((PARSE_ERROR, Value::Null))
        );
        assert_eq!(code(&judge(b"")), Some((PARSE_ERROR, Value::Null)));
        assert_eq!(code(&judge(b"\"\\ud800\"")), Some((PARSE_ERROR, Value::Null)));
        assert_eq!(code(&judge(b"\xff\xfe")), Some((PARSE_ERROR, Value::Null)));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(code(&judge(deep.as_bytes())), Some((PARSE_ERROR, Value::Null)));
        assert_eq!(code(&judge(b"[1,2]")), Some((INVALID_REQUEST, Value::Null)));
        assert_eq!(code(&judge(b"{\"id\":7,\"method\":\"x\"}")), Some((INVALID_REQUEST, json!(7))));
        assert_eq!(
            code(&judge(b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":5}")),
            Some((INVALID_REQUEST, json!("a")))
        );
        assert_eq!(
            code(&judge(b"{\"jsonrpc\":\"2.0\",\"id\":3}")),
            Some((INVALID_REQUEST, json!(3)))
        );
    }

    #[test]
    fn messages_pass_through() {
        assert_eq!(judge(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"), Verdict::Forward);
        assert_eq!(
            judge(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"),
            Verdict::Forward
        );
        assert_eq!(judge(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r"), Verdict::Forward);
    }
}
