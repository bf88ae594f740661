//! Only the daemon's own user may talk to it: the peer's uid (from
//! `SO_PEERCRED`, read by the transport and given to each call as its
//! [`Peer`]) must equal the daemon's. Missing credentials fail closed.

use portal_client::transport::Peer;
use tonic::{Request, Status};

/// Interceptor applied to every call.
pub(crate) fn check_peer(req: Request<()>) -> Result<Request<()>, Status> {
    let me = portal_client::user::current();
    let peer = req.extensions().get::<Peer>().and_then(|p| p.uid);
    match peer {
        Some(uid) if uid == me => Ok(req),
        Some(uid) => Err(super::status::status(
            tonic::Code::PermissionDenied,
            portal_proto::v1::ErrorKind::NotAllowed,
            format!(
                "peer uid {uid} is not the daemon's uid {me}; each user runs their own portald"
            ),
        )),
        None => Err(super::status::status(
            tonic::Code::PermissionDenied,
            portal_proto::v1::ErrorKind::NotAllowed,
            "peer credentials are unavailable; refusing the call",
        )),
    }
}
