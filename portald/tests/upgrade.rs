//! Live upgrade with the real binaries: `portal-cli daemon upgrade` replaces
//! a running `portald` while a Python REPL with state, a PTY printing
//! continuously and a `portal-cli read -f` follower run; and a new binary
//! that refuses to start leaves the old daemon serving.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use portal_client::client::Client;
use portal_proto::v1 as pb;

mod common;
use common::*;

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

/// `portal-cli` pointed at the test daemon.
fn cli(dir: &Path, socket: &Path) -> Command {
    let mut cmd = Command::new(cli_binary());
    cmd.env("PORTAL_SOCKET", socket)
        .env("PORTAL_DATA_DIR", dir.join("data"))
        .env("PORTAL_HOLDER", holder_binary())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    cmd
}

/// Copies this build's `portald` to `to` in a separate process: a write
/// descriptor of the copy open here could leak into a child another test
/// forks meanwhile, and exec'ing the copy would fail with ETXTBSY.
fn install(to: &Path) {
    let copied = Command::new("cp").arg(env!("CARGO_BIN_EXE_portald")).arg(to).status().unwrap();
    assert!(copied.success());
}

/// Runs a command to its end off the test's runtime, whose connections to
/// the daemon must keep being served meanwhile (a daemon handing over waits
/// for its clients to close them).
async fn output(mut cmd: Command) -> std::process::Output {
    let run = tokio::task::spawn_blocking(move || cmd.output().unwrap());
    tokio::time::timeout(BOUND * 4, run).await.expect("the command ends within the bound").unwrap()
}

/// Output of a child process, gathered by a thread, awaited by the test.
struct Gathered {
    rx: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    seen: Vec<u8>,
}

impl Gathered {
    fn of(mut out: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = out.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Self { rx, seen: Vec::new() }
    }

    /// Waits, bounded, until the output contains `needle`.
    async fn until(&mut self, needle: &str) {
        let found = tokio::time::timeout(BOUND, async {
            while !String::from_utf8_lossy(&self.seen).contains(needle) {
                match self.rx.recv().await {
                    Some(chunk) => self.seen.extend_from_slice(&chunk),
                    None => return false,
                }
            }
            true
        })
        .await;
        assert_eq!(found, Ok(true), "{needle:?} never came; got {:?}", self.text_tail());
    }

    /// Everything, once the child closed its output.
    async fn rest(mut self) -> Vec<u8> {
        tokio::time::timeout(BOUND, async {
            while let Some(chunk) = self.rx.recv().await {
                self.seen.extend_from_slice(&chunk);
            }
        })
        .await
        .expect("the follower ends within the bound");
        self.seen
    }

    fn text_tail(&self) -> String {
        let t = String::from_utf8_lossy(&self.seen);
        t.chars().rev().take(300).collect::<Vec<_>>().into_iter().rev().collect()
    }
}

/// The numbers of `tick N` lines, which must run 1, 2, 3… without a gap or
/// a repeat.
fn ticks(text: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("tick ")?.parse().ok())
        .collect()
}

