//! The program registry: canonical names, counts and notes.

use portal_proto::v1 as pb;
use portal_tests::*;

#[tokio::test]
async fn registry_rules() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let query = |p: &str| pb::ProgramQueryRequest { program: p.into() };
    let record = |p: &str, needs_pty: bool, notes: Option<&str>| pb::ProgramRecordRequest {
        program: p.into(),
        needs_pty,
        notes: notes.map(str::to_owned),
    };
    let miss = rpc.program_query(query("frobnicate")).await.unwrap().into_inner();
    assert!(!miss.known && !miss.builtin);
    assert_eq!(miss.program, "frobnicate");
    // Common programs are known before anything is recorded: a built-in profile.
    let profile = rpc.program_query(query("ssh")).await.unwrap().into_inner();
    assert!(profile.known && profile.builtin && profile.needs_pty, "{profile:?}");
    assert_eq!(profile.confirmed_count, 0);
    let r = rpc
        .program_record(record("/usr/bin/SSH.exe", true, Some("interactive")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.program.as_str(), r.needs_pty, r.confirmed_count, r.notes.as_str()),
        ("ssh", true, 1, "interactive")
    );
    let r = rpc.program_record(record("C:\\bin\\ssh.EXE", true, None)).await.unwrap().into_inner();
    assert_eq!((r.confirmed_count, r.notes.as_str()), (2, "interactive"));
    // A flip resets the count and keeps the notes.
    let r = rpc.program_record(record("ssh", false, None)).await.unwrap().into_inner();
    assert_eq!((r.needs_pty, r.confirmed_count, r.notes.as_str()), (false, 1, "interactive"));
    // Notes given as "" replace them.
    let r = rpc.program_record(record("ssh", false, Some(""))).await.unwrap().into_inner();
    assert_eq!((r.confirmed_count, r.notes.as_str()), (2, ""));
    // What was recorded wins over the profile.
    let hit = rpc.program_query(query("SSH")).await.unwrap().into_inner();
    assert!(hit.known && !hit.builtin && !hit.needs_pty && hit.confirmed_count == 2);
    rpc.program_record(record("gdb", true, None)).await.unwrap();
    assert!(rpc.program_query(query("GDB.EXE")).await.unwrap().into_inner().known);
    let err = rpc.program_query(query("/usr/bin/")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    d.stop().await;
}

#[tokio::test]
async fn registry_survives_a_daemon_restart() {
    let dir = test_dir();
    let config = config_in(dir.path());
    for round in 0..2 {
        let listener = portald::bind(&config).unwrap();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
        let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
        let mut rpc = client.rpc();
        let r = rpc
            .program_record(pb::ProgramRecordRequest {
                program: "psql".into(),
                needs_pty: true,
                notes: None,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.confirmed_count, round + 1);
        shutdown.cancel();
        bounded("daemon shutdown", task).await.unwrap().unwrap();
    }
}
