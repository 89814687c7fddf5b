//! The uring engine against real loopback sockets: skipped, with the
//! reason printed, where io_uring cannot run.

use super::{caps, Uring};
use crate::engines::{take_use, Engine, KernelUdp, TcpRx, TcpTx, TxBatch, UdpRx, UdpTx, Wait};

fn available() -> bool {
    match caps() {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

#[test]
fn udp_batches_arrive_in_order_with_their_metadata() {
    if !available() {
        return;
    }
    let (tx, rx) = crate::test_pair::kernel_udp_pair();
    crate::socket::set_int(&rx, libc::SOL_SOCKET, crate::cmsg::SO_TIMESTAMPNS, 1)
        .expect("timestamps");
    // With SQPOLL the kernel thread takes requests as they are queued: a
    // batch must still go out in order (its chain queued at once).
    for e in [Uring::default(), Uring { sqpoll: true }] {
        batch_in_order(e, &tx, &rx);
    }
}

fn batch_in_order(e: Uring, tx: &KernelUdp, rx: &KernelUdp) {
    const N: usize = 100;
    let mut t = e.udp_tx(tx, 100).expect("tx");
    let mut r = e.udp_rx(rx, 100).expect("rx");
    let mut slots = r.slots();
    let mut buf = vec![0u8; 100 * N];
    for (i, d) in buf.chunks_mut(100).enumerate() {
        d.fill(i as u8);
    }
    let mut sent = 0;
    while sent < N {
        sent += t
            .send_batch(tx, TxBatch::new(&buf[sent * 100..], 100), Wait::Block)
            .expect("sent");
    }
    let mut got = Vec::new();
    while got.len() < N {
        let n = r.recv_batch(rx, &mut slots, Wait::Block).expect("received");
        for i in 0..n {
            let m = slots.get(i).1;
            assert!(!m.truncated);
            assert!(m.stamp_ns.is_some(), "kernel timestamp in the control data");
            // With GSO and GRO (where the kernel has them) a slot holds a
            // run of datagrams.
            for d in slots.datagrams(i) {
                assert_eq!(d.len(), 100);
                got.push(d[0]);
            }
        }
    }
    assert_eq!(got, (0..N as u8).collect::<Vec<u8>>(), "{e:?}");
    // Nothing more queued: a non-blocking call says so.
    let e = r
        .recv_batch(rx, &mut slots, Wait::DontWait)
        .expect_err("empty");
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    drop((t, r));
    let used = take_use().expect("recorded");
    assert_eq!(used.engine, "uring");
    assert!(used.multishot_recv, "{used:?}");
    if let Some(z) = used.zerocopy {
        // One send per request: a datagram, or a GSO run; 100-byte
        // datagrams are under ZC_MIN_LEN, so only a GSO run (where the
        // kernel has it) can go zero-copy.
        assert!(z.sends + z.under_threshold >= 1, "{z:?}");
        assert!(z.sends + z.under_threshold <= N as u64, "{z:?}");
        assert_eq!(
            z.completed, z.sends,
            "every notification arrived before drop"
        );
        assert!(z.copied <= z.completed);
    }
}

/// GSO sends and GRO receives through the rings: a run with a short last
/// datagram arrives as separate datagrams, in order, every one counted,
/// and each side's report says what it used.
#[test]
fn issue_8_uring_gso_and_gro_move_every_datagram_in_order() {
    if !available() {
        return;
    }
    if let Err(e) = crate::caps::caps()
        .udp_segment
        .as_ref()
        .and(crate::caps::caps().udp_gro.as_ref())
    {
        return eprintln!("skipped: no UDP GSO/GRO: {e}");
    }
    let (tx, rx) = crate::test_pair::kernel_udp_pair();
    const LEN: usize = 200;
    // 3 full batches and a run that ends in a 50-byte datagram.
    const N: usize = 3 * 4 * 128 + 10;
    let mut buf = vec![0u8; LEN * (N - 1) + 50];
    for (i, d) in buf.chunks_mut(LEN).enumerate() {
        d[..4].copy_from_slice(&(i as u32).to_le_bytes());
    }
    let e = Uring::default();
    // The receiver is ready (GRO on) before the first send, and reads
    // while the sender sends (its first blocking call arms the multishot
    // receive), so the socket's default buffer is enough.
    let mut r = e.udp_rx(&rx, LEN).expect("rx");
    let mut slots = r.slots();
    assert!(
        r.recv_batch(&rx, &mut slots, Wait::DontWait).is_err(),
        "nothing yet"
    );
    // The sender waits for the reader to catch up before each batch: on a
    // busy host the reader can be off its CPU for longer than the
    // socket's default buffer lasts, and the kernel would drop a whole
    // run (this test checks order and counts, not a starved receiver).
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let read = std::sync::Arc::clone(&progress);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut waits = 0;
        while got.len() < N && waits < 20 {
            let n = match r.recv_batch(&rx, &mut slots, Wait::Block) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    waits += 1;
                    continue;
                }
                Err(e) => panic!("receive: {e}"),
            };
            for i in 0..n {
                for d in slots.datagrams(i) {
                    let seq = u32::from_le_bytes(d[..4].try_into().expect("4 bytes"));
                    let want = if seq as usize == N - 1 { 50 } else { LEN };
                    assert_eq!(d.len(), want, "datagram {seq}");
                    got.push(seq);
                }
            }
            read.store(got.len(), std::sync::atomic::Ordering::Release);
        }
        let rb = r.batching().expect("rx batching");
        drop(r);
        (got, rb)
    });
    let mut t = e.udp_tx(&tx, LEN).expect("tx");
    let tb = t.batching().expect("tx batching");
    assert!(tb.gso_segments.is_some(), "{tb:?}");
    assert_eq!(t.max_batch(), 4 * 128);
    let mut sent = 0;
    while sent < N {
        sent += t
            .send_batch(&tx, TxBatch::new(&buf[sent * LEN..], LEN), Wait::Block)
            .expect("sent");
        // Bounded: a lost datagram must not hang the test (the order check
        // below then says which).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while progress.load(std::sync::atomic::Ordering::Acquire) < sent
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    assert_eq!(sent, N);
    let (got, rb) = reader.join().expect("reader");
    assert_eq!(got, (0..N as u32).collect::<Vec<_>>());
    assert!(rb.gro, "{rb:?}");
    assert!(
        rb.gro_super_buffers > 0,
        "loopback keeps GSO runs whole: {rb:?}"
    );
    // After the first sends: 64 where the kernel refused 128.
    let segs = t
        .batching()
        .and_then(|b| b.gso_segments)
        .map_or(1, u64::from);
    drop(t);
    let used = take_use().expect("recorded");
    assert!(
        !used.registered_buffers,
        "GSO sends take no registered buffer"
    );
    if let Some(z) = used.zerocopy {
        assert_eq!(z.completed, z.sends);
        // One send per full GSO run (128 datagrams, 64 on older kernels);
        // the short last run (10 datagrams, 1,850 bytes) is under
        // ZC_MIN_LEN and copies.
        let runs = (N as u64).div_ceil(64);
        assert!(
            z.sends * segs >= N as u64 / segs * segs && z.sends <= runs + 3,
            "{z:?}"
        );
        assert_eq!(z.under_threshold, 1, "{z:?}");
    }
}

