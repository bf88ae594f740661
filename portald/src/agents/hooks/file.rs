//! What every agent's hooks file shares: the actions and their report,
//! the errors, Portal's handlers and its hook command, the [`HookFile`]
//! trait each format implements, and carrying an action out on a file
//! (status by meaning, atomic writes, dry runs).

use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;

use portal_client::vocab::{AgentState, HookStatus, HookTrust};

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HookAction {
    /// Only say what the file holds; change nothing.
    Status,
    /// Add Portal's handlers (replacing older ones of Portal's).
    Install,
    /// Remove Portal's handlers, and nothing else.
    Uninstall,
}

/// One agent's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    /// claude or codex.
    pub(crate) agent: &'static str,
    /// The file.
    pub(crate) path: PathBuf,
    /// Whether Portal's hooks are there, and current.
    pub(crate) status: HookStatus,
    /// What changed.
    pub(crate) change: String,
    /// What the user still has to do.
    pub(crate) note: String,
    /// Codex: whether it trusts Portal's installed hooks; `None` for an
    /// agent that runs hooks without asking, or with none of Portal's.
    pub(crate) trust: Option<HookTrust>,
    /// The file as it would be (dry run).
    pub(crate) preview: String,
}

/// A hooks file that cannot be edited safely.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError {
    /// It does not parse; it is left alone.
    #[error("{} is not valid {kind}: {reason}; fix it by hand, Portal will not overwrite it", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// JSON or TOML.
        kind: &'static str,
        /// Where and why.
        reason: String,
    },
    /// Reading or writing failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The file.
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One of Portal's hook handlers: what it means, whatever the layout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Handler {
    /// The agent's event name.
    pub(super) event: String,
    /// The group's matcher, if any.
    pub(super) matcher: Option<String>,
    /// The command it runs.
    pub(super) command: String,
}

/// `installed` when the file holds exactly Portal's handlers (in any order
/// or layout), `outdated` when it holds others of Portal's, else `absent`
/// (or `not_detected` when the agent's directory does not exist).
fn status(found: &[Handler], wanted: &[Handler], detected: bool) -> HookStatus {
    let sorted = |h: &[Handler]| {
        let mut v = h.to_vec();
        v.sort();
        v
    };
    if found.is_empty() {
        if detected { HookStatus::Absent } else { HookStatus::NotDetected }
    } else if sorted(found) == sorted(wanted) {
        HookStatus::Installed
    } else {
        HookStatus::Outdated
    }
}

/// The path as one word of a POSIX shell command (the agents run hook
/// commands through `sh -c`).
fn quote(path: &Path) -> String {
    shell_words::quote(&path.to_string_lossy()).into_owned()
}

/// The hook command for one event.
pub(super) fn command(
    emitter: &Path,
    agent: &str,
    state: AgentState,
    event: &str,
    reason: Option<&str>,
) -> String {
    let mut c = format!("{} emit {state} --name {agent} --event {event}", quote(emitter));
    if let Some(r) = reason {
        let _ = write!(c, " --reason {r}");
    }
    c
}

/// Whether a hook command is one of Portal's.
pub(super) fn is_portal_command(c: &str) -> bool {
    c.contains("portal-cli") && c.contains(" emit ")
}

/// One agent's hooks file: where it lives, and how Portal's handlers are
/// found, removed and added in its format.
pub(super) trait HookFile {
    /// The agent's name in reports and in the hook command.
    const AGENT: &'static str;
    /// The agent's directory under the home; it exists once the agent ran.
    const DIR: &'static str;
    /// The hooks file in that directory.
    const FILE: &'static str;
    /// The file's language, named in the error when it does not parse.
    const KIND: &'static str;

    /// Portal's handlers as they should be.
    fn wanted(emitter: &Path) -> Vec<Handler>;

    /// Reads the file's `text` (empty when there is none) at `path`, and
    /// edits it both ways. The error says where and why it does not parse.
    fn edit(text: &str, path: &Path, emitter: &Path) -> Result<Edit, String>;

    /// What the user still has to do after `action` (empty: nothing).
    fn note(action: HookAction) -> &'static str;
}

