//! The Attach rpc: a terminal connected to a PTY process. Plumbing only: the
//! first event redraws the current screen, then a follow stream from exactly
//! the offset that redraw reflects carries live output, while a task forwards
//! the client's keystrokes and resizes to the process's actor.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use portal_proto::v1 as pb;
use tonic::{Status, Streaming};

use super::convert;
use crate::daemon::Daemon;
use crate::proc::{ProcError, StreamId};
use crate::reads::{FollowFrom, FollowItem};

/// The outbound stream of an attachment.
pub(crate) type AttachStream = Pin<Box<dyn Stream<Item = Result<pb::AttachEvent, Status>> + Send>>;

fn output(data: Vec<u8>) -> pb::AttachEvent {
    pb::AttachEvent { event: Some(pb::attach_event::Event::Output(data.into())) }
}

/// Opens an attachment from its first message.
pub(crate) async fn attach(
    daemon: Arc<Daemon>,
    mut inbound: Streaming<pb::AttachRequest>,
    origin: Option<crate::proc::Origin>,
) -> Result<AttachStream, Status> {
    let first = inbound.message().await?.and_then(|m| m.msg);
    let Some(pb::attach_request::Msg::Start(start)) = first else {
        return Err(convert::InvalidRequest {
            field: "start".into(),
            reason: "the first Attach message must be `start`".into(),
        }
        .into());
    };
    let handle = daemon.get(&convert::target(start.proc.as_ref())?)?;
    let view = handle.screen.clone().ok_or(ProcError::NotPty(handle.id()))?;
    if let (Some(size), Some(current)) = (start.size.as_ref(), handle.published().size) {
        let size = convert::term_size("size", Some(size), current)?;
        if size != current && handle.status().is_running() {
            handle.resize(size).await?;
        }
    }
    let id = handle.id();
    let (redraw, offset) = tokio::task::spawn_blocking(move || view.redraw())
        .await
        .map_err(|_| ProcError::Gone(id))?;
    let from = FollowFrom::Cursor([None, Some(offset), None]);
    let rx = daemon.follow(handle.clone(), vec![StreamId::Stdout], from);
    // Keystrokes and resizes until the client detaches (ends its stream).
    let input = handle.clone();
    let d = Arc::clone(&daemon);
    // The keystrokes are the attached client's input.
    daemon.spawn(crate::proc::INPUT_ORIGIN.scope(origin, async move {
        // Ends with the daemon too: a client still sending must not hold the
        // drain (and a live upgrade's pause) open.
        while let Some(Ok(Some(msg))) = tokio::select! {
            msg = inbound.message() => Some(msg),
            () = d.stopped() => None,
        } {
            let res = match msg.msg {
                Some(pb::attach_request::Msg::Input(data)) => input.write(data).await.map(drop),
                Some(pb::attach_request::Msg::Resize(size)) => match (
                    convert::term_size(
                        "resize",
                        Some(&size),
                        crate::proc::TermSize { rows: 24, cols: 80 },
                    ),
                    input.published().size,
                ) {
                    (Ok(size), Some(current)) if size != current => input.resize(size).await,
                    _ => Ok(()),
                },
                _ => Ok(()),
            };
            if let Err(e) = res {
                tracing::debug!(proc = %input.id(), error = %e, "attached input not delivered");
            }
        }
    }));
    let first = futures::stream::once(async move { Ok(output(redraw)) });
    let live = tokio_stream::wrappers::ReceiverStream::new(rx).filter_map(move |item| {
        let handle = handle.clone();
        async move {
            match item {
                Ok(FollowItem::Output(r)) => Some(Ok(output(r.data.to_vec()))),
                Ok(FollowItem::Gap { .. }) => None,
                Ok(FollowItem::Ended) => Some(Ok(pb::AttachEvent {
                    event: Some(pb::attach_event::Event::Exited(convert::process_pb(
                        &handle, None,
                    ))),
                })),
                Err(e) => Some(Err(Status::from(e))),
            }
        }
    });
    Ok(Box::pin(first.chain(live).chain(super::handover::end(daemon))))
}
