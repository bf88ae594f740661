//! Load: 50 clients at once — raw gRPC, `portal-cli` processes and MCP shims
//! — start, write, run, read, wait, kill and clean up, while all of them
//! write whole lines into one shared `cat`. Every call must be answered
//! within the bound, and no write may be interleaved with another.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_tests::*;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const GRPC_CLIENTS: usize = 30;
const CLI_CLIENTS: usize = 10;
const SHIM_CLIENTS: usize = 10;
/// Writes each client makes into the shared `cat`.
const WRITES: usize = 3;
/// Bytes of each write: far more than a pipe's atomic write (4 KiB), so a
/// daemon that split or interleaved writes would be caught.
const LINE_BYTES: usize = 24 << 10;

/// One line: a tag naming the client and write, then one repeated letter.
fn line(kind: char, client: usize, k: usize) -> String {
    let fill = char::from(b'a' + u8::try_from(client % 26).unwrap());
    let tag = format!("{kind}{client:02}w{k}:");
    format!("{tag}{}\n", fill.to_string().repeat(LINE_BYTES - tag.len() - 1))
}

async fn grpc_client(socket: PathBuf, shared: u64, i: usize) {
    let client = Client::connect(&socket).await.unwrap();
    let mut rpc = client.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "while read l; do echo \"re:$l\"; done"]).await;
    for k in 0..WRITES {
        let req = pb::WriteRequest {
            proc: by_id(shared),
            data: line('g', i, k).into_bytes().into(),
            secret: false,
        };
        rpc.write(req).await.unwrap();
    }
    let needle = format!("re:hello-{i}");
    let r = rpc
        .run(pb::RunRequest {
            proc: by_id(p.id),
            input: format!("hello-{i}"),
            until: Some(pb::WaitCondition { needle, ..Default::default() }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.reason(), pb::WaitReason::Matched, "client {i}: {r:?}");
    rpc.list(pb::ListRequest {}).await.unwrap();
    rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap();
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await.unwrap();
}

async fn cli(socket: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = tokio::process::Command::new(sibling_binary("portal-cli"));
    cmd.args(args)
        .env("PORTAL_SOCKET", socket)
        .env("PORTAL_NO_AUTOSTART", "1")
        .env("NO_COLOR", "1")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use tokio::io::AsyncWriteExt;
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "portal-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

async fn cli_client(socket: PathBuf, shared: u64, i: usize) {
    let name = format!("cli-{i}");
    cli(&socket, &["start", "--name", &name, "--", "cat"], None).await;
    let shared = shared.to_string();
    for k in 0..WRITES {
        cli(&socket, &["write", &shared, "--stdin"], Some(&line('c', i, k))).await;
    }
    let out = cli(
        &socket,
        &["run", &name, "--match", &format!("ping-{i}"), "--", &format!("ping-{i}")],
        None,
    )
    .await;
    assert!(out.contains(&format!("ping-{i}")), "{out}");
    let ps: Value = serde_json::from_str(&cli(&socket, &["ps", "--json"], None).await).unwrap();
    assert!(ps.as_array().is_some_and(|a| !a.is_empty()));
    cli(&socket, &["kill", &name], None).await;
    cli(&socket, &["rm", &name], None).await;
}

type Mcp = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn tool(mcp: &Mcp, name: &str, args: Value) -> Value {
    let Value::Object(args) = args else { unreachable!("arguments are objects") };
    let r = mcp
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{name}: {:?}", r.content);
    r.structured_content.unwrap_or(Value::Null)
}

async fn shim_client(socket: PathBuf, data: PathBuf, shared: u64, i: usize) {
    let mut child = tokio::process::Command::new(sibling_binary("portal-shim"))
        .env("PORTAL_SOCKET", &socket)
        .env("PORTAL_DATA_DIR", &data)
        .env("PORTAL_DAEMON", sibling_binary("portald"))
        .env("PORTAL_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let mcp = ().serve(transport).await.unwrap();
    let p = tool(&mcp, "process_start", json!({"command": "cat", "pty": true})).await;
    let id = p["process"]["id"].as_u64().unwrap();
    for k in 0..WRITES {
        tool(&mcp, "process_write", json!({"id": shared, "content": line('s', i, k)})).await;
    }
    let r = tool(
        &mcp,
        "process_run",
        json!({"id": id, "input": format!("mcp-{i}"), "pattern": format!("mcp-{i}")}),
    )
    .await;
    assert_eq!(r["reason"], "matched", "{r}");
    tool(&mcp, "process_read", json!({"id": id})).await;
    tool(&mcp, "process_kill", json!({"id": id})).await;
    tool(&mcp, "process_cleanup", json!({"id": id})).await;
    mcp.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_clients_at_once_are_all_answered_and_no_write_is_interleaved() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let shared = start_pipes(&mut rpc, "cat", &[]).await.id;
    let socket = d.socket();
    let data = d.dir.path().join("data");
    let mut clients = tokio::task::JoinSet::new();
    for i in 0..GRPC_CLIENTS {
        clients.spawn(grpc_client(socket.clone(), shared, i));
    }
    for i in 0..CLI_CLIENTS {
        clients.spawn(cli_client(socket.clone(), shared, i));
    }
    for i in 0..SHIM_CLIENTS {
        clients.spawn(shim_client(socket.clone(), data.clone(), shared, i));
    }
    // Three times the usual bound: 50 clients share two cores.
    let all = async {
        while let Some(r) = clients.join_next().await {
            r.unwrap();
        }
    };
    let clients_done = tokio::time::timeout(timeout() * 3, all).await;
    assert!(clients_done.is_ok(), "not every client was answered within {:?}", timeout() * 3);
    // Every write reached `cat` whole and in one piece, and came back out.
    let expected = (GRPC_CLIENTS + CLI_CLIENTS + SHIM_CLIENTS) * WRITES;
    rpc.close_stdin(pb::CloseStdinRequest { proc: by_id(shared) }).await.unwrap();
    wait_exit(&mut rpc, shared).await;
    for stream in [pb::Stream::Stdin, pb::Stream::Stdout] {
        let log = read_all(&mut rpc, shared, stream, pb::Encoding::Raw).await;
        let text = String::from_utf8(log).unwrap();
        let mut seen = BTreeSet::new();
        for l in text.lines() {
            let (tag, fill) = l.split_once(':').unwrap_or_else(|| panic!("untagged line {l:.40}"));
            let first = fill.chars().next().unwrap();
            assert!(fill.chars().all(|c| c == first), "write {tag} was interleaved");
            assert_eq!(l.len() + 1, LINE_BYTES, "write {tag} was cut");
            assert!(seen.insert(tag.to_owned()), "write {tag} appears twice");
        }
        assert_eq!(seen.len(), expected, "{stream:?} holds {} of {expected} writes", seen.len());
    }
    d.stop().await;
}
