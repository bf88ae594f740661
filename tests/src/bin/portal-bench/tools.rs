//! Sections 10 and 13: what the MCP surface costs a model, `tools/list` per
//! tool and one call through raw JSON-RPC, and the size of each result.

use std::time::Instant;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::Sizes;
use crate::harness::{Daemon, RawShim};
use crate::report::{Row, Target, ms, percentile, row};

/// Most characters `tools/list` may cost for every tool (about 5 K tokens):
/// the shim's own budget (`catalog.rs`), whose result schemas list the
/// values of every status, state and reason a model branches on.
const TOOLS_BUDGET: f64 = 21_000.0;

/// `tools/list` per tool and in all; one call's cost through raw JSON-RPC.
pub(super) async fn tools(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut shim = RawShim::start(d).await?;
    let (list, _) = shim.request("tools/list", json!({})).await?;
    let listed = list["tools"].as_array().context("tools/list has no tools")?;
    let mut total = 0;
    for t in listed {
        let chars = t.to_string().chars().count();
        total += chars;
        #[allow(clippy::cast_precision_loss, reason = "a count for display")]
        rows.push(row(
            format!("tools/list: {}", t["name"].as_str().unwrap_or("?")),
            chars as f64,
            None,
            "chars",
            None,
        ));
    }
    #[allow(clippy::cast_precision_loss, reason = "a count for display")]
    let mut r =
        row("tools/list: every tool", total as f64, None, "chars", Some(Target::Max(TOOLS_BUDGET)));
    r.note = format!("{} tools", listed.len());
    rows.push(r);

    let mut ids = Vec::new();
    for i in 0..5 {
        let r = shim
            .call("process_start", json!({"command": "cat", "name": format!("bench-{i}")}))
            .await?;
        ids.push(r["structuredContent"]["process"]["id"].as_u64().context("no id")?);
    }
    let (mut list_ms, mut write_ms) = (Vec::new(), Vec::new());
    for _ in 0..sizes.rtt_tries.min(200) {
        let start = Instant::now();
        shim.call("process_list", json!({})).await?;
        list_ms.push(ms(start.elapsed()));
        let start = Instant::now();
        shim.call("process_write", json!({"id": ids[0], "content": "x\n"})).await?;
        write_ms.push(ms(start.elapsed()));
    }
    list_ms.sort_by(f64::total_cmp);
    write_ms.sort_by(f64::total_cmp);
    let mut r = row(
        "process_list of 5 through raw JSON-RPC, median",
        percentile(&list_ms, 0.5),
        None,
        "ms",
        None,
    );
    r.note = format!(
        "{:.2} × process_write (a client that validates results pays for the rest)",
        percentile(&list_ms, 0.5) / percentile(&write_ms, 0.5)
    );
    rows.push(r);
    rows.push(row(
        "process_write through raw JSON-RPC, median",
        percentile(&write_ms, 0.5),
        None,
        "ms",
        None,
    ));
    for id in ids {
        shim.call("process_kill", json!({"id": id})).await?;
        shim.call("process_cleanup", json!({"id": id})).await?;
    }
    Ok(())
}

/// One call of the results scenario: its structured content and its text.
async fn sized(
    shim: &mut RawShim,
    tool: &str,
    args: Value,
) -> anyhow::Result<(Value, usize, usize)> {
    let r = shim.call(tool, args).await?;
    let structured = r["structuredContent"].clone();
    let text: String = r["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    Ok((structured.clone(), structured.to_string().chars().count(), text.chars().count()))
}

/// The results scenario (see the module doc) as `client`: per call, the
/// characters of structured content and of text.
async fn result_sizes(
    d: &Daemon,
    client: &str,
) -> anyhow::Result<Vec<(&'static str, usize, usize)>> {
    let mut shim = RawShim::start_as(d, client).await?;
    let mut out = Vec::new();
    let (started, s, t) = sized(
        &mut shim,
        "process_start",
        json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input", "cwd": "/tmp"}),
    )
    .await?;
    out.push(("process_start (wait: input)", s, t));
    let id = started["process"]["id"].as_u64().context("no id")?;
    let (_, s, t) =
        sized(&mut shim, "process_run", json!({"id": id, "input": "print(6*7)"})).await?;
    out.push(("process_run (one line)", s, t));
    let loop40 = "print('\\n'.join(f'line {i} of the loop' for i in range(40)))";
    let (_, s, t) = sized(&mut shim, "process_run", json!({"id": id, "input": loop40})).await?;
    out.push(("process_run (40 lines)", s, t));
    let (_, s, t) = sized(&mut shim, "process_screen", json!({"id": id})).await?;
    out.push(("process_screen (80x24)", s, t));
    let (_, s, t) = sized(&mut shim, "process_read", json!({"id": id, "duration": 60_000})).await?;
    out.push(("process_read (all of it)", s, t));
    let mut ids = vec![id];
    for argv in [["sleep", "600"], ["cat", "-"], ["sleep", "601"], ["sleep", "602"]] {
        let r = shim
            .call("process_start", json!({"command": argv[0], "args": [argv[1]], "cwd": "/tmp"}))
            .await?;
        ids.push(r["structuredContent"]["process"]["id"].as_u64().context("no id")?);
    }
    let (_, s, t) = sized(&mut shim, "process_list", json!({})).await?;
    out.push(("process_list (five processes)", s, t));
    let (_, s, t) = sized(&mut shim, "process_inspect", json!({"id": id})).await?;
    out.push(("process_inspect", s, t));
    for id in ids {
        shim.call("process_kill", json!({"id": id})).await?;
        shim.call("process_cleanup", json!({"id": id})).await?;
    }
    Ok(out)
}

/// What a model reads of each result, as Claude Code or Codex (structured
/// content) and as a client that reads the text.
pub(super) async fn results(d: &Daemon, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let full = result_sizes(d, "portal-bench").await?;
    let short = result_sizes(d, "claude-code").await?;
    for ((what, structured, text), (_, _, short_text)) in full.into_iter().zip(short) {
        #[allow(clippy::cast_precision_loss, reason = "a count for display")]
        let mut r =
            row(format!("result: {what}, structured"), structured as f64, None, "chars", None);
        r.note = format!("text {text} chars (full), {short_text} (Claude Code, Codex)");
        rows.push(r);
    }
    Ok(())
}
