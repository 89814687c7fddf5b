//! `--engine uring --flows` (issue 26): TCP and UDP stream flows, rr
//! over TCP and UDP, and crr on io_uring completion loops — every
//! flow counted, the flows summing to the total, no loss on loopback,
//! paced rr flows at their rate, crr's connections — named as such in
//! the report (each side's loop recorded in the JSON). Skipped, with the
//! reason, where this kernel cannot run them.

use std::time::Duration;

use serde_json::Value;

use crate::flows::{assert_flows_ran_under_load, assert_udp_flows_account};
use crate::helpers::*;

/// Runs a client test on uring loops on both sides, or `None` (skipped,
/// with the reason) where this kernel refuses them.
fn uring_client(port: &str, args: &[&str]) -> Option<Value> {
    uring_client_against(port, args, true)
}

/// Runs a client test on uring loops, the server's on uring loops too
/// when `server_uring` (else on its own engine's), or `None` (skipped,
/// with the reason) where this kernel refuses them.
fn uring_client_against(port: &str, args: &[&str], server_uring: bool) -> Option<Value> {
    if let Some(why) = io_uring_disabled() {
        skip(why);
        return None;
    }
    let mut all = args.to_vec();
    all.extend_from_slice(&["127.0.0.1", "-p", port, "--json", "--engine", "uring"]);
    if server_uring {
        all.extend_from_slice(&["--server-engine", "uring"]);
    }
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

/// Each side's results recorded the loop it ran, `kinds` (client,
/// server): `io_uring` or `epoll`.
fn assert_loops(r: &Value, kinds: [&str; 2]) {
    for (side, kind) in ["client", "server"].into_iter().zip(kinds) {
        assert_eq!(r["test"][format!("{side}_loop")], kind, "{}", r["test"]);
    }
}

/// Both sides ran io_uring completion loops, and say so.
fn assert_ran_on_uring(r: &Value) {
    for side in ["client_engine", "server_engine"] {
        assert_eq!(r["test"][side], "uring", "{}", r["test"]);
    }
    assert_loops(r, ["io_uring", "io_uring"]);
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
fn issue_26_uring_flows_name_their_loop() {
    if let Some(why) = io_uring_disabled() {
        return skip(why);
    }
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

/// rr over UDP on io_uring loops: every flow completes transactions,
/// against a server serving them on its own io_uring loops
/// (`--server-engine uring`) and on its epoll loops (its own engine);
/// each side's JSON names the loop it ran (refused before: "rr over UDP
/// flows have no completion loop").
#[test]
fn issue_26_uring_udp_rr_flows_complete_transactions_against_uring_and_epoll_servers() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    let args = [
        "rr",
        "--proto",
        "udp",
        "--flows",
        "64",
        "--threads",
        "2",
        "-t",
        "1",
    ];
    for server_uring in [true, false] {
        let Some(r) = uring_client_against(&port, &args, server_uring) else {
            return;
        };
        assert_rr_ran_on_uring(&r, "client");
        assert_busiest_loop(&r, "client", "io_uring");
        if server_uring {
            assert_rr_ran_on_uring(&r, "server");
            assert_busiest_loop(&r, "server", "io_uring");
            assert_loops(&r, ["io_uring", "io_uring"]);
        } else {
            assert_eq!(r["test"]["server_engine"], "syscall", "{}", r["test"]);
            assert_busiest_loop(&r, "server", "epoll");
            assert_loops(&r, ["io_uring", "epoll"]);
        }
        assert_rr_flows_account(&r, 64);
    }
}

/// crr flows on io_uring loops: each flow's connects are made without
/// blocking and waited for on the ring, every flow completes
/// connections, both ends count the same (refused before: "crr flows
/// have no completion loop"). The server answers with its crr pools,
/// which are no event loop: its loop is not recorded.
#[test]
fn issue_26_uring_crr_flows_all_complete_connections_on_io_uring() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    let args = ["crr", "--flows", "32", "--threads", "2", "-t", "1"];
    let Some(r) = uring_client_against(&port, &args, false) else {
        return;
    };
    assert_rr_ran_on_uring(&r, "client");
    assert_busiest_loop(&r, "client", "io_uring");
    assert_eq!(r["test"]["client_loop"], "io_uring", "{}", r["test"]);
    assert!(r["test"].get("server_loop").is_none(), "{}", r["test"]);
    assert_rr_flows_account(&r, 32);
}

/// rr over UDP under load on io_uring loops, both sides: the flows'
/// datagrams on the rings, the load streams TCP beside them, the loaded
/// phase's figures as on epoll (`flows::issue_26_udp_rr_flows_run_under_load`).
/// Refused before (no UDP rr under load).
#[test]
fn issue_26_uring_udp_rr_flows_run_under_load() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    let args = [
        "rr",
        "--proto",
        "udp",
        "--flows",
        "8",
        "--threads",
        "2",
        "--under-load",
        "1",
        "-t",
        "0.5",
    ];
    let Some(r) = uring_client(&port, &args) else {
        return;
    };
    assert_loops(&r, ["io_uring", "io_uring"]);
    assert_flows_ran_under_load(&r, 8, 1, true);
}

