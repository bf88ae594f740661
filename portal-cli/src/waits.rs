//! `wait`, `run` and `send-keys`: the daemon's waits from a terminal or a
//! script. Exit 0 when the condition was reached, 1 when it was not (a
//! timeout, a stop pattern, the process ending first, or a command that
//! failed).

use std::time::Duration;

use clap::Args;
use portal_client::client::Client;
use portal_client::vocab;
use portal_client::waits::{self, Mode};
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt::{self, print_json};
use crate::{Failure, JsonFlag, Outcome, proc_ref};

/// Conditions shared by `wait` and `run`.
#[derive(Debug, Args)]
pub(crate) struct UntilArgs {
    /// Wait for this text in the output (escapes stripped).
    #[arg(long = "match", value_name = "TEXT")]
    needle: Option<String>,
    /// --match and --stop are regular expressions.
    #[arg(long)]
    regex: bool,
    /// Look for --match on the rendered screen instead of the output.
    #[arg(long)]
    on_screen: bool,
    /// End early, unsuccessfully, when this appears (repeatable).
    #[arg(long, value_name = "TEXT")]
    stop: Vec<String>,
    /// End once no output arrived for this long (e.g. 750ms).
    #[arg(long, value_parser = fmt::parse_duration)]
    settle: Option<Duration>,
    /// End once the screen stopped changing for --settle (default 750ms).
    #[arg(long)]
    screen_stable: bool,
    /// Give up after this long [default: 30s; the daemon caps one call at about 50s].
    #[arg(long, value_parser = fmt::parse_duration)]
    timeout: Option<Duration>,
    /// Print at most this many bytes of output (the newest); it never ends
    /// the wait [default: 128 KiB].
    #[arg(long)]
    max_bytes: Option<u64>,
    /// Also print the rendered screen.
    #[arg(long)]
    snapshot: bool,
    /// Also end when the program waits for input (implied without --match,
    /// --settle or --screen-stable).
    #[arg(long = "on-input")]
    on_input: bool,
    /// On the alternate screen (vim, less), print the output stream rather
    /// than the rendered screen.
    #[arg(long)]
    raw_output: bool,
}

impl UntilArgs {
    fn condition(&self) -> pb::WaitCondition {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        pb::WaitCondition {
            needle: self.needle.clone().unwrap_or_default(),
            regex: self.regex,
            on_screen: self.on_screen,
            stop: self.stop.clone(),
            settle_ms: self.settle.map_or(0, |d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
            screen_stable: self.screen_stable,
            max_bytes: self.max_bytes.unwrap_or(0),
            timeout_ms: self.timeout.map_or(0, ms),
            snapshot: self.snapshot,
            input: self.on_input.then_some(true),
            raw_output: self.raw_output,
        }
    }
}

/// Arguments of `wait`.
#[derive(Debug, Args)]
pub(crate) struct WaitArgs {
    /// Process ids or names; with several, the wait ends when the first one
    /// ends (or, with --all, each), and says which and why.
    #[arg(required = true, add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
    pub(crate) procs: Vec<String>,
    /// With several processes: wait until every one's wait ended.
    #[arg(long)]
    all: bool,
    /// Count output from the start of its history, not only from now (one
    /// process).
    #[arg(long)]
    from_start: bool,
    #[command(flatten)]
    until: UntilArgs,
    #[command(flatten)]
    out: JsonFlag,
}

/// Arguments of `run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Process id or name.
    #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
    pub(crate) proc: String,
    /// Do not press Enter after the input.
    #[arg(long)]
    no_enter: bool,
    #[command(flatten)]
    until: UntilArgs,
    #[command(flatten)]
    out: JsonFlag,
    /// What to type (joined with spaces), after `--`.
    #[arg(required = true, last = true, value_name = "INPUT")]
    input: Vec<String>,
}

/// Whether the outcome is what was asked for.
fn reached(r: &pb::WaitResponse, wanted_match: bool) -> bool {
    let ok = match r.reason() {
        pb::WaitReason::Matched
        | pb::WaitReason::Settled
        | pb::WaitReason::ScreenStable
        | pb::WaitReason::Prompt
        | pb::WaitReason::InputRequested
        | pb::WaitReason::AwaitingSecret => true,
        pb::WaitReason::Exited => !wanted_match,
        _ => false,
    };
    ok && r.command_exit_code.is_none_or(|c| c == 0)
}

