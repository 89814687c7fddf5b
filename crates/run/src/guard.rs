//! What the server checks about a connection before it spends anything on
//! it: whether its address may connect at all (`--allow`/`--deny`), whether
//! there is room for one more connection thread (`--max-connections`), and
//! whether its address has started too many tests lately
//! (`--max-tests-per-minute`), and how many control connections its address
//! has in the authentication exchange ([`PerSource`]). Also the log throttle,
//! so a flood of bad connections costs a bounded number of log lines, and
//! the one admission of a test ([`admit`], [`Admitted`]) that every
//! protocol (linerate and iperf3) and test kind passes through, a probe
//! beside a running test of the same client included ([`Ask::beside`]).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use linerate_proto::session::server::Admission;
use linerate_proto::wire::Token;

use crate::error::{Result, RunError};
use crate::log::log;
use crate::metrics::Metrics;

/// Default `--max-connections`: connections waiting to say who they are
/// (each holds a thread until it does, or its handshake time is up).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default `--idle-timeout`: a running stream test on which nothing moves
/// for this long is ended.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30);
/// Control connections one address may have before admission (in the
/// authentication exchange, or between their first frame and their Hello's
/// admission): a client needs one for a round trip, so more than a few at
/// once from one host is a flood holding threads, not a fleet.
pub const PRE_AUTH_PER_SOURCE: usize = 4;

/// Connections one address may hold before their first bytes say what
/// they are (a native first frame, an iperf3 cookie): three quarters of
/// `--max-connections`, so one host's silent connections leave a quarter
/// of the places to every other host. A client's own burst of data
/// connections (`-P 128`, `--flows`) each say who they are at once, so it
/// stays far below that.
pub fn first_bytes_per_source(max_connections: usize) -> usize {
    (max_connections - max_connections / 4).max(1)
}

/// The validated connection-level settings of a server. The handshake
/// time (`--handshake-timeout`) is not here: its one home is
/// `ServerLimits::handshake`, which bounds a connection's first bytes
/// as well as each setup step of a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardConfig {
    pub filter: AddressFilter,
    pub max_connections: usize,
    pub max_tests_per_minute: u32,
    pub idle: Duration,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            filter: AddressFilter::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_tests_per_minute: 0,
            idle: DEFAULT_IDLE,
        }
    }
}

/// The server's live connection-level state.
#[derive(Debug)]
pub struct Guard {
    pub cfg: GuardConfig,
    pub slots: ConnSlots,
    /// Tests running now (`--max-concurrent`).
    pub tests: TestSlots,
    pub rate: TestRate,
    /// Control connections before admission, per address.
    pub pre_auth: PerSource,
    /// Connections before their first bytes are read, per address.
    pub first_bytes: PerSource,
    /// Per-connection problems (refusals, stray data connections, accept
    /// errors).
    pub log: LogThrottle,
    /// How tests that failed ended, on an allowance of their own: a flood
    /// of per-connection lines (a failed test's own late data
    /// connections, thousands with `--flows`) cannot hide why the test
    /// failed, and failing tests are still throttled.
    pub outcomes: LogThrottle,
}

impl Guard {
    /// `max_concurrent`: tests that may run at once.
    pub fn new(cfg: GuardConfig, max_concurrent: usize) -> Self {
        Guard {
            slots: ConnSlots::new(cfg.max_connections),
            tests: TestSlots {
                running: Mutex::default(),
                max: max_concurrent,
            },
            rate: TestRate::new(cfg.max_tests_per_minute),
            pre_auth: PerSource::new(PRE_AUTH_PER_SOURCE),
            first_bytes: PerSource::new(first_bytes_per_source(cfg.max_connections)),
            log: LogThrottle::default(),
            outcomes: LogThrottle::default(),
            cfg,
        }
    }
}

/// `--max-concurrent`: the tests running now, of every protocol, and the
/// admissions of native tests by token, so that a probe beside one of
/// them ([`Ask::beside`]) runs under that test's admission.
#[derive(Debug)]
pub struct TestSlots {
    running: Mutex<Running>,
    max: usize,
}

#[derive(Debug, Default)]
struct Running {
    /// Admissions held: a test and the probe beside it hold one together.
    n: usize,
    /// Native tests' admissions by token.
    by_token: HashMap<Token, Holders>,
}

