//! `up`, `down` and `status`: the fleet a workspace file describes
//! (`portal.toml`; see `portal_client::workspace`), with each step on stderr
//! as it happens and the members' states as a table or JSON.

use std::path::PathBuf;

use portal_client::client::Client;
use portal_client::vocab;
use portal_client::workspace::{self, MemberState, UpError, Workspace};
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt::print_json;
use crate::{Failure, JsonFlag, Outcome};

/// Arguments of `up`, `down` and `status`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkspaceArgs {
    /// The workspace [default: the file's only one].
    workspace: Option<String>,
    /// The workspace file.
    #[arg(long, short, default_value = workspace::file::DEFAULT_FILE)]
    file: PathBuf,
    #[command(flatten)]
    out: JsonFlag,
}

impl WorkspaceArgs {
    fn load(&self) -> Result<Workspace, Failure> {
        workspace::load(&self.file, self.workspace.as_deref())
            .map_err(|e| Failure::Failed(anyhow::anyhow!("{e}")))
    }
}

/// `up`.
pub(crate) async fn up(client: &Client, a: WorkspaceArgs) -> Outcome {
    let ws = a.load()?;
    let mut rpc = client.rpc();
    let remote = client.host().is_some();
    match workspace::up(&mut rpc, &ws, remote, |step| eprintln!("{step}")).await {
        Ok(states) => {
            print_states(&ws, &states, a.out);
            Ok(())
        }
        Err(UpError::Member { member, id, why, last_output }) => {
            let at = id.map(|id| format!(" (process {id})")).unwrap_or_default();
            eprintln!("error: {member}{at}: {why}");
            if !last_output.trim().is_empty() {
                eprintln!("its last output:");
                for line in last_output
                    .trim_end()
                    .lines()
                    .rev()
                    .take(15)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                {
                    eprintln!("  {line}");
                }
            }
            eprintln!(
                "the members before it keep running, and so does it if it runs: fix it and run `portal-cli up` again (it keeps what runs), or `portal-cli down`"
            );
            Err(Failure::Silent)
        }
        Err(UpError::NotPrompted { failed, members }) => {
            print_states(&ws, &members, a.out);
            for (member, why) in failed {
                eprintln!("error: {member}: its first prompt was not typed: {why}");
            }
            eprintln!(
                "every member was started or kept: type the prompt yourself (portal-cli run, or send for an agent)"
            );
            Err(Failure::Silent)
        }
        Err(UpError::Rpc(s)) => Err(s.into()),
    }
}

/// `down`.
pub(crate) async fn down(client: &Client, a: WorkspaceArgs) -> Outcome {
    let ws = a.load()?;
    let mut rpc = client.rpc();
    let states = workspace::down(&mut rpc, &ws, |step| eprintln!("{step}")).await?;
    print_states(&ws, &states, a.out);
    Ok(())
}

/// `status`.
pub(crate) async fn status(client: &Client, a: WorkspaceArgs) -> Outcome {
    let ws = a.load()?;
    let mut rpc = client.rpc();
    let states = workspace::status(&mut rpc, &ws).await?;
    print_states(&ws, &states, a.out);
    Ok(())
}

/// A member's state as JSON (what `--json` prints and the shim returns).
pub(crate) fn state_json(m: &MemberState) -> serde_json::Value {
    let p = m.process.as_ref();
    json!({
        "member": m.name,
        "id": p.map(|p| p.id),
        "status": p.map_or("not_started", |p| vocab::Status::from(p.status()).as_str()),
        "exit_code": p.and_then(|p| p.exit_code),
        "exit_signal": p.and_then(|p| p.exit_signal),
        "input_state": p.map(|p| vocab::InputState::from(p.input_state()).as_str()),
        "agent_state": m.agent.as_ref().map(|a| vocab::AgentState::from(a.state()).as_str()),
        "agent_reason": m.agent.as_ref().map(|a| a.reason.clone()).filter(|r| !r.is_empty()),
        "restarts": p.map_or(0, |p| p.restarts),
        "restart_in_ms": p.map(|p| p.restart_in_ms).filter(|ms| *ms > 0),
    })
}

fn print_states(ws: &Workspace, states: &[MemberState], out: JsonFlag) {
    if out.json {
        print_json(&json!({
            "workspace": ws.name,
            "members": states.iter().map(state_json).collect::<Vec<_>>(),
        }));
        return;
    }
    let width = states.iter().map(|m| m.name.chars().count()).max().unwrap_or(6).max(6);
    outln!(
        "{:<width$}  {:>5}  {:<11}  {:<15}  {:<8}  AGENT",
        "MEMBER",
        "ID",
        "STATUS",
        "INPUT",
        "RESTARTS"
    );
    for m in states {
        let (id, status, input, restarts) = match &m.process {
            Some(p) => (
                p.id.to_string(),
                match (p.status(), p.exit_code, p.exit_signal) {
                    (pb::Status::Exited, Some(c), _) => format!("exit {c}"),
                    (pb::Status::Exited, None, Some(s)) => format!("sig {s}"),
                    (s, _, _) => vocab::Status::from(s).as_str().to_owned(),
                },
                if p.status() == pb::Status::Running {
                    vocab::InputState::from(p.input_state()).as_str()
                } else {
                    "-"
                },
                if p.restart_in_ms > 0 {
                    format!(
                        "{} (next in {})",
                        p.restarts,
                        crate::fmt::short_duration(p.restart_in_ms)
                    )
                } else {
                    p.restarts.to_string()
                },
            ),
            None => ("-".into(), "not started".into(), "-", "-".into()),
        };
        let agent = m.agent.as_ref().map_or("-".to_owned(), |a| {
            let state = vocab::AgentState::from(a.state()).as_str();
            if a.reason.is_empty() {
                format!("{} {state}", a.name)
            } else {
                format!("{} {state} ({})", a.name, a.reason)
            }
        });
        outln!("{:<width$}  {id:>5}  {status:<11}  {input:<15}  {restarts:<8}  {agent}", m.name);
    }
}
