//! The real `portal-cli` binary against a real `portald` on a private socket:
//! round trips, `read -f` exactly once, `attach` driven through a PTY (the
//! daemon itself runs the CLI on a terminal), `--json`, exit codes, the
//! service files, and `install` (its next steps, and its registration with
//! the real Claude Code and Codex CLIs, which skips without them outside CI).
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::process::Output;

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

const CLI: &str = env!("CARGO_BIN_EXE_portal-cli");

fn daemon_binary() -> PathBuf {
    Path::new(CLI).with_file_name("portald")
}

async fn cli(socket: &Path, args: &[&str]) -> Output {
    cli_env(socket, args, &[]).await
}

async fn cli_env(socket: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(CLI);
    cmd.args(args)
        .env("PORTAL_SOCKET", socket)
        .env("PORTAL_NO_AUTOSTART", "1")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    bounded(&format!("portal-cli {args:?}"), cmd.output()).await.unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed ({:?}): {}\n{}",
        o.status,
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(o)
}

fn id_of(started: &str) -> u64 {
    started
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no id in {started:?}"))
}

#[tokio::test]
async fn programs_start_in_the_callers_environment() {
    let d = TestDaemon::start().await;
    let show = "echo \"FOO=$FOO PATH=$PATH\"";
    // portald's environment has no FOO: the program sees the caller's.
    let env = [("FOO", "bar"), ("PATH", "/tmp/portal-x:/usr/bin:/bin")];
    let out =
        ok(&cli_env(&d.socket(), &["start", "--wait", "exit", "--", "sh", "-c", show], &env).await);
    assert_eq!(out, "FOO=bar PATH=/tmp/portal-x:/usr/bin:/bin\n");
    // --env goes over it.
    let out = ok(&cli_env(
        &d.socket(),
        &["start", "--env", "FOO=over", "--wait", "exit", "--", "sh", "-c", show],
        &env,
    )
    .await);
    assert!(out.starts_with("FOO=over PATH=/tmp/portal-x"), "{out}");
    // Clean: only --env, a default PATH and what Portal sets.
    let out = ok(&cli_env(
        &d.socket(),
        &["start", "--env-from", "clean", "--env", "A=1", "--wait", "exit", "--", "env"],
        &env,
    )
    .await);
    let mut names: Vec<&str> = out.lines().filter_map(|l| l.split('=').next()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["A", "PATH", "PORTAL_SESSION_ID", "PORTAL_SESSION_TOKEN", "PORTAL_SOCKET"],
        "{out}"
    );
    // The daemon's: FOO unset.
    let out = ok(&cli_env(
        &d.socket(),
        &["start", "--env-from", "daemon", "--wait", "exit", "--", "sh", "-c", show],
        &env,
    )
    .await);
    assert!(out.starts_with("FOO= "), "{out}");
    // The caller's environment is never shown: inspect lists only --env.
    let ps = ok(&cli(&d.socket(), &["ps", "--json"]).await);
    assert!(!ps.contains("portal-x"), "{ps}");
    let bad = cli_env(&d.socket(), &["start", "--env-from", "mine", "--", "true"], &env).await;
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("caller, daemon or clean"));
    d.stop().await;
}

#[tokio::test]
async fn start_ps_read_write_screen_kill_rm_round_trip() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let out = ok(&cli(
        &s,
        &["start", "--name", "echoer", "--", "sh", "-c", "while read l; do echo got-$l; done"],
    )
    .await);
    let id = id_of(&out);
    let ps = ok(&cli(&s, &["ps"]).await);
    assert!(ps.contains("echoer") && ps.contains("running") && ps.contains("while read"), "{ps}");
    // A taken name says what to do about the process holding it.
    let taken = cli(&s, &["start", "--name", "echoer", "--", "true"]).await;
    let said = String::from_utf8_lossy(&taken.stderr).into_owned();
    assert_eq!(taken.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("process {id} holds the name \"echoer\" and is running"))
            && said.contains(&format!("`portal-cli kill {id}`"))
            && said.contains("--replace"),
        "{said}"
    );
    ok(&cli(&s, &["write", "echoer", "hello", "--enter"]).await);
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "got-hello\n").await;
    assert_eq!(ok(&cli(&s, &["read", &id.to_string()]).await), "got-hello\n");
    assert_eq!(ok(&cli(&s, &["read", "echoer", "--stream", "stdin"]).await), "hello\n");
    let out = ok(&cli(
        &s,
        &[
            "start",
            "--pty",
            "--size",
            "5x30",
            "--",
            "sh",
            "-c",
            "printf 'row one\\nrow two\\n'; read x",
        ],
    )
    .await);
    let pty = id_of(&out);
    wait_for_text(&mut rpc, pty, pb::Stream::Stdout, "row two").await;
    let screen = ok(&cli(&s, &["screen", &pty.to_string()]).await);
    assert!(screen.contains("5x30") && screen.contains("\nrow one\nrow two\n"), "{screen}");
    // `--size` resizes the terminal and shows the resized screen.
    let screen = ok(&cli(&s, &["screen", &pty.to_string(), "--size", "8x40"]).await);
    assert!(screen.contains("8x40") && screen.contains("\nrow one\nrow two\n"), "{screen}");
    let info = rpc.inspect(pb::InspectRequest { proc: by_id(pty) }).await.unwrap().into_inner();
    assert_eq!(info.size, Some(pb::TermSize { rows: 8, cols: 40 }));
    let bad = cli(&s, &["screen", &pty.to_string(), "--size", "8by40"]).await;
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let killed = ok(&cli(&s, &["kill", "echoer"]).await);
    assert!(killed.starts_with(&format!("killed {id}")), "{killed}");
    assert!(!ok(&cli(&s, &["ps"]).await).contains("echoer"));
    assert!(ok(&cli(&s, &["ps", "--all"]).await).contains("killed"));
    let taken = cli(&s, &["start", "--name", "echoer", "--", "true"]).await;
    let said = String::from_utf8_lossy(&taken.stderr).into_owned();
    assert!(
        said.contains(&format!("process {id} held the name \"echoer\" and has ended"))
            && said.contains("--replace")
            && said.contains(&format!("`portal-cli rm {id}`")),
        "{said}"
    );
    ok(&cli(&s, &["rm", "echoer"]).await);
    assert!(!ok(&cli(&s, &["ps", "--all"]).await).contains("echoer"));
    let tail = ok(&cli(&s, &["kill-all"]).await);
    assert!(tail.contains("killed 1 process"), "{tail}");
    d.stop().await;
}

#[tokio::test]
async fn read_follow_prints_every_line_exactly_once() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    // Part one before the reader starts, part two (much more) while it runs.
    let script = "seq 1 1000; read go; seq 1001 50000";
    let p = start_pipes(&mut rpc, "sh", &["-c", script]).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "\n1000\n").await;
    let reader = tokio::spawn({
        let s = s.clone();
        async move { cli(&s, &["read", &p.id.to_string(), "-f"]).await }
    });
    write(&mut rpc, p.id, b"go\n").await;
    let out = bounded("read -f to end", reader).await.unwrap();
    let want: String = (1..=50_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(ok(&out), want);
    assert!(String::from_utf8_lossy(&out.stderr).contains("exited: exit 0"));
    d.stop().await;
}

#[tokio::test]
async fn json_output_parses() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "sh", &["-c", "echo ready; read x"], 10, 40).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "ready").await;
    let id = p.id.to_string();
    let ps: Value = serde_json::from_str(&ok(&cli(&s, &["ps", "--json"]).await)).unwrap();
    assert_eq!(ps[0]["id"], p.id);
    assert_eq!(ps[0]["mode"], "pty");
    let inspect: Value =
        serde_json::from_str(&ok(&cli(&s, &["inspect", &id, "--json"]).await)).unwrap();
    assert_eq!(inspect["status"], "running");
    assert_eq!(inspect["size"]["rows"], 10);
    let screen: Value =
        serde_json::from_str(&ok(&cli(&s, &["screen", &id, "--json"]).await)).unwrap();
    assert_eq!(screen["lines"][0], "ready");
    let read = ok(&cli(&s, &["read", &id, "--json"]).await);
    let first: Value = serde_json::from_str(read.lines().next().unwrap()).unwrap();
    assert_eq!(first["data"], "ready\n");
    let status: Value =
        serde_json::from_str(&ok(&cli(&s, &["daemon", "status", "--json"]).await)).unwrap();
    assert_eq!(status["running"], true);
    assert_eq!(status["processes"], 1);
    d.stop().await;
}

