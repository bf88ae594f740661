//! The workspace file (`portal.toml`): one table per workspace, each a list
//! of members, read into checked types. Every error names the file and the
//! line: a TOML error, an unknown key, a bad value, a `depends_on` naming
//! no member, a cycle.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// The file `up`, `down` and `status` read when none is given.
pub const DEFAULT_FILE: &str = "portal.toml";

/// How long a member may take to become ready when its file says nothing:
/// a dev server compiling first, an agent booting.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Restarts of a member with `restart = "on-failure"` when the file sets no
/// `max_restarts`.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// A workspace file that cannot be used, with where and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct WorkspaceError {
    /// The file, as given.
    pub file: String,
    /// The line the problem is on, when it is on one.
    pub line: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
}

/// When a member counts as ready, so that what depends on it may start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ready {
    /// As soon as it runs.
    Started,
    /// Once this text appears in its output.
    Text(String),
    /// Once it waits for input (a prompt, a REPL, an agent at rest).
    Input,
    /// Once it exited with status 0 (a migration, a build step).
    Exit,
}

/// What Portal does when a member fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Nothing.
    Never,
    /// Starts it again (with backoff) when it exits non-zero or dies of a
    /// signal, at most this many times; a kill through Portal is no failure.
    OnFailure {
        /// Restarts at most.
        max: u32,
    },
}

/// One program of a workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its process name (unique among the daemon's processes).
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Working directory (relative paths are from the file's directory);
    /// `None`: the file's directory.
    pub cwd: PathBuf,
    /// Environment overrides.
    pub env: BTreeMap<String, String>,
    /// On a terminal.
    pub pty: bool,
    /// Terminal size, rows × columns.
    pub size: Option<(u32, u32)>,
    /// Idle timeout (kill when no client named it for this long).
    pub timeout: Option<Duration>,
    /// When it is ready.
    pub ready: Ready,
    /// How long readiness may take.
    pub ready_timeout: Duration,
    /// Members that must be ready first.
    pub depends_on: Vec<String>,
    /// What happens when it fails.
    pub restart: Restart,
    /// The first prompt (an agent's task, a REPL's or a shell's first
    /// commands), typed once it waits for input, once.
    pub prompt: Option<String>,
    /// The line its table starts on.
    pub line: usize,
}

/// A workspace: its members in the order they start (every member after
/// what it depends on; otherwise in file order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    /// Its name.
    pub name: String,
    /// The members, in start order.
    pub members: Vec<Member>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    workspace: BTreeMap<Spanned<String>, Spanned<RawWorkspace>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    #[serde(default)]
    member: Vec<Spanned<RawMember>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    name: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    pty: bool,
    size: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    ready: Option<String>,
    ready_timeout: Option<Spanned<String>>,
    #[serde(default)]
    depends_on: Vec<Spanned<String>>,
    restart: Option<Spanned<String>>,
    max_restarts: Option<u32>,
    prompt: Option<String>,
}

/// The line of byte `offset` in `text`, counting from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(1, |t| t.bytes().filter(|b| *b == b'\n').count() + 1)
}

/// Parses "250ms", "30s", "5m", "1h" or a whole number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    Some(match unit.trim() {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" | "min" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    })
}

/// Reads workspace `name` (or the file's only one) from `path`.
pub fn load(path: &Path, name: Option<&str>) -> Result<Workspace, WorkspaceError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| WorkspaceError {
        file: label.clone(),
        line: None,
        message: if e.kind() == std::io::ErrorKind::NotFound {
            "not found: write one (README, \"Workspaces\"), or name another file".to_owned()
        } else {
            format!("cannot read it: {e}")
        },
    })?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    parse(&text, &label, &dir, name)
}

/// Every workspace name in a file's text, in order.
pub fn names(text: &str) -> Vec<String> {
    toml::from_str::<RawFile>(text)
        .map(|f| f.workspace.into_keys().map(Spanned::into_inner).collect())
        .unwrap_or_default()
}

