//! Request/response over a local [`Channel`]: `linerate rr --transport
//! unix|unix-dgram|shm` (the same transports as `msg`, a different
//! exchange).
//!
//! Per phase (a request size and a response size) each flow runs
//! transactions — a request out whole, the response in whole — in chunks:
//! the client announces a chunk's length in a word before it (0 ends the
//! phase), so the server needs no framing and the phase can be limited by
//! time; chunks are sized to last about [`CHUNK`], and the announcing word
//! lies outside every transaction's clock. Flows meet at a [`Gate`] before
//! each phase, so phases do not overlap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linerate_stats::histogram::Histogram;

use crate::msg::Gate;
use crate::wait::WaitStats;
use crate::{Channel, LocalError};

/// About how long a chunk of transactions lasts.
pub const CHUNK: Duration = Duration::from_millis(10);
const MAX_CHUNK: u64 = 4096;

/// What bounds a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Time(Duration),
    /// Transactions per flow.
    Count(u64),
}

/// What both ends of a local rr test run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// (request bytes, response bytes) per phase.
    pub phases: Vec<(usize, usize)>,
    pub limit: Limit,
    /// Transactions per clock pair.
    pub batch: u32,
}

impl Plan {
    /// The plan as one argument for the serving process (it needs only
    /// the phases: the client says when a phase ends).
    pub fn phases_arg(&self) -> String {
        let p: Vec<String> = self
            .phases
            .iter()
            .map(|(q, r)| format!("{q}:{r}"))
            .collect();
        p.join(",")
    }

    /// The phases from [`Self::phases_arg`].
    pub fn parse_phases(s: &str) -> Result<Vec<(usize, usize)>, String> {
        s.split(',')
            .map(|p| {
                let (q, r) = p.split_once(':').ok_or(format!("bad phase {p:?}"))?;
                Ok((
                    q.parse().map_err(|_| format!("bad size {q:?}"))?,
                    r.parse().map_err(|_| format!("bad size {r:?}"))?,
                ))
            })
            .collect()
    }
}

/// One flow's figures for one phase (client or server).
#[derive(Debug, Clone)]
pub struct FlowOut {
    pub transactions: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub elapsed_ns: u64,
    /// Client only: round trips (batch means when batch > 1).
    pub rtt: Histogram,
    /// How this end's receives waited during the phase, where the
    /// transport spins before sleeping (shared memory).
    pub waits: Option<WaitStats>,
}

/// What `ch`'s waits came to since `before`.
fn waits_since(ch: &dyn Channel, before: Option<WaitStats>) -> Option<WaitStats> {
    Some(ch.wait_stats()?.since(before?))
}

/// The serving end of one flow: every phase, until the client ends it.
pub fn serve(ch: &mut dyn Channel, phases: &[(usize, usize)]) -> Result<Vec<FlowOut>, LocalError> {
    let max = phases.iter().map(|p| p.1).max().unwrap_or(0);
    let resp = vec![0u8; max];
    let mut out = Vec::new();
    for &(q, r) in phases {
        let mut o = FlowOut {
            transactions: 0,
            bytes_sent: 0,
            bytes_received: 0,
            elapsed_ns: 0,
            rtt: Histogram::new(),
            waits: None,
        };
        let w0 = ch.wait_stats();
        let mut start = None;
        loop {
            let n = ch.recv_word()?;
            if n == 0 {
                break;
            }
            start.get_or_insert_with(Instant::now);
            for _ in 0..n {
                ch.recv(q)?;
                ch.send(&resp[..r])?;
            }
            o.transactions += n;
        }
        o.bytes_received = o.transactions * q as u64;
        o.bytes_sent = o.transactions * r as u64;
        o.elapsed_ns = start.map_or(0, |s| s.elapsed().as_nanos() as u64);
        o.waits = waits_since(&*ch, w0);
        out.push(o);
    }
    Ok(out)
}

/// The client end of one flow: every phase, meeting the other flows at
/// `gate` before each. A failure breaks the gate.
pub fn client(
    ch: &mut dyn Channel,
    plan: &Plan,
    gate: &Gate,
    abort: &AtomicBool,
    ended: &dyn Fn(usize, &FlowOut),
) -> Result<Vec<FlowOut>, LocalError> {
    let r = client_inner(ch, plan, gate, abort, ended);
    if r.is_err() {
        gate.break_all();
    }
    r
}

