//! Built-in profiles of common interactive programs: whether each needs a
//! PTY and how to drive it, so `program_query` answers on first use. What
//! a user or agent records in the registry wins over a profile (it was
//! learned on this machine); a profile answers only where nothing is
//! recorded.

/// One program's profile.
pub(crate) struct Profile {
    /// Canonical names it answers for (see `convert::canonical_program`).
    pub(crate) names: &'static [&'static str],
    /// Whether it needs a PTY in its usual, interactive use.
    pub(crate) needs_pty: bool,
    /// How to drive it: flags that make it friendlier, how to leave it,
    /// when the other mode is right.
    pub(crate) notes: &'static str,
}

const SECRET: &str = "A password prompt shows as awaiting_secret: ask the person to run `portal-cli secret <id>`, never type it.";

/// The profiles. Notes are short: they reach the model on every query.
static PROFILES: &[Profile] = &[
    Profile {
        names: &["python", "python3", "pypy", "pypy3"],
        needs_pty: true,
        notes: "REPL (prompt `>>> `): start with wait \"input\", then process_run per statement; a block goes in one call. `python3 script.py` without input runs on pipes; `-u` unbuffers output on pipes.",
    },
    Profile {
        names: &["ipython"],
        needs_pty: true,
        notes: "REPL (prompt `In [n]: `); `--simple-prompt --no-banner` gives plain output; process_run per cell.",
    },
    Profile {
        names: &["node", "nodejs", "deno", "bun"],
        needs_pty: true,
        notes: "REPL (prompt `> `) when started without a script; `.exit` leaves. With a script it runs fine on pipes.",
    },
    Profile {
        names: &["irb"],
        needs_pty: true,
        notes: "Ruby REPL; `--simple-prompt --nocolorize` gives plain `>> ` prompts; `exit` leaves.",
    },
    Profile {
        names: &["psql"],
        needs_pty: true,
        notes: "Use `-X` (skip .psqlrc) and env PAGER=cat so results are not paged; prompt `db=# `; `\\q` leaves. A password prompt shows as awaiting_secret: ask the person to run `portal-cli secret <id>`. `-c 'SQL'` one-shots run on pipes.",
    },
    Profile {
        names: &["mysql", "mariadb"],
        needs_pty: true,
        notes: "Prompt `mysql> `/`MariaDB [db]> `; `--pager=cat` or no pager; `exit` leaves. `-p` asks for a password (awaiting_secret: ask the person to run `portal-cli secret <id>`). `-e 'SQL'` one-shots run on pipes.",
    },
    Profile {
        names: &["sqlite3", "sqlite"],
        needs_pty: true,
        notes: "Prompt `sqlite> `; `.headers on` and `.mode box` read well; `.quit` leaves. Send each dot-command in its own process_run (several SQL statements may share one). `sqlite3 file.db 'SQL'` one-shots run on pipes.",
    },
    Profile {
        names: &["redis-cli", "valkey-cli"],
        needs_pty: true,
        notes: "Prompt `host:port> `; `quit` leaves. `redis-cli CMD args` one-shots run on pipes.",
    },
    Profile {
        names: &["mongosh", "mongo"],
        needs_pty: true,
        notes: "Prompt `db> `; `--quiet` drops the banner; `exit` leaves. `--eval 'js'` one-shots run on pipes.",
    },
    Profile {
        names: &["gdb"],
        needs_pty: true,
        notes: "Start with `-q -ex 'set pagination off' -ex 'set confirm off'`; prompt `(gdb) `; the program shares the terminal. `-batch -ex ...` runs on pipes.",
    },
    Profile {
        names: &["lldb"],
        needs_pty: true,
        notes: "Prompt `(lldb) `; `-b -o CMD` runs a batch on pipes.",
    },
    Profile {
        names: &["pdb", "ghci", "erl", "iex", "ocaml", "utop", "r", "julia", "lua", "scala"],
        needs_pty: true,
        notes: "A REPL: start with wait \"input\", then process_run per expression.",
    },
    Profile {
        names: &["ssh", "mosh", "telnet", "sftp", "ftp"],
        needs_pty: true,
        notes: "Needs a terminal for its prompts and remote shells (`ssh -t host cmd` for a remote TUI). A password or passphrase prompt shows as awaiting_secret: ask the person to run `portal-cli secret <id>`. `-o BatchMode=yes` fails at once instead of prompting; a first connection may ask to trust the host key (answer `yes` with process_run).",
    },
    Profile {
        names: &["vim", "nvim", "vi", "nano", "emacs", "micro", "hx"],
        needs_pty: true,
        notes: "Full-screen editor: read it with process_screen, drive it with process_send_keys; vim: [\"Escape\", \":wq\", \"Enter\"] saves and quits, [\"Escape\", \":q!\", \"Enter\"] quits without saving. To edit files, prefer your own file tools.",
    },
    Profile {
        names: &["less", "more", "most", "man"],
        needs_pty: true,
        notes: "Pager: process_screen shows the page; Space pages, `/text` Enter searches, `q` quits. For plain text instead: PAGER=cat, `man -P cat`, `git --no-pager`.",
    },
    Profile {
        names: &["htop", "top", "btop", "atop", "glances", "watch", "tig", "lazygit", "ncdu", "mc"],
        needs_pty: true,
        notes: "Full-screen and redrawing: use process_screen (process_wait with screen_stable or on_screen to wait for it); `q` quits (watch: C-c). `top -b -n 1` prints once on pipes.",
    },
    Profile {
        names: &["git"],
        needs_pty: false,
        notes: "Most commands run on pipes with `--no-pager` (or GIT_PAGER=cat). Interactive ones need pty: true: `add -p`, `rebase -i`, `commit` without -m (they open an editor or ask per hunk); set GIT_EDITOR for a chosen editor.",
    },
    Profile {
        names: &["bash", "zsh", "fish", "sh", "dash", "ksh"],
        needs_pty: true,
        notes: "An interactive shell: process_run per command returns when it finished (bash started by Portal also gives command_exit_code). `sh -c 'cmd'` one-shots run on pipes.",
    },
    Profile { names: &["sudo", "su", "passwd", "gpg"], needs_pty: true, notes: SECRET },
    Profile {
        names: &["docker", "podman", "kubectl"],
        needs_pty: false,
        notes: "Plain commands run on pipes; `run -it`, `exec -it` (and a shell inside) need pty: true.",
    },
    Profile {
        names: &["claude", "codex", "gemini", "aider"],
        needs_pty: true,
        notes: "A coding agent's TUI: follow it with agent_list/agent_wait, prompt it with agent_send; agent_hooks install gives exact states.",
    },
];