/// crr under load on io_uring loops (the client's; the server answers
/// with its crr pools and reads the load beside them), as on epoll
/// (`flows::issue_26_crr_flows_run_under_load`). Refused before.
#[test]
fn issue_26_uring_crr_flows_run_under_load() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    let args = [
        "crr",
        "--flows",
        "8",
        "--threads",
        "2",
        "--under-load",
        "1",
        "-t",
        "0.5",
    ];
    let Some(r) = uring_client_against(&port, &args, false) else {
        return;
    };
    assert_eq!(r["test"]["client_loop"], "io_uring", "{}", r["test"]);
    assert_flows_ran_under_load(&r, 8, 1, false);
}

/// `rr --rate` on io_uring loops paces each flow on the loop's timer
/// heap, TCP and UDP, as the epoll loops do
/// (`rr::issue_27_rr_rate_paces_each_event_loop_flow`).
#[test]
fn issue_26_uring_rr_rate_paces_each_flow() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port_str();
    for proto in ["tcp", "udp"] {
        let mut args = vec!["rr", "--proto", proto];
        args.extend(PACED_RR_FLOWS);
        let Some(r) = uring_client(&port, &args) else {
            return;
        };
        assert_rr_ran_on_uring(&r, "client");
        assert_rr_flows_account(&r, PACED_RR_FLOW_COUNT);
        let counts = r["rr"]["phases"][0]["per_flow"]["transactions"]
            .as_array()
            .expect("per flow")
            .iter()
            .map(u)
            .collect::<Vec<_>>();
        // Unpaced, a loopback flow makes thousands.
        assert_paced_at_200_for_2s(&format!("uring {proto}"), &r, &counts);
    }
}

/// A server whose own `--engine` is uring serves rr flows, over TCP and
/// over UDP, on its io_uring loops; each report names the engine and loop
/// that served (the review found it naming uring for epoll loops, and
/// giving each TCP flow uring's per-socket I/O, after the loop engines
/// were merged; UDP ran on epoll before it had a completion loop).
#[test]
fn issue_26_a_uring_server_serves_rr_flows_on_io_uring_and_says_which_loop() {
    if let Some(why) = io_uring_disabled() {
        return skip(why);
    }
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
        assert_rr_ran_on_uring(&r, "server");
        assert_busiest_loop(&r, "server", "io_uring");
        // The client ran its own engine's epoll loops.
        assert_loops(&r, ["epoll", "io_uring"]);
        let p = &r["rr"]["phases"][0];
        assert!(p.get("errors").is_none(), "{proto}: {p}");
        let counts = p["per_flow"]["transactions"].as_array().expect("per flow");
        assert!(counts.iter().all(|c| u(c) > 0), "{proto}: {p}");
    }
}
