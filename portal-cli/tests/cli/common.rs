//! What every test of the CLI shares: the binary, running it against a
//! daemon's socket, and what it printed.

use std::path::Path;
use std::process::Output;

use portal_tests::bounded;

pub(crate) const CLI: &str = env!("CARGO_BIN_EXE_portal-cli");

pub(crate) async fn cli(socket: &Path, args: &[&str]) -> Output {
    cli_env(socket, args, &[]).await
}

pub(crate) async fn cli_env(socket: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
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

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed ({:?}): {}\n{}",
        o.status,
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(o)
}

pub(crate) fn id_of(started: &str) -> u64 {
    started
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no id in {started:?}"))
}