pub(crate) fn report(r: &pb::WaitResponse, out: JsonFlag, wanted_match: bool) -> Outcome {
    if out.json {
        print_json(&json!({
            "reason": vocab::WaitReason::from(r.reason()).as_str(),
            "matched": (!r.matched.is_empty()).then_some(&r.matched),
            "output": r.output,
            "bytes": r.bytes,
            "truncated": r.truncated,
            "next": r.next.as_ref().map(|c| c.offsets.iter().map(|o| json!({"stream": o.stream, "offset": o.offset})).collect::<Vec<_>>()),
            "status": vocab::Status::from(r.status()).as_str(),
            "exit_code": r.exit_code,
            "exit_signal": r.exit_signal,
            "command_exit_code": r.command_exit_code,
            "prompt": (!r.prompt.is_empty()).then_some(&r.prompt),
            "input_state": vocab::InputState::from(r.input_state()).as_str(),
            "input_source": vocab::InputSource::from(r.input_source()).as_str(),
            "output_is_screen": r.output_is_screen,
            "alternate_screen": r.alternate_screen,
            "screen": r.screen,
            "effective_timeout_ms": r.effective_timeout_ms,
            "timeout_clamped": r.timeout_clamped,
            "elapsed_ms": r.elapsed_ms,
        }));
    } else {
        out!("{}", r.output);
        if !r.screen.is_empty() {
            outln!("── screen ──");
            for line in &r.screen {
                outln!("{line}");
            }
        }
        let mut line = format!("[{}", vocab::WaitReason::from(r.reason()).as_str());
        if !r.matched.is_empty() {
            line.push_str(&format!(" {:?}", r.matched));
        }
        if !r.prompt.is_empty() {
            line.push_str(&format!(" {:?}", r.prompt));
        }
        match (r.reason(), r.exit_code, r.exit_signal) {
            (pb::WaitReason::Exited, Some(c), _) => line.push_str(&format!(", exit {c}")),
            (pb::WaitReason::Exited, None, Some(s)) => line.push_str(&format!(", signal {s}")),
            _ => {}
        }
        if let Some(c) = r.command_exit_code {
            line.push_str(&format!(", command exit {c}"));
        }
        if r.truncated {
            line.push_str(", earlier output cut to --max-bytes (`read` shows it)");
        }
        line.push_str(&format!(" after {}]", fmt::short_duration(r.elapsed_ms)));
        if r.timeout_clamped {
            line.push_str(&format!(
                " (timeout lowered to {})",
                fmt::short_duration(r.effective_timeout_ms)
            ));
        }
        eprintln!("{line}");
        if r.reason() == pb::WaitReason::AwaitingSecret {
            let host = match crate::TARGET.get() {
                Some(portal_client::hosts::Target::Remote(r)) => Some(r.label.as_str()),
                _ => None,
            };
            eprintln!(
                "it asks for a secret: type it with `{}`",
                portal_client::hosts::secret_command(host, "<id>")
            );
        }
    }
    if reached(r, wanted_match) { Ok(()) } else { Err(Failure::Silent) }
}

/// `wait`.
pub(crate) async fn wait(client: &Client, a: WaitArgs) -> Outcome {
    if a.procs.len() > 1 {
        return wait_many(client, a).await;
    }
    let from = a.from_start.then(|| pb::Cursor {
        offsets: [pb::Stream::Stdout, pb::Stream::Stderr]
            .iter()
            .map(|s| pb::StreamOffset { stream: (*s).into(), offset: 0 })
            .collect(),
    });
    let req = pb::WaitRequest {
        proc: a.procs.first().and_then(|p| proc_ref(p)),
        streams: vec![],
        from,
        until: Some(a.until.condition()),
    };
    let r = client.rpc().wait(req).await?.into_inner();
    report(&r, a.out, a.until.needle.is_some())
}

