//! The one line `portal-cli dial-stdio` ([`crate::dial`]) writes before
//! the first gRPC byte, and the client end over ssh ([`crate::ssh`])
//! reads: `portal-dial-stdio/1 protocol=<N> version=<crate version>` when
//! the remote side's daemon answered, or `portal-dial-stdio/1 error=<text>`
//! when it could not reach one. The client reads it to tell "ssh connected
//! and Portal is there, speaking protocol N" from every way that can fail,
//! and to say which side to upgrade when the protocols differ. Both ends
//! import it from here, below them both.

/// What every handshake line starts with; the `/1` is the version of this
/// framing, not of the gRPC protocol.
pub const HANDSHAKE_PREFIX: &str = "portal-dial-stdio/1 ";

/// A handshake line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The remote side reached its daemon; gRPC follows.
    Ready {
        /// The remote side's wire protocol version.
        protocol: u32,
        /// The remote side's crate version.
        version: String,
    },
    /// The remote side could not reach its daemon; the connection ends.
    Failed(String),
}

impl Handshake {
    /// The line this side writes (with its newline).
    #[must_use]
    pub fn line(&self) -> String {
        match self {
            Handshake::Ready { protocol, version } => {
                format!("{HANDSHAKE_PREFIX}protocol={protocol} version={version}\n")
            }
            // One line: the message's own newlines would end it early.
            Handshake::Failed(e) => format!("{HANDSHAKE_PREFIX}error={}\n", e.replace('\n', " ")),
        }
    }

    /// Parses a line (without its newline); `None` when it is not a
    /// handshake (a login banner, say).
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.trim_end_matches('\r').strip_prefix(HANDSHAKE_PREFIX)?;
        if let Some(e) = rest.strip_prefix("error=") {
            return Some(Handshake::Failed(e.to_owned()));
        }
        let mut protocol = None;
        let mut version = String::new();
        for field in rest.split_whitespace() {
            match field.split_once('=') {
                Some(("protocol", p)) => protocol = p.parse().ok(),
                Some(("version", v)) => v.clone_into(&mut version),
                _ => {}
            }
        }
        Some(Handshake::Ready { protocol: protocol?, version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_lines_round_trip() {
        for h in [
            Handshake::Ready { protocol: 7, version: "1.2.3".into() },
            Handshake::Failed("cannot reach portald: no such file".into()),
        ] {
            let line = h.line();
            assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "{line:?}");
            assert_eq!(Handshake::parse(line.trim_end()), Some(h));
        }
        assert_eq!(
            Handshake::parse(Handshake::Failed("a\nb".into()).line().trim_end()),
            Some(Handshake::Failed("a b".into()))
        );
        assert_eq!(Handshake::parse("Welcome to host"), None);
        assert_eq!(Handshake::parse("portal-dial-stdio/1 version=1"), None, "no protocol");
    }
}
