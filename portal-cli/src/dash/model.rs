//! The dashboard's state and what each key does to it, without a terminal:
//! the rows (every process with its agent), their order by urgency, the
//! filter, the selection (kept by id across re-sorts), the prompt being
//! typed, and the action a key asks of the I/O side.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use portal_proto::v1 as pb;

/// A process and, for a terminal with a coding agent in it, the agent.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) proc: pb::Process,
    pub(crate) agent: Option<pb::Agent>,
}

/// How urgently a row needs a person, most urgent first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Urgency {
    /// An agent waits for an answer, or a program for a password.
    NeedsYou,
    /// An agent finished its turn: its result wants a look.
    Done,
    /// An agent at work (or not reporting yet).
    Agent,
    /// Any other running program.
    Running,
    /// Ended or lost.
    Ended,
}

impl Row {
    /// Where the row sorts.
    pub(crate) fn urgency(&self) -> Urgency {
        if self.proc.status() != pb::Status::Running {
            return Urgency::Ended;
        }
        if self.proc.awaiting_secret
            || self.proc.input_state() == pb::InputState::AwaitingSecret
            || self.agent_state() == Some(pb::AgentState::AwaitingInput)
        {
            return Urgency::NeedsYou;
        }
        match self.agent_state() {
            Some(pb::AgentState::Done) => Urgency::Done,
            Some(pb::AgentState::Exited) | None => Urgency::Running,
            Some(_) => Urgency::Agent,
        }
    }

    /// The agent's state, when an agent is (or was) in this terminal.
    pub(crate) fn agent_state(&self) -> Option<pb::AgentState> {
        self.agent.as_ref().map(pb::Agent::state)
    }

    /// The name to show: the given name, else the program's file name.
    pub(crate) fn label(&self) -> String {
        if !self.proc.name.is_empty() {
            return self.proc.name.clone();
        }
        let program = self.proc.command.rsplit('/').next().unwrap_or(&self.proc.command);
        program.to_owned()
    }

    /// The sort key: urgency; then, among those waiting on a person, who
    /// has waited longest; then the id (ended ones newest first).
    fn sort_key(&self) -> (Urgency, i64, i64) {
        let u = self.urgency();
        let id = i64::try_from(self.proc.id).unwrap_or(i64::MAX);
        match u {
            Urgency::NeedsYou | Urgency::Done => {
                (u, self.agent.as_ref().map_or(0, |a| a.since_ns), id)
            }
            Urgency::Ended => (u, 0, -id),
            _ => (u, 0, id),
        }
    }

    fn matches(&self, filter: &str) -> bool {
        if filter.is_empty() {
            return true;
        }
        let needle = filter.to_lowercase();
        let mut hay = format!("{} {} {}", self.proc.id, self.proc.name, self.proc.command);
        for a in &self.proc.args {
            hay.push(' ');
            hay.push_str(a);
        }
        if let Some(a) = &self.agent {
            hay.push(' ');
            hay.push_str(&a.name);
        }
        hay.to_lowercase().contains(&needle)
    }
}

/// What the bottom line is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Keys move and act.
    Normal,
    /// Typing the filter.
    Filter,
    /// Typing a line for a process; `secret` hides it and keeps it out of
    /// the log (the process waits for a password).
    Line { id: u64, text: String, secret: bool },
    /// Asking before a kill.
    ConfirmKill { id: u64 },
    /// The key list.
    Help,
}

/// What a key asks the I/O side to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing beyond a redraw.
    None,
    /// Leave the dashboard.
    Quit,
    /// The selection changed: show its preview.
    Preview,
    /// Connect this terminal to the process until Ctrl-].
    Attach(u64),
    /// Type a line (and Enter) into the process.
    Send { id: u64, text: String, secret: bool },
    /// Kill the process.
    Kill(u64),
}

/// The dashboard.
#[derive(Debug)]
pub(crate) struct Model {
    rows: Vec<Row>,
    selected: Option<u64>,
    pub(crate) filter: String,
    pub(crate) mode: Mode,
    /// The last thing to tell the person (a result or an error).
    pub(crate) message: Option<String>,
    /// When the rows were listed: times in them (how long a program has
    /// been quiet) age from here between listings.
    listed_at: std::time::Instant,
    /// The daemon answers; while it does not, the rows are what it said
    /// last.
    pub(crate) connected: bool,
}

impl Default for Model {
    fn default() -> Self {
        Self {
            rows: Vec::new(),
            selected: None,
            filter: String::new(),
            mode: Mode::Normal,
            message: None,
            listed_at: std::time::Instant::now(),
            connected: true,
        }
    }
}

