//! The `portal-holder` binary. `portald` runs `portal-holder --socket PATH`
//! when no holder answers there: this launcher starts the holder proper
//! (`--serve`) in a process group of its own, waits until it listens, and
//! exits, so the holder is nobody's child but init's (or a service
//! manager's) and outlives the daemon that started it.

use std::io::{BufRead as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;

/// What the holder proper prints on stdout once it listens.
const READY: &str = "ready";

fn main() -> std::process::ExitCode {
    let mut args = std::env::args_os().skip(1);
    let mut socket: Option<PathBuf> = None;
    let mut serve = false;
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--socket") => socket = args.next().map(PathBuf::from),
            Some("--serve") => serve = true,
            _ => {
                eprintln!(
                    "portal-holder: unknown argument {a:?}; usage: portal-holder --socket PATH"
                );
                return std::process::ExitCode::from(2);
            }
        }
    }
    let Some(socket) = socket else {
        eprintln!("portal-holder: --socket PATH is required");
        return std::process::ExitCode::from(2);
    };
    let result = if serve { serve_at(&socket) } else { launch(&socket) };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("portal-holder: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Starts the holder proper and waits until it listens.
fn launch(socket: &std::path::Path) -> std::io::Result<()> {
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("--serve")
        .arg("--socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .process_group(0)
        .spawn()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        std::io::BufReader::new(out).read_line(&mut line)?;
    }
    if line.trim() == READY {
        // Not waited for: it lives on, and init reaps it when it ends.
        Ok(())
    } else {
        let status = child.wait()?;
        Err(std::io::Error::other(format!("the holder did not start ({status})")))
    }
}

/// Serves at `socket`, unless another holder already does.
fn serve_at(socket: &std::path::Path) -> std::io::Result<()> {
    // `<socket>.lock` beside it (appended: the socket's own name may have a
    // dot that with_extension would replace, giving another file's name).
    let mut lock_name = socket.as_os_str().to_owned();
    lock_name.push(".lock");
    let lock_path = PathBuf::from(lock_name);
    let mut out = std::io::stdout();
    let Some(lock) = portal_holder::door::take_lock(&lock_path)? else {
        // Another holder serves here; the daemon connects to it.
        writeln!(out, "{READY}")?;
        return Ok(());
    };
    // Under the lock, a socket file can only be a dead holder's.
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = std::os::unix::net::UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    let address = portal_holder::door::Address::new(socket, &lock_path, lock)?;
    let holder = portal_holder::serve::Holder::new(listener)?.at(address);
    writeln!(out, "{READY}")?;
    out.flush()?;
    // Nothing more goes to a launcher that has gone, nor to the terminal or
    // log of whoever started the daemon: stdout and stderr become /dev/null.
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let _ = rustix::stdio::dup2_stdout(&null);
    let _ = rustix::stdio::dup2_stderr(&null);
    // The socket file goes only if it is still this holder's (one bound
    // again after a wipe is; another holder's never).
    if let Some(address) = holder.run() {
        address.remove();
    }
    Ok(())
}
