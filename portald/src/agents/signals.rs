//! Decoding agent signals: OSC records in a PTY's output (Portal's OSC 3008,
//! the agents' own OSC 7501 program status, notifications and progress),
//! hook payloads, and recognising an agent from a process's command line.
//!
//! OSC 3008 is shared with systemd's context records, so a body counts only
//! with Portal's namespace field `portal=1` and a valid `state=`; values are
//! percent-encoded (RFC 3986 unreserved characters literal) so a name cannot
//! forge a field. Unknown keys are ignored; the last of a repeated key wins.

use portal_client::osc3008::percent_decode;

use crate::agents::reducer::{AgentEvent, PROGRAM_STATUS_EVENT};
use crate::domain::{AgentState, Source};

/// A decoded Portal OSC 3008 record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OscReport {
    /// The event to apply.
    pub(crate) event: AgentEvent,
    /// The emitter's sequence number, to drop replays.
    pub(crate) seq: Option<u64>,
}

/// Interprets one OSC body from a PTY. `None` for anything that is not an
/// agent signal (including foreign OSC 3008 records).
pub(crate) fn from_osc(body: &[u8]) -> Option<OscReport> {
    let text = std::str::from_utf8(body).ok()?;
    let mut parts = text.split(';');
    match parts.next()? {
        "3008" => portal_3008(parts),
        "9" => {
            let rest: Vec<&str> = parts.collect();
            if rest.first() == Some(&"4") {
                // ConEmu / Windows Terminal progress: 9;4;<state>;<percent>.
                let st: u32 = rest.get(1)?.parse().ok()?;
                Some(OscReport { event: AgentEvent::Progress(st != 0), seq: None })
            } else {
                Some(OscReport { event: AgentEvent::Notify(rest.join(";")), seq: None })
            }
        }
        "7501" => program_status(&parts.collect::<Vec<_>>().join(";")),
        "777" => {
            let rest: Vec<&str> = parts.collect();
            (rest.first() == Some(&"notify"))
                .then(|| OscReport { event: AgentEvent::Notify(rest[1..].join(";")), seq: None })
        }
        _ => None,
    }
}

fn portal_3008<'a>(fields: impl Iterator<Item = &'a str>) -> Option<OscReport> {
    let mut portal = None;
    let mut state = None;
    let mut name = None;
    let mut event = None;
    let mut sid = None;
    let mut seq = None;
    let mut reason = None;
    for field in fields {
        let Some((k, v)) = field.split_once('=') else { continue };
        let v = percent_decode(v)?;
        match k {
            "portal" => portal = Some(v),
            "state" => state = Some(v),
            "name" => name = Some(v),
            "event" => event = Some(v),
            "sid" => sid = Some(v),
            "seq" => seq = v.parse().ok(),
            "reason" => reason = Some(v),
            _ => {}
        }
    }
    if portal.as_deref() != Some("1") {
        return None;
    }
    let Some(state) = state.as_deref().and_then(AgentState::parse) else {
        tracing::debug!("OSC 3008 with portal=1 but no valid state; ignored");
        return None;
    };
    let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty());
    Some(OscReport {
        event: AgentEvent::Report {
            source: Source::Osc,
            state,
            reason: nonempty(reason),
            name: nonempty(name),
            event: nonempty(event),
            session_id: nonempty(sid),
        },
        seq,
    })
}

/// OSC 7501, a program's own status (`state=working:app=codex`,
/// `state=blocked:app=claude-code:kind=permission:msg=<base64>`): fields
/// joined by `:`. Exact, and attributed by the terminal it arrived on.
/// Codex reports unasked; Claude Code once the terminal answered its probe
/// (the screen does, see `screen.rs`).
fn program_status(body: &str) -> Option<OscReport> {
    let mut state = None;
    let mut app = None;
    let mut kind = None;
    for field in body.split(':') {
        let Some((k, v)) = field.split_once('=') else { continue };
        match k {
            "state" => state = Some(v),
            "app" => app = Some(v),
            "kind" => kind = Some(v),
            _ => {}
        }
    }
    let (state, reason) = match state? {
        "working" => (AgentState::Running, None),
        "done" => (AgentState::Done, None),
        "idle" => (AgentState::Idle, None),
        "blocked" => (AgentState::AwaitingInput, Some(kind.unwrap_or("permission").to_owned())),
        // `clear` comes at exit, which the process's end says exactly.
        _ => return None,
    };
    let name = app.map(|a| a.strip_suffix("-code").unwrap_or(a).to_owned());
    Some(OscReport {
        event: AgentEvent::Report {
            source: Source::Osc,
            state,
            reason,
            name,
            event: Some(PROGRAM_STATUS_EVENT.to_owned()),
            session_id: None,
        },
        seq: None,
    })
}

