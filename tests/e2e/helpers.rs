//! Shared helpers: spawn the real `linerate` binary as server and client,
//! parse its JSON, and make sure nothing outlives a test.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What could not run here, one line each (`test: why`, or `test (part):
/// why`), listed when the test binary exits.
static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Ends the calling test as skipped, with its reason: `return skip(why);`.
/// libtest decides `#[ignore]` at compile time and hides a passing test's
/// output, so a test that finds at run time that it cannot run here (no
/// root for namespaces, a tool not installed) passes, and the reason is
/// listed after libtest's summary with the count (`cargo test` shows it; CI
/// runs as root with every tool installed, where the list should be empty).
pub fn skip(why: impl std::fmt::Display) {
    record_skip(None, &why.to_string());
}

/// Records that `part` of the calling test was skipped (the rest ran).
pub fn skip_part(part: &str, why: impl std::fmt::Display) {
    record_skip(Some(part), &why.to_string());
}

fn record_skip(part: Option<&str>, why: &str) {
    // libtest runs each test on a thread named after it.
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_owned();
    let part = part.map(|p| format!(" ({p} part)")).unwrap_or_default();
    eprintln!("skipped{part}: {why}");
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function, called once at process exit.
        unsafe { libc::atexit(list_skipped) };
    });
    SKIPPED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(format!("{test}{part}: {}", why.trim()));
}

/// Prints what was skipped, after libtest's summary.
extern "C" fn list_skipped() {
    let list = SKIPPED.lock().unwrap_or_else(PoisonError::into_inner);
    let whole = list.iter().filter(|l| !l.contains(" part): ")).count();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\nskipped at run time (passed without running): {whole} test(s), {} part(s) of tests",
        list.len() - whole
    );
    for l in list.iter() {
        let _ = writeln!(err, "    skipped: {l}");
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_linerate")
}

/// A `linerate server` on an ephemeral loopback port, killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// What it has logged on stderr so far (the first [`LOG_KEPT`] bytes).
    pub log: std::sync::Arc<Mutex<String>>,
}

/// Bytes of a server's stderr kept for [`Server::log`]; the rest is read
/// and dropped (a test that provokes many log lines must not block it).
const LOG_KEPT: usize = 1 << 20;

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        Self::start_in(None, "127.0.0.1", extra)
    }

    /// Starts a server with `env` added to its environment.
    pub fn start_env(env: &[(&str, &str)], extra: &[&str]) -> Server {
        Self::start_with(None, "127.0.0.1", env, extra)
    }

    /// Starts a server, optionally inside network namespace `netns`.
    pub fn start_in(netns: Option<&str>, bind: &str, extra: &[&str]) -> Server {
        Self::start_with(netns, bind, &[], extra)
    }

    fn start_with(netns: Option<&str>, bind: &str, env: &[(&str, &str)], extra: &[&str]) -> Server {
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, bin()]);
                c
            }
            None => Command::new(bin()),
        };
        cmd.args(["server", "--port", "0", "--bind", bind])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn server");
        // Drain the server's stderr, keeping its start for `log`.
        let log = std::sync::Arc::new(Mutex::new(String::new()));
        if let Some(err) = child.stderr.take() {
            let log = std::sync::Arc::clone(&log);
            std::thread::spawn(move || {
                // Lossy, so a line with bytes that are not UTF-8 is kept
                // (tests of sanitised peer text read it) and ends no drain.
                let mut r = BufReader::new(err);
                let mut line = Vec::new();
                while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                    let mut l = log.lock().unwrap_or_else(PoisonError::into_inner);
                    if l.len() < LOG_KEPT {
                        l.push_str(&String::from_utf8_lossy(&line));
                    }
                    line.clear();
                }
            });
        }
        let stdout = child.stdout.take().expect("server stdout");
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        reader
            .read_line(&mut line)
            .expect("server prints its address");
        // Keep draining stdout (reports), so the server never writes into
        // a closed pipe.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        // "linerate server listening on 127.0.0.1:PORT (engine syscall)"
        let port = line
            .split_whitespace()
            .find_map(|w| w.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server { child, port, log }
    }

    /// The server's stderr so far: its log.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn port_str(&self) -> String {
        self.port.to_string()
    }

    /// True while the server process is alive.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server and a handle on its log (its stderr, as [`Server::log`]), for
