//! `--repeat N`: the figures of N runs of one test, each summarised as
//! mean, standard deviation, min, max and 95% confidence interval
//! (`linerate_stats::trials`), per flow and per message size. The model
//! and its renderers (human table, JSON, JSON Lines, CSV) live here.

use std::io::{self, Write};

use linerate_stats::trials::TrialStats;
use linerate_stats::units::{format_count_rate, format_nanos, format_rate};
use serde::{Deserialize, Serialize};

use crate::model::{TestInfo, SCHEMA_VERSION};
use crate::render::Document;
use crate::Report;

/// One figure over the trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What the figure belongs to: a flow (`client→server`), a message size
    /// (`64 B`, `64 B under load`) or `cpu`.
    pub group: String,
    pub name: String,
    /// `bit/s`, `1/s`, `ns`, `%` or `count`.
    pub unit: String,
    /// One value per successful trial, in trial order.
    pub values: Vec<f64>,
    pub stats: TrialStats,
}

/// The result of `--repeat N`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatReport {
    pub schema: u32,
    /// The test as the first successful trial ran it.
    pub test: TestInfo,
    /// Trials asked for.
    pub repeat: u32,
    /// Trials that completed (their figures are summarised).
    pub completed: u32,
    /// `trial K: error` for each trial that failed.
    pub failed: Vec<String>,
    pub figures: Vec<Figure>,
}

/// One line of `--json-lines` output of a repeated test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RepeatRecord {
    /// A trial's full report as it finishes (`index` from 1).
    Trial {
        index: u32,
        report: Box<Report>,
    },
    /// A trial that failed.
    TrialFailed {
        index: u32,
        error: String,
    },
    Summary(Box<RepeatReport>),
}

/// The figures of one trial: (group, name, unit, value).
pub fn trial_figures(r: &Report) -> Vec<(String, &'static str, &'static str, f64)> {
    let mut out = Vec::new();
    for s in &r.sums {
        let g = s.flow.arrow().to_owned();
        out.push((
            g.clone(),
            "receiver bit/s",
            "bit/s",
            s.receiver_bits_per_second,
        ));
        out.push((g.clone(), "sender bit/s", "bit/s", s.sender_bits_per_second));
        if let Some(retr) = s.retransmits {
            out.push((g.clone(), "retransmits", "count", retr as f64));
        }
        if let Some(u) = &s.udp {
            out.push((g.clone(), "received datagrams/s", "1/s", u.received_pps));
            out.push((g.clone(), "loss", "%", u.loss_percent));
            out.push((g, "jitter", "ns", u.jitter_ns));
        }
    }
    if let Some(rr) = &r.rr {
        for p in &rr.phases {
            let mut g = if p.request_size == p.response_size {
                format!("{} B", p.request_size)
            } else {
                format!("{}/{} B", p.request_size, p.response_size)
            };
            if p.loaded {
                g.push_str(" under load");
            }
            out.push((
                g.clone(),
                "transactions/s",
                "1/s",
                p.transactions_per_second,
            ));
            out.push((g.clone(), "rtt mean", "ns", p.latency.mean_ns));
            out.push((g.clone(), "rtt p50", "ns", p.latency.p50_ns as f64));
            out.push((g, "rtt p99", "ns", p.latency.p99_ns as f64));
        }
    }
    out.push((
        "cpu".into(),
        "client % of a CPU",
        "%",
        r.cpu.client.percent_of_cpu,
    ));
    out.push((
        "cpu".into(),
        "server % of a CPU",
        "%",
        r.cpu.server.percent_of_cpu,
    ));
    out
}

/// Summarises the completed trials' reports.
pub fn build(repeat: u32, trials: &[Report], failed: Vec<String>) -> Option<RepeatReport> {
    let first = trials.first()?;
    let mut figures: Vec<(String, String, String, Vec<f64>)> = Vec::new();
    for t in trials {
        for (g, name, unit, v) in trial_figures(t) {
            match figures.iter_mut().find(|f| f.0 == g && f.1 == name) {
                Some(f) => f.3.push(v),
                None => figures.push((g, name.into(), unit.into(), vec![v])),
            }
        }
    }
    Some(RepeatReport {
        schema: SCHEMA_VERSION,
        test: first.test.clone(),
        repeat,
        completed: trials.len() as u32,
        failed,
        figures: figures
            .into_iter()
            .filter_map(|(group, name, unit, values)| {
                Some(Figure {
                    stats: TrialStats::of(&values)?,
                    group,
                    name,
                    unit,
                    values,
                })
            })
            .collect(),
    })
}

fn show(unit: &str, v: f64) -> String {
    match unit {
        "bit/s" => format_rate(v),
        "1/s" => format!("{}/s", format_count_rate(v)),
        "ns" => format_nanos(v),
        "%" => format!("{v:.3}%"),
        // Counts are whole: a mean or sd between them keeps one decimal.
        "count" if v.fract() == 0.0 => format!("{v:.0}"),
        _ => format!("{v:.1}"),
    }
}

