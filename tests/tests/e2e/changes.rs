//! The `Changes` stream a dashboard follows: it says at once that it is
//! live, then names each process that started, printed, was written to,
//! ended or was forgotten, and says when an agent's state changed.

use portal_proto::v1 as pb;
use portal_tests::{TestDaemon, bounded, by_id, start_pipes, start_pty, wait_exit, write};
use tonic::Streaming;

/// The next event whose ids name `id` (or, with `agents`, that says the
/// agent book changed), skipping others.
async fn until_named(events: &mut Streaming<pb::ChangesEvent>, id: u64, agents: bool, what: &str) {
    bounded(what, async {
        loop {
            let e = events.message().await.expect("stream").expect("the stream goes on");
            assert!(!e.initial, "only the first event is the initial one");
            assert!(e.ids.windows(2).all(|w| w[0] < w[1]), "ids ascend: {:?}", e.ids);
            if e.ids.contains(&id) && (!agents || e.agents) {
                return;
            }
        }
    })
    .await;
}

#[tokio::test]
async fn changes_name_each_process_that_started_printed_ended_or_went() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let mut events = rpc
        .changes(pb::ChangesRequest { min_interval_ms: 20 })
        .await
        .expect("changes")
        .into_inner();
    let first = bounded("the initial event", events.message()).await.unwrap().unwrap();
    assert!(first.initial && first.ids.is_empty(), "{first:?}");

    let cat = start_pipes(&mut rpc, "cat", &[]).await;
    until_named(&mut events, cat.id, false, "the start of cat").await;
    write(&mut rpc, cat.id, b"hello\n").await;
    until_named(&mut events, cat.id, false, "cat's echo").await;
    let listed = rpc.list(pb::ListRequest {}).await.unwrap().into_inner();
    let row = listed.processes.iter().find(|p| p.id == cat.id).unwrap();
    assert!(row.output_quiet_ms.is_some(), "cat printed, so it has a quiet time: {row:?}");

    rpc.close_stdin(pb::CloseStdinRequest { proc: by_id(cat.id) }).await.unwrap();
    wait_exit(&mut rpc, cat.id).await;
    until_named(&mut events, cat.id, false, "cat's end").await;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(cat.id) }).await.unwrap();
    until_named(&mut events, cat.id, false, "cat forgotten").await;

    // An agent's report is an agent change of its terminal.
    let agent = start_pty(
        &mut rpc,
        "sh",
        &["-c", "read go; printf '\\033]3008;portal=1;state=awaiting_input;name=claude\\033\\\\'; read x"],
        24,
        80,
    )
    .await;
    until_named(&mut events, agent.id, false, "the start of the agent's terminal").await;
    write(&mut rpc, agent.id, b"go\n").await;
    until_named(&mut events, agent.id, true, "the agent's state").await;
    d.stop().await;
}
