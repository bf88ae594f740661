//! The agent tools: list, wait, send and watch, and a wait on a program that
//! is no agent.

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::json;

use crate::common::{repl, with_daemon};

#[tokio::test]
async fn agent_tools_list_wait_and_send() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let script = "printf '\\033]3008;portal=1;state=done;name=fake\\033\\\\'; stty raw -echo; cat > /dev/null";
    let (_, s) = shim
        .ok("process_start", json!({"command": "sh", "args": ["-c", script], "pty": true}))
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    let (_, s) =
        shim.ok("agent_wait", json!({"ids": [id], "states": ["done"], "timeout_ms": 8000})).await;
    assert_eq!(s["results"][0]["outcome"], json!("reached"));
    let (text, s) = shim.ok("agent_list", json!({})).await;
    assert_eq!(s["summary"], json!("done:1"));
    assert!(text.contains("fake done (osc)"), "{text}");
    let (_, s) = shim.ok("agent_send", json!({"ids": [id], "text": "next task", "key": "k"})).await;
    assert_eq!(
        (s["results"][0]["sent"].clone(), s["results"][0]["deduplicated"].clone()),
        (json!(true), json!(false))
    );
    let (_, s) = shim.ok("agent_send", json!({"ids": [id], "text": "next task", "key": "k"})).await;
    assert_eq!(s["results"][0]["deduplicated"], json!(true));
    wait_for_text(&mut rpc, id, pb::Stream::Stdin, "next task\r").await;
    let (_, s) =
        shim.ok("agent_watch", json!({"cursor": 0, "ids": [id], "timeout_ms": 2000})).await;
    assert!(!s["changes"].as_array().unwrap().is_empty());
    let e = shim.err("agent_wait", json!({"ids": [9999]})).await;
    assert!(e.contains("no process with id 9999"), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn agent_wait_on_a_program_that_is_no_agent_says_so_at_once() {
    let (d, shim) = with_daemon().await;
    let id = repl(&shim, "py").await;
    shim.ok("process_write", json!({"id": id, "content": "import time; time.sleep(600)\r"})).await;
    let began = std::time::Instant::now();
    let (text, s) = shim.ok("agent_wait", json!({"ids": ["py"], "timeout_ms": 30000})).await;
    let r = &s["results"][0];
    assert_eq!(r["outcome"], json!("not_an_agent"), "{s}");
    assert!(r["detail"].as_str().unwrap().contains("process_wait"), "{s}");
    assert!(text.contains("not_an_agent") && text.contains("process_wait"), "{text}");
    // Long before its timeout: at most the grace a program that just
    // started gets to announce itself as an agent.
    assert!(began.elapsed() < std::time::Duration::from_secs(10), "{:?}", began.elapsed());
    d.stop().await;
}