/// All of a process's stdout from the log, raw.
async fn whole_log(rpc: &mut Rpc, id: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut from = None;
    loop {
        let resp = rpc
            .read(pb::ReadRequest {
                proc: by_id(id),
                streams: vec![pb::Stream::Stdout.into()],
                from: from.clone(),
                max_bytes: 4 << 20,
                encoding: pb::Encoding::Raw.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        for r in &resp.records {
            out.extend_from_slice(&r.data);
        }
        if resp.records.is_empty() || resp.next == resp.end {
            return out;
        }
        from = resp.next.map(pb::read_request::From::Cursor);
    }
}

/// Reads the "read new" text of a process (moving the server's cursor).
async fn read_new(rpc: &mut Rpc, id: u64) -> String {
    let resp = rpc
        .read(pb::ReadRequest {
            proc: by_id(id),
            from: Some(pb::read_request::From::ServerCursor(true)),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    resp.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect()
}

#[tokio::test]
async fn an_upgrade_keeps_every_program_and_every_byte_exactly_once() {
    let d = dir();
    // The daemon runs from a copy, which the upgrade replaces on disk the
    // way a package manager does (a new file renamed over the old).
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("portald");
    install(&installed);
    let mut daemon = spawn_daemon_from(d.path(), &installed);
    let client = daemon.connect().await;
    let before = client.info().clone();
    let mut rpc = client.rpc();

    let repl = Start::pty("python3").args(["-q"]).run(&mut rpc).await;
    follow_bytes_text(&mut rpc, repl.id, ">>> ").await;
    let write = |id: u64, text: &'static str| pb::WriteRequest {
        proc: by_id(id),
        data: text.into(),
        secret: false,
    };
    rpc.write(write(repl.id, "x = 41\n")).await.unwrap();
    follow_bytes_text(&mut rpc, repl.id, "x = 41\r\n>>> ").await;
    assert!(read_new(&mut rpc, repl.id).await.contains("x = 41"));
    // Printed after that read: new to the next one, upgrade or not.
    rpc.write(write(repl.id, "y = 1\n")).await.unwrap();
    follow_bytes_text(&mut rpc, repl.id, "y = 1\r\n>>> ").await;

    let printer = "i=0; while :; do i=$((i+1)); echo \"tick $i\"; sleep 0.005; done";
    let ticker = Start::pty("sh").args(["-c", printer]).run(&mut rpc).await;
    let mut follower = cli(d.path(), &daemon.socket)
        .args(["read", &ticker.id.to_string(), "--follow", "--raw"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut followed = Gathered::of(follower.stdout.take().unwrap());
    followed.until("tick 20\r\n").await;

    let replacement = bin.join(".portald.new");
    install(&replacement);
    std::fs::rename(&replacement, &installed).unwrap();
    let mut upgrade = cli(d.path(), &daemon.socket);
    upgrade.args(["daemon", "upgrade", "--json"]);
    let upgrade = output(upgrade).await;
    let said = String::from_utf8_lossy(&upgrade.stdout);
    assert!(upgrade.status.success(), "{said}{}", String::from_utf8_lossy(&upgrade.stderr));
    let report: serde_json::Value = serde_json::from_str(said.trim()).unwrap();
    assert_eq!(report["running"], 2, "{report}");
    assert!(report["pause_ms"].as_u64().is_some(), "{report}");
    daemon.wait_log("the handover", |l| l.contains("handed over to the next daemon")).await;
    daemon
        .wait_log("the adoption", |l| {
            // The old daemon letting its holder connection go is no death.
            assert!(!l.contains("portal-holder died"), "a handover taken for a dead holder: {l}");
            l.contains("processes of an earlier daemon are listed")
        })
        .await;

    // The same process, a new daemon in it, upgraded from the old one.
    let client = Client::connect(&daemon.socket).await.unwrap();
    let after = client.info().clone();
    assert_eq!(after.pid, before.pid, "the pid a service manager tracks stays");
    assert_ne!(after.started_at_ns, before.started_at_ns, "a new daemon serves");
    assert_eq!(after.upgraded_from, before.daemon_version);
    assert!(after.upgrade_error.is_empty(), "{}", after.upgrade_error);
    let mut rpc = client.rpc();
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner();
    let running: Vec<_> = list.processes.iter().map(|p| (p.id, p.pid, p.status())).collect();
    assert_eq!(
        running,
        [(repl.id, repl.pid, pb::Status::Running), (ticker.id, ticker.pid, pb::Status::Running)]
    );

    // The REPL kept its state, its screen and its "read new" position.
    let screen = rpc
        .screen(pb::ScreenRequest { proc: by_id(repl.id), resize: None })
        .await
        .unwrap()
        .into_inner();
    assert!(screen.lines.iter().any(|l| l.contains(">>> x = 41")), "{:?}", screen.lines);
    rpc.write(write(repl.id, "print(x + 1)\n")).await.unwrap();
    follow_bytes_text(&mut rpc, repl.id, "42\r\n>>> ").await;
    let new = read_new(&mut rpc, repl.id).await;
    assert!(
        new.contains("y = 1") && new.contains("42") && !new.contains("x = 41"),
        "the \"read new\" cursor carried over: {new:?}"
    );

    // The printer printed on; the follower reconnected and saw every byte
    // exactly once, as the log has them.
    // Everything logged by now was printed before or around the handover;
    // what the follower sees past it was printed by the new daemon's time.
    let at_upgrade = ticks(&whole_log(&mut rpc, ticker.id).await).last().copied().unwrap();
    followed.until(&format!("tick {}\r\n", at_upgrade + 50)).await;
    rpc.kill(pb::KillRequest { proc: by_id(ticker.id) }).await.unwrap();
    let followed = followed.rest().await;
    let status = tokio::task::spawn_blocking(move || follower.wait()).await.unwrap().unwrap();
    assert!(status.success(), "the follower ends with the program: {status}");
    let log = whole_log(&mut rpc, ticker.id).await;
    let numbers = ticks(&log);
    assert!(
        numbers.len() as u64 >= at_upgrade + 50,
        "{} ticks in the log, {} followed, {at_upgrade} at the upgrade; log ends {:?}",
        numbers.len(),
        ticks(&followed).len(),
        String::from_utf8_lossy(&log[log.len().saturating_sub(200)..])
    );
    for (i, n) in numbers.iter().enumerate() {
        assert_eq!(*n, i as u64 + 1, "the log has a gap or a repeat at line {i}");
    }
    assert_eq!(
        String::from_utf8_lossy(&followed),
        String::from_utf8_lossy(&log),
        "the follower saw the log exactly once"
    );

    rpc.kill(pb::KillRequest { proc: by_id(repl.id) }).await.unwrap();
    assert!(Command::new("kill").arg(before.pid.to_string()).status().unwrap().success());
    assert!(wait_child(daemon.child).await.success());
}

#[tokio::test]
async fn an_upgrade_to_a_binary_that_refuses_to_start_leaves_the_old_daemon_serving() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let before = client.info().clone();
    let mut rpc = client.rpc();
    let shell = Start::pty("sh").run(&mut rpc).await;
    let broken = d.path().join("portald-broken");
    std::fs::write(&broken, "#!/bin/sh\necho 'portald: cannot load libportal.so' >&2\nexit 1\n")
        .unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut upgrade = cli(d.path(), &daemon.socket);
    upgrade.args(["daemon", "upgrade", "--binary"]).arg(&broken);
    let upgrade = output(upgrade).await;
    let stderr = String::from_utf8_lossy(&upgrade.stderr);
    assert_eq!(upgrade.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not start"), "{stderr}");
    assert!(stderr.contains("cannot load libportal.so"), "says why: {stderr}");
    assert!(stderr.contains("keeps serving"), "{stderr}");
    // The same daemon serves, and its program never noticed.
    let client = Client::connect(&daemon.socket).await.unwrap();
    assert_eq!(client.info().started_at_ns, before.started_at_ns);
    let mut rpc = client.rpc();
    rpc.write(pb::WriteRequest {
        proc: by_id(shell.id),
        data: "echo still-here\n".into(),
        secret: false,
    })
    .await
    .unwrap();
    follow_bytes_text(&mut rpc, shell.id, "still-here\r\n").await;
    assert!(Command::new("kill").arg(before.pid.to_string()).status().unwrap().success());
    assert!(wait_child(daemon.child).await.success());
}

/// Follows a process's output from its start until `done` holds for it.
async fn follow_until(rpc: &mut Rpc, id: u64, what: &str, done: impl Fn(&str) -> bool) {
    let req = pb::FollowRequest { proc: by_id(id), from_start: true, ..Default::default() };
    let mut events = rpc.follow(req).await.unwrap().into_inner();
    let mut seen = Vec::new();
    let reached = tokio::time::timeout(BOUND, async {
        while !done(&String::from_utf8_lossy(&seen)) {
            match events.message().await.unwrap().and_then(|e| e.event) {
                Some(pb::follow_event::Event::Output(r)) => seen.extend_from_slice(&r.data),
                Some(_) => {}
                None => return false,
            }
        }
        true
    })
    .await;
    assert_eq!(reached, Ok(true), "never saw {what}: {:?}", String::from_utf8_lossy(&seen));
}

#[tokio::test]
async fn an_attached_terminal_attaches_again_after_an_upgrade() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let mut rpc = client.rpc();
    let target = Start::pty("cat").run(&mut rpc).await;
    let typed = |id: u64, text: &'static str| pb::WriteRequest {
        proc: by_id(id),
        data: text.into(),
        secret: false,
    };
    rpc.write(typed(target.id, "earlier\r")).await.unwrap();
    follow_bytes_text(&mut rpc, target.id, "earlier\r\nearlier\r\n").await;
    // `portal-cli attach` on a terminal of the same daemon: it is carried
    // over by the upgrade too.
    let socket = daemon.socket.to_string_lossy().into_owned();
    let viewer = Start::pty(cli_binary().to_string_lossy())
        .args(["attach", &target.id.to_string()])
        .env("PORTAL_SOCKET", socket)
        .env("PORTAL_NO_AUTOSTART", "1")
        .run(&mut rpc)
        .await;
    let redraws =
        |n: usize| move |s: &str| s.matches("\x1b[2J").count() >= n && s.contains("earlier");
    follow_until(&mut rpc, viewer.id, "the first redraw", redraws(1)).await;
    let mut upgrade = cli(d.path(), &daemon.socket);
    upgrade.arg("daemon").arg("upgrade");
    let upgrade = output(upgrade).await;
    assert!(upgrade.status.success(), "{}", String::from_utf8_lossy(&upgrade.stderr));
    let mut rpc = Client::connect(&daemon.socket).await.unwrap().rpc();
    // The attachment was cut by the handover and made again: a second
    // redraw, and keystrokes reach the program.
    follow_until(&mut rpc, viewer.id, "the redraw after the upgrade", redraws(2)).await;
    rpc.write(typed(viewer.id, "after-upgrade\r")).await.unwrap();
    follow_bytes_text(&mut rpc, target.id, "after-upgrade\r\nafter-upgrade\r\n").await;
    rpc.write(typed(viewer.id, "\u{1d}")).await.unwrap();
    follow_bytes_text(&mut rpc, viewer.id, "detached from").await;
    rpc.kill(pb::KillRequest { proc: by_id(target.id) }).await.unwrap();
    assert!(Command::new("kill").arg(daemon.child.id().to_string()).status().unwrap().success());
    assert!(wait_child(daemon.child).await.success());
}