impl Model {
    /// Replaces the rows with a fresh listing; the selection stays on the
    /// same process wherever it sorts now (or moves to the first row if
    /// that process is gone or filtered out).
    pub(crate) fn set_rows(&mut self, procs: Vec<pb::Process>, agents: Vec<pb::Agent>) {
        let mut agents: std::collections::HashMap<u64, pb::Agent> =
            agents.into_iter().map(|a| (a.id, a)).collect();
        let mut rows: Vec<Row> =
            procs.into_iter().map(|p| Row { agent: agents.remove(&p.id), proc: p }).collect();
        rows.sort_by_key(Row::sort_key);
        self.rows = rows;
        self.listed_at = std::time::Instant::now();
        self.keep_selection();
    }

    fn keep_selection(&mut self) {
        let visible = self.visible();
        if !self.selected.is_some_and(|id| visible.iter().any(|r| r.proc.id == id)) {
            self.selected = visible.first().map(|r| r.proc.id);
        }
    }

    /// The rows the filter lets through, in order.
    pub(crate) fn visible(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.matches(&self.filter)).collect()
    }

    /// How long a running program has been quiet now: its listed quiet
    /// time plus the time since the listing (nothing it printed since, or
    /// the daemon would have said so).
    pub(crate) fn quiet_ms(&self, row: &Row) -> Option<u64> {
        let since = u64::try_from(self.listed_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        match row.proc.status() {
            pb::Status::Running => row.proc.output_quiet_ms.map(|ms| ms.saturating_add(since)),
            _ => None,
        }
    }

    /// Every row, filtered or not.
    pub(crate) fn all_rows(&self) -> &[Row] {
        &self.rows
    }

    /// The selected row.
    pub(crate) fn selected(&self) -> Option<&Row> {
        let id = self.selected?;
        self.rows.iter().find(|r| r.proc.id == id)
    }

    /// Its index among the visible rows.
    pub(crate) fn selected_index(&self) -> Option<usize> {
        let id = self.selected?;
        self.visible().iter().position(|r| r.proc.id == id)
    }

    fn move_by(&mut self, delta: isize) -> Action {
        let visible = self.visible();
        if visible.is_empty() {
            return Action::None;
        }
        let at = self.selected_index().unwrap_or(0);
        let last = visible.len() - 1;
        let to = at.saturating_add_signed(delta).min(last);
        let id = visible[to].proc.id;
        if self.selected == Some(id) {
            return Action::None;
        }
        self.selected = Some(id);
        Action::Preview
    }

    /// What a key does.
    pub(crate) fn key(&mut self, key: KeyEvent, page: usize) -> Action {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            // Cancels a prompt; quits otherwise.
            return match self.mode {
                Mode::Filter | Mode::Line { .. } | Mode::ConfirmKill { .. } => {
                    self.mode = Mode::Normal;
                    self.message = Some("cancelled".into());
                    Action::None
                }
                _ => Action::Quit,
            };
        }
        match self.mode.clone() {
            Mode::Help => {
                self.mode = Mode::Normal;
                Action::None
            }
            Mode::ConfirmKill { id } => {
                self.mode = Mode::Normal;
                if matches!(key.code, KeyCode::Char('y' | 'Y')) {
                    Action::Kill(id)
                } else {
                    self.message = Some(format!("not killed: {id}"));
                    Action::None
                }
            }
            Mode::Filter => self.filter_key(key),
            Mode::Line { id, text, secret } => self.line_key(key, id, text, secret),
            Mode::Normal => self.normal_key(key, page),
        }
    }

    /// Pasted text (the terminal's bracketed paste): typed into an open
    /// prompt, its line breaks as spaces, so a paste never submits a line
    /// early; never taken as keys.
    pub(crate) fn paste(&mut self, text: &str) {
        let flat: String = text
            .trim_end_matches(['\r', '\n'])
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .filter(|c| !c.is_control())
            .collect();
        match &mut self.mode {
            Mode::Line { text, .. } => text.push_str(&flat),
            Mode::Filter => {
                self.filter.push_str(&flat);
                self.keep_selection();
            }
            _ => self.message = Some("a paste goes into a prompt: press s (or /) first".into()),
        }
    }

    fn normal_key(&mut self, key: KeyEvent, page: usize) -> Action {
        let page = isize::try_from(page.max(1)).unwrap_or(1);
        // A message stays until the next key.
        self.message = None;
        if self.selected().is_none()
            && matches!(key.code, KeyCode::Enter | KeyCode::Char('s' | 'k'))
        {
            self.message = Some("no process selected".into());
            return Action::None;
        }
        match key.code {
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.keep_selection();
                Action::Preview
            }
            KeyCode::Down | KeyCode::Tab => self.move_by(1),
            KeyCode::Up | KeyCode::BackTab => self.move_by(-1),
            KeyCode::PageDown => self.move_by(page),
            KeyCode::PageUp => self.move_by(-page),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2),
            KeyCode::Char('?') => {
                self.mode = Mode::Help;
                Action::None
            }
            KeyCode::Char('/') => {
                self.mode = Mode::Filter;
                Action::None
            }
            KeyCode::Enter => match self.selected() {
                Some(r) if r.proc.status() != pb::Status::Running => {
                    self.message = Some(format!("{} has ended; nothing to attach to", r.proc.id));
                    Action::None
                }
                Some(r) if r.proc.mode() != pb::Mode::Pty => {
                    self.message = Some(format!(
                        "{} runs on pipes, not a terminal: s types a line into it",
                        r.proc.id
                    ));
                    Action::None
                }
                Some(r) => Action::Attach(r.proc.id),
                None => Action::None,
            },
            KeyCode::Char('s') => match self.selected() {
                Some(r) if r.proc.status() != pb::Status::Running => {
                    self.message = Some(format!("{} has ended; it reads nothing", r.proc.id));
                    Action::None
                }
                Some(r) => {
                    let secret = r.proc.awaiting_secret
                        || r.proc.input_state() == pb::InputState::AwaitingSecret;
                    self.mode = Mode::Line { id: r.proc.id, text: String::new(), secret };
                    Action::None
                }
                None => Action::None,
            },
            KeyCode::Char('k') => match self.selected() {
                Some(r) if r.proc.status() == pb::Status::Running => {
                    self.mode = Mode::ConfirmKill { id: r.proc.id };
                    Action::None
                }
                Some(r) => {
                    self.message = Some(format!("{} has ended already", r.proc.id));
                    Action::None
                }
                None => Action::None,
            },
            _ => Action::None,
        }
    }

    fn filter_key(&mut self, key: KeyEvent) -> Action {
        match key.code {
            KeyCode::Enter => self.mode = Mode::Normal,
            KeyCode::Esc => {
                self.filter.clear();
                self.mode = Mode::Normal;
            }
            _ => {
                if !edit(&mut self.filter, key) {
                    return Action::None;
                }
            }
        }
        let before = self.selected;
        self.keep_selection();
        if self.selected == before { Action::None } else { Action::Preview }
    }

    fn line_key(&mut self, key: KeyEvent, id: u64, mut text: String, secret: bool) -> Action {
        match key.code {
            KeyCode::Enter => {
                self.mode = Mode::Normal;
                return Action::Send { id, text, secret };
            }
            KeyCode::Esc => {
                self.mode = Mode::Normal;
                self.message = Some("nothing sent".into());
                return Action::None;
            }
            _ => {
                edit(&mut text, key);
            }
        }
        self.mode = Mode::Line { id, text, secret };
        Action::None
    }
}

