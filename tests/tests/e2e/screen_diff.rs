//! Differential screen tests: the same bytes go to Portal's screen and to a
//! reference terminal (tmux 3.3a, `portal_tests::tmux`), and the rows, the
//! cursor and the alternate-screen flag must agree. A battery of short
//! escape sequences, one behaviour each, and real programs driven by keys.
//!
//! Every case is checked and every mismatch reported in one failure, so a
//! run shows the whole picture. Both sides see identical input: tmux is fed
//! the bytes Portal logged (up to the offset its snapshot reflects), and for
//! the battery those are checked to be the case's bytes.
//!
//! Normalised on both sides alike (see `portal_tests::tmux`): trailing
//! whitespace, DEC line-drawing as Unicode, and the cursor column clamped to
//! the last column (tmux reports a pending wrap as column = width).

use std::collections::HashMap;

use portal_proto::v1 as pb;
use portal_tests::tmux::{RefScreen, Reference, clamp_col};
use portal_tests::*;

type Rpc = pb::portal_client::PortalClient<tonic::transport::Channel>;

/// Cases where tmux 3.3a is known to differ from xterm, by name, with why:
/// Portal follows xterm there, so a mismatch is expected; a listed case that
/// matches is reported too (the entry is stale).
const KNOWN_DIVERGENCES: &[(&str, &str)] = &[(
    "decsc-around-1049",
    "tmux 3.3a saves the cursor of ?1049h apart from ESC 7's; xterm saves both in one \
     slot, so after ?1049h/l an ESC 8 returns where ?1049h was, not where ESC 7 was",
)];

/// One behaviour: bytes, and the terminal size they are shown on.
struct Case {
    name: &'static str,
    rows: u32,
    cols: u32,
    bytes: Vec<u8>,
}

/// A case on a 24×80 terminal.
fn case(name: &'static str, bytes: impl AsRef<[u8]>) -> Case {
    Case { name, rows: 24, cols: 80, bytes: bytes.as_ref().to_vec() }
}

/// A case on a 10×20 terminal.
fn small(name: &'static str, bytes: impl AsRef<[u8]>) -> Case {
    Case { name, rows: 10, cols: 20, bytes: bytes.as_ref().to_vec() }
}

/// `row 1` … `row n`, CR LF between, none after.
fn fill(n: u32) -> String {
    (1..=n).map(|i| format!("row {i}")).collect::<Vec<_>>().join("\r\n")
}

/// `n` digits 0123456789 repeating, so where a row was cut shows.
fn digits(n: usize) -> String {
    "0123456789".chars().cycle().take(n).collect()
}

