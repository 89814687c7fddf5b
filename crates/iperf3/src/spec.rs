//! An iperf3 test in linerate's terms, both ways, in one place: the
//! [`TestSpec`] an iperf3 client's parameters describe ([`spec_of`]), and
//! the parameters a linerate test sends to an iperf3 server
//! ([`params_of`]). The sessions hand the spec to the control driver (its
//! wake-up period, the runner's parameters, limits and checks) as the
//! native sessions hand theirs: a linerate server applies [`spec_of`] to a
//! real iperf3 client's parameters, `linerate iperf3 -c` to its own flags
//! once they are iperf3's parameters, and `--iperf3` clients send what
//! [`params_of`] makes of their spec.
//!
//! The two are inverses on everything iperf3 can express:
//! `spec_of(&params_of(s)?) == s` for such a spec (the test below checks
//! it over a table). What does not come back, and why:
//! - `kind`, `rr`, `msg`, `flows`, `busy_poll`, `tcp.unix`, `tcp.linger0`:
//!   iperf3 runs stream tests over TCP or UDP sockets only (the test-type
//!   table refuses the rest before the parameters are built);
//!   `spec_of` gives their defaults.
//! - `interval_ms`: iperf3's `-i` is each side's own reporting, not a
//!   parameter; `spec_of` says 1000 and callers set their own.
//! - `udp.verify`, `udp.faults`: need linerate's own datagrams, refused.
//! - `udp.priority`, `udp.drain_ms`: no iperf3 parameter; defaults come back.
//! - `Pace::MilliPps`: sent as the bit rate it is at `len` (iperf3 has
//!   only -b), so it comes back as `Pace::Rate`; `Pace::Rate(0)` and a
//!   TCP `rate` of `Some(0)` come back as unpaced (iperf3's -b 0).
//! - A UDP test's `tcp.window` (sent when `udp.window` is unset), `tcp.rate`
//!   and `tcp.skip_rx_copy`: iperf3 has one window and one -b, which a UDP
//!   spec keeps in `udp`; `spec_of` puts them there.
//! - `Limit::Datagrams` on TCP (iperf3's -k counts blocks of `len`, so it
//!   comes back as bytes) and a zero byte or datagram limit (iperf3's 0 is
//!   "no such limit", so it comes back as a time of `time` seconds).
//! - `udp.burst` 0: sent as none, comes back as 1.
//! - Time and omit in milliseconds that are not whole seconds: refused.

use crate::control::Direction as IDirection;
use crate::json::{Params, Protocol as IProtocol};
use linerate_proto::spec::{Direction, Limit, Pace, Protocol, TcpOptions, TestSpec, UdpSpec};

/// A linerate test iperf3's parameters cannot express; the message names
/// the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Inexpressible(pub String);

/// The test an iperf3 client's parameters describe, in linerate's terms.
pub fn spec_of(p: &Params) -> TestSpec {
    let protocol = match p.protocol {
        IProtocol::Tcp => Protocol::Tcp,
        IProtocol::Udp => Protocol::Udp,
    };
    let limit = if p.num > 0 {
        Limit::Bytes(p.num)
    } else if p.blockcount > 0 && protocol == Protocol::Udp {
        Limit::Datagrams(p.blockcount)
    } else if p.blockcount > 0 {
        Limit::Bytes(p.blockcount.saturating_mul(u64::from(p.len)))
    } else {
        Limit::TimeMs(u64::from(p.time) * 1000)
    };
    TestSpec {
        protocol,
        direction: match p.direction {
            IDirection::Normal => Direction::Forward,
            IDirection::Reverse => Direction::Reverse,
            IDirection::Bidir => Direction::Bidir,
        },
        streams: p.parallel as u16,
        limit,
        len: p.len,
        omit_ms: u64::from(p.omit) * 1000,
        interval_ms: 1000,
        tcp: TcpOptions {
            // A UDP test's window is its sockets' buffers (below).
            window: p.window.filter(|_| protocol == Protocol::Tcp),
            congestion: p.congestion.clone(),
            no_delay: p.nodelay,
            mss: p.mss,
            // iperf3's -b on TCP: each sending stream paced by the kernel,
            // and held to it by the server's rate watch. Every -b the
            // session admitted is kept (it refuses those below
            // MIN_TCP_RATE_BPS): a rate dropped here would run unpaced.
            rate: (protocol == Protocol::Tcp && p.bandwidth > 0).then_some(p.bandwidth),
            // iperf3 3.21's --skip-rx-copy: its receivers use MSG_TRUNC, so ours do.
            skip_rx_copy: protocol == Protocol::Tcp && p.skip_rx_copy,
            unix: false,
            linger0: false,
        },
        udp: (protocol == Protocol::Udp).then(|| UdpSpec {
            pace: match p.bandwidth {
                0 => Pace::Unlimited,
                b => Pace::Rate(b),
            },
            burst: p.burst.unwrap_or(1),
            window: p.window,
            ..UdpSpec::default()
        }),
        ..TestSpec::default()
    }
}

