//! `linerate qualify`'s RFC 2544 throughput search and RFC 6349 bottleneck
//! through a router whose egress is a tbf at a known rate: the figures must
//! match the tbf's rate within 2 % and 5 %.

use std::time::Duration;

use crate::helpers::*;
use crate::netns::{shaped, ROUTED_SERVER};

/// tbf counts each packet's bytes from the Ethernet header on: a
/// datagram of `len` bytes costs `len + 42` (14 + 20 + 8).
fn payload_share(rate: f64, len: f64) -> f64 {
    rate * len / (len + 42.0)
}

/// Whether each RFC 2544 size's throughput in `run` is within `tol` of
/// the payload rate a tbf of `rate` allows; the first that is not, said.
fn rfc2544_within(run: &serde_json::Value, rate: f64, tol: f64) -> Result<(), String> {
    let sizes = run["rfc2544"]["sizes"].as_array().ok_or("no sizes")?;
    for s in sizes {
        let len = f(&s["len"]);
        let want = payload_share(rate, len);
        let Some(got) = s["throughput"]["bits_per_second"].as_f64() else {
            return Err(format!("{len} B: no throughput: {}", s["throughput"]));
        };
        if (got - want).abs() / want > tol {
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
    // A run whose sender stalled beyond its reruns says so in its notes
    // (its trials inconclusive or rerun, the rates near them maybe low):
    // such a run, and only such a run, is tried again, twice at most. A
    // wrong figure from a run that reports no stall fails at once. A host
    // so busy that all three runs stalled (seen with four other builds
    // beside this binary, never alone) cannot check the figure: the run
    // said so, which is what a user relies on then, and the RFC 2544 part
    // is listed as skipped with the notes.
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
        match rfc2544_within(&v["runs"][0], RATE, 0.02) {
            Ok(()) => break v,
            Err(why) => {
                let notes = v["runs"][0]["notes"].to_string();
                let stalled = notes.contains("sending host stalled");
                assert!(stalled, "{why} (notes: {notes})");
                if tries == 3 {
                    skip_part(
                        "RFC 2544 figure",
                        format!("the tester stalled in all 3 runs ({notes}): {why}"),
                    );
                    break v;
                }
                eprintln!("the tester stalled ({notes}); once more: {why}");
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
