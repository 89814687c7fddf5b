//! `--engine uring --flows` (issue 26): TCP and UDP stream flows on
//! io_uring completion loops on both sides — every flow counted, the
//! flows summing to the total, no loss on loopback — named as such in
//! the report; the kinds without a completion loop (rr, crr) refused by
//! name, not run on epoll. Skipped, with the reason, where this kernel
//! cannot run them.

use std::time::Duration;

use serde_json::Value;

use crate::flows::assert_udp_flows_account;
use crate::helpers::*;

/// Runs a client test on uring loops on both sides, or `None` (skipped,
/// with the reason) where this kernel refuses them.
fn uring_client(port: &str, args: &[&str]) -> Option<Value> {
    let mut all = args.to_vec();
    all.extend_from_slice(&[
        "127.0.0.1",
        "-p",
        port,
        "--json",
        "--engine",
        "uring",
        "--server-engine",
        "uring",
    ]);
    let out = run_client(&all, Duration::from_secs(60));
    if !out.status.success() {
        let why = stderr(&out);
        if why.contains("cannot run here") || why.contains("multishot") {
            skip(why.trim());
            return None;
        }
    }
    assert_ok(&out, &all);
    Some(serde_json::from_slice(&out.stdout).expect("json"))
}

/// Both sides ran io_uring completion loops, and say so.
fn assert_ran_on_uring(r: &Value) {
    for side in ["client_engine", "server_engine"] {
        assert_eq!(r["test"][side], "uring", "{}", r["test"]);
    }
    // Each side's loops record what they ran on (its busiest thread may
    // be its control connection's when the flows are slow).
    let streams = r["streams"].as_array().expect("streams");
    for end in ["sender", "receiver"] {
        let on_ring = streams.iter().any(|s| {
            let u = &s[end]["engine_use"];
            u["engine"] == "uring"
                && u["notes"].as_array().is_some_and(|n| {
                    n.iter().any(|n| {
                        n.as_str()
                            .is_some_and(|n| n.contains("io_uring completion loop"))
                    })
                })
        });
        assert!(on_ring, "{end}: {}", streams[0]);
    }
}

#[test]
fn issue_26_uring_udp_flows_count_every_datagram_both_ways() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    for dir in [&[][..], &["-R"][..]] {
        // Unpaced, counted: 6,400 datagrams over 64 flows, 100 each.
        let mut unpaced = vec!["udp", "--flows", "64", "--threads", "2"];
        unpaced.extend_from_slice(&["-k", "6400", "-b", "0"]);
        unpaced.extend_from_slice(dir);
        // Paced, timed.
        let mut paced = vec!["udp", "--flows", "64", "--threads", "2"];
        paced.extend_from_slice(&["-t", "1", "-b", "1M"]);
        paced.extend_from_slice(dir);
        for args in [unpaced, paced] {
            let Some(r) = uring_client(&port, &args) else {
                return;
            };
            assert_ran_on_uring(&r);
            assert_udp_flows_account(&r, 64);
            let streams = r["streams"].as_array().expect("streams");
            let received: u64 = streams.iter().map(|s| u(&s["udp"]["received"])).sum();
            for s in streams {
                assert_eq!(u(&s["udp"]["lost"]), 0, "{args:?}: {s}");
                if args.contains(&"-k") {
                    assert_eq!(u(&s["udp"]["received"]), 100, "{args:?}: {s}");
                }
            }
            let sum = &r["sums"][0]["udp"];
            assert_eq!(u(&sum["received"]), received, "{args:?}: {sum}");
            assert_eq!(u(&sum["lost"]), 0, "{args:?}: {sum}");
            // The receivers' multishot receives took the thread's buffers.
            assert!(
                streams
                    .iter()
                    .any(|s| s["receiver"]["engine_use"]["multishot_recv"] == true),
                "{args:?}: {}",
                streams[0]
            );
        }
    }
}

