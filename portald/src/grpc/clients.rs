//! Who each client is, so that the log records who typed each piece of
//! input. A client says who it is with `Identify` ("claude-code 2.1.0 via
//! portal-shim (pid 812)", "portal-cli write (ada@laptop)"); one that does not
//! is named by its program and pid. Clients are told apart by the process
//! on the other end of their connection (its pid and start time, so a
//! reused pid is a new client); for a remote client that is its
//! `portal-cli dial-stdio`, through which it identified itself.

use std::collections::HashMap;
use std::sync::Mutex;

use portal_client::transport::Peer;
use tonic::{Request, Status};

use crate::proc::Origin;

/// Longest description a client may give.
const MAX_CLIENT_CHARS: usize = 200;

/// How many clients are remembered before those whose process has ended
/// are forgotten: far more than run at once.
const MAX_CLIENTS: usize = 1024;

/// A client process: its pid and the time it started (clock ticks after
/// boot), since pids are reused.
type ClientKey = (u32, u64);

/// The clients that said who they are.
#[derive(Default)]
pub(crate) struct Clients {
    known: Mutex<HashMap<ClientKey, Origin>>,
}

/// The client process on the other end of `req`'s connection.
fn key_of<T>(req: &Request<T>) -> Option<ClientKey> {
    let pid = req.extensions().get::<Peer>()?.pid?;
    Some((pid, start_ticks(pid)?))
}

/// Field 22 of `/proc/<pid>/stat`: when the process started.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after it do not.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// A typist's name as people see it: printable, on one line, without
/// brackets (`read --who` puts it in some) or direction overrides that
/// could make it pass for another, and at most [`MAX_CLIENT_CHARS`] long.
pub(crate) fn clean(name: &str) -> Origin {
    let shown: String = name
        .trim()
        .chars()
        .filter(|c| {
            !c.is_control()
                && !matches!(c, '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .map(|c| match c {
            '[' => '(',
            ']' => ')',
            c => c,
        })
        .take(MAX_CLIENT_CHARS)
        .collect();
    Origin::from(shown)
}

impl Clients {
    /// Records who the client on `req`'s connection is.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a description that is empty, too long or holds
    /// control characters.
    pub(crate) fn identify(
        &self,
        req: &Request<portal_proto::v1::IdentifyRequest>,
    ) -> Result<(), Status> {
        let raw = req.get_ref().client.trim();
        if raw.chars().count() > MAX_CLIENT_CHARS {
            return Err(super::status::status(
                tonic::Code::InvalidArgument,
                portal_proto::v1::ErrorKind::BadRequest,
                format!("invalid client: give at most {MAX_CLIENT_CHARS} characters"),
            ));
        }
        let client = clean(raw);
        if client.is_empty() {
            return Err(super::status::status(
                tonic::Code::InvalidArgument,
                portal_proto::v1::ErrorKind::BadRequest,
                "invalid client: give a name people can read",
            ));
        }
        let Some(key) = key_of(req) else { return Ok(()) };
        let mut known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if known.len() >= MAX_CLIENTS {
            known.retain(|(pid, start), _| start_ticks(*pid) == Some(*start));
        }
        known.insert(key, client);
        Ok(())
    }

    /// Who the client on `req`'s connection is: what it said, else its
    /// program and pid; `None` when the kernel does not say.
    pub(crate) fn origin<T>(&self, req: &Request<T>) -> Option<Origin> {
        let key = key_of(req)?;
        let known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(o) = known.get(&key) {
            return Some(o.clone());
        }
        drop(known);
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", key.0)).unwrap_or_default();
        Some(clean(&format!("{} (pid {})", comm.trim(), key.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_for_people() {
        assert_eq!(&*clean("  claude [2.1]\n\u{202e}evil\u{2028} "), "claude (2.1)evil");
        assert_eq!(clean(&"x".repeat(500)).chars().count(), MAX_CLIENT_CHARS);
    }
}
