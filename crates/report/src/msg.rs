//! The message test's result model (`linerate msg`, its JSON schema) and
//! its builder (its renderers are in `render::msg`).
//!
//! One [`MsgCell`] per transport × concurrency × message size: messages/s
//! and throughput per trial summarised across trials (mean, sd, 95% CI),
//! the per-message time distribution over every timed message, and the
//! counts each end saw. Every figure is a measurement of the run; a cell
//! that cannot run on this host says why instead (`skipped`).

use linerate_stats::histogram::{Histogram, Summary};
use linerate_stats::trials::TrialStats;
use serde::{Deserialize, Serialize};

/// A whole `linerate msg` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MsgReport {
    /// Always `"msg"`.
    pub test: String,
    pub software: String,
    /// Where the two ends ran and how they were started.
    pub ends: String,
    /// Shared memory: how a waiting end waited (spin budget and mode,
    /// then a futex sleep); absent when no shm transport ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    pub timer: MsgTimer,
    pub verify: MsgVerify,
    pub cells: Vec<MsgCell>,
}

/// The clock behind every time in the report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MsgTimer {
    /// Smallest non-zero step between two consecutive clock readings,
    /// measured at the start of the run.
    pub granularity_ns: u64,
    /// A timed span must be at least this many granularities; messages
    /// shorter than that are timed in batches.
    pub batch_factor: u64,
}

/// The integrity check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgVerify {
    pub enabled: bool,
    /// The receiver checks each message after acknowledging it and the
    /// sender reads the verdict after its clock stopped (always true).
    pub outside_timing: bool,
}

/// Messages and bytes one end counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MsgCounts {
    pub messages: u64,
    pub bytes: u64,
}

/// A trial shorter than this is timed mostly by its start and end (the
/// sending threads meeting the coordinator, a thread wake-up each: tens of
/// µs on a busy host) rather than by its messages: its rate is noise
/// (issue 28: 100 messages of 56 B over shm, 37.67 M ± 61.41 M/s).
pub const MIN_TRIAL_NS: u64 = 10_000_000;

/// One transport × concurrency × size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MsgCell {
    pub transport: String,
    /// Concurrent transfers (channels, one sending thread each).
    pub concurrency: u32,
    /// Bytes per message.
    pub size: u64,
    /// Why this cell did not run (then no figures follow).
    pub skipped: Option<String>,
    pub trials: u32,
    /// Timed messages per trial, all channels together.
    pub messages_per_trial: u64,
    /// Messages per clock pair (1: each message timed by itself).
    pub batch: u64,
    /// Median time of the calibration messages that chose the batch (ns).
    pub calibration_ns: u64,
    /// The shortest trial's wall time (ns); below [`MIN_TRIAL_NS`] the
    /// report warns that the trials were too short to time.
    #[serde(default)]
    pub shortest_trial_ns: u64,
    /// Across trials: messages per second, all channels together.
    pub messages_per_sec: Option<TrialStats>,
    /// Across trials: payload bits per second, all channels together.
    pub throughput_bps: Option<TrialStats>,
    /// Across trials: each trial's mean per-message time (ns).
    pub message_time_ns: Option<TrialStats>,
    /// Every timed message of every trial: time from the first byte sent
    /// to the acknowledgement (batch means where `batch` > 1).
    pub latency: Option<Summary>,
    /// Messages the receiver found corrupt, of every message it received
    /// (`None` without --verify).
    pub corrupt: Option<u64>,
    /// Everything the sender sent (calibration and warm-up included).
    pub sent: MsgCounts,
    /// Everything the receiver received whole.
    pub received: MsgCounts,
    /// CPU cost (absent for a skipped cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<MsgCpu>,
}

/// One trial of a cell, all channels together.
#[derive(Debug, Clone)]
pub struct TrialInput {
    pub wall_ns: u64,
    pub messages: u64,
    pub bytes: u64,
    pub hist: Histogram,
    /// CPU time of the sending threads during the trial, ns.
    pub sender_cpu_ns: u64,
}

/// What a cell is built from.
#[derive(Debug, Clone)]
pub struct CellInput {
    pub transport: String,
    pub concurrency: u32,
    pub size: u64,
    pub batch: u64,
    pub calibration_ns: u64,
    /// Corrupt messages the receiver counted (`None` without --verify).
    pub corrupt: Option<u64>,
    pub trials: Vec<TrialInput>,
    pub sent: MsgCounts,
    pub received: MsgCounts,
    /// CPU time of the receiving threads for every message of the cell, ns.
    pub receiver_cpu_ns: u64,
}

/// CPU cost of a cell, from each thread's own CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MsgCpu {
    /// Sending threads' CPU time ÷ the trials' wall time, summed over
    /// trials (100 = one CPU busy).
    pub sender_percent: f64,
    /// Sending threads' CPU time per timed message, ns.
    pub sender_ns_per_message: f64,
    /// Receiving threads' CPU time per message received (calibration and
    /// warm-up included), ns.
    pub receiver_ns_per_message: f64,
}

/// A cell that did not run, and why.
pub fn skipped_cell(transport: &str, concurrency: u32, size: u64, why: String) -> MsgCell {
    MsgCell {
        transport: transport.to_owned(),
        concurrency,
        size,
        skipped: Some(why),
        trials: 0,
        messages_per_trial: 0,
        batch: 0,
        calibration_ns: 0,
        shortest_trial_ns: 0,
        messages_per_sec: None,
        throughput_bps: None,
        message_time_ns: None,
        latency: None,
        corrupt: None,
        sent: MsgCounts::default(),
        received: MsgCounts::default(),
        cpu: None,
    }
}