/// Who holds one native test's admission: the test, and one probe beside
/// it while the test runs (so probes cannot keep it alive after the test).
#[derive(Debug)]
struct Holders {
    /// The client's address: only it may run a probe beside the test.
    ip: IpAddr,
    test: bool,
    probe: bool,
}

/// What a test asks to be admitted as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ask {
    /// The test's own token (native tests), under which a probe may
    /// later run beside it.
    pub token: Option<Token>,
    /// The same client's running test this one runs beside
    /// ([`linerate_proto::wire::Hello::beside`]).
    pub beside: Option<Token>,
}

/// One admitted test's place among [`TestSlots`]; released when dropped
/// by the last of the test and the probe beside it.
#[derive(Debug)]
pub struct Admitted<'a> {
    tests: &'a TestSlots,
    metrics: &'a Metrics,
    /// The token of the admission held (the test's own, or the one it
    /// runs beside).
    token: Option<Token>,
    beside: bool,
}

impl Admitted<'_> {
    /// Whether this test runs beside another, under its admission.
    pub fn is_beside(&self) -> bool {
        self.beside
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let Ok(mut r) = self.tests.running.lock() else {
            return;
        };
        if let Some(t) = self.token {
            if let Some(h) = r.by_token.get_mut(&t) {
                if self.beside {
                    h.probe = false;
                } else {
                    h.test = false;
                }
                if h.test || h.probe {
                    return;
                }
                r.by_token.remove(&t);
            }
        }
        r.n -= 1;
        self.metrics.active(r.n);
    }
}

/// Whether there is room for one more test from `ip`: the one admission of
/// every protocol and test kind, asked for only once a client has
/// authenticated (or could not, as an iperf3 client of a keyed server, which
/// is refused without asking), so only real test attempts count against
/// `--max-tests-per-minute` and only they take a slot. An admitted test
/// holds its slot until its [`Admitted`] is dropped; a refusal says why.
/// A probe beside a running test ([`Ask::beside`]) takes no slot and no
/// count of its own: it joins that test's admission, if the test is
/// running, from the same address, with no other probe beside it.
pub fn admit<'a>(
    guard: &'a Guard,
    metrics: &'a Metrics,
    ip: IpAddr,
    ask: Ask,
) -> Result<Admitted<'a>, Admission> {
    if let Some(lead) = ask.beside {
        return join(&guard.tests, metrics, ip, lead);
    }
    let rate = guard.rate.admit(ip, Instant::now());
    if rate.is_err() {
        metrics.limit_hit("max_tests_per_minute");
    }
    let tests = &guard.tests;
    let Ok(mut r) = tests.running.lock() else {
        return Err(Admission::Limited(
            "the server cannot count its tests".into(),
        ));
    };
    match rate {
        Err(wait) => Err(Admission::Limited(format!(
            "{} tests from {ip} in the last minute, this server allows {} (--max-tests-per-minute); try again in {} s",
            guard.rate.per_minute(),
            guard.rate.per_minute(),
            wait.as_secs() + 1
        ))),
        Ok(()) if r.n < tests.max => {
            r.n += 1;
            metrics.active(r.n);
            if let Some(t) = ask.token {
                let ip = canonical_ip(ip);
                let h = Holders {
                    ip,
                    test: true,
                    probe: false,
                };
                r.by_token.insert(t, h);
            }
            Ok(Admitted {
                tests,
                metrics,
                token: ask.token,
                beside: false,
            })
        }
        Ok(()) => Err(Admission::Busy {
            running: r.n,
            max: tests.max,
        }),
    }
}

/// A probe from `ip` joins the admission of its running test `lead`.
fn join<'a>(
    tests: &'a TestSlots,
    metrics: &'a Metrics,
    ip: IpAddr,
    lead: Token,
) -> Result<Admitted<'a>, Admission> {
    let Ok(mut r) = tests.running.lock() else {
        return Err(Admission::Limited(
            "the server cannot count its tests".into(),
        ));
    };
    match r.by_token.get_mut(&lead) {
        Some(h) if h.ip == canonical_ip(ip) && h.test && !h.probe => {
            h.probe = true;
            Ok(Admitted {
                tests,
                metrics,
                token: Some(lead),
                beside: true,
            })
        }
        Some(h) if h.ip == canonical_ip(ip) && h.test => Err(Admission::Limited(
            "a probe already runs beside that test".into(),
        )),
        _ => Err(Admission::Limited(
            "the test this probe runs beside is not running (from this address)".into(),
        )),
    }
}

