//! The process tools: start, read, write, signal, list, inspect, kill,
//! clear, clean up, screen and keys.

use bytes::Bytes;
use portal_client::vocab;
use portal_proto::v1 as pb;

use super::{Progress, Reply, Shim, by_id};
use crate::args::{
    IdArgs, KeyArg, NewSource, NoArgs, ReadArgs, ReadNewArgs, ScreenArgs, SendKeysArgs, SignalArgs,
    Source, StartArgs, Unit, WriteArgs,
};
use crate::results::{
    self, Done, Inspected, KeysSent, KilledAll, Listed, Output, ProcessInfo, Screen, Signalled,
    Started, Waited, Written, process_info,
};

/// Default page of a read, in bytes of output: a screenful of logs many times
/// over, small enough for an agent's context.
const DEFAULT_READ_BYTES: u64 = 64 << 10;

/// Largest page an agent may ask for; beyond it, page with the cursor.
const MAX_READ_BYTES: u64 = 1 << 20;

/// The page size `max_bytes` asks for: one meaning in every tool that takes
/// it (reads, waits and runs), the same default and ceiling.
pub(super) fn read_budget(max_bytes: Option<u64>) -> Result<u64, String> {
    match max_bytes {
        None | Some(0) => Ok(DEFAULT_READ_BYTES),
        Some(n) if n > MAX_READ_BYTES => Err(format!(
            "Error: max_bytes {n} is more than {MAX_READ_BYTES}\nPage through long output with the returned cursor instead."
        )),
        Some(n) => Ok(n),
    }
}

pub(super) fn cursor_arg(c: &str) -> Result<pb::Cursor, String> {
    results::parse_cursor(c)
        .map_err(|e| format!("Error: {e}\nPass the cursor string exactly as a read returned it."))
}

