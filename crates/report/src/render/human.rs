//! The human format: a start line, iperf3-style interval rows as they
//! happen, then per-stream and per-flow summaries, CPU and notes
//! (request/response tests: the tables of `rr_table`); and the sweep table.

use std::io::{self, Write};

use linerate_proto::measure::TcpInfo;
use linerate_proto::spec::{Direction, Limit, TestKind};
use linerate_proto::wire::Side;
use linerate_stats::units::{
    format_bytes, format_count_rate, format_micros, format_nanos, format_rate, format_size,
};

use super::columns::Columns;
use super::engine_use::engine_use_words;
use super::{rr_table, side_name, wrap, Sink, SweepSink, WIDTH};
use crate::model::{
    BatchingSummary, Endpoint, FlowSum, IntervalRecord, KernelView, Report, SideCpu, SweepInfo,
    SweepReport, SweepTrial, TestInfo, UdpSummary,
};

pub(super) struct Human<'a> {
    out: Box<dyn Write + 'a>,
    /// The interval table's columns, once known (from the start).
    cols: Option<Columns>,
    printed_header: bool,
    /// False with `-i 0`: print the summary only.
    interval_lines: bool,
    /// A `--flows` test (from the start): interval lines show sums only.
    flows: bool,
}

/// A busiest thread at or above this share of a core over the test had a
/// core to itself: the report says one core is the limit, unless the test
/// was paced and met its rate ([`core_limit_words`]).
pub(crate) const CORE_LIMIT_PERCENT: f64 = 90.0;

/// Whether the test was paced and every paced sender kept its requested
/// rate: then no thread, however busy, was what limited it.
pub(crate) fn paced_rate_met(r: &Report) -> bool {
    let mut paced = r
        .sums
        .iter()
        .filter_map(|s| s.udp.as_ref())
        .filter(|u| u.requested_pps.is_some())
        .peekable();
    paced.peek().is_some() && paced.all(|u| u.kept_up)
}

/// What the CPU line says of a busiest thread at `busiest` % of a core:
/// from [`CORE_LIMIT_PERCENT`], that one core is the limit, unless the
/// test was paced and met its rate (issue 28: a sender that kept up
/// exactly was told its core was the limit).
pub(crate) fn core_limit_words(busiest: Option<f64>, rate_met: bool) -> Option<&'static str> {
    match busiest {
        Some(p) if p >= CORE_LIMIT_PERCENT && rate_met => {
            Some("the requested rate was met, so that core was not the limit")
        }
        Some(p) if p >= CORE_LIMIT_PERCENT => Some("one core is the limit"),
        _ => None,
    }
}

fn udp_sender_words(u: &UdpSummary) -> String {
    let mut s = format!("{} datagrams, {}/s", u.sent, format_count_rate(u.sent_pps));
    if let Some(req) = u.requested_pps {
        s.push_str(&format!(" (requested {}/s)", format_count_rate(req)));
    }
    if let Some(g) = &u.gaps {
        s.push_str(&format!(
            "; gaps mean {} p50 {} p99 {} max {}",
            format_nanos(g.mean_ns),
            format_nanos(g.p50_ns as f64),
            format_nanos(g.p99_ns as f64),
            format_nanos(g.max_ns as f64)
        ));
        if let Some(want) = u.requested_gap_ns {
            s.push_str(&format!(" (requested {})", format_nanos(want)));
        }
    }
    if !u.kept_up {
        s.push_str("; COULD NOT KEEP UP");
    }
    if u.send_errors > 0 {
        s.push_str(&format!("; {} send errors", u.send_errors));
    }
    if let Some(b) = &u.sender_batching {
        s.push_str(&batching_words(b, true));
    }
    s
}

/// What a batching engine did, e.g. "; batch: GSO 44 datagrams/message,
/// ≤ 4 messages/call, 176.0 datagrams/call".
fn batching_words(b: &BatchingSummary, sender: bool) -> String {
    let mut s = String::from("; batch: ");
    if sender {
        match b.gso_segments {
            Some(n) => s.push_str(&format!("GSO {n} datagrams/message, ")),
            None => s.push_str("no GSO, "),
        }
    } else if b.gro {
        s.push_str(&format!("GRO on ({} super-buffers), ", b.gro_super_buffers));
    } else {
        s.push_str("no GRO, ");
    }
    s.push_str(&format!(
        "≤ {} messages/call, {:.1} datagrams/call",
        b.messages_per_call, b.datagrams_per_call
    ));
    for n in &b.notes {
        s.push_str(&format!(" ({n})"));
    }
    s
}

