//! What the CLI tells people about itself: the `--socket` flag and the
//! variables `--help` and the man page name, completions, man pages and
//! versions.

use std::path::PathBuf;

use portal_tests::*;
use serde_json::Value;

use crate::common::{CLI, cli, cli_env, id_of, ok, stdout};

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
