//! Waiting on several processes at once, for `portal-cli wait` and the
//! shim's `process_wait`: one daemon Wait per process, all under the same
//! conditions, ended when the first of them ends (`any`) or once every one
//! has (`all`).
//!
//! The daemon's Wait is per process and cancel-safe: when `any` is
//! satisfied, the waits still pending are dropped, which touches neither
//! their processes nor their "read new" positions (a wait moves that
//! position only when it returns), so their output is still there for the
//! next read or wait. (A wait that ended in the daemon in the same instant
//! as the one that ended the call, but whose answer had not arrived, has
//! moved its position: that output stays readable with a cursor or a time
//! window, as all output does.)

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use tonic::transport::Channel;

use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;

type Rpc = PortalClient<Channel>;

/// When a wait on several processes ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// When the first process's wait ends for a reason other than its
    /// timeout (the default).
    #[default]
    Any,
    /// When every process's wait has ended.
    All,
}

/// One process's part of a wait on several.
#[derive(Clone, Debug)]
pub struct Waited {
    /// Its id.
    pub id: u64,
    /// Its name (empty when it has none).
    pub name: String,
    /// How its wait ended; `None` when it was still waiting as another one
    /// ended the call (`any`).
    pub response: Option<pb::WaitResponse>,
}

/// The outcome of a wait on several processes.
#[derive(Clone, Debug)]
pub struct WaitedMany {
    /// One per process, in the order given (a process named twice once).
    pub results: Vec<Waited>,
    /// The process whose wait ended the call (`any`), by its index in
    /// `results`; `None` when every wait ran to its timeout, or with `all`.
    pub ended_by: Option<usize>,
}

/// Waits on the processes `procs` (ids or names) until `until` holds for
/// the first of them (`any`) or for each (`all`), each from its own "read
/// new" position. An unknown process is an error before anything waits.
///
/// # Errors
///
/// The daemon's refusal of a process (not found) or of the conditions, or
/// a lost connection.
pub async fn wait_many(
    rpc: &Rpc,
    procs: &[pb::ProcRef],
    streams: &[pb::Stream],
    until: &pb::WaitCondition,
    mode: Mode,
) -> Result<WaitedMany, tonic::Status> {
    let found =
        futures_util::future::join_all(procs.iter().map(|p| {
            let mut rpc = rpc.clone();
            let proc = Some(p.clone());
            async move {
                rpc.inspect(pb::InspectRequest { proc }).await.map(tonic::Response::into_inner)
            }
        }))
        .await;
    let mut results: Vec<Waited> = Vec::with_capacity(found.len());
    for p in found {
        let p = p?;
        if results.iter().all(|w| w.id != p.id) {
            results.push(Waited { id: p.id, name: p.name, response: None });
        }
    }
    let streams: Vec<i32> = streams.iter().map(|s| (*s).into()).collect();
    let mut pending: FuturesUnordered<_> = results
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let mut rpc = rpc.clone();
            let req = pb::WaitRequest {
                proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(w.id)) }),
                streams: streams.clone(),
                from: None,
                until: Some(until.clone()),
            };
            async move { (i, rpc.wait(req).await.map(tonic::Response::into_inner)) }
        })
        .collect();
    let mut ended_by = None;
    while let Some((i, r)) = pending.next().await {
        let r = r?;
        let ended = r.reason() != pb::WaitReason::Timeout;
        results[i].response = Some(r);
        if mode == Mode::Any && ended {
            ended_by = Some(i);
            break;
        }
    }
    // Waits that ended together with the first are reported as they
    // ended; the rest are dropped, which cancels them in the daemon.
    if ended_by.is_some() {
        while let Some(Some((i, r))) = futures_util::FutureExt::now_or_never(pending.next()) {
            results[i].response = Some(r?);
        }
    }
    Ok(WaitedMany { results, ended_by })
}
