//! Claude Code's hooks in `~/.claude/settings.json`.
//!
//! Edited in place with [`super::json`]'s spans, so everything outside
//! Portal's entries stays byte for byte as it was, and install followed by
//! uninstall gives back the original file: install first removes Portal's
//! groups (recognised by a command running `portal-cli … emit`), then
//! appends one group per event in the file's own indentation; uninstall
//! removes them with their separators and prunes event arrays and a `hooks`
//! object left empty. Status compares what the file means (parsed), since
//! Claude Code itself rewrites the file in its own layout.

use std::path::Path;

use portal_client::vocab::AgentState;

use super::file::{Edit, Handler, HookAction, HookFile, command, is_portal_command};
use super::json;

/// Claude Code events, their matchers, and the state and reason each
/// reports (its hooks reference: `PermissionRequest` fires when a
/// permission dialog is shown, `PostToolUse` once a tool ran, so an
/// approved tool is `running` again; the `Notification` matchers cover
/// versions without `PermissionRequest` and Claude's idle reminder).
pub(super) const EVENTS: &[(&str, Option<&str>, AgentState, Option<&str>)] = &[
    ("SessionStart", None, AgentState::Idle, None),
    ("UserPromptSubmit", None, AgentState::Running, None),
    ("PermissionRequest", None, AgentState::AwaitingInput, Some("permission")),
    ("PostToolUse", None, AgentState::Running, None),
    ("Notification", Some("permission_prompt"), AgentState::AwaitingInput, Some("permission")),
    ("Notification", Some("idle_prompt"), AgentState::AwaitingInput, Some("idle_reminder")),
    ("Stop", None, AgentState::Done, None),
    ("SessionEnd", None, AgentState::Exited, None),
];

/// Claude Code's settings file.
pub(super) struct Claude;

impl HookFile for Claude {
    const AGENT: &'static str = "claude";
    const DIR: &'static str = ".claude";
    const FILE: &'static str = "settings.json";
    const KIND: &'static str = "JSON";

    fn wanted(emitter: &Path) -> Vec<Handler> {
        EVENTS
            .iter()
            .map(|(event, matcher, state, reason)| Handler {
                event: (*event).to_owned(),
                matcher: matcher.map(str::to_owned),
                command: command(emitter, Self::AGENT, *state, event, *reason),
            })
            .collect()
    }

    fn edit(text: &str, _path: &Path, emitter: &Path) -> Result<Edit, String> {
        let blank = text.trim().is_empty();
        let stripped = if blank { String::new() } else { strip_claude(text)? };
        let installed = claude_install_text(&stripped, emitter)?;
        let found = if blank { Vec::new() } else { handlers(text)? };
        Ok(Edit { found, stripped, installed, asks_trust: false, trust: None })
    }

    fn note(action: HookAction) -> &'static str {
        match action {
            HookAction::Install => {
                "Claude Code reads the hooks at its next start (or /hooks to review them)."
            }
            HookAction::Status | HookAction::Uninstall => "",
        }
    }
}

/// Portal's handlers as the file has them.
fn handlers(text: &str) -> Result<Vec<Handler>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let Some(events) = v.get("hooks").and_then(serde_json::Value::as_object) else {
        return Ok(out);
    };
    for (event, groups) in events {
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group.get("matcher").and_then(serde_json::Value::as_str);
            let commands = group
                .get("hooks")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|h| h.get("command")?.as_str())
                .filter(|c| is_portal_command(c));
            for c in commands {
                out.push(Handler {
                    event: event.clone(),
                    matcher: matcher.map(str::to_owned),
                    command: c.to_owned(),
                });
            }
        }
    }
    Ok(out)
}

fn claude_group(
    emitter: &Path,
    matcher: Option<&str>,
    state: AgentState,
    event: &str,
    reason: Option<&str>,
) -> serde_json::Value {
    let handler = serde_json::json!({"type": "command", "command": command(emitter, "claude", state, event, reason)});
    match matcher {
        Some(m) => serde_json::json!({"matcher": m, "hooks": [handler]}),
        None => serde_json::json!({"hooks": [handler]}),
    }
}

