//! An iperf3 test in linerate's terms: the [`TestSpec`] an iperf3 client's
//! parameters describe, which the sessions hand to the control driver
//! (its wake-up period, the runner's parameters, limits and checks) as the
//! native sessions hand theirs. The one conversion: a linerate server
//! applies it to a real iperf3 client's parameters, and `linerate iperf3
//! -c` to its own flags, once they are iperf3's parameters.

use crate::control::Direction as IDirection;
use crate::json::{Params, Protocol as IProtocol};
use linerate_proto::spec::{Direction, Limit, Pace, Protocol, TcpOptions, TestSpec, UdpSpec};

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
}