fn battery(tabs4: &[u8]) -> Vec<Case> {
    let mut tabs4_case = tabs4.to_vec();
    tabs4_case.extend_from_slice(b"a\tb\tc\td\te\r\n\t\t|");
    vec![
        // Character sets.
        case("dec-graphics-g0", "\x1b(0lqqk\r\nx  x\r\nmqqj\x1b(B ok"),
        case("dec-graphics-g1-so-si", "\x1b)0a\x0elqk\x0fb\r\n\x0ex\x0fmid\x0ex\x0f end"),
        case("dec-graphics-leaves-other-ascii", "\x1b(0ABC 123 lq\x1b(B"),
        case("decsc-decrc-restore-charset", "ab\x1b(0\x1b7\x1b(Bcd\r\n\x1b8qq\x1b(Bqq"),
        // Autowrap.
        case("autowrap-off", format!("\x1b[?7l{}\r\n\x1b[?7h{}", digits(85), digits(85))),
        case("autowrap-off-wide-at-margin", format!("\x1b[?7l{}中|", digits(79))),
        case("long-line-autowraps", format!("{}more", digits(100))),
        small("long-line-autowraps-small", format!("{}more\r\nnext", digits(45))),
        case("wide-at-last-column-wraps", format!("{}中|", digits(79))),
        small("wide-at-last-column-wraps-small", format!("{}中|", digits(19))),
        // Insert mode.
        case("insert-mode", "abcdef\r\x1b[4hXY\x1b[4lZ"),
        // A full row: what is pushed past the margin is lost (overwriting
        // would keep the `t`).
        small("insert-at-right-margin", "abcdefghijklmnopqrst\x1b[4h\x1b[1;18HXY\x1b[4l"),
        // Tab stops.
        case("tabs-default", "a\tb\tc\r\n\t\t\t\t\t\t\t\t\t\t\t|"),
        case(
            "tabs-clear-all-and-set",
            "\x1b[3g\x1b[5G\x1bH\x1b[12G\x1bH\x1b[30G\x1bH\ra\tb\tc\td\te",
        ),
        case("tabs-clear-one", "\x1b[9G\x1b[0g\ra\tb\tc"),
        case("tabs-4-command", tabs4_case),
        // Saving the cursor.
        case("save-restore-csi-s-u", "ab\x1b[scd\x1b[3;5H\x1b[uXY"),
        case("save-restore-esc-7-8", "\x1b[2;3Hab\x1b7\x1b[5;1Hcd\x1b8XY"),
        // Index, next line, reverse index.
        case("ind-mid-screen", "ab\x1bDcd"),
        case("nel-mid-screen", "ab\x1bEcd"),
        case("ind-at-bottom-scrolls", "top\x1b[24;1Hbottom\x1bDx"),
        case("nel-at-bottom-scrolls", "top\x1b[24;1Hbottom\x1bEx"),
        case("ind-in-scroll-region", format!("{}\x1b[5;10r\x1b[10;3H\x1bD\x1bDX", fill(24))),
        case("nel-in-scroll-region", format!("{}\x1b[5;10r\x1b[10;3H\x1bE\x1bEX", fill(24))),
        case("ri-at-top-scrolls", "line1\r\nline2\x1b[1;1H\x1bMnew"),
        case("ri-at-region-top", format!("{}\x1b[3;6r\x1b[3;1H\x1bMnew", fill(24))),
        // Screen alignment.
        case("decaln", "abc\x1b[5;5H\x1b#8"),
        case("decaln-with-margins", "\x1b[5;10r\x1b[7;3H\x1b#8\x1b[24;1HX\n"),
        // Alternate screens: text on both, the cursor moved on the second.
        case("alt-47", "main1\r\nmain2\x1b[?47hALT\x1b[10;10Hx\x1b[?47lY"),
        case("alt-47-on", "main\x1b[?47h\x1b[3;3Halt"),
        case("alt-1047", "main1\r\nmain2\x1b[?1047hALT\x1b[10;10Hx\x1b[?1047lY"),
        case("alt-1047-on", "main\x1b[?1047h\x1b[3;3Halt"),
        case("alt-1049", "main1\r\nmain2\x1b[?1049hALT\x1b[10;10Hx\x1b[?1049lY"),
        case("alt-1049-on", "main\x1b[?1049h\x1b[3;3Halt"),
        case(
            "decsc-around-1049",
            "\x1b[3;3Hab\x1b7\x1b[10;10Hcd\x1b[?1049h\x1b[5;5Hxx\x1b[?1049l\x1b8Z",
        ),
        // Unicode.
        case("emoji-zwj-family", "👨\u{200d}👩\u{200d}👧|"),
        case("emoji-vs16-heart", "\u{2764}\u{fe0f}|"),
        case("cjk-wide", "中文字|\r\nab中c"),
        case("combining-accent", "e\u{301}|\r\ncafe\u{301}!"),
        // Erasing.
        case("ech", "abcdefghij\x1b[1;3H\x1b[4X"),
        case(
            "el-0-1-2",
            "abcdefghij\x1b[1;5H\x1b[K\r\nabcdefghij\x1b[2;5H\x1b[1K\r\nabcdefghij\x1b[3;5H\x1b[2K",
        ),
        case("ed-0", format!("{}\x1b[3;4H\x1b[J", fill(6))),
        case("ed-1", format!("{}\x1b[3;4H\x1b[1J", fill(6))),
        case("ed-2", format!("{}\x1b[3;4H\x1b[2J", fill(6))),
        // Scrolling, lines and characters.
        case("su-in-scroll-region", format!("{}\x1b[5;10r\x1b[2S", fill(24))),
        case("sd-in-scroll-region", format!("{}\x1b[5;10r\x1b[3T", fill(24))),
        case("il", format!("{}\x1b[3;1H\x1b[2L", fill(8))),
        case("dl", format!("{}\x1b[3;1H\x1b[2M", fill(8))),
        case("ich", "abcdefghij\x1b[1;3H\x1b[2@"),
        case("dch", "abcdefghij\x1b[1;3H\x1b[2P"),
        // Cursor movement.
        case("origin-mode-cup", "\x1b[5;10r\x1b[?6h\x1b[1;1HX\x1b[20;1HY\x1b[?6l\x1b[1;1HZ"),
        case("cup-clamped", "\x1b[100;200HX\x1b[0;0HY"),
        case("backspace-at-col-0", "\x08X\r\nab\x08\x08\x08Y"),
        case("crlf-at-bottom-scrolls", format!("{}\r\nlast", fill(30))),
        small("crlf-at-bottom-scrolls-small", format!("{}\r\nlast", fill(12))),
        // Attributes change no text.
        case("device-queries-draw-nothing", "ab\x1b[6n\x1b[5n\x1b[c\x1b[>c\x1b[5ncd"),
        case("sgr-ignored", "\x1b[1;31mred\x1b[0m \x1b[4;44mblue\x1b[m \x1b[7mrev\x1b[27m"),
        // Reset.
        // After it: no charset (q), no insert mode (X overwrites), no
        // margins (the LF at the bottom scrolls the whole screen).
        case("ris", "junk\x1b[5;10r\x1b(0\x1b[4h\x1bc\x1b[3;1Habc q\rX\x1b[24;1H\n"),
    ]
}

