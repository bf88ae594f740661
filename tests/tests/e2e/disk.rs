//! Disk bounds: retention trims the oldest history and reads say where it
//! begins; a full database (a size ceiling, the same error SQLite gives on a
//! full disk) trims to make room and the daemon keeps serving.

use portal_proto::v1 as pb;
use portal_tests::*;

/// The disk tests fill real filesystems and databases as fast as they can;
/// two at once compete for the same disk and cores, which is not what they
/// measure. Under `cargo test` (one process) this lock runs them one at a
/// time; under nextest (a process per test) the `disk` test group does.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn offset(c: Option<&pb::Cursor>, stream: pb::Stream) -> u64 {
    c.and_then(|c| c.offsets.iter().find(|o| o.stream == stream as i32)).map_or(0, |o| o.offset)
}

async fn info(
    rpc: &mut pb::portal_client::PortalClient<tonic::transport::Channel>,
) -> pb::GetInfoResponse {
    rpc.get_info(pb::GetInfoRequest {}).await.unwrap().into_inner()
}

#[tokio::test]
async fn retention_trims_the_oldest_output_and_reads_say_where_history_begins() {
    let _disk = ONE_AT_A_TIME.lock().await;
    const LIMIT: u64 = 256 << 10;
    let d = TestDaemon::start_with(|c| c.retention.per_process = LIMIT).await;
    let mut rpc = d.rpc();
    // 1.3 MB of numbered lines, five times the limit.
    let p = start_pipes(&mut rpc, "seq", &["1", "200000"]).await;
    wait_exit(&mut rpc, p.id).await;
    let first = rpc
        .read(pb::ReadRequest {
            proc: by_id(p.id),
            streams: vec![pb::Stream::Stdout.into()],
            from: Some(pb::read_request::From::Cursor(pb::Cursor {
                offsets: vec![pb::StreamOffset { stream: pb::Stream::Stdout.into(), offset: 0 }],
            })),
            encoding: pb::Encoding::Raw.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let start = offset(first.history_start.as_ref(), pb::Stream::Stdout);
    let end = offset(first.end.as_ref(), pb::Stream::Stdout);
    assert!(first.history_trimmed, "a read from offset 0 must say history was trimmed");
    assert!(end - start <= LIMIT, "retained {} > limit {LIMIT}", end - start);
    assert!(end - start >= LIMIT / 2, "trimmed far more than needed: {} left", end - start);
    assert_eq!(first.records.first().map(|r| r.offset), Some(start));
    // What is retained is the newest output, intact up to the last line.
    let kept = read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await;
    assert_eq!(kept.len() as u64, end - start);
    assert!(kept.ends_with(b"199999\n200000\n"));
    let i = info(&mut rpc).await;
    assert!(i.log_bytes <= LIMIT && i.log_bytes_trimmed >= end - LIMIT, "{i:?}");
    assert_eq!((i.log_limit_per_process, i.log_bytes_dropped), (LIMIT, 0));
    d.stop().await;
}

#[tokio::test]
async fn a_full_database_trims_the_oldest_history_and_the_daemon_keeps_working() {
    let _disk = ONE_AT_A_TIME.lock().await;
    let d = TestDaemon::start_with(|c| c.retention.max_db_bytes = Some(3 << 20)).await;
    let db = d.dir.path().join("data").join(portal_client::paths::DATABASE_FILE);
    let mut rpc = d.rpc();
    // Two processes of 2.7 MB each: the second cannot fit beside the first.
    let a = start_pipes(&mut rpc, "seq", &["1", "400000"]).await;
    wait_exit(&mut rpc, a.id).await;
    let b = start_pipes(&mut rpc, "seq", &["1", "400000"]).await;
    wait_exit(&mut rpc, b.id).await;
    // The newest output is whole; the oldest history made room for it.
    let tail = rpc
        .read(pb::ReadRequest {
            proc: by_id(b.id),
            from: Some(pb::read_request::From::Tail(true)),
            max_bytes: 64,
            encoding: pb::Encoding::Raw.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let text: Vec<u8> = tail.records.iter().flat_map(|r| r.data.clone()).collect();
    if !text.ends_with(b"399999\n400000\n") {
        let i = info(&mut rpc).await;
        panic!("the newest output is not whole: {:?}; {i:?}", String::from_utf8_lossy(&text));
    }
    let first = rpc.inspect(pb::InspectRequest { proc: by_id(a.id) }).await.unwrap().into_inner();
    let stats = first.streams.iter().find(|s| s.stream == pb::Stream::Stdout as i32).unwrap();
    assert!(stats.start_offset > 0, "the oldest process's history was not trimmed: {stats:?}");
    let i = info(&mut rpc).await;
    assert!(i.log_bytes_trimmed > 0 && i.storage_error.is_empty(), "{i:?}");
    // New work is stored as usual.
    let c = start_pipes(&mut rpc, "echo", &["still here"]).await;
    wait_for_text(&mut rpc, c.id, pb::Stream::Stdout, "still here").await;
    // A consistent snapshot of the live database is intact.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(conn);
    d.stop().await;
}

/// Bytes of the database and its WAL and shared-memory files.
fn on_disk(data: &std::path::Path) -> u64 {
    ["portal.db", "portal.db-wal", "portal.db-shm"]
        .iter()
        .map(|f| std::fs::metadata(data.join(f)).map_or(0, |m| m.len()))
        .sum()
}

#[tokio::test]
async fn disk_use_stays_near_what_is_kept() {
    let _disk = ONE_AT_A_TIME.lock().await;
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let data = d.dir.path().join("data");
    let p =
        start_pipes(&mut rpc, "sh", &["-c", "yes 0123456789abcdef0123456789 | head -c 60000000"])
            .await;
    wait_exit(&mut rpc, p.id).await;
    let kept = rpc.get_info(pb::GetInfoRequest {}).await.unwrap().into_inner().log_bytes;
    assert!(kept >= 60_000_000, "{kept}");
    // Once the writer rests, the WAL is folded in and emptied.
    let margin = 24 << 20;
    let size = wait_until("the WAL to be emptied once idle", async || {
        let size = on_disk(&data);
        (size <= kept + margin).then_some(size)
    })
    .await;
    eprintln!("kept {kept} bytes, {size} on disk");
    // Forgotten output's pages are reused: the same output again does not
    // grow the file.
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await.unwrap();
    let again =
        start_pipes(&mut rpc, "sh", &["-c", "yes 0123456789abcdef0123456789 | head -c 60000000"])
            .await;
    wait_exit(&mut rpc, again.id).await;
    let after = wait_until("the WAL to be emptied once idle again", async || {
        let now = on_disk(&data);
        (now <= size + margin).then_some(now)
    })
    .await;
    eprintln!("after cleanup and the same again: {after} on disk");
}

/// Unmounts a test's tmpfs, even when the test fails.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_real_full_disk_trims_keeps_the_newest_output_and_the_exit() {
    let _disk = ONE_AT_A_TIME.lock().await;
    if portal_client::user::current() != 0 {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let dir = test_dir();
    let config = config_in(dir.path());
    std::fs::create_dir_all(&config.data_dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs"])
        .arg(&config.data_dir)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _unmount = Mounted(config.data_dir.clone());
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    // 150 MB of output into a 48 MiB filesystem, then a last line and an exit.
    let script = "yes 0123456789abcdefghij0123456789abcdefghij | head -c 150000000; echo; echo LAST-LINE; exit 3";
    let p = start_pipes(&mut rpc, "sh", &["-c", script]).await;
    let ended = wait_exit(&mut rpc, p.id).await;
    assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(3)));
    let i = info(&mut rpc).await;
    assert!(i.log_bytes_trimmed > 0, "trimming never succeeded: {i:?}");
    assert!(i.log_bytes <= 48 << 20, "more reported kept than the disk holds: {i:?}");
    let tail = rpc
        .read(pb::ReadRequest {
            proc: by_id(p.id),
            from: Some(pb::read_request::From::Tail(true)),
            max_bytes: 256,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let text: String =
        tail.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect();
    assert!(text.ends_with("LAST-LINE\n"), "the newest output was lost: {text:?} {i:?}");
    // Under heavy load a burst can still outrun the trimming; whatever is
    // dropped is counted, and never more than the burst could not fit.
    assert!(i.log_bytes_dropped < 150_000_000 / 2, "most output was dropped: {i:?}");
    // The index never takes the room the log needs: it waits, and search
    // says why it finds nothing.
    let searched = rpc
        .search(pb::SearchRequest { query: "LAST".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(searched.index_error.contains("nearly full"), "{searched:?}");
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    // As if a daemon had died with a program running: the next start must
    // write (the program becomes lost), which a full disk refuses.
    let crashed = p.id + 1000;
    {
        let db = rusqlite::Connection::open(config.database()).unwrap();
        db.execute_batch(&format!(
            "CREATE TEMP TABLE t AS SELECT * FROM processes WHERE id = {id};
             UPDATE t SET id = {crashed}, status = 'running', exit_code = NULL;
             INSERT INTO processes SELECT * FROM t;",
            id = p.id
        ))
        .unwrap();
    }
    // Fill the disk to the last byte: a new daemon still starts (on the
    // reserve) and knows the exit.
    {
        use std::io::Write as _;
        let mut fill = std::fs::File::create(config.data_dir.join("fill")).unwrap();
        let block = vec![0u8; 1 << 16];
        while fill.write_all(&block).is_ok() {}
        while fill.write_all(&block[..512]).is_ok() {}
    }
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    let back = rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
    assert_eq!((back.status(), back.exit_code), (pb::Status::Exited, Some(3)));
    let lost = rpc.inspect(pb::InspectRequest { proc: by_id(crashed) }).await.unwrap().into_inner();
    assert_eq!(lost.status(), pb::Status::Lost);
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    let db = rusqlite::Connection::open(config.database()).unwrap();
    let check: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

#[tokio::test]
async fn a_database_deleted_under_the_daemon_is_reported() {
    let _disk = ONE_AT_A_TIME.lock().await;
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let data = d.dir.path().join("data");
    for f in ["portal.db", "portal.db-wal", "portal.db-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    // The next commits notice.
    let p = start_pipes(&mut rpc, "echo", &["after"]).await;
    wait_exit(&mut rpc, p.id).await;
    let i = info(&mut rpc).await;
    assert!(i.storage_error.contains("was deleted while portald ran"), "{i:?}");
    assert!(i.storage_error.contains("restart portald"), "{i:?}");
}

/// Mounts a tmpfs of `size` (as `mount -o size=`) on `dir`; `None` when
/// this machine cannot (not root, or no mount), which fails under CI: CI
/// runs as root and must run these tests.
fn mount_tmpfs(dir: &std::path::Path, size: &str) -> Option<Mounted> {
    let why = if portal_client::user::current() != 0 {
        "mounting a small tmpfs needs root"
    } else if std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
    {
        return Some(Mounted(dir.to_path_buf()));
    } else {
        "cannot mount a tmpfs here"
    };
    assert!(std::env::var_os("CI").is_none(), "{why} (CI must run the disk tests)");
    eprintln!("skipped: {why}");
    None
}

/// Every file in the data directory (database, WAL, shared memory, search
/// index and its WAL, reserve, anything else) and the disk it takes: its
/// length, or what is allocated to it when more (room set aside beyond its
/// end counts too).
fn dir_files(dir: &std::path::Path) -> Vec<(String, u64)> {
    std::fs::read_dir(dir).map_or(Vec::new(), |entries| {
        entries
            .filter_map(|e| {
                let e = e.ok()?;
                let m = e.metadata().ok()?;
                let used = m.len().max(std::os::unix::fs::MetadataExt::blocks(&m) * 512);
                m.is_file().then(|| (e.file_name().to_string_lossy().into_owned(), used))
            })
            .collect()
    })
}

/// How long the flood may take: a few seconds alone, several times that
/// beside a loaded test run; below nextest's 60 s, so a hang still fails.
const FLOOD_BOUND: std::time::Duration = std::time::Duration::from_secs(45);

#[tokio::test]
async fn a_flood_keeps_the_data_directory_within_the_limit_and_its_margin() {
    let _disk = ONE_AT_A_TIME.lock().await;
    let dir = test_dir();
    let mut config = config_in(dir.path());
    std::fs::create_dir_all(&config.data_dir).unwrap();
    // Room for far more than the bound, so the disk never runs low: what
    // holds the files within it is the limit, not a full disk.
    let Some(_unmount) = mount_tmpfs(&config.data_dir, "1g") else { return };
    const LIMIT: u64 = 16 << 20;
    config.retention.per_process = LIMIT;
    config.retention.total = LIMIT;
    let margin = config.retention.disk_margin();
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    // Sample the directory's size while the flood runs.
    let data = config.data_dir.clone();
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut most = (0, Vec::new());
            loop {
                let files = dir_files(&data);
                let total = files.iter().map(|f| f.1).sum::<u64>();
                if total > most.0 {
                    most = (total, files);
                }
                if stop.is_cancelled() {
                    return most;
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
    });
    // 200 MB of distinct lines, twelve times the limit, with a follower
    // (wait_exit follows from the start) and the search indexer reading
    // the log while it is written.
    let script = "seq 1 60000000 | head -c 200000000; echo; echo LAST-LINE; exit 4";
    let p = start_pipes(&mut rpc, "sh", &["-c", script]).await;
    let follow = pb::FollowRequest {
        proc: by_id(p.id),
        streams: vec![pb::Stream::Stdout.into()],
        from_start: true,
        ..Default::default()
    };
    let ended = tokio::time::timeout(FLOOD_BOUND, async {
        let mut events = rpc.follow(follow).await.unwrap().into_inner();
        while let Some(ev) = events.message().await.unwrap() {
            if let Some(pb::follow_event::Event::Exited(p)) = ev.event {
                return p;
            }
        }
        panic!("the follow stream ended without the exit");
    })
    .await
    .unwrap_or_else(|_| panic!("timed out after {FLOOD_BOUND:?} waiting for the flood's exit"));
    stop.cancel();
    let (most, files) = sampler.await.unwrap();
    assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(4)));
    let i = info(&mut rpc).await;
    eprintln!(
        "data directory at most {most} bytes ({files:?}) for a {LIMIT}-byte limit (margin {margin}); {i:?}"
    );
    assert!(
        most <= LIMIT + margin,
        "the data directory reached {most} bytes ({files:?}), over the {LIMIT}-byte limit and its {margin}-byte margin; {i:?}"
    );
    assert!(i.log_bytes <= LIMIT && i.log_bytes_dropped == 0, "{i:?}");
    let tail = rpc
        .read(pb::ReadRequest {
            proc: by_id(p.id),
            from: Some(pb::read_request::From::Tail(true)),
            max_bytes: 64,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let text: String =
        tail.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect();
    assert!(text.ends_with("LAST-LINE\n"), "the newest output was lost: {text:?}");
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
}

/// Another program writing a file beside the log: it keeps the disk at
/// `keep` bytes free, taking whatever room appears, until stopped.
struct AnotherWriter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<std::fs::File>,
}

impl AnotherWriter {
    fn start(dir: &std::path::Path, keep: u64) -> Self {
        use std::io::Write as _;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut file = std::fs::File::create(dir.join("another-writer")).unwrap();
        let free = {
            let dir = dir.to_path_buf();
            move || rustix::fs::statvfs(&dir).map_or(0, |s| s.f_bavail * s.f_frsize)
        };
        let block = vec![7u8; 64 << 10];
        // Down to `keep` before the test goes on.
        while free() > keep + block.len() as u64 && file.write_all(&block).is_ok() {}
        let thread = std::thread::spawn({
            let stop = std::sync::Arc::clone(&stop);
            move || {
                while !stop.load(Ordering::Acquire) {
                    let room = free().saturating_sub(keep);
                    if room > 0 {
                        let n = usize::try_from(room).unwrap_or(usize::MAX).min(block.len());
                        let _ = file.write_all(&block[..n]);
                    } else {
                        #[allow(
                            clippy::disallowed_methods,
                            reason = "the other program's own pace, not a synchronisation"
                        )]
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
                file
            }
        });
        Self { stop, thread }
    }

    /// Stops writing and gives `room` bytes of the file back.
    fn stop(self, room: u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let file = self.thread.join().unwrap();
        let len = file.metadata().unwrap().len();
        file.set_len(len.saturating_sub(room)).unwrap();
    }
}

#[tokio::test]
async fn exits_shown_while_another_writer_fills_the_disk_survive_a_restart() {
    let _disk = ONE_AT_A_TIME.lock().await;
    let dir = test_dir();
    let config = config_in(dir.path());
    std::fs::create_dir_all(&config.data_dir).unwrap();
    let Some(_unmount) = mount_tmpfs(&config.data_dir, "64m") else { return };
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    // Five programs that each print a little, wait for a line, print 8 MB
    // more and exit with their own code.
    let mut procs = Vec::new();
    for code in 1..=5 {
        let script = format!(
            "echo ready; read x; yes 0123456789abcdefghij0123456789 | head -c 8000000; echo; echo BYE; exit {code}"
        );
        let p = start_pipes(&mut rpc, "sh", &["-c", &script]).await;
        wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "ready").await;
        procs.push((p.id, code));
    }
    // Another program fills the disk to the last byte, and goes on taking
    // whatever room appears (the daemon's reserve, once released).
    let eater = AnotherWriter::start(&config.data_dir, 0);
    // The programs exit. An end is shown only once it is committed: while
    // the disk stays full it may not be yet (its program then still shows
    // as running), so each is given a moment, and what was shown counts.
    let (mut shown, mut pending) = (Vec::new(), Vec::new());
    for &(id, code) in &procs {
        write(&mut rpc, id, b"go\n").await;
        let moment = std::time::Duration::from_secs(2);
        if let Ok(ended) = tokio::time::timeout(moment, wait_exit(&mut rpc, id)).await {
            assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(code)));
            shown.push((id, code));
        } else {
            pending.push((id, code));
        }
    }
    let while_full = shown.len();
    // The other program stops and leaves a few MiB free: every end not yet
    // shown commits now and is shown.
    eater.stop(8 << 20);
    for (id, code) in pending {
        let ended = wait_exit(&mut rpc, id).await;
        assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(code)));
        shown.push((id, code));
    }
    let i = info(&mut rpc).await;
    eprintln!("{while_full} of {} exits shown while the disk was full; {i:?}", procs.len());
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    // After a restart, on the same nearly full disk, every exit shown is
    // there with its code.
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    for (id, code) in shown {
        let back = rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await.unwrap().into_inner();
        assert_eq!(
            (back.status(), back.exit_code),
            (pb::Status::Exited, Some(code)),
            "process {id} was shown exiting with {code}"
        );
    }
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
}
