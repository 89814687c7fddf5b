//! iperf3 UDP streams on linerate's batch engine (issue 9): a linerate
//! server given no `--engine` receives a real iperf3 client's datagrams
//! many per `recvmmsg` (GRO super-buffers where the client sends with GSO,
//! iperf3 3.21's `--gsro`), names the engine in its report and still
//! counts every datagram exactly; given `--engine`, it runs that one; and
//! `linerate udp --iperf3` sends to a real iperf3 server in `sendmmsg`
//! batches. Skipped, with the reason printed, where iperf3 is missing.

use serde_json::Value;

use crate::helpers::{f, u};
use crate::iperf3::{iperf3, iperf3_json, iperf3_json_of, json_server_with, RealServer};

/// The iperf3 with `--gsro` (3.21+), where there is one.
fn iperf3_with_gsro() -> Option<String> {
    let newer = std::env::var("LINERATE_IPERF3_NEWER")
        .unwrap_or_else(|_| "/work/anchors/iperf3/bin/iperf3".into());
    if std::path::Path::new(&newer).exists() {
        Some(newer)
    } else {
        eprintln!("SKIP (--gsro): {newer} does not exist (set LINERATE_IPERF3_NEWER)");
        None
    }
}

/// The server's report of the test (`--get-server-output` of a JSON
/// server) and its one UDP stream.
fn server_report(doc: &Value) -> (&Value, &Value) {
    let report = &doc["server_output_json"];
    let stream = &report["streams"][0]["udp"];
    assert!(stream.is_object(), "no UDP stream in {report}");
    (report, stream)
}

/// What the server's report says the iperf3 client was told: packets
/// (iperf3's highest sequence number) and lost.
fn told(report: &Value) -> (u64, u64) {
    let n = notes(report);
    let at = n
        .find("was told packets ")
        .expect("a note on what the client was told");
    let mut nums = n[at..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse::<u64>().expect("number"));
    // "stream 1 (iperf3 id 1): … was told packets P, lost L, …"
    (nums.next().expect("packets"), nums.next().expect("lost"))
}

/// linerate's exact count and iperf3's rules agree on every datagram: on
/// loopback nothing is reordered or duplicated, so the datagrams received
/// are iperf3's packets less its lost ones, exactly; iperf3 does not count
/// datagrams lost after the highest one received, linerate does (against
/// the client's final count).
fn assert_counts_agree(doc: &Value, report: &Value, stream: &Value, what: &str) {
    let sum = &doc["end"]["sum"];
    let (packets, lost) = told(report);
    assert_eq!(lost, u(&sum["lost_packets"]), "{what}: {sum}");
    assert!(packets > 0, "{what}: {sum}");
    assert_eq!(u(&stream["received"]), packets - lost, "{what}: {stream}");
    assert_eq!(
        u(&stream["issued"]),
        u(&doc["end"]["sum_sent"]["packets"]),
        "{what}: {stream}"
    );
    assert_eq!(
        u(&stream["received"]) + u(&stream["lost"]),
        u(&stream["issued"]),
        "{what}: {stream}"
    );
    assert_eq!(u(&stream["corrupt"]), 0, "{what}: {stream}");
}

fn notes(report: &Value) -> String {
    report["notes"].to_string()
}

#[test]
fn issue_9_linerate_server_batches_real_iperf3_udp_streams_and_names_its_engine() {
    let Some(_) = iperf3() else { return };
    let (mut server, port) = json_server_with(&[]);
    let args = ["-u", "-t", "1", "-b", "5M", "-l", "1448"];
    let doc = iperf3_json(port, &[&args[..], &["--get-server-output"]].concat());
    let (report, stream) = server_report(&doc);
    let what = "iperf3 -u -b 5M against a server without --engine";
    let n = notes(report);
    assert!(n.contains("engine auto chose"), "{what}: {n}");
    assert_counts_agree(&doc, report, stream, what);
    // At 5 Mbit/s on loopback nothing is lost.
    assert_eq!(u(&doc["end"]["sum"]["lost_packets"]), 0, "{what}");
    if report["test"]["server_engine"] == "batch" {
        let b = &stream["receiver_batching"];
        assert_eq!(u(&b["messages_per_call"]), 64, "{what}: {b}");
        // GRO is on unless the batch engine said why not.
        assert!(
            b["gro"] == true || b["notes"].to_string().contains("GRO off"),
            "{what}: {b}"
        );
    } else {
        eprintln!("SKIP (batch half): auto did not choose batch here: {n}");
    }

    // iperf3 3.21's --gsro, unpaced: GSO sends reach the server's GRO
    // socket as super-buffers, cut back into datagrams one by one.
    if let Some(newer) = iperf3_with_gsro() {
        let doc = iperf3_json_of(
            &newer,
            port,
            &[
                "-u",
                "-t",
                "1",
                "-b",
                "0",
                "-l",
                "1448",
                "--gsro",
                "--get-server-output",
            ],
        );
        let (report, stream) = server_report(&doc);
        let what = "iperf3 3.21 --gsro -b 0";
        assert_counts_agree(&doc, report, stream, what);
        let b = &stream["receiver_batching"];
        if b["gro"] == true {
            assert!(u(&b["gro_super_buffers"]) > 0, "{what}: {b}");
            assert!(f(&b["datagrams_per_call"]) > 1.0, "{what}: {b}");
        }
        // Unpaced without -w: deep receive buffers (as deep as the
        // kernel grants: rmem_max without root), said in the report.
        let n = notes(report);
        assert!(n.contains("deep buffers"), "{what}: {n}");
        assert!(u(&stream["rcvbuf"]) > 0, "{what}: {stream}");
    }
    let _ = server.kill();
    let _ = server.wait();

    // A server given --engine runs it for iperf3 clients too.
    let (mut server, port) = json_server_with(&["--engine", "syscall"]);
    let doc = iperf3_json(port, &[&args[..], &["--get-server-output"]].concat());
    let (report, stream) = server_report(&doc);
    let what = "iperf3 -u against --engine syscall";
    assert_eq!(report["test"]["server_engine"], "syscall", "{what}");
    assert!(!notes(report).contains("engine auto chose"), "{what}");
    assert!(
        stream.get("receiver_batching").is_none(),
        "{what}: {stream}"
    );
    assert_counts_agree(&doc, report, stream, what);
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn issue_9_linerate_udp_iperf3_sends_batches_to_a_real_iperf3_server() {
    let Some(_) = iperf3() else { return };
    let server = RealServer::start();
    // Bursts of 16 at each pacing tick: one sendmmsg per burst.
    let report = server.linerate_json(
        "udp",
        &[
            "-t", "1", "-b", "5M", "--burst", "16", "-l", "1400", "--engine", "batch",
        ],
    );
    let st = &report["streams"][0]["udp"];
    let b = &st["sender_batching"];
    assert!(b.is_object(), "no sender batching: {st}");
    let per_call = f(&b["datagrams_per_call"]);
    assert!(
        (8.0..=16.0).contains(&per_call),
        "a burst per call: {per_call} in {b}"
    );
    // The real server counted every datagram (loopback, 5 Mbit/s).
    assert_eq!(u(&st["lost"]), 0, "{st}");
    assert!(u(&st["issued"]) > 0, "{st}");
    // Unpaced against a real server: no deep -w asked of it (a real
    // iperf3 server refuses a window above rmem_max), and it runs.
    let report = server.linerate_json("udp", &["-t", "1", "-b", "0", "--engine", "batch"]);
    let st = &report["streams"][0]["udp"];
    assert!(u(&st["received"]) > 0, "{st}");
}
