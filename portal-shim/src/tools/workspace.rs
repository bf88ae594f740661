//! The workspace tools: up, status and down of a fleet described in
//! `portal.toml` (or given inline), through `portal_client::workspace`, the
//! same code `portal-cli up/down/status` runs. `workspace_up` reports each
//! step as a progress notification while it waits for members to be ready.

use portal_client::vocab;
use portal_client::workspace::{self, MemberState, UpError, Workspace};
use portal_proto::v1 as pb;
use rmcp::model::ProgressNotificationParam;

use super::{Progress, Reply, Shim};
use crate::args::{WorkspaceArgs, WorkspaceRef};
use crate::results::{MemberInfo, WorkspaceReport};

impl Shim {
    /// The workspace the arguments name: inline, or from the file (relative
    /// to the shim's directory).
    fn workspace(&self, a: &WorkspaceArgs) -> Result<Workspace, String> {
        let dir = std::path::Path::new(&self.cwd);
        if let Some(spec) = &a.spec {
            if a.file.is_some() {
                return Err("Error: give `file` or `spec`, not both".into());
            }
            let name = a.workspace.clone().unwrap_or_else(|| "inline".into());
            // The same reader as a file's: one table, as TOML.
            let table = toml::Value::try_from(serde_json::Value::Object(spec.clone()))
                .map_err(|e| format!("Error: spec: {e}"))?;
            let mut ws = toml::Table::new();
            ws.insert(name.clone(), table);
            let mut file = toml::Table::new();
            file.insert("workspace".into(), toml::Value::Table(ws));
            let text = toml::to_string(&file).map_err(|e| format!("Error: spec: {e}"))?;
            // Its lines are the shim's TOML, not the caller's: an error
            // names the key on its line instead.
            return workspace::parse(&text, "spec", dir, Some(&name)).map_err(|e| {
                let key = e
                    .line
                    .and_then(|l| text.lines().nth(l.saturating_sub(1)))
                    .and_then(|l| l.split_once('='))
                    .map(|(k, _)| k.trim().to_owned());
                match key {
                    Some(k) => format!("Error: spec: `{k}`: {}", e.message),
                    None => format!("Error: spec: {}", e.message),
                }
            });
        }
        let file = dir.join(a.file.as_deref().unwrap_or(workspace::file::DEFAULT_FILE));
        workspace::load(&file, a.workspace.as_deref()).map_err(|e| format!("Error: {e}"))
    }

    /// A connection for a run of several calls. Taken through one cheap
    /// call, so that a connection to a daemon that has gone away since (an
    /// upgrade, a restart) is made again here, not found broken half way.
    async fn client(
        &self,
    ) -> Result<pb::portal_client::PortalClient<tonic::transport::Channel>, String> {
        self.link
            .call(|mut c| async move {
                let reply = c.get_info(pb::GetInfoRequest {}).await?;
                Ok(tonic::Response::new((reply.into_inner(), c)))
            })
            .await
            .map(|(_, c)| c)
            .map_err(|e| super::error_text(&e, None, self.host.as_deref()))
    }

