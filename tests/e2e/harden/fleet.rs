//! Running one server per host: `--metrics` (checked by promtool and
//! scraped by a real Prometheus when Debian's `prometheus` package is
//! installed), `--json-lines-file`, and the systemd unit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::logged_server;
use crate::helpers::{eventually, run_client, stderr};

/// `GET path` over HTTP/1.0; the body, or `None`.
fn http_get(addr: &str, path: &str) -> Option<String> {
    http_get_accept(addr, path, "*/*")
}

fn http_get_accept(addr: &str, path: &str, accept: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

fn has(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Starts a server with metrics on an ephemeral port; its address.
fn metrics_server(extra: &[&str]) -> (crate::helpers::Server, String) {
    let mut args = vec!["--metrics", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (server, log) = logged_server(&args);
    let mut addr = String::new();
    let found = eventually(Duration::from_secs(5), || {
        let l = log.lock().map(|l| l.clone()).unwrap_or_default();
        match l.split("metrics on http://").nth(1) {
            Some(rest) => {
                addr = rest.split('/').next().unwrap_or_default().to_owned();
                true
            }
            None => false,
        }
    });
    assert!(found, "no metrics address logged");
    (server, addr)
}

#[test]
fn issue_10_metrics_count_tests_and_validate() {
    let dir = std::env::temp_dir().join(format!("linerate-jl-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let jl = dir.join("results.jsonl");
    let _ = std::fs::remove_file(&jl);
    let (server, addr) = metrics_server(&["--json-lines-file", jl.to_str().expect("utf-8")]);
    let port = server.port_str();
    for args in [
        &["tcp", "-t", "0.3"][..],
        &["udp", "-t", "0.3", "--pps", "1000", "-R"],
    ] {
        let mut all = vec![args[0], "127.0.0.1", "-p", &port];
        all.extend_from_slice(&args[1..]);
        let out = run_client(&all, Duration::from_secs(30));
        assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    }
    let refused = run_client(
        &["tcp", "127.0.0.1", "-p", &port, "-l", "1G"],
        Duration::from_secs(30),
    );
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    let om = "application/openmetrics-text;version=1.0.0";
    let text = http_get_accept(&addr, "/metrics", om).expect("scrape");
    for needle in [
        "linerate_tests_total{kind=\"stream_tcp\",outcome=\"completed\"} 1",
        "linerate_tests_total{kind=\"stream_udp\",outcome=\"completed\"} 1",
        "linerate_tests_refused_total{reason=\"invalid\"} 1",
        "linerate_payload_bytes_total{direction=\"received\"}",
        "linerate_datagrams_total{direction=\"sent\"}",
        "linerate_active_tests 0",
        "linerate_last_result_bytes_per_second{client=\"127.0.0.1\",kind=\"stream_udp\"}",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
    assert!(http_get(&addr, "/").is_some_and(|b| b.contains("only GET /metrics")));
    // The classic format (what promtool reads) for scrapers that do not ask.
    let classic = http_get(&addr, "/metrics").expect("scrape");
    assert!(
        classic.contains("# TYPE linerate_tests_total counter"),
        "{classic}"
    );
    let text = classic;
    if has("promtool") {
        let mut p = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool");
        p.stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
        let out = p.wait_with_output().expect("promtool");
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        println!("SKIP promtool check: promtool not installed (Debian package `prometheus`)");
    }
    // One JSON record per completed test.
    let lines = std::fs::read_to_string(&jl).expect("json lines file");
    let records: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record per line"))
        .collect();
    assert_eq!(records.len(), 2, "{lines}");
    assert!(records.iter().all(|r| r["test"].is_object()), "{lines}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Prometheus process this test started; killed on drop.
struct Prom(std::process::Child);

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn issue_10_a_real_prometheus_scrapes_the_server() {
    if !has("prometheus") {
        println!(
            "SKIP real Prometheus scrape: `prometheus` not installed (Debian package `prometheus`)"
        );
        return;
    }
    let (server, addr) = metrics_server(&[]);
    let out = run_client(
        &["tcp", "127.0.0.1", "-p", &server.port_str(), "-t", "0.3"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = std::env::temp_dir().join(format!("linerate-prom-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: linerate\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .expect("config");
    let web = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    let web_addr = web.local_addr().expect("addr").to_string();
    drop(web);
    let _prom = Prom(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={web_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let query = "/api/v1/query?query=linerate_tests_total%7Boutcome%3D%22completed%22%7D";
    let mut last = String::new();
    let ok = eventually(Duration::from_secs(30), || {
        last = http_get(&web_addr, query).unwrap_or_default();
        last.contains("\"linerate_tests_total\"") && last.contains("\"1\"]")
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "Prometheus never reported the counter: {last}");
}

#[test]
fn issue_10_systemd_unit_verifies() {
    if !has("systemd-analyze") {
        println!("SKIP systemd unit check: systemd-analyze not installed");
        return;
    }
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/linerate-server.service"
    ))
    .expect("unit");
    for needle in [
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "LimitNOFILE=",
    ] {
        assert!(unit.contains(needle), "unit lacks {needle}");
    }
    // Verify a copy whose ExecStart names this build (verify checks it exists).
    let dir = std::env::temp_dir().join(format!("linerate-unit-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("linerate-server.service");
    std::fs::write(
        &path,
        unit.replace("/usr/bin/linerate", crate::helpers::bin()),
    )
    .expect("write unit");
    let out = Command::new("systemd-analyze")
        .args(["verify", path.to_str().expect("utf-8")])
        .output()
        .expect("systemd-analyze");
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    assert!(
        !err.contains("linerate-server.service:"),
        "warnings about the unit: {err}"
    );
}

/// Idle connections to the metrics port do not hold a scrape up: with 12
/// open and silent (each used to cost the next scrape its 2 s read
/// limit), and with more than the responder serves at once (the oldest
/// make room), a scrape is answered within a second.
#[test]
fn issue_28_idle_metrics_connections_do_not_delay_a_scrape() {
    let (_server, addr) = metrics_server(&[]);
    for idle in [12, 40] {
        let held: Vec<TcpStream> = (0..idle)
            .map(|_| TcpStream::connect(&addr).expect("idle connection"))
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let t = std::time::Instant::now();
        let text = http_get(&addr, "/metrics").expect("scrape");
        let took = t.elapsed();
        assert!(text.contains("linerate_active_tests"), "{text}");
        assert!(
            took < Duration::from_secs(1),
            "{idle} idle: scrape took {took:?}"
        );
        drop(held);
    }
}
