//! Daemon errors → tool results with `isError: true`, the message, and a
//! one-line hint saying what to do next. Never a protocol error, never a crash.

use tonic::Code;

use crate::link::CallError;

/// The text of a failed tool call.
pub(crate) fn error_text(err: &CallError, id: Option<u64>) -> String {
    match err {
        CallError::Unreachable(e) => format!(
            "Error: {e}\nportald is not reachable and could not be started; see the shim's stderr log."
        ),
        CallError::Status(s) => {
            let msg = s.message();
            if s.code() == Code::NotFound
                && let Some(id) = id.filter(|_| msg.starts_with("no process with id"))
            {
                return format!(
                    "Error: Process {id} not found\nCall process_list to see the ids that exist."
                );
            }
            format!("Error: {msg}\n{}", hint(s.code(), msg))
        }
    }
}

fn hint(code: Code, msg: &str) -> &'static str {
    match code {
        Code::NotFound => "Call process_list to see the ids and names that exist.",
        Code::InvalidArgument => "Fix the argument named in the message and call again.",
        Code::FailedPrecondition if msg.contains("is not running") => {
            "The process has ended; read its output (process_read) or start a new one."
        }
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
        let err = CallError::Status(tonic::Status::not_found("no process with id 7"));
        assert_eq!(
            error_text(&err, Some(7)),
            "Error: Process 7 not found\nCall process_list to see the ids that exist."
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
            let text = error_text(&CallError::Status(tonic::Status::new(code, "boom")), None);
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("Error: boom"));
            assert!(lines.next().is_some_and(|h| h.ends_with('.')), "{text}");
        }
    }
}
