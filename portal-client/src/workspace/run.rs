//! Bringing a workspace up and down, and reading its state, through the
//! daemon's API (so the CLI and the MCP shim do exactly the same).
//!
//! `up` goes through the members in start order: one running under its
//! name is kept, anything else is started (taking the name over from an
//! ended run); each then waits for its readiness before the next starts,
//! and a member with a first prompt gets it once it waits for input, only
//! while nothing was ever typed into it (a second `up`, even after a daemon
//! restart, never types it again; a retry of an interrupted one does): an
//! agent through the agent send (which waits until it is at rest and never
//! types into a dialog), any other program as `process_run` types (the
//! daemon's Run). A prompt that cannot be typed within the member's
//! `ready_timeout` is said, and the members after it are still started.
//! `down` kills the running members in reverse order.

use std::time::{Duration, Instant};

use tonic::transport::Channel;

use super::file::{Member, Ready, Restart, Workspace};
use crate::environ::EnvFrom;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;

type Rpc = PortalClient<Channel>;

/// Restarts wait this long first, doubling each time (portald caps it).
const RESTART_BACKOFF: Duration = Duration::from_secs(1);

/// The output shown with a member that failed to become ready.
const LAST_OUTPUT_BYTES: u64 = 2048;

/// What `up` or `down` did, as it happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Running already (or a one-shot done): kept.
    Kept {
        /// Member.
        member: String,
        /// Its process.
        id: u64,
        /// How it is: "running", "done (exit 0)".
        how: String,
        /// The running program is not the file's (another command, args or
        /// directory): what it runs.
        differs: Option<String>,
    },
    /// It failed before it was ready; portald restarts it (its policy).
    Restarting {
        /// Member.
        member: String,
        /// The failed run.
        id: u64,
    },
    /// Started.
    Started {
        /// Member.
        member: String,
        /// Its process.
        id: u64,
    },
    /// Waiting until it is ready.
    Waiting {
        /// Member.
        member: String,
        /// For what, in words.
        what: String,
    },
    /// Ready.
    Ready {
        /// Member.
        member: String,
        /// Milliseconds the wait took.
        after_ms: u64,
    },
    /// Its first prompt was typed.
    Prompted {
        /// Member.
        member: String,
        /// How the program took it, when that is known (not an agent):
        /// "it waits for input again", "still busy with it after 5 s".
        then: Option<String>,
    },
    /// Its first prompt could not be typed; the next members start anyway.
    NotPrompted {
        /// Member.
        member: String,
        /// Why.
        why: String,
    },
    /// Killed (`down`).
    Stopped {
        /// Member.
        member: String,
        /// Its process.
        id: u64,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Kept { member, id, how, differs: None } => {
                write!(f, "{member}: {how} ({id}), kept")
            }
            Step::Kept { member, id, how, differs: Some(runs) } => write!(
                f,
                "{member}: {how} ({id}), kept, but it is not what the file says: it runs {runs} (down, then up, starts the file's)"
            ),
            Step::Restarting { member, id } => {
                write!(f, "{member}: failed before it was ready ({id}); waiting for its restart")
            }
            Step::Started { member, id } => write!(f, "{member}: started ({id})"),
            Step::Waiting { member, what } => write!(f, "{member}: waiting for {what}"),
            Step::Ready { member, after_ms } => write!(f, "{member}: ready after {after_ms} ms"),
            Step::Prompted { member, then: None } => write!(f, "{member}: first prompt sent"),
            Step::Prompted { member, then: Some(then) } => {
                write!(f, "{member}: first prompt sent; {then}")
            }
            Step::NotPrompted { member, why } => {
                write!(f, "{member}: its first prompt was not typed: {why}")
            }
            Step::Stopped { member, id } => write!(f, "{member}: stopped ({id})"),
        }
    }
}

/// Why `up` stopped.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    /// A member could not be started or did not become ready; the members
    /// before it are left running, the ones after it are not started.
    #[error("{member}: {why}")]
    Member {
        /// Member.
        member: String,
        /// Its process, when it was started.
        id: Option<u64>,
        /// What happened.
        why: String,
        /// The end of its output, for the person to see why.
        last_output: String,
    },
    /// Every member was started (or kept), but the first prompts of these
    /// could not be typed.
    #[error("first prompts not typed: {}", .failed.iter().map(|(m, why)| format!("{m}: {why}")).collect::<Vec<_>>().join("; "))]
    NotPrompted {
        /// Each member whose prompt was not typed, and why.
        failed: Vec<(String, String)>,
        /// Every member's state at the end.
        members: Vec<MemberState>,
    },
    /// The daemon refused or went away.
    #[error(transparent)]
    Rpc(#[from] tonic::Status),
}

