//! Sections 5 and 7: the daemon's and the shim's peak memory over 1 GB,
//! disk per byte kept, and memory coming back after cycles of processes.

use std::time::{Duration, Instant};

use portal_proto::v1 as pb;
use serde_json::json;

use crate::Sizes;
use crate::capture::lines_command;
use crate::harness::{
    Daemon, by_id, call, connect_shim, out_bytes, spawn_shim, start_request, status_kb, wait_end,
};
use crate::report::{Row, Target, row};

/// Runs `fut`, sampling `pid`'s resident memory every 20 ms; returns its
/// output and the peak in KiB.
pub(super) async fn peak_rss<T>(pid: u32, fut: impl Future<Output = T>) -> (T, u64) {
    tokio::pin!(fut);
    let mut peak = status_kb(pid, "VmRSS");
    loop {
        tokio::select! {
            r = &mut fut => return (r, peak.max(status_kb(pid, "VmRSS"))),
            () = tokio::time::sleep(Duration::from_millis(20)) => peak = peak.max(status_kb(pid, "VmRSS")),
        }
    }
}

pub(super) async fn memory(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut rpc = d.rpc();
    let argv = lines_command(sizes.memory_bytes);
    let pid = d.pid();
    let p = rpc.start(start_request(&argv, true)).await?.into_inner();
    let (end, peak) = peak_rss(pid, wait_end(&mut rpc, p.id)).await;
    let end = end?;
    let stored = out_bytes(&end);
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let peak_mb = peak as f64 / 1024.0;
    let mut r = row(
        format!("daemon peak RSS capturing {} MB on a PTY", stored / 1_000_000),
        peak_mb,
        None,
        "MiB",
        Some(Target::Max(100.0)),
    );
    r.note = format!("{stored} bytes captured and kept");
    rows.push(r);
    // Page it all back through a fresh shim.
    let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
    let shim_pid = child.id().unwrap_or(0);
    let client = connect_shim(&mut child).await?;
    let mut cursor = "stdout:0".to_owned();
    let mut pages = 0;
    loop {
        let r = call(
            &client,
            "process_read",
            json!({"id": p.id, "cursor": cursor, "max_bytes": 1 << 20}),
        )
        .await?;
        pages += 1;
        let next = r["cursor"].as_str().unwrap_or_default().to_owned();
        if next == cursor || r["omitted_bytes"].as_u64() == Some(0) {
            break;
        }
        cursor = next;
    }
    let hwm = status_kb(shim_pid, "VmHWM");
    drop(client);
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let hwm_mb = hwm as f64 / 1024.0;
    let mut r = row("shim peak RSS paging it back", hwm_mb, None, "MiB", Some(Target::Max(64.0)));
    r.note = format!("{pages} pages of at most 1 MiB");
    rows.push(r);
    // Disk per byte kept, once the writer rests (its WAL folded in).
    let data = d.dir.path().join("data");
    let on_disk = || -> u64 {
        ["portal.db", "portal.db-wal", "portal.db-shm"]
            .iter()
            .map(|f| std::fs::metadata(data.join(f)).map_or(0, |m| m.len()))
            .sum()
    };
    let wal = data.join("portal.db-wal");
    let rest = Instant::now();
    while std::fs::metadata(&wal).map_or(0, |m| m.len()) > 0
        && rest.elapsed() < Duration::from_secs(30)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = rpc.get_info(pb::GetInfoRequest {}).await?.into_inner().log_bytes;
    #[allow(clippy::cast_precision_loss, reason = "a ratio for display")]
    let ratio = on_disk() as f64 / kept.max(1) as f64;
    let mut r = row(
        "bytes on disk per byte of log kept, writer at rest",
        ratio,
        None,
        "×",
        Some(Target::Max(1.25)),
    );
    r.note = format!("{} on disk for {kept} kept", on_disk());
    rows.push(r);
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await?;
    Ok(())
}

/// Start, end and clean up many processes, twice, in a fresh daemon: its
/// RSS must come back near where it started.
pub(super) async fn cycles(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let argv: Vec<String> = ["sh", "-c", "echo cycle"].iter().map(|s| (*s).to_owned()).collect();
    // One small process first, so the baseline includes a warm daemon.
    let warm = rpc.start(start_request(&argv, true)).await?.into_inner().id;
    wait_end(&mut rpc, warm).await?;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(warm) }).await?;
    let before = status_kb(d.pid(), "VmRSS");
    let mut after = Vec::new();
    for _ in 0..2 {
        let mut ids = Vec::with_capacity(sizes.cycle);
        for _ in 0..sizes.cycle {
            ids.push(rpc.start(start_request(&argv, true)).await?.into_inner().id);
        }
        for id in &ids {
            wait_end(&mut rpc, *id).await?;
        }
        for id in ids {
            rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
        }
        // Returning memory happens in the background after cleanups.
        tokio::time::sleep(Duration::from_millis(500)).await;
        after.push(status_kb(d.pid(), "VmRSS"));
    }
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let mib = |kb: u64| kb as f64 / 1024.0;
    for (i, kb) in after.iter().enumerate() {
        let mut r = row(
            format!(
                "daemon RSS after cycle {} of {} PTY processes, cleaned up",
                i + 1,
                sizes.cycle
            ),
            mib(*kb),
            Some(mib(before)),
            "MiB",
            // SQLite's page caches fill once and stay (8 MiB for the
            // writer, 1 MiB per pooled reader): bounded, not a leak.
            Some(Target::MaxOverRaw(24.0)),
        );
        r.note = "raw: the daemon's RSS before the cycles".into();
        rows.push(r);
    }
    d.stop().await
}
