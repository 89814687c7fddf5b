//! The io_uring and zero-copy engines (issue 8) through the real binary: the same TCP
//! and UDP cases as with the syscall engine, on both sides, with exact
//! counts equal to the syscall engine's; an engine this kernel cannot run
//! is skipped with the reason printed.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::*;

/// Every engine the conformance cases run, the baseline first.
const ENGINES: &[&str] = &["syscall", "uring", "uring:sqpoll", "zerocopy"];

/// Whether `engine` runs here; prints why not.
pub(crate) fn runs_here(engine: &str) -> bool {
    let out = run_client(
        &["tcp", "-n", "64K", "--engine", engine, "--json"],
        Duration::from_secs(30),
    );
    if out.status.success() {
        return true;
    }
    let why = stderr(&out);
    assert!(
        why.contains("cannot run here"),
        "engine {engine} failed other than by a refusal: {why}"
    );
    crate::helpers::skip_part(&format!("engine {engine}"), why.trim());
    false
}

fn udp_faults(engine: &str, port: &str, reverse: bool) -> Value {
    let faults = "skip:10,dup:20,swap:30,skip:40,magic:50,stream:60,length:70,short:80,payload:90,dup:1500,swap:1998";
    let mut args = vec![
        "udp",
        "127.0.0.1",
        "-p",
        port,
        "--json",
        "-k",
        "2000",
        "--pps",
        "20k",
        "-w",
        "16M",
        "--verify",
        "--inject-faults",
        faults,
        "--engine",
        engine,
    ];
    if reverse {
        args.push("-R");
    }
    json_client(&args)
}

/// The counts a user compares across engines.
fn udp_counts(r: &Value) -> Vec<u64> {
    let d = &r["streams"][0]["udp"];
    [
        "issued",
        "sent",
        "lost",
        "received",
        "duplicates",
        "reordered",
        "corrupt",
        "late",
    ]
    .iter()
    .map(|k| u(&d[*k]))
    .collect()
}

#[test]
fn issue_8_udp_faults_count_exactly_the_same_with_every_engine() {
    let mut baseline: Option<Vec<u64>> = None;
    for engine in ENGINES {
        if !runs_here(engine) {
            continue;
        }
        let server = Server::start(&["--engine", engine]);
        let port = server.port_str();
        for reverse in [false, true] {
            let r = udp_faults(engine, &port, reverse);
            assert_eq!(r["test"]["client_engine"], *engine);
            assert_eq!(r["test"]["server_engine"], *engine);
            let d = &r["streams"][0]["udp"];
            if u(&d["socket_drops"]) > 0 {
                // A starved receiver (a loaded host; SQPOLL's kernel threads
                // spinning beside the test's own; zero-copy datagrams that
                // loopback copies into whole pages, so the same buffer holds
                // fewer) overflows its socket: the extra loss is then the
                // kernel's drops (of which some may be injected duplicates
                // or malformed datagrams, which are no loss).
                let (lost, drops) = (u(&d["lost"]), u(&d["socket_drops"]));
                assert!((2..=2 + drops).contains(&lost), "{engine}: {d}");
                assert_eq!(u(&d["received"]) + lost, 2000, "{engine}: {d}");
                eprintln!("{engine}: receiver starved; compared loss with the kernel's drops");
                continue;
            }
            assert_eq!(u(&d["socket_drops"]), 0, "{engine}: {d}");
            let counts = udp_counts(&r);
            let want = baseline.get_or_insert_with(|| counts.clone());
            assert_eq!(&counts, want, "{engine} reverse={reverse}: {d}");
            if *engine != "syscall" {
                let s = &r["streams"][0];
                let tx = &s["sender"]["engine_use"];
                let name = engine.split(':').next().unwrap_or_default();
                assert_eq!(tx["engine"], name, "{s}");
                if name == "uring" {
                    assert_eq!(s["receiver"]["engine_use"]["engine"], "uring", "{s}");
                }
                if let Some(z) = tx.get("zerocopy") {
                    assert_eq!(u(&z["completed"]), u(&z["sends"]), "{z}");
                    // Loopback copies every zero-copy send; the report says so.
                    assert_eq!(u(&z["copied"]), u(&z["completed"]), "{z}");
                }
            }
        }
    }
}