/// One member as the daemon sees it now.
#[derive(Clone, Debug)]
pub struct MemberState {
    /// Member name.
    pub name: String,
    /// Its process (the newest run under its name), if any.
    pub process: Option<pb::Process>,
    /// The agent in its terminal, if any.
    pub agent: Option<pb::Agent>,
}

/// The process named `name`, if there is one.
async fn find(rpc: &mut Rpc, name: &str) -> Result<Option<pb::Process>, tonic::Status> {
    let proc = Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Name(name.to_owned())) });
    match rpc.inspect(pb::InspectRequest { proc }).await {
        Ok(p) => Ok(Some(p.into_inner())),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
        Err(s) => Err(s),
    }
}

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Each member and its process and agent, in start order.
pub async fn status(rpc: &mut Rpc, ws: &Workspace) -> Result<Vec<MemberState>, tonic::Status> {
    let agents = rpc.agent_list(pb::AgentListRequest { states: vec![] }).await?.into_inner().agents;
    let mut out = Vec::with_capacity(ws.members.len());
    for m in &ws.members {
        let process = find(rpc, &m.name).await?;
        let agent = process.as_ref().and_then(|p| agents.iter().find(|a| a.id == p.id).cloned());
        out.push(MemberState { name: m.name.clone(), process, agent });
    }
    Ok(out)
}

/// Brings the workspace up (see the module's doc); `progress` hears each
/// step as it happens. Members start in the environment of whoever runs
/// `up`, or in the daemon's when that runs on another host (`remote`:
/// this machine's environment is never sent there), with the file's `env`
/// over it.
pub async fn up(
    rpc: &mut Rpc,
    ws: &Workspace,
    remote: bool,
    mut progress: impl FnMut(&Step),
) -> Result<Vec<MemberState>, UpError> {
    let mut not_prompted = Vec::new();
    for m in &ws.members {
        // The prompt, too, comes within the member's ready timeout.
        let deadline = Instant::now() + m.ready_timeout;
        let existing = find(rpc, &m.name).await?;
        let kept = existing.filter(|p| {
            p.status() == pb::Status::Running
                || (m.ready == Ready::Exit
                    && p.status() == pb::Status::Exited
                    && p.exit_code == Some(0))
        });
        let fresh = kept.is_none();
        let process = match kept {
            Some(p) => {
                let how = if p.status() == pb::Status::Running {
                    "running already"
                } else {
                    "done (exit 0)"
                };
                progress(&Step::Kept {
                    member: m.name.clone(),
                    id: p.id,
                    how: how.into(),
                    differs: differs(m, &p),
                });
                p
            }
            None => {
                let mut req = start_request(m);
                let env = if remote { EnvFrom::Daemon } else { EnvFrom::Caller };
                // Refused only for the caller's with `remote`, not chosen.
                let _ = crate::environ::apply(&mut req, env, remote);
                let p = rpc.start(req).await.map_err(|s| UpError::Member {
                    member: m.name.clone(),
                    id: None,
                    why: format!("cannot start it: {}", s.message()),
                    last_output: String::new(),
                })?;
                let p = p.into_inner();
                progress(&Step::Started { member: m.name.clone(), id: p.id });
                p
            }
        };
        // A kept member that waits for input was ready when it was started;
        // an agent busy with its prompt now does not wait for input.
        let process = if fresh || m.ready != Ready::Input {
            ready(rpc, m, process, &mut progress).await?
        } else {
            process
        };
        if let Some(prompt) = &m.prompt {
            let typed = prompt_once(rpc, ws, m, process.id, prompt, deadline).await?;
            match typed {
                Typed::Already => {}
                Typed::Now { then } => progress(&Step::Prompted { member: m.name.clone(), then }),
                Typed::Not(why) => {
                    progress(&Step::NotPrompted { member: m.name.clone(), why: why.clone() });
                    not_prompted.push((m.name.clone(), why));
                }
            }
        }
    }
    let members = status(rpc, ws).await?;
    if not_prompted.is_empty() {
        Ok(members)
    } else {
        Err(UpError::NotPrompted { failed: not_prompted, members })
    }
}

