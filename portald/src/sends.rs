//! Sending prompts to agents: idempotency, readiness, and one atomic
//! dispatch per send.
//!
//! Order of a send, per agent:
//! 1. **Dedup first.** With a key, a live ledger entry for (process, key)
//!    answers at once (`deduplicated`); a send with the same key still in
//!    flight is waited for instead of typed again.
//! 2. **Readiness.** Unless told not to, wait until the agent is in a ready
//!    state; if it does not get there, nothing is typed and the key is
//!    released so a retry really retries.
//! 3. **Never before the screen is up, never into a dialog.** A full-screen
//!    agent (Claude Code, Codex) gets its prompt once it turned bracketed
//!    paste on: its start hook says `idle` before it reads keys.
//!    The screen is looked at right before typing:
//!    a permission request or another menu on it (or a hook's permission
//!    request) means nothing is typed and the dialog's text is returned,
//!    since a prompt would answer it (`1` approves, `p` approves for good).
//!    Nor into a password prompt (a line read with echo off).
//! 4. **Dispatch through the actor** as one request: the text (a bracketed
//!    paste when the program enabled it), a short gap,
//!    then Enter as its own write. The actor handles one request at a time,
//!    so sends and other writes to a process never interleave, whichever
//!    client they come from.
//! 5. **Record only successful sends** in the ledger, for [`LEDGER_TTL`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::agents::{AgentEvent, AgentState, Agents, WaitOutcome, dialog, wait_one};
use crate::proc::{ProcError, ProcHandle, ProcId};

/// How long a successful send is remembered for retries with its key.
pub(crate) const LEDGER_TTL: Duration = Duration::from_secs(600);

/// Gap between a prompt and its Enter: TUIs built on Ink take text and a
/// carriage return arriving in one burst as a pasted newline.
pub(crate) const ENTER_GAP: Duration = Duration::from_millis(40);

/// What a send asks for.
#[derive(Clone, Debug)]
pub(crate) struct SendSpec {
    /// The prompt.
    pub(crate) text: String,
    /// Wait for a ready state first.
    pub(crate) wait_ready: bool,
    /// The ready states.
    pub(crate) ready_states: Vec<AgentState>,
    /// Press Enter after the text.
    pub(crate) enter: bool,
    /// Idempotency key.
    pub(crate) key: Option<String>,
    /// Readiness deadline.
    pub(crate) timeout: Duration,
}

/// One agent's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SendResult {
    /// Typed (now or earlier with the same key).
    pub(crate) sent: bool,
    /// An earlier call with the same key typed it.
    pub(crate) deduplicated: bool,
    /// The readiness outcome.
    pub(crate) outcome: WaitOutcome,
    /// Why not sent.
    pub(crate) detail: Option<String>,
    /// The dialog the agent shows, when that is why nothing was typed.
    pub(crate) dialog: Option<String>,
}

enum Entry {
    InFlight(watch::Receiver<Option<SendResult>>),
    Done { until: Instant, result: SendResult },
}

/// Remembered sends by (process, key).
#[derive(Default)]
pub(crate) struct Ledger(Mutex<HashMap<(ProcId, String), Entry>>);

enum Claim {
    Mine(watch::Sender<Option<SendResult>>),
    Answer(SendResult),
    Wait(watch::Receiver<Option<SendResult>>),
}

impl Ledger {
    fn claim(&self, id: ProcId, key: &str) -> Claim {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        map.retain(|_, e| !matches!(e, Entry::Done { until, .. } if *until <= now));
        match map.get(&(id, key.to_owned())) {
            Some(Entry::Done { result, .. }) => Claim::Answer(result.clone()),
            Some(Entry::InFlight(rx)) => Claim::Wait(rx.clone()),
            None => {
                let (tx, rx) = watch::channel(None);
                map.insert((id, key.to_owned()), Entry::InFlight(rx));
                Claim::Mine(tx)
            }
        }
    }

