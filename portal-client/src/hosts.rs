//! Which portald a client talks to: this machine's ([`Target::Local`]) or
//! another machine's over SSH ([`Target::Remote`]), named by an
//! `ssh://[user@]host[:port]` URL or by a name from the hosts file.
//!
//! The hosts file (`PORTAL_HOSTS_FILE`, default
//! `~/.config/portal/hosts.toml`) names hosts; a missing file names none:
//!
//! ```toml
//! ssh_args = ["-F", "/home/me/.ssh/portal_config"]   # optional, for every host
//! portal = "/opt/portal/bin/portal-cli"              # optional, for every host
//!
//! [hosts]
//! staging = "ssh://deploy@staging.example.com"       # a name and its URL
//! build = { url = "ssh://build:2222", portal = "/opt/portal/bin/portal-cli" }
//! ```
//!
//! `portal` is the command run on the remote side (default `portal-cli`,
//! found on the remote login PATH); `ssh_args` go to `ssh` before the
//! destination. Both may be given for every host at the top (and apply to
//! `ssh://` URLs given on the command line too) and per host, which wins. The names `local` and `all` are reserved: `local` is this
//! machine, `all` is every host at once where a command lists.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

/// Environment variable naming the default host of every command.
pub const ENV_HOST: &str = "PORTAL_HOST";
/// Environment variable naming the hosts file.
pub const ENV_HOSTS_FILE: &str = "PORTAL_HOSTS_FILE";
/// Environment variable naming the `ssh` program (default `ssh` on `PATH`).
pub const ENV_SSH: &str = "PORTAL_SSH";
/// The name of this machine wherever a host is named.
pub const LOCAL: &str = "local";
/// The name of every host at once, where a command lists.
pub const ALL: &str = "all";
/// The command run on a remote host when its entry names none.
pub const DEFAULT_REMOTE_PORTAL: &str = "portal-cli";

/// A host that could not be named or a hosts file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    /// Not an `ssh://` URL of the form Portal takes.
    #[error(
        "invalid host URL {url:?}: {reason}; write ssh://[user@]host[:port] or a name from the hosts file"
    )]
    BadUrl {
        /// What was given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A name the hosts file does not have.
    #[error("unknown host {name:?}: {known}")]
    Unknown {
        /// The name given.
        name: String,
        /// The names that exist, or where to add one.
        known: String,
    },
    /// The hosts file exists but cannot be read or parsed.
    #[error("cannot read the hosts file {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why (a TOML error names the line).
        reason: String,
    },
}

/// `ssh://[user@]host[:port]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshUrl {
    /// The login name, when given (else ssh's default).
    pub user: Option<String>,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// The port, when given (else ssh's default).
    pub port: Option<u16>,
}

impl FromStr for SshUrl {
    type Err = HostsError;

    fn from_str(url: &str) -> Result<Self, HostsError> {
        let bad = |reason: &str| HostsError::BadUrl { url: url.to_owned(), reason: reason.into() };
        let rest =
            url.strip_prefix("ssh://").ok_or_else(|| bad("it does not start with ssh://"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('?') || rest.contains('#') {
            return Err(bad("a host URL has no path, query or fragment"));
        }
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() => (Some(u.to_owned()), h),
            Some(_) => return Err(bad("the user before @ is empty")),
            None => (None, rest),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed ["))?;
            match after {
                "" => (h, None),
                p => (h, Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ]"))?)),
            }
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(bad("the host is empty"));
        }
        // Refused so that nothing given here can reach ssh as an option.
        if host.starts_with('-') || user.as_deref().is_some_and(|u| u.starts_with('-')) {
            return Err(bad("a host or user may not start with -"));
        }
        // Only what host names, addresses and login names are made of:
        // ssh expands `%` tokens and some configurations hand the host and
        // user to a shell (ProxyCommand, Match exec).
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
        let v6 = hostport.starts_with('[');
        if !host.chars().all(|c| plain(c) || (v6 && c == ':')) {
            return Err(bad("the host may hold only letters, digits, '.', '-' and '_'"));
        }
        if user.as_deref().is_some_and(|u| !u.chars().all(plain)) {
            return Err(bad("the user may hold only letters, digits, '.', '-' and '_'"));
        }
        let port = port
            .map(|p| p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| bad("bad port")))
            .transpose()?;
        Ok(Self { user, host: host.to_owned(), port })
    }
}

impl fmt::Display for SshUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ssh://")?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// A remote host and how to reach its portald.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// What messages and listings call it: its name in the hosts file, or
    /// its URL when it was given as one.
    pub label: String,
    /// Where it is.
    pub url: SshUrl,
    /// The command run there (`portal-cli`, or a path).
    pub portal: String,
    /// Options given to `ssh` before the destination.
    pub ssh_args: Vec<String>,
}

