//! `portal-holder`: what keeps Portal's programs alive while no `portald`
//! runs (a crash, or the moment of a live upgrade).
//!
//! A program dies with whoever holds the only copy of its PTY primary or
//! pipe ends, and its exit status goes to its parent. So the holder is both:
//! it spawns every program (a small process forks in microseconds, where
//! forking the daemon copied all of it), keeps a copy of each program's
//! descriptors, is their parent and a child subreaper, and keeps each exit
//! until a daemon has recorded it. A daemon hands it nothing else; it parses
//! no output, keeps no log, and has one thread.
//!
//! - [`wire`]: the messages and how descriptors travel with them.
//! - [`serve`]: the holder's loop.
//! - [`door`]: its socket, kept bound, and connections until they say hello.
//! - [`client`]: the daemon's side.
//!
//! It ends when it holds nothing and no daemon is connected.

pub mod client;
pub mod door;
pub mod serve;
mod spawn;
pub mod wire;
