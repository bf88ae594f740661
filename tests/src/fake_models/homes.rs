//! Starting the real CLIs: where `npm ci --prefix tests/agents` put them,
//! and the private-HOME recipes that start Claude Code and Codex against a
//! fake server ready for input (no onboarding, login, trust dialogs,
//! update checks or telemetry).

use std::io;
use std::path::{Path, PathBuf};

use serde_json::json;

/// The CLIs installed by `npm ci --prefix tests/agents`.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// Claude Code's native binary.
    pub claude: Option<PathBuf>,
    /// Codex's launcher (`node_modules/.bin/codex`, a node script: on Node
    /// 20 it stays the parent of the native binary, in the same process
    /// group, forwarding SIGINT/SIGTERM/SIGHUP; on Node ≥ 22.15 it execs it).
    pub codex: Option<PathBuf>,
    /// Codex's native binary, to run without the node launcher.
    pub codex_native: Option<PathBuf>,
    /// Why something is missing, for a skip message; empty when all are there.
    pub missing: String,
}

/// The `tests/agents` directory.
#[must_use]
pub fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents")
}

/// Finds the installed CLIs under `tests/agents/node_modules`; what is
/// missing is `None`, with the reason and the fix in `missing`.
#[must_use]
pub fn installed() -> Installed {
    let modules = agents_dir().join("node_modules");
    let first = |candidates: &[PathBuf]| candidates.iter().find(|p| p.is_file()).cloned();
    let claude = first(&[
        // The platform package's binary is there even when npm ran no
        // install scripts; the postinstall copies it over bin/claude.exe.
        modules.join("@anthropic-ai/claude-code-linux-x64/claude"),
        modules.join("@anthropic-ai/claude-code-linux-arm64/claude"),
        modules.join("@anthropic-ai/claude-code/bin/claude.exe"),
    ]);
    let codex = first(&[modules.join(".bin/codex")]);
    let codex_native = first(&[
        modules.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
        modules.join("@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex"),
    ]);
    let mut missing = Vec::new();
    if claude.is_none() {
        missing.push("Claude Code");
    }
    if codex.is_none() || codex_native.is_none() {
        missing.push("Codex");
    }
    let missing = if missing.is_empty() {
        String::new()
    } else {
        format!(
            "{} not installed under {}: run `npm ci --prefix tests/agents`",
            missing.join(" and "),
            modules.display()
        )
    };
    Installed { claude, codex, codex_native, missing }
}

fn write_file(path: &Path, text: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

/// The API key the fake servers are given (they accept any).
pub const FAKE_API_KEY: &str = "sk-ant-fake-portal-test-key-0123456789";

/// Prepares `home` (a private temp dir) for Claude Code working in `cwd`
/// against `base_url` ([`FakeModel::base_url`](super::FakeModel::base_url))
/// and returns the environment to start it with (`HOME` included). Writes
/// `home/.claude.json` (onboarding done, the key approved, `cwd` trusted)
/// and `home/.claude/settings.json`.
///
/// # Errors
/// When the files cannot be written.
pub fn claude_home(home: &Path, cwd: &Path, base_url: &str) -> io::Result<Vec<(String, String)>> {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    // Claude Code remembers an approved key by its last 20 characters.
    let key_tail = &FAKE_API_KEY[FAKE_API_KEY.len() - 20..];
    let state = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "hasSeenAutoDefaultNotice": true,
        "hasSeenAutoDefaultNudge": true,
        "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
        "projects": {cwd.display().to_string(): {
            "hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true,
            "allowedTools": [],
        }},
    });
    write_file(&home.join(".claude.json"), &format!("{state:#}\n"))?;
    // Auto mode (a model classifier decides) became the default in 2.1.x;
    // tests want the permission dialog of the classic default mode.
    let settings = json!({"permissions": {"defaultMode": "default"}});
    write_file(&home.join(".claude/settings.json"), &format!("{settings:#}\n"))?;
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let env = [
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", base_url.to_owned()),
        ("ANTHROPIC_API_KEY", FAKE_API_KEY.to_owned()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_ERROR_REPORTING", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        // Else it tries to fetch the plugin marketplace from the network.
        ("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL", "1".into()),
        // Else it keeps per-project state in /tmp/claude-<uid>, shared by tests.
        ("CLAUDE_CODE_TMPDIR", tmp.display().to_string()),
        ("TERM", "xterm-256color".into()),
    ];
    Ok(env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Prepares `home` for Codex working in `cwd` against `base_url`
/// ([`FakeModel::base_url`](super::FakeModel::base_url)) and returns the
/// environment to start it with (`HOME` and `CODEX_HOME` included). Writes
/// `home/.codex/config.toml`: a `fake` provider on the Responses API, `cwd`
/// trusted, no update check.
///
/// # Errors
/// When the file cannot be written.
pub fn codex_home(home: &Path, cwd: &Path, base_url: &str) -> io::Result<Vec<(String, String)>> {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let codex_home = home.join(".codex");
    let config = format!(
        r#"model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects."{cwd}"]
trust_level = "trusted"

[features]
# Else the TUI starts `codex app-server` daemons in their own sessions that
# outlive it, make the model requests and run the hooks (with the
# environment of the first TUI that started them).
daemon_auto_start = false

[tui]
screen_reader_detection_done = true

# Past its limit the model announcement is not counted up again, so Codex
# does not rewrite this file at every start.
[tui.model_availability_nux]
"gpt-6.1-sol" = 100
"#,
        cwd = cwd.display()
    );
    write_file(&codex_home.join("config.toml"), &config)?;
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let env = [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("FAKE_OPENAI_API_KEY", "sk-fake-portal-test".to_owned()),
        // Else its sandbox and daemon leave directories in /tmp.
        ("TMPDIR", tmp.display().to_string()),
        ("TERM", "xterm-256color".into()),
    ];
    Ok(env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}
