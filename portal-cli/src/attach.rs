//! `attach`: this terminal connected to a PTY process, like `tmux attach`.
//!
//! The terminal goes into raw mode (restored on every exit path by a guard),
//! the PTY is resized to it (and again on every SIGWINCH), the daemon's
//! first event redraws the current screen, then output streams live and
//! keystrokes flow the other way. [`DETACH_KEY`] (Ctrl-]) detaches: the
//! program keeps running. Several terminals may attach at once.

use std::io::Write as _;

use anyhow::Context as _;
use portal_proto::client::Client;
use portal_proto::names;
use portal_proto::v1 as pb;
use rustix::termios::{self, OptionalActions, Termios};
use tokio::io::AsyncReadExt as _;
use tokio::sync::mpsc;

use crate::{Outcome, fmt, proc_ref};

/// The detach key: Ctrl-] (0x1d), as in telnet; programs rarely need it.
pub(crate) const DETACH_KEY: u8 = 0x1d;

/// Modes a program may have switched on in this terminal, switched off on
/// detach: alternate screen, visible cursor, bracketed paste, application
/// cursor keys, mouse reporting, and attributes.
const RESET_TERMINAL: &[u8] =
    b"\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[?1l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[0m\r\n";

/// Restores the terminal's settings when dropped.
struct RawMode {
    saved: Termios,
}

impl RawMode {
    fn enter() -> anyhow::Result<Self> {
        let stdin = rustix::stdio::stdin();
        let saved = termios::tcgetattr(stdin).context("reading the terminal settings")?;
        let mut raw = saved.clone();
        raw.make_raw();
        termios::tcsetattr(stdin, OptionalActions::Flush, &raw)
            .context("switching the terminal to raw mode")?;
        Ok(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // Best effort: there is nothing better to do if the terminal is gone.
        let _ = termios::tcsetattr(rustix::stdio::stdin(), OptionalActions::Flush, &self.saved);
    }
}

fn window_size() -> Option<pb::TermSize> {
    let ws = termios::tcgetwinsize(rustix::stdio::stdin()).ok()?;
    (ws.ws_row > 0 && ws.ws_col > 0)
        .then(|| pb::TermSize { rows: ws.ws_row.into(), cols: ws.ws_col.into() })
}

/// How a session ended.
enum End {
    Detached,
    Exited(Box<pb::Process>),
    Lost,
}

/// `attach`.
pub(crate) async fn attach(client: &Client, proc: &str) -> Outcome {
    if !termios::isatty(rustix::stdio::stdin()) {
        return Err(anyhow::anyhow!("attach needs a terminal on standard input; use `portal-cli write` or `read -f` in scripts").into());
    }
    let (tx, rx) = mpsc::channel::<pb::AttachRequest>(64);
    let start = pb::AttachStart { proc: proc_ref(proc), size: window_size() };
    tx.send(pb::AttachRequest { msg: Some(pb::attach_request::Msg::Start(start)) })
        .await
        .map_err(|_| anyhow::anyhow!("the attach stream closed"))?;
    let raw = RawMode::enter()?;
    let outbound = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut events = match client.rpc().attach(outbound).await {
        Ok(r) => r.into_inner(),
        Err(s) => {
            drop(raw);
            return Err(s.into());
        }
    };
    // Keystrokes → daemon, until the detach key.
    let keys = tx.clone();
    let (detached_tx, mut detached) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 4096];
        loop {
            let n = match stdin.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let (input, detach) = match buf[..n].iter().position(|&b| b == DETACH_KEY) {
                Some(i) => (&buf[..i], true),
                None => (&buf[..n], false),
            };
            if !input.is_empty() {
                let msg = pb::AttachRequest {
                    msg: Some(pb::attach_request::Msg::Input(input.to_vec().into())),
                };
                if keys.send(msg).await.is_err() {
                    break;
                }
            }
            if detach {
                break;
            }
        }
        let _ = detached_tx.send(());
    });
    // Window size changes → daemon.
    let resizes = tx;
    tokio::spawn(async move {
        let Ok(mut winch) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
        else {
            return;
        };
        while winch.recv().await.is_some() {
            if let Some(size) = window_size()
                && resizes
                    .send(pb::AttachRequest { msg: Some(pb::attach_request::Msg::Resize(size)) })
                    .await
                    .is_err()
            {
                break;
            }
        }
    });
    let end = loop {
        tokio::select! {
            _ = &mut detached => break End::Detached,
            ev = events.message() => match ev {
                Ok(Some(pb::AttachEvent { event: Some(pb::attach_event::Event::Output(data)) })) => {
                    let mut out = std::io::stdout().lock();
                    if out.write_all(&data).and_then(|()| out.flush()).is_err() {
                        break End::Lost;
                    }
                }
                Ok(Some(pb::AttachEvent { event: Some(pb::attach_event::Event::Exited(p)) })) => break End::Exited(Box::new(p)),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break End::Lost,
            },
        }
    };
    drop(raw);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(RESET_TERMINAL);
    let _ = out.flush();
    match end {
        End::Detached => {
            eprintln!("[detached from {proc}; it keeps running]");
            Ok(())
        }
        End::Exited(p) => {
            eprintln!("[process {} {}: {}]", p.id, names::status(p.status()), fmt::exit_text(&p));
            Ok(())
        }
        End::Lost => Err(anyhow::anyhow!("lost the connection to portald").into()),
    }
}
