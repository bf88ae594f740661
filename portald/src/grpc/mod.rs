//! The gRPC service: one short function per rpc that converts the request,
//! calls the [`Daemon`], and converts the answer. No decisions are made here.
//!
//! Activity: every rpc that names a process (all but GetInfo, List, KillAll,
//! the registry and Shutdown) counts as client activity for its idle timeout.

pub(crate) mod agents;
pub(crate) mod attach;
pub(crate) mod auth;
pub(crate) mod clients;
pub(crate) mod convert;
pub(crate) mod decode;
mod handover;
pub(crate) mod search;
pub(crate) mod status;

use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_server::Portal;
use tonic::{Request, Response, Status};

use crate::daemon::Daemon;
use crate::error::DaemonError;
use crate::proc::{INPUT_ORIGIN, signal};
use crate::reads::{self, FollowItem};
use crate::waits;

/// The service, holding the daemon.
#[derive(Clone)]
pub(crate) struct PortalService {
    daemon: Arc<Daemon>,
    /// Who each client is, for the input it writes.
    clients: Arc<clients::Clients>,
}

impl PortalService {
    /// Wraps the daemon.
    pub(crate) fn new(daemon: Arc<Daemon>) -> Self {
        Self { daemon, clients: Arc::default() }
    }

    /// `Write`, inside the caller's [`INPUT_ORIGIN`].
    async fn write_as(&self, req: pb::WriteRequest) -> Reply<pb::WriteResponse> {
        let handle = self.daemon.get(&convert::target(req.proc.as_ref())?)?;
        if req.data.len() > portal_proto::MAX_WRITE_BYTES {
            return Err(convert::InvalidRequest {
                field: "data".into(),
                reason: format!(
                    "is {} bytes; split writes above {} bytes",
                    req.data.len(),
                    portal_proto::MAX_WRITE_BYTES
                ),
            }
            .into());
        }
        let written = req.data.len() as u64;
        let data: Bytes = req.data;
        let stdin_offset =
            if req.secret { handle.write_secret(data).await? } else { handle.write(data).await? };
        ok(pb::WriteResponse { written, stdin_offset })
    }
}

type Reply<T> = Result<Response<T>, Status>;

fn ok<T>(v: T) -> Reply<T> {
    Ok(Response::new(v))
}

#[tonic::async_trait]
impl Portal for PortalService {
    async fn get_info(&self, _: Request<pb::GetInfoRequest>) -> Reply<pb::GetInfoResponse> {
        let info = self.daemon.info();
        let health = info.log;
        let (upgraded_from, upgrade_error) = crate::upgrade::last_upgrade();
        ok(pb::GetInfoResponse {
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: portal_proto::PROTOCOL_VERSION,
            pid: std::process::id(),
            socket: info.socket.to_string_lossy().into_owned(),
            database: info.database.to_string_lossy().into_owned(),
            started_at_ns: info.started_at_ns,
            uptime_ms: u64::try_from(info.uptime.as_millis()).unwrap_or(u64::MAX),
            processes: u32::try_from(info.processes).unwrap_or(u32::MAX),
            running: u32::try_from(info.running).unwrap_or(u32::MAX),
            log_bytes: health.retained,
            log_limit_per_process: info.log_limits.0,
            log_limit_total: info.log_limits.1,
            log_bytes_trimmed: health.trimmed,
            log_bytes_dropped: health.dropped,
            storage_error: health.error.unwrap_or_default(),
            upgraded_from: upgraded_from.unwrap_or_default(),
            upgrade_error: upgrade_error.unwrap_or_default(),
        })
    }

    async fn start(&self, req: Request<pb::StartRequest>) -> Reply<pb::Process> {
        let req = req.into_inner();
        let replace_ended = req.replace_ended;
        // Checking the working directory stats the filesystem, which may
        // block (a network mount): not on a runtime worker.
        let spec = tokio::task::spawn_blocking(move || convert::start_spec(req))
            .await
            .map_err(|e| DaemonError::task("checking the start request", &e))??;
        let handle = self.daemon.start(spec, replace_ended).await?;
        ok(convert::process_pb(&handle, None))
    }

    async fn list(&self, _: Request<pb::ListRequest>) -> Reply<pb::ListResponse> {
        self.daemon.durable().await;
        let processes = self.daemon.list().iter().map(|h| convert::process_pb(h, None)).collect();
        ok(pb::ListResponse { processes })
    }

