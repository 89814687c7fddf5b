//! iperf3 interoperation as a test runs it: serving real iperf3 clients
//! on the server's port ([`server`]), driving real iperf3 servers from
//! `linerate tcp|udp --iperf3` and the binary's `linerate iperf3 -c`
//! ([`client`]), and the conversions between iperf3's parameters and
//! results and linerate's spec and report model ([`convert`]): the glue of
//! iperf3's sessions on this crate's control driver and runner. Printing a
//! test as iperf3 does is the binary's; the protocol itself, its datagrams
//! and its stream handshake are the `linerate-iperf3` crate's.

pub mod client;
pub mod convert;
pub mod server;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use linerate_engine::engines::EngineKind;
use linerate_engine::runner::{self, RunParams, SideRun, StreamSetup};
use linerate_iperf3::streams::{end_tcp_receiver, Iperf3Streams};
use linerate_proto::measure::SideResults;
use linerate_proto::spec::TestSpec;

/// Starts this side's streams now as an iperf3 test runs them: the runner
/// with iperf3's stream format (its datagrams, `counters_64bit` wide, and
/// its receive accounts beside linerate's, restarted after the omit).
fn start_streams(
    engine: EngineKind,
    setups: Vec<StreamSetup>,
    (spec, params): (&TestSpec, RunParams),
    counters_64bit: bool,
    now: Instant,
) -> SideRun {
    let format = Iperf3Streams {
        counters_64bit,
        omit: Duration::from_millis(spec.omit_ms),
    };
    runner::start_with(engine, setups, params, format, now)
}

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