#[tokio::test]
async fn exit_codes_say_what_went_wrong() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let o = cli(&s, &["inspect", "4242"]).await;
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no process with id 4242") && err.contains("hint:"), "{err}");
    assert_eq!(cli(&s, &["no-such-command"]).await.status.code(), Some(2));
    assert_eq!(cli(&s, &["start"]).await.status.code(), Some(2));
    let o = cli(&s, &["signal", "1", "SIGFOO"]).await;
    assert_eq!(o.status.code(), Some(1));
    let dir = test_dir();
    let nowhere = dir.path().join("none.sock");
    let o = cli(&nowhere, &["ps"]).await;
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach portald"));
    let o = cli(&nowhere, &["daemon", "status"]).await;
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("not running"));
    d.stop().await;
}

#[tokio::test]
async fn attach_types_into_the_program_and_detaches_leaving_it_running() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let target = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    write(&mut rpc, target.id, b"earlier\r").await;
    wait_for_text(&mut rpc, target.id, pb::Stream::Stdout, "earlier\r\nearlier\r\n").await;
    // Run the CLI itself on a PTY that Portal owns, 30x100.
    let req = pb::StartRequest {
        command: CLI.into(),
        args: vec!["attach".into(), target.id.to_string()],
        mode: pb::Mode::Pty.into(),
        size: Some(pb::TermSize { rows: 30, cols: 100 }),
        env: [
            ("PORTAL_SOCKET".to_owned(), s.to_string_lossy().into_owned()),
            ("PORTAL_NO_AUTOSTART".to_owned(), "1".to_owned()),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let viewer = rpc.start(req).await.unwrap().into_inner();
    // Once the terminal is raw, attach clears it and redraws the program's
    // current screen: what was typed before attaching shows after the clear.
    let (seen, ended) = follow_until(
        &mut rpc,
        viewer.id,
        pb::Stream::Stdout,
        "the redraw of the screen after attaching",
        |b| {
            let s = String::from_utf8_lossy(b);
            s.find("\x1b[2J").is_some_and(|clear| s[clear..].contains("earlier"))
        },
    )
    .await;
    assert!(ended.is_none(), "attach ended: {:?}", String::from_utf8_lossy(&seen));
    // How to detach is said once, before the program's screen is drawn, and
    // never reaches the program.
    let seen = String::from_utf8_lossy(&seen).into_owned();
    let said =
        seen.find("Ctrl-] detaches").unwrap_or_else(|| panic!("no word of Ctrl-]: {seen:?}"));
    assert!(said < seen.find("\x1b[2J").unwrap_or_default(), "{seen:?}");
    assert_eq!(seen.matches("Ctrl-]").count(), 1, "{seen:?}");
    let info =
        rpc.inspect(pb::InspectRequest { proc: by_id(target.id) }).await.unwrap().into_inner();
    assert_eq!(
        info.size,
        Some(pb::TermSize { rows: 30, cols: 100 }),
        "the PTY follows the attached terminal"
    );
    write(&mut rpc, viewer.id, b"typed through attach\r").await;
    wait_for_text(
        &mut rpc,
        target.id,
        pb::Stream::Stdout,
        "typed through attach\r\ntyped through attach\r\n",
    )
    .await;
    // What the program printed reaches the attached terminal too.
    wait_for_text(
        &mut rpc,
        viewer.id,
        pb::Stream::Stdout,
        "typed through attach\r\ntyped through attach",
    )
    .await;
    // Who typed what: the test's own call (it did not say who it is: its
    // program and pid), the attached terminal, a portal-cli command.
    ok(&cli(&s, &["write", &target.id.to_string(), "via cli", "--enter"]).await);
    wait_for_text(&mut rpc, target.id, pb::Stream::Stdout, "via cli\r\nvia cli\r\n").await;
    let req = pb::ReadRequest {
        proc: by_id(target.id),
        streams: vec![pb::Stream::Stdin.into()],
        encoding: pb::Encoding::Raw.into(),
        keep: pb::Keep::Head.into(),
        ..Default::default()
    };
    // Rows of one typist may be stored apart: join them first.
    let mut typed: Vec<(String, String)> = Vec::new();
    for r in rpc.read(req).await.unwrap().into_inner().records {
        let data = String::from_utf8_lossy(&r.data).into_owned();
        match typed.last_mut() {
            Some((who, text)) if *who == r.origin => text.push_str(&data),
            _ => typed.push((r.origin, data)),
        }
    }
    let by = |text: &str| -> String {
        typed
            .iter()
            .find(|(_, t)| t.contains(text))
            .unwrap_or_else(|| panic!("no input {text:?} in {typed:?}"))
            .0
            .clone()
    };
    assert!(by("earlier").ends_with(&format!("(pid {})", std::process::id())), "{}", by("earlier"));
    assert!(
        by("typed through attach").starts_with("portal-cli attach ("),
        "{}",
        by("typed through attach")
    );
    assert!(by("via cli").starts_with("portal-cli write ("), "{}", by("via cli"));
    let who = ok(&cli(&s, &["read", &target.id.to_string(), "--stream", "stdin", "--who"]).await);
    assert!(
        who.lines().any(|l| l.starts_with("[portal-cli write (") && l.ends_with("] via cli")),
        "{who}"
    );
    let inspect = ok(&cli(&s, &["inspect", &target.id.to_string()]).await);
    assert!(inspect.contains("typed by ") && inspect.contains("portal-cli attach ("), "{inspect}");
    write(&mut rpc, viewer.id, b"\x1d").await;
    let end = wait_exit(&mut rpc, viewer.id).await;
    assert_eq!(end.exit_code, Some(0), "attach did not exit cleanly");
    let out = String::from_utf8(
        read_all(&mut rpc, viewer.id, pb::Stream::Stdout, pb::Encoding::Raw).await,
    )
    .unwrap();
    assert!(out.contains("detached from"), "{out}");
    let info =
        rpc.inspect(pb::InspectRequest { proc: by_id(target.id) }).await.unwrap().into_inner();
    assert_eq!(info.status(), pb::Status::Running, "detaching must not stop the program");
    let program = String::from_utf8(
        read_all(&mut rpc, target.id, pb::Stream::Stdout, pb::Encoding::Raw).await,
    )
    .unwrap();
    assert!(!program.contains("Ctrl-]"), "{program:?}");
    d.stop().await;
}

/// Whether `systemd-analyze verify` can judge a unit here: it must reject
/// a broken one (it cannot where no manager can be set up, as in some
/// containers, or where systemd is not installed).
fn systemd_can_verify(dir: &Path) -> Result<(), String> {
    let broken = dir.join("portal-broken.service");
    std::fs::write(&broken, "[Service]\nExecStartt=/bin/true\n").unwrap();
    let o = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&broken)
        .output()
        .map_err(|e| format!("systemd-analyze: {e}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("Unknown key") {
        Ok(())
    } else {
        Err(format!("it did not notice a broken unit: {err}"))
    }
}

#[tokio::test]
async fn service_files_for_systemd_and_launchd() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let home = test_dir();
    let home_s = home.path().to_string_lossy().into_owned();
    let daemon = std::fs::canonicalize(daemon_binary()).unwrap();
    let env = [
        ("HOME", home_s.as_str()),
        ("XDG_CONFIG_HOME", ""),
        ("PORTAL_DAEMON", daemon.to_str().unwrap()),
    ];
    let dry =
        ok(&cli_env(&s, &["service", "install", "--kind", "systemd", "--dry-run"], &env).await);
    assert!(dry.contains(&format!("ExecStart={}\n", daemon.display())), "{dry}");
    assert!(dry.contains("[Install]\nWantedBy=default.target"), "{dry}");
    let unit = home.path().join(".config/systemd/user/portald.service");
    assert!(!unit.exists(), "dry run wrote the file");
    let out = ok(&cli_env(&s, &["service", "install", "--kind", "systemd"], &env).await);
    assert!(out.contains("systemctl --user enable --now portald.service"), "{out}");
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), dry);
    assert!(
        ok(&cli_env(&s, &["service", "status", "--kind", "systemd"], &env).await)
            .starts_with("installed")
    );
    match systemd_can_verify(home.path()) {
        Ok(()) => {
            let o = std::process::Command::new("systemd-analyze")
                .arg("verify")
                .arg(&unit)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success() && !err.contains("Unknown"), "systemd-analyze: {err}");
        }
        Err(why) => eprintln!("the unit is not checked by systemd-analyze: {why}"),
    }
    ok(&cli_env(&s, &["service", "uninstall", "--kind", "systemd"], &env).await);
    assert!(!unit.exists());
    assert!(
        ok(&cli_env(&s, &["service", "status", "--kind", "systemd"], &env).await)
            .starts_with("absent")
    );
    ok(&cli_env(&s, &["service", "install", "--kind", "launchd"], &env).await);
    let plist =
        std::fs::read_to_string(home.path().join("Library/LaunchAgents/dev.portal.portald.plist"))
            .unwrap();
    assert!(plist.contains(&format!("<string>{}</string>", daemon.display())), "{plist}");
    assert!(plist.contains("<key>RunAtLoad</key>\n\t<true/>"), "{plist}");
    d.stop().await;
}