/// `wait` on several processes: a block per process (stdout), as `wait`
/// on it alone prints it, and a last line naming the one that ended the
/// wait. Exit 0 when that one (or, with --all, every one) reached what was
/// asked.
async fn wait_many(client: &Client, a: WaitArgs) -> Outcome {
    if a.from_start {
        return Err(Failure::Failed(anyhow::anyhow!(
            "--from-start takes one process: each of several starts where it was last read"
        )));
    }
    let mode = if a.all { Mode::All } else { Mode::Any };
    let procs: Vec<pb::ProcRef> = a.procs.iter().filter_map(|p| proc_ref(p)).collect();
    let r = waits::wait_many(&client.rpc(), &procs, &[], &a.until.condition(), mode).await?;
    let wanted_match = a.until.needle.is_some();
    let label = |w: &waits::Waited| {
        if w.name.is_empty() { w.id.to_string() } else { format!("{} {:?}", w.id, w.name) }
    };
    let ended_by = r.ended_by.and_then(|i| r.results.get(i));
    if a.out.json {
        print_json(&json!({
            "ended_by": ended_by.map(|w| w.id),
            "results": r.results.iter().map(|w| {
                let mut v = json!({"id": w.id, "reason": "pending"});
                if !w.name.is_empty() {
                    v["name"] = json!(w.name);
                }
                if let Some(x) = &w.response {
                    v["reason"] = json!(vocab::WaitReason::from(x.reason()).as_str());
                    v["status"] = json!(vocab::Status::from(x.status()).as_str());
                    for (k, val) in [
                        ("output", (!x.output.is_empty()).then(|| json!(x.output))),
                        ("prompt", (!x.prompt.is_empty()).then(|| json!(x.prompt))),
                        ("matched", (!x.matched.is_empty()).then(|| json!(x.matched))),
                        ("exit_code", x.exit_code.map(|c| json!(c))),
                        ("exit_signal", x.exit_signal.map(|s| json!(s))),
                    ] {
                        if let Some(val) = val {
                            v[k] = val;
                        }
                    }
                }
                v
            }).collect::<Vec<_>>(),
        }));
    } else {
        for w in &r.results {
            outln!("── {} ──", label(w));
            match &w.response {
                Some(x) => {
                    out!("{}", x.output);
                    if !x.output.is_empty() && !x.output.ends_with('\n') {
                        outln!();
                    }
                    let mut line = format!("[{}", vocab::WaitReason::from(x.reason()).as_str());
                    if !x.prompt.is_empty() {
                        line.push_str(&format!(" {:?}", x.prompt));
                    }
                    match (x.exit_code, x.exit_signal) {
                        (Some(c), _) => line.push_str(&format!(", exit {c}")),
                        (None, Some(s)) => line.push_str(&format!(", signal {s}")),
                        _ => {}
                    }
                    line.push_str(&format!(" after {}]", fmt::short_duration(x.elapsed_ms)));
                    outln!("{line}");
                }
                None => outln!("[pending: still waiting when the wait ended]"),
            }
        }
        match (mode, ended_by) {
            (Mode::Any, Some(w)) => {
                let why = w
                    .response
                    .as_ref()
                    .map_or("", |x| vocab::WaitReason::from(x.reason()).as_str());
                eprintln!("ended by {}: {why}", label(w));
            }
            (Mode::Any, None) => eprintln!("every wait timed out"),
            (Mode::All, _) => {}
        }
    }
    let ok = |w: &waits::Waited| w.response.as_ref().is_some_and(|x| reached(x, wanted_match));
    let fine = match mode {
        Mode::Any => ended_by.is_some_and(ok),
        Mode::All => r.results.iter().all(ok),
    };
    if fine { Ok(()) } else { Err(Failure::Silent) }
}

/// `run`.
pub(crate) async fn run(client: &Client, a: RunArgs) -> Outcome {
    let req = pb::RunRequest {
        proc: proc_ref(&a.proc),
        input: a.input.join(" "),
        no_enter: a.no_enter,
        until: Some(a.until.condition()),
    };
    let r = client.rpc().run(req).await?.into_inner();
    report(&r, a.out, a.until.needle.is_some())
}

/// `send-keys`: key names, and `text:...` for literal text.
pub(crate) async fn send_keys(client: &Client, proc: &str, keys: Vec<String>) -> Outcome {
    let keys = keys
        .into_iter()
        .map(|k| pb::KeyInput {
            input: Some(match k.strip_prefix("text:") {
                Some(text) => pb::key_input::Input::Text(text.to_owned()),
                None => pb::key_input::Input::Key(k),
            }),
        })
        .collect();
    let r = match client.rpc().send_keys(pb::SendKeysRequest { proc: proc_ref(proc), keys }).await {
        Ok(r) => r.into_inner(),
        // Nothing was typed; say how to type the name as text.
        Err(s)
            if s.code() == tonic::Code::InvalidArgument
                && s.message().starts_with("unknown key") =>
        {
            return Err(anyhow::anyhow!(
                "{}\nhint: nothing was typed; `text:F13` types a word that reads as a key",
                s.message()
            )
            .into());
        }
        Err(s) => return Err(s.into()),
    };
    eprintln!("sent {} bytes", r.written);
    Ok(())
}