    async fn inspect(&self, req: Request<pb::InspectRequest>) -> Reply<pb::Process> {
        let handle = self.daemon.get(&convert::target(req.get_ref().proc.as_ref())?)?;
        self.daemon.durable().await;
        let fresh = handle.input_state().await;
        let mut process = convert::process_pb(&handle, fresh);
        // Holes are rare and counting them reads the process's chunk
        // index, so only Inspect asks (List stays a memory read).
        let id = handle.id();
        let spans: Vec<_> = process
            .streams
            .iter()
            .filter_map(|s| Some((convert::stream(s.stream).ok()?, s.start_offset)))
            .collect();
        let stored = self.daemon.stored_bytes(id, spans).await.map_err(DaemonError::from)?;
        // A running program's newest output may not be committed yet: only
        // what lies below the last stored byte counts. An ended one's end
        // is committed, so a hole at its very end counts too.
        let ended = process.status != pb::Status::Running as i32;
        for (s, (kept, logged_end)) in process.streams.iter_mut().zip(stored) {
            let end = if ended { s.end_offset } else { logged_end.min(s.end_offset) };
            s.lost_bytes = end.saturating_sub(s.start_offset).saturating_sub(kept);
        }
        ok(process)
    }

    async fn read(&self, req: Request<pb::ReadRequest>) -> Reply<pb::ReadResponse> {
        let req = req.into_inner();
        let target = convert::target(req.proc.as_ref())?;
        let spec = convert::read_spec(&req)?;
        let handle = self.daemon.get(&target)?;
        let result = self.daemon.read(&handle, spec).await?;
        ok(convert::read_pb(result))
    }

    async fn resizes(&self, req: Request<pb::ResizesRequest>) -> Reply<pb::ResizesResponse> {
        let handle = self.daemon.get(&convert::target(req.get_ref().proc.as_ref())?)?;
        let id = handle.id();
        let rows = self.daemon.resizes(id).await.map_err(DaemonError::from)?;
        let size =
            |s: crate::domain::TermSize| pb::TermSize { rows: s.rows.into(), cols: s.cols.into() };
        let resizes = rows
            .into_iter()
            .map(|r| pb::Resize { ts_ns: r.at_ns, from: Some(size(r.from)), to: Some(size(r.to)) })
            .collect();
        ok(pb::ResizesResponse { resizes })
    }

    async fn search(&self, req: Request<pb::SearchRequest>) -> Reply<pb::SearchResponse> {
        let spec = search::spec(&self.daemon, req.get_ref())?;
        let answer = self.daemon.search(spec).await.map_err(DaemonError::from)?;
        ok(search::response(&self.daemon, answer))
    }

    async fn identify(&self, req: Request<pb::IdentifyRequest>) -> Reply<pb::IdentifyResponse> {
        self.clients.identify(&req)?;
        ok(pb::IdentifyResponse {})
    }

    async fn write(&self, req: Request<pb::WriteRequest>) -> Reply<pb::WriteResponse> {
        let origin = self.clients.origin(&req);
        INPUT_ORIGIN.scope(origin, self.write_as(req.into_inner())).await
    }

    async fn close_stdin(
        &self,
        req: Request<pb::CloseStdinRequest>,
    ) -> Reply<pb::CloseStdinResponse> {
        let handle = self.daemon.get(&convert::target(req.get_ref().proc.as_ref())?)?;
        handle.close_stdin().await?;
        ok(pb::CloseStdinResponse {})
    }

    async fn signal(&self, req: Request<pb::SignalRequest>) -> Reply<pb::SignalResponse> {
        let req = req.into_inner();
        let target = convert::target(req.proc.as_ref())?;
        let sig = signal::parse(&req.signal).map_err(|e| convert::InvalidRequest {
            field: "signal".into(),
            reason: e.to_string(),
        })?;
        let handle = self.daemon.get(&target)?;
        handle.signal(sig).await?;
        ok(pb::SignalResponse { signal: sig, name: signal::name(sig) })
    }

    async fn kill(&self, req: Request<pb::KillRequest>) -> Reply<pb::Process> {
        let handle = self.daemon.kill(&convert::target(req.get_ref().proc.as_ref())?).await?;
        ok(convert::process_pb(&handle, None))
    }

    async fn kill_all(&self, _: Request<pb::KillAllRequest>) -> Reply<pb::KillAllResponse> {
        let killed = self.daemon.kill_all().await?.into_iter().map(|id| id.0).collect();
        ok(pb::KillAllResponse { killed })
    }

