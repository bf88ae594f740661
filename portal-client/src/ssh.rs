//! The client end of a connection over SSH: runs the system `ssh` with
//! `portal-cli dial-stdio` as the remote command and hands its stdin and
//! stdout to gRPC as one byte stream, after reading the handshake
//! ([`crate::handshake`]) that the remote end ([`crate::dial`]) writes.
//!
//! The user's own OpenSSH does the work, so keys, agents, `~/.ssh/config`,
//! jump hosts and ControlMaster all apply, and nothing listens on the
//! network. What ssh cannot do is told apart by its exit status and what it
//! printed: the host unreachable, authentication refused, Portal missing on
//! the remote side, or the two sides speaking other protocol versions, each
//! a [`ClientError`] of its own.

use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, BufReader, ReadBuf,
};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::error::ClientError;
use crate::handshake::Handshake;
use crate::hosts::{ENV_SSH, Remote};
use crate::identity::identity;

/// How long ssh may take to connect (its `ConnectTimeout`): long enough for
/// a slow route, short enough that a host that is down is said in seconds.
const CONNECT_TIMEOUT_SECS: u32 = 10;

/// How long from starting ssh to the handshake: the connection
/// ([`CONNECT_TIMEOUT_SECS`]), authentication, and the remote side starting
/// its portald (at most 10 s, `launch::DEFAULT_START_TIMEOUT`), with room.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(40);

/// How many lines a remote login may print before the handshake (a banner
/// from a shell's startup file) before the remote side is taken for
/// something other than Portal.
const MAX_LINES_BEFORE_HANDSHAKE: usize = 64;

/// How much of ssh's stderr is kept for an error message.
const STDERR_KEPT: usize = 4096;

/// ssh's exit status when it failed itself (rather than the remote command).
const SSH_FAILED: i32 = 255;

/// A shell's exit status for a command it cannot find.
const COMMAND_NOT_FOUND: i32 = 127;

/// A shell's exit status for a command it found but may not execute.
const CANNOT_EXECUTE: i32 = 126;

/// One connection: ssh's stdout and stdin. Dropping it closes ssh's stdin
/// and gives ssh [`SSH_EXIT_GRACE`] to end by itself before it is killed:
/// with the user's `ControlMaster auto` this ssh may be the master that
/// other sessions of theirs share, and a kill would cut those too.
#[derive(Debug)]
pub struct SshConn {
    reader: BufReader<ChildStdout>,
    writer: ChildStdin,
    ssh: Option<Child>,
}

/// How long ssh gets to end by itself once its connection is dropped.
const SSH_EXIT_GRACE: Duration = Duration::from_secs(2);

impl Drop for SshConn {
    fn drop(&mut self) {
        let Some(mut ssh) = self.ssh.take() else { return };
        // Without a runtime the child is dropped here, killed (kill_on_drop).
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                // The stdin this struct holds closes as the drop ends.
                if tokio::time::timeout(SSH_EXIT_GRACE, ssh.wait()).await.is_err() {
                    let _ = ssh.kill().await;
                }
            });
        }
    }
}

impl AsyncRead for SshConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.reader).poll_read(cx, buf)
    }
}

impl AsyncWrite for SshConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.writer).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.writer).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.writer).poll_shutdown(cx)
    }
}

/// The `ssh` command line for `remote`: the user's `ssh_args` first (ssh
/// takes the first value it is given for an option, so theirs win), then
/// Portal's defaults, the destination and the remote command.
#[must_use]
pub fn command_line(remote: &Remote, autostart: bool) -> Vec<String> {
    let mut args: Vec<String> = remote.ssh_args.clone();
    // -T: no terminal (a byte stream, not a session); BatchMode: never ask
    // for a password on a terminal nobody may be watching; the keep-alives
    // notice a dead link within a minute instead of TCP's hours.
    for opt in [
        "-T".to_owned(),
        "-o".to_owned(),
        "BatchMode=yes".to_owned(),
        "-o".to_owned(),
        format!("ConnectTimeout={CONNECT_TIMEOUT_SECS}"),
        "-o".to_owned(),
        "ServerAliveInterval=15".to_owned(),
        "-o".to_owned(),
        "ServerAliveCountMax=4".to_owned(),
    ] {
        args.push(opt);
    }
    if let Some(port) = remote.url.port {
        args.extend(["-p".to_owned(), port.to_string()]);
    }
    if let Some(user) = &remote.url.user {
        args.extend(["-l".to_owned(), user.clone()]);
    }
    args.push("--".to_owned());
    args.push(remote.url.host.clone());
    // ssh hands the remote shell one command line: quote the path (but
    // not a leading `~/`, which that shell expands to the remote home).
    let portal = match remote.portal.strip_prefix("~/") {
        Some(rest) => format!("~/{}", shell_words::quote(rest)),
        None => shell_words::quote(&remote.portal).into_owned(),
    };
    let mut remote_cmd = format!("{portal} dial-stdio");
    if !autostart {
        remote_cmd.push_str(" --no-autostart");
    }
    // Every connection, made again after a drop too, says who it is for.
    if let Some(who) = identity() {
        remote_cmd.push_str(" --as ");
        remote_cmd.push_str(&shell_words::quote(who));
    }
    args.push(remote_cmd);
    args
}

