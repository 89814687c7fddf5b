//! One loop thread's TCP stream flows: senders write their buffer until
//! stopped or their byte count is written, then shut down their write
//! side; receivers read to end of stream — the same ends as the
//! thread-per-stream loops ([`crate::tcp`]), over non-blocking sockets in
//! one edge-triggered epoll set. One send and one receive buffer per
//! thread, shared by its flows (the senders never look at what they
//! write, the receivers never at what they read). With `--engine uring`
//! the same flows run on a completion loop instead ([`ring`](super::ring): multishot
//! receives into the thread's provided buffers, queued sends), whose
//! senders' buffers are bounded when many flows need it ([`sndbuf`]).

mod epoll;
mod ring;
pub mod sndbuf;

pub use epoll::{engine_for, LoopParams, TcpFlow};

use crate::engines::{with_engine, TcpEndpoint};
use crate::stream::Signals;
use epoll::run_with;
use linerate_proto::measure::StreamMeasurement;

/// Runs `flows` to their ends on this thread; returns each flow's index
/// and measurement (bytes, calls, elapsed, TCP_INFO of senders, error).
pub fn run<S: TcpEndpoint>(
    params: &LoopParams,
    flows: Vec<TcpFlow<S>>,
    signals: &Signals,
) -> Vec<(usize, StreamMeasurement)> {
    if let Some(engine) = super::ring::uring(params.engine) {
        return ring::run(engine, params, flows, signals);
    }
    with_engine!(engine_for(params.engine), e => run_with(e, params, flows, signals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::EngineKind;
    use crate::stream::StreamCounter;
    use linerate_proto::measure::Role;
    use linerate_proto::wire::Side;
    use std::io::Read;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Issue 26: a sender shuts down with bytes still queued, which TCP
    /// sends (and resends, through losses) after the shutdown; its
    /// TCP_INFO, read then, missed those retransmits (1,000 flows counted
    /// 200 k of their namespace's 311 k). Here the receiver reads nothing
    /// for 300 ms, so the sender's last bytes and FIN wait for it: the
    /// flow's measurement comes back only once they are acknowledged, its
    /// time still its shutdown's.
    #[test]
    fn issue_26_a_senders_tcp_info_is_read_once_its_data_is_acknowledged() {
        let (tx, rx) = crate::test_pair::tcp_pair();
        // Room in the send buffer for every byte, none in the receiver's
        // window for them all: the writes end at once, the FIN waits.
        socket2::SockRef::from(&tx)
            .set_send_buffer_size(1 << 20)
            .expect("SO_SNDBUF");
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(16 << 10)
            .expect("SO_RCVBUF");
        let bytes: u64 = 192 << 10;
        const HOLD: Duration = Duration::from_millis(300);
        let reader = std::thread::spawn(move || {
            std::thread::sleep(HOLD);
            let mut rx = rx;
            let (mut got, mut buf) = (0u64, vec![0u8; 64 << 10]);
            loop {
                match rx.read(&mut buf).expect("read") {
                    0 => return got,
                    n => got += n as u64,
                }
            }
        });
        let start = Instant::now();
        let params = LoopParams {
            engine: EngineKind::Syscall,
            len: 16 << 10,
            skip_rx_copy: false,
            start,
            sndbuf_bound: None,
        };
        let flow = TcpFlow {
            index: 0,
            id: 1,
            role: Role::Sender,
            sender: Side::Client,
            limit: Some(bytes),
            sock: tx,
            counter: Arc::new(StreamCounter::default()),
        };
        let out = run(&params, vec![flow], &Signals::default());
        let returned = start.elapsed();
        assert_eq!(reader.join().expect("reader"), bytes);
        let m = &out[0].1;
        assert_eq!((m.bytes, m.error.as_deref()), (bytes, None));
        let tcp = m.tcp.expect("the sender's TCP_INFO");
        assert!(!tcp.unacked_at_read, "{tcp:?}");
        assert!(
            returned >= HOLD,
            "read after {returned:?}, before the receiver read"
        );
        assert!(
            Duration::from_nanos(m.elapsed_ns) < HOLD,
            "the flow's time is its shutdown's: {} ns",
            m.elapsed_ns
        );
    }
}