/// A hooks file read and edited both ways.
pub(super) struct Edit {
    /// Portal's handlers as the file has them.
    pub(super) found: Vec<Handler>,
    /// The file without Portal's handlers.
    pub(super) stripped: String,
    /// The file with Portal's handlers as they should be.
    pub(super) installed: String,
    /// Whether the agent runs a hook only once the user trusts it (Codex).
    pub(super) asks_trust: bool,
    /// For such an agent, whether it trusts Portal's handlers as they are
    /// now (`None`: none is installed).
    pub(super) trust: Option<HookTrust>,
}

/// Runs one action on `F`'s file under `home`.
pub(super) fn run<F: HookFile>(
    action: HookAction,
    dry_run: bool,
    home: &Path,
    emitter: &Path,
) -> Result<Report, HookError> {
    let dir = home.join(F::DIR);
    let path = dir.join(F::FILE);
    let mut report = Report {
        agent: F::AGENT,
        path: path.clone(),
        status: HookStatus::NotDetected,
        change: String::new(),
        note: String::new(),
        trust: None,
        preview: String::new(),
    };
    let existing = read(&path)?;
    let text = existing.clone().unwrap_or_default();
    let edit = F::edit(&text, &path, emitter).map_err(|reason| HookError::Malformed {
        path: path.clone(),
        kind: F::KIND,
        reason,
    })?;
    // By meaning, not bytes: an agent may rewrite the file in its own
    // layout, which changes nothing Portal installed.
    report.status = status(&edit.found, &F::wanted(emitter), dir.exists());
    report.note = F::note(action).to_owned();
    let kept = report.status == HookStatus::Installed;
    let Edit { installed, stripped, asks_trust, trust, .. } = edit;
    let mut report =
        act(action, report, &path, &text, existing.is_some(), installed, stripped, dry_run)?;
    if asks_trust {
        report.trust = match action {
            HookAction::Status => trust,
            // Handlers left in place keep their records; replaced ones have none.
            HookAction::Install if kept => trust,
            HookAction::Install => Some(HookTrust::Untrusted),
            HookAction::Uninstall => None,
        };
    }
    Ok(report)
}

fn read(path: &Path) -> Result<Option<String>, HookError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HookError::Io { op: "reading", path: path.to_path_buf(), source }),
    }
}

fn write_atomic(path: &Path, text: &str) -> Result<(), HookError> {
    let io = |op, source| HookError::Io { op, path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("creating the directory of", e))?;
    let tmp =
        dir.join(format!(".{}.portal-tmp", path.file_name().unwrap_or_default().to_string_lossy()));
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&tmp).map_err(|e| io("creating a temp file for", e))?;
        f.write_all(text.as_bytes()).map_err(|e| io("writing", e))?;
        f.sync_all().map_err(|e| io("syncing", e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io("replacing", e))
}

/// Carries out `action` on a file whose text is `text` now, `installed`
/// with Portal's hooks and `stripped` without them. An install that changes
/// no meaning leaves the file as it is (the agent may have rewritten it in
/// its own layout, or added its own records).
#[allow(clippy::too_many_arguments, reason = "one call per format, each naming every piece")]
fn act(
    action: HookAction,
    report: Report,
    path: &Path,
    text: &str,
    existed: bool,
    installed: String,
    stripped: String,
    dry_run: bool,
) -> Result<Report, HookError> {
    match action {
        HookAction::Status => Ok(report),
        HookAction::Install => {
            let after =
                if report.status == HookStatus::Installed { text.to_owned() } else { installed };
            let r = finish(report, path, text, after, existed, dry_run)?;
            Ok(Report { status: HookStatus::Installed, ..r })
        }
        HookAction::Uninstall => {
            let r = finish(report, path, text, stripped, existed, dry_run)?;
            Ok(Report { status: HookStatus::Absent, ..r })
        }
    }
}

fn finish(
    mut report: Report,
    path: &Path,
    before: &str,
    after: String,
    exists: bool,
    dry_run: bool,
) -> Result<Report, HookError> {
    if after == before {
        report.change = "nothing to change".into();
    } else {
        report.change =
            format!("{} {}", if exists { "updated" } else { "created" }, path.display());
        if dry_run {
            report.change = format!("would have {}", report.change);
        } else {
            write_atomic(path, &after)?;
        }
    }
    if dry_run {
        report.preview = after;
    }
    Ok(report)
}
