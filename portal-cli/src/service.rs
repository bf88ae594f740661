//! `service install|uninstall|status`: run portald as a systemd user service
//! (Linux) or a launchd agent (macOS), so it starts at login instead of on
//! first use. The files name `portald` by absolute path (beside this CLI, or
//! on PATH); the command that enables the service is printed, not run.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};

/// Which service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Kind {
    /// A systemd user unit (Linux).
    Systemd,
    /// A launchd agent (macOS).
    Launchd,
}

/// `service` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ServiceCommand {
    /// Write the unit or agent file and print the command that enables it.
    Install {
        /// Print the file instead of writing it.
        #[arg(long)]
        dry_run: bool,
        /// Service manager [default: launchd on macOS, systemd elsewhere].
        #[arg(long, value_enum)]
        kind: Option<Kind>,
    },
    /// Remove the file (print the command that disables the service first).
    Uninstall {
        /// Say what would be removed without removing it.
        #[arg(long)]
        dry_run: bool,
        /// Service manager.
        #[arg(long, value_enum)]
        kind: Option<Kind>,
    },
    /// Say whether the file is installed and current.
    Status {
        /// Service manager.
        #[arg(long, value_enum)]
        kind: Option<Kind>,
    },
}

/// The launchd label.
const LAUNCHD_LABEL: &str = "dev.portal.portald";

fn default_kind() -> Kind {
    if cfg!(target_os = "macos") { Kind::Launchd } else { Kind::Systemd }
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).context("HOME is not set")
}

/// Where the file goes.
pub(crate) fn file_path(kind: Kind) -> anyhow::Result<PathBuf> {
    Ok(match kind {
        Kind::Systemd => {
            let config = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map_or_else(|| home().map(|h| h.join(".config")), |v| Ok(PathBuf::from(v)))?;
            config.join("systemd").join("user").join("portald.service")
        }
        Kind::Launchd => {
            home()?.join("Library").join("LaunchAgents").join(format!("{LAUNCHD_LABEL}.plist"))
        }
    })
}

fn daemon_path() -> anyhow::Result<PathBuf> {
    let found = portal_client::paths::daemon_binary()
        .context("no portald binary beside portal-cli or on PATH; build it or set PORTAL_DAEMON")?;
    std::fs::canonicalize(&found).with_context(|| format!("resolving {}", found.display()))
}

/// This `portal-cli`, which the unit runs to upgrade portald in place.
fn cli_path() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("cannot find this portal-cli's path")?;
    std::fs::canonicalize(&me).with_context(|| format!("resolving {}", me.display()))
}

/// A path as one word of a unit's `ExecStart=`: `%` is a specifier and `$`
/// an environment variable there, so they are doubled; whitespace, quotes
/// and backslashes are quoted C-style (systemd.service(5), "Command
/// lines"). Written here: no well-kept crate writes unit files.
fn systemd_quote(p: &Path) -> String {
    let s = p.to_string_lossy().replace('%', "%%").replace('$', "$$");
    if s.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s
    }
}

/// The launchd agent: run portald at login, restart it when it did not
/// exit cleanly, its stderr in ~/Library/Logs.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct LaunchAgent {
    label: &'static str,
    program_arguments: Vec<String>,
    run_at_load: bool,
    keep_alive: KeepAlive,
    /// portal-holder and the programs it holds outlive a crash of portald
    /// (the restarted one adopts them); launchd must not kill them with it.
    abandon_process_group: bool,
    standard_error_path: String,
}

/// When launchd restarts the agent.
#[derive(serde::Serialize)]
#[serde(rename_all = "PascalCase")]
struct KeepAlive {
    successful_exit: bool,
}

/// The file's content. `cli` is the `portal-cli` that reloads (upgrades)
/// the daemon in place.
pub(crate) fn render(kind: Kind, daemon: &Path, cli: &Path) -> anyhow::Result<String> {
    Ok(match kind {
        Kind::Systemd => format!(
            "# Written by `portal-cli service install`; `portal-cli service uninstall` removes it.\n\
             [Unit]\n\
             Description=Portal daemon: runs interactive programs for agents and people\n\
             \n\
             [Service]\n\
             Type=simple\n\
             ExecStart={}\n\
             # `systemctl --user reload portald` upgrades in place: the binary now on\n\
             # disk takes over and every program keeps running (same pid).\n\
             ExecReload={} daemon upgrade\n\
             Restart=on-failure\n\
             RestartSec=1\n\
             # portald stops its programs itself on SIGTERM (SIGHUP/SIGTERM, then\n\
             # SIGKILL). Only portald is signalled: portal-holder and the programs\n\
             # it holds survive a crash of portald, and the restarted portald\n\
             # adopts them.\n\
             KillMode=process\n\
             TimeoutStopSec=15\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
            systemd_quote(daemon),
            systemd_quote(cli)
        ),
        Kind::Launchd => {
            let log = home()?.join("Library").join("Logs").join("portald.log");
            let agent = LaunchAgent {
                label: LAUNCHD_LABEL,
                program_arguments: vec![daemon.to_string_lossy().into_owned()],
                run_at_load: true,
                keep_alive: KeepAlive { successful_exit: false },
                abandon_process_group: true,
                standard_error_path: log.to_string_lossy().into_owned(),
            };
            let mut out = Vec::new();
            plist::to_writer_xml(&mut out, &agent).context("writing the launchd agent")?;
            let mut text = String::from_utf8(out).context("the launchd agent is not UTF-8")?;
            text.push('\n');
            text
        }
    })
}

