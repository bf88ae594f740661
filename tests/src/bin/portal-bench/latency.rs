//! Sections 3, 6 and 8: round trips (raw PTY, gRPC `Run`, MCP
//! `process_run`), the shim's cold start, and prompt detection latency.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use serde_json::json;
use tonic::transport::Channel;

use crate::Sizes;
use crate::harness::{Daemon, by_id, call, connect_shim, spawn_shim, start_request};
use crate::report::{Row, Target, ms, percentile, row};

/// Raw round trip: a line to `cat` on a PTY (echo off) and back.
fn raw_rtt(tries: usize) -> anyhow::Result<Vec<f64>> {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system().openpty(PtySize {
        rows: 24,
        cols: 80,
        pixel_width: 0,
        pixel_height: 0,
    })?;
    let mut cmd = CommandBuilder::new("sh");
    cmd.args(["-c", "stty -echo; echo ECHO-OFF; exec cat"]);
    cmd.cwd("/");
    let mut child = pair.slave.spawn_command(cmd)?;
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader()?;
    let mut writer = pair.master.take_writer()?;
    let mut buf = vec![0u8; 4096];
    let mut seen = String::new();
    // Until stty has run the terminal echoes lines itself (a kernel round
    // trip, not cat's): wait for the shell's word that echo is off.
    while !seen.contains("ECHO-OFF\r\n") {
        let n = reader.read(&mut buf)?;
        anyhow::ensure!(n > 0, "the shell ended");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let mut round = |line: &str, seen: &mut String| -> anyhow::Result<Duration> {
        seen.clear();
        let start = Instant::now();
        writer.write_all(format!("{line}\n").as_bytes())?;
        let want = format!("{line}\r\n");
        while !seen.contains(&want) {
            let n = reader.read(&mut buf)?;
            anyhow::ensure!(n > 0, "cat ended");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        Ok(start.elapsed())
    };
    for i in 0..20 {
        round(&format!("warm{i}"), &mut seen)?;
    }
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries {
        times.push(ms(round(&format!("ping{i}"), &mut seen)?));
    }
    drop(writer);
    child.wait()?;
    Ok(times)
}

/// Starts `cat` on a PTY (echo off) and times `tries` runs that type a line
/// and wait for it back, after 20 to warm up; returns its id and the times.
pub(super) async fn run_echo(
    rpc: &mut PortalClient<Channel>,
    tries: usize,
) -> anyhow::Result<(u64, Vec<f64>)> {
    let argv: Vec<String> =
        ["sh", "-c", "stty -echo; exec cat"].iter().map(|s| (*s).to_owned()).collect();
    let p = rpc.start(start_request(&argv, true)).await?.into_inner();
    let run = |input: String| pb::RunRequest {
        proc: by_id(p.id),
        input: input.clone(),
        no_enter: false,
        until: Some(pb::WaitCondition { needle: input, timeout_ms: 5000, ..Default::default() }),
    };
    for i in 0..20 {
        rpc.run(run(format!("warm{i}"))).await?;
    }
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries {
        let start = Instant::now();
        let r = rpc.run(run(format!("ping{i}"))).await?.into_inner();
        anyhow::ensure!(
            r.reason() == pb::WaitReason::Matched,
            "run {i} ended with {:?}",
            r.reason()
        );
        times.push(ms(start.elapsed()));
    }
    Ok((p.id, times))
}

pub(super) async fn rtt(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let raw = tokio::task::spawn_blocking({
        let tries = sizes.rtt_tries;
        move || raw_rtt(tries)
    })
    .await??;
    let mut rpc = d.rpc();
    let (id, mut grpc) = run_echo(&mut rpc, sizes.rtt_tries).await?;
    let shim_times = shim_rtt(d, id, sizes.rtt_tries).await?;
    rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
    let mut raw = raw;
    raw.sort_by(f64::total_cmp);
    grpc.sort_by(f64::total_cmp);
    let mut shim = shim_times;
    shim.sort_by(f64::total_cmp);
    let (raw50, raw99) = (percentile(&raw, 0.5), percentile(&raw, 0.99));
    for (path, times, target) in [
        ("gRPC Run", &grpc, Target::MaxOverRaw(0.25)),
        ("MCP process_run", &shim, Target::Max(1.0)),
    ] {
        let median = percentile(times, 0.5);
        rows.push(row(
            format!("round trip via {path}, median"),
            median,
            Some(raw50),
            "ms",
            Some(target),
        ));
        let p99 = percentile(times, 0.99);
        rows.push(row(format!("round trip via {path}, p99"), p99, Some(raw99), "ms", None));
    }
    Ok(())
}

async fn shim_rtt(d: &Daemon, id: u64, tries: usize) -> anyhow::Result<Vec<f64>> {
    let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
    let client = connect_shim(&mut child).await?;
    for i in 0..20 {
        call(
            &client,
            "process_run",
            json!({"id": id, "input": format!("mwarm{i}"), "pattern": format!("mwarm{i}")}),
        )
        .await?;
    }
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries {
        let start = Instant::now();
        let r = call(
            &client,
            "process_run",
            json!({"id": id, "input": format!("mping{i}"), "pattern": format!("mping{i}")}),
        )
        .await?;
        anyhow::ensure!(r["reason"] == "matched", "process_run {i}: {r}");
        times.push(ms(start.elapsed()));
    }
    drop(client);
    Ok(times)
}

/// Prompt printed → `process_run` returns, through the shim, per program.
pub(super) async fn prompts(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let programs: [(&str, &[&str], &str); 3] = [
        ("python3", &["-q"], "print(1)"),
        ("gdb", &["-q", "-nx"], "print 1"),
        ("sqlite3", &[":memory:"], "select 1;"),
    ];
    let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
    let client = connect_shim(&mut child).await?;
    let mut rpc = d.rpc();
    for (program, args, statement) in programs {
        let started = call(
            &client,
            "process_start",
            json!({"command": program, "args": args, "pty": true, "wait": "input"}),
        )
        .await?;
        anyhow::ensure!(
            started["wait"]["reason"] == "input_requested",
            "{program} did not reach its prompt: {started}"
        );
        let id = started["process"]["id"].as_u64().context("process id")?;
        let mut times = Vec::with_capacity(sizes.prompt_tries);
        for i in 0..sizes.prompt_tries {
            let r = call(&client, "process_run", json!({"id": id, "input": statement})).await?;
            let returned = wall_ns();
            anyhow::ensure!(r["reason"] == "input_requested", "{program} run {i}: {r}");
            // When the prompt was read from the program: the newest record.
            let tail = rpc
                .read(pb::ReadRequest {
                    proc: by_id(id),
                    from: Some(pb::read_request::From::Tail(true)),
                    max_bytes: 256,
                    encoding: pb::Encoding::Raw.into(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            let printed = tail.records.last().context("no output")?.ts_ns;
            #[allow(clippy::cast_precision_loss, reason = "nanoseconds of a short interval")]
            times.push((returned - printed) as f64 / 1e6);
        }
        rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
        rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
        times.sort_by(f64::total_cmp);
        rows.push(row(
            format!("{program}: prompt printed → process_run returns, median"),
            percentile(&times, 0.5),
            None,
            "ms",
            Some(Target::Max(50.0)),
        ));
        rows.push(row(
            format!("{program}: prompt printed → process_run returns, p99"),
            percentile(&times, 0.99),
            None,
            "ms",
            None,
        ));
    }
    drop(client);
    Ok(())
}

/// Wall-clock time in ns since the Unix epoch (the log's `ts_ns` clock).
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

pub(super) async fn cold(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut warm = Vec::new();
    for _ in 0..sizes.cold_tries {
        let start = Instant::now();
        let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
        let client = connect_shim(&mut child).await?;
        client.list_all_tools().await?;
        warm.push(ms(start.elapsed()));
        drop(client);
    }
    warm.sort_by(f64::total_cmp);
    rows.push(row(
        "shim start to tools/list (daemon running), median",
        percentile(&warm, 0.5),
        None,
        "ms",
        Some(Target::Max(50.0)),
    ));
    let mut autostart = Vec::new();
    for _ in 0..sizes.cold_tries.min(3) {
        let dir = tempfile::Builder::new().prefix("pc").tempdir_in("/tmp")?;
        let socket = dir.path().join("s").join("portald.sock");
        let start = Instant::now();
        let mut child = spawn_shim(&socket, &dir.path().join("data"))?;
        let client = connect_shim(&mut child).await?;
        client.list_all_tools().await?;
        call(&client, "process_list", json!({})).await?;
        autostart.push(ms(start.elapsed()));
        drop(client);
        let c = Client::connect(&socket).await?;
        c.rpc().shutdown(pb::ShutdownRequest {}).await?;
    }
    autostart.sort_by(f64::total_cmp);
    rows.push(row(
        "shim start to first tool answer (daemon auto-started), median",
        percentile(&autostart, 0.5),
        None,
        "ms",
        None,
    ));
    Ok(())
}
