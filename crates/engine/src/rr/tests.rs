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

/// A connected pair on loopback: (near, far).
fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let near = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (far, _) = listener.accept().expect("accept");
    (near, far)
}

/// Waits up to 20 s for `run`'s results.
fn finish(run: &mut SideRun) -> linerate_proto::measure::SideResults {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Some(r) = run.try_finish() {
            return r;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the side did not finish");
}

/// Issue 26: a load stream that fails while the loaded phases run (here
/// its peer resets it) stops the side at once, its error kept for the
/// report. Before, the side ran the phase "under load" to its end without
/// any load (and no report showed a load stream's error).
#[test]
fn issue_26_a_failed_load_stream_stops_the_rr_side() {
    let spec = TestSpec {
        kind: TestKind::Rr,
        rr: Some(RrSpec {
            sizes: vec![64],
            limit: RrLimit::TimeMs(3_000),
            under_load: 1,
            ..RrSpec::default()
        }),
        ..TestSpec::default()
    };
    let plan = spec.rr_plan().expect("an rr spec");
    let setup = |id, sock| StreamSetup {
        id,
        sender: Side::Client,
        role: Role::Sender,
        bytes: None,
        datagrams: None,
        sock: DataSocket::Tcp(sock),
    };
    let (mut near, mut far) = (Vec::new(), Vec::new());
    for phase in 0..2 {
        let (n, f) = pair();
        let id = spec.rr_conn_id(phase, 0);
        near.push(setup(id, n));
        far.push(setup(id, f));
    }
    // The load stream's peer resets it as soon as data comes.
    let load_id = spec.stream_plan().last().expect("planned").id;
    let (n, f) = pair();
    socket2::SockRef::from(&f)
        .set_linger(Some(Duration::ZERO))
        .expect("linger 0");
    drop(f);
    near.push(setup(load_id, n));
    let params = RrParams::new(plan.clone(), &[], CpuScope::Threads, None);
    let engine = EngineKind::Syscall;
    let conns = |v| RrConns::sort(&plan, v).expect("sorted");
    let mut server = start_server(engine, conns(far), params.clone());
    let mut client = start_client(engine, conns(near), None, params);
    let t0 = Instant::now();
    let results = finish(&mut client);
    let _ = finish(&mut server);
    // Long before the two 3 s phases would have ended.
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let load = results.rr.expect("rr results").load;
    let e = load[0].error.as_deref().unwrap_or_default();
    assert!(e.contains("reset") || e.contains("pipe"), "{load:?}");
}
