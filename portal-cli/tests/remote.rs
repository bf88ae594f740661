//! Remote hosts over SSH, end to end: the real `portal-cli` reaches a
//! portald "on another machine" through a real OpenSSH server on loopback
//! ([`portal_tests::sshd`]): start, run, read, screen and kill there; a
//! second connection sees the same programs and cursors; killing ssh in
//! the middle of a wait leaves the program running; `ps --all-hosts` lists
//! this machine and the remote one; and each way of failing to reach a
//! host has its own message and exit code.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;
use std::process::Output;

use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_tests::sshd::{Sshd, sshd_or_skip};
use portal_tests::*;
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

const CLI: &str = env!("CARGO_BIN_EXE_portal-cli");

/// `portal-cli ARGS` with the local daemon at `local` and the hosts file
/// `hosts`. Autostart stays on: the remote side starts its own portald.
fn command(local: &Path, hosts: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(CLI);
    cmd.args(args)
        .env("PORTAL_SOCKET", local)
        .env("PORTAL_HOSTS_FILE", hosts)
        .env_remove("PORTAL_HOST")
        .env_remove("PORTAL_NO_AUTOSTART")
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    cmd
}

async fn cli(local: &Path, hosts: &Path, args: &[&str]) -> Output {
    bounded(&format!("portal-cli {args:?}"), command(local, hosts, args).output()).await.unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "failed ({:?}): {}", o.status, text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn id_of(started: &str) -> String {
    started.split_whitespace().nth(1).unwrap_or_else(|| panic!("no id in {started:?}")).to_owned()
}

async fn setup() -> Option<Sshd> {
    sshd_or_skip(Path::new(CLI)).await
}

#[tokio::test]
async fn programs_on_a_remote_host_are_started_driven_read_and_killed_over_ssh() {
    let Some(sshd) = setup().await else { return };
    let local = TestDaemon::start().await;
    let (s, h) = (local.socket(), sshd.box_only.clone());
    let started = ok(&cli(
        &s,
        &h,
        &[
            "--host",
            "box",
            "start",
            "--name",
            "echoer",
            "--",
            "sh",
            "-c",
            "while read l; do echo got-$l; done",
        ],
    )
    .await);
    let echoer = id_of(&started);
    // The remote program runs there, not here.
    assert!(!ok(&cli(&s, &h, &["ps"]).await).contains("echoer"));
    let ran = ok(&cli(&s, &h, &["run", "box:echoer", "--", "hello"]).await);
    assert!(ran.contains("got-hello"), "{ran}");
    // Recorded there as typed by this command, through ssh.
    let who = ok(&cli(&s, &h, &["read", "box:echoer", "--stream", "stdin", "--who"]).await);
    assert!(who.starts_with("[portal-cli run (") && who.contains("] hello"), "{who}");
    // A second connection (every command is one) sees the same programs,
    // and a cursor from one read continues exactly in the next.
    let first = ok(&cli(&s, &h, &["--host", "box", "read", &echoer, "--json"]).await);
    assert!(first.contains("got-hello"), "{first}");
    ok(&cli(&s, &h, &["write", "box:echoer", "again", "--enter"]).await);
    let waited = ok(&cli(&s, &h, &["wait", "box:echoer", "--match", "got-again"]).await);
    assert!(waited.contains("got-again"), "{waited}");
    let stdout = ok(&cli(&s, &h, &["read", "box:echoer", "--stream", "stdout"]).await);
    assert_eq!(stdout, "got-hello\ngot-again\n");

    // A terminal program: its screen is kept on the remote host.
    let py = id_of(&ok(&cli(
        &s,
        &h,
        &["--host", "box", "start", "--pty", "--name", "py", "--", "python3", "-q"],
    )
    .await));
    let ran = ok(&cli(&s, &h, &["run", "box:py", "--", "print(6*7)"]).await);
    assert!(ran.contains("42"), "{ran}");
    let screen = ok(&cli(&s, &h, &["screen", &format!("box:{py}")]).await);
    assert!(screen.contains(">>> print(6*7)") && screen.contains("42"), "{screen}");

    // Listed with their host beside this machine's.
    ok(&cli(&s, &h, &["start", "--name", "here", "--", "sleep", "600"]).await);
    let both = ok(&cli(&s, &h, &["ps", "--all-hosts", "--json"]).await);
    let rows: Value = serde_json::from_str(&both).unwrap();
    let hosts_of = |name: &str| -> Vec<String> {
        rows.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["name"] == name)
            .map(|r| r["host"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(hosts_of("here"), ["local"], "{both}");
    assert_eq!(hosts_of("echoer"), ["box"], "{both}");
    assert_eq!(hosts_of("py"), ["box"], "{both}");
    let table = ok(&cli(&s, &h, &["ps", "--all-hosts"]).await);
    assert!(table.starts_with("HOST"), "{table}");

    // No --cwd: the remote user's home, not this directory (which the
    // other machine may not have); a relative one is refused.
    let pwd = ok(&cli(&s, &h, &["--host", "box", "start", "--wait", "exit", "--", "pwd"]).await);
    let passwd =
        std::process::Command::new("getent").args(["passwd", &sshd.user]).output().unwrap();
    let home = String::from_utf8_lossy(&passwd.stdout).split(':').nth(5).unwrap().to_owned();
    assert!(pwd.lines().any(|l| l == home), "{pwd}");
    let out = cli(&s, &h, &["--host", "box", "start", "--cwd", "rel", "--", "pwd"]).await;
    assert!(text(&out).contains("absolute directory on host box"), "{}", text(&out));
    // Errors from there say so, and their hints work as written.
    let out = cli(&s, &h, &["read", "box:999"]).await;
    let said = text(&out);
    assert!(
        said.contains("(on host box)") && said.contains("portal-cli --host box ps --all"),
        "{said}"
    );
    let out = cli(&s, &h, &["--host", "box", "daemon", "stop"]).await;
    let said = text(&out);
    assert!(
        said.contains(&format!("-p {} {}@127.0.0.1 '{CLI} daemon stop'", sshd.port, sshd.user)),
        "{said}"
    );

    ok(&cli(&s, &h, &["kill", "box:echoer"]).await);
    let inspect = ok(&cli(&s, &h, &["--host", "box", "inspect", "echoer", "--json"]).await);
    let inspect: Value = serde_json::from_str(&inspect).unwrap();
    assert_ne!(inspect["status"], "running", "{inspect}");
    // A URL reaches the same daemon as the name.
    let by_url = ok(&cli(&s, &h, &["--host", &sshd.url(), "ps"]).await);
    assert!(by_url.contains("py"), "{by_url}");
    local.stop().await;
}

#[tokio::test]
async fn a_dropped_ssh_connection_mid_wait_is_a_retryable_error_and_the_program_lives() {
    let Some(sshd) = setup().await else { return };
    let local = TestDaemon::start().await;
    let (s, h) = (local.socket(), sshd.box_only.clone());
    let id = id_of(&ok(&cli(
        &s,
        &h,
        &["--host", "box", "start", "--", "sh", "-c", "while read l; do echo got-$l; done"],
    )
    .await));
    let target = format!("box:{id}");
    // `run` types its input, then waits: once the program has printed
    // what the input makes it print, the wait is in flight. (The remote
    // daemon is on this machine: the test watches it directly.)
    let remote = Client::connect(&sshd.remote_socket).await.unwrap();
    let waiting = command(
        &s,
        &h,
        &["run", &target, "--match", "never-printed", "--timeout", "40s", "--", "go"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let cli_pid = waiting.id().unwrap();
    wait_for_text(&mut remote.rpc(), id.parse().unwrap(), pb::Stream::Stdout, "got-go\n").await;
    let ssh_pid = wait_until("the run's ssh", async || child_named(cli_pid, "ssh")).await;
    let _ = std::process::Command::new("kill").args(["-9", &ssh_pid.to_string()]).status();
    let out = bounded("the wait to end", waiting.wait_with_output()).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("lost the connection to host box") && said.contains("run the command again"),
        "{said}"
    );
    // Nothing was lost: the program runs, and answers.
    let ran = ok(&cli(&s, &h, &["run", &target, "--", "still-here"]).await);
    assert!(ran.contains("got-still-here"), "{ran}");

    // A follower whose ssh is killed connects again by itself and goes on
    // exactly where it was: each line once, none missed.
    let said_path = local.dir.path().join("follower.stderr");
    let mut follower = command(&s, &h, &["read", "-f", &target, "--stream", "stdout"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&said_path).unwrap())
        .spawn()
        .unwrap();
    let follower_pid = follower.id().unwrap();
    let mut lines = tokio::io::BufReader::new(follower.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut until = async |want: &str, seen: &mut Vec<String>| {
        bounded(&format!("the follower to print {want}"), async {
            while let Some(l) = lines.next_line().await.unwrap() {
                let done = l == want;
                seen.push(l);
                if done {
                    return;
                }
            }
            let said = std::fs::read_to_string(&said_path).unwrap_or_default();
            panic!("the follower ended before {want}; it said: {said}");
        })
        .await;
    };
    until("got-still-here", &mut seen).await;
    let ssh = wait_until("the follower's ssh", async || child_named(follower_pid, "ssh")).await;
    let _ = std::process::Command::new("kill").args(["-9", &ssh.to_string()]).status();
    ok(&cli(&s, &h, &["write", &target, "after", "--enter"]).await);
    until("got-after", &mut seen).await;
    assert_eq!(seen, ["got-go", "got-still-here", "got-after"], "each line once");
    ok(&cli(&s, &h, &["kill", &target]).await);
    bounded("the follower to end", follower.wait()).await.unwrap();
    let said = std::fs::read_to_string(&said_path).unwrap();
    assert!(said.contains("the connection to host box broke; trying again"), "{said}");
    drop(remote);
    local.stop().await;
}

/// The first child of `parent` whose command name is `name`.
fn child_named(parent: u32, name: &str) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    children.split_whitespace().filter_map(|p| p.parse().ok()).find(|p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == name)
    })
}

#[tokio::test]
async fn each_way_of_failing_to_reach_a_host_has_its_message_and_exit_code() {
    let Some(sshd) = setup().await else { return };
    let local = TestDaemon::start().await;
    let (s, h) = (local.socket(), sshd.hosts_file.clone());
    for (host, code, says) in [
        ("down", 4, "cannot reach host down"),
        ("nokey", 5, "host nokey refused the login"),
        ("missing", 6, "portal-cli is not installed on host missing"),
        ("old", 7, "upgrade Portal on this machine"),
    ] {
        let out = cli(&s, &h, &["--host", host, "ps"]).await;
        let said = text(&out);
        assert_eq!(out.status.code(), Some(code), "{host}: {said}");
        assert!(said.contains(says), "{host}: {said}");
    }
    // A shared connection set up in the user's ssh configuration is used
    // as it is: the first command logs in, the next rides on its master.
    let before = sshd.logins();
    ok(&cli(&s, &h, &["--host", "mux", "ps"]).await);
    assert_eq!(sshd.logins(), before + 1, "the first command logged in");
    let listed = ok(&cli(&s, &h, &["--host", "mux", "ps", "--all"]).await);
    assert!(listed.contains("No") || listed.contains("ID"), "{listed}");
    assert_eq!(sshd.logins(), before + 1, "the second rode on the first's connection");
    // `HOST:` before a process with a host nobody named; a name that would
    // read as one.
    let out = cli(&s, &h, &["read", "nowhere:1"]).await;
    assert!(text(&out).contains("unknown host \"nowhere\""), "{}", text(&out));
    let out = cli(&s, &h, &["start", "--name", "box:x", "--", "true"]).await;
    assert!(text(&out).contains("reads as HOST:NAME"), "{}", text(&out));
    let out = cli(&s, &h, &["--host", "nowhere", "ps"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("unknown host \"nowhere\""), "{}", text(&out));
    // Every host at once: the ones that fail are said, the rest listed.
    let out = cli(&s, &h, &["ps", "--all-hosts"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("cannot reach host down") && said.contains("host old runs"), "{said}");
    assert!(
        said.contains("ID") || said.contains("No managed processes"),
        "the rest listed: {said}"
    );
    local.stop().await;
}
