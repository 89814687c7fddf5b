//! The test-type table's rules: one entry per type of test — tcp stream,
//! udp stream, rr over tcp, rr over udp, crr, msg — holding everything the
//! sans-IO layers and the crates above them decide differently for it, as
//! data and small functions over shared building blocks (neper's model):
//! - the data: the connections the client opens (`plan`, `connections`)
//!   and how long the data phase can last (`data_phase_ms`), behind
//!   `TestSpec::{stream_plan, connection_count, data_phase_ms}`;
//! - negotiation hooks: the protocol's parameters (`params`: UDP stream
//!   parameters only with a UDP stream test, and negotiated there) and
//!   the type's own (`negotiate`: rr's sizes and phases, msg's plan), what
//!   `--flows` event loops run (`flows`) and whether `--transport unix`
//!   carries it (`unix`);
//! - the rate and memory budget ([`Budget`]): the rate a sending stream
//!   asks for, how a server clamps it, the buffers it holds;
//! - the report: its section and CSV columns ([`Shape`]), its heading's
//!   words (`title`, `unit`), what its flows' rates count (`rate_unit`),
//!   one-way delays (`one_way`);
//! - engines: `auto`'s workload ([`Workload`]) and with it the engines'
//!   refusals, and whether the server's own engine runs its data phase
//!   (`server_engine`);
//! - the session: how the server attaches data ([`Attach`]), the clock
//!   sync before an rr test (`one_way`), load streams (`load_streams`),
//!   probes beside another test (`probe`), the idle watch (`idle_watch`).
//!
//! The I/O half (attaching connections, starting each side's data phase,
//! building the report, the client's agreement check) is the run crate's
//! `test_type`, whose entries carry these. A new type of test is a new
//! entry here and there plus its own module, not a branch in every file.

mod msg;
mod rr;
mod stream;

pub use stream::{MAX_BURST, MAX_DRAIN_MS, MAX_FAULTS};

use crate::limits::{Budget, ServerLimits, SpecError};
use crate::spec::{Protocol, StreamPlan, TestKind, TestSpec};

/// What a test moves, as far as `--engine auto`'s rule and the engines'
/// refusals care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    TcpStream,
    UdpStream,
    RequestResponse,
}

impl Workload {
    /// The workload of a test, as far as the rule cares.
    pub fn of(spec: &TestSpec) -> Workload {
        of(spec).workload
    }
}

/// What a test's spec and report are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Streams: the spec's direction, limit, length, warm-up and intervals
    /// are the test's; the report has interval and per-stream rows (the
    /// stream CSV columns).
    Stream,
    /// Transactions or messages, which carry their own sizes and limit;
    /// the report's `rr` or `msg` section (the request/response CSV
    /// columns).
    Exchange,
}

/// How the server attaches a test's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// TCP data connections (or Unix stream sockets), greeted before Start.
    Connections,
    /// UDP sockets on ports the server binds and sends in its Accept.
    Datagrams,
    /// A connection per transaction, served where it is accepted (crr).
    PerTransaction,
}

/// Negotiation hook with notes: may clamp, saying so.
type ParamsFn = fn(&mut TestSpec, &ServerLimits, &mut Vec<String>) -> Result<(), SpecError>;
/// Negotiation hook that only checks.
type NegotiateFn = fn(&TestSpec, &ServerLimits) -> Result<(), SpecError>;

