//! `linerate iperf3 …` (issue 9): iperf3's command line, and its `-J`
//! document in iperf3's schema. The structure is checked against real
//! iperf3 `-J` documents: stored ones from iperf3 3.21 (always), and the
//! installed iperf3's for the same test (skipped, with the reason printed,
//! where iperf3 is not installed).

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{f, run_client, stderr, u, Server};
use crate::iperf3::{iperf3, iperf3_json, RealServer};

/// Paths (`end.streams[0].sender.max_rtt`) of every key in `real` that
/// `ours` lacks, at every level; arrays are compared element by element
/// (the last of ours standing in for extra elements of real's).
fn missing_keys(real: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    match (real, ours) {
        (Value::Object(r), Value::Object(o)) => {
            for (k, v) in r {
                let p = format!("{path}.{k}");
                match o.get(k) {
                    Some(ov) => missing_keys(v, ov, &p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(r), Value::Array(o)) => {
            for (i, v) in r.iter().enumerate() {
                if !(v.is_object() || v.is_array()) {
                    continue;
                }
                match o.get(i).or(o.last()) {
                    Some(ov) => missing_keys(v, ov, &format!("{path}[{i}]"), out),
                    None => out.push(format!("{path}[{i}] (ours is empty)")),
                }
            }
        }
        (Value::Object(_) | Value::Array(_), _) => out.push(format!("{path} (not the same type)")),
        _ => {}
    }
}

fn assert_same_keys(real: &Value, ours: &Value, what: &str) {
    let mut missing = Vec::new();
    missing_keys(real, ours, "", &mut missing);
    assert!(
        missing.is_empty(),
        "{what}: linerate's -J lacks iperf3's keys {missing:?}\nours: {ours}"
    );
}

/// `linerate iperf3 -c 127.0.0.1 -p PORT ARGS -J`, parsed.
fn dropin_json(port: &str, args: &[&str]) -> Value {
    let mut all = vec!["iperf3", "-c", "127.0.0.1", "-p", port];
    all.extend_from_slice(args);
    all.push("-J");
    let out = run_client(&all, Duration::from_secs(30));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{all:?}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    assert!(
        out.status.success() && doc.get("error").is_none(),
        "{all:?}: {}",
        stderr(&out)
    );
    doc
}

/// What scripts that parse iperf3's JSON read, present and sensible.
fn assert_script_fields(doc: &Value, udp: bool, what: &str) {
    let end = &doc["end"];
    let received = &end["sum_received"];
    assert!(u(&received["bytes"]) > 0, "{what}: {end}");
    assert!(f(&received["bits_per_second"]) > 0.0, "{what}: {end}");
    assert!(
        u(&end["sum_sent"]["bytes"]) >= u(&received["bytes"]),
        "{what}"
    );
    let cpu = &end["cpu_utilization_percent"];
    assert!(f(&cpu["host_total"]) > 0.0, "{what}: {cpu}");
    assert!(f(&cpu["remote_total"]) > 0.0, "{what}: {cpu}");
    assert!(
        doc["intervals"].as_array().is_some_and(|a| !a.is_empty()),
        "{what}"
    );
    if udp {
        let sum = &end["sum"];
        assert_eq!(u(&sum["lost_packets"]), 0, "{what}: {sum}");
        assert!(u(&sum["packets"]) > 0, "{what}: {sum}");
        assert!(sum["jitter_ms"].is_number() && sum["lost_percent"].is_number());
    } else {
        assert!(
            end["streams"][0]["sender"]["retransmits"].is_number(),
            "{what}"
        );
    }
}

/// Always (no iperf3 needed): linerate's -J against a linerate server has
/// every key of real iperf3 3.21 documents for the same kind of test.
#[test]
fn issue_9_dropin_json_has_every_key_of_a_stored_iperf3_document() {
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let tcp: Value = serde_json::from_str(include_str!("fixtures/iperf3-3.21-tcp.json"))
        .expect("stored iperf3 -J (TCP)");
    let ours = dropin_json(&port, &["-t", "2"]);
    assert_same_keys(&tcp, &ours, "tcp -t 2");
    assert_script_fields(&ours, false, "tcp -t 2");
    let udp: Value = serde_json::from_str(include_str!("fixtures/iperf3-3.21-udp-bidir.json"))
        .expect("stored iperf3 -J (UDP bidir)");
    let ours = dropin_json(&port, &["-u", "--bidir", "-b", "2M", "-t", "1"]);
    assert_same_keys(&udp, &ours, "udp --bidir");
    assert_eq!(ours["start"]["test_start"]["bidir"], 1);
    assert!(ours["end"]["sum_received_bidir_reverse"]["bytes"].is_u64());
}

/// With iperf3 installed: the same test run by the real iperf3 client and
/// by `linerate iperf3`, against the same linerate server: every key
/// iperf3 writes, linerate writes.
#[test]
fn issue_9_dropin_json_matches_the_installed_iperf3_key_for_key() {
    let Some(_) = iperf3() else { return };
    let server = Server::start(&[]);
    let port = server.port.to_string();
    for (args, udp) in [
        (&["-t", "1"][..], false),
        (&["-t", "1", "-R", "-P", "2"], false),
        (&["-t", "1", "--bidir"], false),
        (&["-u", "-t", "1", "-b", "2M", "-l", "1400"], true),
        (&["-u", "-t", "1", "-b", "2M", "-R"], true),
    ] {
        let real = iperf3_json(server.port, args);
        let ours = dropin_json(&port, args);
        assert_same_keys(&real, &ours, &format!("{args:?}"));
        if !args.contains(&"-R") {
            assert_script_fields(&ours, udp, &format!("{args:?}"));
        }
    }
}

/// Against a real iperf3 server, with iperf3's human layout.
#[test]
fn issue_9_dropin_client_against_a_real_iperf3_server() {
    let Some(_) = iperf3() else { return };
    let server = RealServer::start();
    let mut doc = None;
    for _ in 0..50 {
        let out = run_client(
            &[
                "iperf3",
                "-c",
                "127.0.0.1",
                "-p",
                &server.port,
                "-t",
                "1",
                "-J",
            ],
            Duration::from_secs(30),
        );
        if out.status.success() {
            doc = Some(serde_json::from_slice::<Value>(&out.stdout).expect("JSON"));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let doc = doc.expect("linerate iperf3 -J against iperf3 -s");
    assert_script_fields(&doc, false, "against iperf3 -s");
    let out = run_client(
        &[
            "iperf3",
            "-c",
            "127.0.0.1",
            "-p",
            &server.port,
            "-u",
            "-b",
            "1M",
            "-t",
            "1",
        ],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    for want in [
        "Connecting to host 127.0.0.1",
        "Lost/Total Datagrams",
        "receiver",
        "iperf Done.",
    ] {
        assert!(text.contains(want), "{want:?} missing: {text}");
    }
}

#[test]
fn issue_9_dropin_refuses_unsupported_iperf3_options_by_name() {
    let out = run_client(
        &["iperf3", "-c", "127.0.0.1", "--dscp", "46"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--dscp"), "{}", stderr(&out));
    // A failed -J test still prints an iperf3 document, with its error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
        .to_string();
    let out = run_client(
        &["iperf3", "-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"],
        Duration::from_secs(20),
    );
    assert_ne!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("an error document");
    assert!(
        doc["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{doc}"
    );
}

/// Linked under the name `iperf3`, the binary is `linerate iperf3`; and
/// `--json-stream` writes iperf3's events, one JSON object a line.
#[test]
fn issue_9_binary_named_iperf3_is_the_dropin_and_json_stream_works() {
    let dir = std::env::temp_dir().join(format!("linerate-as-iperf3-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let link = dir.join("iperf3");
    let _ = std::fs::remove_file(&link);
    let bin = std::fs::canonicalize(crate::helpers::bin()).expect("binary path");
    std::os::unix::fs::symlink(&bin, &link).expect("symlink");
    let out = std::process::Command::new(&link)
        .arg("-v")
        .output()
        .expect("run as iperf3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("linerate"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);

    let server = Server::start(&[]);
    let port = server.port.to_string();
    let out = run_client(
        &[
            "iperf3",
            "-c",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "--json-stream",
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event a line"))
        .collect();
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert!(names.contains(&"interval"), "{names:?}");
    let end = &events[events.len() - 1]["data"];
    assert!(u(&end["sum_received"]["bytes"]) > 0, "{end}");
}

/// iperf3 3.21's `--skip-rx-copy` is taken, not refused: the receiving
/// server consumes the data with MSG_TRUNC, and its record says so.
#[test]
fn issue_9_dropin_skip_rx_copy_reaches_the_receiving_server() {
    let dir = std::env::temp_dir().join(format!("linerate-dropin-src-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let jl = dir.join("results.jsonl");
    let _ = std::fs::remove_file(&jl);
    let server = Server::start(&["--json-lines-file", jl.to_str().expect("utf-8 path")]);
    let doc = dropin_json(&server.port_str(), &["-t", "1", "--skip-rx-copy"]);
    assert_script_fields(&doc, false, "--skip-rx-copy");
    let mut record = Value::Null;
    let one = crate::helpers::eventually(Duration::from_secs(5), || {
        let text = std::fs::read_to_string(&jl).unwrap_or_default();
        match text
            .lines()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            Some(r) => {
                record = r;
                true
            }
            None => false,
        }
    });
    assert!(one, "no record in {}", jl.display());
    assert_eq!(record["test"]["tcp"]["skip_rx_copy"], true, "{record}");
    assert!(f(&doc["end"]["sum_received"]["bytes"]) > 0.0, "{doc}");
    // UDP has no such receive: refused locally, by name.
    let out = run_client(
        &["iperf3", "-c", "127.0.0.1", "-u", "--skip-rx-copy"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--skip-rx-copy"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
