//! `linerate msg` (issue 12): whole acknowledged messages between two local
//! processes over every host-local transport; integrity checks; what a
//! killed process on either side leaves behind.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{assert_ok, bin, eventually, json_client, run_client, stderr, u};

fn cells(r: &Value) -> &Vec<Value> {
    r["cells"].as_array().expect("cells")
}

fn ran(r: &Value) -> Vec<&Value> {
    cells(r).iter().filter(|c| c["skipped"].is_null()).collect()
}

/// Every transport carries every message whole: both ends count the same
/// messages and bytes, no byte is corrupt, every figure is there.
#[test]
fn issue_12_msg_every_transport_both_ends_agree() {
    let r = json_client(&[
        "msg",
        "--transport",
        "tcp,unix,unix-dgram,shm",
        "--sizes",
        "56,4K",
        "--concurrency",
        "1,2",
        "--trials",
        "2",
        "--messages",
        "20",
        "--verify",
        "--json",
    ]);
    assert_eq!(r["test"], "msg");
    assert!(
        r["ends"].as_str().expect("ends").contains("no server"),
        "{r}"
    );
    assert_eq!(r["verify"]["outside_timing"], true);
    let ran = ran(&r);
    let names: Vec<&str> = ran
        .iter()
        .map(|c| c["transport"].as_str().expect("name"))
        .collect();
    for t in ["tcp", "unix", "unix-dgram", "shm-direct", "shm-bulk"] {
        assert!(names.contains(&t), "{t} did not run: {r}");
    }
    // 5 transports × 2 sizes × 2 concurrencies, less shm-direct's 4 KiB.
    assert_eq!(ran.len(), 18, "{r}");
    for c in ran {
        let conc = u(&c["concurrency"]);
        assert_eq!(c["sent"], c["received"], "{c}");
        assert_eq!(u(&c["corrupt"]), 0, "{c}");
        assert_eq!(u(&c["trials"]), 2);
        assert_eq!(u(&c["messages_per_trial"]), 20 * conc, "{c}");
        assert_eq!(u(&c["latency"]["count"]), 2 * 20 * conc, "{c}");
        assert!(c["throughput_bps"]["mean"].as_f64().expect("bps") > 0.0);
        assert!(c["throughput_bps"]["ci95_low"].is_number(), "{c}");
        // calibration 8 + per trial 1 warm-up + 20, per channel.
        assert_eq!(u(&c["sent"]["messages"]), (8 + 2 * 21) * conc, "{c}");
    }
    let skipped: Vec<&Value> = cells(&r)
        .iter()
        .filter(|c| !c["skipped"].is_null())
        .collect();
    assert_eq!(skipped.len(), 2, "{r}");
    assert!(skipped[0]["skipped"]
        .as_str()
        .expect("why")
        .contains("56 B"));
}

/// A corrupt byte (flipped by the test-only hook in every 5th message) is
/// caught and counted on every transport; the report says the check ran
/// outside the timed section.
#[test]
fn issue_12_verify_counts_injected_corruption_per_transport() {
    for (t, json) in [
        ("tcp", true),
        ("unix", true),
        ("unix-dgram", true),
        ("shm-direct", true),
        ("shm-bulk", true),
        ("unix", false),
    ] {
        let mut args = vec![
            "msg",
            "--transport",
            t,
            "--sizes",
            "48",
            "--trials",
            "2",
            "--messages",
            "20",
            "--verify",
        ];
        if json {
            args.push("--json");
        }
        let out = Command::new(bin())
            .args(&args)
            .env("LINERATE_TEST_CORRUPT_EVERY", "5")
            .output()
            .expect("run");
        assert_ok(&out, &args);
        let text = String::from_utf8_lossy(&out.stdout);
        if !json {
            assert!(text.contains("outside the timed section"), "{text}");
            continue;
        }
        let r: Value = serde_json::from_str(&text).expect("json");
        // Messages 0..50 (8 calibration, 2 × (1 + 20)): 10 multiples of 5.
        assert_eq!(u(&ran(&r)[0]["corrupt"]), 10, "{t}: {r}");
    }
}