/// The command a person runs to type a secret into process `id` on
/// `host` (`None`: this machine): `HOST:ID` for a named host, `--host URL`
/// for one given as a URL (whose `:` would not split).
#[must_use]
pub fn secret_command(host: Option<&str>, id: &str) -> String {
    match host {
        None => format!("portal-cli secret {id}"),
        Some(h) if h.contains("://") => format!("portal-cli --host {h} secret {id}"),
        Some(h) => format!("portal-cli secret {h}:{id}"),
    }
}

/// `word` quoted for a POSIX shell where it needs it (for commands shown
/// to a person).
#[must_use]
pub fn shell_quote(word: &str) -> String {
    shell_words::quote(word).into_owned()
}

impl Remote {
    /// The `ssh` command a person types to reach this host as Portal does
    /// (its options and destination), for hints.
    #[must_use]
    pub fn ssh_command(&self) -> String {
        let mut words = vec!["ssh".to_owned()];
        words.extend(self.ssh_args.iter().map(|a| shell_words::quote(a).into_owned()));
        if let Some(p) = self.url.port {
            words.extend(["-p".to_owned(), p.to_string()]);
        }
        match &self.url.user {
            Some(u) => {
                words.push(shell_words::quote(&format!("{u}@{}", self.url.host)).into_owned())
            }
            None => words.push(shell_words::quote(&self.url.host).into_owned()),
        }
        words.join(" ")
    }
}

/// Which portald a command talks to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// This machine's, over its Unix socket.
    Local,
    /// Another machine's, over `ssh … portal-cli dial-stdio`.
    Remote(Remote),
}

impl Target {
    /// `local`, or the remote's label.
    #[must_use]
    pub fn label(&self) -> &str {
        match self {
            Target::Local => LOCAL,
            Target::Remote(r) => &r.label,
        }
    }

    /// Whether this is this machine.
    #[must_use]
    pub fn is_local(&self) -> bool {
        matches!(self, Target::Local)
    }
}

/// One entry of `[hosts]` written as a table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryTable {
    url: String,
    #[serde(default)]
    portal: Option<String>,
    #[serde(default)]
    ssh_args: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    ssh_args: Vec<String>,
    #[serde(default)]
    portal: Option<String>,
    /// Each entry is a URL or an [`EntryTable`]; kept as written, with
    /// where it was, so that an error names its line.
    #[serde(default)]
    hosts: BTreeMap<toml::Spanned<String>, toml::Spanned<toml::Value>>,
}

/// The line of byte `offset` in `text`, counting from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(0, |t| t.matches('\n').count()) + 1
}

/// The hosts file, read.
#[derive(Clone, Debug, Default)]
pub struct Hosts {
    path: PathBuf,
    ssh_args: Vec<String>,
    portal: Option<String>,
    hosts: BTreeMap<String, Remote>,
}

/// Where the hosts file is: `PORTAL_HOSTS_FILE`, else
/// `$XDG_CONFIG_HOME/portal/hosts.toml` (`~/.config/portal/hosts.toml`).
#[must_use]
pub fn hosts_file() -> PathBuf {
    if let Some(p) = std::env::var_os(ENV_HOSTS_FILE).filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    config.join("portal").join("hosts.toml")
}

