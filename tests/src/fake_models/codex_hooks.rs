//! Trusting the hooks of a Codex `config.toml` the way Codex's `/hooks`
//! review does, so Codex runs them without asking: finding the command
//! hooks and computing Codex's trust hash of each.

use std::io;
use std::path::Path;

use serde_json::Value;

use super::sha256::sha256;

/// Marks every command hook in the Codex `config` file (its `config.toml`,
/// as `[[hooks.<Event>]]` / `[[hooks.<Event>.hooks]]` tables, the form
/// `portal-cli hooks install` writes) as trusted, by appending the
/// `[hooks.state."<config>:<event>:<group>:<handler>"] trusted_hash` records
/// Codex's `/hooks` review would write. Without them Codex opens a "Hooks
/// need review" dialog at start and runs none of them. Returns how many
/// hooks it trusted.
///
/// # Errors
/// When the file cannot be read or written.
pub fn codex_trust_hooks(config: &Path) -> io::Result<usize> {
    let text = std::fs::read_to_string(config)?;
    let mut records = String::new();
    let hooks = codex_hooks(&text);
    for h in &hooks {
        let _ = std::fmt::Write::write_fmt(
            &mut records,
            format_args!(
                "\n[hooks.state.\"{}:{}:{}:{}\"]\ntrusted_hash = \"{}\"\n",
                config.display(),
                h.event,
                h.group,
                h.handler,
                codex_hook_hash(h)
            ),
        );
    }
    let sep = if text.ends_with('\n') || text.is_empty() { "" } else { "\n" };
    std::fs::write(config, format!("{text}{sep}{records}"))?;
    Ok(hooks.len())
}

/// One command hook found in a Codex `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CodexHook {
    /// The event in snake case (`user_prompt_submit`), as trust keys name it.
    event: String,
    group: usize,
    handler: usize,
    matcher: Option<String>,
    command: String,
    timeout: Option<u64>,
}

/// The command hooks of a `config.toml` written in array-of-tables form.
fn codex_hooks(text: &str) -> Vec<CodexHook> {
    let mut hooks: Vec<CodexHook> = Vec::new();
    let mut groups: Vec<(String, usize)> = Vec::new();
    // (event, group, matcher) of the open group; whether a handler is open.
    let mut group: Option<(String, usize, Option<String>)> = None;
    let mut in_handler = false;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("[[hooks.").and_then(|l| l.strip_suffix("]]")) {
            if let Some(event) = name.strip_suffix(".hooks") {
                let Some((open, index, matcher)) = &group else { continue };
                if open != event {
                    continue;
                }
                let handler =
                    hooks.iter().filter(|h| h.event == snake(event) && h.group == *index).count();
                hooks.push(CodexHook {
                    event: snake(event),
                    group: *index,
                    handler,
                    matcher: matcher.clone(),
                    command: String::new(),
                    timeout: None,
                });
                in_handler = true;
            } else {
                let index = match groups.iter_mut().find(|(e, _)| e == name) {
                    Some((_, n)) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        groups.push((name.to_owned(), 0));
                        0
                    }
                };
                group = Some((name.to_owned(), index, None));
                in_handler = false;
            }
            continue;
        }
        if line.starts_with('[') {
            group = None;
            in_handler = false;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let (key, value) = (key.trim(), value.trim());
        match (key, in_handler, hooks.last_mut(), group.as_mut()) {
            ("command", true, Some(h), _) => h.command = toml_string(value).unwrap_or_default(),
            ("timeout", true, Some(h), _) => h.timeout = value.parse().ok(),
            ("matcher", false, _, Some(g)) => g.2 = toml_string(value),
            _ => {}
        }
    }
    hooks
}

/// `UserPromptSubmit` → `user_prompt_submit`.
fn snake(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A TOML basic string's value (`"a \"b\""` → `a "b"`).
fn toml_string(value: &str) -> Option<String> {
    let inner = value.strip_prefix('"')?.rsplit_once('"')?.0;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Codex's trust hash of a hook: SHA-256 of the compact, key-sorted JSON
/// `{"event_name","hooks":[{"async","command","timeout","type"}],"matcher"?}`
/// with Codex's default timeout filled in (1 s for `session_end` and
/// `interrupt`, else 600 s).
fn codex_hook_hash(h: &CodexHook) -> String {
    let default = if matches!(h.event.as_str(), "session_end" | "interrupt") { 1 } else { 600 };
    let mut identity = format!(
        r#"{{"event_name":{},"hooks":[{{"async":false,"command":{},"timeout":{},"type":"command"}}]"#,
        Value::from(h.event.as_str()),
        Value::from(h.command.as_str()),
        h.timeout.unwrap_or(default)
    );
    if let Some(m) = &h.matcher {
        identity += &format!(",\"matcher\":{}", Value::from(m.as_str()));
    }
    identity.push('}');
    let digest: String = sha256(identity.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_trust_hashes_match_what_codex_wrote() {
        // Hooks trusted through Codex 0.171's own `/hooks` dialog.
        let config = "[features]\nhooks = true\n\n[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"/tmp/hook.sh /tmp/x2/hooks.log PreToolUse\"\n[[hooks.SessionEnd]]\n[[hooks.SessionEnd.hooks]]\ntype = \"command\"\ncommand = \"/tmp/hook.sh /tmp/x2/hooks.log SessionEnd\"\n\n[tui]\nx = 1\n";
        let hooks = codex_hooks(config);
        assert_eq!(hooks.len(), 2);
        assert_eq!(
            (hooks[0].event.as_str(), hooks[0].group, hooks[0].handler),
            ("pre_tool_use", 0, 0)
        );
        assert_eq!(
            codex_hook_hash(&hooks[0]),
            "sha256:6e5665c1f963f42be95958332849deaaa8400ba3d00cc76ce93ca57ee4b78fb4"
        );
        assert_eq!(
            codex_hook_hash(&hooks[1]),
            "sha256:074ed4b39ec27457e157cc6f089001662a2efe182b8adac73abecc445f7ec824"
        );
    }
}