fn udp_receiver_words(u: &UdpSummary) -> String {
    let mut s = format!(
        "{} of {} received, {}/s; lost {} ({:.1} ppm, {:.4}%); reordered {} (max distance {}); duplicates {}; late {}; corrupt {}; jitter {}",
        u.received,
        u.issued,
        format_count_rate(u.received_pps),
        u.lost,
        u.loss_ppm,
        u.loss_percent,
        u.reordered,
        u.max_reorder_distance,
        u.duplicates,
        u.late,
        u.corrupt,
        format_nanos(u.jitter_ns)
    );
    if let Some(d) = u.socket_drops {
        s.push_str(&format!("; socket drops {d}"));
    }
    if let Some(c) = &u.first_corrupt {
        s.push_str(&format!(" (first corrupt: {c})"));
    }
    if let Some(b) = &u.receiver_batching {
        s.push_str(&batching_words(b, false));
    }
    if u.receiver_coalesce_waits > 0 {
        s.push_str(&format!(
            "; coalesced: {} timer waits after emptying the socket",
            u.receiver_coalesce_waits
        ));
    }
    s
}

fn kernel_words(k: &KernelView) -> String {
    format!("kernel: {}", k.explanation)
}

pub(super) fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "client→server (stream)",
        Direction::Reverse => "server→client (maerts)",
        Direction::Bidir => "both ways (bidir)",
    }
}

fn pace_words(p: linerate_proto::spec::Pace) -> String {
    use linerate_proto::spec::Pace;
    match p {
        Pace::Unlimited => "full speed (unpaced)".into(),
        Pace::Rate(bps) => format!("{} per stream", format_rate(bps as f64)),
        Pace::MilliPps(m) => format!(
            "{} datagrams/s per stream",
            format_count_rate(m as f64 / 1000.0)
        ),
    }
}

fn limit_words(l: Limit) -> String {
    match l {
        Limit::TimeMs(ms) => format!("{} s", ms as f64 / 1e3),
        Limit::Bytes(b) => format!("{} per direction", format_bytes(b)),
        Limit::Datagrams(n) => format!("{n} datagrams per direction"),
    }
}

fn tcp_cols(t: Option<&TcpInfo>) -> String {
    match t {
        Some(t) => format!(
            "{:>6}  {:>10}  {:>9}",
            t.retransmits,
            format_bytes(u64::from(t.snd_cwnd) * u64::from(t.snd_mss)),
            format_micros(f64::from(t.rtt_us))
        ),
        None => String::new(),
    }
}