/// `--repeat`'s table and CSV; its JSON is the summary itself, and its
/// JSON Lines record the summary record that follows the trials' records
/// (written as the trials finish).
impl Document for RepeatReport {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        human(out, self)
    }
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "group,figure,unit,n,mean,sd,min,max,ci95_low,ci95_high"
        )?;
        for f in &self.figures {
            let s = &f.stats;
            let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{}",
                f.group,
                f.name,
                f.unit,
                s.n,
                s.mean,
                s.sd,
                s.min,
                s.max,
                opt(s.ci95_low),
                opt(s.ci95_high)
            )?;
        }
        Ok(())
    }
    fn json_line(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, &RepeatRecord::Summary(Box::new(self.clone())))?;
        writeln!(out)
    }
}

/// The widest line of the human table (issue 13: within 100 columns).
const HUMAN_WIDTH: usize = 100;

/// `[low … high unit]`: the unit once when both ends carry the same one.
fn interval(unit: &str, l: f64, h: f64) -> String {
    let (lo, hi) = (show(unit, l), show(unit, h));
    match (lo.rsplit_once(' '), hi.rsplit_once(' ')) {
        (Some((lv, lu)), Some((_, hu))) if lu == hu => format!("[{lv} … {hi}]"),
        _ => format!("[{lo} … {hi}]"),
    }
}

fn human(out: &mut dyn Write, r: &RepeatReport) -> io::Result<()> {
    // Which test, to which host, with which sizes and rates (issue 28).
    writeln!(out, "{}", crate::render::test_heading(&r.test))?;
    writeln!(
        out,
        "{} of {} trials completed; mean ± sd, min … max,",
        r.completed, r.repeat
    )?;
    writeln!(out, "95% confidence interval of the mean (Student t):")?;
    writeln!(
        out,
        "  {:<22} {:>13} {:>13} {:>13} {:>13}  95% CI",
        "figure", "mean", "sd", "min", "max"
    )?;
    let mut group = None;
    for f in &r.figures {
        // A heading per flow or size, the figures under it.
        if group != Some(&f.group) {
            writeln!(out, "{}", f.group)?;
            group = Some(&f.group);
        }
        let s = &f.stats;
        let ci = match (s.ci95_low, s.ci95_high) {
            (Some(l), Some(h)) => interval(&f.unit, l, h),
            _ => "(one trial: none)".into(),
        };
        let row = format!(
            "  {:<22} {:>13} {:>13} {:>13} {:>13}",
            f.name,
            show(&f.unit, s.mean),
            show(&f.unit, s.sd),
            show(&f.unit, s.min),
            show(&f.unit, s.max),
        );
        if row.chars().count() + 2 + ci.chars().count() <= HUMAN_WIDTH {
            writeln!(out, "{row}  {ci}")?;
        } else {
            // Too wide beside the row: under it, where the figures start.
            writeln!(out, "{row}\n{:>25}95% CI {ci}", "")?;
        }
    }
    for e in &r.failed {
        writeln!(out, "failed: {e}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{export, Format};
    use linerate_proto::spec::{Pace, Protocol, TestSpec, UdpSpec};
    use linerate_proto::wire::Side;

    /// A `--repeat 3` of `udp -b 100M -l 1000` to `host:5201`.
    fn udp_repeat() -> RepeatReport {
        let spec = TestSpec {
            protocol: Protocol::Udp,
            len: 1000,
            udp: Some(UdpSpec {
                pace: Pace::Rate(100_000_000),
                ..UdpSpec::default()
            }),
            ..TestSpec::default()
        };
        let mut test = TestInfo::from_spec(&spec, Side::Client);
        test.server = "host:5201".into();
        let fig = |group: &str, name: &str, unit: &str, values: Vec<f64>| Figure {
            group: group.into(),
            name: name.into(),
            unit: unit.into(),
            stats: TrialStats::of(&values).expect("stats"),
            values,
        };
        RepeatReport {
            schema: SCHEMA_VERSION,
            test,
            repeat: 3,
            completed: 3,
            failed: Vec::new(),
            figures: vec![
                fig(
                    "client→server",
                    "receiver bit/s",
                    "bit/s",
                    vec![99e6, 100e6, 101e6],
                ),
                fig(
                    "client→server",
                    "retransmits",
                    "count",
                    vec![26992.0, 26990.0, 26994.0],
                ),
            ],
        }
    }

    #[test]
    fn issue_28_repeat_names_the_test_and_prints_counts_whole() {
        let mut out = Vec::new();
        export(&udp_repeat(), Format::Human, &mut out).expect("render");
        let text = String::from_utf8(out).expect("utf-8");
        let head = text.lines().take(2).collect::<Vec<_>>().join(" ");
        for needle in [
            "udp",
            "client→server",
            "host:5201",
            "1000 B datagrams",
            "100.00 Mbit/s",
        ] {
            assert!(
                head.contains(needle),
                "no {needle:?} in the heading:\n{text}"
            );
        }
        assert!(
            text.contains("26992 ") && !text.contains("26992.0"),
            "{text}"
        );
        // A mean between whole counts keeps its decimal.
        assert_eq!(show("count", 2.5), "2.5");
    }

    #[test]
    fn issue_28_repeat_plot_unit_follows_the_data() {
        let svg = crate::plot_extra::repeat_svg(&udp_repeat()).expect("svg");
        assert!(svg.contains("Mbit/s") && !svg.contains("Gbit/s"), "{svg}");
        // The caption says the datagram size and rate asked for.
        assert!(svg.contains("1000 B datagrams at 100.00 Mbit/s"), "{svg}");
    }
}
