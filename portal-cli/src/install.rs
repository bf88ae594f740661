//! `install`: puts Portal's four binaries (portal-cli, portald,
//! portal-shim, portal-holder) from beside this portal-cli into
//! `PREFIX/bin`, with the man pages and the shell completions where the
//! shells and `man` look under that prefix. Each binary is replaced by a
//! rename, so a portald running from the old file runs on untouched (`daemon
//! upgrade --binary PREFIX/bin/portald` then moves it to the new one, every
//! program kept). It ends with the next steps: how to load the completions,
//! and how to register the installed portal-shim with MCP clients (or, with
//! `--register`, it registers it; see [`crate::register`]).

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::Outcome;
use crate::register::Register;

/// Every binary Portal needs, side by side.
const BINARIES: [&str; 4] = ["portal-cli", "portald", "portal-shim", "portal-holder"];

/// `portal-cli install [--prefix P] [--dry-run] [--register]`.
pub(crate) async fn install(prefix: Option<PathBuf>, dry_run: bool, register: Register) -> Outcome {
    let prefix = match prefix {
        Some(p) => p,
        None => home()?.join(".local"),
    };
    let exe = std::env::current_exe().context("finding portal-cli's own path")?;
    let from = exe.parent().context("portal-cli's directory")?.to_path_buf();
    let bin = prefix.join("bin");
    let sources: Vec<PathBuf> = BINARIES.iter().map(|b| from.join(b)).collect();
    if let Some(missing) = sources.iter().find(|s| !s.is_file()) {
        return Err(anyhow::anyhow!(
            "{} is missing beside this portal-cli; build all four with `cargo build --release --bins` and run target/release/portal-cli install",
            missing.display()
        )
        .into());
    }
    let share = prefix.join("share");
    let completions = [
        (clap_complete::Shell::Bash, share.join("bash-completion/completions/portal-cli")),
        (clap_complete::Shell::Zsh, share.join("zsh/site-functions/_portal-cli")),
        (clap_complete::Shell::Fish, share.join("fish/vendor_completions.d/portal-cli.fish")),
    ];
    let man = share.join("man/man1");
    if dry_run {
        for (src, name) in sources.iter().zip(BINARIES) {
            outln!("would copy {} to {}", src.display(), bin.join(name).display());
        }
        for (_, path) in &completions {
            outln!("would write {}", path.display());
        }
        outln!("would write the man pages into {}", man.display());
        crate::register::register(&bin.join("portal-shim"), Register::Print).await;
        return Ok(());
    }
    for (src, name) in sources.iter().zip(BINARIES) {
        let to = bin.join(name);
        copy_over(src, &to)?;
        outln!("installed {}", to.display());
    }
    for (shell, path) in &completions {
        // The script calls the installed portal-cli back for each Tab.
        let script = crate::complete::script(*shell, &bin.join("portal-cli").to_string_lossy())?;
        write_file(path, &script)?;
    }
    // bash-completion looks under PREFIX/share only for some prefixes and
    // versions, zsh only in its fpath, fish only in XDG_DATA_DIRS: sourcing
    // the file from the shell's startup file works everywhere.
    let [(_, bash), (_, zsh), (_, fish)] = &completions;
    outln!(
        "completions for bash, zsh and fish under {}; to load them in new shells:",
        share.display()
    );
    outln!("  bash: add `source {}` to ~/.bashrc", shell_quote(bash));
    outln!("  zsh: add `source {}` to ~/.zshrc, after compinit", shell_quote(zsh));
    outln!("  fish: add `source {}` to ~/.config/fish/config.fish", shell_quote(fish));
    // The installed portal-cli writes the pages, so portald's and
    // portal-shim's come from the installed binaries beside it.
    let pages = std::process::Command::new(bin.join("portal-cli"))
        .arg("man")
        .arg("--dir")
        .arg(&man)
        .output()
        .context("running the installed portal-cli man")?;
    if !pages.status.success() {
        return Err(anyhow::anyhow!(
            "writing the man pages failed: {}",
            String::from_utf8_lossy(&pages.stderr).trim()
        )
        .into());
    }
    outln!("man pages in {}", man.display());
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| same_dir(&d, &bin)));
    if !on_path {
        outln!(
            "{} is not on your PATH: add `export PATH=\"{}:$PATH\"` to your shell's startup file",
            bin.display(),
            bin.display()
        );
    }
    let cli = bin.join("portal-cli");
    repoint_services(&cli)?;
    repoint_hooks(&cli);
    // Without --binary, upgrade re-executes the path the running portald
    // was started from, which is the build's, not the installed one.
    outln!(
        "a portald already running keeps its old binary until `{} daemon upgrade --binary {}` (every program keeps running)",
        shell_quote(&cli),
        shell_quote(&bin.join("portald"))
    );
    crate::register::register(&bin.join("portal-shim"), register).await;
    Ok(())
}