fn start_request(m: &Member) -> pb::StartRequest {
    pb::StartRequest {
        command: m.command.clone(),
        args: m.args.clone(),
        cwd: m.cwd.to_string_lossy().into_owned(),
        env: m.env.clone().into_iter().collect(),
        name: m.name.clone(),
        timeout_ms: m.timeout.map_or(0, ms),
        mode: if m.pty { pb::Mode::Pty } else { pb::Mode::Pipes }.into(),
        size: m.size.map(|(rows, cols)| pb::TermSize { rows, cols }),
        restart: match m.restart {
            Restart::Never => None,
            Restart::OnFailure { max } => Some(pb::RestartPolicy {
                on_failure: true,
                max_restarts: max,
                backoff_ms: ms(RESTART_BACKOFF),
            }),
        },
        replace_ended: true,
        ..Default::default()
    }
}

/// Waits until `m` is ready, or says why it will not be.
async fn ready(
    rpc: &mut Rpc,
    m: &Member,
    mut process: pb::Process,
    progress: &mut impl FnMut(&Step),
) -> Result<pb::Process, UpError> {
    let (what, until) = match &m.ready {
        Ready::Started => return Ok(process),
        Ready::Text(t) => (
            format!("{t:?} in its output"),
            pb::WaitCondition { needle: t.clone(), input: Some(false), ..Default::default() },
        ),
        Ready::Input => (
            "it to wait for input".to_owned(),
            pb::WaitCondition { input: Some(true), ..Default::default() },
        ),
        Ready::Exit => (
            "it to exit".to_owned(),
            pb::WaitCondition { input: Some(false), ..Default::default() },
        ),
    };
    progress(&Step::Waiting { member: m.name.clone(), what: what.clone() });
    let began = Instant::now();
    let mut from = Some(history_start(&process));
    let mut id = process.id;
    let outcome = loop {
        let fail = |why: String| (m.name.clone(), id, why);
        let left = m.ready_timeout.saturating_sub(began.elapsed());
        if left.is_zero() {
            break Err(fail(format!(
                "not ready after {} s: still waiting for {what}",
                m.ready_timeout.as_secs()
            )));
        }
        let until = pb::WaitCondition { timeout_ms: ms(left).max(1), ..until.clone() };
        let w = rpc
            .wait(pb::WaitRequest {
                proc: by_id(id),
                streams: vec![],
                from: from.take(),
                until: Some(until),
            })
            .await?
            .into_inner();
        match (w.reason(), &m.ready) {
            (pb::WaitReason::Matched, Ready::Text(_))
            | (pb::WaitReason::InputRequested | pb::WaitReason::AwaitingSecret, Ready::Input) => {
                break Ok(());
            }
            (pb::WaitReason::Exited, Ready::Exit) if w.exit_code == Some(0) => break Ok(()),
            (pb::WaitReason::Exited, _) => {
                // Its policy restarts it: follow the new run.
                if let Some(next) = restarted(rpc, m, id, began).await? {
                    progress(&Step::Restarting { member: m.name.clone(), id });
                    from = Some(history_start(&next));
                    id = next.id;
                    process = next;
                    continue;
                }
                let how = match (w.exit_code, w.exit_signal) {
                    (Some(c), _) => format!("exit status {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "no exit status".to_owned(),
                };
                break Err(fail(format!("ended ({how}) before it was ready")));
            }
            // The daemon's ceiling cut the wait short: go on from where it
            // stopped.
            _ => from = w.next.clone(),
        }
    };
    match outcome {
        Ok(()) => {
            progress(&Step::Ready { member: m.name.clone(), after_ms: ms(began.elapsed()) });
            Ok(process)
        }
        Err((member, id, why)) => {
            let last_output = last_output(rpc, id).await;
            Err(UpError::Member { member, id: Some(id), why, last_output })
        }
    }
}

/// A cursor at the start of a process's output history: a line printed
/// before a wait (or before an earlier `up`) counts.
fn history_start(p: &pb::Process) -> pb::Cursor {
    let offsets = p
        .streams
        .iter()
        .filter(|s| s.stream() != pb::Stream::Stdin)
        .map(|s| pb::StreamOffset { stream: s.stream, offset: s.start_offset })
        .collect();
    pb::Cursor { offsets }
}

/// How often `up` looks for the restart of a member that failed before it
/// was ready (portald waits a second or more before restarting).
const RESTART_POLL: Duration = Duration::from_millis(200);

/// The run portald started after run `id` of a member with a restart
/// policy failed, once it is there (within the member's ready timeout);
/// `None` when no restart is coming.
async fn restarted(
    rpc: &mut Rpc,
    m: &Member,
    id: u64,
    began: Instant,
) -> Result<Option<pb::Process>, tonic::Status> {
    let Restart::OnFailure { .. } = m.restart else { return Ok(None) };
    loop {
        let failed = rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await?.into_inner();
        if failed.replaced_by != 0 {
            let next = rpc.inspect(pb::InspectRequest { proc: by_id(failed.replaced_by) }).await?;
            return Ok(Some(next.into_inner()));
        }
        let limit = failed.restart.map_or(0, |r| r.max_restarts);
        // Its last restart failed too, it was killed, or time is up.
        let succeeded = failed.exit_code == Some(0) && failed.exit_signal.is_none();
        if failed.restarts >= limit
            || succeeded
            || failed.status() != pb::Status::Exited
            || began.elapsed() >= m.ready_timeout
        {
            return Ok(None);
        }
        tokio::time::sleep(RESTART_POLL).await;
    }
}

/// What the running process `p` runs, when that is not what member `m`
/// says (another command, arguments or directory).
fn differs(m: &Member, p: &pb::Process) -> Option<String> {
    let same = p.command == m.command
        && p.args == m.args
        && (p.cwd.is_empty() || std::path::Path::new(&p.cwd) == m.cwd);
    (!same).then(|| {
        let mut line = p.command.clone();
        for a in &p.args {
            line.push(' ');
            line.push_str(a);
        }
        format!("`{line}` in {}", p.cwd)
    })
}

/// The end of a process's output, as text.
async fn last_output(rpc: &mut Rpc, id: u64) -> String {
    let req = pb::ReadRequest {
        proc: by_id(id),
        from: Some(pb::read_request::From::Tail(true)),
        max_bytes: LAST_OUTPUT_BYTES,
        encoding: pb::Encoding::Text.into(),
        ..Default::default()
    };
    match rpc.read(req).await {
        Ok(r) => {
            let bytes: Vec<u8> = r.into_inner().records.into_iter().flat_map(|r| r.data).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(_) => String::new(),
    }
}

/// Whether a first prompt was typed.
enum Typed {
    /// Something was typed into the member before: nothing is typed.
    Already,
    /// Typed now; how the program took it, when known.
    Now {
        /// "it waits for input again", "still busy with it after 5 s".
        then: Option<String>,
    },
    /// Not typed, and why.
    Not(String),
}

/// How long `up` watches a program that is not an agent take its first
/// prompt (as `process_run` does) before it goes on: enough for a REPL's or
/// a shell's first commands, and to tell a person whether the program asked
/// for input again; a prompt that starts a server holds the rest of the
/// workspace up no longer than this.
const PROMPT_RESULT_WAIT: Duration = Duration::from_secs(5);

/// Whether the daemon takes the process for a coding agent.
async fn is_agent(rpc: &mut Rpc, id: u64) -> Result<bool, tonic::Status> {
    let agents = rpc.agent_list(pb::AgentListRequest { states: vec![] }).await?.into_inner();
    Ok(agents.agents.iter().any(|a| a.id == id))
}

/// A cursor at the end of a process's output now.
fn output_end(p: &pb::Process) -> pb::Cursor {
    let offsets = p
        .streams
        .iter()
        .filter(|s| s.stream() != pb::Stream::Stdin)
        .map(|s| pb::StreamOffset { stream: s.stream, offset: s.end_offset })
        .collect();
    pb::Cursor { offsets }
}

/// Types the member's first prompt, unless anything was ever typed into
/// it, by `deadline`: into an agent once it is at rest, into any other
/// program once it waits for input.
async fn prompt_once(
    rpc: &mut Rpc,
    ws: &Workspace,
    m: &Member,
    id: u64,
    prompt: &str,
    deadline: Instant,
) -> Result<Typed, tonic::Status> {
    let p = rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await?.into_inner();
    let typed = p.streams.iter().any(|s| s.stream() == pb::Stream::Stdin && s.end_offset > 0);
    if typed {
        return Ok(Typed::Already);
    }
    let secs = m.ready_timeout.as_secs();
    if !is_agent(rpc, id).await? {
        // An agent says so as it starts, before it waits for input: look
        // again once the program does.
        let mut from = Some(output_end(&p));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Typed::Not(format!(
                    "it did not wait for input within its ready_timeout ({secs} s)"
                )));
            }
            let until = pb::WaitCondition {
                input: Some(true),
                timeout_ms: ms(left).max(1),
                ..Default::default()
            };
            let req = pb::WaitRequest {
                proc: by_id(id),
                streams: vec![],
                from: from.take(),
                until: Some(until),
            };
            let w = rpc.wait(req).await?.into_inner();
            match w.reason() {
                pb::WaitReason::InputRequested => break,
                pb::WaitReason::AwaitingSecret => {
                    return Ok(Typed::Not(
                        "it asks for a secret (a password prompt): a person types that with `portal-cli secret`".into(),
                    ));
                }
                pb::WaitReason::Exited => {
                    return Ok(Typed::Not("it ended before it waited for input".into()));
                }
                // Output went on (the byte cap) or the daemon's ceiling cut
                // the wait: go on from where it stopped.
                _ => from = w.next,
            }
        }
        if !is_agent(rpc, id).await? {
            return run_prompt(rpc, id, prompt, deadline).await;
        }
    }
    let req = pb::AgentSendRequest {
        ids: vec![id],
        text: prompt.to_owned(),
        // A retry of this very send (an `up` cut short) is not typed twice.
        key: format!("workspace/{}/{}/{id}", ws.name, m.name),
        timeout_ms: ms(deadline.saturating_duration_since(Instant::now())).max(1),
        ..Default::default()
    };
    let r = rpc.agent_send(req).await?.into_inner();
    Ok(match r.results.first() {
        Some(x) if x.sent => Typed::Now { then: None },
        Some(x) if x.outcome() == pb::AgentWaitOutcome::NotAnAgent => {
            return run_prompt(rpc, id, prompt, deadline).await;
        }
        Some(x) if x.outcome() == pb::AgentWaitOutcome::Timeout && x.detail.is_empty() => {
            Typed::Not(format!(
                "the agent did not come to rest (awaiting_input, done or idle) within its ready_timeout ({secs} s)"
            ))
        }
        Some(x) if x.outcome() == pb::AgentWaitOutcome::Timeout => {
            Typed::Not(format!("{} (within its ready_timeout, {secs} s)", x.detail))
        }
        Some(x) => Typed::Not(x.detail.clone()),
        None => Typed::Not("the daemon gave no answer for it".into()),
    })
}

