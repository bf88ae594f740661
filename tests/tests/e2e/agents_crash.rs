//! Agents across a `portald` killed with SIGKILL, with the real binaries
//! (`portald`, `portal-holder`, `portal-cli`): the next daemon knows every
//! agent again, in the state the log last recorded, and sends and waits
//! work on it at once; a state changed after a live upgrade wins over what
//! that upgrade handed over.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_tests::*;

type Rpc = portal_proto::v1::portal_client::PortalClient<tonic::transport::Channel>;

/// A `portald` binary serving a private directory; dropping it kills it.
struct Portald {
    child: Option<Child>,
    dir: PathBuf,
}

/// Kills, when dropped, what the daemons of a socket left running: their
/// programs and holder outlive them by design.
struct Leftovers(PathBuf);

impl Drop for Leftovers {
    fn drop(&mut self) {
        kill_what_outlives(&self.0);
    }
}

impl Portald {
    fn socket(dir: &Path) -> PathBuf {
        dir.join("s").join("portald.sock")
    }

    /// Starts the binary on `dir` and connects once it serves.
    async fn start(dir: &Path) -> (Self, Client) {
        let child = Command::new(sibling_binary("portald"))
            .env("PORTAL_HOLDER", sibling_binary("portal-holder"))
            .arg("--socket")
            .arg(Self::socket(dir))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--kill-grace-ms", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let this = Self { child: Some(child), dir: dir.to_path_buf() };
        let client = this.connect().await;
        (this, client)
    }

    /// A client, once a daemon serves on the socket (a connection made
    /// before it listens is refused; nothing else says when it does).
    async fn connect(&self) -> Client {
        let socket = Self::socket(&self.dir);
        wait_until("portald to serve", async || Client::connect(&socket).await.ok()).await
    }

