//! [`Start`]: how a test describes the program it starts, naming only what
//! the test is about (`Start::pty("python3").args(["-q"]).size(24, 80)`);
//! every field it does not name is left at the protobuf default, as a
//! client that sends none would leave it.
//!
//! It depends on nothing of the test kit, so `portald`'s binary-level tests
//! (which cannot depend on this crate: it depends on `portald`) include this
//! file by path.

use std::path::Path;

use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use tonic::transport::Channel;

/// A start request under construction: [`Start::request`] gives the
/// message, [`Start::run`] sends it.
#[derive(Clone, Debug)]
#[must_use = "a Start does nothing until it is run or turned into a request"]
pub struct Start(pb::StartRequest);

impl Start {
    /// `command` with no mode named: the daemon runs it on pipes.
    pub fn new(command: impl AsRef<str>) -> Self {
        Self(pb::StartRequest { command: command.as_ref().to_owned(), ..Default::default() })
    }

    /// `command` on pipes, said explicitly.
    pub fn pipes(command: impl AsRef<str>) -> Self {
        Self::new(command).mode(pb::Mode::Pipes)
    }

    /// `command` on a PTY, 24×80 unless [`Start::size`] says otherwise.
    pub fn pty(command: impl AsRef<str>) -> Self {
        Self::new(command).mode(pb::Mode::Pty)
    }

    fn mode(mut self, mode: pb::Mode) -> Self {
        self.0.mode = mode.into();
        self
    }

    /// Appends arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        self.0.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The PTY's size.
    pub fn size(mut self, rows: u32, cols: u32) -> Self {
        self.0.size = Some(pb::TermSize { rows, cols });
        self
    }

    /// The unique name to refer to the process by.
    pub fn name(mut self, name: impl AsRef<str>) -> Self {
        self.0.name = name.as_ref().to_owned();
        self
    }

    /// Sets one environment variable of the program (over the daemon's).
    pub fn env(mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.0.env.insert(key.as_ref().to_owned(), value.as_ref().to_owned());
        self
    }

    /// Sets each variable of `vars` in turn, as [`Start::env`] does: a
    /// later one overrides an earlier one of the same key.
    pub fn envs(
        mut self,
        vars: impl IntoIterator<Item = (impl AsRef<str>, impl AsRef<str>)>,
    ) -> Self {
        for (key, value) in vars {
            self = self.env(key, value);
        }
        self
    }

    /// The working directory (the daemon's user's home otherwise).
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.0.cwd = dir.as_ref().display().to_string();
        self
    }

    /// Kills the program when no client has named it for `ms` milliseconds.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.0.timeout_ms = ms;
        self
    }

    /// Starts the program again when it fails, at most `max_restarts`
    /// times, `backoff_ms` after the first failure and twice as long after
    /// each next one.
    pub fn restart_on_failure(mut self, max_restarts: u32, backoff_ms: u64) -> Self {
        self.0.restart = Some(pb::RestartPolicy { on_failure: true, max_restarts, backoff_ms });
        self
    }

    /// Whether the start may take the name of an ended process over.
    pub fn replace_ended(mut self, replace: bool) -> Self {
        self.0.replace_ended = replace;
        self
    }

    /// The request as described, for a test that sends it itself (to see
    /// the start refused, or within a bound of its own).
    #[must_use]
    pub fn request(self) -> pb::StartRequest {
        self.0
    }

    /// Sends the request and returns the started process.
    ///
    /// # Panics
    /// When the start fails, naming the command and why.
    pub async fn run(self, rpc: &mut PortalClient<Channel>) -> pb::Process {
        let command = self.0.command.clone();
        match rpc.start(self.0).await {
            Ok(started) => started.into_inner(),
            Err(status) => panic!("starting {command:?} failed: {status}"),
        }
    }
}