/// `tabs 4`'s output, as a shell would send it to this terminal.
async fn tabs_4() -> Vec<u8> {
    let out = tokio::process::Command::new("tabs")
        .arg("4")
        .env("TERM", "xterm-256color")
        .env("COLUMNS", "80")
        .output()
        .await
        .expect("run `tabs 4` (ncurses-bin)");
    assert!(out.status.success(), "tabs 4: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// A mismatch between Portal's `snap` and the reference, readably; `None`
/// when they agree.
fn compare(name: &str, cols: u32, snap: &pb::ScreenSnapshot, r: &RefScreen) -> Option<String> {
    let portal_cursor = (snap.cursor_row, clamp_col(snap.cursor_col, cols));
    let rows = snap.lines.len().max(r.lines.len());
    let mut diff = Vec::new();
    for i in 0..rows {
        let p = snap.lines.get(i).map(|l| l.trim_end());
        let t = r.lines.get(i).map(String::as_str);
        if p != t {
            diff.push(format!("  row {i:>2}: portal {p:?}\n          tmux   {t:?}"));
        }
    }
    if diff.is_empty() && portal_cursor == r.cursor && snap.alternate_screen == r.alternate {
        return None;
    }
    let size = snap.size.unwrap_or_default();
    let mut m = format!(
        "{name} ({}x{}): cursor portal {portal_cursor:?} tmux {:?}; alternate portal {} tmux {}",
        size.rows, size.cols, r.cursor, snap.alternate_screen, r.alternate,
    );
    for d in diff {
        m.push('\n');
        m.push_str(&d);
    }
    Some(m)
}

/// With `PORTAL_SCREEN_DIFF_SHOW=1`, prints what the reference shows, to
/// check the expectations by eye.
fn show(name: &str, r: &RefScreen) {
    if std::env::var_os("PORTAL_SCREEN_DIFF_SHOW").is_none() {
        return;
    }
    let rows: Vec<String> = r
        .lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| format!("  {i:>2}|{l}"))
        .collect();
    eprintln!("{name}: cursor {:?} alternate {}\n{}", r.cursor, r.alternate, rows.join("\n"));
}

/// Sorts results into failures, allowing the listed divergences.
fn report(results: Vec<(&str, Option<String>)>) -> Vec<String> {
    let known: HashMap<&str, &str> = KNOWN_DIVERGENCES.iter().copied().collect();
    let mut failures = Vec::new();
    for (name, mismatch) in results {
        match (mismatch, known.get(name)) {
            (Some(m), None) => failures.push(m),
            (Some(m), Some(why)) => eprintln!("known divergence ({why}):\n{m}"),
            (None, Some(why)) => {
                failures.push(format!("{name}: listed as a known divergence ({why}) but matches"));
            }
            (None, None) => {}
        }
    }
    failures
}

fn assert_none_failed(reference: &Reference, what: &str, total: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} of {total} {what} differ from {}:\n\n{}",
        failures.len(),
        reference.version(),
        failures.join("\n\n")
    );
}

