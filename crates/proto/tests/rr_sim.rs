//! The request/response cores (`rr_flow`) as a simulated pair: a client
//! and a server core joined by a datagram path on a virtual clock that
//! loses, delays (and so reorders) and duplicates messages, the way the
//! engine's UDP rr loops drive them. Whatever the path does, every
//! transaction is answered or lost exactly once, a match is always the
//! response to the request outstanding, and late copies are recognised.

use linerate_proto::rr::RequestRepr;
use linerate_proto::rr_core::ServerTimes;
use linerate_proto::rr_flow::{Response, RrClient, RrServer, Transaction};

const FLOW: u32 = 3;
const LEN: usize = 64;
const TIMEOUT: u64 = 1_000;

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the path does to each message, in percent, and its delay range.
#[derive(Clone, Copy)]
struct Path {
    loss: u64,
    duplicate: u64,
    /// Delays are uniform in 1..=max_delay: a spread wider than the gap
    /// between sends reorders.
    max_delay: u64,
}

/// Datagrams in flight one way: (arrival time, bytes).
#[derive(Default)]
struct Link(Vec<(u64, Vec<u8>)>);

impl Link {
    fn send(&mut self, rng: &mut Rng, path: Path, now: u64, bytes: &[u8]) {
        if rng.below(100) < path.loss {
            return;
        }
        let copies = if rng.below(100) < path.duplicate {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + 1 + rng.below(path.max_delay);
            self.0.push((at, bytes.to_vec()));
        }
    }
    /// The earliest datagram arriving before `until`, taken off the link.
    fn next_before(&mut self, until: u64) -> Option<(u64, Vec<u8>)> {
        let (i, _) = self
            .0
            .iter()
            .enumerate()
            .filter(|(_, (at, _))| *at < until)
            .min_by_key(|(_, (at, _))| *at)?;
        Some(self.0.swap_remove(i))
    }
}

#[derive(Default, Debug)]
struct Outcome {
    answered: u64,
    lost: u64,
    late: u64,
    served: u64,
}

/// Runs `n` transactions over `path`; the server answers each arriving
/// request at once, stamping its virtual receive and send times.
fn run(seed: u64, path: Path, n: u64) -> Outcome {
    let mut rng = Rng(seed);
    let mut client = RrClient::new(FLOW, LEN, Some(TIMEOUT));
    let mut server = RrServer::new(FLOW, LEN, false);
    let (mut up, mut down) = (Link::default(), Link::default());
    let mut now = 0u64;
    let mut out = Outcome::default();
    let mut req = [0u8; LEN];
    let mut resp = [0u8; LEN];
    for sequence in 0..n {
        let header = RequestRepr {
            flow: FLOW,
            sequence,
            sent_ns: Some(now),
        };
        client.request(&header, &mut req);
        up.send(&mut rng, path, now, &req);
        let deadline = client.deadline(now).expect("unreliable");
        let result = loop {
            // Deliver requests to the server, and its responses back, in
            // time order, until the client's deadline.
            let next_req = up.0.iter().map(|d| d.0).filter(|&t| t < deadline).min();
            let next_resp = down.0.iter().map(|d| d.0).filter(|&t| t < deadline).min();
            match (next_req, next_resp) {
                (Some(q), p) if p.is_none_or(|p| q < p) => {
                    let (at, bytes) = up.next_before(deadline).expect("due");
                    let got = server
                        .on_request(&bytes, Some(at), || at + 2, &mut resp)
                        .expect("a well-formed request");
                    assert!(got <= sequence);
                    out.served += 1;
                    down.send(&mut rng, path, at + 2, &resp);
                }
                (_, Some(_)) => {
                    let (at, bytes) = down.next_before(deadline).expect("due");
                    now = now.max(at);
                    match client.on_response(&bytes).expect("a well-formed response") {
                        Response::Matched(server) => {
                            // The server's times are its answer to this
                            // very request: sent after the request was.
                            let ServerTimes { rx, tx } = server.expect("timed");
                            assert!(rx >= header.sent_ns.unwrap_or(0) && tx == rx + 2);
                            break Transaction::Answered(server);
                        }
                        Response::Late => {}
                        Response::Stray => panic!("no empty datagrams here"),
                    }
                }
                (None, None) => {
                    now = deadline;
                    break client.on_timeout();
                }
                _ => unreachable!("covered above"),
            }
        };
        match result {
            Transaction::Answered(_) => out.answered += 1,
            Transaction::Lost => out.lost += 1,
        }
        // The next request goes out a little later.
        now += 1 + rng.below(5);
    }
    out.late = client.late();
    assert_eq!((client.answered(), client.lost()), (out.answered, out.lost));
    out
}

#[test]
fn issue_24_a_clean_path_answers_every_transaction() {
    let o = run(
        1,
        Path {
            loss: 0,
            duplicate: 0,
            max_delay: 10,
        },
        500,
    );
    assert_eq!((o.answered, o.lost, o.late, o.served), (500, 0, 0, 500));
}

#[test]
fn issue_24_loss_delay_reorder_and_duplicates_are_each_counted_once() {
    let paths = [
        (20, 0, 10),
        (0, 30, 10),
        (0, 0, 2 * TIMEOUT),
        (10, 10, 3 * TIMEOUT / 2),
    ];
    for seed in 0..40 {
        for &(loss, duplicate, max_delay) in &paths {
            let path = Path {
                loss,
                duplicate,
                max_delay,
            };
            let o = run(seed, path, 200);
            assert_eq!(o.answered + o.lost, 200, "{o:?}");
            if loss > 0 || max_delay > TIMEOUT {
                assert!(
                    o.lost > 0,
                    "seed {seed}: nothing lost on a lossy path: {o:?}"
                );
            } else {
                assert_eq!(o.lost, 0, "{o:?}");
            }
            if duplicate > 0 {
                // A duplicate response lands while the next request waits.
                assert!(o.late > 0 || o.served == 200, "{o:?}");
            }
        }
    }
}

#[test]
fn issue_24_a_late_response_arriving_with_the_current_one_is_dropped_not_matched() {
    // Request 0's response takes longer than the timeout; it arrives just
    // before request 1's, as two datagrams of one receive batch would.
    let mut client = RrClient::new(FLOW, LEN, Some(TIMEOUT));
    let mut server = RrServer::new(FLOW, LEN, false);
    let (mut req, mut r0, mut r1) = ([0u8; LEN], [0u8; LEN], [0u8; LEN]);
    for (sequence, resp) in [(0u64, &mut r0), (1, &mut r1)] {
        let header = RequestRepr {
            flow: FLOW,
            sequence,
            sent_ns: None,
        };
        client.request(&header, &mut req);
        server.on_request(&req, None, || 0, resp).expect("answered");
        if sequence == 0 {
            assert_eq!(client.on_timeout(), Transaction::Lost);
        }
    }
    assert_eq!(client.on_response(&r0), Ok(Response::Late));
    assert_eq!(client.on_response(&r1), Ok(Response::Matched(None)));
    assert_eq!((client.answered(), client.lost(), client.late()), (1, 1, 1));
}