/// Runs ssh to `remote` and reads the handshake.
///
/// # Errors
/// A [`ClientError`] naming the host and what to do:
/// [`ClientError::HostUnreachable`], [`ClientError::AuthRefused`],
/// [`ClientError::RemoteMissing`], [`ClientError::VersionSkew`],
/// [`ClientError::RemoteFailed`], or [`ClientError::Launch`] when ssh
/// itself cannot run.
pub async fn dial(remote: &Remote, autostart: bool) -> Result<SshConn, ClientError> {
    let ssh = std::env::var_os(ENV_SSH).filter(|v| !v.is_empty()).unwrap_or_else(|| "ssh".into());
    let mut child = Command::new(&ssh)
        .args(command_line(remote, autostart))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            ClientError::Launch(format!(
                "cannot run {} to reach {}: {e}; install the OpenSSH client or set {ENV_SSH}",
                ssh.to_string_lossy(),
                remote.label
            ))
        })?;
    let (Some(stdout), Some(stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(ClientError::Launch("ssh started without its pipes".into()));
    };
    let said = keep_stderr(stderr);
    let mut reader = BufReader::new(stdout);
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_handshake(&mut reader)).await;
    let failure = match handshake {
        Ok(Ok(Handshake::Ready { protocol, version })) => {
            if protocol == portal_proto::PROTOCOL_VERSION {
                return Ok(SshConn { reader, writer: stdin, ssh: Some(child) });
            }
            return Err(ClientError::VersionSkew {
                host: remote.label.clone(),
                local_protocol: portal_proto::PROTOCOL_VERSION,
                local_version: env!("CARGO_PKG_VERSION").to_owned(),
                remote_protocol: Some(protocol),
                remote_version: version,
            });
        }
        Ok(Ok(Handshake::Failed(why))) => {
            return Err(ClientError::RemoteFailed { host: remote.label.clone(), message: why });
        }
        Ok(Err(not_portal)) => not_portal,
        Err(_) => {
            return Err(ClientError::HostUnreachable {
                host: remote.label.clone(),
                detail: format!(
                    "no handshake within {HANDSHAKE_TIMEOUT:?}: ssh is still connecting or logging in, or `{} dial-stdio` hangs there",
                    remote.portal
                ),
                ssh: remote.ssh_command(),
            });
        }
    };
    // ssh ended (or printed something else): its status and stderr say why.
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let (code, signal) = match status {
        Ok(Ok(s)) => (s.code(), exit_signal(s)),
        _ => {
            let _ = child.kill().await;
            (None, None)
        }
    };
    // The stderr reader ends with ssh; give it a moment to take the rest.
    let text = tokio::time::timeout(Duration::from_secs(1), said).await.ok().and_then(Result::ok);
    let text = text.unwrap_or_default();
    if let (Some(signal), "") = (signal, text.trim()) {
        return Err(ClientError::HostUnreachable {
            host: remote.label.clone(),
            detail: format!("ssh was ended by signal {signal} before Portal answered"),
            ssh: remote.ssh_command(),
        });
    }
    Err(classify(remote, code, text.trim(), &failure))
}

/// Reads lines until the handshake; what ended the search otherwise.
async fn read_handshake(reader: &mut BufReader<ChildStdout>) -> Result<Handshake, String> {
    let mut first_other = None;
    for _ in 0..MAX_LINES_BEFORE_HANDSHAKE {
        let mut line = Vec::new();
        let n = (&mut *reader)
            .take(4096)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| format!("reading from ssh failed: {e}"))?;
        if n == 0 {
            return Err(first_other.unwrap_or_default());
        }
        let text = String::from_utf8_lossy(&line);
        if let Some(h) = Handshake::parse(text.trim_end_matches('\n')) {
            return Ok(h);
        }
        first_other.get_or_insert_with(|| text.trim().to_owned());
    }
    Err(first_other.unwrap_or_default())
}

/// Collects up to [`STDERR_KEPT`] bytes of ssh's stderr until the
/// handshake is read, then drains the rest so ssh never blocks on it.
fn keep_stderr(mut stderr: tokio::process::ChildStderr) -> tokio::sync::oneshot::Receiver<String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut kept = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = STDERR_KEPT.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    tracing::debug!(ssh_stderr = %String::from_utf8_lossy(&buf[..n]).trim_end(), "ssh said");
                }
            }
        }
        // Nobody listens once the handshake was read; that is fine.
        let _ = tx.send(String::from_utf8_lossy(&kept).into_owned());
    });
    rx
}

