//! Drawing the dashboard: a header with the tally, the process list,
//! the selected program's preview (beside the list on a wide terminal,
//! under it on a narrow one), and the bottom line (a prompt, the last
//! message, or the keys). Colours follow urgency; with `NO_COLOR` the
//! selection is shown reversed and nothing else is coloured.

use portal_client::vocab;
use portal_proto::v1 as pb;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Paragraph, Row as TableRow, Table, TableState,
};

use super::model::{Mode, Model, Row, Urgency};
use crate::fmt;

/// Wide enough to put the preview beside the list rather than under it.
const SIDE_BY_SIDE_COLUMNS: u16 = 140;

/// What the preview shows.
#[derive(Debug, Default)]
pub(crate) enum Preview {
    /// Nothing selected.
    #[default]
    Empty,
    /// A terminal's screen.
    Screen { id: u64, screen: pb::ScreenSnapshot },
    /// The last lines a program on pipes printed.
    Lines { id: u64, lines: Vec<String> },
    /// Why there is no preview.
    Unavailable { id: u64, why: String },
}

/// The keys, for `?`. Each line fits the box on an 80-column terminal:
/// [`HELP_KEY_COLUMNS`] + [`HELP_TEXT_COLUMNS`] + the border and padding.
const HELP: &[(&str, &str)] = &[
    ("↑ ↓ PgUp PgDn", "select a process"),
    ("Home End", "select the first or the last"),
    ("Enter", "attach this terminal (Ctrl-] comes back here)"),
    ("s", "type a line (at a password prompt: hidden, and"),
    ("", "logged as its length only)"),
    ("k", "kill it (asks first)"),
    ("/", "filter by id, name, command or agent (Esc clears)"),
    ("r", "start portald again (when it is not running)"),
    ("?", "this help"),
    ("q  Ctrl-C", "quit (every program keeps running)"),
];

/// Widest key in [`HELP`], in columns.
const HELP_KEY_COLUMNS: usize = 13;

/// Widest description in [`HELP`], in columns: with the keys, two spaces
/// between, a space each side and the border, the box is 68 columns wide,
/// so it fits the smallest common terminal (80x24) with room to spare.
const HELP_TEXT_COLUMNS: usize = 49;

/// Where the list and the preview go, for a terminal of `area`.
pub(crate) struct Areas {
    header: Rect,
    list: Rect,
    preview: Rect,
    footer: Rect,
}

/// Splits the terminal.
pub(crate) fn areas(area: Rect, rows: usize) -> Areas {
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1)])
            .areas(area);
    let (list, preview) = if area.width >= SIDE_BY_SIDE_COLUMNS {
        let [l, p] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)])
            .areas(body);
        (l, p)
    } else {
        // The list takes what its rows need (and a border and a header), up
        // to half the height; the preview the rest.
        let wanted = u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(3).max(4);
        let list_height = wanted.min((body.height / 2).max(4)).min(body.height);
        let [l, p] =
            Layout::vertical([Constraint::Length(list_height), Constraint::Min(0)]).areas(body);
        (l, p)
    };
    Areas { header, list, preview, footer }
}

/// Rows of the list that fit (for PgUp/PgDn).
pub(crate) fn list_page(area: Rect, rows: usize) -> usize {
    usize::from(areas(area, rows).list.height.saturating_sub(3)).max(1)
}

/// Draws everything.
pub(crate) fn draw(frame: &mut Frame<'_>, model: &Model, preview: &Preview, host: Option<&str>) {
    let color = std::env::var_os("NO_COLOR").is_none();
    let visible = model.visible();
    let a = areas(frame.area(), visible.len());
    frame.render_widget(header(model, host, color), a.header);
    draw_list(frame, model, &visible, a.list, color);
    draw_preview(frame, model, preview, a.preview);
    frame.render_widget(footer(model, color), a.footer);
    if model.mode == Mode::Help {
        draw_help(frame, frame.area());
    }
}