    fn finish(
        &self,
        id: ProcId,
        key: &str,
        tx: &watch::Sender<Option<SendResult>>,
        result: &SendResult,
    ) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if result.sent {
            map.insert(
                (id, key.to_owned()),
                Entry::Done { until: Instant::now() + LEDGER_TTL, result: result.clone() },
            );
        } else {
            map.remove(&(id, key.to_owned()));
        }
        drop(map);
        tx.send_replace(Some(result.clone()));
    }
}

/// The bytes of a prompt: a bracketed paste when the program enabled
/// bracketed paste, so it takes the text as one paste and the Enter that
/// follows as a key (Codex takes a burst of typed characters for a paste
/// and an Enter right after it for a newline); otherwise the text, with
/// newlines as Enter on a PTY.
async fn prompt_bytes(h: &ProcHandle, text: &str) -> Result<Bytes, ProcError> {
    if h.screen.is_none() {
        return Ok(Bytes::from(text.to_owned()));
    }
    let snap = h.snapshot().await?;
    Ok(Bytes::from(if snap.bracketed_paste {
        format!("\x1b[200~{text}\x1b[201~")
    } else {
        text.replace("\r\n", "\r").replace('\n', "\r")
    }))
}

/// Agents whose input is a full-screen UI that reads keys only once it is
/// drawn. Their start hooks fire before that (Claude Code's `SessionStart`
/// came 300 ms before it turned raw mode on, and a prompt typed then was
/// left in its input box without Enter).
const TUI_AGENTS: &[&str] = &["claude", "codex"];

/// Waits (until `deadline`) for a full-screen agent to have drawn its UI,
/// which it announces by turning bracketed paste on. Other programs are
/// taken as they are.
async fn ui_drawn(agents: &Agents, h: &ProcHandle, deadline: Instant) -> bool {
    let tui =
        agents.get(h.id()).and_then(|r| r.kind).is_some_and(|k| TUI_AGENTS.contains(&k.as_str()));
    if !tui || h.screen.is_none() {
        return true;
    }
    let Ok(mut live) = h.attach().await else { return false };
    loop {
        match h.snapshot().await {
            Ok(snap) if snap.bracketed_paste => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
        // Parks until more output arrives (or the process ends).
        match tokio::time::timeout_at(deadline, live.events.recv()).await {
            Ok(
                Ok(crate::proc::LiveEvent::Chunk(_))
                | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)),
            ) => {}
            _ => return false,
        }
    }
}

/// The dialog the agent waits on, if any: its screen looked at now (not the
/// last sweep's), or a hook's permission request the screen has not shown.
async fn open_dialog(agents: &Agents, h: &ProcHandle) -> Option<String> {
    let found = match h.screen.as_ref() {
        Some(_) => h.snapshot().await.ok().and_then(|snap| dialog::find(&snap.lines)),
        None => None,
    };
    let record = agents.apply(h.id(), AgentEvent::Dialog(found))?;
    record.in_dialog().then(|| {
        record.dialog.clone().unwrap_or_else(|| {
            format!(
                "the agent reported a {} request",
                record.reason.as_deref().unwrap_or("permission")
            )
        })
    })
}

