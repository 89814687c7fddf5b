//! Raw AF_XDP packets per second on a veth pair between two namespaces it
//! creates (198.18.0.0/15, deleted at exit): an AF_XDP sender in one, an
//! AF_XDP receiver behind the XDP program in the other, 64 B and 1472 B
//! UDP payloads, native and generic XDP on the receiver, copy mode (veth
//! has no zero-copy). Each run is bounded in time. Needs root.
//!
//!     cargo run --release -p linerate-xdp --example veth_pps [-- SECONDS [MODE [LEN]]]
//!
//! MODE `native` or `generic` and LEN (payload bytes) run that one case
//! (`bench/xdp_veth.sh`'s `REF=`); by default every mode and 64 and 1472.
//! Prints one line per run: what was sent and received per second, and
//! what was lost (a veth drops when the receiver's rings are full; the
//! socket's XDP_STATISTICS say where).

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{addr, in_ns, unavailable, Pair, ADDR_B};
use linerate_xdp::{
    path_to, AttachMode, CopyMode, Program, ProgramOptions, Queue, QueueOptions, UdpFlow, XdpError,
    XdpStats,
};

const PORT: u16 = 9301;

fn opts() -> QueueOptions {
    QueueOptions {
        copy: CopyMode::Copy,
        ..QueueOptions::default()
    }
}

/// Receives on `vb` until `stop`, then 200 ms more; returns the count and
/// the socket's statistics.
fn receive(
    mode: AttachMode,
    ready: mpsc::Sender<()>,
    stop: Arc<AtomicBool>,
) -> Result<(u64, XdpStats), XdpError> {
    let prog_opts = ProgramOptions {
        mode,
        replace: false,
    };
    let mut prog = Program::attach("vb", &prog_opts)?;
    let mut queue = Queue::open("vb", 0, &opts())?;
    prog.register(&queue)?;
    prog.allow(addr(ADDR_B, PORT))?;
    let _ = ready.send(());
    let mut got = 0u64;
    let mut stopped_at = None;
    loop {
        got += queue.recv(256, |_| {}) as u64;
        if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
            stopped_at = Some(Instant::now());
        }
        if stopped_at.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
            return Ok((got, queue.stats()?));
        }
    }
}

/// Sends `len`-byte payloads from `va` for `secs`; returns the count.
fn send(len: usize, secs: f64) -> Result<u64, XdpError> {
    let dst: SocketAddr = addr(ADDR_B, PORT);
    let path = path_to(dst.ip(), Duration::from_secs(3))?;
    let mut queue = Queue::open("va", 0, &opts())?;
    let flow = UdpFlow {
        src_mac: path.src_mac,
        dst_mac: path.dst_mac,
        src: SocketAddr::new(path.source, 40000),
        dst,
    };
    let payload = vec![0x5au8; len];
    let batch: Vec<&[u8]> = vec![&payload[..]; 64];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        sent += queue.send(&flow, &batch)? as u64;
    }
    let drain = Instant::now();
    while queue.in_flight() > 0 && drain.elapsed() < Duration::from_secs(1) {
        queue.complete();
    }
    Ok(sent)
}

fn run(pair: &Pair, mode: AttachMode, len: usize, secs: f64) -> Result<(), XdpError> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let b = pair.b.clone();
    let stop_rx = Arc::clone(&stop);
    let receiver = std::thread::spawn(move || in_ns(&b, move || receive(mode, ready_tx, stop_rx)));
    if ready_rx.recv_timeout(Duration::from_secs(5)).is_err() {
        return receiver.join().map_or(Ok(()), |r| r.map(drop));
    }
    let sent = in_ns(&pair.a, move || send(len, secs));
    stop.store(true, Ordering::Relaxed);
    let (got, stats) = receiver
        .join()
        .unwrap_or_else(|_| Err(XdpError::Options("receiver panicked".into())))?;
    let sent = sent?;
    println!(
        "{mode:>7} XDP, copy, {len:>4} B: sent {:>9.0} pps, received {:>9.0} pps, lost {} ({:.2} %); rx_dropped {} rx_ring_full {} fill_ring_empty {}",
        sent as f64 / secs,
        got as f64 / secs,
        sent.saturating_sub(got),
        100.0 * sent.saturating_sub(got) as f64 / sent.max(1) as f64,
        stats.rx_dropped,
        stats.rx_ring_full,
        stats.fill_ring_empty,
    );
    Ok(())
}

fn main() {
    if let Some(why) = unavailable() {
        eprintln!("veth_pps: {why}");
        std::process::exit(2);
    }
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| (0.1..=60.0).contains(s))
        .unwrap_or(2.0);
    let modes = match args.get(2).map(String::as_str) {
        Some("native") => vec![AttachMode::Native],
        Some("generic") => vec![AttachMode::Generic],
        _ => vec![AttachMode::Native, AttachMode::Generic],
    };
    let lens = match args.get(3).and_then(|s| s.parse::<usize>().ok()) {
        Some(len) if (1..=1472).contains(&len) => vec![len],
        _ => vec![64, 1472],
    };
    let pair = match Pair::new("pps") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("veth_pps: {e}");
            std::process::exit(2);
        }
    };
    for &mode in &modes {
        for &len in &lens {
            if let Err(e) = run(&pair, mode, len, secs) {
                eprintln!("veth_pps: {mode} {len} B: {e}");
            }
        }
    }
}
