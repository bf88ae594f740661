//! Agent commands: `agents` (list, `--watch`, `wait`, `send`), `hooks`, and
//! `emit`, the command agents' hooks run to report their state.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use portal_client::client::Client;
use portal_client::vocab;
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt::{self, print_json};
use crate::notify;
use crate::{Failure, JsonFlag, Outcome};

/// Agent states by the names every client shows ([`names::agent_state`]).
fn agent_state_parser() -> impl clap::builder::TypedValueParser<Value = pb::AgentState> {
    let names: Vec<&'static str> =
        vocab::AgentState::ATTENTION.iter().map(|s| s.as_str()).collect();
    clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(names), |name| {
        vocab::AgentState::parse(&name).map(pb::AgentState::from).unwrap_or(pb::AgentState::Unknown)
    })
}

/// Arguments of `agents`.
#[derive(Debug, Args)]
pub(crate) struct AgentsArgs {
    #[command(subcommand)]
    command: Option<AgentsCommand>,
    /// Only agents in these states.
    #[arg(long, value_delimiter = ',', value_parser = agent_state_parser())]
    state: Vec<pb::AgentState>,
    /// Redraw on every change, until Ctrl-C.
    #[arg(short, long)]
    watch: bool,
    /// With --watch (implied): a desktop notification (notify-send,
    /// osascript; else the terminal bell) each time an agent starts waiting
    /// for you (awaiting_input) or finishes its turn (done).
    #[arg(long)]
    notify: bool,
    #[command(flatten)]
    out: JsonFlag,
}

#[derive(Debug, Subcommand)]
enum AgentsCommand {
    /// Wait until agents reach a state; exit 0 when they did.
    Wait {
        /// Agents' processes, by id or name.
        #[arg(required = true, add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        ids: Vec<String>,
        /// Target states [default: awaiting_input,done,idle].
        #[arg(long, value_delimiter = ',', value_parser = agent_state_parser())]
        state: Vec<pb::AgentState>,
        /// Return when the first one gets there (default: all).
        #[arg(long)]
        any: bool,
        /// Give up after this long [default: 30s; capped by the daemon].
        #[arg(long, value_parser = fmt::parse_duration)]
        timeout: Option<Duration>,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Send a prompt once the agents are ready: agents send IDS... -- TEXT
    Send {
        /// Agents' processes, by id or name.
        #[arg(required = true, add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        ids: Vec<String>,
        /// Idempotency key: a retry with the same key is not typed twice.
        #[arg(long)]
        key: Option<String>,
        /// Send even if the agent is not in a ready state.
        #[arg(long)]
        no_wait: bool,
        /// Do not press Enter after the text.
        #[arg(long)]
        no_enter: bool,
        /// How long to wait for readiness.
        #[arg(long, value_parser = fmt::parse_duration)]
        timeout: Option<Duration>,
        #[command(flatten)]
        out: JsonFlag,
        /// The prompt, after `--`.
        #[arg(required = true, last = true)]
        text: Vec<String>,
    },
    /// One line for a status bar or a prompt: how many agents are in each
    /// state, most urgent first (`wait:1 done:2 run:3`). One daemon call;
    /// starts no daemon (prints --empty when none runs).
    Statusline(StatuslineArgs),
}

/// Arguments of `agents statusline`.
#[derive(Debug, Args)]
pub(crate) struct StatuslineArgs {
    /// A state's label, STATE=TEXT (wait, done, run, idle, exit, ?, or the
    /// full state names); repeat for several.
    #[arg(long = "label", value_name = "STATE=TEXT")]
    labels: Vec<String>,
    /// How each state shows: {label} and {count} are replaced.
    #[arg(long, default_value = "{label}:{count}")]
    format: String,
    /// Between two states.
    #[arg(long, default_value = " ")]
    separator: String,
    /// What to print when no agent runs (or portald does not).
    #[arg(long, default_value = "")]
    empty: String,
    /// Leave out agents that exited.
    #[arg(long)]
    no_exited: bool,
    #[command(flatten)]
    out: JsonFlag,
}

impl AgentsArgs {
    /// The statusline's arguments, when that is the command (it runs
    /// without starting a daemon).
    pub(crate) fn statusline(&self) -> Option<&StatuslineArgs> {
        match &self.command {
            Some(AgentsCommand::Statusline(s)) => Some(s),
            _ => None,
        }
    }
}

/// `agents statusline`.
pub(crate) async fn statusline(a: &StatuslineArgs) -> Outcome {
    let mut labels = std::collections::HashMap::new();
    for l in &a.labels {
        let (state, text) = l.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("--label {l:?}: write STATE=TEXT, e.g. --label wait=⏳")
        })?;
        let state = vocab::AgentState::ATTENTION
            .into_iter()
            .map(pb::AgentState::from)
            .find(|s| {
                vocab::AgentState::from(*s).label() == state
                    || vocab::AgentState::from(*s).as_str() == state
            })
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--label {l:?}: {state:?} is no agent state (wait, done, run, idle, exit, ?)"
                )
            })?;
        labels.insert(state, text.to_owned());
    }
    let mut opts = portal_client::launch::LaunchOptions::from_env();
    opts.autostart = false;
    let target = crate::TARGET.get().cloned().unwrap_or(portal_client::hosts::Target::Local);
    let agents = match Client::connect_to(&target, &opts).await {
        Ok(c) => {
            c.rpc().agent_list(pb::AgentListRequest { states: vec![] }).await?.into_inner().agents
        }
        // No daemon: no agents.
        Err(_) => Vec::new(),
    };
    let line = tally(&agents, &labels, a);
    if a.out.json {
        let counts: serde_json::Map<String, serde_json::Value> = vocab::AgentState::ATTENTION
            .into_iter()
            .map(pb::AgentState::from)
            .map(|s| {
                let n = agents.iter().filter(|x| x.state() == s).count();
                (vocab::AgentState::from(s).as_str().to_owned(), json!(n))
            })
            .collect();
        print_json(&json!({ "line": line, "counts": counts }));
    } else {
        outln!("{line}");
    }
    Ok(())
}