impl<'a> Human<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        Human {
            out,
            cols: None,
            printed_header: false,
            interval_lines: true,
            flows: false,
        }
    }

    /// `-i 0`: no interval lines, neither live nor the server's at the end.
    pub(super) fn without_intervals(out: Box<dyn Write + 'a>) -> Self {
        Human {
            interval_lines: false,
            ..Human::new(out)
        }
    }

    /// A side's CPU line; `intervals` are its interval records (for the
    /// highest interval share of its busiest thread); `rate_met`: the test
    /// was paced and met its rate ([`paced_rate_met`]).
    fn cpu_line(
        &mut self,
        name: &str,
        c: &SideCpu,
        intervals: &[IntervalRecord],
        rate_met: bool,
    ) -> io::Result<()> {
        let mut line = format!(
            "  {name:<7} {:>6.1}% of a CPU (user {:.2} s, sys {:.2} s, {})",
            c.percent_of_cpu, c.user_s, c.system_s, c.scope
        );
        if let Some(h) = c.host_percent {
            line.push_str(&format!(
                "; host {h:.1}% of {} CPUs",
                c.host_cpus.unwrap_or(0)
            ));
        }
        if let Some(d) = c.service_demand_us_per_kib {
            line.push_str(&format!("; {d:.3} µs/KiB"));
        }
        if let (Some(t), Some(p)) = (&c.busiest_thread, c.busiest_thread_percent) {
            line.push_str(&format!("; busiest thread {t} {p:.1}% of a core"));
        }
        let peak = intervals
            .iter()
            .filter(|r| !r.omitted)
            .filter_map(|r| r.cpu.as_ref())
            .max_by(|a, b| {
                a.busiest_thread_percent
                    .total_cmp(&b.busiest_thread_percent)
            });
        if let Some(p) = peak {
            line.push_str(&format!(
                "; busiest interval: {} {:.1}%",
                p.busiest_thread, p.busiest_thread_percent
            ));
        }
        if let Some(w) = core_limit_words(c.busiest_thread_percent, rate_met) {
            line.push_str("; ");
            line.push_str(w);
        }
        writeln!(self.out, "{}", wrap(&line, "; ", 10))
    }

    fn endpoint_line(&mut self, id: &str, role: &str, e: &Endpoint) -> io::Result<()> {
        let line = format!(
            "[{id:>4}] {role:<9} {:<7} {:>11}  {:>8.2} s  {:>15}  {}",
            side_name(e.side),
            format_bytes(e.bytes),
            e.seconds,
            format_rate(e.bits_per_second),
            tcp_cols(e.tcp.as_ref()),
        );
        writeln!(self.out, "{}", line.trim_end())?;
        if let Some(x) = &e.error {
            writeln!(self.out, "{}", wrap(&format!("       ERROR: {x}"), "; ", 9))?;
        }
        Ok(())
    }

    /// Each side's `LD_PRELOAD`, where set: a preloaded library changes
    /// what was measured.
    fn preload(&mut self, t: &TestInfo) -> io::Result<()> {
        for (side, lib) in [
            ("client", &t.client_ld_preload),
            ("server", &t.server_ld_preload),
        ] {
            if let Some(lib) = lib {
                self.words(&format!("LD_PRELOAD ({side}): {lib}"), 6)?;
            }
        }
        Ok(())
    }

    /// Prose lines (notes, the kernel's view, summaries in words), wrapped.
    /// `--busy-poll`: what the kernel said on this end's socket, and how
    /// many waits slept.
    fn busy_poll_line(&mut self, e: &Endpoint) -> io::Result<()> {
        let Some(said) = &e.busy_poll else {
            return Ok(());
        };
        let sleeps = e.poll_sleeps.unwrap_or(0);
        self.words(
            &format!(
                "         busy poll: {said}; {sleeps} wait{} slept in poll(2)",
                if sleeps == 1 { "" } else { "s" }
            ),
            9,
        )
    }

    fn words(&mut self, text: &str, indent: usize) -> io::Result<()> {
        writeln!(self.out, "{}", wrap(text, "; ", indent))
    }
}

/// The test in one line, from the reporting side's point of view: who
/// talks to whom, what kind, direction, streams, sizes and rates, limit
/// and engine (the start of a report, and the head of `--repeat`'s).
pub(crate) fn test_line(i: &TestInfo) -> String {
    // Who is talking to whom, from the reporting side's point of view.
    let (who, route, engine) = match i.reported_by {
        Side::Server => (
            "linerate server",
            format!("from {}", i.client.as_deref().unwrap_or("a client")),
            &i.server_engine,
        ),
        Side::Client => (
            "linerate",
            format!(
                "to {}{}",
                i.server,
                if i.embedded_server {
                    " (embedded server)"
                } else {
                    ""
                }
            ),
            &i.client_engine,
        ),
    };
    if i.kind != TestKind::Stream {
        return format!(
            "{who}: {} {} {route} · {}{} · engine {}",
            i.protocol,
            match i.kind {
                TestKind::Crr => "connect/request/response (crr)",
                TestKind::Msg => "acknowledged messages (msg)",
                _ => "request/response (rr)",
            },
            i.streams,
            match (i.kind, i.streams) {
                (TestKind::Msg, 1) => " transfer".to_string(),
                (TestKind::Msg, _) => " concurrent transfers".to_string(),
                (_, n) => format!(
                    " flow{}{}",
                    if n == 1 { "" } else { "s" },
                    i.flows.map_or(String::new(), |f| format!(
                        " on {} event-loop thread{}",
                        f.threads,
                        if f.threads == 1 { "" } else { "s" }
                    ))
                ),
            },
            engine,
        );
    }
    let len = i.len.unwrap_or(0);
    let unit = match &i.udp {
        Some(u) => format!(
            "{} B datagrams at {}{}{}",
            len,
            pace_words(u.pace),
            if u.burst > 1 {
                format!(" in bursts of {}", u.burst)
            } else {
                String::new()
            },
            if u.verify { ", payloads verified" } else { "" }
        ),
        None => format!(
            "{} writes{}",
            format_size(u64::from(len)),
            if i.tcp.skip_rx_copy {
                ", receivers skip the copy (MSG_TRUNC)"
            } else {
                ""
            }
        ),
    };
    let streams = match i.flows {
        Some(f) => format!(
            "{} flow{} on {} event-loop thread{}",
            f.count,
            if f.count == 1 { "" } else { "s" },
            f.threads,
            if f.threads == 1 { "" } else { "s" }
        ),
        None => format!(
            "{} stream{}",
            i.streams,
            if i.streams == 1 { "" } else { "s" }
        ),
    };
    let line = format!(
        "{who}: {} {} {route} · {streams} · {unit} · {} · engine {}",
        i.protocol,
        i.direction.map_or("", direction_words),
        i.limit.map(limit_words).unwrap_or_default(),
        engine,
    );
    if i.busy_poll {
        format!("{line} · busy polling")
    } else {
        line
    }
}

