//! A real OpenSSH server on loopback for the remote-host tests and the
//! benchmark: `sshd` on a free 127.0.0.1 port with a temporary host key, a
//! temporary user key in a temporary `authorized_keys` (`StrictModes no`),
//! and a client configuration and Portal hosts file that point at it.
//!
//! The "remote" portald is this machine's, on a socket of its own: sshd
//! sets `PORTAL_SOCKET` and `PORTAL_DATA_DIR` in every session it starts
//! (`SetEnv`), so what runs over ssh never meets the test's local daemon.
//! It sets `PORTAL_HOST` too, as a login environment may: the remote end
//! must serve its own daemon whatever that says.
//!
//! The hosts file names `box` (works), `mux` (works, through a shared
//! connection: `ControlMaster auto` in its ssh configuration), and for the
//! error tests `nokey` (a key
//! the server does not accept), `down` (a port nothing listens on),
//! `missing` (no portal-cli at the path given) and `old` (a stand-in for a
//! portal-cli of another protocol version: it answers the handshake with
//! protocol 999, which no real build can be made to say).

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The sshd binary Debian's `openssh-server` installs.
const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd and what points at it. Dropping it stops the remote
/// portald (with its programs) and sshd.
pub struct Sshd {
    /// Its private directory (keys, configurations, the remote socket).
    pub dir: tempfile::TempDir,
    /// The port it listens on.
    pub port: u16,
    /// The Portal hosts file naming it and the failing hosts (for
    /// `PORTAL_HOSTS_FILE`).
    pub hosts_file: PathBuf,
    /// A hosts file naming only `box`.
    pub box_only: PathBuf,
    /// The socket of the portald that sessions reach.
    pub remote_socket: PathBuf,
    /// The client configuration (`ssh -F`) with the accepted key.
    pub ssh_config: PathBuf,
    /// The same with `ControlMaster auto` (its sockets `cm-*` in `dir`).
    pub mux_config: PathBuf,
    /// The login name.
    pub user: String,
    portal_cli: PathBuf,
    child: Child,
}

/// Why no sshd could be started: the message a skipping test prints.
pub type Missing = String;

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)))
    }
}

fn keygen(path: &Path) -> Result<(), String> {
    run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(path))
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