/// Types the prompt into a program that is not an agent, as `process_run`
/// does, and says how the program took it.
async fn run_prompt(
    rpc: &mut Rpc,
    id: u64,
    prompt: &str,
    deadline: Instant,
) -> Result<Typed, tonic::Status> {
    let wait = deadline.saturating_duration_since(Instant::now()).min(PROMPT_RESULT_WAIT);
    let req = pb::RunRequest {
        proc: by_id(id),
        input: prompt.to_owned(),
        no_enter: false,
        until: Some(pb::WaitCondition {
            input: Some(true),
            timeout_ms: ms(wait).max(1),
            ..Default::default()
        }),
    };
    let r = match rpc.run(req).await {
        Ok(r) => r.into_inner(),
        // The next member's start says so if the daemon itself went away.
        Err(s) => return Ok(Typed::Not(format!("it could not be typed: {}", s.message()))),
    };
    let then = match r.reason() {
        pb::WaitReason::InputRequested | pb::WaitReason::Prompt => {
            "it waits for input again".to_owned()
        }
        pb::WaitReason::AwaitingSecret => "it asks for a secret now".to_owned(),
        pb::WaitReason::Exited => match (r.exit_code, r.exit_signal) {
            (Some(c), _) => format!("it exited (status {c})"),
            (None, Some(sig)) => format!("it ended by signal {sig}"),
            _ => "it ended".to_owned(),
        },
        _ => format!("still busy with it after {} s", wait.as_secs()),
    };
    Ok(Typed::Now { then: Some(then) })
}

/// Kills the running members, in reverse start order.
pub async fn down(
    rpc: &mut Rpc,
    ws: &Workspace,
    mut progress: impl FnMut(&Step),
) -> Result<Vec<MemberState>, tonic::Status> {
    for m in ws.members.iter().rev() {
        let Some(p) = find(rpc, &m.name).await? else { continue };
        if p.status() == pb::Status::Running {
            rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await?;
            progress(&Step::Stopped { member: m.name.clone(), id: p.id });
        } else if p.restart.is_some() {
            // A failed run may be waiting for its restart: the kill
            // cancels it.
            rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await?;
        }
    }
    status(rpc, ws).await
}
