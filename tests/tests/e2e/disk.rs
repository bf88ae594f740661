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
    let db = d.dir.path().join("data").join(portal_proto::paths::DATABASE_FILE);
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
    if portal_proto::paths::uid() != 0 {
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
    let client = portal_proto::client::Client::connect(&config.socket).await.unwrap();
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
    let client = portal_proto::client::Client::connect(&config.socket).await.unwrap();
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
