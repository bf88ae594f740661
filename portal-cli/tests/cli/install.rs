//! Putting Portal on a machine: the service files for systemd and launchd,
//! and `install` (binaries, pages and completions under a prefix, services
//! and hooks re-pointed, its next steps, and its registration with the real
//! Claude Code and Codex CLIs, which skips without them outside CI).

use std::path::{Path, PathBuf};
use std::process::Output;

use portal_tests::*;
use serde_json::Value;

use crate::common::{CLI, cli, cli_env, ok, stdout};

fn daemon_binary() -> PathBuf {
    Path::new(CLI).with_file_name("portald")
}

/// Whether `systemd-analyze verify` can judge a unit here: it must reject
/// a broken one (it cannot where no manager can be set up, as in some
/// containers, or where systemd is not installed).
fn systemd_can_verify(dir: &Path) -> Result<(), String> {
    let broken = dir.join("portal-broken.service");
    std::fs::write(&broken, "[Service]\nExecStartt=/bin/true\n").unwrap();
    let o = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&broken)
        .output()
        .map_err(|e| format!("systemd-analyze: {e}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("Unknown key") {
        Ok(())
    } else {
        Err(format!("it did not notice a broken unit: {err}"))
    }
}

#[tokio::test]
async fn service_files_for_systemd_and_launchd() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let home = test_dir();
    let home_s = home.path().to_string_lossy().into_owned();
    let daemon = std::fs::canonicalize(daemon_binary()).unwrap();
    let env = [
        ("HOME", home_s.as_str()),
        ("XDG_CONFIG_HOME", ""),
        ("PORTAL_DAEMON", daemon.to_str().unwrap()),
    ];
    let dry =
        ok(&cli_env(&s, &["service", "install", "--kind", "systemd", "--dry-run"], &env).await);
    assert!(dry.contains(&format!("ExecStart={}\n", daemon.display())), "{dry}");
    assert!(dry.contains("[Install]\nWantedBy=default.target"), "{dry}");
    let unit = home.path().join(".config/systemd/user/portald.service");
    assert!(!unit.exists(), "dry run wrote the file");
    let out = ok(&cli_env(&s, &["service", "install", "--kind", "systemd"], &env).await);
    assert!(out.contains("systemctl --user enable --now portald.service"), "{out}");
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), dry);
    assert!(
        ok(&cli_env(&s, &["service", "status", "--kind", "systemd"], &env).await)
            .starts_with("installed")
    );
    match systemd_can_verify(home.path()) {
        Ok(()) => {
            let o = std::process::Command::new("systemd-analyze")
                .arg("verify")
                .arg(&unit)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success() && !err.contains("Unknown"), "systemd-analyze: {err}");
        }
        Err(why) => eprintln!("the unit is not checked by systemd-analyze: {why}"),
    }
    ok(&cli_env(&s, &["service", "uninstall", "--kind", "systemd"], &env).await);
    assert!(!unit.exists());
    assert!(
        ok(&cli_env(&s, &["service", "status", "--kind", "systemd"], &env).await)
            .starts_with("absent")
    );
    ok(&cli_env(&s, &["service", "install", "--kind", "launchd"], &env).await);
    let plist =
        std::fs::read_to_string(home.path().join("Library/LaunchAgents/dev.portal.portald.plist"))
            .unwrap();
    assert!(plist.contains(&format!("<string>{}</string>", daemon.display())), "{plist}");
    assert!(plist.contains("<key>RunAtLoad</key>\n\t<true/>"), "{plist}");
    d.stop().await;
}

