//! Who this process is ("portal-cli write (ada@laptop)", "claude-code 2.1.0
//! via portal-shim (pid 812)"), said once and told to every daemon it
//! connects to, here ([`identify`]) and over ssh (`dial-stdio --as`), so
//! the daemon's log records who typed what.

use portal_proto::v1::portal_client::PortalClient;
use tonic::transport::Channel;

/// Who this process is, for the log's record of who typed what (see
/// [`set_identity`]).
static IDENTITY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Says who this process is ("claude-code 2.1.0 via portal-shim (pid
/// 812)", "portal-cli write (ada@laptop)"): every connection it makes
/// from now on tells the daemon (`Identify`), and a remote one tells the
/// far end's `dial-stdio` too, so a connection made again behind the
/// scenes is still this process's. The first call wins.
pub fn set_identity(who: String) {
    let _ = IDENTITY.set(who);
}

/// What [`set_identity`] set.
#[must_use]
pub fn identity() -> Option<&'static str> {
    IDENTITY.get().map(String::as_str)
}

/// Tells the daemon who this process is, when it was said; a daemon too
/// old to ask (UNIMPLEMENTED), or any refusal, is no reason to fail.
pub async fn identify(rpc: &mut PortalClient<Channel>) {
    if let Some(who) = identity() {
        let req = portal_proto::v1::IdentifyRequest { client: who.to_owned() };
        if let Err(s) = rpc.identify(req).await {
            tracing::debug!(status = %s.message(), "portald did not take this client's name");
        }
    }
}