    pub(super) async fn workspace_up(
        &self,
        a: WorkspaceArgs,
        progress: Progress,
    ) -> Reply<WorkspaceReport> {
        let ws = self.workspace(&a)?;
        let mut rpc = self.client().await?;
        let remote = self.host.is_some();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let up = async move {
            let r = workspace::up(&mut rpc, &ws, remote, |step| {
                let _ = tx.send(step.to_string());
            })
            .await;
            (r, ws)
        };
        let forward = async {
            let mut steps = Vec::new();
            let mut n = 0.0;
            while let Some(step) = rx.recv().await {
                if let Some((peer, token)) = &progress {
                    n += 1.0;
                    let note =
                        ProgressNotificationParam::new(token.clone(), n).with_message(step.clone());
                    let _ = peer.notify_progress(note).await;
                }
                steps.push(step);
            }
            steps
        };
        let ((result, ws), steps) = tokio::join!(up, forward);
        match result {
            Ok(states) => {
                let report = report(&ws, &states);
                Ok((told(&steps, &report), report))
            }
            Err(UpError::Member { member, id, why, last_output }) => {
                let at = id.map(|id| format!(" (process {id})")).unwrap_or_default();
                let mut text = format!("Error: {member}{at}: {why}\nSteps:\n{}", steps.join("\n"));
                if !last_output.trim().is_empty() {
                    let tail: Vec<&str> = last_output.trim_end().lines().rev().take(15).collect();
                    text.push_str("\nIts last output:\n");
                    for line in tail.into_iter().rev() {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
                text.push_str("\nThe members before it keep running, and so does it if it runs: fix it, then call workspace_up again (it keeps what runs).");
                Err(text)
            }
            Err(UpError::NotPrompted { failed, members }) => {
                let report = report(&ws, &members);
                let which: Vec<String> =
                    failed.iter().map(|(m, why)| format!("{m}: {why}")).collect();
                Err(format!(
                    "Error: every member was started or kept, but a first prompt was not typed ({}). Type it with process_run (agent_send for an agent).\n{}",
                    which.join("; "),
                    told(&steps, &report)
                ))
            }
            Err(UpError::Rpc(s)) => Err(format!("Error: {}", s.message())),
        }
    }

    pub(super) async fn workspace_status(
        &self,
        a: WorkspaceRef,
        _: Progress,
    ) -> Reply<WorkspaceReport> {
        let ws = self.workspace(&a.into())?;
        let mut rpc = self.client().await?;
        let states = workspace::status(&mut rpc, &ws)
            .await
            .map_err(|s| format!("Error: {}", s.message()))?;
        let report = report(&ws, &states);
        Ok((members_text(&report), report))
    }

    pub(super) async fn workspace_down(
        &self,
        a: WorkspaceRef,
        _: Progress,
    ) -> Reply<WorkspaceReport> {
        let ws = self.workspace(&a.into())?;
        let mut rpc = self.client().await?;
        let mut steps = Vec::new();
        let states = workspace::down(&mut rpc, &ws, |s| steps.push(s.to_string()))
            .await
            .map_err(|s| format!("Error: {}", s.message()))?;
        let report = report(&ws, &states);
        Ok((told(&steps, &report), report))
    }
}

/// A result's text: the steps taken, then the members.
fn told(steps: &[String], report: &WorkspaceReport) -> String {
    let mut text = steps.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&members_text(report));
    text
}

fn report(ws: &Workspace, states: &[MemberState]) -> WorkspaceReport {
    WorkspaceReport {
        workspace: ws.name.clone(),
        members: states
            .iter()
            .map(|m| {
                let p = m.process.as_ref();
                MemberInfo {
                    member: m.name.clone(),
                    id: p.map(|p| p.id),
                    status: p
                        .map_or("not_started", |p| vocab::Status::from(p.status()).as_str())
                        .to_owned(),
                    exit_code: p.and_then(|p| p.exit_code),
                    input_state: p
                        .filter(|p| p.status() == pb::Status::Running)
                        .map(|p| vocab::InputState::from(p.input_state()).as_str().to_owned()),
                    agent_state: m
                        .agent
                        .as_ref()
                        .map(|a| vocab::AgentState::from(a.state()).as_str().to_owned()),
                    restarts: p.map_or(0, |p| p.restarts),
                }
            })
            .collect(),
    }
}

fn members_text(r: &WorkspaceReport) -> String {
    let mut text = format!("Workspace {}:", r.workspace);
    for m in &r.members {
        text.push_str(&format!(
            "\n{} {}: {}",
            m.member,
            m.id.map_or("-".into(), |i| i.to_string()),
            m.status
        ));
        if let Some(i) = &m.input_state {
            text.push_str(&format!(", {i}"));
        }
        if let Some(a) = &m.agent_state {
            text.push_str(&format!(", agent {a}"));
        }
        if m.restarts > 0 {
            text.push_str(&format!(", restarted {}×", m.restarts));
        }
    }
    text
}
