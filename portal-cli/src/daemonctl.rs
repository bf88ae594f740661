//! `daemon status|start|stop|upgrade|doctor`. Status, stop, upgrade and
//! doctor never start a daemon.

use std::time::Duration;

use portal_client::client::Client;
use portal_client::error::ClientError;
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt::{self, print_json};
use crate::{Failure, JsonFlag, Outcome};

/// How long `daemon stop` waits for the daemon to finish its shutdown
/// (processes get a 2 s grace, then the store is flushed).
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// How long `daemon upgrade` waits for the new daemon to serve (the
/// handover waits up to 2 s for programs to read queued input; the new
/// binary then opens the database and adopts every program).
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long nothing may listen on the socket after a handover before
/// `daemon upgrade` concludes the new binary died (a starting daemon binds
/// within milliseconds).
const UPGRADE_GONE_GRACE: Duration = Duration::from_secs(3);

fn print_info(info: &pb::GetInfoResponse, out: JsonFlag) {
    if out.json {
        print_json(&json!({
            "running": true,
            "version": info.daemon_version,
            "protocol": info.protocol_version,
            "pid": info.pid,
            "socket": info.socket,
            "database": info.database,
            "processes": info.processes,
            "running_processes": info.running,
            "uptime_ms": info.uptime_ms,
            "log_bytes": info.log_bytes,
            "log_limit_per_process": info.log_limit_per_process,
            "log_limit_total": info.log_limit_total,
            "log_bytes_trimmed": info.log_bytes_trimmed,
            "log_bytes_dropped": info.log_bytes_dropped,
            "storage_error": (!info.storage_error.is_empty()).then_some(&info.storage_error),
        }));
    } else {
        outln!("portald {} is running (pid {})", info.daemon_version, info.pid);
        outln!("  socket     {}", info.socket);
        outln!("  database   {}", info.database);
        outln!("  processes  {} ({} running)", info.processes, info.running);
        outln!("  uptime     {}", fmt::short_duration(info.uptime_ms));
        outln!(
            "  log        {} kept (limits: {} per process, {} in total; {} trimmed so far)",
            fmt::short_bytes(info.log_bytes),
            fmt::short_bytes(info.log_limit_per_process),
            fmt::short_bytes(info.log_limit_total),
            fmt::short_bytes(info.log_bytes_trimmed),
        );
        if info.log_bytes_dropped > 0 || !info.storage_error.is_empty() {
            outln!(
                "  STORAGE    {} of output could not be stored{}",
                fmt::short_bytes(info.log_bytes_dropped),
                if info.storage_error.is_empty() {
                    String::new()
                } else {
                    format!("; writes fail now: {} (free disk space)", info.storage_error)
                },
            );
        }
    }
}

async fn connect_existing() -> Result<Client, ClientError> {
    Client::connect(&portal_client::paths::socket_path()).await
}

/// `daemon status`: exit 3 when it is not running.
pub(crate) async fn status(out: JsonFlag) -> Outcome {
    let client = match connect_existing().await {
        Ok(c) => c,
        Err(ClientError::Unavailable { socket, .. }) => {
            if out.json {
                print_json(&json!({"running": false, "socket": socket}));
            } else {
                outln!("portald is not running (socket {})", socket.display());
            }
            return Err(Failure::NotRunning);
        }
        Err(e) => return Err(Failure::Unreachable(e)),
    };
    let info = client.rpc().get_info(pb::GetInfoRequest {}).await?.into_inner();
    print_info(&info, out);
    Ok(())
}

/// `version`: this portal-cli's version and the running portald's (never
/// starting one), with a warning when they differ.
pub(crate) async fn version(out: JsonFlag) -> Outcome {
    let daemon = match connect_existing().await {
        Ok(c) => Some(c.rpc().get_info(pb::GetInfoRequest {}).await?.into_inner()),
        Err(ClientError::Unavailable { .. }) => None,
        Err(e) => return Err(Failure::Unreachable(e)),
    };
    print_versions(daemon.map(|i| i.daemon_version), out);
    Ok(())
}

/// `version --host H`: the portald there (reached, so running).
pub(crate) fn version_there(client: &Client, out: JsonFlag) -> Outcome {
    print_versions(Some(client.info().daemon_version.clone()), out);
    Ok(())
}

fn print_versions(daemon_version: Option<String>, out: JsonFlag) {
    let client_version = env!("CARGO_PKG_VERSION");
    let differ = daemon_version.as_deref().is_some_and(|v| v != client_version);
    if out.json {
        print_json(&json!({
            "portal_cli": client_version,
            "portald": daemon_version,
            "protocol": portal_proto::PROTOCOL_VERSION,
            "differ": differ,
        }));
    } else {
        outln!("portal-cli {client_version} (protocol {})", portal_proto::PROTOCOL_VERSION);
        match &daemon_version {
            Some(v) => outln!("portald {v} (running)"),
            None => outln!("portald is not running"),
        }
    }
    if differ {
        eprintln!(
            "portal-cli: portald runs another version; `portal-cli daemon upgrade` replaces it with the one installed, every program kept"
        );
    }
}