/// The one line a `--flows` test gets per direction instead of a row per
/// flow: Jain's index and the spread of the flows' received rates.
fn fairness_line(f: &crate::model::Fairness) -> String {
    let idle = if f.idle_flows > 0 {
        format!(" · {} flows moved nothing", f.idle_flows)
    } else {
        String::new()
    };
    format!(
        "[FAIR] {} flows: Jain's index {:.3} · per flow min {} · median {} · max {}{idle}",
        f.flows,
        f.jain_index,
        format_rate(f.min_bits_per_second),
        format_rate(f.median_bits_per_second),
        format_rate(f.max_bits_per_second),
    )
}

/// [`test_line`] wrapped for a terminal.
pub(crate) fn test_heading(i: &TestInfo) -> String {
    wrap(&test_line(i), " · ", 2)
}

impl Sink for Human<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        self.flows = i.flows.is_some();
        if i.kind == TestKind::Stream {
            self.cols = Some(Columns::for_test(i));
        }
        writeln!(self.out, "{}", test_heading(i))?;
        if let Some(omit) = i.omit_s.filter(|&o| o > 0.0) {
            writeln!(self.out, "omitting the first {omit} s (warm-up)")?;
        }
        Ok(())
    }

    fn interval(&mut self, r: &IntervalRecord) -> io::Result<()> {
        if !self.interval_lines {
            return Ok(());
        }
        let cols = *self.cols.get_or_insert_with(|| Columns::for_record(r));
        if !self.printed_header {
            writeln!(self.out, "{}", cols.header())?;
            self.printed_header = true;
        }
        let span = format!("{:6.2}-{:<6.2} s", r.start_s, r.end_s);
        let tag = if r.omitted { "  (omitted)" } else { "" };
        // Many flows: the sums only, never a row per flow.
        let per_stream = !self.flows;
        for s in r.streams.iter().filter(|_| per_stream) {
            writeln!(self.out, "{}{tag}", cols.stream_row(&span, s))?;
        }
        if r.streams.len() > 1 || r.sums.len() > 1 {
            for s in &r.sums {
                writeln!(self.out, "{}{tag}", cols.sum_row(&span, s, r.sums.len()))?;
            }
        }
        if let Some(c) = &r.cpu {
            writeln!(self.out, "{}", cpu_interval_line(&span, r.side, c))?;
        }
        self.out.flush()
    }

    fn finish(&mut self, r: &Report) -> io::Result<()> {
        if let Some(cells) = &r.msg {
            return self.finish_msg(r, cells);
        }
        if let Some(rr) = &r.rr {
            return self.finish_rr(r, rr);
        }
        writeln!(
            self.out,
            "- - - - - - - - - - - - - - - - - - - - - - - - -"
        )?;
        self.summary_header(r)?;
        for flow_sum in &r.sums {
            self.flow_block(r, flow_sum)?;
        }
        writeln!(self.out, "CPU:")?;
        let met = paced_rate_met(r);
        self.cpu_line("client", &r.cpu.client, &r.intervals, met)?;
        self.cpu_line("server", &r.cpu.server, &r.server_intervals, met)?;
        self.server_cpu_intervals(r)?;
        if let Some(cc) = &r.test.congestion_used {
            writeln!(self.out, "TCP congestion control: {cc}")?;
        }
        if r.test.tcp.skip_rx_copy {
            self.words(
                "--skip-rx-copy: the receivers consumed the data with MSG_TRUNC, never \
                 copying it to user space (bytes counted, not read)",
                2,
            )?;
        }
        self.preload(&r.test)?;
        self.notes(r)?;
        self.out.flush()
    }
}