/// An installed service is rewritten by the installed portal-cli, so it
/// starts the installed portald.
fn repoint_services(cli: &Path) -> anyhow::Result<()> {
    for (kind, name) in
        [(crate::service::Kind::Systemd, "systemd"), (crate::service::Kind::Launchd, "launchd")]
    {
        if !crate::service::file_path(kind).is_ok_and(|p| p.exists()) {
            continue;
        }
        let out = std::process::Command::new(cli)
            .args(["service", "install", "--kind", name])
            .output()
            .context("running the installed portal-cli service install")?;
        anyhow::ensure!(
            out.status.success(),
            "re-pointing the {name} service failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        out!("{}", String::from_utf8_lossy(&out.stdout));
    }
    Ok(())
}

/// Agent hooks that run another portal-cli (status `outdated`) are
/// installed again by the installed one. They are the daemon's to edit, so
/// without a running portald this only says what to run.
fn repoint_hooks(cli: &Path) {
    let status = std::process::Command::new(cli)
        .args(["--no-autostart", "hooks", "status", "--json"])
        .output();
    let reports: Vec<serde_json::Value> = match status {
        Ok(out) if out.status.success() => serde_json::from_slice(&out.stdout).unwrap_or_default(),
        _ => {
            outln!(
                "agent hooks were not checked (portald is not running): `{} hooks status` says whether they run this portal-cli, `hooks install` re-points them",
                cli.display()
            );
            return;
        }
    };
    for r in reports.iter().filter(|r| r["status"] == "outdated") {
        let agent = r["agent"].as_str().unwrap_or_default();
        let out = std::process::Command::new(cli)
            .args(["--no-autostart", "hooks", "install", agent])
            .output();
        match out {
            Ok(o) if o.status.success() => {
                outln!("the {agent} hooks now run {}", cli.display());
            }
            Ok(o) => outln!(
                "re-pointing the {agent} hooks failed: {} (run `{} hooks install {agent}`)",
                String::from_utf8_lossy(&o.stderr).trim(),
                cli.display()
            ),
            Err(e) => outln!("re-pointing the {agent} hooks failed: {e}"),
        }
    }
}

/// Copies `src` to `to` through a temporary file and a rename: never a
/// half-written binary, and a running one keeps its file.
fn copy_over(src: &Path, to: &Path) -> anyhow::Result<()> {
    let dir = to.parent().context("the target directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if std::fs::canonicalize(src).ok() == std::fs::canonicalize(to).ok() {
        return Ok(());
    }
    let name = to.file_name().context("a file name")?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.installing-{}", std::process::id()));
    std::fs::copy(src, &tmp).with_context(|| format!("copying {}", src.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&tmp, to).with_context(|| format!("replacing {}", to.display()))?;
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut f =
        std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes)?;
    Ok(())
}

fn shell_quote(path: &Path) -> String {
    portal_client::hosts::shell_quote(&path.to_string_lossy())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || std::fs::canonicalize(a)
            .ok()
            .zip(std::fs::canonicalize(b).ok())
            .is_some_and(|(a, b)| a == b)
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: give --prefix")
}
