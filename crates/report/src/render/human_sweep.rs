//! The human sweep table: a header, a row per trial as it finishes,
//! then each size's zero-loss result.

use std::io::{self, Write};

use linerate_stats::units::{format_count_rate, format_rate};

use super::format::SweepSink;
use super::heading::direction_words;
use super::text::{wrap, WIDTH};
use crate::model::{SweepInfo, SweepReport, SweepTrial};

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