/// `daemon start` (the connection already started it if needed).
pub(crate) fn started(client: &Client) -> Outcome {
    print_info(client.info(), JsonFlag { json: false });
    Ok(())
}

/// `daemon stop`: asks for shutdown and waits until the socket is gone.
/// `daemon doctor`: runs `portald --doctor` on the same socket and data
/// directory (SQLite lives in the daemon's binary, not in this one).
pub(crate) fn doctor() -> Outcome {
    let daemon = portal_client::paths::daemon_binary().ok_or_else(|| {
        anyhow::anyhow!("cannot find portald (beside portal-cli, on PATH, or PORTAL_DAEMON)")
    })?;
    let status = std::process::Command::new(&daemon)
        .arg("--doctor")
        .arg("--socket")
        .arg(portal_client::paths::socket_path())
        .arg("--data-dir")
        .arg(portal_client::paths::data_dir())
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", daemon.display()))?;
    if status.success() { Ok(()) } else { Err(Failure::Silent) }
}

pub(crate) async fn stop() -> Outcome {
    let socket = portal_client::paths::socket_path();
    let client = match Client::connect(&socket).await {
        Ok(c) => c,
        Err(ClientError::Unavailable { .. }) => {
            outln!("portald is not running (socket {})", socket.display());
            return Ok(());
        }
        Err(e) => return Err(Failure::Unreachable(e)),
    };
    let pid = client.info().pid;
    client.rpc().shutdown(pb::ShutdownRequest {}).await?;
    drop(client);
    let deadline = tokio::time::Instant::now() + STOP_TIMEOUT;
    // The daemon removes its socket as the last step of shutdown; polling
    // for that is the only signal a separate process gets.
    while socket.exists() {
        if tokio::time::Instant::now() > deadline {
            return Err(anyhow::anyhow!(
                "portald (pid {pid}) did not stop within {STOP_TIMEOUT:?}"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    outln!("portald (pid {pid}) stopped");
    Ok(())
}

/// `daemon upgrade`: asks portald to replace itself with `binary` (or the
/// binary it was started from), then waits until the new one serves and
/// reports how long clients were kept waiting.
pub(crate) async fn upgrade(binary: Option<std::path::PathBuf>, out: JsonFlag) -> Outcome {
    let socket = portal_client::paths::socket_path();
    let client = match Client::connect(&socket).await {
        Ok(c) => c,
        Err(ClientError::Unavailable { .. }) => {
            outln!(
                "portald is not running (socket {}): nothing to upgrade; the next command starts the binary on disk",
                socket.display()
            );
            return Err(Failure::NotRunning);
        }
        Err(e) => return Err(Failure::Unreachable(e)),
    };
    let before = client.info().clone();
    let binary = binary
        .map(|b| std::path::absolute(&b).unwrap_or(b).to_string_lossy().into_owned())
        .unwrap_or_default();
    let accepted = client.rpc().upgrade(pb::UpgradeRequest { binary }).await?.into_inner();
    drop(client);
    let handed = tokio::time::Instant::now();
    let deadline = handed + UPGRADE_TIMEOUT;
    // Connections made during the handover wait in the socket's backlog
    // and are answered by the new daemon; one started anew is recognised
    // by its start time.
    let mut refused_since: Option<tokio::time::Instant> = None;
    let info = loop {
        match Client::connect(&socket).await {
            Ok(c) if c.info().started_at_ns != before.started_at_ns => break c.info().clone(),
            Ok(_) => refused_since = None,
            // Nothing listens any more: the new binary exited after taking
            // over (during the handover itself, connections wait).
            Err(_) => {
                let since = *refused_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() > UPGRADE_GONE_GRACE {
                    return Err(anyhow::anyhow!(
                        "the new portald ({}) exited after taking over; every program waits with portal-holder, and the next portal-cli command starts portald and adopts them (see {})",
                        accepted.binary,
                        portal_client::paths::data_dir().join(portal_client::paths::DAEMON_LOG_FILE).display()
                    )
                    .into());
                }
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(anyhow::anyhow!(
                "portald (pid {}) did not serve again within {UPGRADE_TIMEOUT:?}; its programs wait with portal-holder, and the next command starts portald and adopts them (see {})",
                before.pid,
                portal_client::paths::data_dir().join(portal_client::paths::DAEMON_LOG_FILE).display()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let pause_ms = u64::try_from(handed.elapsed().as_millis()).unwrap_or(u64::MAX);
    if !info.upgrade_error.is_empty() {
        return Err(anyhow::anyhow!(
            "the new portald ({}) failed to start: {}; portald {} serves again and every program runs on",
            accepted.binary,
            info.upgrade_error,
            info.daemon_version
        )
        .into());
    }
    if out.json {
        print_json(&json!({
            "from_version": accepted.from_version,
            "to_version": info.daemon_version,
            "binary": accepted.binary,
            "pid": info.pid,
            "running": info.running,
            "pause_ms": pause_ms,
        }));
    } else {
        outln!(
            "portald upgraded {} → {} (pid {}, {}) in {pause_ms} ms; {} running programs carried over",
            accepted.from_version,
            info.daemon_version,
            info.pid,
            accepted.binary,
            info.running
        );
    }
    Ok(())
}
