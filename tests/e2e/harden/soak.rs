//! Soak (issue 10): back-to-back tests of every kind against one server,
//! with no growth in its threads or file descriptors and its memory within
//! a stated bound. CI runs 200; `tests/soak.sh` runs the full 1,000
//! (`LINERATE_SOAK_TESTS` sets the count).

use std::time::{Duration, Instant};

use super::{rss_kib, threads_and_fds};
use crate::helpers::{run_client, stderr, Server};

/// The mix, cycled: every kind and direction, short enough that 200 take
/// about a minute on a quiet 2-core machine.
const MIX: &[&[&str]] = &[
    &["tcp", "-t", "0.1"],
    &["udp", "-t", "0.1", "--pps", "5000"],
    &["rr", "--sizes", "64", "-n", "50"],
    &["crr", "-n", "20"],
    &["tcp", "-t", "0.1", "-R"],
    &["tcp", "-t", "0.1", "--bidir"],
    &["tcp", "-t", "0.1", "-P", "4"],
    &["udp", "-t", "0.1", "--pps", "5000", "-R", "-P", "4"],
];

/// Most the server's RSS may grow over the soak.
const RSS_GROWTH_KIB: u64 = 64 * 1024;

#[test]
fn issue_10_soak_back_to_back_mixed_tests() {
    let count: usize = std::env::var("LINERATE_SOAK_TESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let limit = Duration::from_secs(60) + Duration::from_millis(1500) * count as u32;
    let mut server = Server::start(&[]);
    let port = server.port_str();
    let pid = server.child.id();
    // Warm up once per kind: first-use allocations are not growth.
    for args in MIX {
        run(args, &port);
    }
    let base = threads_and_fds(pid);
    let rss0 = rss_kib(pid);
    let t = Instant::now();
    for i in 0..count {
        run(MIX[i % MIX.len()], &port);
        assert!(t.elapsed() < limit, "{i} tests took {:?}", t.elapsed());
        if (i + 1) % 50 == 0 {
            // Between tests the server returns to exactly what it held at
            // rest (the last test's session may still be closing when its
            // client has exited: allow it a moment).
            let mut now = threads_and_fds(pid);
            let settle = Instant::now();
            while now != base && settle.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(20));
                now = threads_and_fds(pid);
            }
            assert_eq!(now, base, "threads/fds after {} tests", i + 1);
        }
    }
    assert!(server.alive());
    let rss = rss_kib(pid);
    assert!(
        rss <= rss0 + RSS_GROWTH_KIB,
        "RSS grew from {rss0} KiB to {rss} KiB over {count} tests"
    );
    println!(
        "soak: {count} tests in {:.1} s, RSS {rss0} → {rss} KiB, threads/fds {base:?}",
        t.elapsed().as_secs_f64()
    );
}

fn run(args: &[&str], port: &str) {
    let mut all = vec![args[0], "127.0.0.1", "-p", port];
    all.extend_from_slice(&args[1..]);
    let out = run_client(&all, Duration::from_secs(30));
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
}
