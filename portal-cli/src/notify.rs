//! Telling a person that an agent waits for them: a desktop notification
//! (`notify-send` on Linux, `osascript` on macOS), else the terminal's
//! bell. One per state change; the command runs detached, so a slow
//! notification daemon never holds the watch up.

use portal_client::vocab;
use portal_proto::v1 as pb;

/// Whether `t` is an agent starting to wait for a person, and what to say.
pub(crate) fn message(t: &pb::AgentTransition) -> Option<(String, String)> {
    let who = if t.name.is_empty() { format!("agent {}", t.id) } else { t.name.clone() };
    let title = match t.after() {
        pb::AgentState::AwaitingInput => format!("{who} (process {}) needs you", t.id),
        pb::AgentState::Done => format!("{who} (process {}) is done", t.id),
        _ => return None,
    };
    let body = if t.reason.is_empty() {
        format!("was {}", vocab::AgentState::from(t.before()).as_str())
    } else {
        t.reason.clone()
    };
    Some((title, body))
}

/// Raises the notification, or rings the bell when no notifier exists.
pub(crate) fn raise(title: &str, body: &str) {
    if !try_raise(title, body) {
        eprint!("\x07[{title}: {body}]\r\n");
    }
}

/// Raises a desktop notification; false when this machine has no notifier
/// (the caller rings the bell its own way).
pub(crate) fn try_raise(title: &str, body: &str) -> bool {
    let mut cmd = if cfg!(target_os = "macos") {
        let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut c = std::process::Command::new("osascript");
        c.arg("-e").arg(format!(
            "display notification \"{}\" with title \"Portal\" subtitle \"{}\"",
            quote(body),
            quote(title)
        ));
        c
    } else {
        let mut c = std::process::Command::new("notify-send");
        c.args(["--app-name=Portal", title, body]);
        c
    };
    let spawned = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped on a thread of its own: the watch goes on meanwhile.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            true
        }
        Err(_) => false,
    }
}
