//! The names of every state, status, reason and source that crosses a
//! boundary (daemon, shim, CLI), defined once. Each is an enum whose
//! serde name, JSON Schema value, text (`as_str`) and parse are the same
//! literal, and which converts to and from its wire enum exhaustively, so
//! a name cannot drift between the daemon's reports, the shim's results and
//! the CLI's tables and `--json`.

use portal_proto::v1 as pb;

/// Declares one vocabulary: the enum with its names, `ALL`, `as_str`,
/// `parse`, `Display` and `FromStr`.
macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$variant),+];

            /// The value's name.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// The value named `name`; `None` for any other text.
            #[must_use]
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == name)
            }
        }

        /// A plain list of the names, inline: schemas are paid for in
        /// tokens on every turn of an agent.
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($text),+] })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

vocabulary! {
    /// A process's lifecycle status.
    Status {
        /// The program is running.
        Running = "running",
        /// It ended by itself.
        Exited = "exited",
        /// It was killed through Portal.
        Killed = "killed",
        /// Its idle timeout killed it.
        TimedOut = "timed_out",
        /// The daemon stopped it on shutdown.
        Stopped = "stopped",
        /// It ran under an earlier daemon and its fate is unknown.
        Lost = "lost",
        /// Its holder died, and it with it.
        HolderLost = "holder_lost",
        /// Not said (an older daemon).
        Unknown = "unknown",
    }
}

vocabulary! {
    /// Why a wait ended.
    WaitReason {
        /// The needle appeared.
        Matched = "matched",
        /// A stop pattern appeared.
        Stopped = "stopped",
        /// Output stopped for the settle time.
        Settled = "settled",
        /// The screen stopped changing.
        ScreenStable = "screen_stable",
        /// The shell's prompt came back.
        Prompt = "prompt",
        /// The process ended.
        Exited = "exited",
        /// The time ran out.
        Timeout = "timeout",
        /// The program waits for input.
        InputRequested = "input_requested",
        /// The program waits for a password.
        AwaitingSecret = "awaiting_secret",
        /// Not said.
        Unknown = "unknown",
    }
}

vocabulary! {
    /// Whether a program waits for input.
    InputState {
        /// Working or printing.
        Running = "running",
        /// Blocked reading its input: it waits for you.
        AwaitingInput = "awaiting_input",
        /// The same with echo off: a password.
        AwaitingSecret = "awaiting_secret",
        /// Quiet and not reading input.
        Idle = "idle",
        /// The program ended.
        Exited = "exited",
        /// Not known.
        Unknown = "unknown",
    }
}

vocabulary! {
    /// What decided an input state.
    InputSource {
        /// The kernel: the blocked system call.
        Kernel = "kernel",
        /// Quiet output with the cursor after a prompt (a guess).
        Heuristic = "heuristic",
        /// The kernel and a prompt drawn again, for event-loop programs.
        KernelPrompt = "kernel_prompt",
        /// Nothing decided it.
        None = "none",
    }
}

// AgentState and AgentSource also accept the names earlier daemons wrote
// into the metadata they hand to their successor at a live upgrade (the
// variants' names), so an upgrade from one keeps every agent's state.

vocabulary! {
    /// A coding agent's state.
    AgentState {
        /// Working on a turn.
        #[serde(alias = "Running")]
        Running = "running",
        /// Paused for a person or an orchestrator.
        #[serde(alias = "AwaitingInput")]
        AwaitingInput = "awaiting_input",
        /// Finished its turn.
        #[serde(alias = "Done")]
        Done = "done",
        /// Alive with no task.
        #[serde(alias = "Idle")]
        Idle = "idle",
        /// The agent process is gone.
        #[serde(alias = "Exited")]
        Exited = "exited",
        /// No usable signal yet.
        #[serde(alias = "Unknown")]
        Unknown = "unknown",
    }
}

