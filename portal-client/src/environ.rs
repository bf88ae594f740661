//! The environment a client starts programs in: its own, sent with the
//! start, so a program runs in the caller's world (an activated venv, a
//! project's `PATH`, the credentials its agent was given), not in whatever
//! environment the daemon happened to be started with.

use std::collections::HashMap;

use portal_proto::v1 as pb;

/// Where a program's environment starts, as a client offers the choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnvFrom {
    /// This client's own environment (the default).
    #[default]
    Caller,
    /// The daemon's environment.
    Daemon,
    /// Nothing but the overrides given (and a default `PATH`).
    Clean,
}

impl std::str::FromStr for EnvFrom {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("{s:?} is not caller, daemon or clean"))
    }
}

impl EnvFrom {
    /// Every value, in the order help shows them.
    pub const ALL: [Self; 3] = [Self::Caller, Self::Daemon, Self::Clean];

    /// Its name in flags and tool arguments.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Caller => "caller",
            Self::Daemon => "daemon",
            Self::Clean => "clean",
        }
    }
}

/// This process's environment, as a start request carries it. Variables
/// that are not UTF-8 cannot cross the wire and are left out; so is what
/// one daemon hands the next at an upgrade, and the caller's choice of
/// host (a program that runs `portal-cli` talks to the portald it runs
/// under, which sets its `PORTAL_SOCKET`).
#[must_use]
pub fn own() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !NOT_SENT.contains(&k.as_str()))
        .collect()
}

/// Variables of the caller's that are not the program's business.
const NOT_SENT: [&str; 2] = [HANDOVER_ENV, crate::hosts::ENV_HOST];

/// The variable a daemon hands its successor its descriptors in; never a
/// program's business.
pub const HANDOVER_ENV: &str = "PORTAL_HANDOVER";

/// Sets where `req`'s program's environment starts. `Caller` sends this
/// process's environment; a request for another machine must not
/// (`remote`): this machine's environment means nothing there and may hold
/// its secrets, so `Caller` is refused for it.
///
/// # Errors
/// `Caller` with `remote`: the message says what to use instead.
pub fn apply(req: &mut pb::StartRequest, from: EnvFrom, remote: bool) -> Result<(), String> {
    match (from, remote) {
        (EnvFrom::Caller, true) => {
            return Err(
                "this machine's environment is not sent to another host: start from the remote portald's (daemon) or a clean one, and give what the program needs as overrides".into(),
            );
        }
        (EnvFrom::Caller, false) => {
            req.env_from = pb::EnvFrom::Caller.into();
            req.caller_env = own();
        }
        (EnvFrom::Daemon, _) => req.env_from = pb::EnvFrom::Daemon.into(),
        (EnvFrom::Clean, _) => req.env_from = pb::EnvFrom::Clean.into(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_sends_its_own_environment_to_this_machine_only() {
        let mut req = pb::StartRequest::default();
        apply(&mut req, EnvFrom::Caller, false).unwrap_or_default();
        assert_eq!(req.env_from(), pb::EnvFrom::Caller);
        assert_eq!(
            req.caller_env.get("PATH").map(String::as_str),
            std::env::var("PATH").ok().as_deref()
        );
        let mut remote = pb::StartRequest::default();
        assert!(apply(&mut remote, EnvFrom::Caller, true).is_err());
        assert!(remote.caller_env.is_empty(), "nothing of this machine's goes to another");
        apply(&mut remote, EnvFrom::Clean, true).unwrap_or_default();
        assert_eq!(remote.env_from(), pb::EnvFrom::Clean);
    }
}
