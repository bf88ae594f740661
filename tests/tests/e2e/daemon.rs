//! The daemon itself: single instance, stale sockets, private directories,
//! version info.

use portal_proto::v1 as pb;
use portal_tests::*;

#[tokio::test]
async fn a_second_daemon_on_the_same_socket_is_refused() {
    let d = TestDaemon::start().await;
    let config = config_in(d.dir.path());
    match portald::bind(&config) {
        Err(portald::StartError::AlreadyRunning { socket, why }) => {
            assert_eq!(socket, d.socket());
            assert!(why.contains("already runs on the database"), "{why}");
        }
        other => panic!("expected AlreadyRunning, got {other:?}"),
    }
    // The first daemon is undisturbed.
    let info = d.rpc().get_info(pb::GetInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.protocol_version, portal_proto::PROTOCOL_VERSION);
    assert_eq!(info.pid, std::process::id());
    d.stop().await;
}

#[tokio::test]
async fn a_stale_socket_is_replaced_and_removed_at_shutdown() {
    let dir = test_dir();
    let config = config_in(dir.path());
    std::fs::create_dir_all(config.socket.parent().unwrap()).unwrap();
    // A socket file nobody serves, as a killed daemon leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&config.socket).unwrap());
    assert!(config.socket.exists());
    let listener = portald::bind(&config).expect("bind over a stale socket");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
    portal_client::client::Client::connect(&config.socket).await.unwrap();
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    assert!(!config.socket.exists(), "socket left behind");
}

#[tokio::test]
async fn world_writable_socket_directories_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = test_dir();
    let config = config_in(dir.path());
    let sock_dir = config.socket.parent().unwrap();
    std::fs::create_dir_all(sock_dir).unwrap();
    std::fs::set_permissions(sock_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = portald::bind(&config).unwrap_err();
    assert!(err.to_string().contains("others may write to it"), "{err}");
}

#[tokio::test]
async fn a_regular_file_at_the_socket_path_is_not_deleted() {
    let dir = test_dir();
    let config = config_in(dir.path());
    std::fs::create_dir_all(config.socket.parent().unwrap()).unwrap();
    std::fs::write(&config.socket, b"someone's notes").unwrap();
    let err = portald::bind(&config).unwrap_err();
    assert!(err.to_string().contains("is not a socket"), "{err}");
    assert_eq!(std::fs::read(&config.socket).unwrap(), b"someone's notes");
}
