//! `linerate msg HOST`: the message test's two sides as a test kind of the
//! control protocol (kind `msg`). The data connections are the test's TCP
//! streams, one per concurrent transfer; over them the client runs the same
//! sender and the server the same receiver as the local test
//! (`linerate_local::msg`: each message whole, acknowledged by the
//! receiver, the acknowledgement closing its timing; `--verify` checked
//! after the acknowledgement). Each side's figures travel in its
//! `SideResults.msg`; `report::msg_net` builds the cells.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Result, RunError};
use linerate_engine::cpu;
use linerate_engine::runner::{spawn_side, DataSocket, SideRun, StreamSetup};
use linerate_engine::stream::{Signals, StreamCounter};
use linerate_local::msg::{self as core, Plan, SendRun};
use linerate_local::sock::StreamChan;
use linerate_local::{Channel, LocalError};
use linerate_proto::measure::{
    CpuMeasurement, MsgMeasurement, MsgSizeReceived, MsgSizeSent, MsgTrial, Role, SideResults,
};
use linerate_proto::spec::TestSpec;

/// A side's message channels, in stream order.
type Channels = Vec<Box<dyn Channel>>;

/// How often a side's watcher looks at the test's signals.
const WATCH: Duration = Duration::from_millis(20);

/// The plan both ends walk, from the agreed spec.
pub fn plan(spec: &TestSpec) -> Result<Plan> {
    let m = spec
        .msg
        .as_ref()
        .ok_or_else(|| RunError::Spec("a msg test without its parameters".to_string()))?;
    Ok(Plan {
        sizes: m.sizes.iter().map(|&s| s as usize).collect(),
        messages: m.messages.clone(),
        trials: m.trials,
        verify: m.verify,
    })
}

/// The data connections as blocking channels (a message or its
/// acknowledgement may take longer than the stream loops' poll timeout;
/// the watcher ends a stalled or aborted side by shutting them down),
/// with duplicates for the watcher, and a live counter of what each moves
/// (`role`: this side's), for the server's idle watch.
fn channels(streams: Vec<StreamSetup>, role: Role) -> Result<(Channels, Vec<TcpStream>, Live)> {
    let mut chans: Channels = Vec::new();
    let mut dups = Vec::new();
    let mut live = Vec::new();
    let mut streams = streams;
    streams.sort_by_key(|s| s.id);
    for s in streams {
        let DataSocket::Tcp(sock) = s.sock else {
            return Err(RunError::Protocol(
                "a msg test's data connection is not a stream".to_string(),
            ));
        };
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(None)?;
        dups.push(sock.try_clone()?);
        let moved = Arc::<StreamCounter>::default();
        live.push((role, Arc::clone(&moved)));
        chans.push(Box::new(Counted {
            inner: StreamChan::new(sock, None)?,
            moved,
        }));
    }
    Ok((chans, dups, live))
}

/// Each stream's live counter, with this side's role on it.
type Live = Vec<(Role, Arc<StreamCounter>)>;

/// A channel that counts the bytes of each whole message and word it
/// moves (one relaxed add per message), so a stalled peer shows.
struct Counted<C> {
    inner: C,
    moved: Arc<StreamCounter>,
}

impl<C: Channel> Channel for Counted<C> {
    fn send(&mut self, msg: &[u8]) -> Result<(), LocalError> {
        self.inner.send(msg)?;
        self.moved.add(msg.len() as u64);
        Ok(())
    }

    fn recv(&mut self, len: usize) -> Result<(), LocalError> {
        self.inner.recv(len)?;
        self.moved.add(len as u64);
        Ok(())
    }

    fn last(&self, len: usize) -> &[u8] {
        self.inner.last(len)
    }

    fn send_word(&mut self, w: u64) -> Result<(), LocalError> {
        self.inner.send_word(w)?;
        self.moved.add(8);
        Ok(())
    }

    fn recv_word(&mut self) -> Result<u64, LocalError> {
        let w = self.inner.recv_word()?;
        self.moved.add(8);
        Ok(w)
    }

    fn wait_stats(&self) -> Option<linerate_local::wait::WaitStats> {
        self.inner.wait_stats()
    }
}

/// Runs `work` with a watcher that shuts the connections down when the
/// test is aborted or stopped (so blocked reads and writes return) and
/// raises `abort` for the sender's loops.
fn watched<T>(
    signals: &Signals,
    dups: &[TcpStream],
    abort: &AtomicBool,
    work: impl FnOnce() -> T,
) -> T {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if signals.aborted() || signals.stopping() {
                    abort.store(true, Ordering::Relaxed);
                    for d in dups {
                        let _ = d.shutdown(Shutdown::Both);
                    }
                    return;
                }
                std::thread::sleep(WATCH);
            }
        });
        let r = work();
        done.store(true, Ordering::Relaxed);
        r
    })
}

