//! Where Portal's files live, shared by `portald`, `portal-shim` and `portal-cli`
//! so that all three agree without configuration.
//!
//! | what | environment | default |
//! |---|---|---|
//! | socket | `PORTAL_SOCKET` | `$XDG_RUNTIME_DIR/portal/portald.sock`, else `<data dir default>/run/portald.sock` (in the home directory, where no other user can create it first), else `/tmp/portal-$UID/portald.sock` |
//! | data dir (database, daemon log) | `PORTAL_DATA_DIR` | `$XDG_STATE_HOME/portal` (`~/.local/state/portal`), macOS: the local data dir |
//! | daemon binary | `PORTAL_DAEMON` | `portald` beside the running executable, else on `PATH` |

use std::path::{Path, PathBuf};

/// Environment variable naming the socket.
pub const ENV_SOCKET: &str = "PORTAL_SOCKET";
/// Environment variable naming the data directory.
pub const ENV_DATA_DIR: &str = "PORTAL_DATA_DIR";
/// Environment variable holding the tracing filter.
pub const ENV_LOG: &str = "PORTAL_LOG";
/// Environment variable naming the daemon binary for auto-start.
pub const ENV_DAEMON: &str = "PORTAL_DAEMON";
/// File name of the socket inside the runtime directory.
pub const SOCKET_FILE: &str = "portald.sock";
/// File name of the database inside the data directory.
pub const DATABASE_FILE: &str = "portal.db";
/// File name of the auto-started daemon's log inside the data directory.
pub const DAEMON_LOG_FILE: &str = "portald.log";
/// `sun_path` in `struct sockaddr_un` holds 108 bytes including the NUL.
#[cfg(unix)]
pub const MAX_SOCKET_PATH_BYTES: usize = 107;
/// A pipe name (`\\.\pipe\…`) may be 256 characters long.
#[cfg(windows)]
pub const MAX_SOCKET_PATH_BYTES: usize = 256;

fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("dev", "portal", "portal")
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The runtime directory for the socket: `$XDG_RUNTIME_DIR/portal`; where
/// there is none (`su -`, cron, ssh without a session, macOS), `run` in the
/// default data directory under the home directory, which no other user can
/// create first (a shared `/tmp` path can be); `/tmp/portal-$UID` only
/// without a home directory (the daemon then refuses a directory someone
/// else owns).
#[must_use]
pub fn runtime_dir() -> PathBuf {
    project_dirs()
        .and_then(|d| d.runtime_dir().map(Path::to_path_buf))
        .unwrap_or_else(|| default_data_dir().join("run"))
}

/// The socket a client's `--socket` flag named, which wins over
/// [`ENV_SOCKET`] for the rest of the process ([`set_socket`]).
static SOCKET_FLAG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The data directory a client's `--data-dir` flag named ([`set_data_dir`]).
static DATA_DIR_FLAG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `path` the socket of this process, as its `--socket` flag: it wins
/// over `PORTAL_SOCKET`. Only the first call counts.
pub fn set_socket(path: PathBuf) {
    let _ = SOCKET_FLAG.set(path);
}

/// Makes `path` the data directory of this process (and of a daemon it
/// starts), as its `--data-dir` flag: it wins over `PORTAL_DATA_DIR`. Only
/// the first call counts.
pub fn set_data_dir(path: PathBuf) {
    let _ = DATA_DIR_FLAG.set(path);
}

/// The socket path: the `--socket` flag ([`set_socket`]), else
/// `PORTAL_SOCKET`, else [`runtime_dir`]`/portald.sock`.
/// On Windows the default is the named pipe `\\.\pipe\portald-<SID>`:
/// one per user, and no other user can serve it unnoticed (the client
/// checks the server's SID before it sends anything).
#[must_use]
pub fn socket_path() -> PathBuf {
    SOCKET_FLAG.get().cloned().or_else(|| env_path(ENV_SOCKET)).unwrap_or_else(default_socket)
}

#[cfg(unix)]
fn default_socket() -> PathBuf {
    runtime_dir().join(SOCKET_FILE)
}

