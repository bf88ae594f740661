//! `portal-cli dash`: one live view of every program and agent, like
//! claude-squad or `htop` for Portal. The list (most urgent first) and the
//! selected program's screen are redrawn when the daemon's `Changes` stream
//! says they changed, never by polling; a one-second clock only ages the
//! "quiet" column. Enter attaches this terminal to the program and Ctrl-]
//! comes back.
//!
//! - [`model`]: the state and what each key does (no terminal).
//! - [`view`]: drawing it with ratatui.

mod model;
mod view;

use std::io::{Stdout, Write as _};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt as _;
use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tonic::transport::Channel;

use self::model::{Action, Model};
use self::view::Preview;
use crate::{Failure, Outcome, attach, notify};

/// `dash` options.
#[derive(Debug, clap::Args)]
pub(crate) struct DashArgs {
    /// Raise a desktop notification (or ring the bell) when an agent starts
    /// waiting for you or finishes its turn.
    #[arg(long)]
    notify: bool,
    /// Least time between two redraws while programs print ("100ms",
    /// "1s"); a slow link wants more.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = crate::fmt::parse_duration)]
    interval: Duration,
}

/// How long the "quiet" column may lag: it is redrawn once a second.
const CLOCK: Duration = Duration::from_secs(1);

/// How often to look for a daemon again while none answers (a restarted or
/// upgraded one is back within this; nothing is started meanwhile).
const RETRY: Duration = Duration::from_secs(1);

/// The output of a program on pipes the preview reads back: enough for a
/// screenful of lines.
const PREVIEW_BYTES: u64 = 16 * 1024;

type Rpc = PortalClient<Channel>;

/// The terminal in raw mode on the alternate screen; put back as it was
/// when dropped (on every exit path, a panic included).
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    fn enter() -> anyhow::Result<Self> {
        let mut out = std::io::stdout();
        crossterm::execute!(out, crossterm::terminal::EnterAlternateScreen)
            .context("switching to the alternate screen")?;
        let mut screen = Self {
            terminal: Terminal::new(CrosstermBackend::new(out))
                .context("setting up the terminal")?,
        };
        screen.resume()?;
        Ok(screen)
    }

    /// Raw mode, no cursor, pastes marked as pastes (so a pasted line is
    /// never taken as keys), and a full redraw next.
    fn resume(&mut self) -> anyhow::Result<()> {
        crossterm::terminal::enable_raw_mode().context("switching the terminal to raw mode")?;
        crossterm::execute!(
            self.terminal.backend_mut(),
            crossterm::cursor::Hide,
            crossterm::event::EnableBracketedPaste
        )
        .context("setting the terminal's modes")?;
        // A fresh terminal (empty buffers) on a cleared screen: the next draw
        // paints every cell. (`Terminal::clear` would ask the terminal where
        // its cursor is, an answer nobody may be reading for.)
        crossterm::execute!(
            self.terminal.backend_mut(),
            crossterm::terminal::EnterAlternateScreen,
            crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
        )
        .context("clearing the screen")?;
        self.terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
            .context("setting up the terminal")?;
        Ok(())
    }

    /// The terminal as a program attached to it expects it (still on the
    /// alternate screen, so nothing reaches the shell's screen).
    fn suspend(&mut self) {
        // Best effort: nothing better to do if the terminal is gone.
        let _ = crossterm::execute!(
            self.terminal.backend_mut(),
            crossterm::event::DisableBracketedPaste,
            crossterm::cursor::Show
        );
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.suspend();
        let _ = crossterm::execute!(
            self.terminal.backend_mut(),
            crossterm::terminal::LeaveAlternateScreen
        );
    }
}

/// The dashboard's connection-side state.
struct Dash<'a> {
    client: &'a Client,
    rpc: Rpc,
    model: Model,
    preview: Preview,
    args: DashArgs,
    /// Agents' last states, to notify once per change.
    agent_states: std::collections::HashMap<u64, pb::AgentState>,
    /// Listed at least once (what was so before the dashboard began is not
    /// news).
    listed: bool,
}