#[tokio::test]
async fn wait_run_and_send_keys() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "python3", &["-q", "-i"], 24, 80).await;
    let id = p.id.to_string();
    let o = cli(&s, &["wait", &id, "--from-start", "--match", ">>> "]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cli(&s, &["run", &id, "--", "print(6*7)"]).await;
    assert_eq!(ok(&o), "42\n");
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("[input_requested \">>> \""));
    let o = cli(&s, &["wait", &id, "--match", "never", "--timeout", "300ms", "--json"]).await;
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["reason"].as_str(), v["effective_timeout_ms"].as_u64()),
        (Some("timeout"), Some(300))
    );
    let cat = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    ok(&cli(&s, &["send-keys", &cat.id.to_string(), "text:typed", "Enter"]).await);
    wait_for_text(&mut rpc, cat.id, pb::Stream::Stdout, "typed\r\ntyped\r\n").await;
    // Not a key name: typed as it is, as tmux send-keys does.
    ok(&cli(&s, &["send-keys", &cat.id.to_string(), "Entr", "Enter"]).await);
    wait_for_text(&mut rpc, cat.id, pb::Stream::Stdout, "Entr\r\nEntr\r\n").await;
    // A name that reads as a key but is none is refused, naming the keys,
    // and nothing of the send is typed; `text:` types it.
    let bad = cli(&s, &["send-keys", &cat.id.to_string(), "x", "F13", "Enter"]).await;
    let said = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert_eq!(bad.status.code(), Some(1), "{said}");
    assert!(said.contains("unknown key \"F13\"") && said.contains("F1 to F12"), "{said}");
    assert!(said.contains("text:F13"), "{said}");
    ok(&cli(&s, &["send-keys", &cat.id.to_string(), "text:F13", "Enter"]).await);
    wait_for_text(&mut rpc, cat.id, pb::Stream::Stdout, "Entr\r\nEntr\r\nF13\r\nF13\r\n").await;
    d.stop().await;
}

