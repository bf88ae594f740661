//! What `portal-cli` prints for its caller, and how it ends when nobody
//! reads it any more.
//!
//! SIGPIPE stays ignored (as Rust starts every program), so a write to a
//! connection that broke (portald upgraded under a `read -f`, an ssh link
//! killed) is an error the command handles: it connects again. Were the
//! signal's default action restored, the first write into that dead
//! connection would end the command silently, mid-follow.
//!
//! A closed stdout (`portal-cli ps | head -1`) is different: the command
//! has nothing left to do. [`outln!`] and [`out!`] write there and, on a
//! broken pipe, end the process the way a pipeline expects: killed by
//! SIGPIPE, with nothing on stderr. `clippy::print_stdout` keeps `println!`
//! (which would panic instead) out of the crate.

/// Prints a line to stdout; a closed stdout ends the process ([`closed`]).
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Prints to stdout without a newline; a closed stdout ends the process.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*))
    };
}

/// Writes `args` to stdout and flushes it (see [`finish`]).
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    finish(stdout.write_fmt(args).and_then(|()| stdout.flush()));
}

/// Writes `b` to stdout and flushes it (see [`finish`]).
pub(crate) fn bytes(b: &[u8]) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    finish(stdout.write_all(b).and_then(|()| stdout.flush()));
}

/// The end of a write to stdout: a broken pipe ends the process
/// ([`closed`]); any other error is reported on stderr and ends the command
/// with status 1, since output cut short must not look complete.
pub(crate) fn finish(r: std::io::Result<()>) {
    match r {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => closed(),
        Err(e) => {
            eprintln!("portal-cli: writing to stdout: {e}");
            std::process::exit(1);
        }
    }
}

/// Ends the process as the signal would have: the reader of stdout went
/// away, so the command's work is over.
pub(crate) fn closed() -> ! {
    #[allow(unsafe_code, reason = "signal dispositions have no safe wrapper in std or rustix")]
    // SAFETY: SIG_DFL installs no handler; the signal raised next ends the
    // process, which no other thread depends on surviving.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached: SIGPIPE's default action ends the process.
    std::process::exit(141)
}
