//! A reference terminal for differential screen tests: tmux, fed exact
//! bytes on a private server, read back as rows of text, the cursor and
//! whether the alternate screen is on.
//!
//! Each [`Reference`] owns one tmux server (`tmux -L <unique name>`, its own
//! configuration, `LC_ALL=C.UTF-8`, `-u`) and kills it on drop. Each
//! [`Reference::render`] runs in a session of its own, so no state (modes,
//! charsets, tab stops, margins) leaks from one render into the next.
//!
//! How bytes reach tmux unchanged: the pane runs a script that puts its tty
//! in raw mode (`stty raw -echo`: no `onlcr`, so a LF stays a LF) and `cat`s
//! the bytes from a file. tmux's answers to queries in them (DSR, DA) go to
//! the pane's input, which nothing reads but the barrier below.
//!
//! The barrier: `cat` returning means the bytes are in the pty, not that
//! tmux has parsed them. So after them the script writes a DSR 5 (`ESC[5n`)
//! and reads the tty until tmux's answer (`ESC[0n`) arrives: tmux parses in
//! order, so by then it has parsed every byte before it. Only then does the
//! script signal `wait-for -S`, which [`Reference::render`] waits on. (Any
//! `ESC[5n` in the bytes themselves is answered first; the script counts
//! them and waits for one answer more.)
//!
//! What is normalised, on the reference side and by the same rules on
//! whatever it is compared with:
//! - rows lose their trailing whitespace;
//! - a DEC special graphics cell (`ESC ( 0`, or G1 shifted in with SO),
//!   which `capture-pane -p` prints as its ASCII letter, becomes the Unicode
//!   character a VT100/xterm shows (`lqk` → `┌─┐`). `capture-pane -e` marks
//!   such cells: it emits SO before a run of them and SI after, the state
//!   carrying from one row to the next; the SGR it adds is dropped;
//! - the cursor column is clamped to the last column ([`clamp_col`]): after
//!   writing the last column tmux reports `cursor_x` = width (the pending
//!   wrap), a model may report width - 1; both mean "on the last column".

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::process::Command;

/// What the reference terminal shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefScreen {
    /// One per row, trailing whitespace trimmed, line-drawing as Unicode.
    pub lines: Vec<String>,
    /// (row, col), 0-based, the column clamped by [`clamp_col`].
    pub cursor: (u32, u32),
    /// Whether the alternate screen is on.
    pub alternate: bool,
}

/// A private tmux server that renders bytes. Dropping it kills the server.
pub struct Reference {
    /// The `-L` socket name, unique to this server.
    name: String,
    /// Holds the configuration and each render's bytes and script.
    dir: tempfile::TempDir,
    /// `tmux -V`, for failure messages.
    version: String,
    /// Renders so far: names each one's session, files and channel.
    renders: u32,
    /// Where the server's socket is, once it runs: tmux leaves the file
    /// behind when killed, so the drop removes it.
    socket: Option<PathBuf>,
}

/// The version the expectations were checked against.
pub const CHECKED_VERSION: &str = "tmux 3.3a";

/// The cursor column with a pending wrap folded onto the last column (see
/// the module doc).
#[must_use]
pub fn clamp_col(col: u32, cols: u32) -> u32 {
    col.min(cols.saturating_sub(1))
}

const CONF: &str = "\
# The whole window is the pane: a status line would take a row.
set -g status off
# The pane's screen must survive its program (it sleeps, but be sure).
set -g remain-on-exit on
# Each render kills its session: the server must not exit with the last
# one (a render racing its shutdown fails with \"server exited\").
set -g exit-empty off
# A known shell runs the pane's command.
set -g default-shell /bin/sh
# Nothing tmux adds by itself: no history to scroll into view, no bells.
set -g history-limit 0
set -g visual-bell off
set -g bell-action none
";