/// Zero copy only where it pays: a TCP write under `ZC_MIN_LEN` goes out
/// as a plain `SEND` (a 64-byte busy-polled round trip took twice as long
/// with `SEND_ZC`), a large one as `SEND_ZC`, and the report counts both.
#[test]
fn issue_8_uring_small_tcp_writes_copy_and_large_ones_go_zero_copy() {
    if !available() {
        return;
    }
    if !caps().is_ok_and(|c| c.send_zc) {
        return eprintln!("skipped: no IORING_OP_SEND_ZC");
    }
    let (a, b) = crate::test_pair::tcp_pair();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        while let Ok(n @ 1..) = std::io::Read::read(&mut &b, &mut buf) {
            total += n;
        }
        total
    });
    let mut w = Uring::default().tcp_tx(&a).expect("tx");
    let buf = vec![5u8; 64 * 1024];
    let mut moved = 0;
    for len in [64, 64, 64, super::ring::ZC_MIN_LEN, 64 * 1024] {
        let mut off = 0;
        while off < len {
            match w.write(&a, &buf[off..len], Wait::Block) {
                Ok(n) => off += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        moved += len;
    }
    w.finish(&a).expect("notifications");
    a.shutdown(std::net::Shutdown::Write).expect("shutdown");
    drop(w);
    let used = take_use().expect("tx use");
    assert_eq!(reader.join().expect("reader"), moved);
    let z = used.zerocopy.expect("zero-copy sends reported");
    // One each for the two large writes (a partial send adds more).
    assert!((2..=4).contains(&z.sends), "{z:?}");
    assert_eq!(z.completed, z.sends);
    // The three 64-byte writes (and the rest of a large write cut short
    // under 10 KiB, on a crowded host).
    assert!((3..=5).contains(&z.under_threshold), "{z:?}");
}

/// A busy-polled UDP receiver (non-blocking calls only) arms no multishot
/// receive, whose task work would interrupt the spinning thread for every
/// datagram: each call is one `RECVMSG`, and every datagram still arrives,
/// in order.
#[test]
fn issue_8_uring_busy_polled_udp_receive_arms_no_multishot() {
    if !available() {
        return;
    }
    if let Err(why) = &caps().expect("available").multishot {
        return eprintln!("skipped: {why}");
    }
    let (tx, rx) = crate::test_pair::kernel_udp_pair();
    let mut r = Uring::default().udp_rx(&rx, 64).expect("rx");
    let mut slots = r.slots();
    const N: u8 = 50;
    for i in 0..N {
        tx.socket().send(&[i; 64]).expect("send");
    }
    let mut got = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while got.len() < N as usize && std::time::Instant::now() < until {
        match r.recv_batch(&rx, &mut slots, Wait::DontWait) {
            Ok(n) => {
                for i in 0..n {
                    got.extend(slots.datagrams(i).map(|d| d[0]));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) => panic!("receive: {e}"),
        }
    }
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    let rb = r.batching().expect("rx batching");
    drop(r);
    let used = take_use().expect("rx use");
    assert!(!used.multishot_recv, "{used:?}");
    assert_eq!(rb.messages_per_call, 1, "{rb:?}");
    assert!(
        used.notes.iter().any(|n| n.contains("one RECVMSG each")),
        "{used:?}"
    );
}

#[test]
fn a_longer_datagram_is_never_cut_silently() {
    if !available() {
        return;
    }
    let (tx, rx) = crate::test_pair::kernel_udp_pair();
    let mut r = Uring::default().udp_rx(&rx, 100).expect("rx");
    let mut slots = r.slots();
    tx.socket().send(&[1u8; 500]).expect("send");
    let n = r
        .recv_batch(&rx, &mut slots, Wait::Block)
        .expect("received");
    assert_eq!(n, 1);
    let m = slots.get(0).1;
    // With GRO a slot holds a whole super-buffer, so the datagram arrives
    // whole (the receive core sees its length); without, it is flagged.
    if r.batching().is_some_and(|b| b.gro) {
        assert_eq!((m.len, m.truncated), (500, false));
    } else {
        assert!(m.truncated, "{m:?}");
    }
    let _ = take_use();
}

#[test]
fn a_tcp_stream_moves_every_byte_and_all_notifications_arrive() {
    if !available() {
        return;
    }
    let (a, b) = crate::test_pair::tcp_pair();
    let reader = std::thread::spawn(move || {
        let mut r = Uring::default().tcp_rx(&b, false).expect("rx");
        let mut buf = vec![0u8; 65536];
        let mut total = 0usize;
        loop {
            match r.read(&b, &mut buf, Wait::Block) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        drop(r);
        (total, take_use().expect("rx use"))
    });
    let mut w = Uring::default().tcp_tx(&a).expect("tx");
    let buf = vec![3u8; 256 * 1024];
    let mut left = 8 << 20;
    let t0 = std::time::Instant::now();
    let mut blocked = 0;
    while left > 0 {
        match w.write(&a, &buf[..buf.len().min(left)], Wait::Block) {
            Ok(n) => left -= n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => blocked += 1,
            Err(e) => panic!("write: {e}"),
        }
    }
    eprintln!("8 MiB in {:?}, {blocked} waits timed out", t0.elapsed());
    w.finish(&a).expect("notifications");
    a.shutdown(std::net::Shutdown::Write).expect("shutdown");
    drop(w);
    let used = take_use().expect("tx use");
    let (total, rx_use) = reader.join().expect("reader");
    assert_eq!(total, 8 << 20);
    assert!(rx_use.registered_buffers);
    assert!(used.registered_buffers);
    if let Some(z) = used.zerocopy {
        assert!(z.sends > 0);
        assert_eq!(z.completed, z.sends);
    }
}