/// `dash`.
pub(crate) async fn dash(client: &Client, args: DashArgs) -> Outcome {
    use std::io::IsTerminal as _;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(anyhow::anyhow!(
            "dash needs a terminal; in scripts use `portal-cli ps`, `agents` or `screen --watch`"
        )
        .into());
    }
    let mut dash = Dash {
        client,
        rpc: client.rpc(),
        model: Model::default(),
        preview: Preview::Empty,
        args,
        agent_states: std::collections::HashMap::new(),
        listed: false,
    };
    let mut changes = Some(dash.follow().await?);
    let mut screen = Screen::enter()?;
    let mut keys = EventStream::new();
    let mut clock = tokio::time::interval(CLOCK);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut retry = tokio::time::interval(RETRY);
    loop {
        dash.draw(&mut screen)?;
        tokio::select! {
            event = async { changes.as_mut()?.message().await.ok() }, if changes.is_some() => match event {
                Some(Some(e)) => dash.changed(&e).await,
                // The stream ended or broke: the daemon stopped, was
                // upgraded or crashed. Follow the next one when it is there.
                _ => {
                    changes = None;
                    dash.model.connected = false;
                    retry.reset();
                }
            },
            _ = retry.tick(), if changes.is_none() => {
                changes = dash.reconnect(false).await;
            }
            key = keys.next() => match key {
                Some(Ok(Event::Key(k))) if k.kind == KeyEventKind::Press => {
                    if changes.is_none() && k.code == crossterm::event::KeyCode::Char('r') && dash.model.mode == model::Mode::Normal {
                        dash.model.message = Some("starting portald…".into());
                        dash.draw(&mut screen)?;
                        changes = dash.reconnect(true).await;
                        continue;
                    }
                    let area = screen.terminal.size().map(|s| ratatui::layout::Rect::new(0, 0, s.width, s.height)).unwrap_or_default();
                    let page = view::list_page(area, dash.model.visible().len());
                    match dash.model.key(k, page) {
                        Action::Quit => return Ok(()),
                        Action::Attach(id) => {
                            // Keystrokes go to the program until Ctrl-]:
                            // crossterm's reader must not take them.
                            drop(keys);
                            // Dropping the stream wakes crossterm's poll; with
                            // no poll under way the wake stays pending, and
                            // the next poll that sees it beside a keystroke
                            // returns on the wake and loses the keystroke's
                            // readiness for good (the terminal is watched
                            // edge-triggered): the first key after a session
                            // never arrived. Taken now, the wake is gone
                            // before anyone types.
                            let _ = crossterm::event::poll(std::time::Duration::ZERO);
                            screen.suspend();
                            dash.attach(id).await;
                            screen.resume()?;
                            keys = EventStream::new();
                            dash.refresh().await;
                        }
                        action => dash.act(action).await,
                    }
                }
                Some(Ok(Event::Paste(text))) => dash.model.paste(&text),
                Some(Ok(_)) => {}
                // The terminal is gone.
                Some(Err(_)) | None => return Ok(()),
            },
            _ = clock.tick() => {}
        }
    }
}