impl Reference {
    /// Starts a server, or `None` (after saying why) when tmux is not
    /// installed and this is not CI.
    ///
    /// # Panics
    /// When tmux is missing and `CI` is set.
    pub async fn start() -> Option<Self> {
        let out = match Command::new("tmux").arg("-V").output().await {
            Ok(out) if out.status.success() => out,
            other => {
                let why = format!("tmux is not runnable ({other:?}); install tmux (3.3a)");
                assert!(std::env::var_os("CI").is_none(), "{why} (CI must run it)");
                eprintln!("skipping the differential screen test: {why}");
                return None;
            }
        };
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if version != CHECKED_VERSION {
            eprintln!(
                "note: the reference is {version}; the cases were checked on {CHECKED_VERSION}"
            );
        }
        let dir = crate::test_dir();
        std::fs::write(dir.path().join("tmux.conf"), CONF).expect("write tmux.conf");
        // Unique per process and per server within it: tests run in parallel.
        static SERVERS: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "portal-ref-{}-{}",
            std::process::id(),
            SERVERS.fetch_add(1, Ordering::Relaxed)
        );
        Some(Self { name, dir, version, renders: 0, socket: None })
    }

    /// The tmux version in use.
    #[must_use]
    pub fn version(&self) -> &str {
        &self.version
    }

    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-u")
            .arg("-L")
            .arg(&self.name)
            .arg("-f")
            .arg(self.dir.path().join("tmux.conf"))
            // The server is started by the first command and keeps this
            // environment: a UTF-8 locale, as tmux measures characters'
            // widths with the C library's.
            .env("LC_ALL", "C.UTF-8")
            .env("TERM", "xterm-256color")
            // Never talk to (or nest in) a tmux the tests run inside.
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `tmux args…` on this server with a deadline; returns stdout.
    async fn run(&self, args: &[&str]) -> String {
        self.run_for(&format!("tmux -L {} {}", self.name, args.join(" ")), args).await
    }

    /// [`Self::run`], saying `what` it waits for when it fails.
    async fn run_for(&self, what: &str, args: &[&str]) -> String {
        let child = self
            .tmux()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        // A hung tmux must fail the test, not hang it: the child is killed
        // when the timeout drops it.
        let out = crate::bounded(what, child.wait_with_output())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap_or_else(|e| panic!("{what}: output not UTF-8: {e}"))
    }

    /// Feeds `bytes` to a fresh `rows`×`cols` terminal and reads what it shows.
    ///
    /// # Panics
    /// When tmux fails or does not finish within the test bound.
    pub async fn render(&mut self, rows: u32, cols: u32, bytes: &[u8]) -> RefScreen {
        self.renders += 1;
        let n = self.renders;
        let session = format!("r{n}");
        let channel = format!("fed-{n}");
        let data = self.dir.path().join(format!("{n}.bin"));
        let script = self.dir.path().join(format!("{n}.sh"));
        std::fs::write(&data, bytes).expect("write the bytes to feed");
        let answers = 1 + bytes.windows(4).filter(|w| *w == b"\x1b[5n").count();
        let text = format!(
            "stty raw -echo\n\
             cat {data}\n\
             printf '\\033[5n'\n\
             k=0\n\
             while IFS= read -r -d n x; do\n\
             \x20 case $x in *$'\\033[0') k=$((k+1)); [ $k -ge {answers} ] && break;; esac\n\
             done\n\
             tmux -L {name} wait-for -S {channel}\n\
             exec sleep 1d\n",
            data = quote(&data),
            name = self.name,
        );
        std::fs::write(&script, text).expect("write the pane script");
        let (r, c) = (rows.to_string(), cols.to_string());
        let pane = format!("exec bash {}", quote(&script));
        self.run(&["new-session", "-d", "-s", &session, "-x", &c, "-y", &r, &pane]).await;
        if self.socket.is_none() {
            let path = self.run(&["display", "-p", "#{socket_path}"]).await;
            self.socket = Some(PathBuf::from(path.trim_end()));
        }
        let what = format!(
            "tmux -L {} to parse {} bytes (the pane signals {channel} once tmux has \
             answered the ESC[5n after them)",
            self.name,
            bytes.len()
        );
        self.run_for(&what, &["wait-for", &channel]).await;
        let target = format!("{session}:");
        let out = self
            .run(&[
                "capture-pane",
                "-p",
                "-e",
                "-N",
                "-t",
                &target,
                ";",
                "display",
                "-p",
                "-t",
                &target,
                "#{cursor_x},#{cursor_y},#{alternate_on},#{pane_width},#{pane_height}",
                ";",
                "kill-session",
                "-t",
                &session,
            ])
            .await;
        let _ = std::fs::remove_file(&data);
        let _ = std::fs::remove_file(&script);
        let mut lines: Vec<&str> = out.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        let state = lines.pop().expect("tmux display output");
        let f: Vec<u32> = state
            .split(',')
            .map(|v| v.parse().unwrap_or_else(|_| panic!("tmux display said {state:?}")))
            .collect();
        assert_eq!(
            (f[3], f[4]),
            (cols, rows),
            "the tmux pane is not the size asked for (status line on?)"
        );
        assert_eq!(lines.len(), rows as usize, "capture-pane rows: {lines:#?}");
        RefScreen {
            lines: decode_capture(&lines),
            cursor: (f[1], clamp_col(f[0], cols)),
            alternate: f[2] == 1,
        }
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        // Only this server, by its own socket; bounded by coreutils'
        // `timeout` since a drop cannot await.
        let _ = std::process::Command::new("timeout")
            .args(["-s", "KILL", "5", "tmux", "-L", &self.name, "kill-server"])
            .env_remove("TMUX")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
    }
}