vocabulary! {
    /// Where an agent's state came from.
    AgentSource {
        /// A hook report over the socket.
        #[serde(alias = "Hook")]
        Hook = "hook",
        /// A report in the terminal's output (OSC 3008, OSC 7501).
        #[serde(alias = "Osc")]
        Osc = "osc",
        /// A guess from bells and notifications.
        #[serde(alias = "Heuristic")]
        Heuristic = "heuristic",
        /// Exact process facts.
        #[serde(alias = "Lifecycle")]
        Lifecycle = "lifecycle",
    }
}

vocabulary! {
    /// How one agent's wait ended.
    AgentWaitOutcome {
        /// The state was reached.
        Reached = "reached",
        /// The time ran out.
        Timeout = "timeout",
        /// The agent exited.
        Exited = "exited",
        /// The terminal is gone.
        Vanished = "vanished",
        /// Nothing ever reported an agent in that terminal.
        NotAnAgent = "not_an_agent",
        /// The wait was stopped.
        Stopped = "stopped",
    }
}

vocabulary! {
    /// An agent's hook file, as `agent_hooks` reports it.
    HookStatus {
        /// Portal's hooks are there and current.
        Installed = "installed",
        /// Portal's hooks are there, from an older Portal.
        Outdated = "outdated",
        /// The agent is there; Portal's hooks are not.
        Absent = "absent",
        /// The agent was not found on this machine.
        NotDetected = "not_detected",
    }
}

vocabulary! {
    /// Whether Codex trusts Portal's installed hooks (it runs a hook only
    /// once the user approved it).
    HookTrust {
        /// Every hook approved.
        Trusted = "trusted",
        /// Some approved.
        PartlyTrusted = "partly_trusted",
        /// None approved.
        Untrusted = "untrusted",
    }
}

vocabulary! {
    /// A stream of a process.
    Stream {
        /// What was written to its input.
        Stdin = "stdin",
        /// Its output (all of a terminal's).
        Stdout = "stdout",
        /// Its error output (pipes only).
        Stderr = "stderr",
    }
}

impl AgentState {
    /// Every state a client may name, most urgent first.
    pub const ATTENTION: [Self; 6] =
        [Self::AwaitingInput, Self::Done, Self::Running, Self::Idle, Self::Unknown, Self::Exited];

    /// States in which a send is allowed by default.
    pub const READY: [Self; 3] = [Self::AwaitingInput, Self::Done, Self::Idle];

    /// Higher is more urgent.
    #[must_use]
    pub fn attention(self) -> usize {
        Self::ATTENTION.len()
            - Self::ATTENTION.iter().position(|s| *s == self).unwrap_or(Self::ATTENTION.len())
    }

    /// The short label in tallies ("wait:1 done:2 run:3").
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::AwaitingInput => "wait",
            Self::Done => "done",
            Self::Running => "run",
            Self::Idle => "idle",
            Self::Exited => "exit",
            Self::Unknown => "?",
        }
    }
}

/// One wire enum and its vocabulary, converted both ways exhaustively.
macro_rules! wire {
    ($vocab:ident, $wire:ident, unspecified => $fallback:ident, { $($v:ident),+ $(,)? }) => {
        impl From<pb::$wire> for $vocab {
            fn from(w: pb::$wire) -> Self {
                match w {
                    $(pb::$wire::$v => Self::$v,)+
                    pb::$wire::Unspecified => Self::$fallback,
                }
            }
        }

        impl From<$vocab> for pb::$wire {
            fn from(v: $vocab) -> Self {
                match v {
                    $($vocab::$v => Self::$v,)+
                    #[allow(unreachable_patterns, reason = "the fallback may be a wire value too")]
                    _ => Self::Unspecified,
                }
            }
        }
    };
}

wire!(Status, Status, unspecified => Unknown,
    { Running, Exited, Killed, TimedOut, Stopped, Lost, HolderLost });
wire!(WaitReason, WaitReason, unspecified => Unknown, {
    Matched, Stopped, Settled, ScreenStable, Prompt, Exited, Timeout, InputRequested,
    AwaitingSecret,
});
wire!(InputState, InputState, unspecified => Unknown,
    { Running, AwaitingInput, AwaitingSecret, Idle, Exited });
