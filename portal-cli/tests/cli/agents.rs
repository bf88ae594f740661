//! Agents: `agents` with its waits and sends, the in-band `emit` fallback,
//! `hooks` for Claude Code and Codex, and `agents --notify`.

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

use crate::common::{CLI, cli, cli_env, ok, stdout};

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
    let script =
        "printf '\\033]3008;portal=1;state=done;name=cc\\033\\\\'; read x; echo got $x; read y";
    let cc = Start::pty("sh").args(["-c", script]).name("cc").run(&mut rpc).await;
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
