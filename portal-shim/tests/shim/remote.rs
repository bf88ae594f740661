//! Tools that drive programs on another host over SSH (a real sshd on
//! loopback; skips without one outside CI).

use portal_tests::*;
use serde_json::{Value, json};

use crate::common::spawn_shim_with;

#[tokio::test]
async fn tools_drive_programs_on_another_host_over_ssh() {
    let Some(sshd) = portal_tests::sshd::sshd_or_skip(&sibling_binary("portal-cli")).await else {
        return;
    };
    let d = TestDaemon::start().await;
    let hosts = sshd.box_only.display().to_string();
    // Autostart on: the remote side starts its own portald (this one runs).
    let shim = spawn_shim_with(
        &d.socket(),
        &d.dir.path().join("data"),
        true,
        &[],
        &[("PORTAL_HOSTS_FILE", hosts.as_str())],
    )
    .await;
    let tools = bounded("tools/list", shim.client.list_all_tools()).await.unwrap();
    let arg = |tool: &str| {
        let t = tools.iter().find(|t| t.name == tool).unwrap();
        t.input_schema.get("properties").and_then(|p| p.get("host")).cloned()
    };
    let start_host = arg("process_start").expect("process_start takes a host");
    assert!(start_host["description"].as_str().unwrap().contains("local, box"), "{start_host}");
    assert!(arg("process_list").unwrap()["description"].as_str().unwrap().contains("\"all\""));
    assert!(arg("program_query").is_none(), "the registry is this machine's");

    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "name": "py", "host": "box", "wait": "input"}),
        )
        .await;
    let py = s["process"]["id"].as_u64().unwrap();
    assert_eq!(s["host"], json!("box"), "a remote result says where: {s}");
    let (text, s) =
        shim.ok("process_run", json!({"id": "py", "host": "box", "input": "print(6*7)"})).await;
    assert!(s["output"].as_str().unwrap().contains("42"), "{s}");
    assert!(text.starts_with("[host box] "), "{text}");
    // An id that is not there: the error names the host.
    let err = shim.err("process_inspect", json!({"id": py + 1000, "host": "box"})).await;
    assert!(err.contains("on host box") && err.contains("ids are per host"), "{err}");
    // A password prompt there: the hint a person runs names the host.
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "sh", "args": ["-c", "stty -echo; printf 'Password: '; read p; echo ok"], "pty": true, "host": "box", "wait": "input"}),
        )
        .await;
    let secret = s["process"]["id"].as_u64().unwrap();
    assert!(
        s.to_string().contains(&format!("`portal-cli secret box:{secret}`")),
        "the hint names the host: {s}"
    );
    // Started with no cwd: the remote user's home, not the shim's directory.
    let passwd =
        std::process::Command::new("getent").args(["passwd", &sshd.user]).output().unwrap();
    let home = String::from_utf8_lossy(&passwd.stdout).split(':').nth(5).unwrap().to_owned();
    assert_eq!(s["process"]["cwd"], json!(home), "{s}");
    shim.ok("process_start", json!({"command": "sleep", "args": ["600"], "name": "here"})).await;

    let (text, s) = shim.ok("process_list", json!({"host": "all"})).await;
    let host_of = |name: &str| -> Vec<Value> {
        s["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["name"] == name)
            .map(|p| p["host"].clone())
            .collect()
    };
    assert_eq!(host_of("py"), [json!("box")], "{text}");
    assert_eq!(host_of("here"), [json!("local")], "{text}");
    assert!(text.starts_with("HOST | ID"), "{text}");
    assert!(
        s.to_string().contains(&format!("`portal-cli secret box:{secret}`")),
        "every host's hints name it: {s}"
    );
    // An agent may not send the shim's ssh anywhere it was not given.
    let err = shim.err("process_list", json!({"host": sshd.url()})).await;
    assert!(err.contains("only hosts the hosts file names"), "{err}");
    let (_, s) = shim.ok("process_list", json!({})).await;
    assert!(!s.to_string().contains("\"py\""), "the default host is this machine: {s}");

    // HOST:NAME as an id, as a person writes it.
    let (_, s) = shim.ok("process_inspect", json!({"id": "box:py"})).await;
    assert_eq!((s["process"]["id"].as_u64(), &s["host"]), (Some(py), &json!("box")), "{s}");
    // A name on another host, asked for here: the error says ids are per host.
    let err = shim.err("process_inspect", json!({"id": "py"})).await;
    assert!(err.contains("pass the `host`"), "{err}");
    let err = shim.err("process_list", json!({"host": "nowhere"})).await;
    assert!(err.contains("unknown host \"nowhere\"") && err.contains("local, box"), "{err}");
    let err = shim.err("program_query", json!({"program": "psql", "host": "box"})).await;
    assert!(err.contains("takes no host"), "{err}");
    let (_, s) = shim.ok("process_kill", json!({"id": "py", "host": "box"})).await;
    assert_eq!(s["process"]["status"], json!("killed"), "{s}");
    d.stop().await;
}
