//! CPU per interval and the busiest thread (issue 8), and `linerate
//! compare`'s variants and outputs (issues 8 and 11), end to end.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::*;

/// Every interval record of `key` carries the side's CPU, with figures a
/// core can have: the busiest thread at most one core and at most the
/// side's total.
fn assert_interval_cpu(r: &Value, key: &str) -> Vec<Value> {
    let intervals = r[key].as_array().expect("intervals");
    assert!(!intervals.is_empty(), "{key}: no intervals");
    let mut cpus = Vec::new();
    for i in intervals {
        let c = &i["cpu"];
        let (all, usr, sys) = (
            f(&c["percent_of_cpu"]),
            f(&c["user_percent"]),
            f(&c["system_percent"]),
        );
        let busiest = f(&c["busiest_thread_percent"]);
        // Clock ticks (10 ms) over intervals of 250 ms or more: a few
        // percent of slack either way.
        assert!((usr + sys - all).abs() < 0.01, "{key}: {c}");
        assert!((0.0..=110.0).contains(&busiest), "{key}: {c}");
        assert!(busiest <= all + 10.0, "{key}: {c}");
        assert!(
            c["busiest_thread"].as_str().is_some_and(|s| !s.is_empty()),
            "{c}"
        );
        cpus.push(c.clone());
    }
    cpus
}

#[test]
fn issue_8_every_interval_shows_both_sides_cpu_and_the_busiest_thread() {
    let server = Server::start(&[]);
    let port = server.port_str();
    let r = json_client(&["tcp", "127.0.0.1", "-p", &port, "-t", "2", "--json"]);
    assert_interval_cpu(&r, "intervals");
    assert_interval_cpu(&r, "server_intervals");
    let client = &r["cpu"]["client"];
    // An unpaced sender is its process's busiest thread and does nearly
    // all of its work: the figure that tells a user one core is the limit
    // (how close to 100% it gets depends on how loaded the host is, so
    // the check is relative to the process's own total).
    assert_eq!(client["busiest_thread"], "stream 1 sender", "{client}");
    let busiest = f(&client["busiest_thread_percent"]);
    let all = f(&client["percent_of_cpu"]);
    assert!(busiest >= 0.8 * all && busiest > 5.0, "{client}");
    assert!(busiest <= 105.0, "{client}");
    assert_eq!(r["cpu"]["server"]["busiest_thread"], "stream 1 receiver");
    // The sender's intervals agree: it is the busiest in each full one.
    for c in assert_interval_cpu(&r, "intervals").iter().take(1) {
        assert_eq!(c["busiest_thread"], "stream 1 sender", "{c}");
    }
}

#[test]
fn issue_8_human_and_csv_output_show_cpu_per_interval() {
    let out = run_client(
        &["udp", "-b", "100M", "-t", "1", "-i", "500ms"],
        Duration::from_secs(30),
    );
    assert_ok(&out, &["udp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().filter(|l| l.starts_with("[ CPU]")).count() >= 2,
        "{text}"
    );
    assert!(text.contains("busiest thread stream 1 sender"), "{text}");
    let out = run_client(&["tcp", "-t", "1", "--csv"], Duration::from_secs(30));
    assert_ok(&out, &["--csv"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = text.lines().next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (busiest, thread) = (col("busiest_thread_percent"), col("busiest_thread"));
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    // Every interval row carries its side's CPU over the interval, every
    // stream and sum row its side's over the test.
    assert!(rows.len() >= 5, "{text}");
    for row in &rows {
        assert_eq!(row.len(), header.len(), "{row:?}");
        let b: f64 = row[busiest].parse().expect("a number");
        assert!((0.0..=110.0).contains(&b), "{row:?}");
        assert!(row[thread].starts_with("\"stream 1 "), "{row:?}");
    }
}

#[test]
fn issue_8_server_engine_is_asked_for_and_may_be_refused() {
    // The embedded server takes any engine this kernel runs.
    let r = json_client(&["tcp", "-t", "1", "--server-engine", "batch", "--json"]);
    assert_eq!(r["test"]["client_engine"], "syscall", "{}", r["test"]);
    assert!(
        r["test"]["server_engine"]
            .as_str()
            .is_some_and(|e| e.starts_with("batch")),
        "{}",
        r["test"]
    );
    assert_eq!(r["test"]["server_engine_requested"], "batch");
    // A server that does not allow it refuses with the reason, and keeps
    // serving.
    let mut server = Server::start(&["--allow-engines", "syscall"]);
    let port = server.port_str();
    let args = [
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--server-engine",
        "batch",
        "--json",
    ];
    let out = run_client(&args, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not allowed on this server"),
        "{}",
        stderr(&out)
    );
    let r = json_client(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--server-engine",
        "syscall",
        "--json",
    ]);
    assert_eq!(r["test"]["server_engine"], "syscall");
    assert!(server.alive());
    // Unknown names and the flag on a server are usage errors.
    let out = run_client(
        &["tcp", "-t", "1", "--server-engine", "nope"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run_client(
        &["server", "--server-engine", "batch"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
