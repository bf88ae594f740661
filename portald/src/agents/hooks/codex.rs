//! Codex's hooks in `~/.codex/config.toml`, edited as a TOML document.
//!
//! Codex writes into the same file: its hook trust records. Codex runs a
//! hook only once the user trusts it in its `/hooks` view, which records
//! `[hooks.state."<config path>:<event>:<group>:<handler>"]` with
//! `trusted_hash = "sha256:…"` (the event in snake case, `stop`,
//! `session_start`; group and handler by position in the event's array; an
//! `enabled = false` there turns the hook off), often right after Portal's
//! entries. So the file goes through a format-preserving TOML editor, never
//! text surgery: install removes Portal's handler groups (recognised by a
//! command running `portal-cli … emit`) and appends fresh ones at the end of
//! each event's array, so the user's groups keep their positions (which the
//! trust records name). Status says whether Codex trusts Portal's handlers
//! (a record for each one's position). The trust records of Portal's
//! handlers belong to them: uninstall removes them, and so does an install
//! that replaces the handlers (a record vouches for the command it was made
//! for; Codex asks again for a changed one). Every other record, and
//! everything else, is left as Codex or the user wrote it. A file that does
//! not parse is never overwritten. Portal never writes trust records itself.

use std::path::Path;

use portal_client::vocab::AgentState;
use portal_client::vocab::HookTrust;
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

use super::file::{Edit, Handler, HookAction, HookFile, command, is_portal_command};

/// Codex events and the state and reason each reports (its hooks
/// documentation: `PermissionRequest` when it asks to approve a command,
/// `PostToolUse` once a tool ran, `Interrupt` when a turn or a request is
/// cancelled (a rejected command: no `Stop` follows), `SessionEnd` when it
/// quits). `SessionStart` fires only with the first prompt; Codex's own
/// OSC 7501 status says `idle` before that.
pub(super) const EVENTS: &[(&str, AgentState, Option<&str>)] = &[
    ("SessionStart", AgentState::Idle, None),
    ("UserPromptSubmit", AgentState::Running, None),
    ("PermissionRequest", AgentState::AwaitingInput, Some("permission")),
    ("PostToolUse", AgentState::Running, None),
    ("Stop", AgentState::Done, None),
    ("Interrupt", AgentState::Idle, None),
    ("SessionEnd", AgentState::Exited, None),
];

/// Lines the first installer wrote around its block: removed (only they;
/// what lies between them, Codex's trust records too, is kept and parsed).
const LEGACY_MARKERS: &[&str] = &[
    "# >>> portal-agent-hooks >>>",
    "# <<< portal-agent-hooks <<<",
    "# Written by `portal-cli hooks install`; `portal-cli hooks uninstall` removes it.",
];

/// Codex's configuration file.
pub(super) struct Codex;

impl HookFile for Codex {
    const AGENT: &'static str = "codex";
    const DIR: &'static str = ".codex";
    const FILE: &'static str = "config.toml";
    const KIND: &'static str = "TOML";

    fn wanted(emitter: &Path) -> Vec<Handler> {
        EVENTS
            .iter()
            .map(|(event, state, reason)| Handler {
                event: (*event).to_owned(),
                matcher: None,
                command: command(emitter, Self::AGENT, *state, event, *reason),
            })
            .collect()
    }

    fn edit(text: &str, path: &Path, emitter: &Path) -> Result<Edit, String> {
        let unmarked: String = text
            .split_inclusive('\n')
            .filter(|l| !LEGACY_MARKERS.contains(&l.trim_end()))
            .collect();
        let mut doc: DocumentMut =
            unmarked.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
        let found = handlers(&doc);
        let trusted = trust(&doc, path);
        strip_trust(&mut doc, path);
        strip(&mut doc);
        let stripped = doc.to_string();
        install(&mut doc, emitter)?;
        let installed = doc.to_string();
        Ok(Edit { found, stripped, installed, asks_trust: true, trust: trusted })
    }