fn header(model: &Model, host: Option<&str>, color: bool) -> Paragraph<'static> {
    let rows = model.all_rows();
    let running = rows.iter().filter(|r| r.proc.status() == pb::Status::Running).count();
    let needs = rows.iter().filter(|r| r.urgency() == Urgency::NeedsYou).count();
    let done = rows.iter().filter(|r| r.urgency() == Urgency::Done).count();
    let mut spans = vec![
        Span::styled("Portal", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!("  {} · {running} running", host.unwrap_or("this machine"))),
    ];
    if !model.connected {
        let style = if color {
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        spans.push(Span::raw(" · "));
        spans.push(Span::styled(
            "portald is not running: the list is as it last was (r starts it)",
            style,
        ));
        return Paragraph::new(Line::from(spans));
    }
    if needs > 0 {
        spans.push(Span::raw(" · "));
        spans.push(Span::styled(
            format!("{needs} need you"),
            urgency_style(Urgency::NeedsYou, color),
        ));
    }
    if done > 0 {
        spans.push(Span::raw(" · "));
        spans.push(Span::styled(format!("{done} done"), urgency_style(Urgency::Done, color)));
    }
    if !model.filter.is_empty() {
        spans.push(Span::raw(format!(" · filter \"{}\"", model.filter)));
    }
    spans.push(Span::raw("  (? for keys)"));
    Paragraph::new(Line::from(spans))
}

fn urgency_style(u: Urgency, color: bool) -> Style {
    if !color {
        return Style::new();
    }
    match u {
        Urgency::NeedsYou => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        Urgency::Done => Style::new().fg(Color::Green),
        Urgency::Agent => Style::new().fg(Color::Cyan),
        Urgency::Running => Style::new(),
        Urgency::Ended => Style::new().fg(Color::DarkGray),
    }
}

/// A word for a person for an agent state: the list says who needs them.
fn agent_word(s: pb::AgentState) -> &'static str {
    match s {
        pb::AgentState::AwaitingInput => "needs you",
        pb::AgentState::Done => "done",
        pb::AgentState::Running => "working",
        pb::AgentState::Idle => "idle",
        pb::AgentState::Exited => "exited",
        pb::AgentState::Unknown | pb::AgentState::Unspecified => "?",
    }
}

/// The agent column: its name, state, and why when it says.
fn agent_cell(r: &Row) -> String {
    let Some(a) = &r.agent else { return "-".into() };
    let state = agent_word(a.state());
    if a.reason.is_empty() {
        format!("{} {state}", a.name)
    } else {
        format!("{} {state}: {}", a.name, a.reason)
    }
}

/// "running", "exit 3", or how else it ended ("killed", "lost").
fn status_text(p: &pb::Process) -> String {
    match (p.status(), p.exit_code) {
        (pb::Status::Exited, Some(code)) => format!("exit {code}"),
        (s, _) => vocab::Status::from(s).as_str().to_owned(),
    }
}

/// Whether the program reads its input now, in a word.
fn input_text(p: &pb::Process) -> &'static str {
    if p.status() != pb::Status::Running {
        return "-";
    }
    if p.awaiting_secret {
        return "password";
    }
    match p.input_state() {
        pb::InputState::AwaitingInput => "waiting",
        pb::InputState::AwaitingSecret => "password",
        pb::InputState::Running => "busy",
        pb::InputState::Idle => "idle",
        pb::InputState::Exited | pb::InputState::Unspecified => "-",
    }
}

/// `text` cut to `width` characters, with an ellipsis when cut.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A list column: its title, its width (0 = what is left), and its cell.
struct Column {
    title: &'static str,
    width: u16,
    cell: fn(&Model, &Row) -> String,
}