#[tokio::test]
async fn agents_hooks_and_the_in_band_emit_fallback() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    // Inside a Portal terminal but with the socket out of reach (as over
    // SSH): emit reports in-band, on the terminal, and portald reads it.
    let script = format!(
        "PORTAL_SOCKET=/nonexistent/x.sock '{CLI}' emit awaiting_input --name claude --reason question < /dev/null; echo emitted; read x"
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "emitted").await;
    let out = ok(&cli(&s, &["agents"]).await);
    assert!(
        out.contains("claude") && out.contains("awaiting_input") && out.contains("osc"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("wait:1"), "{out}");
    let v: Value = serde_json::from_str(&ok(&cli(&s, &["agents", "--json"]).await)).unwrap();
    assert_eq!(v["agents"][0]["reason"], "question");
    let o = cli(&s, &["agents", "wait", &p.id.to_string(), "--state", "awaiting_input"]).await;
    assert!(o.status.success(), "{}", stdout(&o));
    let o =
        cli(&s, &["agents", "wait", &p.id.to_string(), "--state", "done", "--timeout", "200ms"])
            .await;
    assert_eq!(o.status.code(), Some(1));
    let o =
        cli(&s, &["agents", "send", &p.id.to_string(), "--key", "once", "--", "go", "on"]).await;
    assert_eq!(ok(&o).trim(), format!("{}: sent", p.id));
    let o =
        cli(&s, &["agents", "send", &p.id.to_string(), "--key", "once", "--", "go", "on"]).await;
    assert!(ok(&o).contains("already sent"));
    // By name, as everywhere a process is named.
    let named = pb::StartRequest {
        command: "sh".into(),
        args: vec![
            "-c".into(),
            "printf '\\033]3008;portal=1;state=done;name=cc\\033\\\\'; read x; echo got $x; read y"
                .into(),
        ],
        mode: pb::Mode::Pty.into(),
        name: "cc".into(),
        ..Default::default()
    };
    let cc = rpc.start(named).await.unwrap().into_inner();
    ok(&cli(&s, &["agents", "wait", "cc", "--state", "done"]).await);
    // NAME is the process's name ("-" for none), KIND the agent's, so two
    // agents of one kind are told apart; --json has the process name too.
    let out = ok(&cli(&s, &["agents"]).await);
    let row = |id: u64| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id.to_string().as_str()))
            .unwrap_or_else(|| panic!("no row {id}: {out}"));
        line.split_whitespace().take(3).map(str::to_owned).collect()
    };
    assert!(out.lines().next().unwrap().contains("NAME") && out.contains("KIND"), "{out}");
    assert_eq!(row(p.id), [p.id.to_string(), "-".into(), "claude".into()], "{out}");
    assert_eq!(row(cc.id)[1], "cc", "{out}");
    let v: Value = serde_json::from_str(&ok(&cli(&s, &["agents", "--json"]).await)).unwrap();
    let names: Vec<(u64, &str)> = v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_u64().unwrap(), a["process_name"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&(cc.id, "cc")) && names.contains(&(p.id, "")), "{v}");
    assert_eq!(
        ok(&cli(&s, &["agents", "send", "cc", "--", "hi"]).await).trim(),
        format!("{}: sent", cc.id)
    );
    wait_for_text(&mut rpc, cc.id, pb::Stream::Stdout, "got hi").await;
    let o = cli(&s, &["agents", "send", "nobody", "--", "hi"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("nobody"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Hooks in a private HOME: install, status, uninstall leaves the file as it was.
    let home = test_dir();
    let settings = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = "{\n  \"model\": \"sonnet\",\n  \"hooks\": {\n    \"Stop\": [{ \"hooks\": [{ \"type\": \"command\", \"command\": \"say hi\" }] }]\n  }\n}\n";
    std::fs::write(&settings, original).unwrap();
    let home_s = home.path().to_string_lossy().into_owned();
    let env = [("HOME", home_s.as_str())];
    let out = ok(&cli_env(&s, &["hooks", "install", "claude"], &env).await);
    assert!(out.contains("claude: installed"), "{out}");
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(
        text.contains(&format!(
            "{} emit done --name claude --event Stop",
            std::fs::canonicalize(CLI).unwrap().display()
        )),
        "{text}"
    );
    assert!(
        ok(&cli_env(&s, &["hooks", "status", "claude"], &env).await).contains("claude: installed")
    );
    let codex = ok(&cli_env(&s, &["hooks", "status", "codex"], &env).await);
    assert!(codex.contains("not_detected"), "{codex}");
    ok(&cli_env(&s, &["hooks", "uninstall", "claude"], &env).await);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
    // Codex runs a hook only once it is trusted in its /hooks view: status
    // says whether it is, and uninstall takes Portal's trust records along.
    let config = home.path().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let original = "model = \"o4\"\n";
    std::fs::write(&config, original).unwrap();
    let out = ok(&cli_env(&s, &["hooks", "install", "codex"], &env).await);
    assert!(
        out.contains("codex: installed, not yet trusted by Codex: run codex once and approve"),
        "{out}"
    );
    // What Codex writes once the person approved each of them.
    let mut trusted = std::fs::read_to_string(&config).unwrap();
    for event in [
        "session_start",
        "user_prompt_submit",
        "permission_request",
        "post_tool_use",
        "stop",
        "interrupt",
        "session_end",
    ] {
        trusted.push_str(&format!(
            "\n[hooks.state.\"{}:{event}:0:0\"]\ntrusted_hash = \"sha256:{event}\"\n",
            config.display()
        ));
    }
    std::fs::write(&config, &trusted).unwrap();
    let out = ok(&cli_env(&s, &["hooks", "status", "codex"], &env).await);
    assert!(out.contains("codex: installed, trusted by Codex"), "{out}");
    let v: Value =
        serde_json::from_str(
            &ok(&cli_env(&s, &["hooks", "status", "codex", "--json"], &env).await),
        )
        .unwrap();
    assert_eq!(v[0]["trust"], "trusted", "{v}");
    ok(&cli_env(&s, &["hooks", "uninstall", "codex"], &env).await);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
    d.stop().await;
}

#[tokio::test]
async fn secret_types_into_the_program_and_not_into_the_log() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let p = start_pty(
        &mut rpc,
        "sh",
        &["-c", "stty -echo; read x; stty echo; echo; echo len=${#x}"],
        24,
        80,
    )
    .await;
    // Once it asks (echo off at a line prompt), a person types the secret.
    let asked = rpc
        .wait(pb::WaitRequest {
            proc: by_id(p.id),
            until: Some(Default::default()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(asked.reason(), pb::WaitReason::AwaitingSecret, "{asked:?}");
    let mut cmd = tokio::process::Command::new(CLI);
    cmd.args(["secret", &p.id.to_string()])
        .env("PORTAL_SOCKET", &s)
        .env("PORTAL_NO_AUTOSTART", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"correct horse\n").await.unwrap();
    }
    let out = bounded("portal-cli secret", child.wait_with_output()).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sent 13 characters"));
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "len=13").await;
    let input = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert_eq!(input, b"**************");
    // A terminal that echoes would print the secret back into the log:
    // refused, and nothing is typed.
    let cat = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    let out = cli(&s, &["secret", &cat.id.to_string()]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not wait for a secret") && err.contains("--anyway"), "{err}");
    assert!(read_all(&mut rpc, cat.id, pb::Stream::Stdin, pb::Encoding::Raw).await.is_empty());
    d.stop().await;
}

#[tokio::test]
async fn a_closed_pipe_ends_the_cli_quietly() {
    use std::os::unix::process::ExitStatusExt as _;
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    for _ in 0..50 {
        start_pipes(&mut rpc, "sleep", &["60"]).await;
    }
    let shown = start_pty(&mut rpc, "sleep", &["60"], 24, 80).await.id;
    // Like `portal-cli ps | head -1`: the reader goes away. Each ends as a
    // pipeline expects, killed by SIGPIPE with nothing said, including
    // `screen --watch`, which would otherwise watch on forever.
    let shown = shown.to_string();
    for args in [&["ps", "--all"][..], &["screen", "--watch", &shown]] {
        let mut child = tokio::process::Command::new(CLI)
            .args(args)
            .env("PORTAL_SOCKET", &s)
            .env("PORTAL_NO_AUTOSTART", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = bounded("portal-cli into a closed pipe", child.wait_with_output()).await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(13), "{args:?}: {:?} {err}", out.status);
        assert!(err.is_empty(), "{args:?}: {err}");
    }
    d.stop().await;
}

#[tokio::test]
async fn clients_refuse_a_socket_another_user_set_up() {
    use std::os::unix::fs::PermissionsExt as _;
    let python = std::path::Path::new("/usr/bin/python3");
    if portal_client::paths::uid() != 0 || !python.exists() {
        eprintln!("skipped: needs root (to act as a second user) and /usr/bin/python3");
        return;
    }
    let dir = test_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Another user created the directory first and serves a socket there
    // that records what it is sent.
    let trap = dir.path().join("trap");
    std::fs::create_dir(&trap).unwrap();
    std::os::unix::fs::chown(&trap, Some(65534), Some(65534)).unwrap();
    let socket = trap.join("portald.sock");
    let fake = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    data = b""
    while chunk := c.recv(65536):
        data += chunk
    print("received", len(data), flush=True)
"#;
    let mut server = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(python)
        .args(["-c", fake])
        .arg(&socket)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = {
        use tokio::io::AsyncBufReadExt as _;
        tokio::io::BufReader::new(server.stdout.take().unwrap()).lines()
    };
    assert_eq!(
        bounded("the fake server", lines.next_line()).await.unwrap().as_deref(),
        Some("ready")
    );
    let out = cli(&socket, &["write", "1", "my password"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("refusing to talk to") && err.contains("belongs to uid 65534"), "{err}");
    assert!(err.contains("nothing was sent"), "{err}");
    // The directory and the socket now look like ours; the server is not.
    std::os::unix::fs::chown(&trap, Some(0), Some(0)).unwrap();
    std::os::unix::fs::chown(&socket, Some(0), Some(0)).unwrap();
    let out = cli(&socket, &["write", "1", "my password"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("runs as uid 65534"), "{err}");
    // The one connection the peer check made carried nothing.
    let got = bounded("the fake server's report", lines.next_line()).await.unwrap();
    assert_eq!(got.as_deref(), Some("received 0"));
}

#[tokio::test]
async fn the_doctor_moves_a_damaged_database_aside_and_salvages_it() {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let dir = test_dir();
    let config = config_in(dir.path());
    // portal-cli finds the portald built beside it.
    let env = [("PORTAL_DATA_DIR", config.data_dir.to_str().unwrap())];
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "seq 1 400000; echo done"]).await;
    wait_exit(&mut rpc, p.id).await;
    // While it runs, the doctor refuses.
    let out = cli_env(&config.socket, &["daemon", "doctor"], &env).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stop it first"));
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    // Healthy: nothing to do.
    let out = ok(&cli_env(&config.socket, &["daemon", "doctor"], &env).await);
    assert!(out.contains("is healthy"), "{out}");
    // A damaged page: the root of an index of the log.
    let db = config.database();
    let (page, size): (i64, i64) = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let root: i64 = c
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'chunks' LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (root, c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap())
    };
    let mut f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    f.seek(SeekFrom::Start(u64::try_from((page - 1) * size).unwrap())).unwrap();
    f.write_all(&vec![0xa5u8; usize::try_from(size).unwrap()]).unwrap();
    drop(f);
    let out = ok(&cli_env(&config.socket, &["daemon", "doctor"], &env).await);
    assert!(out.contains("is damaged") && out.contains("moved it aside"), "{out}");
    assert!(out.contains("rows of processes"), "{out}");
    let aside = std::fs::read_dir(&config.data_dir)
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("portal.db.broken-"));
    assert!(aside, "the damaged file was not kept");
    // The daemon starts on the fresh database and knows the process.
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let back =
        client.rpc().inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
    assert_eq!(back.status(), pb::Status::Exited);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    // A header that is not SQLite's at all: moved aside, a fresh start.
    std::fs::write(config.database(), b"garbage, not a database at all").unwrap();
    let out = ok(&cli_env(&config.socket, &["daemon", "doctor"], &env).await);
    assert!(out.contains("is damaged") && out.contains("fresh database"), "{out}");
}

#[tokio::test]
async fn grep_finds_lines_across_processes_survives_a_restart_and_forgets_cleared_output() {
    let dir = test_dir();
    let config = config_in(dir.path());
    let s = config.socket.clone();
    let (task, shutdown) = serve_in(&config);
    let client = portal_client::client::Client::connect(&s).await.unwrap();
    let mut rpc = client.rpc();
    let web = start_pipes(
        &mut rpc,
        "sh",
        &["-c", "echo booting; echo 'listening on 8080'; echo 'ERROR: upstream timeout' >&2"],
    )
    .await;
    let db =
        start_pipes(&mut rpc, "sh", &["-c", "echo 'checkpoint complete'; echo 'upstream fine'"])
            .await;
    let py = start_pty(&mut rpc, "python3", &["-q"], 24, 80).await;
    wait_exit(&mut rpc, web.id).await;
    wait_exit(&mut rpc, db.id).await;
    ok(&cli(&s, &["wait", &py.id.to_string()]).await);
    ok(&cli(&s, &["run", &py.id.to_string(), "--", "print('needle' + 'haystack')"]).await);

    // One process of three printed it.
    let out = ok(&cli(&s, &["grep", "timeout"]).await);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with(&format!("{} stderr ", web.id))
            && out.ends_with(": ERROR: upstream timeout\n"),
        "{out}"
    );
    // Streams: the word is on stderr of one and stdout of another.
    let out = ok(&cli(&s, &["grep", "upstream", "--stream", "stdout"]).await);
    assert!(out.contains("upstream fine") && !out.contains("timeout"), "{out}");
    // What was typed is searched too, and the output it printed.
    let typed = ok(&cli(&s, &["grep", "needle", "--stream", "stdin", "--json"]).await);
    let hit: Value = serde_json::from_str(typed.lines().next().unwrap()).unwrap();
    assert_eq!((hit["proc"].as_u64(), hit["stream"].as_str()), (Some(py.id), Some("stdin")));
    assert!(ok(&cli(&s, &["grep", "needlehaystack"]).await).contains("stdout"));
    // Time bounds: everything was printed within the hour, nothing before.
    ok(&cli(&s, &["grep", "booting", "--since", "1h"]).await);
    let none = cli(&s, &["grep", "booting", "--until", "1h"]).await;
    assert_eq!((none.status.code(), stdout(&none)), (Some(1), String::new()));
    // Context lines and a phrase.
    let out = ok(&cli(&s, &["grep", "\"listening on\"", "-C", "1"]).await);
    assert!(out.contains("- booting\n") && out.contains(": listening on 8080\n"), "{out}");
    // Groups of context are separated by `--`, as grep does: between two
    // groups, never after the last.
    let out = ok(&cli(&s, &["grep", "upstream", "-C", "1"]).await);
    assert_eq!(out.lines().filter(|l| *l == "--").count(), 1, "{out}");
    assert!(!out.starts_with("--\n") && !out.ends_with("--\n"), "{out}");
    // Bad input says what is wrong.
    let bad = cli(&s, &["grep", "x", "--regex", "(unclosed"]).await;
    assert!(String::from_utf8_lossy(&bad.stderr).contains("regex"), "{bad:?}");

    // A restart keeps the index (and a lost one is rebuilt from the log).
    drop(rpc);
    drop(client);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    std::fs::remove_file(config.data_dir.join("portal.search.db")).unwrap();
    let (task, shutdown) = serve_in(&config);
    let out = ok(&cli(&s, &["grep", "timeout"]).await);
    assert!(out.contains("ERROR: upstream timeout"), "{out}");

    // Cleared output is not found again; other processes' still is.
    ok(&cli(&s, &["clear", &web.id.to_string()]).await);
    let gone = cli(&s, &["grep", "timeout"]).await;
    assert_eq!(gone.status.code(), Some(1), "{}", stdout(&gone));
    ok(&cli(&s, &["grep", "checkpoint"]).await);
    kill_what_outlives(&s);
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
}