/// tests that watch what it logs while it runs.
pub fn logged_server(extra: &[&str]) -> (Server, std::sync::Arc<Mutex<String>>) {
    let server = Server::start(extra);
    let log = std::sync::Arc::clone(&server.log);
    (server, log)
}

/// Runs the client with `args`, bounded by `limit`.
pub fn run_client(args: &[&str], limit: Duration) -> Output {
    run_client_in(None, args, limit)
}

pub fn run_client_in(netns: Option<&str>, args: &[&str], limit: Duration) -> Output {
    run_client_env(netns, &[], args, limit)
}

/// Runs the client with `env` added to its environment.
pub fn run_client_env(
    netns: Option<&str>,
    env: &[(&str, &str)],
    args: &[&str],
    limit: Duration,
) -> Output {
    run_client_watched(netns, env, args, limit, &mut |_| {})
}

/// [`run_client_env`], calling `watch` with the client's process id every
/// 20 ms while it runs (to sample its memory, say).
pub fn run_client_watched(
    netns: Option<&str>,
    env: &[(&str, &str)],
    args: &[&str],
    limit: Duration,
    watch: &mut dyn FnMut(u32),
) -> Output {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, bin()]);
            c
        }
        None => Command::new(bin()),
    };
    let mut child = cmd
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    // Drain both pipes while the client runs: a report larger than a pipe's
    // buffer would otherwise block the client on its last write.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out_t = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err_t = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait().expect("wait client") {
            Some(status) => break status,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let stdout = out_t.join().unwrap_or_default();
                let stderr = err_t.join().unwrap_or_default();
                panic!(
                    "client {args:?} ran past {limit:?}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&stdout),
                    String::from_utf8_lossy(&stderr)
                );
            }
            None => {
                watch(child.id());
                std::thread::sleep(Duration::from_millis(20))
            }
        }
    };
    Output {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    }
}

