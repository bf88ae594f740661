//! `portal-bench`: Portal measured against the physical limits of the machine
//! it runs on, in the same run.
//!
//! It starts its own `portald` (the binary beside it) on a private socket and
//! measures, each beside the raw figure of the same work without Portal:
//! 1. PTY capture: a child writing 200 MB of 70-character lines through a
//!    PTY, until every byte is committed and the screen rendered; raw and
//!    Portal alternate five times and the medians are compared (shared
//!    machines are noisy);
//! 2. pipe capture: the same through pipes;
//! 3. round trip: write a line to `cat` and see it come back, raw on a PTY,
//!    through gRPC (`Run`), and through the MCP shim (`process_run`);
//! 4. scale: idle PTY processes (start time, `List` latency, RSS each) and
//!    many processes printing at once (in a fresh daemon, for its peak RSS);
//! 5. memory: daemon peak RSS while capturing 1 GB, shim peak RSS while
//!    paging all of it back (the daemon keeps up to 2 GiB per process for
//!    this; retention has its own tests);
//! 6. cold start: shim start to its first `tools/list` answer, with the
//!    daemon running and with the daemon auto-started;
//! 7. cycles: in a fresh daemon, start many short PTY processes, let them
//!    end, clean them all up, twice; the daemon's RSS after each cycle
//!    against its RSS before (memory must come back);
//! 8. prompts: for python3, gdb and sqlite3 through the MCP shim, the time
//!    from the program printing its prompt (the log's timestamp of that
//!    output) to `process_run` returning with `input_requested`;
//! 9. spawn: in a fresh daemon, the median time of `Start` with 0, 100
//!    and 1000 idle PTY processes already running (programs are forked by
//!    the small portal-holder, so the daemon's size must not matter), and
//!    the pause of a live upgrade with them all running: from the
//!    `Upgrade` answer until the new daemon answers;
//! 10. tools: what `tools/list` costs a client, per tool and in all (it is
//!     sent to the model on every turn), and what one call costs through raw
//!     JSON-RPC on the shim's stdio (`process_list` of five processes beside
//!     `process_write`), with no client library in between.
//! 11. ssh: a remote host through a real sshd on loopback: the time to
//!     connect (ssh, the remote `portal-cli dial-stdio`, the handshake and
//!     `GetInfo`) beside `ssh host true`, and write→match through it
//!     (`Run` on the remote host's `cat`) beside a raw `ssh host cat` echo
//!     over one ssh connection, like Portal's.
//! 12. search: in a fresh daemon, a program printing 1 GB of varied log
//!     lines (timestamps, ids, paths, statuses; one rare word in the
//!     middle): capture throughput and, in the same run, indexing
//!     throughput (from the start until the index has every byte) and the
//!     index's size; then the latency of searches over it: the rare word,
//!     a word on every line (a page of the newest 20), a phrase, and a word
//!     with a regex filter.
//! 13. results: what a model reads of each result in a fixed scenario (a
//!     python3 REPL started and driven, its screen, a read, five processes
//!     listed, one inspected): the characters of the structured content
//!     (what Claude Code and Codex hand their model) and of the text block,
//!     full (for clients whose model reads the text) and short (for Claude
//!     Code and Codex).
//!
//! It prints one table (or `--json`) with PASS/MISS against Portal's
//! targets. `--smoke` runs every section at a tiny size (for CI: it proves
//! the benchmark works, not how fast anything is).
//!
//! Each section is in a module of its own; `harness` starts what they
//! drive and `report` holds the rows, their targets and the table.

mod capture;
mod harness;
mod latency;
mod memory;
mod report;
mod scale;
mod search;
mod ssh;
mod tools;

use anyhow::Context as _;
use clap::Parser;
use serde_json::{Value, json};

use crate::capture::capture;
use crate::harness::Daemon;
use crate::latency::{cold, prompts, rtt};
use crate::memory::{cycles, memory};
use crate::report::{machine, print_table};
use crate::scale::{scale, spawn};
use crate::search::search;
use crate::ssh::ssh;
use crate::tools::{results, tools};

