//! The real `portal-holder` binary on its own, driven as a daemon drives
//! it: programs started through it, a daemon that goes away and a new one
//! that adopts what it held, exits heard while no daemon was there, and the
//! holder ending once it holds nothing.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use portal_holder::client::{Adoptable, Client, Notice};
use portal_holder::wire::{Exit, Spawn};

/// Every wait in these tests is bounded by this.
const BOUND: Duration = Duration::from_secs(10);

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_portal-holder"))
}

fn dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("ph").tempdir_in("/tmp").unwrap()
}

type Exits = mpsc::Receiver<(u64, Exit)>;

fn connect(socket: &Path) -> (std::sync::Arc<Client>, Vec<Adoptable>, Exits) {
    let (tx, rx) = mpsc::channel();
    let on_notice = Box::new(move |notice| {
        if let Notice::Exited { proc_id, exit } = notice {
            let _ = tx.send((proc_id, exit));
        }
    });
    let (client, held) = Client::connect(socket, &binary(), on_notice).unwrap();
    (client, held, rx)
}

fn sh(proc_id: u64, script: &str, pty: Option<(u16, u16)>) -> Spawn {
    Spawn {
        proc_id,
        program: "/bin/sh".into(),
        arg0: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: "/".into(),
        pty,
        meta: format!("meta of {proc_id}"),
    }
}

/// Reads from `fd` until `needle` has been seen (a PTY's EIO ends it).
fn read_until(fd: &OwnedFd, needle: &str) -> String {
    let mut file = std::fs::File::from(fd.try_clone().unwrap());
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        match file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.contains(needle), "{needle:?} never came: {text:?}");
    text
}

fn write(fd: &OwnedFd, text: &str) {
    std::fs::File::from(fd.try_clone().unwrap()).write_all(text.as_bytes()).unwrap();
}

/// Exits heard so far, by process, kept across calls to [`exit_of`].
type Heard = std::collections::HashMap<u64, Exit>;

fn exit_of(exits: &Exits, heard: &mut Heard, proc_id: u64) -> Exit {
    let deadline = Instant::now() + BOUND;
    while !heard.contains_key(&proc_id) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((id, exit)) = exits.recv_timeout(left) else {
            panic!("no exit of {proc_id} within {BOUND:?}")
        };
        heard.insert(id, exit);
    }
    heard[&proc_id]
}

#[test]
fn a_pipe_program_runs_through_the_holder_and_its_exit_is_heard() {
    let d = dir();
    let socket = d.path().join("h.sock");
    let (client, held, exits) = connect(&socket);
    let mut heard = Heard::new();
    assert!(held.is_empty());
    let (pid, fds) =
        client.spawn(sh(1, "echo hi; read x; echo got $x >&2; exit 3", None), &[]).unwrap();
    assert!(pid > 1 && fds.len() == 3);
    read_until(&fds[1], "hi\n");
    write(&fds[0], "yo\n");
    read_until(&fds[2], "got yo\n");
    assert_eq!(exit_of(&exits, &mut heard, 1), Exit { code: Some(3), signal: None });
    // A program the OS cannot start is an answer, not a hang.
    let mut bad = sh(2, "", None);
    bad.program = "/nonexistent/program".into();
    let err = client.spawn(bad, &[]).unwrap_err();
    assert!(err.contains("No such file"), "{err}");
    client.release(1).unwrap();
}

#[test]
fn a_new_daemon_adopts_what_the_last_one_left_and_hears_exits_it_missed() {
    let d = dir();
    let socket = d.path().join("h.sock");
    let (client, _, _exits) = connect(&socket);
    let (pty_pid, pty) =
        client.spawn(sh(1, "stty -echo; read x; echo after-$x", Some((24, 80))), &[]).unwrap();
    let (_, pipes) = client.spawn(sh(2, "read x; exit 7", None), &[]).unwrap();
    client.set_meta(1, "token=abc".into()).unwrap();
    // The second program ends around the time its daemon goes away.
    write(&pipes[0], "\n");
    drop((client, pty, pipes));

    let (client, held, exits) = connect(&socket);
    let mut heard = Heard::new();
    let mut held: Vec<Adoptable> = held;
    held.sort_by_key(|a| a.held.proc_id);
    assert_eq!(held.len(), 2, "{held:?}");
    let (first, second) = (&held[0], &held[1]);
    assert_eq!((first.held.pid, first.held.pty, first.fds.len()), (pty_pid, true, 1));
    assert_eq!(first.held.meta, "token=abc");
    assert_eq!((first.held.exit, second.held.pty), (None, false));
    // The adopted terminal is the same terminal: the program reads from it.
    write(&first.fds[0], "x\n");
    read_until(&first.fds[0], "after-x");
    assert_eq!(exit_of(&exits, &mut heard, 1), Exit { code: Some(0), signal: None });
    // The pipe program's exit: in the welcome if it came before, else an event.
    let exit = second.held.exit.unwrap_or_else(|| exit_of(&exits, &mut heard, 2));
    assert_eq!(exit, Exit { code: Some(7), signal: None });
    client.release(1).unwrap();
    client.release(2).unwrap();
}