impl Sshd {
    /// Starts sshd; `portal_cli` is the binary sessions run as the remote
    /// side. `Err` says what is missing (sshd or ssh not installed).
    ///
    /// # Errors
    /// When OpenSSH is missing or sshd cannot start.
    ///
    /// # Panics
    /// When sshd does not listen within the test bound.
    pub async fn start(portal_cli: &Path) -> Result<Self, Missing> {
        for needed in [SSHD, "/usr/bin/ssh", "/usr/bin/ssh-keygen"] {
            if !Path::new(needed).exists() {
                return Err(format!(
                    "{needed} is not installed (Debian: openssh-server, openssh-client)"
                ));
            }
        }
        let dir = crate::test_dir();
        let d = dir.path();
        keygen(&d.join("host_key"))?;
        keygen(&d.join("user_key"))?;
        keygen(&d.join("other_key"))?;
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys"))
            .map_err(|e| e.to_string())?;
        let user = String::from_utf8_lossy(
            &Command::new("id").arg("-un").output().map_err(|e| e.to_string())?.stdout,
        )
        .trim()
        .to_owned();
        let port = free_port()?;
        let remote_socket = d.join("r").join("portald.sock");
        // sshd refuses to start without its privilege separation directory.
        if portal_client::user::current() == 0 {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nPidFile {d}/sshd.pid\nLogLevel INFO\n\
                 SetEnv PORTAL_SOCKET={sock} PORTAL_DATA_DIR={d}/rdata PORTAL_HOST=elsewhere\n",
                d = d.display(),
                sock = remote_socket.display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        let client_config = |key: &str| {
            format!(
                "Host *\n  IdentityFile {d}/{key}\n  IdentitiesOnly yes\n  IdentityAgent none\n\
                 UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n",
                d = d.display()
            )
        };
        let ssh_config = d.join("ssh_config");
        std::fs::write(&ssh_config, client_config("user_key")).map_err(|e| e.to_string())?;
        // The same with connection sharing, as users set it up in their own
        // ~/.ssh/config: Portal's ssh must take it as it is.
        let mux_config = d.join("mux_config");
        std::fs::write(
            &mux_config,
            format!(
                "{}  ControlMaster auto\n  ControlPath {}/cm-%C\n  ControlPersist 30\n",
                client_config("user_key"),
                d.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(d.join("other_config"), client_config("other_key"))
            .map_err(|e| e.to_string())?;
        let old = d.join("old-portal-cli");
        std::fs::write(
            &old,
            "#!/bin/sh\necho 'portal-dial-stdio/1 protocol=999 version=99.0.0'\nexec cat >/dev/null\n",
        )
        .map_err(|e| e.to_string())?;
        run(Command::new("chmod").arg("755").arg(&old))?;
        // tcpmux's port, privileged and never listened on here (a free
        // port found now could be taken by a parallel test's sshd).
        let down = 1;
        let entry = |url_port: u16, portal: &Path, config: &str| {
            format!(
                "{{ url = \"ssh://{user}@127.0.0.1:{url_port}\", portal = \"{}\", ssh_args = [\"-F\", \"{}/{config}\"] }}",
                portal.display(),
                d.display()
            )
        };
        let hosts_file = d.join("hosts.toml");
        std::fs::write(
            &hosts_file,
            format!(
                "[hosts]\nbox = {}\nmux = {}\nnokey = {}\ndown = {}\nmissing = {}\nold = {}\n",
                entry(port, portal_cli, "ssh_config"),
                entry(port, portal_cli, "mux_config"),
                entry(port, portal_cli, "other_config"),
                entry(down, portal_cli, "ssh_config"),
                entry(port, Path::new("/nonexistent/portal-cli"), "ssh_config"),
                entry(port, &old, "ssh_config"),
            ),
        )
        .map_err(|e| e.to_string())?;
        let box_only = d.join("box.toml");
        // Settings for every host at the top: `ssh://` URLs take them too.
        std::fs::write(
            &box_only,
            format!(
                "ssh_args = [\"-F\", \"{}\"]\nportal = \"{}\"\n[hosts]\nbox = \"ssh://{user}@127.0.0.1:{port}\"\n",
                ssh_config.display(),
                portal_cli.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its log, for a test that fails, not the test's output.
            .stderr(std::fs::File::create(d.join("sshd.log")).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("{SSHD}: {e}"))?;
        let me = Self {
            dir,
            port,
            hosts_file,
            box_only,
            remote_socket,
            ssh_config,
            mux_config,
            user,
            portal_cli: portal_cli.to_path_buf(),
            child,
        };
        let port = me.port;
        crate::wait_until("sshd to listen", async || {
            tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.ok().map(drop)
        })
        .await;
        Ok(me)
    }

    /// How many logins sshd accepted so far (from its log).
    #[must_use]
    pub fn logins(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("sshd.log"))
            .map_or(0, |log| log.matches("Accepted publickey").count())
    }

    /// `ssh://user@127.0.0.1:port`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("ssh://{}@127.0.0.1:{}", self.user, self.port)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // The remote daemon and its programs, then sshd.
        let _ = Command::new(&self.portal_cli)
            .args(["daemon", "stop"])
            .env("PORTAL_SOCKET", &self.remote_socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        crate::kill_what_outlives(&self.remote_socket);
        // A ControlMaster a test left persisting.
        let _ = Command::new("ssh")
            .arg("-F")
            .arg(&self.mux_config)
            .args(["-O", "exit", "-p", &self.port.to_string(), "-l", &self.user, "127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts sshd (waiting, bounded, until it listens), or says why not: a skip outside CI, a failure under
/// `CI=true` (where `.ci/run` installs OpenSSH).
///
/// # Panics
/// Under `CI=true` when sshd cannot start.
#[must_use]
pub async fn sshd_or_skip(portal_cli: &Path) -> Option<Sshd> {
    match Sshd::start(portal_cli).await {
        Ok(s) => Some(s),
        Err(why) if std::env::var_os("CI").is_some() => panic!("cannot start sshd: {why}"),
        Err(why) => {
            eprintln!("skipping: cannot start sshd: {why}");
            None
        }
    }
}
