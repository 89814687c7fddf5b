//! `linerate ping`: ICMP echo with the statistics of the latency tests
//! (HDR histogram: min, mean, stddev, percentiles), loss and duplicates.
//!
//! [`icmp`] is the sans-IO message codec, [`socket`] the socket (ICMP
//! datagram socket where allowed, raw socket as root); [`run`] paces the
//! requests on an absolute schedule and matches replies by sequence number.

pub mod icmp;
pub mod socket;

use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linerate_stats::histogram::{Histogram, Summary};
use serde::{Deserialize, Serialize};

pub use socket::Method;

/// What to ping, how often, how long to wait.
#[derive(Debug, Clone)]
pub struct PingParams {
    pub dest: IpAddr,
    /// Requests to send (`None`: until stopped).
    pub count: Option<u64>,
    pub interval: Duration,
    /// Payload bytes after the 8-byte ICMP header (ping's `-s`).
    pub size: usize,
    /// How long to wait for replies after the last request.
    pub wait: Duration,
    /// Use a raw socket even where an ICMP datagram socket is allowed.
    pub force_raw: bool,
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyRecord {
    /// The request's number, from 0 (the ICMP field is its low 16 bits).
    pub seq: u64,
    /// ICMP bytes received (header + payload).
    pub bytes: usize,
    /// TTL (IPv4) or hop limit (IPv6) of the reply, where the kernel gave it.
    pub ttl: Option<u8>,
    pub rtt_ns: u64,
    pub from: IpAddr,
    /// A second (or later) reply to the same request: not in the statistics.
    pub duplicate: bool,
    /// The payload did not come back as sent.
    pub corrupt: bool,
}

/// The result of a ping run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingReport {
    pub host: String,
    pub address: IpAddr,
    pub method: Method,
    /// Payload bytes per request (ICMP header excluded).
    pub size: usize,
    pub sent: u64,
    /// Requests answered at least once.
    pub received: u64,
    pub duplicates: u64,
    pub corrupt: u64,
    /// Requests the kernel refused to send (e.g. host unreachable).
    pub send_errors: u64,
    pub loss_percent: f64,
    /// From the first request to the end of the wait for replies.
    pub seconds: f64,
    /// Round-trip times of the first reply to each request (absent when
    /// none came back).
    pub rtt: Option<Summary>,
    pub replies: Vec<ReplyRecord>,
    /// The first send error, if any.
    pub send_error: Option<String>,
}

/// Failure to ping at all.
#[derive(Debug, thiserror::Error)]
pub enum PingError {
    #[error(transparent)]
    Open(#[from] socket::OpenError),
    #[error("receiving: {0}")]
    Recv(std::io::Error),
}

/// The request number whose low 16 bits are `seq16`: the latest sent.
fn request_of(seq16: u16, sent: u64) -> Option<u64> {
    let last = sent.checked_sub(1)?;
    let back = (last as u16).wrapping_sub(seq16);
    last.checked_sub(u64::from(back))
}

/// Pings until `count` requests were sent (or `stop` is set) and the wait
/// for their replies is over; `on_reply` sees each reply as it comes.
pub fn run(
    host: &str,
    p: &PingParams,
    stop: &AtomicBool,
    on_reply: &mut dyn FnMut(&ReplyRecord),
) -> Result<PingReport, PingError> {
    let sock = socket::IcmpSocket::open(p.dest, p.force_raw)?;
    let v6 = p.dest.is_ipv6();
    let id = (std::process::id() & 0xffff) as u16;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 65_536];
    let mut sent_at: Vec<Instant> = Vec::new();
    let mut answered: Vec<bool> = Vec::new();
    let mut hist = Histogram::new();
    let mut report = PingReport {
        host: host.to_owned(),
        address: p.dest,
        method: sock.method,
        size: p.size,
        sent: 0,
        received: 0,
        duplicates: 0,
        corrupt: 0,
        send_errors: 0,
        loss_percent: 0.0,
        seconds: 0.0,
        rtt: None,
        replies: Vec::new(),
        send_error: None,
    };
    let start = Instant::now();
    let mut next_send = start;
    let mut last_send = start;
    loop {
        let stopped = stop.load(Ordering::Relaxed);
        let more = !stopped && !matches!(p.count, Some(c) if report.sent >= c);
        let now = Instant::now();
        if more && now >= next_send {
            let msg = icmp::request(v6, id, report.sent as u16, p.size);
            let t = Instant::now();
            if let Err(e) = sock.send(p.dest, &msg) {
                report.send_errors += 1;
                report.send_error.get_or_insert_with(|| e.to_string());
            }
            sent_at.push(t);
            answered.push(false);
            report.sent += 1;
            last_send = t;
            // An absolute schedule, as `ping -i`; one that fell behind
            // (a stalled process) restarts from now instead of bursting.
            next_send += p.interval;
            if next_send < t {
                next_send = t + p.interval;
            }
            continue;
        }
        let all_answered = report.received == report.sent;
        let deadline = if more { next_send } else { last_send + p.wait };
        if !more && (all_answered || now >= deadline || stopped) {
            break;
        }
        let got = sock
            .recv(id, deadline.saturating_duration_since(now), &mut buf)
            .map_err(PingError::Recv)?;
        let Some(r) = got else { continue };
        let at = Instant::now();
        let Some(k) = request_of(r.reply.seq, report.sent) else {
            continue;
        };
        let k_idx = k as usize;
        let rtt_ns = at.duration_since(sent_at[k_idx]).as_nanos() as u64;
        let duplicate = answered[k_idx];
        let rec = ReplyRecord {
            seq: k,
            bytes: r.reply.len,
            ttl: r.ttl,
            rtt_ns,
            from: r.from,
            duplicate,
            corrupt: !r.reply.intact,
        };
        if duplicate {
            report.duplicates += 1;
        } else {
            answered[k_idx] = true;
            report.received += 1;
            hist.record(rtt_ns);
        }
        if rec.corrupt {
            report.corrupt += 1;
        }
        on_reply(&rec);
        report.replies.push(rec);
    }
    report.seconds = start.elapsed().as_secs_f64();
    report.loss_percent = if report.sent == 0 {
        0.0
    } else {
        (report.sent - report.received) as f64 / report.sent as f64 * 100.0
    };
    report.rtt = (!hist.is_empty()).then(|| hist.summary());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_map_back_across_the_16_bit_wrap() {
        assert_eq!(request_of(0, 0), None);
        assert_eq!(request_of(0, 1), Some(0));
        assert_eq!(request_of(3, 10), Some(3));
        assert_eq!(request_of(9, 10), Some(9));
        // Request 65536 carries 0; 65535 carries 0xffff.
        assert_eq!(request_of(0, 65_537), Some(65_536));
        assert_eq!(request_of(0xffff, 65_537), Some(65_535));
        // A number not yet sent maps to 65536 back, or to nothing.
        assert_eq!(request_of(10, 10), None);
    }
}
