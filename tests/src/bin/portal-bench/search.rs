//! Section 12: search over 1 GB of log lines, capture and indexing
//! throughput, the index's size, and the latency of searches.

use std::time::{Duration, Instant};

use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use tonic::transport::Channel;

use crate::Sizes;
use crate::harness::{Daemon, by_id, out_bytes, start_request, wait_end};
use crate::report::{Row, Target, mb, ms, percentile, row};

/// A shell command printing `bytes` of log lines like a web service's
/// (about 90 bytes each: time, request id, user, method, path, status,
/// latency), with the word `needle` on one line in the middle.
fn log_lines_command(bytes: u64) -> Vec<String> {
    let lines = bytes / 90;
    let script = format!(
        "awk 'BEGIN {{ m = split(\"GET POST PUT DELETE\", verb, \" \"); \
          for (i = 0; ; i++) {{ \
            if (i == {half}) print \"2026-12-02T10:00:00Z fatal needle in the haystack at request\", i; \
            printf \"2026-12-02T10:%02d:%02dZ req=%08x user=u%d %s /api/items/%d status=%d took=%dms\\n\", \
              (i / 60) % 60, i % 60, i * 2654435761 % 4294967296, i % 9973, verb[i % m + 1], i % 100003, \
              (i % 97 == 0) ? 503 : 200, i % 250 }} }}' | head -c {bytes}",
        half = lines / 2,
    );
    vec!["sh".into(), "-c".into(), script]
}

/// Searches `query` until the index has every byte; returns the response.
async fn search_indexed(
    rpc: &mut PortalClient<Channel>,
    req: pb::SearchRequest,
) -> anyhow::Result<pb::SearchResponse> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let r = rpc.search(req.clone()).await?.into_inner();
        anyhow::ensure!(r.index_error.is_empty(), "indexing failed: {}", r.index_error);
        if r.unindexed_bytes == 0 {
            return Ok(r);
        }
        anyhow::ensure!(Instant::now() < deadline, "the index did not catch up in 10 minutes");
    }
}

pub(super) async fn search(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let argv = log_lines_command(sizes.search_bytes);
    let start = Instant::now();
    let p = rpc.start(start_request(&argv, false)).await?.into_inner();
    let end = wait_end(&mut rpc, p.id).await?;
    // Every byte committed (a read passes the flush barrier).
    rpc.read(pb::ReadRequest {
        proc: by_id(p.id),
        from: Some(pb::read_request::From::Tail(true)),
        max_bytes: 1,
        ..Default::default()
    })
    .await?;
    let captured = start.elapsed();
    let stored = out_bytes(&end);
    let rare = pb::SearchRequest { query: "needle".into(), ..Default::default() };
    let found = search_indexed(&mut rpc, rare.clone()).await?;
    let indexed = start.elapsed();
    anyhow::ensure!(found.hits.len() == 1, "the rare word: {} hits", found.hits.len());
    let mut r = row(
        "search: capture of log lines (pipes)",
        mb(stored) / captured.as_secs_f64(),
        None,
        "MB/s",
        None,
    );
    r.note = format!("{} MB of ~90-byte lines, indexing alongside", stored / 1_000_000);
    rows.push(r);
    let mut r = row(
        "search: indexing, start to every byte indexed",
        mb(stored) / indexed.as_secs_f64(),
        None,
        "MB/s",
        None,
    );
    r.note = format!("{:.1} s after the capture ended", (indexed - captured).as_secs_f64());
    rows.push(r);
    let data = d.dir.path().join("data");
    let size = |names: &[&str]| -> u64 {
        names.iter().map(|f| std::fs::metadata(data.join(f)).map_or(0, |m| m.len())).sum()
    };
    let index = size(&["portal.search.db", "portal.search.db-wal"]);
    #[allow(clippy::cast_precision_loss, reason = "a ratio for display")]
    let mut r = row(
        "search: index size per byte of log",
        index as f64 / stored.max(1) as f64,
        None,
        "×",
        None,
    );
    r.note = format!("{index} bytes of index");
    rows.push(r);
    let cases = [
        ("search: a rare word over the log", rare),
        (
            "search: a word on every line, newest 20",
            pb::SearchRequest { query: "status".into(), limit: 20, ..Default::default() },
        ),
        (
            "search: a phrase, newest 20",
            pb::SearchRequest { query: "\"status 503\"".into(), limit: 20, ..Default::default() },
        ),
        (
            "search: a word and a regex, newest 20",
            pb::SearchRequest {
                query: "delete".into(),
                regex: r"took=24\dms".into(),
                limit: 20,
                ..Default::default()
            },
        ),
    ];
    for (name, req) in cases {
        let mut times = Vec::with_capacity(sizes.search_tries);
        let mut hits = 0;
        for _ in 0..sizes.search_tries {
            let t = Instant::now();
            let r = rpc.search(req.clone()).await?.into_inner();
            times.push(ms(t.elapsed()));
            hits = r.hits.len();
            anyhow::ensure!(hits > 0, "{name}: nothing found");
        }
        times.sort_by(f64::total_cmp);
        let mut r = row(name, percentile(&times, 0.5), None, "ms", Some(Target::Max(250.0)));
        r.note = format!(
            "median of {}; {hits} hits; p95 {:.1} ms",
            sizes.search_tries,
            percentile(&times, 0.95)
        );
        rows.push(r);
    }
    d.stop().await
}