#[test]
fn the_holder_ends_once_it_holds_nothing_and_no_daemon_is_there() {
    let d = dir();
    let socket = d.path().join("h.sock");
    let (client, _, exits) = connect(&socket);
    let mut heard = Heard::new();
    let (_, fds) = client.spawn(sh(1, "exit 0", None), &[]).unwrap();
    exit_of(&exits, &mut heard, 1);
    drop(fds);
    // Still held until released, even with no daemon.
    drop(client);
    let (client, held, _) = connect(&socket);
    assert_eq!(held.len(), 1);
    client.release(1).unwrap();
    drop(client);
    let deadline = Instant::now() + BOUND;
    while socket.exists() {
        assert!(Instant::now() < deadline, "the holder did not end within {BOUND:?}");
        std::thread::yield_now();
    }
}

/// Spawns a program that exits at once and checks the daemon hears its exit:
/// the daemon's connection still works.
fn still_works(client: &Client, exits: &Exits, heard: &mut Heard, proc_id: u64) {
    let (_, fds) = client
        .spawn(sh(proc_id, "exit 5", None), &[])
        .unwrap_or_else(|e| panic!("the attached daemon can no longer spawn: {e}"));
    assert_eq!(exit_of(exits, heard, proc_id), Exit { code: Some(5), signal: None });
    drop(fds);
    client.release(proc_id).unwrap();
}

#[test]
fn strangers_at_the_socket_never_take_the_attached_daemons_place() {
    let d = dir();
    let socket = d.path().join("h.sock");
    let (client, _, exits) = connect(&socket);
    let mut heard = Heard::new();
    still_works(&client, &exits, &mut heard, 1);

    // One that connects and says nothing, kept open.
    let silent = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    still_works(&client, &exits, &mut heard, 2);
    // One that sends garbage: a frame that is no hello.
    let mut garbage = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    garbage.write_all(b"\x05\x00\x00\x00\x00hello").unwrap();
    still_works(&client, &exits, &mut heard, 3);
    // A second daemon saying hello while the first is attached is refused,
    // and told why.
    let err = Client::connect(&socket, &binary(), Box::new(|_| {})).unwrap_err().to_string();
    assert!(err.contains("another portald") && err.contains("attached"), "{err}");
    still_works(&client, &exits, &mut heard, 4);
    // The garbage sender was closed on, not kept.
    garbage.set_read_timeout(Some(BOUND)).unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    drop(silent);

    // Once the attached daemon goes (a crash, a handover), the next one is let in.
    drop(client);
    let (client, held, exits) = connect(&socket);
    assert!(held.is_empty(), "{held:?}");
    let mut heard = Heard::new();
    still_works(&client, &exits, &mut heard, 5);
}

#[test]
fn a_deleted_socket_is_bound_again() {
    let d = dir();
    let socket = d.path().join("h.sock");
    let (client, _, _exits) = connect(&socket);
    let (pid, fds) = client.spawn(sh(1, "read x; echo got-$x", None), &[]).unwrap();
    // Someone wipes the runtime directory; the daemon then goes.
    std::fs::remove_dir_all(d.path()).unwrap();
    drop(client);
    // The holder binds its socket again, so the next daemon finds it and
    // what it holds (not a new, empty holder).
    let deadline = Instant::now() + BOUND;
    while !socket.exists() {
        assert!(Instant::now() < deadline, "the socket was not bound again within {BOUND:?}");
        std::thread::yield_now();
    }
    let (client, held, _exits) = connect(&socket);
    assert_eq!(held.iter().map(|a| (a.held.proc_id, a.held.pid)).collect::<Vec<_>>(), [(1, pid)]);
    write(&fds[0], "x\n");
    read_until(&fds[1], "got-x");
    client.release(1).unwrap();
}