#[tokio::test]
async fn install_puts_working_binaries_pages_and_completions_under_a_prefix() {
    let dir = test_dir();
    let prefix = dir.path().join("prefix");
    let s = dir.path().join("s").join("portald.sock");
    let said = ok(&cli(&s, &["install", "--prefix", prefix.to_str().unwrap()]).await);
    let bin = prefix.join("bin");
    assert!(said.contains("is not on your PATH"), "{said}");
    // (portal-holder has no flags for people; the start below runs it.)
    for binary in ["portal-cli", "portald", "portal-shim"] {
        let out = bounded(
            "an installed binary",
            tokio::process::Command::new(bin.join(binary)).arg("--help").output(),
        )
        .await
        .unwrap();
        assert!(out.status.success(), "{binary}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // The installed portal-cli runs Portal: it starts the installed portald,
    // which starts the installed portal-holder.
    let installed = bounded(
        "the installed portal-cli",
        tokio::process::Command::new(bin.join("portal-cli"))
            .args(["start", "--wait", "exit", "--", "echo", "installed-and-working"])
            .env("PORTAL_SOCKET", &s)
            .env("PORTAL_DATA_DIR", dir.path().join("data"))
            .output(),
    )
    .await
    .unwrap();
    assert!(
        stdout(&installed).contains("installed-and-working"),
        "{}{}",
        stdout(&installed),
        String::from_utf8_lossy(&installed.stderr)
    );
    let share = prefix.join("share");
    assert!(share.join("man/man1/portal-cli-grep.1").is_file());
    assert!(share.join("man/man1/portald.1").is_file());
    let bash = bounded(
        "bash loading the installed completions",
        tokio::process::Command::new("bash")
            .arg("-c")
            .arg("source \"$1\" && complete -p portal-cli")
            .arg("bash")
            .arg(share.join("bash-completion/completions/portal-cli"))
            .output(),
    )
    .await
    .unwrap();
    assert!(bash.status.success(), "{}", String::from_utf8_lossy(&bash.stderr));
    // Installing again over the same files works (a rename over each).
    ok(&cli(&s, &["install", "--prefix", prefix.to_str().unwrap()]).await);
    let stop = cli_env(&s, &["daemon", "stop"], &[]).await;
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    kill_what_outlives(&s);
}

#[tokio::test]
async fn install_re_points_an_installed_service_and_agent_hooks() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let home = d.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = home.join(".config");
    let env = [("HOME", home.to_str().unwrap()), ("XDG_CONFIG_HOME", config.to_str().unwrap())];
    // Installed from the build directory first.
    ok(&cli_env(&s, &["service", "install", "--kind", "systemd"], &env).await);
    ok(&cli_env(&s, &["hooks", "install", "claude"], &env).await);
    let unit = config.join("systemd/user/portald.service");
    let settings = home.join(".claude/settings.json");
    assert!(std::fs::read_to_string(&unit).unwrap().contains(CLI), "the build's binaries first");
    let prefix = d.dir.path().join("prefix");
    let said = ok(&cli_env(&s, &["install", "--prefix", prefix.to_str().unwrap()], &env).await);
    let installed = prefix.join("bin");
    assert!(
        said.contains(&format!(
            "the claude hooks now run {}",
            installed.join("portal-cli").display()
        )),
        "{said}"
    );
    let unit = std::fs::read_to_string(&unit).unwrap();
    assert!(unit.contains(&installed.join("portald").display().to_string()), "{unit}");
    let settings = std::fs::read_to_string(&settings).unwrap();
    assert!(settings.contains(&installed.join("portal-cli").display().to_string()), "{settings}");
    assert!(!settings.contains(CLI), "no hook runs the build's portal-cli any more: {settings}");
    let status = ok(&cli_env(&s, &["hooks", "status", "claude"], &env).await);
    assert!(status.contains("outdated"), "the build's CLI sees hooks run another: {status}");
    d.stop().await;
}

#[tokio::test]
async fn install_says_how_to_load_completions_upgrade_and_register() {
    let dir = test_dir();
    let prefix = dir.path().join("prefix");
    let bin = prefix.join("bin");
    let s = dir.path().join("s").join("portald.sock");
    let data = dir.path().join("data");
    let home = dir.path().join("home");
    // A PATH with neither `claude` nor `codex` on it.
    let nothing = dir.path().join("nothing");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&nothing).unwrap();
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("CODEX_HOME", &format!("{}/.codex", home.display())),
        ("PATH", nothing.to_str().unwrap()),
        ("PORTAL_DATA_DIR", data.to_str().unwrap()),
    ];
    let prefix_arg = prefix.to_str().unwrap();
    let said = ok(&cli_env(&s, &["install", "--prefix", prefix_arg], &env).await);
    let shim = bin.join("portal-shim").display().to_string();
    assert!(
        said.contains(&format!(
            "to use Portal from Claude Code (every project): claude mcp add -s user portal -- {shim}\n"
        )),
        "{said}"
    );
    // Codex passes its servers only a few variables: the socket and data
    // directory this portal-cli uses go in the server's env.
    assert!(
        said.contains(&format!(
            "to use Portal from Codex: codex mcp add portal --env 'PORTAL_SOCKET={}' --env 'PORTAL_DATA_DIR={}' -- {shim}\n",
            s.display(),
            data.display()
        )),
        "{said}"
    );
    assert!(
        said.contains("`default_tools_approval_mode = \"approve\"` is under [mcp_servers.portal]")
    );
    assert!(
        said.contains(&format!(
            "`{} daemon upgrade --binary {}`",
            bin.join("portal-cli").display(),
            bin.join("portald").display()
        )),
        "the upgrade names the installed portald: {said}"
    );
    assert!(!home.join(".claude.json").exists(), "nothing is registered without --register");
    // The bash line, run as printed, loads the installed completions.
    let source = said
        .lines()
        .find_map(|l| l.strip_prefix("  bash: add `"))
        .and_then(|l| l.split('`').next())
        .unwrap_or_else(|| panic!("no bash line in {said}"));
    let bash = bounded(
        "bash running the printed line",
        tokio::process::Command::new("bash")
            .arg("-c")
            .arg(format!("{source} && complete -p portal-cli"))
            .output(),
    )
    .await
    .unwrap();
    assert!(bash.status.success(), "{source}: {}", String::from_utf8_lossy(&bash.stderr));
    // With --register and neither client on PATH: the commands, and why.
    let said = ok(&cli_env(&s, &["install", "--prefix", prefix_arg, "--register"], &env).await);
    assert!(
        said.contains(&format!(
            "Claude Code (claude) is not on your PATH; to use Portal from it: claude mcp add -s user portal -- {shim}\n"
        )),
        "{said}"
    );
    assert!(
        said.contains(
            "Codex (codex) is not on your PATH; to use Portal from it: codex mcp add portal --env"
        ),
        "{said}"
    );
}

