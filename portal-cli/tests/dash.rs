//! `portal-cli dash` in a real terminal: tmux runs it at two sizes against a
//! real `portald`; the tests read what it drew with `capture-pane`, press
//! keys with `send-keys`, and check the effect on the programs through the
//! daemon.
//!
//! To know when to look again, a second portald (the observer, so that the
//! dashboard never lists it) runs a tmux client attached to the session on
//! a PTY of the same size: every redraw reaches that client, and a wait on
//! its output wakes the test.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};

use portal_proto::v1 as pb;
use portal_tests::*;

const CLI: &str = env!("CARGO_BIN_EXE_portal-cli");

/// A tmux server of the test's own (its socket in the test's directory),
/// killed when dropped, and the observer attached to its session.
struct Tmux {
    socket: PathBuf,
    observer: TestDaemon,
    /// The attached client's process in the observer.
    client: u64,
}

impl Tmux {
    /// A detached session of `cols`×`rows` running the dashboard against
    /// the daemon at `portal`.
    async fn dash(dir: &Path, portal: &Path, cols: u16, rows: u16) -> Self {
        Self::run(
            dir,
            cols,
            rows,
            &format!("env PORTAL_SOCKET='{}' PORTAL_NO_AUTOSTART=1", portal.display()),
            "dash",
        )
        .await
    }

    /// A detached session running `env ENV… portal-cli ARGS` after a line
    /// the shell printed.
    async fn run(dir: &Path, cols: u16, rows: u16, env: &str, args: &str) -> Self {
        let socket = dir.join("tmux.sock");
        let command =
            format!("echo BEFORE-DASH; {env} TERM=xterm-256color '{CLI}' {args}; sleep 600");
        let status = tmux_cmd(&socket)
            .args([
                "new-session",
                "-d",
                "-s",
                "dash",
                "-x",
                &cols.to_string(),
                "-y",
                &rows.to_string(),
            ])
            .arg(command)
            .status()
            .expect("tmux runs (apt-get install tmux)");
        assert!(status.success(), "tmux new-session: {status}");
        let observer = TestDaemon::start().await;
        let tmux_socket = socket.display().to_string();
        let client = start_pty(
            &mut observer.rpc(),
            "tmux",
            &["-S", &tmux_socket, "attach", "-t", "dash"],
            u32::from(rows),
            u32::from(cols),
        )
        .await
        .id;
        Self { socket, observer, client }
    }

    fn cmd(&self) -> std::process::Command {
        tmux_cmd(&self.socket)
    }