/// Sends to one agent.
pub(crate) async fn send_one(
    agents: &Agents,
    ledger: &Ledger,
    h: &ProcHandle,
    spec: &SendSpec,
    cancel: &tokio_util::sync::CancellationToken,
) -> SendResult {
    let id = h.id();
    let deadline = Instant::now() + spec.timeout;
    let claim = loop {
        let Some(key) = &spec.key else { break None };
        match ledger.claim(id, key) {
            Claim::Mine(tx) => break Some((key.clone(), tx)),
            Claim::Answer(r) => return SendResult { deduplicated: true, ..r },
            Claim::Wait(mut rx) => {
                // Another call with this key is in flight: its outcome is ours,
                // unless it did not send, in which case try again.
                let done = tokio::time::timeout_at(deadline, rx.wait_for(Option::is_some)).await;
                let result = match done {
                    Ok(Ok(r)) => r.clone(),
                    _ => None,
                };
                match result {
                    Some(r) if r.sent => return SendResult { deduplicated: true, ..r },
                    Some(_) => {}
                    None => {
                        return SendResult {
                            sent: false,
                            deduplicated: false,
                            outcome: WaitOutcome::Timeout,
                            detail: Some("another send with this key is still in flight".into()),
                            dialog: None,
                        };
                    }
                }
            }
        }
    };
    let result = dispatch(agents, h, spec, deadline, cancel).await;
    if let Some((key, tx)) = claim {
        ledger.finish(id, &key, &tx, &result);
    }
    result
}

async fn dispatch(
    agents: &Agents,
    h: &ProcHandle,
    spec: &SendSpec,
    deadline: Instant,
    cancel: &tokio_util::sync::CancellationToken,
) -> SendResult {
    let outcome = if spec.wait_ready {
        let at_input = |_: crate::proc::ProcId| h.waits_for_input();
        wait_one(agents, h.id(), &spec.ready_states, deadline, cancel, &at_input).await
    } else {
        WaitOutcome::Reached
    };
    if outcome != WaitOutcome::Reached {
        let detail = match outcome {
            WaitOutcome::NotAnAgent => {
                "it is not an agent (nothing in it reported or was recognised as one): type into it as into any program"
            }
            WaitOutcome::Exited => "the agent exited",
            WaitOutcome::Vanished => "the process was cleaned up",
            WaitOutcome::Stopped => "the daemon is shutting down",
            WaitOutcome::Reached | WaitOutcome::Timeout => {
                "the agent did not reach a ready state in time"
            }
        };
        return SendResult {
            sent: false,
            deduplicated: false,
            outcome,
            detail: Some(detail.into()),
            dialog: None,
        };
    }
    if !ui_drawn(agents, h, deadline).await {
        return SendResult {
            sent: false,
            deduplicated: false,
            outcome: WaitOutcome::Timeout,
            detail: Some(
                "the agent's screen was not up yet (it never turned bracketed paste on)".into(),
            ),
            dialog: None,
        };
    }
    if h.secret_prompt().await {
        return SendResult {
            sent: false,
            deduplicated: false,
            outcome,
            detail: Some(
                "the terminal asks for a secret (a line with echo off): a prompt typed now \
                 would be taken as the password; hand it over with `portal-cli secret`, then send"
                    .into(),
            ),
            dialog: None,
        };
    }
    if let Some(dialog) = open_dialog(agents, h).await {
        return SendResult {
            sent: false,
            deduplicated: false,
            outcome,
            detail: Some(
                "the agent shows a dialog (a permission request or a menu); a prompt typed now \
                 would answer it: answer it first (keys), then send"
                    .into(),
            ),
            dialog: Some(dialog),
        };
    }
    let mut parts = Vec::new();
    match prompt_bytes(h, &spec.text).await {
        Ok(b) if !b.is_empty() => parts.push(b),
        Ok(_) => {}
        Err(e) => {
            return SendResult {
                sent: false,
                deduplicated: false,
                outcome,
                detail: Some(e.to_string()),
                dialog: None,
            };
        }
    }
    if spec.enter {
        parts.push(Bytes::from_static(if h.screen.is_some() { b"\r" } else { b"\n" }));
    }
    match h.write_parts(parts, ENTER_GAP).await {
        Ok(()) => {
            agents.apply(h.id(), AgentEvent::Sent);
            SendResult { sent: true, deduplicated: false, outcome, detail: None, dialog: None }
        }
        Err(e) => SendResult {
            sent: false,
            deduplicated: false,
            outcome,
            detail: Some(e.to_string()),
            dialog: None,
        },
    }
}