/// The iperf3 parameters of a linerate test, or why iperf3 cannot run it.
/// `client_version` says linerate; `get_server_output` and
/// `server_affinity` are the caller's (flags of `linerate iperf3 -c`).
pub fn params_of(spec: &TestSpec) -> Result<Params, Inexpressible> {
    let whole = |ms: u64, flag: &str| -> Result<u32, Inexpressible> {
        if !ms.is_multiple_of(1000) {
            return Err(Inexpressible(format!(
                "{flag}: an iperf3 server takes whole seconds ({ms} ms asked)"
            )));
        }
        u32::try_from(ms / 1000).map_err(|_| {
            Inexpressible(format!(
                "{flag}: an iperf3 server takes at most {} s ({ms} ms asked)",
                u32::MAX
            ))
        })
    };
    // -n/-k are the whole test's, as in iperf3: with -R or --bidir the
    // client ends it once that much was sent or received in all
    // (`Test::time_is_up`).
    let (time, num, blockcount) = match spec.limit {
        Limit::TimeMs(ms) => (whole(ms, "--time")?, 0, 0),
        Limit::Bytes(b) => (0, b, 0),
        // iperf3's -k: blocks, which are datagrams in a UDP test.
        Limit::Datagrams(n) => (0, 0, n),
    };
    let mut p = Params {
        protocol: iperf3_protocol(spec.protocol),
        omit: whole(spec.omit_ms, "--omit")?,
        time,
        num,
        blockcount,
        parallel: u32::from(spec.streams),
        direction: iperf3_direction(spec.direction),
        len: spec.len,
        mss: spec.tcp.mss,
        nodelay: spec.tcp.no_delay,
        window: spec.tcp.window,
        congestion: spec.tcp.congestion.clone(),
        bandwidth: spec.tcp.rate.unwrap_or(0),
        skip_rx_copy: spec.tcp.skip_rx_copy,
        client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    };
    if let Some(u) = &spec.udp {
        if u.verify || !u.faults.is_empty() {
            return Err(Inexpressible(
                "--verify and --inject-faults need linerate's own datagrams: not with --iperf3"
                    .to_string(),
            ));
        }
        p.bandwidth = match u.pace {
            Pace::Unlimited => 0,
            Pace::Rate(b) => b,
            Pace::MilliPps(m) => m.saturating_mul(u64::from(spec.len) * 8) / 1000,
        };
        p.burst = (u.burst > 1).then_some(u.burst);
        p.window = u.window.or(p.window);
        // 64-bit sequence numbers: no wrap, understood by every iperf3 ≥3.1.
        p.udp_counters_64bit = true;
    }
    Ok(p)
}

/// iperf3's protocol for linerate's.
pub fn iperf3_protocol(p: Protocol) -> IProtocol {
    match p {
        Protocol::Tcp => IProtocol::Tcp,
        Protocol::Udp => IProtocol::Udp,
    }
}