    async fn clear(&self, req: Request<pb::ClearRequest>) -> Reply<pb::ClearResponse> {
        let handle = self.daemon.get(&convert::target(req.get_ref().proc.as_ref())?)?;
        let starts = handle.clear().await?;
        let all = crate::proc::StreamId::ALL;
        ok(pb::ClearResponse { history_start: Some(convert::cursor_pb(&all, starts)) })
    }

    async fn cleanup(&self, req: Request<pb::CleanupRequest>) -> Reply<pb::CleanupResponse> {
        let id = self.daemon.cleanup(&convert::target(req.get_ref().proc.as_ref())?).await?;
        ok(pb::CleanupResponse { id: id.0 })
    }

    async fn screen(&self, req: Request<pb::ScreenRequest>) -> Reply<pb::ScreenSnapshot> {
        let req = req.into_inner();
        let handle = self.daemon.get(&convert::target(req.proc.as_ref())?)?;
        let current = handle.published().size;
        if let (Some(resize), Some(current)) = (req.resize.as_ref(), current) {
            let size = convert::term_size("resize", Some(resize), current)?;
            if size != current {
                handle.resize(size).await?;
            }
        }
        let snap = handle.snapshot().await?;
        ok(convert::snapshot_pb(&handle, snap))
    }

    type FollowStream = Pin<Box<dyn Stream<Item = Result<pb::FollowEvent, Status>> + Send>>;

    async fn follow(&self, req: Request<pb::FollowRequest>) -> Reply<Self::FollowStream> {
        let req = req.into_inner();
        let target = convert::target(req.proc.as_ref())?;
        let streams = convert::streams(&req.streams)?;
        let from = convert::follow_from(&req)?;
        let text = convert::follow_text(&req)?;
        let handle = self.daemon.get(&target)?;
        let rx = self.daemon.follow(handle.clone(), streams, from);
        let events = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut rendering = text.then(reads::TextFollow::default);
        let stream = futures::StreamExt::map(events, move |item| {
            let event = match item? {
                FollowItem::Output(r) => {
                    let r = match rendering.as_mut() {
                        Some(t) => t.render(r),
                        None => r,
                    };
                    pb::follow_event::Event::Output(convert::record_pb(r))
                }
                FollowItem::Gap { stream, offset, length } => {
                    pb::follow_event::Event::Gap(pb::Record {
                        stream: convert::stream_pb(stream).into(),
                        offset,
                        length,
                        ts_ns: 0,
                        data: Bytes::new(),
                        origin: String::new(),
                    })
                }
                FollowItem::Ended => {
                    pb::follow_event::Event::Exited(convert::process_pb(&handle, None))
                }
            };
            Ok(pb::FollowEvent { event: Some(event) })
        });
        // A follow cut by a live upgrade says so (see `handover::end`).
        let stream = futures::StreamExt::chain(stream, handover::end(Arc::clone(&self.daemon)));
        ok(Box::pin(stream))
    }

    type ChangesStream = Pin<Box<dyn Stream<Item = Result<pb::ChangesEvent, Status>> + Send>>;

    async fn changes(&self, req: Request<pb::ChangesRequest>) -> Reply<Self::ChangesStream> {
        let interval = match req.into_inner().min_interval_ms {
            0 => crate::changes::DEFAULT_INTERVAL,
            ms => std::time::Duration::from_millis(ms),
        };
        let rx = crate::changes::follow(Arc::clone(&self.daemon), interval);
        let batches = tokio_stream::wrappers::ReceiverStream::new(rx);
        let stream = futures::StreamExt::map(batches, |b| {
            Ok(pb::ChangesEvent {
                initial: b.initial,
                ids: b.ids.into_iter().map(|id| id.0).collect(),
                agents: b.agents,
            })
        });
        // Cut by a live upgrade: says so, and the client follows again.
        let stream = futures::StreamExt::chain(stream, handover::end(Arc::clone(&self.daemon)));
        ok(Box::pin(stream))
    }

    type AttachStream = attach::AttachStream;

    async fn attach(
        &self,
        req: Request<tonic::Streaming<pb::AttachRequest>>,
    ) -> Reply<Self::AttachStream> {
        let origin = self.clients.origin(&req);
        ok(attach::attach(Arc::clone(&self.daemon), req.into_inner(), origin).await?)
    }

    async fn wait(&self, req: Request<pb::WaitRequest>) -> Reply<pb::WaitResponse> {
        let req = req.into_inner();
        let target = convert::target(req.proc.as_ref())?;
        let d = &self.daemon;
        let spec = convert::wait_spec(
            &req.streams,
            req.from.as_ref(),
            req.until.as_ref(),
            d.wait_ceiling(),
        )?;
        let handle = d.get(&target)?;
        ok(convert::wait_pb(d.wait(&handle, spec).await?))
    }

