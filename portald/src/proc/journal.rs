//! A program's journal: what the daemon read from it and accepted for it,
//! kept where a daemon killed with SIGKILL cannot take it along.
//!
//! A journal is a few memfds the daemon creates at spawn and hands to
//! `portal-holder` with the spawn, so they live as long as the holder holds
//! the program; the holder gives them back to the next daemon.
//!
//! Output is never read from the program directly: the kernel moves it
//! with `splice` from the program's pipe (or, for a terminal, through a
//! relay pipe the holder keeps too) into the stream's *output log*, a memfd
//! whose file position the kernel advances in the same system call. Every
//! byte that left the program is therefore in the relay or in the log, and
//! the log's position is the stream's exact total, whatever instant the
//! daemon dies at. The reader then reads the new bytes back from the log
//! (`pread`), which takes nothing from anywhere. The newest bytes are kept
//! (a ring's worth, [`crate::config::DEFAULT_JOURNAL_RING_BYTES`]); older
//! pages are punched out, and where the kept bytes begin is written down
//! before each punch.
//!
//! Input is the daemon's own to record: the *header* memfd keeps, for
//! stdin, a ring of the newest accepted bytes and the totals accepted
//! (before the rpc answers) and written to the program; each update is a
//! positioned write (`pwrite`), the ring first, then the total, with the
//! total the write under way will reach (its *intent*) written before the
//! ring, so bytes a crash left half overwritten are never taken as valid.
//!
//! No thread is started here; the writers are the reader threads (one per
//! output stream), the actor (accepted input) and the input writer thread
//! (delivered input), each the only writer of its fields.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::SeekFrom;
use rustix::pipe::SpliceFlags;

use crate::domain::StreamId;

/// The input ring is this fraction of the output's kept bytes: input comes
/// from clients, not from a program printing flat out, and is written to
/// the program as soon as it reads (64 KiB with the default).
const INPUT_RING_DIVISOR: u64 = 4;

/// An output log is trimmed once it keeps this much more than its ring:
/// punching every page as it ages would cost a system call per read.
const TRIM_SLACK_BYTES: u64 = 64 << 10;

/// Most bytes one splice moves out of a relay: a pipe holds 64 KiB by
/// default, so one call usually empties it.
const RELAY_DRAIN_BYTES: usize = 1 << 20;

/// Header size: one page, so the input ring starts page-aligned and a
/// quiet program touches the header alone.
const HEADER_BYTES: u64 = 4096;

/// Marks a journal and its layout version.
const MAGIC: u64 = u64::from_le_bytes(*b"PJRNL\0\0\x02");

/// Header fields: the magic at 0, the input ring's and the outputs' kept
/// sizes from 8 (one u64 per stream), then a 32-byte slot per stream from
/// 64: for stdin its total, intent, delivered total and the end of the last
/// secret; for an output, where its kept bytes begin.
const SLOTS_AT: u64 = 64;
const SLOT_BYTES: u64 = 32;
const TOTAL: u64 = 0;
const INTENT: u64 = 8;
const KEPT_FROM: u64 = 8;
const DELIVERED: u64 = 16;
const SECRET_END: u64 = 24;

/// One program's journal (the daemon's copies of its descriptors).
#[derive(Debug)]
pub(crate) struct Journal {
    /// The header and the input ring.
    file: std::fs::File,
    /// Per stream: the input ring's size; the output bytes kept.
    caps: [u64; 3],
    /// Per stream: input accepted; output handed to the reader.
    totals: [AtomicU64; 3],
    /// Per output stream: where its log's kept bytes begin.
    kept_from: [AtomicU64; 3],
    delivered: AtomicU64,
    /// The output logs of stdout and stderr (stderr: pipes only).
    outs: [Option<std::fs::File>; 2],
    /// A terminal's relay pipe (read end, write end): what the kernel took
    /// from the terminal waits here until it is in the log.
    relay: Option<(OwnedFd, OwnedFd)>,
    /// A write failed once (the memfd's memory could not be had): said
    /// once, and the journal is no longer trusted at the next adoption.
    failed: AtomicBool,
}

/// What a journal holds of one stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamTail {
    /// The stream's offset just past everything read (or accepted).
    pub(crate) total: u64,
    /// The offset of `bytes[0]`: the newest bytes still kept run from
    /// here to `total`.
    pub(crate) from: u64,
    /// Those bytes.
    pub(crate) bytes: Vec<u8>,
}

