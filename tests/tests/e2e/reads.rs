//! Reading history: cursors, server-side "read new" cursors, time windows,
//! tails with omission reports, clear, and follow streams.

use portal_proto::v1 as pb;
use portal_tests::*;

fn offset(c: &Option<pb::Cursor>, s: pb::Stream) -> u64 {
    c.as_ref().unwrap().offsets.iter().find(|o| o.stream() == s).map_or(0, |o| o.offset)
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

fn text(resp: &pb::ReadResponse) -> String {
    resp.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect()
}

#[tokio::test]
async fn server_cursors_return_only_new_output_per_stream() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p =
        start_pipes(&mut rpc, "sh", &["-c", "while read l; do echo out-$l; echo err-$l >&2; done"])
            .await;
    let read_new = |streams: Vec<pb::Stream>| pb::ReadRequest {
        proc: by_id(p.id),
        streams: streams.into_iter().map(Into::into).collect(),
        from: Some(pb::read_request::From::ServerCursor(true)),
        ..Default::default()
    };
    write(&mut rpc, p.id, b"1\n").await;
    // Two pipes, two reader threads: wait for both before reading.
    wait_for_text(&mut rpc, p.id, pb::Stream::Stderr, "err-1\n").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "out-1\n").await;
    let r = rpc.read(read_new(vec![pb::Stream::Stdout])).await.unwrap().into_inner();
    assert_eq!(text(&r), "out-1\n");
    // Reading stdout did not move the stderr cursor.
    let r = rpc.read(read_new(vec![pb::Stream::Stderr])).await.unwrap().into_inner();
    assert_eq!(text(&r), "err-1\n");
    let r = rpc.read(read_new(vec![])).await.unwrap().into_inner();
    assert!(r.records.is_empty());
    write(&mut rpc, p.id, b"2\n").await;
    // Two pipes, two reader threads: wait for both before reading.
    wait_for_text(&mut rpc, p.id, pb::Stream::Stderr, "err-2\n").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "out-2\n").await;
    // A window read does not move the cursors.
    let window = pb::ReadRequest {
        proc: by_id(p.id),
        from: Some(pb::read_request::From::LastNs(60_000_000_000)),
        ..Default::default()
    };
    // Two pipes carry no order between them: compare as sets of lines.
    let r = rpc.read(window).await.unwrap().into_inner();
    assert_eq!(sorted_lines(&text(&r)), ["err-1", "err-2", "out-1", "out-2"]);
    let r = rpc.read(read_new(vec![])).await.unwrap().into_inner();
    assert_eq!(sorted_lines(&text(&r)), ["err-2", "out-2"]);
    // Clear resets: only what arrives after it is new.
    rpc.clear(pb::ClearRequest { proc: by_id(p.id) }).await.unwrap();
    let all = rpc
        .read(pb::ReadRequest { proc: by_id(p.id), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(all.records.is_empty());
    assert_eq!(offset(&all.history_start, pb::Stream::Stdout), 12);
    write(&mut rpc, p.id, b"3\n").await;
    // Two pipes, two reader threads: wait for both before reading.
    wait_for_text(&mut rpc, p.id, pb::Stream::Stderr, "err-3\n").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "out-3\n").await;
    let r = rpc.read(read_new(vec![])).await.unwrap().into_inner();
    assert_eq!(sorted_lines(&text(&r)), ["err-3", "out-3"]);
    d.stop().await;
}

