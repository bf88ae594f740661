//! The blocking tools: process_wait and process_run.

use portal_proto::v1 as pb;

use super::process::{cursor_arg, read_budget};
use super::{Progress, Reply, Shim, by_id};
use crate::args::{NewSource, RunArgs, Until, WaitArgs};
use crate::results::Waited;

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
    pub(super) async fn wait(&self, a: WaitArgs, progress: Progress) -> Reply<Waited> {
        let streams = match a.source {
            NewSource::Stdout => vec![pb::Stream::Stdout],
            NewSource::Stderr => vec![pb::Stream::Stderr],
            NewSource::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let from = a.cursor.as_deref().map(cursor_arg).transpose()?;
        let snapshot = a.until.snapshot;
        let req = pb::WaitRequest {
            proc: by_id(a.id),
            streams: streams.into_iter().map(Into::into).collect(),
            from,
            until: Some(condition(&a.until)?),
        };
        let call = self.call(Some(a.id), |mut c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting", Some(a.id), call).await?;
        let w = Waited::new(a.id, r, snapshot);
        Ok((w.text_block(), w))
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