#[test]
fn issue_8_tcp_modes_balance_with_every_engine() {
    for engine in ENGINES {
        if !runs_here(engine) {
            continue;
        }
        let server = Server::start(&["--engine", engine]);
        let port = server.port_str();
        for extra in [
            &["-n", "32M"][..],
            &["-n", "32M", "-R"][..],
            &["-t", "1", "--bidir"][..],
            &["-t", "1", "-P", "2"][..],
        ] {
            let mut args = vec![
                "tcp",
                "127.0.0.1",
                "-p",
                &port,
                "--json",
                "--engine",
                engine,
            ];
            args.extend_from_slice(extra);
            let r = json_client(&args);
            assert_streams_balanced(&r);
        }
    }
}

/// Zero-copy senders under load (unpaced, payloads verified): no datagram
/// arrives corrupted, and every send's completion arrived — a staging slot
/// reused before its completion would put another datagram's bytes under a
/// header, which `--verify` reports as corrupt.
#[test]
fn issue_8_zero_copy_under_load_corrupts_nothing() {
    for engine in ["uring", "zerocopy"] {
        if !runs_here(engine) {
            continue;
        }
        for extra in [&["-l", "1472"][..], &["-l", "8972", "-R"][..]] {
            let mut args = vec![
                "udp", "-b", "0", "-t", "2", "--verify", "--json", "--engine", engine,
            ];
            args.extend_from_slice(extra);
            let r = json_client(&args);
            let s = &r["streams"][0];
            let d = &s["udp"];
            assert!(u(&d["received"]) > 0, "{engine}: {d}");
            assert_eq!(u(&d["corrupt"]), 0, "{engine} {extra:?}: {d}");
            let z = &s["sender"]["engine_use"]["zerocopy"];
            // Every datagram went through a zero-copy send: one each, or a
            // GSO run of up to `gso_segments` per send.
            let per_send = d["sender_batching"]["gso_segments"].as_u64().unwrap_or(1);
            assert!(
                u(&z["sends"]) * per_send >= u(&d["sent"]),
                "{engine}: {z} {d}"
            );
            assert_eq!(u(&z["completed"]), u(&z["sends"]), "{engine}: {z}");
        }
    }
}

/// Zero copy is a sender's feature: a `zerocopy` side receives UDP as
/// `batch` does (`recvmmsg`, GRO where the kernel has it), in both
/// directions. Reading one datagram per call, a `zerocopy` server lost a
/// median 43% of a `zerocopy` client's 64-byte GSO stream to its own
/// socket buffer (round 10's bench).
#[test]
fn issue_8_zerocopy_receives_udp_in_batches() {
    if !runs_here("zerocopy") {
        return;
    }
    let server = Server::start(&["--engine", "zerocopy"]);
    let port = server.port_str();
    let gro = linerate_engine::caps::caps().udp_gro.clone();
    for reverse in [false, true] {
        let mut args = vec![
            "udp",
            "127.0.0.1",
            "-p",
            &port,
            "--json",
            "-t",
            "1",
            "-l",
            "64",
            "--pps",
            "50k",
            "-w",
            "8M",
            "--engine",
            "zerocopy",
        ];
        if reverse {
            args.push("-R");
        }
        let r = json_client(&args);
        assert_eq!(r["test"]["server_engine"], "zerocopy", "{r}");
        let d = &r["streams"][0]["udp"];
        assert!(u(&d["received"]) > 0, "reverse={reverse}: {d}");
        assert_eq!(u(&d["received"]) + u(&d["lost"]), u(&d["issued"]), "{d}");
        let rcv = &d["receiver_batching"];
        assert!(
            rcv.is_object(),
            "reverse={reverse}: one datagram per call: {d}"
        );
        match &gro {
            Ok(()) => assert_eq!(rcv["gro"], true, "reverse={reverse}: {d}"),
            Err(why) => eprintln!("SKIPPED GRO check: {why}"),
        }
    }
}

/// Runs the binary with io_uring denied to it by a seccomp filter (the
/// test hook; the host's `kernel.io_uring_disabled` is left alone, since
/// other tests on the host may be using io_uring at the same time).
fn without_io_uring(args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin())
        .env("LINERATE_TEST_DENY_IO_URING", "1")
        .args(args)
        .output()
        .expect("run linerate")
}

