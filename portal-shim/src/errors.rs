//! Daemon errors → tool results with `isError: true`, the message, and a
//! one-line hint saying what to do next. Never a protocol error, never a crash.

use portal_client::error::ClientError;
use portal_proto::v1::ErrorKind;
use tonic::Code;

use crate::catalog::ToolId;
use crate::link::CallError;

/// The text of a failed tool call; `host` names the remote host the call
/// went to (`None`: this machine).
pub(crate) fn error_text(err: &CallError, id: Option<u64>, host: Option<&str>) -> String {
    match (err, host) {
        (CallError::Status(s), Some(h)) if s.code() == Code::NotFound => {
            return format!(
                "Error: {} (on host {h})\nCall process_list with host \"{h}\" to see the ids and names there; ids are per host.",
                s.message()
            );
        }
        (CallError::Interrupted(s), Some(h)) => {
            return format!(
                "Error: the connection to host {h} broke while this call was in flight (every program there runs on): {}\nIt may or may not have taken effect: look with process_read_new (or process_list) before repeating it.",
                s.message()
            );
        }
        _ => {}
    }
    match err {
        CallError::Unreachable(
            e @ (ClientError::HostUnreachable { .. }
            | ClientError::AuthRefused { .. }
            | ClientError::RemoteMissing { .. }
            | ClientError::VersionSkew { .. }
            | ClientError::RemoteFailed { .. }),
        ) => format!(
            "Error: {e}\nThe programs on that host are untouched; once the connection works, call again."
        ),
        CallError::Unreachable(e) => format!(
            "Error: {e}\nportald is not reachable and could not be started; see the shim's stderr log."
        ),
        CallError::Status(s) => {
            let kind = portal_proto::detail(s).kind();
            if kind == ErrorKind::NoSuchProcess
                && let Some(id) = id
            {
                return format!(
                    "Error: Process {id} not found\nCall process_list to see the ids that exist."
                );
            }
            format!("Error: {}\n{}", s.message(), hint(s.code(), kind))
        }
        CallError::Interrupted(s) => format!(
            "Error: portald restarted while this call was in flight (a live upgrade or a crash; every program runs on): {}\nIt may or may not have taken effect: look with process_read_new (or process_list) before repeating it.",
            s.message()
        ),
    }
}

/// The daemon names a bad field as its request does (`invalid until.needle:
/// ...`); the model wrote the tool's arguments. Names that argument instead,
/// so the message says which one to fix.
pub(crate) fn in_tool_terms(tool: ToolId, text: String) -> String {
    const PREFIX: &str = "Error: invalid ";
    let Some(rest) = text.strip_prefix(PREFIX) else { return text };
    let Some((field, reason)) = rest.split_once(": ") else { return text };
    let argument = match (tool, field) {
        (ToolId::ProcessStart, f) if f.starts_with("until.") => "wait".to_owned(),
        (_, "until.needle") => "pattern".to_owned(),
        (_, f) if f.starts_with("until.") => f["until.".len()..].to_owned(),
        (_, "proc" | "proc.name") => "id".to_owned(),
        (_, "size") => "rows/cols".to_owned(),
        (_, "from") => "cursor".to_owned(),
        (_, "streams") => "source".to_owned(),
        (_, f) => f.to_owned(),
    };
    format!("{PREFIX}{argument}: {reason}")
}

/// What to do next, in the tools' terms: by the daemon's typed kind where
/// it says more than the code.
fn hint(code: Code, kind: ErrorKind) -> &'static str {
    match (code, kind) {
        (_, ErrorKind::Ended) => {
            "The process has ended; read its output (process_read) or start a new one."
        }
        (_, ErrorKind::InputPilingUp) => {
            "process_list shows which programs do not read their input; signal or kill them."
        }
        (_, ErrorKind::ResultPending) => {
            "Call process_wait on the process once portald is back: its result is still to come."
        }
        (_, ErrorKind::NotATerminal) => {
            "It runs on pipes, with no screen: read it with process_read, type with process_write."
        }
        _ => by_code(code),
    }
}

