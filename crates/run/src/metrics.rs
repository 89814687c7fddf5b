//! `linerate server --metrics ADDR:PORT`: the server's counters in the
//! OpenMetrics text format (prometheus-client), served by a tiny HTTP
//! responder, and `--json-lines FILE`, one JSON record per
//! finished test, for log shippers.
//!
//! The responder is deliberately small and bounded: a thread per
//! connection, at most [`MAX_CONNECTIONS`] at once (a new one past that
//! closes the oldest, so idle connections cannot keep a scrape out), a 2 s
//! limit to read a request of at most 8 KiB, `GET /metrics` only. It shares
//! nothing with the test port, so a scrape never competes with a test for
//! a connection slot. (A small hand-written responder rather than an HTTP
//! server crate: one fixed route and no keep-alive need nothing more.)

use std::collections::{HashSet, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Context as _, Result};
use linerate_proto::measure::SideResults;
use linerate_proto::spec::TestSpec;
use linerate_proto::wire::Side;
use linerate_report::Report;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::log::log;

type Labels = Vec<(&'static str, String)>;

/// Most distinct clients with a "last result" series: the label set a
/// scrape returns stays bounded however many addresses test.
const MAX_LAST_RESULT_CLIENTS: usize = 256;
/// Metrics connections served at once.
const MAX_CONNECTIONS: usize = 16;
/// How long a metrics connection may take to send its request, and each
/// write of the answer.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(2);

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    tests: Family<Labels, Counter>,
    refused: Family<Labels, Counter>,
    rejected: Family<Labels, Counter>,
    limits_hit: Family<Labels, Counter>,
    bytes: Family<Labels, Counter>,
    datagrams: Family<Labels, Counter>,
    lost: Counter,
    active: Gauge,
    last_bps: Family<Labels, Gauge<f64, AtomicU64>>,
    last_clients: Mutex<HashSet<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("linerate"),
            tests: Family::default(),
            refused: Family::default(),
            rejected: Family::default(),
            limits_hit: Family::default(),
            bytes: Family::default(),
            datagrams: Family::default(),
            lost: Counter::default(),
            active: Gauge::default(),
            last_bps: Family::default(),
            last_clients: Mutex::new(HashSet::new()),
        };
        let r = &mut m.registry;
        r.register(
            "tests",
            "Tests served, by kind, protocol and outcome (completed or failed)",
            m.tests.clone(),
        );
        r.register(
            "tests_refused",
            "Tests refused, by reason (busy, invalid, version, auth, internal)",
            m.refused.clone(),
        );
        r.register(
            "connections_rejected",
            "Connections closed before their first frame was read, by reason",
            m.rejected.clone(),
        );
        r.register(
            "limits_hit",
            "Server limits that ended or refused something, by limit",
            m.limits_hit.clone(),
        );
        r.register(
            "payload_bytes",
            "Payload bytes this server moved in completed tests, by direction",
            m.bytes.clone(),
        );
        r.register(
            "datagrams",
            "UDP datagrams this server sent or received in completed tests",
            m.datagrams.clone(),
        );
        r.register(
            "udp_lost_datagrams",
            "Datagrams counted lost on the way to this server in completed tests",
            m.lost.clone(),
        );
        r.register("active_tests", "Tests running now", m.active.clone());
        r.register(
            "last_result_bytes_per_second",
            "Receiver-side payload rate of the last completed stream test, per client and kind (bytes/s: Prometheus' base unit)",
            m.last_bps.clone(),
        );
        m
    }
}

impl Metrics {
    pub fn active(&self, n: usize) {
        self.active.set(n as i64);
    }

    pub fn refused(&self, code: &str) {
        inc(&self.refused, "reason", code, 1);
    }

    pub fn rejected(&self, reason: &'static str) {
        inc(&self.rejected, "reason", reason, 1);
    }

    pub fn limit_hit(&self, limit: &'static str) {
        inc(&self.limits_hit, "limit", limit, 1);
    }

    pub fn failed(&self, spec: Option<&TestSpec>) {
        self.tests.get_or_create(&test_labels(spec, "failed")).inc();
    }

