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
    let found = portal_proto::paths::daemon_binary()
        .context("no portald binary beside portal-cli or on PATH; build it or set PORTAL_DAEMON")?;
    std::fs::canonicalize(&found).with_context(|| format!("resolving {}", found.display()))
}

fn systemd_quote(p: &Path) -> String {
    let s = p.to_string_lossy();
    if s.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\') {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s.into_owned()
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The file's content.
pub(crate) fn render(kind: Kind, daemon: &Path) -> anyhow::Result<String> {
    Ok(match kind {
        Kind::Systemd => format!(
            "# Written by `portal-cli service install`; `portal-cli service uninstall` removes it.\n\
             [Unit]\n\
             Description=Portal daemon: runs interactive programs for agents and people\n\
             \n\
             [Service]\n\
             Type=simple\n\
             ExecStart={}\n\
             Restart=on-failure\n\
             RestartSec=1\n\
             # portald stops its programs itself on SIGTERM (SIGHUP/SIGTERM, then SIGKILL).\n\
             KillMode=mixed\n\
             TimeoutStopSec=15\n\
             \n\
             [Install]\n\
             WantedBy=default.target\n",
            systemd_quote(daemon)
        ),
        Kind::Launchd => {
            let log = home()?.join("Library").join("Logs").join("portald.log");
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                 <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
                 <plist version=\"1.0\">\n\
                 <dict>\n\
                 \t<key>Label</key>\n\
                 \t<string>{LAUNCHD_LABEL}</string>\n\
                 \t<key>ProgramArguments</key>\n\
                 \t<array>\n\
                 \t\t<string>{}</string>\n\
                 \t</array>\n\
                 \t<key>RunAtLoad</key>\n\
                 \t<true/>\n\
                 \t<key>KeepAlive</key>\n\
                 \t<dict>\n\
                 \t\t<key>SuccessfulExit</key>\n\
                 \t\t<false/>\n\
                 \t</dict>\n\
                 \t<key>StandardErrorPath</key>\n\
                 \t<string>{}</string>\n\
                 </dict>\n\
                 </plist>\n",
                xml_escape(&daemon.to_string_lossy()),
                xml_escape(&log.to_string_lossy())
            )
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
            let content = render(kind, &daemon_path()?)?;
            if dry_run {
                eprintln!("# would write {}", path.display());
                print!("{content}");
                return Ok(());
            }
            let existing = std::fs::read_to_string(&path).ok();
            if existing.as_deref() == Some(content.as_str()) {
                println!("already installed: {}", path.display());
            } else {
                write_atomic(&path, &content)?;
                println!(
                    "{} {}",
                    if existing.is_some() { "updated" } else { "wrote" },
                    path.display()
                );
            }
            println!("enable it with: {}", enable_hint(kind, &path));
            Ok(())
        }
        ServiceCommand::Uninstall { dry_run, kind } => {
            let kind = kind.unwrap_or_else(default_kind);
            let path = file_path(kind)?;
            if !path.exists() {
                println!("not installed: {}", path.display());
                return Ok(());
            }
            println!("disable it first with: {}", disable_hint(kind, &path));
            if dry_run {
                println!("would remove {}", path.display());
            } else {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
                println!("removed {}", path.display());
            }
            Ok(())
        }
        ServiceCommand::Status { kind } => {
            let kind = kind.unwrap_or_else(default_kind);
            let path = file_path(kind)?;
            let want = daemon_path().and_then(|d| render(kind, &d)).ok();
            match std::fs::read_to_string(&path) {
                Err(_) => println!("absent: {}", path.display()),
                Ok(have) if Some(&have) == want.as_ref() => {
                    println!("installed: {}", path.display());
                }
                Ok(_) => println!(
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

    #[test]
    fn systemd_unit_is_complete_and_quotes_paths() {
        let unit = render(Kind::Systemd, Path::new("/opt/portal/portald")).unwrap();
        for line in [
            "[Unit]",
            "[Service]",
            "ExecStart=/opt/portal/portald",
            "Restart=on-failure",
            "KillMode=mixed",
            "[Install]",
            "WantedBy=default.target",
        ] {
            assert!(unit.lines().any(|l| l == line), "missing {line:?} in\n{unit}");
        }
        let unit = render(Kind::Systemd, Path::new("/opt/my portal/portald")).unwrap();
        assert!(unit.contains("ExecStart=\"/opt/my portal/portald\""));
    }

    #[test]
    fn launchd_plist_escapes_paths() {
        let plist = render(Kind::Launchd, Path::new("/Apps/P&Q/portald")).unwrap();
        assert!(plist.contains("<string>/Apps/P&amp;Q/portald</string>"));
        assert!(plist.contains("<key>Label</key>\n\t<string>dev.portal.portald</string>"));
        assert!(plist.starts_with("<?xml"));
    }
}