/// Everything a journal held when a new daemon took it over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Per stream, by [`StreamId::index`].
    pub(crate) streams: [StreamTail; 3],
    /// Input written to the program (stdin offsets).
    pub(crate) delivered: u64,
    /// Where the last secret input ends: its ring bytes are masked, so it
    /// can be logged but never written again.
    pub(crate) secret_end: u64,
}

/// How one stream's log continues after a crash.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// Bytes read but never committed, still kept: logged first, at this
    /// offset.
    pub(crate) at: u64,
    /// Those bytes.
    pub(crate) bytes: Vec<u8>,
    /// Bytes read but no longer kept: a hole of this size at the log's
    /// end, before `at`.
    pub(crate) hole: u64,
}

/// What becomes of input accepted before a crash and not yet written.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Undelivered {
    /// Nothing is owed.
    None,
    /// Still in the ring: written to the program before anything new.
    Deliver(Vec<u8>),
    /// Gone from the ring, or secret: reported lost, this many bytes.
    Lost(u64),
}

fn memfd(name: &str) -> std::io::Result<OwnedFd> {
    use rustix::fs::MemfdFlags;
    Ok(rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?)
}

impl Journal {
    /// A new journal keeping `output_ring` bytes of each output stream
    /// (by default [`crate::config::DEFAULT_JOURNAL_RING_BYTES`]) and a
    /// smaller ring of input. Pages are taken only when written.
    pub(crate) fn create(output_ring: u64, pty: bool) -> std::io::Result<Self> {
        use rustix::fs::SealFlags;
        let input_ring = (output_ring / INPUT_RING_DIVISOR).max(1);
        let caps = [input_ring, output_ring.max(1), output_ring.max(1)];
        let fd = memfd("portal-journal")?;
        rustix::fs::ftruncate(&fd, HEADER_BYTES + input_ring)?;
        // Its size is fixed for good: neither side can shrink it under the
        // other's reads.
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        let file = std::fs::File::from(fd);
        let mut head = [0u8; 32];
        head[..8].copy_from_slice(&MAGIC.to_le_bytes());
        for (i, cap) in caps.iter().enumerate() {
            head[8 + i * 8..16 + i * 8].copy_from_slice(&cap.to_le_bytes());
        }
        file.write_all_at(&head, 0)?;
        let out = std::fs::File::from(memfd("portal-stdout")?);
        let (err, relay) = if pty {
            (None, Some(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?))
        } else {
            (Some(std::fs::File::from(memfd("portal-stderr")?)), None)
        };
        Ok(Self::with(file, caps, [Some(out), err], relay, [0; 3], 0))
    }

    /// The journal an earlier daemon left with the holder (the
    /// descriptors in the order of [`Journal::fds`]). What the kernel had
    /// moved into a terminal's relay is moved on into its log first.
    pub(crate) fn open(fds: Vec<OwnedFd>, pty: bool) -> std::io::Result<Self> {
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        let mut fds = fds.into_iter();
        let (Some(head), Some(out), Some(third)) = (fds.next(), fds.next(), fds.next()) else {
            return Err(bad("a journal without its descriptors"));
        };
        let file = std::fs::File::from(head);
        let mut header = [0u8; 32];
        file.read_exact_at(&mut header, 0)?;
        if u64_at(&header, 0) != MAGIC {
            return Err(bad("not a Portal journal of this version"));
        }
        let caps = [u64_at(&header, 8), u64_at(&header, 16), u64_at(&header, 24)];
        if file.metadata()?.len() != HEADER_BYTES + caps[0] {
            return Err(bad("a journal whose size does not match its ring"));
        }
        let out = std::fs::File::from(out);
        let (err, relay) = match (pty, fds.next()) {
            (true, Some(write)) => (None, Some((third, write))),
            (false, None) => (Some(std::fs::File::from(third)), None),
            _ => return Err(bad("a journal with the wrong descriptors")),
        };
        if let Some((r, _)) = &relay {
            drain(r, &out)?;
        }
        let mut totals = [read_u64(&file, slot(0) + TOTAL)?, 0, 0];
        let mut kept = [0; 3];
        for (i, log) in [(1, Some(&out)), (2, err.as_ref())] {
            if let Some(log) = log {
                totals[i] = rustix::fs::seek(log, SeekFrom::Current(0))?;
                kept[i] = read_u64(&file, slot(i) + KEPT_FROM)?;
            }
        }
        let delivered = read_u64(&file, slot(0) + DELIVERED)?;
        let j = Self::with(file, caps, [Some(out), err], relay, totals, delivered);
        for (i, k) in kept.iter().enumerate() {
            j.kept_from[i].store(*k, Ordering::Release);
        }
        Ok(j)
    }