    /// A completed test: its counts, from this server's own results.
    pub fn completed(&self, spec: &TestSpec, local: &SideResults, report: &Report, client: &str) {
        self.tests
            .get_or_create(&test_labels(Some(spec), "completed"))
            .inc();
        for s in &local.streams {
            let dir = if s.sender == Some(Side::Server) {
                "sent"
            } else {
                "received"
            };
            inc(&self.bytes, "direction", dir, s.bytes);
            if let Some(u) = &s.udp_send {
                inc(&self.datagrams, "direction", "sent", u.datagrams);
            }
            if let Some(u) = &s.udp_recv {
                inc(&self.datagrams, "direction", "received", u.received);
                self.lost.inc_by(u.lost.unwrap_or(0));
            }
        }
        if report.sums.is_empty() {
            return;
        }
        let known = self.last_clients.lock().is_ok_and(|mut c| {
            c.contains(client) || (c.len() < MAX_LAST_RESULT_CLIENTS && c.insert(client.to_owned()))
        });
        if known {
            let bps: f64 = report.sums.iter().map(|s| s.receiver_bits_per_second).sum();
            let labels = vec![("client", client.to_owned()), ("kind", kind_name(spec))];
            self.last_bps.get_or_create(&labels).set(bps / 8.0);
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn text(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// The same in the classic Prometheus text format (0.0.4), for scrapers
    /// and tools (promtool) that do not ask for OpenMetrics: a counter's
    /// HELP and TYPE name its `_total` series, and there is no `# EOF`.
    pub fn classic_text(&self) -> String {
        let om = self.text();
        let counters: HashSet<&str> = om
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.strip_suffix(" counter"))
            .collect();
        let mut out = String::with_capacity(om.len());
        for line in om.lines() {
            if line == "# EOF" || line.starts_with("# UNIT ") {
                continue;
            }
            let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
                let rest = line.strip_prefix(p)?;
                let (name, tail) = rest.split_once(' ')?;
                counters
                    .contains(name)
                    .then(|| format!("{p}{name}_total {tail}"))
            });
            out.push_str(renamed.as_deref().unwrap_or(line));
            out.push('\n');
        }
        out
    }

    /// Serves `GET /metrics` on `addr` from a thread until the process ends.
    pub fn serve(self: &Arc<Self>, addr: SocketAddr) -> Result<SocketAddr> {
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("--metrics: cannot listen on {addr}"))?;
        let bound = listener.local_addr()?;
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("linerate-metrics".into())
            .spawn(move || {
                let open = Arc::new(Mutex::new(OpenConnections::default()));
                for conn in listener.incoming() {
                    match conn {
                        Ok(c) => me.answer_on_thread(c, &open),
                        Err(_) => std::thread::sleep(Duration::from_millis(50)),
                    }
                }
            })
            .context("starting the metrics thread")?;
        Ok(bound)
    }

    /// Answers `c` on a thread of its own, making room first: past
    /// [`MAX_CONNECTIONS`] the oldest open connection is shut down (its
    /// thread then ends at once).
    fn answer_on_thread(self: &Arc<Self>, c: TcpStream, open: &Arc<Mutex<OpenConnections>>) {
        let Ok(handle) = c.try_clone() else {
            return;
        };
        let Ok(mut list) = open.lock() else {
            return;
        };
        let id = list.admit(handle);
        drop(list);
        let (me, list) = (Arc::clone(self), Arc::clone(open));
        let spawned = std::thread::Builder::new()
            .name("linerate-metrics-conn".into())
            .spawn(move || {
                me.answer(c);
                if let Ok(mut list) = list.lock() {
                    list.remove(id);
                }
            });
        if spawned.is_err() {
            if let Ok(mut list) = open.lock() {
                list.remove(id);
            }
        }
    }

    fn answer(&self, mut c: TcpStream) {
        let deadline = Instant::now() + CONNECTION_DEADLINE;
        let mut req = Vec::new();
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            if c.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match c.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        let _ = c.set_write_timeout(Some(CONNECTION_DEADLINE));
        let first = req.split(|&b| b == b'\n').next().unwrap_or_default();
        // Prometheus asks for OpenMetrics; anything else gets the classic format.
        let wants_om = String::from_utf8_lossy(&req)
            .to_ascii_lowercase()
            .contains("application/openmetrics-text");
        let (status, ctype, body) = if !first.starts_with(b"GET /metrics ") {
            (
                "404 Not Found",
                "text/plain",
                "only GET /metrics here\n".into(),
            )
        } else if wants_om {
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                self.text(),
            )
        } else {
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                self.classic_text(),
            )
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = c
            .write_all(head.as_bytes())
            .and_then(|()| c.write_all(body.as_bytes()));
    }
}