/// The columns that fit in `width`, most useful first: a narrow terminal
/// drops the command, then the counters, then the input state.
fn columns(width: u16) -> Vec<Column> {
    let mut cols = vec![
        Column { title: "ID", width: 4, cell: |_, r| r.proc.id.to_string() },
        Column { title: "NAME", width: 14, cell: |_, r| fit(&r.label(), 14) },
    ];
    if width >= 70 {
        cols.push(Column {
            title: "MODE",
            width: 5,
            cell: |_, r| (if r.proc.mode() == pb::Mode::Pty { "pty" } else { "pipes" }).into(),
        });
    }
    cols.push(Column { title: "STATUS", width: 8, cell: |_, r| status_text(&r.proc) });
    if width >= 60 {
        cols.push(Column { title: "INPUT", width: 8, cell: |_, r| input_text(&r.proc).into() });
    }
    let agent_width = if width >= 110 { 30 } else { 0 };
    cols.push(Column { title: "AGENT", width: agent_width, cell: |_, r| agent_cell(r) });
    if width >= 80 {
        cols.push(Column {
            title: "QUIET",
            width: 5,
            cell: |m, r| m.quiet_ms(r).map_or_else(|| "-".into(), fmt::short_duration),
        });
        cols.push(Column {
            title: "OUT",
            width: 7,
            cell: |_, r| fmt::short_bytes(fmt::output_bytes(&r.proc)),
        });
    }
    if width >= 110 {
        cols.push(Column {
            title: "COMMAND",
            width: 0,
            cell: |_, r| fmt::command_line(&r.proc, 200),
        });
    }
    cols
}

fn draw_list(frame: &mut Frame<'_>, model: &Model, visible: &[&Row], area: Rect, color: bool) {
    let title = if visible.len() == model.all_rows().len() {
        format!(" processes ({}) ", visible.len())
    } else {
        format!(" processes ({} of {}) ", visible.len(), model.all_rows().len())
    };
    if visible.is_empty() {
        let empty = if model.all_rows().is_empty() {
            "No managed processes. Start one: portal-cli start --pty -- python3"
        } else {
            "Nothing matches the filter (Esc clears it)."
        };
        frame.render_widget(
            Paragraph::new(empty).block(Block::default().borders(Borders::ALL).title(title)),
            area,
        );
        return;
    }
    let cols = columns(area.width);
    let header = TableRow::new(cols.iter().map(|c| c.title))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let stale = !model.connected;
    let rows = visible.iter().map(|r| {
        let style = if stale {
            urgency_style(Urgency::Ended, color)
        } else {
            urgency_style(r.urgency(), color)
        };
        TableRow::new(cols.iter().map(|c| Cell::from((c.cell)(model, r)))).style(style)
    });
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|c| if c.width == 0 { Constraint::Fill(1) } else { Constraint::Length(c.width) })
        .collect();
    let selected_style = if color {
        Style::new().bg(Color::Blue).fg(Color::White).add_modifier(Modifier::BOLD)
    } else {
        Style::new().add_modifier(Modifier::REVERSED)
    };
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::ALL).title(title))
        .row_highlight_style(selected_style)
        .highlight_symbol("▶ ");
    let mut state = TableState::default().with_selected(model.selected_index());
    frame.render_stateful_widget(table, area, &mut state);
}

fn draw_preview(frame: &mut Frame<'_>, model: &Model, preview: &Preview, area: Rect) {
    let inner_height = usize::from(area.height.saturating_sub(2));
    let (title, lines): (String, Vec<Line<'_>>) = match (model.selected(), preview) {
        (Some(r), Preview::Screen { id, screen }) if r.proc.id == *id => {
            let size = screen.size.unwrap_or_default();
            let mut title = format!(" {} {} · screen {}×{} ", id, r.label(), size.cols, size.rows);
            if !screen.title.is_empty() {
                title = format!(" {} {} · {} ", id, r.label(), screen.title);
            }
            (title, screen_lines(screen, inner_height))
        }
        (Some(r), Preview::Lines { id, lines }) if r.proc.id == *id => {
            let start = lines.len().saturating_sub(inner_height);
            (
                format!(" {} {} · last output ", id, r.label()),
                lines[start..].iter().map(|l| Line::raw(l.clone())).collect(),
            )
        }
        (Some(r), Preview::Unavailable { id, why }) if r.proc.id == *id => {
            (format!(" {} {} ", id, r.label()), vec![Line::raw(why.clone())])
        }
        (Some(r), _) => (format!(" {} {} ", r.proc.id, r.label()), vec![]),
        (None, _) => (" preview ".into(), vec![]),
    };
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

/// A screen's rows that fit in `height`: from the top, unless the cursor
/// (where the program is typing or asking) would fall below, then ending at
/// it.
fn screen_lines(screen: &pb::ScreenSnapshot, height: usize) -> Vec<Line<'static>> {
    let cursor = usize::try_from(screen.cursor_row).unwrap_or(0);
    let start = (cursor + 1).saturating_sub(height);
    screen.lines.iter().skip(start).take(height).map(|l| Line::raw(l.clone())).collect()
}

