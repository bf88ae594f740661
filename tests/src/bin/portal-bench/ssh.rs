//! Section 11: a remote host through a real sshd on loopback, connecting
//! and write→match, beside plain ssh.

use std::process::Stdio;
use std::time::Instant;

use anyhow::Context as _;
use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_tests::sshd::Sshd;

use crate::Sizes;
use crate::harness::{by_id, sibling};
use crate::latency::run_echo;
use crate::report::{Row, ms, percentile, row};

/// The raw figure for [`ssh`]: lines echoed by `cat` on the far side of
/// one ssh connection (the same options Portal gives ssh, the same server).
async fn raw_ssh_echo(sshd: &Sshd, tries: usize) -> anyhow::Result<Vec<f64>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut child = tokio::process::Command::new("ssh")
        .arg("-F")
        .arg(&sshd.ssh_config)
        .args(["-T", "-o", "BatchMode=yes", "-p", &sshd.port.to_string(), "-l", &sshd.user])
        .args(["127.0.0.1", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut input = child.stdin.take().context("ssh stdin")?;
    let mut output = child.stdout.take().context("ssh stdout")?;
    let mut buf = vec![0u8; 4096];
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries + 20 {
        let line = format!("ping{i}\n");
        let start = Instant::now();
        input.write_all(line.as_bytes()).await?;
        let mut seen = String::new();
        while !seen.contains(&line) {
            let n = output.read(&mut buf).await?;
            anyhow::ensure!(n > 0, "ssh cat ended");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        // The first rounds warm the connection up, as for Portal.
        if i >= 20 {
            times.push(ms(start.elapsed()));
        }
    }
    Ok(times)
}

pub(super) async fn ssh(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let sshd = match Sshd::start(&sibling("portal-cli")?).await {
        Ok(s) => s,
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("ssh: skipped ({why})");
            return Ok(());
        }
        Err(why) => anyhow::bail!("cannot start sshd: {why}"),
    };
    let hosts = portal_client::hosts::Hosts::parse(
        sshd.box_only.clone(),
        &std::fs::read_to_string(&sshd.box_only)?,
    )?;
    let portal_client::hosts::Target::Remote(remote) = hosts.resolve("box")? else {
        anyhow::bail!("box is not remote")
    };
    // Connecting: what every portal-cli command with --host pays once.
    let tries = sizes.cold_tries.max(3);
    let mut connect = Vec::with_capacity(tries);
    let mut raw_connect = Vec::with_capacity(tries);
    for _ in 0..tries {
        let start = Instant::now();
        let client = Client::connect_remote(&remote, true).await?;
        connect.push(ms(start.elapsed()));
        drop(client);
        let start = Instant::now();
        let status = tokio::process::Command::new("ssh")
            .arg("-F")
            .arg(&sshd.ssh_config)
            .args(["-T", "-o", "BatchMode=yes", "-p", &sshd.port.to_string(), "-l", &sshd.user])
            .args(["127.0.0.1", "true"])
            .status()
            .await?;
        anyhow::ensure!(status.success(), "ssh true failed");
        raw_connect.push(ms(start.elapsed()));
    }
    // The same through a connection shared by ssh's ControlMaster (set up
    // in the user's ssh configuration): the first makes the master.
    let mux = portal_client::hosts::Remote {
        ssh_args: vec!["-F".into(), sshd.mux_config.display().to_string()],
        ..remote.clone()
    };
    drop(Client::connect_remote(&mux, true).await?);
    let mut shared = Vec::with_capacity(tries);
    for _ in 0..tries {
        let start = Instant::now();
        drop(Client::connect_remote(&mux, true).await?);
        shared.push(ms(start.elapsed()));
    }
    for times in [&mut connect, &mut raw_connect, &mut shared] {
        times.sort_by(f64::total_cmp);
    }
    rows.push(row(
        "connect to a remote host (ssh, dial-stdio, handshake, GetInfo), median",
        percentile(&connect, 0.5),
        Some(percentile(&raw_connect, 0.5)),
        "ms",
        None,
    ));
    rows.push(row(
        "the same over a ControlMaster connection, median (raw: a new ssh)",
        percentile(&shared, 0.5),
        Some(percentile(&raw_connect, 0.5)),
        "ms",
        None,
    ));

    let client = Client::connect_remote(&remote, true).await?;
    let mut rpc = client.rpc();
    let (id, mut portal) = run_echo(&mut rpc, sizes.rtt_tries).await?;
    rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
    let mut raw = raw_ssh_echo(&sshd, sizes.rtt_tries).await?;
    raw.sort_by(f64::total_cmp);
    portal.sort_by(f64::total_cmp);
    for (what, p) in [("median", 0.5), ("p99", 0.99)] {
        rows.push(row(
            format!("round trip via gRPC Run over ssh, {what}"),
            percentile(&portal, p),
            Some(percentile(&raw, p)),
            "ms",
            None,
        ));
    }
    Ok(())
}
