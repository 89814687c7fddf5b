//! The server's resource limits on one test, beyond the per-field checks of
//! [`crate::negotiate::negotiate`]: the memory a test's buffers cost, how long a
//! count-limited test can take at its pace, the interval between records
//! (the server's idle watch needs them), the bit rate of a test (`--max-rate`)
//! and of all running tests together (`--max-total-rate`, [`RateBudget`]).
//!
//! Each refusal names the limit and the server flag that sets it; each
//! clamp adds a note the client prints.

use std::sync::{Arc, Mutex};

use std::time::Duration;

use crate::spec::{Direction, Limit, TestSpec};

/// How long each handshake step may take (the server's default for
/// `--handshake-timeout`; the client's own limit on each step).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The least TCP pacing rate, bit/s: the kernel paces whole bytes per
/// second (`SO_MAX_PACING_RATE`), so a lower rate cannot be held. Every
/// TCP rate a peer asks for (linerate's `--rate`, iperf3's `-b`) is at
/// least this or refused, never run unpaced.
pub const MIN_TCP_RATE_BPS: u64 = 8;

/// Descriptors a process keeps beside its data sockets (stdio, control
/// connections, listener, epoll sets, `/proc` files).
pub const SPARE_FDS: u64 = 64;

/// A server's default `--max-flows`.
pub const DEFAULT_MAX_FLOWS: u32 = 10_000;

/// What a server accepts. Values above a limit are refused, except the
/// socket window, which is clamped (a smaller window still gives a valid,
/// if slower, test, and the note says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    pub max_streams: u16,
    /// Most flows per direction one `--flows` test may ask for (event
    /// loops: flows cost sockets and memory, not threads).
    pub max_flows: u32,
    /// The server's hard `RLIMIT_NOFILE`, its soft limit raised to it
    /// (`None`: not known, no check): a test needing more descriptors
    /// is refused before any data connection opens.
    pub max_fds: Option<u64>,
    pub max_len: u32,
    pub max_time_ms: u64,
    pub max_omit_ms: u64,
    pub max_window: u32,
    pub min_interval_ms: u64,
    /// Longest interval between records (the idle watch reads them).
    pub max_interval_ms: u64,
    /// Buffers one test may cost ([`test_memory`]).
    pub max_test_memory: u64,
    /// Most bit/s per stream test (TCP or UDP), all streams of both
    /// directions together; `None`: no limit.
    pub max_rate_bps: Option<u64>,
    /// Most bit/s of all running tests together; `None`: no limit.
    pub max_total_rate_bps: Option<u64>,
    /// What running tests hold of `max_total_rate_bps` when this one is
    /// negotiated (set by [`RateBudget`]).
    pub total_rate_in_use_bps: u64,
    /// Each handshake step's time limit on the server.
    pub handshake_timeout_ms: u64,
    /// Engines a client may ask for with `--server-engine` (empty: none).
    pub server_engines: Vec<EngineOffer>,
    /// Why the server's own engine cannot run a test that does not ask
    /// for another engine with `--server-engine`, naming the engine (the
    /// engine crate's `EngineKind::server_refusal`: e.g.
    /// `zerocopy:sendfile` serves TCP streams only, `xdp` UDP tests only,
    /// `uring --flows` needs multishot receives); asked at admission, by
    /// the native and the iperf3 sessions alike, so the test is refused,
    /// not failed at run time. The only place a server's own engine
    /// refuses a test.
    pub own_engine_refusal: Option<EngineRefusal>,
}

/// A server engine's refusal of a test ([`ServerLimits::own_engine_refusal`]):
/// the reason it cannot run a spec, or `None`. The engine crate decides;
/// this crate only asks.
#[derive(Clone)]
pub struct EngineRefusal(Arc<RefuseFn>);

/// Why an engine cannot run a spec (`None`: it can).
type RefuseFn = dyn Fn(&TestSpec) -> Option<String> + Send + Sync;

