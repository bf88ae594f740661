//! Names that move to a new run: a failed program with a restart policy is
//! started again under its name (the failed run keeps its record and log,
//! and says who replaced it), up to its limit; a start may take the name of
//! an ended process over; and both survive a daemon restart.

use portal_proto::v1 as pb;
use portal_tests::{Start, bounded, by_id, config_in, test_dir, wait_exit, wait_until};

type Rpc = pb::portal_client::PortalClient<tonic::transport::Channel>;

fn by_name(name: &str) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Name(name.into())) })
}

async fn inspect_name(rpc: &mut Rpc, name: &str) -> pb::Process {
    rpc.inspect(pb::InspectRequest { proc: by_name(name) }).await.unwrap().into_inner()
}

#[tokio::test]
async fn a_failed_run_is_restarted_under_its_name_until_the_limit() {
    let dir = test_dir();
    let config = config_in(dir.path());
    let listener = portald::bind(&config).unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
    let mut rpc = portal_client::client::Client::connect(&config.socket).await.unwrap().rpc();
    let first = Start::new("sh")
        .args(["-c", "echo run; exit 3"])
        .name("flaky")
        .restart_on_failure(2, 10)
        .run(&mut rpc)
        .await;
    // The third run (two restarts) ends too, and is the last.
    let last = wait_until("the second restart to end", async || {
        let p = inspect_name(&mut rpc, "flaky").await;
        (p.restarts == 2 && p.status() == pb::Status::Exited).then_some(p)
    })
    .await;
    assert_eq!(last.exit_code, Some(3));
    assert_eq!(last.restart.map(|r| r.max_restarts), Some(2));
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner().processes;
    let runs: Vec<&pb::Process> = list.iter().filter(|p| p.name == "flaky").collect();
    assert_eq!(runs.len(), 3, "{runs:?}");
    // A chain: each failed run names the one that replaced it.
    assert_eq!(runs[0].id, first.id);
    assert_eq!((runs[0].replaced_by, runs[1].restart_of), (runs[1].id, runs[0].id));
    assert_eq!((runs[1].replaced_by, runs[2].restart_of), (runs[2].id, runs[1].id));
    assert_eq!(runs[2].replaced_by, 0);
    // Each run's log is its own.
    for run in &runs {
        let read = rpc
            .read(pb::ReadRequest { proc: by_id(run.id), ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        let text: Vec<u8> = read.records.into_iter().flat_map(|r| r.data).collect();
        assert_eq!(text, b"run\n");
    }

    // A start refuses an ended process's name unless told to take it over.
    let again = |replace| Start::new("sleep").args(["600"]).name("flaky").replace_ended(replace);
    let refused = rpc.start(again(false).request()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::AlreadyExists, "{refused:?}");
    let taken = again(true).run(&mut rpc).await;
    assert_eq!(inspect_name(&mut rpc, "flaky").await.id, taken.id);
    // A running one keeps its name, whatever the flag says.
    let refused = rpc.start(again(true).request()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::AlreadyExists, "{refused:?}");

    // The name stays with the newest run across a daemon restart.
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    let listener = portald::bind(&config).unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
    let mut rpc = portal_client::client::Client::connect(&config.socket).await.unwrap().rpc();
    let named = inspect_name(&mut rpc, "flaky").await;
    assert_eq!(named.id, taken.id);
    let old =
        rpc.inspect(pb::InspectRequest { proc: by_id(runs[2].id) }).await.unwrap().into_inner();
    assert_eq!((old.replaced_by, old.restarts, old.restart_of), (taken.id, 2, runs[1].id));
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_signal_is_a_failure_and_a_kill_is_not() {
    let d = portal_tests::TestDaemon::start().await;
    let mut rpc = d.rpc();
    let first = Start::new("sleep")
        .args(["600"])
        .name("server")
        .restart_on_failure(3, 10)
        .run(&mut rpc)
        .await;
    rpc.signal(pb::SignalRequest { proc: by_id(first.id), signal: "TERM".into() }).await.unwrap();
    let second = wait_until("the restart after SIGTERM", async || {
        let p = inspect_name(&mut rpc, "server").await;
        (p.id != first.id && p.status() == pb::Status::Running).then_some(p)
    })
    .await;
    assert_eq!((second.restarts, second.restart_of), (1, first.id));
    rpc.kill(pb::KillRequest { proc: by_id(second.id) }).await.unwrap();
    let killed = wait_exit(&mut rpc, second.id).await;
    assert_eq!(killed.status(), pb::Status::Killed);
    // A restart would take the name; a start taking it over proves none
    // did meanwhile (and the supervision ended with the kill).
    let third = Start::new("true").name("server").replace_ended(true).run(&mut rpc).await;
    wait_exit(&mut rpc, third.id).await;
    assert_eq!(inspect_name(&mut rpc, "server").await.id, third.id);
    let replaced =
        rpc.inspect(pb::InspectRequest { proc: by_id(second.id) }).await.unwrap().into_inner();
    assert_eq!(
        replaced.replaced_by, third.id,
        "the killed run was replaced by the plain start, not a restart"
    );
    d.stop().await;
}

#[tokio::test]
async fn forgetting_a_replaced_run_leaves_the_name_to_the_new_one() {
    let d = portal_tests::TestDaemon::start().await;
    let mut rpc = d.rpc();
    let start = |replace| Start::new("sleep").args(["600"]).name("web").replace_ended(replace);
    let old = start(false).run(&mut rpc).await;
    rpc.kill(pb::KillRequest { proc: by_id(old.id) }).await.unwrap();
    wait_exit(&mut rpc, old.id).await;
    let new = start(true).run(&mut rpc).await;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(old.id) }).await.unwrap();
    assert_eq!(inspect_name(&mut rpc, "web").await.id, new.id);
    d.stop().await;
}

#[tokio::test]
async fn a_kill_of_a_run_waiting_for_its_restart_cancels_the_restart() {
    let d = portal_tests::TestDaemon::start().await;
    let mut rpc = d.rpc();
    let first = Start::new("sh")
        .args(["-c", "exit 3"])
        .name("later")
        .restart_on_failure(3, 30_000)
        .run(&mut rpc)
        .await;
    let pending = wait_until("the restart to be pending", async || {
        let p = inspect_name(&mut rpc, "later").await;
        (p.restart_in_ms > 0).then_some(p)
    })
    .await;
    assert_eq!(pending.id, first.id);
    assert!(pending.restart_in_ms <= 30_000, "{pending:?}");
    // `down` kills each member; for this one that cancels the restart.
    let killed = rpc.kill(pb::KillRequest { proc: by_name("later") }).await.unwrap().into_inner();
    assert_eq!((killed.id, killed.restart_in_ms), (first.id, 0));
    let after = inspect_name(&mut rpc, "later").await;
    assert_eq!((after.id, after.restart_in_ms, after.status()), (first.id, 0, pb::Status::Exited));
    d.stop().await;
}
