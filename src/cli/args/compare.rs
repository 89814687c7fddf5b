//! `linerate compare`'s own flags (the test's flags follow it as
//! `TEST`, parsed as that test's when validated).

use clap::Args;

use crate::cli::common::OutputArgs;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Engines to run, comma-separated; ratios are to the first
    /// [default: syscall,batch,uring,zerocopy; with --threading: syscall].
    #[arg(long, value_name = "A,B,…")]
    pub engines: Option<String>,
    /// Threading models to run the test's N flows under (N from its
    /// --flows N or -P N), comma-separated: per-flow (a thread per flow
    /// per side, as -P N) or loop:T (T event-loop threads per side, as
    /// --flows N --threads T), e.g. per-flow,loop:2,loop:1. With --engines
    /// too: every engine under every model.
    #[arg(long, value_name = "MODELS")]
    pub threading: Option<String>,
    /// `both` runs every engine without and with --busy-poll (`on`: with
    /// it only), for a test that takes --busy-poll (tcp, udp, rr, crr).
    #[arg(long, value_name = "both|on|off")]
    pub busy_poll: Option<String>,
    /// Add a run of the syscall engine with LD_PRELOAD=LIB on the client
    /// (a kernel-bypass library such as onload or VMA: with and without
    /// it). That client runs as a child process; without HOST it tests
    /// against an embedded server in this process, which is not preloaded.
    #[arg(long, value_name = "LIB")]
    pub preload: Option<std::path::PathBuf>,
    /// Run each variant N times, interleaved (every variant's first run,
    /// then every variant's second …): each figure's mean ± sd and 95%
    /// confidence interval per variant; ratios are of means.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Write an SVG bar chart of the headline figure per variant (tcp
    /// bit/s, udp received datagrams/s, rr transactions/s), ratios labelled.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// Also write one self-contained HTML page: the table, the plot, the
    /// host and kernel, the command line and version.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    // The help is an attribute, not a doc comment: rustdoc would read its
    // `[HOST]` as a link.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TEST",
        required = true,
        help = "[HOST] tcp|udp|rr|crr, then the test's flags (e.g. `udp -b 0 -l 1472 -t 2`)"
    )]
    pub test: Vec<String>,
}