fn client_inner(
    ch: &mut dyn Channel,
    plan: &Plan,
    gate: &Gate,
    abort: &AtomicBool,
    ended: &dyn Fn(usize, &FlowOut),
) -> Result<Vec<FlowOut>, LocalError> {
    let max = plan.phases.iter().map(|p| p.0).max().unwrap_or(0);
    let req = vec![0u8; max];
    let batch = u64::from(plan.batch.max(1));
    let mut out = Vec::new();
    for &(q, r) in &plan.phases {
        gate.wait()
            .map_err(|_| LocalError::Protocol("another flow failed".into()))?;
        let mut rtt = Histogram::new();
        let mut done = 0u64;
        let mut chunk = 1u64;
        let w0 = ch.wait_stats();
        let start = Instant::now();
        loop {
            if abort.load(Ordering::Relaxed) {
                return Err(LocalError::Aborted);
            }
            let left = match plan.limit {
                Limit::Count(n) => n - done,
                Limit::Time(d) if start.elapsed() >= d => 0,
                Limit::Time(_) => MAX_CHUNK,
            };
            let n = chunk.min(left);
            ch.send_word(n)?;
            if n == 0 {
                break;
            }
            let t_chunk = Instant::now();
            let mut k = 0;
            while k < n {
                let b = batch.min(n - k);
                let t0 = Instant::now();
                for _ in 0..b {
                    ch.send(&req[..q])?;
                    ch.recv(r)?;
                }
                let ns = t0.elapsed().as_nanos() as u64;
                rtt.record_n((ns / b).max(1), b);
                k += b;
            }
            done += n;
            // The next chunk lasts about CHUNK at this chunk's pace.
            let per = (t_chunk.elapsed().as_nanos() as u64 / n).max(1);
            chunk = (CHUNK.as_nanos() as u64 / per).clamp(1, MAX_CHUNK);
        }
        let o = FlowOut {
            transactions: done,
            bytes_sent: done * q as u64,
            bytes_received: done * r as u64,
            elapsed_ns: start.elapsed().as_nanos() as u64,
            rtt,
            waits: waits_since(&*ch, w0),
        };
        ended(out.len(), &o);
        out.push(o);
    }
    Ok(out)
}

/// Runs every flow's client, one thread each, which first calls `pin` with
/// its flow's number (`--cpus`); `on_fail` ends the serving process when
/// one fails, so the others return. `on_phase` is called on
/// this thread with a phase's number and every flow's figures of it (in
/// flow order) as soon as the last flow ended it (`--json-lines` prints
/// them as they come). Per flow, per phase.
pub fn run_client(
    channels: Vec<Box<dyn Channel>>,
    plan: &Plan,
    pin: &(dyn Fn(usize) -> std::io::Result<()> + Sync),
    on_fail: &(dyn Fn() + Sync),
    abort: &AtomicBool,
    on_phase: &mut dyn FnMut(usize, Vec<FlowOut>),
) -> Result<Vec<Vec<FlowOut>>, LocalError> {
    let flows = channels.len();
    let gate = Gate::new(flows);
    let (tx, rx) = mpsc::channel::<(usize, usize, FlowOut)>();
    std::thread::scope(|s| {
        let hs: Vec<_> = channels
            .into_iter()
            .enumerate()
            .map(|(f, mut ch)| {
                let gate = &gate;
                let tx = tx.clone();
                s.spawn(move || {
                    // A send fails only once the receiving loop below has
                    // ended, which it does not before every flow returned.
                    let ended = |p: usize, o: &FlowOut| {
                        let _ = tx.send((p, f, o.clone()));
                    };
                    let r = pin(f)
                        .map_err(|source| LocalError::Io {
                            what: "pinning a flow thread (--cpus)",
                            source,
                        })
                        .and_then(|()| client(&mut *ch, plan, gate, abort, &ended));
                    if r.is_err() {
                        // client() broke the gate itself; a pinning
                        // failure must too, or the other flows wait on it.
                        gate.break_all();
                        on_fail();
                    }
                    r
                })
            })
            .collect();
        // Ends when every flow thread has returned (dropping its sender).
        drop(tx);
        let mut pending: Vec<Vec<Option<FlowOut>>> = Vec::new();
        for (p, f, o) in rx {
            if pending.len() <= p {
                pending.resize_with(p + 1, || vec![None; flows]);
            }
            pending[p][f] = Some(o);
            if pending[p].iter().all(Option::is_some) {
                on_phase(p, pending[p].iter_mut().filter_map(Option::take).collect());
            }
        }
        let mut outs = Vec::new();
        let mut first = None;
        for h in hs {
            match h.join() {
                Ok(Ok(o)) => outs.push(o),
                Ok(Err(LocalError::Aborted)) => first = Some(LocalError::Aborted),
                Ok(Err(e)) => {
                    if first.is_none() || !e.to_string().contains("another flow") {
                        first = Some(e);
                    }
                }
                Err(_) => first = Some(LocalError::Protocol("a flow thread panicked".into())),
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(outs),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_round_trip() {
        let p = Plan {
            phases: vec![(1, 1), (64, 1024)],
            limit: Limit::Count(3),
            batch: 1,
        };
        assert_eq!(Plan::parse_phases(&p.phases_arg()), Ok(p.phases));
        assert!(Plan::parse_phases("1:x").is_err());
    }
}
