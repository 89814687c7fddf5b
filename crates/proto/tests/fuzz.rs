//! Never-panic properties over every decoder a peer can reach, the
//! session state machines and the data plane's sans-IO cores (issue 10):
//! the stable-toolchain stand-in for `cargo fuzz`. Both drive the same
//! entry points (`linerate_proto::fuzz`, one per target); here proptest
//! feeds them about 10⁶ inputs in all, each target bounded in cases (and
//! so in time: a few seconds in all, the crate being built optimised).
//!
//! Inputs are random bytes, or a seed of the committed corpus
//! (`fuzz/corpus/TARGET/`, also `cargo fuzz`'s starting corpus) flipped,
//! cut and spliced, so the properties reach past the first length check.
//! Every seed also runs as it is. A counting allocator checks that a
//! control frame's declared length costs no memory before its bytes
//! arrive. `LINERATE_WRITE_FUZZ_CORPUS=1 cargo test -p linerate-proto
//! --test fuzz` rewrites the seed corpus.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use linerate_proto::auth::{AuthChallenge, AuthInit, AuthProof};
use linerate_proto::datagram::Header;
use linerate_proto::fuzz::{self, TARGETS};
use linerate_proto::spec::{Direction, Limit, Protocol, TestSpec, UdpSpec};
use linerate_proto::wire::{
    self, Abort, Accept, ClockProbe, DataHello, Hello, Message, SendDone, Side, Token,
};
use linerate_proto::PROTOCOL_VERSION;
use proptest::prelude::*;

mod fuzz_support;
use fuzz_support::{cfg, input, noise};

// ---------------------------------------------------------------------------
// Allocation accounting (this thread's live bytes and their peak)
// ---------------------------------------------------------------------------

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get().saturating_add(n);
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn shrank(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters are const-initialised thread locals (no allocation, no drop).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        // SAFETY: as for `dealloc`, and `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Most bytes `f` had allocated at once beyond what was live before it.
fn peak_allocation(f: impl FnOnce()) -> usize {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    f();
    PEAK.with(Cell::get).saturating_sub(base)
}

// ---------------------------------------------------------------------------
// Seed corpus
// ---------------------------------------------------------------------------

/// Encoded frames a peer could send.
fn frames() -> Vec<Vec<u8>> {
    let udp = TestSpec {
        protocol: Protocol::Udp,
        direction: Direction::Bidir,
        limit: Limit::Datagrams(100),
        len: 100,
        udp: Some(UdpSpec::default()),
        ..TestSpec::default()
    };
    let token = Token([0; wire::TOKEN_LEN]);
    [
        Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: "f".into(),
            spec: TestSpec::default(),
            server_engine: None,
            heartbeat_ms: None,
            unix_uid: None,
            beside: None,
        }),
        Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            software: "f".into(),
            spec: udp,
            server_engine: None,
            heartbeat_ms: None,
            unix_uid: None,
            beside: None,
        }),
        Message::DataHello(DataHello {
            token,
            stream: 1,
            sender: Side::Client,
        }),
        Message::Start,
        Message::Results(Box::default()),
        Message::Abort(Abort {
            reason: "\x1b[2J".into(),
        }),
        Message::ClockProbe(ClockProbe { t1: 1 }),
        Message::SendDone(SendDone { streams: vec![] }),
        Message::AuthInit(AuthInit { nonce: [1; 32] }),
        Message::AuthChallenge(AuthChallenge {
            nonce: [2; 32],
            proof: [3; 32],
        }),
        Message::AuthProof(AuthProof { proof: [4; 32] }),
        Message::Accept(Accept {
            spec: TestSpec::default(),
            token,
            notes: vec!["n".into()],
            software: "f".into(),
            udp_ports: vec![],
            server_engine: None,
            heartbeat_ms: None,
            unix_name: None,
        }),
    ]
    .iter()
    .map(wire::to_bytes)
    .collect()
}

/// A session target's event holding `bytes` from the peer (see
/// `fuzz::server_session`: tag 0, a u16 length, the bytes).
fn peer(bytes: &[u8]) -> Vec<u8> {
    let n = bytes.len().min(512) as u16;
    let mut e = vec![0];
    e.extend_from_slice(&n.to_le_bytes());
    e.extend_from_slice(&bytes[..usize::from(n)]);
    e
}

/// Driver events of the session targets: a data connection attached,
/// the data phase finished, the clock advanced, the peer closed.
const ATTACH: [u8; 3] = [9, 0, 1];
const FINISHED: [u8; 1] = [8];
const ADVANCE: [u8; 3] = [6, 255, 255];
const CLOSED: [u8; 1] = [7];

/// The seeds each target starts from.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let f = frames();
    match target {
        "control_frames" => f,
        "data_headers" => data_header_seeds(),
        "auth" => vec![noise(2, 97), vec![0; 97]],
        "server_session" => server_session_seeds(&f),
        "client_session" => client_session_seeds(&f),
        "rr_flow" => rr_flow_seeds(),
        "packets" => packet_seeds(),
        _ => (0..4).map(|k| noise(k + 3, 64 << k)).collect(),
    }
}

fn packet_seeds() -> Vec<Vec<u8>> {
    use linerate_proto::packet::UdpFlow;
    let mut out = Vec::new();
    for (src, dst) in [
        ("198.18.0.1:40000", "198.18.0.2:5201"),
        ("[2001:db8::1]:40000", "[2001:db8::2]:5201"),
    ] {
        let flow = UdpFlow {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: src.parse().expect("address"),
            dst: dst.parse().expect("address"),
        };
        let mut f = vec![0u8; flow.header_len() + 32];
        flow.emit(&mut f, &noise(5, 32)).expect("fits");
        out.push(f);
    }
    out
}