#[test]
fn issue_8_denied_io_uring_is_refused_with_the_reason_and_auto_falls_back() {
    for args in [
        &["udp", "-t", "1", "--engine", "uring"][..],
        &["tcp", "-t", "1", "--engine", "uring:sqpoll"][..],
        &["server", "--engine", "uring"][..],
    ] {
        let out = without_io_uring(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = stderr(&out);
        assert!(err.contains("cannot run here"), "{args:?}: {err}");
        assert!(err.contains("seccomp"), "{args:?}: {err}");
    }
    let out = without_io_uring(&["udp", "-t", "1", "--engine", "auto", "--json"]);
    assert_ok(&out, &["udp --engine auto (io_uring denied)"]);
    let r: Value = serde_json::from_slice(&out.stdout).expect("json");
    // auto's UDP order is batch, uring, syscall: batch where it runs, else
    // syscall with the denied uring skipped.
    let chose = r["test"]["client_engine"].as_str().unwrap_or_default();
    assert!(
        chose == "syscall" || chose.starts_with("batch"),
        "{}",
        r["test"]
    );
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes.iter().any(|n| (n.contains("engine auto chose batch")
            || (n.contains("engine auto chose syscall") && n.contains("skipped uring:")))
            && n.contains("batch > uring > syscall")),
        "{notes:?}"
    );
}

#[test]
fn issue_8_auto_names_its_choice_in_the_report() {
    let r = json_client(&["udp", "-t", "1", "--engine", "auto", "--json"]);
    let engine = r["test"]["client_engine"]
        .as_str()
        .expect("engine")
        .to_string();
    assert_ne!(engine, "auto");
    assert_eq!(r["test"]["server_engine"], engine.as_str());
    let chose = format!("engine auto chose {engine}");
    assert!(
        r["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.contains(&chose))),
        "{}",
        r["notes"]
    );
    // A server's `auto` applies the rule to each test it serves: a UDP
    // test gets what the client's `auto` chose for it, a TCP one syscall.
    let server = Server::start(&["--engine", "auto"]);
    let port = server.port_str();
    let r = json_client(&[
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--engine",
        "syscall",
        "--json",
    ]);
    assert_eq!(r["test"]["client_engine"], "syscall");
    assert_eq!(r["test"]["server_engine"], engine.as_str());
    let r = json_client(&["tcp", "127.0.0.1", "-p", &port, "-t", "1", "--json"]);
    assert_eq!(r["test"]["server_engine"], "syscall");
}

/// `compare` runs the test once per engine against the embedded server and
/// reports each figure with its ratio to the first variant; an engine that
/// cannot run is a row saying why, not a failed comparison.
#[test]
fn issue_8_compare_runs_each_engine_and_gives_ratios_to_the_first() {
    let out = run_client(
        &[
            "compare",
            "udp",
            "-t",
            "1",
            "-b",
            "20M",
            "--engines",
            "syscall,uring,warp",
            "--json",
        ],
        Duration::from_secs(60),
    );
    assert_ok(&out, &["compare udp"]);
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(r["test"], "udp");
    let vs = r["variants"].as_array().expect("variants");
    assert_eq!(vs.len(), 3);
    assert_eq!(vs[0]["name"], "syscall");
    let metric = |v: &Value, name: &str| {
        v["metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .find(|m| m["name"] == name)
            .cloned()
    };
    let base = metric(&vs[0], "receiver_bits_per_second").expect("throughput");
    assert!(f(&base["value"]) > 0.0, "{base}");
    assert_eq!(f(&base["ratio"]), 1.0);
    assert!(metric(&vs[0], "received_datagrams_per_second").is_some());
    assert!(metric(&vs[0], "loss_percent").is_some());
    if vs[1].get("error").is_none() {
        assert_eq!(vs[1]["client_engine"], "uring");
        assert_eq!(vs[1]["server_engine"], "uring");
        let m = metric(&vs[1], "receiver_bits_per_second").expect("throughput");
        let want = f(&m["value"]) / f(&base["value"]);
        assert!((f(&m["ratio"]) - want).abs() < 1e-9, "{m}");
    } else {
        eprintln!("skipped engine uring: {}", vs[1]["error"]);
    }
    assert!(
        vs[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown engine")),
        "{}",
        vs[2]
    );
    // The human table names every variant.
    let out = run_client(
        &[
            "compare",
            "tcp",
            "-n",
            "8M",
            "--engines",
            "syscall,zerocopy",
        ],
        Duration::from_secs(60),
    );
    assert_ok(&out, &["compare tcp"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("syscall") && table.contains("zerocopy"),
        "{table}"
    );
    assert!(table.contains("receiver_bits_per_second"), "{table}");
    // Its own mistakes are usage errors.
    let out = run_client(&["compare", "ping"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