/// A session's `RequestAdmission` (native or iperf3) answered: [`admit`],
/// with the admitted test's place kept in `held` until it is dropped.
pub fn decide<'a>(
    guard: &'a Guard,
    metrics: &'a Metrics,
    ip: IpAddr,
    ask: Ask,
    held: &mut Option<Admitted<'a>>,
) -> Admission {
    match admit(guard, metrics, ip, ask) {
        Ok(a) => {
            *held = Some(a);
            Admission::Admit
        }
        Err(refusal) => refusal,
    }
}

/// TCP keepalive on a control connection: a client whose host vanished
/// (no FIN, no RST) is noticed within about 4 s, and its test aborted,
/// instead of at the test's planned end. Best effort: a failure only
/// leaves the kernel's defaults.
pub fn keep_alive(sock: &std::net::TcpStream) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(1))
        .with_interval(Duration::from_secs(1))
        .with_retries(3);
    let s = socket2::SockRef::from(sock);
    let _ = s.set_tcp_keepalive(&ka);
}

/// `--allow` / `--deny`: which client addresses may connect. An address
/// matching a deny entry is refused; with any allow entries, an address
/// must match one of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressFilter {
    pub allow: Vec<IpNet>,
    pub deny: Vec<IpNet>,
}

impl AddressFilter {
    /// Parses a comma-separated list of CIDR blocks or bare addresses.
    pub fn parse_list(flag: &str, list: &str) -> Result<Vec<IpNet>> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        RunError::Spec(format!("{flag}: {s:?} is not an address or CIDR block"))
                    })
            })
            .collect()
    }

    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = canonical_ip(ip);
        if self.deny.iter().any(|n| n.contains(&ip)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|n| n.contains(&ip))
    }
}

/// The one rule for every data connection a server takes (a native
/// test's stream, a crr transaction's connection, an iperf3 stream): only
/// from the address that opened the test's control connection, compared
/// as the rule for datagrams compares them
/// ([`linerate_engine::udp::from_client`]: an IPv4-mapped address as
/// IPv4), so no one attaches to another's test or has the server send its
/// data to a third host. `Err`: the line to log (`what` names the
/// connection).
pub fn data_from_owner(
    owner: IpAddr,
    peer: SocketAddr,
    what: &str,
) -> std::result::Result<(), String> {
    linerate_engine::udp::from_client(peer, owner)
        .map_err(|_| format!("{peer}: {what} for a test of {owner}, closing"))
}

/// IPv4-mapped IPv6 addresses (from a dual-stack listener) as IPv4, so
/// `--allow 10.0.0.0/8` matches them.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Counts connection threads; a [`ConnSlot`] is one of them.
#[derive(Debug)]
pub struct ConnSlots {
    live: Arc<AtomicUsize>,
    max: usize,
}

/// One connection thread's place; released when dropped.
#[derive(Debug)]
pub struct ConnSlot(Arc<AtomicUsize>);

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ConnSlots {
    pub fn new(max: usize) -> Self {
        ConnSlots {
            live: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot, or `None` when `max` connections are being served.
    pub fn try_take(&self) -> Option<ConnSlot> {
        self.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| ConnSlot(Arc::clone(&self.live)))
    }
}

/// Connections in one phase, per client address: before admission (each
/// holds a [`SourceSlot`] from its first frame until it asks for admission,
/// its Hello after the key's proof when there is one, or ends), and before
/// their first bytes (from the accept to the first frame or cookie). The
/// table only has entries for live connections, so `--max-connections`
/// bounds it.
#[derive(Debug)]
pub struct PerSource {
    live: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max: usize,
}

/// One connection's place in [`PerSource`]; released when dropped.
#[derive(Debug)]
pub struct SourceSlot {
    live: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        if let Ok(mut live) = self.live.lock() {
            if let Some(n) = live.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    live.remove(&self.ip);
                }
            }
        }
    }
}

impl PerSource {
    pub fn new(max: usize) -> Self {
        PerSource {
            live: Arc::default(),
            max,
        }
    }