fn footer(model: &Model, color: bool) -> Paragraph<'static> {
    let prompt = Style::new().add_modifier(Modifier::BOLD);
    let line = match &model.mode {
        Mode::Filter => Line::from(vec![
            Span::styled("filter: ", prompt),
            Span::raw(format!("{}▏", model.filter)),
            Span::raw("   (Enter keeps it, Esc clears)"),
        ]),
        Mode::Line { id, text, secret: true } => Line::from(vec![
            Span::styled(format!("password for {id} (hidden, never logged): "), prompt),
            Span::raw(format!("{}▏", "•".repeat(text.chars().count()))),
        ]),
        Mode::Line { id, text, secret: false } => Line::from(vec![
            Span::styled(format!("line for {id}: "), prompt),
            Span::raw(format!("{text}▏")),
            Span::raw("   (Enter sends it, Esc cancels)"),
        ]),
        Mode::ConfirmKill { id } => {
            let what = model
                .all_rows()
                .iter()
                .find(|r| r.proc.id == *id)
                .map(|r| fmt::command_line(&r.proc, 40))
                .unwrap_or_default();
            let style = if color { prompt.fg(Color::Red) } else { prompt };
            Line::from(Span::styled(format!("kill {id} ({what})? y/N"), style))
        }
        Mode::Help | Mode::Normal => match &model.message {
            Some(m) => Line::raw(m.clone()),
            None => Line::raw("Enter attach · s type a line · k kill · / filter · ? help · q quit"),
        },
    };
    Paragraph::new(line)
}

fn draw_help(frame: &mut Frame<'_>, area: Rect) {
    // Border (2), a space each side (2), two between key and text.
    let width =
        u16::try_from(HELP_KEY_COLUMNS + HELP_TEXT_COLUMNS + 6).unwrap_or(u16::MAX).min(area.width);
    let height = u16::try_from(HELP.len() + 4).unwrap_or(u16::MAX).min(area.height);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let mut lines: Vec<Line<'_>> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(
                    format!(" {k:>HELP_KEY_COLUMNS$}  "),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::raw(" Any key closes this."));
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" keys ")),
        rect,
    );
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;

    /// The widths the help box is laid out by are those of its lines.
    #[test]
    fn help_widths_are_the_widest_lines() {
        let keys = HELP.iter().map(|(k, _)| k.chars().count()).max();
        let texts = HELP.iter().map(|(_, t)| t.chars().count()).max();
        assert_eq!((keys, texts), (Some(HELP_KEY_COLUMNS), Some(HELP_TEXT_COLUMNS)));
    }

    /// On an 80x24 terminal, every line of `?` shows whole, in its box.
    #[test]
    fn the_help_box_fits_80x24() {
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        let mut model = Model::default();
        model.mode = Mode::Help;
        terminal.draw(|f| draw(f, &model, &Preview::Empty, None)).unwrap();
        let buffer = terminal.backend().buffer();
        let screen: Vec<String> = (0..buffer.area.height)
            .map(|y| (0..buffer.area.width).map(|x| buffer[(x, y)].symbol()).collect())
            .collect();
        let text = screen.join("\n");
        for (key, what) in HELP {
            let line = screen
                .iter()
                .find(|l| l.contains(what))
                .unwrap_or_else(|| panic!("{what:?} is cut:\n{text}"));
            assert!(line.contains(&format!("{key}  {what}")), "{key:?} is cut:\n{text}");
            // The box's right border follows the text on the same line.
            assert!(line.trim_end().ends_with('│'), "no border after {what:?}:\n{text}");
        }
        assert!(text.contains("Any key closes this."), "{text}");
    }
}