impl Shim {
    pub(super) async fn start(&self, a: StartArgs, progress: Progress) -> Reply<Started> {
        if !a.pty && (a.rows.is_some() || a.cols.is_some()) {
            return Err(
                "Error: rows and cols apply only with pty: true\nDrop them or set pty: true."
                    .into(),
            );
        }
        let mut req = pb::StartRequest {
            command: a.command,
            args: a.args,
            // The shim's own directory means nothing on another host: the
            // daemon there takes the user's home.
            cwd: a.cwd.unwrap_or_else(|| {
                if self.host.is_some() { String::new() } else { self.cwd.clone() }
            }),
            env: a.env.unwrap_or_default().into_iter().collect(),
            name: a.name.unwrap_or_default(),
            timeout_ms: a.timeout_ms,
            mode: if a.pty { pb::Mode::Pty } else { pb::Mode::Pipes }.into(),
            size: a
                .pty
                .then(|| pb::TermSize { rows: a.rows.unwrap_or(0), cols: a.cols.unwrap_or(0) }),
            ..Default::default()
        };
        // Programs run in the client's world: its environment (this shim's,
        // which the client gave it), never sent to another host.
        let remote = self.host.is_some();
        let env_from = a.env_from.map_or(
            if remote {
                portal_client::environ::EnvFrom::Daemon
            } else {
                portal_client::environ::EnvFrom::Caller
            },
            Into::into,
        );
        portal_client::environ::apply(&mut req, env_from, remote)
            .map_err(|e| format!("Error: env_from: {e}"))?;
        let p = self
            .call_once(None, |mut c| {
                let req = req.clone();
                async move { c.start(req).await }
            })
            .await?;
        let process = process_info(&p);
        let streams: &[pb::Stream] = if process.pty {
            &[pb::Stream::Stdout]
        } else {
            &[pb::Stream::Stdout, pb::Stream::Stderr]
        };
        let from = pb::Cursor {
            offsets: streams
                .iter()
                .map(|s| pb::StreamOffset { stream: (*s).into(), offset: 0 })
                .collect(),
        };
        let cursor = results::cursor_string(Some(&from));
        let Some(wait) = a.wait else {
            let text = format!(
                "Process started. ID={}, OS_PID={}, status={}{}",
                process.id,
                process.pid,
                process.status_text(),
                if process.pty {
                    " (pty; read with process_read_new or process_screen)"
                } else {
                    ""
                }
            );
            let hint = Some(
                "process_wait returns at its first prompt (or pass wait to process_start next time); process_read_new reads what it printed"
                    .to_owned(),
            );
            return Ok((text, Started { process, cursor: Some(cursor), wait: None, hint }));
        };
        let mut until = pb::WaitCondition {
            timeout_ms: a.wait_timeout_ms.unwrap_or(0),
            ..pb::WaitCondition::default()
        };
        match wait.as_str() {
            "input" => until.input = Some(true),
            "exit" => until.input = Some(false),
            "" => {
                return Err(
                    "Error: wait is empty\nUse \"input\", \"exit\" or a text to wait for.".into()
                );
            }
            pattern => until.needle = pattern.to_owned(),
        }
        let id = process.id;
        let req = pb::WaitRequest {
            proc: by_id(id),
            streams: streams.iter().map(|s| (*s).into()).collect(),
            // A new process's "read new" position is its first byte; waiting
            // from it also moves it, so process_read_new does not repeat this.
            from: None,
            until: Some(until),
        };
        let call = self.call(Some(id), |mut c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting", Some(id), call).await?;
        let w = Waited::new(id, r, false);
        // The process as it is now, after the wait.
        let process = match self
            .call(Some(id), |mut c| async move {
                c.inspect(pb::InspectRequest { proc: by_id(id) }).await
            })
            .await
        {
            Ok(p) => process_info(&p),
            Err(_) => process,
        };
        let text = format!(
            "Process started. ID={}, OS_PID={}\n{}",
            process.id,
            process.pid,
            w.text_block()
        );
        let process = process.beside_wait();
        Ok((text, Started { process, cursor: None, wait: Some(w), hint: None }))
    }

    async fn read_output(&self, id: u64, req: pb::ReadRequest) -> Result<Output, String> {
        let resp = self
            .call(Some(id), |mut c| {
                let req = req.clone();
                async move { c.read(req).await }
            })
            .await?;
        Ok(results::output(id, &resp))
    }

    pub(super) async fn read(&self, a: ReadArgs, _: Progress) -> Reply<Output> {
        let max_bytes = read_budget(a.max_bytes)?;
        let streams = match a.source {
            Source::Stdout => vec![pb::Stream::Stdout],
            Source::Stderr => vec![pb::Stream::Stderr],
            Source::Stdin => vec![pb::Stream::Stdin],
            Source::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let (from, paging) = if let Some(c) = &a.cursor {
            (pb::read_request::From::Cursor(cursor_arg(c)?), true)
        } else {
            let per_unit: u64 = match a.unit {
                Unit::Ns => 1,
                Unit::Us => 1_000,
                Unit::Ms => 1_000_000,
                Unit::S => 1_000_000_000,
            };
            if a.duration == 0 {
                return Err("Error: duration must be more than 0\nUse e.g. duration=10000 for the last 10 s.".into());
            }
            (pb::read_request::From::LastNs(a.duration.saturating_mul(per_unit)), false)
        };
        let req = pb::ReadRequest {
            proc: by_id(a.id),
            streams: streams.into_iter().map(Into::into).collect(),
            from: Some(from),
            max_bytes,
            encoding: pb::Encoding::Text.into(),
            keep: if paging { pb::Keep::Head } else { pb::Keep::Tail }.into(),
        };
        let out = self.read_output(a.id, req).await?;
        let empty = if paging {
            "No output after this cursor."
        } else {
            "No output records found in the specified time window."
        };
        Ok((results::output_text(&out, empty, paging), out))
    }

    pub(super) async fn read_new(&self, a: ReadNewArgs, _: Progress) -> Reply<Output> {
        let max_bytes = read_budget(a.max_bytes)?;
        let streams = match a.source {
            NewSource::Stdout => vec![pb::Stream::Stdout],
            NewSource::Stderr => vec![pb::Stream::Stderr],
            NewSource::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let from = match &a.cursor {
            Some(c) => pb::read_request::From::Cursor(cursor_arg(c)?),
            None => pb::read_request::From::ServerCursor(true),
        };
        let req = pb::ReadRequest {
            proc: by_id(a.id),
            streams: streams.into_iter().map(Into::into).collect(),
            from: Some(from),
            max_bytes,
            encoding: pb::Encoding::Text.into(),
            keep: pb::Keep::Tail.into(),
        };
        let out = self.read_output(a.id, req).await?;
        Ok((results::output_text(&out, "No new output.", false), out))
    }

    pub(super) async fn write(&self, a: WriteArgs, _: Progress) -> Reply<Written> {
        let data = Bytes::from(a.content.into_bytes());
        let written = data.len() as u64;
        self.call_once(Some(a.id), |mut c| {
            let req = pb::WriteRequest { proc: by_id(a.id), data: data.clone(), secret: false };
            async move { c.write(req).await }
        })
        .await?;
        Ok((
            format!("Written {written} bytes to process {} stdin.", a.id),
            Written { id: a.id, written },
        ))
    }

    pub(super) async fn signal(&self, a: SignalArgs, _: Progress) -> Reply<Signalled> {
        let r = self
            .call_once(Some(a.id), |mut c| {
                let req = pb::SignalRequest { proc: by_id(a.id), signal: a.signal.clone() };
                async move { c.signal(req).await }
            })
            .await?;
        let text = format!("Signal {} ({}) sent to process {}.", r.name, r.signal, a.id);
        Ok((text, Signalled { id: a.id, signal: r.signal, name: r.name }))
    }

    pub(super) async fn list(&self, _: NoArgs, _: Progress) -> Reply<Listed> {
        let r = self.call(None, |mut c| async move { c.list(pb::ListRequest {}).await }).await?;
        let processes: Vec<ProcessInfo> = r
            .processes
            .iter()
            .map(|p| ProcessInfo { host: self.host.clone(), ..process_info(p) }.listed())
            .collect();
        Ok((results::list_text(&processes), Listed { processes, unreachable: Vec::new() }))
    }

    pub(super) async fn inspect(&self, a: IdArgs, _: Progress) -> Reply<Inspected> {
        let p = self
            .call(Some(a.id), |mut c| async move {
                c.inspect(pb::InspectRequest { proc: by_id(a.id) }).await
            })
            .await?;
        let process = process_info(&p);
        Ok((results::inspect_text(&process), Inspected { process }))
    }

    pub(super) async fn kill(&self, a: IdArgs, _: Progress) -> Reply<Inspected> {
        let p =
            self.call(Some(a.id), |mut c| async move {
                c.kill(pb::KillRequest { proc: by_id(a.id) }).await
            })
            .await?;
        let process = process_info(&p);
        let text = if process.status == Some(vocab::Status::Killed) {
            format!(
                "Process {} killed. Status: killed. Its output is kept; process_cleanup removes it.",
                a.id
            )
        } else {
            format!(
                "Process {} had already ended (status={}{}); nothing to kill.",
                a.id,
                process.status_text(),
                match process.exit_text() {
                    t if t.is_empty() => t,
                    t => format!(", {t}"),
                }
            )
        };
        Ok((text, Inspected { process }))
    }

    pub(super) async fn kill_all(&self, _: NoArgs, _: Progress) -> Reply<KilledAll> {
        let r =
            self.call(None, |mut c| async move { c.kill_all(pb::KillAllRequest {}).await }).await?;
        Ok((format!("Killed {} process(es).", r.killed.len()), KilledAll { killed: r.killed }))
    }

    pub(super) async fn clear(&self, a: IdArgs, _: Progress) -> Reply<Done> {
        self.call(Some(a.id), |mut c| async move {
            c.clear(pb::ClearRequest { proc: by_id(a.id) }).await
        })
        .await?;
        Ok((format!("Process {} I/O records cleared.", a.id), Done { id: a.id }))
    }

    pub(super) async fn cleanup(&self, a: IdArgs, _: Progress) -> Reply<Done> {
        self.call(Some(a.id), |mut c| async move {
            c.cleanup(pb::CleanupRequest { proc: by_id(a.id) }).await
        })
        .await?;
        Ok((format!("Process {} cleaned up.", a.id), Done { id: a.id }))
    }

    pub(super) async fn screen(&self, a: ScreenArgs, _: Progress) -> Reply<Screen> {
        let resize = (a.cols.is_some() || a.rows.is_some())
            .then(|| pb::TermSize { rows: a.rows.unwrap_or(0), cols: a.cols.unwrap_or(0) });
        let s = self
            .call(Some(a.id), |mut c| async move {
                c.screen(pb::ScreenRequest { proc: by_id(a.id), resize }).await
            })
            .await?;
        let size = s.size.unwrap_or_default();
        let screen = Screen {
            id: s.id,
            status: s.status().into(),
            buffer: if s.alternate_screen { "alternate" } else { "primary" }.into(),
            cols: size.cols,
            rows: size.rows,
            cursor_x: s.cursor_col,
            cursor_y: s.cursor_row,
            title: s.title,
            lines: results::written_rows(s.lines),
        };
        Ok((results::screen_text(&screen), screen))
    }

    pub(super) async fn send_keys(&self, a: SendKeysArgs, _: Progress) -> Reply<KeysSent> {
        let keys: Vec<pb::KeyInput> = a
            .keys
            .into_iter()
            .map(|k| pb::KeyInput {
                input: Some(match k {
                    KeyArg::Key(name) => pb::key_input::Input::Key(name),
                    KeyArg::Text { text } => pb::key_input::Input::Text(text),
                }),
            })
            .collect();
        let r = self
            .call_once(Some(a.id), |mut c| {
                let req = pb::SendKeysRequest { proc: by_id(a.id), keys: keys.clone() };
                async move { c.send_keys(req).await }
            })
            .await?;
        Ok((
            format!("Sent {} bytes of keys to process {}.", r.written, a.id),
            KeysSent { id: a.id, written: r.written },
        ))
    }
}