#[tokio::test]
async fn escape_sequences_render_as_tmux_does() {
    let Some(mut reference) = Reference::start().await else { return };
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let cases = battery(&tabs_4().await);
    // Start every case at once: their programs run side by side.
    let mut started = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let file = dir.path().join(format!("{i}.bin"));
        std::fs::write(&file, &c.bytes).unwrap();
        // No output processing (a LF stays a LF) and no echo: the bytes
        // reach the screen as they are.
        let script = "stty -opost -echo && exec cat \"$0\"";
        let file = file.to_str().unwrap();
        started.push(start_pty(&mut rpc, "sh", &["-c", script, file], c.rows, c.cols).await.id);
    }
    let mut results = Vec::new();
    for (c, id) in cases.iter().zip(started) {
        let end = wait_exit(&mut rpc, id).await;
        assert_eq!(end.exit_code, Some(0), "{}: the feeding program failed", c.name);
        let logged = read_all(&mut rpc, id, pb::Stream::Stdout, pb::Encoding::Raw).await;
        assert_eq!(logged, c.bytes, "{}: Portal logged other bytes than the case's", c.name);
        let len = logged.len() as u64;
        let snap =
            wait_screen(&mut rpc, id, "the screen to render every byte", |s| s.offset >= len).await;
        assert_eq!(snap.offset, len, "{}: the screen is past the log", c.name);
        let r = reference.render(c.rows, c.cols, &logged).await;
        show(c.name, &r);
        results.push((c.name, compare(c.name, c.cols, &snap, &r)));
    }
    let failures = report(results);
    d.stop().await;
    assert_none_failed(&reference, "escape-sequence cases", cases.len(), &failures);
}

/// Output bytes `0..offset` of `id`, waiting until the log has them.
async fn logged_upto(rpc: &mut Rpc, id: u64, offset: u64) -> Vec<u8> {
    let (mut bytes, _) =
        follow_until(rpc, id, pb::Stream::Stdout, "the bytes a screen shows", |b| {
            b.len() as u64 >= offset
        })
        .await;
    assert!(bytes.len() as u64 >= offset, "the log of {id} ends before its screen's offset");
    bytes.truncate(usize::try_from(offset).unwrap());
    bytes
}