/// Without the hook, the same run finds nothing corrupt (the check is not
/// merely counting every message).
#[test]
fn issue_12_verify_finds_clean_messages_clean() {
    let r = json_client(&[
        "msg",
        "--transport",
        "shm-bulk",
        "--sizes",
        "1M",
        "--trials",
        "1",
        "--messages",
        "4",
        "--verify",
        "--json",
    ]);
    assert_eq!(u(&ran(&r)[0]["corrupt"]), 0, "{r}");
}

/// Direct mode refuses a message larger than its slot, naming the limit.
#[test]
fn issue_12_direct_refuses_messages_larger_than_its_slot() {
    let args = ["msg", "--transport", "shm-direct", "--sizes", "4K"];
    let out = run_client(&args, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("56 B") && e.contains("--shm-slot"), "{e}");
    // A larger slot carries it.
    let r = json_client(&[
        "msg",
        "--transport",
        "shm-direct",
        "--shm-slot",
        "8K",
        "--sizes",
        "4K",
        "--trials",
        "1",
        "--messages",
        "5",
        "--json",
    ]);
    assert_eq!(ran(&r).len(), 1, "{r}");
}

/// Bulk mode carries 20 MB messages with 8 concurrent transfers; both ends
/// agree on counts and bytes.
#[test]
fn issue_12_bulk_carries_20mb_messages_eight_at_a_time() {
    let r = json_client(&[
        "msg",
        "--transport",
        "shm-bulk",
        "--sizes",
        "20M",
        "--concurrency",
        "8",
        "--trials",
        "1",
        "--messages",
        "1",
        "--json",
    ]);
    let c = ran(&r)[0];
    assert_eq!(c["sent"], c["received"], "{c}");
    // 8 channels × (8 calibration + 1 warm-up + 1) messages of 20 MiB.
    assert_eq!(u(&c["received"]["bytes"]), 8 * 10 * 20 * 1024 * 1024, "{c}");
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Gone, or a zombie waiting for a reaper: not running any more.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

fn long_run(transport: &str) -> std::process::Child {
    Command::new(bin())
        .args([
            "msg",
            "--transport",
            transport,
            "--sizes",
            "56",
            "--trials",
            "1000",
            "--messages",
            "1000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn msg")
}

fn peer_of(parent: &mut std::process::Child) -> u32 {
    let pid = parent.id();
    let mut peer = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            peer = children(pid).first().copied();
            peer.is_some()
        }),
        "no receiving process appeared"
    );
    std::thread::sleep(Duration::from_millis(300));
    peer.expect("peer")
}