    fn note(_: HookAction) -> &'static str {
        "Codex runs new or changed hooks only after you review and trust them in its /hooks view \
         (Codex before 0.124 also needs `hooks = true` under `[features]`). With its app-server \
         daemon on (`[features] daemon_auto_start`, the default), hooks run in the environment \
         of the first terminal that started the daemon, so for several Codex terminals in Portal \
         set it to false; Portal reads Codex's own status reports either way."
    }
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

/// Codex's name for an event in its trust keys: `SessionStart` →
/// `session_start`.
fn event_label(event: &str) -> String {
    let mut out = String::with_capacity(event.len() + 4);
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Where Portal's handlers stand, as Codex's trust keys name them: (event
/// label, group index, handler index).
fn portal_positions(doc: &DocumentMut) -> Vec<(String, usize, usize)> {
    let Some(events) = doc.get("hooks").and_then(Item::as_table) else { return Vec::new() };
    let mut out = Vec::new();
    for (event, item) in events {
        let Some(groups) = item.as_array_of_tables() else { continue };
        for (g, group) in groups.iter().enumerate() {
            let handlers = group.get("hooks").and_then(Item::as_array_of_tables);
            for (h, handler) in handlers.into_iter().flat_map(ArrayOfTables::iter).enumerate() {
                if handler.get("command").and_then(Item::as_str).is_some_and(is_portal_command) {
                    out.push((event_label(event), g, h));
                }
            }
        }
    }
    out
}

/// The keys of `hooks.state` that are trust records of Portal's handlers:
/// the config file's path (as given, or resolved) and a position of one
/// of Portal's handlers.
fn portal_trust_keys(doc: &DocumentMut, config: &Path) -> Vec<String> {
    let Some(state) = doc.get("hooks").and_then(|h| h.get("state")).and_then(Item::as_table) else {
        return Vec::new();
    };
    let positions = portal_positions(doc);
    let paths: Vec<String> = std::iter::once(config.to_path_buf())
        .chain(std::fs::canonicalize(config).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    state
        .iter()
        .map(|(key, _)| key)
        .filter(|key| {
            let mut parts = key.rsplitn(4, ':');
            let (Some(h), Some(g), Some(label), Some(path)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return false;
            };
            let (Ok(g), Ok(h)) = (g.parse::<usize>(), h.parse::<usize>()) else { return false };
            paths.iter().any(|p| p == path)
                && positions.iter().any(|(l, pg, ph)| l == label && *pg == g && *ph == h)
        })
        .map(str::to_owned)
        .collect()
}

/// Whether Codex trusts Portal's handlers: `trusted` when a trust record
/// (a `trusted_hash`, not turned off) stands at every one's position,
/// `untrusted` when at none, `partly_trusted` in between; empty when none
/// is installed (`None`). The hash itself is Codex's to check: a record Portal
/// left standing is always one made for the command in place.
fn trust(doc: &DocumentMut, config: &Path) -> Option<HookTrust> {
    let wanted = portal_positions(doc).len();
    if wanted == 0 {
        return None;
    }
    let state = doc.get("hooks").and_then(|h| h.get("state"));
    let trusted = portal_trust_keys(doc, config)
        .iter()
        .filter_map(|key| state?.get(key))
        .filter(|record| {
            record.get("trusted_hash").and_then(Item::as_str).is_some()
                && record.get("enabled").and_then(Item::as_bool) != Some(false)
        })
        .count();
    Some(match trusted {
        0 => HookTrust::Untrusted,
        n if n >= wanted => HookTrust::Trusted,
        _ => HookTrust::PartlyTrusted,
    })
}

/// Removes the trust records of Portal's handlers, then a `hooks.state`
/// table left empty. Every other record stays as it was written.
fn strip_trust(doc: &mut DocumentMut, config: &Path) {
    let keys = portal_trust_keys(doc, config);
    let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_mut) else { return };
    let Some(state) = hooks.get_mut("state").and_then(Item::as_table_mut) else { return };
    for key in &keys {
        state.remove(key);
    }
    if state.is_empty() {
        hooks.remove("state");
    }
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
    for h in Codex::wanted(emitter) {
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
