//! How a stream cut by a live upgrade ends: with UNAVAILABLE and a message
//! saying so, so the client reconnects to the next daemon and continues
//! from the last offset it got.

use std::sync::Arc;

use futures::Stream;
use tonic::Status;

use crate::daemon::Daemon;

/// The end of a stream cut by a live upgrade: it says so, and the client
/// reconnects and continues from the last offset it got. Nothing for a
/// stream that ended for any other reason.
pub(super) fn end<T: Send>(daemon: Arc<Daemon>) -> impl Stream<Item = Result<T, Status>> + Send {
    let end = futures::stream::once(async move {
        daemon.is_handing_over().then(|| {
            Err(super::status::status(
                tonic::Code::Unavailable,
                portal_proto::v1::ErrorKind::HandedOver,
                HANDOVER_MESSAGE,
            ))
        })
    });
    futures::StreamExt::filter_map(end, |x| async { x })
}

/// What a stream cut by a live upgrade ends with (code UNAVAILABLE: retry).
const HANDOVER_MESSAGE: &str = "portald is being replaced by a new version (live upgrade); \
     every program runs on: reconnect and continue from the last offset you got";