#[test]
fn issue_26_uring_tcp_flows_move_every_flow_both_ways() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    for dir in [&[][..], &["-R"][..]] {
        let mut args = vec!["tcp", "--flows", "64", "--threads", "2", "-t", "1"];
        args.extend_from_slice(&["-l", "16K"]);
        args.extend_from_slice(dir);
        let Some(r) = uring_client(&port, &args) else {
            return;
        };
        assert_ran_on_uring(&r);
        // Every flow moved bytes, its two ends agree, and the sums are
        // the flows' bytes added up.
        assert_streams_balanced(&r);
        let streams = r["streams"].as_array().expect("streams");
        assert_eq!(streams.len(), 64, "{dir:?}");
        for s in streams {
            assert!(u(&s["receiver"]["bytes"]) > 0, "{dir:?}: {s}");
        }
        assert_eq!(u(&r["sums"][0]["fairness"]["idle_flows"]), 0, "{dir:?}");
    }
    // A byte count, split over the flows, arrives whole.
    let args = ["tcp", "--flows", "8", "--threads", "2", "-n", "8M"];
    let Some(r) = uring_client(&port, &args) else {
        return;
    };
    assert_streams_balanced(&r);
    let total: u64 = r["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .map(|s| u(&s["receiver"]["bytes"]))
        .sum();
    assert_eq!(total, 8 << 20, "{}", r["sums"][0]);
}

#[test]
fn issue_26_uring_flows_name_their_loop_and_refuse_rr() {
    let out = run_client(
        &["udp", "--flows", "4", "-k", "400", "--engine", "uring"],
        Duration::from_secs(60),
    );
    if !out.status.success() && stderr(&out).contains("cannot run here") {
        return skip(stderr(&out).trim());
    }
    assert_ok(&out, &["udp --flows 4 --engine uring"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("4 flows on 1 event-loop thread (io_uring)"),
        "{text}"
    );
    // The same test on epoll says so.
    let out = run_client(
        &["udp", "--flows", "4", "-k", "400", "--engine", "syscall"],
        Duration::from_secs(60),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("event-loop thread (epoll)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // rr and crr flows have no completion loop: refused, naming what is
    // missing, on either side's engine.
    for (kind, flag) in [
        ("rr", "--engine"),
        ("crr", "--engine"),
        ("rr", "--server-engine"),
    ] {
        let args = [kind, "--flows", "4", "-t", "0.5", flag, "uring"];
        let out = run_client(&args, Duration::from_secs(30));
        assert!(!out.status.success(), "{args:?} ran");
        let err = stderr(&out);
        assert!(
            err.contains(flag) && err.contains("rr and crr flows have no completion loop"),
            "{args:?}: {err}"
        );
    }
}

/// A server whose own `--engine` is uring serves rr flows (TCP and UDP)
/// on its epoll loops, where rr runs, and names the engine those loops ran
/// (the review found it naming uring, and giving each TCP flow uring's
/// per-socket I/O, after the loop engines were merged).
#[test]
fn issue_26_a_uring_server_serves_rr_flows_on_epoll_and_says_so() {
    if !crate::uring_engines::runs_here("uring") {
        return;
    }
    let server = Server::start(&["--engine", "uring", "--threads", "2"]);
    let port = server.port_str();
    for proto in ["tcp", "udp"] {
        let args = [
            "rr",
            "127.0.0.1",
            "-p",
            &port,
            "--proto",
            proto,
            "--flows",
            "8",
            "--threads",
            "2",
            "-t",
            "1",
            "--json",
        ];
        let out = run_client(&args, Duration::from_secs(60));
        assert_ok(&out, &args);
        let r: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            r["test"]["server_engine"], "syscall",
            "{proto}: {}",
            r["test"]
        );
        let p = &r["rr"]["phases"][0];
        assert!(p.get("errors").is_none(), "{proto}: {p}");
        let counts = p["per_flow"]["transactions"].as_array().expect("per flow");
        assert!(counts.iter().all(|c| u(c) > 0), "{proto}: {p}");
    }
}
