//! Property-based fuzzing of every parser that takes untrusted bytes or
//! text: the ANSI text renderer, the OSC scanner and agent-signal parser,
//! the terminal screen, the key-name parser and request conversion.
//!
//! Each property says more than "does not panic": chunk boundaries never
//! change a result, what is rendered carries no escapes, what is accepted
//! satisfies the invariants the daemon relies on. The normal test run tries
//! a few hundred cases per target; a long run is one command:
//!
//! ```text
//! PROPTEST_CASES=100000 cargo test --release -p portald --lib fuzz::
//! ```

use proptest::prelude::*;

use crate::agents::signals;
use crate::ansi::TextRenderer;
use crate::config::{MAX_TERM_DIM, MIN_TERM_DIM};
use crate::grpc::convert;
use crate::osc::OscScanner;
use crate::proc::keys::{self, CursorMode};
use crate::proc::{ProcId, Stdio, TermSize};
use portal_proto::v1 as pb;

/// Bytes biased towards what terminals emit: escapes, CSI/OSC
/// introducers, terminators, UTF-8 lead and continuation bytes, text.
fn terminal_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"\x1b".to_vec()),
        Just(b"\x1b[".to_vec()),
        Just(b"\x1b]".to_vec()),
        Just(b"\x1b]133;D;0\x07".to_vec()),
        Just(b"\x1b]3008;portal=1;state=done\x1b\\".to_vec()),
        Just(b"\x07".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\x08".to_vec()),
        Just(b"?1049h".to_vec()),
        Just(b";".to_vec()),
        Just("é€😀".as_bytes().to_vec()),
        Just(vec![0xe2, 0x82]),
        Just(vec![0x80, 0xbf, 0xff]),
        proptest::collection::vec(b' '..=b'~', 0..12),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn render(chunks: &[&[u8]]) -> String {
    let mut r = TextRenderer::new();
    for c in chunks {
        r.push(c);
    }
    r.finish()
}

fn scan(chunks: &[&[u8]]) -> Vec<crate::osc::TermSignal> {
    let mut s = OscScanner::default();
    let mut out = Vec::new();
    for c in chunks {
        s.scan(c, &mut out);
    }
    out
}

proptest! {
    #[test]
    fn ansi_text_ignores_chunk_boundaries_and_carries_no_escapes(
        bytes in terminal_bytes(),
        cut in any::<prop::sample::Index>(),
    ) {
        let at = cut.index(bytes.len() + 1);
        let whole = render(&[&bytes]);
        prop_assert_eq!(&whole, &render(&[&bytes[..at], &bytes[at..]]));
        prop_assert!(!whole.contains('\x1b'), "escape in rendered text: {whole:?}");
        prop_assert!(!whole.contains('\r'), "carriage return in rendered text: {whole:?}");
    }

    #[test]
    fn ansi_text_keeps_plain_lines(lines in proptest::collection::vec("[ -~]{0,40}", 0..8)) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let rendered = render(&[text.as_bytes()]);
        // Trailing spaces are the only thing a renderer may drop.
        let trimmed: Vec<&str> = rendered.lines().map(str::trim_end).collect();
        let expected: Vec<&str> = lines.iter().map(|l| l.trim_end()).collect();
        prop_assert_eq!(trimmed, expected);
    }

    #[test]
    fn osc_scanning_ignores_chunk_boundaries(
        bytes in terminal_bytes(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut prev = 0;
        for p in points {
            chunks.push(&bytes[prev..p]);
            prev = p;
        }
        chunks.push(&bytes[prev..]);
        prop_assert_eq!(scan(&[&bytes]), scan(&chunks));
    }

    #[test]
    fn agent_signals_parse_any_body_and_round_trip_portal_records(
        body in proptest::collection::vec(any::<u8>(), 0..200),
        state in prop::sample::select(portal_client::vocab::AgentState::ALL.to_vec()),
        name in "[^\\x00]{0,30}",
    ) {
        let _ = signals::from_osc(&body);
        let osc = portal_client::osc3008::encode(state.as_str(), &[("name", &name)]);
        // The body sits between "ESC ]" and the "ESC \" terminator.
        let inner = &osc.as_bytes()[2..osc.len() - 2];
        let report = signals::from_osc(inner);
        prop_assert!(report.is_some(), "a Portal record was not recognised: {osc:?}");
    }

    #[test]
    fn the_screen_takes_any_bytes_at_any_size(
        bytes in terminal_bytes(),
        rows in 0u16..300,
        cols in 0u16..300,
    ) {
        let snap = crate::screen::replay(ProcId(1), TermSize { rows, cols }, &bytes, 0);
        prop_assert!(snap.size.rows >= MIN_TERM_DIM && snap.size.cols >= MIN_TERM_DIM);
        prop_assert_eq!(snap.lines.len(), usize::from(snap.size.rows));
        prop_assert!(snap.cursor.0 < snap.size.rows && snap.cursor.1 <= snap.size.cols);
        prop_assert_eq!(snap.offset, bytes.len() as u64);
    }

    #[test]
    fn key_names_parse_or_fail_cleanly(name in ".{0,40}|(M-){0,30}[a-zA-Z]") {
        for mode in [CursorMode::Normal, CursorMode::Application] {
            if let Ok(bytes) = keys::parse(&name, mode) {
                prop_assert!(!bytes.is_empty(), "{name:?} sends nothing");
                prop_assert!(name.len() <= 32);
            }
        }
    }

    #[test]
    fn control_keys_are_one_byte(c in "[a-zA-Z@\\[\\\\\\]^_?]") {
        let bytes = keys::parse(&format!("C-{c}"), CursorMode::Normal);
        prop_assert_eq!(bytes.map(|b| b.len()), Ok(1));
    }

    #[test]
    fn accepted_starts_satisfy_the_spawn_invariants(
        command in ".{0,12}",
        args in proptest::collection::vec(".{0,8}", 0..4),
        env in proptest::collection::btree_map(".{0,6}", ".{0,6}", 0..3),
        name in ".{0,10}",
        timeout_ms in prop_oneof![Just(0u64), any::<u64>()],
        mode in -1i32..4,
        size in proptest::option::of((any::<u32>(), any::<u32>())),
    ) {
        let req = pb::StartRequest {
            command,
            args,
            env: env.into_iter().collect(),
            name,
            timeout_ms,
            mode,
            size: size.map(|(rows, cols)| pb::TermSize { rows, cols }),
            cwd: "/".into(),
            ..Default::default()
        };
        if let Ok(spec) = convert::start_spec(req) {
            prop_assert!(!spec.command.trim().is_empty());
            let no_nul = |s: &str| !s.contains('\0');
            prop_assert!(no_nul(&spec.command) && spec.args.iter().all(|a| no_nul(a)));
            prop_assert!(spec.env.iter().all(|(k, v)| !k.is_empty() && !k.contains('=') && no_nul(k) && no_nul(v)));
            if let Stdio::Pty(s) = spec.stdio {
                prop_assert!((MIN_TERM_DIM..=MAX_TERM_DIM).contains(&s.rows));
                prop_assert!((MIN_TERM_DIM..=MAX_TERM_DIM).contains(&s.cols));
            }
            if let Some(name) = &spec.name {
                prop_assert!(!name.chars().all(|c| c.is_ascii_digit()));
            }
        }
    }

    #[test]
    fn accepted_waits_respect_the_ceiling(
        needle in ".{0,12}",
        regex in any::<bool>(),
        stop in proptest::collection::vec(".{0,6}", 0..3),
        settle_ms in any::<u32>(),
        timeout_ms in any::<u64>(),
        max_bytes in any::<u64>(),
        streams in proptest::collection::vec(-1i32..5, 0..3),
    ) {
        let ceiling = std::time::Duration::from_secs(50);
        let until = pb::WaitCondition { needle, regex, stop, settle_ms, timeout_ms, max_bytes, ..Default::default() };
        if let Ok(spec) = convert::wait_spec(&streams, None, Some(&until), ceiling) {
            prop_assert!(spec.timeout <= ceiling);
            prop_assert!(spec.max_bytes <= crate::config::MAX_READ_BYTES);
            prop_assert!(!spec.streams.is_empty());
        }
    }
}

/// Cases of the costly screen property: an eighth of the others' (each
/// case parses up to hundreds of kilobytes three ways).
fn screen_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(32, |c| (c / 8).max(1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(screen_cases()))]

    #[test]
    fn skipping_scrolled_away_lines_gives_the_same_screen(
        prefix in terminal_bytes(),
        lines in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![
                3 => "[ -~]{0,30}",
                1 => Just("\x1b[31m".to_owned()),
                1 => Just("\x1b[1;42m".to_owned()),
                1 => Just("\x1b[0m".to_owned()),
                1 => Just("\t\x08é".to_owned()),
            ], 0..6).prop_map(|parts| parts.concat()),
            60..3000,
        ),
        tail in "[ -~]{0,20}",
        rows in 2u16..30,
        cols in 2u16..100,
    ) {
        let mut bytes = prefix;
        bytes.extend_from_slice(lines.join("\r\n").as_bytes());
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(tail.as_bytes());
        let size = TermSize { rows, cols };
        let exact = crate::screen::replay_every_byte(size, &bytes, 4096);
        let fast = crate::screen::replay(ProcId(1), size, &bytes, 0);
        prop_assert_eq!(&fast.lines, &exact.lines);
        prop_assert_eq!(fast.cursor, exact.cursor);
        prop_assert_eq!(fast.offset, exact.offset);
        // The same through a live screen that is behind, in 4 KiB feeds.
        let fed = crate::screen::replay_through_feed(size, &bytes, 4096);
        prop_assert_eq!(&fed.lines, &exact.lines);
        prop_assert_eq!(fed.cursor, exact.cursor);
        prop_assert_eq!(fed.offset, exact.offset);
    }
}