/// The metrics connections being answered (a handle to each, to shut the
/// oldest down when a new one needs room), by id.
#[derive(Debug, Default)]
struct OpenConnections {
    next: u64,
    open: VecDeque<(u64, TcpStream)>,
}

impl OpenConnections {
    /// Registers `c`, shutting down the oldest if [`MAX_CONNECTIONS`] are
    /// open; its id.
    fn admit(&mut self, c: TcpStream) -> u64 {
        if self.open.len() >= MAX_CONNECTIONS {
            if let Some((_, oldest)) = self.open.pop_front() {
                let _ = oldest.shutdown(std::net::Shutdown::Both);
            }
        }
        self.next += 1;
        self.open.push_back((self.next, c));
        self.next
    }

    fn remove(&mut self, id: u64) {
        self.open.retain(|(i, _)| *i != id);
    }
}

/// Adds `by` to the series of `family` whose one label `name` is `value`.
fn inc(family: &Family<Labels, Counter>, name: &'static str, value: &str, by: u64) {
    family
        .get_or_create(&vec![(name, value.to_owned())])
        .inc_by(by);
}

/// The name a unit enum has on the wire (its serde name), for labels and
/// log lines: `RefuseCode::Busy` is `busy`, `TestKind::Rr` is `rr`.
pub fn wire_name(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn kind_name(spec: &TestSpec) -> String {
    format!("{}_{}", wire_name(&spec.kind), spec.protocol.name())
}

fn test_labels(spec: Option<&TestSpec>, outcome: &str) -> Labels {
    vec![
        ("kind", spec.map_or("unknown".into(), kind_name)),
        ("outcome", outcome.to_owned()),
    ]
}

/// `--json-lines FILE`: appends one line per finished test.
#[derive(Debug)]
pub struct JsonLines {
    file: Mutex<std::fs::File>,
}

impl JsonLines {
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("--json-lines: cannot open {}", path.display()))?;
        Ok(JsonLines {
            file: Mutex::new(file),
        })
    }

    /// Appends `record` as one line (written with one call, so lines from
    /// concurrent tests never interleave).
    pub fn append(&self, record: &impl serde::Serialize) {
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        if let Ok(mut f) = self.file.lock() {
            if let Err(e) = f.write_all(&line) {
                log!("linerate server: --json-lines: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_every_family_and_ends_with_eof() {
        let m = Metrics::default();
        m.refused("busy");
        m.rejected("max_connections");
        m.limit_hit("max_time");
        m.failed(None);
        m.active(2);
        let t = m.text();
        for needle in [
            "linerate_tests_refused_total{reason=\"busy\"} 1",
            "linerate_connections_rejected_total{reason=\"max_connections\"} 1",
            "linerate_limits_hit_total{limit=\"max_time\"} 1",
            "linerate_tests_total{kind=\"unknown\",outcome=\"failed\"} 1",
            "linerate_active_tests 2",
        ] {
            assert!(t.contains(needle), "{needle} not in:\n{t}");
        }
        assert!(t.ends_with("# EOF\n"), "{t}");
        let c = m.classic_text();
        assert!(
            c.contains("# TYPE linerate_tests_refused_total counter"),
            "{c}"
        );
        assert!(c.contains("# TYPE linerate_active_tests gauge"), "{c}");
        assert!(!c.contains("# EOF"), "{c}");
    }
}
