//! What Portal keeps of programs' output: `export` (recordings asciinema
//! plays, transcripts, windows of time), `grep` across processes and
//! restarts, and `daemon doctor` salvaging a damaged database.

use std::path::{Path, PathBuf};

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

use crate::common::{cli, cli_env, id_of, ok, stdout};

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
