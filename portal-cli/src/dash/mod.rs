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
use portal_proto::client::{Client, is_disconnect};
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tonic::transport::Channel;

use self::model::{Action, Model};
use self::view::Preview;
use crate::{Failure, Outcome, attach, notify, output};

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
        crossterm::terminal::enable_raw_mode().context("switching the terminal to raw mode")?;
        let mut out = std::io::stdout();
        crossterm::execute!(
            out,
            crossterm::terminal::EnterAlternateScreen,
            crossterm::cursor::Hide
        )
        .context("switching to the alternate screen")?;
        let terminal =
            Terminal::new(CrosstermBackend::new(out)).context("setting up the terminal")?;
        Ok(Self { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        // Best effort: nothing better to do if the terminal is gone.
        let out = self.terminal.backend_mut();
        let _ = crossterm::execute!(
            out,
            crossterm::terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
        let _ = crossterm::terminal::disable_raw_mode();
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
    let mut changes = dash.follow().await?;
    let mut screen = Screen::enter()?;
    let mut keys = EventStream::new();
    let mut clock = tokio::time::interval(CLOCK);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        dash.draw(&mut screen)?;
        tokio::select! {
            event = changes.message() => match event {
                Ok(Some(e)) => dash.changed(&e).await,
                // The daemon went away (stopped, upgraded, crashed): follow
                // the next one.
                Ok(None) => changes = dash.follow_again(&mut screen).await?,
                Err(s) if is_disconnect(&s) => changes = dash.follow_again(&mut screen).await?,
                Err(s) => return Err(s.into()),
            },
            key = keys.next() => match key {
                Some(Ok(Event::Key(k))) if k.kind == KeyEventKind::Press => {
                    let area = screen.terminal.size().map(|s| ratatui::layout::Rect::new(0, 0, s.width, s.height)).unwrap_or_default();
                    let page = view::list_page(area, dash.model.visible().len());
                    match dash.model.key(k, page) {
                        Action::Quit => return Ok(()),
                        Action::Attach(id) => {
                            drop(keys);
                            drop(screen);
                            dash.attach(id).await;
                            screen = Screen::enter()?;
                            keys = EventStream::new();
                            dash.refresh().await;
                        }
                        action => dash.act(action).await,
                    }
                }
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

    async fn follow_again(
        &mut self,
        screen: &mut Screen,
    ) -> Result<tonic::Streaming<pb::ChangesEvent>, Failure> {
        self.model.message = Some("portald went away; connecting again…".into());
        self.draw(screen)?;
        self.rpc = output::reconnect().await?;
        self.model.message = Some("connected again".into());
        self.follow().await
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
        self.model.message = Some(match attach::session(self.client, &id.to_string()).await {
            Ok(attach::End::Detached) => format!("detached from {id}; it keeps running"),
            Ok(attach::End::Exited(p)) => {
                format!(
                    "{id} {}: {}",
                    portal_proto::names::status(p.status()),
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
