//! Starting the far process of a local `msg` or `rr` test (the running
//! program again, as `linerate __msg-peer`: the binary's `peer_main`) with
//! the channels' far ends, and reading its totals back.

use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{fail, Context as _, Result, RunError};
use linerate_local::link::{self, Options};
use linerate_local::msg::Plan;
use linerate_local::Transport;

/// How long the client waits for the receiving process's totals after the
/// last message was acknowledged.
const RESULT_WAIT: Duration = Duration::from_secs(30);

/// The receiving (serving) process and its control socket.
#[derive(Debug)]
pub struct Peer {
    child: Mutex<Child>,
    ctl: UnixStream,
}

/// What the peer process runs: `msg`'s receiver, or `rr`'s server.
#[derive(Debug)]
pub enum PeerMode<'a> {
    Msg(&'a Plan),
    /// The plan, and `--cpus` (the serving threads take every other CPU,
    /// see `rr_local::flow_cpu`).
    Rr(&'a linerate_local::rr::Plan, &'a [usize]),
}

impl Peer {
    /// Makes both ends of `conns` channels of `t` and starts the peer
    /// process with the far ends; this process's ends come back.
    pub fn start(
        t: Transport,
        conns: usize,
        opts: &Options,
        mode: PeerMode<'_>,
    ) -> Result<(Vec<Box<dyn linerate_local::Channel>>, Peer)> {
        let (ctl, ctl_far) = UnixStream::pair().context("control socket pair")?;
        let ctl_fd: OwnedFd = ctl.try_clone().context("control socket")?.into();
        let (near, far) = link::create(t, conns, opts, &ctl_fd)?;
        let ctl_far: OwnedFd = ctl_far.into();
        let child = spawn_peer(t, mode, opts, &far, &ctl_far)?;
        // Our copies of the far ends close here: the child holds them now,
        // so its exit shows as a hang-up on every channel.
        drop(far);
        drop(ctl_far);
        Ok((
            near,
            Peer {
                child: Mutex::new(child),
                ctl,
            },
        ))
    }

    /// Ends the peer process (a channel failed; others may wait on it).
    pub fn kill(&self) {
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
        }
    }

    /// The peer's totals line (after `ok`), once it exited cleanly. When
    /// this side failed (`local`), the peer's own words win over a
    /// hang-up seen here.
    pub fn finish<T>(&self, local: Result<T, linerate_local::LocalError>) -> Result<(T, String)> {
        let line = peer_line(&self.ctl);
        let status = self
            .child
            .lock()
            .map_err(|_| RunError::Protocol("child lock".to_string()))?
            .wait();
        match (local, line) {
            (Ok(v), Ok(line)) => {
                let status = status.context("waiting for the peer process")?;
                if !status.success() {
                    fail!(Protocol, "the peer process exited with {status}");
                }
                Ok((v, line))
            }
            (Err(_), Err(e)) if !e.to_string().contains("closed") => Err(e),
            (Err(e), _) => Err(RunError::Local(e)),
            (Ok(_), Err(e)) => Err(e),
        }
    }
}

fn spawn_peer(
    t: Transport,
    mode: PeerMode<'_>,
    opts: &Options,
    far: &[OwnedFd],
    ctl: &OwnedFd,
) -> Result<Child> {
    for fd in far.iter().chain([ctl]) {
        link::inheritable(fd)?;
    }
    let fds: Vec<String> = far.iter().map(|f| f.as_raw_fd().to_string()).collect();
    let exe = std::env::current_exe().context("finding this program to start the peer")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("__msg-peer")
        .args(["--transport", t.name()])
        .args(["--fds", &fds.join(",")])
        .args(["--ctl", &ctl.as_raw_fd().to_string()])
        .args(["--slot", &opts.slot_size.to_string()])
        .args(["--ack-slot", &opts.ack_slot.to_string()])
        .args(["--region", &opts.region.to_string()])
        .args(["--spin-ns", &opts.spin.budget.as_nanos().to_string()]);
    if opts.spin.mode == linerate_proto::rr_core::SpinMode::Dedicated {
        cmd.arg("--spin-dedicated");
    }
    if opts.busy_poll {
        cmd.arg("--busy-poll");
    }
    match mode {
        PeerMode::Msg(plan) => cmd.args(["--plan", &plan.to_arg()]),
        PeerMode::Rr(plan, cpus) => {
            cmd.args(["--rr-phases", &plan.phases_arg()]);
            if !cpus.is_empty() {
                let l: Vec<String> = cpus.iter().map(usize::to_string).collect();
                cmd.args(["--cpus", &l.join(",")]);
            }
            &mut cmd
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .context("starting the peer process")
}

/// The peer's line: `ok …`, or `error …`; what follows `ok`.
fn peer_line(ctl: &UnixStream) -> Result<String> {
    ctl.set_read_timeout(Some(RESULT_WAIT))?;
    let mut line = String::new();
    BufReader::new(ctl)
        .read_line(&mut line)
        .context("reading the peer process's totals")?;
    let line = line.trim();
    if line.is_empty() {
        fail!(
            Protocol,
            "the peer process closed its control socket without totals"
        );
    }
    if let Some(e) = line.strip_prefix("error ") {
        fail!(Protocol, "peer process: {e}");
    }
    match line.strip_prefix("ok") {
        Some(rest) => Ok(rest.trim().to_owned()),
        None => fail!(Protocol, "peer process: unexpected {line:?}"),
    }
}

/// Whitespace-separated `a:b:c…` records of unsigned numbers.
pub fn parse_records(line: &str, fields: usize) -> Result<Vec<Vec<u64>>> {
    line.split_whitespace()
        .map(|t| {
            let v: Vec<u64> = t.split(':').filter_map(|x| x.parse().ok()).collect();
            if v.len() == fields {
                Ok(v)
            } else {
                Err(RunError::Protocol(format!(
                    "peer process: bad totals {t:?}"
                )))
            }
        })
        .collect()
}