/// `man`, or why not: a skip outside CI, a failure under `CI=true`
/// (`.ci/run` installs man-db).
fn man_program() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|d| d.join("man")).find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "man is missing (.ci/run installs man-db)");
        eprintln!("skipped: man is not installed");
    }
    found
}

#[tokio::test]
async fn the_socket_is_a_flag_and_help_names_the_variables() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let elsewhere = d.dir.path().join("nothing-listens-here.sock");
    // The flag wins over the variable.
    let id = id_of(&ok(&cli_env(
        &elsewhere,
        &["--socket", s.to_str().unwrap(), "start", "--name", "flagged", "--", "sleep", "600"],
        &[],
    )
    .await));
    let ps = ok(&cli_env(&elsewhere, &["ps", "--socket", s.to_str().unwrap()], &[]).await);
    assert!(ps.contains("flagged") && ps.contains(&id.to_string()), "{ps}");
    let unreachable = cli(&elsewhere, &["ps"]).await;
    assert_eq!(unreachable.status.code(), Some(3), "{unreachable:?}");
    // `--help` and the man page say which variables stand for the flags.
    let help = ok(&cli(&s, &["--help"]).await);
    for said in ["--socket", "PORTAL_SOCKET", "--data-dir", "PORTAL_DATA_DIR"] {
        assert!(help.contains(said), "--help does not name {said}: {help}");
    }
    let dir = d.dir.path().join("man1");
    ok(&cli(&s, &["man", "--dir", dir.to_str().unwrap()]).await);
    let page = std::fs::read_to_string(dir.join("portal-cli.1")).unwrap();
    for said in ["PORTAL_SOCKET", "PORTAL_DATA_DIR"] {
        assert!(page.contains(said), "portal-cli.1 does not name {said}: {page}");
    }
    d.stop().await;
}

#[tokio::test]
async fn a_typist_without_user_in_the_environment_is_named_by_the_password_database() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let cat = start_pipes(&mut rpc, "cat", &[]).await;
    let mut cmd = tokio::process::Command::new(CLI);
    cmd.args(["write", &cat.id.to_string(), "typed", "--enter"])
        .env("PORTAL_SOCKET", &s)
        .env("PORTAL_NO_AUTOSTART", "1")
        .env_remove("USER")
        .env_remove("LOGNAME");
    let out = bounded("portal-cli write without USER", cmd.output()).await.unwrap();
    ok(&out);
    wait_for_text(&mut rpc, cat.id, pb::Stream::Stdout, "typed\n").await;
    let who = ok(&cli(&s, &["read", &cat.id.to_string(), "--stream", "stdin", "--who"]).await);
    let expected = match portal_client::paths::user_name() {
        Some(name) => format!("[portal-cli write ({name}@"),
        None => format!("[portal-cli write (uid {}@", portal_client::paths::uid()),
    };
    assert!(who.lines().any(|l| l.starts_with(&expected) && l.ends_with("] typed")), "{who}");
    d.stop().await;
}

#[tokio::test]
async fn completions_man_pages_and_versions_for_people() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    // Completions load in bash and register portal-cli.
    let bash = bounded(
        "bash loading the completions",
        tokio::process::Command::new("bash")
            .arg("-c")
            .arg(format!("source <('{CLI}' completions bash) && complete -p portal-cli"))
            .output(),
    )
    .await
    .unwrap();
    assert!(bash.status.success(), "{}", String::from_utf8_lossy(&bash.stderr));
    assert!(stdout(&bash).contains("portal-cli"), "{}", stdout(&bash));
    for shell in ["zsh", "fish"] {
        let script = ok(&cli(&s, &["completions", shell]).await);
        assert!(
            script.contains("portal-cli") && script.contains("PORTAL_COMPLETE"),
            "{shell}: {script}"
        );
    }
    // A Tab completes subcommands, and process names and ids from the
    // running daemon.
    let id = id_of(&ok(&cli(&s, &["start", "--name", "tab-me", "--", "sleep", "600"]).await));
    let tab = |words: &'static str| {
        let s = s.clone();
        async move {
            let script = format!(
                "source <('{CLI}' completions bash) && COMP_WORDS=({words}) && COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)) && \
                 _clap_complete_portal_cli portal-cli \"${{COMP_WORDS[COMP_CWORD]}}\" && printf '%s\\n' \"${{COMPREPLY[@]}}\""
            );
            let out = bounded(
                "a Tab in bash",
                tokio::process::Command::new("bash")
                    .arg("-c")
                    .arg(script)
                    .env("PORTAL_SOCKET", &s)
                    .output(),
            )
            .await
            .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            stdout(&out)
        }
    };
    let subcommands = tab("portal-cli att").await;
    assert_eq!(subcommands.trim(), "attach", "{subcommands}");
    let procs = tab("portal-cli screen ''").await;
    assert!(
        procs.lines().any(|l| l == "tab-me") && procs.lines().any(|l| l == id.to_string()),
        "{procs}"
    );
    let named = tab("portal-cli kill tab").await;
    assert_eq!(named.trim(), "tab-me", "{named}");
    // Man pages of all three binaries, and one per subcommand; man renders
    // each.
    let dir = d.dir.path().join("man1");
    let listed = ok(&cli(&s, &["man", "--dir", dir.to_str().unwrap()]).await);
    for page in
        ["portal-cli.1", "portal-cli-grep.1", "portal-cli-attach.1", "portald.1", "portal-shim.1"]
    {
        assert!(listed.contains(page), "{page} not written: {listed}");
    }
    if let Some(man) = man_program() {
        for page in ["portal-cli.1", "portal-cli-grep.1", "portald.1", "portal-shim.1"] {
            let out = bounded(
                "man rendering a page",
                tokio::process::Command::new(&man)
                    .arg("-l")
                    .arg(dir.join(page))
                    .env("MANWIDTH", "80")
                    .env("MANPAGER", "cat")
                    .output(),
            )
            .await
            .unwrap();
            let text = stdout(&out);
            assert!(out.status.success() && text.contains("NAME"), "{page}: {text}");
        }
    }
    // Versions: this client's and the running daemon's, the same.
    let v = ok(&cli(&s, &["version", "--json"]).await);
    let v: Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["portal_cli"], v["portald"], "{v}");
    assert_eq!(v["differ"], Value::Bool(false));
    d.stop().await;
    // With none running, a Tab offers no process, and starts no daemon.
    let procs = tab("portal-cli screen ''").await;
    assert!(!procs.contains("tab-me"), "{procs}");
    // And `version` says so, without starting one either.
    let text = ok(&cli(&s, &["version"]).await);
    assert!(text.contains("portald is not running"), "{text}");
}

