//! iperf3 interoperation as a test runs it: serving real iperf3 clients
//! on the server's port ([`server`]), driving real iperf3 servers from
//! `linerate tcp|udp --iperf3` and the binary's `linerate iperf3 -c`
//! ([`client`]), and the conversions between iperf3's parameters and
//! results and linerate's spec and report model ([`convert`]): the glue of
//! iperf3's sessions on this crate's control driver and runner. The
//! protocol itself, its datagrams, its stream handshake and its output
//! formats are the `linerate-iperf3` crate's. Each side starts its data
//! phase through the test-type table's stream entry (`test_type`) with
//! `Wire::Iperf3`, as a native side does.

pub mod client;
pub mod convert;
mod hub;
pub mod server;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use linerate_engine::runner::SideRun;
use linerate_iperf3::streams::end_tcp_receiver;
use linerate_proto::measure::SideResults;

/// Ends this side's data phase as iperf3 does, on its client and its
/// server alike: the TCP receivers read what is queued and end, the
/// runner learns that the peer's senders are done, and (unless `measured`:
/// the control driver already has them) this side's results are awaited
/// for up to `convert::STOP_WAIT`, completed as the driver completes them.
fn end_data_phase(
    run: &mut SideRun,
    tcp_receivers: &[TcpStream],
    measured: bool,
) -> Option<SideResults> {
    for s in tcp_receivers {
        end_tcp_receiver(s);
    }
    run.peer_send_done(&[], Duration::ZERO);
    if measured {
        return None;
    }
    let until = Instant::now() + convert::STOP_WAIT;
    while Instant::now() < until {
        if let Some(r) = run.try_finish() {
            return Some(crate::control::completed(r));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}