    async fn run(&self, req: Request<pb::RunRequest>) -> Reply<pb::WaitResponse> {
        let origin = self.clients.origin(&req);
        let req = req.into_inner();
        let target = convert::target(req.proc.as_ref())?;
        let d = &self.daemon;
        let spec = convert::wait_spec(&[], None, req.until.as_ref(), d.wait_ceiling())?;
        let handle = d.get(&target)?;
        let run = d.run(&handle, spec, &req.input, !req.no_enter);
        ok(convert::wait_pb(INPUT_ORIGIN.scope(origin, run).await?))
    }

    async fn send_keys(&self, req: Request<pb::SendKeysRequest>) -> Reply<pb::SendKeysResponse> {
        let origin = self.clients.origin(&req);
        let req = req.into_inner();
        let target = convert::target(req.proc.as_ref())?;
        let items = convert::key_items(&req.keys)?;
        let handle = self.daemon.get(&target)?;
        let sent = INPUT_ORIGIN.scope(origin, waits::send_keys(&handle, &items)).await;
        ok(pb::SendKeysResponse { written: sent? })
    }

    async fn agent_list(&self, req: Request<pb::AgentListRequest>) -> Reply<pb::AgentListResponse> {
        ok(agents::list(&self.daemon, req.get_ref())?)
    }

    async fn agent_watch(
        &self,
        req: Request<pb::AgentWatchRequest>,
    ) -> Reply<pb::AgentWatchResponse> {
        ok(agents::watch(&self.daemon, req.into_inner()).await?)
    }

    async fn agent_wait(&self, req: Request<pb::AgentWaitRequest>) -> Reply<pb::AgentWaitResponse> {
        ok(agents::wait(&self.daemon, req.into_inner()).await?)
    }

    async fn agent_send(&self, req: Request<pb::AgentSendRequest>) -> Reply<pb::AgentSendResponse> {
        let origin = self.clients.origin(&req);
        ok(agents::send(&self.daemon, req.into_inner(), origin).await?)
    }

    async fn emit(&self, req: Request<pb::EmitRequest>) -> Reply<pb::EmitResponse> {
        ok(agents::emit(&self.daemon, req.into_inner())?)
    }

    async fn agent_hooks(
        &self,
        req: Request<pb::AgentHooksRequest>,
    ) -> Reply<pb::AgentHooksResponse> {
        // Reading, writing and syncing settings files: not on a runtime worker.
        let req = req.into_inner();
        let report = tokio::task::spawn_blocking(move || agents::hooks(&req))
            .await
            .map_err(|e| DaemonError::task("editing agent hooks", &e))??;
        ok(report)
    }

    async fn program_query(&self, req: Request<pb::ProgramQueryRequest>) -> Reply<pb::Program> {
        let program = convert::canonical_program("program", &req.get_ref().program)?;
        let row = self.daemon.program_query(program.clone()).await?;
        ok(convert::program_pb(program, row))
    }

    async fn program_record(&self, req: Request<pb::ProgramRecordRequest>) -> Reply<pb::Program> {
        let req = req.into_inner();
        let program = convert::canonical_program("program", &req.program)?;
        if let Some(notes) = &req.notes
            && notes.contains('\0')
        {
            return Err(convert::InvalidRequest {
                field: "notes".into(),
                reason: "contains a NUL byte".into(),
            }
            .into());
        }
        let row = self.daemon.program_record(program.clone(), req.needs_pty, req.notes).await?;
        ok(convert::program_pb(program, Some(row)))
    }

    async fn upgrade(&self, req: Request<pb::UpgradeRequest>) -> Reply<pb::UpgradeResponse> {
        let req = req.into_inner();
        let binary = (!req.binary.is_empty()).then(|| std::path::PathBuf::from(req.binary));
        tracing::info!(binary = ?binary, "live upgrade requested by a client");
        let accepted = self.daemon.upgrade(binary).await?;
        ok(pb::UpgradeResponse {
            from_version: env!("CARGO_PKG_VERSION").into(),
            to_version: accepted.to_version,
            binary: accepted.binary.to_string_lossy().into_owned(),
            running: u32::try_from(accepted.running).unwrap_or(u32::MAX),
            pid: std::process::id(),
        })
    }

    async fn shutdown(&self, _: Request<pb::ShutdownRequest>) -> Reply<pb::ShutdownResponse> {
        tracing::info!("shutdown requested by a client");
        self.daemon.stop();
        ok(pb::ShutdownResponse {})
    }
}