fn side_cpu(cpu0: cpu::CpuTime, wall0: Instant) -> CpuMeasurement {
    let used = cpu::process().saturating_sub(cpu0);
    CpuMeasurement {
        scope: "process".into(),
        user_ns: used.user.as_nanos() as u64,
        system_ns: used.system.as_nanos() as u64,
        wall_ns: wall0.elapsed().as_nanos() as u64,
        ..CpuMeasurement::default()
    }
}

/// The client: the sender over every connection.
pub fn start_client(spec: &TestSpec, streams: Vec<StreamSetup>) -> Result<SideRun> {
    let plan = plan(spec)?;
    let (chans, dups, live) = channels(streams, Role::Sender)?;
    let side = spawn_side("syscall", move |signals: &Arc<Signals>| {
        let cpu0 = cpu::process();
        let wall0 = Instant::now();
        let abort = AtomicBool::new(false);
        let run = watched(signals, &dups, &abort, || {
            // A failed channel ends the others through their sockets.
            let stop = || {
                for d in &dups {
                    let _ = d.shutdown(Shutdown::Both);
                }
            };
            core::run_sender(chans, &plan, &stop, &abort)
        });
        let msg = match run {
            Ok(r) => sent(&plan, &r),
            Err(e) => MsgMeasurement {
                error: Some(format!("sending: {e}")),
                ..MsgMeasurement::default()
            },
        };
        SideResults {
            engine: "syscall".into(),
            cpu: side_cpu(cpu0, wall0),
            msg: Some(msg),
            ..SideResults::default()
        }
    });
    Ok(side.with_progress(live))
}

/// The sender's figures per size, all connections together.
fn sent(plan: &Plan, run: &SendRun) -> MsgMeasurement {
    let conns = run.channels.len() as u64;
    let sent = plan
        .sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| MsgSizeSent {
            messages: plan.per_size(i) * conns,
            bytes: plan.per_size(i) * conns * size as u64,
            batch: run.batch[i].0,
            calibration_ns: run.batch[i].1,
            trials: (0..plan.trials as usize)
                .map(|k| {
                    let mut hist = linerate_stats::histogram::Histogram::new();
                    let mut t = MsgTrial {
                        wall_ns: run.wall_ns[i][k],
                        ..MsgTrial::default()
                    };
                    for ch in &run.channels {
                        let o = &ch[i][k];
                        hist.merge(&o.hist);
                        t.messages += o.messages;
                        t.bytes += o.bytes;
                        t.sender_cpu_ns += o.cpu_ns;
                    }
                    t.histogram = hist.to_buckets();
                    t
                })
                .collect(),
        })
        .collect();
    MsgMeasurement {
        sent,
        ..MsgMeasurement::default()
    }
}

/// The server: a receiver per connection, acknowledging each message.
pub fn start_server(spec: &TestSpec, streams: Vec<StreamSetup>) -> Result<SideRun> {
    let plan = plan(spec)?;
    let (chans, dups, live) = channels(streams, Role::Receiver)?;
    let side = spawn_side("syscall", move |signals: &Arc<Signals>| {
        let cpu0 = cpu::process();
        let wall0 = Instant::now();
        let abort = AtomicBool::new(false);
        let results: Vec<_> = watched(signals, &dups, &abort, || {
            std::thread::scope(|s| {
                let hs: Vec<_> = chans
                    .into_iter()
                    .map(|mut ch| {
                        let plan = &plan;
                        let dups = &dups;
                        s.spawn(move || {
                            let r = core::receive(&mut *ch, plan);
                            if r.is_err() {
                                // The sender waits on the others too.
                                for d in dups {
                                    let _ = d.shutdown(Shutdown::Both);
                                }
                            }
                            r
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join()).collect()
            })
        });
        let mut msg = MsgMeasurement {
            received: vec![MsgSizeReceived::default(); plan.sizes.len()],
            ..MsgMeasurement::default()
        };
        for r in results {
            match r {
                Ok(Ok(per)) => {
                    for (t, p) in msg.received.iter_mut().zip(per) {
                        t.messages += p.messages;
                        t.bytes += p.bytes;
                        t.corrupt += p.corrupt;
                        t.cpu_ns += p.cpu_ns;
                    }
                }
                Ok(Err(e)) => {
                    msg.error.get_or_insert(format!("receiving: {e}"));
                }
                Err(_) => {
                    msg.error
                        .get_or_insert("a receiving thread panicked".into());
                }
            }
        }
        SideResults {
            engine: "syscall".into(),
            cpu: side_cpu(cpu0, wall0),
            msg: Some(msg),
            ..SideResults::default()
        }
    });
    Ok(side.with_progress(live))
}