/// Killing the receiving process ends the client with a clear error; the
/// segment has no name, so nothing remains in /dev/shm.
#[test]
fn issue_12_killed_receiver_ends_the_client_with_a_clear_error() {
    for t in ["shm-direct", "unix"] {
        let mut parent = long_run(t);
        let peer = peer_of(&mut parent);
        let _ = Command::new("kill")
            .args(["-9", &peer.to_string()])
            .status();
        let start = Instant::now();
        let out = loop {
            if let Some(_s) = parent.try_wait().expect("wait") {
                break parent.wait_with_output().expect("output");
            }
            if start.elapsed() > Duration::from_secs(15) {
                let _ = parent.kill();
                panic!("{t}: the client outlived its receiver by 15 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(out.status.code(), Some(1), "{t}");
        let e = stderr(&out);
        assert!(
            e.contains("peer process is gone") || e.contains("receiving process"),
            "{t}: {e}"
        );
        let left: Vec<_> = std::fs::read_dir("/dev/shm")
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            !left
                .iter()
                .any(|n| n.to_string_lossy().contains("linerate")),
            "{left:?}"
        );
    }
}

/// Killing the client ends the receiving process within seconds (it sees
/// the control socket hang up).
#[test]
fn issue_12_killed_client_ends_the_receiver() {
    for t in ["shm-bulk", "tcp"] {
        let mut parent = long_run(t);
        let peer = peer_of(&mut parent);
        let _ = parent.kill();
        let _ = parent.wait();
        assert!(
            eventually(Duration::from_secs(10), || exited(peer)),
            "{t}: receiving process {peer} still running 10 s after its client died"
        );
    }
}

/// `rr --transport unix|unix-dgram|shm`: the same request/response report
/// as every rr test, both processes counting the same transactions, with
/// no server.
#[test]
fn issue_12_rr_over_local_transports() {
    for (t, engine) in [
        ("unix", "unix"),
        ("unix-dgram", "unix-dgram"),
        ("shm", "shm-direct"),
    ] {
        let r = json_client(&[
            "rr",
            "--transport",
            t,
            "--sizes",
            "56,1K",
            "-n",
            "200",
            "-P",
            "2",
            "--json",
        ]);
        assert_eq!(r["test"]["client_engine"], engine, "{r}");
        assert_eq!(r["test"]["protocol"], engine, "{r}");
        let phases = r["rr"]["phases"].as_array().expect("phases");
        assert_eq!(phases.len(), 2, "{t}: {r}");
        for p in phases {
            assert_eq!(u(&p["transactions"]), 400, "{t}: {p}");
            assert_eq!(p["transactions"], p["server_transactions"], "{t}: {p}");
            assert_eq!(u(&p["latency"]["count"]), 400, "{t}: {p}");
            assert_eq!(
                p["client_sent_bytes"], p["server_received_bytes"],
                "{t}: {p}"
            );
        }
        assert!(r["cpu"]["server"]["percent_of_cpu"].is_number(), "{r}");
        let notes = r["notes"].to_string();
        assert!(notes.contains("no server"), "{t}: {notes}");
    }
}

/// How the local ends waited is in the report: shared memory spins by
/// default and counts its futex sleeps per flow and phase, on both sides;
/// `--busy-poll` makes Unix sockets spin too (it was silently ignored on
/// them); `--cpus` pins the client's and the serving process's threads.
#[test]
fn issue_12_local_rr_reports_how_its_ends_waited() {
    for (t, busy) in [("shm", false), ("shm", true), ("unix", true)] {
        let mut args = vec!["rr", "--transport", t, "-s", "56", "-n", "2000", "--json"];
        if busy {
            args.push("--busy-poll");
        }
        // Both threads on CPU 0: spinning yields there (a CPU shared).
        args.extend(["--cpus", "0"]);
        let r = json_client(&args);
        let rr = &r["rr"];
        for side in ["spin_client", "spin_server"] {
            assert_eq!(rr[side], "shared", "{t} busy={busy}: {side}: {rr}");
        }
        let p = &rr["phases"][0];
        assert_eq!(u(&p["transactions"]), 2000, "{p}");
        for side in ["client_poll_sleeps", "server_poll_sleeps"] {
            let v = p[side].as_array().expect(side);
            assert_eq!(v.len(), 1, "{t} busy={busy}: {side}: {p}");
            // A side receives once per transaction, plus a chunk's word
            // now and then (far fewer than the transactions).
            assert!(u(&v[0]) <= 4000, "{t}: a sleep per wait at most: {p}");
        }
        let notes = r["notes"].to_string();
        let how = if t == "shm" { "futex" } else { "poll(2)" };
        assert!(notes.contains(how), "{t} busy={busy}: {notes}");
        assert!(
            notes.contains("--cpus: client flow threads on CPU 0"),
            "{notes}"
        );
    }
    let r = json_client(&[
        "rr",
        "--transport",
        "unix",
        "-s",
        "56",
        "-n",
        "200",
        "--json",
    ]);
    assert!(
        r["rr"]["spin_client"].is_null(),
        "unix blocks by default: {r}"
    );
}

/// `rr --transport unix --json-lines`: a start record, an `rr_phase`
/// record per phase as it ends (in order, counting both flows) and the
/// summary, as network rr prints them.
#[test]
fn issue_12_local_rr_json_lines_has_a_record_per_phase() {
    for t in ["unix", "shm"] {
        let args = [
            "rr",
            "--transport",
            t,
            "--sizes",
            "56,1K,4K",
            "-n",
            "100",
            "-P",
            "2",
            "--json-lines",
        ];
        let out = run_client(&args, Duration::from_secs(30));
        assert_ok(&out, &args);
        let recs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
            .collect();
        let types: Vec<&str> = recs
            .iter()
            .map(|r| r["type"].as_str().expect("type"))
            .collect();
        assert_eq!(
            types,
            ["start", "rr_phase", "rr_phase", "rr_phase", "summary"],
            "{t}"
        );
        for (i, (r, size)) in recs[1..4].iter().zip([56, 1024, 4096]).enumerate() {
            assert_eq!(u(&r["phase"]), i as u64, "{t}: {r}");
            assert_eq!(u(&r["request_size"]), size, "{t}: {r}");
            assert_eq!(u(&r["transactions"]), 200, "{t}: {r}");
            assert_eq!(u(&r["latency"]["count"]), 200, "{t}: {r}");
            let summary = &recs[4]["rr"]["phases"][i];
            // Every size gives the same reason: no timestamps locally.
            for w in [&r["client_to_server"], &summary["server_to_client"]] {
                let why = w["unavailable"].as_str().expect("a reason");
                assert!(why.contains("local transports"), "{t}: {why}");
            }
            assert_eq!(r["transactions"], summary["transactions"], "{t}");
            assert_eq!(r["latency"]["p50_ns"], summary["latency"]["p50_ns"], "{t}");
        }
    }
}

/// A local transport with a HOST, crr, or shm-bulk is refused up front.
#[test]
fn issue_12_rr_local_transport_refusals() {
    for (args, want) in [
        (&["rr", "127.0.0.1", "--transport", "unix"][..], "drop HOST"),
        (&["crr", "--transport", "unix"][..], "no local form"),
        (&["rr", "--transport", "shm-bulk"][..], "one way"),
        (&["rr", "--transport", "pigeon"][..], "unknown transport"),
    ] {
        let out = run_client(args, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

/// `--plot` writes the throughput and latency figure; `--csv` has a row
/// per cell; `--spin` (shared memory spinning before it sleeps) runs.
#[test]
fn issue_12_msg_plot_csv_and_spin() {
    let dir = std::env::temp_dir().join(format!("linerate-msg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let svg = dir.join("msg.svg");
    let svg_s = svg.to_string_lossy().into_owned();
    let args = [
        "msg",
        "--transport",
        "unix,shm-bulk",
        "--sizes",
        "56,4K",
        "--concurrency",
        "1,2",
        "--trials",
        "2",
        "--messages",
        "10",
        "--spin",
        "5us",
        "--csv",
        "--plot",
        &svg_s,
    ];
    let out = run_client(&args, Duration::from_secs(60));
    assert_ok(&out, &args);
    let csv = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 1 + 8, "{csv}");
    assert!(rows[0].starts_with("transport,concurrency,size,"), "{csv}");
    let plot = std::fs::read_to_string(&svg).expect("plot written");
    assert!(plot.contains("<svg") && plot.contains("Throughput vs message size"));
    assert!(
        plot.contains("shm-bulk ×2"),
        "one line per transport and concurrency"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every report written whole goes through one exporter (issue 24 §6):
/// `msg --json-lines` is one compact JSON line, the same document as
/// `--json` (it used to print the pretty document over many lines).
#[test]
fn issue_24_msg_json_lines_is_one_line_of_the_json_document() {
    let base = [
        "msg",
        "--transport",
        "unix",
        "--sizes",
        "56",
        "--trials",
        "2",
        "--messages",
        "20",
    ];
    let run = |format: &str| {
        let args: Vec<&str> = base.iter().copied().chain([format]).collect();
        let out = run_client(&args, Duration::from_secs(60));
        assert_ok(&out, &args);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let lines = run("--json-lines");
    assert_eq!(lines.lines().count(), 1, "{lines}");
    let line: serde_json::Value = serde_json::from_str(&lines).expect("one JSON document");
    let doc: serde_json::Value = serde_json::from_str(&run("--json")).expect("json");
    let keys = |v: &serde_json::Value| {
        v.as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&line), keys(&doc), "same document in both formats");
}

/// Ctrl-C (SIGINT to the client) ends a msg run as interrupted (exit 130)
/// within seconds, and its receiving process with it.
#[test]
fn issue_12_msg_interrupted_exits_130_and_ends_the_receiver() {
    for t in ["shm-direct", "unix"] {
        let mut parent = long_run(t);
        let peer = peer_of(&mut parent);
        let _ = Command::new("kill")
            .args(["-INT", &parent.id().to_string()])
            .status();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = parent.try_wait().expect("wait") {
                break s;
            }
            if start.elapsed() > Duration::from_secs(15) {
                let _ = parent.kill();
                panic!("{t}: still running 15 s after Ctrl-C");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(130), "{t}");
        assert!(
            eventually(Duration::from_secs(10), || exited(peer)),
            "{t}: receiving process {peer} outlived the interrupted client"
        );
    }
}

/// `msg HOST`: the message test through a running `linerate server` (kind
/// `msg` of the control protocol): every size and concurrency, every
/// message whole, sender and receiver agreeing on counts and bytes, the
/// receiver's --verify clean.
#[test]
fn issue_12_msg_to_a_server() {
    let server = crate::helpers::Server::start(&[]);
    let port = server.port_str();
    let r = json_client(&[
        "msg",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "56,64K",
        "--concurrency",
        "1,2",
        "--trials",
        "3",
        "--messages",
        "50",
        "--verify",
        "--json",
    ]);
    assert!(
        r["ends"]
            .as_str()
            .expect("ends")
            .contains("linerate server"),
        "{r}"
    );
    let cells = ran(&r);
    assert_eq!(cells.len(), 4, "{r}");
    for c in cells {
        assert_eq!(c["transport"], "tcp", "{c}");
        assert_eq!(u(&c["trials"]), 3, "{c}");
        assert_eq!(
            u(&c["messages_per_trial"]),
            50 * u(&c["concurrency"]),
            "{c}"
        );
        assert_eq!(c["sent"], c["received"], "{c}");
        // 8 calibration messages, then per trial a warm-up and 50 timed.
        let per_conn = 8 + 3 * (1 + 50);
        assert_eq!(
            u(&c["received"]["messages"]),
            per_conn * u(&c["concurrency"]),
            "{c}"
        );
        assert_eq!(u(&c["corrupt"]), 0, "{c}");
        assert!(
            c["cpu"]["receiver_ns_per_message"].as_f64().expect("cpu") > 0.0,
            "{c}"
        );
    }
}

/// Issue 24: msg's server side moves messages with its own system calls,
/// so a server whose `--engine` carries only TCP streams (sendfile) serves
/// `msg HOST` rather than refusing it for an engine the test never uses.
/// Before, admission asked that engine and refused.
#[test]
fn issue_24_a_server_whose_engine_cannot_carry_messages_serves_msg() {
    let server = crate::helpers::Server::start(&["--engine", "zerocopy:sendfile"]);
    let port = server.port_str();
    let r = json_client(&[
        "msg",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "4K",
        "--trials",
        "2",
        "--messages",
        "20",
        "--json",
    ]);
    let cells = ran(&r);
    assert_eq!(cells.len(), 1, "{r}");
    assert_eq!(cells[0]["sent"], cells[0]["received"], "{r}");
    assert!(
        !server.log().contains("refused"),
        "server log: {}",
        server.log()
    );
}

/// `msg HOST --verify`: corruption injected by the sender (test-only hook)
/// is caught and counted by the server's receiver.
#[test]
fn issue_12_msg_to_a_server_counts_injected_corruption() {
    let server = crate::helpers::Server::start(&[]);
    let port = server.port_str();
    let out = Command::new(bin())
        .args([
            "msg",
            "127.0.0.1",
            "-p",
            &port,
            "--sizes",
            "1K",
            "--trials",
            "2",
            "--messages",
            "40",
            "--verify",
            "--json",
        ])
        .env("LINERATE_TEST_CORRUPT_EVERY", "10")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).expect("json");
    let c = ran(&r)[0];
    // Messages 0, 10, 20, … of 8 + 2 × 41 = 90.
    assert_eq!(u(&c["corrupt"]), 9, "{c}");
    assert_eq!(c["sent"], c["received"], "{c}");
}

/// Parameters a server cannot take are refused with the reason (exit 3),
/// a local transport with HOST is a usage error, and the server keeps
/// serving.
#[test]
fn issue_12_msg_to_a_server_refusals() {
    let mut server = crate::helpers::Server::start(&["--max-test-memory", "64M"]);
    let port = server.port_str();
    for (extra, code, want) in [
        (
            &["--sizes", "20M", "--concurrency", "8"][..],
            3,
            "--max-test-memory",
        ),
        (&["--sizes", "100M"][..], 3, "sizes must be 1 to"),
        (
            &["--transport", "shm"][..],
            2,
            "the local transports run without HOST",
        ),
    ] {
        let mut args = vec!["msg", "127.0.0.1", "-p", &port, "--trials", "1"];
        args.extend_from_slice(extra);
        let out = run_client(&args, Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    let r = json_client(&[
        "msg",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "4K",
        "--trials",
        "1",
        "--messages",
        "10",
        "--json",
    ]);
    assert_eq!(ran(&r).len(), 1, "{r}");
    assert!(server.alive());
}

/// `msg HOST` interrupted (Ctrl-C) mid-run: exit 130, nothing reported, and
/// the server serves the next test.
#[test]
fn issue_12_msg_to_a_server_interrupted() {
    let mut server = crate::helpers::Server::start(&[]);
    let port = server.port_str();
    let mut client = Command::new(bin())
        .args([
            "msg",
            "127.0.0.1",
            "-p",
            &port,
            "--sizes",
            "4M",
            "--concurrency",
            "2",
            "--trials",
            "1000",
            "--messages",
            "1000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = Command::new("kill")
        .args(["-INT", &client.id().to_string()])
        .status();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = client.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(15) {
            let _ = client.kill();
            panic!("still running 15 s after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    let r = json_client(&[
        "msg",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "4K",
        "--trials",
        "1",
        "--messages",
        "10",
        "--json",
    ]);
    assert_eq!(ran(&r).len(), 1, "{r}");
    assert!(server.alive());
}

/// `linerate msg … --json | head -0` (issue 28): a reader that went away
/// before the report is a quiet exit with status 0, as for the native
/// client, on both the local and the server path and in every machine
/// format (a JSON writer's broken pipe used to print "Broken pipe" and exit
/// 1).
#[test]
fn issue_28_msg_closed_stdout_is_a_quiet_exit() {
    use std::io::Read;
    let server = crate::helpers::Server::start(&[]);
    let p = server.port_str();
    let small = ["--sizes", "56", "--trials", "2", "--messages", "50"];
    let local = ["msg", "--transport", "unix"];
    let net = ["msg", "127.0.0.1", "--port", &p];
    for (ends, format) in [
        (&local[..], "--json"),
        (&local[..], "--json-lines"),
        (&local[..], "--csv"),
        (&net[..], "--json"),
    ] {
        let args: Vec<&str> = ends
            .iter()
            .chain(&small)
            .chain([&format])
            .copied()
            .collect();
        let mut child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // `head -0`: the reader is gone before the first byte.
        drop(child.stdout.take());
        let done = eventually(Duration::from_secs(30), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if !done {
            let _ = child.kill();
        }
        let status = child.wait().expect("wait");
        let mut err = String::new();
        let _ = child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err);
        assert!(done, "{args:?}: still running 30 s after its reader left");
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}: a closed stdout is a quiet exit");
    }
}
