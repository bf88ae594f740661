//! What Portal ships for `man`: `man --dir DIR` writes the man pages of
//! portal-cli (one per subcommand too) and of portald and portal-shim
//! (which print their own, with a hidden `--man`, from beside this binary).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::CommandFactory as _;

use crate::{Cli, Outcome};

/// `portal-cli man --dir DIR`: every page written, then their names.
pub(crate) fn man(dir: &Path) -> Outcome {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let cli = Cli::command().name("portal-cli");
    written.push(page(dir, "portal-cli", &cli)?);
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("portal-cli-{}", sub.get_name());
        written.push(page(dir, &name, &sub.clone().name(name.clone()))?);
    }
    for binary in ["portald", "portal-shim"] {
        written.push(sibling_page(dir, binary)?);
    }
    for w in &written {
        outln!("{}", w.display());
    }
    Ok(())
}

fn page(dir: &Path, name: &str, cmd: &clap::Command) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The page of `binary` installed beside this one.
fn sibling_page(dir: &Path, binary: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding portal-cli's own path")?;
    let sibling = exe.with_file_name(binary);
    let out = std::process::Command::new(&sibling).arg("--man").output().with_context(|| {
        format!("running {} --man (install the three binaries side by side)", sibling.display())
    })?;
    anyhow::ensure!(
        out.status.success() && !out.stdout.is_empty(),
        "{} --man failed: {}",
        sibling.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let path = dir.join(format!("{binary}.1"));
    std::fs::write(&path, out.stdout).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
