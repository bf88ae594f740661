//! Tool results: the structured content (with its JSON schema, advertised as
//! each tool's `outputSchema`) and the short text an agent reads, in a file
//! per area of tools. This file holds what several areas share: the serde
//! predicates that leave a field at its usual value out, the password hint,
//! and the size below which output stays in a short text block.

mod agents;
mod process;
mod reads;
mod registry;
mod screen;
mod search;
mod waits;

pub(crate) use agents::{
    AgentChange, AgentInfo, AgentOutcome, AgentOutcomes, AgentsListed, AgentsWatched, HookStatus,
    HooksReported, MemberInfo, WorkspaceReport,
};
pub(crate) use process::{
    Done, Inspected, KilledAll, Listed, ProcessInfo, Signalled, Started, Written, inspect_text,
    list_text, process_info,
};
pub(crate) use reads::{Output, cursor_string, output, output_text, parse_cursor};
pub(crate) use registry::Program;
pub(crate) use screen::{KeysSent, Screen, screen_text, written_rows};
pub(crate) use search::{SearchHit, Searched, search_text};
pub(crate) use waits::{WaitReply, Waited, WaitedMany};

use portal_client::vocab;

/// For `skip_serializing_if`: a count at zero goes without saying.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// For `skip_serializing_if`: the input state came from the kernel (the
/// usual case, not worth a field).
#[allow(clippy::ref_option, reason = "serde's skip_serializing_if passes a reference")]
fn is_kernel(source: &Option<vocab::InputSource>) -> bool {
    matches!(source, None | Some(vocab::InputSource::Kernel))
}

/// What to do about a password prompt: hand it to a person.
/// The command names the call's host: run as `portal-cli secret 12` it
/// would type a password into this machine's process 12.
fn secret_hint(id: u64) -> String {
    format!(
        "it waits for a password: ask the person to run `{}`; never type it yourself",
        secret_command(id)
    )
}

/// `portal-cli secret ID` for the call's host.
fn secret_command(id: u64) -> String {
    portal_client::hosts::secret_command(crate::hosts::call_host().as_deref(), &id.to_string())
}

/// Output up to this long stays in a short text block: saying where it is
/// would take as many characters.
const SHORT_OUTPUT: usize = 64;