/// One type of test's rules.
#[derive(Debug)]
pub struct Rules {
    pub name: &'static str,
    pub shape: Shape,
    pub attach: Attach,
    pub workload: Workload,
    /// The data connections the client opens, in order
    /// ([`TestSpec::stream_plan`]).
    pub plan: fn(&TestSpec) -> Vec<StreamPlan>,
    /// How many data connections the test opens
    /// ([`TestSpec::connection_count`]).
    pub connections: fn(&TestSpec) -> usize,
    /// How long the data phase can last, if known in advance
    /// ([`TestSpec::data_phase_ms`]).
    pub data_phase_ms: fn(&TestSpec) -> Option<u64>,
    /// The protocol's parameters fit the type (and a UDP stream's are
    /// negotiated), checked where the shared checks reach the protocol.
    pub params: ParamsFn,
    /// The type's own parameters, after the shared checks.
    pub negotiate: NegotiateFn,
    /// Whether `--flows` event loops run this test, and why not.
    pub flows: fn(&TestSpec) -> Result<(), &'static str>,
    /// `--transport unix` carries it.
    pub unix: bool,
    pub budget: Budget,
    /// The heading's words for an exchange (empty for streams).
    pub title: &'static str,
    /// What the heading calls its flows: one, several.
    pub unit: (&'static str, &'static str),
    /// What an exchange's flow rates count (empty for streams, whose
    /// rates are bit/s).
    pub rate_unit: &'static str,
    /// Transactions carry one-way delays: the client syncs its clock with
    /// the server's before opening the data connections.
    pub one_way: bool,
    /// Bulk load streams may run beside the transactions (`--under-load`).
    pub load_streams: bool,
    /// Without load streams it may run beside another test as a probe.
    pub probe: bool,
    /// The server's own `--engine` runs its data phase (crr's server
    /// accepts and answers each connection itself).
    pub server_engine: bool,
    /// The control loops watch the data for idleness (request/response
    /// flows keep their own stall watchdog in the engine).
    pub idle_watch: bool,
}

pub const TCP_STREAM: Rules = Rules {
    name: "tcp stream",
    shape: Shape::Stream,
    attach: Attach::Connections,
    workload: Workload::TcpStream,
    plan: stream::plan,
    connections: stream::connections,
    data_phase_ms: stream::data_phase_ms,
    params: stream::tcp_params,
    negotiate: |_, _| Ok(()),
    flows: |_| Ok(()),
    unix: true,
    budget: stream::TCP_BUDGET,
    title: "",
    unit: ("stream", "streams"),
    rate_unit: "",
    one_way: false,
    load_streams: false,
    probe: false,
    server_engine: true,
    idle_watch: true,
};

pub const UDP_STREAM: Rules = Rules {
    name: "udp stream",
    attach: Attach::Datagrams,
    workload: Workload::UdpStream,
    params: stream::udp_params,
    unix: false,
    budget: stream::UDP_BUDGET,
    ..TCP_STREAM
};

pub const RR_TCP: Rules = Rules {
    name: "rr",
    shape: Shape::Exchange,
    attach: Attach::Connections,
    workload: Workload::RequestResponse,
    plan: rr::plan,
    connections: rr::connections,
    data_phase_ms: rr::data_phase_ms,
    params: stream::tcp_params,
    negotiate: rr::negotiate_tcp,
    flows: rr::flows,
    unix: false,
    budget: rr::BUDGET,
    title: "request/response (rr)",
    unit: ("flow", "flows"),
    rate_unit: "transactions/s",
    one_way: true,
    load_streams: true,
    probe: true,
    server_engine: true,
    idle_watch: false,
};

pub const RR_UDP: Rules = Rules {
    name: "rr (udp)",
    attach: Attach::Datagrams,
    params: rr::udp_params,
    negotiate: rr::negotiate_udp,
    ..RR_TCP
};

pub const CRR: Rules = Rules {
    name: "crr",
    attach: Attach::PerTransaction,
    // Every transaction opens its own connection as it runs: up front only
    // the load streams (`--under-load`).
    plan: rr::crr_plan,
    connections: rr::crr_connections,
    params: rr::crr_params,
    negotiate: rr::negotiate_crr,
    flows: rr::flows,
    budget: rr::CRR_BUDGET,
    title: "connect/request/response (crr)",
    // A connection per transaction.
    rate_unit: "connections/s",
    one_way: false,
    probe: false,
    server_engine: false,
    ..RR_TCP
};

pub const MSG: Rules = Rules {
    name: "msg",
    shape: Shape::Exchange,
    attach: Attach::Connections,
    workload: Workload::RequestResponse,
    // A connection per concurrent transfer, counted by its own budget.
    plan: stream::plan,
    connections: |_| 0,
    // Messages until the plan is done: no end known in advance.
    data_phase_ms: |_| None,
    params: msg::params,
    negotiate: msg::negotiate,
    flows: |_| Err(rr::NO_FLOWS),
    unix: false,
    budget: msg::BUDGET,
    title: "acknowledged messages (msg)",
    unit: ("transfer", "concurrent transfers"),
    rate_unit: "transactions/s",
    one_way: false,
    load_streams: false,
    probe: false,
    // msg's server side reads and acknowledges with plain system calls
    // (`linerate_run::msg_net::start_server`), whatever the server's
    // `--engine`: an engine that cannot carry messages refuses nothing.
    server_engine: false,
    idle_watch: true,
};