impl Dash<'_> {
    fn draw(&self, screen: &mut Screen) -> anyhow::Result<()> {
        screen
            .terminal
            .draw(|f| view::draw(f, &self.model, &self.preview, self.client.host()))
            .context("drawing the dashboard")?;
        Ok(())
    }

    /// Opens the change stream; its first event (`initial`) lists
    /// everything.
    async fn follow(&mut self) -> Result<tonic::Streaming<pb::ChangesEvent>, Failure> {
        let ms = u64::try_from(self.args.interval.as_millis()).unwrap_or(u64::MAX);
        Ok(self.rpc.changes(pb::ChangesRequest { min_interval_ms: ms.max(1) }).await?.into_inner())
    }

    /// Connects again (starting portald only when asked: a daemon stopped
    /// on purpose stays stopped) and follows its changes.
    async fn reconnect(&mut self, autostart: bool) -> Option<tonic::Streaming<pb::ChangesEvent>> {
        let mut opts = portal_client::launch::LaunchOptions::from_env();
        opts.autostart =
            autostart && !crate::NO_AUTOSTART.load(std::sync::atomic::Ordering::Relaxed);
        let target = crate::TARGET.get().cloned().unwrap_or(portal_client::hosts::Target::Local);
        match Client::connect_to(&target, &opts).await {
            Ok(client) => self.rpc = client.rpc(),
            Err(e) => {
                if autostart {
                    self.model.message = Some(format!("cannot start portald: {e}"));
                }
                return None;
            }
        }
        match self.follow().await {
            Ok(changes) => {
                self.model.connected = true;
                self.model.message = Some("connected to portald again".into());
                Some(changes)
            }
            Err(e) => {
                self.model.message = Some(format!("cannot follow portald: {e}"));
                None
            }
        }
    }

    async fn changed(&mut self, e: &pb::ChangesEvent) {
        let shown = self.model.selected().map(|r| r.proc.id);
        self.refresh_list().await;
        let selected = self.model.selected().map(|r| r.proc.id);
        if e.initial || selected != shown || selected.is_some_and(|id| e.ids.contains(&id)) {
            self.refresh_preview().await;
        }
    }

    async fn refresh(&mut self) {
        self.refresh_list().await;
        self.refresh_preview().await;
    }

    async fn refresh_list(&mut self) {
        let listed = async {
            let procs = self.rpc.list(pb::ListRequest {}).await?.into_inner().processes;
            let agents = self
                .rpc
                .agent_list(pb::AgentListRequest { states: vec![] })
                .await?
                .into_inner()
                .agents;
            Ok::<_, tonic::Status>((procs, agents))
        }
        .await;
        match listed {
            Ok((procs, agents)) => {
                if self.args.notify {
                    self.notify(&agents);
                }
                self.model.set_rows(procs, agents);
            }
            Err(s) => self.model.message = Some(format!("cannot list: {}", s.message())),
        }
    }

    /// Notifies of agents that started waiting for a person or finished,
    /// once per change (not for those already so when the dashboard began).
    fn notify(&mut self, agents: &[pb::Agent]) {
        for a in agents {
            match self.agent_states.insert(a.id, a.state()) {
                Some(before) if before != a.state() => self.raise(a, before),
                // New since the last listing: a change like any other.
                None if self.listed => self.raise(a, pb::AgentState::Unknown),
                _ => {}
            }
        }
        self.listed = true;
    }

    fn raise(&mut self, a: &pb::Agent, before: pb::AgentState) {
        let t = pb::AgentTransition {
            id: a.id,
            before: before.into(),
            after: a.state,
            name: a.name.clone(),
            reason: a.reason.clone(),
            ..Default::default()
        };
        if let Some((title, body)) = notify::message(&t) {
            if !notify::try_raise(&title, &body) {
                // The bell, and the words where the person looks.
                let mut out = std::io::stdout();
                let _ = out.write_all(b"\x07").and_then(|()| out.flush());
            }
            self.model.message = Some(format!("{title}: {body}"));
        }
    }

    async fn refresh_preview(&mut self) {
        let Some(row) = self.model.selected() else {
            self.preview = Preview::Empty;
            return;
        };
        let (id, pty) = (row.proc.id, row.proc.mode() == pb::Mode::Pty);
        let proc = crate::proc_ref(&id.to_string());
        self.preview = if pty {
            match self.rpc.screen(pb::ScreenRequest { proc, resize: None }).await {
                Ok(s) => Preview::Screen { id, screen: s.into_inner() },
                Err(s) => Preview::Unavailable { id, why: s.message().to_owned() },
            }
        } else {
            let req = pb::ReadRequest {
                proc,
                from: Some(pb::read_request::From::Tail(true)),
                max_bytes: PREVIEW_BYTES,
                encoding: pb::Encoding::Text.into(),
                ..Default::default()
            };
            match self.rpc.read(req).await {
                Ok(r) => {
                    let text: Vec<u8> =
                        r.into_inner().records.into_iter().flat_map(|r| r.data).collect();
                    let text = String::from_utf8_lossy(&text);
                    Preview::Lines { id, lines: text.lines().map(str::to_owned).collect() }
                }
                Err(s) => Preview::Unavailable { id, why: s.message().to_owned() },
            }
        };
    }

    /// Attaches this terminal (the dashboard's screen is put away first).
    async fn attach(&mut self, id: u64) {
        let proc = id.to_string();
        let session = attach::session(self.client, &proc, attach::Screen::Alternate);
        self.model.message = Some(match session.await {
            Ok(attach::End::Detached) => format!("detached from {id}; it keeps running"),
            Ok(attach::End::Exited(p)) => {
                format!(
                    "{id} {}: {}",
                    portal_client::vocab::Status::from(p.status()).as_str(),
                    crate::fmt::exit_text(&p)
                )
            }
            Ok(attach::End::Lost) => "lost the connection to portald".into(),
            Err(e) => format!("cannot attach to {id}: {e}"),
        });
    }

    async fn act(&mut self, action: Action) {
        match action {
            Action::None | Action::Quit | Action::Attach(_) => {}
            Action::Preview => self.refresh_preview().await,
            Action::Send { id, text, secret } => {
                self.model.message = Some(match self.send(id, &text, secret).await {
                    Ok(()) if secret => {
                        format!("sent a hidden line to {id}; the log keeps only its length")
                    }
                    Ok(()) => format!("sent {text:?} to {id}"),
                    Err(s) => format!("cannot write to {id}: {}", s.message()),
                });
            }
            Action::Kill(id) => {
                let proc = crate::proc_ref(&id.to_string());
                self.model.message = Some(match self.rpc.kill(pb::KillRequest { proc }).await {
                    Ok(_) => format!("killed {id}"),
                    Err(s) => format!("cannot kill {id}: {}", s.message()),
                });
                self.refresh().await;
            }
        }
    }

    /// Types `text`, then Enter as a write of its own (agents' TUIs take
    /// text and Enter in one write as a paste).
    async fn send(&mut self, id: u64, text: &str, secret: bool) -> Result<(), tonic::Status> {
        let pty =
            self.model.all_rows().iter().any(|r| r.proc.id == id && r.proc.mode() == pb::Mode::Pty);
        let enter: &'static [u8] = if pty { b"\r" } else { b"\n" };
        for data in [Bytes::from(text.to_owned()), Bytes::from_static(enter)] {
            if data.is_empty() {
                continue;
            }
            let proc = crate::proc_ref(&id.to_string());
            self.rpc.write(pb::WriteRequest { proc, data, secret }).await?;
        }
        Ok(())
    }
}
