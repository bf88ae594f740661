//! `daemon status|start|stop|doctor`. Status, stop and doctor never start a
//! daemon.

use std::time::Duration;

use portal_proto::client::{Client, ClientError};
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt::{self, print_json};
use crate::{Failure, JsonFlag, Outcome};

/// How long `daemon stop` waits for the daemon to finish its shutdown
/// (processes get a 2 s grace, then the store is flushed).
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

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
        println!("portald {} is running (pid {})", info.daemon_version, info.pid);
        println!("  socket     {}", info.socket);
        println!("  database   {}", info.database);
        println!("  processes  {} ({} running)", info.processes, info.running);
        println!("  uptime     {}", fmt::short_duration(info.uptime_ms));
        println!(
            "  log        {} kept (limits: {} per process, {} in total; {} trimmed so far)",
            fmt::short_bytes(info.log_bytes),
            fmt::short_bytes(info.log_limit_per_process),
            fmt::short_bytes(info.log_limit_total),
            fmt::short_bytes(info.log_bytes_trimmed),
        );
        if info.log_bytes_dropped > 0 || !info.storage_error.is_empty() {
            println!(
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
    Client::connect(&portal_proto::paths::socket_path()).await
}

/// `daemon status`: exit 3 when it is not running.
pub(crate) async fn status(out: JsonFlag) -> Outcome {
    let client = match connect_existing().await {
        Ok(c) => c,
        Err(ClientError::Unavailable { socket, .. }) => {
            if out.json {
                print_json(&json!({"running": false, "socket": socket}));
            } else {
                println!("portald is not running (socket {})", socket.display());
            }
            return Err(Failure::NotRunning);
        }
        Err(e) => return Err(Failure::Unreachable(e)),
    };
    let info = client.rpc().get_info(pb::GetInfoRequest {}).await?.into_inner();
    print_info(&info, out);
    Ok(())
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
    let daemon = portal_proto::paths::daemon_binary().ok_or_else(|| {
        anyhow::anyhow!("cannot find portald (beside portal-cli, on PATH, or PORTAL_DAEMON)")
    })?;
    let status = std::process::Command::new(&daemon)
        .arg("--doctor")
        .arg("--socket")
        .arg(portal_proto::paths::socket_path())
        .arg("--data-dir")
        .arg(portal_proto::paths::data_dir())
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", daemon.display()))?;
    if status.success() { Ok(()) } else { Err(Failure::Silent) }
}

pub(crate) async fn stop() -> Outcome {
    let socket = portal_proto::paths::socket_path();
    let client = match Client::connect(&socket).await {
        Ok(c) => c,
        Err(ClientError::Unavailable { .. }) => {
            println!("portald is not running (socket {})", socket.display());
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
    println!("portald (pid {pid}) stopped");
    Ok(())
}
