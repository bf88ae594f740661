//! Sections 1 and 2: PTY and pipe capture throughput beside a raw read of
//! the same child's output.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use portal_proto::v1 as pb;

use crate::Sizes;
use crate::harness::{Daemon, by_id, out_bytes, start_request, wait_end};
use crate::report::{Row, Target, mb, percentile, row};

/// A shell command writing `bytes` bytes of 70-character lines.
pub(super) fn lines_command(bytes: u64) -> Vec<String> {
    let line = "x".repeat(69);
    vec!["sh".into(), "-c".into(), format!("yes {line} | head -c {bytes}")]
}

/// Reads a PTY child's output to EOF; returns bytes and elapsed time.
fn raw_pty(argv: &[String]) -> anyhow::Result<(u64, Duration)> {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system().openpty(PtySize {
        rows: 24,
        cols: 80,
        pixel_width: 0,
        pixel_height: 0,
    })?;
    let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
    cmd.cwd("/");
    let start = Instant::now();
    let mut child = pair.slave.spawn_command(cmd)?;
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader()?;
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    let elapsed = start.elapsed();
    child.wait()?;
    Ok((total, elapsed))
}

/// Reads a piped child's stdout to EOF.
fn raw_pipe(argv: &[String]) -> anyhow::Result<(u64, Duration)> {
    let start = Instant::now();
    let mut child = Command::new(&argv[0]).args(&argv[1..]).stdout(Stdio::piped()).spawn()?;
    let mut out = child.stdout.take().context("no stdout")?;
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    let elapsed = start.elapsed();
    child.wait()?;
    Ok((total, elapsed))
}

/// One Portal capture of `argv`: start → exited, every byte committed and
/// (PTY) the screen rendered up to the end. Returns MB/s and any anomaly.
async fn portal_capture(
    d: &Daemon,
    argv: &[String],
    pty: bool,
    raw_bytes: u64,
) -> anyhow::Result<(f64, String)> {
    let mut rpc = d.rpc();
    let start = Instant::now();
    let p = rpc.start(start_request(argv, pty)).await?.into_inner();
    let end = wait_end(&mut rpc, p.id).await?;
    // Done means stored and shown: a read passes the store's flush barrier
    // (every byte committed), and a snapshot renders up to the end.
    let last = rpc
        .read(pb::ReadRequest {
            proc: by_id(p.id),
            from: Some(pb::read_request::From::Tail(true)),
            max_bytes: 1,
            encoding: pb::Encoding::Raw.into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let snap = if pty {
        let req = pb::ScreenRequest { proc: by_id(p.id), resize: None };
        Some(rpc.screen(req).await?.into_inner())
    } else {
        None
    };
    let elapsed = start.elapsed();
    let stored = out_bytes(&end);
    let mut note = String::new();
    if stored != raw_bytes {
        note = format!("stored {stored} of {raw_bytes} bytes");
    }
    if last.records.is_empty() {
        note.push_str(" the log's last byte is missing");
    }
    if let Some(snap) = snap
        && snap.offset != stored
    {
        note.push_str(&format!(" screen at {} of {stored}", snap.offset));
    }
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await?;
    Ok((mb(stored) / elapsed.as_secs_f64(), note))
}

/// Capture throughput: raw and Portal alternate `trials` times and the
/// medians are compared, so one noisy moment on a shared machine moves
/// neither side alone.
pub(super) async fn capture(
    d: &Daemon,
    sizes: &Sizes,
    modes: &[bool],
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let argv = lines_command(sizes.capture_bytes);
    for &pty in modes {
        let mut raw = Vec::new();
        let mut portal = Vec::new();
        let mut notes = Vec::new();
        for _ in 0..sizes.capture_trials {
            let (raw_bytes, raw_time) = if pty { raw_pty(&argv)? } else { raw_pipe(&argv)? };
            raw.push(mb(raw_bytes) / raw_time.as_secs_f64());
            let (rate, note) = portal_capture(d, &argv, pty, raw_bytes).await?;
            portal.push(rate);
            if !note.is_empty() {
                notes.push(note);
            }
        }
        raw.sort_by(f64::total_cmp);
        portal.sort_by(f64::total_cmp);
        let name = if pty { "PTY capture (70-char lines)" } else { "pipe capture (70-char lines)" };
        let target = if pty { Target::MinRatio(0.8) } else { Target::MinRatio(0.5) };
        let mut r =
            row(name, percentile(&portal, 0.5), Some(percentile(&raw, 0.5)), "MB/s", Some(target));
        r.note = if notes.is_empty() {
            format!("median of {} paired runs", sizes.capture_trials)
        } else {
            notes.join("; ")
        };
        rows.push(r);
    }
    Ok(())
}