#[tokio::test]
async fn install_puts_working_binaries_pages_and_completions_under_a_prefix() {
    let dir = test_dir();
    let prefix = dir.path().join("prefix");
    let s = dir.path().join("s").join("portald.sock");
    let said = ok(&cli(&s, &["install", "--prefix", prefix.to_str().unwrap()]).await);
    let bin = prefix.join("bin");
    assert!(said.contains("is not on your PATH"), "{said}");
    // (portal-holder has no flags for people; the start below runs it.)
    for binary in ["portal-cli", "portald", "portal-shim"] {
        let out = bounded(
            "an installed binary",
            tokio::process::Command::new(bin.join(binary)).arg("--help").output(),
        )
        .await
        .unwrap();
        assert!(out.status.success(), "{binary}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // The installed portal-cli runs Portal: it starts the installed portald,
    // which starts the installed portal-holder.
    let installed = bounded(
        "the installed portal-cli",
        tokio::process::Command::new(bin.join("portal-cli"))
            .args(["start", "--wait", "exit", "--", "echo", "installed-and-working"])
            .env("PORTAL_SOCKET", &s)
            .env("PORTAL_DATA_DIR", dir.path().join("data"))
            .output(),
    )
    .await
    .unwrap();
    assert!(
        stdout(&installed).contains("installed-and-working"),
        "{}{}",
        stdout(&installed),
        String::from_utf8_lossy(&installed.stderr)
    );
    let share = prefix.join("share");
    assert!(share.join("man/man1/portal-cli-grep.1").is_file());
    assert!(share.join("man/man1/portald.1").is_file());
    let bash = bounded(
        "bash loading the installed completions",
        tokio::process::Command::new("bash")
            .arg("-c")
            .arg("source \"$1\" && complete -p portal-cli")
            .arg("bash")
            .arg(share.join("bash-completion/completions/portal-cli"))
            .output(),
    )
    .await
    .unwrap();
    assert!(bash.status.success(), "{}", String::from_utf8_lossy(&bash.stderr));
    // Installing again over the same files works (a rename over each).
    ok(&cli(&s, &["install", "--prefix", prefix.to_str().unwrap()]).await);
    let stop = cli_env(&s, &["daemon", "stop"], &[]).await;
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    kill_what_outlives(&s);
}

#[tokio::test]
async fn agents_notify_tells_a_person_once_per_change_to_waiting() {
    use std::os::unix::fs::PermissionsExt as _;
    use tokio::io::AsyncBufReadExt as _;
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    // A notify-send that records what it was asked to show.
    let bin = d.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = d.dir.path().join("notified");
    let fake = bin.join("notify-send");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\nprintf '%s|%s\\n' \"$2\" \"$3\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut watcher = tokio::process::Command::new(CLI)
        .args(["agents", "--notify"])
        .env("PORTAL_SOCKET", &s)
        .env("PORTAL_NO_AUTOSTART", "1")
        .env("NO_COLOR", "1")
        .env("PATH", &path)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watcher.stdout.take().unwrap()).lines();
    let first = bounded("the watcher's first list", lines.next_line()).await.unwrap();
    assert_eq!(first.as_deref(), Some("No agents."));
    // An agent that asks, works, then finishes, a step per line typed.
    let osc = |state: &str, extra: &str| {
        format!("printf '\\033]3008;portal=1;state={state};name=cc{extra}\\033\\\\'")
    };
    let script = format!(
        "read a; {}; read b; {}; read c; {}; read d",
        osc("awaiting_input", ";reason=permission"),
        osc("running", ""),
        osc("done", "")
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    let notified = async |n: usize| {
        wait_until(&format!("{n} notifications"), async || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let got: Vec<String> = text.lines().map(str::to_owned).collect();
            (got.len() >= n).then_some(got)
        })
        .await
    };
    write(&mut rpc, p.id, b"1\r").await;
    let got = notified(1).await;
    assert_eq!(got, [format!("cc (process {}) needs you|permission", p.id)]);
    // Running needs nobody; done does.
    write(&mut rpc, p.id, b"2\r").await;
    write(&mut rpc, p.id, b"3\r").await;
    let got = notified(2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[1].starts_with(&format!("cc (process {}) is done|", p.id)), "{got:?}");
    drop(watcher);
    d.stop().await;
}

#[tokio::test]
async fn ps_fits_the_terminal_it_prints_to() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let long = "x".repeat(150);
    start_pipes(&mut rpc, "sh", &["-c", &format!("sleep 60 # {long}")]).await;
    // The CLI on terminals Portal owns, narrow and wide: its rows never
    // wrap, and on the wide one the command shows as far as it fits.
    for cols in [110u32, 200] {
        let req = pb::StartRequest {
            command: CLI.into(),
            args: vec!["ps".into()],
            mode: pb::Mode::Pty.into(),
            size: Some(pb::TermSize { rows: 10, cols }),
            env: [
                ("PORTAL_SOCKET".to_owned(), s.to_string_lossy().into_owned()),
                ("PORTAL_NO_AUTOSTART".to_owned(), "1".to_owned()),
                ("NO_COLOR".to_owned(), "1".to_owned()),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let ps = rpc.start(req).await.unwrap().into_inner();
        wait_exit(&mut rpc, ps.id).await;
        let text = String::from_utf8(
            read_all(&mut rpc, ps.id, pb::Stream::Stdout, pb::Encoding::Raw).await,
        )
        .unwrap();
        let rows: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
        // A header, the long one, and this ps itself.
        assert_eq!(rows.len(), 3, "{text:?}");
        let widest = rows.iter().map(|r| r.chars().count()).max().unwrap();
        assert!(widest <= cols as usize, "{cols} columns, a row of {widest}: {text}");
        let row = rows.iter().find(|r| r.contains("sleep 60")).unwrap();
        if cols == 200 {
            let shown = row.matches('x').count();
            assert!(shown > 60, "the wide terminal shows more of the command: {text}");
        }
        assert!(row.ends_with('…'), "a cut command says so: {text}");
    }
    d.stop().await;
}

/// asciinema from `tests/asciinema/.venv` (`.ci/run` installs it), or why
/// not: a skip outside CI, a failure under `CI=true`.
fn asciinema() -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/asciinema/.venv/bin/asciinema");
    if bin.is_file() {
        return Some(bin);
    }
    assert!(std::env::var_os("CI").is_none(), "{} is missing; .ci/run installs it", bin.display());
    eprintln!("skipping the asciinema check: {} is missing", bin.display());
    None
}

#[tokio::test]
async fn export_writes_a_recording_asciinema_plays_and_a_transcript() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let started = ok(&cli(&s, &["start", "--pty", "--size", "10x60", "--", "python3", "-q"]).await);
    let id = id_of(&started);
    ok(&cli(&s, &["wait", &id.to_string()]).await);
    ok(&cli(&s, &["run", &id.to_string(), "--", "print('h\u{e9}llo \u{2713} ' * 40)"]).await);
    // A resize, which the recording replays (`r`), the header keeping the
    // size it started at.
    let bigger = pb::TermSize { rows: 12, cols: 70 };
    rpc.screen(pb::ScreenRequest { proc: by_id(id), resize: Some(bigger) }).await.unwrap();
    let raw: Vec<u8> = read_all(&mut rpc, id, pb::Stream::Stdout, pb::Encoding::Raw).await;

    let cast = d.dir.path().join("py.cast");
    ok(&cli(&s, &["export", &id.to_string(), "-o", cast.to_str().unwrap()]).await);
    let text = std::fs::read_to_string(&cast).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        (header["version"].as_u64(), header["width"].as_u64(), header["height"].as_u64()),
        (Some(2), Some(60), Some(10)),
        "{header}"
    );
    let events: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let played: String =
        events.iter().filter(|e| e[1] == "o").map(|e| e[2].as_str().unwrap()).collect();
    // The program may still print after the read above (readline redraws
    // its prompt on the resize): the recording holds at least what was
    // read then, and exactly the log's bytes.
    let log: Vec<u8> = read_all(&mut rpc, id, pb::Stream::Stdout, pb::Encoding::Raw).await;
    assert!(played.len() >= raw.len(), "the recording misses output");
    assert_eq!(played.as_bytes(), &log[..played.len()], "the output events are the log's bytes");
    assert!(events.iter().any(|e| e[1] == "i" && e[2].as_str().unwrap().contains("print(")));
    let typed = events.iter().position(|e| e[1] == "i").unwrap();
    assert!(
        typed > 0
            && events[typed - 1][1] == "m"
            && events[typed - 1][2].as_str().unwrap().starts_with("input from portal-cli run ("),
        "a marker names who typed: {:?}",
        &events[typed.saturating_sub(1)]
    );
    assert_eq!(
        events.iter().filter(|e| e[1] == "r").map(|e| e[2].as_str().unwrap()).collect::<Vec<_>>(),
        ["70x12"],
        "the resize"
    );
    let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times only grow: {times:?}");

    if let Some(player) = asciinema() {
        let out = bounded(
            "asciinema cat",
            tokio::process::Command::new(player).arg("cat").arg(&cast).output(),
        )
        .await
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, played.as_bytes(), "asciinema plays exactly the output");
    }

    let transcript = ok(&cli(&s, &["export", &id.to_string(), "--format", "text"]).await);
    assert!(
        transcript.contains("\n[input from portal-cli run (")
            && transcript.contains(")] print('h\u{e9}llo"),
        "who typed it: {transcript}"
    );
    assert!(transcript.contains("h\u{e9}llo \u{2713} h\u{e9}llo"), "{transcript}");
    // A span that ends before the program started holds nothing.
    let none = ok(&cli(&s, &["export", &id.to_string(), "--since", "1h", "--until", "30m"]).await);
    assert_eq!(none.lines().count(), 1, "only the header: {none}");
    d.stop().await;
}