fn data_header_seeds() -> Vec<Vec<u8>> {
    let mut d = vec![0u8; 64];
    Header {
        flags: 0,
        stream: 1,
        seq: 7,
        send_ns: 9,
        len: 64,
    }
    .emit(&mut d);
    let mut rr = vec![0u8; 32];
    linerate_proto::rr::RequestRepr {
        flow: 1,
        sequence: 2,
        sent_ns: Some(3),
    }
    .emit(&mut rr);
    let mut resp = vec![0u8; 32];
    linerate_proto::rr::ResponseRepr {
        flow: 1,
        sequence: 2,
        server_ns: Some((3, 4)),
    }
    .emit(&mut resp);
    vec![d, rr, resp, noise(1, 16)]
}

fn server_session_seeds(f: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let hello = wire::to_bytes(&Message::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        software: "f".into(),
        spec: TestSpec::default(),
        server_engine: None,
        heartbeat_ms: None,
        unix_uid: None,
        beside: None,
    }));
    let results = f[4].clone();
    vec![
        [
            vec![0],
            peer(&hello),
            ATTACH.to_vec(),
            FINISHED.to_vec(),
            peer(&results),
        ]
        .concat(),
        [vec![1], peer(&f[8]), peer(&f[10]), peer(&hello)].concat(),
        [
            vec![0],
            peer(&hello),
            ADVANCE.to_vec(),
            ADVANCE.to_vec(),
            CLOSED.to_vec(),
        ]
        .concat(),
    ]
}

fn client_session_seeds(f: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let accept = f[11].clone();
    let results = f[4].clone();
    vec![
        [
            peer(&accept),
            ATTACH.to_vec(),
            peer(&f[3]),
            FINISHED.to_vec(),
            peer(&results),
        ]
        .concat(),
        [peer(&accept), ADVANCE.to_vec(), CLOSED.to_vec()].concat(),
        [peer(&f[5])].concat(),
    ]
}

fn rr_flow_seeds() -> Vec<Vec<u8>> {
    // Sizes, reliability, flow; then requests (0), the server's
    // response (2), a timeout (1), a late response (2 after 1).
    let head = |reliable: u8| vec![63, 63, reliable, 1];
    let request = [0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 3];
    let events = [
        &request[..],
        &[2, 0, 0],
        &request,
        &[1],
        &request,
        &[2, 0, 0],
    ]
    .concat();
    vec![
        [head(0), events.clone()].concat(),
        [head(1), events].concat(),
        noise(9, 64),
    ]
}

#[test]
fn issue_10_fuzz_seed_corpus_runs_clean() {
    fuzz_support::run_seed_corpus(TARGETS, seeds);
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

/// Memory a decoder may take for `len` input bytes: proportional to what
/// arrived (JSON trees cost a multiple of their text), never to what a
/// header declares.
fn allowance(len: usize) -> usize {
    64 * len + (256 << 10)
}

proptest! {
    #![proptest_config(cfg(350_000))]
    #[test]
    fn issue_10_fuzz_control_frames(bytes in input("control_frames")) {
        let peak = peak_allocation(|| fuzz::control_frames(&bytes));
        prop_assert!(peak <= allowance(bytes.len()), "{peak} bytes for {}", bytes.len());
    }
}

#[test]
fn issue_10_declared_lengths_cost_no_memory_before_the_bytes() {
    // Headers declaring 64 KiB (the control limit) and 16 MiB (Results),
    // with a few bytes of payload: memory follows the bytes.
    for (kind, len) in [(1u8, 65_535u32), (6, 16 << 20), (6, u32::MAX)] {
        let mut f = vec![b'L', b'R', 1, kind];
        f.extend_from_slice(&len.to_be_bytes());
        f.extend_from_slice(b"{\"x\":");
        let peak = peak_allocation(|| fuzz::control_frames(&f));
        assert!(peak < 4096, "kind {kind} declaring {len}: {peak} bytes");
        let mut events = vec![0u8];
        events.extend_from_slice(&peer(&f));
        let peak = peak_allocation(|| fuzz::server_session(&events));
        assert!(peak < allowance(f.len()), "session: {peak} bytes");
    }
}

proptest! {
    #![proptest_config(cfg(250_000))]
    #[test]
    fn issue_10_fuzz_data_headers(bytes in input("data_headers")) {
        fuzz::data_headers(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(20_000))]
    #[test]
    fn issue_10_fuzz_auth(bytes in input("auth")) {
        fuzz::auth(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_server_session(bytes in input("server_session")) {
        let peak = peak_allocation(|| fuzz::server_session(&bytes));
        prop_assert!(peak <= allowance(bytes.len()), "{peak} bytes for {}", bytes.len());
    }
}

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_client_session(bytes in input("client_session")) {
        fuzz::client_session(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(40_000))]
    #[test]
    fn issue_10_fuzz_udp_receiver(bytes in input("udp_receiver")) {
        fuzz::udp_receiver(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(10_000))]
    #[test]
    fn issue_10_fuzz_udp_sender(bytes in input("udp_sender")) {
        fuzz::udp_sender(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(60_000))]
    #[test]
    fn issue_10_fuzz_interval_cutter(bytes in input("interval")) {
        fuzz::interval(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(4_000))]
    #[test]
    fn issue_10_fuzz_rr_core(bytes in input("rr_core")) {
        fuzz::rr_core(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(20_000))]
    #[test]
    fn issue_24_fuzz_rr_flow(bytes in input("rr_flow")) {
        fuzz::rr_flow(&bytes);
    }
}

proptest! {
    #![proptest_config(cfg(100_000))]
    #[test]
    fn issue_25_fuzz_packets(bytes in input("packets")) {
        fuzz::packets(&bytes);
    }
}