/// The statusline's text for `agents`.
fn tally(
    agents: &[pb::Agent],
    labels: &std::collections::HashMap<pb::AgentState, String>,
    a: &StatuslineArgs,
) -> String {
    let parts: Vec<String> = vocab::AgentState::ATTENTION
        .into_iter()
        .map(pb::AgentState::from)
        .filter(|s| !(a.no_exited && *s == pb::AgentState::Exited))
        .filter_map(|s| {
            let n = agents
                .iter()
                .filter(|x| {
                    x.state() == s
                        || (s == pb::AgentState::Unknown
                            && x.state() == pb::AgentState::Unspecified)
                })
                .count();
            (n > 0).then(|| {
                let label =
                    labels.get(&s).map_or(vocab::AgentState::from(s).label(), String::as_str);
                a.format.replace("{label}", label).replace("{count}", &n.to_string())
            })
        })
        .collect();
    if parts.is_empty() { a.empty.clone() } else { parts.join(&a.separator) }
}

fn ms(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn agent_json(a: &pb::Agent) -> serde_json::Value {
    json!({
        "id": a.id, "process_name": a.process_name, "name": a.name, "kind": a.kind, "state": vocab::AgentState::from(a.state()).as_str(),
        "source": vocab::AgentSource::from(a.source()).as_str(), "exact": a.exact, "reason": a.reason, "event": a.event,
        "since_ns": a.since_ns, "age_ms": a.age_ms, "session_id": a.session_id, "pid": a.pid,
        "process_status": vocab::Status::from(a.process_status()).as_str(), "dialog": a.dialog,
    })
}

/// What Codex's trust in Portal's hooks means for the person, after the
/// status: it runs a hook only once it was approved in its `/hooks` view.
fn trust_words(trust: &str) -> &'static str {
    match vocab::HookTrust::parse(trust) {
        Some(vocab::HookTrust::Trusted) => ", trusted by Codex",
        Some(vocab::HookTrust::PartlyTrusted) => {
            ", only partly trusted by Codex: run codex and approve the rest in its /hooks view"
        }
        Some(vocab::HookTrust::Untrusted) => {
            ", not yet trusted by Codex: run codex once and approve them in its /hooks view"
        }
        // Not a Codex report (empty), or a name this CLI does not know.
        None => "",
    }
}