/// iperf3's direction for linerate's.
pub fn iperf3_direction(d: Direction) -> IDirection {
    match d {
        Direction::Forward => IDirection::Normal,
        Direction::Reverse => IDirection::Reverse,
        Direction::Bidir => IDirection::Bidir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse_params;
    use linerate_proto::wire::Side;

    #[test]
    fn iperf3_parameters_become_a_linerate_spec() {
        let p = parse_params(br#"{"udp":true,"omit":1,"time":3,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"len":1400,"bandwidth":10000000,"window":1048576}"#)
            .expect("valid")
            .params;
        let s = spec_of(&p);
        assert_eq!(s.protocol, Protocol::Udp);
        assert_eq!(s.direction, Direction::Bidir);
        assert_eq!((s.streams, s.len, s.omit_ms), (2, 1400, 1000));
        assert_eq!(s.limit, Limit::TimeMs(3000));
        assert_eq!(s.udp.as_ref().map(|u| u.pace), Some(Pace::Rate(10_000_000)));
        // linerate's plan order is iperf3's creation order.
        let plan = s.stream_plan();
        assert_eq!(plan.len(), 4);
        assert_eq!(plan[0].sender, Side::Client);
        assert_eq!(plan[3].sender, Side::Server);
        let p = parse_params(br#"{"tcp":true,"time":0,"num":10485760}"#)
            .expect("valid")
            .params;
        assert_eq!(spec_of(&p).limit, Limit::Bytes(10_485_760));
    }

    /// Every spec iperf3 can express (see the module's list of what it
    /// cannot), as the cross product of each field's cases.
    fn expressible() -> Vec<TestSpec> {
        let directions = [Direction::Forward, Direction::Reverse, Direction::Bidir];
        let mut specs = Vec::new();
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let mut limits = vec![
                Limit::TimeMs(3000),
                Limit::TimeMs(0),
                Limit::Bytes(10_485_760),
            ];
            let mut tcp_cases = vec![
                TcpOptions::default(),
                TcpOptions {
                    congestion: Some("bbr".into()),
                    no_delay: true,
                    mss: Some(1400),
                    ..TcpOptions::default()
                },
            ];
            let mut udp_cases = vec![None];
            // A UDP datagram's payload is at most 65507 bytes.
            let lens = match protocol {
                Protocol::Tcp => [128 * 1024, 1400],
                Protocol::Udp => [8000, 1400],
            };
            match protocol {
                Protocol::Tcp => tcp_cases.push(TcpOptions {
                    window: Some(1 << 20),
                    rate: Some(100_000_000),
                    skip_rx_copy: true,
                    ..TcpOptions::default()
                }),
                Protocol::Udp => {
                    limits.push(Limit::Datagrams(1000));
                    udp_cases = [Pace::Unlimited, Pace::Rate(10_000_000)]
                        .into_iter()
                        .flat_map(|pace| {
                            [(1, None), (8, Some(1 << 20))].map(|(burst, window)| {
                                Some(UdpSpec {
                                    pace,
                                    burst,
                                    window,
                                    ..UdpSpec::default()
                                })
                            })
                        })
                        .collect();
                }
            }
            for direction in directions {
                for &limit in &limits {
                    for tcp in &tcp_cases {
                        for udp in &udp_cases {
                            for (streams, omit_ms) in [(1, 0), (4, 2000)] {
                                specs.push(TestSpec {
                                    protocol,
                                    direction,
                                    streams,
                                    limit,
                                    len: lens[usize::from(streams > 1)],
                                    omit_ms,
                                    tcp: tcp.clone(),
                                    udp: udp.clone(),
                                    ..TestSpec::default()
                                });
                            }
                        }
                    }
                }
            }
        }
        specs
    }

    #[test]
    fn issue_24_spec_to_params_to_spec_is_the_identity() {
        let specs = expressible();
        assert!(specs.len() > 100, "{} specs", specs.len());
        for spec in specs {
            let p = params_of(&spec).expect("expressible");
            assert_eq!(spec_of(&p), spec, "through Params: {p:?}");
            // And as an iperf3 server reads them off the wire.
            let body = crate::json::params_json(&p).to_string();
            let wire = parse_params(body.as_bytes()).expect("valid").params;
            assert_eq!(spec_of(&wire), spec, "through the wire: {p:?}");
        }
    }

    #[test]
    fn issue_9_linerate_specs_map_to_iperf3_parameters() {
        let spec = TestSpec {
            limit: Limit::TimeMs(3000),
            streams: 2,
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        let p = params_of(&spec).expect("maps");
        assert_eq!((p.time, p.parallel, p.direction), (3, 2, IDirection::Bidir));
        let half = TestSpec {
            limit: Limit::TimeMs(1500),
            ..TestSpec::default()
        };
        let e = params_of(&half).expect_err("whole seconds").to_string();
        assert!(e.contains("--time"), "{e}");
        // Past iperf3's 32-bit seconds: refused, not wrapped to a short test.
        let long = TestSpec {
            omit_ms: (u64::from(u32::MAX) + 1) * 1000,
            ..TestSpec::default()
        };
        let e = params_of(&long).expect_err("over u32 seconds").to_string();
        assert!(e.contains("--omit") && e.contains("at most"), "{e}");
        let rev_bytes = TestSpec {
            limit: Limit::Bytes(1000),
            direction: Direction::Reverse,
            ..TestSpec::default()
        };
        // issue 9: -n with -R is iperf3's whole-test byte count.
        let p = params_of(&rev_bytes).expect("maps");
        assert_eq!((p.time, p.num, p.direction), (0, 1000, IDirection::Reverse));
    }
}