/// The entry for a spec (its protocol may still be refused by the entry's
/// `params` hook: crr and msg have no UDP form).
pub fn of(spec: &TestSpec) -> &'static Rules {
    lookup(spec.kind, spec.protocol)
}

/// Every kind and protocol with an entry of its own (a crr or msg spec
/// naming UDP gets its TCP entry, whose hooks refuse it).
pub const ALL: [(TestKind, Protocol); 6] = [
    (TestKind::Stream, Protocol::Tcp),
    (TestKind::Stream, Protocol::Udp),
    (TestKind::Rr, Protocol::Tcp),
    (TestKind::Rr, Protocol::Udp),
    (TestKind::Crr, Protocol::Tcp),
    (TestKind::Msg, Protocol::Tcp),
];

/// The entries of the table, one per type of test. Each half of the
/// table (these rules, and linerate-run's I/O half) maps an `Entry` to its
/// entry by an exhaustive `match`, so every type has an entry in both by
/// construction: a new variant does not compile until both have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    TcpStream,
    UdpStream,
    RrTcp,
    RrUdp,
    Crr,
    Msg,
}

impl Entry {
    /// The entry of a kind of test over a protocol (crr and msg have one
    /// entry whatever the protocol; its hooks refuse UDP).
    pub fn of(kind: TestKind, protocol: Protocol) -> Entry {
        match (kind, protocol) {
            (TestKind::Stream, Protocol::Tcp) => Entry::TcpStream,
            (TestKind::Stream, Protocol::Udp) => Entry::UdpStream,
            (TestKind::Rr, Protocol::Tcp) => Entry::RrTcp,
            (TestKind::Rr, Protocol::Udp) => Entry::RrUdp,
            (TestKind::Crr, _) => Entry::Crr,
            (TestKind::Msg, _) => Entry::Msg,
        }
    }

    /// This entry's rules.
    pub fn rules(self) -> &'static Rules {
        match self {
            Entry::TcpStream => &TCP_STREAM,
            Entry::UdpStream => &UDP_STREAM,
            Entry::RrTcp => &RR_TCP,
            Entry::RrUdp => &RR_UDP,
            Entry::Crr => &CRR,
            Entry::Msg => &MSG,
        }
    }
}

/// The entry for a kind of test over a protocol.
pub fn lookup(kind: TestKind, protocol: Protocol) -> &'static Rules {
    Entry::of(kind, protocol).rules()
}

/// What a spec's entry says about its data connections and data phase.
impl TestSpec {
    /// The data connections of this test, in the order the client opens
    /// them (stream tests: client-sending streams first, then
    /// server-sending ones).
    pub fn stream_plan(&self) -> Vec<StreamPlan> {
        (of(self).plan)(self)
    }

    /// Total data connections.
    pub fn connection_count(&self) -> usize {
        (of(self).connections)(self)
    }

    /// Upper bound on how long the data phase can legitimately last, if
    /// the test is time-limited (used for the peers' safety deadlines).
    pub fn data_phase_ms(&self) -> Option<u64> {
        (of(self).data_phase_ms)(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind and protocol has the entry its name says, and the
    /// entries' facts hang together.
    #[test]
    fn issue_24_every_spec_has_its_rules() {
        let all = ALL;
        let names: Vec<&str> = all.iter().map(|&(k, p)| lookup(k, p).name).collect();
        assert_eq!(
            names,
            ["tcp stream", "udp stream", "rr", "rr (udp)", "crr", "msg"]
        );
        for (k, p) in all {
            let r = lookup(k, p);
            // Streams are the tests a server can pace down; exchanges
            // carry a title for the heading instead.
            assert_eq!(
                r.shape == Shape::Stream,
                r.budget.clamp.is_some(),
                "{}",
                r.name
            );
            assert_eq!(r.shape == Shape::Stream, r.title.is_empty(), "{}", r.name);
            assert_eq!(
                r.attach == Attach::Datagrams,
                p == Protocol::Udp,
                "{}",
                r.name
            );
        }
        assert_eq!(lookup(TestKind::Crr, Protocol::Udp).name, "crr");
    }
}