fn print_agents(r: &pb::AgentListResponse) {
    if r.agents.is_empty() {
        outln!("No agents.");
        return;
    }
    // NAME is the process's (what `ps` shows, and what commands take), so
    // four agents of one kind are four names; KIND is which agent it is.
    let name_width =
        r.agents.iter().map(|a| a.process_name.chars().count()).max().unwrap_or(0).clamp(4, 20);
    outln!(
        "{:>4}  {:<name_width$} {:<8} {:<15} {:<10} {:>6}  REASON",
        "ID",
        "NAME",
        "KIND",
        "STATE",
        "SOURCE",
        "AGE"
    );
    for a in &r.agents {
        let state = if fmt::color() {
            let style = match a.state() {
                pb::AgentState::AwaitingInput => anstyle::AnsiColor::Yellow.on_default().bold(),
                pb::AgentState::Done => anstyle::AnsiColor::Green.on_default(),
                pb::AgentState::Running => anstyle::AnsiColor::Cyan.on_default(),
                _ => anstyle::Style::new().dimmed(),
            };
            fmt::paint(style, &format!("{:<15}", vocab::AgentState::from(a.state()).as_str()))
        } else {
            format!("{:<15}", vocab::AgentState::from(a.state()).as_str())
        };
        let source = format!(
            "{}{}",
            vocab::AgentSource::from(a.source()).as_str(),
            if a.exact { "" } else { "?" }
        );
        let name: String = if a.process_name.is_empty() {
            "-".into()
        } else {
            a.process_name.chars().take(name_width).collect()
        };
        let kind = if a.kind.is_empty() { &a.name } else { &a.kind };
        let kind = if kind.is_empty() { "-" } else { kind.as_str() };
        outln!(
            "{:>4}  {name:<name_width$} {kind:<8} {state} {:<10} {:>6}  {}",
            a.id,
            source,
            fmt::short_duration(a.age_ms),
            a.reason
        );
        if !a.dialog.is_empty() {
            outln!("      shows a dialog (answer with send-keys or attach):");
            for line in a.dialog.lines() {
                outln!("        {line}");
            }
        }
    }
    outln!("{}", r.summary);
}

/// Process ids for ids or names (a name is looked up; one nobody has is a
/// clear error from the daemon).
async fn resolve(
    rpc: &mut portal_proto::v1::portal_client::PortalClient<tonic::transport::Channel>,
    refs: &[String],
) -> Result<Vec<u64>, Failure> {
    let mut ids = Vec::with_capacity(refs.len());
    for r in refs {
        match r.parse::<u64>() {
            Ok(id) => ids.push(id),
            Err(_) => {
                let req = pb::InspectRequest { proc: crate::proc_ref(r) };
                ids.push(rpc.inspect(req).await?.into_inner().id);
            }
        }
    }
    Ok(ids)
}