/// The profile for a canonical program name: by name, else by the name
/// without a trailing version (`python3.12` → `python3`, `node20` → `node`).
pub(crate) fn profile(program: &str) -> Option<&'static Profile> {
    let find = |name: &str| PROFILES.iter().find(|p| p.names.contains(&name));
    find(program).or_else(|| {
        let mut base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if base.len() == program.len() || base.is_empty() {
            return None;
        }
        base = base.trim_end_matches('-');
        find(base)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_programs_are_known() {
        for name in ["python3", "ipython", "node", "irb", "psql", "mysql", "mariadb", "sqlite3"] {
            assert!(profile(name).is_some_and(|p| p.needs_pty), "{name}");
        }
        for name in ["redis-cli", "gdb", "lldb", "ssh", "vim", "nvim", "less", "htop", "top", "man"]
        {
            assert!(profile(name).is_some_and(|p| p.needs_pty), "{name}");
        }
        assert!(profile("git").is_some_and(|p| !p.needs_pty && p.notes.contains("rebase -i")));
        assert!(profile("cat").is_none());
    }

    #[test]
    fn versions_are_looked_through() {
        assert!(profile("python3.12").is_some_and(|p| p.names.contains(&"python3")));
        assert!(profile("node20").is_some_and(|p| p.names.contains(&"node")));
        assert!(profile("12").is_none());
    }

    #[test]
    fn names_are_canonical_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for p in PROFILES {
            assert!(p.notes.len() < 400, "{:?}", p.names);
            for n in p.names {
                assert_eq!(n.to_lowercase(), *n, "canonical names are lower case");
                assert!(seen.insert(*n), "{n} twice");
            }
        }
    }
}
