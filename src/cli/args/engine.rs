//! The data-path flags every test and the server share: `--engine` and
//! its options (`EngineArgs`, flattened into each command), and the help
//! of `--busy-poll`.

use clap::Args;

/// `--engine`'s values, listed in `--help` from the engines this build has
/// (issue 13). Taken as typed: `cli::validate` resolves the name once and
/// says why an unknown or unsupported engine is refused.
#[derive(Debug, Clone, Copy)]
struct EngineNames;

impl clap::builder::TypedValueParser for EngineNames {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            linerate_engine::engines::EngineKind::ALL
                .iter()
                .map(|k| clap::builder::PossibleValue::new(k.name()).help(k.summary()))
                .chain(std::iter::once(
                    clap::builder::PossibleValue::new(linerate_run::config::AUTO)
                        .help("the fastest engine this kernel runs for each test (the server applies it per test)"),
                )),
        ))
    }
}

/// The data-path engine of this side and its options.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Data-path engine for this side (an engine this kernel lacks is
    /// refused with the reason). Default `auto`: per test, the fastest
    /// engine this kernel runs for it (UDP streams: batch; TCP streams and
    /// request/response: syscall), named in the report. `zerocopy:sendfile`
    /// runs TCP stream tests only (sendfile from a memory file, splice
    /// receive) and is refused for UDP and request/response tests.
    #[arg(long, default_value = "auto", value_parser = EngineNames)]
    pub engine: String,
    /// Client: ask the server to run its side with this engine, or `auto`
    /// (the server's own rule for the test, among the engines it offers);
    /// it may refuse: not allowed by its --allow-engines, or not supported
    /// by its kernel. The report names each side's engine.
    #[arg(long, value_name = "ENGINE")]
    pub server_engine: Option<String>,
    /// batch: UDP senders let the kernel segment runs of datagrams
    /// (UDP_SEGMENT); refused where the kernel or path cannot. Default: on
    /// where possible (the report says why it is off).
    #[arg(long, overrides_with = "no_gso")]
    pub gso: bool,
    /// batch: one datagram per sendmmsg message.
    #[arg(long, overrides_with = "gso")]
    pub no_gso: bool,
    /// batch: UDP receivers take runs of datagrams in one buffer (UDP_GRO),
    /// split and checked one by one; refused where the kernel cannot.
    /// Default: on where possible.
    #[arg(long, overrides_with = "no_gro")]
    pub gro: bool,
    /// batch: one datagram per recvmmsg message.
    #[arg(long, overrides_with = "gro")]
    pub no_gro: bool,
    /// xdp: where the XDP program runs: `native` (in the driver, before
    /// an skb exists) or `generic` (after it; any interface, slower).
    /// Default: native where the driver says it redirects to AF_XDP.
    /// What the interface refuses is refused with the reason, never
    /// replaced by the other mode.
    #[arg(long, value_name = "MODE", value_parser = ["native", "generic"])]
    pub xdp_mode: Option<String>,
    /// xdp: copy mode (the kernel copies each frame; any interface, veth
    /// included). Default: zero-copy where the driver offers it.
    #[arg(long, overrides_with = "xdp_zerocopy")]
    pub xdp_copy: bool,
    /// xdp: zero-copy (the driver works in the UMEM; needs driver support,
    /// refused with the reason otherwise).
    #[arg(long, overrides_with = "xdp_copy")]
    pub xdp_zerocopy: bool,
    /// xdp: rr flows and UDP stream receivers wait for a datagram asleep
    /// in poll(2) on the AF_XDP socket, a wake-up per round trip or batch
    /// (docs/engines.md has what each costs, measured on veth), instead of
    /// spinning on its rings (the default: a CPU per flow while it waits,
    /// up to 50 µs per wait, then a poll(2) sleep). Refused with
    /// --busy-poll. A client's --server-engine xdp spins; a server sleeps
    /// when started with --engine xdp --xdp-sleep.
    #[arg(long)]
    pub xdp_sleep: bool,
}

/// Busy polling on a throughput test's data sockets.
pub(super) const BUSY_POLL_HELP: &str = "\
Busy polling on both sides: non-blocking data sockets that spin on EAGAIN (up
to 50 µs per wait, then a poll(2) sleep; yielding when the CPU is shared), plus
SO_BUSY_POLL and SO_PREFER_BUSY_POLL where the kernel allows; the report says
what the kernel accepted and how many waits slept. Costs a CPU per stream";