    /// A place for one more connection from `ip`, or `None` when it has
    /// [`Self::max`] already.
    pub fn try_take(&self, ip: IpAddr) -> Option<SourceSlot> {
        let ip = canonical_ip(ip);
        let mut live = self.live.lock().ok()?;
        let n = live.entry(ip).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            live: Arc::clone(&self.live),
            ip,
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

/// Most client addresses remembered by [`TestRate`]; beyond this the
/// oldest records are forgotten first, so the table's memory is bounded.
const MAX_TRACKED: usize = 16_384;

/// `--max-tests-per-minute`: tests started per client address over the
/// last 60 s.
#[derive(Debug)]
pub struct TestRate {
    per_minute: u32,
    seen: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl TestRate {
    /// `per_minute` 0: no limit.
    pub fn new(per_minute: u32) -> Self {
        TestRate {
            per_minute,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Records a test from `ip` at `now`; `Err(wait)` if `ip` already
    /// started `per_minute` tests in the last minute (`wait`: until the
    /// oldest of them is a minute old).
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let minute = Duration::from_secs(60);
        let Ok(mut seen) = self.seen.lock() else {
            return Ok(());
        };
        if seen.len() >= MAX_TRACKED && !seen.contains_key(&ip) {
            seen.retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < minute));
            if seen.len() >= MAX_TRACKED {
                // Every slot is recent: forget an arbitrary address rather
                // than grow (a spread-out flood is what --allow is for).
                if let Some(k) = seen.keys().next().copied() {
                    seen.remove(&k);
                }
            }
        }
        let q = seen.entry(canonical_ip(ip)).or_default();
        while q.front().is_some_and(|t| now.duration_since(*t) >= minute) {
            q.pop_front();
        }
        if q.len() >= self.per_minute as usize {
            let oldest = q.front().copied().unwrap_or(now);
            return Err(minute.saturating_sub(now.duration_since(oldest)));
        }
        q.push_back(now);
        Ok(())
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }
}

/// Lines per second the server logs about bad connections; more in the
/// same second are counted and summarised in the next line that is logged.
const LOG_LINES_PER_SECOND: u32 = 10;

/// Rate-limited log of per-connection problems (stderr).
#[derive(Debug)]
pub struct LogThrottle {
    state: Mutex<ThrottleState>,
}

#[derive(Debug)]
struct ThrottleState {
    second: Instant,
    lines: u32,
    suppressed: u64,
}

impl Default for LogThrottle {
    fn default() -> Self {
        LogThrottle {
            state: Mutex::new(ThrottleState {
                second: Instant::now(),
                lines: 0,
                suppressed: 0,
            }),
        }
    }
}

impl LogThrottle {
    /// Logs `line` unless this second's allowance is spent.
    pub fn log(&self, line: fmt::Arguments<'_>) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let now = Instant::now();
        if now.duration_since(s.second) >= Duration::from_secs(1) {
            s.second = now;
            s.lines = 0;
        }
        if s.lines >= LOG_LINES_PER_SECOND {
            s.suppressed += 1;
            return;
        }
        s.lines += 1;
        if s.suppressed > 0 {
            log!(
                "linerate server: ({} similar lines suppressed)",
                std::mem::take(&mut s.suppressed)
            );
        }
        log!("linerate server: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24: data connections were held to their test's address with
    /// a plain `!=` in two copies (native and iperf3), datagrams with
    /// `udp::from_client`, which compares an IPv4-mapped address as IPv4.
    /// One rule now: the same host by either spelling may attach, another
    /// may not.
    #[test]
    fn issue_24_data_connections_and_datagrams_share_one_address_rule() {
        let owner: IpAddr = "127.0.0.1".parse().expect("ip");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000".parse().expect("addr");
        assert_eq!(data_from_owner(owner, mapped, "data connection"), Ok(()));
        let other: SocketAddr = "127.0.0.2:5000".parse().expect("addr");
        let why = data_from_owner(owner, other, "data connection").expect_err("another host");
        assert!(
            why.contains("data connection for a test of 127.0.0.1"),
            "{why}"
        );
    }

    #[test]
    fn filter_allows_and_denies_by_cidr() {
        let f = AddressFilter {
            allow: AddressFilter::parse_list("--allow", "10.0.0.0/8, 127.0.0.1").expect("parses"),
            deny: AddressFilter::parse_list("--deny", "10.9.0.0/16").expect("parses"),
        };
        assert!(f.permits("10.1.2.3".parse().expect("ip")));
        assert!(!f.permits("10.9.2.3".parse().expect("ip")));
        assert!(f.permits("127.0.0.1".parse().expect("ip")));
        assert!(!f.permits("127.0.0.2".parse().expect("ip")));
        assert!(
            f.permits("::ffff:10.1.2.3".parse().expect("ip")),
            "mapped v4"
        );
        assert!(AddressFilter::default().permits("::1".parse().expect("ip")));
        assert!(AddressFilter::parse_list("--allow", "10.0.0.0/33").is_err());
    }

    #[test]
    fn slots_are_bounded_and_released() {
        let s = ConnSlots::new(2);
        let a = s.try_take().expect("first");
        let _b = s.try_take().expect("second");
        assert!(s.try_take().is_none());
        drop(a);
        assert!(s.try_take().is_some());
    }

    #[test]
    fn issue_28_pre_auth_places_are_per_address_and_released() {
        let p = PerSource::new(2);
        let a: IpAddr = "192.0.2.1".parse().expect("ip");
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("ip");
        let b: IpAddr = "192.0.2.2".parse().expect("ip");
        let first = p.try_take(a).expect("first");
        let _second = p.try_take(mapped).expect("second, same address");
        assert!(p.try_take(a).is_none(), "a third from one address");
        let _other = p.try_take(b).expect("another address");
        drop(first);
        assert!(p.try_take(a).is_some());
        drop(_other);
        assert!(
            !p.live.lock().expect("lock").contains_key(&b),
            "no entry left"
        );
    }

    #[test]
    fn test_rate_is_per_address_per_minute() {
        let r = TestRate::new(2);
        let t = Instant::now();
        let a: IpAddr = "192.0.2.1".parse().expect("ip");
        let b: IpAddr = "192.0.2.2".parse().expect("ip");
        assert!(r.admit(a, t).is_ok());
        assert!(r.admit(a, t + Duration::from_secs(1)).is_ok());
        let wait = r.admit(a, t + Duration::from_secs(2)).expect_err("third");
        assert_eq!(wait, Duration::from_secs(58));
        assert!(r.admit(b, t + Duration::from_secs(2)).is_ok());
        assert!(r.admit(a, t + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn issue_27_a_probe_beside_a_test_shares_its_admission() {
        let cfg = GuardConfig {
            max_tests_per_minute: 1,
            ..GuardConfig::default()
        };
        let g = Guard::new(cfg, 1);
        let m = Metrics::default();
        let ip: IpAddr = "192.0.2.1".parse().expect("ip");
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("ip");
        let other: IpAddr = "192.0.2.2".parse().expect("ip");
        let (t, unknown) = (Token([1; 16]), Token([2; 16]));
        let lead = admit(
            &g,
            &m,
            ip,
            Ask {
                token: Some(t),
                beside: None,
            },
        )
        .expect("lead");
        let probe_of = |from: IpAddr, token: Token| {
            admit(
                &g,
                &m,
                from,
                Ask {
                    token: None,
                    beside: Some(token),
                },
            )
        };
        assert!(matches!(
            admit(&g, &m, other, Ask::default()),
            Err(Admission::Busy { running: 1, max: 1 })
        ));
        assert!(probe_of(other, t).is_err(), "another address");
        assert!(probe_of(ip, unknown).is_err(), "no such test");
        // Not counted against --max-tests-per-minute (1, spent by the lead).
        let probe = probe_of(mapped, t).expect("the probe joins");
        assert!(probe.is_beside() && !lead.is_beside());
        assert!(probe_of(ip, t).is_err(), "one probe at a time");
        drop(lead);
        // (Each address once: a busy refusal counts per minute too.)
        let third: IpAddr = "192.0.2.3".parse().expect("ip");
        assert!(
            matches!(
                admit(&g, &m, third, Ask::default()),
                Err(Admission::Busy { .. })
            ),
            "the probe still holds the admission"
        );
        assert!(probe_of(ip, t).is_err(), "its test ended");
        drop(probe);
        let fourth: IpAddr = "192.0.2.4".parse().expect("ip");
        assert!(admit(&g, &m, fourth, Ask::default()).is_ok(), "released");
    }
}