#[cfg(windows)]
fn default_socket() -> PathBuf {
    PathBuf::from(format!(r"\\.\pipe\portald-{}", crate::user::current()))
}

/// The data directory this process was given: the `--data-dir` flag
/// ([`set_data_dir`]), else `PORTAL_DATA_DIR`; `None` for the default.
#[must_use]
pub fn data_dir_given() -> Option<PathBuf> {
    DATA_DIR_FLAG.get().cloned().or_else(|| env_path(ENV_DATA_DIR))
}

/// The data directory: [`data_dir_given`], else the XDG state dir.
#[must_use]
pub fn data_dir() -> PathBuf {
    data_dir_given().unwrap_or_else(default_data_dir)
}

fn default_data_dir() -> PathBuf {
    match project_dirs() {
        Some(d) => {
            d.state_dir().map_or_else(|| d.data_local_dir().to_path_buf(), Path::to_path_buf)
        }
        None => PathBuf::from(format!("/tmp/portal-{}", crate::user::current())).join("state"),
    }
}

/// The daemon binary to auto-start: `PORTAL_DAEMON`, else `portald` beside the
/// current executable, else `portald` on `PATH`. `None` when none exists.
#[must_use]
pub fn daemon_binary() -> Option<PathBuf> {
    if let Some(p) = env_path(ENV_DAEMON) {
        return Some(p);
    }
    let beside = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?;
        // Test binaries live in target/<profile>/deps; the daemon one level up.
        let name = exe_name("portald");
        [dir.join(&name), dir.parent()?.join(&name)].into_iter().find(|p| p.is_file())
    });
    beside.or_else(|| find_on_path("portald"))
}

/// The holder binary the daemon starts (`portal-holder`): `PORTAL_HOLDER`,
/// else beside the current executable (or one level up, from a test
/// binary), else on `PATH`. `None` when none exists.
#[must_use]
pub fn holder_binary() -> Option<PathBuf> {
    if let Some(p) = env_path("PORTAL_HOLDER") {
        return Some(p);
    }
    let beside = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?;
        let name = exe_name("portal-holder");
        [dir.join(&name), dir.parent()?.join(&name)].into_iter().find(|p| p.is_file())
    });
    beside.or_else(|| find_on_path("portal-holder"))
}

/// The file name of Portal's executable `stem` on this platform
/// (`portald`, `portald.exe`).
fn exe_name(stem: &str) -> String {
    format!("{stem}{}", std::env::consts::EXE_SUFFIX)
}

/// Looks `name` up on `PATH` like `execvp` would (executable regular files only).
#[cfg(unix)]
#[must_use]
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Looks `name` up on `PATH` like `cmd.exe` would: a name without an
/// extension is tried with each of `PATHEXT`'s (`.COM;.EXE;.BAT;.CMD` when
/// unset); Windows has no execute bit.
#[cfg(windows)]
#[must_use]
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let candidates = with_extensions(name);
    std::env::split_paths(&path)
        .flat_map(|dir| candidates.iter().map(move |n| dir.join(n)).collect::<Vec<_>>())
        .find(|p| p.is_file())
}

/// `name` as Windows would try it: as given when it has an extension, else
/// with each of `PATHEXT`'s.
#[cfg(windows)]
#[must_use]
pub fn with_extensions(name: &str) -> Vec<String> {
    if Path::new(name).extension().is_some() {
        return vec![name.to_owned()];
    }
    let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".to_owned());
    exts.split(';').filter(|e| !e.is_empty()).map(|e| format!("{name}{e}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_dir_is_never_empty() {
        assert!(!runtime_dir().as_os_str().is_empty());
        assert!(socket_path().ends_with(SOCKET_FILE) || std::env::var_os(ENV_SOCKET).is_some());
    }

    #[cfg(unix)]
    #[test]
    fn path_lookup_finds_sh() {
        assert!(find_on_path("sh").is_some());
        assert!(find_on_path("portal-no-such-program-xyz").is_none());
    }
}
