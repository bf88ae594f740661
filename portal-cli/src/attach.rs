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
use portal_client::client::Client;
use portal_client::error::is_disconnect;
use portal_client::vocab;
use portal_proto::v1 as pb;
use rustix::termios::{self, OptionalActions, Termios};
use tokio::sync::mpsc;

use crate::{Outcome, fmt, proc_ref};

/// The detach key: Ctrl-] (0x1d), as in telnet; programs rarely need it.
pub(crate) const DETACH_KEY: u8 = 0x1d;

/// Modes a program may have switched on in this terminal, switched off on
/// detach: visible cursor, bracketed paste, application cursor keys and
/// keypad, mouse reporting, and attributes.
const RESET_MODES: &[u8] =
    b"\x1b[?25h\x1b[?2004l\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[0m";

/// And the alternate screen, for a terminal that was on the main one.
const LEAVE_ALTERNATE_SCREEN: &[u8] = b"\x1b[?1049l";

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
pub(crate) enum End {
    /// The person pressed the detach key.
    Detached,
    /// The program ended.
    Exited(Box<pb::Process>),
    /// The daemon could not be reached again.
    Lost,
}

/// `attach`.
pub(crate) async fn attach(client: &Client, proc: &str) -> Outcome {
    if !termios::isatty(rustix::stdio::stdin()) {
        return Err(anyhow::anyhow!("attach needs a terminal on standard input; use `portal-cli write` or `read -f` in scripts").into());
    }
    // Said once, before the program's screen replaces this terminal's, on
    // stderr: never typed into the program or mixed into its output.
    eprintln!("[attaching to {proc}: Ctrl-] detaches and leaves it running]");
    match session(client, proc, Screen::Main).await? {
        End::Detached => {
            eprintln!("[detached from {proc}; it keeps running]");
            Ok(())
        }
        End::Exited(p) => {
            eprintln!(
                "[process {} {}: {}]",
                p.id,
                vocab::Status::from(p.status()).as_str(),
                fmt::exit_text(&p)
            );
            Ok(())
        }
        End::Lost => Err(anyhow::anyhow!("lost the connection to portald").into()),
    }
}

/// Keystrokes from this terminal on a thread of its own, until the detach
/// key or until dropped. The thread waits on the terminal and on a pipe
/// together, so dropping the reader never leaves a read pending that would
/// take the next keystroke from whoever reads the terminal next (the
/// dashboard, after a session).
struct Keys {
    stop: Option<std::io::PipeWriter>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Keys {
    fn spawn(
        tx: mpsc::Sender<pb::AttachRequest>,
        detached: tokio::sync::oneshot::Sender<()>,
    ) -> anyhow::Result<Self> {
        let (stopped, stop) = std::io::pipe().context("making a pipe")?;
        let thread = std::thread::Builder::new()
            .name("attach-keys".into())
            .spawn(move || {
                read_keys(&stopped, &tx);
                let _ = detached.send(());
            })
            .context("starting the keystroke reader")?;
        Ok(Self { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // The pipe's end closing wakes the thread's poll.
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads the terminal until the detach key, end of input, or `stopped`
/// becoming readable (its writer closed).
fn read_keys(stopped: &std::io::PipeReader, tx: &mpsc::Sender<pb::AttachRequest>) {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdin = rustix::stdio::stdin();
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [PollFd::new(&stdin, PollFlags::IN), PollFd::new(stopped, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
        if !fds[1].revents().is_empty() {
            return;
        }
        if fds[0].revents().is_empty() {
            continue;
        }
        let n = match rustix::io::read(stdin, &mut buf) {
            Ok(0) | Err(_) => return,
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
            if tx.blocking_send(msg).is_err() {
                return;
            }
        }
        if detach {
            return;
        }
    }
}

/// Which screen the terminal was on before a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Screen {
    /// The main one (a shell): the session leaves the alternate screen a
    /// program may have switched to.
    Main,
    /// The alternate one (the dashboard): it stays there, so the session's
    /// output never reaches the shell's screen or scrollback.
    Alternate,
}

/// The switches between the main and the alternate screen (xterm's 1049,
/// 1047 and 47 modes), taken out of a program's output: attached from the
/// dashboard, the program draws on the dashboard's alternate screen, and a
/// switch to the main one would draw over the shell's screen. (A switch
/// split across two chunks passes; the redraw that starts every session
/// carries each whole.)
fn without_screen_switches(data: &[u8]) -> Vec<u8> {
    const SWITCHES: [&[u8]; 6] = [
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[?1047h",
        b"\x1b[?1047l",
        b"\x1b[?47h",
        b"\x1b[?47l",
    ];
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some(at) = rest.iter().position(|&b| b == 0x1b) {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at..];
        match SWITCHES.iter().find(|s| rest.starts_with(s)) {
            Some(s) => rest = &rest[s.len()..],
            None => {
                out.push(0x1b);
                rest = &rest[1..];
            }
        }
    }
    out.extend_from_slice(rest);
    out
}

/// Connects this terminal (in raw mode until it returns) to a PTY process
/// until the detach key, the program's end, or the daemon lost for good.
/// The terminal's modes the program switched on are switched off again.
pub(crate) async fn session(
    client: &Client,
    proc: &str,
    screen: Screen,
) -> Result<End, crate::Failure> {
    let raw = RawMode::enter()?;
    // Keystrokes and resizes, for whichever connection is current.
    let (tx, mut keys) = mpsc::channel::<pb::AttachRequest>(64);
    let (detached_tx, mut detached) = tokio::sync::oneshot::channel::<()>();
    let reader = Keys::spawn(tx.clone(), detached_tx)?;
    // Window size changes → daemon.
    let resizes = tx;
    let winch = tokio::spawn(async move {
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
                // The receiver first: a reader blocked sending gives up.
                drop((keys, reader, raw));
                winch.abort();
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
                        let data = match screen {
                            Screen::Main => data,
                            Screen::Alternate => without_screen_switches(&data).into(),
                        };
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
    // The receiver first: a reader blocked sending gives up.
    drop(keys);
    drop(reader);
    winch.abort();
    drop(raw);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(RESET_MODES);
    if screen == Screen::Main {
        let _ = out.write_all(LEAVE_ALTERNATE_SCREEN);
        let _ = out.write_all(b"\r\n");
    }
    let _ = out.flush();
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screen_switches_are_taken_out_and_nothing_else() {
        let out = without_screen_switches(b"a\x1b[?1049h\x1b[2Jb\x1b[?47lc\x1b[?1049l\x1b");
        assert_eq!(out, b"a\x1b[2Jbc\x1b");
    }
}
