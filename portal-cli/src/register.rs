//! Registering portal-shim with the MCP clients that have a command line for
//! it, for `install`: Claude Code (`claude mcp add -s user`, so every project
//! sees it, not only the directory it was added from) and Codex (`codex mcp
//! add`, with the socket and data directory in the server's `env`, because
//! Codex passes an MCP server only a few variables of its own environment and
//! a shim without `XDG_RUNTIME_DIR` would start a daemon of its own).
//!
//! Without `--register` the commands are printed. With it they are run for
//! the clients found on `PATH`, each with its own time bound, and what each
//! did is said; a client not on `PATH` gets its command printed. An entry a
//! client already has is never replaced: the commands that would replace it
//! are printed instead, so a person's own arguments (`--tier`, `--tools`)
//! and settings (Codex's approval mode) survive a second install.

use std::path::{Path, PathBuf};
use std::time::Duration;

use portal_client::hosts::shell_quote;

/// The name Portal is registered under in every client.
const SERVER_NAME: &str = "portal";

/// How long one client command may take. `claude` is a 400 MB binary whose
/// first start from a cold disk takes seconds; a minute still ends an
/// install whose client waits for something that never comes (a login).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `install` runs the client commands or only prints them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Register {
    /// Print what to run.
    Print,
    /// Run it for the clients on `PATH`, print it for the others.
    Perform,
}

/// An MCP client with a command line that registers servers.
#[derive(Clone, Copy)]
enum McpClient {
    ClaudeCode,
    Codex,
}

impl McpClient {
    const ALL: [Self; 2] = [Self::ClaudeCode, Self::Codex];

    fn name(self) -> &'static str {
        match self {
            Self::ClaudeCode => "Claude Code",
            Self::Codex => "Codex",
        }
    }

    fn program(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude",
            Self::Codex => "codex",
        }
    }

    /// The arguments that register `shim`.
    fn add_args(self, shim: &Path) -> Vec<String> {
        let shim = shim.display().to_string();
        match self {
            Self::ClaudeCode => ["mcp", "add", "-s", "user", SERVER_NAME, "--"]
                .into_iter()
                .map(String::from)
                .chain([shim])
                .collect(),
            Self::Codex => vec![
                "mcp".into(),
                "add".into(),
                SERVER_NAME.into(),
                "--env".into(),
                format!(
                    "{}={}",
                    portal_client::paths::ENV_SOCKET,
                    portal_client::paths::socket_path().display()
                ),
                "--env".into(),
                format!(
                    "{}={}",
                    portal_client::paths::ENV_DATA_DIR,
                    portal_client::paths::data_dir().display()
                ),
                "--".into(),
                shim,
            ],
        }
    }

    /// The command that removes an entry of the same name.
    fn remove_line(self) -> String {
        match self {
            Self::ClaudeCode => format!("claude mcp remove -s user {SERVER_NAME}"),
            Self::Codex => format!("codex mcp remove {SERVER_NAME}"),
        }
    }

    /// The command its entry named `portal` runs, if it has one; `None` also
    /// when that cannot be told without starting the server (Claude Code's
    /// `mcp get` checks its health).
    async fn current_command(self, program: &Path) -> Option<String> {
        match self {
            Self::ClaudeCode => {
                let text = std::fs::read_to_string(claude_user_config()?).ok()?;
                let config: serde_json::Value = serde_json::from_str(&text).ok()?;
                Some(config["mcpServers"][SERVER_NAME]["command"].as_str()?.to_owned())
            }
            Self::Codex => {
                let args = ["mcp", "get", SERVER_NAME, "--json"].map(String::from);
                let out = run(program, &args).await.ok()?;
                if !out.status.success() {
                    return None;
                }
                let entry: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
                Some(entry["transport"]["command"].as_str()?.to_owned())
            }
        }
    }
}

/// Claude Code's user configuration (`~/.claude.json`, or in
/// `CLAUDE_CONFIG_DIR`), where user-scope MCP servers live.
fn claude_user_config() -> Option<PathBuf> {
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()))?;
    Some(PathBuf::from(dir).join(".claude.json"))
}

/// Codex's configuration file (`$CODEX_HOME/config.toml`, else
/// `~/.codex/config.toml`), for the approval hint.
fn codex_config() -> String {
    match std::env::var_os("CODEX_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("config.toml").display().to_string(),
        None => "~/.codex/config.toml".to_owned(),
    }
}

/// A command line a person can paste.
fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

async fn run(program: &Path, args: &[String]) -> std::io::Result<std::process::Output> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(CLIENT_TIMEOUT, out).await.unwrap_or_else(|_| {
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {}s", CLIENT_TIMEOUT.as_secs()),
        ))
    })
}

/// Prints or performs the registration of `shim` with every client.
pub(crate) async fn register(shim: &Path, mode: Register) {
    for client in McpClient::ALL {
        let args = client.add_args(shim);
        let line = command_line(client.program(), &args);
        let scope = match client {
            McpClient::ClaudeCode => " (every project)",
            McpClient::Codex => "",
        };
        match (mode, portal_client::paths::find_on_path(client.program())) {
            (Register::Print, _) => outln!("to use Portal from {}{scope}: {line}", client.name()),
            (Register::Perform, None) => outln!(
                "{} ({}) is not on your PATH; to use Portal from it: {line}",
                client.name(),
                client.program()
            ),
            (Register::Perform, Some(program)) => perform(client, &program, &args, &line).await,
        }
        if let McpClient::Codex = client {
            outln!(
                "  `codex exec` refuses every Portal tool that is not read-only until `default_tools_approval_mode = \"approve\"` is under [mcp_servers.{SERVER_NAME}] in {}",
                codex_config()
            );
        }
    }
    if mode == Register::Print {
        outln!("(`portal-cli install --register` runs these for the clients on your PATH)");
    }
}

async fn perform(client: McpClient, program: &Path, args: &[String], line: &str) {
    let name = client.name();
    let shim = args.last().map(String::as_str).unwrap_or_default();
    match client.current_command(program).await {
        Some(current) if current == shim => {
            outln!("{name} already runs {shim} as its MCP server {SERVER_NAME}");
            return;
        }
        Some(current) => {
            outln!(
                "{name} already has an MCP server named {SERVER_NAME} (it runs {current}); to point it at this install: {} && {line}",
                client.remove_line()
            );
            return;
        }
        None => {}
    }
    match run(program, args).await {
        Ok(out) if out.status.success() => match client {
            McpClient::ClaudeCode => {
                outln!("registered Portal with {name} for every project: {line}");
            }
            McpClient::Codex => outln!("registered Portal with {name}: {line}"),
        },
        Ok(out) => {
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let said = said.trim();
            if said.contains("already exists") {
                outln!(
                    "{name} already has an MCP server named {SERVER_NAME}; to point it at this install: {} && {line}",
                    client.remove_line()
                );
            } else {
                outln!("registering Portal with {name} failed ({}): {said}", out.status);
                outln!("  run it yourself: {line}");
            }
        }
        Err(e) => {
            outln!("registering Portal with {name} failed: {e}");
            outln!("  run it yourself: {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_quote_what_a_shell_would_split() {
        let args = McpClient::ClaudeCode.add_args(Path::new("/opt/my tools/bin/portal-shim"));
        assert_eq!(
            command_line("claude", &args),
            "claude mcp add -s user portal -- '/opt/my tools/bin/portal-shim'"
        );
    }
}
