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
}