    fn with(
        file: std::fs::File,
        caps: [u64; 3],
        outs: [Option<std::fs::File>; 2],
        relay: Option<(OwnedFd, OwnedFd)>,
        totals: [u64; 3],
        delivered: u64,
    ) -> Self {
        Self {
            file,
            caps,
            totals: totals.map(AtomicU64::new),
            kept_from: [0; 3].map(AtomicU64::new),
            delivered: AtomicU64::new(delivered),
            outs,
            relay,
            failed: AtomicBool::new(false),
        }
    }

    /// The descriptors the holder keeps: the header, stdout's log, then
    /// stderr's log (pipes) or the relay's two ends (a terminal).
    pub(crate) fn fds(&self) -> Vec<BorrowedFd<'_>> {
        let mut fds = vec![self.file.as_fd()];
        fds.extend(self.outs.iter().flatten().map(AsFd::as_fd));
        if let Some((r, w)) = &self.relay {
            fds.extend([r.as_fd(), w.as_fd()]);
        }
        fds
    }

    fn out(&self, stream: StreamId) -> std::io::Result<&std::fs::File> {
        let log = match stream {
            StreamId::Stdout => self.outs[0].as_ref(),
            StreamId::Stderr => self.outs[1].as_ref(),
            StreamId::Stdin => None,
        };
        log.ok_or_else(|| std::io::Error::other("no output log for this stream"))
    }

    /// Takes what `src` (the program's end of `stream`) has into the
    /// stream's log, then reads the new bytes back into `buf`. `Ok(0)` at
    /// the end of the stream; `WouldBlock` when nothing was there after
    /// all. Once the kernel took bytes from the program they are in the
    /// log (or the relay) and counted there, so a daemon that dies at any
    /// point of this loses none of them.
    pub(crate) fn take(
        &self,
        stream: StreamId,
        src: BorrowedFd<'_>,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        let i = stream.index();
        let log = self.out(stream)?;
        let moved = match self.relay.as_ref().filter(|_| stream == StreamId::Stdout) {
            Some((r, w)) => {
                drain(r, log)?;
                let n = rustix::pipe::splice(src, None, w, None, buf.len(), SpliceFlags::NONBLOCK)?;
                drain(r, log)?;
                n
            }
            None => rustix::pipe::splice(src, None, log, None, buf.len(), SpliceFlags::NONBLOCK)?,
        };
        let at = self.totals[i].load(Ordering::Acquire);
        let end = rustix::fs::seek(log, SeekFrom::Current(0))?;
        if moved == 0 && end == at {
            return Ok(0);
        }
        let n = usize::try_from(end - at).unwrap_or(usize::MAX).min(buf.len());
        log.read_exact_at(&mut buf[..n], at)?;
        self.totals[i].store(at + n as u64, Ordering::Release);
        self.trim(i, log, at + n as u64);
        Ok(n)
    }

    /// Punches out an output log's pages older than its ring, writing down
    /// first where the kept bytes will begin.
    fn trim(&self, i: usize, log: &std::fs::File, end: u64) {
        let kept = self.kept_from[i].load(Ordering::Acquire);
        if end - kept < self.caps[i] + TRIM_SLACK_BYTES {
            return;
        }
        let page = HEADER_BYTES;
        let to = (end - self.caps[i]) / page * page;
        let done = self.put(slot(i) + KEPT_FROM, to).and_then(|()| {
            use rustix::fs::FallocateFlags;
            let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
            Ok(rustix::fs::fallocate(log, flags, kept, to - kept)?)
        });
        self.check(done);
        self.kept_from[i].store(to, Ordering::Release);
    }

    /// Records accepted input: into the ring, then the total past it.
    /// Returns the new total.
    pub(crate) fn accept(&self, data: &[u8]) -> u64 {
        let at = self.totals[0].load(Ordering::Acquire);
        let end = at + data.len() as u64;
        let done = self
            .put(slot(0) + INTENT, end)
            .and_then(|()| self.ring_write(at, data))
            .and_then(|()| self.put(slot(0) + TOTAL, end));
        self.check(done);
        self.totals[0].store(end, Ordering::Release);
        end
    }

    /// Marks the input up to `end` as secret: what the ring holds of it is
    /// masked already, so it is never written to the program again.
    pub(crate) fn secret_until(&self, end: u64) {
        self.check(self.put(slot(0) + SECRET_END, end));
    }

    /// Records that `n` more bytes of accepted input were written to the
    /// program (or can never be: its input is closed).
    pub(crate) fn delivered(&self, n: usize) {
        let d = self.delivered.fetch_add(n as u64, Ordering::AcqRel) + n as u64;
        self.check(self.put(slot(0) + DELIVERED, d));
    }

    /// Continues `stream` from `total` (a log that is ahead of a journal
    /// it cannot explain): the older kept bytes no longer count.
    pub(crate) fn restart_at(&self, stream: StreamId, total: u64) {
        let i = stream.index();
        let done = match stream {
            StreamId::Stdin => {
                self.delivered.store(total, Ordering::Release);
                self.put(slot(0) + INTENT, total + self.caps[0])
                    .and_then(|()| self.put(slot(0) + TOTAL, total))
                    .and_then(|()| self.put(slot(0) + DELIVERED, total))
            }
            _ => self.out(stream).and_then(|log| {
                rustix::fs::seek(log, SeekFrom::Start(total))?;
                self.kept_from[i].store(total, Ordering::Release);
                self.put(slot(i) + KEPT_FROM, total)
            }),
        };
        self.check(done);
        self.totals[i].store(total, Ordering::Release);
    }

    /// Reads everything back (at adoption, before any reader runs).
    pub(crate) fn snapshot(&self) -> std::io::Result<Snapshot> {
        if self.failed.load(Ordering::Acquire) {
            return Err(std::io::Error::other("a write to the journal failed"));
        }
        let mut snap = Snapshot::default();
        let total = read_u64(&self.file, slot(0) + TOTAL)?;
        let intent = read_u64(&self.file, slot(0) + INTENT)?.max(total);
        // A ring write toward `intent` may have overwritten the bytes a
        // whole ring before it.
        let from = intent.saturating_sub(self.caps[0]).min(total);
        snap.streams[0] = StreamTail { total, from, bytes: self.ring_read(from, total)? };
        for stream in [StreamId::Stdout, StreamId::Stderr] {
            let Ok(log) = self.out(stream) else { continue };
            let i = stream.index();
            let total = rustix::fs::seek(log, SeekFrom::Current(0))?;
            let from = self.kept_from[i].load(Ordering::Acquire).min(total);
            let mut bytes =
                vec![0u8; usize::try_from(total - from).map_err(std::io::Error::other)?];
            log.read_exact_at(&mut bytes, from)?;
            snap.streams[i] = StreamTail { total, from, bytes };
        }
        snap.delivered = read_u64(&self.file, slot(0) + DELIVERED)?;
        snap.secret_end = read_u64(&self.file, slot(0) + SECRET_END)?;
        Ok(snap)
    }

    fn put(&self, at: u64, v: u64) -> std::io::Result<()> {
        self.file.write_all_at(&v.to_le_bytes(), at)
    }

    /// Writes `data` (stdin offset `at`) into the input ring; only its
    /// last ring's worth can be kept.
    fn ring_write(&self, at: u64, data: &[u8]) -> std::io::Result<()> {
        let cap = self.caps[0];
        let skip = data.len().saturating_sub(usize::try_from(cap).unwrap_or(usize::MAX));
        let data = &data[skip..];
        let pos = (at + skip as u64) % cap;
        let first = data.len().min(usize::try_from(cap - pos).unwrap_or(usize::MAX));
        self.file.write_all_at(&data[..first], HEADER_BYTES + pos)?;
        if first < data.len() {
            self.file.write_all_at(&data[first..], HEADER_BYTES)?;
        }
        Ok(())
    }

    fn ring_read(&self, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
        let cap = self.caps[0];
        let len = usize::try_from(to - from).map_err(std::io::Error::other)?;
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        let pos = from % cap;
        let first = len.min(usize::try_from(cap - pos).unwrap_or(usize::MAX));
        self.file.read_exact_at(&mut out[..first], HEADER_BYTES + pos)?;
        if first < len {
            self.file.read_exact_at(&mut out[first..], HEADER_BYTES)?;
        }
        Ok(out)
    }

    fn check(&self, done: std::io::Result<()>) {
        if let Err(e) = done
            && !self.failed.swap(true, Ordering::AcqRel)
        {
            tracing::error!(error = %e, "cannot write the program's journal: after a crash, what was read but not logged may be lost without a mark");
        }
    }
}

