//! The human format: a start line, iperf3-style interval rows as they
//! happen, then per-stream and per-flow summaries, CPU and notes
//! (request/response tests: the tables of `rr_table`). The words of its
//! lines are `heading`, `stream_words` and `cpu_words`; the sweep table is
//! `human_sweep`.

use std::io::{self, Write};

use linerate_proto::test_type::Shape;
use linerate_stats::units::{format_bytes, format_rate, format_size};

use super::columns::Columns;
use super::cpu_words::{cpu_interval_line, cpu_line, paced_rate_met};
use super::engine_use::engine_use_words;
use super::format::Sink;
use super::heading::test_heading;
use super::rr_table;
use super::stream_words::{
    fairness_line, kernel_words, tcp_cols, udp_receiver_words, udp_sender_words,
};
use super::text::{side_name, wrap};
use crate::model::{Endpoint, FlowSum, IntervalRecord, Report, SideCpu, TestInfo};

/// The human format's [`Sink`]: interval rows as they come, the summary
/// at the end.
pub(super) struct Human<'a> {
    out: Box<dyn Write + 'a>,
    /// The interval table's columns, once known (from the start).
    cols: Option<Columns>,
    printed_header: bool,
    /// False with `-i 0`: print the summary only.
    interval_lines: bool,
    /// A `--flows` test (from the start): interval lines show sums only.
    flows: bool,
    /// `--busy-poll` was asked (from the start); without it, an endpoint
    /// that spun did so by its engine's default (xdp's receivers).
    busy_poll_asked: bool,
}

impl<'a> Human<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        Human {
            out,
            cols: None,
            printed_header: false,
            interval_lines: true,
            flows: false,
            busy_poll_asked: false,
        }
    }

    /// `-i 0`: no interval lines, neither live nor the server's at the end.
    pub(super) fn without_intervals(out: Box<dyn Write + 'a>) -> Self {
        Human {
            interval_lines: false,
            ..Human::new(out)
        }
    }

    /// A side's CPU line ([`cpu_line`]).
    fn cpu_line(
        &mut self,
        name: &str,
        c: &SideCpu,
        intervals: &[IntervalRecord],
        rate_met: bool,
    ) -> io::Result<()> {
        writeln!(self.out, "{}", cpu_line(name, c, intervals, rate_met))
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

    /// `--busy-poll`, or an engine that spins by default (xdp's
    /// receivers): what the kernel or engine said on this end, and how
    /// many waits slept. The label says which, so a default spin is not
    /// read as the flag.
    fn busy_poll_line(&mut self, e: &Endpoint) -> io::Result<()> {
        let Some(said) = &e.busy_poll else {
            return Ok(());
        };
        let sleeps = e.poll_sleeps.unwrap_or(0);
        let label = if self.busy_poll_asked {
            "busy poll"
        } else {
            "busy poll (the engine's default, not --busy-poll)"
        };
        self.words(
            &format!(
                "         {label}: {said}; {sleeps} wait{} slept in poll(2)",
                if sleeps == 1 { "" } else { "s" }
            ),
            9,
        )
    }

    /// Prose lines (notes, the kernel's view, summaries in words), wrapped.
    fn words(&mut self, text: &str, indent: usize) -> io::Result<()> {
        writeln!(self.out, "{}", wrap(text, "; ", indent))
    }
}

impl Sink for Human<'_> {
    fn start(&mut self, i: &TestInfo) -> io::Result<()> {
        self.flows = i.flows.is_some();
        self.busy_poll_asked = i.busy_poll;
        if i.rules().shape == Shape::Stream {
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