impl EngineRefusal {
    pub fn new(f: impl Fn(&TestSpec) -> Option<String> + Send + Sync + 'static) -> Self {
        EngineRefusal(Arc::new(f))
    }

    /// Why `spec` cannot run (`None`: it can).
    pub fn of(&self, spec: &TestSpec) -> Option<String> {
        (self.0)(spec)
    }
}

impl std::fmt::Debug for EngineRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineRefusal")
    }
}

/// The same refusal (one engine's), not an equal-looking one.
impl PartialEq for EngineRefusal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EngineRefusal {}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_streams: 128,
            max_flows: DEFAULT_MAX_FLOWS,
            max_fds: None,
            max_len: 16 * 1024 * 1024,
            max_time_ms: 24 * 3600 * 1000,
            max_omit_ms: 600 * 1000,
            max_window: 1 << 30,
            min_interval_ms: 10,
            max_interval_ms: DEFAULT_MAX_INTERVAL_MS,
            max_test_memory: DEFAULT_MAX_TEST_MEMORY,
            max_rate_bps: None,
            max_total_rate_bps: None,
            total_rate_in_use_bps: 0,
            handshake_timeout_ms: HANDSHAKE_TIMEOUT.as_millis() as u64,
            server_engines: Vec::new(),
            own_engine_refusal: None,
        }
    }
}

impl ServerLimits {
    /// `--handshake-timeout`: how long each setup step of a test may take
    /// on this server, for every protocol (native sessions and iperf3's).
    pub fn handshake(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    /// Whether this server limits rates (`--max-rate` or
    /// `--max-total-rate`), so a client's pace is its agreement, watched
    /// while it runs.
    pub fn caps_rate(&self) -> bool {
        self.max_rate_bps.is_some() || self.max_total_rate_bps.is_some()
    }

    /// No server-chosen limit at all: what [`crate::negotiate::negotiate`] still refuses
    /// against these is what no server could run (a UDP message over one
    /// datagram, zero streams, …), so a client checks its own spec against
    /// them before sending it and says so as a usage error.
    pub fn unlimited() -> Self {
        ServerLimits {
            max_streams: u16::MAX,
            max_flows: u32::MAX,
            max_len: u32::MAX,
            max_time_ms: u64::MAX,
            max_omit_ms: u64::MAX,
            max_window: u32::MAX,
            min_interval_ms: 0,
            max_interval_ms: u64::MAX,
            max_test_memory: u64::MAX,
            max_rate_bps: None,
            max_total_rate_bps: None,
            ..ServerLimits::default()
        }
    }
}

/// A spec the server refuses: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: &'static str,
    pub reason: String,
}

/// An engine a client may ask the server to use (`--server-engine`), and
/// why the server refuses it, if it does (not allowed by its
/// `--allow-engines`, or not supported by its kernel).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EngineOffer {
    pub name: String,
    pub refused: Option<String>,
}

