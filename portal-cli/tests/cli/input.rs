//! Typing into programs and waiting on them: `attach` driven through a PTY
//! (the daemon itself runs the CLI on a terminal), `wait`, `run` and
//! `send-keys`, `secret`, who typed what, and waits on several processes.

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

use crate::common::{CLI, cli, id_of, ok, stdout};

#[tokio::test]
async fn attach_types_into_the_program_and_detaches_leaving_it_running() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let target = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    write(&mut rpc, target.id, b"earlier\r").await;
    wait_for_text(&mut rpc, target.id, pb::Stream::Stdout, "earlier\r\nearlier\r\n").await;
    // Run the CLI itself on a PTY that Portal owns, 30x100.
    let viewer = Start::pty(CLI)
        .args(["attach", &target.id.to_string()])
        .size(30, 100)
        .env("PORTAL_SOCKET", s.to_string_lossy())
        .env("PORTAL_NO_AUTOSTART", "1")
        .run(&mut rpc)
        .await;
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
    let expected = match portal_client::user::name() {
        Some(name) => format!("[portal-cli write ({name}@"),
        None => format!("[portal-cli write (uid {}@", portal_client::user::current()),
    };
    assert!(who.lines().any(|l| l.starts_with(&expected) && l.ends_with("] typed")), "{who}");
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