fn by_code(code: Code) -> &'static str {
    match code {
        Code::NotFound => "Call process_list to see the ids and names that exist.",
        Code::InvalidArgument => "Fix the argument named in the message and call again.",
        Code::FailedPrecondition => "process_inspect shows its current state.",
        Code::OutOfRange => "Continue from the cursor returned by the last read.",
        Code::AlreadyExists => "Pick another name, or use the existing process (process_list).",
        Code::ResourceExhausted => {
            "A limit was reached; free resources (process_cleanup) or wait, then retry."
        }
        Code::Unavailable => {
            "portald is not reachable and could not be started; see the shim's stderr log."
        }
        Code::PermissionDenied => "portald belongs to another user; check PORTAL_SOCKET.",
        _ => "portald reported an internal error; details are in its log.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_keeps_the_original_wording() {
        let detail = portal_proto::v1::ErrorDetail {
            nothing_done: false,
            kind: ErrorKind::NoSuchProcess.into(),
        };
        let err = CallError::Status(portal_proto::status(
            Code::NotFound,
            "no process with id 7",
            &detail,
        ));
        assert_eq!(
            error_text(&err, Some(7), None),
            "Error: Process 7 not found\nCall process_list to see the ids that exist."
        );
    }

    #[test]
    fn daemon_fields_are_named_as_the_tool_argument() {
        let daemon = |field: &str| format!("Error: invalid {field}: bad regex\nFix it.");
        let cases = [
            (ToolId::ProcessWait, "until.needle", "pattern"),
            (ToolId::ProcessRun, "until.stop[1]", "stop[1]"),
            (ToolId::ProcessRun, "until.settle_ms", "settle_ms"),
            (ToolId::ProcessStart, "until.needle", "wait"),
            (ToolId::ProcessStart, "size", "rows/cols"),
            (ToolId::ProcessRead, "from", "cursor"),
            (ToolId::ProcessInspect, "proc.name", "id"),
            (ToolId::ProcessStart, "cwd", "cwd"),
        ];
        for (tool, field, argument) in cases {
            assert_eq!(
                in_tool_terms(tool, daemon(field)),
                daemon(argument),
                "{field} in {}",
                tool.name()
            );
        }
        let other = "Error: Process 7 not found".to_owned();
        assert_eq!(in_tool_terms(ToolId::ProcessWait, other.clone()), other);
    }

    #[test]
    fn the_daemon_s_kind_words_the_hint_in_the_tools_terms() {
        let with = |code: Code, kind: ErrorKind, msg: &str| {
            let detail = portal_proto::v1::ErrorDetail { nothing_done: false, kind: kind.into() };
            CallError::Status(portal_proto::status(code, msg, &detail))
        };
        // Found by kind, whatever the message says.
        let gone = with(Code::NotFound, ErrorKind::NoSuchProcess, "no such thing");
        assert_eq!(
            error_text(&gone, Some(7), None),
            "Error: Process 7 not found\nCall process_list to see the ids that exist."
        );
        for (code, kind, tool) in [
            (Code::FailedPrecondition, ErrorKind::Ended, "process_read"),
            (Code::ResourceExhausted, ErrorKind::InputPilingUp, "process_list"),
            (Code::Unavailable, ErrorKind::ResultPending, "process_wait"),
            (Code::FailedPrecondition, ErrorKind::NotATerminal, "process_write"),
        ] {
            let text = error_text(&with(code, kind, "boom"), None, None);
            assert!(text.starts_with("Error: boom\n") && text.contains(tool), "{kind:?}: {text}");
        }
        // Without a detail (a status the transport made), the code decides.
        let plain = CallError::Status(tonic::Status::failed_precondition("is not running"));
        assert!(
            error_text(&plain, None, None).ends_with("process_inspect shows its current state.")
        );
    }

    #[test]
    fn every_error_has_a_hint() {
        for code in [
            Code::InvalidArgument,
            Code::FailedPrecondition,
            Code::OutOfRange,
            Code::Internal,
            Code::Unavailable,
        ] {
            let text = error_text(&CallError::Status(tonic::Status::new(code, "boom")), None, None);
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("Error: boom"));
            assert!(lines.next().is_some_and(|h| h.ends_with('.')), "{text}");
        }
    }
}