#[tokio::test]
async fn a_text_export_of_a_window_holds_what_was_printed_in_it() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let script = "echo first; sleep 2; echo second; exec sleep 60";
    let id = id_of(&ok(&cli(&s, &["start", "--", "sh", "-c", script]).await)).to_string();
    ok(&cli(&s, &["wait", &id, "--match", "second"]).await);
    // "first" was printed 2 s before "second", which was printed just now.
    let window = ok(&cli(&s, &["export", &id, "--format", "text", "--since", "1500ms"]).await);
    assert_eq!(window, "second\n");
    let before = ok(&cli(&s, &["export", &id, "--format", "text", "--until", "1500ms"]).await);
    assert_eq!(before, "first\n");
    // A bare number is refused, with the units to choose from.
    let bare = cli(&s, &["start", "--timeout", "5", "--", "sleep", "100"]).await;
    assert!(!bare.status.success());
    let err = String::from_utf8_lossy(&bare.stderr);
    assert!(err.contains("\"5\" has no unit: write 5s, 5ms, 5m or 5h"), "{err}");
    d.stop().await;
}

#[tokio::test]
async fn run_keeps_output_that_ends_with_the_input_even_as_the_program_exits() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let id = id_of(&ok(&cli(
        &s,
        &["start", "--pty", "--", "bash", "-c", "read -p 'next> ' q; echo \"q=$q\""],
    )
    .await));
    ok(&cli(&s, &["wait", &id.to_string()]).await);
    let out = cli(&s, &["run", &id.to_string(), "--json", "--", "hello"]).await;
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["output"], "q=hello\n", "{v}");
    d.stop().await;
}

#[tokio::test]
async fn install_re_points_an_installed_service_and_agent_hooks() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let home = d.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = home.join(".config");
    let env = [("HOME", home.to_str().unwrap()), ("XDG_CONFIG_HOME", config.to_str().unwrap())];
    // Installed from the build directory first.
    ok(&cli_env(&s, &["service", "install", "--kind", "systemd"], &env).await);
    ok(&cli_env(&s, &["hooks", "install", "claude"], &env).await);
    let unit = config.join("systemd/user/portald.service");
    let settings = home.join(".claude/settings.json");
    assert!(std::fs::read_to_string(&unit).unwrap().contains(CLI), "the build's binaries first");
    let prefix = d.dir.path().join("prefix");
    let said = ok(&cli_env(&s, &["install", "--prefix", prefix.to_str().unwrap()], &env).await);
    let installed = prefix.join("bin");
    assert!(
        said.contains(&format!(
            "the claude hooks now run {}",
            installed.join("portal-cli").display()
        )),
        "{said}"
    );
    let unit = std::fs::read_to_string(&unit).unwrap();
    assert!(unit.contains(&installed.join("portald").display().to_string()), "{unit}");
    let settings = std::fs::read_to_string(&settings).unwrap();
    assert!(settings.contains(&installed.join("portal-cli").display().to_string()), "{settings}");
    assert!(!settings.contains(CLI), "no hook runs the build's portal-cli any more: {settings}");
    let status = ok(&cli_env(&s, &["hooks", "status", "claude"], &env).await);
    assert!(status.contains("outdated"), "the build's CLI sees hooks run another: {status}");
    d.stop().await;
}

#[tokio::test]
async fn wait_on_several_processes_says_which_ended_it_and_why() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let mut ids = Vec::new();
    for name in ["r1", "r2", "r3"] {
        let out = ok(&cli(&s, &["start", "--pty", "--name", name, "--", "python3", "-q"]).await);
        ok(&cli(&s, &["wait", name]).await);
        ids.push(id_of(&out));
    }
    // r1 is briefly busy, r2 and r3 for good.
    write(&mut rpc, ids[0], b"import time; time.sleep(0.3); print('r1 woke')\r").await;
    write(&mut rpc, ids[1], b"import time; time.sleep(600)\r").await;
    write(&mut rpc, ids[2], b"import time; time.sleep(600)\r").await;
    let o = cli(&s, &["wait", "r1", "r2", "r3", "--json"]).await;
    let v: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["ended_by"], ids[0], "{v}");
    let r = v["results"].as_array().unwrap();
    assert_eq!(
        (&r[0]["name"], &r[0]["reason"]),
        (&Value::from("r1"), &Value::from("input_requested"))
    );
    assert!(r[0]["output"].as_str().unwrap().contains("r1 woke"), "{v}");
    assert_eq!(
        (&r[1]["reason"], &r[2]["reason"]),
        (&Value::from("pending"), &Value::from("pending"))
    );
    // --all waits for each: r1 busy a little longer, r2 and r3 interrupted.
    write(&mut rpc, ids[0], b"time.sleep(0.5); print('r1 again')\r").await;
    write(&mut rpc, ids[1], b"\x03").await;
    write(&mut rpc, ids[2], b"\x03").await;
    let o = cli(&s, &["wait", &ids[0].to_string(), "r2", "r3", "--all", "--timeout", "20s"]).await;
    let text = ok(&o);
    assert!(
        text.contains("── 1 \"r1\" ──") || text.contains(&format!("── {} \"r1\" ──", ids[0])),
        "{text}"
    );
    assert!(text.contains("r1 again") && text.matches("KeyboardInterrupt").count() == 2, "{text}");
    assert_eq!(text.matches("[input_requested \">>> \"").count(), 3, "{text}");
    // A wait whose first ending is not what was asked exits 1, naming it.
    let o = cli(&s, &["wait", "r1", "r2", "--match", "never", "--timeout", "300ms"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("every wait timed out"), "{o:?}");
    d.stop().await;
}

