//! The message test through the control protocol (`linerate msg HOST`,
//! kind `msg`): its [`Report`] from the client's sending figures and the
//! server's receiving totals, one [`MsgCell`] per size through the same
//! [`build_cell`] as the local test.

use linerate_proto::measure::SideResults;
use linerate_proto::spec::TestSpec;
use linerate_stats::histogram::Histogram;

use crate::model::{Report, TestInfo};
use crate::msg::{build_cell, CellInput, MsgCell, MsgCounts, TrialInput};

/// What the cells name as their transport.
pub const TRANSPORT: &str = "tcp";

/// The report of one msg test (one concurrency).
pub fn build_msg(
    info: TestInfo,
    spec: &TestSpec,
    client: &SideResults,
    server: &SideResults,
    notes: Vec<String>,
) -> Report {
    Report {
        msg: Some(cells(spec, client, server)),
        ..crate::build::per_message_report(info, client, server, notes)
    }
}

fn cells(spec: &TestSpec, client: &SideResults, server: &SideResults) -> Vec<MsgCell> {
    let (Some(m), Some(tx), Some(rx)) = (&spec.msg, &client.msg, &server.msg) else {
        return Vec::new();
    };
    m.sizes
        .iter()
        .zip(&tx.sent)
        .enumerate()
        .map(|(i, (&size, s))| {
            let r = rx.received.get(i).copied().unwrap_or_default();
            build_cell(&CellInput {
                transport: TRANSPORT.into(),
                concurrency: u32::from(spec.streams),
                size: u64::from(size),
                batch: s.batch,
                calibration_ns: s.calibration_ns,
                corrupt: m.verify.then_some(r.corrupt),
                trials: s
                    .trials
                    .iter()
                    .map(|t| TrialInput {
                        wall_ns: t.wall_ns,
                        messages: t.messages,
                        bytes: t.bytes,
                        hist: Histogram::from_buckets(&t.histogram),
                        sender_cpu_ns: t.sender_cpu_ns,
                    })
                    .collect(),
                sent: MsgCounts {
                    messages: s.messages,
                    bytes: s.bytes,
                },
                received: MsgCounts {
                    messages: r.messages,
                    bytes: r.bytes,
                },
                receiver_cpu_ns: r.cpu_ns,
            })
        })
        .collect()
}