    /// What the terminal shows now.
    fn capture(&self) -> String {
        let out = self.cmd().args(["capture-pane", "-p", "-t", "dash"]).output().unwrap();
        assert!(out.status.success(), "capture-pane: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Presses keys (tmux key names: Enter, Escape, C-]) or types text.
    fn keys(&self, keys: &[&str]) {
        let status = self.cmd().args(["send-keys", "-t", "dash"]).args(keys).status().unwrap();
        assert!(status.success());
    }

    /// Pastes `text` as a terminal pastes (bracketed, when the program
    /// asked for it).
    fn paste(&self, text: &str) {
        let status = self.cmd().args(["set-buffer", "--", text]).status().unwrap();
        assert!(status.success());
        let status = self.cmd().args(["paste-buffer", "-p", "-t", "dash"]).status().unwrap();
        assert!(status.success());
    }

    fn type_text(&self, text: &str) {
        let status = self.cmd().args(["send-keys", "-l", "-t", "dash", text]).status().unwrap();
        assert!(status.success());
    }

    /// Waits until the screen satisfies `check`, and returns it: looks,
    /// and when it is not there yet, waits until the attached client shows
    /// something new (the dashboard redraws at least once a second).
    async fn until(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let last = std::cell::RefCell::new(String::new());
        let mut rpc = self.observer.rpc();
        let found = tokio::time::timeout(timeout(), async {
            loop {
                // Where the client's output ends before the look: what it
                // draws after the look is beyond it.
                let seen = rpc.inspect(pb::InspectRequest { proc: by_id(self.client) });
                let seen = seen.await.unwrap().into_inner();
                let offsets = seen
                    .streams
                    .iter()
                    .map(|s| pb::StreamOffset { stream: s.stream, offset: s.end_offset })
                    .collect();
                let screen = self.capture();
                if check(&screen) {
                    return screen;
                }
                *last.borrow_mut() = screen;
                // The next thing the terminal draws (or its end) is the
                // moment to look again.
                let req = pb::FollowRequest {
                    proc: by_id(self.client),
                    from: Some(pb::Cursor { offsets }),
                    ..Default::default()
                };
                let mut events = rpc.follow(req).await.unwrap().into_inner();
                let _ = events.message().await;
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            panic!("timed out waiting for {what}; the screen:\n{}", last.borrow())
        })
    }
}

fn tmux_cmd(socket: &Path) -> std::process::Command {
    let mut c = std::process::Command::new("tmux");
    c.arg("-S").arg(socket).env_remove("TMUX");
    c
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// Whether tmux is here; without it the tests say so and skip, except
/// under `CI=true`, where they fail.
fn have_tmux() -> bool {
    let here =
        std::process::Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success());
    if !here {
        assert!(std::env::var("CI").is_err(), "tmux is missing (apt-get install tmux)");
        eprintln!("skipped: tmux is not installed");
    }
    here
}

/// The list rows (lines of the top box that start with an id), in order.
fn list_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.contains(" processes ("))
        .skip(2)
        .take_while(|l| !l.starts_with('└'))
        .map(|l| l.trim_matches(|c| c == '│' || c == ' ' || c == '▶').to_owned())
        .collect()
}

/// An agent's terminal: it reports `first`, then `second` once given a
/// line, then waits.
async fn agent(rpc: &mut Rpc, name: &str, first: &str, second: &str) -> u64 {
    let osc =
        |state: &str| format!("printf '\\033]3008;portal=1;state={state};name=claude\\033\\\\'");
    let script = format!("{}; read go; {}; read x", osc(first), osc(second));
    Start::pty("sh").args(["-c", &script]).name(name).size(24, 80).run(rpc).await.id
}

type Rpc = pb::portal_client::PortalClient<tonic::transport::Channel>;

async fn python(rpc: &mut Rpc) -> u64 {
    let id = Start::pty("python3")
        .args(["-q"])
        .name("py")
        .size(24, 80)
        .env("PYTHON_BASIC_REPL", "1")
        .run(rpc)
        .await
        .id;
    wait_for_text(rpc, id, pb::Stream::Stdout, ">>> ").await;
    id
}

#[tokio::test]
async fn the_dashboard_lists_previews_filters_types_attaches_and_kills() {
    if !have_tmux() {
        return;
    }
    let d = TestDaemon::start().await;
    let dir = test_dir();
    let mut rpc = d.rpc();
    let done = agent(&mut rpc, "reviewer", "done", "done").await;
    let asks = agent(&mut rpc, "coder", "running", "awaiting_input").await;
    let py = python(&mut rpc).await;
    let tmux = Tmux::dash(dir.path(), &d.socket(), 120, 32).await;

    // The list, most urgent first, and the first row's preview.
    let screen = tmux
        .until("three rows, the done agent first", |s| {
            let rows = list_rows(s);
            rows.len() == 3 && rows[0].contains("reviewer") && rows[2].contains("py")
        })
        .await;
    let rows = list_rows(&screen);
    assert!(rows[0].contains("claude done") && rows[1].contains("claude working"), "{screen}");
    assert!(rows[2].starts_with(&format!("{py} ")) && rows[2].contains("pty"), "{screen}");
    assert!(screen.contains("1 done") && screen.contains("3 running"), "{screen}");

    // An agent that starts waiting for a person moves to the top.
    write(&mut rpc, asks, b"go\n").await;
    tmux.until("the waiting agent on top", |s| {
        list_rows(s).first().is_some_and(|r| r.contains("coder") && r.contains("claude needs you"))
            && s.contains("1 need you")
    })
    .await;

    // `/` filters; the preview shows the REPL's screen.
    tmux.keys(&["/"]);
    tmux.type_text("py");
    tmux.keys(&["Enter"]);
    tmux.until("the python REPL alone, with its screen", |s| {
        list_rows(s).len() == 1
            && s.contains("(1 of 3)")
            && s.contains(&format!("{py} py · screen 80×24"))
            && s.contains(">>>")
    })
    .await;

    // `s` types a line into it; the preview shows the answer.
    tmux.keys(&["s"]);
    tmux.type_text("6*7");
    tmux.until("the line being typed", |s| s.contains(&format!("line for {py}: 6*7"))).await;
    tmux.keys(&["Enter"]);
    tmux.until("the REPL's answer in the preview", |s| s.contains(">>> 6*7") && s.contains("│42"))
        .await;

    // Enter attaches: the program's own screen, typed into directly;
    // Ctrl-] comes back to the dashboard.
    tmux.keys(&["Enter"]);
    tmux.until("the attached REPL", |s| !s.contains(" processes (") && s.contains(">>> 6*7")).await;
    tmux.type_text("print('from', 'attach')");
    tmux.keys(&["Enter"]);
    tmux.until("the REPL's answer while attached", |s| s.contains("\nfrom attach")).await;
    tmux.keys(&["C-]"]);
    tmux.until("the dashboard again", |s| {
        s.contains(" processes (") && s.contains(&format!("detached from {py}; it keeps running"))
    })
    .await;

    // A paste is text for the prompt, never keys: its line break does not
    // send the line, and the `k` after it is no kill.
    tmux.keys(&["s"]);
    tmux.until("the line prompt", |s| s.contains(&format!("line for {py}: "))).await;
    tmux.paste("1+1\nk");
    tmux.until("the paste in the prompt", |s| s.contains(&format!("line for {py}: 1+1 k"))).await;
    tmux.keys(&["C-c"]);
    tmux.until("the prompt cancelled", |s| s.contains("cancelled")).await;

    // `k` asks first; anything but y keeps the program.
    tmux.keys(&["k"]);
    tmux.until("the kill question", |s| s.contains(&format!("kill {py} (python3 -q)? y/N"))).await;
    tmux.keys(&["n"]);
    tmux.until("the refusal", |s| s.contains(&format!("not killed: {py}"))).await;
    let p = rpc.inspect(pb::InspectRequest { proc: by_id(py) }).await.unwrap().into_inner();
    assert_eq!(p.status(), pb::Status::Running);
    tmux.keys(&["k"]);
    tmux.until("the kill question", |s| s.contains("y/N")).await;
    tmux.keys(&["y"]);
    let ended = wait_exit(&mut rpc, py).await;
    assert_eq!(ended.status(), pb::Status::Killed);
    tmux.until("the killed row", |s| list_rows(s).first().is_some_and(|r| r.contains("killed")))
        .await;

    // Esc clears the filter; q leaves, and every other program runs on.
    tmux.keys(&["Escape"]);
    tmux.until("every row again", |s| list_rows(s).len() == 3).await;
    tmux.keys(&["q"]);
    // The shell's screen is as it was: the attached session drew on the
    // dashboard's screen only.
    tmux.until("the shell's screen back", |s| {
        s.contains("BEFORE-DASH") && !s.contains(" processes (") && !s.contains("from attach")
    })
    .await;
    for id in [done, asks] {
        let p = rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await.unwrap().into_inner();
        assert_eq!(p.status(), pb::Status::Running, "{id} runs on");
    }
    d.stop().await;
}

#[tokio::test]
async fn a_small_terminal_shows_the_list_over_the_preview_and_the_keys() {
    if !have_tmux() {
        return;
    }
    let d = TestDaemon::start().await;
    let dir = test_dir();
    let mut rpc = d.rpc();
    let py = python(&mut rpc).await;
    let tmux = Tmux::dash(dir.path(), &d.socket(), 80, 24).await;
    let screen = tmux
        .until("the row, the REPL's screen under it and the keys", |s| {
            // A whole frame: tmux may show one drawn in part.
            list_rows(s).len() == 1
                && s.contains(&format!("{py} py · screen 80×24"))
                && s.contains("│>>>")
                && s.contains(" processes (")
                && s.contains("Enter attach · s type a line · k kill")
        })
        .await;
    // Nothing is cut: every line fits in 80 columns, and the list sits
    // above the preview.
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
    let list_at = screen.find(" processes (").unwrap();
    let preview_at = screen.find(" py · screen").unwrap();
    assert!(list_at < preview_at, "{screen}");
    tmux.keys(&["?"]);
    tmux.until("the help", |s| s.contains(" keys ") && s.contains("Ctrl-] comes back")).await;
    tmux.keys(&["x"]);
    tmux.until("the help closed", |s| !s.contains(" keys ")).await;
    // The daemon stops: the dashboard says so and starts none.
    d.stop().await;
    tmux.until("the dashboard saying portald is gone", |s| s.contains("portald is not running"))
        .await;
}

#[tokio::test]
async fn the_dashboard_shows_another_hosts_programs_over_ssh() {
    if !have_tmux() {
        return;
    }
    let Some(sshd) = portal_tests::sshd::sshd_or_skip(Path::new(CLI)).await else { return };
    let local = TestDaemon::start().await;
    let dir = test_dir();
    let env = |cmd: &mut tokio::process::Command| {
        cmd.env("PORTAL_SOCKET", local.socket())
            .env("PORTAL_HOSTS_FILE", &sshd.box_only)
            .env_remove("PORTAL_HOST")
            .env_remove("PORTAL_NO_AUTOSTART");
    };
    let mut start = tokio::process::Command::new(CLI);
    start.args([
        "--host",
        "box",
        "start",
        "--pty",
        "--name",
        "far",
        "--",
        "sh",
        "-c",
        "echo far-away; read x",
    ]);
    env(&mut start);
    let started = bounded("a start on the remote host", start.output()).await.unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let tmux = Tmux::run(
        dir.path(),
        120,
        30,
        &format!(
            "env PORTAL_SOCKET='{}' PORTAL_HOSTS_FILE='{}'",
            local.socket().display(),
            sshd.box_only.display()
        ),
        "--host box dash",
    )
    .await;
    tmux.until("the remote program and its screen", |s| {
        s.contains("Portal  box")
            && list_rows(s).iter().any(|r| r.contains("far"))
            && s.contains("│far-away")
    })
    .await;
    tmux.keys(&["q"]);
    tmux.until("the shell again", |s| s.contains("BEFORE-DASH") && !s.contains(" processes ("))
        .await;
    local.stop().await;
}
