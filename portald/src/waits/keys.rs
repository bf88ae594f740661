//! Key sends: text and key names typed in order, each its own write, a
//! short gap apart, as one request to the process.

use std::time::Duration;

use bytes::Bytes;

use crate::proc::keys::{self, CursorMode};
use crate::proc::{ProcError, ProcHandle};

/// One item of a key send.
#[derive(Clone, Debug)]
pub(crate) enum KeyItem {
    /// Literal text.
    Text(String),
    /// A key name; anything that is not one is typed as it is.
    Key(String),
}

/// Gap between the items of one key send. Applications that read their
/// input in bursts must see `Up Up Enter` as three keys: Claude Code's
/// selection dialogs took one read of them for something else and picked
/// the wrong option.
pub(crate) const KEY_GAP: Duration = Duration::from_millis(25);

/// The bytes of literal text: multi-line text as a bracketed paste when the
/// program enabled it, else with newlines as Enter on a PTY.
pub(super) fn text_bytes(text: &str, snap: Option<&crate::screen::Snapshot>) -> Bytes {
    Bytes::from(match snap {
        Some(s) if text.contains('\n') && s.bracketed_paste => format!("\x1b[200~{text}\x1b[201~"),
        Some(_) if text.contains('\n') => text.replace("\r\n", "\r").replace('\n', "\r"),
        _ => text.to_owned(),
    })
}

/// Sends text and keys in order, each as its own write, [`KEY_GAP`] apart,
/// as one request to the process (nothing else is typed in between). As
/// `tmux send-keys` does, a name in the key grammar is that key (cursor keys
/// follow the screen's application-cursor mode) and anything else is typed
/// as it is (`["Escape", ":q!", "Enter"]`); `Text` items are always literal.
///
/// # Errors
/// [`ProcError::BadKey`] for a name outside the grammar that reads as a key
/// ([`keys::looks_like_a_key`]: `F13`, `C-ab`), before anything is typed.
pub(crate) async fn send_keys(h: &ProcHandle, items: &[KeyItem]) -> Result<u64, ProcError> {
    let snap = match &h.screen {
        Some(_) => Some(h.snapshot().await?),
        None => None,
    };
    let mode = if snap.as_ref().is_some_and(|s| s.application_cursor) {
        CursorMode::Application
    } else {
        CursorMode::Normal
    };
    // Every item is checked before anything is typed: a refused name
    // leaves the program untouched.
    let mut parts: Vec<Bytes> = Vec::with_capacity(items.len());
    for item in items {
        let bytes = match item {
            KeyItem::Text(t) => text_bytes(t, snap.as_ref()),
            KeyItem::Key(k) => match keys::parse(k, mode) {
                Ok(bytes) => Bytes::from(bytes),
                Err(e) if keys::looks_like_a_key(k) => return Err(ProcError::BadKey(e)),
                Err(_) => text_bytes(k, snap.as_ref()),
            },
        };
        if !bytes.is_empty() {
            parts.push(bytes);
        }
    }
    let written = parts.iter().map(|b| b.len() as u64).sum();
    h.write_parts(parts, KEY_GAP).await?;
    Ok(written)
}