/// Checks a client's `--server-engine` request against the server's
/// offers; the error is the refusal message the client prints.
pub fn check_server_engine(asked: &str, offers: &[EngineOffer]) -> Result<(), SpecError> {
    let err = |reason: String| {
        Err(SpecError {
            field: "server_engine",
            reason,
        })
    };
    if offers.is_empty() {
        return err("this server takes no --server-engine requests".into());
    }
    match offers.iter().find(|o| o.name == asked) {
        None => err(format!(
            "{asked:?} is not an engine this server knows (it knows {})",
            offers
                .iter()
                .map(|o| o.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Some(EngineOffer {
            refused: Some(why), ..
        }) => err(format!("{asked}: {why}")),
        Some(_) => Ok(()),
    }
}

/// Default `--max-test-memory`: buffers of one test (1 GiB).
pub const DEFAULT_MAX_TEST_MEMORY: u64 = 1 << 30;
/// Longest interval between records a server accepts by default: its idle
/// watch looks at them.
pub const DEFAULT_MAX_INTERVAL_MS: u64 = 60_000;

/// Socket buffers for an unpaced (`-b 0`) UDP test given no window: an
/// unpaced sender outruns the receiver in bursts, and the kernel's default
/// receive buffer (rmem_default, 208 KiB) overflowed — 70–74% of 64-byte
/// datagrams lost on loopback with the batch engine, 0% with 32 MiB (two
/// runs each, issue 8's measurements). Lowered with many sockets so the
/// test needs at most half of `max_test_memory` (which [`test_memory`]
/// counts as 4 × window per connection); `None` (the kernel's default)
/// below 1 MiB.
pub fn unpaced_udp_window(connections: usize, max_test_memory: u64) -> Option<u32> {
    const DEEP: u64 = 32 << 20;
    let per = max_test_memory / 2 / (4 * connections.max(1) as u64);
    let w = DEEP.min(per);
    (w >= 1 << 20).then_some(w as u32)
}

/// What one type of test asks of a server's budgets: each entry of the
/// test-type table (`crate::test_type`) carries one, and the checks below
/// read it rather than the test's kind.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// The payload bit rate one sending stream asks for: `Some(None)`
    /// unpaced bulk, `None` not bulk (request/response: one message per
    /// flow in flight).
    pub stream_rate: fn(&TestSpec) -> Option<Option<u64>>,
    /// How a server paces the test's own senders down to its rate limit
    /// when only it sends; `None`: it cannot, and a test over the limit is
    /// refused.
    pub clamp: Option<Clamp>,
    /// The largest I/O buffer one data connection holds.
    pub io_len: fn(&TestSpec) -> u32,
    /// The data connections the test holds at once.
    pub connections: fn(&TestSpec) -> u64,
}

/// How a server's rate limit paces a test's senders (stream tests).
#[derive(Debug, Clone, Copy)]
pub struct Clamp {
    /// The least a stream can be paced at (TCP: the kernel paces whole
    /// bytes per second).
    pub min_bps: u64,
    /// Sets the pace of every sending stream to `bps`.
    pub apply: fn(&mut TestSpec, bps: u64),
}

/// What one test's buffers cost the server, roughly: per data connection
/// one I/O buffer of the largest message plus its socket buffers (the
/// kernel doubles a requested window, once for each direction).
pub fn test_memory(spec: &TestSpec, budget: &Budget) -> u64 {
    let len = (budget.io_len)(spec);
    let window = spec
        .udp
        .as_ref()
        .and_then(|u| u.window)
        .or(spec.tcp.window)
        .unwrap_or(0);
    let conns = (budget.connections)(spec);
    // Event loops hold one I/O buffer per thread, not per flow; each
    // flow's socket buffers still count.
    let buffers = match spec.flows {
        Some(f) => conns.min(u64::from(f.threads.max(1))),
        None => conns,
    };
    buffers
        .saturating_mul(u64::from(len))
        .saturating_add(conns.saturating_mul(4 * u64::from(window)))
}

/// A socket window clamped to `--max-window`, with a note.
pub fn clamp_window(window: &mut Option<u32>, limits: &ServerLimits, notes: &mut Vec<String>) {
    if let Some(w) = window.filter(|&w| w > limits.max_window) {
        notes.push(format!(
            "window clamped from {w} to {} bytes by the server",
            limits.max_window
        ));
        *window = Some(limits.max_window);
    }
}

/// Checks what `spec`'s buffers cost against `--max-test-memory`: every
/// test's, whatever its protocol (an iperf3 client's `-w` too).
pub fn check_memory(
    spec: &TestSpec,
    budget: &Budget,
    limits: &ServerLimits,
) -> Result<(), SpecError> {
    let mem = test_memory(spec, budget);
    if mem > limits.max_test_memory {
        return Err(SpecError {
            field: "memory",
            reason: format!(
                "the test's buffers need about {} ({} connections × (len + 4 × window)), this server allows {} per test (--max-test-memory)",
                mib(mem),
                spec.connection_count(),
                mib(limits.max_test_memory)
            ),
        });
    }
    Ok(())
}

/// Checks `spec` (already negotiated field by field) against the limits
/// on the whole test; may clamp the server's own UDP senders to
/// `max_rate_bps`, with a note.
pub fn check(
    spec: &mut TestSpec,
    budget: &Budget,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let err = |field, reason: String| Err(SpecError { field, reason });
    check_memory(spec, budget, limits)?;
    if spec.interval_ms > limits.max_interval_ms {
        return err(
            "interval",
            format!(
                "{} ms requested, this server allows at most {} ms",
                spec.interval_ms, limits.max_interval_ms
            ),
        );
    }
    // Only a UDP stream test carries UDP parameters (negotiated before).
    if let (Limit::Datagrams(_), Some(_)) = (spec.limit, &spec.udp) {
        // A paced count has a known duration: refuse it up front rather
        // than cut it at --max-time. (Unpaced counts are cut when the
        // limit passes; see the session's data deadline.)
        if let Some(ms) = spec.data_phase_ms() {
            if ms > limits.max_time_ms {
                return err(
                    "count",
                    format!(
                        "at the requested pace the count takes about {} s, this server allows at most {} s (--max-time)",
                        ms / 1000,
                        limits.max_time_ms / 1000
                    ),
                );
            }
        }
    }
    check_rate(spec, budget, limits, notes)
}

/// Sending streams of a stream test, both directions together.
fn sending_streams(spec: &TestSpec) -> u64 {
    let per = u64::from(spec.per_direction());
    match spec.direction {
        Direction::Bidir => 2 * per,
        _ => per,
    }
}

/// The bit rate `spec` may use, all its sending streams together: what a
/// server reserves of its `--max-total-rate` for it. `None`: unpaced bulk
/// (unbounded); request/response tests without load count as 0.
pub fn test_rate(spec: &TestSpec, budget: &Budget) -> Option<u64> {
    match (budget.stream_rate)(spec) {
        None => Some(0),
        Some(per) => per.map(|b| b.saturating_mul(sending_streams(spec))),
    }
}

/// `--max-rate` (per test) and what is left of `--max-total-rate` (all
/// running tests): a test whose client sends must not ask for more
/// (refused, naming the limit); one where only the server sends is paced
/// down to it (clamped, noted). The clamp sets the kernel pacing rate of
/// the server's TCP senders or the pace of its UDP senders.
fn check_rate(
    spec: &mut TestSpec,
    budget: &Budget,
    limits: &ServerLimits,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let left = limits
        .max_total_rate_bps
        .map(|t| t.saturating_sub(limits.total_rate_in_use_bps));
    let (max, total_binds) = match (limits.max_rate_bps, left) {
        (None, None) => return Ok(()),
        (Some(m), Some(l)) if l < m => (l, true),
        (Some(m), _) => (m, false),
        (None, Some(l)) => (l, true),
    };
    let Some(per_stream) = (budget.stream_rate)(spec) else {
        return Ok(());
    };
    let streams = sending_streams(spec);
    let total = per_stream.map(|b| b.saturating_mul(streams));
    if total.is_some_and(|t| t <= max) {
        return Ok(());
    }
    let flag = if total_binds {
        "--max-total-rate"
    } else {
        "--max-rate"
    };
    let cap = if total_binds {
        format!(
            "{} of this server's {} are free ({} in use by running tests; {flag})",
            rate(max),
            rate(limits.max_total_rate_bps.unwrap_or(0)),
            rate(limits.total_rate_in_use_bps),
        )
    } else {
        format!(
            "this server accepts at most {} per test ({flag})",
            rate(max)
        )
    };
    // A refusal the budget causes is a busy server, not a bad request.
    let field = if total_binds { "total_rate" } else { "rate" };
    let asked = total.map_or("unpaced (as fast as possible)".to_owned(), |t| {
        format!("{} in all ({streams} streams)", rate(t))
    });
    let per = max / streams;
    let Some(clamp) = budget.clamp else {
        return Err(SpecError {
            field,
            reason: format!("load streams are unpaced bulk TCP; {cap}"),
        });
    };
    let min = clamp.min_bps;
    if spec.direction != Direction::Reverse || per < min {
        let hint = if per < min {
            String::new()
        } else {
            format!(": ask for at most {per} bit/s per stream with --rate")
        };
        return Err(SpecError {
            field,
            reason: format!("{asked} requested, {cap}{hint}"),
        });
    }
    // Only the server sends: pace it within the limit.
    (clamp.apply)(spec, per);
    notes.push(format!(
        "rate clamped from {asked} to {} per stream by the server ({flag} {})",
        rate(per),
        rate(max)
    ));
    Ok(())
}

/// `--max-total-rate`: the bit rate a server's running tests may use
/// together. Each test reserves its agreed rate ([`test_rate`]) when it is
/// negotiated and gives it back when its session ends; a test that does
/// not fit what is left is refused as busy, or clamped if only the server
/// sends. Negotiation and reservation happen under one lock, so two tests
/// negotiated at once cannot both take the same bits. (A lock is no I/O:
/// this stays sans-IO.)
#[derive(Debug)]
pub struct RateBudget {
    pub(crate) total: u64,
    pub(crate) in_use: Mutex<u64>,
}

/// One test's share of a [`RateBudget`]; released when dropped.
#[derive(Debug)]
pub struct RateReservation {
    pub(crate) budget: Arc<RateBudget>,
    pub(crate) bps: u64,
}

impl Drop for RateReservation {
    fn drop(&mut self) {
        if let Ok(mut u) = self.budget.in_use.lock() {
            *u = u.saturating_sub(self.bps);
        }
    }
}

impl RateReservation {
    /// The bit rate this test holds.
    pub fn bps(&self) -> u64 {
        self.bps
    }
}

impl RateBudget {
    pub fn new(total_bps: u64) -> Arc<Self> {
        Arc::new(RateBudget {
            total: total_bps,
            in_use: Mutex::new(0),
        })
    }

    /// The budget: `--max-total-rate`'s bit/s.
    pub fn total_bps(&self) -> u64 {
        self.total
    }

    /// Bit/s running tests hold now.
    pub fn in_use(&self) -> u64 {
        self.in_use.lock().map_or(self.total, |u| *u)
    }

    /// Reserves `bps` (a test that takes no clamp: an iperf3 client's),
    /// or says in words why it does not fit what running tests left.
    pub fn reserve(self: &Arc<Self>, bps: u64) -> Result<RateReservation, String> {
        let mut in_use = self
            .in_use
            .lock()
            .map_err(|_| "the server's rate budget is unavailable".to_owned())?;
        let free = self.total.saturating_sub(*in_use);
        if bps > free {
            return Err(format!(
                "{} of this server's {} are free ({} in use by running tests; --max-total-rate)",
                rate(free),
                rate(self.total),
                rate(*in_use)
            ));
        }
        *in_use = in_use.saturating_add(bps);
        Ok(RateReservation {
            budget: Arc::clone(self),
            bps,
        })
    }
}

fn rate(bps: u64) -> String {
    linerate_stats::units::format_rate(bps as f64)
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::negotiate;
    use crate::spec::{Pace, Protocol, TestKind, UdpSpec};

    fn udp(direction: Direction, pace: Pace, streams: u16) -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction,
            streams,
            len: 1000,
            udp: Some(UdpSpec {
                pace,
                ..UdpSpec::default()
            }),
            ..TestSpec::default()
        }
    }

    #[test]
    fn issue_10_memory_budget_refuses_huge_tests() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            streams: 128,
            len: 16 << 20,
            ..TestSpec::default()
        };
        let e = negotiate(&spec, &ServerLimits::default()).expect_err("4 GiB refused");
        assert_eq!(e.field, "memory");
        assert!(e.reason.contains("--max-test-memory"), "{e}");
        let fits = TestSpec { streams: 4, ..spec };
        assert!(negotiate(&fits, &ServerLimits::default()).is_ok());
    }

    #[test]
    fn issue_10_paced_count_longer_than_max_time_is_refused() {
        let mut spec = udp(Direction::Forward, Pace::MilliPps(1_000_000), 1);
        spec.limit = Limit::Datagrams(100_000); // 100 s at 1000/s
        let limits = ServerLimits {
            max_time_ms: 10_000,
            ..ServerLimits::default()
        };
        let e = negotiate(&spec, &limits).expect_err("too long");
        assert_eq!(e.field, "count");
        spec.limit = Limit::Datagrams(5_000);
        assert!(negotiate(&spec, &limits).is_ok());
    }

    #[test]
    fn issue_10_long_intervals_are_refused() {
        let spec = TestSpec {
            interval_ms: 3_600_000,
            ..TestSpec::default()
        };
        let e = negotiate(&spec, &ServerLimits::default()).expect_err("refused");
        assert_eq!(e.field, "interval");
    }

    #[test]
    fn max_rate_refuses_client_senders_and_clamps_the_servers() {
        let limits = ServerLimits {
            max_rate_bps: Some(100_000_000),
            ..ServerLimits::default()
        };
        let fast = udp(Direction::Forward, Pace::Rate(60_000_000), 2);
        let e = negotiate(&fast, &limits).expect_err("120 Mbit/s > 100");
        assert_eq!(e.field, "rate");
        assert!(e.reason.contains("--max-rate"), "{e}");
        let unpaced = udp(Direction::Bidir, Pace::Unlimited, 1);
        assert_eq!(
            negotiate(&unpaced, &limits).expect_err("refused").field,
            "rate"
        );
        let rev = udp(Direction::Reverse, Pace::Unlimited, 4);
        let n = negotiate(&rev, &limits).expect("clamped");
        assert_eq!(
            n.spec.udp.as_ref().map(|u| u.pace),
            Some(Pace::Rate(25_000_000))
        );
        assert!(
            n.notes.iter().any(|n| n.contains("--max-rate")),
            "{:?}",
            n.notes
        );
        let slow = udp(Direction::Forward, Pace::MilliPps(1_000_000), 1); // 8 Mbit/s
        assert!(negotiate(&slow, &limits).is_ok());
    }
    fn tcp(direction: Direction, rate: Option<u64>, streams: u16) -> TestSpec {
        TestSpec {
            direction,
            streams,
            tcp: crate::spec::TcpOptions {
                rate,
                ..Default::default()
            },
            ..TestSpec::default()
        }
    }

    #[test]
    fn issue_10_max_rate_paces_tcp_servers_and_refuses_faster_clients() {
        let limits = ServerLimits {
            max_rate_bps: Some(100_000_000),
            ..ServerLimits::default()
        };
        let e = negotiate(&tcp(Direction::Forward, None, 1), &limits).expect_err("unpaced");
        assert_eq!(e.field, "rate");
        assert!(e.reason.contains("--max-rate"), "{e}");
        assert!(
            e.reason.contains("100000000 bit/s per stream with --rate"),
            "{e}"
        );
        let ok = tcp(Direction::Forward, Some(40_000_000), 2);
        assert_eq!(negotiate(&ok, &limits).expect("80 Mbit/s").spec, ok);
        // Bidir counts both directions: 2 × 2 × 40 Mbit/s.
        let e = negotiate(&tcp(Direction::Bidir, Some(40_000_000), 2), &limits)
            .expect_err("160 Mbit/s");
        assert!(e.reason.contains("25000000 bit/s per stream"), "{e}");
        let n = negotiate(&tcp(Direction::Reverse, None, 4), &limits).expect("clamped");
        assert_eq!(n.spec.tcp.rate, Some(25_000_000));
        assert!(
            n.notes.iter().any(|x| x.contains("--max-rate")),
            "{:?}",
            n.notes
        );
        let slow = tcp(Direction::Reverse, Some(1_000_000), 4);
        assert_eq!(negotiate(&slow, &limits).expect("within").spec, slow);
        // Request/response runs one message per flow at a time; its load
        // streams are unpaced bulk.
        let mut rr = TestSpec {
            kind: TestKind::Rr,
            rr: Some(crate::spec::RrSpec::default()),
            ..TestSpec::default()
        };
        assert!(negotiate(&rr, &limits).is_ok());
        if let Some(r) = rr.rr.as_mut() {
            r.under_load = 1;
        }
        let e = negotiate(&rr, &limits).expect_err("load");
        assert!(e.reason.contains("load streams"), "{e}");
    }

    #[test]
    fn issue_10_total_rate_is_shared_by_running_tests() {
        let budget = RateBudget::new(100_000_000);
        let limits = ServerLimits::default();
        let (first, held) = budget
            .negotiate(&tcp(Direction::Reverse, None, 2), &limits)
            .expect("clamped to the whole budget");
        assert_eq!(first.spec.tcp.rate, Some(50_000_000));
        assert!(first.notes.iter().any(|x| x.contains("--max-total-rate")));
        assert_eq!(budget.in_use(), 100_000_000);
        let fwd = tcp(Direction::Forward, Some(10_000_000), 1);
        let e = budget.negotiate(&fwd, &limits).expect_err("nothing left");
        assert_eq!(e.field, "total_rate");
        assert!(e.reason.contains("in use by running tests"), "{e}");
        let e = budget
            .negotiate(&tcp(Direction::Reverse, None, 1), &limits)
            .expect_err("nothing left to clamp to");
        assert_eq!(e.field, "total_rate");
        drop(held);
        assert_eq!(budget.in_use(), 0);
        let (_, a) = budget.negotiate(&fwd, &limits).expect("fits now");
        let (_, b) = budget.negotiate(&fwd, &limits).expect("fits too");
        assert_eq!(
            (a.bps(), b.bps(), budget.in_use()),
            (10_000_000, 10_000_000, 20_000_000)
        );
        // The per-test limit still applies below what is left.
        let tight = ServerLimits {
            max_rate_bps: Some(5_000_000),
            ..ServerLimits::default()
        };
        let e = budget.negotiate(&fwd, &tight).expect_err("over --max-rate");
        assert_eq!(e.field, "rate");
        // Request/response tests without load hold nothing.
        let rr = TestSpec {
            kind: TestKind::Rr,
            rr: Some(crate::spec::RrSpec::default()),
            ..TestSpec::default()
        };
        let (_, c) = budget.negotiate(&rr, &limits).expect("rr");
        assert_eq!(c.bps(), 0);
    }

    #[test]
    fn issue_8_server_engine_requests_are_checked_against_the_offers() {
        let offers = [
            EngineOffer {
                name: "syscall".into(),
                refused: None,
            },
            EngineOffer {
                name: "uring".into(),
                refused: Some("not supported by the server's kernel: io_uring disabled".into()),
            },
        ];
        assert!(check_server_engine("syscall", &offers).is_ok());
        let e = check_server_engine("uring", &offers).expect_err("refused");
        assert!(e.to_string().contains("io_uring disabled"), "{e}");
        let e = check_server_engine("warp", &offers).expect_err("unknown");
        assert!(e.to_string().contains("knows syscall, uring"), "{e}");
        assert!(check_server_engine("syscall", &[]).is_err());
    }
}