/// Tells apart why ssh ended without a handshake, from its exit status,
/// its stderr, and the first other line the remote side printed.
fn classify(remote: &Remote, code: Option<i32>, stderr: &str, printed: &str) -> ClientError {
    let host = remote.label.clone();
    let said = |s: &str| stderr.contains(s);
    // ssh's note that it learnt a host key is no part of why it failed.
    let stderr: String = stderr
        .lines()
        .filter(|l| !l.starts_with("Warning: Permanently added"))
        .collect::<Vec<_>>()
        .join("\n");
    let detail = if stderr.is_empty() { printed.to_owned() } else { stderr };
    if code == Some(SSH_FAILED) {
        let ssh = remote.ssh_command();
        if said("Permission denied")
            || said("Too many authentication failures")
            || said("Host key verification failed")
            || said("REMOTE HOST IDENTIFICATION HAS CHANGED")
        {
            return ClientError::AuthRefused { host, detail, ssh };
        }
        return ClientError::HostUnreachable { host, detail, ssh };
    }
    if said("unrecognized subcommand") || said("unexpected argument") {
        // A portal-cli from before dial-stdio existed.
        return ClientError::VersionSkew {
            host,
            local_protocol: portal_proto::PROTOCOL_VERSION,
            local_version: env!("CARGO_PKG_VERSION").to_owned(),
            remote_protocol: None,
            remote_version: String::new(),
        };
    }
    // The shell's own word that it could not run the command, not any
    // "not found" a login's startup files may print.
    let names_portal = detail.lines().any(|l| {
        l.contains(remote.portal.trim_start_matches("~/"))
            && (l.contains("not found")
                || l.contains("No such file")
                || l.contains("Permission denied"))
    });
    if matches!(code, Some(COMMAND_NOT_FOUND | CANNOT_EXECUTE)) || names_portal {
        return ClientError::RemoteMissing { host, command: remote.portal.clone(), detail };
    }
    let detail = match code {
        Some(c) if detail.is_empty() => format!("the remote command exited with status {c}"),
        Some(c) => format!("{detail} (exit status {c})"),
        None if detail.is_empty() => "ssh ended without a word".to_owned(),
        None => detail,
    };
    ClientError::RemoteFailed { host, message: detail }
}

/// The signal that ended ssh; Windows has none.
fn exit_signal(s: std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(&s);
    #[cfg(windows)]
    {
        let _ = s;
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]
    use super::*;
    use crate::hosts::Hosts;

    fn remote(spec: &str) -> Remote {
        let hosts = Hosts::parse(
            "h.toml".into(),
            "[hosts]\nq = { url = \"ssh://u@h:2\", portal = \"/opt/my portal/portal-cli\", ssh_args = [\"-F\", \"/c\"] }",
        )
        .unwrap();
        match hosts.resolve(spec).unwrap() {
            crate::hosts::Target::Remote(r) => r,
            crate::hosts::Target::Local => panic!("local"),
        }
    }

    #[test]
    fn the_command_line_puts_the_users_options_first_and_quotes_the_remote_path() {
        let args = command_line(&remote("q"), false);
        assert_eq!(&args[..2], ["-F", "/c"]);
        assert!(args.windows(2).any(|w| w == ["-o", "BatchMode=yes"]), "{args:?}");
        assert!(
            args.windows(2).any(|w| w == ["-p", "2"]) && args.windows(2).any(|w| w == ["-l", "u"])
        );
        let n = args.len();
        assert_eq!(&args[n - 3..n - 1], ["--", "h"]);
        assert_eq!(args[n - 1], "'/opt/my portal/portal-cli' dial-stdio --no-autostart");
        crate::identity::set_identity("agent [1] (a@h)".into());
        let said = command_line(&remote("q"), true);
        assert!(said.last().unwrap().ends_with(" dial-stdio --as 'agent [1] (a@h)'"), "{said:?}");
        let home = Remote { portal: "~/.cargo/bin/portal-cli".into(), ..remote("q") };
        assert!(
            command_line(&home, true)
                .last()
                .unwrap()
                .starts_with("~/.cargo/bin/portal-cli dial-stdio")
        );
    }

    #[test]
    fn failures_are_told_apart() {
        let r = remote("q");
        let kind = |code, stderr: &str| match classify(&r, code, stderr, "") {
            ClientError::HostUnreachable { .. } => "unreachable",
            ClientError::AuthRefused { .. } => "auth",
            ClientError::RemoteMissing { .. } => "missing",
            ClientError::VersionSkew { .. } => "skew",
            ClientError::RemoteFailed { .. } => "failed",
            _ => "other",
        };
        assert_eq!(
            kind(Some(255), "ssh: connect to host h port 2: Connection refused"),
            "unreachable"
        );
        assert_eq!(kind(Some(255), "ssh: Could not resolve hostname h"), "unreachable");
        assert_eq!(kind(Some(255), "u@h: Permission denied (publickey)."), "auth");
        assert_eq!(kind(Some(255), "Host key verification failed."), "auth");
        assert_eq!(kind(Some(127), "bash: line 1: portal-cli: command not found"), "missing");
        assert_eq!(kind(Some(2), "error: unrecognized subcommand 'dial-stdio'"), "skew");
        assert_eq!(kind(Some(1), "something else"), "failed");
        assert_eq!(kind(Some(1), "motd: fortune: not found"), "failed", "not Portal's absence");
        assert_eq!(
            kind(Some(126), "bash: /opt/my portal/portal-cli: Permission denied"),
            "missing"
        );
    }
}