/// The pieces of a finished report, in the order [`Sink::finish`] prints them.
impl Human<'_> {
    /// `linerate msg HOST` prints its own tables (report::msg); this is the
    /// one-line-per-size form, for the server's log.
    fn finish_msg(&mut self, r: &Report, cells: &[crate::msg::MsgCell]) -> io::Result<()> {
        for c in cells {
            let rate = |s: &Option<linerate_stats::trials::TrialStats>, f: fn(f64) -> String| {
                s.as_ref().map_or("-".into(), |s| f(s.mean))
            };
            writeln!(
                self.out,
                "msg ×{} {:>9}: {} messages/s, {} (mean of {} trials); received {} of {} \
                 messages{}",
                c.concurrency,
                format_size(c.size),
                rate(
                    &c.messages_per_sec,
                    linerate_stats::units::format_count_rate
                ),
                rate(&c.throughput_bps, linerate_stats::units::format_rate),
                c.trials,
                c.received.messages,
                c.sent.messages,
                c.corrupt
                    .map_or(String::new(), |n| format!(", {n} corrupt")),
            )?;
        }
        writeln!(self.out, "CPU:")?;
        self.cpu_line("client", &r.cpu.client, &[], false)?;
        self.cpu_line("server", &r.cpu.server, &[], false)?;
        self.notes(r)?;
        self.out.flush()
    }

    /// An rr/crr report: its latency tables, CPU and CPU per transaction.
    fn finish_rr(&mut self, r: &Report, rr: &crate::model::RrReport) -> io::Result<()> {
        rr_table::tables(&mut self.out, r, rr)?;
        writeln!(self.out, "CPU:")?;
        self.cpu_line("client", &r.cpu.client, &[], false)?;
        self.cpu_line("server", &r.cpu.server, &[], false)?;
        for (side, v) in [
            ("client", rr.client_cpu_us_per_transaction),
            ("server", rr.server_cpu_us_per_transaction),
        ] {
            if let Some(v) = v {
                writeln!(self.out, "  {side:<7} {v:.2} CPU µs per transaction")?;
            }
        }
        self.preload(&r.test)?;
        self.notes(r)?;
        self.out.flush()
    }

    /// The column heads of the end-of-test table (UDP has no TCP columns).
    fn summary_header(&mut self, r: &Report) -> io::Result<()> {
        if r.test.udp.is_some() {
            writeln!(
                self.out,
                "[  ID] {:<9} {:<7} {:>11}  {:>10}  {:>15}",
                "Role", "Side", "Transfer", "Time", "Bitrate"
            )?;
        } else {
            writeln!(
                self.out,
                "[  ID] {:<9} {:<7} {:>11}  {:>10}  {:>15}  {:>6}  {:>10}  {:>9}",
                "Role", "Side", "Transfer", "Time", "Bitrate", "Retr", "Cwnd", "RTT"
            )?;
        }
        Ok(())
    }

    /// One direction: each stream's sender and receiver lines with their
    /// words, then the direction's sums and the kernel's view.
    fn flow_block(&mut self, r: &Report, flow_sum: &FlowSum) -> io::Result<()> {
        writeln!(
            self.out,
            "{} ({} stream{}):",
            flow_sum.flow.arrow(),
            flow_sum.streams,
            if flow_sum.streams == 1 { "" } else { "s" }
        )?;
        // With --flows, the sums and the fairness line stand for the
        // flows: never a row per flow.
        let per_stream = r.test.flows.is_none();
        for s in r
            .streams
            .iter()
            .filter(|s| per_stream && s.flow == flow_sum.flow)
        {
            let id = s.id.to_string();
            self.endpoint_line(&id, "sender", &s.sender)?;
            if let Some(u) = &s.udp {
                self.words(&format!("         {}", udp_sender_words(u)), 9)?;
            }
            if let Some(e) = &s.sender.engine_use {
                self.words(&format!("         {}", engine_use_words(e)), 9)?;
            }
            self.busy_poll_line(&s.sender)?;
            self.endpoint_line(&id, "receiver", &s.receiver)?;
            if let Some(u) = &s.udp {
                self.words(&format!("         {}", udp_receiver_words(u)), 9)?;
            }
            if let Some(e) = &s.receiver.engine_use {
                self.words(&format!("         {}", engine_use_words(e)), 9)?;
            }
            self.busy_poll_line(&s.receiver)?;
        }
        let line = format!(
            "[ SUM] sender    {:>19}  {:>8.2} s  {:>15}  {}",
            format_bytes(flow_sum.sender_bytes),
            flow_sum.sender_seconds,
            format_rate(flow_sum.sender_bits_per_second),
            flow_sum
                .retransmits
                .map(|x| format!("{x:>6}"))
                .unwrap_or_default()
        );
        writeln!(self.out, "{}", line.trim_end())?;
        writeln!(
            self.out,
            "[ SUM] receiver  {:>19}  {:>8.2} s  {:>15}",
            format_bytes(flow_sum.receiver_bytes),
            flow_sum.receiver_seconds,
            format_rate(flow_sum.receiver_bits_per_second),
        )?;
        if let Some(f) = &flow_sum.fairness {
            writeln!(self.out, "{}", fairness_line(f))?;
        }
        if let Some(u) = &flow_sum.udp {
            if r.streams.iter().filter(|s| s.flow == flow_sum.flow).count() > 1 {
                self.words(&format!("         {}", udp_sender_words(u)), 9)?;
                self.words(&format!("         {}", udp_receiver_words(u)), 9)?;
            }
        }
        if let Some(k) = &flow_sum.kernel {
            self.words(&kernel_words(k), 8)?;
        }
        Ok(())
    }

    /// The server's CPU per interval: the client's own intervals were
    /// printed as they ended; the server's arrive with its results.
    fn server_cpu_intervals(&mut self, r: &Report) -> io::Result<()> {
        let server_cpu: Vec<_> = r
            .server_intervals
            .iter()
            .filter_map(|i| i.cpu.as_ref().map(|c| (i, c)))
            .collect();
        if !server_cpu.is_empty() && self.interval_lines {
            writeln!(self.out, "server CPU per interval:")?;
            for (i, c) in server_cpu {
                let span = format!("{:6.2}-{:<6.2} s", i.start_s, i.end_s);
                let tag = if i.omitted { "  (omitted)" } else { "" };
                let line = cpu_interval_line(&span, i.side, c);
                writeln!(self.out, "{line}{tag}")?;
            }
        }
        Ok(())
    }

    /// The report's notes, one wrapped paragraph each.
    fn notes(&mut self, r: &Report) -> io::Result<()> {
        for n in &r.notes {
            self.words(&format!("note: {n}"), 6)?;
        }
        Ok(())
    }
}