#[tokio::test]
async fn install_says_how_to_load_completions_upgrade_and_register() {
    let dir = test_dir();
    let prefix = dir.path().join("prefix");
    let bin = prefix.join("bin");
    let s = dir.path().join("s").join("portald.sock");
    let data = dir.path().join("data");
    let home = dir.path().join("home");
    // A PATH with neither `claude` nor `codex` on it.
    let nothing = dir.path().join("nothing");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&nothing).unwrap();
    let env = [
        ("HOME", home.to_str().unwrap()),
        ("CODEX_HOME", &format!("{}/.codex", home.display())),
        ("PATH", nothing.to_str().unwrap()),
        ("PORTAL_DATA_DIR", data.to_str().unwrap()),
    ];
    let prefix_arg = prefix.to_str().unwrap();
    let said = ok(&cli_env(&s, &["install", "--prefix", prefix_arg], &env).await);
    let shim = bin.join("portal-shim").display().to_string();
    assert!(
        said.contains(&format!(
            "to use Portal from Claude Code (every project): claude mcp add -s user portal -- {shim}\n"
        )),
        "{said}"
    );
    // Codex passes its servers only a few variables: the socket and data
    // directory this portal-cli uses go in the server's env.
    assert!(
        said.contains(&format!(
            "to use Portal from Codex: codex mcp add portal --env 'PORTAL_SOCKET={}' --env 'PORTAL_DATA_DIR={}' -- {shim}\n",
            s.display(),
            data.display()
        )),
        "{said}"
    );
    assert!(
        said.contains("`default_tools_approval_mode = \"approve\"` is under [mcp_servers.portal]")
    );
    assert!(
        said.contains(&format!(
            "`{} daemon upgrade --binary {}`",
            bin.join("portal-cli").display(),
            bin.join("portald").display()
        )),
        "the upgrade names the installed portald: {said}"
    );
    assert!(!home.join(".claude.json").exists(), "nothing is registered without --register");
    // The bash line, run as printed, loads the installed completions.
    let source = said
        .lines()
        .find_map(|l| l.strip_prefix("  bash: add `"))
        .and_then(|l| l.split('`').next())
        .unwrap_or_else(|| panic!("no bash line in {said}"));
    let bash = bounded(
        "bash running the printed line",
        tokio::process::Command::new("bash")
            .arg("-c")
            .arg(format!("{source} && complete -p portal-cli"))
            .output(),
    )
    .await
    .unwrap();
    assert!(bash.status.success(), "{source}: {}", String::from_utf8_lossy(&bash.stderr));
    // With --register and neither client on PATH: the commands, and why.
    let said = ok(&cli_env(&s, &["install", "--prefix", prefix_arg, "--register"], &env).await);
    assert!(
        said.contains(&format!(
            "Claude Code (claude) is not on your PATH; to use Portal from it: claude mcp add -s user portal -- {shim}\n"
        )),
        "{said}"
    );
    assert!(
        said.contains(
            "Codex (codex) is not on your PATH; to use Portal from it: codex mcp add portal --env"
        ),
        "{said}"
    );
}

/// How long one command of a real MCP client's CLI may take: Claude Code's
/// first start reads a 400 MB binary, and its `mcp list` starts every
/// server to check it.
const CLIENT_CLI_BOUND: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `program` in `cwd` with `env` (a private HOME among it), bounded.
async fn run_in(program: &Path, args: &[&str], cwd: &Path, env: &[(&str, String)]) -> Output {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        // Else Claude Code reads and writes the user's own configuration.
        .env_remove("CLAUDE_CONFIG_DIR")
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let what = format!("{} {args:?}", program.display());
    match tokio::time::timeout(CLIENT_CLI_BOUND, cmd.output()).await {
        Ok(out) => out.unwrap(),
        Err(_) => panic!("timed out after {CLIENT_CLI_BOUND:?} waiting for {what}"),
    }
}

/// `install --register` with the real Claude Code and Codex CLIs (npm,
/// pinned in `tests/agents`) on PATH, in a private HOME and CODEX_HOME:
/// Claude Code sees the server from another directory (user scope) and
/// connects to it, Codex lists it with the socket and data directory in its
/// env, and a second install keeps both entries and what a person added.
/// Without the CLIs it skips; under `CI=true` it fails instead.
#[tokio::test]
async fn install_registers_portal_with_the_real_claude_code_and_codex() {
    let found = portal_tests::fake_models::installed();
    if !found.missing.is_empty() {
        assert!(std::env::var_os("CI").is_none(), "{} (CI must run them)", found.missing);
        eprintln!("skipping: {}", found.missing);
        return;
    }
    let (Some(claude), Some(codex)) = (found.claude, found.codex) else {
        panic!("installed() found both CLIs but named neither");
    };
    let dir = test_dir();
    let prefix = dir.path().join("prefix");
    let shim = prefix.join("bin/portal-shim").display().to_string();
    let s = dir.path().join("s").join("portald.sock");
    let data = dir.path().join("data");
    let home = dir.path().join("home");
    let codex_home = home.join(".codex");
    let project = dir.path().join("project");
    let elsewhere = dir.path().join("elsewhere");
    let clients = dir.path().join("clients");
    for d in [&codex_home, &project, &elsewhere, &clients, &home.join("tmp")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(&claude, clients.join("claude")).unwrap();
    std::os::unix::fs::symlink(&codex, clients.join("codex")).unwrap();
    let path = format!("{}:{}", clients.display(), std::env::var("PATH").unwrap_or_default());
    let env = [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("PATH", path),
        ("PORTAL_SOCKET", s.display().to_string()),
        ("PORTAL_DATA_DIR", data.display().to_string()),
        // The health check starts the shim, which must not start a daemon.
        ("PORTAL_NO_AUTOSTART", "1".into()),
        ("NO_COLOR", "1".into()),
        ("TMPDIR", home.join("tmp").display().to_string()),
        ("CLAUDE_CODE_TMPDIR", home.join("tmp").display().to_string()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ];
    let install = ["install", "--prefix", prefix.to_str().unwrap(), "--register"];
    let said = ok(&run_in(Path::new(CLI), &install, &project, &env).await);
    assert!(
        said.contains(&format!(
            "registered Portal with Claude Code for every project: claude mcp add -s user portal -- {shim}\n"
        )),
        "{said}"
    );
    assert!(said.contains("registered Portal with Codex: codex mcp add portal --env"), "{said}");
    // From another directory: a local (per-project) entry would not show.
    let listed = ok(&run_in(&clients.join("claude"), &["mcp", "list"], &elsewhere, &env).await);
    let line = listed
        .lines()
        .find(|l| l.starts_with(&format!("portal: {shim} ")))
        .unwrap_or_else(|| panic!("Claude Code does not list portal from elsewhere: {listed}"));
    assert!(line.contains("Connected"), "{line}");
    let codex_list = |cwd: PathBuf| {
        let (clients, env) = (&clients, &env);
        async move {
            let out =
                ok(&run_in(&clients.join("codex"), &["mcp", "list", "--json"], &cwd, env).await);
            let list: Value = serde_json::from_str(&out).unwrap();
            list.as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "portal")
                .cloned()
                .unwrap_or_else(|| panic!("Codex does not list portal: {out}"))
        }
    };
    let entry = codex_list(elsewhere.clone()).await;
    assert_eq!(entry["transport"]["command"], shim.as_str(), "{entry}");
    assert_eq!(entry["transport"]["env"]["PORTAL_SOCKET"], s.to_str().unwrap(), "{entry}");
    assert_eq!(entry["transport"]["env"]["PORTAL_DATA_DIR"], data.to_str().unwrap(), "{entry}");
    // The approval setting install names is one Codex accepts; a second
    // install leaves both entries, and that setting, as they are.
    let config = codex_home.join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    assert!(before.contains("[mcp_servers.portal]\n"), "{before}");
    let text = before.replacen(
        "[mcp_servers.portal]\n",
        "[mcp_servers.portal]\ndefault_tools_approval_mode = \"approve\"\n",
        1,
    );
    std::fs::write(&config, &text).unwrap();
    let said = ok(&run_in(Path::new(CLI), &install, &elsewhere, &env).await);
    assert!(
        said.contains(&format!("Claude Code already runs {shim} as its MCP server portal")),
        "{said}"
    );
    assert!(
        said.contains(&format!("Codex already runs {shim} as its MCP server portal")),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
    assert_eq!(codex_list(project).await["transport"]["command"], shim.as_str());
    kill_what_outlives(&s);
}