    /// `portal-cli` pointed at this daemon.
    fn cli(&self) -> Command {
        let mut cmd = Command::new(sibling_binary("portal-cli"));
        cmd.env("PORTAL_SOCKET", Self::socket(&self.dir))
            .env("PORTAL_DATA_DIR", self.dir.join("data"))
            .env("PORTAL_HOLDER", sibling_binary("portal-holder"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// SIGKILL: no handover, no shutdown, nothing written.
    async fn kill_9(mut self) {
        let Some(mut child) = self.child.take() else { return };
        child.kill().unwrap();
        bounded("portald to die", tokio::task::spawn_blocking(move || child.wait()))
            .await
            .unwrap()
            .unwrap();
    }
}

impl Drop for Portald {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn osc(fields: &str) -> String {
    format!("printf '\\033]3008;portal=1;{fields}\\033\\\\'")
}

async fn listed(rpc: &mut Rpc, id: u64) -> Option<pb::Agent> {
    let list = rpc.agent_list(pb::AgentListRequest::default()).await.unwrap().into_inner();
    list.agents.into_iter().find(|a| a.id == id)
}

async fn reach(rpc: &mut Rpc, id: u64, state: pb::AgentState) -> pb::Agent {
    let req = pb::AgentWaitRequest {
        ids: vec![id],
        states: vec![state.into()],
        mode: pb::WaitMode::All.into(),
        timeout_ms: 8000,
    };
    let r = bounded("agent wait", rpc.agent_wait(req)).await.unwrap().into_inner();
    let x = &r.results[0];
    assert_eq!(x.outcome(), pb::AgentWaitOutcome::Reached, "{state:?}: {:?}", x.agent);
    x.agent.clone().unwrap()
}

/// Runs a command to its end off the runtime.
async fn output(mut cmd: Command) -> std::process::Output {
    bounded("portal-cli", tokio::task::spawn_blocking(move || cmd.output().unwrap())).await.unwrap()
}

#[tokio::test]
async fn agents_are_rebuilt_from_the_log_after_portald_is_killed() {
    let dir = test_dir();
    let _leftovers = Leftovers(Portald::socket(dir.path()));
    let (portald, client) = Portald::start(dir.path()).await;
    let mut rpc = client.rpc();
    // A stand-in agent that reports through OSC 3008, waits for a prompt,
    // answers it and finishes its turn.
    let script = format!(
        "{}; read prompt; echo \"got: $prompt\"; {}; read more",
        osc("state=awaiting_input;name=stand-in;reason=question"),
        osc("state=done;name=stand-in"),
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    reach(&mut rpc, p.id, pb::AgentState::AwaitingInput).await;
    // A transition still queued for the log when the daemon dies is lost
    // with it (the crash-loss bound); a list passes the store's commit
    // barrier, so what the test saw is in the log before the kill.
    rpc.list(pb::ListRequest {}).await.unwrap();
    portald.kill_9().await;

    let (portald, client) = Portald::start(dir.path()).await;
    let mut rpc = client.rpc();
    // Known at once, as the log last had it.
    let a = wait_until("the agent to be listed again", async || listed(&mut rpc, p.id).await).await;
    assert_eq!(
        (a.state(), a.name.as_str(), a.source(), a.reason.as_str()),
        (pb::AgentState::AwaitingInput, "stand-in", pb::AgentSource::Osc, "question"),
        "{a:?}"
    );
    let said = output({
        let mut c = portald.cli();
        c.arg("agents");
        c
    })
    .await;
    let said = String::from_utf8_lossy(&said.stdout);
    let row = said.lines().find(|l| l.trim_start().starts_with(&p.id.to_string()));
    assert!(row.is_some_and(|r| r.contains("awaiting_input") && r.contains("question")), "{said}");
    // A send goes in without waiting for a report, and the turn goes on.
    let send = pb::AgentSendRequest {
        ids: vec![p.id],
        text: "hello after the crash".into(),
        ..Default::default()
    };
    let r = bounded("agent send", rpc.agent_send(send)).await.unwrap().into_inner();
    assert!(r.results[0].sent, "{:?}", r.results[0]);
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "got: hello after the crash").await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    drop(portald);
}

#[tokio::test]
async fn a_state_changed_after_an_upgrade_wins_over_the_handover_after_a_crash() {
    let dir = test_dir();
    let _leftovers = Leftovers(Portald::socket(dir.path()));
    let (portald, client) = Portald::start(dir.path()).await;
    let before = client.info().started_at_ns;
    let mut rpc = client.rpc();
    let script = format!(
        "{}; read a; {}; read b",
        osc("state=done;name=stand-in"),
        osc("state=awaiting_input;name=stand-in;reason=question"),
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    // A live upgrade leaves the record (`done`) with the holder.
    let upgraded = output({
        let mut c = portald.cli();
        c.args(["daemon", "upgrade"]);
        c
    })
    .await;
    assert!(upgraded.status.success(), "{}", String::from_utf8_lossy(&upgraded.stderr));
    let client = wait_until("the upgraded daemon to serve", async || {
        let c = portald.connect().await;
        (c.info().started_at_ns != before).then_some(c)
    })
    .await;
    let mut rpc = client.rpc();
    assert_eq!(listed(&mut rpc, p.id).await.unwrap().state(), pb::AgentState::Done);
    // The agent moves on under the new daemon, which is then killed.
    write(&mut rpc, p.id, b"\r").await;
    reach(&mut rpc, p.id, pb::AgentState::AwaitingInput).await;
    // A transition still queued for the log when the daemon dies is lost
    // with it (the crash-loss bound); a list passes the store's commit
    // barrier, so what the test saw is in the log before the kill.
    rpc.list(pb::ListRequest {}).await.unwrap();
    portald.kill_9().await;

    let (portald, client) = Portald::start(dir.path()).await;
    let mut rpc = client.rpc();
    let a = wait_until("the agent to be listed again", async || listed(&mut rpc, p.id).await).await;
    assert_eq!(
        (a.state(), a.reason.as_str()),
        (pb::AgentState::AwaitingInput, "question"),
        "the newer logged state, not the one the upgrade handed over: {a:?}"
    );
    drop(portald);
}
