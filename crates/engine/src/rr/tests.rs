//! An rr pair on loopback, both sides run by this crate alone.

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use linerate_proto::measure::Role;
use linerate_proto::spec::{RrLimit, RrSpec, TestKind, TestSpec};
use linerate_proto::wire::Side;

use super::{start_client, start_server, RrConns, RrParams};
use crate::engines::EngineKind;
use crate::runner::{CpuScope, DataSocket, SideRun, StreamSetup};

/// Polls `run` every 10 ms, for up to 10 s, until `cond` holds.
fn until(run: &SideRun, cond: impl Fn(u64) -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if cond(run.progress().transactions) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Issue 28: a side of an rr test counts the transactions its flows
/// complete as they go, each a request or a response from the peer, so
/// the control loop counts them as hearing from the peer (its
/// `peer_data_arrived`) however little control traffic a long phase has.
#[test]
fn issue_28_rr_sides_count_the_peers_transactions_as_they_arrive() {
    let spec = TestSpec {
        kind: TestKind::Rr,
        rr: Some(RrSpec {
            sizes: vec![64],
            limit: RrLimit::TimeMs(1_000),
            ..RrSpec::default()
        }),
        ..TestSpec::default()
    };
    let plan = spec.rr_plan().expect("an rr spec");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let near = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (far, _) = listener.accept().expect("accept");
    let conns = |sock, role| {
        let setup = StreamSetup {
            id: spec.rr_conn_id(0, 0),
            sender: Side::Client,
            role,
            bytes: None,
            datagrams: None,
            sock: DataSocket::Tcp(sock),
        };
        RrConns::sort(&plan, vec![setup]).expect("sorted")
    };
    let params = RrParams::new(plan.clone(), &[], CpuScope::Threads, None);
    let engine = EngineKind::Syscall;
    let server = start_server(engine, conns(far, Role::Receiver), params.clone());
    let client = start_client(engine, conns(near, Role::Sender), None, params);
    // Mid-phase, both sides have heard the peer, and go on hearing it.
    for run in [&client, &server] {
        assert!(until(run, |n| n > 0), "{:?}", run.progress());
        let seen = run.progress().transactions;
        assert!(until(run, |n| n > seen), "{:?}", run.progress());
    }
}
