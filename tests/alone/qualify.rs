//! `linerate qualify`'s RFC 2544 throughput search and RFC 6349 bottleneck
//! through a router whose egress is a tbf at a known rate: the throughput
//! must not pass the tbf's payload rate by more than 2 % nor fall short by
//! more than 8 %, the bottleneck must be within 5 % of the tbf's rate.

use std::time::Duration;

use crate::helpers::*;
use crate::netns::{shaped, ROUTED_SERVER};

/// tbf counts each packet's bytes from the Ethernet header on: a
/// datagram of `len` bytes costs `len + 42` (14 + 20 + 8).
fn payload_share(rate: f64, len: f64) -> f64 {
    rate * len / (len + 42.0)
}

/// How far above the payload rate a tbf allows a throughput may be: the
/// 30 kB queue holds 24 ms at 10 Mbit/s, so a 2 s trial 1.2 % too fast
/// overfills it.
const ABOVE: f64 = 0.02;
/// How far below: a zero-loss search fails a trial for one datagram, and
/// the router here is this host's softirqs, which now and then drop one
/// just below the rate with no stall of the sender or the receiver to see
/// (an idle clean-clone CI run: 8.69 of 9.17 Mbit/s at 466 B, 5.3 % low,
/// no stall reported). A search spoilt by a real fault falls far lower
/// (the loaded failures this test was moved here for: 25 % low).
const BELOW: f64 = 0.08;

/// Whether each RFC 2544 size's throughput in `run` is within [`ABOVE`]
/// and [`BELOW`] of the payload rate a tbf of `rate` allows; the first
/// that is not, said.
fn rfc2544_within(run: &serde_json::Value, rate: f64) -> Result<(), String> {
    let sizes = run["rfc2544"]["sizes"].as_array().ok_or("no sizes")?;
    for s in sizes {
        let len = f(&s["len"]);
        let want = payload_share(rate, len);
        let Some(got) = s["throughput"]["bits_per_second"].as_f64() else {
            return Err(format!("{len} B: no throughput: {}", s["throughput"]));
        };
        eprintln!("{len} B: throughput {got:.0} bit/s of {want:.0}");
        if got > want * (1.0 + ABOVE) || got < want * (1.0 - BELOW) {
            return Err(format!(
                "{len} B: throughput {got:.0} bit/s, the tbf allows {want:.0} bit/s of payload: {}",
                s["throughput"]
            ));
        }
    }
    Ok(())
}

#[test]
fn issue_27_rfc2544_throughput_and_rfc6349_bottleneck_through_a_shaped_router() {
    // A queue of 30 kB holds 24 ms at 10 Mbit/s: a trial of 2 s a rate
    // 1.2 % too high overfills it, so the search cannot pass above the
    // limit by more than that.
    const RATE: f64 = 10e6;
    let _alone = crate::alone();
    let Some((path, server)) = shaped("q1", "10mbit", "30000") else {
        return;
    };
    let port = server.port_str();
    // The search's figure depends on this host's softirqs, which drop a
    // datagram now and then (see BELOW), and on the sender, which a busy
    // host stalls (the run's notes say so): a run whose figure is off is
    // tried again, twice at most, and the test fails only if all three
    // are off. A systematic error (a wrong overhead, a search that stops
    // short) is off in every run. If all three were off and each run
    // reported its own stalls (seen only with four other builds beside
    // this binary, never alone), the host was too busy to check the
    // figure: the runs said so, which is what a user relies on then, and
    // the RFC 2544 part is listed as skipped with the notes. Each miss
    // says what the router's interfaces and qdiscs counted (a drop on the
    // emulated router shows there).
    let mut misses = Vec::new();
    let mut tries = 0;
    let v = loop {
        tries += 1;
        let started = std::time::Instant::now();
        let (out, v) = qualify_in(
            Some(&path.a),
            &[
                ROUTED_SERVER,
                "-p",
                &port,
                "--method",
                "rfc2544,rfc6349",
                "--sizes",
                "466,1472",
                "--trial",
                "2s",
                "--tcp-time",
                "2s",
                "--json",
            ],
            Duration::from_secs(400),
        );
        eprintln!(
            "shaped qualify took {:.0} s",
            started.elapsed().as_secs_f64()
        );
        assert!(
            matches!(out.status.code(), Some(0 | 4 | 6)),
            "{}",
            stderr(&out)
        );
        match rfc2544_within(&v["runs"][0], RATE) {
            Ok(()) => break v,
            Err(why) => {
                let notes = v["runs"][0]["notes"].to_string();
                let stalled = notes.contains("sending host stalled");
                let miss = format!("{why} (notes: {notes})\n{}", path.counters());
                eprintln!("run {tries} off: {miss}");
                misses.push((stalled, miss));
                if tries == 3 {
                    let all: Vec<&str> = misses.iter().map(|(_, m)| m.as_str()).collect();
                    assert!(
                        misses.iter().all(|(stalled, _)| *stalled),
                        "off in all 3 runs:\n{}",
                        all.join("\n\n")
                    );
                    skip_part(
                        "RFC 2544 figure",
                        format!("the tester stalled in all 3 runs: {all:?}"),
                    );
                    break v;
                }
            }
        }
    };
    let run = &v["runs"][0];
    let m = &run["rfc6349"];
    let bb = f(&m["bottleneck_bps"]);
    assert!(
        (bb - RATE).abs() / RATE <= 0.05,
        "bottleneck {bb:.0} bit/s, tbf {RATE}"
    );
    assert!(m["bdp_bytes"].as_u64().is_some_and(|b| b > 0), "{m}");
    for d in m["directions"].as_array().expect("directions") {
        assert!(d["transfer_time_ratio"].as_f64().is_some(), "{d}");
        // The window (at least 64 KiB) overfills the 30 kB queue: the
        // bottleneck drops, TCP retransmits.
        let eff = f(&d["efficiency_percent"]);
        assert!(eff < 100.0, "{}: efficiency {eff}", d["direction"]);
        // §3.3.3's second RTT source: probes beside the transfer, which a
        // default server admits as part of it.
        assert!(
            d["probe_rtt"]["rtt"]["count"]
                .as_u64()
                .is_some_and(|n| n > 0),
            "{}: no probes beside the transfer: {}",
            d["direction"],
            d["probe_note"]
        );
        assert!(
            d["probe_buffer_delay_percent"].as_f64().is_some(),
            "{}",
            d["probe_note"]
        );
    }
}