impl Hosts {
    /// Reads [`hosts_file`]; a missing file names no host.
    ///
    /// # Errors
    /// [`HostsError::File`] when it exists but cannot be read or parsed.
    pub fn load() -> Result<Self, HostsError> {
        let path = hosts_file();
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Self { path, ..Self::default() })
            }
            Err(e) => Err(HostsError::File { path, reason: e.to_string() }),
        }
    }

    /// Parses a hosts file's text (`path` is for messages).
    ///
    /// # Errors
    /// [`HostsError::File`] naming the line of a TOML error, an unknown
    /// key, a reserved name or a bad URL.
    pub fn parse(path: PathBuf, text: &str) -> Result<Self, HostsError> {
        let file_error = |reason: String| HostsError::File { path: path.clone(), reason };
        let file: File = toml::from_str(text).map_err(|e| file_error(e.to_string()))?;
        let mut hosts = BTreeMap::new();
        for (name, entry) in file.hosts {
            let line = line_of(text, name.span().start);
            let name = name.into_inner();
            let at = |reason: String| file_error(format!("line {line}: [hosts] {name}: {reason}"));
            if name == LOCAL || name == ALL {
                return Err(at(format!("the name {name:?} is reserved; pick another")));
            }
            if name.is_empty() || name.contains(':') || name.chars().any(char::is_whitespace) {
                return Err(at("a host name may not be empty or hold ':' or spaces".into()));
            }
            let (url, portal, extra) = match entry.into_inner() {
                toml::Value::String(url) => (url, None, Vec::new()),
                table @ toml::Value::Table(_) => {
                    let t: EntryTable = table.try_into().map_err(|e| at(e.message().to_owned()))?;
                    (t.url, t.portal, t.ssh_args)
                }
                other => {
                    return Err(at(format!(
                        "{} where an ssh:// URL or a table {{ url = \"ssh://…\", portal = \"…\", ssh_args = [\"…\"] }} goes",
                        match other.type_str() {
                            t @ ("integer" | "array") => format!("an {t}"),
                            t => format!("a {t}"),
                        }
                    )));
                }
            };
            let url = url.parse::<SshUrl>().map_err(|e| match e {
                HostsError::BadUrl { url, reason } => {
                    at(format!("invalid URL {url:?}: {reason}; write ssh://[user@]host[:port]"))
                }
                other => at(other.to_string()),
            })?;
            let ssh_args = file.ssh_args.iter().cloned().chain(extra).collect();
            let portal = portal
                .or_else(|| file.portal.clone())
                .unwrap_or_else(|| DEFAULT_REMOTE_PORTAL.to_owned());
            hosts.insert(name.clone(), Remote { label: name, url, portal, ssh_args });
        }
        Ok(Self { path, ssh_args: file.ssh_args, portal: file.portal, hosts })
    }

    /// The named hosts, by name.
    pub fn remotes(&self) -> impl Iterator<Item = &Remote> {
        self.hosts.values()
    }

    /// Whether `name` is `local` or a host of the file.
    #[must_use]
    pub fn knows(&self, name: &str) -> bool {
        name == LOCAL || self.hosts.contains_key(name)
    }

    /// The target `spec` names: `local`, a name from the file, or an
    /// `ssh://` URL (which takes the file's `ssh_args`).
    ///
    /// # Errors
    /// [`HostsError::Unknown`] or [`HostsError::BadUrl`].
    pub fn resolve(&self, spec: &str) -> Result<Target, HostsError> {
        let spec = spec.trim();
        if spec.is_empty() || spec == LOCAL {
            return Ok(Target::Local);
        }
        if spec.starts_with("ssh://") {
            let url = spec.parse::<SshUrl>()?;
            return Ok(Target::Remote(Remote {
                label: url.to_string(),
                url,
                portal: self.portal.clone().unwrap_or_else(|| DEFAULT_REMOTE_PORTAL.to_owned()),
                ssh_args: self.ssh_args.clone(),
            }));
        }
        self.hosts
            .get(spec)
            .cloned()
            .map(Target::Remote)
            .ok_or_else(|| HostsError::Unknown { name: spec.to_owned(), known: self.known_names() })
    }

    /// Splits `host:proc` when `host` is a known host name; anything else
    /// (a process name that happens to hold a colon) is all process.
    #[must_use]
    pub fn split_proc<'a>(&self, proc: &'a str) -> (Option<&'a str>, &'a str) {
        match proc.split_once(':') {
            Some((host, rest)) if !rest.is_empty() && self.knows(host) => (Some(host), rest),
            _ => (None, proc),
        }
    }

    /// What an unknown-host error lists.
    fn known_names(&self) -> String {
        if self.hosts.is_empty() {
            let what = if self.path.exists() {
                "no hosts are named in"
            } else {
                "there is no hosts file at"
            };
            format!(
                "{what} {}; add a host under [hosts] (name = \"ssh://user@host\") or give an ssh:// URL",
                self.path.display()
            )
        } else {
            let names: Vec<&str> = self.hosts.keys().map(String::as_str).collect();
            format!("the hosts are local, {} (from {})", names.join(", "), self.path.display())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]
    use super::*;

    #[test]
    fn urls_parse_and_print_back() {
        for (text, user, host, port) in [
            ("ssh://h", None, "h", None),
            ("ssh://me@h.example:2222", Some("me"), "h.example", Some(2222)),
            ("ssh://[::1]:22", None, "::1", Some(22)),
        ] {
            let url: SshUrl = text.parse().unwrap();
            assert_eq!(
                (url.user.as_deref(), url.host.as_str(), url.port),
                (user, host, port),
                "{text}"
            );
            assert_eq!(url.to_string().parse::<SshUrl>().unwrap(), url);
        }
        for bad in [
            "h",
            "ssh://",
            "ssh://@h",
            "ssh://h:0",
            "ssh://h:x",
            "ssh://-oProxyCommand=x",
            "ssh://h/path",
            "ssh://h o",
            "ssh://h$(id)",
            "ssh://u;x@h",
            "ssh://%h",
            "ssh://a@b@h",
        ] {
            let err = bad.parse::<SshUrl>().unwrap_err().to_string();
            assert!(err.contains("ssh://[user@]host[:port]"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_file_names_hosts_and_refuses_what_it_cannot_mean() {
        let text = r#"
ssh_args = ["-F", "/cfg"]
portal = "/usr/local/bin/portal-cli"
[hosts]
a = "ssh://u@a:2200"
b = { url = "ssh://b", portal = "/opt/portal-cli", ssh_args = ["-i", "/k"] }
"#;
        let hosts = Hosts::parse("h.toml".into(), text).unwrap();
        let Target::Remote(b) = hosts.resolve("b").unwrap() else { panic!("b is remote") };
        assert_eq!(b.portal, "/opt/portal-cli");
        assert_eq!(b.ssh_args, ["-F", "/cfg", "-i", "/k"]);
        let Target::Remote(a) = hosts.resolve("a").unwrap() else { panic!("a is remote") };
        assert_eq!((a.portal.as_str(), a.url.port), ("/usr/local/bin/portal-cli", Some(2200)));
        assert_eq!(hosts.resolve("local").unwrap(), Target::Local);
        let Target::Remote(url) = hosts.resolve("ssh://x").unwrap() else { panic!("remote") };
        assert_eq!((url.label.as_str(), url.ssh_args.as_slice()), ("ssh://x", &b.ssh_args[..2]));
        assert_eq!(url.portal, "/usr/local/bin/portal-cli");
        assert_eq!(a.ssh_command(), "ssh -F /cfg -p 2200 u@a");
        let bare = Hosts::parse("h.toml".into(), "").unwrap();
        let Target::Remote(url) = bare.resolve("ssh://x").unwrap() else { panic!("remote") };
        assert_eq!(url.portal, DEFAULT_REMOTE_PORTAL);
        let err = hosts.resolve("c").unwrap_err().to_string();
        assert!(err.contains("unknown host \"c\"") && err.contains("local, a, b"), "{err}");
        assert_eq!(hosts.split_proc("a:7"), (Some("a"), "7"));
        assert_eq!(hosts.split_proc("local:web"), (Some("local"), "web"));
        assert_eq!(hosts.split_proc("x:7"), (None, "x:7"));
        assert_eq!(hosts.split_proc("a:"), (None, "a:"));

        for (bad, says) in [
            (
                "[hosts]\nlocal = \"ssh://h\"",
                "line 2: [hosts] local: the name \"local\" is reserved",
            ),
            (
                "[hosts]\na = { url = \"ssh://h\", port = 2 }",
                "line 2: [hosts] a: unknown field `port`",
            ),
            ("\n[hosts]\nb = \"ssh://b\"\na = \"h\"", "line 4: [hosts] a: invalid URL \"h\""),
            ("[hosts]\na = 1", "line 2: [hosts] a: an integer where an ssh:// URL"),
            ("sh_args = []", "unknown field"),
        ] {
            let err = Hosts::parse("h.toml".into(), bad).unwrap_err().to_string();
            assert!(err.contains("h.toml") && err.contains(says), "{bad}: {err}");
        }
    }
}