#[tokio::test]
async fn client_cursors_page_forward_and_tails_report_what_was_left_out() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "seq", &["1", "1000"]).await;
    wait_exit(&mut rpc, p.id).await;
    let total = 3893u64; // Bytes of `seq 1 1000`.
    let page = |cursor: Option<pb::Cursor>| pb::ReadRequest {
        proc: by_id(p.id),
        streams: vec![pb::Stream::Stdout.into()],
        from: cursor.map(pb::read_request::From::Cursor),
        max_bytes: 1000,
        ..Default::default()
    };
    let mut got = String::new();
    let mut cursor = None;
    for _ in 0..10 {
        let r = rpc.read(page(cursor.clone())).await.unwrap().into_inner();
        got.push_str(&text(&r));
        if offset(&r.next, pb::Stream::Stdout) == total {
            assert_eq!(r.omitted_bytes, 0);
            break;
        }
        assert_eq!(r.omitted_bytes, total - offset(&r.next, pb::Stream::Stdout));
        cursor = r.next;
    }
    assert_eq!(got, (1..=1000).map(|i| format!("{i}\n")).collect::<String>());
    let tail = pb::ReadRequest {
        proc: by_id(p.id),
        from: Some(pb::read_request::From::Tail(true)),
        max_bytes: 8,
        ..Default::default()
    };
    let r = rpc.read(tail).await.unwrap().into_inner();
    // Pages that had to be cut start on a line boundary.
    assert_eq!(text(&r), "1000\n");
    // The server-cursor read keeps the newest part and says where the rest is.
    let r = rpc
        .read(pb::ReadRequest {
            proc: by_id(p.id),
            from: Some(pb::read_request::From::ServerCursor(true)),
            max_bytes: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(text(&r), "999\n1000\n");
    assert_eq!(r.omitted_bytes, total - 9);
    assert_eq!(offset(&r.omitted_from, pb::Stream::Stdout), 0);
    assert_eq!(offset(&r.next, pb::Stream::Stdout), total);
    // A cursor past the end is out of range.
    let mut past = pb::Cursor::default();
    past.offsets.push(pb::StreamOffset { stream: pb::Stream::Stdout.into(), offset: total + 1 });
    let err = rpc.read(page(Some(past))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::OutOfRange);
    d.stop().await;
}

#[tokio::test]
async fn follow_delivers_every_byte_once_then_the_exit() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "seq 1 50000; sleep 0.1; seq 50001 100000"]).await;
    let (seen, ended) =
        follow_until(&mut rpc, p.id, pb::Stream::Stdout, "follow to the end", |_| false).await;
    let ended = ended.expect("exit event");
    assert_eq!(ended.exit_code, Some(0));
    let want: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(String::from_utf8(seen).unwrap(), want);
    d.stop().await;
}

#[tokio::test]
async fn raw_reads_keep_escape_sequences() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "printf", &["\\033[31m50%%\\033[0m\\r100%%\\n"]).await;
    wait_exit(&mut rpc, p.id).await;
    assert_eq!(
        read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await,
        b"\x1b[31m50%\x1b[0m\r100%\n"
    );
    assert_eq!(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await, b"100%\n");
    d.stop().await;
}

#[tokio::test]
async fn pages_end_on_line_boundaries_and_the_cursor_continues_exactly() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "seq", &["1", "1000"]).await;
    wait_exit(&mut rpc, p.id).await;
    let expected: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    let mut got = String::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let req = pb::ReadRequest {
            proc: by_id(p.id),
            streams: vec![pb::Stream::Stdout.into()],
            from: Some(pb::read_request::From::Cursor(cursor.clone().unwrap_or(pb::Cursor {
                offsets: vec![pb::StreamOffset { stream: pb::Stream::Stdout.into(), offset: 0 }],
            }))),
            max_bytes: 100,
            ..Default::default()
        };
        let r = rpc.read(req).await.unwrap().into_inner();
        let page = text(&r);
        if page.is_empty() {
            break;
        }
        assert!(page.ends_with('\n'), "page {pages} splits a line: {page:?}");
        got.push_str(&page);
        cursor = r.next;
        pages += 1;
    }
    assert_eq!(got, expected, "every byte exactly once across {pages} pages");
    // The newest page (tail) starts on a line boundary too.
    let req = pb::ReadRequest {
        proc: by_id(p.id),
        streams: vec![pb::Stream::Stdout.into()],
        from: Some(pb::read_request::From::Tail(true)),
        max_bytes: 100,
        ..Default::default()
    };
    let tail = text(&rpc.read(req).await.unwrap().into_inner());
    assert!(
        expected.ends_with(&tail) && tail.lines().next().unwrap().parse::<u32>().unwrap() > 900,
        "{tail:?}"
    );
    assert!(expected.contains(&format!("\n{tail}")), "the tail starts mid-line: {tail:?}");
}

#[tokio::test]
async fn typed_input_reads_back_one_line_per_enter() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    for part in [&b"print(x)"[..], b"\r", b"input(\"name? \")\r", b"done\r\n"] {
        write(&mut rpc, p.id, part).await;
    }
    let typed = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Text).await;
    assert_eq!(String::from_utf8_lossy(&typed), "print(x)\ninput(\"name? \")\ndone\n");
}