/// Measure Portal against the raw limits of this machine.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Tiny sizes: check that every section works (seconds, not figures).
    #[arg(long)]
    smoke: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Run only these sections (capture, or pty-capture / pipe-capture alone; rtt, scale, memory, cold, cycle, prompt, spawn, tools, ssh, search, results).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// Sizes of one run.
struct Sizes {
    capture_bytes: u64,
    capture_trials: usize,
    rtt_tries: usize,
    idle: usize,
    busy: usize,
    busy_bytes: u64,
    memory_bytes: u64,
    cold_tries: usize,
    prompt_tries: usize,
    cycle: usize,
    /// Running processes at which start time is measured.
    spawn_levels: &'static [usize],
    spawn_tries: usize,
    /// Bytes of log lines searched.
    search_bytes: u64,
    search_tries: usize,
}

impl Sizes {
    fn new(smoke: bool) -> Self {
        if smoke {
            Self {
                capture_bytes: 2 << 20,
                capture_trials: 1,
                rtt_tries: 20,
                idle: 10,
                busy: 4,
                busy_bytes: 256 << 10,
                memory_bytes: 4 << 20,
                cold_tries: 2,
                prompt_tries: 3,
                cycle: 20,
                spawn_levels: &[0, 5],
                spawn_tries: 3,
                search_bytes: 4 << 20,
                search_tries: 3,
            }
        } else {
            Self {
                capture_bytes: 200 << 20,
                capture_trials: 5,
                rtt_tries: 500,
                idle: 1000,
                busy: 100,
                busy_bytes: 2 << 20,
                memory_bytes: 1 << 30,
                cold_tries: 10,
                prompt_tries: 50,
                cycle: 2000,
                spawn_levels: &[0, 100, 1000],
                spawn_tries: 30,
                search_bytes: 1 << 30,
                search_tries: 20,
            }
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sizes = Sizes::new(args.smoke);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let rows = runtime.block_on(async {
        let want = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
        let d = Daemon::start().await?;
        let mut rows = Vec::new();
        let modes: Vec<bool> = [(true, "pty-capture"), (false, "pipe-capture")]
            .into_iter()
            .filter(|(_, name)| want("capture") || args.only.iter().any(|o| o == name))
            .map(|(pty, _)| pty)
            .collect();
        capture(&d, &sizes, &modes, &mut rows).await.context("capture")?;
        if want("rtt") {
            rtt(&d, &sizes, &mut rows).await.context("round trip")?;
        }
        if want("memory") {
            memory(&d, &sizes, &mut rows).await.context("memory")?;
        }
        if want("scale") {
            scale(&d, &sizes, &mut rows).await.context("scale")?;
        }
        if want("cold") {
            cold(&d, &sizes, &mut rows).await.context("cold start")?;
        }
        if want("cycle") {
            cycles(&sizes, &mut rows).await.context("cycles")?;
        }
        if want("prompt") {
            prompts(&d, &sizes, &mut rows).await.context("prompts")?;
        }
        if want("spawn") {
            spawn(&sizes, &mut rows).await.context("spawn")?;
        }
        if want("tools") {
            tools(&d, &sizes, &mut rows).await.context("tools")?;
        }
        if want("ssh") {
            ssh(&sizes, &mut rows).await.context("ssh")?;
        }
        if want("search") {
            search(&sizes, &mut rows).await.context("search")?;
        }
        if want("results") {
            results(&d, &mut rows).await.context("results")?;
        }
        d.stop().await?;
        anyhow::Ok(rows)
    })?;
    let machine = machine();
    if args.json {
        let v: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "measure": r.name,
                    "unit": r.unit,
                    "portal": r.portal,
                    "raw": r.raw,
                    "ratio": r.raw.filter(|v| *v > 0.0).map(|v| r.portal / v),
                    "target": r.target.map(|t| t.describe(r.unit)),
                    "pass": r.target.map(|t| t.met(r.portal, r.raw)),
                    "note": r.note,
                })
            })
            .collect();
        println!("{}", json!({"machine": machine, "smoke": args.smoke, "results": v}));
    } else {
        print_table(&rows, &machine);
    }
    runtime.shutdown_background();
    Ok(())
}