/// What a hook's stdin JSON adds to a report: the agent's session id, and
/// for a notification without an explicit reason, whether it is a
/// permission prompt or Claude's idle reminder.
pub(crate) fn from_hook_payload(
    payload: &str,
    event: &str,
    reason: Option<String>,
) -> (Option<String>, Option<String>) {
    let json: Option<serde_json::Value> = serde_json::from_str(payload).ok();
    let field =
        |k: &str| json.as_ref().and_then(|j| j.get(k)).and_then(|v| v.as_str()).map(str::to_owned);
    let session = field("session_id");
    let reason = reason.or_else(|| {
        if event != "Notification" {
            return None;
        }
        match field("notification_type").as_deref() {
            Some("idle_prompt") => Some("idle_reminder".to_owned()),
            Some("permission_prompt") => Some("permission".to_owned()),
            Some(other) => Some(other.to_owned()),
            None => field("message").map(|m| {
                if m.to_ascii_lowercase().contains("permission") {
                    "permission".to_owned()
                } else {
                    "idle_reminder".to_owned()
                }
            }),
        }
    });
    (session, reason)
}

/// Agents Portal recognises by name.
const KNOWN_AGENTS: &[&str] =
    &["claude", "codex", "aider", "gemini", "opencode", "goose", "amp", "copilot"];

/// Interpreters whose script argument names the program.
const INTERPRETERS: &[&str] =
    &["node", "nodejs", "bun", "deno", "python", "python3", "sh", "bash", "zsh", "dash"];