fn quote(p: &std::path::Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Rows of `capture-pane -p -e` output as text: SGR dropped, cells between
/// SO and SI (DEC special graphics) mapped to Unicode, trailing whitespace
/// trimmed. The SO/SI state carries across rows, as tmux emits it.
#[must_use]
pub fn decode_capture(rows: &[&str]) -> Vec<String> {
    let mut graphics = false;
    rows.iter()
        .map(|row| {
            let mut out = String::new();
            let mut chars = row.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\x0e' => graphics = true,
                    '\x0f' => graphics = false,
                    '\x1b' => match chars.next() {
                        // CSI: parameters then one final byte.
                        Some('[') => {
                            for c in chars.by_ref() {
                                if ('\x40'..='\x7e').contains(&c) {
                                    break;
                                }
                            }
                        }
                        // OSC (a hyperlink): up to BEL or ST.
                        Some(']') => {
                            while let Some(c) = chars.next() {
                                if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some())
                                {
                                    break;
                                }
                            }
                        }
                        _ => {}
                    },
                    c if graphics => out.push(dec_special_graphics(c)),
                    c => out.push(c),
                }
            }
            out.trim_end().to_owned()
        })
        .collect()
}

/// The character a VT100 (and xterm) shows for `c` in the DEC special
/// graphics set: 0x5f–0x7e are replaced, the rest of ASCII is itself.
///
/// tmux's own table (tty-acs.c, for drawing on a UTF-8 terminal) agrees on
/// every line-drawing letter; where it differs it is not the DEC set: it
/// also maps `+,-.0` (arrows and a block, from terminfo's `acsc`), draws
/// `h` as `▒` and `i` as a lantern, and has no `b`–`e` or `_`. The VT100's
/// glyphs are used here.
#[must_use]
pub fn dec_special_graphics(c: char) -> char {
    match c {
        '_' => ' ',
        '`' => '◆',
        'a' => '▒',
        'b' => '␉',
        'c' => '␌',
        'd' => '␍',
        'e' => '␊',
        'f' => '°',
        'g' => '±',
        'h' => '␤',
        'i' => '␋',
        'j' => '┘',
        'k' => '┐',
        'l' => '┌',
        'm' => '└',
        'n' => '┼',
        'o' => '⎺',
        'p' => '⎻',
        'q' => '─',
        'r' => '⎼',
        's' => '⎽',
        't' => '├',
        'u' => '┤',
        'v' => '┴',
        'w' => '┬',
        'x' => '│',
        'y' => '≤',
        'z' => '≥',
        '{' => 'π',
        '|' => '≠',
        '}' => '£',
        '~' => '·',
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_decoding_maps_shifted_cells_and_drops_sgr() {
        // As tmux 3.3a's `capture-pane -p -e` prints them: SO/SI around
        // line-drawing cells, the state carried over a row break, SGR
        // around attributes.
        let rows = ["ab\x0elq\x0fcd", "\x1b[1m\x1b[31mred\x1b[0m \x0ex", "qj\x0f ok  ", ""];
        assert_eq!(decode_capture(&rows), ["ab┌─cd", "red │", "─┘ ok", ""]);
    }

    #[test]
    fn a_pending_wrap_is_the_last_column() {
        assert_eq!(clamp_col(80, 80), 79);
        assert_eq!(clamp_col(79, 80), 79);
        assert_eq!(clamp_col(3, 80), 3);
    }
}
