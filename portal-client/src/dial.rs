//! `portal-cli dial-stdio`: the remote end of a connection over SSH.
//!
//! A client reaching another machine runs `ssh host portal-cli dial-stdio`
//! and speaks the normal gRPC API over ssh's stdin and stdout; this side
//! connects those two to its own portald's socket (starting portald when
//! nothing answers, like every client). Nothing new listens anywhere: the
//! daemon sees an ordinary local connection, from the uid ssh logged in as,
//! and checks it as it checks every peer.
//!
//! Before the first gRPC byte, this side writes one line, the handshake
//! ([`crate::handshake`]): its daemon answered, speaking protocol N, or why
//! it could not reach one.

#[cfg(unix)]
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};

use crate::client::dial_verified;
use crate::error::ClientError;
use crate::handshake::Handshake;
use crate::launch::{LaunchOptions, connect_or_start};

/// Connects standard input and output to the daemon at `opts.socket`
/// (starting it when `opts.autostart`), after the handshake line. Returns
/// when either side closes: ssh going away ends this process, never a
/// program.
///
/// # Errors
/// When no daemon answers (said in the handshake too) or the pipe fails.
pub async fn serve_stdio(opts: &LaunchOptions) -> Result<(), ClientError> {
    serve(opts, stdin(), stdout()).await
}

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// Standard input as an async stream. sshd gives a session pipes (or
/// sockets): those are made non-blocking and polled by the runtime, which
/// costs a round trip no thread hop; anything else (a terminal, a file)
/// goes through tokio's blocking stdin, and is never made non-blocking (a
/// terminal would stay so for the shell after this process).
#[cfg(unix)]
fn stdin() -> Input {
    polled(
        std::io::stdin().as_fd(),
        |fd| Ok(Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?) as Input),
        |s| Box::new(s) as Input,
    )
    .unwrap_or_else(|_| Box::new(tokio::io::stdin()))
}

/// Standard output, as [`stdin`] does it.
#[cfg(unix)]
fn stdout() -> Output {
    polled(
        std::io::stdout().as_fd(),
        |fd| Ok(Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?) as Output),
        |s| Box::new(s) as Output,
    )
    .unwrap_or_else(|_| Box::new(tokio::io::stdout()))
}

/// Standard input on Windows: tokio's, read on a blocking thread (an
/// anonymous pipe cannot be polled there).
#[cfg(windows)]
fn stdin() -> Input {
    Box::new(tokio::io::stdin())
}

/// Standard output on Windows, as [`stdin`] does it.
#[cfg(windows)]
fn stdout() -> Output {
    Box::new(tokio::io::stdout())
}

/// A copy of `fd` as a stream the runtime polls: `pipe` makes one of a
/// pipe, `sock` of a socket; anything else is `Unsupported`.
#[cfg(unix)]
fn polled<T>(
    fd: BorrowedFd<'_>,
    pipe: impl FnOnce(OwnedFd) -> std::io::Result<T>,
    sock: impl FnOnce(tokio::net::UnixStream) -> T,
) -> std::io::Result<T> {
    let fd = fd.try_clone_to_owned()?;
    match kind(&fd)? {
        Kind::Pipe => pipe(fd),
        Kind::Socket => Ok(sock(socket(fd)?)),
        Kind::Other => Err(std::io::ErrorKind::Unsupported.into()),
    }
}

/// What a standard stream is.
#[cfg(unix)]
enum Kind {
    Pipe,
    Socket,
    Other,
}

#[cfg(unix)]
fn kind(fd: &OwnedFd) -> std::io::Result<Kind> {
    use std::os::unix::fs::FileTypeExt as _;
    let file = std::fs::File::from(fd.try_clone()?);
    let t = file.metadata()?.file_type();
    Ok(if t.is_fifo() {
        Kind::Pipe
    } else if t.is_socket() {
        Kind::Socket
    } else {
        Kind::Other
    })
}

#[cfg(unix)]
fn socket(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}

/// [`serve_stdio`] over any pair of streams.
async fn serve<R, W>(opts: &LaunchOptions, mut input: R, mut output: W) -> Result<(), ClientError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let conn = match connect_or_start(opts).await {
        // The client (which said who this process serves, `--as`) is
        // dropped: it checked that a daemon of this protocol answers; the
        // pipe below is a connection of its own, from this same process.
        Ok(_) => dial_verified(&opts.socket).await,
        Err(e) => Err(e),
    };
    let conn = match conn {
        Ok(c) => c,
        Err(e) => {
            let line = Handshake::Failed(e.to_string()).line();
            // The client learns why from the line; if it is gone, so be it.
            let _ = output.write_all(line.as_bytes()).await;
            let _ = output.flush().await;
            return Err(e);
        }
    };
    let hello = Handshake::Ready {
        protocol: portal_proto::PROTOCOL_VERSION,
        version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let broken = |e: std::io::Error| ClientError::Unavailable {
        socket: opts.socket.clone(),
        reason: format!("the connection to the client broke: {e}"),
    };
    output.write_all(hello.line().as_bytes()).await.map_err(broken)?;
    output.flush().await.map_err(broken)?;
    let (mut from_daemon, mut to_daemon) = tokio::io::split(conn);
    // Either direction ending ends both: a half-open HTTP/2 connection is
    // of no use, and the daemon cancels what this connection was waiting
    // on when it closes (the programs run on).
    tokio::select! {
        r = tokio::io::copy(&mut input, &mut to_daemon) => r.map(drop),
        r = tokio::io::copy(&mut from_daemon, &mut output) => r.map(drop),
    }
    .map_err(broken)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]
    use super::*;

    #[tokio::test]
    async fn without_a_daemon_the_handshake_says_why() {
        let dir = tempfile::Builder::new().prefix("pdl").tempdir_in("/tmp").unwrap();
        let opts = LaunchOptions {
            socket: dir.path().join("none.sock"),
            data_dir: Some(dir.path().to_path_buf()),
            autostart: false,
            timeout: std::time::Duration::from_secs(1),
        };
        let mut out = Vec::new();
        let err = serve(&opts, tokio::io::empty(), &mut out).await.unwrap_err();
        let line = String::from_utf8(out).unwrap();
        let Some(Handshake::Failed(why)) = Handshake::parse(line.trim_end()) else {
            panic!("not a failure line: {line:?}")
        };
        assert!(why.contains("none.sock") && why == err.to_string(), "{why}");
    }
}
