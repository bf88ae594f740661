//! The blocking tools: process_wait (one process, or several at once) and
//! process_run.

use portal_client::waits::{self, Mode};
use portal_proto::v1 as pb;

use super::process::{cursor_arg, read_budget};
use super::{Progress, Reply, Shim, by_id};
use crate::args::{ModeArg, NewSource, RunArgs, Until, WaitArgs};
use crate::results::{WaitReply, Waited, WaitedMany};

fn condition(u: &Until) -> Result<pb::WaitCondition, String> {
    Ok(pb::WaitCondition {
        needle: u.pattern.clone().unwrap_or_default(),
        regex: u.regex,
        on_screen: u.on_screen,
        stop: u.stop.clone(),
        settle_ms: u.settle_ms.unwrap_or(0),
        screen_stable: u.screen_stable,
        max_bytes: read_budget(u.max_bytes)?,
        timeout_ms: u.timeout_ms.unwrap_or(0),
        snapshot: u.snapshot,
        input: u.on_input,
        raw_output: u.raw_output,
    })
}

impl Shim {
    pub(super) async fn wait(&self, a: WaitArgs, progress: Progress) -> Reply<WaitReply> {
        let streams = match a.source {
            NewSource::Stdout => vec![pb::Stream::Stdout],
            NewSource::Stderr => vec![pb::Stream::Stderr],
            NewSource::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let id = match (a.id, a.ids.is_empty()) {
            (Some(id), true) if a.mode.is_none() => id,
            (None, false) if a.cursor.is_none() => {
                return self.wait_many(a, streams, progress).await;
            }
            (None, false) => {
                return Err("Error: cursor: a cursor belongs to one process; with ids each wait starts where its process's last read_new, wait or run stopped.".into());
            }
            (Some(_), true) => {
                return Err(
                    "Error: mode: it chooses between several processes: give them as ids.".into()
                );
            }
            (Some(_), false) => return Err("Error: give id or ids, not both.".into()),
            (None, true) => return Err("Error: id: name the process (or several as ids).".into()),
        };
        let from = a.cursor.as_deref().map(cursor_arg).transpose()?;
        let snapshot = a.until.snapshot;
        let req = pb::WaitRequest {
            proc: by_id(id),
            streams: streams.into_iter().map(Into::into).collect(),
            from,
            until: Some(condition(&a.until)?),
        };
        let call = self.call(Some(id), |mut c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting", Some(id), call).await?;
        let w = Waited::new(id, r, snapshot);
        Ok((w.text_block(), WaitReply::One(Box::new(w))))
    }

    /// process_wait on several processes (see [`portal_client::waits`]).
    async fn wait_many(
        &self,
        a: WaitArgs,
        streams: Vec<pb::Stream>,
        progress: Progress,
    ) -> Reply<WaitReply> {
        let mode = match a.mode {
            Some(ModeArg::All) => Mode::All,
            Some(ModeArg::Any) | None => Mode::Any,
        };
        let procs: Vec<pb::ProcRef> = a.ids.iter().filter_map(|id| by_id(*id)).collect();
        let until = condition(&a.until)?;
        let call = self.call(None, |c| {
            let (procs, streams, until) = (procs.clone(), streams.clone(), until.clone());
            async move {
                waits::wait_many(&c, &procs, &streams, &until, mode).await.map(tonic::Response::new)
            }
        });
        let r = self.with_progress(&progress, "waiting", None, call).await?;
        let many = WaitedMany::new(r, a.until.snapshot);
        Ok((many.text(mode), WaitReply::Many(many)))
    }

    pub(super) async fn run(&self, a: RunArgs, progress: Progress) -> Reply<Waited> {
        let snapshot = a.until.snapshot;
        let req = pb::RunRequest {
            proc: by_id(a.id),
            input: a.input,
            no_enter: !a.enter,
            until: Some(condition(&a.until)?),
        };
        let call = self.call_once(Some(a.id), |mut c| {
            let req = req.clone();
            async move { c.run(req).await }
        });
        let r = self.with_progress(&progress, "running", Some(a.id), call).await?;
        let w = Waited::new(a.id, r, snapshot);
        Ok((w.text_block(), w))
    }
}