/// A key typed into a one-line prompt: a character, Backspace, Ctrl-U
/// (clear) or Ctrl-W (the last word). Other control keys are not text.
/// False when the key changed nothing.
fn edit(text: &mut String, key: KeyEvent) -> bool {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Backspace => text.pop().is_some(),
        KeyCode::Char('u') if ctrl => {
            text.clear();
            true
        }
        KeyCode::Char('w') if ctrl => {
            let kept = text.trim_end().rfind(' ').map_or(0, |i| i + 1);
            text.truncate(kept);
            true
        }
        KeyCode::Char(c) if !ctrl && !key.modifiers.contains(KeyModifiers::ALT) => {
            text.push(c);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(id: u64, name: &str) -> pb::Process {
        pb::Process {
            id,
            name: name.into(),
            command: "/usr/bin/prog".into(),
            status: pb::Status::Running.into(),
            mode: pb::Mode::Pty.into(),
            ..Default::default()
        }
    }

    fn agent(id: u64, state: pb::AgentState, since_ns: i64) -> pb::Agent {
        pb::Agent { id, name: "claude".into(), state: state.into(), since_ns, ..Default::default() }
    }

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn ids(m: &Model) -> Vec<u64> {
        m.visible().iter().map(|r| r.proc.id).collect()
    }

    #[test]
    fn whoever_needs_a_person_sorts_first_and_the_selection_follows_its_process() {
        let mut ended = proc(1, "old");
        ended.status = pb::Status::Exited.into();
        let mut secret = proc(6, "sudo");
        secret.awaiting_secret = true;
        let procs = vec![ended, proc(2, "sh"), proc(3, "a"), proc(4, "b"), proc(5, "c"), secret];
        let agents = vec![
            agent(3, pb::AgentState::Running, 10),
            agent(4, pb::AgentState::Done, 20),
            agent(5, pb::AgentState::AwaitingInput, 30),
        ];
        let mut m = Model::default();
        m.set_rows(procs.clone(), agents);
        // Waiting on a person (the secret has waited "since 0"), done,
        // working, other programs, ended.
        assert_eq!(ids(&m), [6, 5, 4, 3, 2, 1]);
        assert_eq!(m.selected().map(|r| r.proc.id), Some(6));
        assert_eq!(m.key(key(KeyCode::Down), 10), Action::Preview);
        assert_eq!(m.selected().map(|r| r.proc.id), Some(5));
        // Agent 3 starts waiting: it moves up, the selection stays on 5.
        let agents = vec![
            agent(3, pb::AgentState::AwaitingInput, 5),
            agent(4, pb::AgentState::Done, 20),
            agent(5, pb::AgentState::AwaitingInput, 30),
        ];
        m.set_rows(procs, agents);
        assert_eq!(ids(&m), [6, 3, 5, 4, 2, 1]);
        assert_eq!(m.selected().map(|r| r.proc.id), Some(5));
    }

    #[test]
    fn keys_filter_type_a_line_and_kill_only_after_a_yes() {
        let mut m = Model::default();
        m.set_rows(vec![proc(1, "web"), proc(2, "repl")], vec![]);
        for k in [KeyCode::Char('/'), KeyCode::Char('R'), KeyCode::Char('e')] {
            m.key(key(k), 10);
        }
        assert_eq!(ids(&m), [2], "the filter ignores case");
        m.key(key(KeyCode::Enter), 10);
        assert_eq!(m.mode, Mode::Normal);
        m.key(key(KeyCode::Char('s')), 10);
        for c in "1+1".chars() {
            m.key(key(KeyCode::Char(c)), 10);
        }
        assert_eq!(
            m.key(key(KeyCode::Enter), 10),
            Action::Send { id: 2, text: "1+1".into(), secret: false }
        );
        assert_eq!(m.key(key(KeyCode::Char('k')), 10), Action::None);
        assert_eq!(m.mode, Mode::ConfirmKill { id: 2 });
        assert_eq!(m.key(key(KeyCode::Char('n')), 10), Action::None, "anything but y keeps it");
        m.key(key(KeyCode::Char('k')), 10);
        assert_eq!(m.key(key(KeyCode::Char('y')), 10), Action::Kill(2));
        m.key(key(KeyCode::Esc), 10);
        assert_eq!(ids(&m), [1, 2], "Esc clears the filter");
        assert_eq!(m.key(key(KeyCode::Char('q')), 10), Action::Quit);
    }

    #[test]
    fn a_paste_stays_in_the_prompt_and_control_keys_edit_it() {
        let mut m = Model::default();
        m.set_rows(vec![proc(1, "cat")], vec![]);
        m.paste("ky");
        assert_eq!(m.mode, Mode::Normal, "a paste outside a prompt is not keys");
        m.key(key(KeyCode::Char('s')), 10);
        m.paste("hello\nky\n");
        assert_eq!(m.mode, Mode::Line { id: 1, text: "hello ky".into(), secret: false });
        m.key(KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL), 10);
        m.key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL), 10);
        assert_eq!(m.mode, Mode::Line { id: 1, text: "hello ".into(), secret: false });
        m.key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL), 10);
        assert_eq!(m.mode, Mode::Line { id: 1, text: String::new(), secret: false });
        assert_eq!(
            m.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL), 10),
            Action::None
        );
        assert_eq!(m.mode, Mode::Normal, "Ctrl-C cancels the prompt");
        assert_eq!(
            m.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL), 10),
            Action::Quit
        );
    }

    #[test]
    fn a_password_prompt_gets_a_hidden_line_and_pipes_are_not_attached() {
        let mut pipes = proc(1, "job");
        pipes.mode = pb::Mode::Pipes.into();
        let mut secret = proc(2, "ssh");
        secret.input_state = pb::InputState::AwaitingSecret.into();
        let mut m = Model::default();
        m.set_rows(vec![pipes, secret], vec![]);
        assert_eq!(m.selected().map(|r| r.proc.id), Some(2));
        m.key(key(KeyCode::Char('s')), 10);
        assert!(matches!(m.mode, Mode::Line { id: 2, secret: true, .. }), "{:?}", m.mode);
        m.key(key(KeyCode::Esc), 10);
        m.key(key(KeyCode::Down), 10);
        assert_eq!(m.key(key(KeyCode::Enter), 10), Action::None);
        assert!(m.message.as_deref().unwrap_or_default().contains("pipes"), "{:?}", m.message);
    }
}