/// `agents` and its subcommands.
pub(crate) async fn agents(client: &Client, a: AgentsArgs) -> Outcome {
    let mut rpc = client.rpc();
    match a.command {
        None => {
            let watch = a.watch || a.notify;
            let states: Vec<i32> = a.state.iter().map(|s| i32::from(*s)).collect();
            // The cursor first: a change after it is never missed, and the
            // list printed next already shows it.
            let mut cursor = if watch {
                rpc.agent_watch(pb::AgentWatchRequest {
                    since: u64::MAX,
                    timeout_ms: 1,
                    ..Default::default()
                })
                .await?
                .into_inner()
                .cursor
            } else {
                0
            };
            let list =
                rpc.agent_list(pb::AgentListRequest { states: states.clone() }).await?.into_inner();
            if a.out.json {
                print_json(
                    &json!({"agents": list.agents.iter().map(agent_json).collect::<Vec<_>>(), "summary": list.summary}),
                );
            } else {
                print_agents(&list);
            }
            crate::stdout::finish(std::io::stdout().flush());
            if !watch {
                return Ok(());
            }
            loop {
                let w = rpc
                    .agent_watch(pb::AgentWatchRequest {
                        since: cursor,
                        timeout_ms: 0,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                cursor = w.cursor;
                if w.transitions.is_empty() {
                    continue;
                }
                if a.notify {
                    for (title, body) in w.transitions.iter().filter_map(notify::message) {
                        notify::raise(&title, &body);
                    }
                }
                let list = rpc
                    .agent_list(pb::AgentListRequest { states: states.clone() })
                    .await?
                    .into_inner();
                if a.out.json {
                    for t in &w.transitions {
                        print_json(
                            &json!({"seq": t.seq, "id": t.id, "before": vocab::AgentState::from(t.before()).as_str(), "after": vocab::AgentState::from(t.after()).as_str(), "name": t.name, "reason": t.reason}),
                        );
                    }
                } else {
                    if fmt::color() {
                        out!("\x1b[H\x1b[2J");
                    }
                    print_agents(&list);
                }
                crate::stdout::finish(std::io::stdout().flush());
            }
        }
        Some(AgentsCommand::Wait { ids, state, any, timeout, out }) => {
            let req = pb::AgentWaitRequest {
                ids: resolve(&mut rpc, &ids).await?,
                states: state.iter().map(|s| i32::from(*s)).collect(),
                mode: if any { pb::WaitMode::Any } else { pb::WaitMode::All }.into(),
                timeout_ms: ms(timeout),
            };
            let r = rpc.agent_wait(req).await?.into_inner();
            let reached = r.results.iter().map(|x| x.outcome() == pb::AgentWaitOutcome::Reached);
            let ok =
                if any { reached.into_iter().any(|b| b) } else { reached.into_iter().all(|b| b) };
            if out.json {
                print_json(
                    &json!({"results": r.results.iter().map(|x| json!({"id": x.id, "outcome": vocab::AgentWaitOutcome::from(x.outcome()).as_str(), "agent": x.agent.as_ref().map(agent_json)})).collect::<Vec<_>>()}),
                );
            } else {
                for x in &r.results {
                    let st = x
                        .agent
                        .as_ref()
                        .map_or("unknown", |a| vocab::AgentState::from(a.state()).as_str());
                    if x.outcome() == pb::AgentWaitOutcome::NotAnAgent {
                        outln!(
                            "{}: not_an_agent: no coding agent runs in it; wait for the program with `portal-cli wait {}`",
                            x.id,
                            x.id
                        );
                    } else {
                        outln!(
                            "{}: {} ({st})",
                            x.id,
                            vocab::AgentWaitOutcome::from(x.outcome()).as_str()
                        );
                    }
                }
            }
            if ok { Ok(()) } else { Err(Failure::Silent) }
        }
        Some(AgentsCommand::Send { ids, key, no_wait, no_enter, timeout, out, text }) => {
            let req = pb::AgentSendRequest {
                ids: resolve(&mut rpc, &ids).await?,
                text: text.join(" "),
                wait_ready: Some(!no_wait),
                ready_states: vec![],
                no_enter,
                key: key.unwrap_or_default(),
                timeout_ms: ms(timeout),
            };
            let r = rpc.agent_send(req).await?.into_inner();
            if out.json {
                print_json(
                    &json!({"results": r.results.iter().map(|x| json!({"id": x.id, "sent": x.sent, "deduplicated": x.deduplicated, "outcome": vocab::AgentWaitOutcome::from(x.outcome()).as_str(), "detail": x.detail, "dialog": x.dialog})).collect::<Vec<_>>()}),
                );
            } else {
                for x in &r.results {
                    let what = match (x.sent, x.deduplicated) {
                        (true, true) => "already sent (same key)".to_owned(),
                        (true, false) => "sent".to_owned(),
                        (false, _) if !x.dialog.is_empty() => format!(
                            "not sent: it shows a dialog a prompt would answer; answer it (portal-cli send-keys, or attach), then send again:\n  {}",
                            x.dialog.replace('\n', "\n  ")
                        ),
                        (false, _) if x.outcome() == pb::AgentWaitOutcome::NotAnAgent => format!(
                            "not sent: no coding agent runs in it; type into it with `portal-cli run {} -- TEXT`",
                            x.id
                        ),
                        (false, _) => {
                            format!(
                                "not sent: {} ({})",
                                x.detail,
                                vocab::AgentWaitOutcome::from(x.outcome()).as_str()
                            )
                        }
                    };
                    outln!("{}: {what}", x.id);
                }
            }
            if r.results.iter().all(|x| x.sent) { Ok(()) } else { Err(Failure::Silent) }
        }
        Some(AgentsCommand::Statusline(s)) => statusline(&s).await,
    }
}

/// Which agents' hooks.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum HookTarget {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
    /// Both.
    All,
}

/// `hooks` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum HooksCommand {
    /// Add Portal's hooks (idempotent).
    Install {
        /// Which agent.
        #[arg(value_enum, default_value = "all")]
        agent: HookTarget,
        /// Show the change without writing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove Portal's hooks.
    Uninstall {
        /// Which agent.
        #[arg(value_enum, default_value = "all")]
        agent: HookTarget,
        /// Show the change without writing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Report what is installed and what is left to do.
    Status {
        /// Which agent.
        #[arg(value_enum, default_value = "all")]
        agent: HookTarget,
        #[command(flatten)]
        out: JsonFlag,
    },
}

/// `hooks`.
pub(crate) async fn hooks(client: &Client, cmd: HooksCommand) -> Outcome {
    let (action, agent, dry_run, json_out) = match cmd {
        HooksCommand::Install { agent, dry_run } => {
            (pb::HookAction::Install, agent, dry_run, false)
        }
        HooksCommand::Uninstall { agent, dry_run } => {
            (pb::HookAction::Uninstall, agent, dry_run, false)
        }
        HooksCommand::Status { agent, out } => (pb::HookAction::Status, agent, false, out.json),
    };
    let emitter = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let req = pb::AgentHooksRequest {
        action: action.into(),
        agent: match agent {
            HookTarget::Claude => pb::HookAgent::Claude,
            HookTarget::Codex => pb::HookAgent::Codex,
            HookTarget::All => pb::HookAgent::All,
        }
        .into(),
        dry_run,
        emitter,
        home: std::env::var("HOME").unwrap_or_default(),
    };
    let r = client.rpc().agent_hooks(req).await?.into_inner();
    if json_out {
        print_json(&json!(r.reports.iter().map(|x| json!({"agent": x.agent, "path": x.path, "status": x.status, "trust": x.trust, "note": x.note})).collect::<Vec<_>>()));
        return Ok(());
    }
    for x in &r.reports {
        outln!("{}: {}{} ({})", x.agent, x.status, trust_words(&x.trust), x.path);
        if !x.change.is_empty() {
            outln!("  {}", x.change);
        }
        if !x.note.is_empty() {
            outln!("  note: {}", x.note);
        }
        if dry_run && !x.preview.is_empty() {
            outln!("--- {} as it would be ---\n{}", x.path, x.preview);
        }
    }
    Ok(())
}

/// Arguments of `emit`.
#[derive(Debug, Args)]
pub(crate) struct EmitArgs {
    /// The state to report.
    #[arg(value_parser = agent_state_parser())]
    state: pb::AgentState,
    /// The hook event (Stop, Notification, ...).
    #[arg(long, default_value = "")]
    event: String,
    /// The agent's name.
    #[arg(long, default_value = "")]
    name: String,
    /// Why (permission, question, idle_reminder).
    #[arg(long, default_value = "")]
    reason: String,
}

/// Largest hook payload read from stdin.
const MAX_PAYLOAD: u64 = 1 << 20;

/// How long `emit` waits for a hook's stdin to end (hooks close it at once).
const PAYLOAD_WAIT: Duration = Duration::from_secs(2);

fn read_payload() -> String {
    if std::io::stdin().is_terminal() {
        return String::new();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = String::new();
        let _ = std::io::stdin().take(MAX_PAYLOAD).read_to_string(&mut buf);
        let _ = tx.send(buf);
    });
    rx.recv_timeout(PAYLOAD_WAIT).unwrap_or_default()
}

/// Writes the report in-band, as an OSC 3008 record on the controlling
/// terminal: the way out of an SSH session or container that cannot reach
/// the socket (the PTY Portal owns carries it back).
fn emit_in_band(a: &EmitArgs) -> std::io::Result<()> {
    let record = portal_client::osc3008::encode(
        vocab::AgentState::from(a.state).as_str(),
        &[("name", &a.name), ("event", &a.event), ("reason", &a.reason)],
    );
    let mut tty = std::fs::OpenOptions::new().write(true).open("/dev/tty")?;
    tty.write_all(record.as_bytes())?;
    tty.flush()
}

/// `emit`: for hooks. Never fails the agent for a transport problem: when
/// the socket is out of reach it reports in-band instead.
pub(crate) async fn emit(a: EmitArgs) -> Outcome {
    let payload = read_payload();
    let session = std::env::var("PORTAL_SESSION_ID").ok().and_then(|v| v.parse::<u64>().ok());
    let token = std::env::var("PORTAL_SESSION_TOKEN").ok();
    let socket = portal_client::paths::socket_path();
    if let (Some(session), Some(token)) = (session, token)
        && let Ok(client) = Client::connect(&socket).await
    {
        let req = pb::EmitRequest {
            session,
            token,
            state: a.state.into(),
            event: a.event.clone(),
            name: a.name.clone(),
            reason: a.reason.clone(),
            payload_json: payload,
        };
        return match client.rpc().emit(req).await {
            Ok(_) => Ok(()),
            Err(s) => Err(s.into()),
        };
    }
    if let Err(e) = emit_in_band(&a) {
        eprintln!(
            "portal-cli emit: not inside a Portal terminal and no terminal to report on ({e})"
        );
    }
    Ok(())
}
