//! `process_search`: lines found by their words across every process's
//! output and input, each with the cursor `process_read` takes to read
//! around it.

use std::time::{Duration, SystemTime};

use portal_proto::v1 as pb;

use super::{Progress, Reply, Shim, by_id};
use crate::args::{SearchArgs, SearchSource};
use crate::results::{self, SearchHit, Searched};

/// Hits per call: enough to see a pattern, few enough to read at a glance
/// (next_page gives more).
const PAGE_HITS: u32 = 20;

impl Shim {
    pub(super) async fn search(&self, a: SearchArgs, _: Progress) -> Reply<Searched> {
        let streams: &[pb::Stream] = match a.source {
            SearchSource::All => &[],
            SearchSource::Output => &[pb::Stream::Stdout, pb::Stream::Stderr],
            SearchSource::Stdout => &[pb::Stream::Stdout],
            SearchSource::Stderr => &[pb::Stream::Stderr],
            SearchSource::Stdin => &[pb::Stream::Stdin],
        };
        let since_ns = a.since_s.map_or(0, |s| {
            let at = SystemTime::now().checked_sub(Duration::from_secs(s));
            at.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX).max(1))
        });
        let req = pb::SearchRequest {
            query: a.query.clone(),
            regex: a.regex.unwrap_or_default(),
            procs: a.id.and_then(by_id).into_iter().collect(),
            streams: streams.iter().map(|s| (*s).into()).collect(),
            since_ns,
            until_ns: 0,
            limit: PAGE_HITS,
            context: 0,
            oldest_first: false,
            page: a.page.unwrap_or_default(),
        };
        let r = self
            .call(a.id, |mut c| {
                let req = req.clone();
                async move { c.search(req).await }
            })
            .await?;
        let hits = r
            .hits
            .iter()
            .map(|h| {
                let source = portal_client::vocab::Stream::of(h.stream).as_str();
                let at = SystemTime::UNIX_EPOCH
                    + Duration::from_nanos(u64::try_from(h.ts_ns).unwrap_or(0));
                SearchHit {
                    id: h.proc_id,
                    name: h.proc_name.clone(),
                    source: source.to_owned(),
                    time: humantime::format_rfc3339_seconds(at).to_string(),
                    line: h.line.clone(),
                    cursor: format!("{source}:{}", h.read_from),
                }
            })
            .collect();
        let found = Searched {
            hits,
            next_page: (!r.next_page.is_empty()).then_some(r.next_page),
            unindexed_bytes: r.unindexed_bytes,
            out_of_time: r.out_of_time,
            index_error: (!r.index_error.is_empty()).then_some(r.index_error),
        };
        Ok((results::search_text(&found, &a.query), found))
    }
}
