//! Writing to a closed pipe ends `portal-cli` quietly, like every other
//! Unix tool: `portal-cli ps | head -1` must not panic.
//!
//! Rust programs start with SIGPIPE ignored, so a write to a closed pipe
//! returns EPIPE and `println!` panics on it. The default action (end the
//! process with SIGPIPE) is what a pipeline expects.

/// Restores the default action of SIGPIPE.
#[allow(unsafe_code, reason = "signal dispositions have no safe wrapper in std")]
pub(crate) fn restore_default() {
    // SAFETY: called first thing in main, before any thread is started;
    // SIG_DFL is a valid disposition for SIGPIPE and no handler is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
