//! `Search`: request validation and the answer on the wire.

use portal_proto::v1 as pb;

use super::convert::{self, InvalidRequest};
use crate::daemon::Daemon;
use tonic::Status;

use crate::error::DaemonError;
use crate::registry::ProcTarget;
use crate::search::{Answer, Order, Page, Query, Search};

/// Hits per page when the request does not say.
const DEFAULT_LIMIT: usize = 50;

/// Most hits per page: a page stays a few hundred KiB at most.
const MAX_LIMIT: usize = 1000;

/// Most context lines on each side of a hit.
const MAX_CONTEXT: usize = 20;

fn invalid(field: &str, reason: impl Into<String>) -> InvalidRequest {
    InvalidRequest { field: field.to_owned(), reason: reason.into() }
}

/// Checks a request and resolves its processes.
pub(crate) fn spec(daemon: &Daemon, req: &pb::SearchRequest) -> Result<Search, Status> {
    let regex = (!req.regex.is_empty()).then_some(req.regex.as_str());
    let query = Query::parse(&req.query, regex).map_err(|e| {
        let field =
            if matches!(e, crate::search::QueryError::BadRegex { .. }) { "regex" } else { "query" };
        invalid(field, e.to_string())
    })?;
    let mut procs = Vec::new();
    for r in &req.procs {
        let target: ProcTarget = convert::target(Some(r))?;
        procs.push(daemon.lookup(&target).map_err(DaemonError::from)?.id());
    }
    let mut streams = Vec::new();
    for s in &req.streams {
        let s = convert::stream(*s)?;
        if !streams.contains(&s) {
            streams.push(s);
        }
    }
    let limit = match usize::try_from(req.limit).unwrap_or(usize::MAX) {
        0 => DEFAULT_LIMIT,
        n if n > MAX_LIMIT => {
            return Err(invalid(
                "limit",
                format!("{n} is more than {MAX_LIMIT}; page with next_page"),
            )
            .into());
        }
        n => n,
    };
    let context = usize::try_from(req.context).unwrap_or(usize::MAX);
    if context > MAX_CONTEXT {
        return Err(invalid("context", format!("{context} lines is more than {MAX_CONTEXT}; read around a hit from its read_from offset instead")).into());
    }
    let page = if req.page.is_empty() {
        None
    } else {
        Some(Page::parse(&req.page).ok_or_else(|| {
            invalid("page", format!("{:?} is not a next_page of an earlier search", req.page))
        })?)
    };
    let bound = |v: i64| (v != 0).then_some(v);
    if let (Some(a), Some(b)) = (bound(req.since_ns), bound(req.until_ns))
        && a > b
    {
        return Err(invalid("until_ns", "is before since_ns").into());
    }
    Ok(Search {
        query,
        procs,
        streams,
        since_ns: bound(req.since_ns),
        until_ns: bound(req.until_ns),
        limit,
        context,
        order: if req.oldest_first { Order::Oldest } else { Order::Newest },
        page,
    })
}

/// The answer on the wire, with each hit's process name.
pub(crate) fn response(daemon: &Daemon, a: Answer) -> pb::SearchResponse {
    let mut names = std::collections::HashMap::new();
    let hits = a
        .found
        .hits
        .into_iter()
        .map(|h| {
            let proc_name = names
                .entry(h.proc)
                .or_insert_with(|| {
                    daemon
                        .lookup(&ProcTarget::Id(h.proc.0))
                        .ok()
                        .and_then(|p| p.facts.spec.name.clone())
                        .unwrap_or_default()
                })
                .clone();
            pb::SearchHit {
                proc_id: h.proc.0,
                proc_name,
                stream: convert::stream_pb(h.stream).into(),
                offset: h.offset,
                length: h.end - h.offset,
                ts_ns: h.ts_ns,
                line: h.text,
                before: h.before,
                after: h.after,
                read_from: h.read_from,
            }
        })
        .collect();
    pb::SearchResponse {
        hits,
        next_page: a.found.next.map(Page::token).unwrap_or_default(),
        unindexed_bytes: a.unindexed_bytes,
        out_of_time: a.found.out_of_time,
        index_error: a.index_error.unwrap_or_default(),
    }
}