wire!(InputSource, InputSource, unspecified => None, { Kernel, Heuristic, KernelPrompt });
wire!(AgentState, AgentState, unspecified => Unknown,
    { Running, AwaitingInput, Done, Idle, Exited, Unknown });
wire!(AgentSource, AgentSource, unspecified => Lifecycle, { Hook, Osc, Heuristic, Lifecycle });
wire!(AgentWaitOutcome, AgentWaitOutcome, unspecified => Stopped,
    { Reached, Timeout, Exited, Vanished, NotAnAgent, Stopped });
wire!(Stream, Stream, unspecified => Stdout, { Stdin, Stdout, Stderr });

impl Stream {
    /// The stream a wire value names (unset reads as stdout, a terminal's
    /// one output).
    #[must_use]
    pub fn of(v: i32) -> Self {
        pb::Stream::try_from(v).map_or(Self::Stdout, Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value's text, serde name and parse are one: what the shim's
    /// results and the CLI's `--json` write is what they and the daemon read.
    fn round_trips<T>(
        all: &[T],
        text: impl Fn(T) -> &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) where
        T: Copy + PartialEq + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    {
        for &v in all {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", text(v)));
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), v);
            assert_eq!(parse(text(v)), Some(v));
        }
    }

    #[test]
    fn every_name_round_trips_through_serde_and_parse() {
        round_trips(Status::ALL, Status::as_str, Status::parse);
        round_trips(WaitReason::ALL, WaitReason::as_str, WaitReason::parse);
        round_trips(InputState::ALL, InputState::as_str, InputState::parse);
        round_trips(InputSource::ALL, InputSource::as_str, InputSource::parse);
        round_trips(AgentState::ALL, AgentState::as_str, AgentState::parse);
        round_trips(AgentSource::ALL, AgentSource::as_str, AgentSource::parse);
        round_trips(AgentWaitOutcome::ALL, AgentWaitOutcome::as_str, AgentWaitOutcome::parse);
        round_trips(HookStatus::ALL, HookStatus::as_str, HookStatus::parse);
        round_trips(HookTrust::ALL, HookTrust::as_str, HookTrust::parse);
        round_trips(Stream::ALL, Stream::as_str, Stream::parse);
        assert_eq!(AgentState::parse("waiting"), None);
    }

    /// Every wire value has a name, and every name but the stand-ins for an
    /// unset value goes back to its wire value.
    #[test]
    fn the_wire_converts_both_ways() {
        for &s in Status::ALL {
            if s != Status::Unknown {
                assert_eq!(Status::from(pb::Status::from(s)), s);
            }
        }
        for &s in AgentState::ALL {
            assert_eq!(AgentState::from(pb::AgentState::from(s)), s);
        }
        for &s in AgentWaitOutcome::ALL {
            assert_eq!(AgentWaitOutcome::from(pb::AgentWaitOutcome::from(s)), s);
        }
        assert_eq!(Stream::of(0), Stream::Stdout);
        assert_eq!(Stream::of(pb::Stream::Stderr.into()), Stream::Stderr);
        assert_eq!(AgentState::ATTENTION.len(), AgentState::ALL.len());
    }

    /// The schema lists the names: a client sees an enum, not a string.
    #[test]
    fn the_schema_lists_the_values() {
        let schema = serde_json::to_value(schemars::schema_for!(WaitReason)).unwrap();
        let text = schema.to_string();
        for r in WaitReason::ALL {
            assert!(text.contains(&format!("\"{}\"", r.as_str())), "{text}");
        }
    }

    #[test]
    fn agent_states_written_by_earlier_daemons_at_an_upgrade_still_read() {
        // Earlier daemons handed their successor the variants' names.
        let old: AgentState = serde_json::from_str("\"AwaitingInput\"").unwrap();
        assert_eq!(old, AgentState::AwaitingInput);
        let old: AgentSource = serde_json::from_str("\"Hook\"").unwrap();
        assert_eq!(old, AgentSource::Hook);
        // What is written is the one name.
        assert_eq!(serde_json::to_string(&old).unwrap(), "\"hook\"");
        // The text parse (requests, the log) stays strict.
        assert_eq!(AgentState::parse("AwaitingInput"), None);
    }
}
