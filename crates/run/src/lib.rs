//! Running linerate tests: the system behind the `linerate` command line.
//!
//! A client test ([`run`]) connects to a server (or starts one inside this
//! process, [`config::Target::Embedded`]), negotiates through one control
//! driver (`control`) what its entry in the test-type table
//! (`test_type`) says the test needs, runs its data phase on an engine,
//! and hands the records and the final report to a
//! [`Sink`](linerate_report::render::Sink) — through a
//! [`printer::Printer`] where the sink can block (stdout), so the control
//! loop keeps its heartbeats going while nobody reads. The server
//! ([`server`]) serves native and iperf3 clients on one port behind its
//! guard ([`guard`]: address filters, connection caps, rates), watches
//! every running test (`watch`) and counts what it served (`metrics`).
//! How a client run ends maps to an exit status ([`error::RunError`]).
//!
//! The binary crate parses and validates its flags into [`config`]'s
//! plain types and orchestrates series of tests (sweep, compare, repeat)
//! and their reports; everything that runs a test lives here.
//!
//! Running a TCP test against an embedded server and printing its JSON
//! report (written by a printer thread):
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use linerate_engine::engines::EngineKind;
//! use linerate_proto::spec::TestSpec;
//! use linerate_report::render::{self, Format};
//! use linerate_run::config::{Beside, ClientConfig, Target};
//!
//! let cfg = ClientConfig {
//!     target: Target::Embedded,
//!     spec: TestSpec::default(),
//!     engine: EngineKind::Syscall,
//!     engine_note: None,
//!     cpus: Vec::new(),
//!     format: Format::Json,
//!     connect_timeout: Duration::from_secs(5),
//!     iperf3: false,
//!     server_engine: None,
//!     auth_key: None,
//!     iface: None,
//!     report: None,
//!     plot: None,
//!     quiet_intervals: false,
//!     beside: Beside::Alone,
//! };
//! let mut sink = linerate_run::printer::Printer::spawn(|| {
//!     render::sink(Format::Json, Box::new(std::io::stdout()))
//! })?;
//! let report = linerate_run::run::run_to(&cfg, &mut sink)?;
//! for sum in &report.sums {
//!     eprintln!("{:?}: {:.0} bit/s", sum.flow, sum.receiver_bits_per_second);
//! }
//! # Ok::<(), linerate_run::error::RunError>(())
//! ```

pub mod about;
mod client;
pub mod config;
mod control;
pub mod error;
pub mod guard;
pub mod iperf3;
pub mod local_peer;
mod log;
mod metrics;
mod msg_net;
pub mod outcome;
pub mod printer;
pub mod rr_local;
pub mod run;
pub mod server;
mod test_type;
mod watch;
