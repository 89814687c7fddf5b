//! `__msg-peer`: being the far process of a local `msg` or `rr` (this
//! binary, started by [`linerate_run::local_peer::Peer`] with the channels' far
//! ends as inherited descriptors). It serves the test the client names and
//! reports its totals on the control socket.

use std::io::Write;
use std::os::unix::net::UnixStream;

use anyhow::{anyhow, Result};
use linerate_local::link;

use crate::cli::{MsgPeerConfig, PeerRun};

/// `__msg-peer`: the receiving process of `msg` (or serving process of a
/// local `rr`). Exit status 0 with its totals on the control socket, or 1
/// with `error …` there and on stderr.
pub fn peer(cfg: &MsgPeerConfig) -> Result<()> {
    let fds = link::adopt(&cfg.fds)?;
    let ctl = link::adopt(&[cfg.ctl])?
        .pop()
        .ok_or_else(|| anyhow!("no control socket"))?;
    let mut ctl_stream = UnixStream::from(ctl.try_clone()?);
    let r = link::open(cfg.transport, fds, &cfg.opts, &ctl)
        .map_err(anyhow::Error::from)
        .and_then(|chans| match &cfg.mode {
            PeerRun::Msg(plan) => crate::msg::peer_msg(chans, plan),
            PeerRun::Rr(phases) => {
                linerate_run::rr_local::serve(chans, phases, &cfg.cpus).map_err(anyhow::Error::from)
            }
        });
    let line = match &r {
        Ok(totals) => format!("ok {totals}\n"),
        Err(e) => format!("error {}\n", format!("{e:#}").replace('\n', " ")),
    };
    // The client may be gone already (that is often why we failed).
    let _ = ctl_stream.write_all(line.as_bytes());
    r.map(drop)
}