/// Moves everything waiting in a relay into the log it feeds.
fn drain(relay: &OwnedFd, log: &std::fs::File) -> std::io::Result<()> {
    loop {
        match rustix::pipe::splice(relay, None, log, None, RELAY_DRAIN_BYTES, SpliceFlags::NONBLOCK)
        {
            Ok(0) | Err(rustix::io::Errno::AGAIN) => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

fn slot(i: usize) -> u64 {
    SLOTS_AT + SLOT_BYTES * i as u64
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

fn read_u64(file: &std::fs::File, at: u64) -> std::io::Result<u64> {
    let mut v = [0u8; 8];
    file.read_exact_at(&mut v, at)?;
    Ok(u64::from_le_bytes(v))
}

/// How a stream whose log ends at `end` continues from what its journal
/// held: nothing when the log has everything; else the bytes still in the
/// ring, after a hole for those that are not.
pub(crate) fn recover(end: u64, tail: &StreamTail) -> Option<Recovery> {
    if tail.total <= end {
        return None;
    }
    let at = end.max(tail.from);
    let skip = usize::try_from(at - tail.from).unwrap_or(usize::MAX).min(tail.bytes.len());
    Some(Recovery { at, bytes: tail.bytes[skip..].to_vec(), hole: at - end })
}

/// What is owed of the input accepted before a crash.
pub(crate) fn undelivered(snap: &Snapshot) -> Undelivered {
    let input = &snap.streams[StreamId::Stdin.index()];
    if snap.delivered >= input.total {
        return Undelivered::None;
    }
    let owed = input.total - snap.delivered;
    if snap.secret_end > snap.delivered || snap.delivered < input.from {
        return Undelivered::Lost(owed);
    }
    let skip = usize::try_from(snap.delivered - input.from).unwrap_or(usize::MAX);
    Undelivered::Deliver(input.bytes[skip.min(input.bytes.len())..].to_vec())
}

/// A new journal for a spawn: `None` when the OS refuses a memfd (the
/// program then runs without one, and a crash may splice its log).
pub(crate) fn create_or_warn(output_ring: u64, pty: bool) -> Option<Journal> {
    Journal::create(output_ring, pty)
        .map_err(|e| tracing::warn!(error = %e, "cannot create a journal for the program; a crash may lose what was read but not logged"))
        .ok()
}

/// Continues an adopted program's log from its journal: per stream, what
/// the last daemon read (or accepted) and never committed is appended in
/// order, after a hole of the exact size of what the ring no longer held,
/// and the stream's offsets continue from the journal's total. Returns
/// whether anything was appended.
pub(crate) async fn continue_log(
    id: crate::domain::ProcId,
    snap: &Snapshot,
    shared: &super::Shared,
    store: &crate::store::Store,
) -> bool {
    let mut appended = false;
    for stream in StreamId::ALL {
        let i = stream.index();
        let end = shared.end[i].load(Ordering::Acquire);
        let Some(r) = recover(end, &snap.streams[i]) else { continue };
        if r.hole > 0 {
            tracing::warn!(proc = %id, stream = stream.name(), offset = end, bytes = r.hole, "output read before the last daemon died was never logged and is gone: recorded as lost");
        }
        tracing::info!(proc = %id, stream = stream.name(), offset = r.at, bytes = r.bytes.len(), "logging what the last daemon read and never committed");
        let mut at = r.at;
        let mut rest = bytes::Bytes::from(r.bytes);
        while !rest.is_empty() {
            let data = rest.split_to(rest.len().min(crate::config::MAX_RECORD_BYTES));
            let len = data.len() as u64;
            let chunk = crate::domain::Chunk {
                proc: id,
                stream,
                offset: at,
                ts_ns: crate::sys::wall_ns(),
                mono_ns: crate::sys::monotonic_ns(),
                data,
                origin: None,
            };
            if let Err(e) = store.append(chunk).await {
                tracing::error!(proc = %id, error = %e, "cannot log what the last daemon read");
            }
            shared.chunks[i].fetch_add(1, Ordering::AcqRel);
            at += len;
        }
        // The hole is a gap in the stream's offsets: reads, exports and
        // searches report it where it is, and it is not counted as kept.
        shared.end[i].store(snap.streams[i].total, Ordering::Release);
        appended = true;
    }
    if appended {
        shared.changes.changed();
    }
    appended
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reopen(j: &Journal, pty: bool) -> Journal {
        let fds = j.fds().iter().map(|f| f.try_clone_to_owned().unwrap()).collect();
        Journal::open(fds, pty).unwrap()
    }

    /// Writes `data` into a pipe and has `j` take it as stdout.
    fn take(j: &Journal, data: &[u8]) -> Vec<u8> {
        let (r, w) = rustix::pipe::pipe().unwrap();
        rustix::io::write(&w, data).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let n = j.take(StreamId::Stdout, r.as_fd(), &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn what_was_read_comes_back_in_order_and_a_reopened_journal_continues() {
        let j = Journal::create(1 << 16, false).unwrap();
        assert_eq!(take(&j, b"hello "), b"hello ");
        assert_eq!(take(&j, b"world"), b"world");
        let snap = reopen(&j, false).snapshot().unwrap();
        let out = &snap.streams[1];
        assert_eq!((out.total, out.from, out.bytes.as_slice()), (11, 0, &b"hello world"[..]));
        let again = reopen(&j, false);
        assert_eq!(take(&again, b"!!"), b"!!");
        assert_eq!(again.snapshot().unwrap().streams[1].total, 13);
    }

    #[test]
    fn what_a_terminal_gave_the_relay_reaches_the_log_at_the_next_open() {
        let j = Journal::create(1 << 16, true).unwrap();
        // The kernel moved these from the terminal; the daemon died before
        // it moved them on.
        let (_, w) = j.relay.as_ref().unwrap();
        rustix::io::write(w, b"abc").unwrap();
        let snap = reopen(&j, true).snapshot().unwrap();
        assert_eq!((snap.streams[1].total, snap.streams[1].bytes.as_slice()), (3, &b"abc"[..]));
    }

    #[test]
    fn an_output_log_keeps_its_newest_ring_and_says_where_it_begins() {
        let j = Journal::create(4096, false).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(1000) {
            assert_eq!(take(&j, piece), piece);
        }
        let tail = reopen(&j, false).snapshot().unwrap().streams[1].clone();
        assert_eq!(tail.total, 200_000);
        assert!(
            tail.from > 0 && tail.total - tail.from <= 4096 + TRIM_SLACK_BYTES,
            "{}",
            tail.from
        );
        assert_eq!(tail.bytes, data[usize::try_from(tail.from).unwrap()..]);
    }

    #[test]
    fn what_fell_out_of_the_ring_is_a_hole_of_its_size() {
        let tail = StreamTail { total: 16, from: 8, bytes: b"89abcdef".to_vec() };
        // The log committed 3 bytes: 5 are gone, 8 are recovered after them.
        let r = recover(3, &tail).unwrap();
        assert_eq!((r.at, r.hole, r.bytes.as_slice()), (8, 5, &b"89abcdef"[..]));
        // The log committed 12: the 4 after it come back, no hole.
        let r = recover(12, &tail).unwrap();
        assert_eq!((r.at, r.hole, r.bytes.as_slice()), (12, 0, &b"cdef"[..]));
        assert_eq!(recover(16, &tail), None);
    }

    #[test]
    fn an_input_write_cut_short_by_a_crash_never_passes_torn_bytes_for_old_ones() {
        let j = Journal::create(32, false).unwrap();
        j.accept(b"01234567");
        // A crash after the intent and the ring, before the total.
        j.put(slot(0) + INTENT, 11).unwrap();
        j.ring_write(8, b"xyz").unwrap();
        let tail = j.snapshot().unwrap().streams[0].clone();
        assert_eq!((tail.total, tail.from, tail.bytes.as_slice()), (8, 3, &b"34567"[..]));
    }

    #[test]
    fn accepted_input_is_delivered_once_unless_it_was_secret_or_fell_out() {
        let j = Journal::create(256, true).unwrap();
        j.accept(b"ls\n");
        j.delivered(3);
        j.accept(b"echo hi\n");
        j.delivered(2);
        let snap = j.snapshot().unwrap();
        assert_eq!(undelivered(&snap), Undelivered::Deliver(b"ho hi\n".to_vec()));
        let end = j.accept(b"******\n");
        j.secret_until(end);
        assert_eq!(undelivered(&j.snapshot().unwrap()), Undelivered::Lost(13));
        j.delivered(13);
        assert_eq!(undelivered(&j.snapshot().unwrap()), Undelivered::None);
    }
}
