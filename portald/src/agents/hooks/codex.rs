//! Codex's hooks in `~/.codex/config.toml`, edited as a TOML document.
//!
//! Codex writes into the same file: its hook trust records
//! (`[hooks.state."<file>:<event>:<i>:<j>"] trusted_hash = …`), often right
//! after Portal's entries. So the file goes through a format-preserving TOML
//! editor, never text surgery: install removes Portal's handler groups
//! (recognised by a command running `portal-cli … emit`) and appends fresh
//! ones at the end of each event's array, so the user's groups keep their
//! positions (which the trust records name); everything else, trust records
//! included, is left as Codex or the user wrote it. A file that does not
//! parse is never overwritten. Codex runs a hook only once the user trusts it
//! in its `/hooks` view; Portal never writes trust records itself.

use std::path::Path;

use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

use super::{Handler, HookAction, HookError, Report, command, is_portal_command, read};

/// Codex events and the state and reason each reports (its hooks
/// documentation: `PermissionRequest` when it asks to approve a command,
/// `PostToolUse` once a tool ran, `Interrupt` when a turn or a request is
/// cancelled (a rejected command: no `Stop` follows), `SessionEnd` when it
/// quits). `SessionStart` fires only with the first prompt; Codex's own
/// OSC 7501 status says `idle` before that.
pub(super) const EVENTS: &[(&str, &str, Option<&str>)] = &[
    ("SessionStart", "idle", None),
    ("UserPromptSubmit", "running", None),
    ("PermissionRequest", "awaiting_input", Some("permission")),
    ("PostToolUse", "running", None),
    ("Stop", "done", None),
    ("Interrupt", "idle", None),
    ("SessionEnd", "exited", None),
];

/// Lines the first installer wrote around its block: removed (only they;
/// what lies between them, Codex's trust records too, is kept and parsed).
const LEGACY_MARKERS: &[&str] = &[
    "# >>> portal-agent-hooks >>>",
    "# <<< portal-agent-hooks <<<",
    "# Written by `portal-cli hooks install`; `portal-cli hooks uninstall` removes it.",
];

/// Portal's handlers as they should be.
fn wanted(emitter: &Path) -> Vec<Handler> {
    EVENTS
        .iter()
        .map(|(event, state, reason)| Handler {
            event: (*event).to_owned(),
            matcher: None,
            command: command(emitter, "codex", state, event, *reason),
        })
        .collect()
}

/// The commands of a group's handlers.
fn group_commands(group: &Table) -> impl Iterator<Item = &str> {
    group
        .get("hooks")
        .and_then(Item::as_array_of_tables)
        .into_iter()
        .flat_map(ArrayOfTables::iter)
        .filter_map(|h| h.get("command")?.as_str())
}

/// Portal's handlers as the document has them.
fn handlers(doc: &DocumentMut) -> Vec<Handler> {
    let Some(events) = doc.get("hooks").and_then(Item::as_table) else { return Vec::new() };
    let mut out = Vec::new();
    for (event, item) in events {
        let Some(groups) = item.as_array_of_tables() else { continue };
        for group in groups {
            let matcher = group.get("matcher").and_then(Item::as_str).map(str::to_owned);
            for c in group_commands(group).filter(|c| is_portal_command(c)) {
                out.push(Handler {
                    event: event.to_owned(),
                    matcher: matcher.clone(),
                    command: c.to_owned(),
                });
            }
        }
    }
    out
}

/// Removes Portal's groups, then event arrays left empty, then a `hooks`
/// table left empty. Nothing else is touched.
fn strip(doc: &mut DocumentMut) {
    let Some(events) = doc.get_mut("hooks").and_then(Item::as_table_mut) else { return };
    let mut emptied = Vec::new();
    for (event, item) in events.iter_mut() {
        let Some(groups) = item.as_array_of_tables_mut() else { continue };
        let before = groups.len();
        groups.retain(|g| !group_commands(g).any(is_portal_command));
        if before > 0 && groups.is_empty() {
            emptied.push(event.get().to_owned());
        }
    }
    for event in emptied {
        events.remove(&event);
    }
    if events.is_empty() {
        doc.remove("hooks");
    }
}

/// Appends one group per event with Portal's handler.
fn install(doc: &mut DocumentMut, emitter: &Path) -> Result<(), String> {
    let hooks = doc.entry("hooks").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let Some(hooks) = hooks.as_table_mut() else {
        return Err("`hooks` is not a table".into());
    };
    for h in wanted(emitter) {
        let groups = hooks
            .entry(&h.event)
            .or_insert_with(|| Item::ArrayOfTables(ArrayOfTables::new()))
            .as_array_of_tables_mut()
            .ok_or_else(|| format!("hooks.{} is not an array of tables", h.event))?;
        let mut handler = Table::new();
        handler["type"] = value("command");
        handler["command"] = value(h.command);
        let mut handlers = ArrayOfTables::new();
        handlers.push(handler);
        let mut group = Table::new();
        group.insert("hooks", Item::ArrayOfTables(handlers));
        groups.push(group);
    }
    Ok(())
}

pub(super) fn run(
    action: HookAction,
    dry_run: bool,
    home: &Path,
    emitter: &Path,
) -> Result<Report, HookError> {
    let dir = home.join(".codex");
    let path = dir.join("config.toml");
    let mut report = Report { agent: "codex", path: path.clone(), ..Report::default() };
    let existing = read(&path)?;
    let text = existing.clone().unwrap_or_default();
    let malformed =
        |reason: String| HookError::Malformed { path: path.clone(), kind: "TOML", reason };
    let unmarked: String =
        text.split_inclusive('\n').filter(|l| !LEGACY_MARKERS.contains(&l.trim_end())).collect();
    let mut doc: DocumentMut =
        unmarked.parse().map_err(|e: toml_edit::TomlError| malformed(e.to_string()))?;
    report.status = super::status(&handlers(&doc), &wanted(emitter), dir.exists());
    strip(&mut doc);
    let stripped = doc.to_string();
    install(&mut doc, emitter).map_err(malformed)?;
    let installed = doc.to_string();
    report.note = "Codex runs new or changed hooks only after you review and trust them in its \
                   /hooks view (Codex before 0.124 also needs `hooks = true` under `[features]`). \
                   With its app-server daemon on (`[features] daemon_auto_start`, the default), \
                   hooks run in the environment of the first terminal that started the daemon, \
                   so for several Codex terminals in Portal set it to false; Portal reads Codex's \
                   own status reports either way."
        .into();
    super::act(action, report, &path, &text, existing.is_some(), installed, stripped, dry_run)
}
