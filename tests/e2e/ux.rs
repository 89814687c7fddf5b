//! What a new user trips over (issue 13): error lines said once, a closed
//! pipe is a quiet exit, machine formats get a document on failure too.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::helpers::*;

/// A loopback port nothing listens on (bound, then closed).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    port.to_string()
}

#[test]
fn issue_13_errors_say_their_cause_once() {
    let port = closed_port();
    let out = run_client(
        &["tcp", "127.0.0.1", "--port", &port, "-t", "1"],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(&format!("127.0.0.1 port {port}")), "{err}");
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");

    // The server's busy refusal: "server is busy" once.
    let server = Server::start(&[]);
    let p = server.port_str();
    let mut first = Command::new(bin())
        .args(["tcp", "127.0.0.1", "--port", &p, "-t", "4", "--json-lines"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Its start record comes once the server has admitted it.
    let mut start = String::new();
    let mut lines = std::io::BufReader::new(first.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut lines, &mut start).expect("start record");
    let out = run_client(
        &["tcp", "127.0.0.1", "--port", &p, "-t", "1"],
        Duration::from_secs(10),
    );
    let _ = first.kill();
    let _ = first.wait();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.matches("busy").count(), 1, "{err}");
}

#[test]
fn issue_13_json_failure_prints_a_json_document() {
    let port = closed_port();
    for (flag, ty) in [("--json", None), ("--json-lines", Some("error"))] {
        let out = run_client(
            &["tcp", "127.0.0.1", "--port", &port, "-t", "1", flag],
            Duration::from_secs(20),
        );
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().unwrap_or_default();
        let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert_eq!(v["exit_code"], 1, "{v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains("refused")),
            "{v}"
        );
        assert_eq!(v["type"].as_str(), ty, "{v}");
    }
}

#[test]
fn issue_13_closed_stdout_is_a_quiet_exit_not_a_panic() {
    // `linerate tcp 2>&1 | head -2`: stdout and stderr both close after
    // the first bytes while the test runs (the embedded server logs to the
    // same closed stderr).
    let mut child = Command::new(bin())
        .args(["tcp", "-t", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let mut first = [0u8; 16];
    out.read_exact(&mut first).expect("some output");
    drop(out);
    drop(err.read(&mut first));
    drop(err);
    let exited = eventually(Duration::from_secs(20), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    assert!(exited, "client did not exit after its output closed");
    let code = child.wait().expect("wait").code();
    assert_eq!(
        code,
        Some(0),
        "a closed stdout must be a quiet exit, not a panic (101)"
    );
}

#[test]
fn issue_13_a_refused_test_does_not_consume_once() {
    let mut server = Server::start(&["--once", "--max-time", "5s", "--max-streams", "8"]);
    let p = server.port_str();
    for refused in [&["-t", "10"][..], &["-t", "0.3", "-P", "500"][..]] {
        let mut args = vec!["tcp", "127.0.0.1", "--port", &p];
        args.extend_from_slice(refused);
        let out = run_client(&args, Duration::from_secs(15));
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
    }
    let args = ["tcp", "127.0.0.1", "--port", &p, "-t", "0.3", "--json"];
    let started = std::time::Instant::now();
    let out = run_client(&args, Duration::from_secs(15));
    assert_ok(&out, &args);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the test after the refusals waited {:?}",
        started.elapsed()
    );
    // The one real test consumed --once.
    assert!(
        eventually(Duration::from_secs(5), || !server.alive()),
        "server --once still running after its test"
    );
}

/// Sends SIGINT to `child` after `after`, then collects its output.
fn interrupt(child: std::process::Child, after: Duration) -> std::process::Output {
    interrupt_after(child, after, true)
}

/// Waits `after`, sends SIGINT to `child` if `signal`, then collects its
/// output (killing it if it has not exited within 20 s).
fn interrupt_after(
    mut child: std::process::Child,
    after: Duration,
    signal: bool,
) -> std::process::Output {
    std::thread::sleep(after);
    if signal {
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
    }
    let done = eventually(Duration::from_secs(20), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !done {
        let _ = child.kill();
    }
    child.wait_with_output().expect("output")
}

#[test]
fn issue_13_ctrl_c_keeps_what_was_measured() {
    let server = Server::start(&[]);
    let p = server.port_str();
    for mode in [
        &["tcp"][..],
        &["tcp", "-R"],
        &["udp", "-b", "50M"],
        &["udp", "-R", "-b", "50M"],
    ] {
        let mut args = mode.to_vec();
        args.extend(["127.0.0.1", "--port", &p, "-t", "8", "--json"]);
        let child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let out = interrupt(child, Duration::from_millis(2500));
        assert_eq!(out.status.code(), Some(130), "{args:?}: {}", stderr(&out));
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: one JSON report: {e}"));
        assert_eq!(r["interrupted"], true, "{args:?}");
        assert!(
            r["notes"].as_array().is_some_and(|n| n
                .iter()
                .any(|n| n.as_str().is_some_and(|n| n.contains("interrupted")))),
            "{args:?}: {}",
            r["notes"]
        );
        // What was measured is complete and consistent: both ends agree
        // (TCP bytes exactly; UDP loss exactly, from the sequence numbers).
        if args[0] == "tcp" {
            assert_streams_balanced(&r);
        }
        for sum in r["sums"].as_array().expect("sums") {
            if let Some(u_) = sum.get("udp") {
                assert!(u(&u_["issued"]) > 0, "{args:?}");
                assert_eq!(
                    u(&u_["issued"]),
                    u(&u_["received"]) + u(&u_["lost"]),
                    "{args:?}"
                );
            }
        }
        for s in r["streams"].as_array().expect("streams") {
            let secs = f(&s["receiver"]["seconds"]);
            assert!(secs > 0.5 && secs < 7.0, "{args:?}: {secs} s");
        }
        assert!(stderr(&out).contains("interrupted by the user"));
    }
}

/// Ctrl-C during rr, UDP rr and crr over several sizes: the report of the
/// sizes measured until then (the last one cut short), marked interrupted,
/// with both ends' counts agreeing, exit 130; the files asked for are
/// written from it.
#[test]
fn issue_13_ctrl_c_during_rr_keeps_the_sizes_measured() {
    let server = Server::start(&[]);
    let p = server.port_str();
    let dir = std::env::temp_dir().join(format!("linerate-rr-int-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let plot = dir.join("rr.svg");
    let plot_s = plot.to_string_lossy().to_string();
    for mode in [&["rr"][..], &["rr", "--proto", "udp"], &["crr"]] {
        let _ = std::fs::remove_file(&plot);
        let mut args = mode.to_vec();
        args.extend(["127.0.0.1", "--port", &p, "--sizes", "1,64,1K,4K"]);
        args.extend(["-t", "1", "--json", "--plot", &plot_s]);
        // The report (histograms included) outgrows a pipe's buffer: to a
        // file, so the client never waits for a reader.
        let json = dir.join("rr.json");
        let child = Command::new(bin())
            .args(&args)
            .stdout(std::fs::File::create(&json).expect("create"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Into the second size (the clock probe and set-up come first).
        let out = interrupt(child, Duration::from_millis(1600));
        assert_eq!(out.status.code(), Some(130), "{args:?}: {}", stderr(&out));
        let r: Value = serde_json::from_slice(&std::fs::read(&json).expect("read"))
            .unwrap_or_else(|e| panic!("{args:?}: one JSON report: {e}"));
        assert_eq!(r["interrupted"], true, "{args:?}");
        let phases = r["rr"]["phases"].as_array().expect("phases");
        assert!(
            !phases.is_empty() && phases.len() < 4,
            "{args:?}: {} phases",
            phases.len()
        );
        assert_eq!(u(&phases[0]["request_size"]), 1, "{args:?}");
        for ph in phases {
            assert!(u(&ph["transactions"]) > 0, "{args:?}: {ph}");
            if mode.len() == 1 {
                assert_eq!(ph["transactions"], ph["server_transactions"], "{args:?}");
            }
        }
        let notes = r["notes"].to_string();
        assert!(notes.contains("not measured"), "{args:?}: {notes}");
        assert!(stderr(&out).contains("interrupted by the user"));
        let svg = std::fs::read_to_string(&plot).unwrap_or_default();
        assert!(svg.contains("<svg"), "{args:?}: no plot written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rr --json-lines` prints a record per size as that size ends, with the
/// client's figures the summary then carries too.
#[test]
fn issue_13_rr_json_lines_has_a_record_per_size_as_it_ends() {
    use std::io::BufRead;
    for kind in ["rr", "crr"] {
        let args = [kind, "--sizes", "1,64,1K", "-t", "1", "--json-lines"];
        let mut child = Command::new(bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let lines = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut seen: Vec<(std::time::Instant, Value)> = Vec::new();
        for l in lines.lines() {
            let l = l.expect("line");
            seen.push((
                std::time::Instant::now(),
                serde_json::from_str(&l).expect("JSON"),
            ));
        }
        let out = child.wait_with_output().expect("wait");
        assert_ok(&out, &args);
        let types: Vec<&str> = seen
            .iter()
            .filter_map(|(_, v)| v["type"].as_str())
            .collect();
        assert_eq!(
            types,
            ["start", "rr_phase", "rr_phase", "rr_phase", "summary"],
            "{kind}"
        );
        // The first size's record came while the other two ran (1 s each).
        let first = seen[1].0;
        let last = seen[4].0;
        assert!(
            last.duration_since(first) > Duration::from_millis(1500),
            "{kind}: the first size's record came {:?} before the summary",
            last.duration_since(first)
        );
        let summary = &seen[4].1["rr"]["phases"];
        for (i, (_, rec)) in seen[1..4].iter().enumerate() {
            assert_eq!(u(&rec["phase"]), i as u64, "{kind}");
            assert!(u(&rec["transactions"]) > 0, "{kind}: {rec}");
            assert_eq!(rec["transactions"], summary[i]["transactions"], "{kind}");
            assert_eq!(rec["request_size"], summary[i]["request_size"], "{kind}");
            assert_eq!(rec["latency"], summary[i]["latency"], "{kind}");
            assert!(rec.get("server_transactions").is_none(), "{kind}: {rec}");
        }
    }
}

#[test]
fn issue_28_refused_connections_say_to_start_a_server_and_i_0_prints_no_intervals() {
    let port = closed_port();
    let out = run_client(
        &["tcp", "127.0.0.1", "--port", &port, "-t", "1"],
        Duration::from_secs(20),
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("start `linerate server -p {port}` on 127.0.0.1")),
        "{err}"
    );
    // `-i 0`: the summary and no interval line (iperf3's "no reports").
    let out = run_client(&["tcp", "-t", "1.5", "-i", "0"], Duration::from_secs(30));
    assert_ok(&out, &["tcp", "-i", "0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("0.00-1.00"), "no interval line: {text}");
    assert!(
        text.contains("sender") && text.contains("receiver"),
        "{text}"
    );
}

/// Ctrl-C of the server mid-test (issue 28): the server tells its client,
/// which reports what both sides measured until then, marked interrupted
/// and saying the server stopped it (exit 1); the server then exits.
#[test]
fn issue_28_server_ctrl_c_reports_what_was_measured() {
    for mode in [&["tcp"][..], &["udp", "-R", "-b", "50M"]] {
        let mut server = Server::start(&[]);
        let p = server.port_str();
        let mut args = mode.to_vec();
        args.extend(["127.0.0.1", "--port", &p, "-t", "8", "--json"]);
        let child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(2500));
        let _ = Command::new("kill")
            .args(["-INT", &server.child.id().to_string()])
            .status();
        let out = interrupt_after(child, Duration::ZERO, false);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: one JSON report: {e}: {err}"));
        assert_eq!(r["interrupted"], true, "{args:?}");
        assert!(
            r["notes"]
                .to_string()
                .contains("the server stopped the test"),
            "{args:?}: {}",
            r["notes"]
        );
        if args[0] == "tcp" {
            assert_streams_balanced(&r);
        }
        for s in r["streams"].as_array().expect("streams") {
            let secs = f(&s["receiver"]["seconds"]);
            assert!(secs > 1.5 && secs < 7.0, "{args:?}: {secs} s");
        }
        assert!(err.contains("the server stopped the test"), "{err}");
        assert!(
            eventually(Duration::from_secs(10), || !server.alive()),
            "{args:?}: the server still runs after Ctrl-C"
        );
    }
}

/// `linerate tcp -t 5 | head -1` (issue 28): the closed output stops the
/// test as Ctrl-C does — the client exits 0 at once and quietly, and the
/// server records a stopped test (its `--json-lines-file` record, marked
/// interrupted), not a failed one.
#[test]
fn issue_28_closed_stdout_ends_the_test_quietly_on_both_sides() {
    let dir = std::env::temp_dir().join(format!("linerate-head-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let jl = dir.join("tests.jsonl");
    let _ = std::fs::remove_file(&jl);
    let server = Server::start(&["--json-lines-file", jl.to_str().expect("utf-8 path")]);
    let p = server.port_str();
    let started = std::time::Instant::now();
    let mut child = Command::new(bin())
        .args(["tcp", "127.0.0.1", "--port", &p, "-t", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // `head -1`: one line, then the reader goes away.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).expect("a first byte");
    drop(stdout);
    let out = interrupt_after(child, Duration::ZERO, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "a closed stdout is a quiet exit");
    assert!(
        started.elapsed() < Duration::from_millis(4500),
        "the test ran on for {:?} after its reader left",
        started.elapsed()
    );
    let mut record = String::new();
    assert!(
        eventually(Duration::from_secs(5), || {
            record = std::fs::read_to_string(&jl).unwrap_or_default();
            !record.is_empty()
        }),
        "the server recorded no test: it failed"
    );
    let r: Value = serde_json::from_str(record.trim()).expect("one record");
    assert_eq!(r["interrupted"], true, "{record}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `linerate tcp --iperf3 … | head -1` and `linerate iperf3 -c … | head -1`
/// (issue 28): an iperf3 test ends as a native one does once its reader
/// has gone — at once (TEST_END), quietly and with status 0 — and the
/// server still gets its results (a completed test in its
/// `--json-lines-file`), rather than running to its limit.
#[test]
fn issue_28_closed_stdout_ends_an_iperf3_test_quietly() {
    let dir = std::env::temp_dir().join(format!("linerate-head3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let jl = dir.join("tests.jsonl");
    let _ = std::fs::remove_file(&jl);
    let server = Server::start(&["--json-lines-file", jl.to_str().expect("utf-8 path")]);
    let p = server.port_str();
    let modes: [&[&str]; 2] = [
        &["tcp", "127.0.0.1", "--port", &p, "--iperf3", "-t", "5"],
        &["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "5"],
    ];
    for (done, args) in modes.into_iter().enumerate() {
        let started = std::time::Instant::now();
        let mut child = Command::new(bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut first = [0u8; 1];
        stdout.read_exact(&mut first).expect("a first byte");
        drop(stdout);
        let out = interrupt_after(child, Duration::ZERO, false);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "",
            "{args:?}: a closed stdout is a quiet exit"
        );
        assert!(
            started.elapsed() < Duration::from_millis(4500),
            "{args:?}: the test ran on for {:?} after its reader left",
            started.elapsed()
        );
        assert!(
            eventually(Duration::from_secs(5), || {
                let record = std::fs::read_to_string(&jl).unwrap_or_default();
                record.lines().count() > done
            }),
            "{args:?}: the server recorded no completed test"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 28: a control connection reset by the peer (ECONNRESET) is said
/// as a reset, not as "peer closed" (kept for end of file): a server that
/// reads the client's hello and aborts the connection.
#[test]
fn issue_28_a_reset_control_connection_is_not_said_as_a_close() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port().to_string();
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().expect("accept");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut hello = [0u8; 16];
        let _ = c.read(&mut hello);
        // SO_LINGER 0: the close sends a RST.
        socket2::SockRef::from(&c)
            .set_linger(Some(Duration::ZERO))
            .expect("linger");
    });
    let out = run_client(
        &["tcp", "127.0.0.1", "-p", &port, "-t", "1"],
        Duration::from_secs(20),
    );
    server.join().expect("fake server");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("reset the control connection"), "{err}");
    assert!(!err.contains("peer closed"), "{err}");
}

/// A pipe whose buffer is already full, so that the first write into it
/// blocks until the reader reads: the reader, the writer, and how many
/// filler bytes come before what is written next.
fn full_pipe() -> (std::fs::File, std::fs::File, usize) {
    use std::io::Write as _;
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given
    // (close-on-exec: the child gets the writer through Stdio only).
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just opened, and nothing else owns them.
    let (r, mut w) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: fcntl on a descriptor this test owns; no memory is involved.
    let size = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ) };
    let size = usize::try_from(size).expect("pipe size");
    // Exactly the pipe's capacity fits without blocking.
    w.write_all(&vec![b'\n'; size]).expect("fill the pipe");
    (r, w, size)
}

/// `linerate tcp HOST -t 3 | (sleep 5; cat)` (issue 28): a client whose
/// stdout nobody reads for longer than the server's silence limit (3 s)
/// still sends its heartbeats, because what it prints is written off its
/// control loop; once the reader reads, every line comes out, in order,
/// and the test completes with status 0 on both sides. The same for the
/// iperf3 protocol's client, whose control loop must still end the test
/// on time.
#[test]
fn issue_28_an_unread_stdout_does_not_stop_the_control_loop() {
    let server = Server::start(&[]);
    let p = server.port_str();
    let modes: [&[&str]; 3] = [
        &["tcp", "127.0.0.1", "--port", &p, "-t", "3"],
        &["tcp", "127.0.0.1", "--port", &p, "-t", "3", "--json-lines"],
        &["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "3"],
    ];
    for args in modes {
        let (mut r, w, filler) = full_pipe();
        let started = std::time::Instant::now();
        let mut child = Command::new(bin())
            .args(args)
            .stdout(w)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_secs(5));
        let reader = std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = r.read_to_end(&mut text);
            text
        });
        let exited = eventually(Duration::from_secs(20), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        if !exited {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("wait");
        let text = reader.join().expect("reader");
        let text = String::from_utf8_lossy(&text[filler.min(text.len())..]).into_owned();
        assert!(exited, "{args:?}: the client did not exit");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
        // Done soon after the first read, 5 s in: the test ran its 3 s
        // while nobody read (a stalled control loop takes 5 + 3 s).
        assert!(
            started.elapsed() < Duration::from_millis(7500),
            "{args:?}: took {:?}",
            started.elapsed()
        );
        if args.contains(&"--json-lines") {
            let types: Vec<String> = text
                .lines()
                .map(|l| {
                    let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                    v["type"].as_str().unwrap_or_default().to_owned()
                })
                .collect();
            assert_eq!(types.first().map(String::as_str), Some("start"), "{text}");
            assert_eq!(types.last().map(String::as_str), Some("summary"), "{text}");
            let intervals = types.iter().filter(|t| *t == "interval").count();
            assert!(intervals >= 2, "{args:?}: {intervals} intervals: {text}");
        } else {
            // "[   1]   1.00-2.00   s …" (iperf3's: "… sec …").
            let intervals = text
                .lines()
                .filter(|l| l.starts_with('[') && (l.contains("   s ") || l.contains(" sec ")))
                .filter(|l| !l.contains("sender") && !l.contains("receiver") && !l.contains("CPU"))
                .count();
            assert!(text.contains("receiver"), "{args:?}: {text}");
            assert!(
                intervals >= 2,
                "{args:?}: {intervals} interval lines: {text}"
            );
        }
    }
    let log = server.log();
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("failed")).collect();
    assert!(
        failures.is_empty(),
        "the server logged:\n{}",
        failures.join("\n")
    );
}

/// `linerate server --json | (sleep 30; cat)` (issue 28): a server whose
/// stdout nobody reads still serves test after test, because its reports
/// are written off the tests' threads (an iperf3 test blocked on its
/// report held its slot, and the next client was refused as busy; a native
/// one held its thread and made its client wait). Once the reader
/// reads, both reports come out, in order, and Ctrl-C still ends the
/// server.
#[test]
fn issue_28_an_unread_stdout_does_not_hold_the_servers_tests() {
    use std::io::{BufRead as _, BufReader};
    let (mut r, w, filler) = full_pipe();
    // --json: the address goes to stderr, where the test reads it.
    let mut child = Command::new(bin())
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--json"])
        .stdout(w)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut err = BufReader::new(child.stderr.take().expect("server stderr"));
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut line = String::new();
    err.read_line(&mut line)
        .expect("the server logs its address");
    let port = line
        .split_whitespace()
        .find_map(|w| w.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    // Killed on drop, whatever fails below.
    let mut server = Server { child, port, log };
    let p = server.port_str();
    // An iperf3 test held its test slot while it wrote its report: the
    // next test (either protocol) was refused as busy.
    let modes: [&[&str]; 2] = [
        &["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "2"],
        &["tcp", "127.0.0.1", "--port", &p, "-t", "2"],
    ];
    let outs: Vec<_> = modes
        .iter()
        .map(|args| run_client(args, Duration::from_secs(20)))
        .collect();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = r.read_to_end(&mut text);
        text
    });
    let _ = Command::new("kill")
        .args(["-INT", &server.child.id().to_string()])
        .status();
    let stopped = eventually(Duration::from_secs(20), || !server.alive());
    drop(server);
    let text = reader.join().expect("reader");
    for (args, out) in modes.iter().zip(&outs) {
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(out));
    }
    assert!(stopped, "the server did not exit on Ctrl-C");
    let text = String::from_utf8_lossy(&text[filler.min(text.len())..]).into_owned();
    let reports: Vec<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(reports.len(), 2, "{text}");
    let starts: Vec<u64> = reports
        .iter()
        .map(|r| u(&r["test"]["start_unix_ms"]))
        .collect();
    assert!(starts[0] < starts[1], "in order: {starts:?}");
}

/// `linerate server 2>&1 | (sleep 30; cat)` in the human format (issue
/// 28): the "listening on" line waits in the server's printer behind a
/// reader that does not read, and nothing on the accept path waits for
/// it, nor for a log line: the accept loop logged a refused address
/// itself and stopped accepting (the next client timed out). The server
/// accepts and serves test after test (native and iperf3), and once the
/// reader reads, the line comes before the tests' reports, which come in
/// order, and the log line is there.
#[test]
fn issue_28_an_unread_stdout_holds_neither_the_human_servers_start_nor_its_tests() {
    let (mut r, w, filler) = full_pipe();
    // The address line goes only to the unread stdout: the port is
    // picked here.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let err = w.try_clone().expect("2>&1");
    let child = Command::new(bin())
        .args(["server", "--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--deny", "127.0.0.2/32"])
        .stdout(w)
        .stderr(err)
        .spawn()
        .expect("spawn server");
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    // Killed on drop, whatever fails below.
    let mut server = Server { child, port, log };
    let p = server.port_str();
    let up = eventually(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "the server does not accept while its first line waits");
    // Refused and logged by the accept loop.
    let denied = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .and_then(|s| {
            s.bind(&std::net::SocketAddr::from(([127, 0, 0, 2], 0)).into())?;
            s.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())?;
            Ok(s)
        })
        .expect("a connection from 127.0.0.2");
    std::thread::sleep(Duration::from_millis(300));
    drop(denied);
    let modes: [&[&str]; 3] = [
        &["tcp", "127.0.0.1", "--port", &p, "-t", "1"],
        &["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "1"],
        &["udp", "127.0.0.1", "--port", &p, "-t", "1", "-b", "10M"],
    ];
    for args in modes {
        let out = run_client(args, Duration::from_secs(20));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = r.read_to_end(&mut text);
        text
    });
    let _ = Command::new("kill")
        .args(["-INT", &server.child.id().to_string()])
        .status();
    let stopped = eventually(Duration::from_secs(20), || !server.alive());
    drop(server);
    assert!(stopped, "the server did not exit on Ctrl-C");
    let text = reader.join().expect("reader");
    let text = String::from_utf8_lossy(&text[filler.min(text.len())..]).into_owned();
    let at = |what: &str| {
        text.find(what)
            .unwrap_or_else(|| panic!("no {what:?}: {text}"))
    };
    assert!(at("127.0.0.2") > 0, "the accept loop's log line");
    let listening = at("linerate server listening on 127.0.0.1:");
    // Each report's first line: "linerate server: tcp client→server
    // (stream) from … · 1 MiB writes …" (iperf3's client: 128 KiB).
    let heads: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("linerate server: ") && l.contains(") from "))
        .collect();
    assert_eq!(heads.len(), 3, "{text}");
    assert!(listening < at(heads[0]), "{text}");
    let expected = [
        ("tcp", "1 MiB writes"),
        ("tcp", "128 KiB writes"),
        ("udp", ""),
    ];
    for (head, (protocol, writes)) in heads.iter().zip(expected) {
        let named = head.starts_with(&format!("linerate server: {protocol} "));
        assert!(named && head.contains(writes), "in order: {heads:?}");
    }
}
