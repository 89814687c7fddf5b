//! `--engine zerocopy:sendfile` (issue 8) through the real binary: TCP
//! streams sent with `sendfile(2)` and received with `splice(2)`, both
//! directions and with `--server-engine`, every byte counted once on each
//! side and the report naming what was used; UDP and rr tests are refused
//! by name. Skipped with the reason printed where the kernel refuses the
//! engine.

use serde_json::Value;

use crate::helpers::*;
use crate::uring_engines::runs_here;

const SF: &str = "zerocopy:sendfile";

/// Every stream balances, and each side that ran the engine counted its
/// bytes in `sendfile` (sender) and `splice_recv` (receiver) calls.
fn assert_sendfile_used(r: &Value) {
    assert_streams_balanced(r);
    for s in r["streams"].as_array().expect("streams") {
        let (tx, rx) = (&s["sender"], &s["receiver"]);
        assert_eq!(tx["engine_use"]["engine"], SF, "{s}");
        assert_eq!(rx["engine_use"]["engine"], SF, "{s}");
        let sent = &tx["engine_use"]["sendfile"];
        assert_eq!(u(&sent["bytes"]), u(&tx["bytes"]), "{s}");
        assert!(u(&sent["calls"]) > 0, "{s}");
        let got = &rx["engine_use"]["splice_recv"];
        assert_eq!(u(&got["bytes"]), u(&rx["bytes"]), "{s}");
        assert!(u(&got["calls"]) > 0, "{s}");
    }
}

#[test]
fn issue_8_sendfile_streams_balance_both_ways_and_say_what_they_used() {
    if !runs_here(SF) {
        return;
    }
    // Embedded: both sides run the client's engine.
    for extra in [&[][..], &["-R"][..]] {
        let mut args = vec!["tcp", "-t", "1", "--engine", SF, "--json"];
        args.extend_from_slice(extra);
        let r = json_client(&args);
        assert_eq!(r["test"]["client_engine"], SF, "{args:?}");
        assert_eq!(r["test"]["server_engine"], SF, "{args:?}");
        assert_sendfile_used(&r);
    }
    // A separate server asked for the engine by the client.
    let server = Server::start(&[]);
    let port = server.port_str();
    for extra in [&[][..], &["-R"][..]] {
        let mut args = vec![
            "tcp",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "--engine",
            SF,
            "--server-engine",
            SF,
            "--json",
        ];
        args.extend_from_slice(extra);
        let r = json_client(&args);
        assert_eq!(r["test"]["server_engine"], SF, "{args:?}");
        assert_sendfile_used(&r);
    }
    // The text report names the calls.
    let args = ["tcp", "-t", "1", "--engine", SF];
    let out = run_client(&args, std::time::Duration::from_secs(60));
    assert_ok(&out, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("engine zerocopy:sendfile: sendfile: "),
        "{text}"
    );
    assert!(text.contains("splice receive: "), "{text}");
}

#[test]
fn issue_8_sendfile_is_refused_for_udp_and_rr_by_name() {
    for args in [
        &["udp", "-t", "1", "--engine", SF][..],
        &["udp", "-t", "1", "--server-engine", SF][..],
        &["rr", "-t", "1", "--engine", SF][..],
    ] {
        let out = run_client(args, std::time::Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = stderr(&out);
        assert!(
            err.contains(SF) && err.contains("TCP stream tests only"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing ran");
    }
}

#[test]
fn issue_8_a_sendfile_server_refuses_udp_and_rr_up_front_and_serves_the_rest() {
    if !crate::uring_engines::runs_here(SF) {
        return;
    }
    let server = Server::start(&["--engine", SF]);
    let port = server.port_str();
    let limit = std::time::Duration::from_secs(30);
    for test in [&["udp", "-t", "1"][..], &["rr", "-n", "10"][..]] {
        let mut args = vec![test[0], "127.0.0.1", "-p", &port];
        args.extend_from_slice(&test[1..]);
        let out = run_client(&args, limit);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(SF)
                && err.contains("TCP stream tests only")
                && !err.contains("cannot run here"),
            "{args:?}: {err}"
        );
    }
    // Asking for another engine, or a test it serves, runs.
    let udp = [
        "udp",
        "127.0.0.1",
        "-p",
        &port,
        "-k",
        "1000",
        "--server-engine",
        "syscall",
        "--json",
    ];
    assert_ok(&run_client(&udp, limit), &udp);
    let crr = ["crr", "127.0.0.1", "-p", &port, "-n", "20", "--json"];
    assert_ok(&run_client(&crr, limit), &crr);
    let tcp = ["tcp", "127.0.0.1", "-p", &port, "-n", "1M", "--json"];
    assert_ok(&run_client(&tcp, limit), &tcp);
}

/// Issue 24: a sendfile server refuses a test in its engine's own words
/// (`EngineKind::server_refusal`, the reason its client gives for the
/// same test), not a shorter reason the server kept beside it; an rr
/// `--flows` test, whose server side runs on epoll loops without the
/// engine, is served (it was refused), and the server says once per test
/// which engine and loop served it and why not its own.
#[test]
fn issue_24_a_sendfile_server_refuses_in_its_engines_words_and_serves_rr_flows() {
    if !runs_here(SF) {
        return;
    }
    let server = Server::start(&["--engine", SF]);
    let port = server.port_str();
    let limit = std::time::Duration::from_secs(30);
    let udp = ["udp", "127.0.0.1", "-p", &port, "-t", "1"];
    let out = run_client(&udp, limit);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "server --engine {SF}: TCP stream tests only (sendfile and splice move a \
             byte stream; for UDP zero-copy sends use --engine zerocopy)"
        )),
        "{err}"
    );
    let rr = [
        "rr",
        "127.0.0.1",
        "-p",
        &port,
        "--flows",
        "2",
        "-n",
        "20",
        "--json",
    ];
    let r = json_client(&rr);
    assert_eq!(r["test"]["server_engine"], "syscall", "{r}");
    json_client(&[&rr[..], &["--proto", "udp"]].concat());
    let log = server.log();
    let note = |proto: &str| {
        format!(
            "rr --flows served with the syscall engine on epoll loops, not this server's \
             --engine {SF}: {proto} rr flows run on epoll loops"
        )
    };
    for proto in ["TCP", "UDP"] {
        assert_eq!(log.matches(&note(proto)).count(), 1, "{proto}: {log}");
    }
}
