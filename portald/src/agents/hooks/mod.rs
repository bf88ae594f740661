//! Installing Portal's hooks into Claude Code and Codex, so agents report
//! their own state through `portal-cli emit`. What every agent's file shares
//! (reports, errors, the hook command, atomic writes, status by meaning, the
//! [`file::HookFile`] trait) is in `file.rs`; each agent's file format is
//! its own module: [`claude`] (JSON edited by span) and [`codex`] (TOML
//! through a format-preserving editor).
//!
//! Common rules: Portal's entries are recognised by their command; the
//! user's and the agent's own entries are never touched; install is
//! idempotent and uninstall removes only Portal's; status compares what the
//! file means, not its bytes; a file that does not parse is never
//! overwritten; writes are atomic (temp file, fsync, rename).

mod claude;
mod codex;
mod file;
mod json;

pub(crate) use file::{HookAction, HookError, Report};

use std::path::Path;

/// Which agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HookAgent {
    /// Claude Code.
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
}

/// Runs one action for one agent under `home`.
pub(crate) fn run(
    agent: HookAgent,
    action: HookAction,
    dry_run: bool,
    home: &Path,
    emitter: &Path,
) -> Result<Report, HookError> {
    match agent {
        HookAgent::Claude => file::run::<claude::Claude>(action, dry_run, home, emitter),
        HookAgent::Codex => file::run::<codex::Codex>(action, dry_run, home, emitter),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portal_client::vocab::{HookStatus, HookTrust};

    const EMITTER: &str = "/opt/portal/portal-cli";

    const SETTINGS: &str = r#"{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(ls:*)"]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          { "type": "command", "command": "say done" }
        ]
      }
    ],
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [{ "type": "command", "command": "/usr/local/bin/audit" }]
      }
    ]
  },
  "env": { "FOO": "bar" }
}
"#;

    fn home_with(claude: Option<&str>, codex: Option<&str>) -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        if let Some(c) = claude {
            std::fs::create_dir_all(home.path().join(".claude")).unwrap();
            std::fs::write(home.path().join(".claude/settings.json"), c).unwrap();
        }
        if let Some(c) = codex {
            std::fs::create_dir_all(home.path().join(".codex")).unwrap();
            std::fs::write(home.path().join(".codex/config.toml"), c).unwrap();
        }
        home
    }

    fn round_trip(agent: HookAgent, file: &Path, original: &str) {
        let home = file.ancestors().nth(2).unwrap();
        let emitter = Path::new(EMITTER);
        assert_eq!(
            run(agent, HookAction::Status, false, home, emitter).unwrap().status,
            HookStatus::Absent
        );
        run(agent, HookAction::Install, false, home, emitter).unwrap();
        let installed = std::fs::read_to_string(file).unwrap();
        assert_ne!(installed, original);
        assert_eq!(
            run(agent, HookAction::Status, false, home, emitter).unwrap().status,
            HookStatus::Installed
        );
        // Idempotent.
        let again = run(agent, HookAction::Install, false, home, emitter).unwrap();
        assert_eq!(again.change, "nothing to change");
        assert_eq!(std::fs::read_to_string(file).unwrap(), installed);
        // A moved emitter is outdated, and reinstalling replaces, not adds.
        let moved = Path::new("/new/place/portal-cli");
        assert_eq!(
            run(agent, HookAction::Status, false, home, moved).unwrap().status,
            HookStatus::Outdated
        );
        run(agent, HookAction::Install, false, home, moved).unwrap();
        assert_eq!(
            std::fs::read_to_string(file).unwrap().matches("portal-cli emit").count(),
            installed.matches("portal-cli emit").count()
        );
        run(agent, HookAction::Uninstall, false, home, moved).unwrap();
        assert_eq!(
            std::fs::read_to_string(file).unwrap(),
            original,
            "uninstall must restore the file byte for byte"
        );
    }

    #[test]
    fn claude_round_trips_byte_for_byte() {
        let home = home_with(Some(SETTINGS), None);
        let file = home.path().join(".claude/settings.json");
        round_trip(HookAgent::Claude, &file, SETTINGS);
        run(HookAgent::Claude, HookAction::Install, false, home.path(), Path::new(EMITTER))
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            "/opt/portal/portal-cli emit done --name claude --event Stop"
        );
        assert_eq!(v["hooks"]["Notification"][0]["matcher"], "permission_prompt");
        assert_eq!(
            v["hooks"]["Notification"][1]["hooks"][0]["command"],
            "/opt/portal/portal-cli emit awaiting_input --name claude --event Notification --reason idle_reminder"
        );
        assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    }

    #[test]
    fn claude_files_without_hooks_and_empty_files() {
        for original in ["{\n  \"theme\": \"dark\"\n}\n", "{}", "{\n}\n", "{\"a\":1,\"hooks\":{}}"]
        {
            let home = home_with(Some(original), None);
            let file = home.path().join(".claude/settings.json");
            let emitter = Path::new(EMITTER);
            run(HookAgent::Claude, HookAction::Install, false, home.path(), emitter).unwrap();
            let text = std::fs::read_to_string(&file).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(
                v["hooks"]["SessionEnd"][0]["hooks"][0]["command"],
                "/opt/portal/portal-cli emit exited --name claude --event SessionEnd"
            );
            run(HookAgent::Claude, HookAction::Uninstall, false, home.path(), emitter).unwrap();
            let after = std::fs::read_to_string(&file).unwrap();
            if original.starts_with("{\n  \"theme\"") {
                assert_eq!(after, original);
            } else {
                // Degenerate files (no members, or an empty hooks object,
                // which is pruned with ours) come back valid and clean.
                let v: serde_json::Value =
                    serde_json::from_str(&after).unwrap_or_else(|e| panic!("{e}: {after}"));
                assert!(v.get("hooks").is_none() && !after.contains("portal-cli"), "{after}");
            }
        }
    }

    #[test]
    fn installed_groups_follow_the_files_indentation() {
        let home = home_with(Some(SETTINGS), None);
        run(HookAgent::Claude, HookAction::Install, false, home.path(), Path::new(EMITTER))
            .unwrap();
        let text = std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap();
        assert!(text.contains("    \"Stop\": [\n      {\n        \"hooks\": [\n          { \"type\": \"command\", \"command\": \"say done\" }\n        ]\n      },\n      {\n        \"hooks\": [\n          {\n"), "{text}");
    }

    #[test]
    fn malformed_files_are_left_alone() {
        let home = home_with(Some("{ \"a\": 1,, }"), None);
        let err =
            run(HookAgent::Claude, HookAction::Install, false, home.path(), Path::new(EMITTER))
                .unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        assert_eq!(
            std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap(),
            "{ \"a\": 1,, }"
        );
    }

    #[test]
    fn dry_run_writes_nothing() {
        let home = home_with(Some(SETTINGS), None);
        let r = run(HookAgent::Claude, HookAction::Install, true, home.path(), Path::new(EMITTER))
            .unwrap();
        assert!(r.change.starts_with("would have"));
        assert!(r.preview.contains("portal-cli emit done"));
        assert_eq!(
            std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap(),
            SETTINGS
        );
    }

    #[test]
    fn codex_round_trips_byte_for_byte() {
        let original = "model = \"o4\"\n\n[features]\nweb = true\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"notify-send done\"\n";
        let home = home_with(None, Some(original));
        let file = home.path().join(".codex/config.toml");
        round_trip(HookAgent::Codex, &file, original);
        let r = run(HookAgent::Codex, HookAction::Status, false, home.path(), Path::new(EMITTER))
            .unwrap();
        assert!(r.note.contains("trust") && r.note.contains("hooks = true"), "{}", r.note);
        assert_eq!(r.trust, None, "nothing of Portal's is installed");
    }

    #[test]
    fn claude_rewriting_its_settings_in_its_own_layout_changes_nothing() {
        let home = home_with(Some(SETTINGS), None);
        let file = home.path().join(".claude/settings.json");
        let emitter = Path::new(EMITTER);
        run(HookAgent::Claude, HookAction::Install, false, home.path(), emitter).unwrap();
        // Claude Code saves the same data in its own layout.
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let rewritten = serde_json::to_string_pretty(&v).unwrap();
        std::fs::write(&file, &rewritten).unwrap();
        let status = run(HookAgent::Claude, HookAction::Status, false, home.path(), emitter);
        assert_eq!(status.unwrap().status, HookStatus::Installed);
        let again = run(HookAgent::Claude, HookAction::Install, false, home.path(), emitter);
        assert_eq!(again.unwrap().change, "nothing to change");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), rewritten);
        run(HookAgent::Claude, HookAction::Uninstall, false, home.path(), emitter).unwrap();
        let after: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let before: serde_json::Value = serde_json::from_str(SETTINGS).unwrap();
        assert_eq!(after, before, "uninstall leaves the user's settings, in meaning");
    }

    /// A config in which Codex recorded its trust in a hook the first
    /// installer wrote (inside its block), in the form Codex writes it:
    /// keyed by the config's path, the event in snake case and the
    /// handler's position.
    fn codex_with_trust(config: &Path) -> String {
        format!(
            "model = \"o4\"\n\n\
            # >>> portal-agent-hooks >>>\n\
            # Written by `portal-cli hooks install`; `portal-cli hooks uninstall` removes it.\n\
            [[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\n\
            command = \"/opt/portal/portal-cli emit done --name codex --event Stop\"\n\
            [hooks.state.\"{}:stop:0:0\"]\ntrusted_hash = \"sha256:abc\"\n\
            # <<< portal-agent-hooks <<<\n",
            config.display()
        )
    }

    #[test]
    fn codex_hooks_replaced_by_an_install_lose_the_trust_made_for_the_old_ones() {
        let home = home_with(None, Some(""));
        let file = home.path().join(".codex/config.toml");
        std::fs::write(&file, codex_with_trust(&file)).unwrap();
        let emitter = Path::new(EMITTER);
        let status = run(HookAgent::Codex, HookAction::Status, false, home.path(), emitter);
        let status = status.unwrap();
        assert_eq!(
            (status.status, status.trust),
            (HookStatus::Outdated, Some(HookTrust::Trusted)),
            "one event of the set"
        );
        let r = run(HookAgent::Codex, HookAction::Install, false, home.path(), emitter).unwrap();
        assert_eq!(r.trust, Some(HookTrust::Untrusted), "Codex asks again for a changed hook");
        let text = std::fs::read_to_string(&file).unwrap();
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        assert!(doc["hooks"].get("state").is_none(), "{text}");
        assert_eq!(doc["model"].as_str(), Some("o4"));
        assert!(!text.contains(">>> portal-agent-hooks"), "{text}");
        let stop = doc["hooks"]["Stop"].as_array_of_tables().unwrap();
        assert_eq!(stop.len(), 1, "replaced, not added: {text}");
        assert_eq!(
            stop.get(0).unwrap()["hooks"][0]["command"].as_str(),
            Some("/opt/portal/portal-cli emit done --name codex --event Stop"),
        );
    }

    /// Portal's hooks stand after the user's own (the user's `Stop` group
    /// is first), so these are the positions Codex's trust keys name.
    const PORTAL_POSITIONS: &[&str] = &[
        "session_start:0:0",
        "user_prompt_submit:0:0",
        "permission_request:0:0",
        "post_tool_use:0:0",
        "stop:1:0",
        "interrupt:0:0",
        "session_end:0:0",
    ];

    /// What Codex's `/hooks` view appends when a hook is approved.
    fn approve(config: &Path, position: &str, extra: &str) -> String {
        format!(
            "\n[hooks.state.\"{}:{position}\"]\ntrusted_hash = \"sha256:{}\"\n{extra}",
            config.display(),
            position.len()
        )
    }

    #[test]
    fn codex_trust_is_reported_and_uninstall_removes_only_portals_records() {
        let home = home_with(None, Some(""));
        let file = home.path().join(".codex/config.toml");
        // The user's own hook, trusted, and a record of another layer's
        // hook at a position Portal's will take in this file.
        let original = format!(
            "model = \"o4\"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\n\
             command = \"notify-send done\"\n\n# approved last week\n\
             [hooks.state.\"{0}:stop:0:0\"]\ntrusted_hash = \"sha256:user\"\n\n\
             [hooks.state.\"/etc/codex/config.toml:stop:1:0\"]\nenabled = false\n",
            file.display()
        );
        std::fs::write(&file, &original).unwrap();
        let emitter = Path::new(EMITTER);
        let status = |home: &Path| {
            let r = run(HookAgent::Codex, HookAction::Status, false, home, emitter).unwrap();
            (r.status, r.trust)
        };
        assert_eq!(status(home.path()), (HookStatus::Absent, None));
        let r = run(HookAgent::Codex, HookAction::Install, false, home.path(), emitter).unwrap();
        assert_eq!(r.trust, Some(HookTrust::Untrusted));
        assert_eq!(status(home.path()), (HookStatus::Installed, Some(HookTrust::Untrusted)));
        // Codex records the person's approval of some of them...
        let mut trusted = std::fs::read_to_string(&file).unwrap();
        for p in &PORTAL_POSITIONS[..3] {
            trusted.push_str(&approve(&file, p, ""));
        }
        std::fs::write(&file, &trusted).unwrap();
        assert_eq!(status(home.path()), (HookStatus::Installed, Some(HookTrust::PartlyTrusted)));
        // ...then of all, one of them turned off in its view...
        for p in &PORTAL_POSITIONS[3..] {
            trusted.push_str(&approve(
                &file,
                p,
                if *p == "stop:1:0" { "enabled = false # in its view\n" } else { "" },
            ));
        }
        std::fs::write(&file, &trusted).unwrap();
        assert_eq!(status(home.path()), (HookStatus::Installed, Some(HookTrust::PartlyTrusted)));
        // ...and back on.
        let trusted = trusted.replace("enabled = false # in its view\n", "");
        std::fs::write(&file, &trusted).unwrap();
        assert_eq!(
            status(home.path()),
            (HookStatus::Installed, Some(HookTrust::Trusted)),
            "{trusted}"
        );
        let again = run(HookAgent::Codex, HookAction::Install, false, home.path(), emitter);
        assert_eq!(again.unwrap().change, "nothing to change", "its records are kept");
        // Uninstall takes Portal's hooks and their records, and leaves the
        // rest byte for byte, the other layer's record at `stop:1:0` too.
        run(HookAgent::Codex, HookAction::Uninstall, false, home.path(), emitter).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    }

    #[test]
    fn codex_files_that_do_not_parse_are_left_alone() {
        let broken = "model = \"o4\n[[hooks.Stop]\n";
        let home = home_with(None, Some(broken));
        let err =
            run(HookAgent::Codex, HookAction::Install, false, home.path(), Path::new(EMITTER))
                .unwrap_err();
        assert!(err.to_string().contains("not valid TOML"), "{err}");
        let file = home.path().join(".codex/config.toml");
        assert_eq!(std::fs::read_to_string(file).unwrap(), broken);
    }

    #[test]
    fn undetected_agents_are_reported() {
        let home = tempfile::tempdir().unwrap();
        let r = run(HookAgent::Codex, HookAction::Status, false, home.path(), Path::new(EMITTER))
            .unwrap();
        assert_eq!(r.status, HookStatus::NotDetected);
    }
}
