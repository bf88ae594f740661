//! `attach`: this terminal connected to a PTY process, like `tmux attach`.
//!
//! The terminal goes into raw mode (restored on every exit path by a guard),
//! the PTY is resized to it (and again on every SIGWINCH), the daemon's
//! first event redraws the current screen, then output streams live and
//! keystrokes flow the other way. [`DETACH_KEY`] (Ctrl-]) detaches: the
//! program keeps running. Several terminals may attach at once. When the
//! daemon goes away under it (a live upgrade, a restart after a crash) it
//! attaches again and the redraw repaints the screen.

use std::io::Write as _;

use anyhow::Context as _;
use portal_proto::client::{Client, is_disconnect};
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
    let raw = RawMode::enter()?;
    // Keystrokes and resizes, for whichever connection is current.
    let (tx, mut keys) = mpsc::channel::<pb::AttachRequest>(64);
    // Keystrokes → daemon, until the detach key.
    let key_tx = tx.clone();
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
                if key_tx.send(msg).await.is_err() {
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
    let mut rpc = client.rpc();
    let mut first = true;
    let end = 'connection: loop {
        // Each connection starts with the process and this terminal's size;
        // its first event redraws the whole screen, so a reconnection (after
        // a live upgrade or a restart) repaints what the terminal shows.
        let (conn, rx) = mpsc::channel::<pb::AttachRequest>(64);
        let start = pb::AttachStart { proc: proc_ref(proc), size: window_size() };
        let _ =
            conn.send(pb::AttachRequest { msg: Some(pb::attach_request::Msg::Start(start)) }).await;
        let outbound = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut events = match rpc.attach(outbound).await {
            Ok(r) => r.into_inner(),
            Err(s) if !first && is_disconnect(&s) => {
                match crate::output::reconnect().await {
                    Ok(r) => rpc = r,
                    Err(_) => break End::Lost,
                }
                continue;
            }
            Err(s) => {
                drop(raw);
                return Err(s.into());
            }
        };
        first = false;
        loop {
            tokio::select! {
                _ = &mut detached => break 'connection End::Detached,
                Some(msg) = keys.recv() => {
                    // The connection may be going; its replacement gets what follows.
                    let _ = conn.send(msg).await;
                }
                ev = events.message() => match ev {
                    Ok(Some(pb::AttachEvent { event: Some(pb::attach_event::Event::Output(data)) })) => {
                        let mut out = std::io::stdout().lock();
                        if out.write_all(&data).and_then(|()| out.flush()).is_err() {
                            break 'connection End::Lost;
                        }
                    }
                    Ok(Some(pb::AttachEvent { event: Some(pb::attach_event::Event::Exited(p)) })) => break 'connection End::Exited(Box::new(p)),
                    Ok(Some(_)) => {}
                    // Upgraded in place, or restarted after a crash: attach again.
                    Err(s) if is_disconnect(&s) => break,
                    Ok(None) | Err(_) => break 'connection End::Lost,
                },
            }
        }
        // Let go of this connection before making the next: the daemon
        // drains connections before it hands over.
        drop((conn, events));
        match crate::output::reconnect().await {
            Ok(r) => rpc = r,
            Err(_) => break End::Lost,
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
