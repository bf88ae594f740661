//! The shim's connection to `portald`: connected lazily, started when
//! nothing answers, and re-established (restarting the daemon if needed)
//! when the daemon goes away mid-session, so one lost daemon never makes
//! every later call fail.

use std::future::Future;

use portal_proto::client::{Client, ClientError};
use portal_proto::launch::{LaunchOptions, connect_or_start};
use portal_proto::v1::portal_client::PortalClient;
use tokio::sync::Mutex;
use tonic::transport::Channel;

/// Why a call to the daemon failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The daemon could not be reached or started.
    Unreachable(ClientError),
    /// The daemon answered with an error.
    Status(tonic::Status),
    /// The daemon went away (a live upgrade, a crash) while a call that
    /// changes something was in flight: it may or may not have taken
    /// effect, so it is not repeated behind the caller's back.
    Interrupted(tonic::Status),
}

/// A lazily connected, self-healing link to the daemon.
pub(crate) struct DaemonLink {
    opts: LaunchOptions,
    client: Mutex<Option<Client>>,
}

impl DaemonLink {
    /// A link that connects on first use.
    pub(crate) fn new(opts: LaunchOptions) -> Self {
        Self { opts, client: Mutex::new(None) }
    }

    async fn rpc(&self, fresh: bool) -> Result<PortalClient<Channel>, ClientError> {
        let mut slot = self.client.lock().await;
        if fresh {
            *slot = None;
        }
        if let Some(c) = slot.as_ref() {
            return Ok(c.rpc());
        }
        let client = connect_or_start(&self.opts).await?;
        let rpc = client.rpc();
        *slot = Some(client);
        Ok(rpc)
    }

    /// Runs one call. If the daemon went away (UNAVAILABLE), reconnects,
    /// starting a new daemon if needed, and tries once more.
    pub(crate) async fn call<T, F, Fut>(&self, f: F) -> Result<T, CallError>
    where
        F: Fn(PortalClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let rpc = self.rpc(false).await.map_err(CallError::Unreachable)?;
        match f(rpc).await {
            Ok(r) => Ok(r.into_inner()),
            Err(s) if portal_proto::client::is_disconnect(&s) => {
                tracing::info!(status = %s.message(), "portald went away; reconnecting");
                let rpc = self.rpc(true).await.map_err(CallError::Unreachable)?;
                f(rpc).await.map(tonic::Response::into_inner).map_err(CallError::Status)
            }
            Err(s) => Err(CallError::Status(s)),
        }
    }

    /// Runs a call that changes something (types input, starts or signals
    /// a program). If the daemon went away before the call could be sent,
    /// reconnects and tries once more; if it went away with the call in
    /// flight, reconnects for the next call and reports
    /// [`CallError::Interrupted`]: repeating it could type the input twice.
    pub(crate) async fn call_once<T, F, Fut>(&self, f: F) -> Result<T, CallError>
    where
        F: Fn(PortalClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let rpc = self.rpc(false).await.map_err(CallError::Unreachable)?;
        match f(rpc).await {
            Ok(r) => Ok(r.into_inner()),
            Err(s) if portal_proto::client::is_disconnect(&s) => {
                tracing::info!(status = %s.message(), "portald went away; reconnecting");
                let rpc = self.rpc(true).await.map_err(CallError::Unreachable)?;
                if never_sent(&s) {
                    return f(rpc)
                        .await
                        .map(tonic::Response::into_inner)
                        .map_err(CallError::Status);
                }
                Err(CallError::Interrupted(s))
            }
            Err(s) => Err(CallError::Status(s)),
        }
    }
}

/// Whether a failed call provably did nothing (the connection could not be
/// made, or the daemon refused it as it went away), so repeating it cannot
/// repeat its effect.
fn never_sent(s: &tonic::Status) -> bool {
    if s.message().contains(portal_proto::client::NOTHING_DONE) {
        return true;
    }
    // A daemon shutting down gracefully answers every call it accepted and
    // refuses later streams on that connection (HTTP/2 GOAWAY, which tonic
    // reports as exactly this); a call still queued when its connection
    // closed was never written (hyper's "operation was canceled"). A call
    // written and then cut off reads a body error, a reset or "connection
    // closed before message completed" instead.
    if s.message() == "h2 protocol error: http2 error" {
        return true;
    }
    let chain = portal_proto::client::error_chain(s).to_ascii_lowercase();
    [
        "error trying to connect",
        "connection refused",
        "no such file or directory",
        "operation was canceled",
    ]
    .iter()
    .any(|k| chain.contains(k))
}