/// How long one command of a real MCP client's CLI may take: Claude Code's
/// first start reads a 400 MB binary, and its `mcp list` starts every
/// server to check it.
const CLIENT_CLI_BOUND: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `program` in `cwd` with `env` (a private HOME among it), bounded.
async fn run_in(program: &Path, args: &[&str], cwd: &Path, env: &[(&str, String)]) -> Output {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        // Else Claude Code reads and writes the user's own configuration.
        .env_remove("CLAUDE_CONFIG_DIR")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = format!("{} {args:?}", program.display());
    match tokio::time::timeout(CLIENT_CLI_BOUND, cmd.output()).await {
        Ok(out) => out.unwrap(),
        Err(_) => panic!("timed out after {CLIENT_CLI_BOUND:?} waiting for {what}"),
    }
}

/// `install --register` with the real Claude Code and Codex CLIs (npm,
/// pinned in `tests/agents`) on PATH, in a private HOME and CODEX_HOME:
/// Claude Code sees the server from another directory (user scope) and
/// connects to it, Codex lists it with the socket and data directory in its
/// env, and a second install keeps both entries and what a person added.
/// Without the CLIs it skips; under `CI=true` it fails instead.
#[tokio::test]
async fn install_registers_portal_with_the_real_claude_code_and_codex() {
    let found = portal_tests::fake_models::installed();
    if !found.missing.is_empty() {
        assert!(std::env::var_os("CI").is_none(), "{} (CI must run them)", found.missing);
        eprintln!("skipping: {}", found.missing);
        return;
    }
    let (Some(claude), Some(codex)) = (found.claude, found.codex) else {
        panic!("installed() found both CLIs but named neither");
    };
    let dir = test_dir();
    let prefix = dir.path().join("prefix");
    let shim = prefix.join("bin/portal-shim").display().to_string();
    let s = dir.path().join("s").join("portald.sock");
    let data = dir.path().join("data");
    let home = dir.path().join("home");
    let codex_home = home.join(".codex");
    let project = dir.path().join("project");
    let elsewhere = dir.path().join("elsewhere");
    let clients = dir.path().join("clients");
    for d in [&codex_home, &project, &elsewhere, &clients, &home.join("tmp")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(&claude, clients.join("claude")).unwrap();
    std::os::unix::fs::symlink(&codex, clients.join("codex")).unwrap();
    let path = format!("{}:{}", clients.display(), std::env::var("PATH").unwrap_or_default());
    let env = [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("PATH", path),
        ("PORTAL_SOCKET", s.display().to_string()),
        ("PORTAL_DATA_DIR", data.display().to_string()),
        // The health check starts the shim, which must not start a daemon.
        ("PORTAL_NO_AUTOSTART", "1".into()),
        ("NO_COLOR", "1".into()),
        ("TMPDIR", home.join("tmp").display().to_string()),
        ("CLAUDE_CODE_TMPDIR", home.join("tmp").display().to_string()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ];
    let install = ["install", "--prefix", prefix.to_str().unwrap(), "--register"];
    let said = ok(&run_in(Path::new(CLI), &install, &project, &env).await);
    assert!(
        said.contains(&format!(
            "registered Portal with Claude Code for every project: claude mcp add -s user portal -- {shim}\n"
        )),
        "{said}"
    );
    assert!(said.contains("registered Portal with Codex: codex mcp add portal --env"), "{said}");
    // From another directory: a local (per-project) entry would not show.
    let listed = ok(&run_in(&clients.join("claude"), &["mcp", "list"], &elsewhere, &env).await);
    let line = listed
        .lines()
        .find(|l| l.starts_with(&format!("portal: {shim} ")))
        .unwrap_or_else(|| panic!("Claude Code does not list portal from elsewhere: {listed}"));
    assert!(line.contains("Connected"), "{line}");
    let codex_list = |cwd: PathBuf| {
        let (clients, env) = (&clients, &env);
        async move {
            let out =
                ok(&run_in(&clients.join("codex"), &["mcp", "list", "--json"], &cwd, env).await);
            let list: Value = serde_json::from_str(&out).unwrap();
            list.as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "portal")
                .cloned()
                .unwrap_or_else(|| panic!("Codex does not list portal: {out}"))
        }
    };
    let entry = codex_list(elsewhere.clone()).await;
    assert_eq!(entry["transport"]["command"], shim.as_str(), "{entry}");
    assert_eq!(entry["transport"]["env"]["PORTAL_SOCKET"], s.to_str().unwrap(), "{entry}");
    assert_eq!(entry["transport"]["env"]["PORTAL_DATA_DIR"], data.to_str().unwrap(), "{entry}");
    // The approval setting install names is one Codex accepts; a second
    // install leaves both entries, and that setting, as they are.
    let config = codex_home.join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    assert!(before.contains("[mcp_servers.portal]\n"), "{before}");
    let text = before.replacen(
        "[mcp_servers.portal]\n",
        "[mcp_servers.portal]\ndefault_tools_approval_mode = \"approve\"\n",
        1,
    );
    std::fs::write(&config, &text).unwrap();
    let said = ok(&run_in(Path::new(CLI), &install, &elsewhere, &env).await);
    assert!(
        said.contains(&format!("Claude Code already runs {shim} as its MCP server portal")),
        "{said}"
    );
    assert!(
        said.contains(&format!("Codex already runs {shim} as its MCP server portal")),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
    assert_eq!(codex_list(project).await["transport"]["command"], shim.as_str());
    kill_what_outlives(&s);
}
