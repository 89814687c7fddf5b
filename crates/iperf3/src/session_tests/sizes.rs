//! The server's size limits (`--max-len`, `--max-window`,
//! `--max-test-memory`) reach an iperf3 client's test through the
//! functions native negotiation checks them with.

use std::time::Instant;

use super::*;
use linerate_proto::limits::ServerLimits;

/// Issue 24: an iperf3 client's `-l` skipped `--max-len` and its `-w`
/// skipped `--max-window`, limits every native test is held to; its
/// buffers were checked against `--max-test-memory` in the run crate, not
/// the session. All three now go through `negotiate::check_sizes`.
#[test]
fn issue_24_iperf3_clients_are_held_to_the_servers_size_limits() {
    let t0 = Instant::now();
    let limits = Iperf3Limits {
        server: ServerLimits {
            max_len: 131_072,
            max_window: 1 << 20,
            ..ServerLimits::default()
        },
        ..Iperf3Limits::default()
    };
    let refused = |limits: &Iperf3Limits, params: &str| {
        let out = after_params(limits, params, t0).take_outbox();
        out.get(..5).map(|h| (h[0], h[4]))
    };
    // A length past --max-len: refused, in iperf3's error channel.
    assert_eq!(
        refused(&limits, r#"{"tcp":true,"time":1,"len":262144}"#),
        Some((0xFE, code::BLOCK_SIZE as u8))
    );
    // A window past --max-window: clamped and noted, as a native client's.
    for params in [
        r#"{"tcp":true,"time":1,"window":4194304}"#,
        r#"{"udp":true,"time":1,"len":1400,"bandwidth":1000000,"window":4194304}"#,
    ] {
        let s = after_params(&limits, params, t0);
        let spec = s.spec().expect("accepted").clone();
        let window = spec.udp.as_ref().map_or(spec.tcp.window, |u| u.window);
        assert_eq!(window, Some(1 << 20), "{params}");
        let clamped = s.notes().iter().filter(|n| n.contains("window clamped"));
        assert_eq!(clamped.count(), 1, "{params}: {:?}", s.notes());
    }
    // Buffers past --max-test-memory: refused before any stream opens.
    let small = Iperf3Limits {
        server: ServerLimits {
            max_test_memory: 1 << 20,
            ..ServerLimits::default()
        },
        ..Iperf3Limits::default()
    };
    assert_eq!(
        refused(&small, r#"{"tcp":true,"time":1,"window":1048576}"#),
        Some((0xFE, code::BUF_SIZE as u8))
    );
}