/// One interval's CPU line, `[ CPU] span side …`, wrapped.
fn cpu_interval_line(span: &str, side: Side, c: &crate::model::IntervalCpuRecord) -> String {
    let line = format!(
        "[ CPU] {span} {} {:.1}% (usr {:.1}, sys {:.1}) · busiest thread {:.1}% {}",
        side_name(side),
        c.percent_of_cpu,
        c.user_percent,
        c.system_percent,
        c.busiest_thread_percent,
        c.busiest_thread
    );
    wrap(&line, " · ", 7)
}

/// A sweep: a header, a row per trial as it finishes, then each size's
/// zero-loss result.
pub(super) struct HumanSweep<'a> {
    out: Box<dyn Write + 'a>,
}

impl<'a> HumanSweep<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        HumanSweep { out }
    }
}

impl SweepSink for HumanSweep<'_> {
    fn start(&mut self, i: &SweepInfo) -> io::Result<()> {
        let line = format!(
            "linerate sweep: udp {} to {} · {} stream{} · sizes {} · {} s per trial",
            direction_words(i.direction),
            i.server,
            i.streams,
            if i.streams == 1 { "" } else { "s" },
            i.sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            i.trial_s
        );
        writeln!(self.out, "{}", wrap(&line, " · ", 2))?;
        writeln!(
            self.out,
            "{:>6} {:>8} {:>8} {:>8} {:>13} {:>13} {:>13} {:>7} {:>7}  note",
            "size",
            "req pps",
            "sent pps",
            "recv pps",
            "requested",
            "sent",
            "received",
            "lost",
            "loss %"
        )?;
        self.out.flush()
    }

    fn trial(&mut self, t: &SweepTrial) -> io::Result<()> {
        let note = match (&t.error, t.kept_up, t.search) {
            (Some(e), _, _) => format!("FAILED: {e}"),
            (None, false, s) => format!(
                "sender could not keep up{}",
                if s { " (search)" } else { "" }
            ),
            (None, true, true) => "search".into(),
            (None, true, false) => String::new(),
        };
        let row = format!(
            "{:>6} {:>8} {:>8} {:>8} {:>13} {:>13} {:>13} {:>7} {:>7.4}",
            t.len,
            format_count_rate(t.requested_pps),
            format_count_rate(t.sent_pps),
            format_count_rate(t.received_pps),
            format_rate(t.requested_bits_per_second),
            format_rate(t.sent_bits_per_second),
            format_rate(t.received_bits_per_second),
            t.lost,
            t.loss_percent
        );
        // A note that does not fit beside the row goes under it.
        if note.is_empty() {
            writeln!(self.out, "{row}")?;
        } else if row.chars().count() + 2 + note.chars().count() <= WIDTH {
            writeln!(self.out, "{row}  {note}")?;
        } else {
            writeln!(self.out, "{row}")?;
            writeln!(self.out, "{}", wrap(&format!("        {note}"), "; ", 8))?;
        }
        self.out.flush()
    }

    fn finish(&mut self, r: &SweepReport) -> io::Result<()> {
        for z in &r.zero_loss {
            let line = match (z.pps, z.bits_per_second) {
                (Some(p), Some(b)) => format!(
                    "highest rate with loss ≤ {}% at {} B: {}/s requested ({}), {}/s received; {} trials ({})",
                    z.max_loss_percent,
                    z.len,
                    format_count_rate(p),
                    format_rate(b),
                    format_count_rate(z.received_pps.unwrap_or(0.0)),
                    z.trials,
                    z.note
                ),
                _ => format!(
                    "highest rate with loss ≤ {}% at {} B: none ({}; {} trials)",
                    z.max_loss_percent, z.len, z.note, z.trials
                ),
            };
            writeln!(self.out, "{}", wrap(&line, "; ", 2))?;
        }
        for n in &r.notes {
            writeln!(self.out, "{}", wrap(&format!("note: {n}"), "; ", 6))?;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_proto::measure::{CallsBytes, EngineUse};

    #[test]
    fn issue_8_sendfile_and_splice_counts_are_named() {
        let u = EngineUse {
            engine: "zerocopy:sendfile".into(),
            sendfile: Some(CallsBytes {
                calls: 3,
                bytes: 3000,
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine zerocopy:sendfile: sendfile: 3 calls, 3000 bytes"
        );
        let u = EngineUse {
            engine: "zerocopy:sendfile".into(),
            splice_recv: Some(CallsBytes {
                calls: 7,
                bytes: 3000,
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine zerocopy:sendfile: splice receive: 7 calls, 3000 bytes"
        );
    }

    #[test]
    fn issue_8_sends_too_small_for_zero_copy_are_counted_apart() {
        let u = EngineUse {
            engine: "uring".into(),
            zerocopy: Some(linerate_proto::measure::ZeroCopyUse {
                sends: 2,
                completed: 2,
                copied: 2,
                under_threshold: 5,
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine uring: zero-copy sends: 2 sent, 2 completed, 2 of them copied by the kernel \
             (every one: loopback or a device without scatter-gather copies); 5 sends too small \
             for zero copy copied instead"
        );
        let u = EngineUse {
            engine: "uring".into(),
            zerocopy: Some(linerate_proto::measure::ZeroCopyUse {
                under_threshold: 7,
                ..Default::default()
            }),
            ..EngineUse::default()
        };
        assert_eq!(
            engine_use_words(&u),
            "engine uring: no zero-copy sends: all 7 too small for zero copy, copied instead"
        );
    }
}