/// Removes Portal's groups (and then-empty event arrays and hooks object).
fn strip_claude(text: &str) -> Result<String, String> {
    let root = json::parse(text)?;
    let json::Value::Object(members) = &root.value else {
        return Err("the top level is not an object".into());
    };
    let Some(hooks) = members.iter().position(|m| m.key == "hooks") else {
        return Ok(text.to_owned());
    };
    let json::Value::Object(events) = &members[hooks].value.value else {
        return Ok(text.to_owned());
    };
    let mut ranges = Vec::new();
    let mut emptied = Vec::new();
    for (ei, ev) in events.iter().enumerate() {
        let json::Value::Array(groups) = &ev.value.value else { continue };
        let ours: Vec<usize> = (0..groups.len()).filter(|g| is_portal_group(&groups[*g])).collect();
        if ours.is_empty() {
            continue;
        }
        if ours.len() == groups.len() {
            emptied.push(ei);
        } else {
            let spans: Vec<(usize, usize)> = groups.iter().map(|n| (n.start, n.end)).collect();
            ranges.extend(json::removal_ranges(&spans, &ours));
        }
    }
    if !events.is_empty() && emptied.len() == events.len() {
        let spans: Vec<(usize, usize)> = members.iter().map(|m| (m.start, m.value.end)).collect();
        ranges = json::removal_ranges(&spans, &[hooks]);
    } else {
        let spans: Vec<(usize, usize)> = events.iter().map(|m| (m.start, m.value.end)).collect();
        ranges.extend(json::removal_ranges(&spans, &emptied));
    }
    ranges.sort_unstable();
    let mut out = text.to_owned();
    for (a, b) in ranges.into_iter().rev() {
        out.replace_range(a..b, "");
    }
    Ok(out)
}

fn is_portal_group(group: &json::Node) -> bool {
    let json::Value::Object(fields) = &group.value else { return false };
    fields.iter().filter(|f| f.key == "hooks").any(|f| match &f.value.value {
        json::Value::Array(handlers) => handlers.iter().any(|h| match &h.value {
            json::Value::Object(hf) => hf.iter().any(|x| {
                x.key == "command"
                    && matches!(&x.value.value, json::Value::String(c) if is_portal_command(c))
            }),
            _ => false,
        }),
        _ => false,
    })
}

/// Adds Portal's groups to a file that has none.
fn claude_install_text(text: &str, emitter: &Path) -> Result<String, String> {
    let base = if text.trim().is_empty() { "{}\n".to_owned() } else { text.to_owned() };
    let root = json::parse(&base)?;
    let json::Value::Object(members) = &root.value else {
        return Err("the top level is not an object".into());
    };
    let unit = json::indent_unit(&base);
    // Portal's groups per event, in order.
    let mut wanted: Vec<(&str, Vec<serde_json::Value>)> = Vec::new();
    for (event, matcher, state, reason) in EVENTS {
        let group = claude_group(emitter, *matcher, *state, event, *reason);
        match wanted.iter_mut().find(|(e, _)| e == event) {
            Some((_, groups)) => groups.push(group),
            None => wanted.push((event, vec![group])),
        }
    }
    let mut inserts: Vec<(usize, String)> = Vec::new();
    match members.iter().find(|m| m.key == "hooks") {
        None => {
            let hooks: serde_json::Map<String, serde_json::Value> = wanted
                .into_iter()
                .map(|(e, g)| (e.to_owned(), serde_json::Value::Array(g)))
                .collect();
            let member =
                format!("\"hooks\": {}", json::pretty(&serde_json::Value::Object(hooks), &unit, 1));
            inserts.push(json::insert_entries(&base, &root, &[member], &unit, 1));
        }
        Some(h) => {
            let json::Value::Object(events) = &h.value.value else {
                return Err("\"hooks\" is not an object".into());
            };
            let mut new_members = Vec::new();
            for (event, groups) in wanted {
                let rendered: Vec<String> =
                    groups.iter().map(|g| json::pretty(g, &unit, 3)).collect();
                match events.iter().find(|e| e.key == event) {
                    Some(e) => {
                        let json::Value::Array(_) = &e.value.value else {
                            return Err(format!("hooks.{event} is not an array"));
                        };
                        inserts.push(json::insert_entries(&base, &e.value, &rendered, &unit, 3));
                    }
                    None => new_members.push(format!(
                        "\"{event}\": {}",
                        json::pretty(&serde_json::Value::Array(groups), &unit, 2)
                    )),
                }
            }
            if !new_members.is_empty() {
                inserts.push(json::insert_entries(&base, &h.value, &new_members, &unit, 2));
            }
        }
    }
    // Apply from the end so earlier offsets stay valid.
    inserts.sort_by_key(|(pos, _)| std::cmp::Reverse(*pos));
    let mut out = base;
    for (pos, s) in inserts {
        out.insert_str(pos, &s);
    }
    Ok(out)
}
