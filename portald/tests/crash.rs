//! What a `portald` killed with SIGKILL leaves its successor: every stream
//! of every program continues exactly (what was read and never committed
//! comes back from the program's journal, or is reported lost with its
//! size where it was), and every write a client was told was accepted
//! reaches the program and the stdin log. Real binaries, real programs;
//! the kills land while output floods in and right after writes answer.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;

use portal_proto::v1 as pb;

mod common;
use common::*;

/// Lines each flooding program prints: about 7 MB, several times what the
/// store may hold uncommitted at a kill (its queue and a batch).
const LINES: u32 = 1_000_000;

/// Output seen live before the kill: the store is then mid-flood.
const SEEN_BEFORE_KILL: usize = 2 << 20;

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

fn daemon(dir: &Path, ring: &str) -> Daemon {
    spawn_daemon_with(
        dir,
        Path::new(env!("CARGO_BIN_EXE_portald")),
        &[("PORTAL_JOURNAL_RING", ring)],
    )
}

/// Waits until `at_least` bytes of `id`'s output went by live.
async fn seen(rpc: &mut Rpc, id: u64, at_least: usize) {
    let req = pb::FollowRequest { proc: by_id(id), from_start: true, ..Default::default() };
    let mut events = rpc.follow(req).await.unwrap().into_inner();
    let mut n = 0;
    tokio::time::timeout(BOUND, async {
        while n < at_least {
            match events.message().await.unwrap().and_then(|e| e.event) {
                Some(pb::follow_event::Event::Output(r)) => n += r.data.len(),
                Some(_) => {}
                None => panic!("the output ended after {n} bytes"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{at_least} bytes not printed within {BOUND:?}"));
}

/// One stream read back whole: its pieces and the ranges reported lost,
/// each (offset, bytes or length), and where the stream ends.
struct Stream {
    pieces: Vec<(u64, Vec<u8>)>,
    lost: Vec<(u64, u64)>,
    end: u64,
}

async fn read_all(rpc: &mut Rpc, id: u64, stream: pb::Stream) -> Stream {
    let mut got = Stream { pieces: Vec::new(), lost: Vec::new(), end: 0 };
    let mut at = 0;
    loop {
        let cursor =
            pb::Cursor { offsets: vec![pb::StreamOffset { stream: stream.into(), offset: at }] };
        let r = rpc
            .read(pb::ReadRequest {
                proc: by_id(id),
                streams: vec![stream.into()],
                from: Some(pb::read_request::From::Cursor(cursor)),
                max_bytes: 4 << 20,
                encoding: pb::Encoding::Raw.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        got.pieces.extend(r.records.iter().map(|r| (r.offset, r.data.to_vec())));
        got.lost.extend(r.lost.iter().map(|l| (l.offset, l.length)));
        let offset = |c: &Option<pb::Cursor>| {
            c.as_ref()
                .and_then(|c| c.offsets.iter().find(|o| o.stream() == stream))
                .map_or(0, |o| o.offset)
        };
        got.end = offset(&r.end);
        let next = offset(&r.next);
        if next >= got.end || next == at {
            return got;
        }
        at = next;
    }
}

/// Checks that `s` is exactly `want`: pieces and lost ranges follow each
/// other without a gap or an overlap from 0 to its end, and every piece
/// is the bytes `want` has at its offset. Returns the bytes lost.
fn accounts_exactly(s: &Stream, want: &[u8], what: &str) -> u64 {
    let mut spans: Vec<(u64, u64, Option<&[u8]>)> =
        s.pieces.iter().map(|(o, d)| (*o, d.len() as u64, Some(d.as_slice()))).collect();
    spans.extend(s.lost.iter().map(|(o, l)| (*o, *l, None)));
    spans.sort_by_key(|s| s.0);
    let mut at = 0;
    let mut lost = 0;
    for (off, len, data) in spans {
        assert_eq!(off, at, "{what}: a gap or an overlap at offset {at}");
        let range = usize::try_from(off).unwrap()..usize::try_from(off + len).unwrap();
        let expected = &want[range];
        match data {
            Some(d) => {
                assert!(d == expected, "{what}: the bytes at offset {off} are not the program's")
            }
            None => lost += len,
        }
        at += len;
    }
    assert_eq!((at, s.end), (want.len() as u64, want.len() as u64), "{what}: the stream's end");
    lost
}

fn seq_output(eol: &str) -> Vec<u8> {
    (1..=LINES).flat_map(|i| format!("{i}{eol}").into_bytes()).collect()
}

/// Kills the daemon with SIGKILL while a PTY and a pipe program flood it,
/// starts another, lets both programs finish and reads them back whole.
/// Returns the bytes reported lost in each.
async fn flood_kill_and_read(ring: &str) -> (u64, u64) {
    let d = dir();
    let mut first = daemon(d.path(), ring);
    let mut rpc = first.connect().await.rpc();
    let lines = LINES.to_string();
    let pty = Start::pty("seq").args(["1", &lines]).run(&mut rpc).await;
    let pipe = Start::pipes("seq").args(["1", &lines]).run(&mut rpc).await;
    seen(&mut rpc, pty.id, SEEN_BEFORE_KILL).await;
    seen(&mut rpc, pipe.id, SEEN_BEFORE_KILL).await;
    assert!(unsafe_free_kill(first.child.id(), "KILL"));
    assert_eq!(wait_child(first.child).await.code(), None, "killed by a signal");
    let mut second = daemon(d.path(), ring);
    let mut rpc = second.connect().await.rpc();
    for p in [&pty, &pipe] {
        let ended = wait_end(&mut rpc, p.id).await;
        assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(0)));
    }
    let on_pty = read_all(&mut rpc, pty.id, pb::Stream::Stdout).await;
    let on_pipe = read_all(&mut rpc, pipe.id, pb::Stream::Stdout).await;
    let lost_pty = accounts_exactly(&on_pty, &seq_output("\r\n"), "the PTY's output");
    let lost_pipe = accounts_exactly(&on_pipe, &seq_output("\n"), "the pipe's output");
    // Inspect counts the same holes, byte for byte.
    for (p, lost) in [(&pty, lost_pty), (&pipe, lost_pipe)] {
        let seen =
            rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
        let stdout = seen.streams.iter().find(|s| s.stream() == pb::Stream::Stdout).unwrap();
        assert_eq!(stdout.lost_bytes, lost, "inspect's lost bytes of process {}", p.id);
    }
    assert!(unsafe_free_kill(second.child.id(), "TERM"));
    assert!(wait_child(second.child).await.success());
    (lost_pty, lost_pipe)
}

#[tokio::test]
async fn kill_9_mid_flood_loses_no_line_the_journal_holds() {
    // A ring larger than all the store may hold uncommitted: every line
    // comes back, in order, none glued to another.
    let lost = flood_kill_and_read("64M").await;
    assert_eq!(lost, (0, 0), "bytes reported lost (PTY, pipe)");
}

#[tokio::test]
async fn kill_9_beyond_the_journal_reports_the_hole_with_its_exact_size() {
    // A ring far smaller than what is uncommitted mid-flood: what fell out
    // of it is reported lost where it was, and the bytes after the hole
    // are exactly the program's at their offsets.
    let (pty, pipe) = flood_kill_and_read("4K").await;
    eprintln!("bytes reported lost: PTY {pty}, pipe {pipe}");
}

#[tokio::test]
async fn every_acknowledged_write_reaches_the_program_and_the_log_across_kill_9() {
    let d = dir();
    let mut live = daemon(d.path(), "256K");
    let mut rpc = live.connect().await.rpc();
    let cat = Start::pipes("cat").run(&mut rpc).await;
    let mut acked = String::new();
    for round in 0..4 {
        for i in 0..25 {
            let line = format!("r{round}w{i}\n");
            rpc.write(pb::WriteRequest {
                proc: by_id(cat.id),
                data: line.clone().into(),
                secret: false,
            })
            .await
            .unwrap();
            acked.push_str(&line);
        }
        // Killed the moment the last write is answered.
        assert!(unsafe_free_kill(live.child.id(), "KILL"));
        assert_eq!(wait_child(live.child).await.code(), None, "killed by a signal");
        live = daemon(d.path(), "256K");
        rpc = live.connect().await.rpc();
    }
    rpc.close_stdin(pb::CloseStdinRequest { proc: by_id(cat.id) }).await.unwrap();
    wait_end(&mut rpc, cat.id).await;
    let echoed = read_all(&mut rpc, cat.id, pb::Stream::Stdout).await;
    assert_eq!(accounts_exactly(&echoed, acked.as_bytes(), "cat's output"), 0);
    let typed = read_all(&mut rpc, cat.id, pb::Stream::Stdin).await;
    assert_eq!(accounts_exactly(&typed, acked.as_bytes(), "the stdin log"), 0);
    assert!(unsafe_free_kill(live.child.id(), "TERM"));
    assert!(wait_child(live.child).await.success());
}
