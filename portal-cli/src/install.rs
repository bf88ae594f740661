//! `install`: puts Portal's four binaries (portal-cli, portald,
//! portal-shim, portal-holder) from beside this portal-cli into
//! `PREFIX/bin`, with the man pages and the shell completions where the
//! shells and `man` look under that prefix. Each binary is replaced by a
//! rename, so a portald running from the old file runs on untouched (`daemon
//! upgrade` then moves it to the new one, every program kept).

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::CommandFactory as _;

use crate::{Cli, Outcome};

/// Every binary Portal needs, side by side.
const BINARIES: [&str; 4] = ["portal-cli", "portald", "portal-shim", "portal-holder"];

/// `portal-cli install [--prefix P] [--dry-run]`.
pub(crate) fn install(prefix: Option<PathBuf>, dry_run: bool) -> Outcome {
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
            println!("would copy {} to {}", src.display(), bin.join(name).display());
        }
        for (_, path) in &completions {
            println!("would write {}", path.display());
        }
        println!("would write the man pages into {}", man.display());
        return Ok(());
    }
    for (src, name) in sources.iter().zip(BINARIES) {
        let to = bin.join(name);
        copy_over(src, &to)?;
        println!("installed {}", to.display());
    }
    for (shell, path) in &completions {
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut Cli::command(), "portal-cli", &mut script);
        write_file(path, &script)?;
    }
    println!("completions for bash, zsh and fish under {}", share.display());
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
    println!("man pages in {}", man.display());
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| same_dir(&d, &bin)));
    if !on_path {
        println!(
            "{} is not on your PATH: add `export PATH=\"{}:$PATH\"` to your shell's startup file",
            bin.display(),
            bin.display()
        );
    }
    for kind in [crate::service::Kind::Systemd, crate::service::Kind::Launchd] {
        if crate::service::file_path(kind).is_ok_and(|p| p.exists()) {
            println!(
                "a portald service is installed: `{} service install` points it at the installed portald",
                bin.join("portal-cli").display()
            );
        }
    }
    println!(
        "agent hooks installed from another path: `{} hooks install` points them here; a portald already running: `{} daemon upgrade`",
        bin.join("portal-cli").display(),
        bin.join("portal-cli").display()
    );
    Ok(())
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
