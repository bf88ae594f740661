//! Signal names and numbers: `"SIGINT"`, `"INT"`, `"int"`, `"2"`, `"RTMIN+3"`.
//!
//! Portal delivers exactly the signal asked for, in both modes, to the
//! program's process group.

/// Linux signal names (without `SIG`) and numbers, canonical name first where
/// two names share a number. Hand-written: `nix`'s and `rustix`'s signal
/// types name no real-time signal (`SIGRTMIN+3`), which Portal delivers.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("POLL", libc::SIGPOLL),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// Real-time signal range on Linux with glibc (SIGRTMIN is 34 after the two
/// signals glibc reserves for threads); the kernel's limit is 64.
const RT_MIN: i32 = 34;
const RT_MAX: i32 = 64;

/// A signal that cannot be parsed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal {0:?}: use a name like SIGINT, INT or TERM, or a number from 1 to 64")]
pub(crate) struct UnknownSignal(pub(crate) String);

/// Parses a signal name or number.
pub(crate) fn parse(input: &str) -> Result<i32, UnknownSignal> {
    let unknown = || UnknownSignal(input.to_owned());
    let s = input.trim();
    if let Ok(n) = s.parse::<i32>() {
        return if (1..=RT_MAX).contains(&n) { Ok(n) } else { Err(unknown()) };
    }
    let upper = s.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(&(_, n)) = SIGNALS.iter().find(|(name, _)| *name == bare) {
        return Ok(n);
    }
    let rt = |rest: &str, base: i32, sign: i32| -> Option<i32> {
        let off =
            if rest.is_empty() { 0 } else { rest.strip_prefix(['+', '-'])?.parse::<i32>().ok()? };
        let n = base + sign * off;
        (RT_MIN..=RT_MAX).contains(&n).then_some(n)
    };
    if let Some(rest) = bare.strip_prefix("RTMIN") {
        let sign = if rest.starts_with('-') { -1 } else { 1 };
        return rt(rest, RT_MIN, sign).ok_or_else(unknown);
    }
    if let Some(rest) = bare.strip_prefix("RTMAX") {
        let sign = if rest.starts_with('+') { 1 } else { -1 };
        return rt(rest, RT_MAX, sign).ok_or_else(unknown);
    }
    Err(unknown())
}

/// Canonical name of a signal number (`"SIGINT"`, `"SIGRTMIN+3"`).
pub(crate) fn name(n: i32) -> String {
    if let Some((name, _)) = SIGNALS.iter().find(|(_, v)| *v == n) {
        return format!("SIG{name}");
    }
    if (RT_MIN..=RT_MAX).contains(&n) {
        return if n == RT_MIN { "SIGRTMIN".into() } else { format!("SIGRTMIN+{}", n - RT_MIN) };
    }
    format!("signal {n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_case() {
        for (input, want) in [
            ("SIGINT", 2),
            ("INT", 2),
            ("int", 2),
            ("sigterm", 15),
            ("9", 9),
            (" 15 ", 15),
            ("SIGWINCH", 28),
            ("USR1", 10),
            ("RTMIN", 34),
            ("SIGRTMIN+3", 37),
            ("RTMAX", 64),
            ("RTMAX-1", 63),
        ] {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejects_unknown_and_out_of_range() {
        for input in ["", "SIGFOO", "0", "65", "-1", "RTMIN+40", "CTRL_C_EVENT", "SIG"] {
            assert!(parse(input).is_err(), "{input}");
        }
    }

    #[test]
    fn canonical_names() {
        assert_eq!(name(2), "SIGINT");
        assert_eq!(name(17), "SIGCHLD");
        assert_eq!(name(6), "SIGABRT");
        assert_eq!(name(37), "SIGRTMIN+3");
    }
}
