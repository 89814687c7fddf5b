//! What the client checks a completed test's two sides agree on, per type
//! of test (else the figures are wrong).

use crate::error::{fail, Result, RunError};
use linerate_proto::spec::{Limit, TestSpec};
use linerate_report::model::Endpoint;
use linerate_report::Report;

/// msg: both sides ran the whole plan and the receiver got every message
/// the sender sent, whole (`--verify`'s corrupt ones are counted, not an
/// error).
pub(super) fn msg(spec: &TestSpec, report: &Report) -> Result<()> {
    if report.interrupted {
        // Stopped by its user: incomplete by design (the caller says so).
        return Ok(());
    }
    let cells = report.msg.as_deref().unwrap_or_default();
    let sizes = spec.msg.as_ref().map_or(0, |m| m.sizes.len());
    if cells.len() != sizes {
        fail!(
            Check,
            "the message test did not complete ({} of {sizes} sizes)",
            cells.len()
        );
    }
    for c in cells {
        if c.sent != c.received {
            fail!(
                Check,
                "{}-byte messages: the sender sent {} ({} bytes), the receiver received {} ({} \
                 bytes)",
                c.size,
                c.sent.messages,
                c.sent.bytes,
                c.received.messages,
                c.received.bytes
            );
        }
    }
    Ok(())
}

/// A completed TCP test must have moved every byte it wrote: anything else
/// is a bug or a broken path, and the numbers would be wrong.
pub(super) fn tcp_totals(spec: &TestSpec, report: &Report) -> Result<()> {
    // Every byte written was read: the whole streams, warm-up included
    // (each side ends its warm-up on its own clock, so the measured parts
    // differ by what was in flight then).
    let whole = |e: &Endpoint| e.bytes + e.omitted_bytes;
    for s in &report.streams {
        if whole(&s.sender) != whole(&s.receiver) {
            return Err(RunError::Check(format!(
                "stream {}: sender wrote {} bytes but receiver read {}",
                s.id,
                whole(&s.sender),
                whole(&s.receiver)
            )));
        }
    }
    if let Limit::Bytes(total) = spec.limit {
        for f in &report.sums {
            let arrived: u64 = report
                .streams
                .iter()
                .filter(|s| s.flow == f.flow)
                .map(|s| whole(&s.receiver))
                .sum();
            if arrived != total {
                return Err(RunError::Check(format!(
                    "{}: {arrived} bytes arrived, {total} requested",
                    f.flow.arrow(),
                )));
            }
        }
    }
    Ok(())
}

/// A completed request/response test: no flow failed, and both sides
/// counted the same transactions and bytes in every phase (over UDP, up to
/// the datagrams counted lost).
pub(super) fn rr(report: &Report, udp: bool) -> Result<()> {
    let Some(rr) = &report.rr else {
        return Ok(());
    };
    for p in &rr.phases {
        let what = format!(
            "{}-byte requests{}",
            p.request_size,
            if p.loaded { " under load" } else { "" }
        );
        if let Some(e) = p.errors.first() {
            return Err(RunError::Check(format!("{what}: {e}")));
        }
        // UDP may lose datagrams (counted in `lost`): the server then
        // answered at least what the client completed, never fewer.
        let counts_agree = if udp {
            p.server_transactions >= p.transactions
                && p.server_transactions <= p.transactions + p.lost
        } else {
            p.transactions == p.server_transactions
        };
        if !counts_agree {
            return Err(RunError::Check(format!(
                "{what}: the client completed {} transactions ({} lost) but the server answered {}",
                p.transactions, p.lost, p.server_transactions
            )));
        }
        if !udp
            && (p.client_sent_bytes != p.server_received_bytes
                || p.server_sent_bytes != p.client_received_bytes)
        {
            return Err(RunError::Check(format!(
                "{what}: byte counts differ (requests {} sent, {} received; responses {} sent, {} received)",
                p.client_sent_bytes,
                p.server_received_bytes,
                p.server_sent_bytes,
                p.client_received_bytes
            )));
        }
    }
    Ok(())
}
