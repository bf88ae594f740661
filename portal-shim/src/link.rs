//! The shim's connection to `portald`: connected lazily, started when
//! nothing answers, and re-established (restarting the daemon if needed)
//! when the daemon goes away mid-session, so one lost daemon never makes
//! every later call fail.

use std::future::Future;

use portal_client::client::Client;
use portal_client::error::ClientError;
use portal_client::hosts::Target;
use portal_client::launch::LaunchOptions;
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
    /// This machine's portald, or another's over ssh.
    target: Target,
    opts: LaunchOptions,
    client: Mutex<Option<Client>>,
    /// When a call last got an answer: a link quiet for longer is checked
    /// before a call that changes something.
    last_answer: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long a link may have been quiet before a call that changes
/// something first checks that the daemon is still there: a daemon that
/// died meanwhile (a crash, an upgrade) is found by the check, which is
/// repeated freely, instead of by the call, which may not be. Calls in
/// quick succession skip it (a round trip each would cost the run's
/// latency a fifth).
const CHECK_AFTER_QUIET: std::time::Duration = std::time::Duration::from_millis(500);

impl DaemonLink {
    /// A link to `target` that connects on first use.
    pub(crate) fn new(target: Target, opts: LaunchOptions) -> Self {
        Self { target, opts, client: Mutex::new(None), last_answer: std::sync::Mutex::new(None) }
    }

    fn answered(&self) {
        *self.last_answer.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(std::time::Instant::now());
    }

    fn quiet(&self) -> bool {
        self.last_answer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none_or(|at| at.elapsed() > CHECK_AFTER_QUIET)
    }

    async fn rpc(&self, fresh: bool) -> Result<PortalClient<Channel>, ClientError> {
        let mut slot = self.client.lock().await;
        if fresh {
            *slot = None;
        }
        if let Some(c) = slot.as_ref() {
            return Ok(c.rpc());
        }
        // Connecting (and the channel's own reconnecting) says who this
        // shim writes for (`set_identity`).
        let client = Client::connect_to(&self.target, &self.opts).await?;
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
        self.call_retrying(f, |_| true).await
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
        if self.quiet() {
            self.call(|mut c| async move { c.get_info(portal_proto::v1::GetInfoRequest {}).await })
                .await?;
        }
        self.call_retrying(f, never_sent).await
    }

    /// Runs a call; after a disconnect, reconnects and repeats it if
    /// `repeat` allows, else reports it interrupted.
    async fn call_retrying<T, F, Fut>(
        &self,
        f: F,
        repeat: impl Fn(&tonic::Status) -> bool,
    ) -> Result<T, CallError>
    where
        F: Fn(PortalClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let rpc = self.rpc(false).await.map_err(CallError::Unreachable)?;
        let answer = match f(rpc).await {
            Ok(r) => Ok(r.into_inner()),
            Err(s) if portal_client::error::is_disconnect(&s) => {
                tracing::info!(status = %s.message(), "portald went away; reconnecting");
                let rpc = self.rpc(true).await.map_err(CallError::Unreachable)?;
                if !repeat(&s) {
                    return Err(CallError::Interrupted(s));
                }
                f(rpc).await.map(tonic::Response::into_inner).map_err(CallError::Status)
            }
            Err(s) => Err(CallError::Status(s)),
        };
        if !matches!(&answer, Err(CallError::Status(s)) if portal_client::error::is_disconnect(s)) {
            self.answered();
        }
        answer
    }
}

/// Whether a failed call provably did nothing (the connection could not be
/// made, or the daemon refused it as it went away), so repeating it cannot
/// repeat its effect.
fn never_sent(s: &tonic::Status) -> bool {
    if portal_proto::detail(s).nothing_done {
        return true;
    }
    // A daemon shutting down gracefully answers every call it accepted and
    // refuses later streams on that connection (HTTP/2 GOAWAY, which tonic
    // reports as exactly this); a call still queued when its connection
    // closed was never written (hyper's "operation was canceled"). Anything
    // else (a broken pipe, a reset, a body error) may have followed the
    // call's arrival; a daemon that died while the link was quiet is found
    // by the check before the call instead.
    if s.message() == "h2 protocol error: http2 error" {
        return true;
    }
    let chain = portal_client::error::error_chain(s).to_ascii_lowercase();
    [
        "error trying to connect",
        "connection refused",
        "no such file or directory",
        "operation was canceled",
    ]
    .iter()
    .any(|k| chain.contains(k))
}

#[cfg(test)]
mod tests {
    use portal_proto::v1::{ErrorDetail, ErrorKind};

    use super::never_sent;

    #[test]
    fn only_the_daemon_s_typed_verdict_says_nothing_was_done() {
        let refused = ErrorDetail { nothing_done: true, kind: ErrorKind::GoingAway.into() };
        let status = |d: &ErrorDetail| portal_proto::status(tonic::Code::Unavailable, "bye", d);
        assert!(never_sent(&status(&refused)));
        // A run cut after it typed: its input may have arrived.
        let typed = ErrorDetail { nothing_done: false, kind: ErrorKind::ResultPending.into() };
        assert!(!never_sent(&status(&typed)));
        // Words are not a verdict: a message that says so, without the
        // detail, may still have been carried out.
        assert!(!never_sent(&tonic::Status::unavailable("nothing was done: retry")));
    }
}
