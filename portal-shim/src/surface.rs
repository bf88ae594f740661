//! Which tools this server offers: the groups chosen with `--tools` and the
//! capability tier chosen with `--tier`. A tool outside them is not listed,
//! and a call to it is refused with a message that says why and what would
//! allow it.

use std::collections::BTreeSet;

use crate::catalog::{Group, Kind, ToolId};

/// Environment variable naming the tool groups (same syntax as `--tools`).
pub(crate) const ENV_TOOLS: &str = "PORTAL_TOOLS";

/// Environment variable naming the tier (same values as `--tier`).
pub(crate) const ENV_TIER: &str = "PORTAL_TIER";

/// How much the client may change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Tier {
    /// Only tools that change nothing: lists, reads, screens, waits.
    ReadOnly,
    /// Everything but tools that end programs or delete what Portal keeps
    /// (kill, kill_all, signal, clear, cleanup).
    NoKill,
    /// Every tool.
    #[default]
    Full,
}

impl Tier {
    fn name(self) -> &'static str {
        match self {
            Tier::ReadOnly => "read-only",
            Tier::NoKill => "no-kill",
            Tier::Full => "full",
        }
    }

    fn allows(self, kind: Kind) -> bool {
        match self {
            Tier::Full => true,
            Tier::NoKill => kind != Kind::Destructive,
            Tier::ReadOnly => matches!(kind, Kind::ReadOnly | Kind::Cursor),
        }
    }
}

/// The tools a server offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Surface {
    groups: BTreeSet<Group>,
    tier: Tier,
}

impl Default for Surface {
    fn default() -> Self {
        Self { groups: Group::ALL.into_iter().collect(), tier: Tier::Full }
    }
}

impl Surface {
    /// The groups in `spec` (comma-separated group names, or `all`) at
    /// `tier`. An unknown name is an error that lists the known ones.
    pub(crate) fn new(spec: &str, tier: Tier) -> Result<Self, String> {
        let mut groups = BTreeSet::new();
        for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if word.eq_ignore_ascii_case("all") {
                groups.extend(Group::ALL);
                continue;
            }
            let Some(g) = Group::ALL.into_iter().find(|g| g.name().eq_ignore_ascii_case(word))
            else {
                return Err(format!(
                    "unknown tool group {word:?}: use a comma-separated list of {}, or all",
                    Group::ALL.map(Group::name).join(", ")
                ));
            };
            groups.insert(g);
        }
        if groups.is_empty() {
            return Err(format!(
                "no tool group given: use a comma-separated list of {}, or all",
                Group::ALL.map(Group::name).join(", ")
            ));
        }
        Ok(Self { groups, tier })
    }

    /// Whether the server offers `tool`.
    pub(crate) fn offers(&self, tool: ToolId) -> bool {
        self.groups.contains(&tool.group()) && self.tier.allows(tool.kind())
    }

    /// The tools offered, in listing order.
    pub(crate) fn tools(&self) -> impl Iterator<Item = ToolId> + '_ {
        ToolId::ALL.into_iter().filter(|t| self.offers(*t))
    }

    /// What the instructions add when the server is limited: the advice
    /// there names tools this server may not offer.
    pub(crate) fn note(&self) -> Option<String> {
        if *self == Self::default() {
            return None;
        }
        let groups: Vec<&str> = self.groups.iter().map(|g| g.name()).collect();
        Some(format!(
            "This server offers only the tools it lists (groups: {}; tier: {}); skip advice about the others.",
            groups.join(", "),
            self.tier.name()
        ))
    }

    /// Why a call to `tool`, which this server does not offer, is refused.
    pub(crate) fn refusal(&self, tool: ToolId) -> String {
        let name = tool.name();
        if !self.groups.contains(&tool.group()) {
            format!(
                "Error: {name} is not offered by this Portal server: its tool group {:?} is not enabled (--tools / {ENV_TOOLS}).\nUse the tools it lists, or ask the person to enable the group.",
                tool.group().name()
            )
        } else {
            format!(
                "Error: {name} is not allowed: this Portal server runs at tier {:?} (--tier / {ENV_TIER}), which leaves it out.\nUse the tools it lists, or ask the person to do this step.",
                self.tier.name()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_tiers_choose_tools() {
        let all = Surface::default();
        assert_eq!(all.tools().count(), ToolId::ALL.len());

        let read_only = Surface::new("all", Tier::ReadOnly).unwrap();
        for t in read_only.tools() {
            assert!(matches!(t.kind(), Kind::ReadOnly | Kind::Cursor), "{}", t.name());
        }
        assert!(read_only.offers(ToolId::ProcessList));
        assert!(read_only.offers(ToolId::ProcessWait));
        assert!(!read_only.offers(ToolId::ProcessStart));
        assert!(!read_only.offers(ToolId::ProgramRecord));

        let no_kill = Surface::new("process,waits", Tier::NoKill).unwrap();
        assert!(no_kill.offers(ToolId::ProcessStart));
        assert!(no_kill.offers(ToolId::ProcessRun));
        for gone in [
            ToolId::ProcessKill,
            ToolId::ProcessKillAll,
            ToolId::ProcessSignal,
            ToolId::ProcessClear,
            ToolId::ProcessCleanup,
            ToolId::AgentList,
        ] {
            assert!(!no_kill.offers(gone), "{}", gone.name());
        }
        assert!(no_kill.refusal(ToolId::ProcessKill).contains("no-kill"));
        assert!(no_kill.refusal(ToolId::AgentList).contains("\"agents\""));
    }

    #[test]
    fn unknown_groups_are_named() {
        let err = Surface::new("process,agnets", Tier::Full).unwrap_err();
        assert!(err.contains("\"agnets\"") && err.contains("registry"), "{err}");
        assert!(Surface::new(" , ", Tier::Full).is_err());
        assert_eq!(Surface::new("ALL", Tier::Full).unwrap(), Surface::default());
    }
}