/// Interpreter options whose argument is code rather than a script file.
const INLINE_SCRIPT: &[&str] = &["-c", "-e", "-p", "--eval", "--print"];

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Recognises a coding agent from a command line (and the executable's
/// path): its name and kind.
pub(crate) fn identify(argv: &[String], exe: Option<&str>) -> Option<(String, String)> {
    let known = |s: &str| {
        let b = basename(s);
        let b = b.strip_suffix(".js").unwrap_or(b);
        KNOWN_AGENTS.iter().find(|k| **k == b).map(|k| ((*k).to_owned(), (*k).to_owned()))
    };
    if let Some(exe) = exe
        && exe.contains("/claude/versions/")
    {
        return Some(("claude".into(), "claude".into()));
    }
    let first = argv.first()?;
    if let Some(hit) = known(first) {
        return Some(hit);
    }
    if INTERPRETERS.contains(&basename(first)) {
        let mut args = argv[1..].iter();
        while let Some(a) = args.next() {
            if a == "-m" {
                return args.next().and_then(|m| known(m));
            }
            // An inline script (`sh -c '... exec claude'`, `node -e`) is
            // code, not a file naming the program: what it runs shows up as
            // its own process, or as this one after an exec.
            if INLINE_SCRIPT.contains(&a.as_str()) {
                return None;
            }
            if a.starts_with('-') {
                continue;
            }
            return known(a);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_state(body: &str) -> Option<AgentState> {
        match from_osc(body.as_bytes())?.event {
            AgentEvent::Report { state, .. } => Some(state),
            _ => None,
        }
    }

    #[test]
    fn osc_7501_program_status_from_claude_and_codex() {
        assert_eq!(report_state("7501;state=working:app=codex"), Some(AgentState::Running));
        assert_eq!(report_state("7501;state=done:app=codex"), Some(AgentState::Done));
        assert_eq!(report_state("7501;state=idle:app=claude-code"), Some(AgentState::Idle));
        let blocked = from_osc(b"7501;state=blocked:app=claude-code:kind=permission:msg=YXBw");
        match blocked.map(|r| r.event) {
            Some(AgentEvent::Report { state, reason, name, .. }) => {
                assert_eq!(state, AgentState::AwaitingInput);
                assert_eq!(reason.as_deref(), Some("permission"));
                assert_eq!(name.as_deref(), Some("claude"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(report_state("7501;state=clear"), None);
        assert_eq!(report_state("7501;?"), None);
    }

    #[test]
    fn osc_3008_needs_the_portal_namespace_and_a_valid_state() {
        assert_eq!(report_state("3008;portal=1;state=done;name=claude"), Some(AgentState::Done));
        // systemd's context records and libtmux's bare records are not ours.
        assert_eq!(report_state("3008;start=abc;user=root;hostname=h;type=shell"), None);
        assert_eq!(report_state("3008;state=idle"), None);
        assert_eq!(report_state("3008;portal=1;state=bogus"), None);
        assert_eq!(report_state("3008;portal=1"), None);
        assert_eq!(report_state("3008;portal=2;state=done"), None);
        assert_eq!(
            report_state("3008;portal=1;state=idle;state=running"),
            Some(AgentState::Running)
        );
    }

    #[test]
    fn encoded_values_cannot_forge_fields() {
        let osc =
            portal_client::osc3008::encode("done", &[("name", "x;state=idle"), ("event", "Stop")]);
        let body = osc.trim_start_matches("\x1b]").trim_end_matches("\x1b\\");
        let r = from_osc(body.as_bytes()).unwrap();
        match r.event {
            AgentEvent::Report { state, name, .. } => {
                assert_eq!(state, AgentState::Done);
                assert_eq!(name.as_deref(), Some("x;state=idle"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn notifications_and_progress() {
        assert_eq!(
            from_osc(b"9;Claude needs your permission").unwrap().event,
            AgentEvent::Notify("Claude needs your permission".into())
        );
        assert_eq!(from_osc(b"9;4;1;50").unwrap().event, AgentEvent::Progress(true));
        assert_eq!(from_osc(b"9;4;0;0").unwrap().event, AgentEvent::Progress(false));
        assert_eq!(
            from_osc(b"777;notify;Codex;Done").unwrap().event,
            AgentEvent::Notify("Codex;Done".into())
        );
        assert_eq!(from_osc(b"0;title"), None);
        assert_eq!(from_osc(b"133;D;0"), None);
    }

    #[test]
    fn hook_payloads() {
        let (sid, reason) = from_hook_payload(
            r#"{"session_id":"abc","notification_type":"idle_prompt"}"#,
            "Notification",
            None,
        );
        assert_eq!((sid.as_deref(), reason.as_deref()), (Some("abc"), Some("idle_reminder")));
        let (_, reason) = from_hook_payload(
            r#"{"message":"Claude needs your permission to use Bash"}"#,
            "Notification",
            None,
        );
        assert_eq!(reason.as_deref(), Some("permission"));
        let (_, reason) = from_hook_payload("not json", "Stop", None);
        assert_eq!(reason, None);
        let (_, reason) = from_hook_payload("{}", "Notification", Some("question".into()));
        assert_eq!(reason.as_deref(), Some("question"));
    }

    #[test]
    fn agents_are_recognised_from_their_command_lines() {
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(identify(&v(&["claude"]), None).map(|x| x.0), Some("claude".into()));
        assert_eq!(
            identify(&v(&["/usr/local/bin/codex", "--full-auto"]), None).map(|x| x.0),
            Some("codex".into())
        );
        assert_eq!(
            identify(&v(&["node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"]), None)
                .map(|x| x.0),
            Some("codex".into())
        );
        assert_eq!(
            identify(&v(&["python3", "-m", "aider"]), None).map(|x| x.0),
            Some("aider".into())
        );
        assert_eq!(
            identify(&v(&["/bin/sh", "/tmp/x/claude"]), None).map(|x| x.0),
            Some("claude".into())
        );
        assert_eq!(
            identify(&v(&["x"]), Some("/home/u/.local/share/claude/versions/2.1.0")).map(|x| x.0),
            Some("claude".into())
        );
        assert_eq!(identify(&v(&["vim", "claude"]), None), None);
        assert_eq!(identify(&v(&["bash"]), None), None);
        assert_eq!(identify(&v(&["sh", "-c", "read go; exec /tmp/claude"]), None), None);
        assert_eq!(identify(&v(&["node", "-e", "require('/x/codex')"]), None), None);
    }
}
