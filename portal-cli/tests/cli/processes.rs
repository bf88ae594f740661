//! Starting programs and seeing them: `start` in the caller's environment,
//! the round trip of `start`, `ps`, `read`, `write`, `screen`, `kill` and
//! `rm`, `read -f` exactly once, `--json`, and `ps` on the terminal it
//! prints to.

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

use crate::common::{CLI, cli, cli_env, id_of, ok};

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
    assert_eq!(ps[0]["pty"], true);
    let inspect: Value =
        serde_json::from_str(&ok(&cli(&s, &["inspect", &id, "--json"]).await)).unwrap();
    assert_eq!(inspect["status"], "running");
    assert_eq!(inspect["rows"], 10);
    // A fact has one name wherever it is read: every field of the view the
    // MCP shim's results carry is in the CLI's `--json`, with its value.
    let now = rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
    let view = serde_json::to_value(portal_client::view::ProcessView::of(&now, None)).unwrap();
    for (field, value) in view.as_object().unwrap() {
        if field != "inactive_ms" {
            assert_eq!(&inspect[field], value, "{field} in {inspect}");
        }
    }
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
async fn ps_fits_the_terminal_it_prints_to() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let long = "x".repeat(150);
    start_pipes(&mut rpc, "sh", &["-c", &format!("sleep 60 # {long}")]).await;
    // The CLI on terminals Portal owns, narrow and wide: its rows never
    // wrap, and on the wide one the command shows as far as it fits.
    for cols in [110u32, 200] {
        let ps = Start::pty(CLI)
            .args(["ps"])
            .size(10, cols)
            .env("PORTAL_SOCKET", s.to_string_lossy())
            .env("PORTAL_NO_AUTOSTART", "1")
            .env("NO_COLOR", "1")
            .run(&mut rpc)
            .await;
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
