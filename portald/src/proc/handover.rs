//! What one daemon leaves with the holder for each program it hands over,
//! so the next daemon continues it exactly: the session token, the
//! server-side read cursors, the agent record and the prompt marks, a few
//! hundred bytes (the holder's welcome carries every program's in one
//! bounded message, so the screen is rebuilt from the log instead). Written
//! at a live upgrade as the program's holder meta; a daemon that crashed
//! wrote none beyond the spawn's token, and its successor rebuilds what it
//! can from the log.

use crate::agents::AgentRecord;

/// The state carried across a handover (JSON in the holder's meta).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Carried {
    /// The program's session token (hooks authenticate with it).
    #[serde(default)]
    pub(crate) token: Option<String>,
    /// Whether the rest was written by a handover (a spawn writes the
    /// token alone).
    #[serde(default)]
    pub(crate) handed_over: bool,
    /// The server-side "read new" cursors per stream.
    #[serde(default)]
    pub(crate) cursors: Option<[u64; 3]>,
    /// The agent record.
    #[serde(default)]
    pub(crate) agent: Option<AgentRecord>,
    /// Shell-integration prompt marks seen.
    #[serde(default)]
    pub(crate) prompt_marks: u64,
    /// Sequence number of the last OSC 3008 record.
    #[serde(default)]
    pub(crate) last_osc_seq: Option<u64>,
}

impl Carried {
    /// Parses a holder meta; what cannot be read is an empty carry (the
    /// program is still adopted, as after a crash).
    pub(crate) fn parse(meta: &str) -> Self {
        serde_json::from_str(meta).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "unreadable handover state; continuing as after a crash");
            Self::default()
        })
    }

    /// The JSON left with the holder.
    pub(crate) fn to_meta(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_meta_is_a_carry_with_the_token_alone() {
        let c = Carried::parse(r#"{"token":"abc"}"#);
        assert_eq!(c.token.as_deref(), Some("abc"));
        assert!(!c.handed_over);
        assert!(c.cursors.is_none());
    }

    #[test]
    fn a_handover_round_trips() {
        let c = Carried {
            token: Some("t".into()),
            handed_over: true,
            cursors: Some([1, 2, 3]),
            agent: None,
            prompt_marks: 4,
            last_osc_seq: Some(9),
        };
        let back = Carried::parse(&c.to_meta());
        assert_eq!(back.cursors, Some([1, 2, 3]));
        assert_eq!((back.prompt_marks, back.last_osc_seq, back.handed_over), (4, Some(9), true));
    }
}