/// Parses workspace `name` (or the only one) of a file's `text`; relative
/// working directories are from `dir`.
pub fn parse(
    text: &str,
    file: &str,
    dir: &Path,
    name: Option<&str>,
) -> Result<Workspace, WorkspaceError> {
    let at = |line: Option<usize>, message: String| WorkspaceError {
        file: file.to_owned(),
        line,
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        // toml's message repeats the position and quotes the line; the
        // first line of it says what is wrong.
        at(line, e.message().trim().to_owned())
    })?;
    let known: Vec<&str> = raw.workspace.keys().map(|k| k.get_ref().as_str()).collect();
    let (ws_name, ws) = match name {
        Some(n) => raw.workspace.iter().find(|(k, _)| k.get_ref() == n).ok_or_else(|| {
            at(None, format!("no workspace {n:?} (it has: {})", list(&known)))
        })?,
        None => match raw.workspace.len() {
            1 => raw.workspace.iter().next().ok_or_else(|| at(None, "no workspace".into()))?,
            0 => return Err(at(None, "defines no workspace: add a [workspace.NAME] table with [[workspace.NAME.member]] entries".into())),
            _ => return Err(at(None, format!("defines several workspaces ({}): say which one", list(&known)))),
        },
    };
    let ws_name = ws_name.get_ref().clone();
    let ws_line = line_of(text, ws.span().start);
    if ws.get_ref().member.is_empty() {
        return Err(at(
            Some(ws_line),
            format!("workspace {ws_name} has no [[workspace.{ws_name}.member]]"),
        ));
    }
    let mut members = Vec::new();
    for m in &ws.get_ref().member {
        let line = line_of(text, m.span().start);
        let raw = m.get_ref();
        let bad = |span: Option<std::ops::Range<usize>>, what: String| {
            at(
                Some(span.map_or(line, |s| line_of(text, s.start))),
                format!("workspace {ws_name}: member {:?}: {what}", raw.name),
            )
        };
        if raw.name.is_empty()
            || raw.name.contains(':')
            || raw.name.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad(
                None,
                "a name must be non-empty, hold no ':' and not be all digits".into(),
            ));
        }
        if members.iter().any(|x: &Member| x.name == raw.name) {
            return Err(bad(None, "the name is used twice".into()));
        }
        if raw.command.is_empty() {
            return Err(bad(None, "command is empty".into()));
        }
        let size = raw
            .size
            .as_ref()
            .map(|s| {
                parse_size(s.get_ref()).ok_or_else(|| {
                    bad(
                        Some(s.span()),
                        format!("size {:?} is not ROWSxCOLS (e.g. \"40x120\")", s.get_ref()),
                    )
                })
            })
            .transpose()?;
        let duration = |d: &Option<Spanned<String>>, key: &str| {
            d.as_ref()
                .map(|d| {
                    parse_duration(d.get_ref()).ok_or_else(|| {
                        bad(
                            Some(d.span()),
                            format!("{key} {:?} is not a duration (\"30s\", \"5m\")", d.get_ref()),
                        )
                    })
                })
                .transpose()
        };
        let timeout = duration(&raw.timeout, "timeout")?;
        let ready_timeout =
            duration(&raw.ready_timeout, "ready_timeout")?.unwrap_or(DEFAULT_READY_TIMEOUT);
        let ready = match raw.ready.as_deref() {
            None | Some("") => Ready::Started,
            Some("input") => Ready::Input,
            Some("exit") => Ready::Exit,
            Some(text) => Ready::Text(text.to_owned()),
        };
        let restart = match raw.restart.as_ref().map(|r| (r.get_ref().as_str(), r.span())) {
            None | Some(("never", _)) => {
                if raw.max_restarts.is_some() {
                    return Err(bad(None, "max_restarts needs restart = \"on-failure\"".into()));
                }
                Restart::Never
            }
            Some(("on-failure", _)) => {
                Restart::OnFailure { max: raw.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS) }
            }
            Some((other, span)) => {
                return Err(bad(
                    Some(span),
                    format!("restart {other:?} is not \"never\" or \"on-failure\""),
                ));
            }
        };
        if raw.size.is_some() && !raw.pty {
            return Err(bad(raw.size.as_ref().map(Spanned::span), "size needs pty = true".into()));
        }
        if raw.prompt.is_some() {
            if !raw.pty {
                return Err(bad(
                    None,
                    "a prompt is typed at its terminal: it needs pty = true".into(),
                ));
            }
            if ready == Ready::Exit {
                return Err(bad(None, "a prompt is typed once the member is ready, and with ready = \"exit\" it never would be: use \"input\"".into()));
            }
        }
        let cwd = raw.cwd.as_ref().map_or_else(|| dir.to_path_buf(), |c| dir.join(c));
        members.push(Member {
            name: raw.name.clone(),
            command: raw.command.clone(),
            args: raw.args.clone(),
            cwd,
            env: raw.env.clone(),
            pty: raw.pty,
            size,
            timeout,
            ready,
            ready_timeout,
            depends_on: raw.depends_on.iter().map(|d| d.get_ref().clone()).collect(),
            restart,
            prompt: raw.prompt.clone().filter(|p| !p.is_empty()),
            line,
        });
        for d in &raw.depends_on {
            if d.get_ref() == &raw.name {
                return Err(bad(Some(d.span()), "depends on itself".into()));
            }
        }
    }
    // Every dependency names a member.
    for (m, raw) in members.iter().zip(&ws.get_ref().member) {
        for d in &raw.get_ref().depends_on {
            if !members.iter().any(|x| &x.name == d.get_ref()) {
                return Err(at(
                    Some(line_of(text, d.span().start)),
                    format!(
                        "workspace {ws_name}: member {:?}: depends_on names {:?}, which is no member of {ws_name}",
                        m.name,
                        d.get_ref()
                    ),
                ));
            }
        }
    }
    let members = start_order(members).map_err(|(cycle, line)| {
        at(
            Some(line),
            format!("workspace {ws_name}: depends_on forms a cycle: {}", cycle.join(" → ")),
        )
    })?;
    Ok(Workspace { name: ws_name, members })
}

