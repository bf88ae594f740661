//! Shell completion. `completions SHELL` prints the script a shell sources;
//! it calls portal-cli back (with `PORTAL_COMPLETE` set) for every Tab, so
//! subcommands and flags come from the same clap definition as the
//! commands, and process arguments complete to the names and ids of the
//! programs the local portald runs now. A Tab never starts a daemon and
//! gives up after [`LIST_BUDGET`].

use std::ffi::OsStr;
use std::time::Duration;

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_complete::CompletionCandidate;
use portal_proto::v1 as pb;

use crate::{Cli, Outcome};

/// The variable that turns a run of portal-cli into a completion request.
pub(crate) const VAR: &str = "PORTAL_COMPLETE";

/// How long a Tab may wait for the daemon's list: a person notices more.
const LIST_BUDGET: Duration = Duration::from_millis(500);

/// Answers a completion request and exits, when this run is one.
pub(crate) fn answer_if_asked() {
    clap_complete::CompleteEnv::with_factory(Cli::command).var(VAR).complete();
}

/// The script that registers portal-cli's completions in `shell`, calling
/// back the portal-cli at `completer`.
pub(crate) fn script(shell: clap_complete::Shell, completer: &str) -> anyhow::Result<Vec<u8>> {
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let adapter = shells
        .completer(&name)
        .with_context(|| format!("no completion support for {name} in this portal-cli"))?;
    let mut out = Vec::new();
    adapter.write_registration(VAR, "portal-cli", "portal-cli", completer, &mut out)?;
    Ok(out)
}

/// `portal-cli completions SHELL`: the script, calling back this very
/// binary (by its absolute path, so it works off PATH too).
pub(crate) fn completions(shell: clap_complete::Shell) -> Outcome {
    let me = std::env::current_exe().context("finding portal-cli's own path")?;
    let out = script(shell, &me.to_string_lossy())?;
    crate::stdout::bytes(&out);
    Ok(())
}

/// Candidates for a process argument: names and ids of the local daemon's
/// processes that start with what was typed, each with its command line as
/// help. Nothing when no daemon runs (and none is started) or it is slow.
pub(crate) fn procs(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(typed) = current.to_str() else { return Vec::new() };
    let typed = typed.to_owned();
    // The completion runs before portal-cli's runtime exists; a thread of
    // its own keeps this independent of where it is called from.
    let listed = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        rt.block_on(async {
            let mut opts = portal_client::launch::LaunchOptions::from_env();
            opts.autostart = false;
            tokio::time::timeout(LIST_BUDGET, async {
                let client = portal_client::client::Client::connect_to(
                    &portal_client::hosts::Target::Local,
                    &opts,
                )
                .await
                .ok()?;
                let list = client.rpc().list(pb::ListRequest {}).await.ok()?;
                Some(list.into_inner().processes)
            })
            .await
            .ok()
            .flatten()
        })
    })
    .join()
    .ok()
    .flatten()
    .unwrap_or_default();
    candidates(&listed, &typed)
}

/// The candidates among `procs` for `typed`: running ones first, a named
/// process by its name, every one by its id.
fn candidates(procs: &[pb::Process], typed: &str) -> Vec<CompletionCandidate> {
    let mut ordered: Vec<&pb::Process> = procs.iter().collect();
    ordered.sort_by_key(|p| (p.status() != pb::Status::Running, p.id));
    let mut out = Vec::new();
    for p in ordered {
        let help = format!(
            "{} ({})",
            crate::fmt::command_line(p, 50),
            portal_client::vocab::Status::from(p.status()).as_str()
        );
        let id = p.id.to_string();
        for value in [p.name.as_str(), id.as_str()] {
            if !value.is_empty() && value.starts_with(typed) {
                out.push(CompletionCandidate::new(value).help(Some(help.clone().into())));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_complete_running_ones_first() {
        let p = |id: u64, name: &str, status: pb::Status| pb::Process {
            id,
            name: name.into(),
            command: "python3".into(),
            status: status.into(),
            ..Default::default()
        };
        let procs = [
            p(1, "repl", pb::Status::Exited),
            p(12, "", pb::Status::Running),
            p(2, "web", pb::Status::Running),
        ];
        let values = |typed: &str| -> Vec<String> {
            candidates(&procs, typed)
                .iter()
                .map(|c| c.get_value().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(values(""), ["web", "2", "12", "repl", "1"]);
        assert_eq!(values("1"), ["12", "1"]);
        assert_eq!(values("re"), ["repl"]);
        assert!(values("x").is_empty());
    }
}
