//! Throughput options of issue 8 through the real binary: `--skip-rx-copy`
//! (receivers consume with `MSG_TRUNC`) and `--busy-poll` on tcp and udp
//! stream tests. Counts stay exact; each side's report says what it did.

use serde_json::Value;

use crate::helpers::{assert_streams_balanced, json_client, u, Server};
use crate::uring_engines::runs_here;

/// Bytes per sending direction: not a multiple of any write size, so the
/// last write is a short one.
const BYTES: u64 = 3_000_001;

fn tcp_bytes(port: &str, engine: &str, extra: &[&str]) -> Value {
    let n = BYTES.to_string();
    let mut args = vec![
        "tcp",
        "127.0.0.1",
        "-p",
        port,
        "--json",
        "-n",
        &n,
        "--engine",
        engine,
    ];
    args.extend_from_slice(extra);
    let r = json_client(&args);
    assert_streams_balanced(&r);
    for s in r["streams"].as_array().expect("streams") {
        assert_eq!(u(&s["sender"]["bytes"]), BYTES, "{engine} {extra:?}: {s}");
        assert_eq!(u(&s["receiver"]["bytes"]), BYTES, "{engine} {extra:?}: {s}");
    }
    r
}

#[test]
fn issue_8_skip_rx_copy_balances_bytes_on_every_receiving_side_and_engine() {
    for engine in ["syscall", "batch", "uring", "zerocopy"] {
        if !runs_here(engine) {
            continue;
        }
        // The server runs the client's engine; the option travels in the spec.
        let server = Server::start(&["--engine", engine]);
        let port = server.port_str();
        for dir in [&[][..], &["-R"][..], &["--bidir"][..]] {
            let mut extra = vec!["--skip-rx-copy", "-l", "1M"];
            extra.extend_from_slice(dir);
            let r = tcp_bytes(&port, engine, &extra);
            assert_eq!(r["test"]["tcp"]["skip_rx_copy"], true, "{r}");
        }
        // Without the flag the field is absent (receivers copy).
        let r = tcp_bytes(&port, engine, &[]);
        assert!(r["test"]["tcp"].get("skip_rx_copy").is_none(), "{r}");
    }
}

/// Both ends of every stream report what the kernel said to SO_BUSY_POLL.
fn assert_busy_polled(r: &Value) {
    assert_eq!(r["test"]["busy_poll"], true, "{r}");
    for s in r["streams"].as_array().expect("streams") {
        for end in ["sender", "receiver"] {
            let said = s[end]["busy_poll"].as_str().unwrap_or_default();
            assert!(said.contains("SO_BUSY_POLL"), "{end}: {s}");
            assert!(s[end]["poll_sleeps"].is_u64(), "{end}: {s}");
        }
    }
}

#[test]
fn issue_8_busy_poll_keeps_tcp_bytes_exact_both_ways() {
    // Every engine spins (each passes MSG_DONTWAIT per call).
    for engine in ["syscall", "batch", "uring", "uring:sqpoll", "zerocopy"] {
        if engine.starts_with("uring") && !runs_here(engine) {
            continue;
        }
        let server = Server::start(&["--engine", engine]);
        let port = server.port_str();
        for dir in [&[][..], &["-R"][..]] {
            let mut extra = vec!["--busy-poll"];
            extra.extend_from_slice(dir);
            assert_busy_polled(&tcp_bytes(&port, engine, &extra));
        }
    }
}

#[test]
fn issue_8_busy_poll_keeps_udp_loss_exact() {
    for engine in ["syscall", "batch", "uring"] {
        if engine == "uring" && !runs_here(engine) {
            continue;
        }
        udp_busy_poll(engine);
    }
}

fn udp_busy_poll(engine: &str) {
    let server = Server::start(&["--engine", engine]);
    let port = server.port_str();
    // One skipped number (a loss) and one duplicate, injected: counted exactly.
    for dir in [&[][..], &["-R"][..]] {
        for pace in [&["--pps", "20k"][..], &["-b", "0"][..]] {
            let mut args = vec![
                "udp",
                "127.0.0.1",
                "-p",
                &port,
                "--json",
                "-k",
                "2000",
                "-l",
                "1472",
                "-w",
                "8M",
                "--verify",
                "--busy-poll",
                "--engine",
                engine,
                "--inject-faults",
                "skip:10,dup:20",
            ];
            args.extend_from_slice(pace);
            args.extend_from_slice(dir);
            let r = json_client(&args);
            assert_busy_polled(&r);
            let d = &r["streams"][0]["udp"];
            assert_eq!(u(&d["issued"]), 2000, "{args:?}: {d}");
            assert_eq!(u(&d["sent"]), 2000, "one skipped, one duplicated: {d}");
            assert_eq!(u(&d["lost"]), 1, "{args:?}: {d}");
            assert_eq!(u(&d["duplicates"]), 1, "{args:?}: {d}");
            assert_eq!(u(&d["received"]), 1999, "{args:?}: {d}");
        }
    }
}