/// A `/proc/PID/status` figure in KiB (`VmRSS`, `VmHWM`, …); 0 when the
/// process is gone.
pub fn proc_status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.split(':').next() == Some(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Runs a client that must succeed and print one JSON document.
pub fn json_client(args: &[&str]) -> Value {
    let out = run_client(args, Duration::from_secs(60));
    assert_ok(&out, args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub fn assert_ok(out: &Output, args: &[&str]) {
    assert!(
        out.status.success(),
        "{args:?} failed with {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Every stream's sender and receiver byte totals are equal and non-zero
/// (the whole streams: against iperf3 peers each side ends an omitted
/// warm-up on its own clock).
pub fn assert_streams_balanced(report: &Value) {
    let streams = report["streams"].as_array().expect("streams array");
    assert!(!streams.is_empty(), "no streams in {report}");
    let whole = |e: &Value| u(&e["bytes"]) + e["omitted_bytes"].as_u64().unwrap_or(0);
    for s in streams {
        let sent = whole(&s["sender"]);
        let received = whole(&s["receiver"]);
        assert!(sent > 0, "stream {} moved nothing", s["id"]);
        assert_eq!(
            sent, received,
            "stream {}: sender and receiver totals differ",
            s["id"]
        );
        assert!(s["sender"].get("error").is_none(), "stream error: {s}");
        assert!(s["receiver"].get("error").is_none(), "stream error: {s}");
    }
    for sum in report["sums"].as_array().expect("sums") {
        let of = streams.iter().filter(|s| s["flow"] == sum["flow"]);
        let (sent, got) = of.fold((0, 0), |(a, b), s| {
            (a + u(&s["sender"]["bytes"]), b + u(&s["receiver"]["bytes"]))
        });
        assert_eq!(u(&sum["sender_bytes"]), sent, "{sum}");
        assert_eq!(u(&sum["receiver_bytes"]), got, "{sum}");
        assert!(f(&sum["receiver_bits_per_second"]) > 0.0);
    }
}

/// Busy loops on every CPU while it lives (a loaded host), each ending
/// when this is dropped or after `limit`, whichever comes first.
pub struct CpuLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    pub fn start(limit: Duration) -> CpuLoad {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let until = Instant::now() + limit;
        let threads = (0..cpus)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                        for _ in 0..10_000 {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        CpuLoad { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Polls `cond` every 50 ms for up to `limit`.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// Starts a client with `args`, lets it run 800 ms into its test, then
/// kills it with SIGKILL (no goodbye to the server) and reaps it.
pub fn kill_mid_test(args: &[&str]) {
    let mut victim = Command::new(bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(800));
    victim.kill().expect("kill");
    let _ = victim.wait();
}

/// What one side's non-omitted interval records (`report[key]`, `key`
/// `intervals` or `server_intervals`) add up to for stream `id`: bytes,
/// TCP retransmits, UDP datagrams.
pub fn measured_intervals(report: &Value, key: &str, id: u64) -> (u64, u64, u64) {
    let mut sum = (0, 0, 0);
    for iv in report[key].as_array().expect("intervals") {
        if iv["omitted"] == true {
            continue;
        }
        for s in iv["streams"].as_array().expect("streams") {
            if u(&s["id"]) == id {
                sum.0 += u(&s["bytes"]);
                sum.1 += s["retransmits"].as_u64().unwrap_or(0);
                sum.2 += s["udp"]["datagrams"].as_u64().unwrap_or(0);
            }
        }
    }
    sum
}

/// The paced rr flows [`assert_paced_at_200_for_2s`] judges:
/// [`PACED_RR_FLOW_COUNT`] flows on 2 event-loop threads, each at 200
/// transactions/s for 2 s (the rr and uring flow tests share them).
pub const PACED_RR_FLOWS: [&str; 8] = [
    "--flows",
    "16",
    "--threads",
    "2",
    "--rate",
    "200",
    "-t",
    "2",
];
pub const PACED_RR_FLOW_COUNT: usize = 16;

/// Why io_uring cannot run on this host at all, where the kernel says so
/// (`/proc/sys/kernel/io_uring_disabled` set): the uring tests are then
/// skipped, with the reason.
pub fn io_uring_disabled() -> Option<String> {
    let path = "/proc/sys/kernel/io_uring_disabled";
    match std::fs::read_to_string(path) {
        Ok(v) if v.trim() != "0" => {
            Some(format!("io_uring is disabled here ({path} = {})", v.trim()))
        }
        _ => None,
    }
}

/// `rr --rate 200 -t 2` on flows whose per-flow counts are `counts`: none
/// exceeds its schedule (200/s for 2 s from the first request, that one
/// at once: 401), and each made nearly all of it (late slots are made up)
/// unless the report says which flows fell behind the pace (a host too
/// busy to run them: issue 28's loaded CI run saw 250). "Nearly all" is
/// the report's own rule (95 % of the phase's slots, `PACE_KEPT` in the
/// report crate): a stricter bound here failed a loaded run at 381 of the
/// 380 the report lets pass without a note.
pub fn assert_paced_at_200_for_2s(what: &str, report: &Value, counts: &[u64]) {
    let seconds = report["rr"]["phases"][0]["seconds"].as_f64().unwrap_or(2.0);
    let kept = (200.0 * seconds * 0.95).floor() as u64;
    let behind = report["notes"].as_array().is_some_and(|notes| {
        notes.iter().any(|n| {
            n.as_str()
                .is_some_and(|n| n.contains("fell behind the pace of 200"))
        })
    });
    for (flow, &n) in counts.iter().enumerate() {
        assert!(
            n <= 401,
            "{what} flow {flow}: {n} transactions in 2 s at 200/s"
        );
        assert!(
            n >= kept || behind,
            "{what} flow {flow}: {n} transactions in 2 s at 200/s, and no note says it fell \
             behind: {}",
            report["notes"]
        );
    }
}

/// Runs `linerate qualify ARGS` (in namespace `ns` if given) and parses
/// its JSON (`Null` where stdout is not JSON).
pub fn qualify_in(ns: Option<&str>, args: &[&str], limit: Duration) -> (Output, Value) {
    let mut argv = vec!["qualify"];
    argv.extend_from_slice(args);
    let out = run_client_in(ns, &argv, limit);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}
