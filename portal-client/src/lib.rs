//! Portal's client side: everything a client of `portald` shares, over the
//! wire contract of `portal-proto`. The daemon depends on it too, for what
//! both ends must agree on rather than for any client code: the paths, the
//! transport's server side, the socket-path check, the exit status of a
//! daemon that lost the race to start, the variable one daemon hands the
//! next, the OSC 3008 record.
//!
//! # Layers
//!
//! A module imports only modules of layers below its own, so no two can
//! import each other. The tidy test in `tests/tests/e2e/tidy.rs` reads the
//! modules of each layer from the numbered lines below and checks it.
//!
//! 0. [`user`], [`hosts`], [`error`], [`identity`], [`handshake`], [`vocab`], [`osc3008`]
//!    (the leaves: they import nothing of this crate)
//!    - [`user`]: who a process runs as (a uid, a Windows SID): what every
//!      connection is checked against.
//!    - [`hosts`]: which portald to talk to: this machine's, or another's
//!      named in the hosts file or by an `ssh://` URL.
//!    - [`error`]: [`error::ClientError`], every way a client can fail to
//!      reach a daemon, shared by the modules above.
//!    - [`identity`]: who this process is, told to every daemon it reaches.
//!    - [`handshake`]: the line `dial-stdio` writes and ssh's end reads.
//!    - [`vocab`]: the one definition of every state, status, reason and
//!      source name (serde, JSON Schema, text), and its wire enum.
//!    - [`osc3008`]: the in-band agent-state record a PTY carries.
//! 1. [`paths`], [`transport`], [`ssh`], [`environ`], [`view`]
//!    - [`paths`]: where the socket (or pipe), the database and the daemon
//!      log live.
//!    - [`transport`]: the platform seam for local connections (Unix
//!      sockets, and named pipes by the same API), with each peer's
//!      credentials; the daemon listens through it.
//!    - [`ssh`]: the client end of a connection to another machine's
//!      portald over the system `ssh`.
//!    - [`environ`]: the caller's environment a start carries.
//!    - [`view`]: one process as the shim's results and the CLI's `--json`
//!      show it.
//! 2. [`client`]
//!    - [`client`]: [`client::Client`], a verified connection to a
//!      `portald`, here or over ssh, with the protocol-version check.
//! 3. [`launch`]
//!    - [`launch`]: finding and starting `portald` when nothing answers,
//!      and [`client::Client::connect_to`], which connects to any host.
//! 4. [`dial`]
//!    - [`dial`]: `portal-cli dial-stdio`, the remote end of a connection
//!      over ssh, which reaches (and starts) its machine's portald.
//! 5. [`workspace`], [`waits`]
//!    - [`workspace`]: a fleet of programs from `portal.toml`, up and down.
//!    - [`waits`]: one wait on several processes (the first to end, or all).

pub mod client;
pub mod dial;
pub mod environ;
pub mod error;
pub mod handshake;
pub mod hosts;
pub mod identity;
pub mod launch;
pub mod osc3008;
pub mod paths;
pub mod ssh;
pub mod transport;
pub mod user;
pub mod view;
pub mod vocab;
pub mod waits;
pub mod workspace;