/// The one place a cell's figures are computed.
pub fn build_cell(c: &CellInput) -> MsgCell {
    let secs = |t: &TrialInput| t.wall_ns.max(1) as f64 / 1e9;
    let rate: Vec<f64> = c
        .trials
        .iter()
        .map(|t| t.messages as f64 / secs(t))
        .collect();
    let bps: Vec<f64> = c
        .trials
        .iter()
        .map(|t| t.bytes as f64 * 8.0 / secs(t))
        .collect();
    let means: Vec<f64> = c.trials.iter().map(|t| t.hist.summary().mean_ns).collect();
    let mut all = Histogram::new();
    for t in &c.trials {
        all.merge(&t.hist);
    }
    MsgCell {
        transport: c.transport.clone(),
        concurrency: c.concurrency,
        size: c.size,
        skipped: None,
        trials: c.trials.len() as u32,
        messages_per_trial: c.trials.first().map_or(0, |t| t.messages),
        batch: c.batch,
        calibration_ns: c.calibration_ns,
        shortest_trial_ns: c.trials.iter().map(|t| t.wall_ns).min().unwrap_or(0),
        messages_per_sec: TrialStats::of(&rate),
        throughput_bps: TrialStats::of(&bps),
        message_time_ns: TrialStats::of(&means),
        latency: (!all.is_empty()).then(|| all.summary()),
        corrupt: c.corrupt,
        sent: c.sent,
        received: c.received,
        cpu: cpu(c),
    }
}

fn cpu(c: &CellInput) -> Option<MsgCpu> {
    let wall: u64 = c.trials.iter().map(|t| t.wall_ns).sum();
    let sent: u64 = c.trials.iter().map(|t| t.sender_cpu_ns).sum();
    let timed: u64 = c.trials.iter().map(|t| t.messages).sum();
    if wall == 0 || timed == 0 || c.received.messages == 0 {
        return None;
    }
    Some(MsgCpu {
        sender_percent: sent as f64 * 100.0 / wall as f64,
        sender_ns_per_message: sent as f64 / timed as f64,
        receiver_ns_per_message: c.receiver_cpu_ns as f64 / c.received.messages as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{export, Format};

    fn input(verify: bool) -> CellInput {
        let trial = |wall_ns| {
            let mut hist = Histogram::new();
            hist.record_n(1000, 100);
            TrialInput {
                wall_ns,
                messages: 100,
                bytes: 100 * 4096,
                hist,
                sender_cpu_ns: 50_000,
            }
        };
        CellInput {
            transport: "unix".into(),
            concurrency: 1,
            size: 4096,
            batch: 1,
            calibration_ns: 1000,
            corrupt: verify.then_some(1),
            trials: vec![trial(100_000), trial(200_000)],
            sent: MsgCounts {
                messages: 211,
                bytes: 211 * 4096,
            },
            received: MsgCounts {
                messages: 211,
                bytes: 211 * 4096,
            },
            receiver_cpu_ns: 211_000,
        }
    }

    #[test]
    fn a_cell_summarises_its_trials() {
        let c = build_cell(&input(true));
        let m = c.messages_per_sec.expect("rate");
        // 100 messages in 100 µs and in 200 µs: 1 M/s and 0.5 M/s.
        assert!((m.mean - 750_000.0).abs() < 1e-6, "{m:?}");
        assert!(m.ci95_low.is_some());
        let t = c.throughput_bps.expect("bps");
        assert!((t.mean - 750_000.0 * 4096.0 * 8.0).abs() < 1e-3);
        assert_eq!(c.corrupt, Some(1));
        assert_eq!(build_cell(&input(false)).corrupt, None);
        assert_eq!(c.latency.expect("latency").count, 200);
        let cpu = c.cpu.expect("cpu");
        // 100 µs of CPU over 300 µs of trials; 500 ns per timed message;
        // 1 µs per received message.
        assert!((cpu.sender_percent - 100.0 / 3.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.sender_ns_per_message - 500.0).abs() < 1e-9);
        assert!((cpu.receiver_ns_per_message - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn human_and_csv_name_every_cell() {
        let r = MsgReport {
            waiting: None,
            test: "msg".into(),
            software: "linerate test".into(),
            ends: "both ends on this host".into(),
            timer: MsgTimer {
                granularity_ns: 20,
                batch_factor: 50,
            },
            verify: MsgVerify {
                enabled: true,
                outside_timing: true,
            },
            cells: vec![
                build_cell(&input(true)),
                skipped_cell("shm-direct", 1, 4096, "exceeds the slot".into()),
            ],
        };
        let mut h = Vec::new();
        export(&r, Format::Human, &mut h).expect("human");
        let h = String::from_utf8(h).expect("utf8");
        assert!(h.contains("outside the timed section"), "{h}");
        assert!(
            h.contains("shm-direct     1     4KiB skipped: exceeds the slot"),
            "{h}"
        );
        assert!(h.lines().all(|l| l.chars().count() <= 100), "{h}");
        // Issue 28: trials of 100 and 200 µs are too short to time.
        assert!(
            h.contains(
                "unix ×1 4 KiB: WARNING: trials too short to time (100.0 µs < 10.00 ms): \
                 use --messages 10000 or more"
            ),
            "{h}"
        );
        let mut c = Vec::new();
        export(&r, Format::Csv, &mut c).expect("csv");
        let c = String::from_utf8(c).expect("utf8");
        let cols = c.lines().next().map(|l| l.split(',').count());
        assert!(c.lines().all(|l| Some(l.split(',').count()) == cols), "{c}");
        let mut j = Vec::new();
        export(&r, Format::Json, &mut j).expect("json");
        let back: MsgReport = serde_json::from_slice(&j).expect("parse");
        assert_eq!(back.cells.len(), 2);
    }
}
