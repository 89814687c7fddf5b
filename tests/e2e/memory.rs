//! What a long-running server keeps after its tests end (issue 28): the
//! memory a finished test used goes back, so a fleet server stays small.

use std::time::Duration;

use crate::helpers::{assert_ok, eventually, run_client, Server};

/// A field of `/proc/PID/status`, in KiB (or a count).
fn status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// What the idle server may have kept after the tests, over what it held
/// before them: the heap it keeps for itself (buffers, tables) is far below
/// this; what finished tests' threads freed into per-thread allocator arenas
/// and never gave back was well above it (tens of MiB, bench/server_rss.sh).
const KEPT_KIB: u64 = 4 * 1024;

/// 20 short mixed tests (each kind of server-side thread and buffer) and
/// the idle server's anonymous memory (heap, stacks: not the binary's own
/// code pages, which the first test of each kind pages in and which differ
/// between builds) stays within [`KEPT_KIB`] of what it was before them.
#[test]
fn issue_28_an_idle_server_keeps_no_memory_of_finished_tests() {
    let server = Server::start(&[]);
    let pid = server.child.id();
    let p = server.port_str();
    let threads_idle = status(pid, "Threads");
    let before = status(pid, "RssAnon");
    for _ in 0..4 {
        for args in [
            &["tcp", "-t", "0.2"][..],
            &["tcp", "-P", "4", "-t", "0.2"],
            &["udp", "-b", "0", "-t", "0.2"],
            &["rr", "--sizes", "64", "-t", "0.2"],
            &["crr", "-t", "0.2"],
        ] {
            let args: Vec<&str> = args
                .iter()
                .copied()
                .chain(["127.0.0.1", "-p", &p])
                .collect();
            let out = run_client(&args, Duration::from_secs(30));
            assert_ok(&out, &args);
        }
    }
    // Idle: the tests' threads have ended (one more may stay for the server
    // itself, started by its first test).
    assert!(
        eventually(Duration::from_secs(10), || status(pid, "Threads")
            <= threads_idle + 1),
        "the server's test threads did not end"
    );
    let after = status(pid, "RssAnon");
    assert!(
        after <= before + KEPT_KIB,
        "the idle server kept {} KiB more after 20 tests ({before} → {after} KiB anonymous)",
        after.saturating_sub(before)
    );
}