fn enable_hint(kind: Kind, path: &Path) -> String {
    match kind {
        Kind::Systemd => {
            "systemctl --user daemon-reload && systemctl --user enable --now portald.service".into()
        }
        Kind::Launchd => format!("launchctl bootstrap gui/$(id -u) {}", path.display()),
    }
}

fn disable_hint(kind: Kind, path: &Path) -> String {
    match kind {
        Kind::Systemd => "systemctl --user disable --now portald.service".into(),
        Kind::Launchd => format!("launchctl bootout gui/$(id -u) {}", path.display()),
    }
}

/// Writes `content` to `path` atomically (temp file in the same directory, then rename).
fn write_atomic(path: &Path, content: &str) -> anyhow::Result<()> {
    let dir = path.parent().context("the service file has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".{}.tmp", path.file_name().unwrap_or_default().to_string_lossy()));
    std::fs::write(&tmp, content).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Runs a `service` subcommand.
pub(crate) fn run(cmd: ServiceCommand) -> anyhow::Result<()> {
    match cmd {
        ServiceCommand::Install { dry_run, kind } => {
            let kind = kind.unwrap_or_else(default_kind);
            let path = file_path(kind)?;
            let content = render(kind, &daemon_path()?, &cli_path()?)?;
            if dry_run {
                eprintln!("# would write {}", path.display());
                out!("{content}");
                return Ok(());
            }
            let existing = std::fs::read_to_string(&path).ok();
            if existing.as_deref() == Some(content.as_str()) {
                outln!("already installed: {}", path.display());
            } else {
                write_atomic(&path, &content)?;
                outln!(
                    "{} {}",
                    if existing.is_some() { "updated" } else { "wrote" },
                    path.display()
                );
            }
            outln!("enable it with: {}", enable_hint(kind, &path));
            Ok(())
        }
        ServiceCommand::Uninstall { dry_run, kind } => {
            let kind = kind.unwrap_or_else(default_kind);
            let path = file_path(kind)?;
            if !path.exists() {
                outln!("not installed: {}", path.display());
                return Ok(());
            }
            outln!("disable it first with: {}", disable_hint(kind, &path));
            if dry_run {
                outln!("would remove {}", path.display());
            } else {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
                outln!("removed {}", path.display());
            }
            Ok(())
        }
        ServiceCommand::Status { kind } => {
            let kind = kind.unwrap_or_else(default_kind);
            let path = file_path(kind)?;
            let want = daemon_path().and_then(|d| render(kind, &d, &cli_path()?)).ok();
            match std::fs::read_to_string(&path) {
                Err(_) => outln!("absent: {}", path.display()),
                Ok(have) if Some(&have) == want.as_ref() => {
                    outln!("installed: {}", path.display());
                }
                Ok(_) => outln!(
                    "outdated: {} (run `portal-cli service install` to update it)",
                    path.display()
                ),
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> &'static Path {
        Path::new("/opt/portal/portal-cli")
    }

    #[test]
    fn systemd_unit_is_complete_and_quotes_paths() {
        let unit = render(Kind::Systemd, Path::new("/opt/portal/portald"), cli()).unwrap();
        for line in [
            "[Unit]",
            "[Service]",
            "ExecStart=/opt/portal/portald",
            "Restart=on-failure",
            "ExecReload=/opt/portal/portal-cli daemon upgrade",
            "KillMode=process",
            "[Install]",
            "WantedBy=default.target",
        ] {
            assert!(unit.lines().any(|l| l == line), "missing {line:?} in\n{unit}");
        }
        let unit = render(Kind::Systemd, Path::new("/opt/my portal/portald"), cli()).unwrap();
        assert!(unit.contains("ExecStart=\"/opt/my portal/portald\""));
        // `%` is a specifier and `$` a variable in ExecStart: both doubled.
        let unit = render(Kind::Systemd, Path::new("/opt/100%/$HOME/portald"), cli()).unwrap();
        assert!(unit.contains("ExecStart=/opt/100%%/$$HOME/portald\n"), "{unit}");
    }

    #[test]
    fn launchd_plist_escapes_paths() {
        let plist = render(Kind::Launchd, Path::new("/Apps/P&Q/portald"), cli()).unwrap();
        assert!(plist.contains("<string>/Apps/P&amp;Q/portald</string>"));
        assert!(plist.contains("<key>Label</key>\n\t<string>dev.portal.portald</string>"));
        assert!(plist.starts_with("<?xml"));
        // It reads back as launchd will read it.
        let back: plist::Value = plist::from_bytes(plist.as_bytes()).unwrap();
        let args = back.as_dictionary().and_then(|d| d.get("ProgramArguments")).cloned();
        assert_eq!(args, Some(plist::Value::Array(vec!["/Apps/P&Q/portald".into()])));
        let abandon = back.as_dictionary().and_then(|d| d.get("AbandonProcessGroup")).cloned();
        assert_eq!(abandon, Some(plist::Value::Boolean(true)), "the holder outlives a crash");
    }
}