/// A program on a 24×80 PTY, TERM=xterm-256color, HOME in `home`.
async fn start_program(
    rpc: &mut Rpc,
    home: &std::path::Path,
    command: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> u64 {
    let vars = [
        ("TERM", "xterm-256color"),
        ("HOME", home.to_str().unwrap()),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
    ];
    Start::pty(command)
        .args(args)
        .cwd(home)
        .envs(vars.into_iter().chain(env.iter().copied()))
        .size(24, 80)
        .run(rpc)
        .await
        .id
}

fn shows(s: &pb::ScreenSnapshot, text: &str) -> bool {
    s.lines.iter().any(|l| l.contains(text))
}

/// Drives one program to a screen worth comparing; returns its process id
/// and that screen.
async fn drive(rpc: &mut Rpc, home: &std::path::Path, program: &str) -> (u64, pb::ScreenSnapshot) {
    match program {
        "vim" => {
            let id = start_program(
                rpc,
                home,
                "vim",
                &["-N", "-u", "NONE", "-i", "NONE", "-n", "notes.txt"],
                &[],
            )
            .await;
            wait_screen(rpc, id, "vim to show the file", |s| shows(s, "first line")).await;
            write(rpc, id, b":vsplit\r").await;
            wait_screen(rpc, id, "two windows", |s| {
                s.lines.iter().rev().nth(1).is_some_and(|l| l.matches("notes.txt").count() == 2)
            })
            .await;
            let long =
                format!("Go{} END\x1b", "a long line that wraps in a narrow window ".repeat(4));
            write(rpc, id, long.as_bytes()).await;
            let snap = wait_screen(rpc, id, "the long line, insert mode left", |s| {
                shows(s, "END") && !s.lines.last().is_some_and(|l| l.contains("INSERT"))
            })
            .await;
            (id, snap)
        }
        "less" => {
            let id = start_program(rpc, home, "less", &["numbers.txt"], &[]).await;
            wait_screen(rpc, id, "less to show the file", |s| shows(s, "line number 1")).await;
            write(rpc, id, b"/number 50\r").await;
            let snap = wait_screen(rpc, id, "the search to scroll", |s| {
                s.lines.first().is_some_and(|l| l == "line number 50")
            })
            .await;
            (id, snap)
        }
        "htop" => {
            let id = start_program(rpc, home, "htop", &["-d", "10"], &[]).await;
            let snap = wait_screen(rpc, id, "htop's header", |s| {
                shows(s, "Tasks:") && shows(s, "Load average") && shows(s, "PID")
            })
            .await;
            (id, snap)
        }
        "dialog" => {
            let args = ["--menu", "Pick", "15", "50", "4", "a", "one", "b", "two", "c", "three"];
            let id = start_program(rpc, home, "dialog", &args, &[]).await;
            let snap =
                wait_screen(rpc, id, "dialog's menu", |s| shows(s, "three") && shows(s, "Cancel"))
                    .await;
            (id, snap)
        }
        "bash" => {
            let id = start_program(rpc, home, "bash", &["--norc", "--noprofile"], &[("PS1", "$ ")])
                .await;
            wait_screen(rpc, id, "bash's prompt", |s| s.lines.first().is_some_and(|l| l == "$"))
                .await;
            // Typed with a typo, mended with the arrow keys and Ctrl-A.
            write(rpc, id, b"cho wrld\x1b[D\x1b[D\x1b[Do\x01e\r").await;
            let snap = wait_screen(rpc, id, "echo's output and the next prompt", |s| {
                s.lines.get(1).is_some_and(|l| l == "world")
                    && s.lines.get(2).is_some_and(|l| l == "$")
            })
            .await;
            (id, snap)
        }
        "python3" => {
            let id = start_program(rpc, home, "python3", &["-q"], &[]).await;
            wait_screen(rpc, id, "python's prompt", |s| shows(s, ">>>")).await;
            write(rpc, id, b"print(6 * 7)\r").await;
            wait_screen(rpc, id, "42", |s| s.lines.iter().any(|l| l == "42")).await;
            write(rpc, id, b"for i in range(3): print('item', i)\r\r").await;
            let snap = wait_screen(rpc, id, "the loop's output and a prompt", |s| {
                shows(s, "item 2") && s.lines.iter().filter(|l| l.starts_with(">>>")).count() == 3
            })
            .await;
            (id, snap)
        }
        "man" => {
            let id = start_program(rpc, home, "man", &["ls"], &[("MANPAGER", "less")]).await;
            let snap = wait_screen(rpc, id, "the man page", |s| {
                s.lines.first().is_some_and(|l| l.starts_with("LS(1)")) && shows(s, "NAME")
            })
            .await;
            (id, snap)
        }
        "tabs" => {
            let id = start_program(rpc, home, "sh", &[], &[("PS1", "$ ")]).await;
            wait_screen(rpc, id, "sh's prompt", |s| s.lines.first().is_some_and(|l| l == "$"))
                .await;
            write(rpc, id, b"tabs 4\r").await;
            wait_screen(rpc, id, "the prompt after tabs", |s| {
                s.lines.get(1).is_some_and(|l| l.starts_with('$'))
            })
            .await;
            write(rpc, id, b"printf 'a\\tb\\tc\\n'\r").await;
            let snap = wait_screen(rpc, id, "the tabbed line", |s| {
                s.lines.get(2).is_some_and(|l| l.starts_with('a'))
                    && s.lines.get(3).is_some_and(|l| l.starts_with('$'))
            })
            .await;
            (id, snap)
        }
        "top" => {
            let id = start_program(rpc, home, "top", &["-d", "10"], &[]).await;
            let snap = wait_screen(rpc, id, "top's screen", |s| {
                s.lines.first().is_some_and(|l| l.starts_with("top - ")) && shows(s, "PID")
            })
            .await;
            (id, snap)
        }
        "nano" => {
            let id = start_program(rpc, home, "nano", &["notes.txt"], &[]).await;
            wait_screen(rpc, id, "nano to show the file", |s| {
                shows(s, "GNU nano") && shows(s, "first line")
            })
            .await;
            write(rpc, id, b"typed in nano ").await;
            let snap = wait_screen(rpc, id, "the typed text", |s| shows(s, "typed in nano")).await;
            (id, snap)
        }
        "git-pager" => {
            let repo = env!("CARGO_MANIFEST_DIR");
            let args = ["-C", repo, "log", "-n", "40", "--stat"];
            let id = start_program(rpc, home, "git", &args, &[("GIT_PAGER", "less")]).await;
            let snap = wait_screen(rpc, id, "git log in less", |s| {
                s.lines.first().is_some_and(|l| l.starts_with("commit "))
                    && shows(s, ":")
                    && s.lines.last().is_some_and(|l| l.starts_with(':'))
            })
            .await;
            (id, snap)
        }
        other => panic!("no driver for {other}"),
    }
}

/// Programs to drive, and the command each needs installed.
const PROGRAMS: &[(&str, &str)] = &[
    ("vim", "vim"),
    ("less", "less"),
    ("htop", "htop"),
    ("dialog", "dialog"),
    ("bash", "bash"),
    ("python3", "python3"),
    ("man", "man"),
    ("tabs", "tabs"),
    ("top", "top"),
    ("nano", "nano"),
    ("git-pager", "git"),
];

fn installed(command: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(command).is_file()))
}

