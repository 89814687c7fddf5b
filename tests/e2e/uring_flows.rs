//! `--engine uring --flows` (issue 26): TCP and UDP stream flows and rr
//! over TCP on io_uring completion loops on both sides — every flow
//! counted, the flows summing to the total, no loss on loopback, paced
//! rr flows at their rate — named as such in the report; the kinds
//! without a completion loop (rr over UDP, crr) refused by name, not run
//! on epoll. Skipped, with the reason, where this kernel cannot run them.

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
fn issue_26_uring_flows_name_their_loop_and_refuse_udp_rr_and_crr() {
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
    // rr over UDP and crr flows have no completion loop: refused, naming
    // what is missing, on either side's engine (crr has no server engine).
    for (kind, proto, flag, what) in [
        ("rr", "udp", "--engine", "rr over UDP flows"),
        ("crr", "tcp", "--engine", "crr flows"),
        ("rr", "udp", "--server-engine", "rr over UDP flows"),
    ] {
        let args = [
            kind, "--proto", proto, "--flows", "4", "-t", "0.5", flag, "uring",
        ];
        let out = run_client(&args, Duration::from_secs(30));
        assert!(!out.status.success(), "{args:?} ran");
        let err = stderr(&out);
        assert!(
            err.contains(flag) && err.contains(&format!("{what} have no completion loop")),
            "{args:?}: {err}"
        );
    }
}

/// A side's rr loops ran io_uring completion loops, and its report says
/// so: its engine and its engine record.
fn assert_rr_ran_on_uring(r: &Value, side: &str) {
    assert_eq!(
        r["test"][format!("{side}_engine")],
        "uring",
        "{}",
        r["test"]
    );
    let u = &r["rr"][format!("engine_use_{side}")];
    assert_eq!(u["multishot_recv"], true, "{side}: {u}");
    let notes = u["notes"].as_array().expect("notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains("io_uring completion loop"))),
        "{side}: {u}"
    );
}

/// A side's busiest thread (unpaced flows: one of its loops) is named
/// for the loop it ran, `kind` (`io_uring` or `epoll`).
fn assert_busiest_loop(r: &Value, side: &str, kind: &str) {
    let busiest = r["cpu"][side]["busiest_thread"].as_str().unwrap_or("");
    assert!(
        busiest.contains(&format!("({kind}, ")),
        "{side}: {busiest:?}"
    );
}

/// Every flow of the first phase completed transactions, the flows' counts
/// sum to the phase's on both sides, and the merged percentiles cover them.
fn assert_rr_flows_account(r: &Value, flows: usize) {
    let p = &r["rr"]["phases"][0];
    let per_flow = &p["per_flow"];
    let counts = per_flow["transactions"].as_array().expect("per flow");
    assert_eq!(counts.len(), flows, "{per_flow}");
    assert!(counts.iter().all(|c| u(c) > 0), "{per_flow}");
    assert_eq!(u(&per_flow["idle_flows"]), 0, "{per_flow}");
    let total: u64 = counts.iter().map(u).sum();
    assert_eq!(u(&p["transactions"]), total, "{p}");
    assert_eq!(u(&p["server_transactions"]), total, "{p}");
    assert!(p.get("errors").is_none(), "{p}");
    assert_eq!(u(&p["latency"]["count"]), total, "{p}");
    for q in ["p50_ns", "p99_ns"] {
        assert!(u(&p["latency"][q]) > 0, "{q}: {p}");
        let (lo, hi) = (f(&per_flow[q]["min"]), f(&per_flow[q]["max"]));
        assert!(lo > 0.0 && lo <= hi, "{q}: {per_flow}");
    }
}

#[test]
fn issue_26_uring_rr_flows_all_complete_transactions_on_io_uring() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    let args = ["rr", "--flows", "64", "--threads", "2", "-t", "2"];
    let Some(r) = uring_client(&port, &args) else {
        return;
    };
    for side in ["client", "server"] {
        assert_rr_ran_on_uring(&r, side);
        assert_busiest_loop(&r, side, "io_uring");
    }
    assert_rr_flows_account(&r, 64);
    // The human report names the loop.
    let out = run_client(
        &[
            "rr",
            "127.0.0.1",
            "-p",
            &port,
            "--flows",
            "4",
            "--threads",
            "2",
            "-t",
            "0.5",
            "--engine",
            "uring",
        ],
        Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("4 flows on 2 event-loop threads (io_uring)"),
        "{text}"
    );
}

/// `rr --rate` on io_uring loops paces each flow on the loop's timer
/// heap, as the epoll loops do (`rr::issue_27_rr_rate_paces_each_event_loop_flow`).
#[test]
fn issue_26_uring_rr_rate_paces_each_flow() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    let args = [
        "rr",
        "--flows",
        "16",
        "--threads",
        "2",
        "--rate",
        "200",
        "-t",
        "2",
    ];
    let Some(r) = uring_client(&port, &args) else {
        return;
    };
    assert_rr_ran_on_uring(&r, "client");
    assert_rr_flows_account(&r, 16);
    let counts = r["rr"]["phases"][0]["per_flow"]["transactions"]
        .as_array()
        .expect("per flow")
        .iter()
        .map(u)
        .collect::<Vec<_>>();
    // Unpaced, a loopback flow makes thousands.
    crate::helpers::assert_paced_at_200_for_2s("uring", &r, &counts);
}

/// A server whose own `--engine` is uring serves rr flows over TCP on its
/// io_uring loops, and over UDP (no completion loop yet) on its epoll
/// loops with the syscall engine; each report names the engine and loop
/// that served (the review found it naming uring for epoll loops, and
/// giving each TCP flow uring's per-socket I/O, after the loop engines
/// were merged).
#[test]
fn issue_26_a_uring_server_serves_tcp_rr_flows_on_io_uring_and_says_which_loop() {
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
        if proto == "tcp" {
            assert_rr_ran_on_uring(&r, "server");
            assert_busiest_loop(&r, "server", "io_uring");
        } else {
            assert_eq!(
                r["test"]["server_engine"], "syscall",
                "{proto}: {}",
                r["test"]
            );
            assert_busiest_loop(&r, "server", "epoll");
        }
        let p = &r["rr"]["phases"][0];
        assert!(p.get("errors").is_none(), "{proto}: {p}");
        let counts = p["per_flow"]["transactions"].as_array().expect("per flow");
        assert!(counts.iter().all(|c| u(c) > 0), "{proto}: {p}");
    }
}
