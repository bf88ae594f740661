//! Sections 4 and 9: many processes, idle and printing at once, start time
//! with many running, and the pause of a live upgrade with them all.

use std::time::{Duration, Instant};

use portal_client::client::Client;
use portal_proto::v1 as pb;

use crate::Sizes;
use crate::capture::lines_command;
use crate::harness::{Daemon, by_id, out_bytes, start_request, status_kb, wait_end};
use crate::memory::peak_rss;
use crate::report::{Row, Target, mb, ms, percentile, row};

pub(super) async fn scale(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut rpc = d.rpc();
    let before = status_kb(d.pid(), "VmRSS");
    let argv: Vec<String> = vec!["sleep".into(), "3600".into()];
    let start = Instant::now();
    let mut ids = Vec::with_capacity(sizes.idle);
    for _ in 0..sizes.idle {
        ids.push(rpc.start(start_request(&argv, true)).await?.into_inner().id);
    }
    let start_time = start.elapsed();
    let mut list = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let l = rpc.list(pb::ListRequest {}).await?.into_inner();
        list.push(ms(t.elapsed()));
        anyhow::ensure!(
            l.processes.len() >= sizes.idle,
            "list has {} processes",
            l.processes.len()
        );
    }
    list.sort_by(f64::total_cmp);
    let after = status_kb(d.pid(), "VmRSS");
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let per = (after.saturating_sub(before)) as f64 / 1024.0 / sizes.idle as f64;
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let per_start = ms(start_time) / sizes.idle as f64;
    rows.push(row(
        format!("start {} idle PTY processes, each", sizes.idle),
        per_start,
        None,
        "ms",
        None,
    ));
    rows.push(row(
        format!("List with {} processes, median", sizes.idle),
        percentile(&list, 0.5),
        None,
        "ms",
        Some(Target::Max(20.0)),
    ));
    rows.push(row("daemon RSS per idle PTY process", per, None, "MiB", Some(Target::Max(1.0))));
    rpc.kill_all(pb::KillAllRequest {}).await?;
    for id in ids {
        rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
    }
    // Many printing at once, in a fresh daemon: its peak memory is theirs
    // alone, not what the idle ones left in the allocator.
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let argv = lines_command(sizes.busy_bytes);
    let start = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..sizes.busy {
        ids.push(rpc.start(start_request(&argv, true)).await?.into_inner().id);
    }
    let pid = d.pid();
    let (total, peak) = peak_rss(pid, async {
        let mut total = 0;
        for id in &ids {
            total += out_bytes(&wait_end(&mut rpc, *id).await?);
        }
        anyhow::Ok(total)
    })
    .await;
    let total = total?;
    let elapsed = start.elapsed();
    for id in ids {
        rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
    }
    rows.push(row(
        format!("{} PTY processes printing at once, aggregate", sizes.busy),
        mb(total) / elapsed.as_secs_f64(),
        None,
        "MB/s",
        None,
    ));
    d.stop().await?;
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let peak_mb = peak as f64 / 1024.0;
    rows.push(row(
        format!("daemon peak RSS with {} processes printing", sizes.busy),
        peak_mb,
        None,
        "MiB",
        Some(Target::Max(100.0)),
    ));
    Ok(())
}

/// Start time with many processes running, then a live upgrade's pause.
pub(super) async fn spawn(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let idle: Vec<String> = vec!["sleep".into(), "3600".into()];
    let mut running = Vec::new();
    for &level in sizes.spawn_levels {
        while running.len() < level {
            running.push(rpc.start(start_request(&idle, true)).await?.into_inner().id);
        }
        let mut times = Vec::with_capacity(sizes.spawn_tries);
        for _ in 0..sizes.spawn_tries {
            let t = Instant::now();
            let id = rpc.start(start_request(&idle, true)).await?.into_inner().id;
            times.push(ms(t.elapsed()));
            rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
            rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
        }
        times.sort_by(f64::total_cmp);
        let target = (level >= 1000).then_some(Target::Max(3.0));
        rows.push(row(
            format!("start a PTY process with {level} running, median"),
            percentile(&times, 0.5),
            None,
            "ms",
            target,
        ));
    }
    let before = rpc.get_info(pb::GetInfoRequest {}).await?.into_inner();
    rpc.upgrade(pb::UpgradeRequest { binary: String::new() }).await?;
    let answered = Instant::now();
    let deadline = answered + Duration::from_secs(60);
    let info = loop {
        anyhow::ensure!(Instant::now() < deadline, "the upgraded daemon did not answer");
        if let Ok(c) = Client::connect(&d.socket).await
            && c.info().started_at_ns != before.started_at_ns
        {
            break c.info().clone();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let pause = ms(answered.elapsed());
    anyhow::ensure!(info.pid == before.pid && info.upgrade_error.is_empty(), "{info:?}");
    anyhow::ensure!(
        info.running as usize >= running.len(),
        "{} of {} programs carried over",
        info.running,
        running.len()
    );
    rows.push(row(
        format!("live upgrade with {} running: clients waiting", running.len()),
        pause,
        None,
        "ms",
        None,
    ));
    let mut rpc = Client::connect(&d.socket).await?.rpc();
    rpc.kill_all(pb::KillAllRequest {}).await?;
    let d = Daemon { client: Client::connect(&d.socket).await?, ..d };
    d.stop().await
}