fn list(names: &[&str]) -> String {
    if names.is_empty() { "none".into() } else { names.join(", ") }
}

fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (r, c) = s.split_once(['x', 'X'])?;
    let (r, c) = (r.trim().parse().ok()?, c.trim().parse().ok()?);
    (r > 0 && c > 0).then_some((r, c))
}

/// The members in start order: each after its dependencies, otherwise in
/// file order. A cycle is returned with the line of its first member.
fn start_order(members: Vec<Member>) -> Result<Vec<Member>, (Vec<String>, usize)> {
    let index: HashMap<&str, usize> =
        members.iter().enumerate().map(|(i, m)| (m.name.as_str(), i)).collect();
    // 0 unvisited, 1 on the path, 2 placed.
    let mut mark = vec![0u8; members.len()];
    let mut order = Vec::with_capacity(members.len());
    fn visit(
        i: usize,
        members: &[Member],
        index: &HashMap<&str, usize>,
        mark: &mut [u8],
        path: &mut Vec<usize>,
        order: &mut Vec<usize>,
    ) -> Result<(), (Vec<String>, usize)> {
        match mark[i] {
            2 => return Ok(()),
            1 => {
                let from = path.iter().position(|p| *p == i).unwrap_or(0);
                let mut cycle: Vec<String> =
                    path[from..].iter().map(|p| members[*p].name.clone()).collect();
                cycle.push(members[i].name.clone());
                return Err((cycle, members[i].line));
            }
            _ => {}
        }
        mark[i] = 1;
        path.push(i);
        for d in &members[i].depends_on {
            if let Some(&j) = index.get(d.as_str()) {
                visit(j, members, index, mark, path, order)?;
            }
        }
        path.pop();
        mark[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..members.len() {
        visit(i, &members, &index, &mut mark, &mut Vec::new(), &mut order)?;
    }
    let mut slots: Vec<Option<Member>> = members.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Workspace, WorkspaceError> {
        parse(text, "portal.toml", Path::new("/w"), None)
    }

    #[test]
    fn members_start_after_what_they_depend_on() {
        let ws = parse_str(
            r#"
[workspace.dev]
[[workspace.dev.member]]
name = "fixer"
command = "claude"
pty = true
depends_on = ["api"]
prompt = "fix it"
[[workspace.dev.member]]
name = "api"
command = "npm"
args = ["run", "dev"]
ready = "listening on"
restart = "on-failure"
cwd = "api"
pty = true
size = "40x120"
ready_timeout = "2m"
"#,
        )
        .unwrap();
        assert_eq!(ws.name, "dev");
        let names: Vec<&str> = ws.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["api", "fixer"]);
        let api = &ws.members[0];
        assert_eq!(api.ready, Ready::Text("listening on".into()));
        assert_eq!(api.restart, Restart::OnFailure { max: DEFAULT_MAX_RESTARTS });
        assert_eq!(api.cwd, Path::new("/w/api"));
        assert_eq!(api.size, Some((40, 120)));
        assert_eq!(api.ready_timeout, Duration::from_secs(120));
        assert_eq!(ws.members[1].prompt.as_deref(), Some("fix it"));
        assert_eq!(ws.members[1].line, 3);
    }

    #[test]
    fn every_error_names_its_line() {
        let cases = [
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\ncommand = \"sh\"\nport = 1\n",
                "portal.toml line 5: unknown field `port`",
            ),
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\ncommand = \"sh\"\ndepends_on = [\"y\"]\n",
                "portal.toml line 5: workspace a: member \"x\": depends_on names \"y\", which is no member of a",
            ),
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\ncommand = \"sh\"\ndepends_on = [\"y\"]\n[[workspace.a.member]]\nname = \"y\"\ncommand = \"sh\"\ndepends_on = [\"x\"]\n",
                "portal.toml line 2: workspace a: depends_on forms a cycle: x → y → x",
            ),
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\ncommand = \"sh\"\nrestart = \"always\"\n",
                "portal.toml line 5: workspace a: member \"x\": restart \"always\" is not \"never\" or \"on-failure\"",
            ),
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\n",
                "portal.toml line 2: missing field `command`",
            ),
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\ncommand = \"sh\"\nsize = \"10x20\"\n",
                "portal.toml line 5: workspace a: member \"x\": size needs pty = true",
            ),
            (
                "[workspace.a]\n[[workspace.a.member]]\nname = \"x\"\ncommand = \"sh\"\nprompt = \"hi\"\n",
                "portal.toml line 2: workspace a: member \"x\": a prompt is typed at its terminal: it needs pty = true",
            ),
            (
                "[workspace.a]\n[[workspace.b.member]]\nname = 1\n",
                "portal.toml line 3: invalid type: integer `1`, expected a string",
            ),
            (
                "",
                "portal.toml: defines no workspace: add a [workspace.NAME] table with [[workspace.NAME.member]] entries",
            ),
        ];
        for (text, want) in cases {
            let got = parse_str(text).unwrap_err().to_string();
            assert!(got.starts_with(want), "{text}\n  got: {got}\n want: {want}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("5 parsecs"), None);
    }
}