#[tokio::test]
async fn real_programs_render_as_tmux_does() {
    let Some(mut reference) = Reference::start().await else { return };
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let home = test_dir();
    std::fs::write(home.path().join("notes.txt"), "first line\nsecond line\n").unwrap();
    let numbers: String = (1..=200).map(|i| format!("line number {i}\n")).collect();
    std::fs::write(home.path().join("numbers.txt"), numbers).unwrap();
    let mut results = Vec::new();
    for &(name, command) in PROGRAMS {
        if !installed(command) {
            // nano and the like are optional; CI installs the rest.
            assert!(
                name == "nano" || std::env::var_os("CI").is_none(),
                "{command} is not installed (CI must run it)"
            );
            eprintln!("skipping {name}: {command} is not installed");
            continue;
        }
        // A program that never shows what it is waited for fails its own
        // entry, not the whole run.
        let (mut driver, dir) = (rpc.clone(), home.path().to_path_buf());
        let driven = tokio::spawn(async move { drive(&mut driver, &dir, name).await }).await;
        let (id, snap) = match driven {
            Ok(v) => v,
            Err(e) => {
                let why = e.try_into_panic().map_or_else(
                    |e| e.to_string(),
                    |p| {
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default()
                    },
                );
                results.push((name, Some(format!("{name}: could not drive it: {why}"))));
                continue;
            }
        };
        let bytes = logged_upto(&mut rpc, id, snap.offset).await;
        let r = reference.render(24, 80, &bytes).await;
        show(name, &r);
        results.push((name, compare(name, 80, &snap, &r)));
        rpc.kill(pb::KillRequest { proc: by_id(id) }).await.unwrap();
    }
    let total = results.len();
    let failures = report(results);
    d.stop().await;
    assert_none_failed(&reference, "programs", total, &failures);
}
